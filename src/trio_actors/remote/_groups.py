r"""Names served by many actors across nodes: shared names, and refs to their groups.

``system.register(name, ref, shared=True)`` makes ``ref``'s actor one more
*member* of shared name ``name``. Each member is one subscription to the name's
subject ``P.shared.<hex>.*`` in one NATS **queue group** (``_subjects.py``), so
the server gives each message to one member -- its choice, not ours: no
balancing protocol of our own. ``await system.lookup(name)`` gives a ref to the
*group* (a :class:`GroupCell`): each ``tell``, ``ask`` or ``send`` through it is
one message on ``P.shared.<hex>.<this node>``.

**Every message's fate known.** The sender does not know which member will take
a message, so it sends it as a lookup is sent: a request numbered in
``_requests.py``, whose reply subject ``P.r.<sender>.<inc>.-.<n>`` has ``-`` where
the answering node's name goes. The member's node answers at once, before the
actor sees the message, with **taken** -- the member's ref -- on that subject
with its own name in place of ``-``; from then on the request is an ordinary
request to that node: its answer comes on the same subject (in order after
*taken*: one publisher, one subscriber), ``NodeDown`` when that node is declared
down, the confirm rounds (``_confirm.py``: the member's node holds an ask it owes,
and a tell it took until it ended there), this node's connection loss. Before
*taken*, it ends by NATS's no-responders (no member: ``ActorNotFound`` for an ask,
a dead letter ``"unreachable"`` for a tell), this node's connection loss or close,
or after ``heartbeat * heartbeats_missed`` seconds with no taker (as a lookup):
an ask then raises ``ConnectionInterrupted``, a tell comes back ``"in-doubt"``.

A **tell** is held here (with its message) until its taker says it *ended* there
-- handled, or a dead letter there -- and comes back as an ``"in-doubt"`` dead
letter with its message (counted in ``Node.unconfirmed``) if the taker dies or is
lost first: told = handled + dead letters on the members' nodes + in-doubt here,
exactly (T21). Tells to one name **coalesce** as tells to one node do (the outbox,
``_tells.py``): those that wait for the connection's writer leave as one message,
one request, which the server gives to one member (at most
:data:`TELLS_PER_MESSAGE` tells: a burst spreads message by message); its node
says *taken* once, and the ends of its tells by their indices in the message, as
they come -- at once, or, while its connection's writer is busy, together at the
writer's next turn (the outbox's rule again). A stream of tells costs a few
messages per message of tells, not three per tell. So a tell handled in a node's
last moment may come back in doubt: its end was not said yet.

At most :data:`TELLS_IN_FLIGHT` tells per node are in flight so; one more is refused
with ``MailboxFull`` (``tell`` never blocks, and holds no more than that), while
``send`` waits for room. An **ask** is cancellable: before *taken*, the
cancellation is kept until the taker is known (at most the bound above), which is
then sent the ``CANCEL``; after, the ``CANCEL`` goes at once -- so it ends exactly
as an ask to one actor of another node.

**A member that left.** The server may give a message to a member whose actor
began to stop, or was unregistered, after its choice (its subscription was not
yet gone): its node gives it to another of its members of the name, or, if it has
none, answers **not served here**, and the sender sends it again (at most
:data:`SENT_AGAIN_AT_MOST` times; then it ends as with no member).

**Ordering.** None across members. From one sender to one member, messages are
handled in the order they were sent (one publisher to one subscription, queued
in arrival order) -- unless a member that left passed one on to another.

**The view.** A node announces that it serves a shared name (its first member)
and no more (its last member left) on ``P.names`` (``_names.py``: a shared
claim, a shared release; all again when it meets a node), so every node knows
which names are shared and where: ``register`` refuses a name the other way
(``ValueError`` naming the node), ``lookup`` gives the group at once, and
``system.node.registered()`` lists it. A node that has not heard of a name yet
finds it by asking the members themselves (:data:`PROBE`), after a lookup of a
single name finds nothing. Registered both ways before either node heard the
other, the single registration keeps the name (:meth:`Groups.withdraw`). The
members leave with their actors, and with their node (its subscriptions end with
its connection).

**Threads.** A tell from another thread is encoded there and sent from the node's
thread, in that thread's order (what it then meets is a dead letter); ``ask`` and
``send`` belong to the node's trio run, as for any remote ref.
"""

from __future__ import annotations

import logging
import weakref
from typing import TYPE_CHECKING, Any, Final

import msgspec

from .._core._envelope import Notice
from .._core._ref import new_ref
from .._interrupts import protect_module
from ._bad_input import Bad, listen
from ._peers import PeerState
from ._subjects import ASK, NONE, SENDS, TELL, Peer, encode

if TYPE_CHECKING:
    from collections.abc import Callable

    from .._core._cell import ActorCell
    from ..actors import ActorRef
    from ..nats import Headers, Msg
    from ._node import Node

from ._group_cell import GroupCell
from ._group_sends import (
    PROBE,
    SENT_AGAIN_AT_MOST,
    TELLS_IN_FLIGHT,
    TELLS_PER_MESSAGE,
    GroupSends,
)

__all__ = ["SENT_AGAIN_AT_MOST", "TELLS_IN_FLIGHT", "GroupCell", "Groups"]

_KINDS: Final = frozenset({ASK, TELL, SENDS, PROBE})
_TELLS: Final = frozenset({TELL, SENDS})
_message = msgspec.msgpack.Decoder(tuple[int, msgspec.Raw])
_tells = msgspec.msgpack.Decoder(list[msgspec.Raw])
_log = logging.getLogger("trio_actors")
_NOT_SERVED: Final = encode((False, NONE))


class _Taken:
    """The tells of one message taken here from a shared name, until each has ended
    here (handled, failed, or a dead letter here) and their sender was told so."""

    __slots__ = ("answer", "groups", "left")

    def __init__(self, groups: Groups, answer: str, count: int) -> None:
        self.groups = groups
        self.answer = answer  # (the subject its sender hears on)
        self.left = count  # (its tells not ended yet)

    def ended(self, index: int) -> None:
        """Tell ``index`` ended. Never a checkpoint; called in the actor's turn."""
        self.left -= 1
        self.groups.report(self, index)


class _TakenTell:
    """The sender of the notice of a tell taken here from a shared name: told when
    it ends, it says so (:class:`_Taken`)."""

    __slots__ = ("index", "taken")

    def __init__(self, taken: _Taken, index: int) -> None:
        self.taken = taken
        self.index = index

    def notice_finished(self, notice: Notice | None) -> None:
        """Never a checkpoint; called in the actor's turn."""
        self.taken.ended(self.index)


class Groups(GroupSends):
    """One node's side of the shared names: its members and their subscriptions,
    and its view of where the others are served -- and, as a :class:`GroupSends`
    (``_group_sends.py``), the messages it sent to them.

    Attributes:
        taken_here: the reply subjects of the tells this node took, not yet ended
            (what a confirm round asks: ``Answers.held``).
        elsewhere: the shared names the other nodes serve: name -> those nodes.
    """

    __slots__ = ("_cells", "_reports", "_served", "_taken", "elsewhere", "taken_here")

    def __init__(self, node: Node) -> None:
        super().__init__(node)
        # (the ends of tells taken here not yet said, by message: send_reports)
        self._reports: dict[_Taken, list[int]] = {}
        self._cells: weakref.WeakValueDictionary[str, GroupCell] = weakref.WeakValueDictionary()
        # (name -> its members here -> what ends the member's subscription)
        self._served: dict[str, dict[ActorCell, Callable[[], None]]] = {}
        # (each member's "taken" answer, made once: its ref does not change. Only an
        # exported actor is here -- the answer holds its ref -- so it is forgotten
        # when it stops: forget_member. No cell is held weakly: _exports.py)
        self._taken: dict[ActorCell, bytes] = {}
        self.elsewhere: dict[str, set[Peer]] = {}
        self.taken_here: set[str] = set()

    # --- refs -----------------------------------------------------------------------

    def ref(self, name: str) -> ActorRef:
        """The ref to shared name ``name``'s group (whether or not it is served)."""
        cell = self._cells.get(name)
        if cell is None:
            cell = self._cells[name] = GroupCell(self, name)
        return new_ref(cell)

    def find(self, name: str) -> ActorRef | None:
        """The group's ref if ``name`` is shared, as far as this node knows: served
        here, or by a node that is up; else ``None``."""
        return self.ref(name) if self._shared(name) else None

    def _shared(self, name: str) -> bool:
        if name in self._served:
            return True
        peers = self.node.peers
        return any(peers.state(peer) is PeerState.UP for peer in self.elsewhere.get(name, ()))

    def registered(self) -> dict[str, ActorRef]:
        """Every shared name this node knows to be served, with its group's ref."""
        names = set(self._served) | set(self.elsewhere)
        return {name: self.ref(name) for name in sorted(names) if self._shared(name)}

    # --- the view: checks, announcements ---------------------------------------------

    def check_single(self, name: str) -> None:
        """Refuse to register ``name`` alone where another node serves it shared.

        Raises:
            ValueError: naming that node.
        """
        peers = self.node.peers
        for peer in sorted(self.elsewhere.get(name, ())):
            if not peers.silent(peer):
                raise ValueError(
                    f"cannot register {name!r}: it is a shared name on node {peer[0]!r} "
                    f"({peer[1]}); a name is shared or single, never both (register it "
                    "with shared=True to serve it too)"
                )

    def _check_shared(self, name: str) -> None:
        node = self.node
        wire = node.names.held.get(name)
        if wire is not None and not node.peers.silent((wire[0], wire[1])):
            raise ValueError(
                f"cannot register {name!r} as shared: {wire[0]}:{wire[2]} holds it alone on "
                f"node {wire[0]!r} ({wire[1]}); a name is shared or single, never both"
            )

    def serves(self, name: str) -> bool:
        """Whether a member here serves shared ``name``."""
        return name in self._served

    def withdraw(self, name: str, peer: Peer) -> None:
        """``peer`` holds ``name`` alone, claimed before this node's members were
        heard: the single registration keeps it, the members here leave it (the
        same on every node, whichever heard first)."""
        _log.warning(
            "name %r was registered shared on node %r and alone on node %r (%s) before "
            "either heard of the other: the single registration keeps it, so this node's "
            "members leave it (the actors go on without the name)",
            name,
            self.node.name,
            peer[0],
            peer[1],
        )
        self.node.system.unregister(name)

    def on_announcement(self, name: str, peer: Peer, *, served: bool) -> None:
        """``peer`` serves shared ``name`` (``served``), or no more (``_names.py``).
        Where this node holds ``name`` alone, its claim is said again (``peer``
        withdraws its members when it hears it) and ``peer`` is not counted as
        serving it."""
        if not served:
            peers = self.elsewhere.get(name)
            if peers is not None:
                peers.discard(peer)
                if not peers:
                    del self.elsewhere[name]
            return
        node = self.node
        registered = node.system.registered().get(name)
        if registered is not None:  # (held alone here: see withdraw())
            node.names.claim(name, node.ref_to_wire(registered))
            return
        if name not in self.elsewhere and len(self.elsewhere) >= node.cluster.limits.names:
            node.refused("over_limit", "more shared names than InputLimits.names", "names")
            return
        self.elsewhere.setdefault(name, set()).add(peer)

    def announce_all(self) -> None:
        """Say again every shared name served here (``ClusterNames._announce_all``)."""
        for name in self._served:
            self.node.names.announce_shared(name, served=True)

    def forget(self, peer: Peer) -> None:
        """``peer`` is down: it serves no shared name."""
        for name in [name for name, peers in self.elsewhere.items() if peer in peers]:
            self.on_announcement(name, peer, served=False)

    # --- members here ---------------------------------------------------------------

    def claimed(self, name: str, cell: ActorCell) -> None:
        """A local actor serves shared ``name``: one more subscription in its queue
        group; the others hear it (the name's first member here).

        Raises:
            ValueError: another node holds ``name`` alone.
        """
        self._check_shared(name)
        node = self.node
        subjects = node.subjects

        def take(item: tuple[int, Any, str]) -> None:
            self._take(name, cell, *item)

        def take_observed(item: tuple[int, Any, str, Headers | None]) -> None:
            self._take(name, cell, *item)  # (an observed node's: with the headers)

        shared, queue = subjects.shared(name), subjects.shared_group(name)
        if node.observer is None:
            unsubscribe = listen(
                node.transport, shared, node.bad_input, self._parse, take, queue=queue
            )
        else:
            unsubscribe = listen(
                node.transport,
                shared,
                node.bad_input,
                self._parse_observed,
                take_observed,
                queue=queue,
            )
        first = name not in self._served
        self._served.setdefault(name, {})[cell] = unsubscribe
        if first:
            node.names.announce_shared(name, served=True)

    def released(self, name: str, cell: ActorCell) -> None:
        """A local member leaves ``name`` (its actor stops, or was unregistered)."""
        members = self._served.get(name)
        if members is None or cell not in members:
            return
        members.pop(cell)()
        if not members:
            del self._served[name]
            if not self.node.closed:
                self.node.names.announce_shared(name, served=False)

    def forget_member(self, cell: ActorCell) -> None:
        """``cell``'s actor, exported, has stopped (``Node.exported_stopped``): its
        "taken" answer goes (it left its names when it began to stop)."""
        self._taken.pop(cell, None)

    def close(self) -> None:
        """The node left: it serves nothing more."""
        for members in self._served.values():
            for unsubscribe in members.values():
                unsubscribe()
        self._served.clear()

    def _parse(self, message: Msg) -> tuple[int, Any, str] | Bad:
        """A message to a shared name: its kind, body (tells: their bodies, at most
        :data:`TELLS_PER_MESSAGE`), and the subject to answer on (its
        reply subject, which is its sender's, with this node's name for ``-``).
        Never raises."""
        answer = self.node.frames.lookup(message)
        if isinstance(answer, Bad):
            return answer
        try:
            kind, raw = _message.decode(message.data)
            body: Any = _tells.decode(raw) if kind in _TELLS else raw
        except Exception as error:
            return Bad("messages", error)
        if kind not in _KINDS:
            return Bad("messages", f"unknown kind {kind} of message to a shared name")
        if kind in _TELLS and not 0 < len(body) <= TELLS_PER_MESSAGE:
            return Bad("messages", f"a message of {len(body)} tells to a shared name")
        return (kind, body, answer)

    def _parse_observed(self, message: Msg) -> tuple[int, Any, str, Headers | None] | Bad:
        """:meth:`_parse`, and the message's headers (an observed node's parser)."""
        parsed = self._parse(message)
        return parsed if isinstance(parsed, Bad) else (*parsed, message.headers)

    def _take(
        self,
        name: str,
        chosen: ActorCell,
        kind: int,
        body: Any,
        answer: str,
        headers: Headers | None = None,
    ) -> None:
        """The server chose ``chosen`` for a message (``body``: an ask's, or the
        tells'): say *taken*, then give it to the actor -- or to another member here
        if it has left the name since (it began to stop, or was unregistered); with
        none, say *not served here*. Called by the connection's reader. (``headers``:
        an ask's, on an observed node.)"""
        node = self.node
        cell: ActorCell | None = chosen
        members = self._served.get(name, {})
        if not chosen.accepting or chosen not in members:  # (it left after the choice)
            cell = next((c for c in members if c.accepting), None)
        if cell is None:
            node.tells.publish(answer, _NOT_SERVED, ordered=False)
            return
        taken = self._taken.get(cell)
        if taken is None:
            wire = node.ref_to_wire(new_ref(cell))
            taken = self._taken[cell] = encode((True, msgspec.Raw(encode(wire))))
        node.tells.publish(answer, taken, ordered=False)  # (bookkeeping: see _say)
        if kind == PROBE:
            return
        if kind == ASK:
            node.answers.receive_ask(cell, cell.path, body, answer, headers)
            return
        tells = _Taken(self, answer, len(body))
        self.taken_here.add(answer)
        for index, told in enumerate(body):
            try:
                message = node.codec.decode(told)
            except Exception as error:  # (counted; a bounded prefix kept)
                why = f"a tell to shared name {name!r} could not be decoded: {error}"
                node.undecodable_tell(new_ref(cell), told, why, answer)
                tells.ended(index)
                continue
            cell.queue_tracked(Notice(cell, message, _TakenTell(tells, index)), kind == SENDS)

    # --- saying which tells taken here have ended -------------------------------------

    def report(self, taken: _Taken, index: int) -> None:
        """Tell ``index`` of ``taken`` has ended: said to its sender at once, when
        nothing the node published waits for the connection's writer; else with the
        others that end meanwhile, at the writer's turn (:meth:`send_reports`) --
        the outbox's rule (``_tells.py``), so a stream of ends leaves as few
        messages. Never a checkpoint."""
        reports = self._reports
        if reports or self.node.transport.waiting_to_write():
            reports.setdefault(taken, []).append(index)
        else:
            self._say(taken, [index])

    def send_reports(self) -> None:
        """Say every end not said yet (at the connection writer's turn, and when the
        node closes). Never a checkpoint; never raises."""
        reports, self._reports = self._reports, {}
        for taken, indices in reports.items():
            self._say(taken, indices)

    def _say(self, taken: _Taken, indices: list[int]) -> None:
        if not taken.left:  # (its last: a confirm round finds it held no more)
            self.taken_here.discard(taken.answer)
        # (not ordered: what it says is about tells taken here, not an answer that
        # must follow the tells the handler made -- those stay in their window)
        self.node.tells.publish(taken.answer, encode((True, indices)), ordered=False)

    async def probe(self, name: str) -> ActorRef | None:
        """The group's ref if a member serves ``name`` now, asked of the members
        themselves (:data:`PROBE`); ``None`` if none does, or none answered within
        the bound. A checkpoint."""
        node = self.node
        sent = self._send(self.ref(name)._cell, PROBE, [encode(None)], [None])  # type: ignore[arg-type]
        try:
            await sent.waiter.event.wait()
        finally:
            node.requests.waiting.pop(sent.number, None)
            self.untaken.pop(sent.number, None)
        reply = sent.waiter.reply
        return self.ref(name) if reply is not None and reply.ok else None


protect_module(globals())

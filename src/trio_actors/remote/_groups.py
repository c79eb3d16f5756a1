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
exactly (T21). At most :data:`TELLS_IN_FLIGHT` tells per node are in flight so;
one more is refused with ``MailboxFull`` (``tell`` never blocks, and holds no more
than that), while ``send`` waits for room. An **ask** is cancellable: before
*taken*, the cancellation is kept until the taker is known (at most the bound
above), which is then sent the ``CANCEL``; after, the ``CANCEL`` goes at once --
so it ends exactly as an ask to one actor of another node.

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
import threading
import weakref
from threading import get_ident
from typing import TYPE_CHECKING, Any, Final, Literal

import msgspec
import trio

from .._core._envelope import Notice
from .._core._ref import new_ref
from .._errors import (
    ActorError,
    ActorNotFound,
    ActorStopped,
    ConnectionInterrupted,
    MailboxFull,
    NodeDown,
    NotPermitted,
)
from ._bad_input import Bad, listen
from ._frames import Frames, Reply
from ._peers import PeerState
from ._remote_cell import RemoteCell
from ._subjects import ASK, CANCEL, NONE, SENDS, TELL, Peer, encode

if TYPE_CHECKING:
    from collections.abc import Callable

    from .._core._cell import ActorCell
    from .._statistics import ActorStatistics
    from ..actors import ActorRef
    from ..lifecycle import Terminated
    from ..nats import Msg
    from ._codec import Codec
    from ._node import Node
    from ._requests import _Waiter

__all__ = ["SENT_AGAIN_AT_MOST", "TELLS_IN_FLIGHT", "GroupCell", "Groups"]

TELLS_IN_FLIGHT: Final = 4096
"""Tells (and sends) through shared names one node holds at most, not yet ended
on their takers' nodes: one more ``tell`` raises ``MailboxFull``; a ``send``
waits for room."""

SENT_AGAIN_AT_MOST: Final = 3
"""Times a message is sent again after a member's node answered "not served
here" (its actor stopped after the server chose it)."""

PROBE: Final = 100
"""A message to a shared name that asks only whether a member serves it (a lookup
by a node that has not heard the name's announcement yet): answered *taken*, and
given to no actor."""

_KINDS: Final = frozenset({ASK, TELL, SENDS, PROBE})
_message = msgspec.msgpack.Decoder(tuple[int, msgspec.Raw])
_log = logging.getLogger("trio_actors")
_NOT_SERVED: Final = encode((False, NONE))
_ENDED: Final = encode((True, NONE))


class GroupCell:
    """A shared name's group, as a ref's record: each tell, ask or send goes to
    one member (``_groups.py``). One per name per node (kept weakly), so refs to a
    group are equal and hash alike. Implements the kernel's ``ForeignCell``."""

    __slots__ = ("__weakref__", "dispatcher", "groups", "shared_name", "subject")

    remote: Literal[True] = True
    fast_tell: Literal[False] = False
    activates: Literal[False] = False

    def __init__(self, groups: Groups, name: str) -> None:
        self.groups = groups
        self.shared_name = name  # (the codec sends a group's ref as this name)
        self.dispatcher = groups.node.system._dispatcher
        node = groups.node
        self.subject = node.subjects.to_shared(name, node.name)  # (where its messages go)

    @property
    def name(self) -> str:
        return self.shared_name

    @property
    def path(self) -> str:
        """``shared:<name>``: a group has no place of its own."""
        return f"shared:{self.shared_name}"

    def __repr__(self) -> str:
        return f"<GroupCell {self.shared_name!r}>"

    def tell(self, message: Any) -> None:
        self.groups.tell(self, message)

    def ask_message(self, message: Any) -> Any:
        return self.groups.ask(self, message)

    async def send_message(self, message: Any) -> None:
        await self.groups.send(self, message)

    def _not_an_actor(self, operation: str) -> ActorError:
        return ActorError(
            f"{operation} of {self.path}: a shared name's group is not one actor: stop "
            "its members (or watch them) -- the actors registered under the name with "
            "shared=True, each on its node"
        )

    async def stop_and_wait(self, *, drain: bool) -> None:
        await trio.lowlevel.checkpoint()
        raise self._not_an_actor("stop()")

    def request_stop(self, *, drain: bool) -> None:
        raise self._not_an_actor("stop_nowait()")

    async def wait_terminated(self) -> Terminated:
        await trio.lowlevel.checkpoint()
        raise self._not_an_actor("wait_stopped()")

    def watch_from(self, watcher: ActorCell) -> None:
        raise self._not_an_actor("watch()")

    def unwatch_from(self, watcher: ActorCell) -> None:
        """Nothing to withdraw: a group is never watched."""

    def forget_watcher(self, watcher: ActorCell) -> None:
        """Nothing to forget: a group is never watched."""

    def snapshot(self) -> ActorStatistics:
        raise self._not_an_actor("statistics()")


class Sent:
    """One message to a shared name, from its sending to its end (its request's
    ``_Waiter.group``)."""

    __slots__ = (
        "again",
        "body",
        "cancelled",
        "cell",
        "done",
        "groups",
        "kind",
        "member",
        "message",
        "number",
        "reply_subject",
        "sent_at",
        "waiter",
    )

    def __init__(
        self,
        groups: Groups,
        cell: GroupCell,
        kind: int,
        body: bytes,
        message: Any,
        number: int,
        reply_subject: str,
        waiter: _Waiter,
    ) -> None:
        self.groups = groups
        self.cell = cell
        self.kind = kind
        self.body = body
        self.message = message  # (a tell's: given back with its fate)
        self.number = number
        self.reply_subject = reply_subject
        self.waiter = waiter
        self.sent_at = trio.current_time()
        self.again = 0  # times sent again (a member's node did not serve it)
        self.member: ActorRef | None = None  # (its taker, once known)
        self.cancelled = False  # (an ask cancelled before its taker was known)
        self.done = False

    def taken(self, reply: Reply) -> None:
        """A member's node answered before its taker was known (called by
        ``Requests.on_reply``): *taken* (the member's ref), or *not served here*."""
        groups, node = self.groups, self.groups.node
        if not reply.ok:
            if self.again < SENT_AGAIN_AT_MOST and not node.closed:
                self.again += 1
                try:
                    groups.publish(self)  # (another member, the server's choice again)
                except Exception as error:  # (in the connection's reader: never raised)
                    self.waiter.fail(f"it could not be sent again: {error}", interrupted=True)
            else:
                self.waiter.reply = reply  # (no member served it: as no-responders)
                self.waiter.end()
            return
        wire = Frames.wire_ref(reply.body)
        if isinstance(wire, Bad):
            node.refused("replies", wire.why, groups.subject_of(self))
            return
        if wire[0] != reply.answerer:  # (a node answers for its own actors only)
            node.refused("forged", f"{reply.answerer} took it as {wire[0]}", self.reply_subject)
            return
        try:
            member = node.exports.ref_from_wire(*wire)._cell
        except ValueError as error:
            node.refused("replies", error, self.reply_subject)
            return
        waiter = self.waiter
        if self.kind == PROBE:  # (a member serves it: all a probe asks)
            waiter.reply = reply
            waiter.end()
            return
        if type(member) is RemoteCell:
            waiter.peer = member.peer
            waiter.resend = (member, self.kind, self.body)  # (confirmed in rounds, never resent)
        elif wire[:2] == (node.name, node.incarnation):  # (a member here took it)
            waiter.peer = wire[:2]
        else:  # (this node's earlier life, or not an actor)
            node.refused("forged", f"{reply.answerer} took it as {wire}", self.reply_subject)
            return
        self.member = new_ref(member)
        groups.untaken.pop(self.number, None)
        waiter.sent_at = trio.current_time()
        if self.cancelled:  # (its asker gave up before the taker was known)
            self.cancel()
            self.ended()

    def cancel(self) -> None:
        """Withdraw the ask from its taker (known: ``member``), as a ``CANCEL``."""
        member, node = self.member, self.groups.node
        assert member is not None
        reply = node.requests._reply_subject(self.waiter.peer, self.number)
        if type(member._cell) is RemoteCell:
            node.tells.send(member._cell, CANCEL, NONE, reply)
        else:
            node.answers.cancel(reply)  # (taken here: owed here)

    def ended(self) -> None:
        """Its request ended (its answer came, or it failed; called by its
        ``_Waiter``); or an ask cancelled before its taker was known is done with.
        Idempotent."""
        if self.done:
            return
        groups = self.groups
        if self.kind in (ASK, PROBE) and not self.cancelled:
            groups.untaken.pop(self.number, None)
            return  # (its task reads the end, and forgets the request)
        self.done = True
        groups.untaken.pop(self.number, None)
        groups.node.requests.waiting.pop(self.number, None)
        if self.kind in (TELL, SENDS):
            groups.tell_ended(self)


class _TakenTell:
    """The sender of the notice of a tell taken here from a shared name: told when
    it ends (handled, failed, or a dead letter here), it says so to the sender."""

    __slots__ = ("answer", "groups")

    def __init__(self, groups: Groups, answer: str) -> None:
        self.groups = groups
        self.answer = answer

    def notice_finished(self, notice: Notice | None) -> None:
        """Never a checkpoint; called in the actor's turn."""
        self.groups.taken_here.discard(self.answer)
        self.groups.node.tells.publish(self.answer, _ENDED)


class Groups:
    """One node's side of the shared names: its members and their subscriptions,
    its view of where the others are served, and the messages it sent to them.

    Attributes:
        in_flight: tells and sends through shared names not yet ended.
        untaken: the messages sent whose taker is not known yet, by number.
        taken_here: the reply subjects of the tells this node took, not yet ended
            (what a confirm round asks: ``Answers.held``).
        elsewhere: the shared names the other nodes serve: name -> those nodes.
    """

    __slots__ = (
        "_cells",
        "_codecs_elsewhere",
        "_none_in_flight",
        "_room",
        "_served",
        "_taken",
        "elsewhere",
        "in_flight",
        "node",
        "taken_here",
        "untaken",
    )

    def __init__(self, node: Node) -> None:
        self.node = node
        self._cells: weakref.WeakValueDictionary[str, GroupCell] = weakref.WeakValueDictionary()
        # (name -> its members here -> what ends the member's subscription)
        self._served: dict[str, dict[ActorCell, Callable[[], None]]] = {}
        # (each member's "taken" answer, made once: its ref does not change)
        self._taken: weakref.WeakKeyDictionary[ActorCell, bytes] = weakref.WeakKeyDictionary()
        self._codecs_elsewhere = threading.local()  # (one per other thread that tells)
        self.elsewhere: dict[str, set[Peer]] = {}
        self.in_flight = 0
        self._room = trio.Event()
        self._none_in_flight: trio.Event | None = None  # (all_ended() waits for it)
        self.untaken: dict[int, Sent] = {}
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

        def take(item: tuple[int, msgspec.Raw, str]) -> None:
            self._take(name, cell, *item)

        unsubscribe = listen(
            node.transport,
            subjects.shared(name),
            node.bad_input,
            self._parse,
            take,
            queue=subjects.shared_group(name),
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

    def close(self) -> None:
        """The node left: it serves nothing more."""
        for members in self._served.values():
            for unsubscribe in members.values():
                unsubscribe()
        self._served.clear()

    def _parse(self, message: Msg) -> tuple[int, msgspec.Raw, str] | Bad:
        """A message to a shared name: its kind, body, and the subject to answer on
        (its reply subject, which is its sender's, with this node's name for
        ``-``). Never raises."""
        answer = self.node.frames.lookup(message)
        if isinstance(answer, Bad):
            return answer
        try:
            kind, body = _message.decode(message.data)
        except Exception as error:
            return Bad("messages", error)
        if kind not in _KINDS:
            return Bad("messages", f"unknown kind {kind} of message to a shared name")
        return (kind, body, answer)

    def _take(
        self, name: str, chosen: ActorCell, kind: int, body: msgspec.Raw, answer: str
    ) -> None:
        """The server chose ``chosen`` for a message: say *taken*, then give it to the
        actor -- or to another member here if it has left the name since (it began
        to stop, or was unregistered); with none, say *not served here*. Called by
        the connection's reader."""
        node = self.node
        cell: ActorCell | None = chosen
        members = self._served.get(name, {})
        if not chosen.accepting or chosen not in members:  # (it left after the choice)
            cell = next((c for c in members if c.accepting), None)
        if cell is None:
            node.tells.publish(answer, _NOT_SERVED)
            return
        taken = self._taken.get(cell)
        if taken is None:
            wire = node.ref_to_wire(new_ref(cell))
            taken = self._taken[cell] = encode((True, msgspec.Raw(encode(wire))))
        node.tells.publish(answer, taken)
        if kind == PROBE:
            return
        if kind == ASK:
            node.answers.receive_ask(cell, cell.path, body, answer)
            return
        try:
            message = node.codec.decode(body)
        except Exception:
            node.system.dead_letters.record(new_ref(cell), bytes(body), "undecodable")
            node.tells.publish(answer, _ENDED)
            return
        self.taken_here.add(answer)
        cell.queue_tracked(Notice(cell, message, _TakenTell(self, answer)), kind == SENDS)

    # --- sending ----------------------------------------------------------------------

    def subject_of(self, sent: Sent) -> str:
        return sent.cell.subject

    def publish(self, sent: Sent) -> None:
        """Send ``sent``'s message to its name's members (the server chooses one).
        May raise what the connection refuses."""
        data = encode((sent.kind, msgspec.Raw(sent.body)))
        self.node.tells.out(sent.cell.subject, data, sent.reply_subject)

    def _send(self, cell: GroupCell, kind: int, body: bytes, message: Any) -> Sent:
        requests = self.node.requests
        number, reply_subject, waiter = requests._request(None)
        sent = waiter.group = Sent(self, cell, kind, body, message, number, reply_subject, waiter)
        self.untaken[number] = sent
        try:
            self.publish(sent)
        except BaseException:
            waiter.group = None
            self.untaken.pop(number, None)
            del requests.waiting[number]
            raise
        return sent

    def tell(self, cell: GroupCell, message: Any) -> None:
        """A tell to a shared name (``ActorRef.tell``): encoded (``TypeError`` now if
        it cannot cross), sent, held until its taker says it ended. Never a
        checkpoint, never blocks. From another thread: encoded there, sent from the
        node's thread in that thread's order; what it then meets has nobody to be
        raised to -- past :data:`TELLS_IN_FLIGHT`, a dead letter ``"overflow"``; a
        connection that refuses it, ``"unreachable"`` (and a warning in the log).

        Raises:
            MailboxFull: :data:`TELLS_IN_FLIGHT` tells through shared names are in
                flight already.
        """
        node = self.node
        if get_ident() != node.thread_id:
            codec: Codec | None = getattr(self._codecs_elsewhere, "codec", None)
            if codec is None:
                codec = self._codecs_elsewhere.codec = node.new_codec()
            body = codec.encode(message)
            node.trio_token.run_sync_soon(self._told_elsewhere, cell, message, body)
            return
        self._tell_encoded(cell, message, node.codec.encode(message))

    def _told_elsewhere(self, cell: GroupCell, message: Any, body: bytes) -> None:
        """A tell from another thread, in the node's thread: nothing may escape."""
        node = self.node
        try:
            self._tell_encoded(cell, message, body)
        except MailboxFull as error:
            _log.warning("node %s: %s", node.name, error)
            node.system.dead_letters.record(new_ref(cell), message, "overflow")
        except Exception as error:
            _log.warning("node %s: a tell to %s not sent: %s", node.name, cell.path, error)
            node.system.dead_letters.record(new_ref(cell), message, "unreachable")

    def _tell_encoded(self, cell: GroupCell, message: Any, body: bytes) -> None:
        node = self.node
        if node.closed:
            node.system.dead_letters.record(new_ref(cell), message, "unreachable")
            return
        if self.in_flight >= TELLS_IN_FLIGHT:
            raise MailboxFull(
                f"{cell.path}: {TELLS_IN_FLIGHT} tells through shared names are in flight "
                f"from node {node.name!r}, not yet handled; use send() to wait for room"
            )
        self._tell(cell, TELL, body, message)

    def _tell(self, cell: GroupCell, kind: int, body: bytes, message: Any) -> None:
        self._send(cell, kind, body, message)
        self.in_flight += 1

    async def send(self, cell: GroupCell, message: Any) -> None:
        """``send`` to a shared name: waits while :data:`TELLS_IN_FLIGHT` tells are in
        flight, then tells (into a full bounded mailbox there, it waits in line). A
        checkpoint; cancelled while it waits, nothing was sent."""
        node = self.node
        node.check_thread("send")
        await trio.lowlevel.checkpoint_if_cancelled()
        body = node.codec.encode(message)
        while self.in_flight >= TELLS_IN_FLIGHT and not node.closed:
            self._room = self._room if not self._room.is_set() else trio.Event()
            await self._room.wait()
        if node.closed:
            await trio.lowlevel.checkpoint()
            raise ActorStopped(f"{cell.path}: this node has left the cluster; not sent")
        self._tell(cell, SENDS, body, message)
        await trio.lowlevel.cancel_shielded_checkpoint()

    def tell_ended(self, sent: Sent) -> None:
        """A tell's request ended: its fate, here or there."""
        self.in_flight -= 1
        if self.in_flight < TELLS_IN_FLIGHT:
            self._room.set()
        if not self.in_flight and self._none_in_flight is not None:
            self._none_in_flight.set()
        waiter, node = sent.waiter, self.node
        reply = waiter.reply
        ref = new_ref(sent.cell)
        if reply is not None and reply.ok:
            return  # (it ended there: handled, or a dead letter there)
        if waiter.refused:
            node.system.dead_letters.record(ref, sent.message, "refused")
        elif reply is not None and reply.ok is None:
            node.system.dead_letters.record(ref, sent.message, "unreachable")  # (no member)
        elif reply is not None:
            node.system.dead_letters.record(ref, sent.message, "stopped")  # (not served)
        else:  # (its taker died or was lost, or this node left, first)
            node.tells.fates.unconfirmed += 1
            node.system.dead_letters.record(ref, sent.message, "in-doubt")

    async def all_ended(self, within: float) -> None:
        """Wait until every tell through a shared name has ended (its taker said so,
        or it is a dead letter here), at most ``within`` seconds. A checkpoint if
        some are in flight."""
        if self.in_flight:
            self._none_in_flight = trio.Event()
            with trio.move_on_after(within):
                await self._none_in_flight.wait()

    async def ask(self, cell: GroupCell, message: Any) -> Any:
        """An ask to a shared name (``ActorRef.ask``): to one member. A checkpoint.

        Raises:
            ActorNotFound: no member serves the name (now).
            NodeDown, ConnectionInterrupted: its taker's node was declared down, or
                the message or its answer was lost (it may or may not have been
                handled); or no member took it within the bound.
            ActorStopped: this node left the cluster first.
        """
        node = self.node
        node.check_thread("ask")
        body = node.codec.encode(message)
        if node.closed:
            await trio.lowlevel.checkpoint()
            raise ActorStopped(f"{cell.path}: this node has left the cluster; ask not sent")
        sent = self._send(cell, ASK, body, message)
        waiter = sent.waiter
        try:
            await waiter.event.wait()
        except trio.Cancelled:
            if waiter.open:
                if sent.member is None:
                    sent.cancelled = True  # (the taker, once known, is sent the CANCEL)
                else:
                    sent.cancel()
            raise
        finally:
            if not sent.cancelled:
                node.requests.waiting.pop(sent.number, None)
                self.untaken.pop(sent.number, None)
        return self._answer(sent)

    async def probe(self, name: str) -> ActorRef | None:
        """The group's ref if a member serves ``name`` now, asked of the members
        themselves (:data:`PROBE`); ``None`` if none does, or none answered within
        the bound. A checkpoint."""
        node = self.node
        sent = self._send(self.ref(name)._cell, PROBE, encode(None), None)  # type: ignore[arg-type]
        try:
            await sent.waiter.event.wait()
        finally:
            node.requests.waiting.pop(sent.number, None)
            self.untaken.pop(sent.number, None)
        reply = sent.waiter.reply
        return self.ref(name) if reply is not None and reply.ok else None

    def _answer(self, sent: Sent) -> Any:
        waiter, node, path = sent.waiter, self.node, sent.cell.path
        taker = "" if sent.member is None else f" (taken by {sent.member.path})"
        if waiter.refused:
            raise NotPermitted(f"{path}{taker}: {waiter.failed}")
        if waiter.failed:
            error = ConnectionInterrupted if waiter.interrupted else NodeDown
            raise error(
                f"{path}{taker}: {waiter.failed}, before it answered; the message may or "
                "may not have been handled"
            )
        reply = waiter.reply
        if reply is None:
            raise ActorStopped(f"{path}: this node left the cluster before it was answered")
        if reply.ok is None or (sent.member is None and not reply.ok):
            raise ActorNotFound(f"no actor serves the shared name {sent.cell.shared_name!r}")
        if reply.ok:
            return node.codec.decode(reply.body)
        raise node.codec.decode_error(reply.body)

    # --- the bound on a message nobody took -------------------------------------------

    async def run(self) -> None:
        """The node's task that ends what no member took within ``heartbeat *
        heartbeats_missed`` seconds (as a lookup), and forgets the asks cancelled
        meanwhile."""
        cluster = self.node.cluster
        within = cluster.heartbeat * cluster.heartbeats_missed
        while True:
            await trio.sleep(cluster.heartbeat)
            before = trio.current_time() - within
            for number, sent in list(self.untaken.items()):
                if sent.sent_at > before:
                    break  # (in sending order: the rest are younger)
                self.untaken.pop(number, None)
                if sent.cancelled:
                    sent.ended()
                elif sent.waiter.open:
                    sent.waiter.fail(
                        f"no member of shared name {sent.cell.shared_name!r} took it within "
                        f"{within} s (its taker died, or what it said was lost)",
                        interrupted=True,
                    )

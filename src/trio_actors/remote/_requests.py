"""Requests of this node that wait for an answer: asks, stops and lookups, and the
requests to another node itself (a spawn, a question about its load:
``_spawning.py``), which end as asks do.

Each request gets a number and waits for one reply on ``P.r.<node>.<incarnation>.
<n>`` (a :class:`_Waiter`). It ends in one of these ways, each once:

* its **reply** comes: the value, the error (rebuilt by the codec), or NATS's
  no-responders (status 503: nothing serves that node incarnation, or no node
  holds the name looked up) -- except that an ask's or a stop's no-responders
  while its peer is up was never delivered (the peer is between two
  connections): it is sent again at the next confirm round (``_confirm.py``);
* the **peer** that must answer it is declared down (``_peers.py``): ``NodeDown``
  ("may or may not have been handled") -- only those sent before the news, when it
  came by an advisory (later ones are answered by NATS);
* a **confirm round** finds the peer does not hold it, or the peer answers none
  for twice ``heartbeats_missed`` rounds: an ask fails with ``ConnectionInterrupted``;
  a stop is sent again (or, unanswered, fails so too);
* this node's **connection** is lost: ``ConnectionInterrupted`` for every ask (the
  message, or its answer, may have been lost with the socket); a stop is sent
  again once the connection is back;
* a **lookup** waits at most ``heartbeat * heartbeats_missed`` seconds (it has no
  peer to be declared down): then ``ActorNotFound``, saying that no node answered;
  within that bound, its no-responders while a node that is up holds the name
  (between two connections) sends it again instead of "registered nowhere";
* this node **closes**: the ask fails with ``ActorStopped``.

A request to a shared name (``_groups.py``) goes to no one node: until a member's
node answers that it took it, it ends only by NATS's no-responders, this node's
connection, this node's close, or ``_groups.py``'s bounded wait; from then on it is
an ordinary request to that node (:attr:`_Waiter.group` says which it is).

An asker's cancellation withdraws its ask on the other node (a ``CANCEL``) unless
it has already ended. A waiter's :attr:`_Waiter.failed` says why no answer will
come -- the request's own end, written here only, not the peer's state (a request
sent after a peer's down, or to no peer at all, a lookup, is not ended by it).
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine, Iterator
from functools import partial
from typing import TYPE_CHECKING, Any, Final

import msgspec
import trio

from .._errors import ActorNotFound, ActorStopped, ConnectionInterrupted, NodeDown, NotPermitted
from .._interrupts import protect_module
from ._bad_input import Bad
from ._confirm import give_up_after
from ._frames import Frames, Reply
from ._peers import PeerState
from ._subjects import ASK, CANCEL, CONFIRM, NONE, STOP, Peer, encode

if TYPE_CHECKING:
    from ..actors import ActorRef
    from ..nats import Headers
    from ._codec import WireRef
    from ._node import Node
    from ._remote_cell import RemoteCell

__all__ = ["LOOKUP_AGAIN_EVERY", "Requests"]

LATE_KEPT: Final = 1_024
"""Requests cancelled after they were sent whose late answer a node still acts on
(a spawn's: it stops the actor made), at most; past it, the oldest is forgotten."""

LOOKUP_AGAIN_EVERY: Final = 0.1
"""A lookup that NATS answered no-responders while the name's holder is up (between
two connections) is sent again after this fraction of a heartbeat."""


Resend = tuple["RemoteCell", int, bytes]
"""An ask's or a stop's message, as sent: its actor, its kind and its body."""


class _Waiter:
    """One request of this node waiting for its reply (from ``peer``, if one node
    must answer it)."""

    __slots__ = (
        "event",
        "failed",
        "group",
        "headers",
        "interrupted",
        "lookup",
        "peer",
        "ref",
        "refused",
        "reply",
        "resend",
        "sent_at",
        "to_send_again",
        "undelivered",
    )

    def __init__(
        self, peer: Peer | None, resend: Resend | None = None, *, lookup: bool = False
    ) -> None:
        self.event = trio.Event()
        self.reply: Reply | None = None  # (parsed: Frames.reply)
        self.lookup = lookup
        self.ref: WireRef | None = None  # (a lookup's answer, parsed)
        self.peer = peer
        self.resend = resend  # (an ask's or a stop's: confirmed in rounds, sent again)
        self.sent_at = trio.current_time()
        self.failed: str | None = None  # why no answer will come (the peer, or the connection)
        self.interrupted = False  # (failed: ConnectionInterrupted, not NodeDown)
        self.refused = False  # (failed: the server refused its message, NotPermitted)
        self.undelivered = 0  # times it was not delivered (no-responders, peer up)
        self.to_send_again = False  # not delivered: sent again at the next round
        self.group: Any = None  # (a request to a shared name: its _group_sends.Sent)
        self.headers: Headers | None = None  # (an observed ask's: sent again with it)

    @property
    def open(self) -> bool:
        """Still waiting for its answer."""
        return self.reply is None and not self.failed

    def failure(self, where: str) -> Exception:
        """Why no answer will come, the request having failed (``where``: what the
        message starts with), for the asker to raise: ``NotPermitted`` if the server
        refused it, ``ConnectionInterrupted`` or ``NodeDown`` -- it may or may not
        have been handled. (Returned, not raised: raised where the answer is given,
        the exception has one frame less to go through -- R4 raises 1,000 of them.)"""
        if self.refused:
            return NotPermitted(f"{where}: {self.failed}")
        error = ConnectionInterrupted if self.interrupted else NodeDown
        return error(
            f"{where}: {self.failed}, before it answered; the message may or may not "
            "have been handled"
        )

    def fail(self, why: str, *, interrupted: bool) -> None:
        self.failed = why
        self.interrupted = interrupted
        self.end()

    def end(self) -> None:
        """Its reply came, or it failed: wake its task, and tell a request to a
        shared name (which may have no task: a tell)."""
        self.event.set()
        if self.group is not None:
            self.group.ended()


class Requests:
    """This node's requests waiting for a reply, by number."""

    __slots__ = ("_late", "_node", "_replies", "made", "waiting")

    def __init__(self, node: Node) -> None:
        self._node = node
        self._replies = node.subjects.replies(node.name, node.incarnation)
        self.waiting: dict[int, _Waiter] = {}
        self.made = 0  # (the number of the newest request)
        # Requests cancelled after they were sent whose answer still matters (a
        # spawn's: the actor it made is stopped), by number; the oldest forgotten
        # past LATE_KEPT, and those of a peer down with it.
        self._late: dict[int, tuple[RemoteCell, Callable[[Any], None]]] = {}

    @property
    def subject(self) -> str:
        """The subjects of the replies (subscribed by the node):
        ``P.r.<node>.<incarnation>.<answering node>.<n>``."""
        return f"{self._replies}.*.*"

    def _request(
        self, peer: Peer | None, resend: Resend | None = None, *, lookup: bool = False
    ) -> tuple[int, str, _Waiter]:
        number = self.made = self.made + 1
        waiter = self.waiting[number] = _Waiter(peer, resend, lookup=lookup)
        return number, self._reply_subject(peer, number), waiter

    def _reply_subject(self, peer: Peer | None, number: int) -> str:
        """Where ``peer`` answers request ``number`` (a lookup, to no one peer:
        ``-``, which the node answering it replaces with its own name)."""
        return f"{self._replies}.{'-' if peer is None else peer[0]}.{number}"

    def ask(self, cell: RemoteCell, message: Any) -> Coroutine[Any, Any, Any]:
        """A remote ask (see ``ActorRef.ask``): the request to await (a checkpoint).
        What cannot be asked -- from another thread, a message that cannot cross --
        raises here, in ``ActorRef.ask``. (Not a coroutine of its own: one frame
        fewer on every ask's way.)"""
        node = self._node
        node.check_thread("ask")
        if node.observer is None:
            return self.request(cell, ASK, node.codec.encode(message))
        body = node.codec.encode(message)
        return node.observer.ask(cell, message, partial(self.request, cell, ASK, body))

    async def request(
        self,
        cell: RemoteCell,
        kind: int,
        body: bytes,
        headers: Headers | None = None,
        *,
        then_late: Callable[[Any], None] | None = None,
    ) -> Any:
        """Send ``body`` as a request of ``kind`` to ``cell`` -- an actor (an ask),
        or its node itself (a spawn, a question about its load: ``_spawning.py``)
        -- and return its answer, decoded; it ends as the module docstring says (an
        error answer is raised). A checkpoint: an ask cancelled here is withdrawn
        on the other node (a ``CANCEL``); another kind is forgotten -- its answer,
        if one comes, is dropped, or (a value) given to ``then_late``. Another kind
        that ends unanswered, never delivered (NATS's no-responders each time it
        was sent), raises
        ``ActorStopped`` rather than ``NodeDown`` or ``ConnectionInterrupted``: it
        surely was not handled. ``headers``: an observed ask's (sent again with it)."""
        if self._node.closed:
            await trio.lowlevel.checkpoint()
            raise ActorStopped(f"{cell.path}: this node has left the cluster; not sent")
        peer = cell.peer
        number, reply_subject, waiter = self._request(peer, (cell, kind, body))
        waiter.headers = headers
        try:
            self._send_or_wait_for_round(waiter, cell, peer, kind, body, reply_subject)
            try:
                await waiter.event.wait()
            except trio.Cancelled:
                if kind == ASK and waiter.reply is None and not waiter.failed:
                    self._node.tells.send(cell, CANCEL, NONE, reply_subject)  # withdrawn there
                elif then_late is not None and waiter.open:
                    self._late[number] = (cell, then_late)
                    if len(self._late) > LATE_KEPT:
                        del self._late[next(iter(self._late))]
                elif then_late is not None and waiter.reply is not None:
                    self._give_late(waiter.reply, then_late)  # (it came as it was cancelled)
                raise
        finally:
            del self.waiting[number]
        if kind != ASK and waiter.failed and waiter.to_send_again and not waiter.refused:
            # Every time it was sent, NATS said nothing served its node: never
            # delivered, so surely not handled -- which a spawn's placement needs to
            # know (an ask's NodeDown stays as it was).
            raise ActorStopped(
                f"{cell.path}: {waiter.failed}; it was never delivered (nothing served "
                "that node each time it was sent)"
            )
        return self._answer_of(waiter, cell)

    def _send_or_wait_for_round(
        self, waiter: _Waiter, cell: RemoteCell, peer: Peer, kind: int, body: bytes, reply: str
    ) -> None:
        """Send a request now -- or, while tells to its node (``peer``) that NATS
        bounced wait to be sent again at the next confirm round, at that round, after
        them (T2: it must not overtake them)."""
        if self._node.tells.fates.undelivered_to(peer):
            waiter.to_send_again = True
        else:
            self._node.tells.send(cell, kind, body, reply, waiter.headers)

    def _answer_of(self, waiter: _Waiter, cell: RemoteCell) -> Any:
        reply = waiter.reply
        if waiter.failed:  # (the path is made only then: an f-string per ask otherwise)
            raise waiter.failure(cell.path)
        if reply is None:
            raise ActorStopped(f"{cell.path}: this node left the cluster before it answered")
        if reply.ok is None:
            raise ActorStopped(
                f"{cell.path} is unreachable: nothing serves node {cell.node_name!r} "
                f"incarnation {cell.incarnation} (it stopped, or restarted as another)"
            )
        if reply.ok:
            return self._node.codec.decode(reply.body)
        raise self._node.codec.decode_error(reply.body)

    async def stop(self, cell: RemoteCell, *, drain: bool) -> None:
        """A remote ``stop``: returns once the actor has stopped. A checkpoint."""
        node = self._node
        node.check_thread("stop")
        if node.closed:
            await trio.lowlevel.checkpoint()
            return  # (this node can no longer reach it: as far as it can tell, stopped)
        body = encode(drain)
        peer = cell.peer
        number, reply_subject, waiter = self._request(peer, (cell, STOP, body))
        try:
            self._send_or_wait_for_round(waiter, cell, peer, STOP, body, reply_subject)
            await waiter.event.wait()
        finally:
            del self.waiting[number]
        if waiter.interrupted or waiter.refused:
            self._answer_of(waiter, cell)  # (raises: nobody can say it stopped)
        if waiter.failed or (waiter.reply is not None and waiter.reply.ok is None):
            return  # its node is gone: it has stopped
        if waiter.reply is not None:
            self._answer_of(waiter, cell)

    def request_stop(self, cell: RemoteCell, *, drain: bool) -> None:
        """A remote ``stop_nowait``: sent, nothing waited for."""
        node = self._node
        node.check_thread("stop_nowait")
        if not node.closed:
            node.tells.send(cell, STOP, encode(drain), None)

    async def lookup(self, name: str) -> ActorRef:
        """The ref registered as ``name`` on any node. A checkpoint.

        NATS's no-responders (nothing serves the name now) is taken for "registered
        nowhere" unless, as far as this node has heard, a node that still beats
        holds it: that node is between two connections, and the lookup is sent
        again every :data:`LOOKUP_AGAIN_EVERY` heartbeat -- within the same bound.

        Raises:
            ActorNotFound: no node has it, or none answered within the time a node
                takes to be declared down (``heartbeat * heartbeats_missed``).
        """
        node = self._node
        within = node.cluster.heartbeat * node.cluster.heartbeats_missed
        with trio.move_on_after(within):
            while True:
                wire = await self._look_up(name)
                if wire is not None:
                    return node.exports.ref_from_wire(*wire)
                if not self._held_by_a_node_up(name):
                    raise ActorNotFound(f"no actor is registered as {name!r} on any node")
                await trio.sleep(node.cluster.heartbeat * LOOKUP_AGAIN_EVERY)
        raise ActorNotFound(
            f"no node answered the lookup of {name!r} within {within} s (the node "
            "holding it is stalled, gone, or between two connections); a lookup "
            "changes nothing: try again"
        )

    async def _look_up(self, name: str) -> WireRef | None:
        """Send one lookup of ``name``; wait for its answer: the holder's ref, or
        ``None`` (NATS's no-responders). A checkpoint; cancelled, it is
        forgotten."""
        node = self._node
        number, reply_subject, waiter = self._request(None, lookup=True)
        try:
            node.tells.out(node.subjects.lookup(name, node.name), b"", reply_subject)
            await waiter.event.wait()
        finally:
            del self.waiting[number]
        return waiter.ref

    def _held_by_a_node_up(self, name: str) -> bool:
        """Whether, as far as this node has heard, a node that is up holds ``name``."""
        wire = self._node.names.held.get(name)
        return wire is not None and self._node.peers.state((wire[0], wire[1])) is PeerState.UP

    def on_reply(self, reply: Reply) -> None:
        """A reply came (parsed: ``Frames.reply``; called by the connection's
        reader): from the node the request went to (its subject names it), else
        it is forged. A lookup's must hold a ref: one that does not is bad input, and
        the lookup goes on waiting (for its holder's answer, or NATS's). An ask's
        or a stop's no-responders while its peer is up was never delivered: it is
        sent again at the next confirm round."""
        waiter = self.waiting.get(reply.number)
        if waiter is None and reply.number in self._late:
            self._late_answer(reply)
            return
        if waiter is not None and waiter.peer is not None and reply.answerer != waiter.peer[0]:
            # (only the node asked may answer: it alone may publish there)
            self._node.refused("forged", f"an answer from {reply.answerer!r}", self._replies)
            return
        if waiter is None or not waiter.open:
            return
        if waiter.group is not None and reply.ok is not None:
            if waiter.peer is None:
                waiter.group.taken(reply)  # (a shared name's member took it: _groups.py)
                return
            if waiter.group.unended:
                waiter.group.reported(reply)  # (tells: which ended there)
                return
        if (
            reply.ok is None
            and waiter.resend is not None
            and waiter.peer is not None
            and self._node.peers.state(waiter.peer) is PeerState.UP
        ):
            # Nothing served its node's subject, which beats: between two
            # connections. Never delivered, so sent again at the next round.
            waiter.undelivered += 1
            waiter.to_send_again = True
            return
        if waiter.lookup and reply.ok is not None:
            wire = Frames.wire_ref(reply.body) if reply.ok else Bad("replies", "not a ref")
            if isinstance(wire, Bad):
                self._node.refused("replies", wire.why, self._replies)
                return
            if wire[0] != reply.answerer:  # (a node answers for its own actors only)
                self._node.refused(
                    "forged", f"{reply.answerer} answered with {wire[0]}'s ref", self._replies
                )
                return
            waiter.ref = wire
        waiter.reply = reply
        waiter.end()

    def _late_answer(self, reply: Reply) -> None:
        """The answer to a request cancelled after it was sent, from the node asked
        (else forged, and kept waiting for): a value goes to its ``then_late``."""
        cell, then_late = self._late[reply.number]
        if reply.answerer != cell.node_name:
            self._node.refused("forged", f"an answer from {reply.answerer!r}", self._replies)
            return
        del self._late[reply.number]
        self._give_late(reply, then_late)

    def _give_late(self, reply: Reply, then_late: Callable[[Any], None]) -> None:
        """A value answered to a request cancelled meanwhile goes to ``then_late``."""
        if reply.ok:
            try:
                value = self._node.codec.decode(reply.body)
            except Exception as error:
                self._node.refused("replies", error, self._replies)
                return
            then_late(value)

    # --- confirm rounds (_confirm.py) --------------------------------------------

    async def confirm(self, peer: Peer, body: bytes, *, within: float) -> bytes | None:
        """Send a confirm round's ``CONFIRM`` to ``peer`` and wait ``within`` seconds
        at most for its answer: the answer's bytes, or ``None`` (no answer,
        no-responders, or an error). A checkpoint."""
        node = self._node
        number, reply_subject, waiter = self._request(peer)
        try:
            subject = node.subjects.to_node(*peer, node.name)
            data = encode((CONFIRM, 0, "", msgspec.Raw(body)))
            node.tells.out(subject, data, reply_subject, ordered=False)  # (not the held)
            with trio.move_on_after(within):
                await waiter.event.wait()
        finally:
            del self.waiting[number]
        reply = waiter.reply
        return None if reply is None or not reply.ok else bytes(reply.body)

    def numbers_waiting_on(self, peer: Peer) -> list[int]:
        """The asks and stops waiting on ``peer`` for their answer, oldest first."""
        return [
            number
            for number, waiter in self.waiting.items()
            if waiter.peer == peer
            and waiter.resend is not None
            and waiter.open
            and not waiter.to_send_again
        ]

    def undelivered_peers(self) -> set[Peer]:
        """The peers with an ask or a stop to send again."""
        return {w.peer for w in self.waiting.values() if w.to_send_again and w.open and w.peer}

    def send_undelivered(self, peer: Peer) -> None:
        """Send again the asks and stops to ``peer`` that were not delivered (NATS's
        no-responders while it was up); after ``give_up_after`` times in a row,
        they fail with ``ConnectionInterrupted`` instead."""
        limit = give_up_after(self._node.cluster)
        for number, waiter in list(self.waiting.items()):
            if waiter.peer != peer or not waiter.to_send_again or not waiter.open:
                continue
            if waiter.undelivered > limit:
                node, incarnation = peer
                waiter.fail(
                    f"node {node!r} ({incarnation}) served none of its actors when it was "
                    f"sent {waiter.undelivered} times, one round apart (it is between "
                    "two connections, or going down)",
                    interrupted=True,
                )
                continue
            self._send_again(number, waiter)

    def _send_again(self, number: int, waiter: _Waiter) -> None:
        assert waiter.resend is not None
        cell, kind, body = waiter.resend
        waiter.sent_at = trio.current_time()
        waiter.to_send_again = False
        reply = self._reply_subject(waiter.peer, number)
        self._node.tells.send(cell, kind, body, reply, waiter.headers)

    def confirmed(self, asked: list[int], held: set[int], peer: Peer) -> None:
        """A confirm round's answer: of the requests ``asked`` about, ``peer`` holds
        those in ``held``. The others that still wait were lost on the way (or
        their answers were): an ask fails with ``ConnectionInterrupted``, a stop is
        sent again."""
        node, incarnation = peer
        for number in asked:
            waiter = self.waiting.get(number)
            if waiter is None or not waiter.open or number in held or waiter.resend is None:
                continue
            if waiter.resend[1] == STOP:
                self._send_again(number, waiter)
            else:
                waiter.fail(
                    f"node {node!r} ({incarnation}) does not hold it: it, or its answer, "
                    "was lost between the nodes (a server or a connection changed while "
                    "it was on its way)",
                    interrupted=True,
                )

    def interrupt(self, peer: Peer, why: str) -> None:
        """The asks and stops waiting on ``peer`` fail with ``ConnectionInterrupted``
        (``why``): it answers no confirm round."""
        for waiter in list(self.waiting.values()):
            if waiter.peer == peer and waiter.resend is not None and waiter.open:
                waiter.fail(why, interrupted=True)

    # --- ended without a reply ----------------------------------------------------

    def refused(self, peer: Peer, why: str) -> int:
        """The server refused this node's messages to ``peer``'s actors: every
        request waiting on it fails with ``NotPermitted`` (``why``); return how
        many."""
        count = 0
        for waiter in list(self.waiting.values()):  # (an ended tell leaves: _groups.py)
            # (a message to a shared name that peer took came on the group's subject,
            # which the server carried: it ends as it would have)
            if waiter.peer == peer and waiter.open and waiter.group is None:
                waiter.refused = True
                waiter.fail(why, interrupted=False)
                count += 1
        return count

    def waiting_on(self, before: float | None = None) -> Iterator[tuple[Peer, float]]:
        """The peers that requests still wait on, each with when it was sent (for
        the silence check; a request that ends meanwhile is skipped); only those
        sent before ``before``, if given."""
        for waiter in list(self.waiting.values()):
            peer = waiter.peer
            if peer is None or not waiter.open:
                continue
            if before is None or waiter.sent_at <= before:
                yield peer, waiter.sent_at

    def peer_down(self, peer: Peer, said: str, sent_up_to: int | None) -> None:
        """``peer`` is down: the requests to it (up to number ``sent_up_to``, if
        given, and every one waiting to be sent again) fail with ``NodeDown``."""
        for number in [n for n, (cell, _) in self._late.items() if cell.peer == peer]:
            del self._late[number]  # (no answer will come)
        # (Chosen first, then failed: an ended tell leaves ``waiting``. A list of the
        # waiters, not of (number, waiter) pairs: R4 fails 1,000 asks here, and a pair
        # each was a third of what this allocated.)
        failing = [
            waiter
            for number, waiter in self.waiting.items()
            if waiter.peer == peer
            # (sent after the news, nothing serves it: NATS will say)
            and (sent_up_to is None or number <= sent_up_to or waiter.to_send_again)
        ]
        for waiter in failing:
            if waiter.reply is not None or waiter.failed:
                continue  # (ended, or ended meanwhile: not waiter.open, inlined)
            # waiter.fail(said, interrupted=False), inlined: the two calls per ask were
            # a fifth of this loop (0.9-1.0 ms against 1.0-1.2 for R4's 1,000 asks,
            # over a real server, benchmarks/node_death.py).
            waiter.failed = said
            waiter.event.set()
            if waiter.group is not None:
                waiter.group.ended()

    def connection_lost(self, why: str) -> None:
        """This node's connection was lost: every request waiting for an answer
        fails with ``ConnectionInterrupted`` (its message, or its answer, may have
        been lost with the socket: it may or may not have been handled) -- but a
        stop, which may be sent twice, is sent again once the connection is back
        (at the next confirm round)."""
        for waiter in list(self.waiting.values()):
            if not waiter.open:
                continue
            if waiter.resend is not None and waiter.resend[1] == STOP:
                waiter.to_send_again = True
            else:
                waiter.fail(why, interrupted=True)

    def close(self) -> None:
        """This node left: every request still waiting ends (asks with
        ``ActorStopped``, stops as done, lookups as not found)."""
        for waiter in list(self.waiting.values()):
            waiter.end()


protect_module(globals())

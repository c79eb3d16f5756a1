r"""Tells from other nodes: delivered in order, tracked until each has *ended* here --
handled, or a dead letter -- and acknowledged as such to their sender.

The sender keeps every tell it sent until this node says it has ended (its link's
window, ``_link.py``), and gives back as ``"in-doubt"`` what was not acknowledged
when this node dies. So an acknowledgement must never run ahead of the handling:
"taken into a mailbox" is not enough, a node killed with a full mailbox would take
those tells with it uncounted.

**Tracking without a cost per tell.** The tells of one message to one actor are a
:class:`Run`: all but the last go the plain way, and the last is queued as a
:class:`~trio_actors._core._envelope.Notice` -- the envelope the serving loop finds
by position, as a timer's tick -- whose end tells the run: handled (its handler
returned, or raised: supervision saw it), or taken back as a dead letter (stranded
by a stop). A mailbox is first in, first out, so when the last tell of a run has
ended, so have the ones before it. Into a *bounded* mailbox every tell of the run
is a notice (a full one may drop any of them, or the oldest, while the one before
is still being handled), and the run ends with the last of them. A tell that is a
dead letter at once (its actor is gone, or it cannot be decoded) has ended when it
arrives -- counted after the runs before it to the same actor.

**Sends.** Tells from ``send`` travel as ``SENDS`` frames: into a full bounded
mailbox each waits for room in its line, with the local ``send``\ s and ``ask``\ s
(the sender's window bounds how many); and while sends wait there, a tell from
another node joins the line too, so that it never overtakes a ``send`` its own node
made before it (a ``"drop_old"`` overflow would put it ahead).

**Acknowledged per actor, cumulatively, per record.** For each sending node this
node keeps the :class:`Inbound` state of its current record (``_link.py``; a new
record from the same node replaces the old): for each actor told, a :class:`Stream`
counting the tells to it that have ended, in order; the newest sequence number
received; and the ranges of sequence numbers it *skipped* (a message with a later
number came first: the ones between were lost on the way, with a NATS server that
died). Within :data:`ACK_EVERY` seconds of a count moving it publishes ``(record, start,
skipped, [(actor, ended), ...])`` -- the counts that moved -- to the sender's ``P.a``
subject; ``start``, the first message the state tracked, tells the sender when this
node has forgotten its record and begun again (it declared the sender down, or it
skipped too much): the sender then gives back what is unacknowledged as in doubt and
starts a new record, never applying counts that began again at zero. So an
actor that is slow, or blocked, holds back the acknowledgement of
its own tells only. A lost acknowledgement is made good by the next, or by a
confirm round (``_confirm.py``), which is answered with every count, after giving
up what was sent before the round and has not come (skipped: if it comes later, it
is delivered, uncounted -- its sender has given it back as in doubt).

**Pools.** A tell to a pool is handed to the pool at once (routed to a worker, or
queued in a balancing pool's shared queue), and has ended, for its sender, then: a
node that dies with a pool's tells queued takes them with it, and a ``send`` into a
full bounded balancing pool meets its overflow policy (said in ``docs/remote.rst``:
not yet tracked).

Bounded: a sender's record has :data:`MAX_SKIPPED` skipped ranges at most (each
takes a server's death, or a forger); one more, and this node forgets the record --
its sender learns it from the next ``start`` and begins a new one.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any, Final

import trio

from .._core._bounded_cell import BoundedCell
from .._core._envelope import Notice
from ..actors._pool._cell import PoolCell
from ._subjects import encode

if TYPE_CHECKING:
    from .._core._cell import ActorCell
    from ._node import Node
    from ._subjects import Peer

__all__ = ["ACK_EVERY", "MAX_SKIPPED", "Inbound", "Run", "Stream", "TakenIn"]

ACK_EVERY: Final = 0.005
"""Seconds between acknowledgements while tells end."""

MAX_SKIPPED: Final = 64
"""Skipped ranges kept per sending record, at most."""

Skipped = list[tuple[int, int]]
"""Ranges (first, last) of sequence numbers a record skipped."""

Counts = list[tuple[int, int]]
"""``(actor, ended)``: of a record's tells to the actor of that export number, the
first ``ended`` have ended here."""

_UNDECODABLE: Final = object()


class Run:
    """The tells of one message to one actor, until they have ended here. It is the
    ``sender`` of the notices it is tracked by: its last tell's (a mailbox is first
    in, first out), or each tell's where the mailbox is bounded (a full one may drop
    any of them, or the oldest)."""

    __slots__ = ("done", "left", "stream", "tells")

    def __init__(self, stream: Stream, tells: int) -> None:
        self.stream = stream
        self.tells = tells
        # Its notices not yet ended, and one more while its message is delivered (a
        # notice may end at once -- dropped by a full mailbox -- before the next of
        # the run is queued): released by :meth:`delivered`.
        self.left = 1
        self.done = False

    def notice_finished(self, notice: Notice | None) -> None:
        """One of its notices ended (handled, failed, or taken back as a dead
        letter); the last one ends the run. Never a checkpoint; called in the
        actor's turn."""
        self.left -= 1
        if not self.left:
            self.done = True
            self.stream.advance()

    def delivered(self) -> None:
        """Its message has been delivered: its notices alone hold it open now."""
        self.notice_finished(None)


class Stream:
    """One record's tells to one actor of this node: how many have ended, in order."""

    __slots__ = ("actor", "ended", "inbound", "pending")

    def __init__(self, inbound: Inbound, actor: int) -> None:
        self.inbound = inbound
        self.actor = actor  # (its export number)
        self.ended = 0
        self.pending: deque[Run] = deque()  # (runs not ended, in order)

    def ended_now(self, tells: int) -> None:
        """``tells`` tells to it ended as they arrived (dead letters, or routed by a
        pool): counted once the runs before them have ended."""
        if self.pending:
            run = Run(self, tells)
            run.done = True
            self.pending.append(run)
        else:
            self.ended += tells
            self.inbound.moved(self.actor)

    def run(self, tells: int) -> Run:
        """A run of ``tells`` tells being delivered now (tracked by notices)."""
        run = Run(self, tells)
        self.pending.append(run)
        return run

    def advance(self) -> None:
        pending = self.pending
        ended = self.ended
        while pending and pending[0].done:
            ended += pending.popleft().tells
        if ended != self.ended:
            self.ended = ended
            self.inbound.moved(self.actor)


class Inbound:
    """This node's state of one sending node's current record."""

    __slots__ = ("changed", "received", "record", "skipped", "start", "streams", "taken_in")

    def __init__(self, taken_in: TakenIn, record: str, start: int) -> None:
        self.taken_in = taken_in
        self.record = record
        # The first message it tracks: its identity in every acknowledgement, so
        # that a sender whose record this node forgot (it declared the sender down,
        # or skipped too much) learns it, and starts a new record.
        self.start = start
        self.received = start - 1  # the newest sequence number received (or skipped)
        self.skipped: Skipped = []
        self.streams: dict[int, Stream] = {}
        # (actors whose count moved since acknowledged: a dict, smaller than a set)
        self.changed: dict[int, None] = {}

    def arrived(self, sequence: int) -> bool | None:
        """A message numbered ``sequence`` arrived: whether it is tracked -- not if it
        came late (after a later one, or after a confirm round gave it up: it was
        counted skipped) or twice; ``None`` if it skips one range too many (the
        caller forgets the record)."""
        if sequence <= self.received:
            return False
        if not self.skip_to(sequence - 1):
            return None
        self.received = sequence
        return True

    def skip_to(self, sequence: int) -> bool:
        """Nothing up to ``sequence`` is taken from now on: what did not come is
        skipped. Returns ``False`` if that is one skipped range too many (the
        caller forgets the record: its sender then starts a new one)."""
        received = self.received
        if sequence <= received:
            return True
        if len(self.skipped) >= MAX_SKIPPED:
            return False
        self.skipped.append((received + 1, sequence))
        self.received = sequence
        self.taken_in.owed()
        return True

    def stream(self, actor: int) -> Stream:
        stream = self.streams.get(actor)
        if stream is None:
            stream = self.streams[actor] = Stream(self, actor)
        return stream

    def moved(self, actor: int) -> None:
        self.changed[actor] = None
        self.taken_in.owed()

    def counts(self) -> Counts:
        """Every actor's count (a confirm round's answer)."""
        return [(actor, stream.ended) for actor, stream in self.streams.items()]


class TakenIn:
    """The tells of other nodes this node takes in, and the acknowledgements owed."""

    __slots__ = ("_ack", "_node", "records")

    def __init__(self, node: Node) -> None:
        self._node = node
        self.records: dict[str, Inbound] = {}  # by the sender's P.u.<node>.<inc> prefix
        self._ack = trio.Event()

    def owed(self) -> None:
        """A count moved: acknowledged within :data:`ACK_EVERY` seconds."""
        self._ack.set()

    async def run(self) -> None:
        """Acknowledge, until cancelled (with the node)."""
        while True:
            await self._ack.wait()
            self._ack = trio.Event()
            await trio.sleep(ACK_EVERY)
            self.send_acks()

    def send_acks(self) -> None:
        """Tell each node whose counts moved since the last time where they are.
        Never a checkpoint; never raises."""
        node = self._node
        me = (node.name, node.incarnation)
        for prefix, inbound in self.records.items():
            if inbound.changed:
                streams = inbound.streams
                counts = [(actor, streams[actor].ended) for actor in inbound.changed]
                inbound.changed.clear()
                body = encode((inbound.record, inbound.start, inbound.skipped, counts))
                node.tells.publish(node.subjects.acks_of(me, prefix), body)

    def confirm(
        self, sender: Peer, prefix: str, record: str, up_to: int
    ) -> tuple[int, Skipped, Counts]:
        """A confirm round of ``sender`` (whose unreachable subjects start with
        ``prefix``): its messages on ``record`` up to ``up_to`` were sent before it;
        what has not come by now is given up (skipped: coming later, it is not
        counted). Returns the record's start, skipped ranges and every actor's
        count (nothing, if the peer table has no room for the sender)."""
        inbound = self.records.get(prefix)
        if inbound is None or inbound.record != record:
            if inbound is None and not self._node.peers.claim(sender):
                return (0, [], [])
            inbound = self.records[prefix] = Inbound(self, record, up_to + 1)
        if not inbound.skip_to(up_to):
            del self.records[prefix]  # (its sender learns it from the next answer)
            return (0, [], [])
        return inbound.start, inbound.skipped, inbound.counts()

    def forget(self, prefix: str) -> None:
        """The sending node is down: nothing more to acknowledge to it."""
        self.records.pop(prefix, None)

    # --- receiving (the connection's reader, in order) ------------------------------

    def receive(
        self,
        body: list[Any],
        reply: str | None,
        record: str,
        sequence: int,
        *,
        sending: bool = False,
    ) -> None:
        """A message of tells (``body``: [export number, path, body] for each),
        numbered ``sequence`` in the sender's ``record``, with ``reply`` its
        unreachable subject; ``sending``: they come from ``send`` -- into a full
        bounded mailbox, each waits for room in line with the local ``send``\\ s
        (its sender's window holds the others back). Never a checkpoint."""
        inbound = self._arrived(reply, record, sequence) if reply else None
        exported = self._node.exports.cells
        items: list[tuple[ActorCell | None, int, str, Any]] = []
        runs: dict[int, int] = {}  # (actor -> its tells in this message)
        last: dict[int, int] = {}  # (actor -> the index of its last tell to queue)
        for number, path, told in body:
            runs[number] = runs.get(number, 0) + 1
            message = self._decoded(number, path, told)
            if message is _UNDECODABLE:
                continue
            cell = exported.get(number)
            if cell is not None and not isinstance(cell, PoolCell):
                last[number] = len(items)
            items.append((cell, number, path, message))
        tracked: dict[int, Run] = {}  # (actor -> its run in this message, if tracked)
        for index, (cell, number, path, message) in enumerate(items):
            if cell is None:
                node = self._node
                ref = node.exports.ref_from_wire(node.name, node.incarnation, path, number)
                node.system.dead_letters.record(ref, message, "stopped")
            elif isinstance(cell, BoundedCell) and cell.accepting:
                # Each tell a notice of its run: a full mailbox may drop any of them
                # (or the oldest). A send waits for room in line; so does a tell
                # while sends wait there (they may be its own node's, sent before).
                run = tracked.get(number)
                if run is None and inbound is not None:
                    run = tracked[number] = inbound.stream(number).run(runs[number])
                if run is not None:
                    run.left += 1  # (this notice's)
                notice = Notice(cell, message, run)
                if (sending or cell.senders) and cell.is_full():
                    assert cell.senders is not None
                    cell.senders.add(notice)
                else:
                    cell.queue_tick(notice)  # (a full one: its policy)
            elif inbound is not None and last.get(number) == index and cell.accepting:
                run = tracked[number] = inbound.stream(number).run(runs[number])
                run.left += 1  # (its last tell's notice)
                cell.queue_tick(Notice(cell, message, run))
            else:
                cell.tell_forwarded(message)  # (nobody to raise MailboxFull to: a dead letter)
        if inbound is not None:
            for number, tells in runs.items():
                run = tracked.get(number)
                if run is None:
                    inbound.stream(number).ended_now(tells)
                else:
                    run.delivered()

    def _arrived(self, reply: str, record: str, sequence: int) -> Inbound | None:
        """The record a message of tells from the node of ``reply`` is tracked in;
        ``None`` if it is not tracked: late or twice, not a node's reply subject, or
        from a node the peer table has no room for (taken in, never acknowledged)."""
        if sequence < 1:
            return None  # (not a record's message: numbers start at 1)
        prefix = reply.rpartition(".")[0]
        inbound = self.records.get(prefix)
        if inbound is None or inbound.record != record:
            if inbound is None:
                node = self._node
                sender = node.frames.tell_sender(reply)
                if sender is None:
                    return None  # (not a node's tells: nobody to acknowledge)
                if not node.peers.claim(sender):
                    node.refused(
                        "over_limit", "tells from a node the peer table has no room for", reply
                    )
                    return None
            inbound = self.records[prefix] = Inbound(self, record, sequence)
        tracked = inbound.arrived(sequence)
        if tracked is None:  # (one skipped range too many: forgotten)
            del self.records[prefix]
        return inbound if tracked else None

    def _decoded(self, number: int, path: str, body: Any) -> Any:
        """A tell's message, or ``_UNDECODABLE`` (then it is a dead letter
        "undecodable", and counted as bad input)."""
        node = self._node
        try:
            return node.codec.decode(body)
        except Exception as error:  # (a type this node does not register, pickle, ...)
            node.refused("tells", f"a tell to {path} could not be decoded: {error}", node.subject)
            kept = node.undecodable.kept(body)  # (a bounded prefix of its bytes)
            ref = node.exports.ref_from_wire(node.name, node.incarnation, path, number)
            node.system.dead_letters.record(ref, kept, "undecodable")
            return _UNDECODABLE

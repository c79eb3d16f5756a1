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

**Acknowledged per actor, by sequence mark, per record.** For each sending node
this node keeps the :class:`Inbound` state of its current record (``_link.py``; a
new record from the same node replaces the old): the sequence number up to which
every message was received (:attr:`Inbound.received`), the ranges of sequence
numbers it *skipped* (given up: lost on the way, with a NATS server that died), and
for each actor with tells *pending* here -- not yet ended -- a :class:`Stream` of
its runs. An actor's *mark* is the message up to which every tell to it has ended:
the one before its oldest pending run, or ``received`` when none is pending
(:meth:`Inbound.mark`). Within :data:`ACK_EVERY` seconds of a mark moving this node
publishes ``(record, start, skipped, settled, [(actor, mark), ...])`` -- the marks
that moved, :data:`MARKS_PER_ACK` at most a message -- to the sender's ``P.a``
subject (``settled``: every tell tracked up to there has ended, said when nothing is
pending; ``0`` otherwise). ``start``, the first message the state tracked, tells the
sender when this node has forgotten its record and begun again (it declared the
sender down, or it skipped too much): the sender then gives back what is
unacknowledged from before it as in doubt. So an actor that is slow, or blocked,
holds back the acknowledgement of its own tells only.

**Nothing kept per actor once its tells have ended**: a stream goes with its last
pending run, at once -- its mark is ``received`` from then on, so nothing needs
remembering (``_link.py`` says why this is exact). A record's per-actor state is
bounded by its actors with tells pending; an actor that stops takes those back as
dead letters, and with them its stream. A lost acknowledgement is made good by the
next, or by a confirm round (``_confirm.py``): it names the actors the sender has
waited on longest (:data:`~._confirm.MAX_NUMBERS` at most), and is answered, after
giving up what was sent before it and has not come (skipped: coming later, it is
delivered untracked -- its sender gave it back in doubt), with ``settled`` and
those actors' marks: small, however many actors the record touched.

**In order across a gap.** A message that comes ahead of one sent before it is
*held*, not delivered: the earlier one bounced -- its node was between two
connections, NATS answered no-responders -- and its sender sends it again at its
next confirm round (``_tells.py``), or it was lost on the way. The held messages are
delivered, in order, once the gap fills; or once the gap is given up (skipped): by
the sender's confirm round (which asks about every message sent before it, after
sending the bounced ones again), after :func:`hold_for` seconds with no round, when
the sender is declared down, or at once for the oldest gaps when the node holds
``InputLimits.held_bytes`` of such tells. So tells to an actor are handled in the
order they were sent (T2) across a reconnect, as far as they are handled at all.

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
from ._confirm import give_up_after
from ._subjects import encode

if TYPE_CHECKING:
    from .._cluster import Cluster
    from .._core._cell import ActorCell
    from ._node import Node
    from ._subjects import Peer

__all__ = [
    "ACK_EVERY",
    "MARKS_PER_ACK",
    "MAX_SKIPPED",
    "Inbound",
    "Run",
    "Stream",
    "TakenIn",
    "hold_for",
]

ACK_EVERY: Final = 0.005
"""Seconds between acknowledgements while tells end."""

MAX_SKIPPED: Final = 64
"""Skipped ranges kept per sending record, at most."""

Skipped = list[tuple[int, int]]
"""Ranges (first, last) of sequence numbers a record skipped."""

MARKS_PER_ACK: Final = 4096
"""``(actor, mark)`` pairs in one acknowledgement at most (more moved: several
acknowledgements). At most 19 bytes each in msgpack, so an acknowledgement stays
under 80 kB -- far under NATS's ``max_payload``."""

Marks = list[tuple[int, int]]
"""``(actor, mark)``: every tell of a record to the actor of that export number, in
a message numbered ``mark`` or less that this node tracked, has ended here."""

_UNDECODABLE: Final = object()


def hold_for(cluster: Cluster) -> float:
    """Seconds a message of tells that came ahead of a gap is held at most before
    the gap is given up here (as many intervals as its sender's confirm rounds
    leave unanswered before giving up: it gives the gap up first, while it runs)."""
    return give_up_after(cluster) * cluster.heartbeat


class Run:
    """The tells of one message to one actor, until they have ended here. It is the
    ``sender`` of the notices it is tracked by: its last tell's (a mailbox is first
    in, first out), or each tell's where the mailbox is bounded (a full one may drop
    any of them, or the oldest)."""

    __slots__ = ("done", "left", "sequence", "stream")

    def __init__(self, stream: Stream, sequence: int) -> None:
        self.stream = stream
        self.sequence = sequence  # (its message's, in the record)
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
    """One record's tells to one actor of this node, while some are *pending* (not
    ended): its runs, in order. It lives only as long as that -- its
    :class:`Inbound` forgets it with its last run (:meth:`Inbound.mark` says why
    nothing is lost)."""

    __slots__ = ("actor", "inbound", "pending")

    def __init__(self, inbound: Inbound, actor: int) -> None:
        self.inbound = inbound
        self.actor = actor  # (its export number)
        self.pending: deque[Run] = deque()  # (runs not ended, in order; never empty)

    def run(self) -> Run:
        """A run of the message being delivered now (numbered ``received``: tracked
        messages are delivered in order), tracked by notices."""
        run = Run(self, self.inbound.received)
        self.pending.append(run)
        return run

    def advance(self) -> None:
        pending = self.pending
        if not pending[0].done:
            return
        while pending and pending[0].done:
            pending.popleft()
        inbound = self.inbound
        if not pending and inbound.streams.get(self.actor) is self:
            del inbound.streams[self.actor]  # (nothing pending: its mark is received)
        inbound.moved(self.actor)


class Inbound:
    """This node's state of one sending node's current record."""

    __slots__ = (
        "ahead",
        "changed",
        "held_since",
        "prefix",
        "received",
        "record",
        "skipped",
        "start",
        "streams",
        "taken_in",
    )

    def __init__(self, taken_in: TakenIn, prefix: str, record: str, start: int) -> None:
        self.taken_in = taken_in
        self.prefix = prefix  # (the sender's P.u.<node>.<incarnation>: its key)
        self.record = record
        # The first message it tracks: its identity in every acknowledgement, so
        # that a sender whose record this node forgot (it declared the sender down,
        # or skipped too much) learns it, and starts a new record.
        self.start = start
        # The newest sequence number up to which every message was received or
        # skipped: the next one is delivered at once, a later one is held.
        self.received = start - 1
        self.skipped: Skipped = []
        # The actors with tells pending here (not ended), by export number: no
        # entry for the others (their mark is ``received``).
        self.streams: dict[int, Stream] = {}
        # (actors whose mark moved since acknowledged: a dict, smaller than a set)
        self.changed: dict[int, None] = {}
        # The messages that came ahead of a gap, by sequence number: (tells,
        # sending, bytes); and since when the oldest of them is held.
        self.ahead: dict[int, tuple[list[Any], bool, int]] = {}
        self.held_since = 0.0

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

    def ended_now(self, actor: int) -> None:
        """The tells to ``actor`` in the message being delivered ended as they
        arrived (dead letters, or routed by a pool): they end after the runs before
        them to it."""
        stream = self.streams.get(actor)
        if stream is None:
            self.moved(actor)
        else:
            run = Run(stream, self.received)
            run.done = True
            stream.pending.append(run)

    def moved(self, actor: int) -> None:
        self.changed[actor] = None
        self.taken_in.owed()

    def mark(self, actor: int) -> int:
        """Up to which message every tell to ``actor`` tracked here has ended: up to
        the one before its oldest pending run; with none pending, up to
        :attr:`received` -- every message up to there was tracked when it was
        delivered, or skipped, and a tracked run that has not ended keeps its
        stream. So a stream forgotten loses nothing, and one begun again later
        needs no count carried over: its sender keeps no count either."""
        stream = self.streams.get(actor)
        return self.received if stream is None else stream.pending[0].sequence - 1

    def settled(self) -> int:
        """Up to which message every tell tracked here has ended (every actor's)."""
        streams = self.streams
        if not streams:
            return self.received
        return min(stream.pending[0].sequence for stream in streams.values()) - 1


class TakenIn:
    """The tells of other nodes this node takes in, and the acknowledgements owed."""

    __slots__ = ("_ack", "_node", "held", "records")

    def __init__(self, node: Node) -> None:
        self._node = node
        self.records: dict[str, Inbound] = {}  # by the sender's P.u.<node>.<inc> prefix
        self._ack = trio.Event()
        self.held = 0  # (bytes of tells held ahead of a gap, all records together)

    def owed(self) -> None:
        """A mark moved: acknowledged within :data:`ACK_EVERY` seconds."""
        self._ack.set()

    async def run(self) -> None:
        """Acknowledge, and give up the gaps held too long, until cancelled (with
        the node)."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._give_up_overdue)
            while True:
                await self._ack.wait()
                self._ack = trio.Event()
                await trio.sleep(ACK_EVERY)
                self.send_acks()

    async def _give_up_overdue(self) -> None:
        """Every heartbeat interval, give up the gaps held longer than
        :func:`hold_for` (a backstop: while its sender runs, its confirm round
        gives a gap up within two intervals)."""
        cluster = self._node.cluster
        while True:
            await trio.sleep(cluster.heartbeat)
            since = trio.current_time() - hold_for(cluster)
            for inbound in list(self.records.values()):
                if inbound.ahead and inbound.held_since <= since:
                    self._give_up(inbound, max(inbound.ahead))

    def send_acks(self) -> None:
        """Tell each node whose marks moved since the last time where they are.
        Never a checkpoint; never raises."""
        node = self._node
        me = (node.name, node.incarnation)
        for prefix, inbound in self.records.items():
            if inbound.changed:
                marks = [(actor, inbound.mark(actor)) for actor in inbound.changed]
                inbound.changed.clear()
                # (settled: cheap only when nothing is pending; 0 says nothing)
                settled = 0 if inbound.streams else inbound.received
                subject = node.subjects.acks_of(me, prefix)
                for at in range(0, len(marks), MARKS_PER_ACK):
                    part = marks[at : at + MARKS_PER_ACK]
                    body = encode((inbound.record, inbound.start, inbound.skipped, settled, part))
                    node.tells.publish(subject, body)

    def confirm(
        self, sender: Peer, prefix: str, record: str, up_to: int, actors: list[int]
    ) -> tuple[int, Skipped, int, Marks]:
        """A confirm round of ``sender`` (whose unreachable subjects start with
        ``prefix``): its messages on ``record`` up to ``up_to`` were sent before it;
        what has not come by now is given up (skipped: coming later, it is not
        counted). Returns the record's start, skipped ranges, settled mark and the
        marks of the ``actors`` it asks about (those it waits on longest: as many
        as it names, ``_confirm.MAX_NUMBERS`` at most) -- nothing, if the peer
        table has no room for the sender."""
        inbound = self.records.get(prefix)
        if inbound is None or inbound.record != record:
            if inbound is None and not self._node.peers.claim(sender):
                return (0, [], 0, [])
            inbound = self._begin(prefix, record, up_to + 1)
        if not self._give_up(inbound, up_to):
            return (0, [], 0, [])  # (forgotten: its sender learns it from the next answer)
        marks = [(actor, inbound.mark(actor)) for actor in actors]
        return inbound.start, inbound.skipped, inbound.settled(), marks

    def forget(self, prefix: str) -> None:
        """The sending node is down: nothing more to acknowledge to it (what it held
        of its tells is delivered)."""
        inbound = self.records.get(prefix)
        if inbound is not None:
            self._forget(inbound)

    def give_up_all(self) -> None:
        """This node leaves: what it holds of any node's tells is delivered (its
        actors have stopped: dead letters here), its gaps given up. Never a
        checkpoint."""
        for inbound in list(self.records.values()):
            if inbound.ahead:
                self._give_up(inbound, max(inbound.ahead))

    def _begin(self, prefix: str, record: str, start: int) -> Inbound:
        """A new record of the sender of ``prefix``, tracked from ``start`` on (the
        one it replaces gives up what it held)."""
        old = self.records.get(prefix)
        if old is not None and old.ahead:
            self._give_up(old, max(old.ahead))
        inbound = self.records[prefix] = Inbound(self, prefix, record, start)
        return inbound

    def _forget(self, inbound: Inbound) -> None:
        """Stop tracking ``inbound``'s record; what it held is delivered, untracked."""
        if self.records.get(inbound.prefix) is inbound:
            del self.records[inbound.prefix]
        for sequence in sorted(inbound.ahead):
            self._deliver(None, *self._unhold(inbound, sequence))

    # --- held ahead of a gap -------------------------------------------------------

    def _hold(self, inbound: Inbound, sequence: int, tells: list[Any], sending: bool) -> None:
        """A message that came ahead of one sent before it -- that one bounced, and
        its sender sends it again, or it was lost on the way: held, to be delivered
        in order, until the gap fills, its sender's confirm round gives it up, or
        :func:`hold_for` passes. Past ``InputLimits.held_bytes`` the oldest gaps
        are given up at once."""
        if not inbound.ahead:
            inbound.held_since = trio.current_time()
        size = sum(len(told) for _number, _path, told in tells)
        inbound.ahead[sequence] = (tells, sending, size)
        self.held += size
        limit = self._node.cluster.limits.held_bytes
        while self.held > limit:
            holding = (
                inbound
                if inbound.ahead
                else max(self.records.values(), key=lambda other: len(other.ahead))
            )
            self._give_up(holding, min(holding.ahead))

    def _unhold(self, inbound: Inbound, sequence: int) -> tuple[list[Any], bool]:
        tells, sending, size = inbound.ahead.pop(sequence)
        self.held -= size
        return tells, sending

    def _deliver_held(self, inbound: Inbound) -> None:
        """Deliver the held messages that are next, in order."""
        ahead = inbound.ahead
        while inbound.received + 1 in ahead:
            inbound.received += 1
            self._deliver(inbound, *self._unhold(inbound, inbound.received))
        if ahead:
            inbound.held_since = trio.current_time()  # (the gap after those: a new one)

    def _give_up(self, inbound: Inbound, up_to: int) -> bool:
        """What has not come of ``inbound``'s record up to ``up_to`` never will:
        skipped; what it held up to there, and what is next after it, delivered in
        order. Returns ``False`` if that skips one range too many: the record is
        forgotten (its sender learns it, and starts a new one)."""
        for sequence in sorted(s for s in inbound.ahead if s <= up_to):
            if not inbound.skip_to(sequence - 1):
                self._forget(inbound)
                return False
            inbound.received = sequence
            self._deliver(inbound, *self._unhold(inbound, sequence))
        if not inbound.skip_to(up_to):
            self._forget(inbound)
            return False
        self._deliver_held(inbound)
        return True

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
        inbound = self._record_of(reply, record, sequence) if reply else None
        if inbound is None or sequence <= inbound.received or sequence in inbound.ahead:
            self._deliver(None, body, sending)  # (not tracked; or late, or twice)
        elif sequence > inbound.received + 1:
            self._hold(inbound, sequence, body, sending)  # (ahead of a gap)
        else:
            inbound.received = sequence
            self._deliver(inbound, body, sending)
            if inbound.ahead:
                self._deliver_held(inbound)

    def _deliver(self, inbound: Inbound | None, body: list[Any], sending: bool) -> None:
        """Deliver a message of tells, tracked in ``inbound`` (``None``: untracked)."""
        exported = self._node.exports.cells
        items: list[tuple[ActorCell | None, int, str, Any]] = []
        runs: dict[int, None] = {}  # (the actors told in this message)
        last: dict[int, int] = {}  # (actor -> the index of its last tell to queue)
        for number, path, told in body:
            runs[number] = None
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
                    run = tracked[number] = inbound.stream(number).run()
                if run is not None:
                    run.left += 1  # (this notice's)
                notice = Notice(cell, message, run)
                if (sending or cell.senders) and cell.is_full():
                    assert cell.senders is not None
                    cell.senders.add(notice)
                else:
                    cell.queue_tick(notice)  # (a full one: its policy)
            elif inbound is not None and last.get(number) == index and cell.accepting:
                run = tracked[number] = inbound.stream(number).run()
                run.left += 1  # (its last tell's notice)
                cell.queue_tick(Notice(cell, message, run))
            else:
                cell.tell_forwarded(message)  # (nobody to raise MailboxFull to: a dead letter)
        if inbound is not None:
            for number in runs:
                run = tracked.get(number)
                if run is None:
                    inbound.ended_now(number)
                else:
                    run.delivered()

    def _record_of(self, reply: str, record: str, sequence: int) -> Inbound | None:
        """The record a message of tells from the node of ``reply`` is tracked in
        (a new one: from ``sequence`` on); ``None`` if it is not tracked: not a
        record's message, not a node's reply subject, or from a node the peer
        table has no room for (taken in, never acknowledged)."""
        if sequence < 1:
            return None  # (not a record's message: numbers start at 1)
        prefix = reply.rpartition(".")[0]
        inbound = self.records.get(prefix)
        if inbound is not None and inbound.record == record:
            return inbound
        if inbound is None:
            node = self._node
            sender = node.frames.tell_sender(reply)
            if sender is None:
                return None  # (not a node's tells: nobody to acknowledge)
            if not node.peers.claim(sender):
                why = "tells from a node the peer table has no room for"
                node.refused("over_limit", why, reply)
                return None
        return self._begin(prefix, record, sequence)

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

r"""A sending node's record as this node tracks it: runs, streams, marks and gaps
(``_taken_in.py`` takes the tells in and acknowledges them; ``_link.py`` is the
sender's side).

**Tracking without a cost per tell.** The tells of one message to one actor are a
:class:`Run`: all but the last go the plain way, and the last is queued as a
:class:`~trio_actors._core._envelope.Notice` -- the envelope the serving loop finds
by position, as a timer's tick -- whose end tells the run: handled (its handler
returned, or raised: supervision saw it), or taken back as a dead letter (stranded
by a stop). A mailbox is first in, first out, so when the last tell of a run has
ended, so have the ones before it. Into a *bounded* mailbox every tell of the run
is a notice (a full one may drop any of them, or the oldest, while the one before
is still being handled), and so is every tell to a pool (its workers end them in
any order); the run ends with the last of them. A tell that is a
dead letter at once (its actor is gone, or it cannot be decoded) has ended when it
arrives -- counted after the runs before it to the same actor.

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

Bounded: a sender's record has :data:`MAX_SKIPPED` skipped ranges at most (each
takes a server's death, or a forger); one more, and this node forgets the record --
its sender learns it from the next ``start`` and begins a new one.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any, Final

from .._interrupts import protect_module

if TYPE_CHECKING:
    from .._core._envelope import Notice
    from ._taken_in import TakenIn

__all__ = ["MAX_SKIPPED", "UNTRACKED", "Inbound", "Marks", "Run", "Skipped", "Stream"]

MAX_SKIPPED: Final = 64
"""Skipped ranges kept per sending record, at most."""

Skipped = list[tuple[int, int]]
"""Ranges (first, last) of sequence numbers a record skipped."""

Marks = list[tuple[int, int]]
"""``(actor, mark)``: every tell of a record to the actor of that export number, in
a message numbered ``mark`` or less that this node tracked, has ended here."""


class Run:
    """The tells of one message to one actor, until they have ended here. It is the
    ``sender`` of the notices it is tracked by: its last tell's (a mailbox is first
    in, first out), or each tell's where the mailbox is bounded (a full one may drop
    any of them, or the oldest) or the actor is a pool (its workers end them in any
    order)."""

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


class _Untracked:
    """The sender of the notices of tells taken in untracked (no record: nobody to
    acknowledge to), into a bounded mailbox or a pool: told of their end, it has
    nothing to count. They need a sender all the same -- a notice without one is
    the runtime's own (a death watch's ``Terminated``), which ``"drop_old"`` never
    drops and an unwatch withdraws."""

    __slots__ = ()

    def notice_finished(self, notice: Notice | None) -> None:
        """Nothing to count. Never a checkpoint."""


UNTRACKED: Final = _Untracked()
"""The sender of every untracked tell's notice."""


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
        arrived (dead letters: the actor is gone, or they could not be decoded):
        they end after the runs before them to it."""
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


protect_module(globals())

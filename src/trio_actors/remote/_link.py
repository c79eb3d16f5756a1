"""One record of this node's tells to another node: the window of tells sent and not
yet acknowledged, and what became of each.

A node's tells to a peer (one incarnation of another node) travel on a *link*, one
*record* at a time: a new record once the peer table has declared the peer down and
it is told again (``_peers.py``), so that nothing of an old record -- its numbers,
its acknowledgements, its bounces -- is ever charged to a new one. Each message of
tells sent on a record gets the record's next *sequence* number (1, 2, 3, ...,
carried in the message's frame: ``_tells.py``), and the message is kept, with its
tells themselves, in the record's **window** until the fate of each tell is known:

==================  ==============================================================
what happens        the tells
==================  ==============================================================
acknowledged        each has ended on the receiving node -- handled there, or a
                    dead letter there. The receiver acknowledges per actor, by
                    sequence mark: "your tells on this record to actor *e* in
                    messages up to *m* have ended" (below, and ``_taken_in.py``);
                    so an actor that is slow, or blocked, holds back the
                    acknowledgement of its own tells only
no-responders       nothing served the node: never delivered. While the peer is
                    up (between two connections) the message stays, and is sent
                    again at the next confirm round; otherwise, or if it bounced
                    the last time it was sent when given back: dead letters
                    ``"unreachable"`` here
refused             the NATS server refused them (permissions): dead letters
                    ``"refused"`` here
given back          the receiver died, was declared down, skipped the message (it
                    never arrived: a server between them died), or a confirm round
                    found it lost -- dead letters ``"in-doubt"`` here, **with the
                    message**: it may or may not have been handled
==================  ==============================================================

Nothing else takes a tell out of the window, so a tell's fate is always exactly one
of these, and known to its sender. The window is also the link's flow control, as
Erlang's distribution buffer is a connection's: ``send`` to any actor of the peer
waits while :attr:`Link.in_window` is at :data:`WINDOW` tells
(:meth:`Link.wait_for_room`); a ``tell``, which never waits, is *held* instead
(:attr:`Link.held`, not sent, at most :data:`HELD` tells) and sent, in order, as
the window frees -- past that it fails (``_tells.py``): memory is bounded on both
nodes whatever the sender does.

Per actor, the tells of one message to it are a *run*: the receiver ends a run all
at once (it tracks the run's last tell). **Acknowledged by sequence marks.** The
receiver does not count tells; it says *up to which message* an actor's runs have
ended -- ``(actor, mark)``: "every tell of this record to that actor in a message
numbered ``mark`` or less, that I tracked, has ended here" -- and, for all actors at
once, a *settled* mark: "every tell I tracked in a message numbered ``settled`` or
less has ended" (``0``: no such claim). The sender keeps, per actor, only the
sequence numbers of its runs in the window (:attr:`Link.streams`), and drops an
actor's entry when its last run leaves the window (acknowledged, or taken out); so
both sides keep per-actor state only while tells to that actor are in flight, and a
long-lived link to a node whose actors come and go stays small.

Why this is exact (each tell acknowledged only once it has ended, and at most once):

1. *Every mark is true when said, and stays true*: ended is for good. A stale one
   (overtaken, or from before a stream was pruned) says less, never something false:
   so the sender needs no memory of what was said before, no count to subtract
   from, and nothing can be "re-applied".
2. *A tracked message is every message the receiver did not skip.* The receiver
   delivers a record's messages in sequence order (holding those ahead of a gap),
   and tracks each on its first delivery; so when it says a mark ``m``, every
   message numbered ``start`` .. ``m`` was tracked there or is in a skipped range --
   and every acknowledgement carries the record's ``start`` and *all* its skipped
   ranges (at most ``MAX_SKIPPED``; one more and the receiver begins again, with a
   new ``start``). The sender applies those first (:meth:`Link.began_again`, and
   the skipped messages given back in doubt), so every run still in the window at
   or below a mark is one the mark speaks of.
3. *A run leaves the window once*: acknowledging pops it from its actor's queue and
   its message's open actors; taking a message out of the window (given back,
   bounced, refused) removes its runs from the queues too.

So the receiver may forget an actor the moment nothing of it is pending: what it
would have said of the actor is then the record's ``received`` (``_taken_in.py``).

Never a checkpoint, except :meth:`Link.wait_for_room`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any, Final

import trio

from .._interrupts import protect_module

if TYPE_CHECKING:
    from ._remote_cell import RemoteCell

__all__ = ["HELD", "WINDOW", "Held", "Link", "Marks", "Message", "Sent", "Told"]

WINDOW: Final = 4096
"""Tells sent on one link and not yet acknowledged, at most, before ``send`` to an
actor of its node waits for room, and a ``tell`` is held (a ``tell`` never waits;
it may pass the window by the tells of one message, :data:`~._outbox.TELLS_PER_MESSAGE`)."""

HELD: Final = 131_072
"""Tells held on one link past its window, at most: a burst of a hundred thousand
tells (R2) is held, not refused; one more meets the target's overflow policy at the
sender (``_tells.py``)."""

Told = tuple["RemoteCell", Any, bytes]
"""A tell: its recipient, its message (kept for a dead letter) and its body."""

Sent = tuple[int, list[Told]]
"""Tells taken out of a window: the number of their message in this node's sequence
(its reply subject's, which a no-responders answer names), and the tells."""

Marks = Iterable[tuple[int, int]]
"""``(actor, mark)`` pairs: every tell of a record to the actor of that export
number, in a message numbered ``mark`` or less that the receiving node tracked, has
ended there."""


class Message:
    """A message of tells in a window."""

    __slots__ = ("kind", "number", "open", "tells")

    def __init__(self, number: int, tells: list[Told], kind: int) -> None:
        self.number = number  # (in this node's sequence)
        self.tells = tells
        self.kind = kind  # (TELL, or SENDS: from ``send``)
        self.open: dict[int, int] = {}  # (actor -> its tells here not yet acknowledged)
        for cell, _message, _body in tells:
            self.open[cell.eid] = self.open.get(cell.eid, 0) + 1

    def unended(self) -> Sent:
        """Its tells not acknowledged."""
        open_ = self.open
        return (self.number, [told for told in self.tells if told[0].eid in open_])


class Held:
    """The tells a link holds past its window, not sent yet, in order -- and how many
    of them are for each actor (so that finding an actor's is free when it has
    none). Never a checkpoint."""

    __slots__ = ("by_actor", "tells")

    def __init__(self) -> None:
        self.tells: deque[Told] = deque()
        self.by_actor: dict[int, int] = {}  # (export number -> its tells here)

    def __len__(self) -> int:
        return len(self.tells)

    def __getitem__(self, index: int) -> Told:
        return self.tells[index]

    def append(self, told: Told) -> None:
        self.tells.append(told)
        eid = told[0].eid
        self.by_actor[eid] = self.by_actor.get(eid, 0) + 1

    def popleft(self) -> Told:
        told = self.tells.popleft()
        self._gone(told[0].eid)
        return told

    def _gone(self, eid: int, count: int = 1) -> None:
        left = self.by_actor[eid] - count
        if left:
            self.by_actor[eid] = left
        else:
            del self.by_actor[eid]

    def oldest_of(self, cell: RemoteCell) -> Told | None:
        """Take out the oldest tell held for ``cell``'s actor (``None``: none is)."""
        if cell.eid not in self.by_actor:
            return None
        for index, told in enumerate(self.tells):  # (it has one: found)
            if told[0].eid == cell.eid:
                del self.tells[index]
                self._gone(cell.eid)
                return told
        raise AssertionError("a count of held tells without its tells")  # pragma: no cover

    def all_of(self, cell: RemoteCell) -> list[Told]:
        """Take out every tell held for ``cell``'s actor, in order."""
        count = self.by_actor.pop(cell.eid, 0)
        if not count:
            return []
        if count == len(self.tells):
            taken = list(self.tells)
            self.tells.clear()
            return taken
        taken, kept = [], deque[Told]()
        for told in self.tells:
            (taken if told[0].eid == cell.eid else kept).append(told)
        self.tells = kept
        return taken

    def clear(self) -> list[Told]:
        """Take out every tell held, in order."""
        taken = list(self.tells)
        self.tells.clear()
        self.by_actor.clear()
        return taken


class Link:
    """One record of this node's tells to one peer: its window, and its runs per actor.

    Attributes:
        record: its name on the wire (the receiver acknowledges per record).
        sequence: the sequence number of the last message sent on it.
        window: the messages sent and not yet acknowledged, by sequence number
            (in order).
        in_window: the tells in :attr:`window`.
        told, acked, bounced, in_doubt: tells sent on it; acknowledged; come back
            ``"unreachable"`` or ``"refused"``; given back ``"in-doubt"``.
        closed: its peer was declared down: nothing more is sent on it (the next
            tell makes a new record).
        held: tells past the window, not sent yet, in order (at most
            :data:`HELD`): sent as acknowledgements free the window (:class:`Held`).
    """

    __slots__ = (
        "_waiting",
        "acked",
        "bounced",
        "closed",
        "held",
        "in_doubt",
        "in_window",
        "record",
        "sequence",
        "skips_applied",
        "start",
        "streams",
        "told",
        "window",
    )

    def __init__(self, record: str) -> None:
        self.record = record
        self.sequence = 0
        self.window: dict[int, Message] = {}
        # Per actor (its export number): the sequence numbers of its runs in the
        # window, in order; no entry for an actor with none.
        self.streams: dict[int, deque[int]] = {}
        self.in_window = 0
        self.told = 0
        self.acked = 0
        self.bounced = 0
        self.in_doubt = 0
        self.closed = False
        # The first message the receiver tracks of this record (its acknowledgements
        # say; ``None`` before the first): another one means it began again.
        self.start: int | None = None
        self.skips_applied = 0  # (the receiver's skipped ranges applied: it only adds)
        self._waiting: deque[trio.Event] = deque()  # (the sends waiting for room, in order)
        self.held = Held()

    def __repr__(self) -> str:
        return (
            f"<Link {self.record}: told {self.told}, in window {self.in_window}, held "
            f"{len(self.held)}, acked {self.acked}, bounced {self.bounced}, in doubt "
            f"{self.in_doubt}>"
        )

    @property
    def full(self) -> bool:
        return self.in_window >= WINDOW

    def has_room(self, more: int = 0) -> bool:
        """Whether one more tell fits in the window, beside ``more`` about to be
        sent (waiting in the outbox)."""
        return self.in_window + more < WINDOW

    def first(self) -> int:
        """The sequence number of the record's oldest message not yet acknowledged
        (or of the next one): what a receiver that begins this record must wait for
        (``_taken_in.py``: a message sent before it may have bounced, and come again)."""
        return next(iter(self.window), self.sequence + 1)

    def sent(self, number: int, tells: list[Told], kind: int) -> int:
        """A message of ``tells`` of ``kind`` (``number`` in the node's sequence) was
        sent on this record: kept in the window. Returns its sequence number in the
        record."""
        self.sequence = sequence = self.sequence + 1
        message = self.window[sequence] = Message(number, tells, kind)
        streams = self.streams
        for actor in message.open:
            runs = streams.get(actor)
            if runs is None:
                runs = streams[actor] = deque()
            runs.append(sequence)
        self.in_window += len(tells)
        self.told += len(tells)
        return sequence

    def acknowledged(
        self, skipped: Sequence[tuple[int, int]], settled: int, marks: Marks
    ) -> tuple[list[int], list[Sent]]:
        """The receiver's acknowledgement: the messages in the ``skipped`` ranges
        (first, last) never arrived there; every tell it tracked in a message up to
        ``settled`` has ended, and to each actor of ``marks``, every one up to its
        mark (the module docstring says why that is exact). Returns the numbers of
        the messages now wholly acknowledged (out of the window), and the skipped
        ones' tells (out of the window, to give back as in doubt: they may yet
        arrive, late, by another route -- the receiver then handles them,
        untracked)."""
        window = self.window
        given_back: list[Sent] = []
        for first, last in skipped[self.skips_applied :]:  # (each range once)
            for sequence in [s for s in window if first <= s <= last]:
                given_back.append(self._remove(sequence))
        self.skips_applied = len(skipped)
        numbers: list[int] = []
        acked = 0
        streams = self.streams
        for actor, mark in marks:
            runs = streams.get(actor)
            while runs and runs[0] <= mark:
                acked += self._ended(runs.popleft(), actor, numbers)
            if runs is not None and not runs:
                del streams[actor]
        while window and (sequence := next(iter(window))) <= settled:
            for actor in list(window[sequence].open):
                runs = streams[actor]
                runs.popleft()  # (its oldest run: every one before has left the window)
                if not runs:
                    del streams[actor]
                acked += self._ended(sequence, actor, numbers)
        self.acked += acked
        self.in_window -= acked
        self._freed()
        return numbers, given_back

    def _ended(self, sequence: int, actor: int, numbers: list[int]) -> int:
        """``actor``'s run in message ``sequence`` is acknowledged (already out of
        :attr:`streams`): the message leaves the window with its last run (its
        number added to ``numbers``). Returns the run's tells."""
        message = self.window[sequence]
        tells = message.open.pop(actor)
        if not message.open:
            del self.window[sequence]
            numbers.append(message.number)
        return tells

    def waited_on(self, at_most: int) -> list[int]:
        """The actors whose runs have waited longest in the window, at most
        ``at_most`` of them, oldest first (a confirm round asks for their marks)."""
        actors: dict[int, None] = {}
        for message in self.window.values():
            for actor in message.open:
                actors[actor] = None
                if len(actors) >= at_most:
                    return list(actors)
        return list(actors)

    def began_again(self, start: int) -> list[Sent]:
        """The receiver tracks this record from message ``start`` on (its first
        acknowledgement says so; a later one, that it forgot the record and began
        again), its skipped ranges from none: the messages before ``start`` still
        in the window are taken out (returned, to give back as in doubt: they never
        came, or their fate is unknown)."""
        self.start = start
        self.skips_applied = 0
        return [self._remove(s) for s in [s for s in self.window if s < start]]

    def take(self, sequence: int) -> Sent | None:
        """Take one message out of the window (it bounced, was refused, was lost):
        its tells not acknowledged, or ``None`` if it is not there (any more)."""
        if sequence not in self.window:
            return None
        return self._remove(sequence)

    def take_all(self) -> list[Sent]:
        """Take every message out of the window (to give back)."""
        return [self._remove(sequence) for sequence in list(self.window)]

    def _remove(self, sequence: int) -> Sent:
        message = self.window.pop(sequence)
        streams = self.streams
        for actor in message.open:  # (its runs leave their actors' queues)
            runs = streams[actor]
            if runs[0] == sequence:
                runs.popleft()
            else:
                runs.remove(sequence)
            if not runs:
                del streams[actor]
        sent = message.unended()
        self.in_window -= len(sent[1])
        self._freed()
        return sent

    def lost(self, received: int, up_to: int) -> list[int]:
        """The sequence numbers in the window above ``received`` (the newest the
        receiver had) and at most ``up_to`` (sent before it was asked): lost on the
        way."""
        return [sequence for sequence in self.window if received < sequence <= up_to]

    def waiting_since(self, sequence: int) -> bool:
        """Whether a message sent no later than ``sequence`` is still in the window."""
        return bool(self.window) and next(iter(self.window)) <= sequence

    def close(self) -> None:
        """Its peer was declared down: nothing more is sent on this record; the
        ``send``\\ s waiting for room go on (to a new record)."""
        self.closed = True
        self._freed()

    async def wait_for_room(self, *, again: bool = False) -> None:
        """Wait until the window has room for one more tell, or the record closes. A
        checkpoint; cancellable (nothing was sent). The waiting ``send``\\ s are
        woken one at a time, first come, first served (each passes on once it has
        sent: :meth:`pass_on`); one woken that finds no room after all (``again``)
        keeps its place at the front."""
        if self.in_window < WINDOW or self.closed:
            await trio.lowlevel.checkpoint()
            return
        room = trio.Event()
        if again:
            self._waiting.appendleft(room)
        else:
            self._waiting.append(room)
        try:
            await room.wait()
        except BaseException:
            if room.is_set():
                self._freed()  # (woken, but cancelled: its turn goes to the next)
            else:
                self._waiting.remove(room)
            raise

    def _freed(self) -> None:
        waiting = self._waiting
        if not waiting:
            return
        if self.closed:
            while waiting:
                waiting.popleft().set()
            return
        if self.in_window < WINDOW:
            waiting.popleft().set()  # (one at a time: it passes on once it has sent)

    def pass_on(self) -> None:
        """A ``send`` woken for room has sent: wake the next, if room is left."""
        self._freed()


protect_module(globals())

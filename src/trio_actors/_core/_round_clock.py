"""The round clock: when the dispatcher reads the time, and what a reading decides.

A *round* of the dispatcher (``_dispatcher.py``) ends once ``time_slice`` has passed
(with no slice: after ``batch`` messages in all). Reading the clock costs about as
much as a trivial handler (~0.1 µs), so the round does not read it per message but
every k messages, with k adapted to the handlers' cost:

* the round reads the clock at its start, and then after k messages, where k =
  min(16, the messages that fit in the rest of the slice at the mean cost so far);
  a round's first k comes from the previous round's cost. Cheap handlers: ~4
  readings per 64 messages. 1 ms handlers (T13): k shrinks so the round ends within
  one handler of the slice. The overshoot is bounded by k handlers whose cost
  differs from the mean (heavy tails).
* Why at most 16: it is the largest k for which handlers that turn from cheap to
  T13's 1 ms all at once still end the step within T13's 20 ms. Measured: k = 64
  (one reading per batch) would make S1 ~10% faster (alternating-process A/B), which
  is what S1's readings and checks cost. So a check is kept cheap instead: trio's
  default clock is read through ``perf_counter`` (:func:`clock_reader`), the common
  case needs no arithmetic (16 or more messages in at most half the slice: 16 more
  fit). Under callgrind these took S1 from 3,162 to 3,068 instructions per message
  (k = 64: ~2,820).

The readings also feed statistics: the longest round (time and messages), and each
actor's longest turn, which a reading can attribute when every message since the
previous reading was of that turn.

Never a checkpoint; nothing here touches trio's scheduling.
"""

from __future__ import annotations

from collections.abc import Callable
from time import perf_counter
from typing import TYPE_CHECKING, Final

import trio

from .._interrupts import protect_module
from .._policy import ServingPolicy
from ._native import mypyc_attr

if TYPE_CHECKING:
    from ._cell import ActorCell

MAX_CHECK_EVERY: Final = 16
_MAX_CHECK_EVERY_F: Final = float(MAX_CHECK_EVERY)


def _trio_default_clock_type() -> type[trio.abc.Clock] | None:
    """trio's default clock class: a private name, so ``None`` if it has moved
    (then every clock is read through its ``current_time``)."""
    try:
        from trio._core._run import SystemClock
    except ImportError:  # pragma: no cover - a trio without it
        return None
    return SystemClock


# trio's private SystemClock is imported only to recognise it: reading its time
# through perf_counter saves ~40 of S1's ~3,160 instructions per message (above).
_TrioSystemClock = _trio_default_clock_type()


def is_default_clock(clock: trio.abc.Clock) -> bool:
    """Whether ``clock`` is trio's default clock (its time is ``perf_counter``'s
    plus an offset: it runs with the wall clock)."""
    return _TrioSystemClock is not None and type(clock) is _TrioSystemClock


def clock_reader(clock: trio.abc.Clock) -> Callable[[], float]:
    """What the dispatcher reads the run's clock with.

    The dispatcher only compares its readings with each other (a round's start and
    deadline, turn and round lengths), so a reading that differs from the clock's
    by a constant serves as well. trio's default clock reads ``offset +
    perf_counter()`` in a Python method, ~5x the cost of the C call: under it the
    dispatcher calls :func:`time.perf_counter` itself. Any other clock --
    ``MockClock`` in tests, a user's own -- is read through its ``current_time``.
    (So a test cannot move the dispatcher's time by patching ``perf_counter`` inside
    trio: use ``MockClock``.)
    """
    if is_default_clock(clock):
        return perf_counter
    return clock.current_time


@mypyc_attr(allow_interpreted_subclasses=True)
class RoundClock:
    """The dispatcher's clock readings within a round, and its round statistics.

    A metered system's clock (``observe/_turns.py``) extends it to time some rounds
    turn by turn: in those (``timing``) it is read after each message.

    Attributes:
        longest_round: the longest round so far, in trio-clock seconds.
        longest_round_messages: the most messages handled in one round.
    """

    def __init__(self, policy: ServingPolicy, clock: trio.abc.Clock) -> None:
        self.policy = policy
        # The policy's (frozen) two numbers, read at every reading: an attribute of
        # the clock is one read, and in the compiled kernel a field, where the
        # policy's is a generic lookup (~100 instructions).
        self._time_slice = policy.time_slice
        self._batch = policy.batch
        self._now = clock_reader(clock)
        self._first_check = 1  # when a round first reads the clock (see end_round)
        # The current round's start, deadline and the middle between them (with a
        # slice); the last reading of the round, and the round's count of messages then.
        self._round_start = 0.0
        self._deadline = 0.0
        self._midpoint = 0.0
        self._read_time = 0.0
        self._read_used = 0
        self.longest_round = 0.0
        self.longest_round_messages = 0
        # A timed round of a metered clock (observe/_turns.py): a reading after each
        # message, each passed to timed_reading. Never set here.
        self.timing = False

    def begin_round(self) -> int:
        """Read the clock at a round's start; return when to read it next, as the
        round's count of messages."""
        time_slice = self._time_slice
        start = self._read_time = self._round_start = self._now()
        self._read_used = 0
        if time_slice is None:
            return self._batch  # without a slice, the batch bounds the round too
        self._deadline = start + time_slice
        self._midpoint = start + time_slice / 2
        return self._first_check  # from the handlers' cost in the last round

    def next_check(self, used: int, cell: ActorCell, turn: int) -> int:
        """Read the clock; return when to read it next, as the round's count of
        messages (0 ends the round).

        ``used``: the messages handled this round so far; ``cell`` and ``turn``: the
        actor being served and the messages of its turn so far (for its longest-turn
        statistic, see :meth:`_attribute`).
        """
        now = self._now()
        # _attribute(now, used, cell, turn), inlined: this runs every 16 messages of
        # S1, where the call measured ~2.5% of S1 (pyperf A/B, 4 rounds each).
        if used - self._read_used <= turn:
            interval = now - self._read_time
            if interval > cell.longest_turn_time:
                cell.note_turn(interval)
        if self.timing:
            self.timed_reading(now, used, cell, turn)
        self._read_time = now
        self._read_used = used
        if self._time_slice is None:
            # Called when the round's batch is used up -- or timed, after each message.
            return used + 1 if self.timing and used < self._batch else 0
        deadline = self._deadline
        if now >= deadline:
            return 0
        if self.timing:
            return used + 1
        # The messages that fit in the rest of the slice at this round's mean cost so
        # far, at most 16 between clock reads, at least 1. The common case first,
        # without arithmetic: if 16 or more messages took at most half the slice, 16
        # more at their mean cost take at most as long again, which still fits.
        if now <= self._midpoint and used >= MAX_CHECK_EVERY:
            return used + MAX_CHECK_EVERY
        remaining = deadline - now
        elapsed = now - self._round_start
        if remaining * used >= _MAX_CHECK_EVERY_F * elapsed:
            return used + MAX_CHECK_EVERY  # in float arithmetic only
        return used + (int(remaining * used / (elapsed or 1e-12)) or 1)

    def timed_reading(self, now: float, used: int, cell: ActorCell, turn: int) -> None:
        """A reading of a timed round (``timing``), at ``now`` after ``used``
        messages, in ``cell``'s turn of ``turn`` so far; the reading before is still
        in ``_read_time`` and ``_read_used``. Only a metered clock times rounds
        (``observe/_turns.py``): here, nothing."""

    def forget_turn(self) -> None:
        """Something other than a turn ran since the last reading (a plain
        ``on_start``): the next reading is no turn's, and the round must read the
        clock at its end."""
        self._read_used = -1

    def end_round(self, used: int, last: ActorCell | None, turn: int) -> None:
        """The round is over after ``used`` messages, ``last`` served last for a turn
        of ``turn``: record its statistics and work out the next round's first check."""
        if used == self._read_used:
            now = self._read_time  # the round ended at a clock reading
        else:
            # One more reading, for statistics and for the next round's first check
            # (a round is up to a time slice of handlers, or ends in a yield or a
            # park, each of which costs far more than the reading).
            now = self._now()
            if last is not None:
                self._attribute(now, used, last, turn)
        elapsed = now - self._round_start
        time_slice = self._time_slice
        if used and time_slice is not None:
            # The next round first looks after as many messages as fit in a whole
            # slice at this round's mean cost (so cheap handlers cost no early
            # clock read, and a round of expensive ones looks after the first).
            if used >= MAX_CHECK_EVERY and now <= self._midpoint:
                # Then at least 2 x used >= 32 fit in a whole slice: no arithmetic.
                self._first_check = MAX_CHECK_EVERY
            else:
                fit = time_slice * used / (elapsed or 1e-12)
                self._first_check = MAX_CHECK_EVERY if fit >= MAX_CHECK_EVERY else (int(fit) or 1)
        if elapsed > self.longest_round:
            self.longest_round = elapsed
        if used > self.longest_round_messages:
            self.longest_round_messages = used

    def _attribute(self, now: float, used: int, cell: ActorCell, turn: int) -> None:
        """The round's last clock reading at ``now``, after ``used`` messages, at the
        end of ``cell``'s turn of ``turn`` messages: if every message since the last
        reading was of this turn, the time between the readings is the turn's (at
        least), for its longest-turn statistic. (The reading itself is not kept: the
        next round begins with one of its own.)"""
        if used - self._read_used <= turn:
            interval = now - self._read_time
            if interval > cell.longest_turn_time:
                cell.note_turn(interval)


protect_module(globals())

__all__ = ["MAX_CHECK_EVERY", "RoundClock", "clock_reader", "is_default_clock"]

"""How the serving loop reads the clock: the reader it uses and when it reads next.

The dispatcher reads the run's clock every few messages (``_core/_round_clock.py``):
these tests pin down the two shortcuts that make a reading cheap -- trio's default
clock read through ``perf_counter`` directly, and the "half the slice" test that
settles the common case without arithmetic -- against what they stand for, and
how long a round of real handlers (on a ``MockClock``) then lasts.
"""

from __future__ import annotations

import time

import pytest
import trio
import trio.testing
from hypothesis import given
from hypothesis import strategies as st

from helpers import Costly
from trio_actors import Actor, Bounded, ServingPolicy, open_actor_system
from trio_actors._core import _round_clock
from trio_actors._core._cell import ActorCell
from trio_actors._core._round_clock import RoundClock, clock_reader


def test_trio_default_clock_is_read_through_perf_counter() -> None:
    async def main() -> None:
        clock = trio.lowlevel.current_clock()
        assert clock_reader(clock) is time.perf_counter

    trio.run(main)


def test_trio_default_clock_is_perf_counter_plus_offset(monkeypatch: pytest.MonkeyPatch) -> None:
    # What the shortcut relies on: trio's SystemClock reads offset + perf_counter().
    # If a trio release changes that, this fails (and clock_reader must follow).
    clock_module = pytest.importorskip("trio._core._run")

    async def main() -> None:
        clock = trio.lowlevel.current_clock()
        assert type(clock) is _round_clock._TrioSystemClock
        for reading in (12.5, 1234.0625):
            monkeypatch.setattr(clock_module, "perf_counter", lambda reading=reading: reading)
            assert clock.current_time() == clock.offset + reading  # type: ignore[attr-defined]
        monkeypatch.undo()

    trio.run(main)


def test_other_clocks_are_read_through_current_time() -> None:
    clock = trio.testing.MockClock()
    reader = clock_reader(clock)
    assert reader == clock.current_time
    clock.jump(2.5)
    assert reader() == clock.current_time()


class _Cell(ActorCell):
    """Only what a round clock reads and writes of a cell (a cell's class: the
    compiled round clock takes nothing else)."""

    def __init__(self) -> None:  # (no actor: the round clock alone)
        self.longest_turn_time = 0.0

    def note_turn(self, seconds: float) -> None:
        self.longest_turn_time = seconds


class _StoppedClock:
    """A clock that reads ``time`` (set by the test), exactly."""

    def __init__(self, time: float) -> None:
        self.time = time

    def current_time(self) -> float:
        return self.time


def _clock_at(now: float, start: float, time_slice: float, used: int) -> RoundClock:
    """A round clock in the middle of a round that started at ``start``."""
    clock = _StoppedClock(start)
    round_clock = RoundClock(ServingPolicy(time_slice=time_slice), clock)  # type: ignore[arg-type]
    assert round_clock.begin_round() == 1
    round_clock._read_used = used
    clock.time = now
    return round_clock


@given(
    start=st.floats(min_value=0.0, max_value=1e6),
    time_slice=st.floats(min_value=1e-4, max_value=1.0),
    fraction=st.floats(min_value=0.0, max_value=1.5),
    used=st.integers(min_value=1, max_value=100_000),
)
def test_next_check_only_reads_again_when_the_next_messages_fit(
    start: float, time_slice: float, fraction: float, used: int
) -> None:
    """``_next_check`` returns the round's count at the next reading (0: the round is
    over). It reads again after k messages, 1 <= k <= 16, where k messages at the
    round's mean cost so far fit in the rest of the slice (k = 1 if none fit), and
    k = 16 whenever 16 fit: the half-slice shortcut must agree."""
    now = start + fraction * time_slice
    round_clock = _clock_at(now, start, time_slice, used)
    next_check = round_clock.next_check(used, _Cell(), 1)
    deadline = start + time_slice
    if now >= deadline:
        assert next_check == 0
        return
    k = next_check - used
    assert 1 <= k <= 16
    mean_cost = (now - start) / used
    remaining = deadline - now
    tolerance = 1e-9 * time_slice
    if k > 1:
        assert k * mean_cost <= remaining + tolerance
    if mean_cost > remaining + tolerance:
        assert k == 1  # not even one fits: read again after the next message
    if 16 * mean_cost <= remaining - tolerance:
        assert k == 16


class _Costly(Actor):
    """Each message is the handler's cost, in seconds of a MockClock it jumps."""

    def __init__(self, clock: trio.testing.MockClock) -> None:
        self.clock = clock

    def receive(self, cost: float) -> None:
        self.clock.jump(cost)


def _longest_round(*backlogs: list[float]) -> float:
    """The longest dispatcher round of one :class:`_Costly` actor told each backlog
    in turn, each served to the end before the next is told."""

    async def main() -> float:
        clock = trio.lowlevel.current_clock()
        async with open_actor_system() as system:
            ref = system.spawn(_Costly, clock)
            handled = 0
            for backlog in backlogs:
                for cost in backlog:
                    ref.tell(cost)
                await trio.testing.wait_all_tasks_blocked()
                handled += len(backlog)
                assert ref.statistics().handled == handled
            return system.statistics().longest_round_seconds

    return trio.run(main, clock=trio.testing.MockClock())


def test_a_round_of_equal_handlers_ends_within_one_handler_of_its_slice() -> None:
    """0.7 ms handlers, the default 16 ms slice: the checks (after 16 messages, then
    as many as fit) end the round by 16 ms plus one handler. A shortcut that allowed
    16 more messages too late in the slice would run the round to ~22 ms."""
    cost = 0.0007
    assert _longest_round([cost] * 200) <= 0.016 + cost + 1e-9


def test_an_expensive_round_makes_the_next_one_look_after_its_first_message() -> None:
    """One 10 ms message alone, then a backlog of them: the next round reads the
    clock after its first message (one fits the slice at the last round's cost), so
    no round passes 16 ms plus one handler. Taking 16 as the first check would
    run 16 of them (160 ms) before the first reading."""
    cost = 0.010
    assert _longest_round([cost], [cost] * 40) <= 0.016 + cost + 1e-9


class _CountingClock(trio.abc.Clock):
    """A ``MockClock`` (that does not move) counting its readings: trio reads it
    only between its scheduler's batches, so within a round they are the
    dispatcher's."""

    def __init__(self) -> None:
        self._clock = trio.testing.MockClock()
        self.readings = 0

    def start_clock(self) -> None:
        self._clock.start_clock()

    def current_time(self) -> float:
        self.readings += 1
        return self._clock.current_time()

    def deadline_to_sleep_time(self, deadline: float) -> float:
        return self._clock.deadline_to_sleep_time(deadline)


def test_cheap_handlers_are_checked_every_16_messages() -> None:
    """Under a clock that does not move (handlers that cost nothing), a turn of 64
    reads the clock after 16, 32 and 48 messages -- never more often (and then its
    round ends)."""
    clock = _CountingClock()
    readings_seen: list[int] = []

    class Counter(Actor):
        def receive(self, message: int) -> None:
            readings_seen.append(clock.readings)  # before this message's handler

    async def main() -> None:
        async with open_actor_system() as system:
            ref = system.spawn(Counter)
            await ref.ask(0)
            readings_seen.clear()
            for _ in range(64 * 3):
                ref.tell(1)
            await ref.ask(0)

    trio.run(main, clock=clock)
    # Three full turns of 64 (one per round), then the ask alone: within a turn the
    # clock is read between messages 16 and 17, 32 and 33, 48 and 49 only.
    assert len(readings_seen) == 64 * 3 + 1
    for turn in range(3):
        seen = readings_seen[64 * turn : 64 * (turn + 1)]
        read_after = [n for n in range(1, 64) if seen[n] != seen[n - 1]]
        assert read_after == [16, 32, 48], (turn, read_after)
        assert all(seen[n] - seen[n - 1] == 1 for n in read_after)


async def test_a_bounded_mailboxs_stretch_reads_the_clock_and_ends_the_round(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # A bounded mailbox's stretch reads the clock again at ``used + n`` messages (a
    # mutant with ``used - n`` never read it, and a round of 1 ms handlers ran the
    # whole 64-message batch, four time slices).
    async with open_actor_system() as system:
        ref = system.spawn(Costly, autojump_clock, mailbox=Bounded(1_000))
        await ref.ask("warm up")
        for number in range(200):
            ref.tell(number)
        await trio.testing.wait_all_tasks_blocked()
        assert ref.statistics().handled == 201
        assert system.statistics().longest_round_seconds <= 0.016 + 0.001 + 1e-9

"""Withdrawn asks do not accumulate: a mailbox full of them is compacted."""

from __future__ import annotations

import math
import tracemalloc
from typing import Any

import pytest
import trio
import trio.lowlevel
import trio.testing

import trio_actors as ta
from trio_actors._core import _compaction

WARM_UP = 1_000
ASKS = 20_000


class Stuck(ta.Actor):
    """Its handler never returns once told "block"; it answers other asks."""

    async def receive(self, message: Any) -> Any:
        if message == "block":
            await trio.sleep_forever()
        return message


def _memory_growth_of_timed_out_asks() -> tuple[int, ta.ActorStatistics]:
    """Ask a stuck actor ``WARM_UP + ASKS`` times with a deadline; return the traced
    memory the last ``ASKS`` of them left behind, and the actor's statistics."""
    result: list[Any] = []

    async def main() -> None:
        async with ta.open_actor_system() as system:
            stuck = system.spawn(Stuck)
            stuck.tell("block")
            await trio.testing.wait_all_tasks_blocked()

            async def time_out(count: int) -> None:
                for number in range(count):
                    with trio.move_on_after(0.001):
                        await stuck.ask(number)

            await time_out(WARM_UP)
            tracemalloc.start()
            try:
                before = tracemalloc.get_traced_memory()[0]
                await time_out(ASKS)
                after = tracemalloc.get_traced_memory()[0]
            finally:
                tracemalloc.stop()
            result.append(after - before)
            result.append(stuck.statistics())

    trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))
    return result[0], result[1]


def test_asks_timing_out_behind_a_stuck_handler_stay_within_a_small_constant() -> None:
    growth, statistics = _memory_growth_of_timed_out_asks()
    # Kept, each would hold ~200 B (the envelope, its deque slot, its position).
    assert growth < 64 * 1024, f"{ASKS} timed-out asks grew the heap by {growth} B"
    assert statistics.withdrawn == WARM_UP + ASKS
    assert statistics.mailbox_depth == 0


def test_without_compaction_the_same_asks_grow_the_heap(monkeypatch: pytest.MonkeyPatch) -> None:
    # The measurement above can fail: with compaction off, it sees the growth.
    monkeypatch.setattr(_compaction, "COMPACT_AT_LEAST", 10**9)
    growth, statistics = _memory_growth_of_timed_out_asks()
    assert growth > ASKS * 100
    assert statistics.mailbox_depth == 0


async def test_compaction_keeps_order_asks_and_tells_behind_withdrawn_asks(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    class Log(ta.Actor):
        def __init__(self, log: list[Any]) -> None:
            self.log = log

        async def receive(self, message: Any) -> Any:
            if message == "hold":
                await trio.sleep(1)
            self.log.append(message)
            return message

    compactions: list[int] = []
    compact = _compaction.compact

    def counted(cell: Any) -> None:
        compactions.append(len(cell.mailbox))
        compact(cell)

    monkeypatch.setattr(_compaction, "compact", counted)
    log: list[Any] = []
    async with ta.open_actor_system() as system:
        ref = system.spawn(Log, log)
        ref.tell("hold")
        results: list[Any] = []

        async def ask(message: Any, deadline: float) -> None:
            with trio.move_on_after(deadline):
                results.append(await ref.ask(message))

        async with trio.open_nursery() as nursery:
            for number in range(300):
                if number % 10 == 0:
                    ref.tell(("tell", number))
                # Most asks time out while "hold" runs; every tenth waits for its answer.
                nursery.start_soon(ask, ("ask", number), 100 if number % 10 == 0 else 0.5)
                await trio.lowlevel.checkpoint()
        statistics = ref.statistics()
    assert compactions, "the withdrawn asks never outnumbered the live entries"
    expected = [message for n in range(0, 300, 10) for message in (("tell", n), ("ask", n))]
    assert log == ["hold", *expected]
    assert sorted(results) == [("ask", n) for n in range(0, 300, 10)]
    assert statistics.withdrawn == 270
    assert statistics.handled == 61


async def test_asks_kept_by_a_compaction_are_answered_in_their_places(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The positions a compaction gives the asks it keeps (a mutant placed them
    # wrongly). A plain actor's mailbox is compacted while an async on_start runs (a
    # task serves it); the dispatcher then serves the queue by those positions.
    started = trio.Event()
    handled: list[Any] = []

    class SlowStart(ta.Actor):
        async def on_start(self) -> None:
            await started.wait()

        def receive(self, message: Any) -> Any:
            handled.append(message)
            return message * 10

    async with ta.open_actor_system() as system:
        ref = system.spawn(SlowStart)
        await trio.testing.wait_all_tasks_blocked()
        answers: dict[int, Any] = {}

        async def ask(number: int, deadline: float | None) -> None:
            with trio.move_on_after(math.inf if deadline is None else deadline):
                answers[number] = await ref.ask(number)

        async with trio.open_nursery() as nursery:
            for number in range(200):
                if number % 50 == 25:
                    ref.tell(number)
                    nursery.start_soon(ask, number + 1000, None)  # kept, among tells
                else:
                    nursery.start_soon(ask, number, 1.0)  # withdrawn at 1 s
                await trio.testing.wait_all_tasks_blocked()  # (queued in this order)
            await trio.sleep(2.0)
            assert ref.statistics().withdrawn == 196  # compacted meanwhile
            started.set()
        assert handled == [25, 1025, 75, 1075, 125, 1125, 175, 1175]
        assert answers == {1025: 10250, 1075: 10750, 1125: 11250, 1175: 11750}

"""Statistics: frozen snapshots of counters, per actor and per system."""

from typing import Any

import attrs
import pytest
import trio
import trio.testing

import trio_actors as ta
from helpers import Costly, Worker

Clock = trio.testing.MockClock


async def test_a_fresh_actor_has_all_zero_statistics() -> None:
    async with ta.open_actor_system() as system:
        ref = system.spawn(Worker, name="w")
        stats = ref.statistics()
        assert stats == ta.ActorStatistics(
            path="system/w",
            state="running",
            mailbox_depth=0,
            mailbox_capacity=None,
            senders_waiting=0,
            handled=0,
            dead_letters=ta.DeadLetterCounts(),
            withdrawn=0,
            failed_back=0,
            failures=0,
            expected_errors=0,
            restarts=0,
            longest_turn_messages=0,
            longest_turn_seconds=0.0,
            timers=0,
        )
        with pytest.raises(attrs.exceptions.FrozenInstanceError):
            stats.handled = 3  # type: ignore[misc]


async def test_depth_handled_and_the_longest_turn_in_messages() -> None:
    async with ta.open_actor_system(serving=ta.ServingPolicy(batch=16)) as system:
        ref = system.spawn(Worker, mailbox=ta.Bounded(100))
        for n in range(40):
            ref.tell(n)
        stats = ref.statistics()
        assert (stats.mailbox_depth, stats.mailbox_capacity, stats.handled) == (40, 100, 0)
        await trio.testing.wait_all_tasks_blocked()
        stats = ref.statistics()
        assert (stats.mailbox_depth, stats.handled) == (0, 40)
        assert stats.longest_turn_messages == 16  # turns of one batch
        assert system.statistics().longest_round_messages == 16


async def test_dead_letters_failures_and_restarts_are_counted_by_actor_and_system() -> None:
    async with ta.open_actor_system() as system:
        ref = system.spawn(Worker, mailbox=ta.Bounded(1, overflow="drop_new"))
        ref.tell(1)
        ref.tell(2)  # overflow
        ref.tell("boom")  # overflow too: the mailbox is still full
        await trio.testing.wait_all_tasks_blocked()
        with pytest.raises(RuntimeError):
            await ref.ask("boom")
        await trio.testing.wait_all_tasks_blocked()
        other = system.spawn(Worker)
        await other.stop()
        other.tell("late")
        stats = ref.statistics()
        assert stats.dead_letters == ta.DeadLetterCounts(overflow=2)
        assert (stats.failures, stats.restarts, stats.handled) == (1, 1, 2)
        assert other.statistics().dead_letters == ta.DeadLetterCounts(stopped=1)
        assert other.statistics().state == "stopped"
        system_stats = system.statistics()
        assert system_stats.dead_letters == ta.DeadLetterCounts(stopped=1, overflow=2)
        assert system_stats.dead_letters.total == system.dead_letters.count == 3
        assert (system_stats.live_actors, system_stats.spawned) == (1, 2)
        assert system_stats.restarts == 1
        assert (system_stats.failures, system_stats.expected_errors) == (1, 0)


async def test_stranded_messages_and_failed_back_asks_are_counted(autojump_clock: Clock) -> None:
    class Stuck(ta.Actor):
        async def receive(self, message: Any) -> Any:
            await trio.sleep_forever()

    async with ta.open_actor_system() as system:
        ref = system.spawn(Stuck)
        ref.tell("busy")
        ref.tell("stranded")
        failures: list[BaseException] = []

        async def ask() -> None:
            try:
                await ref.ask("q")
            except ta.ActorStopped as error:
                failures.append(error)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(ask)
            await trio.testing.wait_all_tasks_blocked()
            await ref.stop()
        stats = ref.statistics()
        assert len(failures) == 1
        assert stats.dead_letters == ta.DeadLetterCounts(stranded=1)
        assert stats.failed_back == 1


async def test_a_handler_that_holds_the_thread_shows_in_the_turn_statistics(
    autojump_clock: Clock,
) -> None:
    async with ta.open_actor_system() as system:
        quick = system.spawn(Worker, autojump_clock)
        slow = system.spawn(Worker, autojump_clock)
        for n in range(10):
            quick.tell(n)
        slow.tell(0.5)  # 500 ms with no checkpoint, as a time.sleep would
        await trio.testing.wait_all_tasks_blocked()
        assert system.statistics().longest_round_seconds == pytest.approx(0.5)
        slow.tell(0.25)
        await trio.testing.wait_all_tasks_blocked()
        # The first long turn shared its clock readings with quick's messages; from
        # then on the loop reads the clock after every message, so the next is seen.
        assert slow.statistics().longest_turn_seconds == pytest.approx(0.25)
        assert quick.statistics().longest_turn_seconds < 0.001
        stats = system.statistics()
        assert stats.longest_turn_seconds == pytest.approx(0.25)
        assert stats.longest_turn_path == slow.path
        # (The first, under the default clock, is the turn sampler's to see:
        # tests/mailbox/test_turn_sampler.py.)


async def test_a_fresh_system_has_timed_no_turn() -> None:
    async with ta.open_actor_system() as system:
        stats = system.statistics()
        assert (stats.longest_turn_seconds, stats.longest_turn_path) == (0.0, None)


async def test_async_turns_are_timed_exactly(autojump_clock: Clock) -> None:
    class Sleeper(ta.Actor):
        async def receive(self, message: Any) -> Any:
            await trio.sleep(message)

    async with ta.open_actor_system(serving=ta.ServingPolicy(time_slice=None)) as system:
        ref = system.spawn(Sleeper)
        for delay in (0.1, 0.2, 0.3):
            ref.tell(delay)
        await trio.sleep(1)
        stats = ref.statistics()
        assert stats.longest_turn_messages == 3
        assert stats.longest_turn_seconds == pytest.approx(0.6)


async def test_withdrawn_asks_and_waiting_senders_are_counted(autojump_clock: Clock) -> None:
    class Stuck(ta.Actor):
        async def receive(self, message: Any) -> Any:
            await trio.sleep(100)

    async with ta.open_actor_system() as system:
        ref = system.spawn(Stuck, mailbox=ta.Bounded(1))
        ref.tell("busy")
        await trio.testing.wait_all_tasks_blocked()
        with trio.move_on_after(1):
            await ref.ask("withdrawn")
        ref.tell("fills it")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(ref.send, "waits")
            await trio.testing.wait_all_tasks_blocked()
            assert ref.statistics().senders_waiting == 1
            nursery.cancel_scope.cancel()
        stats = ref.statistics()
        assert (stats.withdrawn, stats.senders_waiting) == (2, 0)


async def test_time_in_a_plain_on_start_counts_for_the_round_not_for_a_turn(
    autojump_clock: Clock,
) -> None:
    class SlowStart(ta.Actor):
        def on_start(self) -> None:
            autojump_clock.jump(5.0)  # holds the thread, as a time.sleep would

        def receive(self, message: Any) -> Any:
            return message

    async with ta.open_actor_system() as system:
        system.spawn(SlowStart)  # a round of nothing but its on_start
        await trio.testing.wait_all_tasks_blocked()
        assert system.statistics().longest_round_seconds == pytest.approx(5.0)
        fast = system.spawn(Worker)
        system.spawn(SlowStart)
        fast.tell(1)  # served right after the second slow on_start, same round
        await trio.testing.wait_all_tasks_blocked()
        assert fast.statistics().longest_turn_seconds < 1.0


async def test_mailbox_depth_does_not_count_withdrawn_asks(autojump_clock: Clock) -> None:
    class Stuck(ta.Actor):
        async def receive(self, message: Any) -> Any:
            if message == "hold":
                await trio.sleep(10)
            return message

    async with ta.open_actor_system() as system:
        ref = system.spawn(Stuck)
        ref.tell("hold")
        await trio.testing.wait_all_tasks_blocked()
        ref.tell("queued")
        with trio.move_on_after(1):
            await ref.ask("withdrawn")  # stays queued, to be skipped
        assert ref.statistics().mailbox_depth == 1
        await trio.sleep(20)
        stats = ref.statistics()
        assert (stats.mailbox_depth, stats.withdrawn, stats.handled) == (0, 1, 2)


async def test_an_async_turn_is_measured(autojump_clock: Clock) -> None:
    # elapsed = now - the turn's start (with the sign swapped no async turn would
    # ever be longer than 0).
    class Slow(ta.Actor):
        async def receive(self, message: Any) -> None:
            await trio.sleep(0.5)

    async with ta.open_actor_system() as system:
        ref = system.spawn(Slow)
        for number in range(3):
            ref.tell(number)
        await trio.sleep(10)
        stats = ref.statistics()
        # Each handler outlasts the time slice: a turn of one message each.
        assert stats.longest_turn_messages == 1
        assert stats.longest_turn_seconds == pytest.approx(0.5)


async def test_a_plain_turn_is_measured_from_its_own_start(autojump_clock: Clock) -> None:
    # A turn shorter than the clock's reading interval is measured by the round's
    # last reading; without it, 5 ms of handlers show 0.
    async with ta.open_actor_system() as system:
        ref = system.spawn(Costly, autojump_clock)
        await trio.sleep(10)
        for number in range(5):
            ref.tell(number)
        await trio.testing.wait_all_tasks_blocked()
        # (A lower bound: the readings may split the turn, here after its first
        # message -- the round's first check comes from the last round's cost.)
        assert 0.004 - 1e-9 <= ref.statistics().longest_turn_seconds <= 0.005 + 1e-9

"""The turn sampler (``_core/_turn_sampler.py``): a plain handler that blocks the
trio thread shows in its actor's ``longest_turn_seconds`` and in the system's.

The samples are taken by the tests themselves, with the time given, from a helper
thread while the handler blocks on a ``threading.Event`` -- so nothing here depends
on how fast the machine is: the handler blocks until the samples are taken.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import trio
import trio.testing

from trio_actors import Actor, ServingPolicy, open_actor_system
from trio_actors._core._turn_sampler import SAMPLER, TurnSampler

WAIT = 30.0  # a safety net only: every wait below ends when the other side is done


class Blocker(Actor):
    """Blocks the trio thread in its handler until ``release`` is set."""

    def __init__(self, entered: threading.Event, release: threading.Event) -> None:
        self.entered = entered
        self.release = release

    def receive(self, message: Any) -> Any:
        self.entered.set()
        assert self.release.wait(WAIT), "the samples were never taken"
        self.entered.clear()
        return message


class AsyncBlocker(Blocker):
    async def receive(self, message: Any) -> Any:
        await trio.lowlevel.checkpoint()
        return super().receive(message)


class Quick(Actor):
    def receive(self, message: Any) -> Any:
        return message


@contextmanager
def sampling_in_a_thread(
    sampler: TurnSampler, entered: threading.Event, release: threading.Event, times: list[float]
) -> Iterator[threading.Thread]:
    """A helper thread: once the handler has entered, one sample at each of
    ``times``; then the handler is released."""

    def take() -> None:
        assert entered.wait(WAIT)
        for now in times:
            sampler.sample(now)
        release.set()

    helper = threading.Thread(target=take)
    helper.start()
    try:
        yield helper
    finally:
        release.set()
        helper.join(WAIT)


@pytest.mark.parametrize("how", ["told, among others", "asked while idle", "async handler"])
async def test_a_blocking_handler_shows_in_its_actors_longest_turn(how: str) -> None:
    entered, release = threading.Event(), threading.Event()
    sampler = TurnSampler(run_thread=False)
    async with open_actor_system(turn_sampling=None) as system:
        sampler.add(system.thread_id, 0.01)
        factory = AsyncBlocker if how == "async handler" else Blocker
        blocker = system.spawn(factory, entered, release, name="blocker")
        quick = [system.spawn(Quick) for _ in range(4)]
        with sampling_in_a_thread(sampler, entered, release, [100.0, 100.25, 100.5]):
            if how == "asked while idle":
                assert await blocker.ask("x") == "x"  # answered in this task
            else:
                for ref in quick[:2]:
                    ref.tell(1)
                blocker.tell(1)
                for ref in quick[2:]:
                    ref.tell(1)
                await trio.testing.wait_all_tasks_blocked()
        sampler.remove(system.thread_id, 0.01)
        assert blocker.statistics().longest_turn_seconds >= 0.5
        assert all(ref.statistics().longest_turn_seconds < 0.5 for ref in quick)
        stats = system.statistics()
        assert stats.longest_turn_seconds >= 0.5
        assert stats.longest_turn_path == "system/blocker"


class Bouncing(Actor):
    """Blocks on each message until let go (one semaphore count per message);
    after the first, has it bounced back, so that it is activated again in the
    same round of the dispatcher."""

    def __init__(self, entered: threading.Semaphore, go: threading.Semaphore) -> None:
        self.entered = entered
        self.go = go

    def on_start(self) -> None:
        self.bouncer = self.spawn(Bounce)

    def receive(self, message: Any) -> Any:
        self.entered.release()
        assert self.go.acquire(timeout=WAIT), "the sample was never taken"
        if message == 1:
            self.bouncer.tell(self.ref)


class Bounce(Actor):
    def receive(self, message: Any) -> Any:
        message.tell(2)


@pytest.mark.parametrize("how", ["asked twice", "activated twice in one round"])
async def test_two_messages_seen_one_sample_each_are_not_one_turn(how: str) -> None:
    entered, go = threading.Semaphore(0), threading.Semaphore(0)
    sampler = TurnSampler(run_thread=False)
    one_round = ServingPolicy(time_slice=None)  # (rounds end by the batch alone)
    async with open_actor_system(turn_sampling=None, serving=one_round) as system:
        sampler.add(system.thread_id, 0.01)
        blocker = system.spawn(Bouncing, entered, go, name="blocker")
        await trio.testing.wait_all_tasks_blocked()
        rounds = system.statistics().rounds

        def take() -> None:
            for now in (100.0, 200.0):  # one sample in each message
                assert entered.acquire(timeout=WAIT)
                sampler.sample(now)
                go.release()

        helper = threading.Thread(target=take)
        helper.start()
        try:
            if how == "asked twice":
                await blocker.ask(3)
                await blocker.ask(4)
            else:
                blocker.tell(1)  # then 2, bounced back within the same round
                await trio.testing.wait_all_tasks_blocked()
                assert system.statistics().rounds == rounds + 1
        finally:
            go.release()
            go.release()
            helper.join(WAIT)
        assert blocker.statistics().longest_turn_seconds < 100


async def test_a_blocking_plain_on_start_is_no_turn() -> None:
    entered, release = threading.Event(), threading.Event()

    class BlocksInOnStart(Actor):
        def on_start(self) -> None:
            entered.set()
            assert release.wait(WAIT)

        def receive(self, message: Any) -> Any:
            return message

    sampler = TurnSampler(run_thread=False)
    async with open_actor_system(turn_sampling=None) as system:
        sampler.add(system.thread_id, 0.01)
        with sampling_in_a_thread(sampler, entered, release, [100.0, 105.0]):
            ref = system.spawn(BlocksInOnStart)
            await trio.testing.wait_all_tasks_blocked()
        assert ref.statistics().longest_turn_seconds < 5


async def test_the_sampler_thread_takes_the_samples() -> None:
    # The thread's own loop, with its clock replaced: the handler blocks until the
    # thread has read the clock three times (so two samples have seen it).
    entered, release = threading.Event(), threading.Event()
    reads: list[float] = []

    def now() -> float:
        if entered.is_set():
            reads.append(10.0 * len(reads))
            if len(reads) >= 3:
                release.set()
        return 10.0 * len(reads)

    sampler = TurnSampler(now)
    async with open_actor_system(turn_sampling=None) as system:
        blocker = system.spawn(Blocker, entered, release, name="blocker")
        sampler.add(system.thread_id, 0.001)
        try:
            await blocker.ask(1)
        finally:
            sampler.remove(system.thread_id, 0.001)
        assert blocker.statistics().longest_turn_seconds >= 10.0


async def test_under_mock_clock_nothing_is_sampled(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_actor_system() as system:
        assert system.thread_id not in SAMPLER._threads


async def test_the_default_clock_is_sampled_while_the_system_is_open() -> None:
    async with open_actor_system() as system:
        assert SAMPLER._threads[system.thread_id] == [0.05]
    assert system.thread_id not in SAMPLER._threads


@pytest.mark.parametrize(
    ("value", "error", "complaint"),
    [
        (
            0.0001,
            ValueError,
            r"turn_sampling must be at least 0.001 seconds and finite, got 0.0001",
        ),
        (float("inf"), ValueError, r"got inf"),
        ("10ms", TypeError, r"turn_sampling must be seconds \(a float\) or None, got '10ms'"),
        (True, TypeError, r"got True"),
    ],
)
async def test_bad_turn_sampling_is_refused(
    value: Any, error: type[Exception], complaint: str
) -> None:
    with pytest.raises(error, match=complaint):
        async with open_actor_system(turn_sampling=value):
            pass  # pragma: no cover

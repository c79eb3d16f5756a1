"""The turn sampler (``_core/_turn_sampler.py``) and the record of what the trio
thread serves now that it reads (``_core/_serving_now.py``): a handler that blocks
the trio thread shows in its actor's ``longest_turn_seconds`` and in the system's.

Every sample is taken by the test itself, with the time given (a
``TurnSampler(run_thread=False)``), so nothing here depends on how fast the machine
is: either from a helper thread while the handler blocks on a ``threading.Event``
(what the sampler's own thread does), or from inside the handler itself -- a
sample reads only the record, so a handler that takes two samples at 100.0 and
100.5 is, to the sampler, a handler that blocked the trio thread for 0.5 s.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import pytest
import trio
import trio.testing

from trio_actors import Actor, ActorRef, ActorSystem, ServingPolicy, open_actor_system
from trio_actors._core._ref import local_cell
from trio_actors._core._serving_now import ServingNow
from trio_actors._core._turn_sampler import SAMPLER, TurnSampler

if TYPE_CHECKING:
    from trio_actors._core._cell import ActorCell

WAIT = 30.0  # a safety net only: every wait below ends when the other side is done


WARM_UP = "warm up"
"""A message the blocking actors below handle at once. An ask is answered in the
asker's task (``_core/_idle_ask.py``) only once the actor has been served inline."""


class Blocker(Actor):
    """Blocks the trio thread in its handler until ``release`` is set."""

    def __init__(self, entered: threading.Event, release: threading.Event) -> None:
        self.entered = entered
        self.release = release

    def receive(self, message: Any) -> Any:
        if message == WARM_UP:
            return message
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


def record(system: ActorSystem) -> ServingNow:
    """The system's record of what its trio thread serves now."""
    return system._dispatcher.serving_now


@contextmanager
def sampled(sampler: TurnSampler, *systems: ActorSystem) -> Iterator[None]:
    """``sampler`` reads the systems' records in the block."""
    for system in systems:
        sampler.add(record(system), 0.01)
    try:
        yield
    finally:
        for system in systems:
            sampler.remove(record(system))


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
        factory = AsyncBlocker if how == "async handler" else Blocker
        blocker = system.spawn(factory, entered, release, name="blocker")
        quick = [system.spawn(Quick) for _ in range(4)]
        await blocker.ask(WARM_UP)
        with (
            sampled(sampler, system),
            sampling_in_a_thread(sampler, entered, release, [100.0, 100.25, 100.5]),
        ):
            if how == "asked while idle":
                assert await blocker.ask("x") == "x"  # answered in this task
            else:
                for ref in quick[:2]:
                    ref.tell(1)
                blocker.tell(1)
                for ref in quick[2:]:
                    ref.tell(1)
                await trio.testing.wait_all_tasks_blocked()
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
        sampler.add(record(system), 0.01)
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


# --- Samples taken inside the handler: which turns the record names ------------------


def samples_at(sampler: TurnSampler, *times: float) -> Callable[[], None]:
    """What a handler calls to "block" for the time between ``times``: one sample at
    each (the sampler's thread would see the same record while it blocked)."""

    def take() -> None:
        for now in times:
            sampler.sample(now)

    return take


class Samples(Actor):
    """Plain: takes its samples while it handles a message."""

    def __init__(self, take: Callable[[], None]) -> None:
        self.take = take

    def receive(self, message: Any) -> Any:
        if message != WARM_UP:
            self.take()
        return message


class AwaitsThenSamples(Actor):
    """Async: waits until the dispatcher has served a round for someone else (a
    record set once per handler would name nothing by then), then takes its
    samples."""

    def __init__(self, take: Callable[[], None], other: ActorRef) -> None:
        self.take = take
        self.other = other

    async def receive(self, message: Any) -> Any:
        self.other.tell(1)
        await trio.testing.wait_all_tasks_blocked()  # (the dispatcher's round is over)
        self.take()
        return message


def sampled_turn(ref: ActorRef) -> float:
    """The longest turn of ``ref``'s actor the sampler saw (exactly: the handlers'
    own timings are the trio clock's, whatever the machine does)."""
    return local_cell(ref).sampled_turn_time


@pytest.mark.parametrize("how", ["told", "asked while idle", "asked while busy", "async"])
async def test_the_sampler_sees_the_turn_the_record_names(how: str) -> None:
    sampler = TurnSampler(run_thread=False)
    take = samples_at(sampler, 100.0, 100.25, 100.5)
    async with open_actor_system(turn_sampling=None) as system:
        before, after = system.spawn(Quick), system.spawn(Quick)
        if how == "async":
            blocker = system.spawn(AwaitsThenSamples, take, before, name="blocker")
        else:
            blocker = system.spawn(Samples, take, name="blocker")
            await blocker.ask(WARM_UP)
        await trio.testing.wait_all_tasks_blocked()
        with sampled(sampler, system):
            if how == "told":
                before.tell(1)  # served in the same round, before and after it
                blocker.tell(1)
                after.tell(1)
                await trio.testing.wait_all_tasks_blocked()
            elif how == "asked while idle":
                assert await blocker.ask("x") == "x"  # (_core/_idle_ask.py)
            else:
                before.tell(1)
                if how == "asked while busy":
                    blocker.tell(1)  # the dispatcher's turn: the ask is queued behind it
                assert await blocker.ask("x") == "x"
                after.tell(1)
                await trio.testing.wait_all_tasks_blocked()
        assert sampled_turn(blocker) == 0.5
        assert sampled_turn(before) == sampled_turn(after) == 0.0
        assert blocker.statistics().longest_turn_seconds >= 0.5
        assert (system.sampled_turn_time, system.sampled_turn_path) == (0.5, "system/blocker")


async def test_a_blocking_plain_on_start_is_no_turn() -> None:
    # Not its own, nor one of the actor served just before it in the same round.
    sampler = TurnSampler(run_thread=False)

    class SamplesInOnStart(Actor):
        def on_start(self) -> None:
            sampler.sample(100.0)
            sampler.sample(105.0)

        def receive(self, message: Any) -> Any:
            return message

    async with open_actor_system(turn_sampling=None) as system:
        quick = system.spawn(Quick)
        await trio.testing.wait_all_tasks_blocked()
        with sampled(sampler, system):
            quick.tell(1)
            starts = system.spawn(SamplesInOnStart)  # its on_start: after quick's turn
            await trio.testing.wait_all_tasks_blocked()
        assert sampled_turn(quick) == sampled_turn(starts) == 0.0
        assert system.sampled_turn_time == 0.0


async def test_two_systems_on_one_trio_thread_are_sampled_each_by_its_own_record() -> None:
    sampler = TurnSampler(run_thread=False)
    seen: list[tuple[ActorCell | None, ActorCell | None]] = []

    async with (
        open_actor_system(turn_sampling=None) as first,
        open_actor_system(turn_sampling=None) as second,
    ):

        def take() -> None:
            seen.append((record(first).serving(), record(second).serving()))
            sampler.sample(100.0)
            sampler.sample(101.0)

        blocker = second.spawn(Samples, take, name="blocker")
        quick = first.spawn(Quick)
        await trio.testing.wait_all_tasks_blocked()
        with sampled(sampler, first, second):
            quick.tell(1)
            blocker.tell(1)
            await trio.testing.wait_all_tasks_blocked()
        assert seen == [(None, local_cell(blocker))]
        assert sampled_turn(blocker) == 1.0
        assert sampled_turn(quick) == 0.0
        assert (second.sampled_turn_time, second.sampled_turn_path) == (1.0, "system/blocker")
        assert first.sampled_turn_time == 0.0


async def test_the_record_names_nothing_while_the_dispatcher_is_parked() -> None:
    sampler = TurnSampler(run_thread=False)
    async with open_actor_system(turn_sampling=None) as system:
        refs = [system.spawn(Quick) for _ in range(3)]
        with sampled(sampler, system):
            for ref in refs:
                ref.tell(1)
            assert await refs[0].ask(2) == 2
            await trio.testing.wait_all_tasks_blocked()
            assert system._dispatcher.parked is not None
            assert record(system).serving() is None
            sampler.sample(100.0)
            sampler.sample(200.0)
        assert all(sampled_turn(ref) == 0.0 for ref in refs)


class AsksAnIdleActor(Actor):
    """Async: asks an idle plain actor (answered in this task, inside this handler's
    step) and notes whom the record says the trio thread serves, around it."""

    def __init__(self, other: ActorRef, noted: list[Any]) -> None:
        self.other = other
        self.noted = noted

    async def receive(self, message: Any) -> Any:
        self.noted.append(("asking", record(self.system).serving()))
        await self.other.ask(record(self.system))
        self.noted.append(("answered", record(self.system).serving()))


class NotesTheRecord(Actor):
    def __init__(self, noted: list[Any]) -> None:
        self.noted = noted

    def receive(self, message: ServingNow) -> None:
        self.noted.append(("answering", message.serving()))


async def test_an_idle_ask_inside_an_async_handler_is_the_one_served() -> None:
    noted: list[Any] = []
    async with open_actor_system(turn_sampling=None) as system:
        answering = system.spawn(NotesTheRecord, noted)
        asking = system.spawn(AsksAnIdleActor, answering, noted)
        await answering.ask(record(system))  # (started, and served inline from now on)
        noted.clear()
        asking.tell(1)
        await trio.testing.wait_all_tasks_blocked()
        assert record(system).serving() is None
        assert record(system).handlers == {}
    asker = local_cell(asking)
    assert noted == [("asking", asker), ("answering", local_cell(answering)), ("answered", asker)]


class Waits(Actor):
    """Async: waits for ``go`` in its handler."""

    def __init__(self, go: trio.Event) -> None:
        self.go = go

    async def receive(self, message: Any) -> Any:
        await self.go.wait()
        return message


async def test_an_async_handler_in_progress_is_not_served_while_it_waits() -> None:
    # Its task is suspended: whatever else runs meanwhile -- here the test's own
    # task, taking the samples -- is not its turn.
    sampler = TurnSampler(run_thread=False)
    go = trio.Event()
    async with open_actor_system(turn_sampling=None) as system:
        waiting = system.spawn(Waits, go)
        with sampled(sampler, system):
            waiting.tell(1)
            await trio.testing.wait_all_tasks_blocked()
            assert list(record(system).handlers) == [local_cell(waiting)]
            assert record(system).serving() is None
            sampler.sample(100.0)
            sampler.sample(200.0)
            go.set()
            await trio.testing.wait_all_tasks_blocked()
        assert record(system).handlers == {}
        assert sampled_turn(waiting) == 0.0


class AwaitsForever(Actor):
    def __init__(self, outcomes: list[str]) -> None:
        self.outcomes = outcomes

    async def receive(self, message: Any) -> Any:
        if message == "raise":
            await trio.lowlevel.checkpoint()
            raise KeyError(message)
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            self.outcomes.append("cancelled")
            raise


async def test_an_async_handler_cancelled_or_failed_is_in_progress_no_more() -> None:
    outcomes: list[str] = []
    async with open_actor_system(turn_sampling=None) as system:
        ref = system.spawn(AwaitsForever, outcomes)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(ref.ask, "wait")
            await trio.testing.wait_all_tasks_blocked()
            assert list(record(system).handlers) == [local_cell(ref)]
            nursery.cancel_scope.cancel()  # the asker's: its handler is cancelled
        await trio.testing.wait_all_tasks_blocked()
        assert outcomes == ["cancelled"]
        assert record(system).handlers == {}
        with pytest.raises(KeyError):
            await ref.ask("raise")
        assert record(system).handlers == {}
        assert ref.statistics().handled == 2


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
        sampler.add(record(system), 0.001)
        try:
            await blocker.ask(1)
        finally:
            sampler.remove(record(system))
        assert blocker.statistics().longest_turn_seconds >= 10.0


async def test_under_mock_clock_nothing_is_sampled(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with open_actor_system() as system:
        assert record(system) not in SAMPLER._records


async def test_the_default_clock_is_sampled_while_the_system_is_open() -> None:
    async with open_actor_system() as system:
        assert SAMPLER._records[record(system)] == 0.05
    assert record(system) not in SAMPLER._records


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

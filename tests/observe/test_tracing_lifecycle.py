"""Failures, restarts and stops in a traced system: a failure is an event on the span
it happened in; the restart it leads to is a span child of the failing message's
(also for an ``async`` handler, whose span has ended by then), a stop a span child
of whoever stopped the actor (or of the failure, under ``Stop``); the system's exit
makes none. And the observer seam itself: which hook is called when, and that a
system opened without ``tracing=`` has no observer at all."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import pytest
import trio
import trio.lowlevel
import trio.testing
from opentelemetry.trace import SpanKind

import trio_actors as ta
from helpers import Echo
from traces import Recorded, attributes, events, is_child, outcome
from trio_actors import _opener
from trio_actors._core._cell import ActorCell
from trio_actors._core._dispatcher import Dispatcher
from trio_actors._core._ref import local_cell
from trio_actors.observe import Tracing
from trio_actors.observe._spans import Spans
from trio_actors.observe._tracer import TracingObserver

pytestmark = pytest.mark.usefixtures("no_context_left_behind")


class Fragile(ta.Actor):
    """``"fail"`` raises; ``"stop"`` stops it from its handler; the rest is echoed."""

    def receive(self, message: Any) -> Any:
        if message == "fail":
            raise ValueError("fragile")
        if message == "stop":
            self.stop()
        return message


class AsyncFragile(ta.Actor):
    async def receive(self, message: Any) -> Any:
        await trio.lowlevel.checkpoint()
        if message == "fail":
            raise ValueError("fragile")
        return message


class Stopper(ta.Actor):
    """Stops the ref it is asked with (``stop_nowait``: from a plain handler)."""

    def receive(self, message: ta.ActorRef) -> None:
        message.stop_nowait()


class FailsToStop(ta.Actor):
    def receive(self, message: Any) -> Any:
        return message

    def on_stop(self) -> None:
        raise RuntimeError("on_stop broke")


@pytest.mark.parametrize("actor", [Fragile, AsyncFragile], ids=["plain", "async"])
async def test_a_restart_is_a_span_child_of_the_failing_message(
    autojump_clock: trio.testing.MockClock, actor: type[ta.Actor]
) -> None:
    recorded = Recorded()
    backoff = ta.Backoff(min_delay=0.5, jitter=0)
    async with ta.open_actor_system(tracing=recorded.provider, seed=1) as system:
        ref = system.spawn(actor, supervision=ta.Restart(backoff=backoff))
        with pytest.raises(ValueError, match="fragile"):
            await ref.ask("fail")
        assert await ref.ask("after") == "after"  # (the fresh instance)
        assert ref.statistics().restarts == 1
    name = actor.__name__
    failing = next(s for s in recorded.named(f"receive {name}") if outcome(s) == "exception")
    restart = recorded.one(f"restart {name}", SpanKind.INTERNAL)
    assert is_child(restart, failing)
    assert attributes(restart)["trio_actors.restart.delay"] == 0.5
    assert outcome(restart) == "replaced"
    assert events(failing) == ["failure", "exception"]


async def test_a_stop_asked_from_a_traced_handler_is_a_span_child_of_its_handling(
    autojump_clock: trio.testing.MockClock,
) -> None:
    recorded = Recorded()
    async with ta.open_actor_system(tracing=recorded.provider) as system:
        echo = system.spawn(Echo)
        await echo.ask("first")
        stopper = system.spawn(Stopper)
        await stopper.ask(echo)
        await echo.wait_stopped()
    stop = recorded.one("stop Echo", SpanKind.INTERNAL)
    assert is_child(stop, recorded.one("receive Stopper"))
    assert outcome(stop) == "stopped"
    assert attributes(stop)["trio_actors.stop.stranded_tells"] == 0


async def test_a_stop_span_counts_what_the_stop_stranded(
    autojump_clock: trio.testing.MockClock,
) -> None:
    class Hold(ta.Actor):
        async def receive(self, message: Any) -> Any:
            if message == "hold":
                await trio.sleep_forever()
            return message

    recorded = Recorded()
    tracer = recorded.provider.get_tracer("test")
    async with ta.open_actor_system(tracing=recorded.provider) as system:
        hold = system.spawn(Hold)
        stranded: list[BaseException] = []

        async def ask(message: Any) -> None:
            try:
                await hold.ask(message)
            except ta.ActorStopped as error:
                stranded.append(error)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(ask, "hold")
            await trio.testing.wait_all_tasks_blocked()
            for number in range(5):
                hold.tell(number)
            nursery.start_soon(ask, "queued")
            await trio.testing.wait_all_tasks_blocked()
            with tracer.start_as_current_span("shutdown"):
                await hold.stop()
    stop = recorded.one("stop Hold")
    assert is_child(stop, recorded.one("shutdown"))
    assert attributes(stop)["trio_actors.stop.stranded_tells"] == 5
    assert attributes(stop)["trio_actors.stop.failed_asks"] == 1
    assert len(stranded) == 2  # (the one running, and the one queued)


@pytest.mark.parametrize("actor", [Fragile, AsyncFragile], ids=["plain", "async"])
async def test_a_stop_decided_by_supervision_is_a_span_child_of_the_failure(
    autojump_clock: trio.testing.MockClock, actor: type[ta.Actor]
) -> None:
    recorded = Recorded()
    async with ta.open_actor_system(tracing=recorded.provider) as system:
        ref = system.spawn(actor, supervision=ta.Stop())
        with pytest.raises(ValueError, match="fragile"):
            await ref.ask("fail")
        await ref.wait_stopped()
    failing = recorded.one(f"receive {actor.__name__}")
    assert is_child(recorded.one(f"stop {actor.__name__}"), failing)


async def test_an_on_stop_failure_is_an_event_on_the_stop_span(
    autojump_clock: trio.testing.MockClock,
) -> None:
    recorded = Recorded()
    tracer = recorded.provider.get_tracer("test")
    async with ta.open_actor_system(tracing=recorded.provider) as system:
        ref = system.spawn(FailsToStop)
        await ref.ask("started")
        with tracer.start_as_current_span("shutdown"):
            await ref.stop()
    stop = recorded.one("stop FailsToStop")
    assert events(stop) == ["failure"]
    assert (stop.events[0].attributes or {})["trio_actors.failure.where"] == "in on_stop"


async def test_the_exit_stops_actors_without_spans_and_a_stop_outside_a_trace_has_none(
    autojump_clock: trio.testing.MockClock,
) -> None:
    recorded = Recorded()
    async with ta.open_actor_system(tracing=recorded.provider) as system:
        for _ in range(3):
            await system.spawn(FailsToStop).ask("started")
        await system.spawn(Echo).stop()  # (asked outside any trace: no span)
    assert not [s for s in recorded.spans if s.name.startswith("stop ")]


# --- the seam -----------------------------------------------------------------------


class Recording(TracingObserver):
    """A tracing observer that also writes down each hook's call."""

    def __init__(self, options: Tracing) -> None:
        super().__init__(options)
        self.calls: list[tuple[Any, ...]] = []

    def failed(self, cell: ActorCell, error: BaseException, where: str) -> None:
        self.calls.append(("failed", cell.name, type(error).__name__, where))
        super().failed(cell, error, where)

    def lifecycle(self, cell: ActorCell, what: Any) -> AbstractContextManager[None]:
        @contextmanager
        def bracket() -> Iterator[None]:
            self.calls.append(("enter", what, cell.name))
            with super(Recording, self).lifecycle(cell, what):
                yield
            self.calls.append(("leave", what, cell.name, cell.state.value))

        return bracket()

    def retired(self, cell: ActorCell) -> None:
        self.calls.append(("retired", cell.name, cell.handled))

    def dead_letters(self, recipient: ta.ActorRef, reason: Any, count: int) -> None:
        self.calls.append(("dead_letters", recipient.name, reason, count))

    def async_turn(self, cell: ActorCell, seconds: float) -> None:
        self.calls.append(("async_turn", cell.name, seconds))


async def test_the_observer_hears_each_hook_where_the_seam_says(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    class Slow(ta.Actor):
        async def receive(self, message: Any) -> None:
            await trio.sleep(0.25)

    recorded = Recorded()
    made: list[Recording] = []

    def recording(tracing: object) -> Recording:
        made.append(Recording(Tracing(provider=recorded.provider)))
        return made[0]

    monkeypatch.setattr(_opener, "_tracing_observer", recording)
    async with ta.open_actor_system(tracing=True) as system:
        fragile = system.spawn(Fragile, name="fragile")
        with pytest.raises(ValueError, match="fragile"):
            await fragile.ask("fail")
        await fragile.ask("after")
        slow = system.spawn(Slow, name="slow")
        slow.tell(1)
        slow.tell(2)
        await trio.testing.wait_all_tasks_blocked()
        await fragile.stop()
        fragile.tell("late")
        await slow.ask("last")
    calls = made[0].calls
    # (per actor: the order of one actor's hooks is its own; two actors' interleave
    # as trio schedules them)
    fragile_calls = [call for call in calls if "fragile" in call]
    assert fragile_calls == [
        ("failed", "fragile", "ValueError", "handling a str"),
        ("enter", "restart", "fragile"),
        ("leave", "restart", "fragile", "starting"),  # (its fresh instance: on_start next)
        ("enter", "stop", "fragile"),
        ("retired", "fragile", 2),
        ("leave", "stop", "fragile", "stopped"),
        ("dead_letters", "fragile", "stopped", 1),
    ]
    slow_calls = [call for call in calls if "slow" in call]
    assert slow_calls == [
        # (a turn per message: each takes longer than the 16 ms time slice)
        ("async_turn", "slow", 0.25),
        ("async_turn", "slow", 0.25),
        ("async_turn", "slow", 0.25),
        ("retired", "slow", 3),  # (stopped by the exit: no stop task, no lifecycle)
    ]
    assert len(calls) == len(fragile_calls) + len(slow_calls)


async def test_a_system_without_tracing_has_no_observer_and_plain_classes(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with ta.open_actor_system() as system:
        echo = system.spawn(Echo)
        assert system._observer is None
        assert system.dead_letters.observer is None
        assert type(system._dispatcher) is Dispatcher
        assert type(local_cell(echo)) is ActorCell
    recorded = Recorded()
    async with ta.open_actor_system(tracing=recorded.provider) as system:
        echo = system.spawn(Echo)
        bounded = system.spawn(Echo, mailbox=ta.Bounded(4))
        assert isinstance(system._observer, TracingObserver)
        assert type(local_cell(echo)).__name__ == "TracedActorCell"
        assert type(local_cell(bounded)).__name__ == "TracedBoundedCell"
        assert vars(type(local_cell(echo)))["__slots__"] == ()  # (no slot added)
        assert type(local_cell(echo)) is type(local_cell(system.spawn(Echo)))  # (cached)


def _closed_traced_systems_held(systems: int, metrics: bool) -> tuple[int, int, int]:
    """After ``systems`` traced systems (``metrics``: and metered) opened, used and
    closed: the systems alive, the traced classes alive (cell and dispatcher classes:
    at most one per base, see observe/_reused.py), and the Spans alive."""

    async def main() -> None:
        for _ in range(systems):
            recorded = Recorded()
            tracing = Tracing(provider=recorded.provider, tells="all")
            async with ta.open_actor_system(tracing=tracing, metrics=metrics) as system:
                refs = [
                    system.spawn(Echo),
                    system.spawn(Echo, mailbox=ta.Bounded(4)),
                    system.spawn(ta.Pool(Echo, size=2)),
                ]
                for ref in refs:
                    ref.tell(1)
                    await ref.ask(2)
            assert recorded.named("ask Echo")

    trio.run(main)
    gc.collect()
    alive = gc.get_objects()
    return (
        sum(1 for o in alive if isinstance(o, ta.ActorSystem)),
        sum(1 for o in alive if isinstance(o, type) and o.__name__.startswith("Traced")),
        sum(1 for o in alive if isinstance(o, Spans)),
    )


@pytest.mark.parametrize("metrics", [False, True], ids=["traced", "traced-and-metered"])
def test_closed_systems_are_not_kept_alive_by_their_traces(metrics: bool) -> None:
    # On the compiled build a class that extends a compiled one, once it had an
    # instance, lives as long as the process (see observe/_reused.py): a
    # traced system must make no class of its own, nor leave itself in one.
    systems, classes, spans = _closed_traced_systems_held(1, metrics)
    after_systems, after_classes, after_spans = _closed_traced_systems_held(20, metrics)
    assert (after_systems, after_spans) == (systems, spans)  # (alive before: others')
    assert after_classes <= classes, "a traced class made per system"

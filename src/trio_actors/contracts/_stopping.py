"""Contracts T9, T11, T14, T15 and T16: stopping actors and the system."""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from .. import Actor, ActorStopped, ServingPolicy
from ._harness import StepMeter, count_tasks, require, run_virtual, settle, system_for
from ._registry import contract


class _Blocking(Actor):
    """Async actor: "block" waits forever (until cancelled); on_stop is recorded."""

    def __init__(self, events: list[str]) -> None:
        self.events = events

    async def receive(self, message: Any) -> Any:
        if message == "block":
            await trio.sleep_forever()
        return message

    def on_stop(self) -> None:
        self.events.append("on_stop")


class _Counting(Actor):
    def __init__(self, events: list[str]) -> None:
        self.events = events
        self.handled = 0

    def receive(self, message: Any) -> Any:
        self.handled += 1
        return message

    def on_stop(self) -> None:
        self.events.append("on_stop")


async def _ask_expecting_stopped(ref: Any, message: Any, outcomes: list[str]) -> None:
    try:
        await ref.ask(message)
    except ActorStopped:
        outcomes.append("stopped")
    except BaseException as error:  # pragma: no cover - reported by the contract
        outcomes.append(repr(error))
        raise
    else:
        outcomes.append("answered")


@contract(
    "T9",
    "stranded on stop",
    "stop() with 10,000 queued (tells and asks mixed): each stranded ask raises "
    "ActorStopped in its asker, each stranded tell is exactly one "
    "DeadLetter(reason='stranded'); stop returns only after the cleanup and on_stop",
)
def stranded_on_stop(policy: ServingPolicy) -> None:
    async def main(clock: trio.testing.MockClock) -> None:
        async with system_for(policy) as system, trio.open_nursery() as askers:
            # Async actor: blocked in a handler while 8,000 tells and 2,000 asks queue.
            events: list[str] = []
            ref = system.spawn(_Blocking, events)
            outcomes: list[str] = []
            askers.start_soon(_ask_expecting_stopped, ref, "block", outcomes)
            await settle()
            tells = []
            for i in range(10_000):
                if i % 5 == 4:
                    askers.start_soon(_ask_expecting_stopped, ref, ("ask", i), outcomes)
                else:
                    tells.append(("tell", i))
                    ref.tell(tells[-1])
            await settle()
            before = system.dead_letters.count
            await ref.stop()
            require(events == ["on_stop"], f"stop returned before on_stop ran: {events}")
            letters = list(system.dead_letters.recent)[before - system.dead_letters.count :]
            stranded = [d.message for d in letters if d.reason == "stranded"]
            require(
                system.dead_letters.count - before == len(tells) and stranded == tells,
                f"{len(tells)} stranded tells gave {system.dead_letters.count - before} dead "
                "letters by the time stop() returned",
            )
            await settle()
            require(
                outcomes.count("stopped") == 2_001 and len(outcomes) == 2_001,
                f"stranded asks: {len(outcomes)} ended, {outcomes.count('stopped')} with "
                "ActorStopped (expected 2,001: 2,000 queued and the one being handled)",
            )

            # Plain actor: 10,000 tells queued, then stop before it is served.
            plain_events: list[str] = []
            plain = system.spawn(_Counting, plain_events)
            await plain.ask("started")
            before = system.dead_letters.count
            for i in range(10_000):
                plain.tell(i)
            await plain.stop()
            made = system.dead_letters.count - before
            require(plain_events == ["on_stop"], "plain: stop returned before on_stop ran")
            require(made == 10_000, f"plain: 10,000 stranded tells gave {made} dead letters")

    run_virtual(main)


@contract(
    "T11",
    "cleanup stays responsive",
    "while 100,000 stranded tells are cleaned, no task step cleans more than 48 of "
    "them (holds for cleanup_batch 32; breaks at 64)",
    absolute=True,
)
def cleanup_stays_responsive(policy: ServingPolicy) -> None:
    largest: dict[str, float] = {}

    def scenario(at_exit: bool) -> None:
        dead_letters: list[Any] = []
        meter = StepMeter(lambda: dead_letters[0].count if dead_letters else 0)

        async def main(clock: trio.testing.MockClock) -> None:
            async with system_for(policy) as system:
                dead_letters.append(system.dead_letters)
                ref = system.spawn(_Counting, [])
                await ref.ask("started")
                for i in range(100_000):
                    ref.tell(i)
                if not at_exit:
                    await ref.stop()
            require(
                dead_letters[0].count == 100_000,
                f"only {dead_letters[0].count} of 100,000 stranded tells were cleaned",
            )

        run_virtual(main, instruments=(meter,))
        largest["system exit" if at_exit else "stop()"] = meter.largest

    scenario(at_exit=False)
    scenario(at_exit=True)
    for how, most in largest.items():
        require(most <= 48, f"{how}: one task step cleaned {most:.0f} stranded tells (> 48)")


class _Draining(Actor):
    def __init__(self, clock: trio.testing.MockClock, handled: list[Any]) -> None:
        self.clock = clock
        self.handled = handled

    def receive(self, message: Any) -> Any:
        self.clock.jump(0.001)
        self.handled.append(message)
        return message


@contract(
    "T14",
    "graceful drain",
    "stop(drain=True) with 1,000 queued: all handled in order; tells after the call "
    "become DeadLetter(reason='stopped'), asks after it raise ActorStopped",
)
def graceful_drain(policy: ServingPolicy) -> None:
    async def main(clock: trio.testing.MockClock) -> None:
        async with system_for(policy) as system:
            handled: list[Any] = []
            ref = system.spawn(_Draining, clock, handled)
            queued = list(range(1_000))
            for i in queued:
                ref.tell(i)
            with trio.CancelScope() as waiting:
                waiting.cancel()  # begin the drain, but do not wait for it here
                await ref.stop(drain=True)
            require(len(handled) < 1_000, "setup: the drain finished before it was tested")
            before = system.dead_letters.count
            ref.tell("late")
            late = system.dead_letters.recent[-1] if system.dead_letters.count > before else None
            require(
                late is not None and late.message == "late" and late.reason == "stopped",
                f"a tell after stop(drain=True) was not a 'stopped' dead letter: {late!r}",
            )
            try:
                await ref.ask("late ask")
            except ActorStopped:
                pass
            else:
                require(False, "an ask after stop(drain=True) was answered")
            await ref.stop(drain=True)
        require(
            handled == queued,
            f"drain handled {len(handled)} of 1,000 (or out of order)",
        )

    run_virtual(main)


class _SlowStop(Actor):
    def __init__(self, stops: list[float]) -> None:
        self.stops = stops

    def receive(self, message: Any) -> Any:
        return message

    async def on_stop(self) -> None:
        await trio.sleep(1)
        self.stops.append(trio.current_time())


@contract(
    "T15",
    "idempotent stop",
    "ten concurrent stop() calls all return once stopped; on_stop runs exactly once; "
    "a cancelled stop() caller still leaves the actor stopped",
)
def idempotent_stop(policy: ServingPolicy) -> None:
    async def main(clock: trio.testing.MockClock) -> None:
        async with system_for(policy) as system:
            stops: list[float] = []
            ref = system.spawn(_SlowStop, stops)
            returned: list[float] = []

            async def stopper() -> None:
                await ref.stop()
                returned.append(trio.current_time())

            async with trio.open_nursery() as nursery:
                for _ in range(10):
                    nursery.start_soon(stopper)
            require(len(stops) == 1, f"on_stop ran {len(stops)} times")
            require(
                len(returned) == 10 and min(returned) >= stops[0],
                f"stop() returned before on_stop finished: {returned} vs {stops}",
            )

            stops2: list[float] = []
            other = system.spawn(_SlowStop, stops2)
            with trio.move_on_after(0.1) as scope:
                await other.stop()
            require(scope.cancelled_caught, "the cancelled stop() did not return early")
            await trio.sleep(5)
            require(len(stops2) == 1, "after a cancelled stop() caller, on_stop did not run")
            before = system.dead_letters.count
            other.tell("late")
            require(system.dead_letters.count == before + 1, "the actor was not stopped")

    run_virtual(main)


class _Parent(Actor):
    def __init__(self, events: list[str], name: str) -> None:
        self.events = events
        self.name = name

    async def receive(self, message: Any) -> Any:
        if message == "block":
            try:
                await trio.sleep_forever()
            except trio.Cancelled:
                self.events.append(f"{self.name}: handler cancelled")
                raise
        return message

    def on_stop(self) -> None:
        self.events.append(f"{self.name}: on_stop")


@contract(
    "T16",
    "system exit",
    "leaving the system block stops every actor, children before parents, strands "
    "backlogs as in T9, cancels running async handlers, and leaves no task behind; "
    "asks pending from outside raise ActorStopped",
)
def system_exit(policy: ServingPolicy) -> None:
    async def main(clock: trio.testing.MockClock) -> None:
        tasks_before = count_tasks()
        events: list[str] = []
        outcomes: list[str] = []
        async with trio.open_nursery() as outside:
            async with system_for(policy) as system:
                busy = system.spawn(_Parent, events, "busy")
                plain = system.spawn(_Counting, events)
                await plain.ask("started")
                outside.start_soon(_ask_expecting_stopped, busy, "block", outcomes)
                await settle()
                for i in range(100):
                    outside.start_soon(_ask_expecting_stopped, busy, i, outcomes)
                    busy.tell(("tell", i))
                await settle()
                for i in range(100):
                    plain.tell(i)  # queued: no checkpoint before the block ends
                dead_letters = system.dead_letters
                require(system.live_actors == 2, "setup: two actors should be alive")
            require(
                system.live_actors == 0,
                f"{system.live_actors} actors outlived the block",
            )
            require(
                "busy: handler cancelled" in events,
                f"the running async handler was not cancelled: {events}",
            )
            require(
                events.count("on_stop") == 1 and "busy: on_stop" in events,
                f"on_stop did not run for every actor: {events}",
            )
            require(
                dead_letters.by_reason["stranded"] == 200,
                f"200 queued tells gave {dead_letters.by_reason['stranded']} stranded letters",
            )
        require(
            outcomes == ["stopped"] * 101,
            f"asks pending from outside ended as {sorted(set(outcomes))} ({len(outcomes)} of 101)",
        )
        left = count_tasks() - tasks_before
        require(left == 0, f"{left} tasks were left behind by the system")

    run_virtual(main)
    run_virtual(_children_before_parents)


class _Family(Actor):
    """Spawns ``depth`` levels of ``width`` children; records its on_stop."""

    def __init__(self, stops: list[str], depth: int, width: int) -> None:
        self.stops = stops
        self.depth = depth
        self.width = width

    def on_start(self) -> None:
        if self.depth:
            for i in range(self.width):
                self.spawn(_Family, self.stops, self.depth - 1, self.width, name=f"c{i}")

    def receive(self, message: Any) -> Any:
        return message

    def on_stop(self) -> None:
        self.stops.append(self.ref.path)


def _children_first(stops: list[str]) -> str | None:
    """The first parent stopped before one of its children, or None."""
    for i, path in enumerate(stops):
        for later in stops[i + 1 :]:
            if later.startswith(path + "/"):
                return f"{path} stopped before its child {later}"
    return None


async def _children_before_parents(clock: trio.testing.MockClock) -> None:
    stops: list[str] = []
    async with system_for(ServingPolicy()) as system:
        stopped_alone = system.spawn(_Family, stops, 2, 2, name="alone")
        system.spawn(_Family, stops, 2, 2, name="at-exit")
        await settle()
        require(system.live_actors == 14, f"setup: {system.live_actors} actors, not 14")
        await stopped_alone.stop()
        require(len(stops) == 7, f"stop() of a parent stopped {len(stops)} of its 7 actors")
        problem = _children_first(stops)
        require(problem is None, f"stop(): {problem}")
        stops.clear()
    require(len(stops) == 7, f"system exit stopped {len(stops)} of 7 actors")
    problem = _children_first(stops)
    require(problem is None, f"system exit: {problem}")

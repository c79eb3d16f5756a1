"""Stopping an actor and the system's exit, where a stop meets a handler, a restart or
another stop: each ends, once, and whoever waits for it is answered.

Each test is a small program under an autojumping ``MockClock``.
"""

import gc
import math
import weakref
from typing import Any

import pytest
import trio
import trio.testing

import trio_actors as ta
from helpers import Failing
from trio_actors.testing import run_virtual


@pytest.mark.parametrize("how", ["outer cancel", "root escalation"])
def test_an_asker_is_answered_when_the_system_dies_under_its_async_handler(how: str) -> None:
    outcomes: list[str] = []
    answered = trio.Event()

    class Slow(ta.Actor):
        async def receive(self, message: Any) -> Any:
            await trio.sleep(100)

    async def ask(ref: ta.ActorRef) -> None:
        try:
            await ref.ask("x")
        except ta.ActorStopped:
            outcomes.append("stopped")
        answered.set()

    async def main() -> None:
        async with trio.open_nursery() as outside:
            with trio.CancelScope() as scope:
                try:
                    async with ta.open_actor_system() as system:
                        slow = system.spawn(Slow)
                        outside.start_soon(ask, slow)
                        await trio.sleep(1)
                        if how == "outer cancel":
                            scope.cancel()
                        else:
                            system.spawn(Failing, supervision=ta.Escalate()).tell("boom")
                        await trio.sleep(10)
                except BaseExceptionGroup:
                    pass
            with trio.fail_after(5):
                await answered.wait()
        assert outcomes == ["stopped"]

    run_virtual(main)


def test_stop_cancels_the_async_handler_of_an_actor_already_stopping() -> None:
    class Busy(ta.Actor):
        async def receive(self, message: Any) -> Any:
            if message == "spawn":
                return self.spawn(Failing, name="c", supervision=ta.Escalate())
            await trio.sleep(1000)
            return None

    class StopsItself(ta.Actor):
        async def receive(self, message: Any) -> Any:
            self.stop()
            await trio.sleep(1000)

    async def main() -> None:
        async with ta.open_actor_system() as system:
            parent = system.spawn(Busy, name="p", supervision=ta.Stop())
            child = await parent.ask("spawn")
            parent.tell("work")
            await trio.sleep(1)
            child.tell("boom")  # escalates: the parent stops, its handler cancelled
            start = trio.current_time()
            await parent.stop()
            assert trio.current_time() - start < 1
            itself = system.spawn(StopsItself)
            itself.tell("x")
            await trio.sleep(1)
            start = trio.current_time()
            await itself.stop()
            assert trio.current_time() - start < 1

    run_virtual(main)


async def test_an_immediate_stop_ends_a_drain_whose_async_handler_runs(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The stop task waits for the drain only while the actor is DRAINING: once the
    # drain became an immediate stop, waiting on would be for a wake-up that never
    # comes.
    class Busy(ta.Actor):
        async def receive(self, message: Any) -> None:
            await trio.sleep(100)

    async with ta.open_actor_system() as system:
        ref = system.spawn(Busy, shutdown=math.inf)
        ref.tell("work")
        ref.tell("more")
        await trio.testing.wait_all_tasks_blocked()
        ref.stop_nowait(drain=True)
        await trio.sleep(1)
        with trio.move_on_after(10):
            await ref.stop()
        assert ref.statistics().state == "stopped"


def test_awaiting_your_own_stop_from_on_stop_is_an_error_not_a_deadlock() -> None:
    seen: list[str] = []

    class SelfStopper(ta.Actor):
        def receive(self, message: Any) -> Any:
            return None

        async def on_stop(self) -> None:
            try:
                await self.ref.stop()
            except ta.ActorError:
                seen.append("ActorError")

    async def main() -> None:
        async with ta.open_actor_system() as system:
            ref = system.spawn(SelfStopper)
            with trio.fail_after(60):
                await ref.stop()
            assert seen == ["ActorError"]

    run_virtual(main)


def test_wait_stopped_works_from_the_task_that_ran_an_actors_stop() -> None:
    # The exit runs stops in the block's task; an older actor's on_stop, and the
    # code after the block, may still wait for an actor the exit already stopped.
    results: list[Any] = []

    class Older(ta.Actor):
        def __init__(self) -> None:
            self.newer: ta.ActorRef | None = None

        def receive(self, message: Any) -> Any:
            self.newer = message

        async def on_stop(self) -> None:
            assert self.newer is not None
            results.append(await self.newer.wait_stopped())

    class Newer(ta.Actor):
        def receive(self, message: Any) -> Any:
            return message

        def on_stop(self) -> None:
            pass

    async def main() -> None:
        async with ta.open_actor_system() as system:
            older = system.spawn(Older)
            newer = system.spawn(Newer)
            older.tell(newer)
            await trio.testing.wait_all_tasks_blocked()
        results.append(await newer.wait_stopped())
        await newer.stop()  # stopped already: returns

    run_virtual(main)
    assert [type(result) for result in results] == [ta.Terminated, ta.Terminated]


def test_an_actor_that_fails_during_the_exit_restarts_and_may_spawn_its_children() -> None:
    # Actors the exit has not reached keep serving; a restart of one whose fresh
    # instance spawns children must not fail (then escalate) for "system closed".
    starts: list[int] = []

    class Parent(ta.Actor):
        def on_start(self) -> None:
            starts.append(len(starts))
            self.spawn(Child, name="child")

        def receive(self, message: Any) -> Any:
            if message == "fail":
                raise RuntimeError("fails during the exit")

    class Child(ta.Actor):
        def receive(self, message: Any) -> Any:
            return message

    class Trigger(ta.Actor):
        def __init__(self, parent: ta.ActorRef) -> None:
            self.parent = parent

        def receive(self, message: Any) -> Any:
            return message

        async def on_stop(self) -> None:
            self.parent.tell("fail")  # the parent is older: not reached yet
            await trio.sleep(0.1)  # its restart runs meanwhile

    async def main() -> None:
        async with ta.open_actor_system() as system:
            parent = system.spawn(Parent, supervision=ta.Restart(max_restarts=3))
            system.spawn(Trigger, parent)
            await trio.testing.wait_all_tasks_blocked()
        assert system.statistics().live_actors == 0
        assert system.statistics().restarts == 1

    run_virtual(main)
    assert starts == [0, 1]


@pytest.mark.parametrize("how", ["stop", "system exit"])
def test_a_stopped_actor_is_freed_without_the_cyclic_garbage_collector(how: str) -> None:
    # The instance refers to its cell; once the actor is STOPPED the cell lets go of
    # the instance (and of its bound receive), so no reference cycle is left for the
    # cyclic GC -- disabled here -- to find. The stopped actor's ref still answers.
    instances: list[weakref.ref[ta.Actor]] = []

    class Counter(ta.Actor):
        def __init__(self) -> None:
            instances.append(weakref.ref(self))
            self.count = 0

        def receive(self, message: Any) -> Any:
            self.count += 1
            return self.count

    async def main() -> ta.ActorRef:
        async with ta.open_actor_system() as system:
            ref = system.spawn(Counter)
            assert await ref.ask("x") == 1  # its receive is bound now
            if how == "stop":
                await ref.stop()
                assert instances[0]() is None
        return ref

    gc.disable()
    try:
        ref = run_virtual(main)
        assert instances[0]() is None
    finally:
        gc.enable()
    assert ref.name == "Counter-1"
    assert ref.path == "system/Counter-1"
    assert ref.statistics().state == "stopped"
    assert ref.statistics().handled == 1

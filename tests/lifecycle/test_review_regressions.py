"""Regressions found by review: races between failures, restarts, stops and exits.

Each test is a small program under an autojumping ``MockClock``; where trio's
shuffling of one scheduler batch could matter, the program runs many times.
"""

import logging
from typing import Any

import pytest
import trio
import trio.testing

import trio_actors as ta


@pytest.fixture(autouse=True)
def _quiet() -> None:
    logging.getLogger("trio_actors").setLevel(logging.CRITICAL)


def run(main: Any) -> Any:
    return trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


class Failing(ta.Actor):
    def receive(self, message: Any) -> Any:
        raise ValueError(message)


def test_two_children_escalating_in_one_round_restart_their_parent_once() -> None:
    starts: list[int] = []

    class Parent(ta.Actor):
        def on_start(self) -> None:
            starts.append(1)

        def receive(self, message: Any) -> Any:
            return (
                self.spawn(Failing, name="c1", supervision=ta.Escalate()),
                self.spawn(Failing, name="c2", supervision=ta.Escalate()),
            )

    async def main() -> None:
        async with ta.open_actor_system() as system:
            parent = system.spawn(Parent, name="p")
            c1, c2 = await parent.ask("spawn")
            c1.tell("boom1")
            c2.tell("boom2")
            await trio.sleep(1)
            assert await parent.ask("alive?") is not None
            assert starts == [1, 1]

    run(main)


def test_a_parent_queued_behind_an_escalating_child_keeps_its_messages() -> None:
    handled: list[Any] = []

    class Parent(ta.Actor):
        def receive(self, message: Any) -> Any:
            if message == "spawn":
                return self.spawn(Failing, name="c", supervision=ta.Escalate())
            handled.append(message)
            return None

        async def on_stop(self) -> None:
            await trio.sleep(1)  # a long restart

    async def main() -> None:
        async with ta.open_actor_system() as system:
            parent = system.spawn(Parent, name="p")
            child = await parent.ask("spawn")
            child.tell("boom")
            parent.tell("m1")  # the parent waits in the run queue behind the child
            await trio.sleep(0.5)
            parent.tell("m2")  # told during the restart
            await trio.sleep(2)
            assert handled == ["m1", "m2"]
            assert system.dead_letters.count == 0

    run(main)


def test_a_stop_during_a_restarts_on_stop_runs_on_stop_once() -> None:
    calls: list[int] = []

    class SlowStop(Failing):
        async def on_stop(self) -> None:
            calls.append(id(self))
            await trio.sleep(1)

    async def main() -> None:
        async with ta.open_actor_system() as system:
            ref = system.spawn(SlowStop)
            ref.tell("boom")
            await trio.sleep(0.5)
            await ref.stop()
        assert len(calls) == 1

    run(main)


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

    run(main)


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

    run(main)


def test_a_watch_made_while_draining_leaves_nothing_behind() -> None:
    class Target(ta.Actor):
        def receive(self, message: Any) -> Any:
            return None

    class Watcher(ta.Actor):
        def __init__(self, target: ta.ActorRef) -> None:
            self.target = target

        def receive(self, message: Any) -> Any:
            self.watch(self.target)

    async def main() -> None:
        async with ta.open_actor_system() as system:
            target = system.spawn(Target)
            watcher = system.spawn(Watcher, target)
            watcher.tell("watch")
            await watcher.stop(drain=True)  # handles "watch" while draining
            assert not target._cell.watchers
            await target.stop()
            assert system.dead_letters.count == 0

    run(main)


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

    run(main)


@pytest.mark.parametrize("attempt", range(20))
def test_a_child_escalating_during_its_parents_async_on_start_is_never_served_twice(
    attempt: int,
) -> None:
    events: list[str] = []

    class Parent(ta.Actor):
        generation = 0
        active = 0

        def __init__(self) -> None:
            Parent.generation += 1
            self.generation = Parent.generation

        async def on_start(self) -> None:
            Parent.active += 1
            events.append(f"start {self.generation} ({Parent.active} active)")
            if self.generation == 1:
                self.spawn(Failing, name="c", supervision=ta.Escalate()).tell("boom")
            await trio.sleep(1)
            Parent.active -= 1

        def receive(self, message: Any) -> Any:
            state = self._cell().state.name
            events.append(f"{message} by {self.generation} while {state}")

    async def main() -> None:
        async with ta.open_actor_system() as system:
            parent = system.spawn(Parent, name="p")
            parent.tell("m1")
            await trio.sleep(5)

    run(main)
    assert events == ["start 1 (1 active)", "start 2 (1 active)", "m1 by 2 while RUNNING"]


def test_unwatch_from_the_handler_with_an_ask_queued_behind_does_not_hang() -> None:
    # unwatch used to remove queued notices from the deque in the middle of the
    # actor's own turn, which moved the asks queued behind it while the serving
    # loop was counting on their positions: the loop spun forever.
    class Watcher(ta.Actor):
        def __init__(self, gate: trio.Event) -> None:
            self.gate = gate
            self.got: list[Any] = []

        async def on_start(self) -> None:
            await self.gate.wait()  # everything below queues up meanwhile

        def receive(self, message: Any) -> Any:
            if isinstance(message, ta.ActorRef):
                self.other = message
                self.watch(message)
            elif message == "unwatch":
                self.unwatch(self.other)
            elif message == "get":
                return list(self.got)
            else:
                self.got.append(message)
            return None

    async def main() -> list[Any]:
        async with ta.open_actor_system() as system:
            gate = trio.Event()
            watcher = system.spawn(Watcher, gate)
            watched = system.spawn(Watcher, gate)
            watcher.tell(watched)
            for message in (1, 2, "unwatch", 3, 4):
                watcher.tell(message)
            answers: list[Any] = []

            async def ask() -> None:
                answers.append(await watcher.ask("get"))

            async with trio.open_nursery() as nursery:
                nursery.start_soon(ask)
                await trio.testing.wait_all_tasks_blocked()  # queued behind the tells
                watcher.tell(5)
                gate.set()
            await watched.stop()  # unwatched: no Terminated arrives
            answers.append(await watcher.ask("get"))
            return answers

    first, last = run(main)
    assert first == [1, 2, 3, 4]
    assert last == [1, 2, 3, 4, 5]


def test_unwatch_withdraws_a_terminated_already_queued() -> None:
    class Watcher(ta.Actor):
        def __init__(self, gate: trio.Event) -> None:
            self.gate = gate
            self.got: list[Any] = []

        async def receive(self, message: Any) -> Any:
            if isinstance(message, ta.ActorRef):
                self.other = message
                self.watch(message)
            elif message == "wait":
                await self.gate.wait()
                self.unwatch(self.other)  # its Terminated is queued behind us
            elif message == "get":
                return list(self.got)
            else:
                self.got.append(message)
            return None

    async def main() -> tuple[list[Any], ta.ActorStatistics]:
        async with ta.open_actor_system() as system:
            gate = trio.Event()
            watcher = system.spawn(Watcher, gate)
            watched = system.spawn(Watcher, gate)
            watcher.tell(watched)
            watcher.tell("wait")
            await trio.testing.wait_all_tasks_blocked()
            await watched.stop()
            watcher.tell("after")
            gate.set()
            return await watcher.ask("get"), watcher.statistics()

    got, stats = run(main)
    assert got == ["after"]
    assert stats.withdrawn == 1


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

    run(main)
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

    run(main)
    assert starts == [0, 1]


class Watching(ta.Actor):
    """Plain: watches the refs it is told (and unwatches on ("unwatch", ref))."""

    def __init__(self, got: list[Any]) -> None:
        self.got = got

    def receive(self, message: Any) -> Any:
        if isinstance(message, ta.Terminated):
            self.got.append("terminated")
        elif isinstance(message, ta.ActorRef):
            self.watch(message)
        elif isinstance(message, tuple) and message[0] == "watch-unwatch":
            self.watch(message[1])
            self.unwatch(message[1])
        else:
            self.got.append(message)
        return message


class Plain(ta.Actor):
    def receive(self, message: Any) -> Any:
        return message


async def stopped_and_watcher(
    system: ta.ActorSystem, got: list[Any]
) -> tuple[ta.ActorRef, ta.ActorRef]:
    """An actor that has stopped, and a plain watcher that records into ``got``."""
    stopped = system.spawn(Plain)
    await stopped.stop()
    return stopped, system.spawn(Watching, got)


def test_watching_a_stopped_actor_in_the_middle_of_a_backlog_does_not_spin() -> None:
    # The Terminated was placed by a count of pops not yet made: the next stretch
    # computed a negative number of tells and the dispatcher never yielded again.
    got: list[Any] = []

    async def main() -> None:
        async with ta.open_actor_system() as system:
            stopped, watcher = await stopped_and_watcher(system, got)
            for number in range(5):
                watcher.tell(number)
            watcher.tell(stopped)  # in the middle of a stretch of the backlog
            for number in range(5, 40):
                watcher.tell(number)
            assert await watcher.ask("sync") == "sync"
            await trio.testing.wait_all_tasks_blocked()

    run(main)
    assert got == [*range(40), "sync", "terminated"]


def test_watch_then_unwatch_of_a_stopped_actor_delivers_nothing() -> None:
    got: list[Any] = []

    async def main() -> None:
        async with ta.open_actor_system() as system:
            stopped, watcher = await stopped_and_watcher(system, got)
            await watcher.ask(("watch-unwatch", stopped))
            await trio.testing.wait_all_tasks_blocked()
            assert watcher.statistics().withdrawn == 1

    run(main)
    assert got == []

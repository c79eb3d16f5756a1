"""Death watch (``Actor.watch`` / ``unwatch``, ``Terminated``) where it meets a drain,
a backlog or the watcher's own turn: nothing left behind, nothing delivered twice, no
serving loop that spins.

Each test is a small program under an autojumping ``MockClock``.
"""

from typing import Any

import pytest
import trio
import trio.testing

import trio_actors as ta
from helpers import Echo
from trio_actors._core._ref import local_cell
from trio_actors.testing import run_virtual


async def test_watch_needs_a_ref() -> None:
    class Watcher(ta.Actor):
        def receive(self, message: Any) -> Any:
            self.watch(message)

    async with ta.open_actor_system() as system:
        with pytest.raises(TypeError, match="needs an ActorRef"):
            await system.spawn(Watcher, supervision=ta.Resume()).ask("not a ref")


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
            assert not local_cell(target).watchers
            await target.stop()
            assert system.dead_letters.count == 0

    run_virtual(main)


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

    first, last = run_virtual(main)
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

    got, stats = run_virtual(main)
    assert got == ["after"]
    assert stats.withdrawn == 1


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


async def stopped_and_watcher(
    system: ta.ActorSystem, got: list[Any]
) -> tuple[ta.ActorRef, ta.ActorRef]:
    """An actor that has stopped, and a plain watcher that records into ``got``."""
    stopped = system.spawn(Echo)
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

    run_virtual(main)
    assert got == [*range(40), "sync", "terminated"]


def test_watch_then_unwatch_of_a_stopped_actor_delivers_nothing() -> None:
    got: list[Any] = []

    async def main() -> None:
        async with ta.open_actor_system() as system:
            stopped, watcher = await stopped_and_watcher(system, got)
            await watcher.ask(("watch-unwatch", stopped))
            await trio.testing.wait_all_tasks_blocked()
            assert watcher.statistics().withdrawn == 1

    run_virtual(main)
    assert got == []

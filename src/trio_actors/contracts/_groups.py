"""Contract T28: group strategies restart siblings together, as OTP supervisors do.

A parent with four children (plain and ``async`` hooks mixed) fails one of them:

* under ``OneForAll`` every child is torn down newest first (its ``on_stop`` run)
  and started again in spawn order, each with a fresh instance whose
  ``restarted_after`` is the failure;
* under ``RestForOne`` only the failed child and the newer ones are, and the older
  ones keep their instances;
* a sibling busy in an ``async`` handler is shut down: its asker gets
  ``ActorStopped``, and the restart does not wait for the handler to finish;
* a sibling keeps serving until its own teardown turn (T29): the newest child's
  ``on_stop`` asks an older sibling and is answered by its old instance;
* the intensity is the group's: three failures of three *different* children
  within the window exceed ``max_restarts=2`` (one-for-one would count one each),
  the failing child stops and the parent fails -- and, under its own default
  ``Restart``, is restarted.

Each program runs under :func:`run_virtual_or_hang` (a group restart that waits for
a handler nobody cancels would hang its exit).
"""

from __future__ import annotations

from typing import Any

import trio
import trio.lowlevel
import trio.testing

from .. import (
    Actor,
    ActorRef,
    ActorStopped,
    OneForAll,
    RestForOne,
    ServingPolicy,
)
from ._harness import captured_failures, require, settle, system_for
from ._registry import contract
from ._shutdown import run_virtual_or_hang

CHILDREN = 4


class _Fails(Exception):
    pass


class _Member(Actor):
    """A child that logs its hooks, counts its instances, fails on "fail", and
    sleeps forever on "busy" (its handler is async for odd numbers)."""

    def __init__(self, number: int, log: list[str], made: dict[int, int]) -> None:
        made[number] = made.get(number, 0) + 1
        self.number = number
        self.log = log
        self.generation = made[number]
        self.asks_on_stop: ActorRef | None = None  # whom its on_stop asks (async ones)

    def on_start(self) -> None:
        self.log.append(f"start c{self.number}")

    def on_stop(self) -> None:
        self.log.append(f"stop c{self.number}")

    def receive(self, message: Any) -> Any:
        if message == "fail":
            raise _Fails(f"c{self.number} failed")
        if message == "why":
            return self.restarted_after
        if isinstance(message, ActorRef):
            self.asks_on_stop = message
            return None
        return self.generation


class _AsyncMember(_Member):
    async def on_start(self) -> None:  # type: ignore[override]
        await trio.lowlevel.checkpoint()
        self.log.append(f"start c{self.number}")

    async def on_stop(self) -> None:  # type: ignore[override]
        await trio.lowlevel.checkpoint()
        if self.asks_on_stop is not None:
            answer: Any = "no answer within 1 s"
            with trio.move_on_after(1.0):
                answer = await self.asks_on_stop.ask("generation")
            self.log.append(f"c{self.number} asked {self.asks_on_stop.name}: {answer}")
        self.log.append(f"stop c{self.number}")

    async def receive(self, message: Any) -> Any:
        if message == "busy":
            await trio.sleep_forever()
        return super().receive(message)


def _parent(strategy: OneForAll | RestForOne) -> type[Actor]:
    class Parent(Actor):
        children_strategy = strategy

        def __init__(self, log: list[str]) -> None:
            self.log = log

        def on_start(self) -> None:
            made: dict[int, int] = {}  # instances per child, of this parent instance
            for number in range(CHILDREN):
                factory = _AsyncMember if number % 2 else _Member
                self.spawn(factory, number, self.log, made, name=f"c{number}")

        def receive(self, message: Any) -> Any:
            return self.children

    return Parent


def _expected(failed: int, first: int) -> list[str]:
    """The log of a group restart of children ``first``..3 (``failed`` among them;
    the newest asks c2 in its ``on_stop``, c2 still its first instance)."""
    torn = [f"stop c{n}" for n in reversed(range(first, CHILDREN))]
    torn.insert(0, "c3 asked c2: 1")
    return torn + [f"start c{n}" for n in range(first, CHILDREN)]


@contract(
    "T28",
    "group strategies",
    "one-for-all: a child's failure restarts every sibling (torn down newest first, "
    "each serving until its turn, started in spawn order, busy handlers shut down); "
    "rest-for-one: the failed child "
    "and those spawned after it; the group's intensity escalates as T18",
)
def group_strategies(policy: ServingPolicy) -> None:
    def restarts(strategy: OneForAll | RestForOne, failed: int) -> None:
        first = failed if isinstance(strategy, RestForOne) else 0
        where = f"{type(strategy).__name__}, c{failed} failing"

        async def main(clock: trio.testing.MockClock) -> None:
            log: list[str] = []
            with captured_failures():
                async with system_for(policy) as system:
                    parent = system.spawn(_parent(strategy), log, name="p")
                    children = await parent.ask("children")
                    await settle()
                    log.clear()
                    busy = children[CHILDREN - 1]  # async: its handler sleeps forever
                    busy.tell(children[2])  # its on_stop asks c2 (not the failed one)
                    outcome: list[str] = []

                    async def ask_busy() -> None:
                        with trio.move_on_after(100.0):
                            try:
                                await busy.ask("busy")
                                outcome.append("answered")
                            except ActorStopped:
                                outcome.append("ActorStopped")
                            return
                        outcome.append("still waiting after 100 s")

                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(ask_busy)
                        await settle()
                        children[failed].tell("fail")
                    await settle()
                    require(log == _expected(failed, first), f"{where}: the hooks ran {log}")
                    require(
                        outcome == ["ActorStopped"],
                        f"{where}: the busy sibling's asker got {outcome}",
                    )
                    for number, child in enumerate(children):
                        generation = await child.ask("generation")
                        want = 2 if number >= first else 1
                        require(
                            generation == want,
                            f"{where}: c{number} is instance {generation}, expected {want}",
                        )
                        why = await child.ask("why")
                        want_why = f"c{failed} failed" if number >= first else "None"
                        require(
                            str(why) == want_why,
                            f"{where}: c{number}'s restarted_after is {why!r}",
                        )

        run_virtual_or_hang(main, within=600.0)

    restarts(OneForAll(max_restarts=2, within=10.0), 1)
    restarts(RestForOne(max_restarts=2, within=10.0), 1)
    restarts(RestForOne(max_restarts=2, within=10.0), 0)

    async def intensity(clock: trio.testing.MockClock) -> None:
        log: list[str] = []
        parent_class = _parent(OneForAll(max_restarts=2, within=10.0))
        with captured_failures():
            async with system_for(policy) as system:
                parent = system.spawn(parent_class, log, name="p")
                for number in range(3):  # three different children, 1 s apart
                    children = await parent.ask("children")
                    await settle()
                    children[number].tell("fail")
                    await settle()
                    await trio.sleep(1.0)
                require(
                    parent.statistics().restarts == 1,
                    "three group restarts within the window (max_restarts=2) did not "
                    f"escalate to the parent: it restarted {parent.statistics().restarts} "
                    "times",
                )
                children = await parent.ask("children")
                generations = [await child.ask("generation") for child in children]
                require(
                    generations == [1] * CHILDREN,
                    f"after the parent's restart its children are instances {generations}",
                )

    run_virtual_or_hang(intensity, within=600.0)


__all__ = ["CHILDREN"]

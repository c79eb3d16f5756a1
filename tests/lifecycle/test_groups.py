"""Group strategies (``Actor.children_strategy``, T28) and ``self.children`` /
``self.child(name)``.

The contract (``trio_actors.contracts._groups``) covers the order of a group
restart, busy siblings and the group's intensity; these tests cover the checks of
the declaration, a member stopped during a group restart, a group restart with a
backoff, and the children accessors.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from trio_actors import (
    Actor,
    Backoff,
    OneForAll,
    OneForOne,
    Restart,
    RestForOne,
    Stop,
    open_actor_system,
)


class Child(Actor):
    def __init__(self, log: list[str], number: int) -> None:
        self.log = log
        self.number = number

    def on_start(self) -> None:
        self.log.append(f"start {self.number}")

    def on_stop(self) -> None:
        self.log.append(f"stop {self.number}")

    def receive(self, message: Any) -> Any:
        if message == "fail":
            raise RuntimeError(f"child {self.number} failed")
        return self.number


class SlowStop(Child):
    async def on_stop(self) -> None:  # type: ignore[override]
        await trio.sleep(1)
        self.log.append(f"stop {self.number}")


def parent_of(strategy: Any, factories: list[type[Actor]], **spawn: Any) -> type[Actor]:
    class Parent(Actor):
        children_strategy = strategy

        def __init__(self, log: list[str]) -> None:
            self.log = log

        def on_start(self) -> None:
            for number, factory in enumerate(factories):
                self.spawn(factory, self.log, number, name=f"c{number}", **spawn)

        def receive(self, message: Any) -> Any:
            if message == "children":
                return self.children
            return self.child(message)

    return Parent


async def family(
    system: Any, strategy: Any, factories: list[type[Actor]], log: list[str], **spawn: Any
) -> tuple[Any, list[Any]]:
    """A parent under ``strategy`` with children of ``factories``, all started, and
    the log cleared: (the parent, its children oldest first)."""
    parent = system.spawn(parent_of(strategy, factories, **spawn), log)
    children = list(await parent.ask("children"))
    await trio.testing.wait_all_tasks_blocked()
    log.clear()
    return parent, children


@pytest.mark.parametrize(
    ("declared", "complaint"),
    [
        (OneForAll, r"Parent.children_strategy must be an instance, got the class OneForAll; "),
        (Restart(), r"must be OneForOne\(\), OneForAll\(...\) or RestForOne\(...\), got Rest"),
        ("one_for_all", r"got 'one_for_all'"),
    ],
)
async def test_a_bad_children_strategy_is_refused_at_spawn(declared: Any, complaint: str) -> None:
    async with open_actor_system() as system:
        with pytest.raises(TypeError, match=complaint):
            system.spawn(parent_of(declared, []), [])


@pytest.mark.parametrize(
    ("make", "complaint"),
    [
        (lambda: OneForAll(max_restarts=-1), r"OneForAll.max_restarts must be >= 0, got -1"),
        (lambda: RestForOne(within=0), r"RestForOne.within must be > 0, got 0"),
        (lambda: OneForAll(max_restarts=True), r"must be an int, got True"),
    ],
)
def test_bad_group_intensities_are_refused(make: Any, complaint: str) -> None:
    with pytest.raises((TypeError, ValueError), match=complaint):
        make()


async def test_one_for_one_is_the_default_and_restarts_the_child_alone(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log: list[str] = []
    async with open_actor_system() as system:
        _parent, children = await family(system, OneForOne(), [Child, Child, Child], log)
        children[1].tell("fail")
        await trio.testing.wait_all_tasks_blocked()
        assert log == ["stop 1", "start 1"]
    assert Actor.children_strategy == OneForOne()


async def test_a_member_stopped_during_the_group_restart_is_left_out(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log: list[str] = []
    async with open_actor_system() as system:
        parent, children = await family(system, OneForAll(), [SlowStop, SlowStop, SlowStop], log)
        children[0].tell("fail")
        await trio.sleep(0.5)  # c2 is tearing down (its on_stop takes 1 s)
        await children[1].stop()  # stopped while waiting for its teardown turn
        await trio.sleep(10)  # (the hooks take virtual time)
        assert log == ["stop 2", "stop 1", "stop 0", "start 0", "start 2"]
        assert [child.name for child in await parent.ask("children")] == ["c0", "c2"]
        assert await children[2].ask("x") == 2


async def test_the_failed_childs_backoff_delays_the_whole_group(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log: list[str] = []
    backoff = Restart(backoff=Backoff(min_delay=3.0, jitter=0.0))
    async with open_actor_system() as system:
        _parent, children = await family(
            system, RestForOne(), [Child, Child, Child], log, supervision=backoff
        )
        began = trio.current_time()
        children[1].tell("fail")
        await trio.testing.wait_all_tasks_blocked()
        assert log == ["stop 2", "stop 1"]
        assert await children[2].ask("x") == 2  # queued meanwhile, answered after
        assert trio.current_time() == began + 3.0
        assert log == ["stop 2", "stop 1", "start 1", "start 2"]


async def test_a_sibling_serves_until_its_own_teardown_turn(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log: list[str] = []
    async with open_actor_system() as system:
        _parent, children = await family(system, OneForAll(), [SlowStop, SlowStop, SlowStop], log)
        children[0].tell("fail")
        await trio.sleep(0.5)  # c2 is tearing down; c1's turn is next
        assert children[1].statistics().state == "running"
        asked = trio.current_time()
        assert await children[1].ask("x") == 1  # answered by its old instance...
        assert trio.current_time() == asked  # ...at once
        await trio.sleep(10)
        assert log == ["stop 2", "stop 1", "stop 0", "start 0", "start 1", "start 2"]


async def test_a_failure_during_a_group_restart_joins_it_and_keeps_the_order(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # Rest-for-one: c2 fails (c2, c3 restart); while c3 is tearing down, c0 fails:
    # the group grows to all four, still torn down newest first and started in
    # spawn order, each once.
    log: list[str] = []
    factories: list[type[Actor]] = [SlowStop] * 4
    async with open_actor_system() as system:
        _parent, children = await family(system, RestForOne(max_restarts=5), factories, log)
        children[2].tell("fail")
        await trio.sleep(0.5)
        children[0].tell("fail")
        await trio.sleep(20)
        assert log == [
            *(f"stop {n}" for n in (3, 2, 1, 0)),
            *(f"start {n}" for n in (0, 1, 2, 3)),
        ]
        assert [child.statistics().restarts for child in children] == [1, 1, 1, 1]
        assert [await child.ask("x") for child in children] == [0, 1, 2, 3]


async def test_a_temporary_sibling_is_stopped_at_its_turn_and_the_group_waits(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log: list[str] = []

    class Parent(Actor):
        children_strategy = OneForAll()

        def on_start(self) -> None:
            self.spawn(SlowStop, log, 0, name="c0")
            self.spawn(SlowStop, log, 1, name="c1", restart="temporary")
            self.spawn(SlowStop, log, 2, name="c2")

        def receive(self, message: Any) -> Any:
            return self.children

    async with open_actor_system() as system:
        parent = system.spawn(Parent)
        children = await parent.ask("x")
        await trio.testing.wait_all_tasks_blocked()
        log.clear()
        children[2].tell("fail")
        await trio.sleep(1.5)  # c2 torn down; c1 is stopping (its on_stop takes 1 s)
        assert log == ["stop 2"]
        await trio.sleep(10)
        assert log == ["stop 2", "stop 1", "stop 0", "start 0", "start 2"]
        assert [child.name for child in await parent.ask("x")] == ["c0", "c2"]


async def test_a_child_whose_strategy_is_not_restart_fails_alone(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log: list[str] = []
    async with open_actor_system() as system:
        parent, children = await family(
            system, OneForAll(), [Child, Child], log, supervision=Stop()
        )
        children[0].tell("fail")
        await trio.testing.wait_all_tasks_blocked()
        assert log == ["stop 0"]
        assert await parent.ask("children") == (children[1],)


async def test_children_and_child_name_the_live_children_oldest_first() -> None:
    log: list[str] = []
    async with open_actor_system() as system:
        parent = system.spawn(parent_of(OneForOne(), [Child, Child]), log)
        c0, c1 = await parent.ask("children")
        assert (c0.name, c1.name) == ("c0", "c1")
        assert await parent.ask("c1") == c1
        assert await parent.ask("nobody") is None
        await c0.stop()
        assert await parent.ask("children") == (c1,)
        assert await parent.ask("c0") is None


async def test_child_finds_a_generated_name_and_refuses_a_non_str() -> None:
    class Parent(Actor):
        def receive(self, message: Any) -> Any:
            if message == "spawn":
                return self.spawn(Child, [], 0)
            return self.child(message)

    async with open_actor_system() as system:
        parent = system.spawn(Parent)
        child = await parent.ask("spawn")
        assert await parent.ask(child.name) == child
        with pytest.raises(TypeError, match=r"child\(\) needs a child's name \(a str\), got 3"):
            await parent.ask(3)


def test_assigning_children_says_it_is_the_runtimes() -> None:
    class Family(Actor):
        def __init__(self) -> None:
            self.children = []

        def receive(self, message: Any) -> Any:
            return message

    with pytest.raises(AttributeError, match=r"Family.children is the runtime's \(read-only"):
        Family()

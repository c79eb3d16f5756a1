"""Supervision, children and death watch, beyond contracts T16--T19."""

import logging
from typing import Any

import pytest
import trio
import trio.testing

import trio_actors as ta


class Flaky(ta.Actor):
    made = 0

    def __init__(self, log: list[Any]) -> None:
        Flaky.made += 1
        self.log = log

    def on_start(self) -> None:
        self.log.append("start")

    def receive(self, message: Any) -> Any:
        if message == "boom":
            raise RuntimeError("boom")
        self.log.append(message)
        return message

    def on_stop(self) -> None:
        self.log.append("stop")


@pytest.fixture(autouse=True)
def _quiet() -> None:
    logging.getLogger("trio_actors").setLevel(logging.CRITICAL)


async def test_a_stop_during_the_backoff_stops_at_once(autojump_clock: Any) -> None:
    async with ta.open_actor_system() as system:
        log: list[Any] = []
        backoff = ta.Backoff(min_delay=30.0, max_delay=60.0, jitter=0.0)
        ref = system.spawn(Flaky, log, supervision=ta.Restart(backoff=backoff))
        ref.tell("boom")
        ref.tell("queued during the backoff")
        await trio.sleep(1)
        start = trio.current_time()
        await ref.stop()
        assert trio.current_time() - start < 1
        assert log == ["start", "stop"]
        assert [d.message for d in system.dead_letters.recent] == ["queued during the backoff"]


async def test_backoff_grows_with_failures_in_the_window_and_is_capped(
    autojump_clock: Any,
) -> None:
    async with ta.open_actor_system() as system:
        log: list[Any] = []
        Flaky.made = 0
        backoff = ta.Backoff(min_delay=1.0, max_delay=3.0, factor=2.0, jitter=0.0)
        ref = system.spawn(
            Flaky, log, supervision=ta.Restart(max_restarts=10, within=100.0, backoff=backoff)
        )
        waits = []
        for _ in range(4):
            ref.tell("boom")
            start = trio.current_time()
            await ref.ask("after")
            waits.append(trio.current_time() - start)
        assert waits == [1.0, 2.0, 3.0, 3.0]


def test_backoff_jitter_spreads_delays_within_its_bounds() -> None:
    import random

    backoff = ta.Backoff(min_delay=1.0, max_delay=10.0, factor=2.0, jitter=0.25)
    rng = random.Random(7)
    delays = [backoff.delay(3, rng) for _ in range(200)]
    assert min(delays) >= 3.0
    assert max(delays) <= 5.0
    assert len(set(delays)) > 100


async def test_a_restarting_parent_stops_its_children_before_its_fresh_instance_starts() -> None:
    events: list[str] = []

    class Child(ta.Actor):
        def receive(self, message: Any) -> Any:
            return message

        def on_stop(self) -> None:
            events.append(f"child stop {self.ref.path}")

    class Parent(ta.Actor):
        def on_start(self) -> None:
            events.append("parent start")
            self.spawn(Child, name="kid")

        def receive(self, message: Any) -> Any:
            raise RuntimeError("parent fails")

        def on_stop(self) -> None:
            events.append("parent stop")

    async with ta.open_actor_system() as system:
        parent = system.spawn(Parent, name="p")
        parent.tell("fail")
        await trio.testing.wait_all_tasks_blocked()
        assert events == [
            "parent start",
            "child stop system/p/kid",
            "parent stop",
            "parent start",
        ]
        assert system.live_actors == 2


async def test_child_names_are_unique_among_siblings_and_paths_nest() -> None:
    class Node(ta.Actor):
        def receive(self, message: Any) -> Any:
            return self.spawn(Node, name=message)

    async with ta.open_actor_system() as system:
        a = system.spawn(Node, name="a")
        b = system.spawn(Node, name="b")
        child = await a.ask("x")
        assert str(child) == "system/a/x"
        assert str(await b.ask("x")) == "system/b/x"  # same name, other parent
        grandchild = await child.ask("y")
        assert grandchild.path == "system/a/x/y"
        with pytest.raises(ValueError, match="already alive among the children of system/a"):
            await a.ask("x")  # (a fails, and restarts: its children stop)


async def test_a_failure_under_stop_reaches_watchers_with_the_error() -> None:
    notices: list[ta.Terminated] = []

    class Watcher(ta.Actor):
        def receive(self, message: Any) -> Any:
            if isinstance(message, ta.Terminated):
                notices.append(message)
            else:
                self.watch(message)

    async with ta.open_actor_system() as system:
        victim = system.spawn(Flaky, [], supervision=ta.Stop())
        watcher = system.spawn(Watcher)
        watcher.tell(victim)
        await trio.testing.wait_all_tasks_blocked()
        victim.tell("boom")
        await trio.testing.wait_all_tasks_blocked()
        assert len(notices) == 1
        assert notices[0].ref == victim
        assert isinstance(notices[0].error, RuntimeError)


async def test_resume_keeps_the_instance_and_its_state() -> None:
    async with ta.open_actor_system() as system:
        log: list[Any] = []
        Flaky.made = 0
        ref = system.spawn(Flaky, log, supervision=ta.Resume())
        await ref.ask(1)
        with pytest.raises(RuntimeError):
            await ref.ask("boom")
        await ref.ask(2)
        assert Flaky.made == 1
        assert log == ["start", 1, 2]


@pytest.mark.parametrize(
    ("make", "error", "words"),
    [
        (lambda: ta.Restart(max_restarts=-1), ValueError, "Restart.max_restarts must be >= 0"),
        (
            lambda: ta.Restart(max_restarts=1.5),  # type: ignore[arg-type]
            TypeError,
            "Restart.max_restarts must be an int",
        ),
        (lambda: ta.Restart(within=0), ValueError, "Restart.within must be > 0"),
        (lambda: ta.Restart(backoff=1.0), TypeError, "backoff"),  # type: ignore[arg-type]
        (lambda: ta.Backoff(min_delay=-1), ValueError, "Backoff.min_delay must be finite"),
        (lambda: ta.Backoff(min_delay=5, max_delay=1), ValueError, "max_delay .* is below"),
        (lambda: ta.Backoff(factor=0.5), ValueError, "Backoff.factor must be >= 1"),
        (lambda: ta.Backoff(jitter=1.0), ValueError, "Backoff.jitter must be below 1"),
    ],
)
def test_bad_strategy_values_name_the_field(make: Any, error: type, words: str) -> None:
    with pytest.raises(error, match=words):
        make()


async def test_spawn_with_something_that_is_not_a_strategy_is_a_type_error() -> None:
    async with ta.open_actor_system() as system:
        with pytest.raises(TypeError, match="supervision must be Restart"):
            system.spawn(Flaky, [], supervision="restart")  # type: ignore[arg-type]


async def test_watch_needs_a_ref() -> None:
    class Watcher(ta.Actor):
        def receive(self, message: Any) -> Any:
            self.watch(message)

    async with ta.open_actor_system() as system:
        with pytest.raises(TypeError, match="needs an ActorRef"):
            await system.spawn(Watcher, supervision=ta.Resume()).ask("not a ref")


async def test_a_child_cannot_be_spawned_while_its_parent_restarts_or_stops() -> None:
    refusals: list[str] = []

    class Parent(ta.Actor):
        def receive(self, message: Any) -> Any:
            if message == "boom":
                raise RuntimeError("boom")
            return None

        def on_stop(self) -> None:
            try:
                self.spawn(Flaky, [])
            except ta.ActorError as error:
                refusals.append(str(error))

    async with ta.open_actor_system() as system:
        parent = system.spawn(Parent, name="p")
        parent.tell("boom")  # restart: the old instance's on_stop tries to spawn
        await trio.testing.wait_all_tasks_blocked()
        await parent.stop()  # stop: on_stop tries again
    assert refusals == [
        "cannot spawn a child of system/p: it is restarting",
        "cannot spawn a child of system/p: it is stopping",
    ]

"""Supervision and children beyond contracts T16--T18: restarts, backoff, resume,
escalation, and their races with the parent's own turns (death watch:
``test_watch.py``)."""

import logging
from typing import Any

import pytest
import trio
import trio.testing

import trio_actors as ta
from helpers import Failing
from trio_actors._core import _dispatcher, _restarting
from trio_actors.testing import run_virtual


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


async def test_a_failing_factory_is_retried_after_its_backoff(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # A restart whose factory fails waits the backoff's next delay before it tries
    # again (a surviving mutant returned at once and retried without the delay).
    made: list[float] = []

    class Fragile(ta.Actor):
        def __init__(self) -> None:
            made.append(trio.current_time())
            if 2 <= len(made) <= 3:
                raise ConnectionError("not yet")

        def receive(self, message: Any) -> Any:
            if message == "fail":
                raise RuntimeError("restart me")
            return len(made)

    backoff = ta.Backoff(min_delay=1.0, factor=2.0, jitter=0.0)
    async with ta.open_actor_system() as system:
        ref = system.spawn(
            Fragile, supervision=ta.Restart(max_restarts=10, within=100.0, backoff=backoff)
        )
        began = trio.current_time()
        ref.tell("fail")
        assert await ref.ask("made") == 4
        # Delays 1 (the failure), 2 and 4 (the two failed creations).
        assert [t - began for t in made[1:]] == [1.0, 3.0, 7.0]


@pytest.mark.parametrize("value", [True, "1", None])
def test_backoff_fields_refuse_what_is_not_a_number(value: Any) -> None:
    # A bool is not taken as a number, and a str fails with this message rather than
    # Python's bare comparison error.
    with pytest.raises(TypeError, match=rf"Backoff.min_delay must be a number, got {value!r}"):
        ta.Backoff(min_delay=value)


# --- escalation racing the parent's own turns and restarts ---------------------------


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

    run_virtual(main)


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

    run_virtual(main)


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

    run_virtual(main)


@pytest.mark.parametrize("attempt", range(20))
def test_a_child_escalating_during_its_parents_async_on_start_is_never_served_twice(
    attempt: int,
) -> None:
    # (run many times: trio's shuffling of one scheduler batch could matter)
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

    run_virtual(main)
    assert events == ["start 1 (1 active)", "start 2 (1 active)", "m1 by 2 while RUNNING"]


# --- resumed and restarted instances serve with their own handler kinds ---------------


class FailsToStart(ta.Actor):
    def on_start(self) -> None:
        raise ValueError("on purpose")

    def receive(self, message: Any) -> Any:
        return ("handled", message)


class FailsToStartAsync(ta.Actor):
    async def on_start(self) -> None:
        raise ValueError("on purpose")

    async def receive(self, message: Any) -> Any:
        return ("handled", message)


@pytest.mark.parametrize("actor", [FailsToStart, FailsToStartAsync])
async def test_an_actor_resumed_after_a_failed_on_start_serves_with_its_receive(
    actor: type[ta.Actor], autojump_clock: trio.testing.MockClock
) -> None:
    async with ta.open_actor_system() as system:
        ref = system.spawn(actor, supervision=ta.Resume())
        ref.tell("a tell")
        assert await ref.ask("an ask") == ("handled", "an ask")
        assert ref.statistics().failures == 1


@pytest.mark.replaces_the_kernel
@pytest.mark.usefixtures("debug_checks_only_collect")
def test_serving_a_resumed_actor_with_an_unbound_receive_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The test above catches a runtime that serves a resumed actor without binding
    # its receive (a mutant the suite once let through).
    prepare = _dispatcher.Dispatcher._prepare_inline

    def prepare_without_binding(self: Any, cell: Any) -> bool:
        ready = prepare(self, cell)
        if ready and cell.failures:
            cell.receive = None  # the mutant: served without its receive bound
        return ready

    monkeypatch.setattr(_dispatcher.Dispatcher, "_prepare_inline", prepare_without_binding)

    async def main() -> None:
        async with ta.open_actor_system() as system:
            ref = system.spawn(FailsToStart, supervision=ta.Resume())
            assert await ref.ask("an ask") == ("handled", "an ask")

    with pytest.raises(BaseException):  # noqa: B017,PT011 - whatever it breaks into
        run_virtual(main)


class Plain(ta.Actor):
    def receive(self, message: Any) -> Any:
        if message == "fail":
            raise RuntimeError("on purpose")
        return "plain"


class Async(ta.Actor):
    async def receive(self, message: Any) -> Any:
        await trio.lowlevel.checkpoint()
        return "async"


def _plain_then_async() -> Any:
    made: list[int] = []

    def factory() -> ta.Actor:
        made.append(1)
        return Plain() if len(made) == 1 else Async()

    return factory


async def test_a_restart_into_another_class_serves_with_the_new_kinds(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with ta.open_actor_system() as system:
        ref = system.spawn(_plain_then_async())
        assert await ref.ask("which") == "plain"
        ref.tell("fail")
        assert await ref.ask("which") == "async"


@pytest.mark.usefixtures("debug_checks_only_collect")
def test_a_restart_keeping_the_old_kinds_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    # The test above catches a runtime whose restart keeps the old instance's handler
    # kinds (a mutant the suite once let through).
    install = _restarting.install

    def install_keeping_the_kinds(cell: Any, instance: Any, kinds: Any) -> None:
        install(cell, instance, cell.kinds)

    monkeypatch.setattr(_restarting, "install", install_keeping_the_kinds)

    async def main() -> Any:
        async with ta.open_actor_system() as system:
            ref = system.spawn(_plain_then_async())
            await ref.ask("which")
            ref.tell("fail")
            with trio.move_on_after(5):
                return await ref.ask("which")

    with pytest.raises(BaseException):  # noqa: B017,PT011 - it breaks into an error
        assert run_virtual(main) == "async"

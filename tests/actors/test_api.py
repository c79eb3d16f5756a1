"""The public API's behaviour (api.md) beyond the contracts, and every misuse."""

import logging
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import trio
import trio.lowlevel
import trio.testing

import trio_actors as ta
from helpers import Echo


class Counter(ta.Actor):
    def __init__(self, start: int = 0) -> None:
        self.count = start

    def receive(self, message: Any) -> Any:
        match message:
            case ("add", n):
                self.count += n
            case "get":
                return self.count


async def test_the_first_program_from_the_spec_works() -> None:
    async with ta.open_actor_system() as system:
        counter = system.spawn(Counter, 10, name="counter")
        counter.tell(("add", 1))
        assert await counter.ask("get") == 11
        await counter.stop()


async def test_refs_compare_and_hash_by_actor_and_print_a_path() -> None:
    async with ta.open_actor_system() as system:
        a = system.spawn(Echo, name="a")
        b = system.spawn(Echo)

        class Me(ta.Actor):
            def receive(self, message: Any) -> Any:
                return self.ref

        me = system.spawn(Me, name="me")
        assert await me.ask("who") == me
        assert hash(await me.ask("who")) == hash(me)
        assert a != b
        assert a.name == "a"
        assert b.name.startswith("Echo-")
        assert str(a) == "system/a"
        assert repr(a) == "<ActorRef system/a>"
        assert len({a, b, me, await me.ask("x")}) == 3


async def test_generated_names_are_unique() -> None:
    async with ta.open_actor_system() as system:
        names = {system.spawn(Echo).name for _ in range(100)}
        assert len(names) == 100


async def test_a_name_can_be_reused_once_its_actor_has_stopped() -> None:
    async with ta.open_actor_system() as system:
        first = system.spawn(Echo, name="worker")
        await first.stop()
        second = system.spawn(Echo, name="worker")
        assert second != first
        assert await second.ask(1) == 1


async def test_spawn_accepts_a_factory_callable_and_passes_positional_args() -> None:
    async with ta.open_actor_system() as system:
        ref = system.spawn(lambda start: Counter(start * 2), 21)
        assert await ref.ask("get") == 42


async def test_actor_ref_and_system_are_available_in_on_start() -> None:
    seen: list[Any] = []

    class Hooks(ta.Actor):
        def on_start(self) -> None:
            seen.append((self.ref.name, self.system))

        def receive(self, message: Any) -> Any:
            return message

    async with ta.open_actor_system() as system:
        ref = system.spawn(Hooks, name="hooks")
        await ref.ask("x")
        assert seen == [("hooks", system)]


async def test_actor_stop_from_a_plain_handler_stops_after_the_current_message() -> None:
    handled: list[Any] = []

    class StopsOnX(ta.Actor):
        def receive(self, message: Any) -> Any:
            handled.append(message)
            if message == "x":
                self.stop()
                self.stop()  # idempotent
                return "stopping"
            return message

    async with ta.open_actor_system() as system:
        ref = system.spawn(StopsOnX)
        ref.tell(1)
        ref.tell("x")
        ref.tell(2)
        with pytest.raises(ta.ActorStopped):
            await ref.ask(3)
        await ref.stop()
        assert handled == [1, "x"]
        assert [d.message for d in system.dead_letters.recent] == [2]
        assert system.dead_letters.recent[0].reason == "stranded"


async def test_actor_stop_from_an_async_handler_lets_that_handler_finish() -> None:
    events: list[str] = []

    class StopsItself(ta.Actor):
        async def receive(self, message: Any) -> Any:
            self.stop()
            await trio.lowlevel.checkpoint()
            events.append("handler finished")
            return "done"

        async def on_stop(self) -> None:
            events.append("on_stop")

    async with ta.open_actor_system() as system:
        ref = system.spawn(StopsItself)
        assert await ref.ask("go") == "done"
        await ref.stop()
        assert events == ["handler finished", "on_stop"]


async def test_a_handler_exception_reaches_the_asker_and_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class Fails(ta.Actor):
        def receive(self, message: Any) -> Any:
            raise KeyError(message)

    async with ta.open_actor_system() as system:
        ref = system.spawn(Fails, name="fails")
        with pytest.raises(KeyError):
            await ref.ask("k")
        ref.tell("t")
        await trio.testing.wait_all_tasks_blocked()
    failures = [r for r in caplog.records if r.name == "trio_actors"]
    assert len(failures) == 2
    assert all("system/fails" in r.getMessage() and r.exc_info for r in failures)


class BadStart(ta.Actor):
    def on_start(self) -> None:
        raise RuntimeError("no start")

    def receive(self, message: Any) -> Any:
        return message


async def test_an_on_start_failure_under_stop_is_logged_and_stops_the_actor(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with ta.open_actor_system() as system:
        ref = system.spawn(BadStart, supervision=ta.Stop())
        ref.tell("queued")
        with pytest.raises(ta.ActorStopped):
            await ref.ask("x")
        assert "failed in on_start" in caplog.text


async def test_an_on_start_that_always_fails_escalates_and_fails_the_system() -> None:
    with pytest.RaisesGroup(pytest.RaisesExc(RuntimeError, match="no start")):
        async with ta.open_actor_system() as system:
            system.spawn(BadStart)
            await trio.sleep_forever()


async def test_an_on_stop_failure_is_logged_and_the_actor_still_ends_stopped(
    caplog: pytest.LogCaptureFixture,
) -> None:
    class BadStop(ta.Actor):
        def receive(self, message: Any) -> Any:
            return message

        def on_stop(self) -> None:
            raise RuntimeError("no stop")

    async with ta.open_actor_system() as system:
        ref = system.spawn(BadStop)
        await ref.stop()
        assert "failed in on_stop" in caplog.text
        assert system.live_actors == 0
        with pytest.raises(ta.ActorStopped):
            await ref.ask("x")


async def test_a_plain_receive_that_returns_a_coroutine_is_a_clear_error() -> None:
    class Confused(ta.Actor):
        def receive(self, message: Any) -> Any:
            async def later() -> None:
                pass

            return later()

    async with ta.open_actor_system() as system:
        ref = system.spawn(Confused)
        with pytest.raises(TypeError, match="returned a coroutine; declare it 'async def'"):
            await ref.ask("x")


async def test_a_receive_that_is_not_a_bound_method_serves_a_batch_of_tells() -> None:
    # The serving loop calls a method's function with its actor; any other callable
    # receive (a staticmethod here) is called as it is -- in order, every one, and
    # a failure in it is the actor's as usual.
    seen: list[Any] = []

    class Static(ta.Actor):
        @staticmethod
        def receive(message: Any) -> Any:
            if message == "fail":
                raise ValueError("failed on purpose")
            seen.append(message)
            return len(seen)

    async with ta.open_actor_system() as system:
        ref = system.spawn(Static)
        for number in range(200):
            ref.tell(number)
        ref.tell("fail")  # (restarted, then goes on)
        ref.tell(200)
        assert await ref.ask("count") == 202
        assert seen == [*range(201), "count"]


async def test_dead_letters_keep_count_and_the_recent_ones_newest_last() -> None:
    async with ta.open_actor_system(dead_letters_kept=5) as system:
        ref = system.spawn(Echo)
        await ref.stop()
        for i in range(8):
            ref.tell(i)
        letters = system.dead_letters
        assert letters.count == 8
        assert [d.message for d in letters.recent] == [3, 4, 5, 6, 7]
        assert letters.recent[-1] == ta.DeadLetter(ref, 7, "stopped")
        assert letters.by_reason == {
            "stopped": 8,
            "stranded": 0,
            "overflow": 0,
            "unreachable": 0,
            "undecodable": 0,
            "refused": 0,
            "in-doubt": 0,
        }


async def test_dead_letters_keep_at_least_ten_thousand_by_default() -> None:
    async with ta.open_actor_system() as system:
        ref = system.spawn(Echo)
        await ref.stop()
        for i in range(12_000):
            ref.tell(i)
        assert len(system.dead_letters.recent) == 10_000
        assert system.dead_letters.recent[0].message == 2_000


async def test_tell_from_another_thread_is_forwarded_safely() -> None:
    async with ta.open_actor_system() as system:
        ref = system.spawn(Counter)

        def tell_from_thread() -> None:
            for _ in range(50):
                ref.tell(("add", 1))

        await trio.to_thread.run_sync(tell_from_thread)
        await trio.testing.wait_all_tasks_blocked()
        assert await ref.ask("get") == 50


# --- misuse ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kwargs", "error", "words"),
    [
        ({"batch": 0}, ValueError, "ServingPolicy.batch must be >= 1, got 0"),
        ({"batch": 1.5}, TypeError, "ServingPolicy.batch must be an int, got 1.5"),
        ({"batch": True}, TypeError, "ServingPolicy.batch must be an int"),
        ({"cleanup_batch": -1}, ValueError, "ServingPolicy.cleanup_batch must be >= 1"),
        ({"time_slice": 0}, ValueError, "ServingPolicy.time_slice must be a finite"),
        ({"time_slice": float("inf")}, ValueError, "ServingPolicy.time_slice"),
        (
            {"time_slice": "16ms"},
            TypeError,
            "ServingPolicy.time_slice must be a number",
        ),
    ],
)
def test_bad_policy_values_name_the_field_and_value(
    kwargs: dict[str, Any], error: type[Exception], words: str
) -> None:
    with pytest.raises(error, match=words.replace(".", r"\.")):
        ta.ServingPolicy(**kwargs)


async def test_spawning_something_that_is_not_an_actor_is_a_type_error() -> None:
    class NoReceive(ta.Actor):
        pass

    async with ta.open_actor_system() as system:
        with pytest.raises(TypeError, match="needs an Actor subclass or a callable"):
            system.spawn(42)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="produced 'nope' of type str, not an Actor"):
            system.spawn(lambda: "nope")  # type: ignore[arg-type,return-value]
        with pytest.raises(TypeError, match="does not define receive"):
            system.spawn(NoReceive)
        shared = Echo()
        system.spawn(lambda: shared)
        with pytest.raises(TypeError, match="already spawned"):
            system.spawn(lambda: shared)


async def test_bad_names_are_refused_where_spawn_is_called() -> None:
    async with ta.open_actor_system() as system:
        system.spawn(Echo, name="taken")
        with pytest.raises(ValueError, match="'taken' is already alive"):
            system.spawn(Echo, name="taken")
        for bad in ("", "a/b", "a b"):
            with pytest.raises(ValueError, match="is invalid"):
                system.spawn(Echo, name=bad)
        with pytest.raises(TypeError, match="actor name must be a str"):
            system.spawn(Echo, name=3)  # type: ignore[arg-type]


async def test_spawning_after_the_system_closed_is_an_actor_error() -> None:
    async with ta.open_actor_system() as system:
        pass
    with pytest.raises(ta.ActorError, match="has been closed"):
        system.spawn(Echo)


async def test_a_non_policy_serving_argument_is_a_type_error() -> None:
    with pytest.raises(TypeError, match="serving must be a ServingPolicy"):
        async with ta.open_actor_system(serving={"batch": 64}):  # type: ignore[arg-type]
            pass


async def test_using_ref_or_system_before_spawn_is_a_clear_error() -> None:
    class TooEarly(ta.Actor):
        def __init__(self) -> None:
            self.me = self.ref

        def receive(self, message: Any) -> Any:
            return message

    async with ta.open_actor_system() as system:
        with pytest.raises(ta.ActorError, match="not spawned yet"):
            system.spawn(TooEarly)


def test_ask_and_stop_outside_a_trio_run_say_so() -> None:
    refs: list[ta.ActorRef] = []

    async def main() -> None:
        async with ta.open_actor_system() as system:
            refs.append(system.spawn(Echo))

    trio.run(main)
    for coroutine in (refs[0].ask("x"), refs[0].stop()):
        with pytest.raises(RuntimeError, match="inside the trio run that opened"):
            coroutine.send(None)


def test_a_ref_from_another_trio_run_is_refused() -> None:
    refs: list[ta.ActorRef] = []
    errors: list[BaseException] = []

    async def other_run() -> None:
        calls: list[Callable[[], Awaitable[Any]]] = [lambda: refs[0].ask("x"), refs[0].stop]
        for call in calls:
            try:
                await call()
            except ta.ActorError as error:
                errors.append(error)

    async def main() -> None:
        async with ta.open_actor_system() as system:
            refs.append(system.spawn(Echo))
            await trio.to_thread.run_sync(lambda: trio.run(other_run))

    trio.run(main)
    assert len(errors) == 2
    assert all("another trio run" in str(e) for e in errors)


def test_the_failure_logger_is_the_package_logger() -> None:
    assert logging.getLogger("trio_actors").name == "trio_actors"


def test_tell_from_a_thread_after_the_run_finished_raises() -> None:
    refs: list[ta.ActorRef] = []

    async def main() -> None:
        async with ta.open_actor_system() as system:
            refs.append(system.spawn(Echo))

    trio.run(main)
    caught: list[BaseException] = []

    def from_thread() -> None:
        try:
            refs[0].tell("late")
        except ta.ActorError as error:
            caught.append(error)

    thread = threading.Thread(target=from_thread)
    thread.start()
    thread.join()
    assert caught
    assert "from another thread after its actor system exited" in str(caught[0])


async def test_an_actor_stopping_itself_in_the_middle_of_a_backlog_strands_the_rest() -> None:
    handled: list[Any] = []

    class StopsAtThree(ta.Actor):
        def receive(self, message: Any) -> Any:
            handled.append(message)
            if message == 3:
                self.stop()

    async with ta.open_actor_system() as system:
        ref = system.spawn(StopsAtThree)
        for i in range(10):
            ref.tell(i)  # one head message, then a backlog of nine tells
        await trio.testing.wait_all_tasks_blocked()
        assert handled == [0, 1, 2, 3]
        assert [d.message for d in system.dead_letters.recent] == [4, 5, 6, 7, 8, 9]
        assert {d.reason for d in system.dead_letters.recent} == {"stranded"}


async def test_a_generated_name_never_takes_one_given_explicitly() -> None:
    # The generated name of the second spawn is "Echo-2": taken already.
    stopped: list[str] = []

    class Tracked(Echo):
        def on_stop(self) -> None:
            stopped.append(self.ref.name)

    async with ta.open_actor_system() as system:
        first = system.spawn(Tracked, name="Tracked-2")
        second = system.spawn(Tracked)
        assert first.name == "Tracked-2"
        assert second.name == "Tracked-2.2"
    assert sorted(stopped) == ["Tracked-2", "Tracked-2.2"]  # both stopped at exit


async def test_a_name_given_explicitly_never_takes_a_generated_one() -> None:
    # Generated names are made when asked; a given name that spells a live one is
    # refused all the same, among top-level actors and among children alike.
    async with ta.open_actor_system() as system:
        generated = system.spawn(Echo)
        assert generated.name == "Echo-1"
        assert generated.path == "system/Echo-1"
        with pytest.raises(ValueError, match="'Echo-1' is already alive in this system"):
            system.spawn(Echo, name="Echo-1")
        other = system.spawn(Echo, name="Echo-01")  # not the same name
        assert other.name == "Echo-01"
        await generated.stop()
        again = system.spawn(Echo, name="Echo-1")  # free once its actor has stopped
        assert again.name == "Echo-1"

        class Parent(ta.Actor):
            def receive(self, message: Any) -> Any:
                if message == "child":
                    return self.spawn(Echo)
                return self.spawn(Echo, name=message)

        parent = system.spawn(Parent, name="parent")
        child = await parent.ask("child")
        assert child.path == f"system/parent/{child.name}"
        with pytest.raises(ValueError, match="already alive among the children of system/parent"):
            await parent.ask(child.name)
        assert (await parent.ask("Echo-1")).name == "Echo-1"  # another parent's namespace


async def test_a_generated_name_outlives_a_restart_into_another_class() -> None:
    stopped: list[str] = []

    class Second(Echo):
        def on_stop(self) -> None:
            stopped.append(self.ref.name)

    class First(Second):
        def receive(self, message: Any) -> Any:
            raise RuntimeError("crash")

    made: list[type[ta.Actor]] = []

    def factory() -> ta.Actor:
        made.append(First if not made else Second)
        return made[-1]()

    async with ta.open_actor_system() as system:
        ref = system.spawn(factory)
        name = ref.name
        assert name.startswith("First-")
        newer = system.spawn(Second, name="newer")
        ref.tell("crash")
        assert await ref.ask("after the restart") == "after the restart"
        assert made == [First, Second]
        assert ref.name == name  # still the name it was given at spawn
        with pytest.raises(ValueError, match="already alive"):
            system.spawn(Echo, name=name)
        assert stopped == [name]  # the first instance, at its restart
    # Newest first at exit: the restart did not make the older actor look newer.
    assert stopped == [name, newer.name, name]
    assert len(system.dead_letters.recent) == 0


async def test_watchers_are_told_in_the_order_they_began_watching() -> None:
    told: list[str] = []

    class Watcher(ta.Actor):
        def receive(self, message: Any) -> Any:
            if isinstance(message, ta.Terminated):
                told.append(self.ref.name)
            else:
                self.watch(message)

    async with ta.open_actor_system() as system:
        target = system.spawn(Echo)
        first_spawned = system.spawn(Watcher, name="first-spawned")
        second_spawned = system.spawn(Watcher, name="second-spawned")
        await second_spawned.ask(target)
        await first_spawned.ask(target)
        await target.stop()
        await trio.testing.wait_all_tasks_blocked()
    assert told == ["second-spawned", "first-spawned"]


async def test_spawn_refuses_a_keyword_it_does_not_know_and_says_to_use_partial() -> None:
    async with ta.open_actor_system() as system:
        with pytest.raises(TypeError, match=r"'start'.*functools\.partial\(Echo, start=1\)"):
            system.spawn(Echo, start=1)
        with pytest.raises(TypeError, match="_parent"):
            system.spawn(Echo, _parent=None)
        assert system.statistics().live_actors == 0


@pytest.mark.parametrize("message", ["ok", "fail"])
async def test_an_ask_answered_in_the_askers_task_yields_whether_or_not_it_fails(
    message: str,
) -> None:
    # (A mutant without the checkpoint of the failing path survived the suite. trio's
    # assert_checkpoints accepts any block that raises, so this counts the schedule
    # points as it does.)
    class Picky(ta.Actor):
        def receive(self, message: Any) -> Any:
            if message == "fail":
                raise ValueError("on purpose")
            return message

    async with ta.open_actor_system() as system:
        ref = system.spawn(Picky, supervision=ta.Resume())
        assert await ref.ask("warm") == "warm"  # idle and bound: the asker-task path
        task = trio.lowlevel.current_task()
        before = task._schedule_points
        if message == "fail":
            with pytest.raises(ValueError, match="on purpose"):
                await ref.ask(message)
        else:
            assert await ref.ask(message) == "ok"
        assert task._schedule_points > before, "the ask did not yield"


async def test_open_actor_system_without_async_with_says_how_to_open_it() -> None:
    opener: Any = ta.open_actor_system()  # Any: the misuses below are what mypy refuses
    with pytest.raises(AttributeError, match=r"async context manager, not the system \(no \.spawn"):
        opener.spawn  # noqa: B018
    with pytest.raises(TypeError, match="is not awaited: write 'async with open_actor_system"):
        await opener
    with pytest.raises(TypeError, match="is an async context manager"), opener:
        pass  # pragma: no cover
    async with opener as system:  # still usable the right way
        assert await system.spawn(Echo).ask(1) == 1

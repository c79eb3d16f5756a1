"""``spawn(..., restart=...)``: OTP's restart types permanent, transient, temporary."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from trio_actors import Actor, ActorError, OneForAll, Restart, open_actor_system


class Worker(Actor):
    made = 0

    def __init__(self) -> None:
        Worker.made += 1
        self.number = Worker.made

    def receive(self, message: Any) -> Any:
        if message == "fail":
            raise RuntimeError("failed")
        if message == "done":
            self.stop()
            return "stopping"
        if message == "why":
            return self.restarted_after
        return self.number


@pytest.fixture(autouse=True)
def _count_from_zero() -> None:
    Worker.made = 0


async def test_transient_is_the_default_restarted_after_a_failure_only() -> None:
    async with open_actor_system() as system:
        ref = system.spawn(Worker)
        ref.tell("fail")
        assert await ref.ask("n") == 2
        assert await ref.ask("done") == "stopping"
        terminated = await ref.wait_stopped()
        assert terminated.error is None


async def test_temporary_is_never_restarted_a_failure_stops_it() -> None:
    async with open_actor_system() as system:
        ref = system.spawn(Worker, restart="temporary")
        ref.tell("fail")
        terminated = await ref.wait_stopped()
        assert isinstance(terminated.error, RuntimeError)
        assert Worker.made == 1
        assert ref.statistics().failures == 1


async def test_permanent_is_restarted_after_it_stops_itself() -> None:
    async with open_actor_system() as system:
        ref = system.spawn(Worker, restart="permanent")
        ref.tell("queued before")  # kept across the restart
        assert await ref.ask("done") == "stopping"
        assert await ref.ask("n") == 2
        why = await ref.ask("why")
        assert isinstance(why, ActorError)
        assert str(why) == "system/Worker-1 stopped itself; a permanent actor is restarted"
        assert ref.statistics().restarts == 1
        assert ref.statistics().failures == 0
        await ref.stop()  # a stop through the ref is for good
        assert ref.statistics().state == "stopped"


async def test_a_permanent_actor_stopping_itself_too_often_escalates(
    autojump_clock: trio.testing.MockClock,
) -> None:
    class Parent(Actor):
        def on_start(self) -> None:
            self.spawn(Worker, name="w", restart="permanent", supervision=Restart(max_restarts=1))

        def receive(self, message: Any) -> Any:
            return self.child("w")

    async with open_actor_system() as system:
        parent = system.spawn(Parent)
        worker = await parent.ask("w")
        await worker.ask("done")
        await worker.ask("done")  # the second within 5 s: escalates to the parent
        await trio.testing.wait_all_tasks_blocked()
        assert parent.statistics().restarts == 1
        assert (await worker.wait_stopped()).error is not None


async def test_a_temporary_member_goes_down_with_its_group_and_stays_down() -> None:
    class Parent(Actor):
        children_strategy = OneForAll()

        def on_start(self) -> None:
            self.spawn(Worker, name="kept")
            self.spawn(Worker, name="temp", restart="temporary")

        def receive(self, message: Any) -> Any:
            return self.children

    async with open_actor_system() as system:
        parent = system.spawn(Parent)
        kept, temp = await parent.ask("children")
        kept.tell("fail")
        await temp.wait_stopped()
        assert await kept.ask("n") == 3  # its fresh instance
        assert await parent.ask("children") == (kept,)


@pytest.mark.parametrize(
    ("restart", "error", "complaint"),
    [
        ("always", ValueError, r"restart must be 'permanent', 'transient' or 'temporary', got 'al"),
        (None, TypeError, r"got None"),
    ],
)
async def test_a_bad_restart_type_is_refused(
    restart: Any, error: type[Exception], complaint: str
) -> None:
    async with open_actor_system() as system:
        with pytest.raises(error, match=complaint):
            system.spawn(Worker, restart=restart)


async def test_a_permanent_actor_stopping_itself_twice_in_one_handler_restarts_once() -> None:
    class Twice(Worker):
        def receive(self, message: Any) -> Any:
            if message == "twice":
                self.stop()
                self.stop()  # restarting already: nothing
                return "stopping"
            return super().receive(message)

    async with open_actor_system() as system:
        ref = system.spawn(Twice, restart="permanent")
        assert await ref.ask("twice") == "stopping"
        assert await ref.ask("n") == 2
        assert ref.statistics().restarts == 1


async def test_restarted_after_is_the_cause_not_a_failure_of_the_old_on_stop() -> None:
    class Breaks(Worker):
        def on_stop(self) -> None:
            raise KeyError("on_stop broke")

    async with open_actor_system() as system:
        ref = system.spawn(Breaks)
        ref.tell("fail")
        why = await ref.ask("why")
        assert isinstance(why, RuntimeError)
        assert str(why) == "failed"

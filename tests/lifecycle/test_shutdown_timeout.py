"""``spawn(..., shutdown=seconds)``: the bound on an actor's stop (T27).

The contract (``trio_actors.contracts._shutdown_timeout``) covers hanging hooks and
drains in stops, restarts, parents and the exit; these tests cover the argument's
checks, the default, ``0``, plain hooks, and what is logged.
"""

from __future__ import annotations

import contextlib
import logging
import math
from typing import Any

import pytest
import trio
import trio.testing

from trio_actors import Actor, ShutdownTimeout, open_actor_system


class Hangs(Actor):
    """An async ``on_stop`` that never ends by itself."""

    def __init__(self, ended: list[float]) -> None:
        self.ended = ended

    def receive(self, message: Any) -> Any:
        return message

    async def on_stop(self) -> None:
        try:
            await trio.sleep_forever()
        finally:
            self.ended.append(trio.current_time())


@pytest.mark.parametrize(
    ("shutdown", "error", "complaint"),
    [
        ("5", TypeError, r"shutdown must be a number of seconds \(or math.inf\), got '5'"),
        (True, TypeError, r"got True"),
        (None, TypeError, r"got None"),
        (-1, ValueError, r"shutdown must be >= 0 seconds \(or math.inf\), got -1"),
        (math.nan, ValueError, r"got nan"),
    ],
)
async def test_a_bad_shutdown_is_refused_at_spawn(
    shutdown: Any, error: type[Exception], complaint: str
) -> None:
    class Spawner(Actor):
        expected_errors = (TypeError, ValueError)

        def receive(self, message: Any) -> Any:
            return self.spawn(Hangs, [], shutdown=message)

    async with open_actor_system() as system:
        with pytest.raises(error, match=complaint):
            system.spawn(Hangs, [], shutdown=shutdown)
        parent = system.spawn(Spawner)
        with pytest.raises(error, match=complaint):
            await parent.ask(shutdown)
        assert system.statistics().live_actors == 1


async def test_a_child_takes_its_shutdown_from_its_own_spawn(
    autojump_clock: trio.testing.MockClock,
) -> None:
    ended: list[float] = []

    class Parent(Actor):
        def on_start(self) -> None:
            self.spawn(Hangs, ended, shutdown=0.25)

        def receive(self, message: Any) -> Any:
            return message

    async with open_actor_system() as system:
        ref = system.spawn(Parent)
        await trio.testing.wait_all_tasks_blocked()
        began = trio.current_time()
        await ref.stop()
        assert ended == [began + 0.25]


async def test_the_default_is_five_seconds(autojump_clock: trio.testing.MockClock) -> None:
    ended: list[float] = []
    async with open_actor_system() as system:
        ref = system.spawn(Hangs, ended)
        await trio.testing.wait_all_tasks_blocked()
        began = trio.current_time()
        await ref.stop()
        assert ended == [began + 5.0]
        assert trio.current_time() == began + 5.0


async def test_zero_cancels_an_async_on_stop_at_its_first_checkpoint(
    autojump_clock: trio.testing.MockClock,
) -> None:
    ended: list[float] = []
    async with open_actor_system() as system:
        ref = system.spawn(Hangs, ended, shutdown=0)
        await trio.testing.wait_all_tasks_blocked()
        began = trio.current_time()
        await ref.stop()
        assert ended == [began]


async def test_a_plain_on_stop_is_never_cut_short(autojump_clock: trio.testing.MockClock) -> None:
    # A plain hook cannot be cancelled; it runs whole even with shutdown=0.
    done: list[str] = []

    class Plain(Actor):
        def receive(self, message: Any) -> Any:
            return message

        def on_stop(self) -> None:
            autojump_clock.jump(10)  # a hook that "takes" 10 s
            done.append("on_stop")

    async with open_actor_system() as system:
        ref = system.spawn(Plain, shutdown=0)
        await ref.stop()
        assert done == ["on_stop"]
        assert ref.statistics().failures == 0


async def test_a_timeout_is_logged_once_with_the_path_and_counted(
    autojump_clock: trio.testing.MockClock, caplog: pytest.LogCaptureFixture
) -> None:
    async with open_actor_system() as system:
        ref = system.spawn(Hangs, [], name="slow", shutdown=1.5)
        await trio.testing.wait_all_tasks_blocked()
        with caplog.at_level(logging.ERROR, logger="trio_actors"):
            await ref.stop()
        assert ref.statistics().failures == 1
        assert system.statistics().failures == 1
    [record] = caplog.records
    assert record.getMessage() == "system/slow failed to stop in time"
    assert record.exc_info is not None
    error = record.exc_info[1]
    assert isinstance(error, ShutdownTimeout)
    assert str(error) == (
        "system/slow: its on_stop did not finish within its shutdown timeout of 1.5 s "
        "and was cancelled"
    )


async def test_an_on_stop_that_handles_the_cancellation_still_ends_the_stop(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The hook catches Cancelled and returns: the stop still ends at the timeout,
    # and it is still a timeout (the scope caught its own cancellation).
    class Swallows(Actor):
        def receive(self, message: Any) -> Any:
            return message

        async def on_stop(self) -> None:
            with contextlib.suppress(trio.Cancelled):
                await trio.sleep_forever()

    async with open_actor_system() as system:
        ref = system.spawn(Swallows, shutdown=1)
        await trio.testing.wait_all_tasks_blocked()
        began = trio.current_time()
        await ref.stop()
        assert trio.current_time() == began + 1
        assert ref.statistics().failures == 1


async def test_an_unknown_spawn_keyword_lists_shutdown_and_restart_among_spawns_own() -> None:
    async with open_actor_system() as system:
        with pytest.raises(TypeError, match=r"name, supervision, mailbox, shutdown and restart;"):
            system.spawn(Hangs, timeout=3)


async def test_a_parents_on_stop_keeps_its_own_budget_after_slow_children(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # Each child's stop is bounded by its own timeout; the time it takes is not the
    # parent's: a parent whose on_stop takes 1 s of its 2 s is not cut short after
    # its child took 3 s (of its 5 s) to stop.
    done: list[str] = []

    class SlowChild(Actor):
        def receive(self, message: Any) -> Any:
            return message

        async def on_stop(self) -> None:
            await trio.sleep(3)
            done.append("child")

    class Parent(Actor):
        def on_start(self) -> None:
            self.spawn(SlowChild)

        def receive(self, message: Any) -> Any:
            return message

        async def on_stop(self) -> None:
            await trio.sleep(1)
            done.append("parent")

    async with open_actor_system() as system:
        parent = system.spawn(Parent, shutdown=2.0)
        await trio.testing.wait_all_tasks_blocked()
        began = trio.current_time()
        await parent.stop()
        assert trio.current_time() - began == 4.0
        assert done == ["child", "parent"]
        assert parent.statistics().failures == 0

"""Deciders (``supervision={ValueError: Resume(), Exception: Restart()}``) and the
unlimited restart window (``Restart(within=math.inf)``)."""

from __future__ import annotations

import math
from typing import Any

import pytest
import trio
import trio.testing

from trio_actors import (
    Actor,
    Escalate,
    Restart,
    Resume,
    Stop,
    Supervision,
    SupervisionStrategy,
    Terminated,
    open_actor_system,
)
from trio_actors._core._failure import RestartWindow
from trio_actors._supervision import Decider
from trio_actors._supervision import Restart as _Restart


class Raiser(Actor):
    """Raises the exception it is told; counts its instances through ``made``."""

    def __init__(self, made: list[int]) -> None:
        made.append(len(made) + 1)
        self.number = len(made)
        self.seen = 0

    def receive(self, message: Any) -> Any:
        self.seen += 1
        if isinstance(message, BaseException):
            raise message
        return (self.number, self.seen)


DECIDER: dict[type[Exception], SupervisionStrategy] = {
    ValueError: Resume(),
    LookupError: Stop(),
    Exception: Restart(),
}


@pytest.mark.parametrize(
    ("error", "chosen"),
    [
        (UnicodeError("x"), Resume()),  # a ValueError: its entry, not Exception's
        (ValueError("x"), Resume()),
        (KeyError("x"), Stop()),  # a LookupError
        (RuntimeError("x"), Restart()),  # only Exception matches
    ],
)
def test_the_most_specific_entry_decides(error: Exception, chosen: Any) -> None:
    assert Decider(DECIDER).decide(error) == chosen


def test_an_error_no_entry_matches_escalates() -> None:
    assert Decider({ValueError: Resume()}).decide(KeyError("x")) == Escalate()


async def test_a_decider_applies_per_failure() -> None:
    async with open_actor_system() as system:
        made: list[int] = []
        ref = system.spawn(Raiser, made, supervision=DECIDER)
        assert await ref.ask("a") == (1, 1)
        with pytest.raises(UnicodeError):
            await ref.ask(UnicodeError("resumed"))
        assert await ref.ask("b") == (1, 3)  # the same instance went on
        with pytest.raises(RuntimeError):
            await ref.ask(RuntimeError("restarted"))
        assert await ref.ask("c") == (2, 1)  # a fresh one
        with pytest.raises(KeyError):
            await ref.ask(KeyError("stopped"))
        await trio.testing.wait_all_tasks_blocked()
        assert ref.statistics().state == "stopped"


async def test_a_decider_without_a_match_escalates_to_the_system_block() -> None:
    with pytest.raises(ExceptionGroup) as caught:  # noqa: PT012
        async with open_actor_system() as system:
            ref = system.spawn(Raiser, [], supervision={ValueError: Resume()})
            ref.tell(KeyError("nobody decides this"))
            await trio.sleep_forever()
    assert caught.group_contains(KeyError)


class FactoryFails(Actor):
    """Its factory fails from the second instance on (the first restart)."""

    def __init__(self, made: list[int]) -> None:
        made.append(1)
        if len(made) > 1:
            raise LookupError("cannot build a fresh instance")

    def receive(self, message: Any) -> Any:
        raise RuntimeError("fail once")


async def test_a_factory_failing_in_a_restart_escalates_unless_restart_decides_it() -> None:
    with pytest.raises(ExceptionGroup) as caught:  # noqa: PT012
        async with open_actor_system() as system:
            made: list[int] = []
            decider: Supervision = {RuntimeError: Restart(), LookupError: Stop()}
            system.spawn(FactoryFails, made, supervision=decider).tell("fail")
            await trio.sleep_forever()
    assert caught.group_contains(LookupError)
    assert made == [1, 1]  # tried once: Stop does not retry a failed creation


@pytest.mark.parametrize(
    ("supervision", "complaint"),
    [
        ({}, r"supervision=\{\} is empty"),
        ({"ValueError": Resume()}, r"keys must be Exception subclasses, got 'ValueError'"),
        ({KeyboardInterrupt: Resume()}, r"keys must be Exception subclasses"),
        ({ValueError: "resume"}, r"values must be .* got 'resume' for ValueError"),
        ({ValueError: {KeyError: Stop()}}, r"values must be"),
        ("restart", r"supervision must be Restart\(\.\.\.\), .* or a mapping"),
    ],
)
async def test_a_bad_decider_is_refused_at_spawn(supervision: Any, complaint: str) -> None:
    async with open_actor_system() as system:
        with pytest.raises(TypeError, match=complaint):
            system.spawn(Raiser, [], supervision=supervision)


def test_an_unlimited_window_is_allowed_and_other_non_finite_ones_are_not() -> None:
    assert Restart(within=math.inf).within == math.inf
    for bad in (-math.inf, math.nan, 0):
        with pytest.raises(ValueError, match=r"Restart\.within"):
            Restart(within=bad)


async def test_an_unlimited_window_is_a_lifetime_budget(
    autojump_clock: trio.testing.MockClock,
) -> None:
    with pytest.raises(ExceptionGroup) as caught:  # noqa: PT012
        async with open_actor_system() as system:
            made: list[int] = []
            ref = system.spawn(Raiser, made, supervision=Restart(max_restarts=2, within=math.inf))
            for _ in range(2):
                with pytest.raises(RuntimeError):
                    await ref.ask(RuntimeError("again"))
                await trio.sleep(10_000)  # far apart: any finite window would forget
            assert made == [1, 2, 3]
            ref.tell(RuntimeError("the third in its life"))
            await trio.sleep_forever()
    assert caught.group_contains(RuntimeError)


def test_the_window_keeps_no_more_failures_than_it_needs() -> None:
    window = RestartWindow()
    strategy = _Restart(max_restarts=3, within=math.inf)
    counts = [window.record(float(t), strategy) for t in range(10)]
    assert counts == [1, 2, 3, 4, 4, 4, 4, 4, 4, 4]
    assert len(window._times) == 4


class Watcher(Actor):
    """Watches the ref it is given; fails on "fail"; records what it receives."""

    def __init__(self, log: list[Any]) -> None:
        self.log = log

    def on_start(self) -> None:
        self.log.append(("started", self.restarted_after))

    def receive(self, message: Any) -> Any:
        if message == "fail":
            raise RuntimeError("watcher failed")
        if isinstance(message, tuple) and message[0] == "watch":
            self.watch(message[1])
            return None
        self.log.append(message)
        return None


@pytest.mark.parametrize("watch_again", [False, True], ids=["dropped", "watched-again"])
async def test_a_restart_drops_the_old_instances_watches_and_says_why(watch_again: bool) -> None:
    async with open_actor_system() as system:
        log: list[Any] = []
        target = system.spawn(Raiser, [])
        watcher = system.spawn(Watcher, log)
        await watcher.ask(("watch", target))
        with pytest.raises(RuntimeError):
            await watcher.ask("fail")
        if watch_again:
            await watcher.ask(("watch", target))  # the fresh instance's own watch
        await target.stop()
        await trio.testing.wait_all_tasks_blocked()
        assert await watcher.ask("after") is None
        first, (event, why), *rest = log
        assert first == ("started", None)
        assert event == "started"
        assert isinstance(why, RuntimeError)
        assert str(why) == "watcher failed"
        # Exactly one Terminated if the fresh instance watched; none from the old watch.
        assert rest == ([Terminated(target)] if watch_again else []) + ["after"]

"""``Actor.expected_errors``: exceptions that are replies, not failures (T26).

The contract (``trio_actors.contracts._expected``) covers the behaviour under every
strategy; these tests cover what it does not: the checks of the declaration, the
runtime's own misuse errors (never replies, whatever is declared), statistics, and
a tell's expected error.
"""

from __future__ import annotations

import logging
from typing import Any

import pytest
import trio
import trio.lowlevel
import trio.testing

from trio_actors import Actor, open_actor_system


class Overdraft(Exception):
    pass


class Account(Actor):
    expected_errors = (Overdraft,)

    def __init__(self) -> None:
        self.balance = 5

    def receive(self, message: Any) -> Any:
        if message > self.balance:
            raise Overdraft(message)
        self.balance -= message
        return self.balance


@pytest.mark.parametrize(
    ("declared", "complaint"),
    [
        (Overdraft, r"Bad\.expected_errors must be a tuple .* write \(Overdraft,\)"),
        ([Overdraft], r"Bad\.expected_errors must be a tuple of exception classes, got \["),
        ((Overdraft, "x"), r"must hold Exception subclasses only, got 'x'"),
        ((KeyboardInterrupt,), r"only, got <class 'KeyboardInterrupt'> \(a KeyboardInterrupt"),
        ((trio.Cancelled,), r"only, got <class 'trio.Cancelled'>"),
    ],
)
async def test_a_bad_declaration_is_refused_at_spawn_naming_the_class(
    declared: Any, complaint: str
) -> None:
    class Bad(Actor):
        expected_errors = declared

        def receive(self, message: Any) -> Any:
            return message

    async with open_actor_system() as system:
        with pytest.raises(TypeError, match=complaint):
            system.spawn(Bad)
        assert system.statistics().live_actors == 0


async def test_statistics_count_expected_errors_and_not_failures(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with open_actor_system() as system:
        ref = system.spawn(Account)
        with pytest.raises(Overdraft):
            await ref.ask(10)
        ref.tell(20)  # an expected error from a tell: discarded, counted
        assert await ref.ask(1) == 4
        actor, whole = ref.statistics(), system.statistics()
        assert (actor.expected_errors, actor.failures, actor.restarts) == (2, 0, 0)
        assert (whole.expected_errors, whole.failures, whole.restarts) == (2, 0, 0)
        assert actor.handled == 3
    assert not [r for r in caplog.records if r.name == "trio_actors"]


async def test_undeclared_errors_still_count_as_failures_in_the_system(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async with open_actor_system() as system:
        ref = system.spawn(Account)
        with pytest.raises(TypeError):
            await ref.ask("not a number")  # '>' between str and int
        await trio.testing.wait_all_tasks_blocked()  # the restart has run
        assert system.statistics().failures == 1
        assert ref.statistics().restarts == 1
    failures = [r for r in caplog.records if r.name == "trio_actors"]
    assert [r.levelno for r in failures] == [logging.ERROR]


async def _later() -> None:
    await trio.lowlevel.checkpoint()


class ExpectsTypeErrors(Actor):
    """Declares TypeError, RuntimeError: the runtime's misuse errors stay failures."""

    expected_errors = (TypeError, RuntimeError)

    def receive(self, message: Any) -> Any:
        if message == "coroutine":
            return _later()  # a plain receive returning a coroutine: a misuse
        raise TypeError("a declared one")


async def test_a_returned_coroutine_is_a_failure_even_if_its_type_is_declared() -> None:
    async with open_actor_system() as system:
        ref = system.spawn(ExpectsTypeErrors)
        with pytest.raises(TypeError, match="declared"):
            await ref.ask("declared")
        assert ref.statistics().failures == 0
        with pytest.raises(TypeError, match="returned a coroutine"):
            await ref.ask("coroutine")
        await trio.testing.wait_all_tasks_blocked()  # the restart has run
        statistics = ref.statistics()
        assert (statistics.failures, statistics.restarts, statistics.expected_errors) == (1, 1, 1)


class StrayCancelled(Actor):
    expected_errors = (RuntimeError,)

    def __init__(self) -> None:
        self.kept: BaseException | None = None

    async def receive(self, message: Any) -> Any:
        if message == "keep":
            with trio.CancelScope() as scope:
                scope.cancel()
                try:
                    await trio.sleep(1)
                except trio.Cancelled as cancelled:
                    self.kept = cancelled
                    raise
            return "kept"
        assert self.kept is not None
        raise self.kept  # a Cancelled no scope of the runtime's cancelled


async def test_a_stray_cancelled_is_a_failure_even_if_runtime_error_is_declared() -> None:
    async with open_actor_system() as system:
        ref = system.spawn(StrayCancelled)
        assert await ref.ask("keep") == "kept"
        with pytest.raises(RuntimeError, match="not its own cancellation"):
            await ref.ask("raise it")
        assert ref.statistics().failures == 1


class Inherits(Account):
    """A subclass inherits the declaration (a class attribute)."""


async def test_subclasses_inherit_the_declaration() -> None:
    async with open_actor_system() as system:
        ref = system.spawn(Inherits)
        with pytest.raises(Overdraft):
            await ref.ask(99)
        assert ref.statistics().failures == 0

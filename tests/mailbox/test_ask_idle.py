"""An ask to an idle actor, answered in the asker's task (``_core/_idle_ask.py``).

Its first cancel point reads trio's private task fields instead of calling
``checkpoint_if_cancelled`` (5% of every such ask, see its comment). These tests pin
that the shortcut is in use with the installed trio, and that both it and the
public fallback keep the contract: an asker cancelled beforehand gets ``Cancelled``
and its message is never handled (withdrawn); a cancellation during the handler
discards the reply; an uncancelled ask is answered after one checkpoint.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

from trio_actors import Actor, open_actor_system
from trio_actors._core import _idle_ask


class Spy(Actor):
    """Answers with the message, records it in ``seen``, and cancels the scope it is
    given (the asker's) from its handler."""

    def __init__(self) -> None:
        self.seen: list[Any] = []
        self.scope_to_cancel: trio.CancelScope | None = None

    def receive(self, message: Any) -> Any:
        self.seen.append(message)
        if self.scope_to_cancel is not None:
            self.scope_to_cancel.cancel()  # the asker's scope, from the handler
        return message


def test_the_installed_trio_has_the_fields_the_shortcut_reads() -> None:
    # If a trio release moves them, this fails: the runtime still works (through
    # checkpoint_if_cancelled), but every idle ask is 5% slower -- update ask_idle.
    assert _idle_ask._cancel_check_inlinable()
    assert _idle_ask.CANCEL_CHECK_INLINED


@pytest.fixture(params=[True, False], ids=["inlined", "fallback"])
def cancel_check(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    monkeypatch.setattr(_idle_ask, "CANCEL_CHECK_INLINED", request.param)
    return bool(request.param)


async def test_an_asker_cancelled_beforehand_is_withdrawn_and_never_handled(
    cancel_check: bool,
) -> None:
    async with open_actor_system() as system:
        spy = Spy()
        ref = system.spawn(lambda: spy)
        assert await ref.ask("warm") == "warm"  # started and idle
        with trio.CancelScope() as scope:
            scope.cancel()
            with pytest.raises(trio.Cancelled):
                await ref.ask("never")
        assert spy.seen == ["warm"]
        statistics = ref.statistics()
        assert statistics.withdrawn == 1
        assert statistics.handled == 1


async def test_an_uncancelled_idle_ask_is_answered_after_one_checkpoint(
    cancel_check: bool,
) -> None:
    async with open_actor_system() as system:
        ref = system.spawn(Spy)
        assert await ref.ask(1) == 1
        with trio.testing.assert_checkpoints():
            assert await ref.ask(2) == 2


async def test_a_cancellation_during_the_handler_discards_the_reply(cancel_check: bool) -> None:
    async with open_actor_system() as system:
        spy = Spy()
        ref = system.spawn(lambda: spy)
        assert await ref.ask("warm") == "warm"
        with trio.CancelScope() as scope:
            spy.scope_to_cancel = scope
            await ref.ask("cancel me")
            pytest.fail("the reply of a cancelled ask was returned")  # pragma: no cover
        assert scope.cancelled_caught
        assert spy.seen == ["warm", "cancel me"]  # handled: a plain handler runs whole
        assert ref.statistics().handled == 2


class Confused(Actor):
    def receive(self, message: Any) -> Any:
        if message != "coroutine":
            return message

        async def later() -> None:
            pass

        return later()


@pytest.mark.replaces_the_kernel  # (_idle_ask's reply_plain)
@pytest.mark.usefixtures("debug_checks_only_collect")
def test_a_coroutine_returned_to_the_asker_task_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A plain handler that returns a coroutine to an idle ask (answered in the
    # asker's task) is refused with TypeError; shown against a mutant without the
    # check, under which the ask would return the coroutine.
    def reply_without_the_check(cell: Any, receive: Any, message: Any) -> Any:
        return receive(message)

    monkeypatch.setattr(_idle_ask, "reply_plain", reply_without_the_check)

    async def main() -> Any:
        async with open_actor_system() as system:
            ref = system.spawn(Confused)
            assert await ref.ask("warm") == "warm"  # now idle and bound: asker-task path
            try:
                return await ref.ask("coroutine")
            except TypeError as error:
                return error

    result = trio.run(main)
    assert not isinstance(result, TypeError)  # the mutant is live here...
    result.close()
    monkeypatch.undo()
    assert isinstance(trio.run(main), TypeError)  # ...and the runtime refuses it

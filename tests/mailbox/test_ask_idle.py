"""An ask to an idle actor, answered in the asker's task (``Dispatcher.ask_idle``).

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
from trio_actors._core import _dispatcher


class Echo(Actor):
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
    assert _dispatcher._cancel_check_inlinable()
    assert _dispatcher._CANCEL_CHECK_INLINED


@pytest.fixture(params=[True, False], ids=["inlined", "fallback"])
def cancel_check(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> bool:
    monkeypatch.setattr(_dispatcher, "_CANCEL_CHECK_INLINED", request.param)
    return bool(request.param)


async def test_an_asker_cancelled_beforehand_is_withdrawn_and_never_handled(
    cancel_check: bool,
) -> None:
    async with open_actor_system() as system:
        echo = Echo()
        ref = system.spawn(lambda: echo)
        assert await ref.ask("warm") == "warm"  # started and idle
        with trio.CancelScope() as scope:
            scope.cancel()
            with pytest.raises(trio.Cancelled):
                await ref.ask("never")
        assert echo.seen == ["warm"]
        statistics = ref.statistics()
        assert statistics.withdrawn == 1
        assert statistics.handled == 1


async def test_an_uncancelled_idle_ask_is_answered_after_one_checkpoint(
    cancel_check: bool,
) -> None:
    async with open_actor_system() as system:
        ref = system.spawn(Echo)
        assert await ref.ask(1) == 1
        with trio.testing.assert_checkpoints():
            assert await ref.ask(2) == 2


async def test_a_cancellation_during_the_handler_discards_the_reply(cancel_check: bool) -> None:
    async with open_actor_system() as system:
        echo = Echo()
        ref = system.spawn(lambda: echo)
        assert await ref.ask("warm") == "warm"
        with trio.CancelScope() as scope:
            echo.scope_to_cancel = scope
            await ref.ask("cancel me")
            pytest.fail("the reply of a cancelled ask was returned")  # pragma: no cover
        assert scope.cancelled_caught
        assert echo.seen == ["warm", "cancel me"]  # handled: a plain handler runs whole
        assert ref.statistics().handled == 2

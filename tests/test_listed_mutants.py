"""The mutants issue 15 found surviving the whole suite, each now caught.

Finding 10 listed behaviour-changing mutants of the core that no test noticed. Each
is applied here (a monkeypatch) and shown to fail a contract or a test of its
behaviour -- and the behaviour itself is tested without the mutant.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import trio
import trio.testing

import trio_actors as ta
from trio_actors import ServingPolicy
from trio_actors._core import _cell, _dispatcher, _envelope, _restarting
from trio_actors._core._debug import collecting_violations
from trio_actors.contracts import REGISTRY


@pytest.fixture(autouse=True)
def _contracts_alone() -> Iterator[None]:
    # The contracts and tests must catch these by themselves: debug mode only collects.
    with collecting_violations():
        yield


def _failing_contracts() -> list[str]:
    failing = []
    for contract_id, contract in REGISTRY.items():
        if contract_id in ("T25",):
            continue  # its watchdog threads; not needed for these mutants
        if not contract.run(ServingPolicy()).passed:
            failing.append(contract_id)
    return failing


@pytest.mark.timeout(180)  # (every contract, one after another: ~2 s alone, more under load)
def test_a_withdrawn_ask_failed_back_as_well_is_caught_by_t31(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Ask.fail returning True for a withdrawn ask: the stranded cleanup counts it
    # failed back, and it was counted withdrawn already.
    fail = _envelope.Ask.fail

    def fail_even_withdrawn(self: Any, error: BaseException) -> bool:
        return True if self.state is _envelope.AskState.WITHDRAWN else fail(self, error)

    monkeypatch.setattr(_envelope.Ask, "fail", fail_even_withdrawn)
    assert "T31" in _failing_contracts()


class Confused(ta.Actor):
    def receive(self, message: Any) -> Any:
        if message != "coroutine":
            return message

        async def later() -> None:
            pass

        return later()


def test_a_coroutine_returned_to_the_asker_task_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # The asker-task path (an ask to an idle plain actor) no longer detecting a
    # coroutine returned by a plain handler: the ask would return the coroutine.
    def reply_without_the_check(cell: Any, receive: Any, message: Any) -> Any:
        return receive(message)

    monkeypatch.setattr(_dispatcher, "reply_plain", reply_without_the_check)

    async def main() -> Any:
        async with ta.open_actor_system() as system:
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


def test_serving_a_resumed_actor_with_an_unbound_receive_is_caught(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
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
        trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


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


def test_a_restart_keeping_the_old_kinds_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    install = _restarting.install

    def install_keeping_the_kinds(cell: Any, instance: Any, kinds: Any) -> None:
        install(cell, instance, cell.kinds)

    monkeypatch.setattr(_cell.ActorCell, "install", install_keeping_the_kinds)

    async def main() -> Any:
        async with ta.open_actor_system() as system:
            ref = system.spawn(_plain_then_async())
            await ref.ask("which")
            ref.tell("fail")
            with trio.move_on_after(5):
                return await ref.ask("which")

    with pytest.raises(BaseException):  # noqa: B017,PT011 - it breaks into an error
        assert trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0)) == "async"

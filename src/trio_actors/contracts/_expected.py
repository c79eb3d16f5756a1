"""Contract T26: expected errors are replies, not failures."""

from __future__ import annotations

from typing import Any

import trio
import trio.lowlevel
import trio.testing

from .. import Actor, Escalate, Restart, Resume, ServingPolicy, Stop
from ._harness import captured_failures, require, run_virtual, settle, system_for
from ._registry import contract


class _Overdraft(Exception):
    """The business error the account declares as a reply."""


class _DeepOverdraft(_Overdraft):
    """A subclass: expected too (``isinstance``, as ``except`` would)."""


class _Broken(Exception):
    """Not declared: a failure as ever."""


class _Account(Actor):
    """Holds a balance; overdrafts are replies; "break" is a real failure."""

    expected_errors = (_Overdraft,)
    made = 0

    def __init__(self) -> None:
        _Account.made += 1
        self.balance = 0

    def receive(self, message: Any) -> Any:
        kind, amount = message
        if kind == "deposit":
            self.balance += amount
        elif kind == "withdraw":
            if amount > self.balance:
                error = _DeepOverdraft if amount > 2 * self.balance else _Overdraft
                raise error(f"balance {self.balance}, asked {amount}")
            self.balance -= amount
        elif kind == "break":
            raise _Broken("really broken")
        return self.balance


class _AsyncAccount(_Account):
    async def receive(self, message: Any) -> Any:
        await trio.lowlevel.checkpoint()
        return super().receive(message)


@contract(
    "T26",
    "expected errors are replies",
    "an expected exception raised by an ask's handler reaches the asker with its type; "
    "the actor keeps its instance and state; no restart, no failure counted, nothing "
    "logged -- under every strategy, plain or async, idle or queued; an undeclared "
    "exception is still a failure",
)
def expected_errors_are_replies(policy: ServingPolicy) -> None:
    strategies = (Restart(), Resume(), Stop(), Escalate())

    async def main(clock: trio.testing.MockClock) -> None:
        for factory in (_Account, _AsyncAccount):
            for strategy in strategies:
                where = f"{factory.__name__} under {strategy!r}"
                with captured_failures() as logged:
                    async with system_for(policy) as system:
                        _Account.made = 0
                        ref = system.spawn(factory, supervision=strategy)
                        require(await ref.ask(("deposit", 10)) == 10, f"{where}: no deposit")
                        # Idle: answered in the asker's task (plain) or by its task.
                        await _expect(ref, ("withdraw", 15), _Overdraft, where)
                        # Queued behind a tell: answered by the serving loop.
                        ref.tell(("deposit", 1))
                        await _expect(ref, ("withdraw", 100), _DeepOverdraft, where)
                        ref.tell(("withdraw", 50))  # a tell's expected error: discarded
                        require(
                            await ref.ask(("withdraw", 1)) == 10,
                            f"{where}: the balance was not kept after expected errors",
                        )
                        await settle()
                        statistics = ref.statistics()
                        require(
                            _Account.made == 1 and statistics.restarts == 0,
                            f"{where}: an expected error restarted the actor "
                            f"({_Account.made} instances, {statistics.restarts} restarts)",
                        )
                        require(
                            statistics.state == "running",
                            f"{where}: an expected error left the actor {statistics.state}",
                        )
                        require(
                            statistics.failures == 0 and system.statistics().failures == 0,
                            f"{where}: expected errors counted as failures ({statistics.failures})",
                        )
                        require(
                            statistics.expected_errors == 3,
                            f"{where}: {statistics.expected_errors} expected errors counted, not 3",
                        )
                        require(
                            not logged,
                            f"{where}: expected errors were logged: "
                            f"{[record.getMessage() for record in logged]}",
                        )
                        if isinstance(strategy, Restart):
                            # The control: an undeclared exception is a failure.
                            try:
                                await ref.ask(("break", 0))
                            except _Broken:
                                broke = True
                            else:
                                broke = False
                            require(broke, f"{where}: a failing ask's asker got no exception")
                            await settle()
                            statistics = ref.statistics()
                            require(
                                statistics.failures == 1
                                and statistics.restarts == 1
                                and len(logged) == 1,
                                f"{where}: an undeclared exception was not a failure "
                                f"({statistics.failures} failures, {statistics.restarts} "
                                f"restarts, {len(logged)} log records)",
                            )

    run_virtual(main)


async def _expect(ref: Any, message: Any, error_type: type[Exception], where: str) -> None:
    try:
        await ref.ask(message)
    except _Overdraft as error:
        require(
            type(error) is error_type,
            f"{where}: the asker got {type(error).__name__}, not {error_type.__name__}",
        )
    else:
        require(False, f"{where}: the asker of {message!r} got no exception")

"""Contracts T6--T8, T10 and T20: what trio cancellation does to an ask."""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from .. import Actor, ActorError, ServingPolicy
from ._harness import captured_failures, require, run_virtual, settle, system_for
from ._registry import contract


class _Gated(Actor):
    """An async actor whose "block" message waits on a gate; records what it handled."""

    def __init__(self, handled: list[Any], gate: trio.Event) -> None:
        self.handled = handled
        self.gate = gate

    async def receive(self, message: Any) -> Any:
        if message == "block":
            await self.gate.wait()
        self.handled.append(message)
        return message


class _PlainLog(Actor):
    def __init__(self, handled: list[Any]) -> None:
        self.handled = handled

    def receive(self, message: Any) -> Any:
        self.handled.append(message)
        return message


@contract(
    "T6",
    "cancelled while queued",
    "an ask cancelled before the actor reaches it is withdrawn: never handled; the "
    "asker gets Cancelled",
)
def cancelled_while_queued(policy: ServingPolicy) -> None:
    async def main(clock: trio.testing.MockClock) -> None:
        async with system_for(policy) as system:
            # Behind a busy async handler, with a deadline.
            handled: list[Any] = []
            gate = trio.Event()
            busy = system.spawn(_Gated, handled, gate)
            busy.tell("block")
            await settle()
            with trio.move_on_after(1) as scope:
                await busy.ask("queued-then-cancelled")
            require(scope.cancelled_caught, "the asker did not get Cancelled")
            gate.set()
            await busy.ask("after")
            require(
                "queued-then-cancelled" not in handled,
                f"a withdrawn ask was handled anyway: {handled}",
            )
            # Cancelled before an idle plain actor (answered in the asker's task)
            # could run at all: once before its first message, once after.
            plain_handled: list[Any] = []
            plain = system.spawn(_PlainLog, plain_handled)
            for when in ("fresh", "idle"):
                with trio.CancelScope() as cancelled:
                    cancelled.cancel()
                    await plain.ask("never")
                require(cancelled.cancelled_caught, f"{when}: the asker did not get Cancelled")
                await plain.ask(when)
            require(
                plain_handled == ["fresh", "idle"],
                f"a withdrawn ask was handled: {plain_handled}",
            )

    run_virtual(main)


class _Slow(Actor):
    def __init__(self, progress: list[str]) -> None:
        self.progress = progress

    async def receive(self, message: Any) -> Any:
        if message == "slow":
            self.progress.append("started")
            await trio.sleep(10)
            self.progress.append("finished")
        return message


@contract(
    "T7",
    "cancelled while handled (async)",
    "the running async handler is cancelled, the asker gets Cancelled, the actor "
    "handles its next message; no failure recorded",
)
def cancelled_while_handled_async(policy: ServingPolicy) -> None:
    async def main(clock: trio.testing.MockClock) -> None:
        with captured_failures() as failures:
            async with system_for(policy) as system:
                progress: list[str] = []
                ref = system.spawn(_Slow, progress)
                start = trio.current_time()
                with trio.move_on_after(1) as scope:
                    await ref.ask("slow")
                require(scope.cancelled_caught, "the asker did not get Cancelled")
                require(
                    trio.current_time() - start < 2,
                    "the asker was not released at its deadline",
                )
                reply = await ref.ask("next")
                require(reply == "next", f"the actor did not go on: {reply!r}")
                require(
                    progress == ["started"],
                    f"the handler was not cancelled: {progress}",
                )
        require(not failures, f"a cancelled handler was recorded as a failure: {failures}")

    run_virtual(main)


class _CancelsItsAsker(Actor):
    def receive(self, message: Any) -> Any:
        scope, value = message
        scope.cancel()  # the asker is cancelled while this plain handler runs
        return value


@contract(
    "T8",
    "cancelled while handled (plain)",
    "the asker gets Cancelled; the reply is discarded; the actor goes on",
)
def cancelled_while_handled_plain(policy: ServingPolicy) -> None:
    # Both ways an ask reaches a plain handler: to an idle actor it is answered in
    # the asker's task; behind a queued message the dispatcher answers it.
    async def main(clock: trio.testing.MockClock) -> None:
        async with system_for(policy) as system:
            ref = system.spawn(_CancelsItsAsker)
            await ref.ask((trio.CancelScope(), "first"))  # served once: idle from now on
            for path, queue_first in (("idle", False), ("queued", True)):
                got: list[Any] = []
                with trio.CancelScope() as scope:
                    if queue_first:
                        ref.tell((trio.CancelScope(), "ahead"))
                    got.append(await ref.ask((scope, "discarded")))
                require(scope.cancelled_caught, f"{path}: the asker got {got}, not Cancelled")
                require(not got, f"{path}: the reply was delivered: {got}")
                reply = await ref.ask((trio.CancelScope(), "next"))
                require(reply == "next", f"{path}: the actor did not go on: {reply!r}")

    run_virtual(main)


class _Costly(Actor):
    """Plain handler costing ``cost`` seconds of virtual time per message."""

    def __init__(self, clock: trio.testing.MockClock, cost: float, handled: list[Any]) -> None:
        self.clock = clock
        self.cost = cost
        self.handled = handled

    def receive(self, message: Any) -> Any:
        self.clock.jump(self.cost)
        self.handled.append(message)
        return message


@contract(
    "T10",
    "asker cancellation behind backlog",
    "100 queued tells costing 50 µs each, then an ask with a 1 ms deadline: the ask "
    "is never handled and the asker gets Cancelled (holds for batch <= 100 with no "
    "shorter time slice; breaks at 128)",
    absolute=True,
)
def asker_cancellation_behind_backlog(policy: ServingPolicy) -> None:
    async def main(clock: trio.testing.MockClock) -> None:
        async with system_for(policy) as system:
            handled: list[Any] = []
            ref = system.spawn(_Costly, clock, 50e-6, handled)
            for i in range(100):
                ref.tell(i)
            with trio.move_on_after(0.001) as scope:
                await ref.ask("probe")
            await ref.stop(drain=True)
            if "probe" in handled:
                require(
                    False,
                    f"the ask (1 ms deadline) was handled behind "
                    f"{handled.index('probe')} tells costing "
                    f"{handled.index('probe') * 0.05:.2f} ms: the actor reached it in "
                    "the same turn, before the scheduler could deliver the cancellation",
                )
            require(scope.cancelled_caught, "the asker was not cancelled at its deadline")
            require(
                len(handled) == 100,
                f"only {len(handled)} of the 100 tells were handled",
            )

    run_virtual(main)


class _SelfAsker(Actor):
    async def receive(self, message: Any) -> Any:
        if message == "ask yourself":
            return await self.ref.ask("hello")
        if message == "stop yourself":
            await self.ref.stop()
            return "stopped?"
        return message


@contract(
    "T20",
    "no self-deadlock",
    "an actor that asks itself, or awaits its own ref's stop(), from its own handler "
    "gets ActorError at once",
)
def no_self_deadlock(policy: ServingPolicy) -> None:
    async def main(clock: trio.testing.MockClock) -> None:
        with captured_failures():
            async with system_for(policy) as system:
                ref = system.spawn(_SelfAsker)
                for request in ("ask yourself", "stop yourself"):
                    start = trio.current_time()
                    outcome = "no error"
                    with trio.move_on_after(60) as scope:
                        try:
                            await ref.ask(request)
                        except ActorError as error:
                            outcome = type(error).__name__
                    require(not scope.cancelled_caught, f"'{request}' deadlocked")
                    require(outcome == "ActorError", f"'{request}' gave {outcome}")
                    require(
                        trio.current_time() == start,
                        f"'{request}' was not refused at once",
                    )
                require(
                    await ref.ask("still alive") == "still alive",
                    "the actor did not go on",
                )

    run_virtual(main)

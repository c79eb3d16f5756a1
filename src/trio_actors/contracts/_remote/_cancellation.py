"""Contracts across nodes, cancellation and stopping: RT6 a cancelled remote ask is
withdrawn, RT7 a remote ask cancelled while handled, RT9 stranded remote asks failed
back and drain across nodes.

What the asker's cancellation, and a ``stop()`` from another node, do on the node
that serves the actor: a queued ask withdrawn, a running async handler cancelled,
the asks still queued failed back -- or handled first with ``drain=True``.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import trio
import trio.testing

from ... import Actor, ActorRef, ServingPolicy
from .._harness import require, run_virtual
from .._registry import contract
from ._actors import _Gate
from ._nodes import nodes, reach


@contract(
    "RT6",
    "a cancelled remote ask is withdrawn",
    "an ask cancelled while still queued on the other node is withdrawn there: the "
    "actor never handles it",
)
def remote_cancel_withdraws(policy: ServingPolicy) -> None:
    async def main(clock: trio.testing.MockClock) -> None:
        async with nodes(policy, "a", "b") as (a, b):
            gate = trio.Event()
            actor = a.spawn(_Gate, gate)
            there = await reach(a, b, actor, "gate")
            async with trio.open_nursery() as nursery:
                nursery.start_soon(there.ask, "wait")
                await trio.sleep(1)
                with trio.move_on_after(1) as scope:
                    await there.ask("cancelled")
                require(scope.cancelled_caught, "the ask was answered past its gate")
                await trio.sleep(1)
                gate.set()
            await there.ask("after")
            seen = await actor.ask("seen")
            require(seen == ["after"], f"the actor handled {seen} (the cancelled ask too?)")
            withdrawn = actor.statistics().withdrawn
            require(withdrawn == 1, f"{withdrawn} asks withdrawn, not 1")

    run_virtual(main)


class _Cancellable(Actor):
    """``"wait"`` waits forever in an async handler; counts the cancellations."""

    def __init__(self) -> None:
        self.cancelled = 0

    async def receive(self, message: Any) -> Any:
        if message == "wait":
            try:
                await trio.sleep_forever()
            except trio.Cancelled:
                self.cancelled += 1
                raise
        return self.cancelled if message == "cancelled" else message


@contract(
    "RT7",
    "a remote ask cancelled while handled",
    "an ask cancelled while its async handler runs on the other node cancels that "
    "handler there, and the actor goes on with its next message",
)
def remote_cancel_running(policy: ServingPolicy) -> None:
    async def main(clock: trio.testing.MockClock) -> None:
        async with nodes(policy, "a", "b") as (a, b):
            there = await reach(a, b, a.spawn(_Cancellable), "cancellable")
            with trio.move_on_after(1) as scope:
                await there.ask("wait")
            require(scope.cancelled_caught, "the ask of a handler that never ends returned")
            with trio.move_on_after(30):
                cancelled = await there.ask("cancelled")
                require(cancelled == 1, f"the handler there was cancelled {cancelled} times, not 1")
                return
            raise AssertionError("the actor never answered the next ask: its handler runs on")

    run_virtual(main)


async def _asks_outcomes(asks: list[Any]) -> list[str]:
    """Await each of ``asks`` (in tasks), within 60 virtual seconds: how each ended."""
    outcomes: list[str] = ["hung"] * len(asks)

    async def one(index: int) -> None:
        try:
            outcomes[index] = repr(await asks[index])
        except Exception as error:
            outcomes[index] = type(error).__name__

    with trio.move_on_after(60):
        async with trio.open_nursery() as nursery:
            for index in range(len(asks)):
                nursery.start_soon(one, index)
                await trio.sleep(0.1)  # (in this order)
    return outcomes


@contract(
    "RT9",
    "stranded remote asks failed back; drain across nodes",
    "stop() from another node fails back the asks still queued there (ActorStopped at "
    "each asker, none hangs); stop(drain=True) handles the queued tells and asks first",
)
def remote_stranded_and_drained(policy: ServingPolicy) -> None:
    async def main(clock: trio.testing.MockClock) -> None:
        async with nodes(policy, "a", "b") as (a, b):
            for drain in (False, True):
                gate = trio.Event()
                actor = a.spawn(_Gate, gate)
                there = await reach(a, b, actor, f"gate-{drain}")
                there.tell("told")
                asks = [there.ask("wait"), there.ask(1), there.ask(2)]

                async def stop_then_open(
                    there: ActorRef = there, gate: trio.Event = gate, drain: bool = drain
                ) -> None:
                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(partial(there.stop, drain=drain))
                        await trio.sleep(1)
                        gate.set()

                outcomes = await _asks_outcomes([*asks, stop_then_open()])
                if drain:
                    expected = ["None", "None", "None", "None"]
                    seen = await actor.wait_stopped()
                    require(seen.error is None, f"the drained actor stopped with {seen.error!r}")
                else:
                    expected = ["ActorStopped", "ActorStopped", "ActorStopped", "None"]
                require(
                    outcomes == expected,
                    f"stop(drain={drain}) from another node: the asks ended {outcomes[:3]}, "
                    f"the stop {outcomes[3]} (expected {expected})",
                )

    run_virtual(main)


__all__ = ["remote_cancel_running", "remote_cancel_withdraws", "remote_stranded_and_drained"]

"""Contracts T12 and T13: fairness between mailboxes, and time slices."""

from __future__ import annotations

from typing import Any

import trio
import trio.lowlevel
import trio.testing

from .. import Actor, ServingPolicy
from ._harness import StepMeter, require, run_virtual, system_for
from ._registry import contract


class _Hot(Actor):
    """Re-tells itself, so its mailbox never empties (up to ``limit`` messages)."""

    def __init__(self, limit: int) -> None:
        self.handled = 0
        self.limit = limit

    def receive(self, message: Any) -> Any:
        self.handled += 1
        if self.handled < self.limit:
            self.ref.tell("again")
        return self.handled


class _Witness(Actor):
    def __init__(self, hot: _Hot, seen: list[int], done: trio.Event) -> None:
        self.hot = hot
        self.seen = seen
        self.done = done

    def receive(self, message: Any) -> Any:
        self.seen.append(self.hot.handled - message)
        self.done.set()


@contract(
    "T12",
    "no starvation",
    "an actor whose mailbox never empties (it re-tells itself) does not starve "
    "another actor: the other's message is handled after at most 2 x batch messages "
    "of the hot one",
)
def no_starvation(policy: ServingPolicy) -> None:
    async def main(clock: trio.testing.MockClock) -> None:
        async with system_for(policy) as system:
            hot_actor = _Hot(limit=policy.batch * 100)
            hot = system.spawn(lambda: hot_actor)
            seen: list[int] = []
            for attempt in range(5):
                done = trio.Event()
                witness = system.spawn(_Witness, hot_actor, seen, done)
                if attempt == 0:
                    for _ in range(4 * policy.batch):  # a backlog that never empties
                        hot.tell("go")
                else:
                    for _ in range(attempt):
                        await trio.lowlevel.checkpoint()  # the hot actor runs a few turns
                witness.tell(hot_actor.handled)
                await done.wait()
                await witness.stop()
            await hot.stop()
        worst = max(seen)
        require(
            worst <= 2 * policy.batch,
            f"another actor's message waited behind {worst} messages of a hot actor "
            f"(limit 2 x batch = {2 * policy.batch})",
        )

    run_virtual(main)


class _Millisecond(Actor):
    def __init__(self, clock: trio.testing.MockClock) -> None:
        self.clock = clock

    def receive(self, message: Any) -> Any:
        self.clock.jump(0.001)
        return message


@contract(
    "T13",
    "long handlers are sliced",
    "handlers costing 1 ms each (virtual), a 10,000-message backlog: no task step "
    "lasts more than 20 ms of trio time (needs time_slice <= 19 ms; breaks with None)",
    absolute=True,
)
def long_handlers_are_sliced(policy: ServingPolicy) -> None:
    meter = StepMeter(trio.current_time)
    meter.active = False

    async def main(clock: trio.testing.MockClock) -> None:
        async with system_for(policy) as system:
            ref = system.spawn(_Millisecond, clock)
            await ref.ask("started")
            for i in range(10_000):
                ref.tell(i)
            meter.active = True
            await ref.ask("last")
            meter.active = False

    run_virtual(main, instruments=(meter,))
    require(
        meter.largest <= 0.020,
        f"a task step ({meter.worst_task}) lasted {meter.largest * 1000:.1f} ms of trio "
        "time with 1 ms handlers (limit 20 ms)",
    )

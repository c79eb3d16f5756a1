"""Contract T27: an actor's stop is bounded by its shutdown timeout.

OTP stops a child with ``shutdown => Timeout``: the child has that long to finish,
then it is killed. Here the bound is ``spawn(..., shutdown=seconds)``: a hanging
``async`` ``on_stop``, a drain whose handler never finishes, an ``on_stop`` run by
a restart, a child's ``on_stop`` during its parent's stop and during the system's
exit are all cancelled when the timeout ends, and the stop completes then -- in
virtual time, exactly at the timeout (a scheduler pass takes none). What the drain
left queued is cleaned as any immediate stop's (T9): asks fail with
``ActorStopped``, tells become dead letters. A hook that finishes in time is not
touched, and ``math.inf`` never cancels.

Each program runs under :func:`run_virtual_or_hang`: without the timeout the
exit waits for the hanging hook in shielded scopes that nothing can cancel.
"""

from __future__ import annotations

import math
from typing import Any

import trio
import trio.testing

from .. import Actor, ActorStopped, ServingPolicy, ShutdownTimeout
from ._harness import captured_failures, require, settle, system_for
from ._registry import contract
from ._shutdown import run_virtual_or_hang

SHUTDOWN = 2.0
"""The shutdown timeout (virtual seconds) the contract's actors are spawned with."""

HOOK_WITHIN_TIME = 1.5
"""How long the well-behaved hooks take: less than :data:`SHUTDOWN`."""

WITHIN = 600.0
"""Virtual seconds after which a program counts as hung."""


class _HangingStop(Actor):
    """An ``on_stop`` that never finishes unless cancelled; records how it ended."""

    def __init__(self, log: list[str]) -> None:
        self.log = log

    def receive(self, message: Any) -> Any:
        if message == "fail":
            raise RuntimeError("fail, to be restarted")
        return "served"

    async def on_stop(self) -> None:
        try:
            await trio.sleep_forever()
        except trio.Cancelled:
            self.log.append("on_stop cancelled")
            raise


class _SlowStop(Actor):
    """An ``on_stop`` that takes :data:`HOOK_WITHIN_TIME` (or ``delay``) and finishes."""

    def __init__(self, log: list[str], delay: float = HOOK_WITHIN_TIME) -> None:
        self.log = log
        self.delay = delay

    def receive(self, message: Any) -> Any:
        return "served"

    async def on_stop(self) -> None:
        await trio.sleep(self.delay)
        self.log.append("on_stop finished")


class _HangingHandler(Actor):
    """Its handler for "hang" never finishes unless cancelled."""

    def __init__(self, log: list[str]) -> None:
        self.log = log

    async def receive(self, message: Any) -> Any:
        if message == "hang":
            try:
                await trio.sleep_forever()
            except trio.Cancelled:
                self.log.append("handler cancelled")
                raise
        self.log.append(f"handled {message}")
        return message


class _Parent(Actor):
    """Spawns one :class:`_HangingStop` child."""

    def __init__(self, log: list[str]) -> None:
        self.log = log

    def on_start(self) -> None:
        self.spawn(_HangingStop, self.log, name="child", shutdown=SHUTDOWN)

    def receive(self, message: Any) -> Any:
        return "served"


async def _timed_stop(ref: Any, *, drain: bool = False) -> float:
    """``await ref.stop(drain=...)``; how long it took, in virtual seconds."""
    began = trio.current_time()
    await ref.stop(drain=drain)
    return trio.current_time() - began


def _require_on_time(took: float, what: str, limit: float = SHUTDOWN) -> None:
    require(
        took <= limit + 1e-9,
        f"{what} took {took:.3f} s of virtual time; its shutdown timeout is {limit} s",
    )


def _require_logged(logged: list[Any], count: int, what: str) -> None:
    timeouts = [r for r in logged if r.exc_info and isinstance(r.exc_info[1], ShutdownTimeout)]
    require(
        len(timeouts) == count,
        f"{what}: {len(timeouts)} ShutdownTimeout failures logged, expected {count}",
    )


@contract(
    "T27",
    "shutdown timeout",
    "an async on_stop (also a restart's, a child's, the exit's) or a draining handler "
    "that outlives the actor's shutdown timeout is cancelled; stop() returns at the "
    "timeout; what the drain left is cleaned as T9; hooks on time and math.inf are "
    "left alone",
)
def shutdown_timeout(policy: ServingPolicy) -> None:
    async def stops(clock: trio.testing.MockClock) -> None:
        log: list[str] = []
        with captured_failures() as logged:
            async with system_for(policy) as system:
                hanging = system.spawn(_HangingStop, log, shutdown=SHUTDOWN)
                _require_on_time(await _timed_stop(hanging), "stop() of a hanging on_stop")
                require(log == ["on_stop cancelled"], f"the hanging on_stop ended as {log}")
                require(
                    hanging.statistics().failures == 1,
                    "the timed-out on_stop was not counted as a failure",
                )
                _require_logged(logged, 1, "a hanging on_stop")

                log.clear()
                slow = system.spawn(_SlowStop, log, shutdown=SHUTDOWN)
                took = await _timed_stop(slow)
                require(
                    log == ["on_stop finished"] and abs(took - HOOK_WITHIN_TIME) < 1e-9,
                    f"an on_stop that finishes in time was cut short: {log}, {took:.3f} s",
                )
                log.clear()
                unbounded = system.spawn(_SlowStop, log, 100 * SHUTDOWN, shutdown=math.inf)
                await unbounded.stop()
                require(log == ["on_stop finished"], "shutdown=math.inf cancelled on_stop")
                _require_logged(logged, 1, "hooks on time")

                log.clear()
                parent = system.spawn(_Parent, log, shutdown=SHUTDOWN)
                await settle()
                _require_on_time(await _timed_stop(parent), "a parent's stop (its child hangs)")
                require(log == ["on_stop cancelled"], f"the child's on_stop ended as {log}")
                _require_logged(logged, 2, "a child's hanging on_stop")

    async def drain(clock: trio.testing.MockClock) -> None:
        log: list[str] = []
        with captured_failures() as logged:
            async with system_for(policy) as system:
                worker = system.spawn(_HangingHandler, log, shutdown=SHUTDOWN)
                worker.tell("hang")
                worker.tell("queued tell")
                answers: list[str] = []

                async def ask_queued() -> None:
                    try:
                        answers.append(await worker.ask("queued ask"))
                    except ActorStopped:
                        answers.append("ActorStopped")

                async with trio.open_nursery() as nursery:
                    await settle()
                    nursery.start_soon(ask_queued)
                    await settle()
                    _require_on_time(await _timed_stop(worker, drain=True), "a drain that hangs")
                require(log == ["handler cancelled"], f"the draining handler ended as {log}")
                require(answers == ["ActorStopped"], f"the ask the drain left got {answers}")
                letters = [letter.message for letter in system.dead_letters.recent]
                require(
                    letters == ["queued tell"],
                    f"the tell the drain left became {letters}, not one dead letter",
                )
                _require_logged(logged, 1, "a drain that hangs")

    async def restart_and_exit(clock: trio.testing.MockClock) -> None:
        log: list[str] = []
        with captured_failures() as logged:
            async with system_for(policy) as system:
                ref = system.spawn(_HangingStop, log, shutdown=SHUTDOWN)
                await settle()
                began = trio.current_time()
                ref.tell("fail")
                answer = await ref.ask("after the restart")
                _require_on_time(trio.current_time() - began, "a restart whose old on_stop hangs")
                require(answer == "served", f"the fresh instance answered {answer!r}")
                require(log == ["on_stop cancelled"], f"the restart's on_stop ended as {log}")
                system.spawn(_HangingStop, log, shutdown=SHUTDOWN)
                system.spawn(_HangingStop, log, shutdown=SHUTDOWN)
                await settle()
                exit_began = trio.current_time()
            took = trio.current_time() - exit_began
            # Three hanging on_stops, one after another (T29), each bounded by its own.
            _require_on_time(took, "the exit (three hanging on_stops)", 3 * SHUTDOWN)
            require(len(log) == 4, f"the exit's on_stops ended as {log[1:]}")
            _require_logged(logged, 4, "restart and exit")

    for program in (stops, drain, restart_and_exit):
        run_virtual_or_hang(program, within=WITHIN)


__all__ = ["SHUTDOWN"]

"""The workloads the sweep measures, for any serving policy.

The sweep measures each candidate policy on the shapes of the performance
specification that a batch size moves (``benchmarks/`` in the repository holds all
of them, with their floors, and takes these from here):

* **S1, tell throughput** (:func:`s1`): one actor, ``size`` tells to a plain
  counting handler (:class:`Counter`), then one ask that returns once every tell is
  handled.
* **S2, ask round trip** (:func:`s2`): ``size`` asks to a plain echo handler
  (:class:`Echo`), one at a time.
* **S6, fairness** (:func:`s6_probe`): one actor with endless inflow (:class:`Flood`
  re-tells itself every message, seeded with four batches) and a *probe* task
  stepping with ``trio.sleep(0)``; the value is the p99 of the probe's delays.
* **S7, stranded cleanup** (:func:`s7_cleanup`, :func:`s7_probe`): stop an actor
  holding ``size`` unhandled tells, timed until every one is a dead letter; and the
  p99 delay of a probe task during that cleanup.

Every function has pyperf's time-function shape ``f(..., loops, size) -> seconds``
and runs all its loops inside one ``trio.run`` of its own. The probe functions
return the sum over ``loops`` of ``p99 x samples`` (``samples``: ``size`` for S6,
:func:`s7_probe_samples` for S7), so that a pyperf benchmark registered with
``inner_loops = samples`` records exactly the p99 in seconds.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from typing import Any

import trio

from .. import Actor, ActorRef, ActorSystem, ServingPolicy, open_actor_system

OpenSystem = Callable[[], AbstractAsyncContextManager[Any]]
"""Opens an actor system (``open_actor_system``, or a stand-in with ``spawn``)."""

FLOOD_BATCHES = 4
"""S6's flood is seeded with this many batches, so its mailbox never runs short."""
PROBE_WARMUP_STEPS = 100


class Counter(Actor):
    """S1: adds each message to a count; ``None`` asks for the count.

    A tell returns ``None``, as a counting handler does: a handler that returns a
    value costs the runtime a test of that value per message (is it a coroutine?),
    which is not the hot-tell shape.
    """

    def __init__(self) -> None:
        self.count = 0

    def receive(self, message: int | None) -> int | None:
        if message is None:
            return self.count
        self.count += message
        return None


class Echo(Actor):
    """S2: replies with the message."""

    def receive(self, message: Any) -> Any:
        return message


class Flood(Actor):
    """S6: re-tells itself every message while ``flooding``; counts what it handled."""

    def __init__(self) -> None:
        self.me: Any = None  # its own ref (anything with ``tell``), set after spawn
        self.flooding = True
        self.handled = 0

    def receive(self, message: int) -> None:
        self.handled += 1
        if self.flooding:
            self.me.tell(message)


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-quantile (0 < q <= 1) of ``values`` by nearest rank.

    The smallest value with at least ``q`` of all values at or below it:
    ``percentile(v, 1.0)`` is the maximum.
    """
    if not values:
        raise ValueError("no values")
    ordered = sorted(values)
    return ordered[max(0, math.ceil(q * len(ordered)) - 1)]


def window_delays(steps: Sequence[float], start: float, end: float) -> list[float]:
    """A probe's delays inside ``[start, end]``.

    ``steps`` are the probe's step times in order; the delays run from ``start`` to
    the first step after it, between consecutive steps, and from the last step at or
    before ``end`` to ``end`` (a delay still in progress: a lower bound).
    """
    points = [start, *(t for t in steps if start < t <= end), end]
    return [b - a for a, b in itertools.pairwise(points)]


async def probe_delays(steps: int) -> list[float]:
    """Step ``steps`` times with ``trio.sleep(0)``; the delay of each step."""
    now = time.perf_counter
    sleep = trio.sleep
    times = [0.0] * (steps + 1)
    times[0] = now()
    for i in range(1, steps + 1):
        await sleep(0)
        times[i] = now()
    return [b - a for a, b in itertools.pairwise(times)]


class Probe:
    """A probe task: steps with ``trio.sleep(0)`` and records each step's time."""

    def __init__(self) -> None:
        self.steps: list[float] = []
        self.running = True

    async def run(self) -> None:
        now = time.perf_counter
        record = self.steps.append
        sleep = trio.sleep
        while self.running:
            await sleep(0)
            record(now())

    def p99_between(self, start: float, end: float) -> float:
        """The p99 of the delays inside ``[start, end]``; forgets the steps so far."""
        delays = window_delays(self.steps, start, end)
        self.steps.clear()
        return percentile(delays, 0.99)


# --- S1 and S2 ----------------------------------------------------------------------


def s1(open_system: OpenSystem, loops: int, size: int) -> float:
    """S1 on any system: ``size`` tells then one ask, ``loops`` times."""

    async def main() -> float:
        async with open_system() as system:
            ref = system.spawn(Counter)
            await ref.ask(None)  # the actor has started and been served once
            start = time.perf_counter()
            for _ in range(loops):
                for _ in range(size):
                    ref.tell(1)
                count = await ref.ask(None)
            elapsed = time.perf_counter() - start
            if count != loops * size:
                raise AssertionError(f"S1 counted {count}, not {loops * size}")
            return elapsed

    return trio.run(main)


def s2(open_system: OpenSystem, loops: int, size: int) -> float:
    """S2 on any system: ``size`` asks to an echo actor, one at a time."""

    async def main() -> float:
        async with open_system() as system:
            ref = system.spawn(Echo)
            await ref.ask(0)
            start = time.perf_counter()
            for _ in range(loops):
                for i in range(size):
                    await ref.ask(i)
            return time.perf_counter() - start

    return trio.run(main)


def workload_tells(
    policy: ServingPolicy, make: Callable[[int], tuple[Actor, list[Any]]], loops: int, size: int
) -> float:
    """S1 with a user's workload: ``size`` of its messages told, until all are handled.

    ``make(size)`` returns a new actor and its messages (taken before the clock
    starts); the clock stops when ``stop(drain=True)`` returns.
    """

    async def main() -> float:
        elapsed = 0.0
        async with open_actor_system(serving=policy) as system:
            for _ in range(loops):
                actor, messages = make(size)
                ref = system.spawn(lambda: actor)  # noqa: B023 - called at once
                tell = ref.tell
                start = time.perf_counter()
                for message in messages:
                    tell(message)
                await ref.stop(drain=True)
                elapsed += time.perf_counter() - start
        return elapsed

    return trio.run(main)


def opener(policy: ServingPolicy) -> OpenSystem:
    """An :data:`OpenSystem` for trio-actors under ``policy``."""
    return lambda: open_actor_system(serving=policy)


# --- S6 -----------------------------------------------------------------------------


def s6_probe(policy: ServingPolicy, loops: int, size: int) -> float:
    """S6: ``loops`` sessions of ``size`` probe steps; the sum of p99 x ``size``."""

    async def main() -> float:
        total = 0.0
        async with open_actor_system(serving=policy) as system:
            for _ in range(loops):
                flood = Flood()
                ref = system.spawn(lambda: flood)  # noqa: B023 - called at once
                flood.me = ref
                for _ in range(FLOOD_BATCHES * policy.batch):
                    ref.tell(1)
                for _ in range(PROBE_WARMUP_STEPS):
                    await trio.lowlevel.checkpoint()
                handled = flood.handled
                delays = await probe_delays(size)
                handled = flood.handled - handled
                flood.flooding = False
                await ref.stop()
                if handled <= size:
                    raise AssertionError(
                        f"S6: the flood handled {handled} messages in {size} probe steps"
                    )
                total += percentile(delays, 0.99) * size
        return total

    return trio.run(main)


# --- S7 -----------------------------------------------------------------------------


async def _strand(system: ActorSystem, size: int) -> tuple[ActorRef, int]:
    """A started actor holding ``size`` unhandled tells; the stranded count so far.

    The tells are made after the last checkpoint here, and the caller stops the
    actor before its own next checkpoint, so none of them can be handled.
    """
    ref = system.spawn(Counter)
    await ref.ask(None)
    stranded = system.dead_letters.by_reason["stranded"]
    tell = ref.tell
    for _ in range(size):
        tell(1)
    return ref, stranded


def _check_stranded(system: ActorSystem, before: int, size: int) -> None:
    stranded = system.dead_letters.by_reason["stranded"] - before
    if stranded != size:
        raise AssertionError(f"S7: {stranded} stranded dead letters, not {size}")


def s7_cleanup(policy: ServingPolicy, loops: int, size: int) -> float:
    """S7: time ``stop()`` of an actor holding ``size`` tells, ``loops`` times."""

    async def main() -> float:
        elapsed = 0.0
        async with open_actor_system(serving=policy) as system:
            for _ in range(loops):
                ref, before = await _strand(system, size)
                start = time.perf_counter()
                await ref.stop()
                elapsed += time.perf_counter() - start
                _check_stranded(system, before, size)
        return elapsed

    return trio.run(main)


def s7_probe_samples(size: int, policy: ServingPolicy) -> int:
    """About how many probe delays one S7 session samples: one per cleanup group."""
    return max(1, size // policy.cleanup_batch)


def s7_probe(policy: ServingPolicy, loops: int, size: int) -> float:
    """S7's probe: the sum over sessions of p99 x :func:`s7_probe_samples`."""
    samples = s7_probe_samples(size, policy)

    async def main() -> float:
        total = 0.0
        probe = Probe()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(probe.run)
            async with open_actor_system(serving=policy) as system:
                for _ in range(loops):
                    ref, before = await _strand(system, size)
                    start = time.perf_counter()
                    await ref.stop()
                    end = time.perf_counter()
                    _check_stranded(system, before, size)
                    total += probe.p99_between(start, end) * samples
            probe.running = False
        return total

    return trio.run(main)


__all__ = [
    "FLOOD_BATCHES",
    "PROBE_WARMUP_STEPS",
    "Counter",
    "Echo",
    "Flood",
    "OpenSystem",
    "Probe",
    "opener",
    "percentile",
    "probe_delays",
    "s1",
    "s2",
    "s6_probe",
    "s7_cleanup",
    "s7_probe",
    "s7_probe_samples",
    "window_delays",
    "workload_tells",
]

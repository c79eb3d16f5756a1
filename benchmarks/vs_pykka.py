"""The shape S9 of ``performance.md``: S1 and S2 against pykka, in the same run.

pykka (4.x) is the established actor library for Python; its actors are threads.
S9 measures pykka on exactly the work of S1 and S2, with the same sizes, and
:mod:`benchmarks.run` registers them right after trio-actors' S1 and S2 (the
``S9`` group also registers ``S1`` and ``S2`` itself when they were not selected),
so that :mod:`benchmarks.compare` can take ratios within one run:

``S9-pykka-tell`` (:func:`pykka_tell`)
    One :class:`PykkaCounter` (a ``pykka.ThreadingActor`` with the same counting
    handler as :class:`benchmarks.shapes.Counter`); ``size`` (1,000,000) tells of
    ``1``, then one ask for the count, which returns once every tell is handled --
    S1's timed region. Seconds per message. Target: trio-actors' S1 rate >= 20 x
    this rate.
``S9-pykka-ask`` (:func:`pykka_ask`)
    One :class:`PykkaEcho`; ``size`` (20,000) asks, one at a time, each waiting for
    its reply (``ref.ask(i)``, blocking) -- S2's timed region. Seconds per round
    trip. Target: trio-actors' S2 round trip <= 1/8 of this one.

``S9-pykka-ask-trio`` (:func:`pykka_ask_from_trio`), reported, not a target
    The same asks made the way a trio application has to make them: from a trio
    task, each blocking ``ref.ask(i)`` in a worker thread
    (``await trio.to_thread.run_sync(ref.ask, i)``), so that the event loop keeps
    running while it waits. On the 2-core machine this is ~210 µs per round trip,
    close to the ~170 µs of performance.md's table, where the thread-to-thread ask
    above is ~35-40 µs: the table's figure looks like this path. The target stays
    judged against ``S9-pykka-ask`` (pykka's own best); this row shows what a trio
    application would pay for pykka instead.
``S9-checkpoint`` (:func:`checkpoint_floor`)
    ``size`` bare ``await trio.lowlevel.checkpoint()`` calls: the least an ask can
    cost in trio, since an ask is a checkpoint (T4) and a checkpoint is a pass of
    trio's scheduler. If this alone is above 1/8 of pykka's round trip (it was on
    the 2-core machine, where pykka's ask took ~40 µs, not the ~170 µs of
    performance.md's table), the ask target is out of reach of any trio runtime;
    :mod:`benchmarks.compare` reports it against pykka's ask.

Each time function starts its actor and asks it once before the clock starts (the
thread is running and has served a message), and stops every pykka actor with
``pykka.ActorRegistry.stop_all()`` when it is done, also on failure. At ~6 µs per
tell on the 2-core machine, ``S9-pykka-tell`` is the slowest benchmark of the suite
at full size (about 6 s per value).

``S9-pykka-ask-trio`` uses a quarter of S2's asks (each is ~5x a plain pykka ask).
"""

from __future__ import annotations

import time
from typing import Any

import pykka
import trio

from .shapes import S1_TELLS, S2_ASKS

S9_TRIO_ASKS = S2_ASKS // 4
"""Asks of ``S9-pykka-ask-trio`` (a quarter of S2's: each is ~5x a plain pykka ask)."""


class PykkaCounter(pykka.ThreadingActor):
    """S9's tell: adds each message to a count; ``None`` asks for the count."""

    def __init__(self) -> None:
        super().__init__()
        self.count = 0

    def on_receive(self, message: Any) -> Any:
        if message is None:
            return self.count
        self.count += message
        return None


class PykkaEcho(pykka.ThreadingActor):
    """S9's ask: replies with the message."""

    def on_receive(self, message: Any) -> Any:
        return message


def pykka_tell(loops: int, size: int) -> float:
    """S1 on pykka: ``size`` tells then one ask, ``loops`` times."""
    try:
        ref = PykkaCounter.start()
        ref.ask(None)
        tell = ref.tell
        start = time.perf_counter()
        for _ in range(loops):
            for _ in range(size):
                tell(1)
            count = ref.ask(None)
        elapsed = time.perf_counter() - start
    finally:
        pykka.ActorRegistry.stop_all()
    if count != loops * size:
        raise AssertionError(f"S9 (pykka) counted {count}, not {loops * size}")
    return elapsed


def pykka_ask(loops: int, size: int) -> float:
    """S2 on pykka: ``size`` asks to an echo actor, one at a time, ``loops`` times."""
    try:
        ref = PykkaEcho.start()
        ref.ask(0)
        ask = ref.ask
        start = time.perf_counter()
        for _ in range(loops):
            for i in range(size):
                ask(i)
        elapsed = time.perf_counter() - start
    finally:
        pykka.ActorRegistry.stop_all()
    return elapsed


def pykka_ask_from_trio(loops: int, size: int) -> float:
    """S2 on pykka from a trio task: each ask in a worker thread, ``loops`` times."""

    async def main() -> float:
        try:
            ref = PykkaEcho.start()
            ref.ask(0)
            ask = ref.ask
            run_sync = trio.to_thread.run_sync
            start = time.perf_counter()
            for _ in range(loops):
                for i in range(size):
                    if await run_sync(ask, i) != i:
                        raise AssertionError(f"S9 (pykka from trio): wrong reply to {i}")
            return time.perf_counter() - start
        finally:
            pykka.ActorRegistry.stop_all()

    return trio.run(main)


def checkpoint_floor(loops: int, size: int) -> float:
    """``size`` bare checkpoints in trio: the least an ask (a checkpoint) can cost."""

    async def main() -> float:
        checkpoint = trio.lowlevel.checkpoint
        start = time.perf_counter()
        for _ in range(loops):
            for _ in range(size):
                await checkpoint()
        return time.perf_counter() - start

    return trio.run(main)


__all__ = [
    "S1_TELLS",
    "S2_ASKS",
    "S9_TRIO_ASKS",
    "PykkaCounter",
    "PykkaEcho",
    "checkpoint_floor",
    "pykka_ask",
    "pykka_ask_from_trio",
    "pykka_tell",
]

"""Where S1's time goes: its tells and its serving timed apart, at two batch sizes,
against F1's, alternating in one process.

Usage::

    python -m benchmarks.s1_split [PAIRS] [--size N] [--batches 64,1024]

For each batch size, ``PAIRS`` pairs of runs (trio-actors, then F1's loop with the
same batch), each ``--size`` tells five times: the time per message of the tells
(the user's loop) and of the serving (from the ask that follows until it is
answered: every tell handled), medians. The serving with batches of 64 against
1,024 separates what a round costs (its yield, a full scheduler pass, and its
bookkeeping) from what a message costs. In one process on purpose: the runs of a
pair are seconds apart, so the machine's load changes little between them.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import trio

import trio_actors as ta

from . import shapes

REPEATS = 5


async def timed(
    size: int, tell: Callable[[Any], None], drain: Callable[[], Awaitable[Any]]
) -> tuple[float, float]:
    """Seconds per message of ``size`` calls of ``tell`` (a bound method, as the
    user's loop would call it) and of ``drain``, which returns once every message is
    handled; ``REPEATS`` times."""
    telling = serving = 0.0
    for _ in range(REPEATS):
        start = time.perf_counter()
        for _ in range(size):
            tell(1)
        told = time.perf_counter()
        await drain()
        telling += told - start
        serving += time.perf_counter() - told
    return telling / (REPEATS * size), serving / (REPEATS * size)


def runtime(size: int, batch: int) -> tuple[float, float]:
    """Seconds per message of trio-actors' tells and of their serving."""

    async def main() -> tuple[float, float]:
        policy = ta.ServingPolicy(batch=batch)
        async with ta.open_actor_system(serving=policy) as system:
            ref = system.spawn(shapes.Counter)
            await ref.ask(None)
            return await timed(size, ref.tell, lambda: ref.ask(None))

    return trio.run(main)


def floor(size: int, batch: int) -> tuple[float, float]:
    """The same for F1's loop (``benchmarks.shapes.f1_floor``) with ``batch``."""

    async def main() -> tuple[float, float]:
        mailbox = shapes.FloorMailbox()
        queue = mailbox.queue
        popleft = queue.popleft
        receive = shapes.Counter().receive
        checkpoint = trio.lowlevel.checkpoint

        async def drain() -> None:
            while queue:
                for _ in range(min(batch, len(queue))):
                    receive(popleft())
                await checkpoint()

        return await timed(size, mailbox.tell, drain)

    return trio.run(main)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pairs", type=int, nargs="?", default=5, help="pairs per batch size")
    parser.add_argument("--size", type=int, default=1_000_000, help="tells per run")
    parser.add_argument("--batches", default="64,1024", help="comma-separated batch sizes")
    args = parser.parse_args(argv)
    print(f"kernel: {'compiled' if ta.compiled else 'pure Python'}; ns per message, medians")
    for batch in (int(b) for b in args.batches.split(",")):
        pairs = [(runtime(args.size, batch), floor(args.size, batch)) for _ in range(args.pairs)]
        tells = statistics.median(r[0] for r, _ in pairs) * 1e9
        serving = statistics.median(r[1] for r, _ in pairs) * 1e9
        floor_tells = statistics.median(f[0] for _, f in pairs) * 1e9
        floor_serving = statistics.median(f[1] for _, f in pairs) * 1e9
        print(
            f"batch {batch}: tells {tells:.1f} (F1 {floor_tells:.1f}), "
            f"serving {serving:.1f} (F1 {floor_serving:.1f})"
        )


if __name__ == "__main__":
    main()

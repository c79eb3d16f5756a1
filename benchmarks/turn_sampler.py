"""What the turn sampler costs the trio thread: S1 and S3 with the sampler on (the
default) and off (``turn_sampling=None``), alternating in one process.

Usage::

    python -m benchmarks.turn_sampler [PAIRS] [--size N] [--interval SECONDS]

Prints, per shape, the on/off time ratio of each pair and their median (above 1: the
sampler costs that much). In one process on purpose: the two runs of a pair are
seconds apart, so the machine's load changes little between them.
"""

from __future__ import annotations

import argparse
import functools
import statistics
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager

import trio_actors as ta

from . import shapes


def sampled(interval: float | None = None) -> AbstractAsyncContextManager[ta.ActorSystem]:
    """The system as the benchmarks open it: the turn sampler on (at its default
    interval, or ``interval`` seconds)."""
    if interval is None:
        return ta.open_actor_system(serving=shapes.POLICY)
    return ta.open_actor_system(serving=shapes.POLICY, turn_sampling=interval)


def unsampled() -> AbstractAsyncContextManager[ta.ActorSystem]:
    """The same system without the turn sampler."""
    return ta.open_actor_system(serving=shapes.POLICY, turn_sampling=None)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pairs", type=int, nargs="?", default=15, help="pairs per shape")
    parser.add_argument("--size", type=int, default=300_000, help="messages per run")
    parser.add_argument(
        "--interval", type=float, default=None, help="seconds between samples (default 0.05)"
    )
    args = parser.parse_args(argv)
    on_system = functools.partial(sampled, args.interval)
    for name, shape in (("S1", shapes.s1), ("S3", shapes.s3)):
        ratios = []
        for _ in range(args.pairs):
            on = shape(on_system, 1, args.size)
            off = shape(unsampled, 1, args.size)
            ratios.append(on / off)
        print(
            f"{name}: on/off time per pair {[round(r, 3) for r in ratios]}, "
            f"median {statistics.median(ratios):.3f}"
        )


if __name__ == "__main__":
    main()

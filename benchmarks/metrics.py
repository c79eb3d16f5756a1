"""What metrics cost: S1-S4 with ``open_actor_system(metrics=...)`` on and off,
alternating in one process, and the walk a collection makes.

Usage (from the repository root, with ``opentelemetry-sdk`` installed)::

    python -m benchmarks.metrics [PAIRS] [--walk 1000,10000,50000]

Prints, per shape, the on/off time ratio of each pair and their median (above 1:
metrics cost that much), then the time of one snapshot (the walk of every live
actor and the series made from it) at each size: the median of 21. In one process
on purpose, as ``benchmarks.turn_sampler``: the two runs of a pair are seconds
apart. Metrics on: an in-memory reader that collects only at the end, so the
shapes measure what the serving paths pay, not the exporter.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager

import trio
import trio.testing
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

import trio_actors as ta
from trio_actors.observe._turns import MeteredRoundClock

from . import shapes

PROVIDER = MeterProvider(metric_readers=[InMemoryMetricReader()])


def metered() -> AbstractAsyncContextManager[ta.ActorSystem]:
    """The system as the benchmarks open it, with metrics on (the turn sampler off
    in both, so that only metrics differ)."""
    return ta.open_actor_system(serving=shapes.POLICY, turn_sampling=None, metrics=PROVIDER)


def plain() -> AbstractAsyncContextManager[ta.ActorSystem]:
    """The same system without metrics."""
    return ta.open_actor_system(serving=shapes.POLICY, turn_sampling=None)


class _Idle(ta.Actor):
    def receive(self, message: object) -> object:
        return message


class _Other(ta.Actor):
    def receive(self, message: object) -> object:
        return message


async def _walk(actors: int) -> tuple[float, float]:
    """The median time of one snapshot of ``actors`` live actors of two classes,
    and of one whole collection (every instrument) in the trio thread."""
    reader = InMemoryMetricReader()
    async with ta.open_actor_system(metrics=MeterProvider(metric_readers=[reader])) as system:
        for number in range(actors):
            system.spawn(_Idle if number % 2 else _Other)
        await trio.testing.wait_all_tasks_blocked()
        clock = system._dispatcher.clock
        assert isinstance(clock, MeteredRoundClock)
        takes = []
        for collection in range(21):
            start = time.perf_counter()
            clock.source.take(collection)
            takes.append(time.perf_counter() - start)
        collections = []
        for _ in range(5):
            start = time.perf_counter()
            reader.get_metrics_data()
            collections.append(time.perf_counter() - start)
    return statistics.median(takes), statistics.median(collections)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pairs", type=int, nargs="?", default=7, help="pairs per shape")
    parser.add_argument(
        "--walk", default="1000,10000,50000", help="actor counts to time a snapshot at"
    )
    args = parser.parse_args(argv)
    for name, shape, size in (
        ("S1", shapes.s1, 300_000),
        ("S2", shapes.s2, 30_000),
        ("S3", shapes.s3, 300_000),
        ("S4", shapes.s4, 10_000),
    ):
        ratios = []
        for _ in range(args.pairs):
            on = shape(metered, 1, size)
            off = shape(plain, 1, size)
            ratios.append(on / off)
        print(
            f"{name}: on/off time per pair {[round(r, 3) for r in ratios]}, "
            f"median {statistics.median(ratios):.3f}",
            flush=True,
        )
    for actors in (int(n) for n in args.walk.split(",") if n):
        take, collection = trio.run(_walk, actors)
        print(
            f"{actors} actors: a snapshot {take * 1e3:.2f} ms ({take / actors * 1e9:.0f} ns an "
            f"actor), a whole collection {collection * 1e3:.2f} ms",
            flush=True,
        )


if __name__ == "__main__":
    main()

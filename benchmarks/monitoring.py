"""What the statistics service costs (``docs/performance.rst``, "The statistics
service"). Not a pyperf benchmark: medians of plain ``perf_counter`` timings.

Usage::

    python -m benchmarks.monitoring [--actors 1000,10000] [--runs 15] [--trips 15]

1. **The walks**, in one process, on a system of ``N`` idle actors that have each
   handled a message: the summary's walk (``handled_total``: the node-wide total,
   one addition per actor) and the busiest actors' (``Census.busiest``, sorted by
   rate, 20 chosen: a key per actor, a partial sort, 20 snapshots), each timed
   ``--runs`` times; the median per walk and per actor.
2. **A round trip from top** to a node of the largest ``N`` actors over a real
   ``nats-server`` on this machine (started here): ``top``'s poller
   (``top/_poll.py``) asks ``$SRV.STATS`` of the node, and the node's endpoint for
   its 20 busiest actors, ``--trips`` times each, 0.15 s apart (past the node's
   0.1 s rate limit, so that every answer is computed afresh; the node and the
   monitor share this process, and so its one core -- as on a loaded machine).
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import trio
import trio.testing

import trio_actors as ta
from trio_actors.actors._census import Census, handled_total
from trio_actors.nats import local_server
from trio_actors.top._poll import Poller


class Idle(ta.Actor):
    def receive(self, message: Any) -> None:
        pass


async def _spawned(system: ta.ActorSystem, count: int) -> None:
    refs = [system.spawn(Idle) for _ in range(count)]
    for ref in refs:
        ref.tell(1)
    await trio.testing.wait_all_tasks_blocked()  # (every message handled)
    assert handled_total(system) == count


def _median_us(timings: list[float]) -> float:
    return statistics.median(timings) * 1e6


async def walks(count: int, runs: int) -> tuple[float, float]:
    """Median microseconds of the summary walk and of the busiest-actors walk."""
    async with ta.open_actor_system() as system:
        await _spawned(system, count)
        summary, busiest = [], []
        census = Census()
        for _ in range(runs):
            began = time.perf_counter()
            handled_total(system)
            summary.append(time.perf_counter() - began)
            began = time.perf_counter()
            census.busiest(system, "rate", 20, trio.current_time())
            busiest.append(time.perf_counter() - began)
            await trio.lowlevel.checkpoint()
        return _median_us(summary), _median_us(busiest)


async def round_trips(count: int, trips: int, directory: Path) -> tuple[float, float]:
    """Median milliseconds of ``$SRV.STATS`` and of the busiest actors, asked by
    top's poller of a node of ``count`` actors."""
    with local_server(directory) as server:
        cluster = ta.Cluster(server.url, name="bench")
        async with (
            ta.open_actor_system(cluster=cluster, node="n") as system,
            ta.nats.connect(server.url) as client,
        ):
            await _spawned(system, count)
            poller = Poller(client, "bench", "bench-monitor")
            await client.flush()
            stats, actors = [], []
            for _ in range(trips):
                await trio.sleep(0.15)
                began = time.perf_counter()
                [summary] = await poller.summaries(5.0, {"n"})
                stats.append(time.perf_counter() - began)
                assert summary.live_actors == count
                await trio.sleep(0.15)
                began = time.perf_counter()
                answer = await poller.actors("n", "rate", 20, 5.0)
                actors.append(time.perf_counter() - began)
                assert isinstance(answer, ta._monitoring.ActorsAnswer), answer
        return _median_us(stats) / 1e3, _median_us(actors) / 1e3


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--actors", default="1000,10000", help="actor counts (1000,10000)")
    parser.add_argument("--runs", type=int, default=15, help="timings of each walk (15)")
    parser.add_argument("--trips", type=int, default=15, help="round trips of each kind (15)")
    args = parser.parse_args(argv)
    counts = [int(part) for part in args.actors.split(",")]
    print("actors   summary walk        busiest-actors walk")
    for count in counts:
        summary, busiest = trio.run(walks, count, args.runs)
        print(
            f"{count:>6}   {summary:8.0f} us ({summary * 1e3 / count:5.0f} ns/actor)"
            f"   {busiest:8.0f} us ({busiest * 1e3 / count:5.0f} ns/actor)"
        )
    import tempfile

    with tempfile.TemporaryDirectory() as directory:
        stats, actors = trio.run(round_trips, counts[-1], args.trips, Path(directory))
    print(
        f"round trip from top to a node of {counts[-1]} actors (median of {args.trips}): "
        f"$SRV.STATS {stats:.2f} ms, busiest actors {actors:.2f} ms"
    )


if __name__ == "__main__":
    main()

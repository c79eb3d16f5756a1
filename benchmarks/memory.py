"""S5's memory target: bytes per idle actor (≤ 1 KiB RSS). Not a pyperf benchmark.

Usage::

    python -m benchmarks.memory [--actors N] [--alt] [--top K]

Run it in a fresh process (it is one). Inside a ``trio.run`` it opens an actor
system, spawns and stops a few actors first (so that one-time costs -- imports,
caches, the first allocations of each type -- are not charged to the actors),
then measures twice, each time around spawning ``N`` (50,000) idle actors of
:class:`benchmarks.shapes.Idle` and letting every task the spawns started run and
park:

1. **RSS** -- resident set size from ``/proc/self/statm`` before and after, with
   ``gc.collect()`` first each time; the difference divided by ``N``. This is the
   target's measure: what the process really pays, allocator overhead included.
2. **tracemalloc** -- bytes allocated by Python and still alive, before and
   after, divided by ``N``; with ``--top K``, the ``K`` source lines that
   allocated most of it (where the bytes of one actor go).

The two rounds use separate systems; tracemalloc runs second because its own
bookkeeping inflates RSS. ``--alt`` measures the task-per-actor prototype of
:mod:`benchmarks.alternatives` instead.
"""

from __future__ import annotations

import argparse
import gc
import os
import tracemalloc
from collections.abc import Sequence

import trio
import trio.testing

from .alternatives import open_task_system
from .shapes import S5_ACTORS, Idle, OpenSystem, open_runtime

_PAGE = os.sysconf("SC_PAGE_SIZE")


def rss_bytes() -> int:
    """The resident set size of this process, in bytes (Linux)."""
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * _PAGE


def _reading(traced: bool) -> int:
    if traced:
        return tracemalloc.get_traced_memory()[0]
    return rss_bytes()


async def _bytes_per_actor(
    open_system: OpenSystem, actors: int, *, traced: bool, top: int = 0
) -> float:
    """Spawn ``actors`` idle actors in a fresh system; the bytes each one holds."""
    async with open_system() as system:
        gc.collect()
        before = _reading(traced)
        snapshot = tracemalloc.take_snapshot() if top else None
        for _ in range(actors):
            system.spawn(Idle)
        await trio.testing.wait_all_tasks_blocked()
        gc.collect()
        grown = _reading(traced) - before
        if snapshot is not None:
            print(f"top {top} allocating lines, per actor:")
            stats = tracemalloc.take_snapshot().compare_to(snapshot, "lineno")
            for stat in stats[:top]:
                frame = stat.traceback[0]
                print(
                    f"  {stat.size_diff / actors:8.1f} bytes "
                    f"{stat.count_diff / actors:5.2f} blocks  "
                    f"{frame.filename}:{frame.lineno}"
                )
    return grown / actors


async def _main(open_system: OpenSystem, actors: int, top: int) -> None:
    await _bytes_per_actor(open_system, 1000, traced=False)  # warm-up
    rss = await _bytes_per_actor(open_system, actors, traced=False)
    print(f"RSS per actor:      {rss:8.1f} bytes   (target <= 1024)")
    tracemalloc.start()
    traced = await _bytes_per_actor(open_system, actors, traced=True)
    print(f"traced per actor:   {traced:8.1f} bytes   (tracemalloc)")
    if top:
        await _bytes_per_actor(open_system, actors, traced=True, top=top)
    tracemalloc.stop()


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--actors", type=int, default=S5_ACTORS)
    parser.add_argument("--alt", action="store_true", help="measure the task-per-actor prototype")
    parser.add_argument("--top", type=int, default=0, help="show the K lines allocating the most")
    args = parser.parse_args(argv)
    open_system = open_task_system if args.alt else open_runtime
    name = "task-per-actor prototype" if args.alt else "trio-actors"
    print(f"system:             {name}, {args.actors} idle actors")
    trio.run(_main, open_system, args.actors, args.top)


if __name__ == "__main__":
    main()

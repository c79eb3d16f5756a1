"""What another thread waiting for the GIL costs a trio thread that yields often.

Usage::

    python -m benchmarks.gil_waiter [PAIRS] [--size N] [--interval SECONDS]

trio's scheduler releases the GIL at every pass (``epoll_wait``, even with a zero
timeout) and takes it back a microsecond later. CPython 3.11's ``take_gil`` lets a
waiting thread ask the holder to drop the GIL only when its timed wait (the switch
interval, 5 ms) runs out with no switch in between -- but every release signals
the waiter, so its wait never runs out, and the releasing thread, already running,
mostly wins the race for the GIL. A thread that wakes (a timer, a
``Condition.wait(timeout)``, the turn sampler) while the trio thread passes through
its scheduler more often than every 5 ms may therefore wait until it stops doing
so, and meanwhile each pass pays for waking it. Two measurements, each in one
process:

1. **Passes while a thread waits**: F1's loop over ``--size`` messages (64 handler
   calls and a ``trio.lowlevel.checkpoint()`` per pass); a second thread's
   ``Event.wait(0.01)`` ends during it. ``PAIRS`` times: how long the thread then
   waited for the GIL (the loop's length at most: then it starved), and how much
   longer a pass took meanwhile than before (median). (Between bare checkpoints,
   with no work, the GIL is free a quarter of the time: a waiter soon gets it.)
2. **F1 beside a waking thread**: F1 (``benchmarks.shapes.f1_floor``, one
   checkpoint per 64 messages) alone, and beside a thread that wakes every
   ``--interval`` seconds and does nothing else, alternating, ``PAIRS`` pairs: the
   median time ratio (above 1: what the waking thread costs).
"""

from __future__ import annotations

import argparse
import statistics
import threading
import time
from collections import deque
from collections.abc import Sequence

import trio

from . import shapes


def passes_while_a_thread_waits(messages: int) -> tuple[float, float, float, float]:
    """F1's loop over ``messages`` (64 handler calls per scheduler pass), while a
    second thread's ``Event.wait(0.01)`` ends: the median time of a pass before and
    after that moment, when the thread got the GIL and when the loop ended (seconds
    from the first pass)."""
    woke: list[float] = []
    waiter = threading.Event()

    def wait_once() -> None:
        waiter.wait(0.01)
        woke.append(time.perf_counter())

    async def main() -> tuple[list[float], list[float], float]:
        queue = deque([1] * messages)
        popleft = queue.popleft
        receive = shapes.Counter().receive
        checkpoint = trio.lowlevel.checkpoint
        now = time.perf_counter
        starts, lengths = [], []
        thread = threading.Thread(target=wait_once, daemon=True)
        thread.start()
        wait_ends = now() + 0.01
        while queue:
            before = now()
            for _ in range(min(shapes.BATCH, len(queue))):
                receive(popleft())
            await checkpoint()
            starts.append(before)
            lengths.append(now() - before)
        return starts, lengths, wait_ends

    starts, lengths, wait_ends = trio.run(main)
    end = starts[-1] + lengths[-1]
    while not woke:  # (it gets the GIL once the loop is over)
        time.sleep(0.001)
    before = [length for start, length in zip(starts, lengths, strict=True) if start < wait_ends]
    after = [
        length
        for start, length in zip(starts, lengths, strict=True)
        if wait_ends <= start < woke[0]
    ]
    first = starts[0]
    return (
        statistics.median(before) if before else float("nan"),
        statistics.median(after) if after else float("nan"),
        woke[0] - first,
        end - first,
    )


def f1_beside_a_waking_thread(size: int, interval: float) -> tuple[float, float]:
    """F1's time alone and beside a thread that wakes every ``interval`` seconds."""
    alone = shapes.f1_floor(1, size)
    stop = threading.Event()

    def wake_now_and_then() -> None:
        while not stop.wait(interval):
            pass

    thread = threading.Thread(target=wake_now_and_then, daemon=True)
    thread.start()
    try:
        beside = shapes.f1_floor(1, size)
    finally:
        stop.set()
        thread.join()
    return alone, beside


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("pairs", type=int, nargs="?", default=10, help="runs of each measurement")
    parser.add_argument("--size", type=int, default=1_000_000, help="messages per F1 run")
    parser.add_argument(
        "--interval", type=float, default=0.05, help="seconds between the thread's wakes"
    )
    args = parser.parse_args(argv)
    waits, slower = [], []
    for _ in range(args.pairs):
        before, after, woke, end = passes_while_a_thread_waits(args.size)
        waits.append(woke - 0.01)
        if after == after:  # (nan: it got the GIL within a pass)
            slower.append(after / before)
    print(
        f"F1's loop ({args.size:,} messages, ~{end * 1e3:.0f} ms): a thread woken 10 ms "
        f"in waited for the GIL {[round(w * 1e3, 1) for w in waits]} ms, median "
        f"{statistics.median(waits) * 1e3:.1f} ms; meanwhile a pass (64 messages and a "
        f"checkpoint) took {statistics.median(slower) if slower else float('nan'):.3f}x "
        "as long as before"
    )
    ratios = []
    for _ in range(args.pairs):
        alone, beside = f1_beside_a_waking_thread(args.size, args.interval)
        ratios.append(beside / alone)
    print(
        f"F1 beside a thread waking every {args.interval} s / alone, per pair "
        f"{[round(r, 3) for r in ratios]}, median {statistics.median(ratios):.3f}"
    )


if __name__ == "__main__":
    main()

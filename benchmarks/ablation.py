"""Where the time goes per message, path by path: instruction counts under callgrind.

Usage (needs ``valgrind`` on the PATH; takes a few minutes)::

    python -m benchmarks.ablation [--only NAME,...]

Wall-clock ratios on a shared 2-core VM move by tens of percent from one process to
the next; instruction counts do not. For each *path* this runs a small program
twice under ``valgrind --tool=callgrind`` at two sizes and divides the difference
in instructions by the difference in units (messages, round trips, spawns): what
one more unit costs, with start-up and setup cancelled out. Instructions are not
time -- cache misses are not in them (S4 misses the first-level cache ~4x as often
as its floor, which ``--cache`` shows) -- but they show which layer of a path
costs what, and they are repeatable to a few parts in a thousand.

The paths, each next to the floor it is measured against in performance.md:

``F0``, ``F1``, ``S1``, ``S1-noslice``
    the handler in a bare loop; F1 (tell, pop, call, a checkpoint per 64); S1
    (trio-actors' tell and serving loop); S1 with ``time_slice=None`` -- the
    difference is what reading the clock every k messages costs.
``S3``, ``S3-floor``, ``S4``, ``S4-floor``
    ping-pong and fan-out: a tell to an idle actor and its activation.
``S2``, ``S2-floor``, ``checkpoint``
    an ask answered in the asker's task; two tasks handing a value over with
    ``reschedule``; one bare ``trio.lowlevel.checkpoint()`` (the least an ask,
    which is a checkpoint, can cost).
``async-det``
    tells to an actor whose ``async`` handler awaits one checkpoint (two steps of
    its coroutine per message), served by its task; the turn sampler off, a 1,000 s
    slice and trio's scheduler seeded (see below).
``spawn``
    one idle actor spawned (garbage collection included: the collector's walks
    over the live actors are part of what a spawn costs).
``spawn-exit``
    one idle actor spawned, and stopped by the exit of its system's block (S5's
    exit): minus ``spawn``, what a stop costs.
``S1-det``, ``S3-det``, ``S4-det``, ``S2-det``
    S1, S3, S4 and S2 with counts that do not depend on the machine's load, for
    comparing commits (also a tree from before the turn sampler, which has no
    ``turn_sampling`` option): the turn sampler off (its thread samples by *wall* time, so under
    valgrind's ~50x slowdown it is counted ~50x too often: at a 10 ms interval, S1
    3,344 -> 3,724 instructions per message on a loaded machine) and a time slice of
    1,000 s (under valgrind a 16 ms slice ends S3's rounds every few dozen
    messages, and how many depends on the load; natively a round is tens of
    thousands of messages, so a slice that never ends a round is the faithful one;
    S4's rounds of 5,000 activations take ~2 ms natively, and under valgrind a
    16 ms slice cuts them too).

Each program runs with ``PYTHONHASHSEED=0`` and, where ``setarch`` is installed,
without address randomization: S4's count moved by ±40 instructions per
activation from one run to the next with both (dict layouts and id hashes follow
the addresses), and by less than 0.1 without.
"""

from __future__ import annotations

import argparse
import inspect
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Sequence
from typing import Any

import attrs


@attrs.frozen
class Path:
    """A program ``python -m benchmarks.ablation --run NAME N`` of ``N`` units."""

    name: str
    sizes: tuple[int, int]
    unit: str = "message"


PATHS = [
    Path("F0", (100_000, 300_000)),
    Path("F1", (100_000, 300_000)),
    Path("S1", (100_000, 300_000)),
    Path("S1-noslice", (100_000, 300_000)),
    Path("S3", (100_000, 300_000)),
    Path("S3-floor", (100_000, 300_000)),
    Path("S4", (10, 30)),  # rounds of 5,000 actors: units are rounds x 5,000
    Path("S4-floor", (10, 30)),
    Path("S2", (5_000, 15_000), "round trip"),
    Path("S2-floor", (5_000, 15_000), "round trip"),
    Path("checkpoint", (5_000, 15_000), "checkpoint"),
    Path("spawn", (5_000, 10_000), "spawn"),
    Path("spawn-exit", (5_000, 15_000), "actor"),
    Path("S1-det", (100_000, 300_000)),
    Path("S3-det", (100_000, 300_000)),
    Path("S4-det", (10, 30)),
    # (S2's own count includes the sampler's thread: ~40,700 to ~41,400 from one run
    # to the next on the same tree.)
    Path("S2-det", (5_000, 15_000), "round trip"),
    Path("async-det", (10_000, 30_000)),
]
S4_ACTORS = 5_000


def run_path(name: str, size: int) -> None:
    """Run path ``name`` at ``size`` units (inside callgrind)."""

    import trio

    import trio_actors as ta

    from . import shapes, vs_pykka

    if name in ("S1-det", "S3-det", "S4-det", "S2-det"):
        options: dict[str, Any] = {"serving": ta.ServingPolicy(time_slice=1000.0)}
        if "turn_sampling" in inspect.signature(ta.open_actor_system).parameters:
            options["turn_sampling"] = None

        def open_deterministic() -> Any:
            return ta.open_actor_system(**options)

        if name == "S4-det":
            shapes.S4_ROUNDS = size
            shapes.s4(open_deterministic, 1, S4_ACTORS)
        elif name == "S2-det":
            shapes.s2(open_deterministic, 1, size)
        else:
            (shapes.s1 if name == "S1-det" else shapes.s3)(open_deterministic, 1, size)
    elif name == "async-det":
        _async_steps(size)
    elif name == "S1-noslice":
        policy = ta.ServingPolicy(time_slice=None)
        shapes.s1(lambda: ta.open_actor_system(serving=policy), 1, size)
    elif name in ("S4", "S4-floor"):
        shapes.S4_ROUNDS = size
        (shapes.s4_runtime if name == "S4" else shapes.s4_floor)(1, S4_ACTORS)
    elif name == "spawn":

        async def main() -> None:
            async with ta.open_actor_system() as system:
                for _ in range(size):
                    system.spawn(shapes.Idle)
                os._exit(0)  # the spawns only, not the exit that stops them

        trio.run(main)
    elif name == "spawn-exit":

        async def spawn_and_exit() -> None:
            async with ta.open_actor_system() as system:
                for _ in range(size):
                    system.spawn(shapes.Idle)
            os._exit(0)  # the spawns and the exit that stops them, not the teardown

        trio.run(spawn_and_exit)
    else:
        function = {
            "F0": shapes.f0_bare,
            "F1": shapes.f1_floor,
            "S1": shapes.s1_runtime,
            "S3": shapes.s3_runtime,
            "S3-floor": shapes.s3_floor,
            "S2": shapes.s2_runtime,
            "S2-floor": shapes.s2_floor,
            "checkpoint": vs_pykka.checkpoint_floor,
        }[name]
        function(1, size)


def _async_steps(size: int) -> None:
    """``async-det``: ``size`` tells, in batches of 1,000 each followed by an ask
    (which waits for them)."""
    import trio

    import trio_actors as ta

    class Stepping(ta.Actor):
        async def receive(self, message: Any) -> Any:
            await trio.lowlevel.checkpoint()
            return message

    # trio's scheduler reverses each batch of runnable tasks at random (here the
    # asker's and the serving task's): seeded, the count is the same every run
    # (unseeded it moved by ~1,000 instructions per message from one run to the next).
    trio_random = getattr(trio._core._run, "_r", None)
    if trio_random is not None:
        trio_random.seed(0)

    policy = ta.ServingPolicy(time_slice=1000.0)  # (as the other det paths: module docstring)

    async def main() -> None:
        async with ta.open_actor_system(serving=policy, turn_sampling=None) as system:
            ref = system.spawn(Stepping)
            batch = min(size, 1_000)
            for _ in range(size // batch):
                for number in range(batch):
                    ref.tell(number)
                await ref.ask(0)

    trio.run(main)


def _measure(path: Path, size: int, cache: bool) -> dict[str, int]:
    tool = ["--tool=cachegrind", "--cache-sim=yes"] if cache else ["--tool=callgrind"]
    out_file = "--cachegrind-out-file=/dev/null" if cache else "--callgrind-out-file=/dev/null"
    fixed = ["setarch", "-R"] if shutil.which("setarch") else []
    command = [
        *fixed,
        "valgrind",
        *tool,
        out_file,
        sys.executable,
        "-m",
        "benchmarks.ablation",
        "--run",
        path.name,
        str(size),
    ]
    environ = {**os.environ, "PYTHONHASHSEED": "0"}
    done = subprocess.run(command, capture_output=True, text=True, check=True, env=environ)
    counts: dict[str, int] = {}
    for key, pattern in (
        ("instructions", r"(?:Collected :|I\s+refs:)\s*([\d,]+)"),
        ("D1 misses", r"D1\s+misses:\s*([\d,]+)"),
    ):
        match = re.search(pattern, done.stderr)
        if match:
            counts[key] = int(match.group(1).replace(",", ""))
    return counts


def _units(path: Path, size: int) -> int:
    return size * S4_ACTORS if path.name.startswith("S4") else size


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", help="comma-separated path names (default: all)")
    parser.add_argument("--cache", action="store_true", help="also count D1 cache misses")
    parser.add_argument(
        "--smoke", action="store_true", help="run every path once, tiny, without valgrind (CI)"
    )
    parser.add_argument("--run", nargs=2, metavar=("NAME", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.run:
        run_path(args.run[0], int(args.run[1]))
        return
    if args.smoke:
        for path in PATHS:
            if not path.name.startswith("spawn"):  # they end their process (os._exit)
                run_path(path.name, 2 if path.name.startswith("S4") else 100)
        print(f"ablation smoke: {len(PATHS) - 2} paths ran")
        return
    if shutil.which("valgrind") is None:
        parser.error("valgrind is not installed (apt install valgrind)")
    chosen = set(args.only.split(",")) if args.only else None
    print(f"{'path':<12} {'instructions per unit':>22} {'D1 misses per unit':>19}  unit")
    for path in PATHS:
        if chosen is not None and path.name not in chosen:
            continue
        small, large = (_measure(path, size, args.cache) for size in path.sizes)
        units = _units(path, path.sizes[1]) - _units(path, path.sizes[0])
        per = {key: (large[key] - small[key]) / units for key in large}
        misses = f"{per['D1 misses']:.1f}" if "D1 misses" in per else "-"
        print(
            f"{path.name:<12} {per['instructions']:>22,.0f} {misses:>19}  {path.unit}", flush=True
        )


if __name__ == "__main__":
    main()

"""Run :mod:`benchmarks.run` in rounds, so that shapes and floors interleave in time.

Usage::

    python -m benchmarks.rounds ROUNDS -o RESULT.json [run options ...]

pyperf runs all the worker processes of one benchmark before it starts the next,
so a shape and its floor are measured minutes apart -- long enough, on a shared
2-core machine, for the load of other processes to change (we saw every value of a
benchmark shift by ~1.7x from one phase to the next). This driver instead invokes
``python -m benchmarks.run -p 1 -l 1 --append RESULT.json [run options]``
``ROUNDS`` times: each round measures every selected benchmark in one worker
process, a shape right before its floor, and appends that run to the file. Run
*i* of a shape and run *i* of its floor then come from the same round, seconds
apart, and :mod:`benchmarks.compare` also reports the median of these paired
per-round ratios.

``-l 1`` (one loop per value, no calibration) is enough because every shape at its
default size takes tens of milliseconds or more per repetition; pass ``-l N`` in the
run options to override it (the last one wins). ``RESULT.json`` must not exist yet.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from collections.abc import Sequence


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("rounds", type=int, help="how many rounds")
    parser.add_argument("-o", "--output", required=True, help="pyperf JSON to create")
    args, run_options = parser.parse_known_args(argv)
    if os.path.exists(args.output):
        parser.error(f"{args.output} exists; rounds append to a new file only")
    command = [
        sys.executable,
        "-m",
        "benchmarks.run",
        "-p",
        "1",
        "-l",
        "1",
        "--append",
        args.output,
        *run_options,
    ]
    print("per round:", " ".join(command), flush=True)
    started = time.monotonic()
    for number in range(1, args.rounds + 1):
        print(f"round {number}/{args.rounds}", flush=True)
        subprocess.run(command, check=True)
    print(f"{args.rounds} rounds in {time.monotonic() - started:.0f} s", flush=True)


if __name__ == "__main__":
    main()

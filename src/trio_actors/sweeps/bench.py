"""The pyperf script that measures one candidate policy for the sweep.

Usage (the sweep driver runs it; it is runnable by hand too)::

    python -m trio_actors.sweeps.bench --batch 64 --cleanup-batch 32 --time-slice 0.016
        [--cleanup] [--scale F] [pyperf options: -p, -n, -w, -l, -o/--append, --quiet]

pyperf's ``Runner`` spawns its worker processes by re-running this module with the
same command line, so the candidate's policy travels as options of this script
(registered on ``runner.argparser`` and passed on to the workers by
``add_cmdline_args``) rather than living in the sweep driver's process.

It registers, with the values in seconds per unit (``inner_loops`` = units):

* ``tell`` -- S1: seconds per tell (the sweep reports its inverse, tells per second);
  with ``--workload MODULE:FACTORY``, the user's actor and messages instead
  (:mod:`trio_actors.sweeps._workload`);
* ``ask`` -- S2: seconds per ask round trip;
* ``probe`` -- S6: the p99 delay of a probe task next to an endless mailbox, seconds;
* with ``--cleanup``: ``cleanup`` (S7, seconds per stranded message) and
  ``cleanup-probe`` (S7's probe p99, seconds).

Sizes at ``--scale 1``: :data:`SIZES`. (Imports are absolute: pyperf's workers run
this file by its path, not as a module of the package.)
"""

from __future__ import annotations

import argparse
from functools import partial
from typing import Any

import pyperf  # type: ignore[import-untyped]

from trio_actors import ServingPolicy
from trio_actors.sweeps import _shapes
from trio_actors.sweeps._workload import load_workload, make_workload

SIZES = {"tell": 200_000, "ask": 5_000, "probe": 2_000, "cleanup": 200_000}
"""Units per value at ``--scale 1``: tells, asks, probe steps, stranded messages."""
MINIMUM = {"tell": 1_000, "ask": 100, "probe": 100, "cleanup": 1_000}


def _time_slice(text: str) -> float | None:
    return None if text.lower() == "none" else float(text)


def _add_cmdline_args(cmd: list[str], args: argparse.Namespace) -> None:
    cmd.extend(["--batch", str(args.batch), "--cleanup-batch", str(args.cleanup_batch)])
    cmd.extend(["--time-slice", "none" if args.time_slice is None else repr(args.time_slice)])
    cmd.extend(["--scale", repr(args.scale)])
    if args.cleanup:
        cmd.append("--cleanup")
    if args.workload:
        cmd.extend(["--workload", args.workload])


def _size(name: str, scale: float) -> int:
    return max(MINIMUM[name], round(SIZES[name] * scale))


def tell_count(scale: float) -> int:
    """How many messages one ``tell`` measurement takes at ``scale``."""
    return _size("tell", scale)


def main() -> None:
    runner = pyperf.Runner(add_cmdline_args=_add_cmdline_args)
    parser = runner.argparser
    parser.add_argument("--batch", type=int, required=True)
    parser.add_argument("--cleanup-batch", type=int, required=True)
    parser.add_argument("--time-slice", type=_time_slice, required=True)
    parser.add_argument("--scale", type=float, default=1.0)
    parser.add_argument("--cleanup", action="store_true", help="also measure S7")
    parser.add_argument("--workload", help="MODULE:FACTORY replacing S1's handler")
    args = runner.parse_args()
    policy = ServingPolicy(args.batch, args.cleanup_batch, args.time_slice)
    metadata: dict[str, Any] = {"policy": policy.describe()}

    def bench(name: str, function: Any, inner_loops: int, what: str) -> None:
        runner.bench_time_func(
            name, function, inner_loops=inner_loops, metadata={**metadata, "description": what}
        )

    tells = _size("tell", args.scale)
    if args.workload:
        factory = load_workload(args.workload)
        spec = args.workload

        def make(count: int) -> tuple[Any, list[Any]]:
            return make_workload(factory, spec, count)

        tell = partial(_shapes.workload_tells, policy, make, size=tells)
        bench("tell", tell, tells, f"seconds per tell of workload {spec} (S1)")
    else:
        bench("tell", partial(_tell, policy, size=tells), tells, "seconds per tell (S1)")
    asks = _size("ask", args.scale)
    bench("ask", partial(_ask, policy, size=asks), asks, "seconds per ask round trip (S2)")
    steps = _size("probe", args.scale)
    bench(
        "probe",
        partial(_shapes.s6_probe, policy, size=steps),
        steps,
        "p99 probe delay next to an endless mailbox, seconds (S6)",
    )
    if args.cleanup:
        stranded = _size("cleanup", args.scale)
        bench(
            "cleanup",
            partial(_shapes.s7_cleanup, policy, size=stranded),
            stranded,
            "seconds per stranded message (S7)",
        )
        bench(
            "cleanup-probe",
            partial(_shapes.s7_probe, policy, size=stranded),
            _shapes.s7_probe_samples(stranded, policy),
            "p99 probe delay during stranded cleanup, seconds (S7)",
        )


def _tell(policy: ServingPolicy, loops: int, size: int) -> float:
    return _shapes.s1(_shapes.opener(policy), loops, size)


def _ask(policy: ServingPolicy, loops: int, size: int) -> float:
    return _shapes.s2(_shapes.opener(policy), loops, size)


if __name__ == "__main__":
    main()

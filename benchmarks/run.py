"""Run the benchmark shapes with pyperf.

Usage::

    python -m benchmarks.run [pyperf options] [--shapes S1,S2,...] [--scale F]

Run it from the repository root (pyperf re-runs this module, with the same
arguments, in fresh worker processes). ``--shapes`` picks shape groups (default
``S1,...,S10``); each group registers its runtime benchmark followed by its floors,
so that a shape and its floor are measured one right after the other in the same
run. A group also registers the other benchmarks its targets are measured against
(S8: ``S4``; S9: ``S1`` and ``S2``), so that it can be run on its own. ``ALT-S1``
... ``ALT-S5`` measure the task-per-actor prototype of
:mod:`benchmarks.alternatives` (with the floors they are compared against); they
are not run by default. A benchmark selected by two groups is registered once.

The shapes live in :mod:`benchmarks.shapes` (S1-S5), :mod:`benchmarks.fairness`
(S6, S7), :mod:`benchmarks.heavy_tail` (S8), :mod:`benchmarks.vs_pykka` (S9) and
:mod:`benchmarks.balancing` (S10, a pool with a slow worker).

``--scale F`` multiplies every size (messages, actors, probe steps; not S4's 20
rounds), e.g. ``--scale 0.001`` for a CI smoke run; a few benchmarks have a
minimum size (:attr:`Bench.minimum`) so that their percentiles and anchors still
mean something. Each benchmark is registered with ``inner_loops`` equal to the
units of one repetition -- messages, round trips, spawns, stops, batches of 64 --
so every value is seconds per unit. The exceptions are the benchmarks with a
``statistic`` (``S6-probe-p99``, ``S7-probe-p99``, ``S8-small-*``): each value is
that statistic, in seconds (see :mod:`benchmarks.fairness` for how). Every
benchmark's ``description`` metadata says which. ``benchmarks.compare`` turns a
result file into ratios against the floors and targets.

Examples::

    python -m benchmarks.run --fast --scale 0.01 -o /tmp/bench_fast.json
    python -m benchmarks.run -p 5 -o benchmarks/results/core-YYYYMMDD.json
    python -m benchmarks.run -p 5 --shapes ALT-S1,ALT-S3,ALT-S4 -o alt.json
"""

from __future__ import annotations

import argparse
from collections.abc import Callable, Sequence

import attrs
import pyperf  # type: ignore[import-untyped]

from . import alternatives, balancing, fairness, heavy_tail, shapes, vs_pykka
from .shapes import TimeFunc


@attrs.frozen
class Bench:
    """One pyperf benchmark: ``func(loops, size)`` over ``inner_loops`` units."""

    name: str
    func: TimeFunc
    size: int
    rounds: int = 1  # repetitions of ``size`` units inside one loop (S4)
    unit: str = "message"
    minimum: int = 1  # the smallest size --scale may make it
    # inner_loops for a size; None: size * rounds
    inner: Callable[[int], int] | None = None
    # None: values are seconds per unit; else what each value is (in seconds)
    statistic: str | None = None

    def inner_loops(self, size: int) -> int:
        return self.inner(size) if self.inner is not None else size * self.rounds

    def description(self) -> str:
        if self.statistic is not None:
            return f"{self.statistic} (seconds)"
        return f"seconds per {self.unit}"


def _s1_floors() -> list[Bench]:
    return [
        Bench("F1", shapes.f1_floor, shapes.S1_TELLS),
        Bench("F0", shapes.f0_bare, shapes.S1_TELLS),
    ]


def _s2_floor() -> Bench:
    return Bench("S2-floor", shapes.s2_floor, shapes.S2_ASKS, unit="round trip")


def _s3_floor() -> Bench:
    return Bench("S3-floor", shapes.s3_floor, shapes.S3_MESSAGES)


def _s4_floor() -> Bench:
    return Bench("S4-floor", shapes.s4_floor, shapes.S4_ACTORS, shapes.S4_ROUNDS)


def _s1() -> Bench:
    return Bench("S1", shapes.s1_runtime, shapes.S1_TELLS)


def _s2() -> Bench:
    return Bench("S2", shapes.s2_runtime, shapes.S2_ASKS, unit="round trip")


def _s4() -> Bench:
    return Bench("S4", shapes.s4_runtime, shapes.S4_ACTORS, shapes.S4_ROUNDS)


def _s8_delay(name: str, func: TimeFunc, statistic: str) -> Bench:
    return Bench(
        name,
        func,
        heavy_tail.S8_ACTORS,
        unit="small-actor message",
        minimum=heavy_tail.S8_MIN_ACTORS,
        inner=heavy_tail.s8_small_messages,
        statistic=f"{statistic} queue delay of a small actor's message",
    )


GROUPS: dict[str, list[Bench]] = {
    "S1": [_s1(), *_s1_floors()],
    "S2": [_s2(), _s2_floor()],
    "S3": [Bench("S3", shapes.s3_runtime, shapes.S3_MESSAGES), _s3_floor()],
    "S4": [
        _s4(),
        _s4_floor(),
        Bench(
            "S4-floor-tuples",
            shapes.s4_floor_tuples,
            shapes.S4_ACTORS,
            shapes.S4_ROUNDS,
        ),
    ],
    "S5": [
        Bench("S5-spawn", shapes.s5_spawn_runtime, shapes.S5_ACTORS, unit="spawn"),
        Bench("S5-stop", shapes.s5_stop_runtime, shapes.S5_ACTORS, unit="stop"),
    ],
    "S6": [
        Bench(
            "S6-probe-p99",
            fairness.s6_probe_runtime,
            fairness.S6_PROBE_STEPS,
            unit="probe step",
            minimum=100,
            statistic="p99 probe delay next to an endless mailbox",
        ),
        Bench("S6-floor", fairness.s6_floor, fairness.S6_FLOOR_BATCHES, unit="batch of 64"),
        Bench(
            "F1-probe-p99",
            fairness.f1_probe_runtime,
            fairness.S6_PROBE_STEPS,
            unit="probe step",
            minimum=100,
            statistic="p99 probe delay next to F1's loop",
        ),
    ],
    "S7": [
        Bench("S7", fairness.s7_runtime, fairness.S7_TELLS, unit="stranded message"),
        Bench(
            "S7-probe-p99",
            fairness.s7_probe_runtime,
            fairness.S7_TELLS,
            unit="stranded message",
            minimum=100 * fairness.CLEANUP_BATCH,
            inner=fairness.s7_probe_samples,
            statistic="p99 probe delay during stranded cleanup",
        ),
        Bench(
            "F7-probe-p99",
            fairness.f7_probe_runtime,
            fairness.S7_TELLS,
            unit="stranded message",
            minimum=100 * fairness.CLEANUP_BATCH,
            inner=fairness.s7_probe_samples,
            statistic="p99 probe delay during a floor cleanup (32 per yield)",
        ),
    ],
    "S8": [
        Bench(
            "S8",
            heavy_tail.s8_runtime,
            heavy_tail.S8_ACTORS,
            minimum=heavy_tail.S8_MIN_ACTORS,
            inner=heavy_tail.s8_messages,
        ),
        _s8_delay("S8-small-p50", heavy_tail.s8_small_p50, "p50"),
        _s8_delay("S8-small-p99", heavy_tail.s8_small_p99, "p99"),
        _s8_delay("S8-small-max", heavy_tail.s8_small_max, "maximum"),
        _s4(),
    ],
    "S9": [
        _s1(),
        Bench("S9-pykka-tell", vs_pykka.pykka_tell, shapes.S1_TELLS),
        _s2(),
        Bench("S9-pykka-ask", vs_pykka.pykka_ask, shapes.S2_ASKS, unit="round trip"),
        Bench("S9-checkpoint", vs_pykka.checkpoint_floor, shapes.S2_ASKS, unit="checkpoint"),
        Bench(
            "S9-pykka-ask-trio",
            vs_pykka.pykka_ask_from_trio,
            vs_pykka.S9_TRIO_ASKS,
            unit="round trip",
        ),
    ],
    "S10": [
        Bench("S10-balancing-equal", balancing.s10_balancing_equal, balancing.S10_MESSAGES),
        Bench("S10-balancing-slow", balancing.s10_balancing_slow, balancing.S10_MESSAGES),
        Bench("S10-round-robin-slow", balancing.s10_round_robin_slow, balancing.S10_MESSAGES),
    ],
    "ALT-S1": [Bench("ALT-S1", alternatives.alt_s1, shapes.S1_TELLS), *_s1_floors()],
    "ALT-S2": [
        Bench("ALT-S2", alternatives.alt_s2, shapes.S2_ASKS, unit="round trip"),
        _s2_floor(),
    ],
    "ALT-S3": [Bench("ALT-S3", alternatives.alt_s3, shapes.S3_MESSAGES), _s3_floor()],
    "ALT-S4": [
        Bench("ALT-S4", alternatives.alt_s4, shapes.S4_ACTORS, shapes.S4_ROUNDS),
        _s4_floor(),
    ],
    "ALT-S5": [
        Bench("ALT-S5-spawn", alternatives.alt_s5_spawn, shapes.S5_ACTORS, unit="spawn"),
        Bench("ALT-S5-stop", alternatives.alt_s5_stop, shapes.S5_ACTORS, unit="stop"),
    ],
}
DEFAULT_SHAPES = "S1,S2,S3,S4,S5,S6,S7,S8,S9,S10"


def _shape_list(text: str) -> list[str]:
    names = [name.strip().upper() for name in text.split(",") if name.strip()]
    unknown = [name for name in names if name not in GROUPS]
    if unknown or not names:
        raise argparse.ArgumentTypeError(
            f"unknown shape(s) {', '.join(unknown) or '(none given)'}; "
            f"choose from {', '.join(GROUPS)}"
        )
    return names


def _scale(text: str) -> float:
    value = float(text)
    if not value > 0:
        raise argparse.ArgumentTypeError(f"--scale must be > 0, got {text}")
    return value


def _add_cmdline_args(cmd: list[str], args: argparse.Namespace) -> None:
    # pyperf calls this to build each worker's command line.
    cmd.extend(("--shapes", ",".join(args.shapes), "--scale", repr(args.scale)))


def selected(groups: Sequence[str]) -> list[Bench]:
    """The benchmarks of ``groups`` in order, each floor only once."""
    seen: set[str] = set()
    benches: list[Bench] = []
    for group in groups:
        for bench in GROUPS[group]:
            if bench.name not in seen:
                seen.add(bench.name)
                benches.append(bench)
    return benches


def main() -> None:
    runner = pyperf.Runner(
        add_cmdline_args=_add_cmdline_args, program_args=("-m", "benchmarks.run")
    )
    runner.argparser.add_argument(
        "--shapes",
        type=_shape_list,
        default=_shape_list(DEFAULT_SHAPES),
        help=f"comma-separated shape groups (default {DEFAULT_SHAPES}); known: {', '.join(GROUPS)}",
    )
    runner.argparser.add_argument(
        "--scale",
        type=_scale,
        default=1.0,
        help="multiply every size by this (e.g. 0.001 for a smoke run)",
    )
    args = runner.parse_args()
    for bench in selected(args.shapes):
        size = max(bench.minimum, round(bench.size * args.scale))
        metadata: dict[str, str | int] = {
            "description": bench.description(),
            "shape_size": size,
            "shape_rounds": bench.rounds,
            "shape_unit": bench.unit,
        }
        if bench.statistic is not None:
            metadata["shape_statistic"] = bench.statistic
        runner.bench_time_func(
            bench.name,
            bench.func,
            size,
            inner_loops=bench.inner_loops(size),
            metadata=metadata,
        )


if __name__ == "__main__":
    main()

"""Compare each shape with its floor in a pyperf result file.

Usage::

    python -m benchmarks.compare RESULT.json [MORE.json ...]

For every file, prints one table: shape, floor, the medians (with their median
absolute deviation) of seconds per unit from :mod:`benchmarks.run` (for the probe
and queue-delay benchmarks of S6-S8: of the statistic, in seconds), the ratio,
the target of ``performance.md`` and whether it is met. A ratio is always taken
between a shape and the floor measured in the same file (the same run). Ratios are
expressed the way the targets are:

* throughput shapes (S1, S3, S4): ``floor time / runtime time`` per message -- the
  runtime's speed as a fraction of the floor's, higher is better; so are S8 against
  S4 (S8's rate as a fraction of S4's) and pykka's tell against S1 (S9: how many
  times pykka's rate S1 reaches);
* S2: ``runtime round trip / floor round trip``, lower is better; so are S2 against
  pykka's ask (S9), and the probe delays of S6 and S7 against their floors;
* S5 and S7: operations per second, ``1 / median``, against an absolute target;
* S8's queue delays: the value itself, in milliseconds, against an absolute bound
  (2 x the 16 ms time slice for the p99).

Some floors are scaled from a benchmark of the same file: S7's probe delay is
compared with *one cleanup batch*, S7's seconds per stranded message x 32 (shown
as ``S7 x32``). S6's floor, one batch of F1, is its own benchmark (``S6-floor``,
seconds per batch of 64).

The ``paired`` column is the median of per-run ratios: run *i* of the shape
against run *i* of its floor, each run summarised by the median of its values. In a
file made by :mod:`benchmarks.rounds` run *i* of both comes from the same round
(seconds apart), so this ratio is robust to the machine's load changing between
rounds; in a plain ``-p N`` file the runs are minutes apart and the column is only
indicative. Rows whose benchmarks are missing from a file are skipped.
"""

from __future__ import annotations

import argparse
import enum
import statistics
from collections.abc import Sequence

import attrs
import pyperf  # type: ignore[import-untyped]


class Kind(enum.Enum):
    SPEED = "speed"  # floor / runtime >= target
    LATENCY = "latency"  # runtime / floor <= target
    RATE = "rate"  # 1 / runtime >= target per second
    BOUND = "bound"  # runtime <= target seconds


@attrs.frozen
class Comparison:
    """One row: ``shape`` against ``floor`` (``None``: an absolute target)."""

    shape: str
    floor: str | None
    kind: Kind
    target: float | None  # None: reported, no target
    floor_scale: float = 1.0  # the floor is this many times the floor benchmark

    def floor_label(self) -> str:
        if self.floor is None:
            return "-"
        return self.floor if self.floor_scale == 1 else f"{self.floor} x{self.floor_scale:g}"


def _rows(prefix: str) -> list[Comparison]:
    return [
        Comparison(f"{prefix}S1", "F1", Kind.SPEED, 0.75),
        Comparison(f"{prefix}S1", "F0", Kind.SPEED, None),
        Comparison(f"{prefix}S2", "S2-floor", Kind.LATENCY, 1.15),
        Comparison(f"{prefix}S3", "S3-floor", Kind.SPEED, 0.35),
        Comparison(f"{prefix}S4", "S4-floor", Kind.SPEED, 0.30),
        Comparison(f"{prefix}S5-spawn", None, Kind.RATE, 200_000),
        Comparison(f"{prefix}S5-stop", None, Kind.RATE, 100_000),
    ]


SLICE = 0.016
"""The default time slice, seconds (S8's bound is 2 x this)."""
CLEANUP_BATCH = 32
"""The default cleanup batch: stranded messages per shielded yield (S7)."""

COMPARISONS: list[Comparison] = [
    *_rows(""),
    Comparison("S6-probe-p99", "S6-floor", Kind.LATENCY, 2.0),
    # The same probe next to F1 itself: what trio's shuffled passes cost any loop.
    Comparison("F1-probe-p99", "S6-floor", Kind.LATENCY, None),
    Comparison("S6-probe-p99", "F1-probe-p99", Kind.LATENCY, None),
    Comparison("S7", None, Kind.RATE, 1_000_000),
    Comparison("S7-probe-p99", "S7", Kind.LATENCY, 2.0, floor_scale=CLEANUP_BATCH),
    Comparison("F7-probe-p99", "S7", Kind.LATENCY, None, floor_scale=CLEANUP_BATCH),
    Comparison("S7-probe-p99", "F7-probe-p99", Kind.LATENCY, None),
    Comparison("S8", "S4", Kind.SPEED, 0.5),
    Comparison("S8", None, Kind.RATE, None),
    Comparison("S8-small-p50", None, Kind.BOUND, None),
    Comparison("S8-small-p99", None, Kind.BOUND, 2 * SLICE),
    Comparison("S8-small-max", None, Kind.BOUND, None),
    Comparison("S1", "S9-pykka-tell", Kind.SPEED, 20.0),
    Comparison("S2", "S9-pykka-ask", Kind.LATENCY, 1 / 8),
    # The least an ask (a checkpoint, T4) can cost, against pykka's ask and S2.
    Comparison("S9-checkpoint", "S9-pykka-ask", Kind.LATENCY, None),
    Comparison("S2", "S9-checkpoint", Kind.LATENCY, None),
    # pykka's ask as a trio task must make it (in a worker thread): reported only.
    Comparison("S2", "S9-pykka-ask-trio", Kind.LATENCY, None),
    # A balancing pool with one 100x slower worker against eight equal ones (issue 16),
    # and round robin with the same slow worker (reported: it cannot keep up).
    Comparison("S10-balancing-slow", "S10-balancing-equal", Kind.SPEED, 0.8),
    Comparison("S10-round-robin-slow", "S10-balancing-equal", Kind.SPEED, None),
    # The NATS client (issue 17, benchmarks/nats_client.py): against nats-py under
    # plain asyncio on the same server, the loopback floors, and msgspec (R5).
    Comparison("NATS-rr", "NATS-rr-natspy", Kind.LATENCY, 0.9),
    Comparison("NATS-rr", "NATS-rr-floor", Kind.LATENCY, None),
    Comparison("NATS-rr-natspy", "NATS-rr-floor", Kind.LATENCY, None),
    Comparison("NATS-pubsub", "NATS-pubsub-natspy", Kind.SPEED, 1.5),
    Comparison("NATS-pubsub", "NATS-pubsub-natspy-iter", Kind.SPEED, None),
    Comparison("NATS-pubsub", "NATS-pubsub-floor", Kind.SPEED, None),
    Comparison("NATS-parse", "NATS-parse-msgspec", Kind.SPEED, 0.5),
    Comparison("NATS-build", "NATS-build-msgspec", Kind.SPEED, 0.5),
    # Actors across nodes (issue 18, benchmarks/remote.py): R1, R2 and R3 of remote.md.
    Comparison("R1-remote-ask", "R1-floor", Kind.LATENCY, 1.15),
    Comparison("R2-remote-tell", "R2-floor", Kind.SPEED, 0.6),
    # Each tell a NATS message of its own (the sender yields after each): no target.
    Comparison("R2-lone-tell", "R2-lone-floor", Kind.SPEED, None),
    Comparison("R3-two-nodes", "R3-one-node", Kind.SPEED, 1.5),
    # R3's fan-out through a shared name (issue 32): against the same group served by
    # one node, and against R3's one node (local tells, no group): both >= 1.5.
    Comparison("R7-two-nodes", "R7-one-node", Kind.SPEED, 1.5),
    Comparison("R7-two-nodes", "R3-one-node", Kind.SPEED, 1.5),
    # A 30 µs receiver fed by `send` across nodes, against its own handling rate (issue 31).
    Comparison("R6-remote-send", "R6-floor", Kind.SPEED, 0.9),
    Comparison("R6-remote-tell", "R6-floor", Kind.SPEED, None),  # (no flow control)
    *_rows("ALT-"),
    Comparison("F1", "F0", Kind.SPEED, None),  # what batching in trio costs
    Comparison("S4", "S4-floor-tuples", Kind.SPEED, None),  # a GC-inflated floor
]


def _us(bench: pyperf.Benchmark, scale: float = 1.0) -> str:
    return f"{bench.median() * scale * 1e6:.3f} ± {bench.median_abs_dev() * scale * 1e6:.3f}"


def _run_medians(bench: pyperf.Benchmark) -> list[float]:
    return [statistics.median(run.values) for run in bench.get_runs() if run.values]


def _ratio(kind: Kind, shape: float, floor: float) -> float:
    return shape / floor if kind is Kind.LATENCY else floor / shape


def paired_ratios(row: Comparison, shape: pyperf.Benchmark, floor: pyperf.Benchmark) -> list[float]:
    """Run *i* of ``shape`` against run *i* of ``floor``, sorted; [] if unpaired."""
    shape_runs, floor_runs = _run_medians(shape), _run_medians(floor)
    if len(shape_runs) != len(floor_runs) or not shape_runs:
        return []
    return sorted(
        _ratio(row.kind, s, f * row.floor_scale)
        for s, f in zip(shape_runs, floor_runs, strict=True)
    )


def _paired(ratios: list[float]) -> str:
    if not ratios:
        return "-"
    return (
        f"{statistics.median(ratios):.3f} "
        f"[{ratios[len(ratios) // 4]:.2f}-{ratios[(3 * len(ratios)) // 4]:.2f}]"
    )


@attrs.frozen
class Result:
    """One row of the comparison, computed from a result file."""

    row: Comparison
    shape: pyperf.Benchmark
    floor: pyperf.Benchmark | None
    value: float  # the ratio (with a floor), the rate per second, or the bound's seconds
    paired: list[float]  # per-round ratios, sorted ([] without a floor or pairs)

    @property
    def met(self) -> bool | None:
        """Whether the target is met (``None``: no target)."""
        row = self.row
        if row.target is None:
            return None
        if row.kind is Kind.LATENCY or row.kind is Kind.BOUND:
            return self.value <= row.target
        return self.value >= row.target


def results(suite: pyperf.BenchmarkSuite) -> list[Result]:
    """The comparison rows whose benchmarks are in ``suite``."""
    benches = {bench.get_name(): bench for bench in suite.get_benchmarks()}
    found = []
    for row in COMPARISONS:
        shape = benches.get(row.shape)
        floor = benches.get(row.floor) if row.floor is not None else None
        if shape is None or (row.floor is not None and floor is None):
            continue
        if floor is not None:
            value = _ratio(row.kind, shape.median(), floor.median() * row.floor_scale)
            paired = paired_ratios(row, shape, floor)
        elif row.kind is Kind.BOUND:
            value = shape.median()
            paired = []
        else:
            value = 1 / shape.median()
            paired = []
        found.append(Result(row, shape, floor, value, paired))
    return found


def _target(row: Comparison) -> str:
    if row.target is None:
        return "(report)"
    if row.kind is Kind.SPEED:
        return f">= {row.target:g}x"
    if row.kind is Kind.LATENCY:
        return f"<= {row.target:g}x"
    if row.kind is Kind.BOUND:
        return f"<= {row.target * 1000:g} ms"
    return f">= {row.target / 1000:g} K/s"


def table(suite: pyperf.BenchmarkSuite) -> list[list[str]]:
    """The comparison rows for one result file, as strings (a header row first)."""
    rows = [
        [
            "shape",
            "floor",
            "shape µs/unit (median ± MAD)",
            "floor µs/unit",
            "ratio",
            "paired [q1-q3]",
            "target",
            "met",
        ]
    ]
    for result in results(suite):
        row, value = result.row, result.value
        if result.floor is not None:
            shown = f"{value:.3f}"
        elif row.kind is Kind.BOUND:
            shown = f"{value * 1000:.3f} ms"
        else:
            shown = f"{value / 1000:.1f} K/s"
        met = {None: "", True: "yes", False: "NO"}[result.met]
        rows.append(
            [
                row.shape,
                row.floor_label(),
                _us(result.shape),
                _us(result.floor, row.floor_scale) if result.floor is not None else "-",
                shown,
                _paired(result.paired),
                _target(row),
                met,
            ]
        )
    return rows


def _format(rows: list[list[str]]) -> str:
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    lines = [
        " | ".join(cell.ljust(width) for cell, width in zip(row, widths, strict=True))
        for row in rows
    ]
    lines.insert(1, "-+-".join("-" * width for width in widths))
    return "\n".join(line.rstrip() for line in lines)


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("files", nargs="+", help="pyperf JSON result files")
    args = parser.parse_args(argv)
    for index, filename in enumerate(args.files):
        suite = pyperf.BenchmarkSuite.load(filename)
        if index:
            print()
        print(f"{filename}:")
        print(_format(table(suite)))


if __name__ == "__main__":
    main()

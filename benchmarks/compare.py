"""Compare each shape with its floor in a pyperf result file.

Usage::

    python -m benchmarks.compare RESULT.json [MORE.json ...]

For every file, prints one table: shape, floor, the medians (with their median
absolute deviation) of seconds per message from :mod:`benchmarks.run`, the ratio,
the target of ``performance.md`` and whether it is met. A ratio is always taken
between a shape and the floor measured in the same file (the same run). Ratios are
expressed the way the targets are:

* throughput shapes (S1, S3, S4): ``floor time / runtime time`` per message -- the
  runtime's speed as a fraction of the floor's, higher is better;
* S2: ``runtime round trip / floor round trip``, lower is better;
* S5: operations per second, ``1 / median``, against an absolute target.

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


@attrs.frozen
class Comparison:
    """One row: ``shape`` against ``floor`` (``None``: an absolute target)."""

    shape: str
    floor: str | None
    kind: Kind
    target: float | None  # None: reported, no target


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


COMPARISONS: list[Comparison] = [
    *_rows(""),
    *_rows("ALT-"),
    Comparison("F1", "F0", Kind.SPEED, None),  # what batching in trio costs
    Comparison("S4", "S4-floor-tuples", Kind.SPEED, None),  # a GC-inflated floor
]


def _us(bench: pyperf.Benchmark) -> str:
    return f"{bench.median() * 1e6:.3f} ± {bench.median_abs_dev() * 1e6:.3f}"


def _run_medians(bench: pyperf.Benchmark) -> list[float]:
    return [statistics.median(run.values) for run in bench.get_runs() if run.values]


def _ratio(kind: Kind, shape: float, floor: float) -> float:
    return shape / floor if kind is Kind.LATENCY else floor / shape


def _paired(kind: Kind, shape: pyperf.Benchmark, floor: pyperf.Benchmark) -> str:
    shape_runs, floor_runs = _run_medians(shape), _run_medians(floor)
    if len(shape_runs) != len(floor_runs) or not shape_runs:
        return "-"
    ratios = sorted(_ratio(kind, s, f) for s, f in zip(shape_runs, floor_runs, strict=True))
    return (
        f"{statistics.median(ratios):.3f} "
        f"[{ratios[len(ratios) // 4]:.2f}-{ratios[(3 * len(ratios)) // 4]:.2f}]"
    )


def _target(row: Comparison) -> str:
    if row.target is None:
        return "(report)"
    if row.kind is Kind.SPEED:
        return f">= {row.target:g}x"
    if row.kind is Kind.LATENCY:
        return f"<= {row.target:g}x"
    return f">= {row.target / 1000:g} K/s"


def table(suite: pyperf.BenchmarkSuite) -> list[list[str]]:
    """The comparison rows for one result file, as strings."""
    benches = {bench.get_name(): bench for bench in suite.get_benchmarks()}
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
    for row in COMPARISONS:
        shape = benches.get(row.shape)
        floor = benches.get(row.floor) if row.floor is not None else None
        if shape is None or (row.floor is not None and floor is None):
            continue
        if floor is None:
            value = 1 / shape.median()
            ratio = f"{value / 1000:.1f} K/s"
            paired = "-"
        else:
            value = _ratio(row.kind, shape.median(), floor.median())
            ratio = f"{value:.3f}"
            paired = _paired(row.kind, shape, floor)
        if row.target is None:
            met = ""
        elif row.kind is Kind.LATENCY:
            met = "yes" if value <= row.target else "NO"
        else:
            met = "yes" if value >= row.target else "NO"
        rows.append(
            [
                row.shape,
                row.floor or "-",
                _us(shape),
                _us(floor) if floor is not None else "-",
                ratio,
                paired,
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

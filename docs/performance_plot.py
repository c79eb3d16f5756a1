"""Plot the benchmark results of record against their targets (SVG, matplotlib).

Run by ``conf.py`` on every docs build (and runnable alone:
``python docs/performance_plot.py RESULTS.json OUT.svg``), so the picture in
``docs/performance.rst`` is always the committed result file it names. One bar per
row of :mod:`benchmarks.compare` that has a target, scaled so that **1 is the
target** and right of it is met: for a ratio against a floor or a rate,
``value / target``; for a latency or a bound, ``target / value``. The whisker is
the spread of the per-round paired ratios (first to third quartile), where the
file has them.
"""

from __future__ import annotations

import sys
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt
import pyperf  # type: ignore[import-untyped]

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from benchmarks.compare import Kind, Result, results, table  # noqa: E402

RESULTS_OF_RECORD = ROOT / "benchmarks" / "results" / "issue14-record-combined-20261201.json"
"""The file the performance page shows (see ``benchmarks/results/README.md``)."""


def _score(result: Result, value: float) -> float:
    """``value`` (a ratio, rate or seconds) as a multiple of the target; >= 1 is met."""
    target = result.row.target
    assert target is not None
    if result.row.kind in (Kind.LATENCY, Kind.BOUND):
        return target / value
    return value / target


def _spread(result: Result) -> tuple[float, float]:
    """The paired ratios' first and third quartiles as scores; (0, 0) without pairs."""
    paired = result.paired
    if not paired:
        return 0.0, 0.0
    quartiles = (
        _score(result, paired[len(paired) // 4]),
        _score(result, paired[-1 - len(paired) // 4]),
    )
    return min(quartiles), max(quartiles)


def _label(result: Result) -> str:
    row = result.row
    return row.shape if row.floor is None else f"{row.shape} vs {row.floor_label()}"


def write(results_file: Path, out: Path) -> None:
    """Draw the rows of ``results_file`` that have a target into ``out`` (SVG)."""
    rows = [r for r in results(pyperf.BenchmarkSuite.load(str(results_file))) if r.row.target]
    rows.reverse()  # matplotlib draws the first bar at the bottom
    scores = [_score(r, r.value) for r in rows]
    spreads = [_spread(r) for r in rows]
    low = [s - lo if lo else 0.0 for s, (lo, _) in zip(scores, spreads, strict=True)]
    high = [hi - s if hi else 0.0 for s, (_, hi) in zip(scores, spreads, strict=True)]
    figure, axes = plt.subplots(figsize=(8, 0.38 * len(rows) + 1.2))
    colours = ["#4c8c4a" if s >= 1 else "#c0504d" for s in scores]
    positions = range(len(rows))
    axes.barh(positions, scores, color=colours, height=0.6)
    paired = [i for i, r in enumerate(rows) if r.paired]
    axes.errorbar(
        [scores[i] for i in paired],
        paired,
        xerr=[[max(low[i], 0.0) for i in paired], [max(high[i], 0.0) for i in paired]],
        fmt="none",
        ecolor="black",
        capsize=3,
        linewidth=1,
    )
    axes.axvline(1.0, color="black", linestyle="--", linewidth=1)
    axes.set_xscale("log")
    axes.set_yticks(list(positions), [_label(r) for r in rows], fontsize=8)
    axes.set_xlabel("result / target (log scale; right of the dashed line: target met)")
    axes.set_title(f"trio-actors against its targets ({results_file.name})", fontsize=10)
    figure.tight_layout()
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, format="svg")
    plt.close(figure)


def write_table(results_file: Path, out: Path) -> None:
    """Write :func:`benchmarks.compare.table` of ``results_file`` as an RST table."""
    rows = table(pyperf.BenchmarkSuite.load(str(results_file)))
    lines = [".. list-table::", "   :header-rows: 1", ""]
    for row in rows:
        cells = [cell.replace("*", r"\*") or " " for cell in row]
        lines.append(f"   * - {cells[0]}")
        lines.extend(f"     - {cell}" for cell in cells[1:])
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")


if __name__ == "__main__":
    write(Path(sys.argv[1]), Path(sys.argv[2]))

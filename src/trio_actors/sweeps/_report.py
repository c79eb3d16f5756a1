"""How a sweep is shown: the rich table, and the optional PNG plot."""

from __future__ import annotations

from pathlib import Path

from rich import box
from rich.table import Table

from .. import DEFAULT_CLEANUP_BATCH, DEFAULT_TIME_SLICE
from ._recommend import CandidateResult, Spread
from ._sweep import Sweep


def _kilo(spread: Spread | None) -> str:
    if spread is None:
        return "-"
    return f"{spread.median / 1e3:,.0f}±{(spread.high - spread.low) / 2e3:,.0f}"


def _micro(spread: Spread | None) -> str:
    return "-" if spread is None else f"{spread.median * 1e6:,.1f}"


def _contracts(result: CandidateResult) -> str:
    if not result.failed:
        return f"all {len(result.contracts)}"
    return "FAIL " + ",".join(result.failed)


def table(sweep: Sweep) -> Table:
    """One row per candidate; the recommended one marked with ``*``."""
    grid = Table(
        box=box.SIMPLE_HEAD,
        show_edge=False,
        padding=(0, 1),
        pad_edge=False,
        title="trio-actors sweep (* recommended)",
        title_justify="left",
        caption="tell, clean: thousands/s ± half the interval; ask, probe p99: µs",
        caption_justify="left",
    )
    for name in ("batch", "cleanup", "slice", "contracts"):
        grid.add_column(
            name, justify="right" if name in ("batch", "cleanup") else "left", no_wrap=True
        )
    for name in ("tell K/s", "ask µs", "probe µs", "clean K/s"):
        grid.add_column(name, justify="right", no_wrap=True)
    for result in sweep.results:
        c, m = result.candidate, result.measurement
        grid.add_row(
            ("*" if result is sweep.recommended else "") + str(c.batch),
            str(c.cleanup_batch),
            "none" if c.time_slice is None else f"{c.time_slice * 1000:g}ms",
            _contracts(result),
            _kilo(m.tell_per_second if m else None),
            _micro(m.ask_round_trip_seconds if m else None),
            _micro(m.probe_delay_p99_seconds if m else None),
            _kilo(m.cleanup_per_second if m else None),
            style="" if result.passed else "red",
        )
    return grid


PLOT_MISSING = (
    "--plot needs matplotlib, which is an optional extra: "
    "pip install 'trio-actors[plot]' (or pip install matplotlib)"
)


def plot(sweep: Sweep, out: Path) -> None:
    """Throughput and probe delay against batch size, failing candidates marked (PNG).

    Raises:
        ImportError: matplotlib is not installed (message: :data:`PLOT_MISSING`).
    """
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        raise ImportError(PLOT_MISSING) from None
    # The batch dimension: the candidates with the default cleanup batch and slice.
    rows = [
        (r, r.measurement)
        for r in sweep.results
        if r.measurement is not None
        and r.candidate.cleanup_batch == DEFAULT_CLEANUP_BATCH
        and r.candidate.time_slice == DEFAULT_TIME_SLICE
    ]
    rows.sort(key=lambda pair: pair[0].candidate.batch)
    batches = [r.candidate.batch for r, _ in rows]
    series = (
        ("tells per second (K)", [m.tell_per_second.median / 1e3 for _, m in rows]),
        ("probe p99 (µs)", [m.probe_delay_p99_seconds.median * 1e6 for _, m in rows]),
    )
    figure, panels = plt.subplots(1, 2, figsize=(10, 4))
    for axes, (label, values) in zip(panels, series, strict=True):
        axes.plot(batches, values, marker="o", color="#4c72b0")
        failing = [i for i, (r, _) in enumerate(rows) if not r.passed]
        if failing:
            axes.scatter(
                [batches[i] for i in failing],
                [values[i] for i in failing],
                marker="x",
                s=120,
                color="#c0504d",
                label="fails a contract",
                zorder=3,
            )
            axes.legend()
        axes.set_xscale("log", base=2)
        axes.set_xticks(batches, [str(b) for b in batches])
        axes.set_xlabel("batch")
        axes.set_ylabel(label)
    if sweep.recommended is not None:
        figure.suptitle(f"recommended: {sweep.recommended.candidate.describe()}")
    figure.tight_layout()
    figure.savefig(out, format="png")
    plt.close(figure)


__all__ = ["PLOT_MISSING", "plot", "table"]

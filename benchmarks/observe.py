"""What tracing costs: the shapes S1-S4 with tracing off, on with every span sampled
out, on with every ask sampled, and with every tell traced too -- ratios to "off"
measured in the same round.

Usage (from the repository root; needs the ``bench`` group: pyperf and the
OpenTelemetry SDK)::

    python -m benchmarks.observe --rounds N -o RESULT.json [--scale F]
    python -m benchmarks.observe --report RESULT.json
    python -m benchmarks.observe [pyperf options] [--scale F]   # one pyperf run

``--rounds N`` runs pyperf ``N`` times, each a worker process per benchmark that
measures every variant of a shape one right after the other (``-p 1 -l 1
--append``, as :mod:`benchmarks.rounds` does for the shapes): round *i* of a
variant and round *i* of "off" are seconds apart, and ``--report`` gives the median
of those paired ratios (and their quartiles), robust to the machine's load changing
between rounds. Each value is seconds per unit (a message for S1, S3 and S4, a
round trip for S2).

The variants (``open_actor_system(...)``):

``off``
    no ``tracing=``: the runtime as it is without the extra (nothing imported);
``sampled-out``
    ``tracing=TracerProvider(sampler=ALWAYS_OFF)``: what tracing costs where no span
    is sampled (the default ``Tracing(tells="in_trace")``: every tell is checked,
    none traced -- the tell fast paths are off);
``sampled``
    ``ALWAYS_ON``, spans handed to a ``BatchSpanProcessor`` whose exporter drops
    them (exporting is the application's cost): every ask traced (a CLIENT and a
    SERVER span, the ask always queued); tells outside a trace, as ``sampled-out``;
``tells-traced``
    ``ALWAYS_ON`` with ``Tracing(tells="all")``: every tell a PRODUCER and a CONSUMER
    span too (for S1, S3 and S4; at a tenth of the size: each tell costs tens of
    microseconds).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from contextlib import AbstractAsyncContextManager
from functools import partial
from typing import Any

import pyperf  # type: ignore[import-untyped]
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import BatchSpanProcessor, SpanExporter, SpanExportResult
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ALWAYS_ON

import trio_actors as ta
from trio_actors.observe import Tracing

from . import shapes
from .shapes import OpenSystem, System

VARIANTS = ("off", "sampled-out", "sampled", "tells-traced")
SIZES = {"S1": 200_000, "S2": 10_000, "S3": 100_000, "S4": 10_000}
SMALLER = {"tells-traced": 10}  # (a variant's size is the shape's divided by this)


class _Dropped(SpanExporter):
    """An exporter that drops what it is given (the export is the application's)."""

    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        return SpanExportResult.SUCCESS


def _provider(sampled: bool) -> TracerProvider:
    provider = TracerProvider(sampler=ALWAYS_ON if sampled else ALWAYS_OFF)
    if sampled:
        provider.add_span_processor(BatchSpanProcessor(_Dropped()))
    return provider


def opener(variant: str) -> OpenSystem:
    """How a variant opens its system (one provider per process, made once)."""
    if variant == "off":
        return shapes.open_runtime
    tracing = {
        "sampled-out": Tracing(provider=_provider(False)),
        "sampled": Tracing(provider=_provider(True)),
        "tells-traced": Tracing(provider=_provider(True), tells="all"),
    }[variant]

    def open_traced() -> AbstractAsyncContextManager[System]:
        return ta.open_actor_system(serving=shapes.POLICY, tracing=tracing)

    return open_traced


def _shape(name: str) -> Callable[[OpenSystem, int, int], float]:
    return {"S1": shapes.s1, "S2": shapes.s2, "S3": shapes.s3, "S4": shapes.s4}[name]


def benchmarks(scale: float) -> list[tuple[str, Callable[[int, int], float], int, int]]:
    """``(name, time function, size, units per loop)`` of every benchmark, a shape's
    variants one after the other."""
    found: list[tuple[str, Callable[[int, int], float], int, int]] = []
    for shape, size in SIZES.items():
        for variant in VARIANTS:
            if shape == "S2" and variant == "tells-traced":
                continue  # (S2 has no tells)
            sized = max(2, round(size * scale) // SMALLER.get(variant, 1))
            units = sized * shapes.S4_ROUNDS if shape == "S4" else sized
            function = partial(_shape(shape), opener(variant))
            found.append((f"{shape} {variant}", function, sized, units))
    return found


def run_pyperf() -> None:
    runner = pyperf.Runner(add_cmdline_args=_add_scale, program_args=("-m", "benchmarks.observe"))
    runner.argparser.add_argument("--scale", type=float, default=1.0)
    args = runner.parse_args()
    for name, function, size, units in benchmarks(args.scale):
        runner.bench_time_func(
            name, function, size, inner_loops=units, metadata={"description": "seconds per unit"}
        )


def _add_scale(cmd: list[str], args: Any) -> None:
    cmd.extend(["--scale", str(args.scale)])


def rounds(count: int, output: str, scale: float) -> None:
    """Run pyperf ``count`` times into ``output`` (a new file), one round each."""
    if os.path.exists(output):
        raise SystemExit(f"{output} exists; rounds append to a new file only")
    command = [sys.executable, "-m", "benchmarks.observe", "-p", "1", "-l", "1"]
    command += ["--scale", str(scale), "--append", output, "--quiet"]
    started = time.monotonic()
    for number in range(1, count + 1):
        print(f"round {number}/{count}", flush=True)
        subprocess.run(command, check=True)
    print(f"{count} rounds in {time.monotonic() - started:.0f} s", flush=True)


def report(path: str) -> str:
    """The table of a result file: per variant, microseconds per unit (median) and
    the paired ratio to "off" (median [quartiles] of the per-round ratios)."""
    suite = pyperf.BenchmarkSuite.load(path)
    benches = {bench.get_name(): bench for bench in suite.get_benchmarks()}
    lines = [f"{'benchmark':<18} {'us/unit':>9} {'x off (paired)':>22} rounds"]
    for shape in SIZES:
        off = benches.get(f"{shape} off")
        for variant in VARIANTS:
            bench = benches.get(f"{shape} {variant}")
            if bench is None:
                continue
            runs = _run_medians(bench)
            paired = "-"
            if off is not None and variant != "off":
                ratios = sorted(v / o for v, o in zip(runs, _run_medians(off), strict=False))
                quartiles = f"{ratios[len(ratios) // 4]:.2f}-{ratios[(3 * len(ratios)) // 4]:.2f}"
                paired = f"{statistics.median(ratios):.2f} [{quartiles}]"
            lines.append(
                f"{shape + ' ' + variant:<18} {statistics.median(runs) * 1e6:>9.3f} "
                f"{paired:>22} {len(runs)}"
            )
    return "\n".join(lines)


def _run_medians(bench: pyperf.Benchmark) -> list[float]:
    return [statistics.median(run.values) for run in bench.get_runs() if run.values]


def main(argv: Sequence[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    if argv[:1] == ["--report"]:
        print(report(argv[1]))
        return
    if "--rounds" in argv:
        parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
        parser.add_argument("--rounds", type=int, required=True)
        parser.add_argument("-o", "--output", required=True)
        parser.add_argument("--scale", type=float, default=1.0)
        args = parser.parse_args(argv)
        rounds(args.rounds, args.output, args.scale)
        return
    run_pyperf()


if __name__ == "__main__":
    main()

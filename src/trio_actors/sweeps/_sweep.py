"""The sweep driver behind ``trio-actors sweep``.

For each candidate policy (:func:`~trio_actors.sweeps._recommend.candidates`) it

1. runs the whole contract suite in-process under that policy and records each
   contract's pass or failure (with the reason);
2. measures S1 (tell throughput), S2 (ask round trip), S6 (probe delay) and, for a
   candidate whose cleanup batch differs from the default, S7 (cleanup rate and
   probe delay), by running :mod:`trio_actors.sweeps.bench` -- a pyperf script --
   in a subprocess; the candidates are *interleaved*: round 1 measures every
   candidate once, then round 2 (in an order rotated by one), ..., so that the
   machine's drift spreads evenly over them;
3. recommends by the rule of :mod:`~trio_actors.sweeps._recommend`.

A rich progress bar shows how many steps are done and which candidate is being
worked on. Each measured value's interval (what the rule compares) is the first to
third quartile of all its pyperf values when there are at least four, else their
minimum to maximum.
"""

from __future__ import annotations

import datetime
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs
import pyperf  # type: ignore[import-untyped]

from ._recommend import Candidate, CandidateResult, Measurement, Spread, recommend


class SweepError(Exception):
    """A measurement subprocess failed; the message says which and why."""


@attrs.frozen
class Settings:
    """How thoroughly to measure."""

    # Interleaved rounds: worker processes per candidate. Ten, because the 2-core
    # development VM's speed is bimodal between processes: three sweeps of five
    # rounds recommended three different policies; ten agreed with the contracts
    # and the background's data (docs/choosing.rst).
    rounds: int = 10
    values: int = 3  # pyperf values per worker process
    warmups: int = 1
    scale: float = 1.0  # of trio_actors.sweeps.bench.SIZES
    workload: str | None = None  # MODULE:FACTORY replacing S1's handler


QUICK = Settings(rounds=1, values=2, warmups=1, scale=0.05)
"""``--quick``: one round at a twentieth of the sizes (about a minute in all)."""


@attrs.frozen
class Sweep:
    """What a sweep found."""

    results: list[CandidateResult]
    recommended: CandidateResult | None
    environment: dict[str, Any]


def spread(bench: pyperf.Benchmark, *, invert: bool = False) -> Spread:
    """The median and interval of a benchmark's values (``invert``: of 1/value)."""
    values = sorted(bench.get_values())
    median = statistics.median(values)
    if len(values) >= 4:
        quartiles = statistics.quantiles(values, n=4)
        low, high = quartiles[0], quartiles[2]
    else:
        low, high = values[0], values[-1]
    if invert:
        return Spread(1 / median, 1 / high, 1 / low)
    return Spread(median, low, high)


def measurement_of(suite: pyperf.BenchmarkSuite) -> Measurement:
    """A candidate's :class:`Measurement` from its pyperf result file."""
    benches = {bench.get_name(): bench for bench in suite.get_benchmarks()}
    cleanup = benches.get("cleanup")
    cleanup_probe = benches.get("cleanup-probe")

    def rounds(bench: pyperf.Benchmark | None) -> tuple[float, ...]:
        if bench is None:
            return ()
        return tuple(1 / statistics.median(run.values) for run in bench.get_runs() if run.values)

    return Measurement(
        tell_per_second_rounds=rounds(benches["tell"]),
        cleanup_per_second_rounds=rounds(cleanup),
        tell_per_second=spread(benches["tell"], invert=True),
        ask_round_trip_seconds=spread(benches["ask"]),
        probe_delay_p99_seconds=spread(benches["probe"]),
        cleanup_per_second=None if cleanup is None else spread(cleanup, invert=True),
        cleanup_probe_delay_p99_seconds=(None if cleanup_probe is None else spread(cleanup_probe)),
    )


def bench_command(candidate: Candidate, settings: Settings, output: Path) -> list[str]:
    """The command that measures ``candidate`` once (one worker process)."""
    time_slice = "none" if candidate.time_slice is None else repr(candidate.time_slice)
    command = [
        sys.executable,
        "-m",
        "trio_actors.sweeps.bench",
        "--batch",
        str(candidate.batch),
        "--cleanup-batch",
        str(candidate.cleanup_batch),
        "--time-slice",
        time_slice,
        "--scale",
        repr(settings.scale),
        "-p",
        "1",
        "-l",
        "1",
        "-n",
        str(settings.values),
        "-w",
        str(settings.warmups),
        "--append",
        str(output),
        "--quiet",
    ]
    if candidate.is_cleanup_candidate:
        command.append("--cleanup")
    if settings.workload is not None:
        command.extend(["--workload", settings.workload])
    return command


def environment() -> dict[str, Any]:
    """Where and with what the sweep ran."""
    import trio

    from .. import __version__

    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo", encoding="utf-8") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return {
        "python": platform.python_version(),
        "implementation": platform.python_implementation(),
        "trio": trio.__version__,
        "pyperf": pyperf.__version__,
        "trio_actors": __version__,
        "cpu": cpu,
        "cpus": os.cpu_count(),
        "platform": platform.platform(),
        "date": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds"),
        "command": " ".join(["trio-actors", *sys.argv[1:]]),
    }


Step = Callable[[str], None]
"""Called once per step done, with a description of the next one (progress)."""


def run_sweep(
    candidates: Sequence[Candidate], settings: Settings, step: Step | None = None
) -> Sweep:
    """Check and measure every candidate; recommend. See the module docstring."""
    from ..contracts import run_contracts

    def done(next_step: str) -> None:
        if step is not None:
            step(next_step)

    checked: list[tuple[dict[str, bool], dict[str, str]]] = []
    for candidate in candidates:
        done(f"contracts, {candidate.describe()}")
        outcomes = run_contracts(candidate.policy())
        checked.append(
            (
                {result.id: result.passed for result in outcomes},
                {result.id: result.reason for result in outcomes if not result.passed},
            )
        )
    with tempfile.TemporaryDirectory(prefix="trio-actors-sweep-") as tmp:
        files = [Path(tmp) / f"candidate-{index}.json" for index in range(len(candidates))]
        pairs = list(zip(candidates, files, strict=True))
        for number in range(1, settings.rounds + 1):
            # Rotated by one each round, so that no candidate always runs right
            # after the same one, or always first.
            shift = (number - 1) % len(pairs)
            for candidate, output in pairs[shift:] + pairs[:shift]:
                done(f"round {number}/{settings.rounds}, {candidate.describe()}")
                command = bench_command(candidate, settings, output)
                finished = subprocess.run(command, capture_output=True, text=True, check=False)
                if finished.returncode != 0:
                    raise SweepError(
                        f"measuring {candidate.describe()} failed "
                        f"(exit code {finished.returncode}): {first_error(finished.stderr)}"
                    )
        measurements = [measurement_of(pyperf.BenchmarkSuite.load(str(f))) for f in files]
    done("recommendation")
    results = [
        CandidateResult(candidate, contracts, reasons, measurement)
        for candidate, (contracts, reasons), measurement in zip(
            candidates, checked, measurements, strict=True
        )
    ]
    found = environment()
    if settings.workload is not None:
        found["workload"] = settings.workload
    return Sweep(results, recommend(results), found)


def first_error(stderr: str) -> str:
    """The first exception line of a failed measurement's output (the worker's own
    error comes before pyperf's report that the worker failed), else its last line."""
    lines = [line for line in stderr.strip().splitlines() if line.strip()]
    for line in lines:
        head = line.split(":", 1)[0]
        if not line.startswith(" ") and (head.endswith("Error") or head.endswith("Exception")):
            return line
    return lines[-1] if lines else "(no output)"


def steps_of(candidates: Sequence[Candidate], settings: Settings) -> int:
    """How many steps :func:`run_sweep` reports (for a progress bar's total)."""
    return len(candidates) * (1 + settings.rounds) + 1


__all__ = [
    "QUICK",
    "Settings",
    "Sweep",
    "SweepError",
    "bench_command",
    "environment",
    "first_error",
    "measurement_of",
    "run_sweep",
    "spread",
    "steps_of",
]

"""``trio-actors sweep``: bad input is a one-line error (exit 2); a tiny real sweep
writes the pinned JSON; the measured spreads are computed as documented."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pyperf  # type: ignore[import-untyped]
import pytest

from trio_actors.sweeps._cli import main
from trio_actors.sweeps._recommend import Candidate
from trio_actors.sweeps._report import PLOT_MISSING
from trio_actors.sweeps._sweep import Settings, bench_command, run_sweep, spread


@pytest.mark.parametrize(
    ("options", "complaint"),
    [
        (["--batches", "0"], "expected a number >= 1"),
        (["--batches", ""], "comma-separated list"),
        (["--batches", "32,,64"], "comma-separated list"),
        (["--batches", "sixty-four"], "expected a whole number"),
        (["--cleanup-batches", "-1"], "expected a number >= 1"),
        (["--time-slices", "fast"], "expected seconds"),
        (["--time-slices", "0"], "expected seconds > 0"),
        (["--rounds", "0"], "expected a number >= 1"),
        (["--colour", "red"], "unrecognized arguments"),
    ],
)
def test_bad_options_are_one_line_errors_with_exit_code_2(
    options: list[str], complaint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["sweep", *options])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert complaint in err
    assert "Traceback" not in err


def test_plot_without_matplotlib_says_how_to_install_it_before_measuring(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib fails
    with pytest.raises(SystemExit) as exit_:
        main(["sweep", "--quick", "--plot", str(tmp_path / "out.png")])
    assert exit_.value.code == 2
    assert PLOT_MISSING in capsys.readouterr().err


def _bench(name: str, values: list[float]) -> pyperf.Benchmark:
    run = pyperf.Run(values, warmups=None, metadata={"name": name, "loops": 1})
    return pyperf.Benchmark([run])


def test_spread_is_the_quartiles_from_four_values_else_the_range() -> None:
    few = spread(_bench("ask", [3.0, 1.0, 2.0]))
    assert (few.median, few.low, few.high) == (2.0, 1.0, 3.0)
    many = spread(_bench("ask", [1.0, 2.0, 3.0, 4.0, 5.0]))
    assert many.median == 3.0
    assert many.low == pytest.approx(1.5)
    assert many.high == pytest.approx(4.5)
    rate = spread(_bench("tell", [1e-6, 2e-6, 4e-6]), invert=True)
    assert (rate.median, rate.low, rate.high) == (5e5, 2.5e5, 1e6)


def test_only_the_cleanup_dimension_measures_the_cleanup() -> None:
    settings = Settings(rounds=1, values=1, warmups=0, scale=0.01)

    def command(candidate: Candidate) -> list[str]:
        return bench_command(candidate, settings, Path("out.json"))

    assert "--cleanup" in command(Candidate(64, 32, 0.016))  # the defaults: the reference
    assert "--cleanup" in command(Candidate(64, 64, 0.016))
    assert "--cleanup" not in command(Candidate(128, 32, 0.016))
    no_slice = command(Candidate(64, 32, None))
    assert "--cleanup" not in no_slice
    assert no_slice[no_slice.index("--time-slice") + 1] == "none"


def test_a_tiny_sweep_checks_measures_and_recommends(tmp_path: Path) -> None:
    # Two candidates, the least pyperf will do: contracts decide, not timings.
    settings = Settings(rounds=1, values=1, warmups=0, scale=0.001)
    steps: list[str] = []
    sweep = run_sweep([Candidate(64, 32, 0.016), Candidate(128, 32, 0.016)], settings, steps.append)
    by_batch = {r.candidate.batch: r for r in sweep.results}
    assert by_batch[64].passed
    assert by_batch[128].contracts["T10"] is False
    assert "T10" in by_batch[128].reasons
    assert sweep.recommended is by_batch[64]
    for result in sweep.results:
        assert result.measurement is not None
        assert result.measurement.tell_per_second.median > 0
    assert steps[0].startswith("contracts")
    assert steps[-1] == "recommendation"
    assert {"python", "trio", "cpu", "date"} <= set(sweep.environment)


def test_the_command_writes_the_json(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "sweep.json"
    code = main(
        [
            "sweep",
            "--quick",
            "--batches",
            "64",
            "--cleanup-batches",
            "32",
            "--time-slices",
            "0.016",
            "--json",
            str(out),
        ]
    )
    assert code == 0
    document = json.loads(out.read_text(encoding="utf-8"))
    assert document["recommended"] == {"batch": 64, "cleanup_batch": 32, "time_slice": 0.016}
    (only,) = document["candidates"]
    assert only["passed"] is True
    assert all(only["contracts"].values())
    assert "recommended: batch=64 cleanup=32 slice=16ms" in capsys.readouterr().out


def test_a_failed_measurement_names_the_workers_error() -> None:
    from trio_actors.sweeps._sweep import first_error

    stderr = (
        "Traceback (most recent call last):\n"
        '  File "bench.py", line 3, in <module>\n'
        "ZeroDivisionError: division by zero\n"
        "Traceback (most recent call last):\n"
        "RuntimeError: python failed with exit code 1\n"
    )
    assert first_error(stderr) == "ZeroDivisionError: division by zero"
    assert first_error("just this\n") == "just this"
    assert first_error("") == "(no output)"

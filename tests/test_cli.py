"""``trio-actors contracts``: a table, exit 0 when all pass, 1 when any fails, 2 for
bad options (a one-line error, never a traceback)."""

import subprocess
import sys

import pytest

from trio_actors.contracts import REGISTRY
from trio_actors.sweeps._cli import main


def test_contracts_pass_at_the_defaults(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["contracts"]) == 0
    out = capsys.readouterr().out
    assert "batch=64 cleanup=32 slice=16ms" in out
    assert f"contracts: {len(REGISTRY)} passed, 0 failed" in out


def test_batch_128_reports_T10_failing(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["contracts", "--batch", "128", "--only", "T1,T10"]) == 1
    out = capsys.readouterr().out
    t10 = next(line for line in out.splitlines() if line.strip().startswith("T10"))
    assert "FAIL" in t10
    assert "1 passed, 1 failed" in out


def test_time_slice_none_is_accepted(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["contracts", "--time-slice", "none", "--only", "T13"]) == 1
    assert "slice=none" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "complaint"),
    [
        (["contracts", "--batch", "0"], "--batch: expected a number >= 1, got 0"),
        (["contracts", "--batch", "x"], "--batch: expected a whole number, got 'x'"),
        (
            ["contracts", "--cleanup-batch", "-3"],
            "--cleanup-batch: expected a number >= 1",
        ),
        (["contracts", "--time-slice", "soon"], "--time-slice: expected seconds"),
        (["contracts", "--time-slice", "0"], "--time-slice: expected seconds > 0"),
        (["contracts", "--only", "T99"], "unknown contract ids ['T99']"),
        (["contracts", "--bogus"], "unrecognized arguments: --bogus"),
        (["frobnicate"], "invalid choice: 'frobnicate'"),
    ],
)
def test_bad_options_are_one_line_errors_with_exit_code_2(
    argv: list[str], complaint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert complaint in err
    assert "Traceback" not in err


def test_python_dash_m_runs_the_same_command() -> None:
    done = subprocess.run(
        [sys.executable, "-m", "trio_actors", "contracts", "--only", "T1"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "1 passed, 0 failed" in done.stdout

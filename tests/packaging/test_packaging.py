"""Packaging: the runtime depends on trio and attrs only, the version has one source,
and the sweep's own dependencies (pyperf, rich) are an extra -- ``contracts`` runs
without them, ``sweep`` says how to install them."""

from __future__ import annotations

import importlib.metadata
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

import trio_actors
from trio_actors.sweeps._cli import SWEEP_EXTRA, main

PYPROJECT = Path(__file__).resolve().parents[2] / "pyproject.toml"


def _project() -> dict[str, object]:
    with PYPROJECT.open("rb") as file:
        project = tomllib.load(file)["project"]
    assert isinstance(project, dict)
    return project


def _groups() -> dict[str, list[object]]:
    with PYPROJECT.open("rb") as file:
        groups = tomllib.load(file)["dependency-groups"]
    assert isinstance(groups, dict)
    return groups


def _names(requirements: list[str]) -> set[str]:
    """Distribution names of PEP 508 requirements, extras and versions left out."""
    names = set()
    for requirement in requirements:
        found = re.match(r"[A-Za-z0-9._-]+", requirement)
        assert found is not None, requirement
        names.add(found[0].lower())
    return names


def test_the_runtime_depends_on_trio_and_attrs_only() -> None:
    dependencies = _project()["dependencies"]
    assert isinstance(dependencies, list)
    assert _names(dependencies) == {"trio", "attrs"}


def test_the_sweep_extra_has_what_the_sweep_imports() -> None:
    extras = _project()["optional-dependencies"]
    assert isinstance(extras, dict)
    assert _names(extras["sweep"]) == {"pyperf", "rich"}


def test_extras_are_what_users_install_and_the_tools_are_groups() -> None:
    extras = _project()["optional-dependencies"]
    assert isinstance(extras, dict)
    # test stays an extra only for the README's command (a new venv's pip may predate
    # dependency groups): the test group plus the extras the tests run.
    assert set(extras) == {"sweep", "plot", "nats", "cluster", "top", "otel", "test"}
    groups = _groups()
    assert extras["test"] == ["trio-actors[sweep,nats,cluster,top,otel]", *groups["test"]]
    tools = ["test", "docs", "lint", "bench"]
    assert list(groups) == [*tools, "dev"]
    assert groups["dev"] == [{"include-group": name} for name in tools]


def test_the_top_extra_has_what_top_draws_with() -> None:
    extras = _project()["optional-dependencies"]
    assert isinstance(extras, dict)
    assert _names(extras["top"]) == {"rich"}


def test_the_otel_extra_is_the_opentelemetry_api_alone() -> None:
    extras = _project()["optional-dependencies"]
    assert isinstance(extras, dict)
    assert _names(extras["otel"]) == {"opentelemetry-api"}  # (the SDK is the application's)
    assert "opentelemetry-sdk" in _names(_groups()["test"])  # type: ignore[arg-type]  # (the tests')


def test_the_version_has_one_source() -> None:
    project = _project()
    assert "version" not in project
    assert project["dynamic"] == ["version"]
    with PYPROJECT.open("rb") as file:
        dynamic = tomllib.load(file)["tool"]["setuptools"]["dynamic"]
    assert dynamic["version"] == {"attr": "trio_actors.__version__"}
    assert trio_actors.__version__ == "0.1.0"
    assert trio_actors.__version__ == importlib.metadata.version("trio-actors")


@pytest.mark.parametrize("module", ["pyperf", "rich"])
def test_a_sweep_without_its_extra_is_a_one_line_error_with_exit_code_2(
    module: str, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, module, None)  # import <module> fails
    with pytest.raises(SystemExit) as exit_:
        main(["sweep", "--quick"])
    assert exit_.value.code == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.splitlines()
    assert line.startswith(f"trio-actors sweep: needs {module}, not installed;")
    assert line.endswith('pip install "trio-actors[sweep]"')
    assert SWEEP_EXTRA == 'pip install "trio-actors[sweep]"'


def test_both_missing_are_named_in_the_one_line(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setitem(sys.modules, "pyperf", None)
    monkeypatch.setitem(sys.modules, "rich", None)
    with pytest.raises(SystemExit) as exit_:
        main(["sweep"])
    assert exit_.value.code == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert "needs pyperf and rich, not installed" in line


_CONTRACTS_WITHOUT_THE_EXTRA = """
import sys

sys.modules["pyperf"] = None  # import pyperf fails, as when it is not installed
sys.modules["rich"] = None
from trio_actors.sweeps._cli import main

code = main(["contracts", "--only", "T1"])
imported = sorted(m for m in sys.modules if m.startswith("trio_actors.sweeps."))
print("imported:", ",".join(imported))
sys.exit(code)
"""


def test_contracts_run_without_pyperf_or_rich() -> None:
    # A fresh interpreter: in this one, other tests have imported the sweep modules.
    done = subprocess.run(
        [sys.executable, "-c", _CONTRACTS_WITHOUT_THE_EXTRA],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert "contracts: 1 passed, 0 failed" in done.stdout
    assert "imported: trio_actors.sweeps._cli\n" in done.stdout  # nothing else of the sweep

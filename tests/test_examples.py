"""Every example in ``examples/`` runs, and does what its docs say."""

import importlib.util
import logging
from pathlib import Path
from types import ModuleType

import trio
import trio.testing

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_supervision_example_restarts_with_backoff_and_escalates(
    caplog: object,
) -> None:
    logging.getLogger("trio_actors").setLevel(logging.CRITICAL)
    example = load("supervision")
    report = trio.run(example.main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert report == [
        "job 0 fetched by fetcher #1 (waited 0.0s)",
        "job 1 fetched by fetcher #1 (waited 0.0s)",
        "failed: job 2 hit the flaky dependency (waited 0.0s)",
        "job 3 fetched by fetcher #2 (waited 0.1s)",
        "job 4 fetched by fetcher #2 (waited 0.0s)",
        "failed: job 5 hit the flaky dependency (waited 0.0s)",
        "pipeline started 2 times",
        "job 0 fetched by fetcher #3",
    ]


def test_the_readme_example_runs() -> None:
    readme = (EXAMPLES.parent / "README.md").read_text(encoding="utf-8")
    code = readme.split("```python\n", 1)[1].split("```", 1)[0]
    exec(compile(code, "README.md", "exec"), {"__name__": "readme_example"})

"""``--workload MODULE:FACTORY``: the factory contract, its errors, and a measurement."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from trio_actors import ServingPolicy
from trio_actors.sweeps import _shapes
from trio_actors.sweeps._cli import main
from trio_actors.sweeps._workload import WorkloadError, load_workload, make_workload
from trio_actors.sweeps.example_workload import Stock, messages, workload

BAD_FACTORIES = """
import itertools
import trio_actors as ta

class Echo(ta.Actor):
    def receive(self, message):
        return message

shared = Echo()
not_callable = 42

def raises():
    raise RuntimeError("boom")

def not_a_pair():
    return Echo()

def not_an_actor():
    return object(), iter([1])

def not_iterable():
    return Echo(), 42

def runs_out():
    return Echo(), [1, 2, 3]

def same_actor():
    return shared, itertools.repeat(1)

def good():
    return Echo(), itertools.count()
"""


@pytest.fixture
def factories(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    (tmp_path / "my_workloads.py").write_text(textwrap.dedent(BAD_FACTORIES), encoding="utf-8")
    monkeypatch.chdir(tmp_path)  # found in the current directory, as documented
    monkeypatch.syspath_prepend(str(tmp_path))
    return "my_workloads"


@pytest.mark.parametrize(
    ("attribute", "complaint"),
    [
        ("raises", "the factory raised RuntimeError: boom"),
        ("not_a_pair", "must return (actor, messages)"),
        ("not_an_actor", "not a trio_actors.Actor instance"),
        ("not_iterable", "not an iterable"),
        ("runs_out", "the messages ran out after 3"),
    ],
)
def test_a_factory_breaking_the_contract_is_named(
    factories: str, attribute: str, complaint: str
) -> None:
    factory = load_workload(f"{factories}:{attribute}")
    with pytest.raises(WorkloadError, match=complaint.replace("(", r"\(").replace(")", r"\)")):
        make_workload(factory, f"{factories}:{attribute}", 10)


def test_a_factory_must_make_a_new_actor_each_time(factories: str) -> None:
    factory = load_workload(f"{factories}:same_actor")
    _shapes.workload_tells(
        ServingPolicy(), lambda n: make_workload(factory, "same_actor", n), 1, 10
    )  # the first call spawns the shared actor
    with pytest.raises(WorkloadError, match="a new actor each time"):
        make_workload(factory, "same_actor", 10)


@pytest.mark.parametrize(
    ("spec", "complaint"),
    [
        ("no_colon", "expected MODULE:FACTORY"),
        (":factory", "expected MODULE:FACTORY"),
        ("no_such_module_here:workload", "does not import: ModuleNotFoundError"),
        ("my_workloads:missing", "has no attribute 'missing'"),
        ("my_workloads:not_callable", "is not callable"),
    ],
)
def test_bad_specs_are_named(factories: str, spec: str, complaint: str) -> None:
    with pytest.raises(WorkloadError, match=complaint):
        load_workload(spec)


def test_the_command_refuses_a_bad_workload_before_measuring(
    factories: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["sweep", "--quick", "--workload", f"{factories}:runs_out"])
    assert exit_.value.code == 2
    err = capsys.readouterr().err
    assert "the messages ran out after 3" in err
    assert "Traceback" not in err


def test_a_workload_is_measured_until_every_message_is_handled(factories: str) -> None:
    handled: list[int] = []

    def make(count: int) -> tuple[Stock, list[tuple[object, ...]]]:
        actor, stream = workload()
        taken = [next(stream) for _ in range(count)]
        original = actor.receive

        def counting(message: tuple[object, ...]) -> int | None:
            handled.append(1)
            return original(message)

        actor.receive = counting  # type: ignore[method-assign]
        return actor, taken

    seconds = _shapes.workload_tells(ServingPolicy(), make, 2, 500)
    assert seconds > 0
    assert len(handled) == 1_000


def test_the_example_workload_is_deterministic_and_valid() -> None:
    first = [next(messages()) for _ in range(5)]
    assert first == [next(messages()) for _ in range(5)]
    actor, taken = make_workload(workload, "example", 2_000)
    assert isinstance(actor, Stock)
    assert any(m == ("report",) for m in taken)
    for message in taken:
        actor.receive(message)
    assert all(quantity >= 0 for quantity in actor.quantities.values())

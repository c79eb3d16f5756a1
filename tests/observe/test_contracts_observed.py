"""The contract suite holds in an observed system -- traced, metered, or both.

Traced: every contract (T1... and the remote
RT...) opens its systems with ``tracing=`` -- an always-on sampler, every ask traced,
and with ``tells="all"`` every tell too, so that each message travels as a traced
envelope -- and must pass as it does untraced. The observed cells and envelopes
change no lifecycle or cancellation promise. That tracing really ran is checked too:
each contract opened traced systems, and they made spans of every kind. And the
suite still bites there: every broken runtime of
``tests/test_contracts_catch_broken_runtimes.py`` is caught in a traced system too --
but the three that break the idle ask's path, which a sampled ask never takes (it
is always queued): those are caught when every ask is sampled out.

Metered: every contract opens its systems with ``metrics=``, every round and every
ask timed (the metered round clock reading after each message, each ask through the
timed cell class), alone and beside tracing; each must pass as it does without, and
the metrics must have counted what the contracts did."""

from __future__ import annotations

import sys
from collections import Counter
from collections.abc import Iterator
from typing import Any

import pytest
from opentelemetry.sdk.trace import ReadableSpan, SpanProcessor, TracerProvider
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ALWAYS_ON, Sampler

import test_contracts_catch_broken_runtimes as broken
import trio_actors as ta
from trio_actors.contracts import REGISTRY
from trio_actors.observe import Metrics, Tracing

pytestmark = pytest.mark.usefixtures("no_context_left_behind")

# Contracts that open no system themselves (they check the runtime's tables).
OPENS_NONE: frozenset[str] = frozenset()


class Counting(SpanProcessor):
    """Counts the spans that end, by kind and by the first word of their name (the
    contracts make hundreds of thousands: kept, they would only cost memory)."""

    def __init__(self) -> None:
        self.kinds: Counter[str] = Counter()
        self.names: Counter[str] = Counter()

    def on_end(self, span: ReadableSpan) -> None:
        self.kinds[span.kind.name] += 1
        self.names[span.name.split(" ")[0]] += 1


def _patch_openers(
    monkeypatch: pytest.MonkeyPatch, observed: dict[str, Any], opened: list[int]
) -> None:
    """Every contract module's ``open_actor_system`` and ``system_for`` open observed
    systems (``observed``: the ``tracing=`` and ``metrics=`` to open them with), and
    count them."""
    real = ta.open_actor_system

    def traced(**kwargs: Any) -> Any:
        opened[0] += 1
        return real(**observed, **kwargs)

    def system_for(policy: ta.ServingPolicy) -> Any:
        return traced(serving=policy)

    modules = [m for n, m in sys.modules.items() if n.startswith("trio_actors.contracts")]
    patched = 0
    for module in modules:
        if getattr(module, "open_actor_system", None) is real:
            monkeypatch.setattr(module, "open_actor_system", traced)
            patched += 1
        if hasattr(module, "system_for") and callable(module.system_for):
            monkeypatch.setattr(module, "system_for", system_for)
            patched += 1
    assert patched >= 10, patched


@pytest.fixture
def counting() -> Iterator[tuple[Counting, TracerProvider]]:
    processor = Counting()
    provider = TracerProvider(sampler=ALWAYS_ON)
    provider.add_span_processor(processor)
    yield processor, provider
    provider.shutdown()


@pytest.mark.parametrize("tells", ["in_trace", "all"])
def test_every_contract_holds_in_a_traced_system(
    monkeypatch: pytest.MonkeyPatch,
    counting: tuple[Counting, TracerProvider],
    tells: Any,
) -> None:
    processor, provider = counting
    opened = [0]
    _patch_openers(monkeypatch, {"tracing": Tracing(provider=provider, tells=tells)}, opened)
    assert _run_every_contract(opened) == ({}, [])
    kinds, names = processor.kinds, processor.names
    assert kinds["CLIENT"] > 1_000, kinds
    assert kinds["SERVER"] > 1_000, kinds
    assert names["restart"] > 0, names
    assert names["stop"] > 0, names
    if tells == "all":
        assert kinds["PRODUCER"] > 10_000, kinds
        assert kinds["CONSUMER"] > 1_000, kinds


def _run_every_contract(opened: list[int]) -> tuple[dict[str, str], list[str]]:
    """Every contract's result: those that failed (and why), and those that opened no
    observed system."""
    failed: dict[str, str] = {}
    unobserved: list[str] = []
    for contract_id, contract in REGISTRY.items():
        before = opened[0]
        result = contract.run(ta.ServingPolicy())
        if not result.passed:
            failed[contract_id] = result.reason
        if opened[0] == before and contract_id not in OPENS_NONE:
            unobserved.append(contract_id)
    return failed, unobserved


@pytest.mark.parametrize("traced", [False, True], ids=["metered", "metered-and-traced"])
def test_every_contract_holds_in_a_metered_system(
    monkeypatch: pytest.MonkeyPatch,
    counting: tuple[Counting, TracerProvider],
    traced: bool,
) -> None:
    from opentelemetry.sdk.metrics import MeterProvider
    from opentelemetry.sdk.metrics.export import InMemoryMetricReader

    reader = InMemoryMetricReader()
    meters = MeterProvider(metric_readers=[reader])
    observed: dict[str, Any] = {
        "metrics": Metrics(provider=meters, turns_timed_every=1, asks_timed_every=1)
    }
    if traced:
        observed["tracing"] = Tracing(provider=counting[1], tells="all")
    opened = [0]
    _patch_openers(monkeypatch, observed, opened)
    assert _run_every_contract(opened) == ({}, [])
    counted: dict[str, float] = {}
    data = reader.get_metrics_data()
    assert data is not None
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                points: list[Any] = list(metric.data.data_points)
                many = "count" if metric.name.endswith(".duration") else "value"
                counted[metric.name] = sum(getattr(point, many) for point in points)
    assert counted["trio_actors.messages.handled"] > 10_000, counted
    assert counted["trio_actors.restarts"] > 0, counted
    assert counted["trio_actors.dead_letters"] > 0, counted
    assert counted["trio_actors.turn.duration"] > 1_000, counted
    assert counted["trio_actors.ask.duration"] > 1_000, counted
    if traced:
        assert counting[0].kinds["SERVER"] > 1_000, counting[0].kinds


# The mutants of the idle ask's path (``_core/_idle_ask.py``): not on a sampled ask's.
IDLE_ASK_MUTANTS = {
    "idle_ask_ignores_earlier_cancellation",
    "idle_ask_is_no_checkpoint",
    "idle_ask_skips_its_last_checkpoint",
}


def _traced(sampler: Sampler) -> dict[str, Any]:
    """Systems traced with ``sampler``, every tell too."""
    return {"tracing": Tracing(provider=TracerProvider(sampler=sampler), tells="all")}


def _missed(
    monkeypatch: pytest.MonkeyPatch, observed: dict[str, Any], only: set[str] | None
) -> set[str]:
    """The mutants (of ``only``, if given) that their contract does not catch when
    its systems are observed as ``observed`` says. (Each contract is first shown to
    hold so observed, once: most have more than one mutant.)"""
    missed = set()
    holds: set[str] = set()
    for contract_id, mutant in broken.CASES:
        if only is not None and mutant.__name__ not in only:
            continue
        with monkeypatch.context() as patch:
            _patch_openers(patch, observed, [0])
            if contract_id not in holds:
                assert REGISTRY[contract_id].run(ta.ServingPolicy()).passed, contract_id
                holds.add(contract_id)
            mutant(patch)
            if REGISTRY[contract_id].run(ta.ServingPolicy()).passed:
                missed.add(mutant.__name__)
    return missed


@pytest.mark.replaces_the_kernel
@pytest.mark.usefixtures("debug_checks_only_collect")
@pytest.mark.timeout(180)  # (every mutant, and each contract once unbroken)
def test_every_broken_runtime_is_caught_in_a_traced_system_too(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert {mutant.__name__ for _, mutant in broken.CASES} >= IDLE_ASK_MUTANTS
    assert _missed(monkeypatch, _traced(ALWAYS_ON), None) == IDLE_ASK_MUTANTS
    assert _missed(monkeypatch, _traced(ALWAYS_OFF), IDLE_ASK_MUTANTS) == set()


@pytest.mark.replaces_the_kernel
@pytest.mark.usefixtures("debug_checks_only_collect")
@pytest.mark.timeout(180)  # (every mutant, and each contract once unbroken)
def test_every_broken_runtime_is_caught_in_a_metered_system_too(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from opentelemetry.sdk.metrics import MeterProvider

    metrics = Metrics(provider=MeterProvider(), turns_timed_every=1, asks_timed_every=1)
    assert _missed(monkeypatch, {"metrics": metrics}, None) == set()

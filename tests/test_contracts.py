"""Every contract holds under the default policy; the absolute ones break where
contracts.md says they must (T10 at batch 128, T11 at cleanup batch 64, T13 with no
time slice) while every other contract still holds there."""

import pytest

from trio_actors import ServingPolicy
from trio_actors.contracts import REGISTRY, run_contracts


def test_the_registry_holds_its_contracts_in_order() -> None:
    remote = [
        *("RT1", "RT2", "RT4", "RT5", "RT6", "RT7", "RT9", "RT19", "RT21", "RT32", "RT33"),
        *("RT34", "RT35", "RT36"),
    ]
    expected = [*(f"T{i}" for i in range(1, 34)), *remote]
    assert list(REGISTRY) == expected


@pytest.mark.parametrize("contract_id", list(REGISTRY))
def test_contract_holds_under_the_default_policy(contract_id: str) -> None:
    result = REGISTRY[contract_id].run(ServingPolicy())
    assert result.passed, result.reason


@pytest.mark.parametrize(
    ("policy", "breaks"),
    [
        (ServingPolicy(batch=128), "T10"),
        (ServingPolicy(cleanup_batch=64), "T11"),
        (ServingPolicy(time_slice=None), "T13"),
    ],
    ids=["batch-128", "cleanup-64", "no-time-slice"],
)
def test_an_absolute_contract_breaks_where_the_spec_says(
    policy: ServingPolicy, breaks: str
) -> None:
    results = {r.id: r for r in run_contracts(policy)}
    failed = sorted(i for i, r in results.items() if not r.passed)
    assert failed == [breaks], {i: results[i].reason for i in failed}


@pytest.mark.parametrize("batch", [1, 16, 32, 100])
def test_smaller_batches_keep_every_contract(batch: int) -> None:
    failed = [r for r in run_contracts(ServingPolicy(batch=batch)) if not r.passed]
    assert not failed, [(r.id, r.reason) for r in failed]


def test_an_unknown_contract_id_is_a_clear_error() -> None:
    with pytest.raises(KeyError, match="unknown contract ids \\['T99'\\]"):
        run_contracts(ids=["T99"])

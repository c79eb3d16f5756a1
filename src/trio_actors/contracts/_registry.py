"""The contract registry: each contract is a function of a :class:`ServingPolicy`.

A contract runs its own ``trio.run`` under a ``trio.testing.MockClock`` and either
returns (it holds) or raises :class:`ContractViolation` with the reason. The registry
maps ids (``"T1"`` ... ``"T33"``, ``"RT1"`` ...) to :class:`Contract` records, in id order; pytest,
the ``trio-actors contracts`` command and the sweep tool all run contracts from here.
"""

from __future__ import annotations

import re
import traceback
from collections.abc import Callable, Iterable

import attrs

from .. import ServingPolicy

CheckFunction = Callable[[ServingPolicy], None]


class ContractViolation(AssertionError):
    """A contract did not hold; the message says what was observed."""


@attrs.frozen
class Contract:
    """One contract of the suite.

    Attributes:
        id: ``"T1"`` ... ``"T33"``, or ``"RT1"`` ... for the contracts across nodes.
        title: a few words.
        description: what must hold, in one or two sentences.
        check: runs the contract under a policy; raises :class:`ContractViolation`.
        absolute: True for contracts that encode timing promises some policies
            break (T10, T11, T13); False for those that hold for every sane policy.
    """

    id: str
    title: str
    description: str
    check: CheckFunction = attrs.field(repr=False)
    absolute: bool = False

    def run(self, policy: ServingPolicy | None = None) -> ContractResult:
        """Run the contract and return its result; never raises for a violation."""
        policy = ServingPolicy() if policy is None else policy
        try:
            self.check(policy)
        except ContractViolation as violation:
            return ContractResult(self.id, self.title, False, str(violation))
        except BaseExceptionGroup as group:
            violations, _ = group.split(ContractViolation)
            if violations is not None:
                first = _leaves(violations)[0]
                return ContractResult(self.id, self.title, False, str(first))
            return ContractResult(self.id, self.title, False, f"crashed: {group!r}")
        except Exception as error:  # a crash is a failure too, with its cause
            where = traceback.extract_tb(error.__traceback__)[-1]
            reason = f"crashed: {error!r} at {where.filename}:{where.lineno}"
            return ContractResult(self.id, self.title, False, reason)
        return ContractResult(self.id, self.title, True, "")


@attrs.frozen
class ContractResult:
    """The outcome of one contract under one policy."""

    id: str
    title: str
    passed: bool
    reason: str


def _leaves(group: BaseExceptionGroup[BaseException]) -> list[BaseException]:
    found: list[BaseException] = []
    for error in group.exceptions:
        if isinstance(error, BaseExceptionGroup):
            found.extend(_leaves(error))
        else:
            found.append(error)
    return found


def _id_key(contract_id: str) -> tuple[bool, int]:
    """T1 ... T33, then RT1 ... (the contracts across nodes)."""
    return (contract_id.startswith("RT"), int(contract_id.lstrip("RT")))


REGISTRY: dict[str, Contract] = {}
"""Every contract, by id, in id order."""


def contract(
    contract_id: str, title: str, description: str, *, absolute: bool = False
) -> Callable[[CheckFunction], CheckFunction]:
    """Register ``check`` as contract ``contract_id``."""
    if not re.fullmatch(r"R?T[1-9][0-9]*", contract_id):
        raise ValueError(f"contract id must look like 'T12' (or 'RT5'), got {contract_id!r}")

    def register(check: CheckFunction) -> CheckFunction:
        if contract_id in REGISTRY:
            raise ValueError(f"contract {contract_id} is registered twice")
        REGISTRY[contract_id] = Contract(contract_id, title, description, check, absolute)
        ordered = sorted(REGISTRY.items(), key=lambda item: _id_key(item[0]))
        REGISTRY.clear()
        REGISTRY.update(ordered)
        return check

    return register


def run_contracts(
    policy: ServingPolicy | None = None, ids: Iterable[str] | None = None
) -> list[ContractResult]:
    """Run the given contracts (all by default) under ``policy``, in id order.

    Raises:
        KeyError: an id is not registered (the message lists the known ids).
    """
    selected = list(REGISTRY) if ids is None else list(ids)
    unknown = [i for i in selected if i not in REGISTRY]
    if unknown:
        raise KeyError(f"unknown contract ids {unknown}; known: {', '.join(REGISTRY)}")
    return [REGISTRY[i].run(policy) for i in selected]


__all__ = [
    "REGISTRY",
    "Contract",
    "ContractResult",
    "ContractViolation",
    "contract",
    "run_contracts",
]

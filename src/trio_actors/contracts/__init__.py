"""The contract suite: lifecycle and ask-cancellation contracts as library code.

Each contract takes a :class:`~trio_actors.ServingPolicy`, runs its own
``trio.run`` under a ``MockClock`` and reports pass or fail with a reason. T1--T33
hold in one system; RT1--RT34 across nodes (over an in-memory bus), registered where
the ``cluster`` extra is installed. They are
run by pytest (default policy), by ``trio-actors contracts`` (any policy) and by the
sweep tool (every candidate policy).

>>> from trio_actors.contracts import run_contracts
>>> all(result.passed for result in run_contracts())  # doctest: +SKIP
True
"""

from . import (
    _backpressure,
    _bounded,
    _cancellation,
    _expected,
    _groups,
    _messaging,
    _nothing_lost,
    _scheduling,
    _shutdown,
    _shutdown_timeout,
    _stopping,
    _supervision,
    _timers,
)

try:  # the contracts across nodes, where the cluster extra (msgspec) is installed
    from . import _remote
except ModuleNotFoundError as missing:  # pragma: no cover - the bare wheel
    if missing.name != "msgspec":
        raise
else:
    del _remote
from ._registry import REGISTRY as REGISTRY
from ._registry import Contract as Contract
from ._registry import ContractResult as ContractResult
from ._registry import ContractViolation as ContractViolation
from ._registry import run_contracts as run_contracts

del (
    _backpressure,
    _bounded,
    _cancellation,
    _expected,
    _groups,
    _messaging,
    _nothing_lost,
    _scheduling,
    _shutdown,
)
del _shutdown_timeout, _stopping, _supervision, _timers

__all__ = [
    "REGISTRY",
    "Contract",
    "ContractResult",
    "ContractViolation",
    "run_contracts",
]

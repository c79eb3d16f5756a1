"""T21 and T31 as registered contracts: a fixed set of seeded programs each.

The pytest suite draws its programs with hypothesis (2,000 examples in CI); the
registered contracts run programs drawn by :func:`~._program.random_program` from
fixed seeds, so that they are quick and the same every time they run. T31 runs
seeds of its own, after T21's invariant holds on each of them.
"""

from __future__ import annotations

import random
from collections.abc import Callable

from ... import ServingPolicy
from .._harness import require
from .._registry import contract
from ._invariants import ProgramRun, conserved
from ._program import random_program
from ._run import run_program

SEEDED_PROGRAMS = 150
"""How many seeded programs the registered contract runs."""


@contract(
    "T21",
    "nothing lost",
    "any interleaving of tell, ask, cancel, stop, drain-stop and handler failure "
    "across several actors ends with every message exactly one of handled / "
    "withdrawn / failed back / dead letter, and no task left behind",
)
def nothing_lost(policy: ServingPolicy) -> None:
    _seeded(range(SEEDED_PROGRAMS), policy, lambda run: None)


def _seeded(seeds: range, policy: ServingPolicy, check: Callable[[ProgramRun], None]) -> None:
    """Run the seeded programs (T21's invariant on each), then ``check`` each run."""
    for seed in seeds:
        program = random_program(random.Random(seed))
        try:
            check(run_program(program, policy))
        except AssertionError as violation:
            require(False, f"seed {seed}: {violation}")


@contract(
    "T31",
    "conservation",
    "for any program, per actor, what was sent equals handled + withdrawn + failed "
    "back + dead letters (+ still queued) in the runtime's own statistics, and the "
    "system's dead-letter counts are the sums of its actors'",
)
def conservation(policy: ServingPolicy) -> None:
    _seeded(range(10_000, 10_000 + CONSERVATION_PROGRAMS), policy, conserved)


CONSERVATION_PROGRAMS = 60
"""How many seeded programs T31 runs (others than T21's)."""


__all__ = ["CONSERVATION_PROGRAMS", "SEEDED_PROGRAMS", "conservation", "nothing_lost"]

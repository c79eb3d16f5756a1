"""Shared machinery for contracts: virtual time, per-step measurement, log capture.

Everything here is deterministic: time is a ``MockClock`` that moves only when a
handler "costs" something (``clock.jump``) or, with autojump, when every task is
blocked. Where a bound could depend on trio's shuffling of tasks inside one
scheduler batch, it is measured per task step with an :class:`StepMeter` (an
``Instrument``): a figure no ordering can change.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import trio
import trio.testing

from .. import ServingPolicy, open_actor_system
from ._registry import ContractViolation

T = TypeVar("T")


DEADLOCK_AFTER = 3600.0
"""Virtual seconds after which a contract's program counts as deadlocked."""


def run_virtual(
    main: Callable[[trio.testing.MockClock], Awaitable[T]],
    *,
    instruments: tuple[trio.abc.Instrument, ...] = (),
) -> T:
    """``trio.run(main, clock)`` under a fresh autojumping ``MockClock``.

    Time moves only when a handler costs something (``clock.jump``) or when every
    task is blocked (autojump to the next deadline), so a program that deadlocks
    reaches :data:`DEADLOCK_AFTER` at once and fails as a violation rather than
    hanging the suite.
    """
    clock = trio.testing.MockClock(autojump_threshold=0)

    async def entry() -> T:
        with trio.move_on_after(DEADLOCK_AFTER):
            return await main(clock)
        raise ContractViolation(
            f"deadlocked: still running after {DEADLOCK_AFTER:.0f} s of virtual time"
        )

    return trio.run(entry, clock=clock, instruments=list(instruments))


def system_for(policy: ServingPolicy) -> Any:
    """``open_actor_system(serving=policy)``: the context every contract uses."""
    return open_actor_system(serving=policy)


class StepMeter(trio.abc.Instrument):
    """Measures a quantity over every task step, reporting the largest change.

    ``probe()`` is read before and after each task step; :attr:`largest` is the
    largest increase seen in one step, and :attr:`worst_task` names that step's task.
    """

    def __init__(self, probe: Callable[[], float]) -> None:
        self.probe = probe
        self.largest: float = 0.0
        self.worst_task = ""
        self.steps = 0
        self._before: float = 0.0
        self.active = True

    def before_task_step(self, task: trio.lowlevel.Task) -> None:
        if self.active:
            self._before = self.probe()

    def after_task_step(self, task: trio.lowlevel.Task) -> None:
        if self.active:
            self.steps += 1
            change = self.probe() - self._before
            if change > self.largest:
                self.largest = change
                self.worst_task = task.name


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@contextmanager
def captured_failures() -> Iterator[list[logging.LogRecord]]:
    """Collect the runtime's error log records (every failure is logged)."""
    logger = logging.getLogger("trio_actors")
    handler = _Collect()
    old_propagate = logger.propagate
    logger.addHandler(handler)
    logger.propagate = False
    try:
        yield handler.records
    finally:
        logger.removeHandler(handler)
        logger.propagate = old_propagate


def require(condition: bool, reason: str) -> None:
    """Raise :class:`ContractViolation` with ``reason`` unless ``condition``."""
    if not condition:
        raise ContractViolation(reason)


def count_tasks() -> int:
    """How many tasks exist in this trio run (to check that none is left behind)."""

    def walk(task: trio.lowlevel.Task) -> int:
        return 1 + sum(
            walk(child) for nursery in task.child_nurseries for child in nursery.child_tasks
        )

    return walk(trio.lowlevel.current_root_task())  # type: ignore[arg-type]


async def settle() -> None:
    """Wait until every other task is blocked (the runtime is idle)."""
    await trio.testing.wait_all_tasks_blocked()


__all__ = [
    "StepMeter",
    "captured_failures",
    "count_tasks",
    "require",
    "run_virtual",
    "settle",
    "system_for",
]

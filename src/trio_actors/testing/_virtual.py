"""Virtual time: run a program under an autojumping ``MockClock``."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import trio
import trio.testing

T = TypeVar("T")


def run_virtual(
    async_fn: Callable[..., Awaitable[T]], *args: Any, autojump_threshold: float = 0
) -> T:
    """``trio.run(async_fn, *args)`` under a fresh ``MockClock`` that autojumps.

    With the default ``autojump_threshold=0`` virtual time jumps to the next
    deadline as soon as every task is blocked, so sleeps, timeouts and restart
    backoffs cost no real time and the run is deterministic.
    """
    clock = trio.testing.MockClock(autojump_threshold=autojump_threshold)
    return trio.run(async_fn, *args, clock=clock)


__all__ = ["run_virtual"]

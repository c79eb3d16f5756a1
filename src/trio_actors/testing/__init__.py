"""Helpers for testing your own actors deterministically.

The runtime reads only the trio clock, so a test that runs under
``trio.testing.MockClock`` controls every time slice, deadline and backoff. The
full testing kit (a probe actor, assertions on dead letters and statistics, a
pytest-trio friendly system fixture) is planned; for now this module offers the one
piece every such test needs:

>>> import trio_actors as ta
>>> from trio_actors.testing import run_virtual
>>> class Echo(ta.Actor):
...     def receive(self, message):
...         return message
>>> async def main():
...     async with ta.open_actor_system() as system:
...         ref = system.spawn(Echo)
...         await trio.sleep(3600)  # an hour of virtual time passes at once
...         return await ref.ask("hi")
>>> import trio
>>> run_virtual(main)
'hi'
"""

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

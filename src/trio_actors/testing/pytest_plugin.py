"""pytest fixtures for testing actors (registered through the ``pytest11`` entry
point when trio-actors is installed; they need pytest-trio).

``actor_system``
    an :class:`~trio_actors.ActorSystem` opened for the test and closed after it
    (every actor stopped, as at the end of an ``async with open_actor_system()``).
    Ask for pytest-trio's ``autojump_clock`` fixture in the same test to run it
    in virtual time: sleeps, timers, backoffs and probe timeouts then cost no real
    time, and the test is deterministic: the system is opened with ``seed=0``, so
    even the jitter of restart backoff is the same on every run.
"""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from .. import ActorSystem, open_actor_system


@pytest.fixture
async def actor_system() -> AsyncIterator[ActorSystem]:
    """An actor system for the test (``seed=0``), closed after it."""
    async with open_actor_system(seed=0) as system:
        yield system

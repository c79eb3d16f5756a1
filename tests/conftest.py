import logging
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from nats_server import NatsServer, running_nats_server
from trio_actors.actors._debug import enable_serving_checks

# Debug mode for every test: the serving invariants are asserted as the runtime runs
# (trio_actors/actors/_debug.py); a violation fails the test that caused it.
enable_serving_checks()

settings.register_profile(
    "ci",
    max_examples=2_000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
)
settings.register_profile(
    "dev", max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.register_profile(
    "soak",
    max_examples=50_000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))


@pytest.fixture(autouse=True)
def _quiet_failure_log() -> None:
    # Contracts and tests make handlers fail on purpose; the runtime logs every
    # failure at ERROR. Keep the records (caplog still sees them) off the terminal.
    logging.getLogger("trio_actors").setLevel(logging.ERROR)


@pytest.fixture
def nats_server(tmp_path: Path) -> Iterator[NatsServer]:
    """A real nats-server of the test's own on a free loopback port (tests/nats_server.py)."""
    with running_nats_server(tmp_path) as server:
        yield server

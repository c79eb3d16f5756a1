import logging
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio.testing
from hypothesis import HealthCheck, settings

import trio_actors as ta
from nats_server import NatsServer, running_nats_server
from trio_actors._core._debug import collecting_violations, enable_serving_checks

# Debug mode for every test: the serving invariants are asserted as the runtime runs
# (trio_actors/_core/_debug.py); a violation fails the test that caused it. Not on the
# compiled build, whose methods the checks cannot replace (they run on the pure one).
if not ta.compiled:
    enable_serving_checks()


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "replaces_the_kernel: the test replaces or spies on a method of the kernel's "
        "compiled modules (a mutant, a spy): it runs on the pure-Python build only, where "
        "the kernel's own calls go through the replacement",
    )


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not ta.compiled:
        return
    skip = pytest.mark.skip(
        reason="replaces a method of the compiled kernel, whose own calls would not go "
        "through the replacement: runs on the pure-Python build"
    )
    for item in items:
        if item.get_closest_marker("replaces_the_kernel") is not None:
            item.add_marker(skip)


# Hypothesis profiles, chosen by HYPOTHESIS_PROFILE: "dev" (the default, for a run
# while working: a few seconds for the property tests), "ci" (what .ci/run sets: more
# examples) and "soak" (many more, random: a search for new failures, not a gate). The
# default and CI's are derandomized: each run tests the same examples, as every other
# test here is deterministic.
settings.register_profile(
    "dev",
    max_examples=300,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
)
settings.register_profile(
    "ci",
    max_examples=2_000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=True,
)
settings.register_profile(
    "soak",
    max_examples=50_000,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "dev"))


@pytest.fixture(autouse=True)
def _quiet_failure_log() -> None:
    # Contracts and tests make handlers fail on purpose; the runtime logs every
    # failure at ERROR. Keep the records (caplog still sees them) off the terminal.
    logging.getLogger("trio_actors").setLevel(logging.ERROR)


@pytest.fixture
def debug_checks_only_collect() -> Iterator[None]:
    """For a test that breaks the runtime on purpose (a mutant) to show that a contract
    or a test catches it by itself: debug mode's checks, which would stop many broken
    runtimes first, only collect their violations during the test. (On the compiled
    build, where debug mode is off, nothing to collect.)"""
    if ta.compiled:
        yield
        return
    with collecting_violations():
        yield


@pytest.fixture
def nats_server(tmp_path: Path) -> Iterator[NatsServer]:
    """A real nats-server of the test's own on a free loopback port (tests/nats_server.py)."""
    with running_nats_server(tmp_path) as server:
        yield server


# --- nodes (tests/remote): every test runs over the in-memory bus under an autojumping
# MockClock (deterministic) and over a real nats-server on the real clock.


@pytest.fixture(params=["memory", "nats"])
def transport_kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


@pytest.fixture
def clock(transport_kind: str) -> trio.testing.MockClock | None:
    """pytest-trio runs the test under this clock when it is one -- and takes a clock
    only from the test's own arguments: a test that uses ``cluster_here`` asks for
    ``clock`` too (else its in-memory variant runs on the real clock)."""
    return trio.testing.MockClock(autojump_threshold=0) if transport_kind == "memory" else None


@pytest.fixture
def cluster_here(
    transport_kind: str, clock: trio.testing.MockClock | None, request: pytest.FixtureRequest
) -> ta.Cluster:
    """Where the test's nodes meet (give ``types``/``errors`` with ``attrs.evolve``)."""
    if transport_kind == "memory":
        from trio_actors.remote import MemoryBus  # (imports msgspec: only these tests)

        return ta.Cluster(bus=MemoryBus())
    server: NatsServer = request.getfixturevalue("nats_server")
    return ta.Cluster(server.url)


@pytest.fixture
def no_context_left_behind(caplog: pytest.LogCaptureFixture) -> Iterator[None]:
    """For the tracing tests (tests/observe): fail if OpenTelemetry complained -- its
    ``detach`` of a context made current in another task (or twice) only logs "Failed
    to detach context", the sign of a span left current where it does not belong."""
    with caplog.at_level("ERROR", logger="opentelemetry.context"):
        yield
    records = caplog.get_records("setup") + caplog.get_records("call")
    complaints = [r.getMessage() for r in records if r.name.startswith("opentelemetry")]
    assert complaints == []

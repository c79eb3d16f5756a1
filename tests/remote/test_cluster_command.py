"""``trio-actors cluster`` and ``trio-actors node`` as a person runs them: a server
started when none answers, the nodes' output after their names, their exit codes,
and Ctrl-C reaching every node."""

from __future__ import annotations

import queue
import signal
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

APPS = Path(__file__).parent / "apps"
WITHIN = 60.0  # seconds: a safety net for a loaded machine, not a speed check


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def cluster(*arguments: str) -> subprocess.Popen[str]:
    command = [sys.executable, "-m", "trio_actors", "cluster", *arguments]
    return subprocess.Popen(
        command, cwd=APPS, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )


def test_two_nodes_find_and_ask_each_other_and_the_cluster_exits_0() -> None:
    url = f"nats://127.0.0.1:{free_port()}"
    process = cluster("--nodes", "2", "pingpong:main", "--cluster", url)
    output, _ = process.communicate(timeout=WITHIN)
    assert process.returncode == 0, output
    assert "cluster: started nats-server" in output
    assert "[node-0] node-0 asked node-1: ('hello from', 'node-0')" in output
    assert "[node-1] node-1 asked node-0: ('hello from', 'node-1')" in output
    assert "cluster: node-0 exited 0, node-1 exited 0" in output


def test_a_failing_node_makes_the_cluster_exit_non_zero() -> None:
    url = f"nats://127.0.0.1:{free_port()}"
    process = cluster("--nodes", "1", "pingpong:failing", "--cluster", url)
    output, _ = process.communicate(timeout=WITHIN)
    assert process.returncode == 1, output
    assert "[node-0] node node-0: failed: RuntimeError: this node fails on purpose" in output
    assert "cluster: node-0 exited 1" in output


def test_ctrl_c_stops_every_node() -> None:
    url = f"nats://127.0.0.1:{free_port()}"
    process = cluster("--nodes", "2", "pingpong:forever", "--cluster", url)
    lines: queue.Queue[str | None] = queue.Queue()
    stdout = process.stdout
    assert stdout is not None

    def read() -> None:
        for line in stdout:
            lines.put(line)
        lines.put(None)  # (the end)

    threading.Thread(target=read, daemon=True).start()
    seen: list[str] = []
    while sum("serving" in line for line in seen) < 2:
        line = lines.get(timeout=WITHIN)
        assert line is not None, "".join(seen)
        seen.append(line)
    process.send_signal(signal.SIGINT)
    process.wait(timeout=WITHIN)
    while (line := lines.get(timeout=WITHIN)) is not None:
        seen.append(line)
    stdout.close()
    output = "".join(seen)
    assert process.returncode == 130, output
    assert "[node-0] node node-0: stopped (Ctrl-C)" in output
    assert "[node-1] node node-1: stopped (Ctrl-C)" in output


def _processes_with(marker: str) -> list[str]:
    """The command lines of this machine's processes that contain ``marker``."""
    found = []
    for entry in Path("/proc").iterdir():
        try:
            command = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode()
        except (OSError, ValueError):
            continue  # (not a process, or one that ended meanwhile)
        if marker in command:
            found.append(command)
    return found


@pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="needs /proc")
def test_ctrl_c_while_the_nodes_start_leaves_none_running() -> None:
    url = f"nats://127.0.0.1:{free_port()}"
    marker = f"ctrl-c-at-start-{free_port()}"  # (this run's nodes, by cluster name)
    process = cluster(
        "--nodes", "6", "pingpong:forever", "--cluster", url, "--cluster-name", marker
    )
    stdout = process.stdout
    assert stdout is not None
    first = stdout.readline()  # "cluster: started ...": the nodes are starting now
    assert first.startswith("cluster:"), first
    process.send_signal(signal.SIGINT)
    output, _ = process.communicate(timeout=WITHIN)
    assert process.returncode == 130, first + output
    assert _processes_with(marker) == [], first + output


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["cluster", "nothing"], "expected MODULE:FUNCTION, got 'nothing'"),
        (["cluster", "no_such_module:main"], "cannot import 'no_such_module'"),
        (["cluster", "pingpong:absent"], "pingpong has no function 'absent'"),
        (["node", "pingpong:main", "--cluster", "http://x"], "nats://host:port"),
        (["cluster", "--nodes", "0", "pingpong:main"], "--nodes must be >= 1"),
    ],
)
def test_mistakes_are_one_line_errors(arguments: list[str], message: str) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "trio_actors", *arguments],
        cwd=APPS,
        capture_output=True,
        text=True,
        timeout=WITHIN,
    )
    assert result.returncode == 2, result.stderr
    assert message in result.stderr
    assert "Traceback" not in result.stderr

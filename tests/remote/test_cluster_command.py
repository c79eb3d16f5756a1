"""``trio-actors cluster`` and ``trio-actors node`` as a person runs them: a server
started when none answers, the nodes' output after their names, their exit codes,
and Ctrl-C reaching every node."""

from __future__ import annotations

import os
import queue
import re
import signal
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from helpers import gone

APPS = Path(__file__).parent / "apps"
WITHIN = 60.0  # seconds: a safety net for a loaded machine, not a speed check
STOPS_WITHIN = 40.0  # seconds a Ctrl-C'd cluster command may take (under pytest's 60 s)


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@contextmanager
def cluster(*arguments: str) -> Iterator[subprocess.Popen[str]]:
    """``trio-actors cluster ARGUMENTS`` for the block; killed at its end if it
    still runs (a leaked process fails unrelated tests with ResourceWarning)."""
    command = [sys.executable, "-m", "trio_actors", "cluster", *arguments]
    process = subprocess.Popen(
        command, cwd=APPS, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
    )
    try:
        yield process
    finally:
        if process.poll() is None:
            process.kill()
        process.wait()
        if process.stdout is not None:
            process.stdout.close()


def test_two_nodes_find_and_ask_each_other_and_the_cluster_exits_0() -> None:
    url = f"nats://127.0.0.1:{free_port()}"
    with cluster("--nodes", "2", "pingpong:main", "--cluster", url) as process:
        output, _ = process.communicate(timeout=WITHIN)
        assert process.returncode == 0, output
        assert "cluster: started nats-server" in output
        assert "[node-0] node-0 asked node-1: ('hello from', 'node-0')" in output
        assert "[node-1] node-1 asked node-0: ('hello from', 'node-1')" in output
        assert "cluster: node-0 exited 0, node-1 exited 0" in output


def test_a_failing_node_makes_the_cluster_exit_non_zero() -> None:
    url = f"nats://127.0.0.1:{free_port()}"
    with cluster("--nodes", "1", "pingpong:failing", "--cluster", url) as process:
        output, _ = process.communicate(timeout=WITHIN)
        assert process.returncode == 1, output
        assert "[node-0] node node-0: failed: RuntimeError: this node fails on purpose" in output
        assert "cluster: node-0 exited 1" in output


def test_ctrl_c_stops_every_node() -> None:
    url = f"nats://127.0.0.1:{free_port()}"
    with cluster("--nodes", "2", "pingpong:forever", "--cluster", url) as process:
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
        try:
            # (the command's own bounds add up to ~25 s: its nodes 10, its server 5,
            # its relays 2 x 5; past that, what it printed says where it stopped)
            process.wait(timeout=STOPS_WITHIN)
        except subprocess.TimeoutExpired:
            while not lines.empty():
                seen.append(lines.get() or "")
            pytest.fail(f"the cluster command did not end after Ctrl-C:\n{''.join(seen)}")
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
    with cluster(
        "--nodes", "6", "pingpong:forever", "--cluster", url, "--cluster-name", marker
    ) as process:
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


def _lines(process: subprocess.Popen[str]) -> queue.Queue[str | None]:
    """The process's output lines as they come (``None``: its end)."""
    lines: queue.Queue[str | None] = queue.Queue()
    stdout = process.stdout
    assert stdout is not None

    def read() -> None:
        for line in stdout:
            lines.put(line)
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    return lines


def _read_until(lines: queue.Queue[str | None], seen: list[str], done: Any) -> None:
    while not done(seen):
        line = lines.get(timeout=WITHIN)
        assert line is not None, "".join(seen)
        seen.append(line)


@pytest.mark.parametrize("number", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_or_sighup_to_the_cluster_leaves_no_process_behind(number: int) -> None:
    url = f"nats://127.0.0.1:{free_port()}"
    with cluster("--nodes", "2", "pingpong:forever", "--cluster", url) as process:
        lines = _lines(process)
        seen: list[str] = []
        _read_until(lines, seen, lambda seen: sum("serving" in line for line in seen) == 2)
        text = "".join(seen)
        pids = [int(pid) for pid in re.findall(r"serving \(pid (\d+)\)", text)]
        [server] = [int(pid) for pid in re.findall(r"started nats-server (\d+)", text)]
        pids.append(server)
        assert len(pids) == 3, text
        assert not any(gone(pid) for pid in pids)
        process.send_signal(number)
        assert process.wait(timeout=WITHIN) == 0
        while (line := lines.get(timeout=WITHIN)) is not None:
            seen.append(line)
    output = "".join(seen)
    name = signal.Signals(number).name
    assert f"cluster: {name}: stopping every node" in output
    assert "[node-0] node node-0: stopped (SIGTERM); left the cluster" in output  # (clean)
    assert "[node-1] node node-1: stopped (SIGTERM); left the cluster" in output
    assert "cluster: node-0 exited 0, node-1 exited 0" in output
    assert [pid for pid in pids if not gone(pid)] == []


def test_a_kill_9_of_a_node_is_seen_by_the_server_s_advisory_not_heartbeats() -> None:
    # Heartbeats every 30 s (silence: 90 s, past the safety net): only the
    # subscribe-only system user the command gives its server can tell node-1.
    url = f"nats://127.0.0.1:{free_port()}"
    arguments = ("--nodes", "2", "pingpong:hold_or_wait", "--cluster", url, "--heartbeat", "30")
    with cluster(*arguments) as process:
        lines = _lines(process)
        seen: list[str] = []
        _read_until(lines, seen, lambda seen: any("node-1 waiting" in line for line in seen))
        [pid] = [int(pid) for pid in re.findall(r"node-0 serving \(pid (\d+)\)", "".join(seen))]
        os.kill(pid, signal.SIGKILL)
        _read_until(lines, seen, lambda seen: any("node-1 saw" in line for line in seen))
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=WITHIN)
        while (line := lines.get(timeout=WITHIN)) is not None:
            seen.append(line)
    output = "".join(seen)
    [said] = [line for line in seen if "node-1 saw" in line]
    assert "NodeDown" in said, output
    assert "its connection ended (the server's disconnect advisory)" in said, output


async def test_the_advisories_user_of_the_command_s_server_may_only_subscribe_to_them(
    tmp_path: Path,
) -> None:
    import trio

    from nats_server import running_nats_server
    from trio_actors import nats
    from trio_actors.sweeps._nodes import _SERVER_CONFIG, ADVISORIES_USER

    config = _SERVER_CONFIG.format(user=ADVISORIES_USER, password="pw", nodes_password="np")
    with running_nats_server(tmp_path, config=config) as server, trio.fail_after(60):
        async with (
            nats.connect(server.url, user=ADVISORIES_USER, password="pw") as watcher,
            watcher.subscribe("$SYS.ACCOUNT.*.DISCONNECT") as advisories,
        ):
            await watcher.flush()
            assert watcher.last_error is None  # (allowed)
            async with nats.connect(server.url, name="gone") as node:  # (no credentials)
                await node.flush()
            advisory = await advisories.__anext__()  # (its disconnect, heard)
            assert b'"name":"gone"' in advisory.data
            watcher.publish("$SYS.REQ.SERVER.PING", b"")  # (refused: publishes nothing)
            await watcher.flush()
            assert "Permissions Violation for Publish" in (watcher.last_error or "")
            async with watcher.subscribe("$SYS.REQ.>"):  # (refused: only advisories)
                await watcher.flush()
            assert "Permissions Violation for Subscription" in (watcher.last_error or "")


def test_metrics_on_a_node_go_to_the_meter_provider_its_module_set_up() -> None:
    pytest.importorskip("opentelemetry.sdk")
    url = f"nats://127.0.0.1:{free_port()}"
    with cluster("--nodes", "1", "metered:main", "--cluster", url, "--metrics") as process:
        output, _ = process.communicate(timeout=WITHIN)
        assert process.returncode == 0, output
        said = "{'trio_actors.actor.class': 'Echo', 'trio_actors.node': 'node-0'} 3"
        assert f"[node-0] handled {said}" in output


def test_with_tracing_one_trace_crosses_from_one_node_process_to_the_other() -> None:
    # traced.py sets the global tracer provider at import; --tracing uses it. Each
    # node prints its spans: node-0's ask of node-1 is the parent of node-1's
    # handling of it, in the same trace, across two processes and a real server.
    url = f"nats://127.0.0.1:{free_port()}"
    with cluster("--nodes", "2", "traced:main", "--cluster", url, "--tracing") as process:
        output, _ = process.communicate(timeout=WITHIN)
    assert process.returncode == 0, output
    spans = re.findall(r"\[(node-\d)\] span '([^']+)' (\w+) (\w+) (\S+) (\w+)", output)
    asks = [s for s in spans if s[0] == "node-0" and s[1] == "ask node-1"]
    handled = [s for s in spans if s[0] == "node-1" and s[1] == "receive Echo"]
    assert len(asks) == 1, output
    (_, _, kind, trace_id, _, span_id) = asks[0]
    assert kind == "CLIENT"
    assert [(s[2], s[3], s[4]) for s in handled] == [("SERVER", trace_id, span_id)], output

"""Every example in ``examples/`` runs, and does what its docs say."""

import importlib.util
import logging
from pathlib import Path
from types import ModuleType
from typing import Any

import trio
import trio.testing

import trio_actors as ta

EXAMPLES = Path(__file__).resolve().parent.parent / "examples"


def load(name: str) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"example_{name}", EXAMPLES / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_supervision_example_restarts_with_backoff_and_escalates(
    caplog: object,
) -> None:
    logging.getLogger("trio_actors").setLevel(logging.CRITICAL)
    example = load("supervision")
    report = trio.run(example.main, clock=trio.testing.MockClock(autojump_threshold=0))
    assert report == [
        "job 0 fetched by fetcher #1 (waited 0.0s)",
        "job 1 fetched by fetcher #1 (waited 0.0s)",
        "failed: job 2 hit the flaky dependency (waited 0.0s)",
        "job 3 fetched by fetcher #2 (waited 0.1s)",
        "job 4 fetched by fetcher #2 (waited 0.0s)",
        "failed: job 5 hit the flaky dependency (waited 0.0s)",
        "pipeline started 2 times",
        "job 0 fetched by fetcher #3",
    ]


def test_the_readme_example_runs() -> None:
    readme = (EXAMPLES.parent / "README.md").read_text(encoding="utf-8")
    code = readme.split("```python\n", 1)[1].split("```", 1)[0]
    exec(compile(code, "README.md", "exec"), {"__name__": "readme_example"})


def test_the_tutorial_program_prints_what_the_tutorial_says() -> None:
    logging.getLogger("trio_actors").setLevel(logging.CRITICAL)
    tutorial = load("tutorial")
    lines = trio.run(tutorial.main, clock=trio.testing.MockClock(autojump_threshold=0))
    page = (EXAMPLES.parent / "docs" / "tutorial.rst").read_text(encoding="utf-8")
    shown = page.split(".. code-block:: text\n\n", 1)[1].split("\n\n", 1)[0]
    assert lines == [line.strip() for line in shown.splitlines()]


def run_virtual(fn: Any, *args: object) -> Any:
    return trio.run(fn, *args, clock=trio.testing.MockClock(autojump_threshold=0))


def test_howto_backpressure_keeps_the_producer_at_the_consumers_pace() -> None:
    handled, deepest = run_virtual(load("howto").backpressure)
    assert handled == 1000
    assert deepest <= 10


def test_howto_latest_values_only_drops_the_old_ones() -> None:
    shown, dropped = run_virtual(load("howto").latest_values_only)
    assert shown[-1] == 99.0
    assert shown == sorted(shown)
    assert len(shown) + dropped == 100
    assert dropped > 0


def test_howto_supervision_patterns() -> None:
    logging.getLogger("trio_actors").setLevel(logging.CRITICAL)
    assert run_virtual(load("howto").supervision_patterns) == [
        2,
        "failed: bad job -1",
        4,
        6,
        8,
        1,  # one restart: the worker that failed
    ]


def test_howto_shut_down_cleanly_flushes_everything_told() -> None:
    written = run_virtual(load("howto").shut_down_cleanly, 1.05)
    assert written == [f"entry {n}" for n in range(11)]


def test_howto_shut_down_on_a_signal() -> None:
    import signal

    howto = load("howto")

    async def main() -> list[str]:
        async with trio.open_nursery() as nursery:
            result: list[list[str]] = []

            async def run() -> None:
                result.append(await howto.shut_down_cleanly(3600, on_signal=True))

            nursery.start_soon(run)
            await trio.sleep(0.35)
            signal.raise_signal(signal.SIGINT)
        return result[0]

    assert run_virtual(main) == ["entry 0", "entry 1", "entry 2", "entry 3"]


def test_howto_heartbeat_and_idle_timeout() -> None:
    pings, ended_after = run_virtual(load("howto").heartbeat_and_idle_timeout)
    assert pings == 33  # every 15 s until the session ended at 500 s
    assert ended_after == 501


def test_howto_statistics_report_names_the_laggards() -> None:
    howto = load("howto")
    clock = trio.testing.MockClock(autojump_threshold=0)
    report = trio.run(howto.statistics_report, clock, clock=clock)
    assert report[0].startswith("system/busy: ")
    assert report[-1] == "the dispatcher once held the thread 0.20s"


def test_howto_business_errors_are_replies() -> None:
    replies, failures, restarts = run_virtual(load("howto").business_errors)
    assert replies == [70, "refused: balance 70, asked 500", 10, "refused: balance 10, asked 20"]
    assert (failures, restarts) == (0, 0)


def test_howto_find_by_name() -> None:
    count, freed = run_virtual(load("howto").find_by_name)
    assert count == 1
    assert freed == "no actor is registered as 'ledger'"


def test_howto_spread_work_balancing_beats_round_robin() -> None:
    howto = load("howto")
    # 39 fast fetches on three fetchers (1.3 s) beside the slow one's 5 s; round
    # robin gives the slow fetcher ten of them.
    assert run_virtual(howto.spread_work, "balancing") == 5.0
    assert run_virtual(howto.spread_work, "round_robin") == 50.0


def test_howto_restart_together_restarts_the_failed_stage_and_the_later_ones() -> None:
    logging.getLogger("trio_actors").setLevel(logging.CRITICAL)
    assert run_virtual(load("howto").restart_together) == [
        "start read",
        "start parse",
        "start write",
        "-- parse fails",
        "start parse",
        "start write",
    ]


def test_howto_watch_dead_letters() -> None:
    assert run_virtual(load("howto").watch_dead_letters) == [
        "journal: 'too late' (stopped)",
        "resizer: 1 (stranded)",
        "resizer: 2 (stranded)",
    ]


def test_howto_bounded_stop() -> None:
    logging.getLogger("trio_actors").setLevel(logging.CRITICAL)
    assert run_virtual(load("howto").bounded_stop) == 2.0


def test_the_bank_conserves_money_under_concurrent_transfers_and_timeouts() -> None:
    logging.getLogger("trio_actors").setLevel(logging.CRITICAL)
    bank = load("bank/bank")
    for seed in (7, 8, 9):
        report = run_virtual(bank.main, seed)
        assert report.total_after == report.total_before == 20_000, seed
        assert report.done + report.overdrafts + report.timed_out == bank.TRANSFERS
        assert report.overdrafts > 0  # expected errors reached the clients
        assert report.timed_out > 0  # and some clients gave up
        assert report.auditor_restarts >= 1  # the flaky auditor was restarted
        assert report.last_audit == 20_000  # found by name; it saw it all


def test_the_cluster_example_survives_a_kill_9_of_a_worker(nats_server: Any) -> None:
    """examples/cluster/app.py as its docstring says: two workers and a client, each
    a ``trio-actors node`` process, and a real ``kill -9`` of worker-0."""
    import os
    import queue
    import signal
    import subprocess
    import sys
    import threading

    within = 60.0  # seconds: a safety net, not a speed check
    folder = EXAMPLES / "cluster"

    def node(function: str, name: str) -> subprocess.Popen[str]:
        command = [sys.executable, "-m", "trio_actors", "node", f"app:{function}"]
        command += ["--cluster", nats_server.url, "--name", name, "--heartbeat", "0.2"]
        return subprocess.Popen(
            command, cwd=folder, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )

    def lines_of(process: subprocess.Popen[str]) -> queue.Queue[str | None]:
        lines: queue.Queue[str | None] = queue.Queue()
        stdout = process.stdout
        assert stdout is not None

        def read() -> None:
            for line in stdout:
                lines.put(line.rstrip("\n"))
            lines.put(None)
            stdout.close()

        threading.Thread(target=read, daemon=True).start()
        return lines

    def wait_for(lines: queue.Queue[str | None], text: str, seen: list[str]) -> None:
        while True:
            line = lines.get(timeout=within)
            assert line is not None, f"ended before {text!r}: {seen}"
            seen.append(line)
            if text in line:
                return

    workers = [node("worker", "worker-0"), node("worker", "worker-1")]
    try:
        worker_lines = [lines_of(worker) for worker in workers]
        for number, lines in enumerate(worker_lines):
            wait_for(lines, f"worker-{number} ready", [])
        client = node("client", "client")
        client_lines = lines_of(client)
        seen: list[str] = []
        wait_for(client_lines, "kill worker-0 now", seen)
        os.kill(workers[0].pid, signal.SIGKILL)
        while (line := client_lines.get(timeout=within)) is not None:
            seen.append(line)
        assert client.wait(timeout=within) == 0, "\n".join(seen[-20:])
    finally:
        for worker in workers:
            if worker.poll() is None:
                worker.send_signal(signal.SIGINT)
        for worker in workers:
            worker.wait(timeout=within)
    said = [line for line in seen if line.startswith("client: ")]
    assert said[:5] == [
        "client: found worker-0:system/spawner/counter",
        "client: count is 6",
        "client: a queued ask cancelled",
        "client: count is still 6",
        "client: kill worker-0 now",
    ], seen
    assert set(said[5:7]) == {  # (the same declaration of worker-0's death: any order)
        "client: the pending ask failed with NodeDown",
        "client: worker-0:system/spawner/counter terminated: NodeDown",
    }, seen
    assert said[7:] == [
        "client: the new counter is worker-1:system/spawner/counter",
        "client: its count is 10",
        "client: told the dead counter 99: unreachable",
    ], seen
    assert workers[0].returncode == -signal.SIGKILL
    assert workers[1].returncode == 130


def test_the_jobs_example_accounts_for_every_job_through_a_kill_9() -> None:
    """examples/cluster/jobs.py as its docstring says: ``trio-actors cluster --nodes
    4 jobs:node --config jobs.toml``, and a real ``kill -9`` of node-2 mid-run: its
    workers are restarted on the others, and every job is done."""
    import os
    import queue
    import re
    import signal
    import socket
    import subprocess
    import sys
    import threading

    within = 120.0  # seconds: a safety net, not a speed check
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        url = f"nats://127.0.0.1:{probe.getsockname()[1]}"
    command = [sys.executable, "-m", "trio_actors", "cluster", "--nodes", "4", "jobs:node"]
    command += ["--config", "jobs.toml", "--cluster", url]
    process = subprocess.Popen(
        command,
        cwd=EXAMPLES / "cluster",
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    lines: queue.Queue[str | None] = queue.Queue()

    def read() -> None:
        assert process.stdout is not None
        for line in process.stdout:
            lines.put(line.rstrip("\n"))
        lines.put(None)

    threading.Thread(target=read, daemon=True).start()
    seen: list[str] = []

    def wait_for(text: str) -> str:
        while True:
            line = lines.get(timeout=within)
            assert line is not None, f"ended before {text!r}: {seen[-30:]}"
            seen.append(line)
            if text in line:
                return line

    try:
        pid = int(re.findall(r"pid (\d+)", wait_for("node-2: pid"))[0])
        wait_for("500 of 3000 jobs done")
        os.kill(pid, signal.SIGKILL)  # (node-2 dies mid-run, its workers with it)
        report = wait_for("node-0: report:")
        restarts = wait_for("node-0: workers restarted:")
    finally:
        if process.poll() is None:
            process.send_signal(signal.SIGTERM)  # (the others: a clean leave, no orphan)
        process.wait(timeout=within)
        if process.stdout is not None:
            process.stdout.close()
    assert "3000 jobs, 3000 done, 0 lost" in report, seen[-30:]
    assert int(restarts.rpartition(": ")[2]) >= 1, seen[-30:]  # (node-2 had workers)
    done_by = next(line for line in seen if "jobs done by node" in line)
    assert "node-2" in done_by, done_by  # (it took jobs before it died)


def test_the_tracing_example_shows_one_trace_across_three_nodes() -> None:
    from trio_actors.remote import MemoryBus

    example = load("tracing")
    cluster = ta.Cluster(bus=MemoryBus())
    answer, spans = run_virtual(example.main, cluster)
    assert answer == "ordered tea, 2 left"
    assert len({span.context.trace_id for span in spans}) == 1
    assert example.tree(spans, durations=False) == [
        "checkout [INTERNAL]",
        "  ask b [CLIENT] on a -> value",
        "    receive Orders [SERVER] on b -> value",
        "      ask c [CLIENT] on b -> value",
        "        receive Stock [SERVER] on c -> value",
    ]
    page = (EXAMPLES.parent / "docs" / "observing.rst").read_text(encoding="utf-8")
    shown = page.split(".. trace from examples/tracing.py:\n", 1)[1].split("\n\n", 2)[1]
    lines = [line[3:] for line in shown.splitlines()]
    assert lines[0] == answer
    assert [line.rsplit(" (", 1)[0] for line in lines[2:]] == example.tree(spans, durations=False)

"""R4 of the remote specification: ``kill -9`` of a node with 1,000 asks pending to it.

Target: every ask fails with :exc:`~trio_actors.NodeDown` within 50 ms of the
server's disconnect advisory; none hangs.

Usage (from the repository root)::

    python -m benchmarks.node_death                 # 5 trials of 1,000 asks
    python -m benchmarks.node_death --quick         # 1 trial of 50 (a smoke run)
    python -m benchmarks.node_death --json R4.json

One ``nats-server`` with a system account runs for the whole run. Each trial starts
a **far** node in a process of its own with an actor whose ``async`` handler never
returns, and a **near** node here (with the system account's user, so it hears the
disconnect advisories) that sends it N asks -- one in progress, N - 1 queued --
waits until the far node has them all (its mailbox depth, read by a probe actor
there), then ``kill -9``\\ s the far process. Measured per trial, on this
process's clock: from the advisory's arrival (on a connection of its own to the
system account, beside the node's) to the last ask's ``NodeDown``, and from the
kill to it. An ask not failed within 30 s counts as hung. This is a single event
per trial, not a loop: pyperf does not fit it, so the trials are reported as their
median and maximum.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import trio

import trio_actors as ta
from trio_actors import nats

SYSTEM_ACCOUNT = """
accounts {
  SYS { users = [ { user: sys, password: sys } ] }
  APP { users = [ { user: app, password: app } ] }
}
system_account: SYS
"""

FAR_NODE = """
import sys

import trio

import trio_actors as ta


class Gate(ta.Actor):
    async def receive(self, message):
        await trio.sleep_forever()


class Probe(ta.Actor):
    def __init__(self, gate):
        self.gate = gate

    def receive(self, message):
        return self.gate.statistics().mailbox_depth


async def main() -> None:
    cluster = ta.Cluster(sys.argv[1], user="app", password="app", heartbeat=30)
    async with ta.open_actor_system(cluster=cluster, node="far") as system:
        gate = system.spawn(Gate, name="gate")
        system.register("gate", gate)
        system.register("probe", system.spawn(Probe, gate, name="probe"))
        await system.node.flush()
        print("ready", flush=True)
        await trio.sleep_forever()


trio.run(main)
"""

HANG = 30.0  # seconds after which an ask still pending counts as hung


async def _far_node(url: str) -> trio.Process:
    process = await trio.lowlevel.open_process(
        [sys.executable, "-c", FAR_NODE, url], stdout=subprocess.PIPE
    )
    assert process.stdout is not None
    said = b""
    with trio.fail_after(60):  # (a safety net for a loaded machine, not a measurement)
        while not said.endswith(b"\n"):
            chunk = await process.stdout.receive_some()
            if not chunk:
                raise RuntimeError(f"the far node ended: {said!r}")
            said += chunk
    return process


async def trial(url: str, asks: int) -> dict[str, Any]:
    """One kill with ``asks`` pending: the timings and how the asks ended."""
    cluster = ta.Cluster(
        url, user="app", password="app", system_user="sys", system_password="sys", heartbeat=30
    )
    process = await _far_node(url)
    advisory_at: list[float] = []
    failed_at: list[float] = []
    other: list[str] = []
    try:
        async with (
            nats.connect(url, user="sys", password="sys") as system_account,
            ta.open_actor_system(cluster=cluster, node="near") as near,
        ):
            system_account.subscribe_nowait(
                "$SYS.ACCOUNT.*.DISCONNECT",
                callback=lambda message: advisory_at.append(trio.current_time()),
            )
            await system_account.flush()
            gate = await near.lookup("gate")
            probe = await near.lookup("probe")

            all_ended = trio.Event()

            async def ask() -> None:
                try:
                    await gate.ask("wait")
                except ta.NodeDown:
                    failed_at.append(trio.current_time())
                except Exception as error:
                    other.append(type(error).__name__)
                if len(failed_at) + len(other) == asks:
                    all_ended.set()

            with trio.move_on_after(HANG + 60):
                async with trio.open_nursery() as nursery:
                    for _ in range(asks):
                        nursery.start_soon(ask)
                    while True:  # (until the far node has them all)
                        if await probe.ask("depth") >= asks - 1:
                            break
                        await trio.sleep(0.01)
                    killed_at = trio.current_time()
                    process.kill()
                    with trio.move_on_after(HANG):
                        await all_ended.wait()
                    nursery.cancel_scope.cancel()
    finally:
        process.kill()
        await process.wait()
        if process.stdout is not None:
            await process.stdout.aclose()
    last = max(failed_at) if failed_at else float("nan")
    first_advisory = min(advisory_at) if advisory_at else float("nan")
    return {
        "asks": asks,
        "node_down": len(failed_at),
        "other": other,
        "hung": asks - len(failed_at) - len(other),
        "ms_advisory_to_last": 1000 * (last - first_advisory),
        "ms_kill_to_advisory": 1000 * (first_advisory - killed_at),
        "ms_kill_to_last": 1000 * (last - killed_at),
    }


async def run(asks: int, trials: int) -> list[dict[str, Any]]:
    results = []
    with (
        tempfile.TemporaryDirectory() as directory,
        nats.local_server(Path(directory), config=SYSTEM_ACCOUNT) as server,
    ):
        for number in range(trials):
            result = await trial(server.url, asks)
            print(
                f"trial {number + 1}/{trials}: {result['node_down']}/{asks} NodeDown, "
                f"{result['hung']} hung; advisory -> last NodeDown "
                f"{result['ms_advisory_to_last']:.1f} ms, kill -> advisory "
                f"{result['ms_kill_to_advisory']:.1f} ms",
                flush=True,
            )
            results.append(result)
    return results


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--asks", type=int, default=1000)
    parser.add_argument("--trials", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="1 trial of 50 asks")
    parser.add_argument("--json", type=Path, help="write the trials and summary here")
    options = parser.parse_args(argv)
    asks, trials = (50, 1) if options.quick else (options.asks, options.trials)
    results = trio.run(run, asks, trials)
    spans = [r["ms_advisory_to_last"] for r in results]
    met = all(r["hung"] == 0 and not r["other"] for r in results) and max(spans) <= 50
    summary = {
        "shape": "R4-node-death",
        "asks": asks,
        "trials": trials,
        "median_ms_advisory_to_last": statistics.median(spans),
        "max_ms_advisory_to_last": max(spans),
        "median_ms_kill_to_last": statistics.median(r["ms_kill_to_last"] for r in results),
        "target": "every ask NodeDown within 50 ms of the advisory, none hangs",
        "met": met,
    }
    print(
        f"R4: {asks} asks x {trials} trials: advisory -> last NodeDown median "
        f"{summary['median_ms_advisory_to_last']:.1f} ms, max "
        f"{summary['max_ms_advisory_to_last']:.1f} ms (target <= 50 ms): "
        f"{'met' if met else 'NOT met'}"
    )
    if options.json is not None:
        options.json.write_text(json.dumps({"summary": summary, "trials": results}, indent=2))
    return 0 if met else 1


if __name__ == "__main__":
    sys.exit(main())

"""A slow receiver node for the real-process delivery tests
(``tests/remote/test_delivery_kill.py``), to be killed with SIGKILL or stopped with
SIGSTOP while its actor has many tells queued.

    python slow_receiver.py URL LOG HEARTBEAT MISSED COST

Joins the cluster at ``URL`` as node ``receiver`` (heartbeats every ``HEARTBEAT``
seconds, declared down after ``MISSED`` missed), registers the actor ``slow`` and
prints ``receiver serving`` once it can be looked up. ``slow`` spends ``COST``
seconds of CPU on each ``("tell", n)`` (a busy loop on ``time.perf_counter``: the
trio thread is busy, as with real work) and then writes ``n`` as a line to ``LOG``
with one unbuffered ``os.write``: what a ``kill -9`` leaves in that file is exactly
the tells whose handler finished. It answers ``"ping"`` with ``"pong"``.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

import trio

import trio_actors as ta


class Slow(ta.Actor):
    def __init__(self, log: int, cost: float) -> None:
        self.log = log
        self.cost = cost

    def receive(self, message: Any) -> Any:
        match message:
            case ("tell", int(number)):
                deadline = time.perf_counter() + self.cost
                while time.perf_counter() < deadline:
                    pass
                os.write(self.log, b"%d\n" % number)  # (handled: in the kernel at once)
                return None
            case "ping":
                return "pong"
        return None


async def main(url: str, log_path: str, heartbeat: float, missed: int, cost: float) -> None:
    log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    cluster = ta.Cluster(url, heartbeat=heartbeat, heartbeats_missed=missed)
    async with ta.open_actor_system(cluster=cluster, node="receiver") as system:
        system.register("slow", system.spawn(Slow, log, cost, name="slow"))
        assert system.node is not None
        await system.node.flush()
        print(f"receiver serving (pid {os.getpid()})", flush=True)
        await trio.sleep_forever()


if __name__ == "__main__":
    url, log_path, heartbeat, missed, cost = sys.argv[1:]
    trio.run(main, url, log_path, float(heartbeat), int(missed), float(cost))

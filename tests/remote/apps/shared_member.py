"""A node serving a shared name, for the real-process test of shared names
(``tests/remote/test_shared_names_kill.py``), to be killed with SIGKILL while its
member has many tells queued.

    python shared_member.py URL NODE LOG HEARTBEAT MISSED COST

Joins the cluster at ``URL`` as node ``NODE``, registers one actor under the shared
name ``work`` and prints ``member serving`` once the server has its subscription.
The actor spends ``COST`` seconds of CPU on each ``("tell", n)`` and then writes
``n`` as a line to ``LOG`` with one unbuffered ``os.write`` (what a ``kill -9``
leaves there is exactly the tells whose handler finished); it answers an ask with
its node's name.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any

import trio

import trio_actors as ta


class Member(ta.Actor):
    def __init__(self, node: str, log: int, cost: float) -> None:
        self.node = node
        self.log = log
        self.cost = cost

    def receive(self, message: Any) -> Any:
        deadline = time.perf_counter() + self.cost
        while time.perf_counter() < deadline:
            pass
        if isinstance(message, tuple) and message[0] == "tell":
            os.write(self.log, b"%d\n" % message[1])  # (handled: in the kernel at once)
            return None
        return self.node


async def main(
    url: str, node: str, log_path: str, heartbeat: float, missed: int, cost: float
) -> None:
    log = os.open(log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
    cluster = ta.Cluster(url, heartbeat=heartbeat, heartbeats_missed=missed)
    async with ta.open_actor_system(cluster=cluster, node=node) as system:
        system.register("work", system.spawn(Member, node, log, cost), shared=True)
        assert system.node is not None
        await system.node.flush()
        print(f"member serving (pid {os.getpid()})", flush=True)
        await trio.sleep_forever()


if __name__ == "__main__":
    url, node, log_path, heartbeat, missed, cost = sys.argv[1:]
    trio.run(main, url, node, log_path, float(heartbeat), int(missed), float(cost))

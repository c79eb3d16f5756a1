"""Work spread over a cluster, with a node killed mid-run (issue 32's example). From
this folder::

    trio-actors cluster --nodes 4 jobs:node --config jobs.toml

``trio-actors cluster`` starts a ``nats-server`` (with a system user, so that a
``kill -9`` is seen in milliseconds) and four node processes, each running
:func:`node`. ``node-0`` is the coordinator:

* once the four nodes have joined, it spawns six **workers across the nodes** --
  children of its :class:`Coordinator`, placed round robin among the nodes that
  list ``Worker`` as spawnable (all of them: ``jobs.toml``) and supervised by it:
  when a worker's node dies, the coordinator's strategy restarts the worker on a
  live node;
* each worker serves the **shared name** ``"jobs"`` (a NATS queue group): the
  coordinator sends every job through that one name, and the server gives each to
  one worker;
* it sends 3,000 jobs, 16 at a time, and **accounts for every one**: an ask whose
  fate is unknown -- its worker's node died before answering (:exc:`NodeDown`), a
  connection changed on the way, or no worker served the name for a moment -- is
  sent again (at least once: such a job may have been handled twice, and the report
  says how many were sent again).

Kill any other node while it runs -- each prints its pid -- and watch the
coordinator's workers move and every job still end: ``tests/test_examples.py``
does it with a real ``kill -9``.
"""

from __future__ import annotations

import os
from typing import Any

import msgspec
import trio

import trio_actors as ta

NODES = 4  # trio-actors cluster --nodes 4: the coordinator waits for them all
JOBS = 3_000
AT_ONCE = 16  # jobs in flight
WORKERS = 6
SIZE = 20_000  # each job sums this many squares: CPU work, ~1 ms


class Job(msgspec.Struct, frozen=True):
    number: int
    size: int


class Done(msgspec.Struct, frozen=True):
    number: int
    result: int
    node: str


class Worker(ta.Actor):
    """Serves the shared name ``"jobs"``: one job at a time, answered with where it
    ran."""

    def on_start(self) -> None:
        self.system.register("jobs", self.ref, shared=True)

    def receive(self, message: Any) -> Done | None:
        if isinstance(message, Job):
            node = self.system.node
            where = "?" if node is None else node.name
            return Done(message.number, sum(i * i for i in range(message.size)), where)
        return None


class Coordinator(ta.Actor):
    """Spawns the workers on the other nodes and supervises them (a worker whose
    node dies is restarted on a live one)."""

    async def on_start(self) -> None:
        for _ in range(WORKERS):
            await self.spawn_remote(
                Worker, on=ta.RoundRobin(), supervision=ta.Restart(max_restarts=20, within=60)
            )

    def receive(self, message: Any) -> Any:
        if message == "workers":
            return len(self.children)
        if message == "restarts":  # (of its workers: after a node's death, say)
            return sum(child.statistics().restarts for child in self.children)
        return None


class Ledger:
    """Every job's end, as the coordinator sees it."""

    def __init__(self) -> None:
        self.done: dict[int, Done] = {}
        self.sent_again = 0
        self.why: dict[str, int] = {}
        self.restarts = 0  # (of the workers, as their parent counts them)


async def run_job(jobs: ta.ActorRef, number: int, ledger: Ledger) -> None:
    """Send job ``number`` until it is done: again after an end that does not say
    whether it ran (at least once)."""
    while True:
        try:
            done = await jobs.ask(Job(number, SIZE))
        except (ta.NodeDown, ta.ActorNotFound, ta.ActorStopped) as unknown:
            ledger.sent_again += 1
            kind = type(unknown).__name__
            ledger.why[kind] = ledger.why.get(kind, 0) + 1
            await trio.sleep(0.05)
            continue
        ledger.done[number] = done
        if len(ledger.done) % 500 == 0:
            print(f"node-0: {len(ledger.done)} of {JOBS} jobs done", flush=True)
        return


async def coordinate(system: ta.ActorSystem) -> Ledger:
    """The coordinator's run: once every node has joined, workers spawned on them,
    then every job sent through the shared name until it is done."""
    assert system.node is not None
    with system.node.events() as joined:  # (the members as they join)
        while len(system.node.members()) < NODES:
            await joined.receive()
    coordinator = system.spawn(Coordinator, name="coordinator")
    with trio.fail_after(60):
        workers = await coordinator.ask("workers")  # (after its on_start: spawned)
        assert workers == WORKERS, workers
        while True:
            try:
                jobs = await system.lookup("jobs")
                break
            except ta.ActorNotFound:
                await trio.sleep(0.05)
    print(f"node-0: {WORKERS} workers serve 'jobs'; sending {JOBS} jobs", flush=True)
    ledger = Ledger()
    numbers = iter(range(JOBS))

    async def sender() -> None:
        for number in numbers:
            await run_job(jobs, number, ledger)

    async with trio.open_nursery() as nursery:
        for _ in range(AT_ONCE):
            nursery.start_soon(sender)
    ledger.restarts = await coordinator.ask("restarts")
    return ledger


async def node(system: ta.ActorSystem) -> None:
    """Each node of ``trio-actors cluster``: node-0 coordinates, the others host
    workers until stopped."""
    assert system.node is not None
    name = system.node.name
    if name != "node-0":
        print(f"{name}: pid {os.getpid()} ready", flush=True)
        await trio.sleep_forever()
    ledger = await coordinate(system)
    lost = JOBS - len(ledger.done)
    by_node: dict[str, int] = {}
    for done in ledger.done.values():
        by_node[done.node] = by_node.get(done.node, 0) + 1
    spread = ", ".join(f"{node} {count}" for node, count in sorted(by_node.items()))
    why = ", ".join(f"{kind} {count}" for kind, count in sorted(ledger.why.items()))
    print(f"node-0: jobs done by node: {spread}", flush=True)
    print(
        f"node-0: report: {JOBS} jobs, {len(ledger.done)} done, {lost} lost, "
        f"{ledger.sent_again} sent again ({why or 'none'})",
        flush=True,
    )
    print(f"node-0: workers restarted: {ledger.restarts}", flush=True)

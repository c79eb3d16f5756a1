"""Contracts across nodes, children on other nodes: RT35 a remote child's failure
reaches its parent exactly once; RT36 a child whose node dies is restarted on a
live node, within its restart intensity.

A parent on node ``a`` spawns its child with ``spawn_remote``; the child's class
is spawnable on ``b`` and ``c`` only (``a`` does not list it), so round-robin
placement puts it on ``b``, then -- ``b`` gone -- on ``c``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import trio
import trio.testing

from ... import (
    Actor,
    ActorRef,
    ActorSystem,
    Cluster,
    NodeDown,
    Restart,
    RoundRobin,
    ServingPolicy,
    Stop,
    Terminated,
    open_actor_system,
)
from ...remote import MemoryBus, Node
from .._harness import require, run_virtual
from .._registry import contract
from ._nodes import HEARTBEAT


class ChildFailure(Exception):
    """What the remote child raises when told ``"fail"``."""


class _Child(Actor):
    def __init__(self) -> None:
        self.handled = 0

    def receive(self, message: Any) -> Any:
        if message == "fail":
            raise ChildFailure("the child failed on purpose")
        if message == "where":
            node = self.system.node
            return None if node is None else node.name
        self.handled += 1
        return self.handled


class _Parent(Actor):
    """Spawns one child on another node when asked; tells what it hears."""

    def __init__(self, heard: list[Terminated]) -> None:
        self.heard = heard

    async def receive(self, message: Any) -> Any:
        if isinstance(message, Terminated):
            self.heard.append(message)
            return None
        supervision = message
        child = await self.spawn_remote(_Child, on=RoundRobin(), supervision=supervision)
        self.watch(child)
        return child


@asynccontextmanager
async def _cluster(policy: ServingPolicy, bus: MemoryBus) -> AsyncIterator[dict[str, ActorSystem]]:
    """Nodes a, b and c of one cluster on ``bus``; b and c spawn ``_Child``."""
    async with AsyncExitStack() as stack:
        systems: dict[str, ActorSystem] = {}
        for name in "abc":
            cluster = Cluster(
                bus=bus,
                heartbeat=HEARTBEAT,
                errors=[ChildFailure],
                spawnable=[] if name == "a" else [_Child],
            )
            systems[name] = await stack.enter_async_context(
                open_actor_system(serving=policy, cluster=cluster, node=name)
            )
        await _until(lambda: all(len(_node(s).members()) == 3 for s in systems.values()))
        yield systems


def _node(system: ActorSystem) -> Node:
    return Node.of(system)


async def _until(check: Callable[[], bool], within: float = 10 * HEARTBEAT) -> bool:
    """Wait until ``check()`` holds, at most ``within`` seconds; whether it did."""
    with trio.move_on_after(within):
        while True:
            if check():
                return True
            await trio.sleep(HEARTBEAT / 20)
    return False


def _restarted(child: ActorRef, times: int) -> Callable[[], bool]:
    return lambda: child.statistics().restarts == times


def _live(system: ActorSystem) -> int:
    return system.statistics().live_actors


@contract(
    "RT35",
    "a remote child's failure reaches its parent exactly once",
    "a child spawned on another node (spawn_remote) that fails there is one failure "
    "of the parent's child -- decided by the parent's strategy, with the error's own "
    "type (a per-type mapping matches it) -- counted once and restarted once per "
    "failure, as a fresh instance (the failed one stopped on its node), and a Stop "
    "decided for it is one Terminated for its watcher, with that error",
)
def remote_child_failure_reaches_parent_once(policy: ServingPolicy) -> None:
    async def main(clock: trio.testing.MockClock) -> None:
        async with _cluster(policy, MemoryBus()) as systems:
            a, b = systems["a"], systems["b"]
            heard: list[Terminated] = []
            parent = a.spawn(_Parent, heard)
            by_type = {ChildFailure: Restart(max_restarts=10, within=60), Exception: Stop()}
            child: ActorRef = await parent.ask(by_type)
            require(await child.ask("where") == "b", "the child did not run on b")
            on_b = _live(b)
            for failures in (1, 2, 3):
                child.tell("fail")
                restarted = await _until(_restarted(child, failures))
                counts = child.statistics()
                require(
                    restarted and counts.failures == failures,
                    f"after {failures} failures on b the parent's child counted "
                    f"{counts.failures} failures and {counts.restarts} restarts",
                )
                require(await child.ask("count") == 1, "the restarted child was not fresh")
            require(_live(b) == on_b, f"b runs {_live(b) - on_b} more instances than one")
            stopping = await parent.ask({ChildFailure: Stop()})
            stopping.tell("fail")
            await _until(lambda: len(heard) >= 1)
            await trio.sleep(5 * HEARTBEAT)  # (a second Terminated would come by now)
            require(len(heard) == 1, f"the parent heard {len(heard)} Terminated, not one")
            require(
                isinstance(heard[0].error, ChildFailure) and heard[0].ref == stopping,
                f"the child stopped with {heard[0].error!r}, not its failure",
            )

    run_virtual(main)


@contract(
    "RT36",
    "a child whose node dies is restarted on a live node within its intensity",
    "the death of the node a remote child runs on is a failure of the child, decided "
    "by its parent's strategy: a Restart places a fresh instance on a live node by "
    "the same placement rule, and tells made while there is none reach it, in order; "
    "a death past the restart intensity escalates to the parent, with NodeDown",
)
def remote_child_restarted_elsewhere(policy: ServingPolicy) -> None:
    async def main(clock: trio.testing.MockClock) -> None:
        bus = MemoryBus()  # (advisories: a death is known at once)
        async with _cluster(policy, bus) as systems:
            a, b, c = systems["a"], systems["b"], systems["c"]
            heard: list[Terminated] = []
            parent = a.spawn(_Parent, [], supervision=Stop())
            a.spawn(_Watcher, parent, heard)
            child: ActorRef = await parent.ask(Restart(max_restarts=1, within=600))
            require(await child.ask("where") == "b", "the child did not run on b")
            bus.disconnect(_node(b).transport)  # type: ignore[arg-type]
            moved = await _until(_restarted(child, 1))
            for _ in range(3):
                child.tell("count")
            require(moved, "the child was not restarted after its node died")
            require(await child.ask("where") == "c", "the child was not restarted on c")
            require(await child.ask("count") == 4, "tells made meanwhile did not all reach it")
            bus.disconnect(_node(c).transport)  # type: ignore[arg-type]
            ended = await _until(lambda: len(heard) == 1)
            require(
                ended and isinstance(heard[0].error, NodeDown),
                "a second death within the window did not escalate to the parent with "
                f"NodeDown: the parent's watcher heard {heard}",
            )

    run_virtual(main)


class _Watcher(Actor):
    def __init__(self, watched: ActorRef, heard: list[Terminated]) -> None:
        self.watched = watched
        self.heard = heard

    def on_start(self) -> None:
        self.watch(self.watched)

    def receive(self, message: Any) -> None:
        if isinstance(message, Terminated):
            self.heard.append(message)

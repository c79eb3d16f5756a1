"""Children on other nodes (issue 32, item 3): ``Actor.spawn_remote`` makes a child
whose instance runs on another node and whom its parent supervises here -- its
failures and its node's death through the parent's strategy, its stop with the
parent's, its ref the same across restarts -- over the in-memory bus under the
MockClock, and over a real nats-server (``cluster_here``)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import attrs
import pytest
import trio
import trio.testing

import helpers
import trio_actors as ta
from trio_actors.remote import MemoryBus, MemoryTransport, Node
from trio_actors.remote._children import RemoteChildCell


class Boom(Exception):
    pass


class Worker(ta.Actor):
    """Counts; fails on ``"boom"``; says where it runs."""

    def __init__(self, start: int) -> None:
        self.count = start

    def receive(self, message: Any) -> Any:
        match message:
            case "add":
                self.count += 1
            case "count":
                return self.count
            case "where":
                return self.system.node.name  # type: ignore[union-attr]
            case "boom":
                raise Boom("worker blew up")
            case "halt":
                self.stop()
        return None


class Parent(ta.Actor):
    """Spawns its children on other nodes when asked; counts what its decider saw."""

    def __init__(self, decisions: list[str]) -> None:
        self.decisions = decisions

    async def receive(self, message: Any) -> Any:
        match message:
            case ("spawn", options):
                return await self.spawn_remote(Worker, 0, **options)
            case "children":
                return self.children
            case ("local", name):
                return self.spawn(Worker, 0, name=name)
        return None


CLUSTER_TYPES: dict[str, Any] = {"errors": [Boom]}


@asynccontextmanager
async def cluster(
    base: ta.Cluster, names: str, workers: str
) -> AsyncIterator[dict[str, ta.ActorSystem]]:
    """Nodes ``names``; those in ``workers`` list Worker as spawnable."""
    async with AsyncExitStack() as stack:
        systems = {}
        for name in names:
            each = attrs.evolve(
                base, spawnable=[Worker] if name in workers else [], **CLUSTER_TYPES
            )
            systems[name] = await stack.enter_async_context(
                ta.open_actor_system(cluster=each, node=name)
            )
        await eventually(
            lambda: all(len(Node.of(s).members()) == len(names) for s in systems.values())
        )
        yield systems


@asynccontextmanager
async def parent_on_a() -> AsyncIterator[
    tuple[MemoryBus, ta.ActorSystem, ta.ActorSystem, ta.ActorRef]
]:
    """Nodes a and b over one bus, b listing Worker as spawnable, and a ``Parent``
    on a. Yields the bus, a, b and the parent."""
    bus = MemoryBus()
    async with cluster(ta.Cluster(bus=bus), "ab", "b") as n:
        yield bus, n["a"], n["b"], n["a"].spawn(Parent, [])


async def restarted(child: ta.ActorRef, times: int) -> None:
    """Wait until ``child`` has restarted ``times`` times and has an instance."""
    await eventually(lambda: child.statistics().restarts == times)
    await eventually(lambda: child.statistics().state == "running")


async def eventually(check: Callable[[], bool]) -> None:
    """:func:`helpers.eventually`, within 30 s."""
    await helpers.eventually(check, within=30)


def transport(system: ta.ActorSystem) -> MemoryTransport:
    found = Node.of(system).transport
    assert isinstance(found, MemoryTransport)
    return found


def live(system: ta.ActorSystem) -> int:
    return system.statistics().live_actors


async def test_a_child_on_another_node_runs_there_and_is_its_parents_child(
    cluster_here: ta.Cluster, clock: trio.testing.MockClock | None
) -> None:
    async with cluster(cluster_here, "ab", "b") as n:
        a, b = n["a"], n["b"]
        parent = a.spawn(Parent, [])
        before = live(b)
        child = await parent.ask(("spawn", {"on": "b", "name": "w"}))
        assert child.path == "system/" + parent.name + "/w"  # (its parent's child, here)
        assert await child.ask("where") == "b"
        assert live(b) == before + 1
        child.tell("add")
        child.tell("add")
        assert await child.ask("count") == 2
        assert await parent.ask("children") == (child,)
        await parent.stop()  # (children first: the instance on b stops too)
        assert live(b) == before
        with pytest.raises(ta.ActorStopped):
            await child.ask("count")


async def test_a_failure_there_reaches_the_parents_strategy_once_and_restarts_it_fresh(
    cluster_here: ta.Cluster, clock: trio.testing.MockClock | None
) -> None:
    async with cluster(cluster_here, "ab", "b") as n:
        a, b = n["a"], n["b"]
        parent = a.spawn(Parent, [])
        child = await parent.ask(("spawn", {"on": "b"}))  # (the default: Restart)
        child.tell("add")
        assert await child.ask("count") == 1
        child.tell("boom")
        # A fresh instance, as Erlang's: what was queued behind the failure at the
        # failed one ends there (this ask: ActorStopped; a tell: a dead letter).
        with pytest.raises(ta.ActorStopped):  # (stopped before answering, or had)
            await child.ask("count")
        await restarted(child, 1)
        assert await child.ask("count") == 0  # (the same ref: a fresh instance)
        assert await child.ask("where") == "b"
        counts = child.statistics()
        assert (counts.failures, counts.restarts) == (1, 1)  # (reached its parent once)
        assert live(b) == 1  # (the failed instance stopped there; the fresh one lives)


async def test_the_parents_strategy_sees_the_error_as_its_own_type(
    cluster_here: ta.Cluster, clock: trio.testing.MockClock | None
) -> None:
    async with cluster(cluster_here, "ab", "b") as n:
        a = n["a"]
        parent = a.spawn(Parent, [])
        by_type = {Boom: ta.Stop(), Exception: ta.Restart()}
        child = await parent.ask(("spawn", {"on": "b", "supervision": by_type}))
        stopped = await_terminated(a, child)
        child.tell("boom")
        terminated = await stopped()
        assert isinstance(terminated.error, Boom)  # (Stop: Boom matched, not Exception)


async def test_stop_decided_stops_the_child_and_its_watcher_hears_the_error(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with cluster(ta.Cluster(bus=MemoryBus()), "ab", "b") as n:
        a, b = n["a"], n["b"]
        parent = a.spawn(Parent, [])
        child = await parent.ask(("spawn", {"on": "b", "supervision": ta.Stop()}))
        stopped = await_terminated(a, child)
        before = live(b)
        child.tell("boom")
        terminated = await stopped()
        assert isinstance(terminated.error, Boom)
        assert terminated.ref == child
        assert live(b) == before - 1
        assert await parent.ask("children") == ()


def await_terminated(system: ta.ActorSystem, ref: ta.ActorRef) -> Callable[[], Any]:
    """Watch ``ref`` from a new actor of ``system``; return what awaits its
    ``Terminated``."""
    got: list[ta.Terminated] = []
    done = trio.Event()

    class Watcher(ta.Actor):
        def on_start(self) -> None:
            self.watch(ref)

        def receive(self, message: Any) -> None:
            if isinstance(message, ta.Terminated):
                got.append(message)
                done.set()

    system.spawn(Watcher)

    async def wait() -> ta.Terminated:
        await done.wait()
        return got[0]

    return wait


async def test_restart_intensity_counts_failures_there_then_escalates(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with cluster(ta.Cluster(bus=MemoryBus()), "ab", "b") as n:
        a = n["a"]
        grand = a.spawn(Parent, [], supervision=ta.Stop())
        stopped = await_terminated(a, grand)
        strategy = ta.Restart(max_restarts=2, within=60)
        child = await grand.ask(("spawn", {"on": "b", "supervision": strategy}))
        for times in (1, 2):
            child.tell("boom")
            await restarted(child, times)
            assert await child.ask("count") == 0
        child.tell("boom")  # (the third within the window: escalated to its parent)
        terminated = await stopped()
        assert isinstance(terminated.error, Boom)


async def test_when_its_node_dies_a_restart_places_it_on_a_live_node(
    autojump_clock: trio.testing.MockClock,
) -> None:
    bus = MemoryBus()
    async with cluster(ta.Cluster(bus=bus), "abc", "bc") as n:
        a, b, c = n["a"], n["b"], n["c"]
        parent = a.spawn(Parent, [])
        child = await parent.ask(("spawn", {"on": ta.RoundRobin()}))
        assert await child.ask("where") == "b"
        before = live(c)
        bus.disconnect(transport(b))  # (b dies: a kill -9, the advisory says so)
        await restarted(child, 1)
        assert await child.ask("where") == "c"
        assert (child.statistics().failures, child.statistics().restarts) == (1, 1)
        assert live(c) == before + 1


async def test_when_the_parents_node_dies_its_instances_stop_there(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with parent_on_a() as (bus, a, b, parent):
        before = live(b)
        for _ in range(3):
            await parent.ask(("spawn", {"on": "b"}))
        assert live(b) == before + 3
        bus.disconnect(transport(a))
        await eventually(lambda: live(b) == before)


async def test_resume_makes_a_fresh_instance_without_counting_a_restart(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with cluster(ta.Cluster(bus=MemoryBus()), "ab", "b") as n:
        parent = n["a"].spawn(Parent, [])
        child = await parent.ask(("spawn", {"on": "b", "supervision": ta.Resume()}))
        child.tell("add")
        child.tell("boom")
        await eventually(lambda: child.statistics().failures == 1)
        await trio.sleep(1)  # (the fresh instance: spawned by the anchor itself)
        assert await child.ask("count") == 0  # (its state went with the instance)
        assert child.statistics().restarts == 0


@asynccontextmanager
async def without_an_instance(
    bus: MemoryBus, n: dict[str, ta.ActorSystem], **spawn: Any
) -> AsyncIterator[tuple[ta.ActorRef, RemoteChildCell]]:
    """A child of a parent on a, placed on b (``spawn``: its options, ``Restart()``
    by default); then b dies while c is between two connections: for the block, the
    child has no instance (its fresh one waits for c), and after it, c has it."""
    a, b, c = n["a"], n["b"], n["c"]
    parent = a.spawn(Parent, [])
    child = await parent.ask(("spawn", {"supervision": ta.Restart(), **spawn}))
    assert await child.ask("where") == "b"
    cell = child._cell
    assert isinstance(cell, RemoteChildCell)
    with bus.between_connections(transport(c)):  # (the next spawn waits)
        bus.disconnect(transport(b))
        await eventually(lambda: child.statistics().failures == 1)
        assert cell.target is None  # (no instance until c answers)
        yield child, cell


async def test_tells_while_there_is_no_instance_are_held_and_sent_on_in_order(
    autojump_clock: trio.testing.MockClock,
) -> None:
    bus = MemoryBus()
    async with cluster(ta.Cluster(bus=bus), "abc", "bc") as n:
        async with without_an_instance(bus, n) as (child, cell):
            for _ in range(5):
                child.tell("add")  # (held, then sent on to the fresh one, in order)
            assert len(cell.held) == 5
        assert await child.ask("count") == 5
        assert await child.ask("where") == "c"
        assert not cell.held


async def test_a_one_for_all_restart_of_a_local_sibling_restarts_the_remote_child_too(
    autojump_clock: trio.testing.MockClock,
) -> None:
    class Group(Parent):
        children_strategy = ta.OneForAll()

    async with cluster(ta.Cluster(bus=MemoryBus()), "ab", "b") as n:
        a = n["a"]
        parent = a.spawn(Group, [])
        remote = await parent.ask(("spawn", {"on": "b"}))
        local = await parent.ask(("local", "here"))
        remote.tell("add")
        assert await remote.ask("count") == 1
        local.tell("boom")
        await eventually_async(lambda: remote.ask("count"), 0)


async def eventually_async(ask: Callable[[], Any], value: Any) -> None:
    with trio.fail_after(30):
        while True:
            if await ask() == value:
                return
            await trio.sleep(0.01)


async def test_what_the_parent_cannot_spawn_is_its_error_and_nothing_is_left(
    cluster_here: ta.Cluster, clock: trio.testing.MockClock | None
) -> None:
    async with cluster(cluster_here, "ab", "") as n:
        a, b = n["a"], n["b"]
        parent = a.spawn(Parent, [])
        with pytest.raises(ta.NotSpawnable):
            await parent.ask(("spawn", {"on": "b"}))
        assert await parent.ask("children") == ()
        assert live(b) == 0


async def test_spawn_remote_outside_a_node_says_so(autojump_clock: trio.testing.MockClock) -> None:
    async with ta.open_actor_system() as system:
        parent = system.spawn(Parent, [])
        with pytest.raises(ta.ActorError, match="not a node"):
            await parent.ask(("spawn", {"on": "b"}))

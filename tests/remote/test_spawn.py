"""Spawning on another node (issue 32, item 2): ``system.node.spawn`` by a node's name
or a placement rule, only classes the target lists as spawnable, the options that
cross, and every way a spawn ends -- over the in-memory bus under the MockClock and
over a real nats-server (``cluster_here``)."""

from __future__ import annotations

import math
from collections.abc import AsyncIterator
from contextlib import AsyncExitStack, asynccontextmanager
from typing import Any

import attrs
import msgspec
import pytest
import trio
import trio.testing

import trio_actors as ta
from helpers import eventually
from trio_actors.remote import Node
from trio_actors.remote._subjects import SPAWN, encode


class Job(msgspec.Struct):
    size: int


class Counter(ta.Actor):
    """Counts from ``start``; says where it runs."""

    def __init__(self, start: int, job: Job | None = None) -> None:
        self.count = start + (0 if job is None else job.size)

    def receive(self, message: Any) -> Any:
        match message:
            case "add":
                self.count += 1
            case "count":
                return self.count
            case "where":
                return self.ref.path
        return None


class Refuses(ta.Actor):
    def __init__(self) -> None:
        raise RuntimeError("not today")

    def receive(self, message: Any) -> None:
        pass


class NotListed(ta.Actor):
    def receive(self, message: Any) -> None:
        pass


def spawnable(cluster: ta.Cluster, *classes: type) -> ta.Cluster:
    return attrs.evolve(cluster, types=[Job], spawnable=list(classes))


@asynccontextmanager
async def nodes(
    cluster: ta.Cluster, names: str, listing: dict[str, tuple[type, ...]]
) -> AsyncIterator[dict[str, ta.ActorSystem]]:
    """Nodes ``names`` (one letter each), each listing the classes ``listing`` gives
    it (none if not given), once each lists all of them as members."""
    async with AsyncExitStack() as stack:
        systems = {}
        for name in names:
            each = spawnable(cluster, *listing.get(name, ()))
            systems[name] = await stack.enter_async_context(
                ta.open_actor_system(cluster=each, node=name)
            )
        await eventually(
            lambda: all(len(Node.of(s).members()) == len(names) for s in systems.values())
        )
        yield systems


def node_of(system: ta.ActorSystem) -> Node:
    return Node.of(system)


def live(system: ta.ActorSystem) -> int:
    return system.statistics().live_actors


async def test_an_actor_spawned_on_another_node_runs_there_with_its_arguments(
    cluster_here: ta.Cluster, clock: trio.testing.MockClock | None
) -> None:
    async with nodes(cluster_here, "ab", {"b": (Counter,)}) as n:
        a, b = n["a"], n["b"]
        before = live(b)
        ref = await node_of(a).spawn(Counter, 10, Job(5), on="b", name="counter")
        assert isinstance(ref, ta.ActorRef)
        assert ref.path == "b:system/counter"
        assert live(b) == before + 1
        ref.tell("add")
        assert await ref.ask("count") == 16
        assert await ref.ask("where") == "system/counter"  # (its own path, on b)
        await ref.stop()
        assert live(b) == before


async def test_a_class_the_node_does_not_list_is_refused_naming_the_class_and_setting(
    cluster_here: ta.Cluster, clock: trio.testing.MockClock | None
) -> None:
    async with nodes(cluster_here, "ab", {"b": (Counter,)}) as n:
        a, b = n["a"], n["b"]
        before = live(b)
        with pytest.raises(ta.NotSpawnable) as refused:
            await node_of(a).spawn(NotListed, on="b")
        text = str(refused.value)
        assert f"{__name__}:NotListed" in text
        assert "Cluster(spawnable=...)" in text
        assert "'b'" in text
        assert live(b) == before  # (nothing ran)


async def test_a_spawn_request_naming_an_unlisted_class_never_imports_or_runs_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """What another node (or any client) names is looked up in the list, never
    imported: a request for ``os:system`` is refused like any unlisted class."""
    from trio_actors.remote import MemoryBus

    cluster = ta.Cluster(bus=MemoryBus())
    async with nodes(cluster, "ab", {"b": (Counter,)}) as n:
        a, b = n["a"], n["b"]
        node = node_of(a)
        cell = node.spawning._node_cell(node.membership.members()[1], "(hostile)")
        body = encode(
            ("os:system", msgspec.Raw(encode(["echo pwned"])), None, None, None, None, False)
        )
        with pytest.raises(ta.NotSpawnable, match="os:system"):
            await node.requests.request(cell, SPAWN, body)
        garbage = encode(("only", "three", 3))
        with pytest.raises(ValueError, match="does not decode"):
            await node.requests.request(cell, SPAWN, garbage)
        assert node_of(b).statistics().bad_input.messages == 1
        assert await (await node.spawn(Counter, 1, on="b")).ask("count") == 1  # (b lives on)


async def test_what_the_spawn_raises_there_comes_back(
    cluster_here: ta.Cluster, clock: trio.testing.MockClock | None
) -> None:
    async with nodes(cluster_here, "ab", {"b": (Counter, Refuses)}) as n:
        a = node_of(n["a"])
        with pytest.raises(RuntimeError, match="not today"):
            await a.spawn(Refuses, on="b")
        await a.spawn(Counter, 1, on="b", name="taken")
        with pytest.raises(ValueError, match="taken"):
            await a.spawn(Counter, 2, on="b", name="taken")
        with pytest.raises(TypeError):  # (Counter takes a start)
            await a.spawn(Counter, on="b")


def cell_there(system: ta.ActorSystem, ref: ta.ActorRef) -> Any:
    """The actor's own cell on its node ``system``, from the remote ref."""
    wire = ref._cell.wire  # type: ignore[union-attr]
    return node_of(system).exports.ref_from_wire(*wire)._cell


async def test_the_mailbox_and_shutdown_cross(
    autojump_clock: trio.testing.MockClock,
) -> None:
    from trio_actors.remote import MemoryBus

    cluster = ta.Cluster(bus=MemoryBus())
    async with nodes(cluster, "ab", {"b": (Counter,)}) as n:
        a, b = node_of(n["a"]), n["b"]
        bounded = ta.Bounded(2, overflow="drop_new")
        ref = await a.spawn(Counter, 0, on="b", name="w", mailbox=bounded, shutdown=7)
        assert ref._cell.overflow == 2  # type: ignore[union-attr]  # (_exports.OVERFLOWS)
        assert cell_there(b, ref).bounded == bounded
        assert cell_there(b, ref).shutdown == 7
        endless = await a.spawn(Counter, 0, on="b", shutdown=math.inf)
        assert cell_there(b, endless).shutdown == math.inf
        assert cell_there(b, await a.spawn(Counter, 0, on="b")).shutdown == 5.0  # (default)


async def test_misuse_is_refused_before_anything_is_sent(
    autojump_clock: trio.testing.MockClock,
) -> None:
    from trio_actors.remote import MemoryBus

    class Local(ta.Actor):
        def receive(self, message: Any) -> None:
            pass

    cluster = ta.Cluster(bus=MemoryBus())
    async with nodes(cluster, "ab", {"b": (Counter,)}) as n:
        a = node_of(n["a"])
        sent = a.requests.made
        with pytest.raises(TypeError, match="Actor subclass"):
            await a.spawn(lambda: Counter(1), on="b")  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="inside a function"):
            await a.spawn(Local, on="b")
        with pytest.raises(TypeError, match=r"cannot cross|not a registered|unsupported"):
            await a.spawn(Counter, object(), on="b")
        with pytest.raises(TypeError, match="supervision"):
            await a.spawn(Counter, 1, on="b", supervision=ta.Stop())
        with pytest.raises(TypeError, match=r"on=\.\.\."):
            await a.spawn(Counter, 1, on=3)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="mailbox"):
            await a.spawn(Counter, 1, on="b", mailbox=2)  # type: ignore[arg-type]
        with pytest.raises(ta.NodeDown, match=r"'z'.*not a member.*a, b"):
            await a.spawn(Counter, 1, on="z")
        assert a.requests.made == sent


def test_the_spawnable_setting_is_checked_when_the_cluster_is_made() -> None:
    class Local(ta.Actor):
        def receive(self, message: Any) -> None:
            pass

    with pytest.raises(TypeError, match="actor classes"):
        ta.Cluster(spawnable=["tests:Counter"])  # type: ignore[list-item]
    with pytest.raises(ValueError, match="inside a function"):
        ta.Cluster(spawnable=[Local])
    assert ta.Cluster(spawnable=[Counter, Counter]).spawnable == (Counter,)


async def test_a_node_refuses_to_open_with_a_spawnable_that_is_no_actor(
    autojump_clock: trio.testing.MockClock,
) -> None:
    from trio_actors.remote import MemoryBus

    with pytest.raises(TypeError, match="Actor subclasses, got Job"):
        async with ta.open_actor_system(
            cluster=ta.Cluster(bus=MemoryBus(), spawnable=[Job]), node="a"
        ):
            pass


async def test_round_robin_spreads_a_class_over_the_members_that_spawn_it(
    cluster_here: ta.Cluster, clock: trio.testing.MockClock | None
) -> None:
    async with nodes(cluster_here, "abcd", {"b": (Counter,), "c": (Counter,)}) as n:
        a = node_of(n["a"])
        where = [(await a.spawn(Counter, i)).path.split(":")[0] for i in range(6)]
        # (a lists nothing: never tried; d refuses at the third spawn, which goes on
        # to b, and is passed over from then on)
        assert where == ["b", "c", "b", "c", "b", "c"]
        d = node_of(n["d"])
        assert a.spawning._refusing[f"{__name__}:Counter"] == {(d.name, d.incarnation)}


async def test_round_robin_includes_this_node_when_it_lists_the_class(
    autojump_clock: trio.testing.MockClock,
) -> None:
    from trio_actors.remote import MemoryBus

    cluster = ta.Cluster(bus=MemoryBus())
    async with nodes(cluster, "ab", {"a": (Counter,), "b": (Counter,)}) as n:
        a = node_of(n["a"])
        refs = [await a.spawn(Counter, i) for i in range(4)]
        # (a's own are local refs: their paths name no node)
        assert [r.path.startswith("b:") for r in refs] == [False, True, False, True]
        assert [await r.ask("count") for r in refs] == [0, 1, 2, 3]


async def test_fewest_actors_chooses_the_least_loaded_member_that_spawns_the_class(
    cluster_here: ta.Cluster, clock: trio.testing.MockClock | None
) -> None:
    async with nodes(cluster_here, "abcd", {"b": (Counter,), "c": (Counter,)}) as n:
        a, b = node_of(n["a"]), n["b"]
        for _ in range(3):
            b.spawn(NotListed)
        first = await a.spawn(Counter, 0, on=ta.FewestActors())
        assert first.path.startswith("c:")  # (b has three more; a and d do not list it)
        for _ in range(4):
            await a.spawn(Counter, 0, on=ta.FewestActors())
        assert live(n["c"]) == live(b)  # (c caught up with b, then they alternate)


async def test_no_member_that_spawns_the_class_is_a_clear_error(
    cluster_here: ta.Cluster, clock: trio.testing.MockClock | None
) -> None:
    async with nodes(cluster_here, "abc", {"b": (Counter,)}) as n:
        a = node_of(n["a"])
        for on in (ta.RoundRobin(), ta.FewestActors()):
            with pytest.raises(ta.NotSpawnable, match="no member of the cluster spawns"):
                await a.spawn(NotListed, on=on)


async def test_a_member_down_before_it_answers_ends_the_spawn_and_is_passed_over_then(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A round-robin spawn to a node that is declared down before it answers ends
    with NodeDown: the actor may or may not have been made there (a node declared
    down wrongly is heard again, its actors alive), so it is not made again
    elsewhere. The next spawn passes b over: it is no member now."""
    from trio_actors.remote import MemoryBus

    bus = MemoryBus(advisories=False)
    cluster = ta.Cluster(bus=bus, heartbeat=1.0, heartbeats_missed=3)
    async with nodes(cluster, "abc", {"b": (Counter,), "c": (Counter,)}) as n:
        a = node_of(n["a"])
        with bus.losing(lambda subject, _payload: ".b." in subject):  # (b is cut off)
            started = trio.current_time()
            with pytest.raises(ta.NodeDown, match="may or may not"):
                await a.spawn(Counter, 3)
            assert trio.current_time() - started >= 3.0  # (b declared down: silence)
            ref = await a.spawn(Counter, 3)
        assert ref.path.startswith("c:")
        assert await ref.ask("count") == 3
        assert [m.name for m in a.members()] == ["a", "c"]


async def test_a_spawn_cancelled_on_its_way_leaves_no_actor_running(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Cancelled after its request left and before the answer came: the actor made
    there is stopped when the answer comes, not left running with nobody's ref."""
    from trio_actors.remote import MemoryBus

    async with nodes(ta.Cluster(bus=MemoryBus()), "ab", {"b": (Counter,)}) as n:
        a, b = node_of(n["a"]), n["b"]
        before = live(b)
        sent = a.requests.made
        with trio.CancelScope() as scope:
            async with trio.open_nursery() as nursery:

                async def cancel_once_sent() -> None:
                    while a.requests.made == sent:
                        await trio.lowlevel.checkpoint()
                    waiter = a.requests.waiting[a.requests.made]
                    assert not waiter.event.is_set()  # (on its way: no answer yet)
                    scope.cancel()

                nursery.start_soon(cancel_once_sent)
                await a.spawn(Counter, 1, on="b")
        assert scope.cancelled_caught
        await eventually(lambda: live(b) == before)  # (made there, then stopped)
        assert not a.requests._late

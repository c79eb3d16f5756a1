"""No weak reference to an actor's cell (``remote/_exports.py``): the compiled
kernel's cell, a mypyc native class, cannot be weakly referenced (issue 34), so a
node keeps its exported actors in strong tables pruned when each stops -- and the
number of a stopped actor finds nothing, as that of a freed one did before.

What the pruning means for the messages to a stopped exported actor (each still
ends: a dead letter, a failed ask, an answered stop, a ``Terminated``), that an
instance of another node's child is still found for its anchor's late watch, and
a cluster scenario run with ``weakref`` refusing cells, as a compiled build would.
"""

from __future__ import annotations

import _weakrefset
import weakref
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from typing import Any

import attrs
import pytest
import trio
import trio.testing
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader
from opentelemetry.sdk.trace import TracerProvider

import trio_actors as ta
from helpers import Echo, Recorder, Watcher, eventually
from trio_actors._core._cell import ActorCell
from trio_actors.observe import Tracing
from trio_actors.remote import MemoryBus, Node
from trio_actors.remote._remote_cell import RemoteCell


class Boom(Exception):
    pass


class FailsToStart(ta.Actor):
    """Its ``on_start`` fails (an instance of a child on another node, under ``Stop``)."""

    def on_start(self) -> None:
        raise Boom("no start")

    def receive(self, message: Any) -> Any:
        return message


class Parent(ta.Actor):
    """Spawns a child on another node when asked (``("spawn", class, options)``)."""

    async def receive(self, message: Any) -> Any:
        match message:
            case ("spawn", cls, options):
                return await self.spawn_remote(cls, **options)
            case "children":
                return self.children
        return None


class Relay(ta.Actor):
    """Answers a ref with a ref: ``("ask", ref, message)`` asks ``ref`` and answers
    what it says; ``("tell", ref, message)`` tells it; anything else comes back."""

    async def receive(self, message: Any) -> Any:
        match message:
            case ("ask", ta.ActorRef() as ref, inner):
                return await ref.ask(inner)
            case ("tell", ta.ActorRef() as ref, inner):
                ref.tell(inner)
                return None
        return message


@asynccontextmanager
async def two_nodes(
    cluster: ta.Cluster, observed: dict[str, Any] | None = None, **a_options: Any
) -> AsyncIterator[tuple[ta.ActorSystem, ta.ActorSystem]]:
    """Nodes a (with ``a_options`` in its cluster, opened with ``observed``) and b,
    each knowing the other."""
    async with (
        ta.open_actor_system(
            cluster=attrs.evolve(cluster, **a_options), node="a", **(observed or {})
        ) as a,
        ta.open_actor_system(cluster=cluster, node="b") as b,
    ):
        await eventually(lambda: len(Node.of(a).members()) == len(Node.of(b).members()) == 2)
        yield a, b


async def across(owner: ta.ActorSystem, user: ta.ActorSystem, name: str) -> ta.ActorRef:
    """``name``'s actor of ``owner`` (registered), as ``user`` reaches it."""
    await Node.of(owner).flush()
    return await user.lookup(name)


async def test_a_stopped_exported_actor_s_number_finds_nothing_and_its_messages_still_end(
    cluster_here: ta.Cluster, clock: trio.testing.MockClock | None
) -> None:
    async with two_nodes(cluster_here) as (a, b):
        echo = a.spawn(Recorder, name="echo")
        a.register("echo", echo)
        keeper = a.spawn(Recorder, name="keeper")
        a.register("keeper", keeper)
        there, keeper_there = await across(a, b, "echo"), await across(a, b, "keeper")
        exports = Node.of(a).exports
        number = Node.of(a).ref_to_wire(echo)[3]
        assert exports.cells[number] is echo._cell  # (exported: found by its number)
        assert echo._cell.export_number == number

        await echo.stop()  # (node a still holds its ref: its cell is alive)
        assert number not in exports.cells  # (forgotten at its stop)
        assert Node.of(a).ref_to_wire(echo)[3] == number  # (the same number again)
        # Every message from b to it still ends: as for an actor freed before.
        there.tell("late")
        with pytest.raises(ta.ActorStopped, match="a:system/echo has stopped"):
            await there.ask("late")
        await there.stop()  # (answered at once)
        assert (await there.wait_stopped()).error is None
        # Its ref, back on node a: a ref of node a through the wire, not its own.
        await keeper_there.ask(there)
        [back] = await keeper.ask("seen")
        assert back != echo
        assert back.path == "a:system/echo"
        assert type(back._cell) is RemoteCell
        back.tell("by the wire")  # (to node a itself: the same dead letter there)
        await eventually(lambda: a.dead_letters.count == 2)
        letters = [(d.recipient.path, d.message, d.reason) for d in a.dead_letters.recent]
        assert letters == [
            ("a:system/echo", "late", "stopped"),
            ("a:system/echo", "by the wire", "stopped"),
        ]
        assert a.statistics().dead_letters.stopped == 2
        assert echo.statistics().dead_letters.stopped == 0  # (not its cell's: unfound)

        # An actor stopped before its ref first leaves: numbered, never kept.
        late = a.spawn(Echo)
        await late.stop()
        late_number = Node.of(a).ref_to_wire(late)[3]
        assert late_number > number
        assert late_number not in exports.cells
        assert Node.of(a).ref_to_wire(late)[3] == late_number


async def test_the_tables_of_exported_actors_forget_each_at_its_stop(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """What a node keeps of its exported actors -- by number, and each shared-name
    member's wire form -- goes when they stop, whoever still holds their refs."""
    async with two_nodes(ta.Cluster(bus=MemoryBus())) as (a, b):
        exports, groups = Node.of(a).exports, Node.of(a).groups
        before = dict(exports.cells)
        b.register("relay", b.spawn(Relay, name="relay"))
        relay_there = await across(b, a, "relay")
        brief = [a.spawn(Echo) for _ in range(50)]
        for ref in brief[:10]:
            a.register("work", ref, shared=True)
        assert await relay_there.ask(brief) == brief  # (to b and back: 50 exported)
        work = await across(a, b, "work")
        for _ in range(20):
            await work.ask("hello")
        assert len(exports.cells) == len(before) + 50
        assert groups._taken  # (the members that took asks: their wire forms)
        for ref in brief:
            await ref.stop()
        assert exports.cells == before
        assert groups._taken == {}


async def test_an_instance_that_failed_before_its_anchor_watched_it_reports_its_error(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The anchor of a child on another node watches its instance once the spawn's
    answer is back: an instance failing in ``on_start`` has stopped by then. Its
    number finds nothing, but its node still holds it for its parent's node, and
    the failure reaches the parent's strategy (a normal stop would not)."""
    cluster = ta.Cluster(bus=MemoryBus(), errors=[Boom])
    async with two_nodes(cluster, spawnable=[FailsToStart]) as (_a, b):
        parent = b.spawn(Parent)
        options = {"on": "a", "supervision": ta.Stop()}
        child = await parent.ask(("spawn", FailsToStart, options))
        with trio.fail_after(30):
            terminated = await child.wait_stopped()
        assert isinstance(terminated.error, Boom)
        assert child.statistics().failures == 1
        assert await parent.ask("children") == ()


# --- a cluster with weak references to cells refused, as a compiled build would ----

_ref = weakref.ref
_proxy = weakref.proxy


class _AnyRef(type):
    """``isinstance(x, weakref.ref)`` keeps its meaning while it is patched."""

    def __instancecheck__(cls, instance: object) -> bool:
        return isinstance(instance, _ref)

    def __subclasscheck__(cls, subclass: type) -> bool:
        return issubclass(subclass, _ref)


class _RefusingRef(_ref, metaclass=_AnyRef):  # type: ignore[type-arg]
    """``weakref.ref`` (and through it ``WeakKeyDictionary``, ``WeakValueDictionary``
    -- its ``KeyedRef`` -- and ``finalize``), refusing an actor's cell: what a native
    class without ``__weakref__`` does."""

    def __new__(cls, obj: object, *args: Any) -> Any:
        _refuse(obj)
        return _ref.__new__(_ref if cls is _RefusingRef else cls, obj, *args)


def _refuse(obj: object) -> None:
    if isinstance(obj, ActorCell):
        raise TypeError(f"cannot create weak reference to {type(obj).__name__!r} object")


def _refusing_proxy(obj: object, *args: Any) -> Any:
    _refuse(obj)
    return _proxy(obj, *args)


@pytest.fixture
def refusing_weak_cells(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(weakref, "ref", _RefusingRef)
    monkeypatch.setattr(weakref, "proxy", _refusing_proxy)
    monkeypatch.setattr(_weakrefset, "ref", _RefusingRef)  # (WeakSet)


def _check_refused(cell: ActorCell) -> None:
    by_cell: weakref.WeakKeyDictionary[ActorCell, int] = weakref.WeakKeyDictionary()
    cells: weakref.WeakValueDictionary[int, ActorCell] = weakref.WeakValueDictionary()
    some: weakref.WeakSet[ActorCell] = weakref.WeakSet()
    for weakly in (
        lambda: weakref.ref(cell),
        lambda: by_cell.__setitem__(cell, 1),
        lambda: cells.__setitem__(1, cell),
        lambda: some.add(cell),
        lambda: weakref.finalize(cell, print),
        lambda: weakref.proxy(cell),
    ):
        with pytest.raises(TypeError, match="cannot create weak reference"):
            weakly()


async def test_a_cluster_runs_with_weak_references_to_cells_refused(
    autojump_clock: trio.testing.MockClock, refusing_weak_cells: None
) -> None:
    """Spawns (local, remote, a child on another node), refs across both ways, a
    bounded mailbox and a pool, shared names, death watch, stops and refs to
    stopped actors, node a traced and metered (its cells observed ones): nothing
    of the runtime weakly references a cell (``_RefusingRef`` raises in whatever
    does, as a compiled cell would). Fails with the weak tables of before."""
    cluster = ta.Cluster(bus=MemoryBus(), errors=[Boom])
    observed = {
        "tracing": Tracing(provider=TracerProvider(), tells="all"),
        "metrics": MeterProvider(metric_readers=[InMemoryMetricReader()]),
    }
    async with two_nodes(cluster, observed, spawnable=[Echo, FailsToStart]) as (a, b):
        echo = a.spawn(Echo, name="echo")
        bounded = a.spawn(Echo, name="bounded", mailbox=ta.Bounded(4))
        pool = a.spawn(ta.Pool(Echo, size=2), name="pool")
        relay = b.spawn(Relay, name="relay")
        _check_refused(echo._cell)  # type: ignore[arg-type]
        assert type(echo._cell) is not ActorCell  # (an observed one: a subclass)
        for name, ref in (("echo", echo), ("bounded", bounded), ("pool", pool)):
            a.register(name, ref)
        b.register("relay", relay)
        for system in (a, b):
            for index in range(2):
                system.register("work", system.spawn(Echo, name=f"w{index}"), shared=True)
        echo_there, bounded_there = await across(a, b, "echo"), await across(a, b, "bounded")
        pool_there, relay_there = await across(a, b, "pool"), await across(b, a, "relay")

        # Refs both ways: b's own refs back on b are its own; a's, back on a, a's.
        mine = [b.spawn(Echo) for _ in range(3)]
        assert await echo_there.ask(mine) == mine
        assert await relay_there.ask(("ask", echo, "hi")) == "hi"  # (a's ref, to b and back)
        assert await relay_there.ask([echo, bounded]) == [echo, bounded]
        for target in (echo_there, bounded_there, pool_there):
            target.tell("told")
            assert await target.ask("asked") == "asked"
            await target.send("sent")
        # Shared names, from each node.
        for system in (a, b):
            group = await system.lookup("work")
            group.tell("to the group")
            assert await group.ask("asked") == "asked"
        # Death watch across, a remote spawn, children on another node.
        watcher = b.spawn(Watcher)
        await watcher.ask(("watch", echo_there))
        assert b.node is not None
        spawned = await b.node.spawn(Echo, on="a")
        assert await spawned.ask("there") == "there"
        parent = b.spawn(Parent)
        child = await parent.ask(("spawn", Echo, {"on": "a"}))
        assert await child.ask("child") == "child"
        failed = await parent.ask(("spawn", FailsToStart, {"on": "a", "supervision": ta.Stop()}))
        assert isinstance((await failed.wait_stopped()).error, Boom)
        # Stops, and messages to what stopped.
        await echo.stop()

        async def told() -> bool:
            return bool(await watcher.ask("notices") == [(echo_there, None)])

        await eventually(told)
        echo_there.tell("late")
        with pytest.raises(ta.ActorStopped):
            await echo_there.ask("late")
        back = await relay_there.ask(echo)  # (through the wire: a ref of node a's)
        assert back.path == "a:system/echo"
        await spawned.stop()
        await parent.stop()
        await eventually(lambda: a.dead_letters.count >= 1)
        for system in (a, b):
            for cell in _cells_of(system):
                assert weakref.getweakrefcount(cell) == 0
        assert weakref.getweakrefcount(echo._cell) == 0


def _cells_of(system: ta.ActorSystem) -> Iterator[ActorCell]:
    """Every live cell of ``system``, at every level."""
    stack = list(system._cells.values())
    while stack:
        cell = stack.pop()
        yield cell
        stack.extend((cell.children or {}).values())

"""No weak reference to an actor's cell (``remote/_exports.py``): the compiled
kernel's cell, a mypyc native class, cannot be weakly referenced (issue 34), so a
node keeps its exported actors in strong tables pruned when each stops -- and the
number of a stopped actor finds nothing, as that of a freed one did before.

What the pruning means for the messages to a stopped exported actor (each still
ends: a dead letter, a failed ask, an answered stop, a ``Terminated``), and that an
instance of another node's child is still found for its anchor's late watch.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import attrs
import pytest
import trio
import trio.testing

import trio_actors as ta
from helpers import Echo, Recorder, eventually
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
    cluster: ta.Cluster, **a_options: Any
) -> AsyncIterator[tuple[ta.ActorSystem, ta.ActorSystem]]:
    """Nodes a (with ``a_options`` in its cluster) and b, each knowing the other."""
    async with (
        ta.open_actor_system(cluster=attrs.evolve(cluster, **a_options), node="a") as a,
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

"""Names served by many actors across nodes (``remote/_groups.py``): registering a
name shared, the group's ref, where its messages go and how each ends -- over the
in-memory bus (its queue groups), under the MockClock."""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
import trio.testing

import trio_actors as ta
from helpers import Echo
from trio_actors.remote import MemoryBus, Node

HEARTBEAT = 1.0
MISSED = 3


def cluster_on(bus: MemoryBus, **options: Any) -> ta.Cluster:
    return ta.Cluster(bus=bus, heartbeat=HEARTBEAT, heartbeats_missed=MISSED, **options)


@asynccontextmanager
async def node(cluster: ta.Cluster, name: str) -> AsyncIterator[ta.ActorSystem]:
    async with ta.open_actor_system(cluster=cluster, node=name) as system:
        yield system


class Where(ta.Actor):
    """Answers with its node's name and its own name, and keeps what it is told."""

    def __init__(self) -> None:
        self.told: list[Any] = []

    def receive(self, message: Any) -> Any:
        if isinstance(message, tuple) and message[0] == "tell":
            self.told.append(message[1])
            return None
        if message == "told":
            return list(self.told)
        node = self.system.node
        assert node is not None
        return (node.name, self.ref.name)


class Slow(ta.Actor):
    """Takes ``seconds`` of trio time per ask, then answers its node's name."""

    async def receive(self, message: Any) -> Any:
        await trio.sleep(message)
        node = self.system.node
        assert node is not None
        return node.name


async def test_asks_to_a_shared_name_spread_over_its_members_on_every_node(
    autojump_clock: trio.testing.MockClock,
) -> None:
    cluster = cluster_on(MemoryBus())
    async with node(cluster, "a") as a, node(cluster, "b") as b, node(cluster, "c") as c:
        for system in (a, b):
            for index in range(2):
                system.register("work", system.spawn(Where, name=f"w{index}"), shared=True)
        await trio.sleep(HEARTBEAT / 5)
        group = await c.lookup("work")
        assert group.name == "work"
        assert group.path == "shared:work"
        seen = Counter([await group.ask("where") for _ in range(400)])
        assert set(seen) == {("a", "w0"), ("a", "w1"), ("b", "w0"), ("b", "w1")}
        assert min(seen.values()) > 50  # (the server's choice: each gets some)
        # The same from a node that serves the name itself (its own members too).
        seen_from_a = Counter([await (await a.lookup("work")).ask("where") for _ in range(200)])
        assert {where[0] for where in seen_from_a} == {"a", "b"}


async def test_a_tell_to_a_shared_name_reaches_one_member_and_is_known_to_have_ended(
    autojump_clock: trio.testing.MockClock,
) -> None:
    cluster = cluster_on(MemoryBus())
    async with node(cluster, "a") as a, node(cluster, "b") as b, node(cluster, "c") as c:
        members = [a.spawn(Where), b.spawn(Where)]
        a.register("work", members[0], shared=True)
        b.register("work", members[1], shared=True)
        await trio.sleep(HEARTBEAT / 5)
        group = await c.lookup("work")
        for number in range(100):
            group.tell(("tell", number))
        groups = Node.of(c).groups
        assert groups.in_flight == 100
        await trio.sleep(HEARTBEAT / 5)
        assert groups.in_flight == 0  # (every one ended there, and said so)
        told = [*(await members[0].ask("told")), *(await members[1].ask("told"))]
        assert sorted(told) == list(range(100))  # (each once, to one member)
        assert c.dead_letters.count == 0
        assert Node.of(c).unconfirmed == 0
        assert Node.of(c).requests.waiting == {}


async def test_messages_from_one_sender_to_one_member_keep_their_order(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """No order holds across members; from one sender, each member sees its
    messages in the order they were sent."""
    cluster = cluster_on(MemoryBus())
    async with node(cluster, "a") as a, node(cluster, "b") as b, node(cluster, "c") as c:
        members = [a.spawn(Where), a.spawn(Where), b.spawn(Where)]
        a.register("work", members[0], shared=True)
        a.register("work", members[1], shared=True)
        b.register("work", members[2], shared=True)
        await trio.sleep(HEARTBEAT / 5)
        group = await c.lookup("work")
        for number in range(300):
            group.tell(("tell", number))
        await trio.sleep(HEARTBEAT / 5)
        each = [await member.ask("told") for member in members]
        assert all(len(told) > 30 for told in each)  # (spread)
        assert all(told == sorted(told) for told in each)  # (in order per member)
        assert sorted(n for told in each for n in told) == list(range(300))


async def test_a_shared_name_with_no_member_is_not_found_and_its_tell_a_dead_letter(
    autojump_clock: trio.testing.MockClock,
) -> None:
    cluster = cluster_on(MemoryBus())
    async with node(cluster, "a") as a, node(cluster, "b") as b:
        member = a.spawn(Where)
        a.register("work", member, shared=True)
        await trio.sleep(HEARTBEAT / 5)
        group = await b.lookup("work")
        a.unregister("work", member)
        await trio.sleep(HEARTBEAT / 5)
        with pytest.raises(ta.ActorNotFound, match="work"):
            await group.ask("where")
        group.tell(("tell", 1))
        await trio.sleep(HEARTBEAT / 5)
        assert [(d.message, d.reason) for d in b.dead_letters.recent] == [
            (("tell", 1), "unreachable")
        ]
        with pytest.raises(ta.ActorNotFound):
            await b.lookup("work")  # (nobody serves it: not shared any more)
        assert b.node is not None
        assert "work" not in b.node.registered()


async def test_a_name_is_shared_or_single_never_both_and_the_error_names_the_node(
    autojump_clock: trio.testing.MockClock,
) -> None:
    cluster = cluster_on(MemoryBus())
    async with node(cluster, "a") as a, node(cluster, "b") as b:
        a.register("shared", a.spawn(Echo), shared=True)
        a.register("single", a.spawn(Echo))
        await trio.sleep(HEARTBEAT / 5)
        with pytest.raises(ValueError, match="shared name on node 'a'"):
            b.register("shared", b.spawn(Echo))
        with pytest.raises(ValueError, match="holds it alone on node 'a'"):
            b.register("single", b.spawn(Echo), shared=True)
        with pytest.raises(ValueError, match="shared or single"):
            a.register("shared", a.spawn(Echo))  # (here too)
        with pytest.raises(ValueError, match="shared or single"):
            a.register("single", a.spawn(Echo), shared=True)
        b.register("shared", b.spawn(Echo), shared=True)  # (one more member: fine)
        assert b.node is not None
        registered = b.node.registered()
        assert set(registered) == {"shared", "single"}
        assert registered["shared"] == await b.lookup("shared")  # (one group ref)


async def test_shared_needs_a_node() -> None:
    async with ta.open_actor_system() as system:
        with pytest.raises(ValueError, match="not a node"):
            system.register("work", system.spawn(Echo), shared=True)


async def test_a_group_ref_cannot_be_stopped_or_watched_and_crosses_in_messages(
    autojump_clock: trio.testing.MockClock,
) -> None:
    cluster = cluster_on(MemoryBus())
    async with node(cluster, "a") as a, node(cluster, "b") as b:
        a.register("work", a.spawn(Where), shared=True)
        echo = b.spawn(Echo)
        b.register("echo", echo)
        await trio.sleep(HEARTBEAT / 5)
        group = await a.lookup("work")
        with pytest.raises(ta.ActorError, match="stop its members"):
            await group.stop()
        with pytest.raises(ta.ActorError, match="stop its members"):
            group.stop_nowait()
        remote_echo = await a.lookup("echo")
        back = await remote_echo.ask(["a group", group])  # (there and back again)
        assert back == ["a group", group]
        assert (await back[1].ask("where"))[0] == "a"


async def test_a_member_leaves_when_its_actor_stops(
    autojump_clock: trio.testing.MockClock,
) -> None:
    cluster = cluster_on(MemoryBus())
    async with node(cluster, "a") as a, node(cluster, "b") as b:
        first, second = a.spawn(Where, name="first"), a.spawn(Where, name="second")
        a.register("work", first, shared=True)
        a.register("work", second, shared=True)
        await trio.sleep(HEARTBEAT / 5)
        group = await b.lookup("work")
        await first.stop()
        answers = {await group.ask("where") for _ in range(50)}
        assert answers == {("a", "second")}

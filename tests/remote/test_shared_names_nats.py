"""Shared names over a real nats-server (its queue groups) and, the same tests, over
the in-memory bus under the MockClock: the group spreads asks over members on two
nodes, tells are each handled once and known to have ended, each member sees one
sender's messages in order, and a name nobody serves any more is not found. The
trio deadlines only detect a hang (``eventually``)."""

from __future__ import annotations

from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio
import trio.testing
from test_shared_names import Where as Member  # (keeps what it is told, says where)

import trio_actors as ta
from helpers import eventually
from trio_actors.remote import Node


@asynccontextmanager
async def three_nodes(
    cluster: ta.Cluster,
) -> AsyncIterator[tuple[ta.ActorSystem, ta.ActorSystem, ta.ActorSystem]]:
    async with (
        ta.open_actor_system(cluster=cluster, node="a") as a,
        ta.open_actor_system(cluster=cluster, node="b") as b,
        ta.open_actor_system(cluster=cluster, node="c") as c,
    ):
        yield a, b, c


async def group_of(user: ta.ActorSystem, name: str, *servers: ta.ActorSystem) -> ta.ActorRef:
    """``name``'s group as ``user`` reaches it, once the serving nodes have flushed."""
    for server in servers:
        assert server.node is not None
        await server.node.flush()
    with trio.fail_after(10):
        return await user.lookup(name)


async def test_a_shared_name_spreads_asks_and_tells_over_members_on_two_nodes(
    cluster_here: ta.Cluster, clock: trio.testing.MockClock | None
) -> None:
    async with three_nodes(cluster_here) as (a, b, c):
        members = [a.spawn(Member, name="m0"), a.spawn(Member, name="m1")]
        members += [b.spawn(Member, name="m0"), b.spawn(Member, name="m1")]
        for member in members[:2]:
            a.register("work", member, shared=True)
        for member in members[2:]:
            b.register("work", member, shared=True)
        group = await group_of(c, "work", a, b)
        with trio.fail_after(10):
            seen = Counter([await group.ask("where") for _ in range(200)])
        assert set(seen) == {("a", "m0"), ("a", "m1"), ("b", "m0"), ("b", "m1")}
        for number in range(400):
            group.tell(("tell", number))
            if number % 4 == 3:  # (a stream: a burst leaves in messages of 16, each
                await trio.lowlevel.checkpoint()  # to one member: test_shared_names)
        groups = Node.of(c).groups
        await eventually(lambda: groups.in_flight == 0)  # (each said to have ended)
        told = [await member.ask("told") for member in members]
        assert all(each == sorted(each) for each in told)  # (in order per member)
        assert all(each for each in told)  # (each member got some)
        assert sorted(n for each in told for n in each) == list(range(400))  # (once each)
        assert c.dead_letters.count == 0
        assert Node.of(c).unconfirmed == 0
        assert Node.of(c).requests.waiting == {}


async def test_a_shared_name_whose_members_all_stopped_is_not_found(
    cluster_here: ta.Cluster, clock: trio.testing.MockClock | None
) -> None:
    async with three_nodes(cluster_here) as (a, b, c):
        first, second = a.spawn(Member, name="first"), b.spawn(Member, name="second")
        a.register("work", first, shared=True)
        b.register("work", second, shared=True)
        group = await group_of(c, "work", a, b)
        await first.stop()
        assert a.node is not None
        await a.node.flush()
        with trio.fail_after(10):
            assert {await group.ask("where") for _ in range(20)} == {("b", "second")}
            await second.stop()
            assert b.node is not None
            await b.node.flush()
            try:
                await group.ask("where")
            except ta.ActorNotFound:
                pass
            else:
                raise AssertionError("an ask to a shared name nobody serves was answered")
            group.tell(("tell", 1))
        await eventually(lambda: c.dead_letters.count == 1)
        assert [(d.message, d.reason) for d in c.dead_letters.recent] == [
            (("tell", 1), "unreachable")
        ]

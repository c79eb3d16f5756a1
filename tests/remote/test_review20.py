"""Review of 20aafbc (tells across nodes decoded first, queued in one call) and
e6321c4 (tells to a shared name coalesced, their ends said by index): the defects
found, each with the test that showed it -- over the in-memory bus, under the
MockClock."""

from __future__ import annotations

from typing import Any

import attrs
import msgspec
import trio
import trio.testing

import trio_actors as ta
from trio_actors.remote import MemoryBus, Node

HEARTBEAT = 1.0
MISSED = 3


def cluster_on(bus: MemoryBus, **options: Any) -> ta.Cluster:
    return ta.Cluster(bus=bus, heartbeat=HEARTBEAT, heartbeats_missed=MISSED, **options)


class Keeper(ta.Actor):
    """Keeps what it is told; ``"seen"`` answers with the list."""

    def __init__(self) -> None:
        self.seen: list[Any] = []

    def receive(self, message: Any) -> Any:
        if message == "seen":
            return list(self.seen)
        self.seen.append(message)
        return None


class OnlyOnC(msgspec.Struct):
    """A type node c registers and node a does not: a tell of it cannot be decoded on a."""

    payload: str


async def test_an_undecodable_tell_to_a_shared_name_keeps_a_bounded_prefix_and_is_counted(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # A tell whose message its receiver cannot decode is a dead letter there whose
    # message is a bounded prefix of its bytes (InputLimits.undecodable_prefix,
    # within undecodable_bytes for all of them), counted in the node's bad input
    # ("tells") -- docs/remote.rst, BadInputCounts.tells, NodeStatistics.
    # undecodable_bytes. _taken_in.py does so for tells to one actor; a tell taken
    # from a shared name (Groups._take) kept all its bytes, uncounted: a sender
    # of an unregistered type (or anyone who may publish on the name's subject)
    # could fill the dead-letter log with up to 10,000 bodies of up to max_payload
    # each, where 1 MiB is the documented bound.
    bus = MemoryBus()
    cluster = cluster_on(bus)
    async with (
        ta.open_actor_system(cluster=cluster, node="a") as a,
        ta.open_actor_system(cluster=attrs.evolve(cluster, types=[OnlyOnC]), node="c") as c,
    ):
        member = a.spawn(Keeper)
        a.register("work", member, shared=True)
        await trio.sleep(HEARTBEAT / 5)
        group = await c.lookup("work")
        assert a.node is not None
        before = a.node.statistics()
        group.tell(("told", 0))  # (alone, at once: the next ones leave together)
        group.tell(("told", 1))
        group.tell(OnlyOnC("x" * 10_000))  # (in the middle of a message of tells)
        group.tell(("told", 2))
        await trio.sleep(HEARTBEAT / 5)
        assert await member.ask("seen") == [("told", 0), ("told", 1), ("told", 2)]
        (letter,) = [d for d in a.dead_letters.recent if d.reason == "undecodable"]
        prefix = cluster.limits.undecodable_prefix
        assert isinstance(letter.message, bytes)
        assert 0 < len(letter.message) <= prefix  # (was: all 10,000-odd bytes)
        after = a.node.statistics()
        assert after.bad_input.tells == before.bad_input.tells + 1
        assert after.undecodable_bytes == before.undecodable_bytes + len(letter.message)
        # The sender's side is exact either way: the tell ended there, said so.
        assert Node.of(c).groups.in_flight == 0
        assert (c.dead_letters.count, Node.of(c).unconfirmed) == (0, 0)

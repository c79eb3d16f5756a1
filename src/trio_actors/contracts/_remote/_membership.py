"""Contracts across nodes, membership: RT33 membership converges.

Every live node lists the same members -- the nodes up, itself included -- soon
after each change: within a quarter of a heartbeat after a node joins (the joiner's
``hello`` is answered at once: nobody waits for a heartbeat) and after one leaves
cleanly (its ``bye``), within ``heartbeats_missed + 2`` heartbeats after one dies
without a word (no advisories here: silence is what tells); and every live node's
events say the same changes, in order, with the reason.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio
import trio.testing

from ... import (
    ActorSystem,
    Cluster,
    MemberDown,
    MembershipEvents,
    ServingPolicy,
    open_actor_system,
)
from ...remote import MemoryBus, Node
from .._harness import require, run_virtual
from .._registry import contract
from ._nodes import HEARTBEAT

_MISSED = 3  # (Cluster's default heartbeats_missed)
_QUICK = HEARTBEAT / 4  # (a join or a clean leave is seen within this)
_DEATH = (_MISSED + 2) * HEARTBEAT  # (a silent death within this)


def _members(system: ActorSystem) -> set[tuple[str, str]]:
    assert system.node is not None
    return {(member.name, member.incarnation) for member in system.node.members()}


def _identity(system: ActorSystem) -> tuple[str, str]:
    assert system.node is not None
    return (system.node.name, system.node.incarnation)


async def _converge(live: list[ActorSystem], within: float, after: str) -> None:
    """Require every node of ``live`` to list exactly ``live`` within ``within``
    seconds (looked at every twentieth of a heartbeat)."""
    expected = {_identity(system) for system in live}
    deadline = trio.current_time() + within
    while True:
        listed = {_identity(system)[0]: _members(system) for system in live}
        if all(members == expected for members in listed.values()):
            return
        if trio.current_time() >= deadline:
            names = {node: sorted(name for name, _ in members) for node, members in listed.items()}
            require(False, f"{within} s after {after}, the live nodes listed {names}")
        await trio.sleep(HEARTBEAT / 20)


def _seen(events: MembershipEvents) -> list[str]:
    """What ``events`` holds now, as ``"<kind> <node> [reason]"``."""
    seen: list[str] = []
    while True:
        try:
            event = events.receive_nowait()
        except (trio.WouldBlock, trio.EndOfChannel):
            return seen
        reason = f" {event.reason}" if isinstance(event, MemberDown) else ""
        seen.append(f"{type(event).__name__} {event.member.name}{reason}")


@contract(
    "RT33",
    "membership converges",
    "every live node lists the same members (itself included) within a quarter of a "
    "heartbeat after a node joins (it asks at join: nobody waits for a heartbeat) and "
    "after one leaves cleanly, and within heartbeats_missed + 2 heartbeats after one "
    "dies without a word; every live node's events say joined, left and down "
    "(silence) for them, in that order",
)
def membership_converges(policy: ServingPolicy) -> None:
    async def main(clock: trio.testing.MockClock) -> None:
        bus = MemoryBus(advisories=False)  # (a death is heard as silence)
        cluster = Cluster(bus=bus, heartbeat=HEARTBEAT, heartbeats_missed=_MISSED)

        @asynccontextmanager
        async def node(name: str) -> AsyncIterator[ActorSystem]:
            async with open_actor_system(serving=policy, cluster=cluster, node=name) as system:
                yield system

        async with node("a") as a, node("b") as b:
            await _converge([a, b], _QUICK, "b joined")
            assert a.node is not None
            assert b.node is not None
            followers = {"a": a.node.events(), "b": b.node.events()}
            await trio.sleep(10 * HEARTBEAT + HEARTBEAT / 2)  # (mid-way between beats)
            async with node("c") as c:
                await _converge([a, b, c], _QUICK, "c joined")
                async with node("d") as d:
                    await _converge([a, b, c, d], _QUICK, "d joined")
                    await trio.sleep(3.3 * HEARTBEAT)
                await _converge([a, b, c], _QUICK, "d left cleanly")
                await trio.sleep(2.6 * HEARTBEAT)
                async with node("e") as e:
                    await _converge([a, b, c, e], _QUICK, "e joined")
                    assert c.node is not None
                    followers["c"] = c.node.events()
                    bus.disconnect(Node.of(e).transport)  # type: ignore[arg-type]
                    await _converge([a, b, c], _DEATH, "e died")
                seen = {name: _seen(events) for name, events in followers.items()}
        expected = ["MemberJoined c", "MemberJoined d", "MemberLeft d", "MemberJoined e"]
        for name in ("a", "b"):
            require(
                seen[name] == [*expected, "MemberDown e silence"],
                f"node {name}'s events were {seen[name]}",
            )
        require(seen["c"] == ["MemberDown e silence"], f"node c's events were {seen['c']}")

    run_virtual(main)

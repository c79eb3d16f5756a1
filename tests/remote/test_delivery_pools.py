"""Tells and sends to a ``Pool`` on another node are tracked like those to a bounded
mailbox (``remote/_taken_in.py``, "Pools"): each ends, for its sender, when a worker
has handled it or it is a dead letter there -- not when the pool has it -- so a node
that dies with a pool's tells queued gives them back ``"in-doubt"``, and ``send``
into a full bounded pool waits for room over there. Over the in-memory bus, under an
autojumping MockClock."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
import trio.testing

import trio_actors as ta
from helpers import letters, link_of
from trio_actors.remote import MemoryBus, Node, _link

HEARTBEAT = 0.5
ROUTINGS = ["balancing", "round_robin", "smallest_mailbox"]


class Worker(ta.Actor):
    """Waits for ``gate`` (or a tenth of a heartbeat if it is ``None``), then logs
    the message in the pool's shared ``log``."""

    def __init__(self, log: list[Any], gate: trio.Event | None) -> None:
        self.log = log
        self.gate = gate

    async def receive(self, message: Any) -> None:
        if self.gate is None:
            await trio.sleep(HEARTBEAT / 10)
        else:
            await self.gate.wait()
        self.log.append(message)


def gated_pool(
    routing: str, mailbox: ta.Bounded | None = None
) -> tuple[list[Any], trio.Event, ta.Pool]:
    """A pool of two workers that wait for the returned gate, logging into the list."""
    log: list[Any] = []
    gate = trio.Event()
    pool = ta.Pool(Worker, args=(log, gate), size=2, routing=routing, mailbox=mailbox)  # type: ignore[arg-type]
    return log, gate, pool


@asynccontextmanager
async def pool_on_b(
    bus: MemoryBus, pool: ta.Pool
) -> AsyncIterator[tuple[ta.ActorSystem, ta.ActorSystem, ta.ActorRef, ta.ActorRef]]:
    """Nodes a (the sender) and b; ``pool`` spawned on b, and its ref as a has it."""
    cluster = ta.Cluster(bus=bus, heartbeat=HEARTBEAT, heartbeats_missed=3)
    async with (
        ta.open_actor_system(cluster=cluster, node="b") as b,
        ta.open_actor_system(cluster=cluster, node="a") as a,
    ):
        here = b.spawn(pool, name="pool")
        b.register("pool", here)
        await Node.of(b).flush()
        yield a, b, here, await a.lookup("pool")


@pytest.mark.parametrize("routing", ROUTINGS)
async def test_a_tell_to_a_remote_pool_is_acknowledged_once_a_worker_has_handled_it(
    autojump_clock: trio.testing.MockClock, routing: str
) -> None:
    log, gate, pool = gated_pool(routing)
    async with pool_on_b(MemoryBus(), pool) as (a, _b, _here, there):
        for number in range(20):
            there.tell(number)
        await trio.sleep(HEARTBEAT)
        link = link_of(there)
        assert (link.told, link.acked, link.in_window) == (20, 0, 20)  # (none handled)
        gate.set()
        await trio.sleep(HEARTBEAT)
        assert sorted(log) == list(range(20))
        assert (link.acked, link.in_window) == (20, 0)
        assert Node.of(a).unconfirmed == 0


@pytest.mark.parametrize("routing", ROUTINGS)
async def test_a_node_that_dies_with_a_pools_tells_queued_gives_them_back_in_doubt(
    autojump_clock: trio.testing.MockClock, routing: str
) -> None:
    _log, gate, pool = gated_pool(routing)
    bus = MemoryBus()
    async with pool_on_b(bus, pool) as (a, b, _here, there):
        for number in range(20):
            there.tell(number)
        await trio.sleep(HEARTBEAT / 2)
        bus.disconnect(Node.of(b).transport)  # type: ignore[arg-type]  # (as kill -9)
        await trio.sleep(HEARTBEAT)
        assert letters(a, "in-doubt") == list(range(20))  # (with the messages, in order)
        assert Node.of(a).unconfirmed == 20
        link = link_of(there)
        assert (link.told, link.acked, link.in_doubt, link.in_window) == (20, 0, 20, 0)
        gate.set()  # (b's actors may now finish: b is gone for a)


@pytest.mark.parametrize("routing", ROUTINGS)
@pytest.mark.parametrize("overflow", ["fail", "drop_new", "drop_old"])
async def test_send_to_a_full_remote_bounded_pool_waits_and_nothing_is_dropped(
    autojump_clock: trio.testing.MockClock,
    monkeypatch: pytest.MonkeyPatch,
    routing: str,
    overflow: str,
) -> None:
    # Before: 50 sends to a full bounded balancing pool on another node became
    # overflow dead letters there, and their sender saw nothing.
    monkeypatch.setattr(_link, "WINDOW", 8)
    log: list[Any] = []
    bound = ta.Bounded(2, overflow=overflow)  # type: ignore[arg-type]
    pool = ta.Pool(Worker, args=(log, None), size=2, routing=routing, mailbox=bound)  # type: ignore[arg-type]
    async with pool_on_b(MemoryBus(), pool) as (a, b, _here, there):
        # The window (8) is more than the pool holds (two workers each handling one,
        # and two queued: in the shared queue, or in each worker's mailbox), so
        # only waiting for room there keeps the pool from overflowing.
        for number in range(50):
            await there.send(number)
            assert link_of(there).in_window <= 8
        await trio.sleep(HEARTBEAT * 8)
        assert sorted(log) == list(range(50))  # (all: none dropped)
        assert list(a.dead_letters.recent) == list(b.dead_letters.recent) == []
        assert (link_of(there).acked, Node.of(a).unconfirmed) == (50, 0)


async def test_tells_past_a_remote_balancing_pools_bound_meet_its_policy_there_and_are_acknowledged(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log, gate, pool = gated_pool("balancing", ta.Bounded(2, overflow="drop_old"))
    async with pool_on_b(MemoryBus(), pool) as (a, b, _here, there):
        for number in range(20):
            there.tell(number)
        await trio.sleep(HEARTBEAT / 2)
        gate.set()
        await trio.sleep(HEARTBEAT)
        # Two handed to the workers, the newest two queued, the rest dropped there.
        dropped = letters(b, "overflow")
        assert sorted(log) == [0, 1, 18, 19]
        assert dropped == list(range(2, 18))  # (the messages, not their envelopes)
        assert (link_of(there).acked, link_of(there).in_window) == (20, 0)
        assert (Node.of(a).unconfirmed, letters(a, "in-doubt")) == (0, [])


@pytest.mark.parametrize("routing", ROUTINGS)
async def test_a_pool_that_stops_with_tells_queued_makes_them_dead_letters_there_all_acknowledged(
    autojump_clock: trio.testing.MockClock, routing: str
) -> None:
    log, gate, pool = gated_pool(routing)
    async with pool_on_b(MemoryBus(), pool) as (a, b, here, there):
        for number in range(20):
            there.tell(number)
        await trio.sleep(HEARTBEAT / 2)
        with trio.move_on_after(HEARTBEAT):
            await here.stop()  # (its workers are blocked: stopped at its timeout)
        gate.set()
        await trio.sleep(HEARTBEAT * 12)  # (the shutdown timeout, then acknowledgements)
        # The two in their workers' handlers were cancelled by the stop (a handler
        # that ended: acknowledged); the queued ones are dead letters there.
        assert log == []
        assert sorted(d.message for d in b.dead_letters.recent) == list(range(2, 20))
        link = link_of(there)
        assert (link.told, link.acked, link.in_window) == (20, 20, 0)
        assert (Node.of(a).unconfirmed, letters(a, "in-doubt")) == (0, [])

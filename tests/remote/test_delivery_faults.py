"""Acknowledgements across nodes under the faults that could make one run ahead of the
handling, or lose order (``remote/_link.py``, ``remote/_taken_in.py``): a record
given back while its link stays open, a receiver that forgot the sender's record, a
run into a full bounded mailbox, ``drop_old`` while a run's tell is being handled,
and a tell after waiting sends. Each test failed before its fix. Over the in-memory
bus, under an autojumping MockClock."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import trio
import trio.testing

import trio_actors as ta
from helpers import EVENTS, Blocker, Recorder, letters
from trio_actors.remote import MemoryBus, Node

HEARTBEAT = 0.5
MISSED = 3


class Slow(ta.Actor):
    def __init__(self) -> None:
        self.seen: list[Any] = []

    async def receive(self, message: Any) -> Any:
        if message == "seen":
            return list(self.seen)
        await trio.sleep(HEARTBEAT / 10)
        self.seen.append(message)
        return None


@asynccontextmanager
async def nodes(bus: MemoryBus) -> AsyncIterator[tuple[ta.ActorSystem, ta.ActorSystem]]:
    """Nodes a (the sender) and b."""
    EVENTS.clear()
    cluster = ta.Cluster(bus=bus, heartbeat=HEARTBEAT, heartbeats_missed=MISSED)
    async with (
        ta.open_actor_system(cluster=cluster, node="b") as b,
        ta.open_actor_system(cluster=cluster, node="a") as a,
    ):
        yield a, b


async def test_tells_given_back_on_a_link_that_stays_open_never_shift_later_acknowledgements(
    autojump_clock: trio.testing.MockClock,
) -> None:
    bus = MemoryBus()
    async with nodes(bus) as (a, b):
        inst = Blocker()
        blk = b.spawn(lambda: inst, name="blk")
        b.register("blk", blk)
        await Node.of(b).flush()
        there = await a.lookup("blk")
        link = there._cell.link  # type: ignore[union-attr]  # (a remote cell's record)
        there.tell(("block", 1))
        for n in range(10):
            there.tell(("g", n))
        await trio.sleep(HEARTBEAT / 2)
        assert link.in_window == 11
        replies_to_a = f".r.a.{Node.of(a).incarnation}."
        with bus.losing(lambda s, p: replies_to_a in s):
            await trio.sleep(HEARTBEAT * (4 * MISSED + 6))
        there.tell(("block", 2))
        for n in range(10):
            there.tell(("h", n))
        await trio.sleep(HEARTBEAT / 2)
        EVENTS.setdefault(1, trio.Event()).set()
        await trio.sleep(HEARTBEAT / 2)
        # b now blocked on ("block",2) with h0..h9 queued; nothing of them has ended.
        bus.disconnect(Node.of(b).transport)  # type: ignore[arg-type]  # (as kill -9)
        await trio.sleep(HEARTBEAT * (MISSED + 2))
        h_accounted = [
            m for m in letters(a, "in-doubt") if m[0] in ("h", "block") and m != ("block", 1)
        ]
        assert len(h_accounted) == 11, f"h run given back: {h_accounted}"


async def test_a_receiver_that_forgot_the_senders_record_acknowledges_the_new_tells_exactly(
    autojump_clock: trio.testing.MockClock,
) -> None:
    bus = MemoryBus(advisories=False)
    async with nodes(bus) as (a, b):
        rec = b.spawn(Recorder, name="rec")
        b.register("rec", rec)
        await Node.of(b).flush()
        there = await a.lookup("rec")
        link = there._cell.link  # type: ignore[union-attr]  # (a remote cell's record)
        for n in range(50):
            there.tell(n)
        await trio.sleep(HEARTBEAT / 2)
        beats_of_a = f".hb.a.{Node.of(a).incarnation}"
        with bus.losing(lambda s, _p: beats_of_a in s):
            await trio.sleep(HEARTBEAT * (MISSED + 2))
        await trio.sleep(2 * HEARTBEAT)
        for n in range(50, 100):
            there.tell(n)
        await trio.sleep(HEARTBEAT * 4)
        assert link.in_window == 0, link
        assert Node.of(a).unconfirmed == 0, link


async def test_a_run_into_a_full_bounded_mailbox_is_acknowledged_tell_by_tell(
    autojump_clock: trio.testing.MockClock,
) -> None:
    bus = MemoryBus()
    async with nodes(bus) as (a, b):
        inst = Blocker()
        blk = b.spawn(lambda: inst, name="blk", mailbox=ta.Bounded(2, overflow="drop_new"))
        b.register("blk", blk)
        await Node.of(b).flush()
        there = await a.lookup("blk")
        blk.tell("block")  # (blocked by a local tell: no run of a's pending before)
        other = b.spawn(Blocker, name="other")
        b.register("other", other)
        await Node.of(b).flush()
        dummy = await a.lookup("other")
        await trio.sleep(HEARTBEAT / 4)
        dummy.tell("x")  # (goes at once: what follows waits for the writer, one message)
        for n in range(6):
            there.tell(n)
        await trio.sleep(HEARTBEAT / 2)
        bus.disconnect(Node.of(b).transport)  # type: ignore[arg-type]  # (as kill -9)
        await trio.sleep(HEARTBEAT * (MISSED + 2))
        assert {0, 1} <= {d.message for d in a.dead_letters.recent if d.reason == "in-doubt"}, (
            "queued tells 0,1 acknowledged, lost with b"
        )


async def test_drop_old_never_acknowledges_a_tell_still_in_its_handler(
    autojump_clock: trio.testing.MockClock,
) -> None:
    bus = MemoryBus()
    async with nodes(bus) as (a, b):
        inst = Blocker()
        blk = b.spawn(lambda: inst, name="blk", mailbox=ta.Bounded(2, overflow="drop_old"))
        b.register("blk", blk)
        other = b.spawn(Blocker, name="other")
        b.register("other", other)
        await Node.of(b).flush()
        there, dummy = await a.lookup("blk"), await a.lookup("other")
        dummy.tell("x")
        there.tell("slow")
        there.tell("after")  # (one message: a run of 2)
        await trio.sleep(HEARTBEAT / 4)
        blk.tell("l1")
        blk.tell("l2")  # (local: the second drops the oldest, the run's notice)
        await trio.sleep(HEARTBEAT / 4)
        bus.disconnect(Node.of(b).transport)  # type: ignore[arg-type]  # (as kill -9)
        await trio.sleep(HEARTBEAT * 5)
        assert "slow" in [d.message for d in a.dead_letters.recent if d.reason == "in-doubt"], (
            "'slow' acknowledged mid-handler, lost with b"
        )


async def test_a_tell_never_overtakes_the_sends_its_node_made_before(
    autojump_clock: trio.testing.MockClock,
) -> None:
    bus = MemoryBus()
    async with nodes(bus) as (a, b):
        slow = b.spawn(Slow, name="slow", mailbox=ta.Bounded(2, overflow="drop_old"))
        b.register("slow", slow)
        await Node.of(b).flush()
        there = await a.lookup("slow")
        for n in range(6):
            await there.send(("s", n))
        there.tell(("t", 0))
        await trio.sleep(HEARTBEAT * 3)
        seen = await slow.ask("seen")
        assert seen.index(("t", 0)) > max(seen.index(m) for m in seen if m[0] == "s"), seen

"""Tells across a gap (``remote/_taken_in.py``, "In order across a gap"; ``_tells.py``):
a message of tells that NATS answered with no-responders while its node was up (the
node is between two connections) waits in its window and is sent again at the next
confirm round; the receiver holds what came after it until it comes, so tells are
handled in the order they were told (T2) and none is a dead letter for an actor that
never stopped. A message lost on the way holds the later ones back until a round
gives it up -- or the receiver's own bound, its byte budget, or the sender's death.
Over the in-memory bus, whose ``between_connections`` and ``losing`` do to messages
what a NATS reconnect and a server failover do, under an autojumping MockClock."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import msgspec
import trio
import trio.testing

import trio_actors as ta
from helpers import Recorder
from trio_actors.remote import MemoryBus, Node
from trio_actors.remote._subjects import CONFIRM, TELL
from trio_actors.remote._taken_in import hold_for

HEARTBEAT = 0.5
MISSED = 3


def to_node(name: str, kind: int) -> Callable[[str, bytes], bool]:
    """Messages of ``kind`` to node ``name``'s actors (for ``MemoryBus.losing``)."""

    def which(subject: str, payload: bytes) -> bool:
        if f".n.{name}." not in subject:
            return False
        try:
            return bool(msgspec.msgpack.decode(payload)[0] == kind)
        except (msgspec.DecodeError, TypeError, IndexError, KeyError):
            return False

    return which


@asynccontextmanager
async def nodes(
    bus: MemoryBus, limits: ta.InputLimits | None = None
) -> AsyncIterator[tuple[ta.ActorSystem, ta.ActorSystem, ta.ActorRef]]:
    """Nodes a (the receiver: its counter) and b (the sender: the counter as it
    reaches it)."""
    cluster = ta.Cluster(
        bus=bus, heartbeat=HEARTBEAT, heartbeats_missed=MISSED, limits=limits or ta.InputLimits()
    )
    async with (
        ta.open_actor_system(cluster=cluster, node="a") as a,
        ta.open_actor_system(cluster=cluster, node="b") as b,
    ):
        a.register("counter", a.spawn(Recorder, name="counter"))
        await Node.of(a).flush()
        yield a, b, await b.lookup("counter")


async def tell(b: ta.ActorSystem, counter: ta.ActorRef, numbers: range) -> None:
    """Tell ``numbers``, each a message of its own (a flush after each)."""
    for number in numbers:
        counter.tell(number)
        await Node.of(b).flush()


async def tell_with_a_gap(bus: MemoryBus, b: ta.ActorSystem, counter: ta.ActorRef) -> None:
    """Tell 0..4, then 5..9 lost on the way to a (as a server that dies with them):
    what is told next comes ahead of a gap."""
    await tell(b, counter, range(5))
    with bus.losing(to_node("a", TELL)):
        await tell(b, counter, range(5, 10))


def letters(system: ta.ActorSystem) -> list[tuple[Any, str]]:
    return [(d.message, d.reason) for d in system.dead_letters.recent]


async def test_tells_to_a_node_between_two_connections_are_sent_again_and_handled_in_order(
    autojump_clock: trio.testing.MockClock,
) -> None:
    bus = MemoryBus()
    async with nodes(bus) as (a, b, counter):
        await tell(b, counter, range(5))
        with bus.between_connections(Node.of(a).transport):  # type: ignore[arg-type]
            await tell(b, counter, range(5, 10))  # (no-responders: never delivered)
            await trio.sleep(HEARTBEAT / 2)  # (shorter than its silence: still up)
        assert letters(b) == []  # (waiting in the window, not "unreachable")
        await tell(b, counter, range(10, 15))  # (delivered: held behind 5..9)
        here = await a.lookup("counter")  # (a's own: it sees what a has handled)
        assert await here.ask("seen") == list(range(5))
        # An ask from b now waits for b's next round, after 5..9 (T2): it sees all.
        assert await counter.ask("seen") == list(range(15))
        await trio.sleep(HEARTBEAT / 2)  # (acknowledged)
        assert (letters(a), letters(b), Node.of(b).unconfirmed) == ([], [], 0)
        assert counter._cell.link.in_window == 0  # type: ignore[union-attr]


async def test_the_first_message_of_a_record_bouncing_is_sent_again_and_handled_first(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # A receiver began a new record at the first message it saw, so one that came
    # after a bounced first message made the first "unreachable" (or handled after
    # it, and given back in doubt). Each message now names its record's oldest one
    # not acknowledged, and a receiver that begins the record waits for it.
    bus = MemoryBus()
    async with nodes(bus) as (a, b, counter):
        with bus.between_connections(Node.of(a).transport):  # type: ignore[arg-type]
            await tell(b, counter, range(1))  # (the record's first message: bounces)
            await trio.sleep(HEARTBEAT / 10)
        await tell(b, counter, range(1, 3))  # (delivered before the next round)
        await trio.sleep(4 * HEARTBEAT)
        here = await a.lookup("counter")
        assert await here.ask("seen") == [0, 1, 2]
        assert (letters(a), letters(b), Node.of(b).unconfirmed) == ([], [], 0)
        assert counter._cell.link.in_window == 0  # type: ignore[union-attr]


async def test_tells_lost_on_the_way_hold_the_later_ones_until_a_round_gives_them_up(
    autojump_clock: trio.testing.MockClock,
) -> None:
    bus = MemoryBus()
    async with nodes(bus) as (_a, b, counter):
        await tell_with_a_gap(bus, b, counter)  # (5..9 lost: nobody knows yet)
        await tell(b, counter, range(10, 15))  # (held behind 5..9, not handled first)
        assert await counter.ask("seen") == list(range(5))
        await trio.sleep(4 * HEARTBEAT)  # (a round: 5..9 given up, 10..14 delivered)
        assert await counter.ask("seen") == [*range(5), *range(10, 15)]
        assert sorted(m for m, reason in letters(b) if reason == "in-doubt") == list(range(5, 10))
        assert Node.of(b).unconfirmed == 5


async def test_a_gap_no_round_gives_up_is_given_up_by_the_receiver_after_its_bound(
    autojump_clock: trio.testing.MockClock,
) -> None:
    bus = MemoryBus()
    async with nodes(bus) as (a, b, counter):
        await tell_with_a_gap(bus, b, counter)  # (5..9 lost: nobody knows yet)
        with bus.losing(to_node("a", CONFIRM)):  # (b's rounds never reach a)
            await tell(b, counter, range(10, 15))
            await trio.sleep(hold_for(Node.of(a).cluster) - 2 * HEARTBEAT)
            assert await counter.ask("seen") == list(range(5))  # (still held)
            await trio.sleep(3 * HEARTBEAT)
            assert await counter.ask("seen") == [*range(5), *range(10, 15)]


async def test_past_its_byte_budget_a_node_gives_a_gap_up_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    bus = MemoryBus()
    async with nodes(bus, ta.InputLimits(held_bytes=0)) as (a, b, counter):
        await tell_with_a_gap(bus, b, counter)  # (5..9 lost: nobody knows yet)
        await tell(b, counter, range(10, 15))  # (nothing may be held: delivered now)
        assert await counter.ask("seen") == [*range(5), *range(10, 15)]
        assert Node.of(a).tells.taken.held == 0


async def test_what_a_node_held_from_a_sender_declared_down_is_delivered(
    autojump_clock: trio.testing.MockClock,
) -> None:
    bus = MemoryBus()
    async with nodes(bus) as (a, b, counter):
        await tell_with_a_gap(bus, b, counter)  # (5..9 lost: nobody knows yet)
        with bus.losing(to_node("a", CONFIRM)):
            await tell(b, counter, range(10, 15))
            bus.disconnect(Node.of(b).transport)  # type: ignore[arg-type]  # (kill -9)
            await trio.sleep(HEARTBEAT / 2)  # (the advisory: b is down)
            here = await a.lookup("counter")
            assert await here.ask("seen") == [*range(5), *range(10, 15)]
            assert Node.of(a).tells.taken.held == 0


async def test_a_node_that_leaves_delivers_what_it_held(
    autojump_clock: trio.testing.MockClock,
) -> None:
    bus = MemoryBus()
    cluster = ta.Cluster(bus=bus, heartbeat=HEARTBEAT, heartbeats_missed=MISSED)
    async with ta.open_actor_system(cluster=cluster, node="b") as b:
        async with ta.open_actor_system(cluster=cluster, node="a") as a:
            a.register("counter", a.spawn(Recorder, name="counter"))
            await Node.of(a).flush()
            counter = await b.lookup("counter")
            await tell(b, counter, range(2))
            with bus.losing(to_node("a", TELL)):
                await tell(b, counter, range(2, 4))
            await tell(b, counter, range(4, 6))  # (held)
            assert Node.of(a).tells.taken.held > 0
        # a left: the held tells were delivered -- to an actor that had stopped, so
        # dead letters there; b hears they ended (acknowledged), the lost in doubt.
        stopped = [m for m, reason in letters(a) if reason == "stopped"]
        assert stopped == [4, 5]
        await trio.sleep(2 * HEARTBEAT)
        assert sorted(m for m, reason in letters(b) if reason == "in-doubt") == [2, 3]


async def test_an_ask_told_after_a_bounced_tell_is_handled_after_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # T2 with an ask: sent while the node is between two connections (both bounce:
    # the round sends the tells again first), or after it is back but before the
    # round (it waits for the round, after the tells).
    bus = MemoryBus()
    async with nodes(bus) as (a, b, counter):
        await tell(b, counter, range(1))
        async with trio.open_nursery() as nursery:
            answers: list[Any] = []

            async def ask() -> None:
                answers.append(await counter.ask("seen"))

            with bus.between_connections(Node.of(a).transport):  # type: ignore[arg-type]
                await tell(b, counter, range(1, 2))  # (bounces)
                nursery.start_soon(ask)
                await trio.sleep(HEARTBEAT / 10)
        assert answers == [[0, 1]]
        with bus.between_connections(Node.of(a).transport):  # type: ignore[arg-type]
            await tell(b, counter, range(2, 3))  # (bounces)
            await trio.sleep(HEARTBEAT / 10)
        assert await counter.ask("seen") == [0, 1, 2]
        assert letters(b) == []

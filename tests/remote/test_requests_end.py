"""Every request across nodes ends, whether or not its peer is ever declared down
(``remote/_confirm.py``): an ask, a stop, a watch or a lookup whose message (or
answer) is lost between two nodes that both stay alive -- as when the NATS server
routing it dies and the nodes fail over -- and asks to a node between two
connections. Over the in-memory bus, whose ``losing`` and ``between_connections``
do to messages what a server failover does, under an autojumping MockClock."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import msgspec
import pytest
import trio
import trio.testing

import trio_actors as ta
from helpers import Watcher, kind_of
from trio_actors.remote import MemoryBus, Node
from trio_actors.remote._subjects import ASK, CONFIRM, STOP, TELL, WATCH

HEARTBEAT = 0.5
MISSED = 3


class Counter(ta.Actor):
    """Counts what it handles; ``("sleep", s)`` takes ``s`` seconds of trio time."""

    def __init__(self) -> None:
        self.handled: list[Any] = []

    async def receive(self, message: Any) -> Any:
        match message:
            case "handled":
                return list(self.handled)
            case ("sleep", seconds):
                await trio.sleep(seconds)
        self.handled.append(message)
        return message


async def told(watcher: ta.ActorRef, *, within: float) -> None:
    """Wait until ``watcher`` has a notice (at most ``within`` seconds)."""
    for _ in range(int(within / (HEARTBEAT / 4))):
        if await watcher.ask("notices"):
            return
        await trio.sleep(HEARTBEAT / 4)
    raise AssertionError(f"no Terminated within {within} s")


def to_node(name: str, *kinds: int) -> Callable[[str, bytes], bool]:
    """Messages of ``kinds`` to node ``name``'s actors (for ``MemoryBus.losing``)."""

    def which(subject: str, payload: bytes) -> bool:
        return f".n.{name}." in subject and kind_of(payload) in kinds

    return which


def first(which: Callable[[str, bytes], bool]) -> Callable[[str, bytes], bool]:
    """Only the first message ``which`` is true of (for ``MemoryBus.losing``)."""
    seen: list[bool] = []

    def only_the_first(subject: str, payload: bytes) -> bool:
        if seen or not which(subject, payload):
            return False
        seen.append(True)
        return True

    return only_the_first


def replies_to(name: str) -> Callable[[str, bytes], bool]:
    """Replies to node ``name``'s requests."""
    return lambda subject, _payload: f".r.{name}." in subject


@asynccontextmanager
async def _bounded(seconds: float) -> AsyncIterator[None]:
    with trio.fail_after(seconds):
        yield


@asynccontextmanager
async def nodes(
    bus: MemoryBus,
) -> AsyncIterator[tuple[ta.ActorSystem, ta.ActorSystem, ta.ActorRef]]:
    """Nodes a and b; a's ``counter`` (registered) as b reaches it. A test that
    waits forever (what this file is about) fails after 60 heartbeats instead."""
    cluster = ta.Cluster(bus=bus, heartbeat=HEARTBEAT, heartbeats_missed=MISSED)
    async with (
        _bounded(60 * HEARTBEAT),
        ta.open_actor_system(cluster=cluster, node="a") as a,
        ta.open_actor_system(cluster=cluster, node="b") as b,
    ):
        a.register("counter", a.spawn(Counter, name="counter"))
        await Node.of(a).flush()
        yield a, b, await b.lookup("counter")


async def test_an_ask_lost_on_the_way_fails_with_connection_interrupted(
    autojump_clock: trio.testing.MockClock,
) -> None:
    bus = MemoryBus()
    async with nodes(bus) as (_a, _b, counter):
        with bus.losing(to_node("a", ASK)):
            started = trio.current_time()
            with pytest.raises(ta.ConnectionInterrupted, match="does not hold it"):
                await counter.ask("lost")
            took = trio.current_time() - started
        assert bus.lost == 1
        assert took <= 2 * HEARTBEAT + 0.1  # (the first round after one interval)
        assert await counter.ask("handled") == []  # never handled
        assert await counter.ask("next") == "next"  # the way is open again


async def test_an_answer_lost_on_the_way_fails_the_ask_as_maybe_handled(
    autojump_clock: trio.testing.MockClock,
) -> None:
    bus = MemoryBus()
    async with nodes(bus) as (_a, _b, counter):
        with (
            bus.losing(first(replies_to("b"))),
            pytest.raises(ta.ConnectionInterrupted, match="may or may not have been"),
        ):
            await counter.ask("answer lost")
        assert await counter.ask("handled") == ["answer lost"]


async def test_a_long_ask_goes_on_waiting_through_its_confirm_rounds(
    autojump_clock: trio.testing.MockClock,
) -> None:
    bus = MemoryBus()
    async with nodes(bus) as (_a, _b, counter):
        confirms: list[str] = []

        def count_confirms(subject: str, payload: bytes) -> bool:
            if to_node("a", CONFIRM)(subject, payload):
                confirms.append(subject)
            return False  # (none lost)

        with bus.losing(count_confirms):
            assert await counter.ask(("sleep", 30 * HEARTBEAT)) == ("sleep", 30 * HEARTBEAT)
        assert len(confirms) >= 25  # (a round each interval: it held the ask every time)


async def test_a_lost_stop_is_sent_again_and_the_actor_stops(
    autojump_clock: trio.testing.MockClock,
) -> None:
    bus = MemoryBus()
    async with nodes(bus) as (_a, _b, counter):
        with bus.losing(first(to_node("a", STOP))):
            with trio.fail_after(4 * HEARTBEAT):
                await counter.stop()
        assert bus.lost == 1
        with pytest.raises(ta.ActorStopped):
            await counter.ask("after")


async def test_a_lost_watch_is_sent_again_and_its_terminated_comes(
    autojump_clock: trio.testing.MockClock,
) -> None:
    bus = MemoryBus()
    async with nodes(bus) as (_a, b, counter):
        watcher = b.spawn(Watcher)
        with bus.losing(to_node("a", WATCH)):
            await watcher.ask(("watch", counter))
            await trio.sleep(HEARTBEAT / 2)
        assert bus.lost == 1
        await trio.sleep(3 * HEARTBEAT)  # (a round: a holds no watch; sent again)
        await counter.stop()
        await told(watcher, within=4 * HEARTBEAT)
        assert await watcher.ask("notices") == [(counter, None)]


async def test_a_terminated_lost_on_the_way_comes_again(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The watch of an actor that had already stopped, whose answer is lost: a round
    # finds a holds no such watch, sends it again, and a answers at once.
    bus = MemoryBus()
    async with nodes(bus) as (_a, b, counter):
        await counter.stop()
        watcher = b.spawn(Watcher)
        with bus.losing(first(lambda subject, _payload: ".t.b." in subject)):
            await watcher.ask(("watch", counter))
            await trio.sleep(HEARTBEAT / 2)
        assert bus.lost == 1
        await told(watcher, within=4 * HEARTBEAT)


async def test_tells_lost_on_the_way_are_counted_unconfirmed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    bus = MemoryBus()
    async with nodes(bus) as (_a, b, counter):
        for number in range(5):
            counter.tell(number)
        await Node.of(b).flush()
        with bus.losing(to_node("a", TELL)):
            for number in range(5, 12):
                counter.tell(number)
            await Node.of(b).flush()
            lost = bus.lost
        assert lost >= 1
        await trio.sleep(4 * HEARTBEAT)  # (a round: 7 tells neither taken nor bounced)
        assert Node.of(b).unconfirmed == 7
        assert await counter.ask("handled") == list(range(5))


async def test_asks_to_a_node_between_two_connections_wait_for_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # What is sent while the node reconnects is answered with no-responders; it was
    # never delivered: sent again once it is back, not ActorStopped.
    bus = MemoryBus()
    async with nodes(bus) as (a, _b, counter):
        transport = Node.of(a).transport
        outcomes: list[Any] = []

        async def ask(number: int) -> None:
            outcomes.append(await counter.ask(number))

        async with trio.open_nursery() as nursery:
            with bus.between_connections(transport):  # type: ignore[arg-type]
                for number in range(5):
                    nursery.start_soon(ask, number)
                await trio.sleep(HEARTBEAT)  # (shorter than its silence: still up)
        assert sorted(outcomes) == list(range(5))
        assert sorted(await counter.ask("handled")) == list(range(5))


async def test_a_watch_sent_to_a_node_between_two_connections_waits_for_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # NATS answers the watch with no-responders while the node reconnects: never
    # delivered, not a sign the node is gone -- sent again once a round finds the
    # node does not hold it, and the Terminated says the actor stopped, no NodeDown.
    bus = MemoryBus()
    async with nodes(bus) as (a, b, counter):
        watcher = b.spawn(Watcher)
        with bus.between_connections(Node.of(a).transport):  # type: ignore[arg-type]
            await watcher.ask(("watch", counter))
            await trio.sleep(HEARTBEAT / 2)  # (shorter than its silence: still up)
        assert await watcher.ask("notices") == []  # (not ended by the no-responders)
        await trio.sleep(3 * HEARTBEAT)  # (a round: a holds no watch; sent again)
        await counter.stop()
        await told(watcher, within=4 * HEARTBEAT)
        assert await watcher.ask("notices") == [(counter, None)]


async def test_an_ask_sent_again_after_a_reconnect_is_handled_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # Sent again once, delivered, and slow to answer: the rounds that follow find
    # it held, and never send it a third time.
    bus = MemoryBus()
    async with nodes(bus) as (a, _b, counter):
        slow = ("sleep", 8 * HEARTBEAT)
        async with trio.open_nursery() as nursery:
            with bus.between_connections(Node.of(a).transport):  # type: ignore[arg-type]
                nursery.start_soon(counter.ask, slow)
                await trio.sleep(HEARTBEAT)
        assert await counter.ask("handled") == [slow]


async def test_a_lookup_of_a_name_whose_holder_is_between_two_connections_waits_for_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # NATS answers no-responders: nothing serves the name now. But the holder still
    # beats, and the names say it holds it: it is asked again (within the lookup's
    # bound), not reported as registered nowhere.
    bus = MemoryBus()
    async with nodes(bus) as (a, b, counter):
        found: list[ta.ActorRef] = []

        async def look_up() -> None:
            found.append(await b.lookup("counter"))

        async with trio.open_nursery() as nursery:
            with bus.between_connections(Node.of(a).transport):  # type: ignore[arg-type]
                nursery.start_soon(look_up)
                await trio.sleep(HEARTBEAT)  # (shorter than its silence: still up)
                assert found == []
        assert found == [counter]
        with pytest.raises(ta.ActorNotFound, match="no actor is registered as 'nobody'"):
            await b.lookup("nobody")  # (held by nobody: at once, as before)


async def test_a_node_that_serves_nothing_for_too_long_interrupts_what_waits(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # It goes on beating, but its actors' subject answers nothing (NATS's
    # no-responders): after the rounds a silent node would take to be declared
    # down, twice over, the ask fails -- ConnectionInterrupted, saying so.
    bus = MemoryBus()
    async with nodes(bus) as (a, _b, counter):
        node_a = Node.of(a)
        unsubscribe = node_a._unsubscribes.pop(0)  # (its actors' subject only)
        unsubscribe()
        with (
            pytest.raises(ta.ConnectionInterrupted, match=r"served none of its actors|did not"),
            trio.fail_after(20 * HEARTBEAT),
        ):
            await counter.ask("nobody serves it")


async def test_a_node_that_answers_no_round_interrupts_what_waits(
    autojump_clock: trio.testing.MockClock,
) -> None:
    bus = MemoryBus()
    async with nodes(bus) as (_a, _b, counter):
        with (
            bus.losing(to_node("a", CONFIRM, ASK)),
            pytest.raises(ta.ConnectionInterrupted, match="did not confirm"),
            trio.fail_after(20 * HEARTBEAT),
        ):
            await counter.ask("never there")


async def test_a_lookup_nobody_answers_ends_after_its_bound(
    autojump_clock: trio.testing.MockClock,
) -> None:
    bus = MemoryBus()
    async with nodes(bus) as (_a, b, counter):
        with bus.losing(replies_to("b")):
            started = trio.current_time()
            with pytest.raises(ta.ActorNotFound, match="no node answered"):
                await b.lookup("counter")
        assert trio.current_time() - started == pytest.approx(HEARTBEAT * MISSED)
        assert await b.lookup("counter") == counter


async def test_a_confirm_a_node_cannot_read_is_counted_and_not_answered(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # Too many numbers, or not numbers: bad input, counted; nothing is answered.
    bus = MemoryBus()
    async with nodes(bus) as (a, _b, counter), bus.connect("raw") as raw:
        node_a = Node.of(a)
        answered: list[Any] = []
        reply_to = node_a.subjects.replies("raw", "1")
        raw.subscribe(f"{reply_to}.*", answered.append)
        before = node_a.statistics().bad_input.messages
        for asked in (list(range(2_000)), ["not", "numbers"]):
            body = msgspec.Raw(msgspec.msgpack.encode(("raw", "1", asked, [])))
            frame = msgspec.msgpack.encode((CONFIRM, 0, "", body))
            raw.publish(node_a.subject, frame, reply=f"{reply_to}.7")
        await trio.sleep(HEARTBEAT)
        assert node_a.statistics().bad_input.messages == before + 2
        assert answered == []
        assert await counter.ask("still here") == "still here"

"""What a node holds of the tells between it and another stays bounded, and in order
(``remote/_tells.py``, ``_link.py``'s held tells; ``_taken_in.py``'s messages held
ahead of a gap): an ask or a stop to one actor sends only that actor's held tells
before it, a confirm round's answer none, a node declared down hands its held tells
to its next record before anything told later; a receiver counts what it holds
ahead of a gap with each message's overhead, and gives up the gap of the sender that
has held longest. Over the in-memory bus, under an autojumping MockClock, with a
small window (8) and a small held bound (32)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import msgspec
import pytest
import trio
import trio.testing

import trio_actors as ta
from trio_actors.remote import MemoryBus, Node, _link
from trio_actors.remote._subjects import TELL
from trio_actors.remote._taken_in import MAX_AHEAD

HEARTBEAT = 0.5
MISSED = 3
GATE: dict[str, trio.Event] = {}


class Gated(ta.Actor):
    """Blocks on its first tell until ``GATE["open"]`` is set; records the rest."""

    def __init__(self) -> None:
        self.handled: list[Any] = []

    async def receive(self, message: Any) -> Any:
        if message == "handled":
            return list(self.handled)
        if message == "ping":
            return "pong"
        if message == "forever":
            await trio.sleep_forever()
        if not self.handled:
            await GATE["open"].wait()
        self.handled.append(message)
        return None


@pytest.fixture(autouse=True)
def small(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_link, "WINDOW", 8)
    monkeypatch.setattr(_link, "HELD", 32)
    GATE.clear()
    GATE["open"] = trio.Event()


def cluster(bus: MemoryBus, limits: ta.InputLimits | None = None) -> ta.Cluster:
    return ta.Cluster(
        bus=bus, heartbeat=HEARTBEAT, heartbeats_missed=MISSED, limits=limits or ta.InputLimits()
    )


@asynccontextmanager
async def nodes(bus: MemoryBus) -> AsyncIterator[tuple[ta.ActorSystem, ta.ActorSystem]]:
    """Nodes a (with actors ``gated`` and ``other``) and b."""
    async with (
        ta.open_actor_system(cluster=cluster(bus), node="a") as a,
        ta.open_actor_system(cluster=cluster(bus), node="b") as b,
    ):
        a.register("gated", a.spawn(Gated, name="gated"))
        a.register("other", a.spawn(Gated, name="other"))
        await Node.of(a).flush()
        yield a, b


def fill(sender: ta.ActorSystem, ref: ta.ActorRef, count: int) -> None:
    """Tell ``count`` numbers, each a message of its own (the window fills at 8)."""
    for number in range(count):
        ref.tell(number)
        Node.of(sender).tells.flush()


async def test_an_ask_to_another_actor_leaves_the_held_tells_held(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with nodes(MemoryBus()) as (_a, b):
        gated, other = await b.lookup("gated"), await b.lookup("other")
        link = gated._cell.link  # type: ignore[union-attr]
        fill(b, gated, 8 + 32)  # (the window, then all a link holds)
        assert await other.ask("ping") == "pong"  # (T2 is per actor: no need to push)
        assert (link.in_window, len(link.held)) == (8, 32)
        with pytest.raises(ta.MailboxFull):
            gated.tell("one more")  # (bounded: the sender knows)
        GATE["open"].set()
        await trio.sleep(HEARTBEAT)
        assert await gated.ask("handled") == list(range(40))


async def test_an_ask_to_the_same_actor_is_handled_after_its_held_tells(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with nodes(MemoryBus()) as (_a, b):
        gated, other = await b.lookup("gated"), await b.lookup("other")
        fill(b, other, 20)  # (another actor's: they stay held)
        fill(b, gated, 10)
        link = gated._cell.link  # type: ignore[union-attr]
        held_for_other = link.held.by_actor[other._cell.eid]  # type: ignore[union-attr]
        GATE["open"].set()
        assert await gated.ask("handled") == list(range(10))
        assert held_for_other > 0


async def test_a_confirm_rounds_answer_leaves_the_held_tells_held(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # a holds tells for b past the window; b waits on a (an ask never answered), so
    # b's rounds ask a every interval: a's answers are about b's requests and b's
    # tells, and must not send a's held ones past the window.
    bus = MemoryBus()
    async with nodes(bus) as (a, b):
        b.register("gated there", b.spawn(Gated, name="gated"))
        await Node.of(b).flush()
        there, forever = await a.lookup("gated there"), await b.lookup("other")
        fill(a, there, 8 + 16)
        link = there._cell.link  # type: ignore[union-attr]
        async with trio.open_nursery() as nursery:
            nursery.start_soon(forever.ask, "forever")
            await trio.sleep(3 * HEARTBEAT)
            assert (link.in_window, len(link.held)) == (8, 16)
            nursery.cancel_scope.cancel()
        GATE["open"].set()


async def test_the_held_tells_of_a_node_declared_down_go_before_what_is_told_after(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with nodes(MemoryBus()) as (_a, b):
        gated = await b.lookup("gated")
        GATE["open"].set()
        fill(b, gated, 8 + 4)  # (none acknowledged yet: the last 4 held)
        link = gated._cell.link  # type: ignore[union-attr]
        assert len(link.held) == 4
        Node.of(b).peers.down(gated._cell.peer, "a test's partition")  # type: ignore[union-attr]
        gated.tell("after")
        await trio.sleep(3 * HEARTBEAT)
        handled = await gated.ask("handled")
        assert [m for m in handled if m in (8, 9, 10, 11, "after")] == [8, 9, 10, 11, "after"]


def _lose_tells_from(sender: str) -> Any:
    def which(subject: str, payload: bytes) -> bool:
        if ".n.a." not in subject or not subject.endswith(f".{sender}"):
            return False
        return bool(msgspec.msgpack.decode(payload)[0] == TELL)

    return which


async def test_past_its_budget_a_node_gives_up_the_gap_held_longest(
    autojump_clock: trio.testing.MockClock,
) -> None:
    bus = MemoryBus()
    limits = ta.InputLimits(held_bytes=2000)
    async with (
        ta.open_actor_system(cluster=cluster(bus, limits), node="a") as a,
        ta.open_actor_system(cluster=cluster(bus), node="b") as b,
        ta.open_actor_system(cluster=cluster(bus), node="c") as c,
    ):
        a.register("other", a.spawn(Gated, name="other"))
        GATE["open"].set()
        await Node.of(a).flush()
        from_b, from_c = await b.lookup("other"), await c.lookup("other")
        for ref, system in ((from_b, b), (from_c, c)):
            ref.tell("first")
            await Node.of(system).flush()
        with bus.losing(_lose_tells_from("b")), bus.losing(_lose_tells_from("c")):
            for ref, system in ((from_b, b), (from_c, c)):
                ref.tell("lost")
                await Node.of(system).flush()
        from_b.tell("b" * 1200)  # (held: b's gap, the older)
        await Node.of(b).flush()
        await trio.sleep(HEARTBEAT / 10)
        from_c.tell("c" * 400)  # (held too: over the budget)
        await Node.of(c).flush()
        await trio.sleep(HEARTBEAT / 10)
        taken = Node.of(a).tells.taken
        holding = {p.split(".")[-2]: len(i.ahead) for p, i in taken.records.items()}
        assert holding == {"b": 0, "c": 1}  # (b's gap given up: it held longest)
        assert taken.held <= limits.held_bytes


async def _forged_gap(bus: MemoryBus, node: Node, paths: list[str]) -> None:
    """A forger's record on ``node``: message 1, then ``paths`` as messages 3, 4, ...
    of one tell each (2 never comes: they are held ahead of it)."""
    async with bus.connect("x") as forger:
        subject = node.subjects.to_node(node.name, node.incarnation, "x")
        unreachable = node.subjects.unreachable("x", "0123456789ab")
        nil = msgspec.Raw(msgspec.msgpack.encode(None))
        for sequence, path in enumerate(["/x", "", *paths], start=1):
            if sequence != 2:
                tells = [(999, path, nil)] if path else []
                data = msgspec.msgpack.encode((TELL, sequence, "r", (1, tells)))
                forger.publish(subject, data, reply=f"{unreachable}.{sequence}")
        await trio.sleep(HEARTBEAT / 10)


async def test_what_a_node_holds_ahead_of_a_gap_is_counted_with_its_paths(
    autojump_clock: trio.testing.MockClock,
) -> None:
    bus = MemoryBus()
    limits = ta.InputLimits(held_bytes=10_000)
    async with ta.open_actor_system(cluster=cluster(bus, limits), node="a") as a:
        node = Node.of(a)
        await _forged_gap(bus, node, ["p" * 1_000] * 5)
        (inbound,) = node.tells.taken.records.values()
        paths = sum(len(path) for tells, *_ in inbound.ahead.values() for _n, path, _b in tells)
        assert paths == 5_000  # (held: the gap is open)
        assert paths < node.tells.taken.held <= limits.held_bytes


async def test_a_record_holds_at_most_max_ahead_messages(
    autojump_clock: trio.testing.MockClock,
) -> None:
    bus = MemoryBus()
    async with ta.open_actor_system(cluster=cluster(bus), node="a") as a:
        node = Node.of(a)
        await _forged_gap(bus, node, [""] * (MAX_AHEAD + 1))  # (no tells: cheap each)
        (inbound,) = node.tells.taken.records.values()
        # One more than it may hold: the gap given up, what was held delivered.
        assert (inbound.skipped, len(inbound.ahead)) == ([(2, 2)], 0)
        assert inbound.received == 2 + MAX_AHEAD + 1  # (1, the gap, and those held)

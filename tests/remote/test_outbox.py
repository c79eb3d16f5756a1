"""Remote tells coalesced (``remote/_tells.py``), over the in-memory bus under an
autojumping MockClock: a lone tell leaves at once; tells made while what the node
published waits for its connection's writer leave as few messages, in order, at the
writer's turn; anything else the node sends leaves after the tells before it; what
the connection refuses then is dead letters."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import attrs
import msgspec
import pytest
import trio
import trio.testing
from test_nodes import Echo  # (records what it is told; "seen" answers the record)

import trio_actors as ta
from trio_actors.nats import BufferFull, Headers
from trio_actors.remote import MemoryBus, Node
from trio_actors.remote._tells import BYTES_PER_MESSAGE, TELLS_PER_MESSAGE


class Held(ta.Actor):
    """Handles its first message only once the gate opens."""

    def __init__(self, gate: trio.Event) -> None:
        self.gate = gate
        self.seen: list[Any] = []

    async def receive(self, message: Any) -> Any:
        if message == "seen":
            return list(self.seen)
        await self.gate.wait()
        self.seen.append(message)
        return None


class CountingBus(MemoryBus):
    """Records the messages to actors: (subject, how many tells, or the kind)."""

    def __init__(self) -> None:
        super().__init__()
        self.to_actors: list[tuple[int, int]] = []  # (kind, tells in it)

    def _route(
        self, subject: str, payload: bytes, reply: str | None, headers: Headers | None = None
    ) -> None:
        if ".n." in subject:
            kind, _number, _path, body = msgspec.msgpack.decode(payload)
            self.to_actors.append((kind, len(body[1]) if kind == 0 else 0))  # (first, tells)
        super()._route(subject, payload, reply, headers)

    def tells_per_message(self) -> list[int]:
        return [count for kind, count in self.to_actors if kind == 0]


@attrs.frozen
class Nodes:
    a: ta.ActorSystem  # (node a: it tells)
    b: ta.ActorSystem
    there: ta.ActorRef  # (node b's recorder, as node a reaches it)
    bus: CountingBus

    @property
    def node(self) -> Node:
        assert self.a.node is not None
        return Node.of(self.a)


async def quiet(seconds: float) -> None:
    """Sleep, then until every task is blocked: node a's connection has nothing
    waiting to be written (a heartbeat it just published has been)."""
    await trio.sleep(seconds)
    await trio.testing.wait_all_tasks_blocked()


@pytest.fixture
async def nodes(autojump_clock: trio.testing.MockClock) -> AsyncIterator[Nodes]:
    """Nodes a and b over a counting bus. (Each test takes
    ``autojump_clock`` too: pytest-trio runs a test under a clock it is given.)"""
    bus = CountingBus()
    cluster = ta.Cluster(bus=bus)
    async with (
        ta.open_actor_system(cluster=cluster, node="a") as a,
        ta.open_actor_system(cluster=cluster, node="b") as b,
    ):
        recorder = b.spawn(Echo, name="recorder")
        b.register("recorder", recorder)
        assert b.node is not None
        await b.node.flush()
        there = await a.lookup("recorder")
        await quiet(1)  # (the heartbeats of the start are over)
        bus.to_actors.clear()
        yield Nodes(a, b, there, bus)


async def test_a_lone_tell_leaves_at_once(
    nodes: Nodes, autojump_clock: trio.testing.MockClock
) -> None:
    nodes.there.tell("one")
    assert nodes.bus.tells_per_message() == [1]  # (published in the tell itself)
    await quiet(1)
    nodes.there.tell("two")  # (nothing waits to be written: at once again)
    assert nodes.bus.tells_per_message() == [1, 1]
    assert await nodes.there.ask("seen") == ["one", "two"]


async def test_a_burst_leaves_as_few_messages_in_order_at_the_writer_s_turn(
    nodes: Nodes, autojump_clock: trio.testing.MockClock
) -> None:
    for number in range(200):
        nodes.there.tell(number)
    # The first at once; the rest wait, full messages leaving as they fill.
    assert nodes.bus.tells_per_message() == [1] + [TELLS_PER_MESSAGE] * 3
    await trio.testing.wait_all_tasks_blocked()  # (the writer's turn has sent the rest)
    assert nodes.bus.tells_per_message() == [1] + [TELLS_PER_MESSAGE] * 3 + [199 - 3 * 64]
    assert await nodes.there.ask("seen") == list(range(200))


async def test_whatever_the_node_sends_next_leaves_after_the_waiting_tells(
    nodes: Nodes, autojump_clock: trio.testing.MockClock
) -> None:
    for number in range(10):
        nodes.there.tell(number)
    seen = await nodes.there.ask("seen")  # (no pass between: the ask flushes the tells first)
    assert seen == list(range(10))
    assert [kind for kind, _count in nodes.bus.to_actors] == [0, 0, 1]  # two of tells, the ask


async def test_a_large_tell_leaves_at_once_after_those_waiting(
    nodes: Nodes, autojump_clock: trio.testing.MockClock
) -> None:
    nodes.there.tell("first")
    nodes.there.tell("second")  # (waits)
    big = b"x" * BYTES_PER_MESSAGE
    nodes.there.tell(big)
    assert nodes.bus.tells_per_message() == [1, 1, 1]
    assert await nodes.there.ask("seen") == ["first", "second", big]


async def test_messages_of_tells_stay_under_the_byte_limit(
    nodes: Nodes, autojump_clock: trio.testing.MockClock
) -> None:
    chunk = b"y" * (BYTES_PER_MESSAGE // 4 - 16)  # (four fit, with their msgpack headers)
    for _ in range(10):
        nodes.there.tell(chunk)
    await trio.testing.wait_all_tasks_blocked()
    assert nodes.bus.tells_per_message() == [1, 4, 4, 1]
    assert await nodes.there.ask("seen") == [chunk] * 10


async def test_node_flush_sends_the_waiting_tells_before_it_waits(
    nodes: Nodes, autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    transport = nodes.node.transport
    flushed = transport.flush
    sent_when_flushed: list[list[int]] = []

    async def recording_flush() -> None:
        sent_when_flushed.append(nodes.bus.tells_per_message())
        await flushed()

    monkeypatch.setattr(transport, "flush", recording_flush)
    nodes.there.tell(1)
    nodes.there.tell(2)
    await nodes.node.flush()
    assert sent_when_flushed == [[1, 1]]  # (before the transport's flush, no pass between)


async def test_a_remote_tell_to_a_full_failing_mailbox_is_a_dead_letter_there(
    nodes: Nodes, autojump_clock: trio.testing.MockClock
) -> None:
    gate = trio.Event()
    held = nodes.b.spawn(Held, gate, name="held", mailbox=ta.Bounded(1, overflow="fail"))
    assert nodes.b.node is not None
    there = nodes.node.ref_from_wire(*Node.of(nodes.b).ref_to_wire(held))  # (as node a has it)
    there.tell(0)
    await trio.sleep(1)  # (0 is being handled: the mailbox is empty)
    for number in range(1, 4):
        there.tell(number)
    await trio.sleep(1)
    letters = [(letter.reason, letter.message) for letter in nodes.b.dead_letters.recent]
    assert letters == [("overflow", 2), ("overflow", 3)]  # (0 is handled, 1 waits)
    gate.set()
    await trio.sleep(1)  # (0 and 1 handled: room for the ask)
    assert await there.ask("seen") == [0, 1]  # (and node b goes on)


async def test_waiting_tells_the_connection_refuses_are_dead_letters_unreachable(
    nodes: Nodes,
    autojump_clock: trio.testing.MockClock,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="trio_actors")
    nodes.there.tell("sent")
    nodes.there.tell("refused 1")
    nodes.there.tell("refused 2")

    def refuse(*args: Any, **kwargs: Any) -> None:
        raise BufferFull("full, for the test")

    sent = nodes.node.tells.sent
    monkeypatch.setattr(nodes.node.transport, "publish", refuse)
    await trio.testing.wait_all_tasks_blocked()  # (the writer's turn: refused)
    assert nodes.node.tells.sent == sent  # (not numbered, not counted as sent)
    letters = [(letter.reason, letter.message) for letter in nodes.a.dead_letters.recent]
    assert letters == [("unreachable", "refused 1"), ("unreachable", "refused 2")]
    assert "2 tell(s) to node b not sent" in caplog.text
    assert "full, for the test" in caplog.text
    monkeypatch.undo()
    assert await nodes.there.ask("seen") == ["sent"]
    # A tell sent at once raises what the connection refuses, to its caller.
    await quiet(1)
    monkeypatch.setattr(nodes.node.transport, "publish", refuse)
    with pytest.raises(BufferFull, match="full, for the test"):
        nodes.there.tell("at once")

"""Traces across nodes, over the in-memory bus under an autojumping MockClock: the
trace context of an ask crosses in its message's headers, so one trace shows an ask
from node a through an actor on b that asks an actor on c; the asker's outcome says
how an ask across nodes ended (``node_down``, ``in_doubt``...); an ask withdrawn
while queued on the other node is a ``withdrawn`` span there; the header goes again
with an ask that a confirm round sends again; shared names and pools across nodes;
tells across nodes are traced on the sending side only; untraced nodes mix in."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio
import trio.testing
from opentelemetry.trace import SpanKind

import trio_actors as ta
from helpers import Echo, kind_of
from traces import Front, Recorded, attributes, is_child, outcome, reach, render
from trio_actors.nats import Headers
from trio_actors.observe import Tracing
from trio_actors.remote import MemoryBus, Node
from trio_actors.remote._subjects import ASK

pytestmark = pytest.mark.usefixtures("no_context_left_behind")

HEARTBEAT = 0.5


class Sleeper(ta.Actor):
    async def receive(self, message: Any) -> Any:
        if isinstance(message, tuple):
            await trio.sleep(message[1])
        return message


class Spy(MemoryBus):
    """A bus that writes down the headers of each ask to a node's actors."""

    def __init__(self) -> None:
        super().__init__()
        self.asks: list[tuple[str, Headers | None]] = []

    def _route(
        self, subject: str, payload: bytes, reply: str | None, headers: Headers | None = None
    ) -> None:
        if ".n." in subject and kind_of(payload) == ASK:
            self.asks.append((subject, headers))
        super()._route(subject, payload, reply, headers)


@asynccontextmanager
async def traced_nodes(
    bus: MemoryBus, recorded: Recorded, *names: str, untraced: tuple[str, ...] = ()
) -> AsyncIterator[list[ta.ActorSystem]]:
    """One system per name on ``bus``, traced into ``recorded`` (those in
    ``untraced`` not), opened in order and closed in reverse."""
    cluster = ta.Cluster(bus=bus, heartbeat=HEARTBEAT, heartbeats_missed=3)

    @asynccontextmanager
    async def opened(rest: list[str]) -> AsyncIterator[list[ta.ActorSystem]]:
        if not rest:
            yield []
            return
        tracing = False if rest[0] in untraced else recorded.provider
        async with (
            ta.open_actor_system(cluster=cluster, node=rest[0], tracing=tracing) as system,
            opened(rest[1:]) as others,
        ):
            yield [system, *others]

    with trio.fail_after(60 * HEARTBEAT):
        async with opened(list(names)) as systems:
            yield systems


def on(node: str) -> Callable[[Any], bool]:
    return lambda span: attributes(span).get("trio_actors.node") == node


async def test_one_trace_follows_an_ask_from_a_through_b_to_c(
    autojump_clock: trio.testing.MockClock,
) -> None:
    recorded = Recorded()
    async with traced_nodes(MemoryBus(), recorded, "a", "b", "c") as (a, b, c):
        echo = await reach(c, b, c.spawn(Echo, name="echo"), "echo")
        front = await reach(b, a, b.spawn(Front, echo, name="front"), "front")
        recorded.clear()  # (the lookups' own asks are not the trace)
        assert await front.ask("across") == "across"
    ask_b = recorded.one("ask b", SpanKind.CLIENT)
    receive_front = recorded.one("receive Front", SpanKind.SERVER)
    ask_c = recorded.one("ask c", SpanKind.CLIENT)
    receive_echo = recorded.one("receive Echo", SpanKind.SERVER)
    assert [on("a")(ask_b), on("b")(receive_front), on("b")(ask_c), on("c")(receive_echo)] == [
        True
    ] * 4
    assert ask_b.parent is None
    assert is_child(receive_front, ask_b)
    assert receive_front.parent is not None
    assert receive_front.parent.is_remote
    assert is_child(ask_c, receive_front)
    assert is_child(receive_echo, ask_c)
    assert receive_echo.parent is not None
    assert receive_echo.parent.is_remote
    assert len({span.context.trace_id for span in recorded.spans if span.context}) == 1
    assert attributes(ask_b)["trio_actors.peer"] == "b"
    assert attributes(ask_b)["trio_actors.actor.path"] == "b:system/front"
    assert [outcome(s) for s in (ask_b, receive_front, ask_c, receive_echo)] == ["value"] * 4
    assert render(recorded.spans).splitlines() == [
        "ask b [CLIENT] on a -> value",
        "  receive Front [SERVER] on b -> value",
        "    ask c [CLIENT] on b -> value",
        "      receive Echo [SERVER] on c -> value",
    ]


async def test_an_ask_to_a_node_that_goes_down_is_node_down(
    autojump_clock: trio.testing.MockClock,
) -> None:
    bus = MemoryBus()
    recorded = Recorded()
    async with traced_nodes(bus, recorded, "a", "b") as (a, b):
        sleeper = await reach(b, a, b.spawn(Sleeper, name="sleeper"), "sleeper")
        recorded.clear()
        async with trio.open_nursery() as nursery:

            async def ask() -> None:
                with pytest.raises(ta.NodeDown):
                    await sleeper.ask(("sleep", 100))

            nursery.start_soon(ask)
            await trio.sleep(HEARTBEAT)
            bus.disconnect(Node.of(b).transport)  # type: ignore[arg-type]
    assert outcome(recorded.one("ask b")) == "node_down"


async def test_an_ask_lost_on_the_way_is_in_doubt(autojump_clock: trio.testing.MockClock) -> None:
    bus = MemoryBus()
    recorded = Recorded()
    async with traced_nodes(bus, recorded, "a", "b") as (a, b):
        echo = await reach(b, a, b.spawn(Echo, name="echo"), "echo")
        recorded.clear()
        lost = lambda subject, payload: ".n.b." in subject and kind_of(payload) == ASK  # noqa: E731
        with bus.losing(lost), pytest.raises(ta.ConnectionInterrupted):
            await echo.ask("lost")
    client = recorded.one("ask b")
    assert outcome(client) == "in_doubt"
    assert not recorded.named("receive Echo")  # (never reached b)


async def test_an_ask_withdrawn_while_queued_on_the_other_node_is_a_withdrawn_span_there(
    autojump_clock: trio.testing.MockClock,
) -> None:
    recorded = Recorded()
    async with traced_nodes(MemoryBus(), recorded, "a", "b") as (a, b):
        sleeper = await reach(b, a, b.spawn(Sleeper, name="sleeper"), "sleeper")
        recorded.clear()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(sleeper.ask, ("sleep", 10))
            await trio.sleep(HEARTBEAT / 10)
            with trio.move_on_after(1):
                await sleeper.ask("queued behind")
        assert Node.of(b).answers.owed == {}
    asks = sorted(recorded.named("ask b"), key=lambda s: s.start_time or 0)
    assert [outcome(s) for s in asks] == ["value", "cancelled"]
    withdrawn = [s for s in recorded.named("receive Sleeper") if outcome(s) == "withdrawn"]
    assert len(withdrawn) == 1
    assert on("b")(withdrawn[0])
    assert is_child(withdrawn[0], asks[1])


async def test_the_header_goes_again_with_an_ask_sent_again_after_a_reconnect(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # b is between two connections: NATS answers the ask with no-responders while b
    # still beats, so a confirm round sends it again -- with the same traceparent.
    bus = Spy()
    recorded = Recorded()
    async with traced_nodes(bus, recorded, "a", "b") as (a, b):
        echo = await reach(b, a, b.spawn(Echo, name="echo"), "echo")
        recorded.clear()
        bus.asks.clear()
        async with trio.open_nursery() as nursery:
            with bus.between_connections(Node.of(b).transport):  # type: ignore[arg-type]
                nursery.start_soon(echo.ask, "again")
                await trio.sleep(HEARTBEAT)
    sent = [headers for subject, headers in bus.asks if ".n.b." in subject]
    assert len(sent) == 2  # (the first not delivered)
    assert sent[0] is not None
    assert sent[0] == sent[1]
    client = recorded.one("ask b")
    server = recorded.one("receive Echo")
    assert is_child(server, client)
    assert sent[0]["traceparent"].split("-")[2] == f"{client.context.span_id:016x}"


async def test_an_ask_to_a_shared_name_carries_its_trace_to_the_member_that_takes_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    recorded = Recorded()
    async with traced_nodes(MemoryBus(), recorded, "a", "b") as (a, b):
        b.register("work", b.spawn(Echo, name="worker"), shared=True)
        await Node.of(b).flush()
        await trio.sleep(HEARTBEAT)
        work = await a.lookup("work")
        recorded.clear()
        assert await work.ask("job") == "job"
    client = recorded.one("ask shared:work", SpanKind.CLIENT)
    server = recorded.one("receive Echo", SpanKind.SERVER)
    assert is_child(server, client)
    assert on("b")(server)
    assert "trio_actors.peer" not in attributes(client)  # (no one node: the server chose)


async def test_an_ask_to_a_pool_on_another_node_is_handled_by_a_task_in_its_trace(
    autojump_clock: trio.testing.MockClock,
) -> None:
    recorded = Recorded()
    async with traced_nodes(MemoryBus(), recorded, "a", "b") as (a, b):
        pool = b.spawn(ta.Pool(Echo, size=2, routing="balancing"), name="pool")
        remote = await reach(b, a, pool, "pool")
        recorded.clear()
        assert await remote.ask("pooled") == "pooled"
    client = recorded.one("ask b")
    server = recorded.one("receive PoolActor", SpanKind.SERVER)
    assert is_child(server, client)
    assert outcome(server) == "value"
    assert is_child(recorded.one("ask PoolActor", SpanKind.CLIENT), server)  # (the task's ask)


async def test_a_tell_to_another_node_is_a_producer_span_there_is_no_consumer_span(
    autojump_clock: trio.testing.MockClock,
) -> None:
    recorded = Recorded()
    tracer = recorded.provider.get_tracer("test")
    async with traced_nodes(MemoryBus(), recorded, "a", "b") as (a, b):
        echo = await reach(b, a, b.spawn(Echo, name="echo"), "echo")
        recorded.clear()
        with tracer.start_as_current_span("request"):
            echo.tell("across")
        echo.tell("outside a trace")
        assert await echo.ask("after") == "after"
    producer = recorded.one("tell b", SpanKind.PRODUCER)
    assert is_child(producer, recorded.one("request"))
    assert attributes(producer)["trio_actors.peer"] == "b"
    assert not [s for s in recorded.spans if s.kind is SpanKind.CONSUMER]


async def test_traced_and_untraced_nodes_talk_and_only_a_sampled_ask_is_traced_on_both(
    autojump_clock: trio.testing.MockClock,
) -> None:
    bus = Spy()
    recorded = Recorded()
    async with traced_nodes(bus, recorded, "a", "b", "c", untraced=("c",)) as (a, b, c):
        at_b = await reach(b, c, b.spawn(Echo, name="echo"), "echo")
        at_c = await reach(c, a, c.spawn(Echo, name="echo-c"), "echo-c")
        recorded.clear()
        bus.asks.clear()
        assert await at_b.ask("from untraced c") == "from untraced c"
        assert await at_c.ask("to untraced c") == "to untraced c"
    assert [headers is None for _subject, headers in bus.asks] == [True, False]
    assert [span.name for span in recorded.spans] == ["ask c"]  # (a's; c makes none)


async def test_a_context_nats_headers_cannot_carry_is_left_out_and_the_ask_goes(
    autojump_clock: trio.testing.MockClock,
) -> None:
    from opentelemetry.propagate import get_global_textmap

    class Newlines:
        """A propagator that writes a value with a line feed (NATS refuses it)."""

        fields = frozenset({"traceparent", "x-note"})

        def inject(self, carrier: Any, context: Any = None, setter: Any = None) -> None:
            get_global_textmap().inject(carrier, context=context)
            carrier["x-note"] = "two\nlines"

        def extract(self, carrier: Any, context: Any = None, getter: Any = None) -> Any:
            return get_global_textmap().extract(carrier, context=context)

    recorded = Recorded()
    tracing = Tracing(provider=recorded.provider, propagator=Newlines())  # type: ignore[arg-type]
    cluster = ta.Cluster(bus=MemoryBus(), heartbeat=HEARTBEAT)
    async with (
        ta.open_actor_system(cluster=cluster, node="a", tracing=tracing) as a,
        ta.open_actor_system(cluster=cluster, node="b", tracing=tracing) as b,
    ):
        echo = await reach(b, a, b.spawn(Echo, name="echo"), "echo")
        assert await echo.ask("still") == "still"
    client = recorded.one("ask b")
    assert [event.name for event in client.events] == ["trace_context_not_sent"]
    assert not recorded.named("receive Echo")  # (b had no context: no span there)

"""Traces across nodes over a real nats-server: the trace context crosses in the
ask's NATS headers (``HPUB`` out, ``HMSG`` in), one trace from node a through b to
c; and an ask the server answered with no-responders while its node still beat is
sent again by a confirm round with the same header, and handled in the same trace.
The real clock: the trio deadlines only detect a hang (``eventually``)."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio

import trio_actors as ta
from helpers import Echo, eventually
from nats_server import NatsServer
from traces import Front, Recorded, attributes, is_child, outcome, reach, render
from trio_actors import nats
from trio_actors.remote import Node

pytestmark = pytest.mark.usefixtures("no_context_left_behind")

HEARTBEAT = 0.25


@asynccontextmanager
async def three_nodes(
    server: NatsServer, recorded: Recorded
) -> AsyncIterator[tuple[ta.ActorSystem, ta.ActorSystem, ta.ActorSystem]]:
    cluster = ta.Cluster(server.url, heartbeat=HEARTBEAT)
    tracing = recorded.provider
    with trio.fail_after(30):
        async with (
            ta.open_actor_system(cluster=cluster, node="a", tracing=tracing) as a,
            ta.open_actor_system(cluster=cluster, node="b", tracing=tracing) as b,
            ta.open_actor_system(cluster=cluster, node="c", tracing=tracing) as c,
        ):
            yield a, b, c


async def test_the_trace_context_crosses_in_nats_headers_from_a_through_b_to_c(
    nats_server: NatsServer,
) -> None:
    recorded = Recorded()
    heard: list[nats.Msg] = []
    async with (
        nats.connect(nats_server.url) as spy,
        three_nodes(nats_server, recorded) as (a, b, c),
    ):
        echo = await reach(c, b, c.spawn(Echo, name="echo"), "echo")
        front = await reach(b, a, b.spawn(Front, echo, name="front"), "front")
        # (a client of its own hears what goes to b's and c's actors: HMSG, headers)
        for node in (b, c):
            subject = Node.of(node).subjects.node(Node.of(node).name, Node.of(node).incarnation)
            spy.subscribe_nowait(f"{subject}.*", callback=heard.append)
        await spy.flush()
        recorded.clear()
        assert await front.ask("across") == "across"
        ask_b, ask_c = recorded.one("ask b"), recorded.one("ask c")
        await eventually(lambda: len([m for m in heard if m.headers]) >= 2)
    with_headers = [m for m in heard if m.headers is not None]
    assert len(with_headers) == 2  # (the two asks; nothing else carries headers)
    parents = [m.headers["traceparent"] for m in with_headers]  # type: ignore[index]
    assert ask_b.context is not None
    assert ask_c.context is not None
    trace_id = f"{ask_b.context.trace_id:032x}"
    assert [parent.rsplit("-", 1)[0] for parent in parents] == [
        f"00-{trace_id}-{ask_b.context.span_id:016x}",
        f"00-{trace_id}-{ask_c.context.span_id:016x}",
    ]
    assert all(int(parent.rsplit("-", 1)[1], 16) & 1 for parent in parents)  # (sampled)
    assert is_child(recorded.one("receive Front"), ask_b)
    assert is_child(recorded.one("receive Echo"), ask_c)
    assert render(recorded.spans).splitlines() == [
        "ask b [CLIENT] on a -> value",
        "  receive Front [SERVER] on b -> value",
        "    ask c [CLIENT] on b -> value",
        "      receive Echo [SERVER] on c -> value",
    ]


async def test_an_ask_a_confirm_round_sends_again_keeps_its_trace(
    nats_server: NatsServer,
) -> None:
    # b stops hearing its actors' subject for a while (as between two connections):
    # the server answers a's ask with no-responders while b still beats, so a sends
    # it again at a confirm round -- the only copy b receives, with the header.
    recorded = Recorded()
    async with three_nodes(nats_server, recorded) as (a, b, _c):
        echo = await reach(b, a, b.spawn(Echo, name="echo"), "echo")
        recorded.clear()
        node_b, requests = Node.of(b), Node.of(a).requests
        node_b._unsubscribes.pop(0)()
        await node_b.transport.flush()  # (the server has the UNSUB before a asks)
        answers: list[Any] = []

        async def ask() -> None:
            answers.append(await echo.ask("sent again"))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(ask)
            await eventually(lambda: any(w.undelivered for w in requests.waiting.values()))
            node_b._unsubscribes.insert(
                0, node_b.listen(node_b.subject, node_b._envelope_and_headers, node_b._on_observed)
            )
            await node_b.transport.flush()
        assert answers == ["sent again"]
    client = recorded.one("ask b")
    server = recorded.one("receive Echo")
    assert is_child(server, client)
    assert (outcome(client), outcome(server)) == ("value", "value")
    assert attributes(server)["trio_actors.node"] == "b"

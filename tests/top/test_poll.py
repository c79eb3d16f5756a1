"""How ``trio-actors top`` asks (``top/_poll.py``), against nodes on the in-memory
bus under MockClock: every node's summary, sooner when every node known has
answered; a node's busiest actors or its error; answers forged by another node or
unreadable are dropped and counted; another monitor's answers are not taken."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import trio
import trio.testing

import trio_actors as ta
from trio_actors import _monitoring as wire
from trio_actors.nats import Msg
from trio_actors.remote import MemoryBus, MemoryTransport
from trio_actors.top._poll import Poller

Clock = trio.testing.MockClock


class OnTheBus:
    """A monitor's connection to an in-memory bus, as ``Poller`` uses a client."""

    def __init__(self, transport: MemoryTransport) -> None:
        self.transport = transport

    def subscribe_nowait(self, subject: str, *, callback: Callable[[Msg], object]) -> object:
        return self.transport.subscribe(subject, callback)

    def publish(self, subject: str, payload: bytes, *, reply: str | None = None) -> None:
        self.transport.publish(subject, payload, reply=reply)


class Worker(ta.Actor):
    def receive(self, message: Any) -> Any:
        return message


@asynccontextmanager
async def nodes_and_poller(
    names: tuple[str, ...] = ("a", "b"),
) -> AsyncIterator[tuple[list[ta.ActorSystem], Poller, MemoryTransport]]:
    bus = MemoryBus()
    cluster = ta.Cluster(bus=bus, name="c")
    async with (
        ta.open_actor_system(cluster=cluster, node=names[0]) as first,
        ta.open_actor_system(cluster=cluster, node=names[1]) as second,
        bus.connect("top") as transport,
        bus.connect("raw") as raw,
    ):
        yield [first, second], Poller(OnTheBus(transport), "c", "mon"), raw


async def test_every_nodes_summary_sooner_once_every_known_node_answered(
    autojump_clock: Clock,
) -> None:
    async with nodes_and_poller() as ([a, _b], poller, _raw):
        a.spawn(Worker).tell(1)
        began = trio.current_time()
        summaries = await poller.summaries(0.5, set())
        assert sorted(s.node for s in summaries) == ["a", "b"]
        assert trio.current_time() - began == 0.5  # (nobody known: the whole wait)
        began = trio.current_time()
        summaries = await poller.summaries(0.5, {"a", "b"})
        assert sorted((s.node, s.handled) for s in summaries) == [("a", 1), ("b", 0)]
        assert trio.current_time() - began < 0.5  # (both known answered: at once)
        assert (poller.forged, poller.bad) == (0, 0)


async def test_a_nodes_busiest_actors_or_its_error(autojump_clock: Clock) -> None:
    async with nodes_and_poller() as ([a, _b], poller, _raw):
        a.spawn(Worker, name="w")
        found = await poller.actors("a", "rate", 5, 0.5)
        assert isinstance(found, wire.ActorsAnswer)
        assert [row.path for row in found.actors] == ["system/w"]
        assert await poller.actors("a", "speed", 5, 0.5) == (
            "a says: sort is one of rate, handled, mailbox, turn, dead_letters, failures, "
            "restarts, got 'speed'"
        )
        assert await poller.actors("z", "rate", 5, 0.5) == "no answer: no node serves it"


async def test_answers_forged_or_unreadable_are_dropped_and_counted(
    autojump_clock: Clock,
) -> None:
    async with nodes_and_poller() as (_nodes, poller, raw):
        requests: list[Msg] = []
        raw.subscribe("$SRV.STATS.ta-c", requests.append)
        polled: list[list[wire.NodeSummary]] = []

        async def poll() -> None:
            polled.append(await poller.summaries(0.5, set()))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(poll)
            await trio.testing.wait_all_tasks_blocked()  # (asked; a and b answered)
            [request] = requests
            assert request.reply is not None
            number = request.reply.rsplit(".", 1)[1]
            as_b = {"type": wire.STATS_RESPONSE, "name": "ta-c", "id": "b"}
            raw.publish(f"ta.c.m.mon.c.{number}", json.dumps(as_b).encode())  # (c as b)
            raw.publish(f"ta.c.m.mon.d.{number}", b"\xff not json")
            raw.publish(f"ta.c.m.mon.-.{number}", b"{}")  # (no node named)
            raw.publish("ta.c.m.mon.e.someone-elses-1", b"{}")  # (not this run's)
        [summaries] = polled
        assert sorted(s.node for s in summaries) == ["a", "b"]
        assert (poller.forged, poller.bad) == (1, 2)


class Refusing(OnTheBus):
    def publish(self, subject: str, payload: bytes, *, reply: str | None = None) -> None:
        raise ta.nats.BufferFull("more than max_pending_bytes would wait")


async def test_a_request_the_connection_refuses_ends_at_once_with_why(
    autojump_clock: Clock,
) -> None:
    async with MemoryBus().connect("top") as transport:
        poller = Poller(Refusing(transport), "c", "mon")
        began = trio.current_time()
        assert await poller.summaries(0.5, set()) == []
        assert await poller.actors("a", "rate", 5, 0.5) == (
            "not sent: more than max_pending_bytes would wait"
        )
        assert trio.current_time() == began

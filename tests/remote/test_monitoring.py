"""A node's statistics service (``remote/_monitoring.py``) over the in-memory bus,
under MockClock: the three ``$SRV`` answers follow NATS's service API (ADR-32),
the summary counts what the node's actors did (stopped ones too), the busiest
actors come with rates on the node's clock, answers are published on subjects that
name the answering node, other clusters' requests are left alone, reply subjects a
secure node may not use are refused, bad requests get ADR-32's error headers, and
the work is bounded (rate-limited, a bounded queue). The fuzzing of these subjects
is in ``test_fuzz_monitoring.py``; the permissions against a real server in
``test_secure.py``."""

from __future__ import annotations

import json
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import attrs
import pytest
import trio
import trio.testing

import trio_actors as ta
from helpers import Worker
from trio_actors import _monitoring as wire
from trio_actors.actors._census import SORTS
from trio_actors.nats import Msg
from trio_actors.remote import MemoryBus, MemoryTransport, Node
from trio_actors.remote._monitoring import FORGET_AFTER, FRESH, QUEUED

Clock = trio.testing.MockClock


class Monitor:
    """A monitor on a raw connection: asks with reply subjects
    ``ta.<cluster>.m.<name>.<node or ->.<n>`` and keeps every answer."""

    def __init__(self, raw: MemoryTransport, cluster: str = "c", name: str = "mon") -> None:
        self.raw = raw
        self.cluster = cluster
        self.name = name
        self.answers: list[Msg] = []
        self.number = 0
        raw.subscribe(wire.monitor_replies(cluster, name), self.answers.append)

    def ask(self, subject: str, body: bytes = b"", node: str | None = None) -> str:
        """Publish a request; return its number."""
        self.number += 1
        reply = wire.monitor_reply(self.cluster, self.name, node, str(self.number))
        self.raw.publish(subject, body, reply=reply)
        return str(self.number)

    def to(self, number: str) -> dict[str, Msg]:
        """The answers to request ``number``, by the node their subject names."""
        found = {}
        for message in self.answers:
            _m, _mon, node, n = message.subject.rsplit(".", 3)
            if n == number:
                assert node not in found, f"two answers from {node}"
                found[node] = message
        return found


async def settle() -> None:
    """Let the bus deliver and the nodes answer (no time passes on the MockClock)."""
    await trio.testing.wait_all_tasks_blocked()


@asynccontextmanager
async def two_nodes(
    **changes: Any,
) -> AsyncIterator[tuple[ta.ActorSystem, ta.ActorSystem, Monitor]]:
    bus = MemoryBus()
    cluster = attrs.evolve(ta.Cluster(bus=bus, name="c"), **changes)
    async with (
        ta.open_actor_system(cluster=cluster, node="a") as a,
        ta.open_actor_system(cluster=cluster, node="b") as b,
        bus.connect("monitor") as raw,
    ):
        await settle()
        yield a, b, Monitor(raw)


def document(message: Msg) -> dict[str, Any]:
    value = json.loads(message.data)
    assert isinstance(value, dict)
    return value


def standard(kind: str, node: ta.ActorSystem) -> dict[str, Any]:
    assert node.node is not None
    return {
        "type": kind,
        "name": "ta-c",
        "id": node.node.name,
        "version": ta.__version__,
        "metadata": {"cluster": "c", "node": node.node.name, "incarnation": node.node.incarnation},
    }


@pytest.mark.parametrize("form", ["all", "cluster", "node"])
async def test_ping_info_and_stats_follow_the_service_api(form: str, autojump_clock: Clock) -> None:
    async with two_nodes() as (a, b, monitor):
        for verb in wire.VERBS:
            subject = {
                "all": f"$SRV.{verb}",
                "cluster": f"$SRV.{verb}.ta-c",
                "node": f"$SRV.{verb}.ta-c.a",
            }[form]
            number = monitor.ask(subject)
            await settle()
            answers = monitor.to(number)
            assert set(answers) == ({"a"} if form == "node" else {"a", "b"})
            for node, system in (("a", a), ("b", b)):
                if node not in answers:
                    continue
                found = document(answers[node])
                assert answers[node].subject == f"ta.c.m.mon.{node}.{number}"
                if verb == "PING":
                    assert found == standard(wire.PING_RESPONSE, system)
                elif verb == "INFO":
                    assert found == {
                        **standard(wire.INFO_RESPONSE, system),
                        "description": f"trio-actors node {node} of cluster c",
                        "endpoints": [
                            {
                                "name": "statistics",
                                "subject": f"ta.c.s.{node}",
                                "queue_group": "",
                                "metadata": {"answers": wire.ACTORS},
                            }
                        ],
                    }
                else:
                    started = found.pop("started")
                    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z", started)
                    [endpoint] = found.pop("endpoints")
                    assert found == standard(wire.STATS_RESPONSE, system)
                    data = endpoint.pop("data")
                    assert endpoint == {
                        "name": "statistics",
                        "subject": f"ta.c.s.{node}",
                        "queue_group": "",
                        "num_requests": 0,
                        "num_errors": 0,
                        "last_error": "",
                        "processing_time": 0,
                        "average_processing_time": 0,
                    }
                    summary = wire.NodeSummary.from_json(data)
                    assert (summary.node, summary.cluster) == (node, "c")
                    assert wire.parse_stats(answers[node].data, "c", node) == summary


async def test_the_summary_counts_what_every_actor_did_stopped_ones_too(
    autojump_clock: Clock,
) -> None:
    async with two_nodes() as (a, _b, monitor):
        assert a.node is not None
        opened = trio.current_time()
        workers = [a.spawn(Worker, autojump_clock, name=f"w{n}") for n in range(3)]
        for worker in workers:
            for n in range(10):
                worker.tell(n)
        workers[0].tell("boom")  # (a failure, and a restart)
        await settle()
        workers[1].tell(0.5)  # (a long turn, alone in its round)
        await settle()
        await workers[2].stop()
        workers[2].tell("too late")  # (a dead letter "stopped")
        await trio.sleep(1)
        number = monitor.ask("$SRV.STATS.ta-c.a")
        await settle()
        summary = wire.parse_stats(monitor.to(number)["a"].data, "c", "a")
        assert summary.handled == 10 + 1 + 11 + 10  # (w2's 10: it has stopped)
        assert (summary.live_actors, summary.spawned) == (2, 3)
        assert (summary.failures, summary.restarts) == (1, 1)
        assert summary.dead_letters == ta.DeadLetterCounts(stopped=1)
        assert summary.longest_turn_path == "system/w1"
        assert summary.longest_turn_seconds == pytest.approx(0.5)
        assert summary.longest_round_seconds >= 0.5
        assert summary.clock == trio.current_time()
        assert summary.uptime >= summary.clock - opened
        assert summary.incarnation == a.node.incarnation
        assert (summary.members, summary.unconfirmed, summary.not_permitted) == (2, 0, 0)
        assert summary.bad_input == ta.BadInputCounts()


async def test_the_busiest_actors_come_with_rates_on_the_nodes_clock(
    autojump_clock: Clock,
) -> None:
    async with two_nodes() as (a, _b, monitor):
        workers = [a.spawn(Worker, name=f"w{n}") for n in range(4)]
        first = monitor.ask("ta.c.s.a", node="a")
        await settle()
        answer = wire.parse_actors(monitor.to(first)["a"].data, "a")
        assert (answer.interval, answer.sort, answer.total_actors) == (None, "rate", 4)
        assert [row.rate for row in answer.actors] == [None] * 4
        for n, worker in enumerate(workers):
            for _ in range(n * 5):
                worker.tell(0)
        await trio.sleep(2)
        second = monitor.ask("ta.c.s.a", json.dumps({"limit": 2}).encode(), node="a")
        await settle()
        answer = wire.parse_actors(monitor.to(second)["a"].data, "a")
        assert answer.interval is not None
        assert answer.interval == pytest.approx(2.0)
        assert [(row.path, row.rate, row.handled) for row in answer.actors] == [
            ("system/w3", 15 / answer.interval, 15),
            ("system/w2", 10 / answer.interval, 10),
        ]
        assert answer.actors[0] == wire.ActorRow(
            path="system/w3",
            actor_class="Worker",
            state="running",
            mailbox=0,
            handled=15,
            rate=15 / answer.interval,
            dead_letters=0,
            failures=0,
            restarts=0,
            longest_turn_seconds=answer.actors[0].longest_turn_seconds,
        )
        workers[0].tell("boom")
        await trio.sleep(1)
        third = monitor.ask("ta.c.s.a", b'{"sort": "failures", "limit": 1}', node="a")
        await settle()
        answer = wire.parse_actors(monitor.to(third)["a"].data, "a")
        assert [(row.path, row.failures) for row in answer.actors] == [("system/w0", 1)]
        assert answer.sort == "failures"


async def test_the_sorts_are_the_censuss() -> None:
    assert wire.SORTS == SORTS


@pytest.mark.parametrize(
    ("body", "said"),
    [
        (b"{", "not JSON"),
        (b"[1]", "the request is not a JSON object"),
        (b'{"sort": "speed"}', "sort is one of rate, handled"),
        (b'{"limit": 101}', "limit is a whole number from 0 to 100"),
        (b'{"limit": true}', "limit is a whole number"),
        (b'{"limit": -1}', "limit is a whole number"),
        (b'{"colour": 1}', "unknown key 'colour'"),
        (b"\xff", "not JSON"),
        (b"[" * 100_000, "not JSON"),
    ],
)
async def test_a_bad_request_gets_the_service_apis_error_headers(
    body: bytes, said: str, autojump_clock: Clock
) -> None:
    async with two_nodes() as (a, _b, monitor):
        number = monitor.ask("ta.c.s.a", body, node="a")
        await settle()
        answer = monitor.to(number)["a"]
        assert answer.headers is not None
        assert answer.headers["Nats-Service-Error-Code"] == "400"
        assert said in answer.headers["Nats-Service-Error"]
        assert answer.data == b""
        number = monitor.ask("$SRV.STATS.ta-c.a")
        await settle()
        [endpoint] = document(monitor.to(number)["a"])["endpoints"]
        assert (endpoint["num_requests"], endpoint["num_errors"]) == (1, 1)
        assert said in endpoint["last_error"]
        assert Node.of(a).statistics().bad_input.total == 0  # (answered: not bad input)


async def test_requests_of_another_cluster_are_left_to_its_nodes(autojump_clock: Clock) -> None:
    async with two_nodes() as (a, _b, monitor):
        other = Monitor(monitor.raw, cluster="other")
        for subject in ("$SRV.PING", "$SRV.STATS"):
            other.ask(subject)
        other.ask("$SRV.PING.ta-other")  # (no subscriber: NATS says no responders)
        await settle()
        assert [message.status for message in other.answers] == [503]
        assert Node.of(a).statistics().bad_input.total == 0


@pytest.mark.parametrize("secure", [False, True])
async def test_an_inbox_reply_is_answered_only_where_nodes_have_no_user_of_their_own(
    secure: bool, autojump_clock: Clock
) -> None:
    bus = MemoryBus()
    # (user == the node's name: each node its own user, as trio-actors secure writes)
    cluster = ta.Cluster(bus=bus, name="c", user="a" if secure else None)
    async with (
        ta.open_actor_system(cluster=cluster, node="a") as a,
        bus.connect("nats-cli") as raw,
    ):
        answers: list[Msg] = []
        raw.subscribe("_INBOX.xyz.*", answers.append)
        raw.publish("$SRV.PING", b"", reply="_INBOX.xyz.1")
        raw.publish("ta.c.s.a", b"", reply="_INBOX.xyz.2")
        await settle()
        refused = Node.of(a).statistics().bad_input.monitoring
        if secure:
            assert (answers, refused) == ([], 2)
        else:
            assert [message.subject for message in answers] == ["_INBOX.xyz.1", "_INBOX.xyz.2"]
            assert document(answers[0]) == standard(wire.PING_RESPONSE, a)
            assert wire.parse_actors(answers[1].data, "a").total_actors == 0
            assert refused == 0


@pytest.mark.parametrize(
    "reply",
    [
        None,
        "ta.c.m.mon.b.1",  # (names another node)
        "ta.c.r.b.0.a.1",  # (this cluster's, not a monitor's: b's request's reply)
        "ta.c.m.mon.-",  # (too short)
        "$SRV.PING",  # (an answer there would be a request to every node)
        "bad subject",
    ],
)
async def test_a_reply_subject_a_node_may_not_answer_on_is_counted_not_answered(
    reply: str | None, autojump_clock: Clock
) -> None:
    async with two_nodes() as (a, b, monitor):
        heard: list[Msg] = []
        monitor.raw.subscribe(">", heard.append)
        monitor.raw.publish("$SRV.PING.ta-c.a", b"", reply=reply)
        monitor.raw.publish("ta.c.s.a", b"", reply=reply)
        await settle()
        assert [m.subject for m in heard if m.subject.startswith("ta.c.m.")] == []
        assert Node.of(a).statistics().bad_input.monitoring == 2
        assert Node.of(b).statistics().bad_input.total == 0


async def test_a_summary_and_a_census_are_computed_at_most_once_per_fresh_interval(
    autojump_clock: Clock,
) -> None:
    async with two_nodes() as (a, _b, monitor):
        worker = a.spawn(Worker, name="w")
        numbers = [monitor.ask("$SRV.STATS.ta-c.a") for _ in range(2)]
        worker.tell(1)
        await settle()
        first, second = (document(monitor.to(n)["a"]) for n in numbers)
        assert first["endpoints"][0]["data"] == second["endpoints"][0]["data"]  # (the same)
        began = trio.current_time()
        asked = [
            monitor.ask("ta.c.s.a", b'{"sort": "rate"}', node="a"),
            monitor.ask("ta.c.s.a", b'{"sort": "rate"}', node="a"),
            monitor.ask("ta.c.s.a", b'{"sort": "mailbox"}', node="a"),
        ]
        await trio.sleep(1)
        answers = [monitor.to(n)["a"] for n in asked]
        assert answers[0].data == answers[1].data  # (the same answer again)
        clocks = [wire.parse_actors(m.data, "a").clock for m in answers]
        assert clocks[0] == clocks[1] == began
        assert clocks[2] == pytest.approx(began + FRESH)  # (another waited its turn)
        number = monitor.ask("$SRV.STATS.ta-c.a")
        await settle()
        assert document(monitor.to(number)["a"])["endpoints"][0]["data"]["handled"] == 1


async def test_requests_beyond_the_queue_are_dropped_and_counted(autojump_clock: Clock) -> None:
    async with two_nodes() as (a, _b, monitor):
        numbers = [monitor.ask("$SRV.PING.ta-c.a") for _ in range(QUEUED + 36)]
        await settle()
        answered = [n for n in numbers if monitor.to(n)]
        assert answered == numbers[:QUEUED]
        assert Node.of(a).statistics().bad_input.monitoring == 36


async def test_the_counts_kept_for_rates_are_forgotten_after_a_while(
    autojump_clock: Clock,
) -> None:
    async with two_nodes() as (a, _b, monitor):
        a.spawn(Worker, name="w")
        monitor.ask("ta.c.s.a", node="a")
        await trio.sleep(1)
        number = monitor.ask("ta.c.s.a", node="a")
        await settle()
        assert wire.parse_actors(monitor.to(number)["a"].data, "a").interval == 1.0
        await trio.sleep(FORGET_AFTER + 1)
        number = monitor.ask("ta.c.s.a", node="a")
        await settle()
        assert wire.parse_actors(monitor.to(number)["a"].data, "a").interval is None


async def test_a_node_with_monitoring_off_subscribes_to_none_of_it(autojump_clock: Clock) -> None:
    async with two_nodes(monitoring=False) as (a, _b, monitor):
        assert Node.of(a).monitoring is None
        for subject in ("$SRV.PING", "ta.c.s.a"):
            monitor.ask(subject)
        await settle()
        assert [message.status for message in monitor.answers] == [503, 503]

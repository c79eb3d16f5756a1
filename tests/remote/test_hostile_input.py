"""What arrives from the wire never ends a node, and what it may hold is bounded:
each defect found by hostile input from a raw client, over the in-memory bus
(deterministic, MockClock). The property-based fuzzing of every inbound handler is
in ``test_fuzz_inbound.py``; the soak against a real server in ``test_soak_inbound.py``."""

from __future__ import annotations

import json
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import attrs
import msgspec
import pytest
import trio
import trio.testing

import trio_actors as ta
from trio_actors.remote import MemoryBus, MemoryTransport, Node
from trio_actors.remote._subjects import TELL, WATCH

encode = msgspec.msgpack.encode


@pytest.fixture
def cluster_here(autojump_clock: trio.testing.MockClock) -> ta.Cluster:
    """An in-memory bus (these tests forge frames on it), under the MockClock that
    each test asks for too (pytest-trio takes the clock from the test's arguments)."""
    return ta.Cluster(bus=MemoryBus())


class Echo(ta.Actor):
    def receive(self, message: Any) -> Any:
        return message


@asynccontextmanager
async def node_and_raw(
    cluster: ta.Cluster,
) -> AsyncIterator[tuple[ta.ActorSystem, Node, ta.ActorRef, MemoryTransport]]:
    """Node ``a`` with an actor ``echo``, and a raw connection to its bus."""
    assert isinstance(cluster.bus, MemoryBus)
    async with (
        ta.open_actor_system(cluster=cluster, node="a") as a,
        cluster.bus.connect("raw") as raw,
    ):
        echo = a.spawn(Echo, name="echo")
        yield a, Node.of(a), echo, raw


async def settle() -> None:
    """Let the bus deliver what was published (MockClock: no real time passes)."""
    await trio.sleep(0.001)


async def still_answers(node: Node, echo: ta.ActorRef) -> None:
    """A normal ask through the node's wire path (another node asks ``echo``)."""
    cluster = node.cluster
    async with ta.open_actor_system(cluster=cluster, node="asker") as asker:
        with trio.fail_after(5):
            await node.flush()
            there = Node.of(asker).ref_from_wire(*node.ref_to_wire(echo))
            assert await there.ask(("still", "here")) == ("still", "here")


async def test_a_numbered_subject_whose_last_token_is_not_a_number_is_counted(
    cluster_here: ta.Cluster,
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with node_and_raw(cluster_here) as (_a, node, echo, raw):
        me = (node.name, node.incarnation)
        subjects = node.subjects
        raw.publish(f"{subjects.replies(*me)}.b.x", b"")
        raw.publish(f"{subjects.unreachable(*me)}.x", b"")
        raw.publish(f"{subjects.terminations(*me, 'b')}.x", b"")
        raw.publish(f"{subjects.replies(*me)}.b.{'9' * 5000}", b"")  # (int() refuses 4300+)
        await settle()
        bad = node.statistics().bad_input
        assert (bad.replies, bad.bounces, bad.terminations) == (2, 1, 1)
        await still_answers(node, echo)


async def test_a_deeply_nested_advisory_is_counted_not_the_end_of_every_node(
    cluster_here: ta.Cluster,
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with node_and_raw(cluster_here) as (_a, node, echo, raw):
        raw.publish("$SYS.ACCOUNT.X.DISCONNECT", b"[" * 200_000 + b"]" * 200_000)
        raw.publish("$SYS.ACCOUNT.X.DISCONNECT", b"\xff not json")
        raw.publish("$SYS.ACCOUNT.X.DISCONNECT", json.dumps({"client": []}).encode())
        await settle()
        assert node.statistics().bad_input.advisories == 3
        await still_answers(node, echo)


async def test_deeply_nested_frames_on_every_subject_are_counted(
    cluster_here: ta.Cluster,
    autojump_clock: trio.testing.MockClock,
) -> None:
    nested = b"\x91" * 200_000 + b"\xc0"  # (a msgpack array in an array in ..., 200,000 deep)
    async with node_and_raw(cluster_here) as (_a, node, echo, raw):
        me = (node.name, node.incarnation)
        subjects = node.subjects
        to_node = subjects.to_node(*me, "raw")
        for subject in (
            to_node,
            f"{subjects.replies(*me)}.b.1",
            f"{subjects.prefix}.a.raw.0.{me[0]}.{me[1]}",
            subjects.names("raw", "0"),
            subjects.heartbeat("forger", "0" * 12),
        ):
            raw.publish(subject, nested, reply=f"{subjects.unreachable('x', 'y')}.1")
        tell = encode((TELL, 0, "", (0, [(1, "x", msgspec.Raw(nested))])))
        raw.publish(to_node, tell)
        ask = encode((1, 1, "x", msgspec.Raw(nested)))
        raw.publish(to_node, ask, reply="somewhere")
        await settle()
        bad = node.statistics().bad_input
        assert bad.messages >= 1
        assert bad.acks == 1
        assert bad.announcements == 1
        assert bad.heartbeats == 1
        await still_answers(node, echo)


async def test_a_flood_of_forged_heartbeats_costs_one_announcement_of_the_names(
    cluster_here: ta.Cluster,
    autojump_clock: trio.testing.MockClock,
) -> None:
    limits = ta.InputLimits(peers=64)
    cluster = attrs.evolve(cluster_here, limits=limits)
    async with node_and_raw(cluster) as (a, node, echo, raw):
        for number in range(100):
            a.register(f"name-{number}", a.spawn(Echo, name=f"named-{number}"))
        claims: list[bytes] = []
        raw.subscribe(node.subjects.all_names(), lambda message: claims.append(message.data))
        await settle()
        claims.clear()
        for forger in range(1_000):
            raw.publish(node.subjects.heartbeat(f"forger{forger}", "0" * 12), b"")
        await settle()
        peers_during = node.statistics().peers
        await trio.sleep(1.0)  # (the rate limit's window ends: one more at most)
        kinds = [msgspec.msgpack.decode(claim)[0] for claim in claims]
        # Its 100 names once at the first heartbeat and once at the window's end (the
        # rest shared it), and one request for names per peer admitted to the table:
        # never 100 claims per heartbeat.
        assert kinds.count(0) == 2 * 100
        assert kinds.count(2) == limits.peers - 1  # (all but itself)
        assert peers_during <= limits.peers
        assert node.statistics().bad_input.over_limit == 1_000 - (limits.peers - 1)  # (and itself)
        # Silent, they are declared down and leave the table.
        await trio.sleep(cluster.heartbeat * (cluster.heartbeats_missed + 2))
        assert node.statistics().peers == 1  # (itself)
        await still_answers(node, echo)


async def test_tables_keyed_by_what_a_forged_peer_sends_are_freed_when_it_goes_down(
    cluster_here: ta.Cluster,
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with node_and_raw(cluster_here) as (_a, node, echo, raw):
        subjects = node.subjects
        me = (node.name, node.incarnation)
        number = node.ref_to_wire(echo)[3]
        for forger in range(200):
            peer = (f"forger{forger}", "0" * 12)
            raw.publish(subjects.heartbeat(*peer), b"")
            watch = encode((WATCH, number, "echo", msgspec.Raw(encode(None))))
            to_node = subjects.to_node(*me, peer[0])
            watches = subjects.terminations(*peer, node.name)
            for watch_number in range(5):
                raw.publish(to_node, watch, reply=f"{watches}.{watch_number}")
            tell = encode((TELL, 1, "r", (1, [(number, "echo", msgspec.Raw(encode("hi")))])))
            raw.publish(to_node, tell, reply=f"{subjects.unreachable(*peer)}.1")
            claim = encode((0, f"forged-{forger}", *peer, "x", 1, 0))
            raw.publish(subjects.names(*peer), claim)
        await settle()
        assert sum(len(replies) for replies in node.watches.watched.values()) == 1_000
        assert len(node.tells.taken.records) == 200
        assert len(node.names.held) == 200
        # They never beat again: declared down, and everything they made is freed.
        cluster = node.cluster
        await trio.sleep(cluster.heartbeat * (cluster.heartbeats_missed + 2))
        assert sum(len(replies) for replies in node.watches.watched.values()) == 0
        assert node.tells.taken.records == {}
        assert node.names.held == {}
        assert node.statistics().peers == 1  # (itself)
        await still_answers(node, echo)


async def test_watches_from_other_nodes_are_bounded(
    cluster_here: ta.Cluster,
    autojump_clock: trio.testing.MockClock,
) -> None:
    cluster = attrs.evolve(cluster_here, limits=ta.InputLimits(watches=100))
    async with node_and_raw(cluster) as (_a, node, echo, raw):
        subjects = node.subjects
        number = node.ref_to_wire(echo)[3]
        peer = ("forger", "0" * 12)
        raw.publish(subjects.heartbeat(*peer), b"")
        watch = encode((WATCH, number, "echo", msgspec.Raw(encode(None))))
        to_node = subjects.to_node(node.name, node.incarnation, peer[0])
        watches = subjects.terminations(*peer, node.name)
        for watch_number in range(1_000):
            raw.publish(to_node, watch, reply=f"{watches}.{watch_number}")
        short = f"{subjects.prefix}.t.forger.{node.name}.5"  # (its, but not a node's form)
        raw.publish(to_node, watch, reply=short)
        raw.publish(to_node, watch, reply="not.a.termination.subject")  # (not its sender's)
        await settle()
        assert sum(len(replies) for replies in node.watches.watched.values()) == 100
        bad = node.statistics().bad_input
        assert (bad.over_limit, bad.watches, bad.forged) == (900, 1, 1)


async def test_names_held_for_other_nodes_are_bounded(
    cluster_here: ta.Cluster,
    autojump_clock: trio.testing.MockClock,
) -> None:
    cluster = attrs.evolve(cluster_here, limits=ta.InputLimits(names=100))
    async with node_and_raw(cluster) as (a, node, echo, raw):
        for number in range(1_000):
            raw.publish(
                node.subjects.names("forger", "0" * 12),
                encode((0, f"n{number}", "forger", "0" * 12, "x", 1, 0)),
            )
        await settle()
        assert len(node.names.held) == 100
        assert node.statistics().bad_input.over_limit == 900
        with pytest.raises(ValueError, match="holds it"):
            a.register("n5", echo)  # (a name the view holds is still refused)


async def test_a_ref_to_a_node_that_could_not_exist_makes_its_message_undecodable(
    cluster_here: ta.Cluster,
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with node_and_raw(cluster_here) as (a, node, echo, raw):
        number = node.ref_to_wire(echo)[3]
        for wire in (("*", "0" * 12, "x", 1), ("b", "a.b", "x", 1), ("", "x", "x", 1)):
            ref = msgspec.msgpack.Ext(1, encode(wire))  # (the codec's extension for a ref)
            tell = encode((TELL, 0, "", (0, [(number, "echo", msgspec.Raw(encode(ref)))])))
            raw.publish(node.subjects.to_node(node.name, node.incarnation, "raw"), tell)
        await settle()
        assert node.statistics().bad_input.tells == 3
        assert a.statistics().dead_letters.undecodable == 3
        await still_answers(node, echo)


async def test_a_lookup_answered_with_no_ref_goes_on_waiting_for_a_real_answer(
    cluster_here: ta.Cluster,
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with node_and_raw(cluster_here) as (_a, node, echo, raw):
        asked: list[str | None] = []
        raw.subscribe(node.subjects.name("held"), lambda message: asked.append(message.reply))
        async with trio.open_nursery() as nursery:
            found: list[ta.ActorRef] = []

            async def look_up() -> None:
                found.append(await node.lookup("held"))

            nursery.start_soon(look_up)
            await settle()
            (reply,) = asked
            assert reply is not None
            raw.publish(reply, encode((True, "not a ref")))
            raw.publish(reply, encode((False, ["a", "b", 1])))
            await settle()
            assert not found  # (still waiting: neither was an answer)
            # (as the holder answers: its name where the lookup's subject has "-")
            raw.publish(
                reply.replace(".-.", f".{node.name}."), encode((True, node.ref_to_wire(echo)))
            )
        assert found == [echo]
        assert node.statistics().bad_input.replies == 2


class Big(msgspec.Struct):
    data: bytes


async def test_undecodable_dead_letters_keep_a_prefix_and_a_node_caps_their_bytes(
    cluster_here: ta.Cluster,
    autojump_clock: trio.testing.MockClock,
) -> None:
    limits = ta.InputLimits(undecodable_prefix=100, undecodable_bytes=1_000)
    ignorant = attrs.evolve(cluster_here, limits=limits)
    knows = attrs.evolve(cluster_here, types=[Big])
    async with (
        ta.open_actor_system(cluster=ignorant, node="a") as a,
        ta.open_actor_system(cluster=knows, node="b") as b,
    ):
        echo = a.spawn(Echo, name="echo")
        a.register("echo", echo)
        await Node.of(a).flush()
        there = await b.lookup("echo")
        for _ in range(50):
            there.tell(Big(b"x" * 10_000))
        await Node.of(b).flush()
        await trio.sleep(0.1)
        letters = [letter for letter in a.dead_letters.recent if letter.reason == "undecodable"]
        assert len(letters) == 50
        assert all(isinstance(letter.message, bytes) for letter in letters)
        assert sum(len(letter.message) for letter in letters) <= 1_000
        assert max(len(letter.message) for letter in letters) == 100
        statistics = Node.of(a).statistics()
        assert statistics.undecodable_bytes <= 1_000
        assert statistics.bad_input.tells == 50
        assert await there.ask("still here") == "still here"


async def test_bad_input_is_logged_first_then_every_nth_with_the_count(
    cluster_here: ta.Cluster,
    autojump_clock: trio.testing.MockClock,
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.WARNING, logger="trio_actors")
    cluster = attrs.evolve(cluster_here, limits=ta.InputLimits(log_every=100))
    async with node_and_raw(cluster) as (_a, node, _echo, raw):
        for _ in range(250):
            raw.publish(
                node.subjects.to_node(node.name, node.incarnation, "raw"), b"\xc1 not msgpack"
            )
        await settle()
        lines = [r.getMessage() for r in caplog.records if "bad input" in r.getMessage()]
        assert len(lines) == 3  # (the 1st, the 100th, the 200th)
        assert "200 of this kind so far" in lines[-1]
        assert node.statistics().bad_input.messages == 250


def test_input_limits_say_what_is_wrong() -> None:
    with pytest.raises(ValueError, match="peers"):
        ta.InputLimits(peers=0)
    with pytest.raises(ValueError, match="undecodable_prefix"):
        ta.InputLimits(undecodable_prefix=-1)
    with pytest.raises(TypeError, match="limits"):
        ta.Cluster(limits=5)

"""Membership: the nodes a node knows to be up, the changes as they happen, a late
joiner that asks once, and the names of the whole cluster -- over the in-memory bus,
under the MockClock."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import attrs
import pytest
import trio
import trio.testing

import trio_actors as ta
from helpers import Echo
from trio_actors.remote import MemoryBus, MemoryTransport, Node

HEARTBEAT = 1.0
MISSED = 3


def cluster_on(bus: MemoryBus, **options: Any) -> ta.Cluster:
    return ta.Cluster(bus=bus, heartbeat=HEARTBEAT, heartbeats_missed=MISSED, **options)


@asynccontextmanager
async def node(cluster: ta.Cluster, name: str) -> AsyncIterator[ta.ActorSystem]:
    async with ta.open_actor_system(cluster=cluster, node=name) as system:
        yield system


def who(system: ta.ActorSystem) -> list[tuple[str, str]]:
    """The members ``system`` lists, as (name, incarnation), by name."""
    assert system.node is not None
    return sorted((m.name, m.incarnation) for m in system.node.members())


def me(system: ta.ActorSystem) -> tuple[str, str]:
    assert system.node is not None
    return (system.node.name, system.node.incarnation)


def events_of(events: ta.MembershipEvents) -> list[tuple[str, str, str]]:
    """What ``events`` holds now, as (kind, node, reason), without waiting."""
    found: list[tuple[str, str, str]] = []
    while True:
        try:
            event = events.receive_nowait()
        except (trio.WouldBlock, trio.EndOfChannel):
            return found
        reason: str = event.reason if isinstance(event, ta.MemberDown) else ""
        found.append((type(event).__name__, event.member.name, reason))


async def test_every_node_lists_every_member_and_itself(
    autojump_clock: trio.testing.MockClock,
) -> None:
    cluster = cluster_on(MemoryBus())
    async with node(cluster, "a") as a, node(cluster, "b") as b, node(cluster, "c") as c:
        assert who(a) == [me(a)]  # (itself, from its start)
        # (Three joined at once: a answered b's hello at once, c's at the end of the
        # announce_every window, 0.1 s.)
        await trio.sleep(HEARTBEAT / 5)
        everyone = sorted([me(a), me(b), me(c)])
        assert who(a) == who(b) == who(c) == everyone
        assert a.node is not None
        first = a.node.members()[0]
        assert (first.name, first.incarnation) == me(a)  # (oldest first: a opened first)
        assert first.since <= trio.current_time()
        await trio.sleep(10 * HEARTBEAT)  # (heartbeats change nothing)
        assert a.node.members()[0] == first
        assert who(a) == who(b) == who(c) == everyone


async def test_a_late_joiner_knows_the_members_before_one_heartbeat_has_passed(
    autojump_clock: trio.testing.MockClock,
) -> None:
    bus = MemoryBus()
    cluster = cluster_on(bus)
    async with node(cluster, "a") as a, node(cluster, "b") as b, bus_client(cluster) as raw:
        a.register("echo", a.spawn(Echo))
        await trio.sleep(10 * HEARTBEAT + HEARTBEAT / 2)  # (mid-way between two beats)
        beats: list[tuple[str, bytes]] = []
        raw.subscribe(f"ta.{cluster.name}.hb.*.*", lambda m: beats.append((m.subject, m.data)))
        async with node(cluster, "c") as c:
            await trio.sleep(HEARTBEAT / 10)
            assert who(c) == sorted([me(a), me(b), me(c)])
            assert c.node is not None
            assert set(c.node.registered()) == {"echo"}  # (the names came with them)
            # What was said meanwhile: c's hello, and one answer from each of a and
            # b -- their periodic beats are half a heartbeat away.
            said = sorted((subject.split(".")[3], data) for subject, data in beats)
            assert said == [("a", b""), ("b", b""), ("c", b"hello")]


async def test_a_hello_is_answered_at_once_by_every_node_with_one_heartbeat(
    autojump_clock: trio.testing.MockClock,
) -> None:
    bus = MemoryBus()
    cluster = cluster_on(bus)
    async with node(cluster, "a") as a, bus.connect("raw") as raw:
        beats: list[float] = []
        assert a.node is not None
        raw.subscribe(f"ta.{cluster.name}.hb.a.*", lambda _msg: beats.append(trio.current_time()))
        await trio.sleep(HEARTBEAT / 2)
        assert beats == [0.0]  # (its own hello)
        beats.clear()
        raw.publish(Node.of(a).subjects.heartbeat("newcomer", "0" * 12), b"hello")
        await trio.sleep(0.001)
        assert beats == [pytest.approx(HEARTBEAT / 2)]  # (answered now, not at its beat)


async def test_forged_hellos_cost_one_heartbeat_per_window_however_many_come(
    autojump_clock: trio.testing.MockClock,
) -> None:
    bus = MemoryBus()
    limits = ta.InputLimits(peers=100, announce_every=0.1)
    cluster = cluster_on(bus, limits=limits)
    async with node(cluster, "a") as a, bus.connect("raw") as raw:
        subjects = Node.of(a).subjects
        beats: list[float] = []
        raw.subscribe(subjects.heartbeat("a", "*"), lambda _msg: beats.append(trio.current_time()))
        await trio.sleep(HEARTBEAT / 4)
        beats.clear()  # (its own hello)
        start = trio.current_time()
        for forger in range(1_000):  # (900 more than the peer table holds)
            raw.publish(subjects.heartbeat(f"forger{forger}", "0" * 12), b"hello")
        await trio.sleep(0.001)
        assert len(beats) == 1  # (one answer now, ...)
        await trio.sleep(0.15)
        assert len(beats) == 2  # (... and one for all the others, at the window's end)
        assert beats[1] == pytest.approx(start + 0.1)
        bad = Node.of(a).statistics().bad_input
        assert bad.over_limit == 1_000 - (limits.peers - 1)  # (refused: never answered)
        # Refused hellos are not answered: a hello past the full table changes nothing.
        await trio.sleep(0.2)
        raw.publish(subjects.heartbeat("one-too-many", "0" * 12), b"hello")
        await trio.sleep(0.001)
        assert len(beats) == 2
        assert Node.of(a).statistics().bad_input.over_limit == bad.over_limit + 1
        # Not a hello: counted as a bad heartbeat, not answered.
        raw.publish(subjects.heartbeat("forger", "0" * 12), b"hello!")
        await trio.sleep(0.001)
        assert Node.of(a).statistics().bad_input.heartbeats == 1
        assert len(beats) == 2
        # Silent, the forgers are declared down and leave: a's members are itself.
        await trio.sleep(HEARTBEAT * (MISSED + 2))
        assert who(a) == [me(a)]


async def test_events_say_joined_left_and_down_with_the_reason_in_order(
    autojump_clock: trio.testing.MockClock,
) -> None:
    bus = MemoryBus()  # (advisories: a cut node is down at once)
    cluster = cluster_on(bus)
    async with node(cluster, "a") as a:
        assert a.node is not None
        with a.node.events() as events:
            async with node(cluster, "b"):
                await trio.sleep(HEARTBEAT / 10)
                assert events_of(events) == [("MemberJoined", "b", "")]
            await trio.sleep(HEARTBEAT / 10)
            assert events_of(events) == [("MemberLeft", "b", "")]
            async with node(cluster, "c") as c:
                await trio.sleep(HEARTBEAT / 10)
                bus.disconnect(Node.of(c).transport)  # type: ignore[arg-type]
                await trio.sleep(HEARTBEAT / 10)
                assert events_of(events) == [
                    ("MemberJoined", "c", ""),
                    ("MemberDown", "c", "advisory"),
                ]
            assert who(a) == [me(a)]
        assert events.closed
    assert events_of(events) == []


async def test_a_silent_member_is_down_for_silence_and_joins_again_when_heard(
    autojump_clock: trio.testing.MockClock,
) -> None:
    bus = MemoryBus(advisories=False)
    cluster = cluster_on(bus)
    async with node(cluster, "a") as a, node(cluster, "b") as b:
        assert a.node is not None
        await trio.sleep(HEARTBEAT / 10)
        events = a.node.events()
        before = a.node.members()
        beats_of_b = f".hb.b.{Node.of(b).incarnation}"
        with bus.losing(lambda subject, _payload: beats_of_b in subject):
            await trio.sleep(HEARTBEAT * (MISSED + 2))
            assert who(a) == [me(a)]
        await trio.sleep(2 * HEARTBEAT)
        assert who(a) == sorted([me(a), me(b)])
        assert events_of(events) == [("MemberDown", "b", "silence"), ("MemberJoined", "b", "")]
        back = {m.name: m for m in a.node.members()}["b"]
        earlier = {m.name: m for m in before}["b"]
        assert back.incarnation == earlier.incarnation  # (the same life: only declared down)
        assert back.since > earlier.since


async def test_a_follower_that_never_reads_drops_and_counts_and_the_node_goes_on(
    autojump_clock: trio.testing.MockClock,
) -> None:
    bus = MemoryBus()
    cluster = cluster_on(bus)
    async with node(cluster, "a") as a:
        assert a.node is not None
        stuck = a.node.events(capacity=2)
        for name in ("b", "c", "d"):
            async with node(cluster, name):
                await trio.sleep(HEARTBEAT / 10)
            await trio.sleep(HEARTBEAT / 10)
        assert stuck.dropped == 4  # (6 events: joined and left, 3 times; 2 held)
        assert events_of(stuck) == [("MemberJoined", "b", ""), ("MemberLeft", "b", "")]
        assert who(a) == [me(a)]
        assert "dropped=4" in repr(stuck)


async def test_the_events_end_when_the_node_leaves(
    autojump_clock: trio.testing.MockClock,
) -> None:
    cluster = cluster_on(MemoryBus())
    seen: list[str] = []
    async with trio.open_nursery() as nursery, node(cluster, "a") as a:
        assert a.node is not None
        events = a.node.events()

        async def follow() -> None:
            async for event in events:
                seen.append(f"{type(event).__name__} {event.member.name}")
            seen.append("ended")

        nursery.start_soon(follow)
        async with node(cluster, "b"):
            await trio.sleep(HEARTBEAT)
    assert seen == ["MemberJoined b", "MemberLeft b", "ended"]
    late = a.node.events()  # (the node has left: it ends at once)
    with pytest.raises(trio.EndOfChannel):
        await late.receive()


async def test_a_closed_subscription_is_offered_nothing(
    autojump_clock: trio.testing.MockClock,
) -> None:
    cluster = cluster_on(MemoryBus())
    async with node(cluster, "a") as a:
        assert a.node is not None
        events = a.node.events()
        events.close()
        events.close()  # (idempotent)
        async with node(cluster, "b"):
            await trio.sleep(HEARTBEAT / 10)
        assert events_of(events) == []
        assert events.dropped == 0


@pytest.mark.parametrize(
    ("capacity", "error"), [(0, ValueError), (-1, ValueError), (1.5, TypeError), (True, TypeError)]
)
async def test_a_bad_capacity_is_refused_naming_it(
    capacity: Any, error: type[Exception], autojump_clock: trio.testing.MockClock
) -> None:
    async with node(cluster_on(MemoryBus()), "a") as a:
        assert a.node is not None
        with pytest.raises(error, match=r"events\(capacity=...\)"):
            a.node.events(capacity=capacity)


def test_members_and_events_are_frozen_values() -> None:
    member = ta.Member("a", "0" * 12, 1.0)
    assert member == ta.Member("a", "0" * 12, 1.0)
    with pytest.raises(attrs.exceptions.FrozenInstanceError):
        member.name = "b"  # type: ignore[misc]
    down = ta.MemberDown(member, "silence")
    assert down == ta.MemberDown(member, "silence") != ta.MemberDown(member, "advisory")
    assert hash(ta.MemberJoined(member)) == hash(ta.MemberJoined(member))
    assert ta.MemberLeft(member) != ta.MemberJoined(member)  # type: ignore[comparison-overlap]


async def test_registered_across_the_cluster_lists_every_members_names(
    autojump_clock: trio.testing.MockClock,
) -> None:
    bus = MemoryBus()
    cluster = cluster_on(bus)
    async with node(cluster, "a") as a, node(cluster, "b") as b:
        assert a.node is not None
        assert b.node is not None
        a.register("here", a.spawn(Echo))
        b.register("there", b.spawn(Echo))
        await b.node.flush()
        await trio.sleep(HEARTBEAT / 10)
        names = a.node.registered()
        assert list(names) == ["here", "there"]
        assert names["here"] == a.registered()["here"]
        assert await names["there"].ask("hi") == "hi"  # (a ref that works)
        assert a.registered() == {"here": names["here"]}  # (the local form is unchanged)
        assert b.node.registered().keys() == names.keys()
        bus.disconnect(Node.of(b).transport)  # type: ignore[arg-type]
        await trio.sleep(HEARTBEAT / 10)
        assert list(a.node.registered()) == ["here"]  # (b is down: its names went with it)


async def test_a_peer_only_expected_is_no_member(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # A ref to a node never heard from (EXPECTED in the peer table) is not a member.
    cluster = cluster_on(MemoryBus(advisories=False))
    async with node(cluster, "a") as a:
        ref = Node.of(a).ref_from_wire("ghost", "0" * 12, "echo", 1)
        ref.tell("hi")
        assert who(a) == [me(a)]
        assert a.node is not None
        events = a.node.events()
        await trio.sleep(HEARTBEAT * (MISSED + 2))  # (declared down: it was never up)
        assert events_of(events) == []


async def test_since_is_when_it_entered_up_and_later_heartbeats_keep_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    cluster = cluster_on(MemoryBus())
    async with node(cluster, "a") as a, bus_client(cluster) as raw:
        assert a.node is not None
        subject = Node.of(a).subjects.heartbeat("p", "0" * 12)
        await trio.sleep(0.25)
        first = trio.current_time()
        raw.publish(subject, b"")
        await trio.sleep(0.5)
        raw.publish(subject, b"")
        await trio.sleep(0.001)
        found = {m.name: m for m in a.node.members()}
        assert found["p"] == ta.Member("p", "0" * 12, first)


@asynccontextmanager
async def bus_client(cluster: ta.Cluster) -> AsyncIterator[MemoryTransport]:
    assert isinstance(cluster.bus, MemoryBus)
    async with cluster.bus.connect("raw") as raw:
        yield raw


# --- over the in-memory bus and a real nats-server (tests/conftest.py) ---------------

SLOW_BEAT = 30.0  # (without hellos, a joiner would wait up to this for the others)


async def until(check: Any) -> None:
    """Wait until ``check()`` holds; the bound only detects a hang (ten seconds,
    a third of a heartbeat: a join seen only by heartbeats would not make it)."""
    with trio.fail_after(10):
        while True:
            if check():
                return
            await trio.sleep(0.01)


async def test_members_events_and_names_over_either_transport(
    cluster_here: ta.Cluster,
    clock: trio.testing.MockClock | None,
) -> None:
    cluster = attrs.evolve(cluster_here, heartbeat=SLOW_BEAT)
    async with node(cluster, "a") as a, node(cluster, "b") as b:
        assert a.node is not None
        await until(lambda: who(a) == who(b) == sorted([me(a), me(b)]))
        a.register("echo", a.spawn(Echo))
        await a.node.flush()
        with a.node.events() as events:
            async with node(cluster, "c") as c:
                assert c.node is not None
                everyone = sorted([me(a), me(b), me(c)])
                await until(lambda: who(a) == who(b) == who(c) == everyone)
                await until(lambda: "echo" in c.node.registered())
                assert await c.node.registered()["echo"].ask("hi") == "hi"
            await until(lambda: who(a) == sorted([me(a), me(b)]))
            seen = [await events.receive(), await events.receive()]
        assert [(type(e).__name__, e.member.name) for e in seen] == [
            ("MemberJoined", "c"),
            ("MemberLeft", "c"),
        ]


async def test_a_node_cut_off_lists_itself_down_too_and_joins_again_when_back(
    autojump_clock: trio.testing.MockClock,
) -> None:
    bus = MemoryBus(advisories=False)
    cluster = cluster_on(bus)
    async with node(cluster, "a") as a, node(cluster, "b") as b:
        assert a.node is not None
        await trio.sleep(HEARTBEAT / 5)
        events = a.node.events()
        transport = Node.of(a).transport
        assert isinstance(transport, MemoryTransport)
        with bus.between_connections(transport):  # (it hears nobody, itself included)
            await trio.sleep(HEARTBEAT * (MISSED + 2))
            assert who(a) == []
            assert who(b) == [me(b)]
        await trio.sleep(2 * HEARTBEAT)
        assert who(a) == who(b) == sorted([me(a), me(b)])
        seen = events_of(events)
        assert sorted(seen[:2]) == [("MemberDown", "a", "silence"), ("MemberDown", "b", "silence")]
        assert sorted(seen[2:]) == [("MemberJoined", "a", ""), ("MemberJoined", "b", "")]

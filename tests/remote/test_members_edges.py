"""Membership at its edges: leaving (no beat after the bye, a leaving node's own
followers), another thread, followers dropped or closed or many, a forged bye,
names across a false down -- over the in-memory bus, under the MockClock (beside
``test_members.py``)."""

from __future__ import annotations

import gc
from typing import Any

import pytest
import trio
import trio.testing
from test_members import HEARTBEAT, MISSED, cluster_on, events_of, me, node, who

import trio_actors as ta
from helpers import Echo
from trio_actors.remote import MemoryBus, MemoryTransport, Node


async def test_a_leaving_node_beats_no_more_after_its_bye(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # Its last flush may take a while (a slow server: up to two seconds); its beats
    # must not go on meanwhile, or the others hear it again after its bye.
    bus = MemoryBus(advisories=False)
    cluster = cluster_on(bus)
    async with node(cluster, "a") as a:
        assert a.node is not None
        await trio.sleep(HEARTBEAT / 10)
        with a.node.events() as events:
            async with node(cluster, "b") as b:
                transport = Node.of(b).transport
                assert isinstance(transport, MemoryTransport)

                async def slow_flush() -> None:
                    await trio.sleep(1.5 * HEARTBEAT)

                transport.flush = slow_flush  # type: ignore[method-assign]
                await trio.sleep(HEARTBEAT / 10)
            await trio.sleep(HEARTBEAT * (MISSED + 2))
            seen = events_of(events)
            assert seen == [("MemberJoined", "b", ""), ("MemberLeft", "b", "")]
            assert who(a) == [me(a)]


async def test_the_followers_of_a_leaving_node_end_without_an_event_of_its_own(
    autojump_clock: trio.testing.MockClock,
) -> None:
    cluster = cluster_on(MemoryBus())
    async with node(cluster, "a") as a:
        assert a.node is not None
        await trio.sleep(HEARTBEAT / 10)
        async with node(cluster, "b") as b:
            assert b.node is not None
            await trio.sleep(HEARTBEAT / 10)
            events = b.node.events()
        assert events_of(events) == []  # (no MemberLeft of itself: its stream just ends)
        assert events.closed


async def test_a_task_waiting_on_events_is_cancelled_cleanly(
    autojump_clock: trio.testing.MockClock,
) -> None:
    cluster = cluster_on(MemoryBus())
    async with node(cluster, "a") as a:
        assert a.node is not None
        events = a.node.events()
        with trio.move_on_after(HEARTBEAT):
            await events.receive()
        async with node(cluster, "b"):
            await trio.sleep(HEARTBEAT / 10)
        await trio.sleep(HEARTBEAT / 10)
        assert events_of(events) == [("MemberJoined", "b", ""), ("MemberLeft", "b", "")]


async def test_registered_from_another_thread_is_refused(
    autojump_clock: trio.testing.MockClock,
) -> None:
    cluster = cluster_on(MemoryBus())
    async with node(cluster, "a") as a:
        assert a.node is not None
        n = a.node
        for call in (n.members, n.events, n.registered):
            with pytest.raises(ta.ActorError, match="another thread"):
                await trio.to_thread.run_sync(call)


async def test_registered_drops_a_node_declared_down_and_lists_it_again_when_heard(
    autojump_clock: trio.testing.MockClock,
) -> None:
    bus = MemoryBus(advisories=False)
    cluster = cluster_on(bus)
    async with node(cluster, "a") as a, node(cluster, "b") as b:
        assert a.node is not None
        assert b.node is not None
        b.register("there", b.spawn(Echo))
        await b.node.flush()
        await trio.sleep(HEARTBEAT / 10)
        assert list(a.node.registered()) == ["there"]
        transport = Node.of(b).transport
        assert isinstance(transport, MemoryTransport)
        with bus.between_connections(transport):
            await trio.sleep(HEARTBEAT * (MISSED + 2))
            assert list(a.node.registered()) == []  # (b is down: no stale ref)
        await trio.sleep(2 * HEARTBEAT)
        names = a.node.registered()
        assert list(names) == ["there"]  # (met again: its names asked again)
        assert await names["there"].ask("hi") == "hi"


async def test_a_dropped_follower_is_not_kept_alive_by_the_node(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # A stream nobody holds any more (never closed) must not stay in the node with
    # up to ``capacity`` events forever: a handler that follows per request would
    # grow the node without bound.
    cluster = cluster_on(MemoryBus())
    async with node(cluster, "a") as a:
        assert a.node is not None
        for _ in range(100):
            a.node.events()  # (dropped at once, never closed)
        kept = a.node.events()
        gc.collect()
        alive = [o for o in gc.get_objects() if isinstance(o, ta.MembershipEvents)]
        assert alive == [kept]
        async with node(cluster, "b"):
            await trio.sleep(HEARTBEAT / 10)
        assert events_of(kept) == [("MemberJoined", "b", ""), ("MemberLeft", "b", "")]


@pytest.mark.parametrize("how", ["normally", "by an error"])
async def test_a_node_with_names_and_watches_leaves_once(
    how: str, autojump_clock: trio.testing.MockClock
) -> None:
    # What it says while leaving (releases of its names, the stops of actors the
    # others watch, answers) comes before its bye: nothing after it makes it a
    # member again.
    bus = MemoryBus(advisories=False)
    cluster = cluster_on(bus)
    async with node(cluster, "a") as a:
        assert a.node is not None
        await trio.sleep(HEARTBEAT / 10)
        a_echo = a.spawn(Echo)
        a.register("a-echo", a_echo)
        with a.node.events() as events:
            with _boom_expected(how == "by an error"):
                async with node(cluster, "b") as b:
                    assert b.node is not None
                    b.register("there", b.spawn(Echo))
                    await trio.sleep(HEARTBEAT / 10)
                    remote = b.node.registered()["a-echo"]
                    assert await remote.ask("hi") == "hi"
                    remote.tell("more")
                    if how == "by an error":
                        raise RuntimeError("boom")
            await trio.sleep(HEARTBEAT * (MISSED + 2))
            assert events_of(events) == [("MemberJoined", "b", ""), ("MemberLeft", "b", "")]
            assert who(a) == [me(a)]
            assert list(a.node.registered()) == ["a-echo"]


class _boom_expected:
    def __init__(self, expected: bool) -> None:
        self.expected = expected

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind: Any, error: BaseException | None, _tb: Any) -> bool:
        while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
            error = error.exceptions[0]
        assert (str(error) == "boom") == self.expected, error
        return self.expected


async def test_a_forged_bye_of_the_node_itself_is_refused(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # A node never hears its own bye (it stops hearing first): one that comes is
    # forged, and must not make the node list itself as having left.
    bus = MemoryBus()
    cluster = cluster_on(bus)
    async with node(cluster, "a") as a, bus.connect("raw") as raw:
        assert a.node is not None
        await trio.sleep(HEARTBEAT / 10)
        with a.node.events() as events:
            raw.publish(Node.of(a).subjects.heartbeat(*me(a)), b"bye")
            await trio.sleep(HEARTBEAT / 10)
            assert who(a) == [me(a)]
            assert events_of(events) == []
            assert Node.of(a).statistics().bad_input.forged == 1


async def test_closing_a_stream_ends_a_task_iterating_it_after_what_it_held(
    autojump_clock: trio.testing.MockClock,
) -> None:
    cluster = cluster_on(MemoryBus())
    async with node(cluster, "a") as a:
        assert a.node is not None
        many = [a.node.events(capacity=1) for _ in range(50)]
        events = a.node.events()
        seen: list[str] = []

        async def follow() -> None:
            async for event in events:
                seen.append(type(event).__name__)
            seen.append("ended")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(follow)
            async with node(cluster, "b"):
                await trio.sleep(HEARTBEAT / 10)
                events.close()  # (by its user, while a task waits on it)
            await trio.sleep(HEARTBEAT / 10)
        assert seen == ["MemberJoined", "ended"]
        with pytest.raises(trio.EndOfChannel):
            await events.receive()
        assert all(events_of(f) == [("MemberJoined", "b", "")] for f in many)
        assert all(f.dropped == 1 for f in many)  # (its MemberLeft: capacity 1)

"""Review of children on other nodes (``Actor.spawn_remote``, issue 32 item 3): a
reproducer of each defect found, over the in-memory bus under the MockClock.

- ``test_a_child_stopped_before_its_anchor_started_leaves_no_instance_running``: a
  child stopped before its anchor's ``on_start`` ran (stopped by its parent in the
  handler that spawned it) left its first instance running on the other node.
- ``test_a_resumed_child_that_cannot_get_a_fresh_instance_stops_with_the_error``:
  ``Resume`` decided for a node's death, with no node left to place the fresh
  instance on, left the child "running" with no instance for ever: its asks
  waited for ever, its tells were held without bound.
- ``test_tells_held_when_a_child_stops_draining_are_dead_letters``: tells held
  while there was no instance were lost silently (no dead letter) when the child
  stopped with ``drain=True``, and an ask waiting for an instance waited for ever.
- ``test_tells_held_for_a_bounded_child_meet_its_overflow_policy``: tells held
  while there was no instance grew without bound, whatever the child's
  ``mailbox=Bounded(...)`` (the spec: a tell never grows memory without bound; past
  the window, the target's overflow policy applies at the sender).
- ``test_when_its_node_leaves_the_cluster_a_restart_places_it_on_another``: an
  instance's node leaving in order (its system's exit: a deploy, a SIGTERM) stopped
  the instance as if it had stopped itself (``Terminated`` without an error), so
  the child -- ``transient`` by default -- stopped for good, with no failure for
  its parent's strategy to decide: a rolling restart of the cluster lost every
  child on other nodes.
- ``test_a_child_whose_node_did_not_answer_its_stop_in_time_is_stopped_there_later``:
  a child's stop whose instance's node was between two connections (its server
  died; back a moment later) ran out of the child's ``shutdown`` and gave up: the
  instance was left running there for good, supervised by nobody (its node never
  declared the parent's node down).
- ``test_its_statistics_count_the_tells_held_for_its_next_instance``: the tells
  held while there was no instance were in no count of ``statistics()``
  (``mailbox_depth`` 0 with any number held), nor was the bound they are held
  within.
- ``test_a_parent_node_wrongly_declared_down_fails_its_child_there``: the
  instance's node, having declared the parent's node down (its heartbeats lost),
  stopped the instance and dropped the parent's node's watch of it, so the anchor
  never heard of it when the parent's node was heard again: the child stayed
  "running" for ever, its asks raised ActorStopped, its tells were dead letters
  there, and its parent's strategy never decided (also
  ``test_a_parent_node_wrongly_declared_down_gets_a_fresh_instance_there``).
"""

from __future__ import annotations

from typing import Any, Literal

import attrs
import pytest
import trio
import trio.testing
from test_children import (
    CLUSTER_TYPES,
    Parent,
    Worker,
    cluster,
    eventually,
    live,
    parent_on_a,
    transport,
    without_an_instance,
)

import trio_actors as ta
from trio_actors.remote import MemoryBus, Node


class SpawnsThenStops(ta.Actor):
    """Spawns a child on b and stops it in the same handler."""

    async def receive(self, message: Any) -> Any:
        child = await self.spawn_remote(Worker, 0, on="b")
        child.stop_nowait()
        return child


async def test_a_child_stopped_before_its_anchor_started_leaves_no_instance_running(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with cluster(ta.Cluster(bus=MemoryBus()), "ab", "b") as n:
        a, b = n["a"], n["b"]
        parent = a.spawn(SpawnsThenStops)
        child = await parent.ask("go")
        await child.wait_stopped()
        await eventually(lambda: live(b) == 0)  # (its first instance was left running)


async def test_a_resumed_child_that_cannot_get_a_fresh_instance_stops_with_the_error(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with parent_on_a() as (bus, _a, b, parent):
        child = await parent.ask(("spawn", {"on": "b", "supervision": ta.Resume()}))
        bus.disconnect(transport(b))  # (no node left to place a fresh instance on)
        with trio.fail_after(60):  # (it waited for ever)
            terminated = await child.wait_stopped()
        assert isinstance(terminated.error, ta.NodeDown | ta.NotSpawnable)
        with pytest.raises(ta.ActorStopped):
            await child.ask("count")


async def test_tells_held_when_a_child_stops_draining_are_dead_letters(
    autojump_clock: trio.testing.MockClock,
) -> None:
    bus = MemoryBus()
    async with cluster(ta.Cluster(bus=bus), "abc", "bc") as n:
        a = n["a"]
        async with without_an_instance(bus, n) as (child, cell):
            for _ in range(3):
                child.tell("add")  # (held)
            async with trio.open_nursery() as nursery:
                asked: list[BaseException] = []
                nursery.start_soon(ask_into, child, asked)
                await trio.sleep(1)  # (the ask waits for an instance)
                await child.stop(drain=True)
        assert not cell.held
        assert a.statistics().dead_letters.stranded == 3  # (they were lost silently)
        assert isinstance(asked[0], ta.ActorStopped)  # (it waited for ever)


async def ask_into(child: ta.ActorRef, errors: list[BaseException]) -> None:
    with trio.fail_after(60):
        try:
            await child.ask("count")
        except ta.ActorError as error:
            errors.append(error)


@pytest.mark.parametrize("overflow", ["drop_new", "drop_old", "fail"])
async def test_tells_held_for_a_bounded_child_meet_its_overflow_policy(
    autojump_clock: trio.testing.MockClock, overflow: Literal["drop_new", "drop_old", "fail"]
) -> None:
    bus = MemoryBus()
    async with cluster(ta.Cluster(bus=bus), "abc", "bc") as n:
        a = n["a"]
        bound = ta.Bounded(2, overflow=overflow)
        async with without_an_instance(bus, n, mailbox=bound) as (child, cell):
            raised = 0
            for number in range(5):
                try:
                    child.tell(("n", number))
                except ta.MailboxFull:
                    raised += 1
            assert len(cell.held) == 2  # (all five were held)
            kept = [message[1] for message in cell.held]
        if overflow == "fail":
            assert (raised, kept) == (3, [0, 1])
        else:
            assert kept == ([0, 1] if overflow == "drop_new" else [3, 4])
            assert a.statistics().dead_letters.overflow == 3
        assert child.statistics().dead_letters.overflow == a.statistics().dead_letters.overflow


async def test_when_its_node_leaves_the_cluster_a_restart_places_it_on_another(
    autojump_clock: trio.testing.MockClock,
) -> None:
    base = attrs.evolve(ta.Cluster(bus=MemoryBus()), **CLUSTER_TYPES)
    spawns = attrs.evolve(base, spawnable=[Worker])
    async with (
        ta.open_actor_system(cluster=base, node="a") as a,
        ta.open_actor_system(cluster=spawns, node="c"),
    ):
        async with ta.open_actor_system(cluster=spawns, node="b"):
            await eventually(lambda: len(Node.of(a).members()) == 3)
            parent = a.spawn(Parent, [])
            child = await parent.ask(("spawn", {"on": ta.RoundRobin()}))
            assert await child.ask("where") == "b"
        # (b has left: its actors stopped with its system; a restart may try b once
        # more, as it leaves: that spawn's NodeDown is one more failure)
        with trio.fail_after(60):  # (it stopped for good, with no failure)
            assert await child.ask("where") == "c"
        assert child.statistics().failures >= 1
        assert child.statistics().state == "running"


async def test_a_child_whose_node_did_not_answer_its_stop_in_time_is_stopped_there_later(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with parent_on_a() as (bus, _a, b, parent):
        await parent.ask(("spawn", {"on": "b", "shutdown": 1}))
        assert live(b) == 1
        with bus.between_connections(transport(b)):  # (b's server died: it reconnects)
            await parent.stop()  # (the child's stop cut short by its shutdown timeout)
        await eventually(lambda: live(b) == 0)  # (left running, supervised by nobody)


async def test_its_statistics_count_the_tells_held_for_its_next_instance(
    autojump_clock: trio.testing.MockClock,
) -> None:
    bus = MemoryBus()
    async with cluster(ta.Cluster(bus=bus), "abc", "bc") as n:
        async with without_an_instance(bus, n, mailbox=ta.Bounded(10)) as (child, _cell):
            for _ in range(3):
                child.tell("add")  # (held)
            counts = child.statistics()
            assert (counts.mailbox_depth, counts.mailbox_capacity) == (3, 10)
        assert await child.ask("count") == 3
        assert child.statistics().mailbox_depth == 0


async def test_a_parent_node_wrongly_declared_down_fails_its_child_there(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with parent_on_a() as (bus, _a, b, parent):
        child = await parent.ask(("spawn", {"on": "b", "supervision": ta.Stop()}))
        with bus.losing(lambda subject, _: ".hb.a." in subject):  # (b hears no beat of a)
            await eventually(lambda: live(b) == 0)  # (b stopped a's instances)
        with trio.fail_after(60):  # (the child stayed running, its instance gone)
            terminated = await child.wait_stopped()
        assert isinstance(terminated.error, ta.NodeDown)  # (a failure: Stop decided)


async def test_a_parent_node_wrongly_declared_down_gets_a_fresh_instance_there(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with parent_on_a() as (bus, _a, b, parent):
        child = await parent.ask(("spawn", {"on": "b"}))  # (the default: Restart)
        child.tell("add")
        with bus.losing(lambda subject, _: ".hb.a." in subject):  # (b hears no beat of a)
            await eventually(lambda: child.statistics().failures == 1)
        await eventually(lambda: live(b) == 1)  # (a is heard again: a fresh instance)
        assert await child.ask("count") == 0
        assert child.statistics().restarts >= 1

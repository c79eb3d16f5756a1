"""The per-actor delivery state of a link across nodes stays bounded and exact
(``remote/_link.py``, ``remote/_taken_in.py``, ``remote/_confirm.py``): both sides
keep an actor's state only while tells to it are in flight, a stream begun again
after being dropped is acknowledged exactly, and a confirm round's answer names at
most ``MAX_NUMBERS`` actors however many the record touched. Over the in-memory
bus, under an autojumping MockClock."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from types import SimpleNamespace
from typing import Any

import msgspec
import trio
import trio.testing

import trio_actors as ta
from helpers import EVENTS, Blocker, Recorder, letters, link_of
from trio_actors.remote import MemoryBus, Node, _link
from trio_actors.remote._confirm import MAX_NUMBERS
from trio_actors.remote._taken_in import MARKS_PER_ACK
from trio_actors.remote._tracked import Inbound

HEARTBEAT = 0.5
MISSED = 3
TALLY = [0]  # (the tells the brief actors handled)


class Brief(ta.Actor):
    """Handles three tells, a millisecond each (counted in ``tally``), then stops."""

    def __init__(self, tally: list[int]) -> None:
        self.tally = tally
        self.left = 3

    async def receive(self, message: Any) -> None:
        await trio.sleep(0.001)
        self.tally[0] += 1
        self.left -= 1
        if not self.left:
            self.stop()


class Factory(ta.Actor):
    """Asked ``(n, kind)``: spawns ``n`` children (:class:`Brief`, or
    :class:`~helpers.Recorder`) and answers their refs."""

    def __init__(self, tally: list[int]) -> None:
        self.tally = tally

    def receive(self, message: tuple[int, str]) -> list[ta.ActorRef]:
        count, kind = message
        if kind == "brief":
            return [self.spawn(lambda: Brief(self.tally)) for _ in range(count)]
        return [self.spawn(Recorder) for _ in range(count)]


@asynccontextmanager
async def nodes(bus: MemoryBus) -> AsyncIterator[tuple[ta.ActorSystem, ta.ActorSystem, Any]]:
    """Nodes a (the sender) and b, and a's ref to a factory on b (its brief actors
    count the tells they handle in ``TALLY``)."""
    EVENTS.clear()
    TALLY[0] = 0
    cluster = ta.Cluster(bus=bus, heartbeat=HEARTBEAT, heartbeats_missed=MISSED)
    async with (
        ta.open_actor_system(cluster=cluster, node="b") as b,
        ta.open_actor_system(cluster=cluster, node="a") as a,
    ):
        b.register("factory", b.spawn(lambda: Factory(TALLY), name="factory"))
        await Node.of(b).flush()
        yield a, b, await a.lookup("factory")


def inbound_of(b: ta.ActorSystem) -> Inbound:
    """b's state of the record of a's tells (the only node that tells b)."""
    [inbound] = Node.of(b).tells.taken.records.values()
    return inbound


async def test_streams_are_freed_on_both_sides_after_many_short_lived_actors(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """10,000 actors, each told four times: three handled, then it stops (the
    fourth is a dead letter there). Neither side keeps anything of an actor once
    its tells have ended: at most one batch's actors at any time, none at the end,
    and every tell acknowledged."""
    async with nodes(MemoryBus()) as (a, b, factory), trio.open_nursery() as nursery:
        refs = await factory.ask((1000, "brief"))
        link = link_of(refs[0])
        peaks = [0, 0]  # (the most actors kept by a, by b: sampled every millisecond)

        async def sample() -> None:
            taken = Node.of(b).tells.taken
            while True:
                receiving = sum(len(inbound.streams) for inbound in taken.records.values())
                peaks[:] = max(peaks[0], len(link.streams)), max(peaks[1], receiving)
                await trio.sleep(0.001)

        nursery.start_soon(sample)
        for batch in range(10):
            if batch:
                refs = await factory.ask((1000, "brief"))
            for ref in refs:
                for n in range(4):
                    ref.tell(n)
            Node.of(a).tells.flush()
            assert len(link.streams) == 1000  # (in flight: every one of this batch)
            await trio.sleep(HEARTBEAT / 5)
        await trio.sleep(HEARTBEAT)
        nursery.cancel_scope.cancel()
        inbound = inbound_of(b)
        assert TALLY == [30_000]
        assert (link.told, link.acked, link.in_doubt, link.bounced) == (40_000, 40_000, 0, 0)
        assert (link.window, link.streams) == ({}, {})
        assert (inbound.streams, inbound.changed) == ({}, {})
        assert peaks[0] == 1000, peaks  # (one batch's actors at most, ever)
        assert 0 < peaks[1] <= 1000, peaks
        assert Node.of(a).unconfirmed == 0


async def test_a_stream_dropped_and_begun_again_is_acknowledged_exactly(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A tell to an actor whose stream both sides dropped, then more in separate
    messages -- the first of them handled while the others wait behind it -- then
    the receiver dies: what was handled is acknowledged, and exactly the tells
    that had not ended are given back in doubt. (Dropping a stream while runs of it
    are still pending -- the safety condition of ``Stream.advance`` switched off --
    acknowledges those, and this test fails: nothing in doubt.)"""
    bus = MemoryBus()
    async with nodes(bus) as (a, b, _factory):
        blocker = Blocker()
        b.register("blocker", b.spawn(lambda: blocker, name="blocker"))
        await Node.of(b).flush()
        there = await a.lookup("blocker")
        link = link_of(there)
        eid = there._cell.eid  # type: ignore[union-attr]  # (a remote cell's)
        there.tell("p1")
        await trio.sleep(HEARTBEAT / 5)
        assert blocker.seen == ["p1"]
        assert eid not in link.streams  # (dropped on both sides)
        assert eid not in inbound_of(b).streams
        assert (link.acked, link.in_window) == (1, 0)
        for told in (("block", 1), ("block", 2), "c1"):  # (one message each)
            there.tell(told)
            await trio.sleep(HEARTBEAT / 20)
        there.tell("c2")
        await trio.sleep(HEARTBEAT / 20)
        assert len(inbound_of(b).streams[eid].pending) == 4  # (four runs, one each)
        EVENTS.setdefault(1, trio.Event()).set()  # (the first ends; the rest wait)
        await trio.sleep(HEARTBEAT / 5)
        assert blocker.seen == ["p1", ("block", 1)]
        assert (link.acked, link.in_window) == (2, 3)
        assert list(link.streams[eid]) == sorted(link.streams[eid])  # (in order)
        bus.disconnect(Node.of(b).transport)  # type: ignore[arg-type]  # (as kill -9)
        await trio.sleep(HEARTBEAT * (MISSED + 2))
        assert sorted(map(str, letters(a, "in-doubt"))) == sorted(
            map(str, [("block", 2), "c1", "c2"])
        )
        assert Node.of(a).unconfirmed == 3
        assert (link.told, link.acked, link.in_doubt, link.bounced) == (5, 2, 3, 0)
        assert (link.window, link.streams) == ({}, {})


async def test_a_confirm_answer_names_at_most_max_numbers_actors_and_still_drains(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """3,000 actors told once each behind a blocked one, with every acknowledgement
    lost: only confirm rounds acknowledge them. Each round names the actors waited
    on longest, ``MAX_NUMBERS`` at most, and its answer holds as many marks and
    stays under 40 kB (an answer of every actor's count grew with the record, past
    NATS's 1 MiB ``max_payload`` at ~100,000 actors); round after round, every
    handled tell is acknowledged, and only the blocked one stays."""
    bus = MemoryBus()
    answers: list[tuple[int, int]] = []  # (bytes, marks) of each confirm answer to a

    def tap(subject: str, payload: bytes) -> bool:
        if f".r.a.{Node.of(a).incarnation}.b." in subject:
            try:
                _ok, raw = msgspec.msgpack.decode(payload, type=tuple[bool, msgspec.Raw])
                answer = msgspec.msgpack.decode(raw)
            except Exception:  # (another reply)
                return False
            if isinstance(answer, list) and len(answer) == 6:
                answers.append((len(payload), len(answer[5])))
        return f".a.b.{Node.of(b).incarnation}.a." in subject  # (every acknowledgement)

    async with nodes(bus) as (a, b, factory):
        blocker = b.spawn(Blocker, name="blocker")
        b.register("blocker", blocker)
        await Node.of(b).flush()
        stuck = await a.lookup("blocker")
        refs = await factory.ask((3000, "recorder"))
        link = link_of(stuck)
        with bus.losing(tap):
            stuck.tell(("block", 1))  # (the oldest: it holds the settled mark back)
            await trio.sleep(HEARTBEAT / 20)
            for ref in refs:
                ref.tell("x")
            await Node.of(a).flush()
            await trio.sleep(HEARTBEAT / 5)
            assert link.in_window == 3001  # (handled, but nothing acknowledged)
            await trio.sleep(HEARTBEAT * 8)
        assert answers, "no confirm round was answered"
        assert max(marks for _size, marks in answers) == MAX_NUMBERS
        assert max(size for size, _marks in answers) < 40_000, answers
        assert (link.in_window, link.acked, link.in_doubt) == (1, 3000, 0)
        assert list(link.streams) == [stuck._cell.eid]  # type: ignore[union-attr]
        assert len(inbound_of(b).streams) == 1  # (the blocked one's)
        EVENTS.setdefault(1, trio.Event()).set()
        await trio.sleep(HEARTBEAT)
        assert (link.in_window, link.acked, link.streams) == (0, 3001, {})
        assert Node.of(a).unconfirmed == 0


async def test_an_acknowledgement_carries_at_most_marks_per_ack_marks(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """5,000 actors told at once: their marks move together, and go in several
    acknowledgements of ``MARKS_PER_ACK`` at most (a peer refuses a longer one as
    bad input), every tell acknowledged."""
    bus = MemoryBus()
    sizes: list[tuple[int, int]] = []  # (bytes, marks) of each acknowledgement to a

    def tap(subject: str, payload: bytes) -> bool:
        if f".a.b.{Node.of(b).incarnation}.a." in subject:
            sizes.append((len(payload), len(msgspec.msgpack.decode(payload)[4])))
        return False

    async with nodes(bus) as (a, b, factory):
        refs = await factory.ask((5000, "recorder"))
        link = link_of(refs[0])
        with bus.losing(tap):
            for ref in refs:
                ref.tell("x")
            Node.of(a).tells.flush()
            await trio.sleep(HEARTBEAT / 5)
        assert max(marks for _size, marks in sizes) == MARKS_PER_ACK, sizes
        assert sum(marks for _size, marks in sizes) >= 5000
        assert max(size for size, _marks in sizes) < 80_000, sizes
        assert (link.in_window, link.acked, link.streams) == (0, 5000, {})
        assert Node.of(a).statistics().bad_input.total == 0


def test_a_stale_mark_never_acknowledges_a_run_sent_after_it() -> None:
    """The sender keeps no count: an actor's queue dropped and begun again is
    acknowledged by marks alone, and a mark or settled mark said before a run was
    sent -- overtaken, or repeated -- never acknowledges it."""
    cell: Any = SimpleNamespace(eid=7)
    link = _link.Link("1")
    link.sent(1, [(cell, "a", b"")], 0)
    assert link.acknowledged([], 0, [(7, 1)]) == ([1], [])
    assert (link.window, link.streams) == ({}, {})
    link.sent(2, [(cell, "b", b""), (cell, "c", b"")], 0)  # (sequence 2: begun again)
    assert link.acknowledged([], 1, [(7, 1)]) == ([], [])  # (stale: about message 1)
    assert list(link.streams[7]) == [2]
    assert link.in_window == 2
    link.sent(3, [(cell, "d", b"")], 0)
    assert link.acknowledged([], 0, [(7, 2)]) == ([2], [])
    assert link.acknowledged([], 3, [(7, 2)]) == ([3], [])  # (settled covers it)
    assert (link.acked, link.in_window, link.window, link.streams) == (4, 0, {}, {})


async def test_an_actor_that_stops_with_tells_pending_frees_its_stream_on_both_sides(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Two actors stop while tells from another node are pending there -- one in its
    mailbox, one (bounded, full) with ``send``\\ s waiting for room: their tells
    end as dead letters there, are acknowledged as such, and nothing of either actor
    is left on either node (a dead actor's stream lives as long as its stop takes)."""
    async with nodes(MemoryBus()) as (a, b, _factory):
        plain = b.spawn(Blocker, name="plain")
        bounded = b.spawn(Blocker, name="bounded", mailbox=ta.Bounded(1))
        b.register("plain", plain)
        b.register("bounded", bounded)
        await Node.of(b).flush()
        to_plain, to_bounded = await a.lookup("plain"), await a.lookup("bounded")
        link = link_of(to_plain)
        to_plain.tell(("block", 1))
        to_bounded.tell(("block", 1))
        await trio.sleep(HEARTBEAT / 20)
        for n in range(4):  # (a message each)
            to_plain.tell(n)
            await to_bounded.send(n)  # (one queued; then they wait for room there)
            await trio.sleep(HEARTBEAT / 20)
        inbound = inbound_of(b)
        assert (
            set(inbound.streams)
            == set(link.streams)
            == {
                to_plain._cell.eid,  # type: ignore[union-attr]
                to_bounded._cell.eid,  # type: ignore[union-attr]
            }
        )
        await plain.stop()
        await bounded.stop()
        await trio.sleep(HEARTBEAT / 5)
        assert (inbound.streams, inbound.changed) == ({}, {})
        assert (link.window, link.streams, link.in_window) == ({}, {}, 0)
        assert (link.told, link.acked, link.in_doubt) == (10, 10, 0)
        assert Node.of(a).unconfirmed == 0

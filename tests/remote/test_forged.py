"""Only a node speaks for itself: messages whose subject and content disagree are
dropped and counted (bad input of kind ``forged``), never acted on. Over the in-memory bus, an
intruder's raw connection publishes what a node with credentials could: on a
server with the permissions of ``trio-actors secure`` it may publish only on
subjects carrying its own name (``tests/remote/test_secure.py`` checks the
server's side), so these are the forgeries left to it."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import msgspec
import pytest
import trio
import trio.testing

import trio_actors as ta
from trio_actors.nats import Msg
from trio_actors.remote import MemoryBus, MemoryTransport, Node
from trio_actors.remote._bad_input import Bad
from trio_actors.remote._frames import Frames
from trio_actors.remote._names import CLAIM
from trio_actors.remote._subjects import ASK, CONFIRM, TELL, Subjects, encode

HEARTBEAT = 0.5


class Counter(ta.Actor):
    def __init__(self) -> None:
        self.handled: list[Any] = []

    async def receive(self, message: Any) -> Any:
        if message == "handled":
            return list(self.handled)
        if message == ("sleep",):
            await trio.sleep(100)
        self.handled.append(message)
        return message


@asynccontextmanager
async def cluster(
    bus: MemoryBus,
) -> AsyncIterator[tuple[Node, Node, ta.ActorRef, MemoryTransport]]:
    """Nodes a and b, a's ``counter``, and an intruder's raw connection ``x``."""
    config = ta.Cluster(bus=bus, heartbeat=HEARTBEAT)
    async with (
        ta.open_actor_system(cluster=config, node="a") as a,
        ta.open_actor_system(cluster=config, node="b") as b,
        bus.connect("x") as intruder,
    ):
        counter = a.spawn(Counter, name="counter")
        a.register("counter", counter)
        await Node.of(a).flush()
        await b.lookup("counter")  # (b has met a)
        yield Node.of(a), Node.of(b), counter, intruder


def envelope(kind: int, number: int, path: str, body: Any) -> bytes:
    return encode((kind, number, path, msgspec.Raw(encode(body))))


async def test_a_request_answered_only_on_its_senders_own_reply_subjects(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """x asks a's actor with b's reply subject (to have a answer into b's pending
    request), and tells it with b's no-responders subject (to have a acknowledge
    tells to b): dropped, counted, never handled; b's own asks still work."""
    async with cluster(MemoryBus()) as (a, b, counter, x):
        _node, _incarnation, path, number, _overflow = a.ref_to_wire(counter)
        to_a = a.subjects.to_node(a.name, a.incarnation, "x")
        got: list[bytes] = []
        b_replies = b.subjects.replies(b.name, b.incarnation)
        x.subscribe(f"{b_replies}.>", lambda m: got.append(m.data))
        b_reply = f"{b_replies}.a.1"
        x.publish(to_a, envelope(ASK, number, path, "forged"), reply=b_reply)
        tells = encode((TELL, 0, "", (0, [(number, path, msgspec.Raw(encode("forged tell")))])))
        x.publish(to_a, tells, reply=f"{b.subjects.unreachable(b.name, b.incarnation)}.1")
        # The same pretending to be b: the subject is b's, the reply another's.
        as_b = a.subjects.to_node(a.name, a.incarnation, "b")
        x_reply = f"{a.subjects.replies('x', '1')}.a.1"
        x.publish(as_b, envelope(ASK, number, path, "forged as b"), reply=x_reply)
        await trio.sleep(HEARTBEAT)
        assert a.bad_input.counts["forged"] == 3
        assert got == []
        assert await counter.ask("handled") == []
        assert a.tells.taken.records == {}
        remote = await b.system.lookup("counter")
        assert await remote.ask("from b") == "from b"  # (a real one goes on)


async def test_a_node_claims_and_releases_its_own_names_only(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """x claims a name in b's name (so that b looks like its holder to a): dropped.
    x's claim in its own name is taken (any node may hold any name)."""
    async with cluster(MemoryBus()) as (a, b, _counter, x):
        claim = encode((CLAIM, "job", b.name, b.incarnation, "system/job", 7, 0))
        x.publish(a.subjects.names("x", "1"), claim)
        x.publish(a.subjects.names("x", "1"), encode((CLAIM, "own", "x", "1", "system/own", 8, 0)))
        await trio.sleep(HEARTBEAT / 10)
        assert a.bad_input.counts["forged"] == 1
        assert "job" not in a.names.held
        assert a.names.held["own"] == ("x", "1", "system/own", 8, 0)


async def test_a_lookup_is_answered_to_its_sender_only(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with cluster(MemoryBus()) as (a, b, _counter, x):
        got: list[bytes] = []
        b_replies = b.subjects.replies(b.name, b.incarnation)
        x.subscribe(f"{b_replies}.>", lambda m: got.append(m.data))
        b_reply = f"{b_replies}.-.99"
        x.publish(a.subjects.lookup("counter", "x"), b"", reply=b_reply)
        await trio.sleep(HEARTBEAT / 10)
        assert a.bad_input.counts["forged"] == 1
        assert got == []


async def test_a_stop_is_reported_by_the_watched_node_only(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """b watches a's actor; x reports its stop on b's termination subject in its
    own name: dropped. a's own report ends the watch."""
    async with cluster(MemoryBus()) as (_a, b, counter, x):
        remote = await b.system.lookup("counter")
        waiting: list[ta.Terminated] = []

        async def wait() -> None:
            waiting.append(await remote.wait_stopped())

        async with trio.open_nursery() as nursery:
            nursery.start_soon(wait)
            await trio.sleep(HEARTBEAT / 10)
            (watch,) = b.watches.watching.values()
            forged = f"{b.subjects.terminations(b.name, b.incarnation, 'x')}.{watch.number}"
            x.publish(forged, encode(None))
            await trio.sleep(HEARTBEAT)
            assert b.bad_input.counts["forged"] == 1
            assert waiting == []
            await counter.stop()
        assert [notice.error for notice in waiting] == [None]


async def test_a_confirm_naming_another_node_is_not_answered(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with cluster(MemoryBus()) as (a, b, _counter, x):
        got: list[bytes] = []
        x_replies = a.subjects.replies("x", "1")
        x.subscribe(f"{x_replies}.>", lambda m: got.append(m.data))
        question = encode(
            (CONFIRM, 0, "", msgspec.Raw(encode((b.name, b.incarnation, [], [], "", 0, []))))
        )
        x.publish(
            a.subjects.to_node(a.name, a.incarnation, "x"), question, reply=f"{x_replies}.a.1"
        )
        await trio.sleep(HEARTBEAT / 10)
        assert a.bad_input.counts["forged"] == 1
        assert got == []


def test_an_advisory_counts_from_the_nodes_own_user_only() -> None:
    """A connection's name is the client's choice: where each node authenticates
    as a user named after it, a disconnect advisory says a node died only if the
    connection was that node's user."""

    def advisory(name: str, user: str) -> Msg:
        data = json.dumps({"client": {"name": name, "user": user}}).encode()
        return Msg("$SYS.ACCOUNT.NODES.DISCONNECT", 1, None, data)

    by_user = Frames("c", Subjects("c"), "a", by_user=True)
    open_server = Frames("c", Subjects("c"), "a", by_user=False)
    mine = advisory("ta.c.b.1234", "b")
    forged = advisory("ta.c.b.1234", "x")
    assert by_user.advisory(mine) == ("b", "1234")
    refused = by_user.advisory(forged)
    assert isinstance(refused, Bad)
    assert refused.kind == "forged"
    assert open_server.advisory(forged) == ("b", "1234")  # (an open server: trusted)


async def test_a_lookup_answered_with_a_ref_of_no_known_overflow_policy_is_bad_input(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A ref's fifth field is its mailbox's overflow policy, 0 to 3: a forger's
    answer with 9 is bad input (counted), and the lookup goes on waiting -- here,
    nobody else answers: ActorNotFound at its bound, never a ValueError."""
    bus = MemoryBus()
    async with cluster(bus) as (a, _b, _counter, x):
        lookups = f"{a.subjects.prefix}.name.{b'f'.hex()}.*"

        def answer(message: Any) -> None:
            start, _dash, number = message.reply.rpartition(".-.")
            ref = msgspec.msgpack.encode(("x", "1", "system/f", 1, 9))
            x.publish(f"{start}.x.{number}", encode((True, msgspec.Raw(ref))))

        x.subscribe(lookups, answer)
        with pytest.raises(ta.ActorNotFound, match="no node answered"):
            await a.lookup("f")
        assert a.bad_input.counts["replies"] >= 1


async def test_refs_to_one_remote_actor_are_one_cell_whatever_their_fifth_field(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with cluster(MemoryBus()) as (a, b, counter, _x):
        wire = a.ref_to_wire(counter)
        first = b.ref_from_wire(*wire[:4], 0)
        second = b.ref_from_wire(*wire[:4], 2)
        assert first == second
        assert first._cell is second._cell

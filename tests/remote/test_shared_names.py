"""Names served by many actors across nodes (``remote/_groups.py``): registering a
name shared, the group's ref, where its messages go and how each ends -- over the
in-memory bus (its queue groups), under the MockClock."""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import attrs
import msgspec
import pytest
import trio
import trio.testing

import trio_actors as ta
from helpers import Echo
from trio_actors.nats import Headers
from trio_actors.remote import MemoryBus, Node, _group_sends, _groups, _refused, _subjects

HEARTBEAT = 1.0
MISSED = 3


def cluster_on(bus: MemoryBus, **options: Any) -> ta.Cluster:
    return ta.Cluster(bus=bus, heartbeat=HEARTBEAT, heartbeats_missed=MISSED, **options)


@asynccontextmanager
async def node(cluster: ta.Cluster, name: str) -> AsyncIterator[ta.ActorSystem]:
    async with ta.open_actor_system(cluster=cluster, node=name) as system:
        yield system


class Where(ta.Actor):
    """Answers with its node's name and its own name, and keeps what it is told."""

    def __init__(self) -> None:
        self.told: list[Any] = []

    def receive(self, message: Any) -> Any:
        if isinstance(message, tuple) and message[0] == "tell":
            self.told.append(message[1])
            return None
        if message == "told":
            return list(self.told)
        node = self.system.node
        assert node is not None
        return (node.name, self.ref.name)


class Slow(ta.Actor):
    """Takes ``seconds`` of trio time per ask, then answers its node's name."""

    async def receive(self, message: Any) -> Any:
        await trio.sleep(message)
        node = self.system.node
        assert node is not None
        return node.name


async def test_asks_to_a_shared_name_spread_over_its_members_on_every_node(
    autojump_clock: trio.testing.MockClock,
) -> None:
    cluster = cluster_on(MemoryBus())
    async with node(cluster, "a") as a, node(cluster, "b") as b, node(cluster, "c") as c:
        for system in (a, b):
            for index in range(2):
                system.register("work", system.spawn(Where, name=f"w{index}"), shared=True)
        await trio.sleep(HEARTBEAT / 5)
        group = await c.lookup("work")
        assert group.name == "work"
        assert group.path == "shared:work"
        seen = Counter([await group.ask("where") for _ in range(400)])
        assert set(seen) == {("a", "w0"), ("a", "w1"), ("b", "w0"), ("b", "w1")}
        assert min(seen.values()) > 50  # (the server's choice: each gets some)
        # The same from a node that serves the name itself (its own members too).
        seen_from_a = Counter([await (await a.lookup("work")).ask("where") for _ in range(200)])
        assert {where[0] for where in seen_from_a} == {"a", "b"}


@asynccontextmanager
async def a_member_on_a_and_b(
    bus: MemoryBus,
) -> AsyncIterator[tuple[ta.ActorSystem, list[ta.ActorRef], ta.ActorRef]]:
    """Nodes a, b and c; a member of ``"work"`` on a and on b; c's ref to the group.
    Yields c, the members, and the group."""
    cluster = cluster_on(bus)
    async with node(cluster, "a") as a, node(cluster, "b") as b, node(cluster, "c") as c:
        members = [a.spawn(Where), b.spawn(Where)]
        a.register("work", members[0], shared=True)
        b.register("work", members[1], shared=True)
        await trio.sleep(HEARTBEAT / 5)
        yield c, members, await c.lookup("work")


async def test_a_tell_to_a_shared_name_reaches_one_member_and_is_known_to_have_ended(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async with a_member_on_a_and_b(MemoryBus()) as (c, members, group):
        for number in range(100):
            group.tell(("tell", number))
        groups = Node.of(c).groups
        assert groups.in_flight == 100
        await trio.sleep(HEARTBEAT / 5)
        assert groups.in_flight == 0  # (every one ended there, and said so)
        told = [*(await members[0].ask("told")), *(await members[1].ask("told"))]
        assert sorted(told) == list(range(100))  # (each once, to one member)
        assert c.dead_letters.count == 0
        assert Node.of(c).unconfirmed == 0
        assert Node.of(c).requests.waiting == {}


class _CountsShared(MemoryBus):
    """Keeps, for each message of tells to a shared name, the tells' bodies; and
    for each answer saying which of them ended, their indices."""

    def __init__(self) -> None:
        super().__init__()
        self.messages: list[list[bytes]] = []
        self.ends: dict[str, list[int]] = {}  # (by the subject they were said on)
        self.answers = 0  # (those saying which ended)

    def _route(
        self, subject: str, payload: bytes, reply: str | None, headers: Headers | None = None
    ) -> None:
        if ".r." in subject:
            ok, body = msgspec.msgpack.decode(payload, type=tuple[bool, msgspec.Raw])
            said = msgspec.msgpack.decode(body)
            if ok and isinstance(said, list) and all(type(i) is int for i in said):
                self.ends.setdefault(subject, []).extend(said)
                self.answers += 1
        if ".shared." in subject:
            kind, body = msgspec.msgpack.decode(payload, type=tuple[int, msgspec.Raw])
            if kind in (_subjects.TELL, _subjects.SENDS):
                raws = msgspec.msgpack.decode(body, type=list[msgspec.Raw])
                self.messages.append([bytes(raw) for raw in raws])
        super()._route(subject, payload, reply, headers)


async def test_a_burst_to_a_shared_name_leaves_in_messages_of_sixteen_each_to_one_member(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Tells to a shared name coalesce as tells to a node do: the first leaves at
    once, the rest at the connection writer's turn, in messages of
    ``TELLS_PER_MESSAGE`` at most -- and the server gives each message to one
    member, so a burst spreads over the members message by message."""
    bus = _CountsShared()
    async with a_member_on_a_and_b(bus) as (c, members, group):
        for number in range(100):
            group.tell(("tell", number))
        await trio.sleep(HEARTBEAT / 5)
        most = _group_sends.TELLS_PER_MESSAGE
        decode = Node.of(c).codec.decode
        messages = [[decode(body)[1] for body in bodies] for bodies in bus.messages]
        assert [len(message) for message in messages] == [1] + [most] * 6 + [3]
        assert [n for message in messages for n in message] == list(range(100))
        told = [await member.ask("told") for member in members]
        for message in messages:  # (each message's tells: one member's, one after another)
            (taker,) = [each for each in told if message[0] in each]
            start = taker.index(message[0])
            assert taker[start : start + len(message)] == message
        assert sorted(n for each in told for n in each) == list(range(100))
        assert Node.of(c).groups.in_flight == 0
        assert (c.dead_letters.count, Node.of(c).unconfirmed) == (0, 0)
        # The ends are said together too: at once for the first of a turn, the rest
        # at the taker's writer's next turn -- each once.
        every = sorted(sorted(indices) for indices in bus.ends.values())
        assert every == sorted(list(range(len(message))) for message in messages)
        assert bus.answers <= 2 * len(messages)


async def test_messages_from_one_sender_to_one_member_keep_their_order(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """No order holds across members; from one sender, each member sees its
    messages in the order they were sent."""
    cluster = cluster_on(MemoryBus())
    async with node(cluster, "a") as a, node(cluster, "b") as b, node(cluster, "c") as c:
        members = [a.spawn(Where), a.spawn(Where), b.spawn(Where)]
        a.register("work", members[0], shared=True)
        a.register("work", members[1], shared=True)
        b.register("work", members[2], shared=True)
        await trio.sleep(HEARTBEAT / 5)
        group = await c.lookup("work")
        for number in range(300):
            group.tell(("tell", number))
        await trio.sleep(HEARTBEAT / 5)
        each = [await member.ask("told") for member in members]
        assert all(len(told) > 30 for told in each)  # (spread)
        assert all(told == sorted(told) for told in each)  # (in order per member)
        assert sorted(n for told in each for n in told) == list(range(300))


async def test_a_shared_name_with_no_member_is_not_found_and_its_tell_a_dead_letter(
    autojump_clock: trio.testing.MockClock,
) -> None:
    cluster = cluster_on(MemoryBus())
    async with node(cluster, "a") as a, node(cluster, "b") as b:
        member = a.spawn(Where)
        a.register("work", member, shared=True)
        await trio.sleep(HEARTBEAT / 5)
        group = await b.lookup("work")
        a.unregister("work", member)
        await trio.sleep(HEARTBEAT / 5)
        with pytest.raises(ta.ActorNotFound, match="work"):
            await group.ask("where")
        group.tell(("tell", 1))
        await trio.sleep(HEARTBEAT / 5)
        assert [(d.message, d.reason) for d in b.dead_letters.recent] == [
            (("tell", 1), "unreachable")
        ]
        with pytest.raises(ta.ActorNotFound):
            await b.lookup("work")  # (nobody serves it: not shared any more)
        assert b.node is not None
        assert "work" not in b.node.registered()


async def test_a_name_is_shared_or_single_never_both_and_the_error_names_the_node(
    autojump_clock: trio.testing.MockClock,
) -> None:
    cluster = cluster_on(MemoryBus())
    async with node(cluster, "a") as a, node(cluster, "b") as b:
        a.register("shared", a.spawn(Echo), shared=True)
        a.register("single", a.spawn(Echo))
        await trio.sleep(HEARTBEAT / 5)
        with pytest.raises(ValueError, match="shared name on node 'a'"):
            b.register("shared", b.spawn(Echo))
        with pytest.raises(ValueError, match="holds it alone on node 'a'"):
            b.register("single", b.spawn(Echo), shared=True)
        with pytest.raises(ValueError, match="shared or single"):
            a.register("shared", a.spawn(Echo))  # (here too)
        with pytest.raises(ValueError, match="shared or single"):
            a.register("single", a.spawn(Echo), shared=True)
        b.register("shared", b.spawn(Echo), shared=True)  # (one more member: fine)
        assert b.node is not None
        registered = b.node.registered()
        assert set(registered) == {"shared", "single"}
        assert registered["shared"] == await b.lookup("shared")  # (one group ref)


async def test_shared_needs_a_node() -> None:
    async with ta.open_actor_system() as system:
        with pytest.raises(ValueError, match="not a node"):
            system.register("work", system.spawn(Echo), shared=True)


async def test_a_group_ref_cannot_be_stopped_or_watched_and_crosses_in_messages(
    autojump_clock: trio.testing.MockClock,
) -> None:
    cluster = cluster_on(MemoryBus())
    async with node(cluster, "a") as a, node(cluster, "b") as b:
        a.register("work", a.spawn(Where), shared=True)
        echo = b.spawn(Echo)
        b.register("echo", echo)
        await trio.sleep(HEARTBEAT / 5)
        group = await a.lookup("work")
        with pytest.raises(ta.ActorError, match="stop its members"):
            await group.stop()
        with pytest.raises(ta.ActorError, match="stop its members"):
            group.stop_nowait()
        remote_echo = await a.lookup("echo")
        back = await remote_echo.ask(["a group", group])  # (there and back again)
        assert back == ["a group", group]
        assert (await back[1].ask("where"))[0] == "a"


async def test_a_member_leaves_when_its_actor_stops(
    autojump_clock: trio.testing.MockClock,
) -> None:
    cluster = cluster_on(MemoryBus())
    async with node(cluster, "a") as a, node(cluster, "b") as b:
        first, second = a.spawn(Where, name="first"), a.spawn(Where, name="second")
        a.register("work", first, shared=True)
        a.register("work", second, shared=True)
        await trio.sleep(HEARTBEAT / 5)
        group = await b.lookup("work")
        await first.stop()
        answers = {await group.ask("where") for _ in range(50)}
        assert answers == {("a", "second")}


class Keeper(ta.Actor):
    """Keeps what it handles (after ``seconds`` of trio time each); ``"seen"``
    answers with the list."""

    def __init__(self, seconds: float = 0.0, seen: list[Any] | None = None) -> None:
        self.seconds = seconds
        self.seen: list[Any] = [] if seen is None else seen

    async def receive(self, message: Any) -> Any:
        if message == "seen":
            return list(self.seen)
        await trio.sleep(self.seconds)
        self.seen.append(message)
        node = self.system.node
        assert node is not None
        return (node.name, self.ref.name)


async def test_asks_a_dead_node_took_end_with_node_down_and_its_tells_come_back_in_doubt(
    autojump_clock: trio.testing.MockClock,
) -> None:
    bus = MemoryBus()
    cluster = cluster_on(bus)
    async with node(cluster, "a") as a, node(cluster, "b") as b, node(cluster, "c") as c:
        seen_there: dict[str, list[Any]] = {"a": [], "b": []}
        keepers = {
            name: system.spawn(Keeper, 0.1, seen_there[name])
            for name, system in [("a", a), ("b", b)]
        }
        a.register("work", keepers["a"], shared=True)
        b.register("work", keepers["b"], shared=True)
        await trio.sleep(HEARTBEAT / 5)
        group = await c.lookup("work")
        ended: list[str] = []

        async def ask(number: int) -> None:
            try:
                ended.append((await group.ask(("asked", number)))[0])
            except ta.NodeDown as error:
                ended.append("NodeDown" if "shared:work (taken by b:" in str(error) else "?")

        async with trio.open_nursery() as nursery:
            for number in range(20):
                group.tell(("told", number))
                nursery.start_soon(ask, number)
            await trio.sleep(0.35)  # (each node has handled about three)
            seen_by_b = list(seen_there["b"])  # (what b handled before it died)
            bus.disconnect(Node.of(b).transport)  # type: ignore[arg-type]
        assert len(ended) == 20
        assert ended.count("NodeDown") >= 1, Counter(ended)
        assert "a" in ended
        seen_by_a = seen_there["a"]
        in_doubt = [d.message for d in c.dead_letters.recent if d.reason == "in-doubt"]
        assert in_doubt
        assert all(message[0] == "told" for message in in_doubt)
        assert Node.of(c).unconfirmed == len(in_doubt)
        told_handled = [m for m in [*seen_by_a, *seen_by_b] if m[0] == "told"]
        assert sorted(n for _, n in told_handled + in_doubt) == list(range(20))  # (exactly)
        assert Node.of(c).groups.in_flight == 0
        assert Node.of(c).requests.waiting == {}


class _StopsAfterRouting(MemoryBus):
    """Begins the stop of ``victim`` just after a message to a shared name was
    routed: the server chose its member before it left."""

    victim: ta.ActorRef | None = None

    def _route(
        self, subject: str, payload: bytes, reply: str | None, headers: Headers | None = None
    ) -> None:
        super()._route(subject, payload, reply, headers)
        if ".shared." in subject and self.victim is not None:
            self.victim.stop_nowait()
            self.victim = None


async def test_a_message_to_a_member_that_began_to_stop_goes_to_another_member_here(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    bus = _StopsAfterRouting()
    cluster = cluster_on(bus)
    passed_on = 0
    take = _groups.Groups._take

    def counting(self: Any, name: str, chosen: Any, *args: Any) -> None:
        nonlocal passed_on
        passed_on += not chosen.accepting
        take(self, name, chosen, *args)

    monkeypatch.setattr(_groups.Groups, "_take", counting)
    async with node(cluster, "a") as a, node(cluster, "c") as c:
        for round_ in range(10):
            first, second = a.spawn(Keeper, name=f"x{round_}"), a.spawn(Keeper, name=f"y{round_}")
            a.register("work", first, shared=True)
            a.register("work", second, shared=True)
            await trio.sleep(HEARTBEAT / 5)
            group = await c.lookup("work")
            bus.victim = first
            assert await group.ask("where") == ("a", f"y{round_}")
            group.tell("told")
            await trio.sleep(HEARTBEAT / 5)
            assert await second.ask("seen") == ["where", "told"]
            await second.stop()
        assert passed_on >= 2  # (the server chose the one stopping, and it was passed on)
        assert c.dead_letters.count == 0


async def test_a_member_that_began_to_stop_with_none_beside_it_is_not_served_and_sent_again(
    autojump_clock: trio.testing.MockClock,
) -> None:
    bus = _StopsAfterRouting()
    cluster = cluster_on(bus)
    async with node(cluster, "a") as a, node(cluster, "b") as b, node(cluster, "c") as c:
        for round_ in range(6):
            here, there = a.spawn(Keeper), b.spawn(Keeper)
            a.register("work", here, shared=True)
            b.register("work", there, shared=True)
            await trio.sleep(HEARTBEAT / 5)
            group = await c.lookup("work")
            bus.victim = here  # (if the server chose a, a says "not served here")
            assert (await group.ask(round_))[0] == "b"
            await there.stop()
        # With no member left anywhere, a message sent again finds none: not found.
        only = a.spawn(Keeper)
        a.register("work", only, shared=True)
        await trio.sleep(HEARTBEAT / 5)
        bus.victim = only
        with pytest.raises(ta.ActorNotFound):
            await group.ask("where")


async def test_an_ask_cancelled_before_or_after_it_was_taken_is_withdrawn_there(
    autojump_clock: trio.testing.MockClock,
) -> None:
    cluster = cluster_on(MemoryBus())
    async with node(cluster, "a") as a, node(cluster, "c") as c:
        member = a.spawn(Keeper, 1.0)
        a.register("work", member, shared=True)
        await trio.sleep(HEARTBEAT / 5)
        group = await c.lookup("work")
        group.tell("busy")  # (the member works on it for a second)
        with trio.move_on_after(0):  # (cancelled before any answer: not taken yet)
            await group.ask("before")
        with trio.move_on_after(0.5):  # (cancelled once taken, while it waits there)
            await group.ask("after")
        await trio.sleep(3 * HEARTBEAT)
        assert await member.ask("seen") == ["busy"]  # (neither was handled)
        assert Node.of(a).answers.owed == {}
        assert Node.of(c).requests.waiting == {}
        assert Node.of(c).groups.untaken == {}


async def test_a_message_whose_taker_is_never_heard_ends_after_the_bound(
    autojump_clock: trio.testing.MockClock,
) -> None:
    bus = MemoryBus()
    cluster = cluster_on(bus)
    async with node(cluster, "a") as a, node(cluster, "c") as c:
        a.register("work", a.spawn(Keeper), shared=True)
        await trio.sleep(HEARTBEAT / 5)
        group = await c.lookup("work")
        start = trio.current_time()
        with bus.losing(lambda subject, payload: subject.startswith("ta.trio-actors.r.c.")):
            with pytest.raises(ta.ConnectionInterrupted, match="no member of shared name"):
                await group.ask("lost")
            assert HEARTBEAT * MISSED <= trio.current_time() - start <= HEARTBEAT * (MISSED + 1)
            group.tell("lost too")
            await trio.sleep(HEARTBEAT * (MISSED + 1))
        assert [(d.message, d.reason) for d in c.dead_letters.recent] == [("lost too", "in-doubt")]
        assert Node.of(c).unconfirmed == 1


async def test_tells_in_flight_are_bounded_and_send_waits_for_room(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(_group_sends, "TELLS_IN_FLIGHT", 5)
    cluster = cluster_on(MemoryBus())
    async with node(cluster, "a") as a, node(cluster, "c") as c:
        member = a.spawn(Keeper, 1.0)
        a.register("work", member, shared=True)
        await trio.sleep(HEARTBEAT / 5)
        group = await c.lookup("work")
        for number in range(5):
            group.tell(number)
        with pytest.raises(ta.MailboxFull, match="5 tells through shared names"):
            group.tell(5)
        start = trio.current_time()
        await group.send(5)  # (waits until the first has been handled there)
        assert 1.0 <= trio.current_time() - start < 1.1
        await trio.sleep(7.0)
        assert await member.ask("seen") == [0, 1, 2, 3, 4, 5]
        assert c.dead_letters.count == 0


async def test_a_node_that_has_not_heard_the_name_yet_finds_its_group_by_asking_the_members(
    autojump_clock: trio.testing.MockClock,
) -> None:
    bus = MemoryBus()
    cluster = cluster_on(bus)
    async with node(cluster, "a") as a, node(cluster, "c") as c:
        await trio.sleep(HEARTBEAT / 5)
        # (c hears no announcement of a's: as if it had not reached c yet)
        with bus.losing(lambda subject, payload: ".names." in subject):
            a.register("work", a.spawn(Where, name="w"), shared=True)
        assert c.node is not None
        assert "work" not in c.node.registered()
        group = await c.lookup("work")
        assert await group.ask("where") == ("a", "w")
        with pytest.raises(ta.ActorNotFound):
            await c.lookup("nobody")


async def test_a_node_that_leaves_waits_for_its_tells_to_shared_names_to_end(
    autojump_clock: trio.testing.MockClock,
) -> None:
    cluster = cluster_on(MemoryBus())
    seen: list[Any] = []
    async with node(cluster, "a") as a:
        a.register("work", a.spawn(Keeper, 0.1, seen), shared=True)
        async with node(cluster, "c") as c:
            await trio.sleep(HEARTBEAT / 5)
            group = await c.lookup("work")
            for number in range(10):
                group.tell(number)
        # (c left once the ten had been handled: none in doubt)
        assert seen == list(range(10))
        assert c.dead_letters.count == 0
        assert Node.of(c).unconfirmed == 0


async def test_messages_handled_for_many_heartbeats_end_once_handled_not_in_doubt(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The confirm rounds ask the taker's node about a message it took and still
    works on (here, and on another node): it holds it, so it is not lost."""
    cluster = cluster_on(MemoryBus())
    async with node(cluster, "a") as a, node(cluster, "c") as c:
        for system in (a, c):
            system.register("slow", system.spawn(Keeper, 10 * HEARTBEAT), shared=True)
        await trio.sleep(HEARTBEAT / 5)
        group = await c.lookup("slow")
        answers = []
        async with trio.open_nursery() as nursery:
            for number in range(4):
                group.tell(number)

            async def ask() -> None:
                answers.append((await group.ask("where"))[0])

            for _ in range(4):
                nursery.start_soon(ask)
        await trio.sleep(60 * HEARTBEAT)
        assert len(answers) == 4
        assert c.dead_letters.count == 0
        assert Node.of(c).unconfirmed == 0
        assert Node.of(c).groups.in_flight == 0


async def test_nothing_sent_to_a_shared_name_ends_its_members_node(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Random and malformed frames on a shared name's subject -- random bytes,
    unknown kinds, reply subjects that are not the sender's, bodies that do not
    decode -- are counted as bad input or end as dead letters there; the node serves
    on."""
    import random

    import msgspec

    encode = msgspec.msgpack.encode
    bus = MemoryBus()
    cluster = cluster_on(bus)
    chance = random.Random(32)
    async with node(cluster, "a") as a, node(cluster, "c") as c:
        a.register("work", a.spawn(Where, name="w"), shared=True)
        await trio.sleep(HEARTBEAT / 5)
        subject = Node.of(c).subjects.to_shared("work", "c")
        own_reply = f"{Node.of(c).requests.subject[:-4]}.-.999"
        frames: list[tuple[bytes, str | None]] = []
        for _ in range(300):
            frames.append((chance.randbytes(chance.randrange(12)), own_reply))
        for kind in (-1, 4, 7, 99, 2**40):
            frames.append((encode([kind, None]), own_reply))
        for reply in (None, "", "ta.trio-actors.r.x.y.-.1", f"{own_reply}.more", "a b"):
            frames.append((encode([1, None]), reply))
        undecodable = msgspec.msgpack.encode(msgspec.msgpack.Ext(120, b"?"))
        for kind in (0, 6):  # (tell, send: the bodies of a message of them)
            frames.append((encode([kind, [msgspec.Raw(undecodable)]]), own_reply))
            for count in (0, 65):  # (none, or more than a node sends in one message)
                frames.append((encode([kind, [None] * count]), own_reply))
            frames.append((encode([kind, msgspec.Raw(undecodable)]), own_reply))  # (not a list)
        frames.append((encode([1, msgspec.Raw(undecodable)]), own_reply))  # (an ask)
        transport = Node.of(c).transport
        before = a.node.statistics().bad_input if a.node is not None else None
        for payload, reply in frames:
            transport.publish(subject, payload, reply=reply)
        await trio.sleep(HEARTBEAT)
        assert a.node is not None
        after = a.node.statistics().bad_input
        assert before is not None
        counted = after.messages + after.lookups + after.forged
        assert counted - (before.messages + before.lookups + before.forged) >= 300
        assert [d.reason for d in a.dead_letters.recent] == ["undecodable"] * 2  # (tell, send)
        assert after.messages - before.messages >= 6  # (the messages of 0 or 65 tells, ...)
        group = await c.lookup("work")
        assert await group.ask("where") == ("a", "w")


class _UnregistersAfterRouting(MemoryBus):
    """Takes ``victim`` out of the shared name just after a message to it was routed."""

    victim: tuple[ta.ActorSystem, ta.ActorRef] | None = None

    def _route(
        self, subject: str, payload: bytes, reply: str | None, headers: Headers | None = None
    ) -> None:
        super()._route(subject, payload, reply, headers)
        if ".shared." in subject and self.victim is not None:
            system, ref = self.victim
            system.unregister("work", ref)
            self.victim = None


async def test_a_message_to_a_member_unregistered_after_the_choice_goes_to_a_member(
    autojump_clock: trio.testing.MockClock,
) -> None:
    bus = _UnregistersAfterRouting()
    cluster = cluster_on(bus)
    async with node(cluster, "a") as a, node(cluster, "c") as c:
        for round_ in range(8):
            first, second = a.spawn(Keeper, name=f"x{round_}"), a.spawn(Keeper, name=f"y{round_}")
            a.register("work", first, shared=True)
            a.register("work", second, shared=True)
            await trio.sleep(HEARTBEAT / 5)
            group = await c.lookup("work")
            bus.victim = (a, first)
            assert await group.ask("where") == ("a", f"y{round_}")  # (never the one that left)
            a.unregister("work")


async def test_the_memory_bus_gives_each_message_to_one_member_of_each_queue_group(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """As a NATS server does: every plain subscription gets the message, each queue
    group one of its members (the bus's seeded choice); no-responders only when
    nothing at all subscribes."""
    bus = MemoryBus(seed=7)
    got: dict[str, list[bytes]] = {}

    def keep(key: str) -> Callable[[Any], None]:
        return lambda message: got.setdefault(key, []).append(bytes(message.data))

    async with bus.connect("one") as one, bus.connect("two") as two:
        one.subscribe("s.*", keep("plain"))
        one.subscribe("s.*", keep("g1-one"), queue="g1")
        two.subscribe("s.*", keep("g1-two"), queue="g1")
        two.subscribe("s.x", keep("g2-two"), queue="g2")
        one.subscribe("r", keep("replies"))
        for number in range(100):
            one.publish("s.x", b"%d" % number)
        two.publish("nobody", b"?", reply="r")
        two.publish("s.y", b"!", reply="r")
        await trio.sleep(0.1)
    assert len(got["plain"]) == 101  # (s.x a hundred times, and s.y)
    assert len(got["g1-one"]) + len(got["g1-two"]) == 101  # (one of the group each)
    assert got["g1-one"]  # (both chosen, now and then)
    assert got["g1-two"]
    assert len(got["g2-two"]) == 100  # (the only member of its group)
    assert got["replies"] == [b""]  # (no-responders for "nobody" only)


async def test_tells_from_another_thread_reach_the_group_in_that_threads_order(
    autojump_clock: trio.testing.MockClock,
) -> None:
    cluster = cluster_on(MemoryBus())
    async with node(cluster, "a") as a, node(cluster, "c") as c:
        member = a.spawn(Where)
        a.register("work", member, shared=True)
        await trio.sleep(HEARTBEAT / 5)
        group = await c.lookup("work")

        def from_a_thread() -> None:
            for number in range(50):
                group.tell(("tell", number))
            with pytest.raises(TypeError, match="cannot send"):
                group.tell(object())  # (encoded in the thread: raised there)

        await trio.to_thread.run_sync(from_a_thread)
        await trio.sleep(HEARTBEAT / 5)
        assert await member.ask("told") == list(range(50))
        assert Node.of(c).groups.in_flight == 0
        assert c.dead_letters.count == 0


@pytest.mark.parametrize("heard_first", ["the single claim", "the shared claim"])
async def test_a_name_registered_both_ways_before_either_heard_keeps_the_single_one(
    autojump_clock: trio.testing.MockClock, heard_first: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="trio_actors")
    bus = MemoryBus()
    cluster = cluster_on(bus)
    async with node(cluster, "a") as a, node(cluster, "b") as b, node(cluster, "c") as c:
        await trio.sleep(HEARTBEAT / 5)
        single, member = a.spawn(Where, name="single"), b.spawn(Where, name="member")
        with bus.losing(lambda subject, payload: ".names." in subject):
            a.register("x", single)
            b.register("x", member, shared=True)  # (neither hears the other)
        # One of them says its names again (as when it meets a node): the other hears.
        Node.of(a if heard_first == "the single claim" else b).names.announce_all_soon()
        await trio.sleep(HEARTBEAT / 2)
        assert a.registered() == {"x": single}
        assert "x" not in Node.of(b).groups._served  # (b's member left it)
        for system in (a, b, c):
            assert system.node is not None
            assert set(system.node.registered()) == {"x"}
            assert await (await system.lookup("x")).ask("where") == ("a", "single")
        assert "the single registration keeps it" in caplog.text


class Gate(ta.Actor):
    """``"wait"`` blocks it until its ``gate`` is set."""

    def __init__(self) -> None:
        self.gate = trio.Event()

    async def receive(self, message: Any) -> None:
        if message == "wait":
            await self.gate.wait()


class OnlyOnC(msgspec.Struct):
    """A type node c registers and node a does not: a tell of it cannot be decoded on a."""

    payload: str


async def test_an_undecodable_tell_to_a_shared_name_keeps_a_bounded_prefix_and_is_counted(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # As for a tell to one actor (_taken_in.py): a dead letter there holding a
    # bounded prefix of its bytes (InputLimits.undecodable_prefix, within
    # undecodable_bytes for all), counted as bad input "tells" -- not all its bytes,
    # uncounted (found by review: anyone who may publish on the name's subject could
    # have filled the dead-letter log with bodies of up to max_payload each).
    cluster = cluster_on(MemoryBus())
    async with (
        node(cluster, "a") as a,
        node(attrs.evolve(cluster, types=[OnlyOnC]), "c") as c,
    ):
        member = a.spawn(Where)
        a.register("work", member, shared=True)
        await trio.sleep(HEARTBEAT / 5)
        group = await c.lookup("work")
        assert a.node is not None
        before = a.node.statistics()
        group.tell(("tell", 0))  # (alone, at once: the next ones leave together)
        group.tell(("tell", 1))
        group.tell(OnlyOnC("x" * 10_000))  # (in the middle of a message of tells)
        group.tell(("tell", 2))
        await trio.sleep(HEARTBEAT / 5)
        assert await member.ask("told") == [0, 1, 2]
        (letter,) = [d for d in a.dead_letters.recent if d.reason == "undecodable"]
        assert isinstance(letter.message, bytes)
        assert 0 < len(letter.message) <= cluster.limits.undecodable_prefix
        after = a.node.statistics()
        assert after.bad_input.tells == before.bad_input.tells + 1
        assert after.undecodable_bytes == before.undecodable_bytes + len(letter.message)
        assert Node.of(c).groups.in_flight == 0  # (it ended there, and was said to)
        assert (c.dead_letters.count, Node.of(c).unconfirmed) == (0, 0)


async def test_forged_or_oversized_ends_of_tells_to_a_shared_name_are_refused(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """What a member's node says of the tells it took is checked: indices out of
    the message, said twice, or more than a message holds are bad input, and the
    tells stay in flight until their real ends come."""
    cluster = cluster_on(MemoryBus())
    async with node(cluster, "a") as a, node(cluster, "c") as c:
        instance = Gate()
        member = a.spawn(lambda: instance)
        a.register("work", member, shared=True)
        await trio.sleep(HEARTBEAT / 5)
        group = await c.lookup("work")
        group.tell("wait")  # (the member blocks on it: nothing ends meanwhile)
        await trio.sleep(HEARTBEAT / 5)
        groups, requests = Node.of(c).groups, Node.of(c).requests
        (number,) = requests.waiting
        answer = f"{requests.subject[:-4]}.a.{number}"  # (as node a answers it)
        before = Node.of(c).statistics().bad_input.replies
        transport = Node.of(a).transport
        for indices in ([5], [0, 0, 7], list(range(1_000))):
            transport.publish(answer, _subjects.encode((True, indices)))
        await trio.sleep(HEARTBEAT / 5)
        assert Node.of(c).statistics().bad_input.replies - before == 3
        assert groups.in_flight == 1  # (its real end has not come)
        instance.gate.set()
        await trio.sleep(HEARTBEAT / 5)
        assert groups.in_flight == 0
        assert (c.dead_letters.count, Node.of(c).unconfirmed) == (0, 0)


class _DropsShared(MemoryBus):
    """Carries nothing to shared names (as a server refusing them would)."""

    def _route(
        self, subject: str, payload: bytes, reply: str | None, headers: Headers | None = None
    ) -> None:
        if ".shared." not in subject:
            super()._route(subject, payload, reply, headers)


def _refusal(subject: str) -> str:
    return f'Permissions Violation for Publish to "{subject}"'


async def test_a_refused_shared_names_subject_fails_at_once_what_no_member_took(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The server refusing a node's messages to a shared name (``-ERR``, mapped in
    ``_refused.py``): what no member took is not delivered -- an ask raises
    ``NotPermitted``, a tell is a dead letter "refused" -- at once, not in doubt
    after the bound for a message nobody took."""
    cluster = cluster_on(_DropsShared())
    async with node(cluster, "a") as a, node(cluster, "c") as c:
        a.register("work", a.spawn(Where), shared=True)
        await trio.sleep(HEARTBEAT / 5)
        group = await c.lookup("work")
        group.tell(("tell", 1))
        outcome: list[BaseException] = []

        async def ask() -> None:
            try:
                await group.ask("where")
            except ta.NotPermitted as error:
                outcome.append(error)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(ask)
            await trio.sleep(HEARTBEAT / 10)
            started = trio.current_time()
            subject = Node.of(c).subjects.to_shared("work", "c")
            _refused.on_server_error(Node.of(c), _refusal(subject))
        assert trio.current_time() == started  # (at once)
        (error,) = outcome
        assert "shared name" in str(error)
        assert [(d.message, d.reason) for d in c.dead_letters.recent] == [(("tell", 1), "refused")]
        assert (Node.of(c).groups.in_flight, Node.of(c).unconfirmed) == (0, 0)
        assert Node.of(c).not_permitted == 1


async def test_a_refused_member_nodes_subject_leaves_what_it_took_from_a_shared_name(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A refusal of this node's messages to a member's node is about that node's
    subject: a tell the member took from the shared name came on the name's, and
    ends as it would have -- handled, not a dead letter "refused"."""
    cluster = cluster_on(MemoryBus())
    async with node(cluster, "a") as a, node(cluster, "c") as c:
        instance = Gate()
        a.register("work", a.spawn(lambda: instance), shared=True)
        await trio.sleep(HEARTBEAT / 5)
        group = await c.lookup("work")
        group.tell("wait")  # (taken, and the member blocks on it)
        await trio.sleep(HEARTBEAT / 5)
        assert a.node is not None
        a_peer = (a.node.name, Node.of(a).incarnation)
        subject = Node.of(c).subjects.to_node(*a_peer, "c")
        _refused.on_server_error(Node.of(c), _refusal(subject))
        assert c.dead_letters.count == 0
        instance.gate.set()
        await trio.sleep(HEARTBEAT / 5)
        assert (Node.of(c).groups.in_flight, c.dead_letters.count) == (0, 0)

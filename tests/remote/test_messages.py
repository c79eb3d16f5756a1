"""Messages between nodes cross as themselves or not at all: registered dataclasses,
attrs classes, Structs and Enums arrive as themselves (``match`` works on them on the
other node); what would arrive as something else raises ``TypeError`` at ``tell`` /
``ask``, before anything is sent; a type registered on the sender only is a dead
letter on the receiver naming it. Over the in-memory bus and a real nats-server."""

from __future__ import annotations

import dataclasses
import enum
import logging
from typing import Any

import attrs
import msgspec
import pytest
import trio
import trio.testing

import trio_actors as ta
from trio_actors.remote import Node
from trio_actors.remote._codec import MAX_DEPTH


@dataclasses.dataclass(frozen=True)
class Point:
    x: int
    y: int = 0


@attrs.frozen
class Move:
    by: Point
    reply_to: ta.ActorRef | None = None
    tags: tuple[str, ...] = ()


@attrs.define
class Basket:  # (mutable, attrs)
    items: list[Any] = attrs.Factory(list)


class Heading(enum.Enum):
    NORTH = "n"
    SOUTH = "s"


class Stamp(msgspec.Struct):
    at: Point
    heading: Heading


@dataclasses.dataclass
class Stray:  # (registered nowhere)
    x: int


TYPES: list[type] = [Point, Move, Basket, Heading, Stamp]


class Matcher(ta.Actor):
    """Says which ``case`` each message matched."""

    def __init__(self) -> None:
        self.seen: list[Any] = []

    def receive(self, message: Any) -> Any:
        match message:
            case "seen":
                return list(self.seen)
            case "heading?":
                return Heading.NORTH
            case Point(x=x, y=y):
                self.seen.append(("point", x, y))
                return Point(y, x)
            case Move(by=Point(x=x), reply_to=ta.ActorRef() as to, tags=("fast", *_)):
                to.tell(("moved", x))
                self.seen.append(("move", x))
            case Basket(items=[Point() as first, *rest]):
                self.seen.append(("basket", first, len(rest)))
                return Basket([*rest, first])
            case Stamp(at=Point(x=x), heading=Heading.SOUTH):
                self.seen.append(("stamp south", x))
            case Heading.NORTH:
                self.seen.append("north")
            case _:
                self.seen.append(("something else", message))
        return None


async def nodes_with(
    cluster: ta.Cluster, owner: ta.ActorSystem, user: ta.ActorSystem
) -> ta.ActorRef:
    """``owner``'s Matcher, as ``user`` reaches it."""
    owner.register("matcher", owner.spawn(Matcher, name="matcher"))
    assert owner.node is not None
    with trio.fail_after(10):
        await owner.node.flush()
        return await user.lookup("matcher")


async def test_dataclasses_attrs_classes_structs_and_enums_arrive_as_themselves(
    cluster_here: ta.Cluster,
    clock: trio.testing.MockClock | None,
) -> None:
    cluster = attrs.evolve(cluster_here, types=TYPES)
    async with (
        ta.open_actor_system(cluster=cluster, node="a") as a,
        ta.open_actor_system(cluster=cluster, node="b") as b,
    ):
        there = await nodes_with(cluster, a, b)
        probe = b.spawn(Matcher, name="probe")
        there.tell(Point(1, 2))
        there.tell(Move(Point(3), reply_to=probe, tags=("fast", "now")))
        there.tell(Stamp(Point(4), Heading.SOUTH))
        there.tell(Heading.NORTH)
        assert await there.ask(Point(5, 6)) == Point(6, 5)  # (the reply crosses so too)
        swapped = await there.ask(Basket([Point(7), Point(8)]))
        assert swapped == Basket([Point(8), Point(7)])
        assert type(swapped.items[0]) is Point
        assert await there.ask("seen") == [
            ("point", 1, 2),
            ("move", 3),
            ("stamp south", 4),
            "north",
            ("point", 5, 6),
            ("basket", Point(7), 1),
        ]
        with trio.fail_after(10):  # (the Move's ref crossed twice: it reached the probe)
            while True:
                if await probe.ask("seen") == [("something else", ("moved", 3))]:
                    break
                await trio.sleep(0.01)


async def test_what_would_arrive_as_something_else_raises_at_tell_and_ask_and_is_not_sent(
    cluster_here: ta.Cluster,
    clock: trio.testing.MockClock | None,
) -> None:
    cluster = attrs.evolve(cluster_here, types=TYPES)
    async with (
        ta.open_actor_system(cluster=cluster, node="a") as a,
        ta.open_actor_system(cluster=cluster, node="b") as b,
    ):
        there = await nodes_with(cluster, a, b)
        node = b.node
        assert isinstance(node, Node)
        deep: Any = None
        for _ in range(MAX_DEPTH + 1):
            deep = [deep]
        refused = [
            (Stray(1), r"test_messages\.Stray is a dataclass not registered with "),
            (trio.Event(), r"trio\.Event is an attrs class not registered with Cluster"),
            (Move(Point(1), tags=(Stray(2),)), r"Stray is a dataclass not registered"),  # type: ignore[arg-type]
            (("x", {1: [bytearray(b"b")]}), r"bytearray would arrive as bytes"),
            (deep, rf"nests more than {MAX_DEPTH} containers deep"),
        ]
        sent, made = node.tells.sent, node.requests.made
        for message, says in refused:
            with pytest.raises(TypeError, match=says):
                there.tell(message)
            with pytest.raises(TypeError, match=f"register it on every node|{says}"):
                await there.ask(message)
        # Nothing went: no tell numbered or waiting, no request made.
        assert (node.tells.sent, node.tells.outbox.waiting, node.requests.made) == (sent, {}, made)
        there.tell(Point(1))
        assert await there.ask("seen") == [("point", 1, 0)]  # (and nothing else came)
        assert a.dead_letters.count == 0


async def test_a_type_registered_on_the_sender_only_is_a_dead_letter_there_naming_it(
    cluster_here: ta.Cluster, clock: trio.testing.MockClock | None, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="trio_actors")
    async with (
        ta.open_actor_system(
            cluster=attrs.evolve(cluster_here, types=[Point, Heading]), node="a"
        ) as a,
        ta.open_actor_system(
            cluster=attrs.evolve(cluster_here, types=[Point, Move]), node="b"
        ) as b,
    ):
        there = await nodes_with(cluster_here, a, b)
        there.tell(Point(1))  # (both register it)
        there.tell(Move(Point(2)))  # (a does not)
        with pytest.raises(ta.RemoteError, match=r"holds a test_messages\.Move, which this node"):
            await there.ask(("again", Move(Point(3))))
        assert await there.ask("seen") == [("point", 1, 0)]
        letter = a.dead_letters.recent[-1]
        assert (a.dead_letters.count, letter.reason) == (1, "undecodable")
        assert a.statistics().dead_letters.undecodable == 1
        assert (
            "test_messages.Move, which this node's Cluster(types=[...]) does not register "
            "(register it on every node)" in caplog.text
        )
        # A reply holding a class the asking node does not register: its ask says so.
        with pytest.raises(msgspec.DecodeError, match=r"holds a test_messages\.Heading, which"):
            await there.ask("heading?")
        assert await there.ask("seen") == [("point", 1, 0)]

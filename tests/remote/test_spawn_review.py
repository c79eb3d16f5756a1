"""A review of spawning on another node (issue 32, item 2): each test a defect found,
failing before its fix -- a placement rule that gave up on a member that left, was
leaving, or that this node may not reach, while another listed the class; one spawn
that made two actors when a member was declared down wrongly; a spawn after this
node left that blamed the other nodes' configuration; a ``NotSpawnable`` that named
no member the second time; ``FewestActors`` refusing when a member was slow to say
its load, and sending spawns started together all to one member; a spawn in a
scope already cancelled that made an actor nobody holds; a node cut off from the
others that could not spawn on itself; an answer that is not the answering node's
own actor; arguments that are no list not counted as bad input; and the docs'
advice to find an actor by its spawn ``name`` with ``lookup``. Then a property test:
no SPAWN or LOAD request ends a node. Over the in-memory bus under the MockClock
(one over a real nats-server with the secure deployment's permissions)."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import hypothesis.strategies as st
import msgspec
import pytest
import trio
import trio.testing
from hypothesis import given, settings
from test_requests_end import to_node
from test_spawn import Counter, NotListed, live, node_of, nodes, spawnable

import trio_actors as ta
from helpers import Echo, eventually
from nats_server import running_nats_server
from trio_actors.remote import MemoryBus
from trio_actors.remote._spawning import Spawning
from trio_actors.remote._subjects import LOAD, SPAWN, encode

DOCS = Path(__file__).resolve().parents[2] / "docs"


def memory(**options: Any) -> tuple[MemoryBus, ta.Cluster]:
    bus = MemoryBus(**options)
    return bus, ta.Cluster(bus=bus, heartbeat=1.0, heartbeats_missed=3)


@asynccontextmanager
async def one_more(
    cluster: ta.Cluster, name: str, *listed: type
) -> AsyncIterator[tuple[trio.Event, list[ta.ActorSystem]]]:
    """Node ``name`` (listing ``listed``), run in a task of its own: it leaves when
    the event is set, or at the end of the block."""
    leave = trio.Event()
    opened: list[ta.ActorSystem] = []

    async def run(task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        async with ta.open_actor_system(cluster=spawnable(cluster, *listed), node=name) as system:
            opened.append(system)
            task_status.started()
            await leave.wait()

    async with trio.open_nursery() as nursery:
        await nursery.start(run)
        try:
            yield leave, opened
        finally:
            leave.set()


async def members_are(system: ta.ActorSystem, count: int) -> None:
    await eventually(lambda: len(node_of(system).members()) == count)


# --- placement: a member gone or out of reach is passed over ------------------------


async def test_a_member_that_left_cleanly_mid_placement_is_passed_over(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """A fewest-actors spawn waits a beat for b's load (its question is lost); c, the
    least loaded, leaves cleanly meanwhile. c is no reason to give up: d lists the
    class. (Before: ``ActorStopped`` "c ... is unreachable".)"""
    bus, cluster = memory(advisories=False)
    async with (
        nodes(cluster, "abd", {"b": (Counter,), "d": (Counter,)}) as n,
        one_more(cluster, "c", Counter) as (leave_c, _),
    ):
        a = node_of(n["a"])
        await members_are(n["a"], 4)
        n["d"].spawn(NotListed)  # (d has one more actor than c)
        spawned: list[ta.ActorRef] = []
        with bus.losing(to_node("b", LOAD)):
            async with trio.open_nursery() as nursery:
                on = ta.FewestActors()
                nursery.start_soon(lambda: spawn_into(spawned, a.spawn(Counter, 3, on=on)))
                await trio.sleep(0.5)
                leave_c.set()
        assert [m.name for m in a.members()] == ["a", "b", "d"]
        assert spawned[0].path.startswith("d:")
        assert await spawned[0].ask("count") == 3


async def spawn_into(found: list[Any], spawning: Any) -> None:
    found.append(await spawning)


async def test_a_spawn_that_lands_on_a_node_whose_system_is_closing_goes_on(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """b's system is closing (an actor's on_stop takes two seconds: b is still a
    member). A round-robin spawn that reaches b goes on to c; one on b by name is
    told that b is leaving (ActorStopped) -- not "the actor system has been closed", which reads as
    the caller's own system."""
    _, cluster = memory()
    async with (
        nodes(cluster, "ac", {"c": (Counter,)}) as n,
        one_more(cluster, "b", Counter) as (leave_b, b),
    ):
        b[0].spawn(SlowStop)
        a = node_of(n["a"])
        await members_are(n["a"], 3)
        leave_b.set()
        await trio.sleep(0.5)  # (b's actors stopping: b still a member)
        assert "b" in [m.name for m in a.members()]
        ref = await a.spawn(Counter, 1)  # (b's turn: it is first in name order)
        assert ref.path.startswith("c:")
        with pytest.raises(ta.ActorStopped, match=r"node 'b' is leaving the cluster"):
            await a.spawn(Counter, 1, on="b")


class SlowStop(ta.Actor):
    async def on_stop(self) -> None:
        await trio.sleep(2)

    def receive(self, message: Any) -> None:
        pass


async def test_round_robin_passes_over_a_member_this_node_may_not_reach(
    tmp_path: Path,
) -> None:
    """The secure deployment with ``--allow a:c``: a may reach c's actors, not b's.
    b and c list the class; b is first in name order. The server refuses the spawn to
    b at once (NotPermitted): the spawn goes on to c. (Before: ``NotPermitted``.)"""
    from test_secure import NODES, configured

    from trio_actors.sweeps._secure import write_deployment

    out = tmp_path / "secure"
    write_deployment(out, NODES, cluster="shop", allowed={"a": ["c"]})
    config = (out / "nats-server.conf").read_text()
    with running_nats_server(tmp_path, config=config) as server, trio.fail_after(60):

        def cluster(name: str, *listed: type) -> ta.Cluster:
            return attrs.evolve(configured(out, name, server), types=[], spawnable=listed)

        async with (
            ta.open_actor_system(cluster=cluster("a"), node="a") as a,
            ta.open_actor_system(cluster=cluster("b", Counter), node="b"),
            ta.open_actor_system(cluster=cluster("c", Counter), node="c"),
        ):
            await members_are(a, 3)
            for _ in range(2):
                ref = await node_of(a).spawn(Counter, 1)
                assert ref.path.startswith("c:")
                assert await ref.ask("count") == 1


# --- what a failed spawn says -------------------------------------------------------


async def test_a_spawn_after_this_node_left_says_so_whatever_the_placement(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """After ``close()`` every spawn says this node has left -- FewestActors said no
    member spawns the class and to list it in Cluster(spawnable=...)."""
    _, cluster = memory()
    async with nodes(cluster, "ab", {"b": (Counter,)}) as n:
        a = node_of(n["a"])
        a.close()
        for on in ("b", ta.RoundRobin(), ta.FewestActors()):
            with pytest.raises(ta.ActorStopped, match="left the cluster"):
                await a.spawn(Counter, 1, on=on)


async def test_a_spawn_when_this_node_leaves_while_it_asks_the_loads_says_so(
    autojump_clock: trio.testing.MockClock,
) -> None:
    bus, cluster = memory()
    async with nodes(cluster, "abc", {"b": (Counter,), "c": (Counter,)}) as n:
        a = node_of(n["a"])
        failed: list[BaseException] = []

        async def spawn() -> None:
            try:
                await a.spawn(Counter, 1, on=ta.FewestActors())
            except Exception as error:
                failed.append(error)

        slow = to_node("b", LOAD), to_node("c", LOAD)
        with bus.losing(lambda *message: any(s(*message) for s in slow)):  # (a waits a beat)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(spawn)
                await trio.sleep(0.5)
                a.close()
        assert isinstance(failed[0], ta.ActorStopped), failed
        assert "left the cluster" in str(failed[0])


async def test_not_spawnable_names_the_members_that_refused_also_the_second_time(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The members that refused a class are not asked again -- and the second
    NotSpawnable said "members that refused or went down: none"."""
    _, cluster = memory()
    async with nodes(cluster, "abc", {"b": (Counter,)}) as n:
        a = node_of(n["a"])
        for on in (ta.RoundRobin(), ta.RoundRobin(), ta.FewestActors()):
            with pytest.raises(ta.NotSpawnable, match=r"refused: b, c\b"):
                await a.spawn(NotListed, on=on)


async def test_fewest_actors_falls_back_on_a_member_slow_to_say_its_load(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """b lists the class but its answer about its load does not come within a beat:
    the spawn is not refused as if no member spawned the class (NotSpawnable, "list
    it in Cluster(spawnable=...)"); b is asked after those that answered -- here
    the only one."""
    bus, cluster = memory()
    async with nodes(cluster, "ab", {"b": (Counter,)}) as n:
        a = node_of(n["a"])
        with bus.losing(to_node("b", LOAD)):
            ref = await a.spawn(Counter, 4, on=ta.FewestActors())
        assert ref.path.startswith("b:")
        assert await ref.ask("count") == 4


# --- what a spawn's answer may be ----------------------------------------------------


async def test_a_spawn_answered_with_another_nodes_actor_is_refused_as_forged(
    autojump_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A node answers a spawn with a ref to an actor of the node that asked (its
    lookup found it): taken, the spawn would hand the caller its own actor as the new
    one. Only the node asked may answer, with its own actor -- as a lookup's answer
    must be (counted as forged)."""
    _, cluster = memory()
    async with nodes(cluster, "ab", {"b": (Counter,)}) as n:
        a, b = node_of(n["a"]), node_of(n["b"])
        n["a"].register("precious", n["a"].spawn(Echo, name="precious"))
        await a.flush()
        precious = await n["b"].lookup("precious")

        def forge(spawning: Spawning, body: Any, reply: str, sender: str) -> None:
            assert spawning is b.spawning
            b.tells.publish(reply, encode((True, msgspec.Raw(b.codec.encode(precious)))))

        monkeypatch.setattr(Spawning, "receive_spawn", forge)
        with pytest.raises(ta.NodeDown, match="not an actor of its own"):
            await a.spawn(Counter, 1, on="b")
        assert a.statistics().bad_input.forged == 1


async def test_a_spawn_whose_arguments_are_no_list_is_bad_input(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """No node sends a spawn's arguments as anything but a list: it is counted as bad
    input (and answered), as a body that does not decode is."""
    _, cluster = memory()
    async with nodes(cluster, "ab", {"b": (Counter,)}) as n:
        a, b = node_of(n["a"]), node_of(n["b"])
        cell = a.spawning._node_cell(a.membership.members()[1], "(hostile)")
        for args in ({"start": 1}, "1", 1, None):
            body = encode(
                ("test_spawn:Counter", msgspec.Raw(encode(args)), None, None, None, None, False)
            )
            with pytest.raises(TypeError, match="arguments are a list"):
                await a.requests.request(cell, SPAWN, body)
        assert b.statistics().bad_input.messages == 4
        assert await (await a.spawn(Counter, 1, on="b")).ask("count") == 1


# --- the docs' claims ---------------------------------------------------------------


async def test_a_spawned_actors_name_is_not_a_registered_name(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """The docs said: after ConnectionInterrupted, "give it a ``name`` and
    ``lookup``". A spawn's ``name`` is its path's, not a registered name: ``lookup``
    does not find it. What finds it is a name the actor registers itself."""
    _, cluster = memory()
    async with nodes(cluster, "ab", {"b": (Counter, Registers)}) as n:
        a = node_of(n["a"])
        await a.spawn(Counter, 1, on="b", name="w")
        with pytest.raises(ta.ActorNotFound):
            await n["a"].lookup("w")
        await a.spawn(Registers, "job-7", on="b")
        await node_of(n["b"]).flush()
        assert await (await n["a"].lookup("job-7")).ask("count") == 1
    text = " ".join((DOCS / "remote.rst").read_text().split())
    assert "give it a ``name`` and ``lookup``" not in text


class Registers(ta.Actor):
    """Registers itself under the name it is given, cluster-wide, when it starts."""

    def __init__(self, name: str) -> None:
        self.name = name

    def on_start(self) -> None:
        self.system.register(self.name, self.ref)

    def receive(self, message: Any) -> Any:
        return 1 if message == "count" else None


# --- cancellation -------------------------------------------------------------------


async def test_a_spawn_in_a_scope_already_cancelled_spawns_nothing(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """trio's rule: an operation that raises Cancelled did not happen, if it can
    help it. A spawn called in a cancelled scope sent its request before its first
    checkpoint and raised Cancelled: the actor was made on b, and nobody holds its
    ref."""
    _, cluster = memory()
    async with nodes(cluster, "ab", {"b": (Counter,)}) as n:
        a = node_of(n["a"])
        before = live(n["b"])
        for on in ("b", ta.RoundRobin(), ta.FewestActors()):
            with trio.CancelScope() as scope:
                scope.cancel()
                await a.spawn(Counter, 1, on=on)
            assert scope.cancelled_caught
        await trio.sleep(1)
        assert live(n["b"]) == before


# --- never twice --------------------------------------------------------------------


async def test_a_spawn_to_a_member_wrongly_declared_down_is_not_made_twice(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """b takes the spawn and makes the actor, but nothing of b's comes through for
    three beats (a partition one way): a declares b down. A declared-down node that
    is heard again is alive, its actors too -- so the spawn may have been made there,
    and must not be made again elsewhere, as after ConnectionInterrupted ("never
    twice"). It was: round robin went on to c, and one spawn made two actors named
    "only-one". Now it ends with NodeDown ("may or may not"), and the next spawn goes
    to a member that is up."""
    bus, cluster = memory(advisories=False)
    async with nodes(cluster, "abc", {"b": (Counter,), "c": (Counter,)}) as n:
        a = node_of(n["a"])
        before = {name: live(n[name]) for name in "bc"}

        def from_b(subject: str, _payload: bytes) -> bool:
            return ".hb.b." in subject or (".r." in subject and subject.split(".")[-2] == "b")

        with bus.losing(from_b), pytest.raises(ta.NodeDown, match="may or may not"):
            await a.spawn(Counter, 1, name="only-one")  # (b's turn: first in name order)
        assert [m.name for m in a.members()] == ["a", "c"]
        assert (await a.spawn(Counter, 2)).path.startswith("c:")
        await members_are(n["a"], 3)  # (b is heard again: it was alive)
        assert {name: live(n[name]) - before[name] for name in "bc"} == {"b": 1, "c": 1}


# --- this node ----------------------------------------------------------------------


async def test_this_node_spawns_for_itself_also_when_cut_off_from_the_others(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Cut off from the servers for more than ``heartbeats_missed`` beats, a node
    lists every node down, itself included. A spawn ``on`` its own name is a plain
    local spawn (the docs) -- it was NodeDown "not a member (the members up: )";
    and a placement rule may still choose this node when it lists the class -- it
    was NotSpawnable "no member of the cluster spawns it"."""
    bus, cluster = memory(advisories=False)
    async with ta.open_actor_system(cluster=spawnable(cluster, Counter), node="a") as a:
        node = node_of(a)
        with bus.losing(lambda _subject, _payload: True):
            await trio.sleep(5)
            assert node.members() == []
            for on in ("a", ta.RoundRobin(), ta.FewestActors()):
                assert await (await node.spawn(Counter, 1, on=on)).ask("count") == 1
            with pytest.raises(ta.NodeDown, match=r"the members up: none"):
                await node.spawn(Counter, 1, on="b")


# --- any bytes on the two new kinds -------------------------------------------------

spawn_values = (
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=True)
    | st.text(max_size=8)
    | st.binary(max_size=8)
    | st.sampled_from(["test_spawn:Counter", "os:system", "a/b", "fail", "drop_old"])
)
spawn_args = st.recursive(
    spawn_values, lambda inner: st.lists(inner, max_size=3), max_leaves=6
).map(lambda value: msgspec.Raw(msgspec.msgpack.encode(value)))


@st.composite
def hostile_requests(draw: st.DrawFn) -> tuple[int, bytes]:
    """A SPAWN or LOAD envelope: a valid frame's shape with its fields replaced,
    dropped or added, or random bytes."""
    kind = draw(st.sampled_from([SPAWN, LOAD]))
    if kind == SPAWN:
        fields: list[Any] = [
            draw(st.sampled_from(["test_spawn:Counter", "os:system"]) | spawn_values),
            draw(spawn_args),
            draw(st.none() | st.text(max_size=6) | spawn_values),
            draw(st.none() | st.integers(-2, 2**64 - 1) | spawn_values),
            draw(st.sampled_from([None, "fail", "drop_new", "zzz"]) | spawn_values),
            draw(st.none() | st.floats(allow_nan=True) | spawn_values),
            draw(st.booleans() | spawn_values),  # (supervised: an instance of a child)
        ]
    else:
        fields = [draw(st.sampled_from(["test_spawn:Counter"]) | spawn_values)]
    operation = draw(st.sampled_from(["keep", "drop", "add", "whole"]))
    body: Any = fields if kind == SPAWN else fields[0]
    if operation == "drop" and kind == SPAWN:
        del fields[draw(st.integers(0, len(fields) - 1))]
    elif operation == "add":
        body = [*fields, draw(spawn_values)]
    elif operation == "whole":
        body = draw(spawn_values)
    raw = draw(st.just(msgspec.msgpack.encode(body)) | st.binary(max_size=24))
    return kind, encode((kind, 0, "", msgspec.Raw(raw))) if draw(st.booleans()) else raw


async def drive_hostile(requests: list[tuple[int, bytes]]) -> None:
    bus = MemoryBus()
    cluster = spawnable(ta.Cluster(bus=bus, name="fuzz"), Counter)
    async with (
        ta.open_actor_system(cluster=cluster, node="a") as a,
        ta.open_actor_system(cluster=cluster, node="b") as b,
        bus.connect("raw") as raw,
    ):
        node = node_of(a)
        subject = node.subjects.to_node(node.name, node.incarnation, "raw")
        replies = f"{node.subjects.replies('raw', '0')}.{node.name}"
        for number, (_kind, payload) in enumerate(requests):
            raw.publish(subject, payload, reply=f"{replies}.{number}")
        await trio.sleep(0.01)
        ref = await node_of(b).spawn(Counter, 2, on="a")  # (a spawns still)
        with trio.fail_after(10):
            assert await ref.ask("count") == 2


@settings(max_examples=200, deadline=None)
@given(st.lists(hostile_requests(), min_size=1, max_size=8))
def test_no_spawn_or_load_request_ends_a_node(requests: list[tuple[int, bytes]]) -> None:
    trio.run(drive_hostile, requests, clock=trio.testing.MockClock(autojump_threshold=0))


async def test_a_spawn_to_a_member_while_it_leaves_goes_on_to_the_next(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """b leaves cleanly: its actors have stopped, it takes no more messages, and it
    waits (up to five seconds) for c to acknowledge its last tells -- c's
    acknowledgements are lost. A spawn sent to b then is answered by NATS: nothing
    serves it; b is up, so it waits to be sent again -- until b's ``bye``, which
    failed it with NodeDown. It was never delivered: the next member takes it."""
    bus, cluster = memory(advisories=False)
    async with (
        nodes(cluster, "ac", {"c": (Counter,)}) as n,
        one_more(cluster, "b", Counter) as (leave_b, b),
    ):
        a = node_of(n["a"])
        await members_are(n["a"], 3)
        await members_are(b[0], 3)
        on_c = await node_of(b[0]).spawn(Counter, 0, on="c")
        with bus.losing(
            lambda subject, _payload: f".a.c.{node_of(n['c']).incarnation}." in subject
        ):
            on_c.tell("add")  # (b waits for its acknowledgement as it leaves)
            leave_b.set()
            await trio.sleep(0.5)
            assert "b" in [m.name for m in a.members()]  # (b is leaving, not gone)
            ref = await a.spawn(Counter, 1)  # (b's turn: first in name order)
        assert ref.path.startswith("c:")


async def test_fewest_actors_spreads_spawns_made_at_the_same_time(
    autojump_clock: trio.testing.MockClock,
) -> None:
    """Six spawns started together: each asks the loads, all read the same counts,
    and all six went to b (the tie goes to the name) -- a user's nursery of
    fewest-actors spawns put every worker on one node. The spawns this node has on
    their way to a member count in its load."""
    _, cluster = memory()
    async with nodes(cluster, "abc", {"b": (Counter,), "c": (Counter,)}) as n:
        a = node_of(n["a"])
        before = {name: live(n[name]) for name in "bc"}
        async with trio.open_nursery() as nursery:
            for i in range(6):
                nursery.start_soon(functools.partial(a.spawn, Counter, i, on=ta.FewestActors()))
        assert {name: live(n[name]) - before[name] for name in "bc"} == {"b": 3, "c": 3}

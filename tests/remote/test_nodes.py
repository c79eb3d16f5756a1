"""Nodes of one cluster in one trio run -- over the in-memory bus (deterministic,
MockClock) and over a real nats-server (tests/remote/conftest.py): tell, ask,
exceptions, refs in messages, cancellation, stop, the registry across nodes, and
what happens to messages for actors and nodes that are gone."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import attrs
import msgspec
import pytest
import trio
import trio.testing

import trio_actors as ta
from helpers import Watcher, eventually
from trio_actors.remote import Node
from trio_actors.remote._peers import PeerState


class Order(msgspec.Struct):
    item: str
    quantity: int
    reply_to: ta.ActorRef | None = None


class Overdraft(Exception):
    pass


class Custom(Exception):
    def __init__(self, a: int, b: int) -> None:
        super().__init__(f"{a}/{b}")


class Echo(ta.Actor):
    def __init__(self) -> None:
        self.seen: list[Any] = []

    def receive(self, message: Any) -> Any:
        match message:
            case "seen":
                return list(self.seen)
            case ("raise", "value"):
                raise ValueError("bad value")
            case ("raise", "custom"):
                raise Custom(1, 2)
            case ("raise", "overdraft"):
                raise Overdraft("too much")
            case ("forward", ta.ActorRef() as target, payload):
                target.tell(payload)
                return None
            case "me":
                return self.ref
        self.seen.append(message)
        return message


class Slow(ta.Actor):
    def __init__(self, gate: trio.Event) -> None:
        self.handled: list[Any] = []
        self.gate = gate

    async def receive(self, message: Any) -> Any:
        if message == "handled":
            return list(self.handled)
        await self.gate.wait()
        self.handled.append(message)
        return message


@asynccontextmanager
async def two_nodes(
    cluster: ta.Cluster,
) -> AsyncIterator[tuple[ta.ActorSystem, ta.ActorSystem]]:
    cluster = attrs.evolve(cluster, types=[Order], errors=[Overdraft])
    async with (
        ta.open_actor_system(cluster=cluster, node="a") as a,
        ta.open_actor_system(cluster=cluster, node="b") as b,
    ):
        yield a, b


@asynccontextmanager
async def echo_across(
    cluster: ta.Cluster,
) -> AsyncIterator[tuple[ta.ActorSystem, ta.ActorSystem, ta.ActorRef]]:
    """Nodes a and b, and a's actor ``echo`` (registered) as b reaches it."""
    async with two_nodes(cluster) as (a, b):
        a.register("echo", a.spawn(Echo, name="echo"))
        yield a, b, await remote_ref(a, b, "echo")


async def remote_ref(owner: ta.ActorSystem, user: ta.ActorSystem, name: str) -> ta.ActorRef:
    """``name``'s actor of ``owner``, as ``user`` reaches it (through the registry,
    once ``owner``'s node has flushed the name to the servers)."""
    assert owner.node is not None
    with trio.fail_after(10):
        await owner.node.flush()
        return await user.lookup(name)


async def test_tell_and_ask_across_nodes_with_structs_tuples_and_refs(
    cluster_here: ta.Cluster,
    clock: trio.testing.MockClock | None,
) -> None:
    async with two_nodes(cluster_here) as (a, b):
        echo = a.spawn(Echo, name="echo")
        a.register("echo", echo)
        there = await remote_ref(a, b, "echo")
        assert isinstance(there, ta.ActorRef)
        assert there != echo
        assert there.path == "a:system/echo"
        assert there.name == "echo"
        with trio.testing.assert_no_checkpoints():
            there.tell(("add", 1))
            there.tell({"k": (1, 2), "s": {3}})
            there.tell(Order("tea", 2))
        assert await there.ask("ping") == "ping"
        told = [("add", 1), {"k": (1, 2), "s": {3}}, Order("tea", 2), "ping"]
        assert await there.ask("seen") == told
        # A ref to an actor of b travels to a and back, and is b's actor again.
        probe = b.spawn(Echo, name="probe")
        assert await there.ask(Order("jam", 1, reply_to=probe)) == Order("jam", 1, probe)
        await there.ask(("forward", probe, "hello"))

        async def heard() -> bool:
            return bool(await probe.ask("seen") == ["hello"])

        await eventually(heard)
        # a's own ref, returned to b, is the same remote ref; asked back on a, local.
        assert await there.ask("me") == there
        assert await echo.ask("me") == echo


async def test_exceptions_cross_as_themselves_or_as_remote_errors(
    cluster_here: ta.Cluster, clock: trio.testing.MockClock | None
) -> None:
    async with echo_across(cluster_here) as (_a, _b, there):
        with pytest.raises(ValueError, match="bad value"):
            await there.ask(("raise", "value"))
        with pytest.raises(Overdraft, match="too much"):
            await there.ask(("raise", "overdraft"))
        with pytest.raises(ta.RemoteError, match=r"test_nodes\.Custom: 1/2") as caught:
            await there.ask(("raise", "custom"))
        assert caught.value.type_name.endswith("test_nodes.Custom")
        with pytest.raises(TypeError, match=r"cannot send .*object.*cannot cross"):
            there.tell(object())


async def test_a_cancelled_remote_ask_is_withdrawn_while_queued(
    cluster_here: ta.Cluster, clock: trio.testing.MockClock | None
) -> None:
    async with two_nodes(cluster_here) as (a, b):
        gate = trio.Event()
        slow = a.spawn(Slow, gate, name="slow")
        a.register("slow", slow)
        there = await remote_ref(a, b, "slow")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(there.ask, "first")  # handled: it waits for the gate
            await trio.sleep(1)
            await eventually(
                lambda: slow.statistics().mailbox_depth == 0 and slow.statistics().handled == 0
            )
            with trio.move_on_after(0.2) as scope:
                await there.ask("second")  # queued behind the first, then cancelled
            assert scope.cancelled_caught
            await eventually(lambda: slow.statistics().withdrawn == 1)  # (reached node a)
            gate.set()
        assert await slow.ask("handled") == ["first"]
        assert slow.statistics().withdrawn == 1


async def test_a_tell_sent_while_an_ask_waits_is_handled_after_the_ask(
    cluster_here: ta.Cluster,
    clock: trio.testing.MockClock | None,
) -> None:
    async with echo_across(cluster_here) as (_a, _b, there):
        sent: list[Any] = []
        async with trio.open_nursery() as nursery:
            for number in range(20):
                nursery.start_soon(there.ask, ("asked", number))
                await trio.testing.wait_all_tasks_blocked()  # (it has sent its ask)
                there.tell(("told", number))
                sent += [("asked", number), ("told", number)]
        assert await there.ask("seen") == sent


async def test_remote_asks_to_a_bounded_mailbox_and_to_a_pool(
    cluster_here: ta.Cluster, clock: trio.testing.MockClock | None
) -> None:
    async with two_nodes(cluster_here) as (a, b):
        gate, entered = trio.Event(), trio.Event()

        class Entering(Slow):
            async def receive(self, message: Any) -> Any:
                entered.set()
                return await super().receive(message)

        local = a.spawn(Entering, gate, name="bounded", mailbox=ta.Bounded(1))
        a.register("bounded", local)
        a.register("pool", a.spawn(ta.Pool(Echo, size=2, routing="balancing"), name="pool"))
        bounded = await remote_ref(a, b, "bounded")
        pool = await remote_ref(a, b, "pool")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(bounded.ask, "first")  # handled: it waits for the gate
            await entered.wait()
            nursery.start_soon(bounded.ask, "second")  # the one room
            await eventually(lambda: local.statistics().mailbox_depth == 1)
            scope = trio.CancelScope()

            async def ask_until_cancelled() -> None:
                with scope:
                    await bounded.ask("withdrawn")

            nursery.start_soon(ask_until_cancelled)
            await eventually(lambda: local.statistics().senders_waiting == 1)  # in line on a
            scope.cancel()  # its CANCEL takes it out of the line: nothing was queued
            await eventually(lambda: local.statistics().withdrawn == 1)
            assert local.statistics().senders_waiting == 0
            nursery.start_soon(bounded.ask, "third")  # waits for room, in line
            await eventually(lambda: local.statistics().senders_waiting == 1)
            assert local.statistics().mailbox_depth == 1
            gate.set()
        assert await bounded.ask("handled") == ["first", "second", "third"]
        stats = local.statistics()
        assert (stats.withdrawn, stats.failed_back, stats.senders_waiting) == (1, 0, 0)
        assert [await pool.ask(n) for n in range(5)] == [0, 1, 2, 3, 4]
        with pytest.raises(ValueError, match="bad value"):
            await pool.ask(("raise", "value"))


async def test_messages_for_actors_and_nodes_that_are_gone(
    cluster_here: ta.Cluster, clock: trio.testing.MockClock | None
) -> None:
    async with ta.open_actor_system(cluster=cluster_here, node="b") as b:
        async with ta.open_actor_system(cluster=cluster_here, node="a") as a:
            echo = a.spawn(Echo, name="echo")
            a.register("echo", echo)
            there = await remote_ref(a, b, "echo")
            await there.stop()
            assert echo.statistics().state == "stopped"
            # Its number finds nothing once it has stopped, though node a still holds
            # its ref (no table holds a cell weakly: remote/_exports.py).
            there.tell("late")
            with pytest.raises(ta.ActorStopped, match="a:system/echo has stopped"):
                await there.ask("late")
            await eventually(lambda: a.dead_letters.count == 1)
            assert [(d.message, d.reason) for d in a.dead_letters.recent] == [("late", "stopped")]
            with pytest.raises(ta.ActorNotFound, match="on any node"):
                await b.lookup("echo")  # (freed when it stopped)
            survivor = a.spawn(Echo, name="survivor")
            a.register("survivor", survivor)
            gone = await remote_ref(a, b, "survivor")
        # Node a has left: its refs reach nobody. (Once b has heard it leave: an ask
        # sent before that races a's bye, and may end with NodeDown "it left".)
        node_b = b.node
        assert node_b is not None
        await eventually(lambda: [m.name for m in node_b.members()] == ["b"])
        gone.tell("into the void")
        with pytest.raises(ta.ActorStopped, match="unreachable"):
            await gone.ask("anyone?")
        await eventually(lambda: b.dead_letters.count == 1)
        letters = [(d.recipient, d.message, d.reason) for d in b.dead_letters.recent]
        assert letters == [(gone, "into the void", "unreachable")]
        assert b.statistics().dead_letters.unreachable == 1
        await gone.stop()  # (a stopped node's actors have stopped: it returns)


async def test_asks_pending_to_a_node_that_dies_fail_with_node_down(
    autojump_clock: trio.testing.MockClock,
) -> None:
    from trio_actors.remote import MemoryBus, MemoryTransport

    bus = MemoryBus(advisories=False)  # (heartbeats only: no word of the cut)
    cluster = ta.Cluster(bus=bus, heartbeat=0.5, heartbeats_missed=3)
    gate = trio.Event()  # never set: the asks wait on node a until it dies
    outcomes: list[str] = []

    async def ask(there: ta.ActorRef, number: int) -> None:
        with pytest.raises(ta.NodeDown, match="may or may not have been handled"):
            await there.ask(number)
        outcomes.append(f"down at {trio.current_time():.1f}")

    async with (
        ta.open_actor_system(cluster=cluster, node="b") as b,
        ta.open_actor_system(cluster=cluster, node="a") as a,
    ):
        a.register("slow", a.spawn(Slow, gate, name="slow"))
        there = await remote_ref(a, b, "slow")
        async with trio.open_nursery() as nursery:
            for number in range(10):
                nursery.start_soon(ask, there, number)
            await trio.sleep(10)  # heartbeats keep node a alive meanwhile
            assert outcomes == []
            assert a.node is not None
            transport_a = Node.of(a).transport
            assert isinstance(transport_a, MemoryTransport)
            died_at = trio.current_time()
            bus.disconnect(transport_a)  # as a kill -9: not a word more from a
        # Declared down after 3 missed beats of 0.5 s (and at most one beat later).
        assert len(outcomes) == 10
        assert all(died_at + 1.5 <= float(o.split()[-1]) <= died_at + 2.5 for o in outcomes), (
            died_at,
            outcomes,
        )
        # A node that leaves says so: what waits on it fails at once.
        c_gate = trio.Event()
        async with ta.open_actor_system(cluster=cluster, node="c") as c:
            c.register("slow", c.spawn(Slow, c_gate, name="slow"))
            on_c = await remote_ref(c, b, "slow")
            async with trio.open_nursery() as nursery:
                nursery.start_soon(ask, on_c, 0)
                await trio.sleep(1)
                left_at = trio.current_time()
                c.node.close()  # type: ignore[union-attr]  # (its "bye", then nothing)
        assert outcomes[-1] == f"down at {left_at:.1f}"


class Failing(ta.Actor):
    def receive(self, message: Any) -> Any:
        raise LookupError(message)


async def test_death_watch_across_nodes_tells_each_watcher_once(
    cluster_here: ta.Cluster, clock: trio.testing.MockClock | None
) -> None:
    async with two_nodes(cluster_here) as (a, b):
        a.register("echo", a.spawn(Echo, name="echo"))
        a.register("failing", a.spawn(Failing, name="failing", supervision=ta.Stop()))
        echo = await remote_ref(a, b, "echo")
        failing = await remote_ref(a, b, "failing")
        watcher = b.spawn(Watcher, name="watcher")
        other = b.spawn(Watcher, name="other")
        for ref in (echo, failing):
            await watcher.ask(("watch", ref))
            await watcher.ask(("watch", ref))  # (twice is once)
        await other.ask(("watch", echo))
        await other.ask(("unwatch", echo))
        await a.node.flush()  # type: ignore[union-attr]
        failing.tell("boom")  # stops it (Stop()): the error crosses with the notice
        await echo.stop()
        terminated = await failing.wait_stopped()
        assert terminated.ref == failing
        assert isinstance(terminated.error, LookupError)

        async def told() -> bool:
            return len(await watcher.ask("notices")) == 2

        await eventually(told)
        assert sorted(await watcher.ask("notices"), key=str) == sorted(
            [(echo, None), (failing, "LookupError")], key=str
        )
        assert await other.ask("notices") == []
        # Watching an actor that has stopped: told at once; wait_stopped returns.
        await other.ask(("watch", echo))

        async def told_other() -> bool:
            return bool(await other.ask("notices") == [(echo, None)])

        await eventually(told_other)
        assert (await echo.wait_stopped()).ref == echo


async def test_a_watch_after_the_stop_was_heard_is_told_at_once_with_its_error(
    cluster_here: ta.Cluster, clock: trio.testing.MockClock | None
) -> None:
    """A node that has heard how a remote actor stopped remembers it (in its remote
    cell, while it holds a ref): later watches and ``wait_stopped`` are told at
    once, with the error, and nothing is sent (its node keeps nothing of it)."""
    async with two_nodes(cluster_here) as (a, b):
        a.register("failing", a.spawn(Failing, name="failing", supervision=ta.Stop()))
        failing = await remote_ref(a, b, "failing")
        first, later = b.spawn(Watcher), b.spawn(Watcher)
        await first.ask(("watch", failing))
        await Node.of(b).flush()  # (its watch is there before the tell)
        failing.tell("boom")

        async def told(watcher: ta.ActorRef) -> bool:
            return bool(await watcher.ask("notices") == [(failing, "LookupError")])

        await eventually(lambda: told(first))
        watches = Node.of(b).watches
        assert watches.watching == {}
        with trio.testing.assert_checkpoints():  # (a checkpoint, as always)
            terminated = await failing.wait_stopped()
        assert isinstance(terminated.error, LookupError)
        await later.ask(("watch", failing))
        assert watches.watching == {}  # (nothing asked of node a)
        await eventually(lambda: told(later))


class Timing(ta.Actor):
    def receive(self, message: Any) -> Any:
        match message:
            case ("tick to", ta.ActorRef() as ref):
                try:
                    self.tell_after(1.0, "tick", to=ref)
                except TypeError as error:
                    return str(error)
        return None


async def test_a_timer_to_another_nodes_actor_is_refused_at_start(
    cluster_here: ta.Cluster, clock: trio.testing.MockClock | None
) -> None:
    # Timers deliver their ticks into a local mailbox; another node's actor has none
    # here, so to= one is a TypeError that says what to do instead.
    async with two_nodes(cluster_here) as (a, b):
        a.register("echo", a.spawn(Echo, name="echo"))
        echo = await remote_ref(a, b, "echo")
        timing = b.spawn(Timing)
        error = await timing.ask(("tick to", echo))
        assert "another node's" in error
        assert "tell it from the tick's handler" in error
        assert b.timers_active() == 0


async def test_watches_of_actors_on_a_node_that_dies_end_with_node_down(
    autojump_clock: trio.testing.MockClock,
) -> None:
    from trio_actors.remote import MemoryBus, MemoryTransport

    bus = MemoryBus()
    cluster = ta.Cluster(bus=bus, heartbeat=0.5)
    async with (
        ta.open_actor_system(cluster=cluster, node="b") as b,
        ta.open_actor_system(cluster=cluster, node="a") as a,
    ):
        a.register("echo", a.spawn(Echo, name="echo"))
        echo = await remote_ref(a, b, "echo")
        watcher = b.spawn(Watcher, name="watcher")
        await watcher.ask(("watch", echo))
        async with trio.open_nursery() as nursery:
            waited: list[ta.Terminated] = []

            async def wait() -> None:
                waited.append(await echo.wait_stopped())

            nursery.start_soon(wait)
            await trio.sleep(5)
            assert a.node is not None
            transport_a = Node.of(a).transport
            assert isinstance(transport_a, MemoryTransport)
            bus.disconnect(transport_a)
        assert [type(t.error) for t in waited] == [ta.NodeDown]
        assert await watcher.ask("notices") == [(echo, "NodeDown")]
        # A watch of an actor on a node that is gone ends at once: nothing serves it.
        late = b.spawn(Watcher, name="late")
        await late.ask(("watch", echo))

        async def told() -> bool:
            return bool(await late.ask("notices") == [(echo, "NodeDown")])

        await eventually(told)


async def test_refs_kept_after_their_node_left_fail_cleanly(
    cluster_here: ta.Cluster, clock: trio.testing.MockClock | None
) -> None:
    async with two_nodes(cluster_here) as (a, b):
        a.register("echo", a.spawn(Echo, name="echo"))
        kept = await remote_ref(a, b, "echo")
    # Both systems have exited: b's node has left the cluster.
    kept.tell("after")  # never raises: a dead letter on b
    assert [(d.message, d.reason) for d in b.dead_letters.recent][-1:] == [("after", "unreachable")]
    with pytest.raises(ta.ActorStopped, match="this node has left the cluster"):
        await kept.ask("after")
    kept.stop_nowait()
    await kept.stop()


async def test_a_disconnect_advisory_declares_the_node_down_at_once(
    autojump_clock: trio.testing.MockClock,
) -> None:
    from trio_actors.remote import MemoryBus, MemoryTransport

    bus = MemoryBus()  # (tells of a cut connection, as a system account does)
    cluster = ta.Cluster(bus=bus, heartbeat=60)  # (heartbeats would take 3 minutes)
    async with (
        ta.open_actor_system(cluster=cluster, node="b") as b,
        ta.open_actor_system(cluster=cluster, node="a") as a,
    ):
        a.register("slow", a.spawn(Slow, trio.Event(), name="slow"))
        there = await remote_ref(a, b, "slow")
        async with trio.open_nursery() as nursery:

            async def pending() -> None:
                with pytest.raises(ta.NodeDown, match="disconnect advisory"):
                    await there.ask("never answered")

            nursery.start_soon(pending)
            await trio.sleep(1)
            assert a.node is not None
            transport_a = Node.of(a).transport
            assert isinstance(transport_a, MemoryTransport)
            cut_at = trio.current_time()
            bus.disconnect(transport_a)
        assert trio.current_time() == cut_at  # (no heartbeat waited for)


FAR_NODE = """
import sys

import trio

import trio_actors as ta


class Gate(ta.Actor):
    async def receive(self, message):
        await trio.sleep_forever()


async def main() -> None:
    cluster = ta.Cluster(sys.argv[1], user="app", password="app", heartbeat=30)
    async with ta.open_actor_system(cluster=cluster, node="far") as system:
        system.register("gate", system.spawn(Gate, name="gate"))
        await system.node.flush()
        print("ready", flush=True)
        await trio.sleep_forever()


trio.run(main)
"""

SYSTEM_ACCOUNT = """
accounts {
  SYS { users = [ { user: sys, password: sys } ] }
  APP { users = [ { user: app, password: app } ] }
}
system_account: SYS
"""


async def test_a_kill_9_is_seen_through_the_system_account_not_heartbeats(
    tmp_path: Any,
) -> None:
    import subprocess
    import sys

    from nats_server import running_nats_server

    with running_nats_server(tmp_path, config=SYSTEM_ACCOUNT) as server, trio.fail_after(60):
        cluster = ta.Cluster(
            server.url,
            user="app",
            password="app",
            system_user="sys",
            system_password="sys",
            heartbeat=30,  # (heartbeats would take 90 s: the safety net above is 60)
        )
        process = await trio.lowlevel.open_process(
            [sys.executable, "-c", FAR_NODE, server.url], stdout=subprocess.PIPE
        )
        try:
            assert process.stdout is not None
            said = b""
            while not said.endswith(b"\n"):  # (a line may come in pieces)
                chunk = await process.stdout.receive_some()
                assert chunk, f"the far node ended: {said!r}"
                said += chunk
            assert said == b"ready\n"
            async with ta.open_actor_system(cluster=cluster, node="near") as near:
                gate = await near.lookup("gate")
                async with trio.open_nursery() as nursery:

                    async def pending() -> None:
                        with pytest.raises(ta.NodeDown, match="disconnect advisory"):
                            await gate.ask("wait")

                    nursery.start_soon(pending)
                    await trio.sleep(0.2)
                    process.kill()  # SIGKILL: no bye; the kernel closes the socket
        finally:
            process.kill()
            await process.wait()
            if process.stdout is not None:
                await process.stdout.aclose()


async def test_nodes_go_on_after_their_server_restarts(tmp_path: Any) -> None:
    import contextlib

    from nats_server import running_nats_server
    from trio_actors.remote import NatsTransport

    with (
        running_nats_server(tmp_path, name="first") as first,
        contextlib.ExitStack() as later,
        trio.fail_after(60),
    ):
        cluster = ta.Cluster(first.url, types=[Order])
        async with two_nodes(cluster) as (a, b):
            echo = a.spawn(Echo, name="echo")
            a.register("echo", echo)
            there = await remote_ref(a, b, "echo")
            assert await there.ask("before") == "before"
            slow = a.spawn(Slow, trio.Event(), name="slow")
            a.register("slow", slow)
            waiting = await remote_ref(a, b, "slow")
            outcomes: list[str] = []

            async def pending() -> None:
                with pytest.raises(ta.NodeDown, match=r"this node.s connection .* was lost"):
                    await waiting.ask("never answered")
                outcomes.append("NodeDown")

            async with trio.open_nursery() as nursery:
                nursery.start_soon(pending)
                await eventually(lambda: slow.statistics().mailbox_depth == 0)
                first.kill()  # the server goes away; both nodes' clients reconnect...
            assert outcomes == ["NodeDown"]  # (not left waiting for a lost answer)
            later.enter_context(running_nats_server(tmp_path, port=first.port, name="second"))
            clients = []
            for system in (a, b):
                assert system.node is not None
                transport_system = Node.of(system).transport
                assert isinstance(transport_system, NatsTransport)
                clients.append(transport_system.client)
            # (... and resubscribe everything: the node, its replies, its names)
            await eventually(lambda: all(c.status == "connected" for c in clients))
            for system in (a, b):
                assert system.node is not None
                await system.node.flush()
            assert await there.ask("after") == "after"
            there.tell(("told", "after"))
            assert await there.ask("seen") == ["before", "after", ("told", "after")]
            assert await b.lookup("echo") == there
            assert await echo.ask("seen") == ["before", "after", ("told", "after")]


class Big(ta.Actor):
    def receive(self, message: Any) -> Any:
        if message == "too big":
            return b"x" * 2_000_000  # (over the server's max_payload of 1 MB)
        if message == "unpicklable":
            raise ValueError(lambda: None)
        return message


async def test_what_a_node_cannot_decode_or_send_ends_as_an_error_not_the_node(
    cluster_here: ta.Cluster,
    clock: trio.testing.MockClock | None,
) -> None:
    import attrs

    knows = attrs.evolve(cluster_here, types=[Order], pickle=True)
    ignorant = attrs.evolve(cluster_here, types=[], pickle=False)
    async with (
        ta.open_actor_system(cluster=ignorant, node="a") as a,
        ta.open_actor_system(cluster=knows, node="b") as b,
    ):
        a.register("big", a.spawn(Big, name="big"))
        there = await remote_ref(a, b, "big")
        there.tell(Order("tea", 1))  # a type node a does not register
        await eventually(lambda: a.dead_letters.count == 1)
        letter = a.dead_letters.recent[-1]
        assert letter.reason == "undecodable"
        assert isinstance(letter.message, bytes)
        assert a.statistics().dead_letters.undecodable == 1
        if cluster_here.bus is None:  # (the in-memory bus has no max_payload)
            with pytest.raises(ta.RemoteError, match="MaxPayloadExceeded"):
                await there.ask("too big")
        with pytest.raises(ValueError, match="function"):  # (its argument could not go)
            await there.ask("unpicklable")
        assert await there.ask("still here") == "still here"  # node a goes on


async def test_names_are_cluster_wide_one_holder_each(
    cluster_here: ta.Cluster, clock: trio.testing.MockClock | None, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="trio_actors")
    async with two_nodes(cluster_here) as (a, b):
        a_echo = a.spawn(Echo, name="a-echo")
        b_echo = b.spawn(Echo, name="b-echo")
        a.register("counter", a_echo)
        await eventually(lambda: "counter" in b.node.names.held)  # type: ignore[union-attr]
        with pytest.raises(ValueError, match=r"'counter': a:system/a-echo holds it on node 'a'"):
            b.register("counter", b_echo)
        assert "counter" not in b.registered()
        # Freed there (unregistered, or its actor stopped): free here.
        a.unregister("counter")
        await eventually(lambda: "counter" not in b.node.names.held)  # type: ignore[union-attr]
        b.register("counter", b_echo)
        await eventually(lambda: "counter" in a.node.names.held)  # type: ignore[union-attr]
        with pytest.raises(ValueError, match="holds it on node 'b'"):
            a.register("counter", a_echo)
        await b_echo.stop()
        await eventually(lambda: "counter" not in a.node.names.held)  # type: ignore[union-attr]
        a.register("counter", a_echo)
        # Registered on both before either heard of the other: node a (first in order)
        # keeps it, b withdraws its registration and says so.
        b_other = b.spawn(Echo, name="b-other")
        a.register("both", a_echo)
        b.register("both", b_other)
        await eventually(lambda: "both" not in b.registered())
        assert "both" in a.registered()
        assert await b.lookup("both") == await remote_ref(a, b, "both")
        assert "registered on node 'b' and on node 'a'" in caplog.text
        assert await b_other.ask("ping") == "ping"  # (it lives on, without the name)


async def test_a_node_registering_before_its_first_heartbeat_still_learns_the_names(
    autojump_clock: trio.testing.MockClock,
) -> None:
    from trio_actors.remote import MemoryBus

    cluster = ta.Cluster(bus=MemoryBus(), heartbeat=0.5)
    async with ta.open_actor_system(cluster=cluster, node="z") as z:
        z.register("svc", z.spawn(Echo, name="svc"))
        await trio.sleep(1)
        async with ta.open_actor_system(cluster=cluster, node="b") as b:
            b.register("mine", b.spawn(Echo))  # (z meets b by this claim, not a beat)
            await trio.sleep(0.1)
            with pytest.raises(ValueError, match="holds it on node 'z'"):
                b.register("svc", b.spawn(Echo))
            assert "svc" in z.registered()


@pytest.mark.parametrize("advisories", [True, False], ids=["advisory", "heartbeats"])
async def test_a_node_that_joins_learns_the_names_and_a_dead_nodes_names_are_free(
    autojump_clock: trio.testing.MockClock, advisories: bool
) -> None:
    from trio_actors.remote import MemoryBus, MemoryTransport

    bus = MemoryBus(advisories=advisories)
    cluster = ta.Cluster(bus=bus, heartbeat=0.5)
    async with ta.open_actor_system(cluster=cluster, node="a") as a:
        a.register("service", a.spawn(Echo, name="service"))
        async with ta.open_actor_system(cluster=cluster, node="b") as b:
            await trio.sleep(1.25)  # (b's first heartbeat: a announces its names again)
            with pytest.raises(ValueError, match="holds it on node 'a'"):
                b.register("service", b.spawn(Echo))
            assert a.node is not None
            transport_a = Node.of(a).transport
            assert isinstance(transport_a, MemoryTransport)
            bus.disconnect(transport_a)  # (as a kill -9, between two beats)
            await trio.sleep(0.1)
            if not advisories:  # (silent for less than 3 beats of 0.5 s: not yet down)
                with pytest.raises(ValueError, match="holds it on node 'a'"):
                    b.register("service", b.spawn(Echo))
                await trio.sleep(1.3)  # (past them: down)
            b.register("service", b.spawn(Echo))


async def test_a_node_whose_block_is_cancelled_from_outside_still_answers_and_says_bye(
    cluster_here: ta.Cluster,
    clock: trio.testing.MockClock | None,
) -> None:
    gate = trio.Event()  # never set: the ask waits on node a until a's block ends

    async def run_a(*, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        with trio.CancelScope() as scope:
            async with ta.open_actor_system(cluster=cluster_here, node="a") as a:
                a.register("slow", a.spawn(Slow, gate, name="slow"))
                assert a.node is not None
                await a.node.flush()
                task_status.started(scope)
                await trio.sleep_forever()

    async with (
        ta.open_actor_system(cluster=cluster_here, node="b") as b,
        trio.open_nursery() as nursery,
    ):
        scope = await nursery.start(run_a)
        there = await b.lookup("slow")
        with trio.fail_after(2):  # (heartbeats would take 3 s: the answer must come)
            async with trio.open_nursery() as asks:

                async def ask() -> None:
                    with pytest.raises(ta.ActorStopped, match="stopped"):
                        await there.ask("never answered")

                asks.start_soon(ask)
                await trio.sleep(0.2)
                scope.cancel()  # (a's whole block, from outside)


async def test_remote_tells_from_another_thread_are_encoded_there(
    cluster_here: ta.Cluster,
    clock: trio.testing.MockClock | None,
) -> None:
    async with echo_across(cluster_here) as (_a, _b, there):

        def from_a_thread() -> str:
            for number in range(5):
                there.tell(("from a thread", number))
            try:
                there.tell(object())
            except TypeError as error:
                return str(error)
            return "no error"

        said = await trio.to_thread.run_sync(from_a_thread)
        assert "object" in said  # (raised in that thread)
        assert "cannot cross" in said
        assert await there.ask("seen") == [("from a thread", n) for n in range(5)]


async def test_a_burst_of_tells_arrives_whole_in_order_in_fewer_messages(
    cluster_here: ta.Cluster,
    clock: trio.testing.MockClock | None,
) -> None:
    from trio_actors.remote import MemoryBus, NatsTransport

    bus = cluster_here.bus
    async with echo_across(cluster_here) as (_a, b, there):
        assert b.node is not None
        transport = Node.of(b).transport
        count: Callable[[], int] = (
            (lambda: transport.client.messages_out)
            if isinstance(transport, NatsTransport)
            else (lambda: bus.published if isinstance(bus, MemoryBus) else 0)
        )
        before = count()
        for number in range(1_000):
            there.tell(number)
        assert await there.ask("seen") == list(range(1_000))
        assert count() - before < 1_000 // 4  # (tells coalesced: at most 64 a message)


async def test_refs_told_from_several_threads_at_once_are_exported_once(
    cluster_here: ta.Cluster,
    clock: trio.testing.MockClock | None,
) -> None:
    async with echo_across(cluster_here) as (a, b, there):
        fresh = [b.spawn(Echo) for _ in range(20)]  # (refs that never left node b)

        def tell_them_all() -> None:
            for ref in fresh:
                there.tell(ref)

        async with trio.open_nursery() as threads:
            for _ in range(4):
                threads.start_soon(trio.to_thread.run_sync, tell_them_all)
        seen = await there.ask("seen")
        assert len(seen) == 4 * len(fresh)
        assert set(seen) == set(fresh)  # (back on node b: its own actors)
        as_a_has_them = await (await a.lookup("echo")).ask("seen")
        assert len(set(as_a_has_them)) == len(fresh)  # (one export number each)


async def test_the_record_of_tells_to_a_node_never_heard_from_goes_with_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    from trio_actors.remote import MemoryBus

    cluster = ta.Cluster(bus=MemoryBus(), heartbeat=1.0)
    async with ta.open_actor_system(cluster=cluster, node="a") as a:
        assert a.node is not None
        ghost = Node.of(a).ref_from_wire("ghost", "0123456789ab", "system/gone", 1)
        ghost.tell("anyone?")
        await trio.sleep(0.5)
        assert [d.reason for d in a.dead_letters.recent] == ["unreachable"]
        ghost_node = ("ghost", "0123456789ab")
        assert Node.of(a).peers.current_link(ghost_node) is not None
        assert Node.of(a).peers.state(ghost_node) is PeerState.EXPECTED
        await trio.sleep(cluster.heartbeat * (cluster.heartbeats_missed + 1))
        assert Node.of(a).peers.current_link(ghost_node) is None  # (declared down: gone)
        assert Node.of(a).peers.state(ghost_node) is PeerState.UNKNOWN
        assert a.node.unconfirmed == 0  # (its one tell came back: not counted)


async def test_tells_after_a_wrong_node_down_are_accounted_if_it_really_dies(
    autojump_clock: trio.testing.MockClock,
) -> None:
    from trio_actors.remote import MemoryBus, MemoryTransport

    bus = MemoryBus()
    cluster = ta.Cluster(bus=bus)
    async with echo_across(cluster) as (a, b, there):
        assert a.node is not None
        assert b.node is not None
        peer = (a.node.name, a.node.incarnation)
        Node.of(b).peers.down(peer, "wrongly, for the test")  # (node a is alive)
        await trio.sleep(1)
        await trio.testing.wait_all_tasks_blocked()  # (nothing waits to be written)
        there.tell("after the wrong down")  # (leaves at once: routed to node a)
        transport_a = Node.of(a).transport
        assert isinstance(transport_a, MemoryTransport)
        bus.disconnect(transport_a)  # (a dies with it in flight: never taken in)
        await trio.sleep(5)  # (the advisory; b counts what a never acknowledged)
        echo = await a.lookup("echo")  # (node a's own, alive but cut off)
        assert await echo.ask("seen") == []  # (the tell was lost in flight)
        assert b.node.unconfirmed == 1  # (not silently gone: counted)


class FlakyWatcher(Watcher):
    def receive(self, message: Any) -> Any:
        if message == "fail":
            raise RuntimeError("restart me")
        return super().receive(message)


async def test_remote_watches_end_with_their_watchers_restart_or_stop(
    cluster_here: ta.Cluster,
    clock: trio.testing.MockClock | None,
) -> None:
    async with two_nodes(cluster_here) as (a, b):
        assert b.node is not None
        a.register("first", a.spawn(Echo, name="first"))
        a.register("second", a.spawn(Echo, name="second"))
        first = await remote_ref(a, b, "first")
        second = await remote_ref(a, b, "second")
        watcher = b.spawn(FlakyWatcher, name="watcher")
        await watcher.ask(("watch", first))
        await watcher.ask(("watch", second))
        assert len(Node.of(b).watches.watching) == 2
        with pytest.raises(RuntimeError):
            await watcher.ask("fail")  # (restarted: its watches go, as locally -- Akka's)
        await eventually(lambda: not b.node.watches.watching)  # type: ignore[union-attr]
        await watcher.ask(("watch", second))  # (the fresh instance watches what it wants)
        await first.stop()
        await second.stop()
        await eventually(lambda: watcher.ask("notices"))
        assert await watcher.ask("notices") == [(second, None)]
        other = b.spawn(Watcher, name="other")
        a.register("third", a.spawn(Echo, name="third"))
        third = await remote_ref(a, b, "third")
        await other.ask(("watch", third))
        assert len(Node.of(b).watches.watching) == 1
        await other.stop()  # (its watches go with it)
        assert Node.of(b).watches.watching == {}
        await third.stop()
        assert b.dead_letters.count == 0  # (nobody was told)

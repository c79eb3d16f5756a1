"""Every request ends through a real NATS server failover (``remote/_confirm.py``).

Three ``nats-server`` processes clustered with routes (``tests/nats_server.py``), a
node on each -- each given its own server first and the others to fail over to --
and, with asks, stops, watches, lookups and tells in flight from node ``a`` to node
``b``, ``b``'s server killed with SIGKILL: what that server was routing is gone,
while ``b`` fails over to another server and goes on beating (it is never declared
down). And a lone server restarted on its port under the same load.

What is asserted holds whatever the timing (which messages the kill takes is up to
the kernel and the scheduler): every request ends -- with its answer,
:exc:`~trio_actors.ConnectionInterrupted` or :exc:`~trio_actors.NodeDown`, never
``ActorStopped`` for an actor that did not stop -- and every tell is accounted. The
trio deadlines below only detect a hang; no assertion depends on how long anything
took. Each test prints what happened to its requests and tells (``pytest -s``).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.lowlevel

import trio_actors as ta
from nats_server import NatsServer, running_nats_cluster, running_nats_server
from trio_actors.remote import NatsTransport, Node

HEARTBEAT = 0.25
MISSED = 3
HANG = 30.0  # seconds: only a hang detector (a request that never ends fails here)
PACE = 0.002  # seconds between ten tells (room for the asks: no flood)
ASKERS = 16  # asks in flight at any time, each asker to an actor of its own
BEFORE = 600  # tells (and ASKERS * 2 asks) before the kill, and again after it
STOPPED = 6  # actors watched after they had stopped
VICTIMS = 12  # actors stopped across the kill
WATCHED = 12  # actors watched across the kill

ENDINGS = {"answered", "ConnectionInterrupted", "NodeDown"}
"""How an ask or a stop may end (never ActorStopped: no actor here stops by itself)."""


class Sink(ta.Actor):
    """``b``'s actor: takes tells, answers asks (``("sleep", s, tag)``: after ``s`` s)."""

    def __init__(self) -> None:
        self.handled: list[int] = []

    async def receive(self, message: Any) -> Any:
        match message:
            case ("tell", int(number)):
                self.handled.append(number)
                return None
            case ("sleep", seconds, tag):
                await trio.sleep(seconds)
                return tag
            case "handled":
                return list(self.handled)
        return message


class Idle(ta.Actor):
    def receive(self, message: Any) -> Any:
        return message


class Directory(ta.Actor):
    """``b``'s refs for ``a``: asked a key, gives them."""

    def __init__(self, refs: dict[str, list[ta.ActorRef]]) -> None:
        self.refs = refs

    def receive(self, message: Any) -> Any:
        return self.refs[message]


class Watcher(ta.Actor):
    """``a``'s watcher: watches what it is given; keeps the notices by ref."""

    def __init__(self) -> None:
        self.notices: dict[ta.ActorRef, list[ta.Terminated]] = {}

    def receive(self, message: Any) -> Any:
        match message:
            case ("watch", ta.ActorRef() as ref):
                self.watch(ref)
            case ta.Terminated() as notice:
                self.notices.setdefault(notice.ref, []).append(notice)
            case "notices":
                return dict(self.notices)
        return None


def client_of(system: ta.ActorSystem) -> Any:
    transport = Node.of(system).transport
    assert isinstance(transport, NatsTransport)
    return transport.client


def tally(outcomes: list[str]) -> dict[str, int]:
    return {outcome: outcomes.count(outcome) for outcome in sorted(set(outcomes))}


async def until(condition: Callable[[], Any], what: str) -> None:
    """Wait (polling) until ``condition()`` -- a value, or an awaitable of one -- is
    true; fail naming ``what`` if it is not within :data:`HANG` seconds."""
    with trio.move_on_after(HANG):
        while True:
            value = condition()
            if await value if hasattr(value, "__await__") else value:
                return
            await trio.sleep(HEARTBEAT / 5)
    pytest.fail(f"{what}: not within {HANG} s", pytrace=False)


@asynccontextmanager
async def nodes_on(
    servers: list[NatsServer], names: list[str]
) -> AsyncIterator[list[ta.ActorSystem]]:
    """A node per server: node ``i`` is given server ``i`` first, then the others
    (in the ring's order) to fail over to."""
    async with contextlib.AsyncExitStack() as stack:
        systems = []
        for index, name in enumerate(names):
            urls = [server.url for server in servers[index:] + servers[:index]]
            cluster = ta.Cluster(urls, heartbeat=HEARTBEAT, heartbeats_missed=MISSED)
            systems.append(
                await stack.enter_async_context(ta.open_actor_system(cluster=cluster, node=name))
            )
        yield systems


class Load:
    """Node ``a``'s load on node ``b``: tells to ``b``'s sink, asks (one in four
    held a while by ``b``), lookups of the sink's name, and stops -- each request
    recorded in :attr:`pending` while it waits and then by how it ended."""

    def __init__(self, a: ta.ActorSystem, b: ta.ActorSystem, sink: ta.ActorRef) -> None:
        self.a, self.b, self.sink = a, b, sink
        self.told = 0
        self.asks: list[str] = []
        self.stops: list[str] = []
        self.lookups: list[str] = []
        self.pending: set[str] = set()
        self.stopping = trio.Event()

    async def start(self, nursery: trio.Nursery, echoes: list[ta.ActorRef]) -> None:
        """Start telling, asking (an asker per ref of ``echoes``) and looking up;
        return once :data:`BEFORE` tells and two asks per asker are done."""
        nursery.start_soon(self._tell)
        nursery.start_soon(self._look_up)
        for index, echo in enumerate(echoes):
            nursery.start_soon(self._ask, index, echo)
        await self.more()

    async def more(self) -> None:
        """Return once :data:`BEFORE` more tells and two more asks per asker are done."""
        told, asked = self.told, len(self.asks)
        await until(
            lambda: self.told >= told + BEFORE and len(self.asks) >= asked + 2 * ASKERS,
            "tells and asks",
        )

    async def end(self, nursery: trio.Nursery) -> list[str]:
        """Stop making requests; wait until every one has ended. Return those that
        have not within :data:`HANG` seconds (the hang detector)."""
        self.stopping.set()
        with trio.move_on_after(HANG):
            while self.pending:  # noqa: ASYNC110 (a set the requests change: no event)
                await trio.sleep(HEARTBEAT / 5)
        nursery.cancel_scope.cancel()
        return sorted(self.pending)

    async def _tell(self) -> None:
        while not self.stopping.is_set():
            for _ in range(10):
                self.sink.tell(("tell", self.told))
                self.told += 1
            await trio.sleep(PACE)

    async def _ask(self, index: int, echo: ta.ActorRef) -> None:
        number = 0
        while not self.stopping.is_set():
            number += 1
            tag = f"ask {index}.{number}"
            message = ("sleep", HEARTBEAT / 2, tag) if number % 4 == 1 else tag
            self.pending.add(tag)
            try:
                assert await echo.ask(message) == tag
                self.asks.append("answered")
            except (ta.NodeDown, ta.ActorStopped) as error:
                self.asks.append(type(error).__name__)
            finally:
                self.pending.discard(tag)

    async def _look_up(self) -> None:
        number = 0
        while not self.stopping.is_set():
            number += 1
            tag = f"lookup {number}"
            self.pending.add(tag)
            try:
                assert await self.a.lookup("sink") == self.sink
                self.lookups.append("answered")
            except ta.ActorNotFound as error:  # (within its bound: else wrong)
                bounded = "no node answered" in str(error)
                self.lookups.append("unanswered" if bounded else f"wrong: {error}")
            finally:
                self.pending.discard(tag)

    async def stop(self, index: int, ref: ta.ActorRef) -> None:
        tag = f"stop {index}"
        self.pending.add(tag)
        try:
            await ref.stop()
            self.stops.append("answered")
        except (ta.NodeDown, ta.ActorStopped) as error:
            self.stops.append(type(error).__name__)
        finally:
            self.pending.discard(tag)

    def check_requests(self) -> None:
        assert set(self.asks) <= ENDINGS, tally(self.asks)
        assert set(self.stops) <= ENDINGS, tally(self.stops)
        assert set(self.lookups) <= {"answered", "unanswered"}, tally(self.lookups)

    def check_no_dead_letters_while_up(self, dead: int) -> None:
        """No tell became a dead letter (``"unreachable"``: NATS's no-responders)
        while ``b`` was up -- between two connections, what bounced waits and is
        sent again. Only a ``NodeDown`` (an outage longer than ``b``'s silence
        allows, on a loaded machine) makes that a tell's true fate."""
        if "NodeDown" not in self.asks:
            assert dead == 0, f"{dead} tells made dead letters while their node was up"

    async def tells(self) -> tuple[int, int, int]:
        """How many tells were handled on ``b``, are dead letters on ``a`` or ``b``
        (but in doubt), and were given back in doubt on ``a``. Each tell is at most
        one of the first two, once; one in doubt may have been handled too, but is
        no other dead letter; ``a`` counts as unconfirmed exactly those in doubt."""
        handled = await self.sink.ask("handled")
        letters = [
            (letter.message[1], letter.reason)
            for system in (self.a, self.b)
            for letter in system.dead_letters.recent
            if isinstance(letter.message, tuple) and letter.message[:1] == ("tell",)
        ]
        dead = [tell for tell, reason in letters if reason != "in-doubt"]
        in_doubt = [tell for tell, reason in letters if reason == "in-doubt"]
        assert len(set(handled)) == len(handled), "a tell was handled twice"
        # (T2 across the failover: a tell that bounced is sent again, and what came
        # after it is held until it comes -- never handled ahead of it)
        assert handled == sorted(handled), "tells handled out of the order they were told"
        assert len(set(dead)) == len(dead), "a tell was made a dead letter twice"
        assert len(set(in_doubt)) == len(in_doubt), "a tell was given back twice"
        assert not set(handled) & set(dead), "a tell was handled and made a dead letter"
        assert not set(in_doubt) & set(dead), "a tell in doubt was a dead letter too"
        assert set(handled) | set(dead) | set(in_doubt) <= set(range(self.told))
        assert len(in_doubt) == Node.of(self.a).unconfirmed
        return len(handled), len(dead), len(set(in_doubt) - set(handled))

    async def settled_tells(self) -> tuple[int, int, int]:
        """:meth:`tells`, once all are accounted and a few more rounds have passed
        (so that what would be counted twice is): the handled, the dead letters and
        those in doubt that were not handled -- these add up to what was told,
        exactly, when every tell is accounted."""

        async def all_accounted() -> bool:
            return sum(await self.tells()) >= self.told

        await until(all_accounted, "every tell accounted")
        await trio.sleep(3 * HEARTBEAT)
        return await self.tells()

    def summary(self, handled: int, dead: int, unconfirmed: int) -> str:
        return (
            f"{self.told} tells ({handled} handled, {dead} dead letters, {unconfirmed} "
            f"in doubt and not handled); asks {tally(self.asks)}; stops {tally(self.stops)}; "
            f"lookups {tally(self.lookups)}"
        )


async def test_requests_in_flight_through_a_killed_server_all_end(tmp_path: Path) -> None:
    with running_nats_cluster(tmp_path) as servers, trio.fail_after(4 * HANG):
        async with nodes_on(servers, ["a", "b", "c"]) as (a, b, _c):
            sink = b.spawn(Sink, name="sink")
            echoes = [b.spawn(Sink) for _ in range(ASKERS)]
            stopped = [b.spawn(Idle) for _ in range(STOPPED)]
            victims = [b.spawn(Idle) for _ in range(VICTIMS)]
            watched = [b.spawn(Idle) for _ in range(WATCHED)]
            refs = {"echoes": echoes, "stopped": stopped, "victims": victims, "watched": watched}
            b.register("directory", b.spawn(Directory, refs, name="directory"))
            b.register("sink", sink)
            await Node.of(b).flush()
            directory = await a.lookup("directory")
            load = Load(a, b, await a.lookup("sink"))
            echoes_there = await directory.ask("echoes")
            stopped_there = await directory.ask("stopped")
            victims_there = await directory.ask("victims")
            watched_there = await directory.ask("watched")
            for ref in stopped:
                await ref.stop()
            watcher = a.spawn(Watcher)

            async with trio.open_nursery() as nursery:
                await load.start(nursery, echoes_there)
                # In flight at the kill: half the stops and watches sent just before
                # it, half just after (while b is between two connections).
                for ref in stopped_there[: STOPPED // 2] + watched_there[: WATCHED // 2]:
                    watcher.tell(("watch", ref))
                for index, ref in enumerate(victims_there[: VICTIMS // 2]):
                    nursery.start_soon(load.stop, index, ref)
                await trio.lowlevel.checkpoint()
                reconnects = client_of(b).reconnects
                servers[1].kill()  # SIGKILL: what it routes is lost; b fails over
                for ref in stopped_there[STOPPED // 2 :] + watched_there[WATCHED // 2 :]:
                    watcher.tell(("watch", ref))
                for index, ref in enumerate(victims_there[VICTIMS // 2 :], VICTIMS // 2):
                    nursery.start_soon(load.stop, index, ref)
                await until(
                    lambda: (
                        client_of(b).reconnects > reconnects and client_of(b).status == "connected"
                    ),
                    "b's failover to another server",
                )
                await load.more()
                hung = await load.end(nursery)
            assert not hung, f"requests that never ended: {hung}"
            assert client_of(b).server_info.get("port") != servers[1].port  # (failed over)
            load.check_requests()
            assert len(load.stops) == VICTIMS
            assert all(ref.statistics().state == "running" for ref in [sink, *echoes])

            # Every watch ends with the actor's own Terminated: of the actors stopped
            # before, and of the others once they stop now.
            for ref in watched + victims:  # (a stop that was interrupted may be lost)
                await ref.stop()

            async def all_notified() -> bool:
                notices = await watcher.ask("notices")
                return all(ref in notices for ref in stopped_there + watched_there)

            await until(all_notified, "a Terminated for every watched actor")
            notices = await watcher.ask("notices")
            assert all(len(notices[ref]) == 1 for ref in stopped_there + watched_there)
            errors = [n.error for ref in watched_there for n in notices[ref] if n.error]
            assert not errors, errors

            # Every tell accounted, exactly: handled on b, a dead letter on b or a, or
            # given back in doubt on a (lost on the way, found by a confirm round).
            handled, dead, in_doubt = await load.settled_tells()
            assert handled + dead + in_doubt == load.told, load.summary(*await load.tells())
            load.check_no_dead_letters_while_up(dead)
            print(f"failover: {load.summary(handled, dead, in_doubt)}")


async def test_requests_in_flight_while_the_server_restarts_never_end_as_actor_stopped(
    tmp_path: Path,
) -> None:
    # A lone server killed and started again on its port: both nodes lose their
    # connection and reconnect, one after the other; what is sent meanwhile meets
    # nothing serving the other node. Asks end answered, or with
    # ConnectionInterrupted (the asking node's own connection was lost) or
    # NodeDown -- never with ActorStopped: the actors never stopped.
    with contextlib.ExitStack() as servers, trio.fail_after(4 * HANG):
        server = servers.enter_context(running_nats_server(tmp_path, name="first"))
        async with nodes_on([server], ["a", "b"]) as (a, b):
            sink = b.spawn(Sink, name="sink")
            echoes = [b.spawn(Sink) for _ in range(ASKERS)]
            b.register("directory", b.spawn(Directory, {"echoes": echoes}, name="directory"))
            b.register("sink", sink)
            await Node.of(b).flush()
            load = Load(a, b, await a.lookup("sink"))
            echoes_there = await (await a.lookup("directory")).ask("echoes")
            clients = [client_of(a), client_of(b)]

            async with trio.open_nursery() as nursery:
                await load.start(nursery, echoes_there)
                reconnects = [client.reconnects for client in clients]
                server.kill()  # (the nodes run on while it starts again: in a thread)
                again = running_nats_server(tmp_path, port=server.port, name="second")
                await trio.to_thread.run_sync(servers.enter_context, again)
                await until(
                    lambda: all(
                        client.reconnects > before and client.status == "connected"
                        for client, before in zip(clients, reconnects, strict=True)
                    ),
                    "both nodes reconnected",
                )
                await load.more()
                hung = await load.end(nursery)
            assert not hung, f"requests that never ended: {hung}"
            load.check_requests()
            assert all(ref.statistics().state == "running" for ref in [sink, *echoes])

            # The asking node lost its own connection: the tells b had not
            # acknowledged are acknowledged after the reconnect, or found lost by a
            # confirm round and given back in doubt. None is lost silently.
            handled, dead, in_doubt = await load.settled_tells()
            summary = load.summary(handled, dead, in_doubt)
            assert handled + dead + in_doubt == load.told, summary
            load.check_no_dead_letters_while_up(dead)
            print(f"restart: {summary}")

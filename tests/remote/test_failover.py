"""Every request ends through a real NATS server failover (``remote/_confirm.py``).

Three ``nats-server`` processes clustered with routes (``tests/nats_server.py``), a
node on each -- each given its own server first and the others to fail over to --
and, with asks, stops, watches and tells in flight from node ``a`` to node ``b``,
``b``'s server killed with SIGKILL: what that server was routing is gone, while
``b`` fails over to another server and goes on beating (it is never declared down).
And a lone server restarted on its port while asks are in flight.

What is asserted holds whatever the timing (which messages the kill takes is up to
the kernel and the scheduler): every request ends -- with its answer,
:exc:`~trio_actors.ConnectionInterrupted` or :exc:`~trio_actors.NodeDown`, never
``ActorStopped`` for an actor that did not stop -- and every tell is accounted
exactly once. The trio deadlines below only detect a hang; no assertion depends on
how long anything took.
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
PACE = 0.002  # seconds between ten tells
HANG = 30.0  # seconds: only a hang detector (a request that never ends fails here)
ASKERS = 16  # asks in flight at any time
BEFORE_KILL = 600  # tells (and asks: ASKERS times two) before the kill
AFTER_FAILOVER = 600  # ... and after b has failed over
STOPPED = 6  # actors watched after they had stopped
VICTIMS = 12  # actors stopped across the kill
WATCHED = 12  # actors watched across the kill


class Sink(ta.Actor):
    """``b``'s actor: takes tells, answers asks (``("sleep", s)``: after ``s`` s)."""

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
    """``b``'s refs for ``a``: ``"refs"`` gives them."""

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


def outcome_of(error: BaseException | None) -> str:
    """How a request ended, as a word ("answered" or the error's class)."""
    return "answered" if error is None else type(error).__name__


ENDINGS = {"answered", "ConnectionInterrupted", "NodeDown"}


async def until(condition: Callable[[], Any], what: str, within: float = HANG) -> None:
    """Wait (polling) until ``condition()`` is true; fail naming ``what`` if it is
    not within ``within`` seconds (a hang detector)."""
    with trio.move_on_after(within):
        while not await _value(condition()):  # noqa: ASYNC110 (counters: no event)
            await trio.sleep(HEARTBEAT / 5)
        return
    pytest.fail(f"{what}: not within {within} s", pytrace=False)


async def _value(value: Any) -> Any:
    return await value if hasattr(value, "__await__") else value


async def never_ending(pending: set[str]) -> list[str]:
    """Wait until no request is ``pending``; the ones still pending after
    :data:`HANG` seconds (the hang detector), if any."""
    with trio.move_on_after(HANG):
        while pending:  # noqa: ASYNC110 (a set the requests change: no event)
            await trio.sleep(HEARTBEAT / 5)
    return sorted(pending)


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


def told_handled_and_dead(
    handled: list[int], *systems: ta.ActorSystem
) -> tuple[set[int], set[int], int]:
    """The tells handled (each once), those dead letters on ``systems`` (each once),
    and how many of those were dead letters."""
    dead = [
        letter.message[1]
        for system in systems
        for letter in system.dead_letters.recent
        if isinstance(letter.message, tuple) and letter.message[:1] == ("tell",)
    ]
    assert len(set(handled)) == len(handled), "a tell was handled twice"
    assert len(set(dead)) == len(dead), "a tell was made a dead letter twice"
    assert not set(handled) & set(dead), "a tell was handled and made a dead letter"
    return set(handled), set(dead), len(dead)


async def test_requests_in_flight_through_a_killed_server_all_end(tmp_path: Path) -> None:
    with running_nats_cluster(tmp_path) as servers, trio.fail_after(4 * HANG):
        async with nodes_on(servers, ["a", "b", "c"]) as (a, b, _c):
            b_server = servers[1]
            sink = b.spawn(Sink, name="sink")
            stopped = [b.spawn(Idle) for _ in range(STOPPED)]
            victims = [b.spawn(Idle) for _ in range(VICTIMS)]
            watched = [b.spawn(Idle) for _ in range(WATCHED)]
            echoes = [b.spawn(Sink) for _ in range(ASKERS)]  # (one per asker)
            refs = {"stopped": stopped, "victims": victims, "watched": watched, "echoes": echoes}
            b.register("directory", b.spawn(Directory, refs, name="directory"))
            b.register("sink", sink)
            await Node.of(b).flush()
            directory = await a.lookup("directory")
            there = await a.lookup("sink")
            stopped_there = await directory.ask("stopped")
            victims_there = await directory.ask("victims")
            watched_there = await directory.ask("watched")
            echoes_there = await directory.ask("echoes")
            for ref in stopped:
                await ref.stop()
            watcher = a.spawn(Watcher)
            assert await there.ask("ready") == "ready"

            told = 0
            asks: list[str] = []
            stops: list[str] = []
            lookups: list[str] = []
            pending: set[str] = set()
            stop_pumping = trio.Event()

            async def ask(echo: ta.ActorRef, tag: str, message: Any, expected: Any) -> None:
                pending.add(tag)
                error: BaseException | None = None
                try:
                    assert await echo.ask(message) == expected
                except (ta.NodeDown, ta.ActorStopped) as raised:
                    error = raised
                finally:
                    pending.discard(tag)
                asks.append(outcome_of(error))

            async def asker(index: int) -> None:
                number = 0
                echo = echoes_there[index]
                while not stop_pumping.is_set():
                    number += 1
                    tag = f"ask {index}.{number}"
                    if number % 4 == 1:  # (held by b a while: answered after the kill)
                        await ask(echo, tag, ("sleep", HEARTBEAT / 2, tag), tag)
                    else:
                        await ask(echo, tag, tag, tag)

            async def stop(index: int, ref: ta.ActorRef) -> None:
                tag = f"stop {index}"
                pending.add(tag)
                error: BaseException | None = None
                try:
                    await ref.stop()
                except (ta.NodeDown, ta.ActorStopped) as raised:
                    error = raised
                finally:
                    pending.discard(tag)
                stops.append(outcome_of(error))

            async def looker() -> None:
                number = 0
                while not stop_pumping.is_set():
                    number += 1
                    tag = f"lookup {number}"
                    pending.add(tag)
                    try:
                        assert await a.lookup("sink") == there
                        lookups.append("answered")
                    except ta.ActorNotFound as error:  # (within its bound: else wrong)
                        bounded = "no node answered" in str(error)
                        lookups.append("unanswered" if bounded else f"wrong: {error}")
                    finally:
                        pending.discard(tag)

            async def teller() -> None:
                nonlocal told
                while not stop_pumping.is_set():
                    for _ in range(10):
                        there.tell(("tell", told))
                        told += 1
                    await trio.sleep(PACE)  # (room for the asks: no flood)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(teller)
                nursery.start_soon(looker)
                for index in range(ASKERS):
                    nursery.start_soon(asker, index)
                await until(
                    lambda: told >= BEFORE_KILL and len(asks) >= 2 * ASKERS,
                    "tells and asks before the kill",
                )
                # In flight at the kill: half the stops and watches sent just before
                # it, half just after (while b is between two connections).
                half_stopped, half_watched = len(stopped_there) // 2, len(watched_there) // 2
                half_victims = len(victims_there) // 2
                for ref in stopped_there[:half_stopped] + watched_there[:half_watched]:
                    watcher.tell(("watch", ref))
                for index, ref in enumerate(victims_there[:half_victims]):
                    nursery.start_soon(stop, index, ref)
                await trio.lowlevel.checkpoint()
                reconnects = client_of(b).reconnects
                b_server.kill()  # SIGKILL: what it routes is lost; b fails over
                for ref in stopped_there[half_stopped:] + watched_there[half_watched:]:
                    watcher.tell(("watch", ref))
                for index, ref in enumerate(victims_there[half_victims:], half_victims):
                    nursery.start_soon(stop, index, ref)
                await until(
                    lambda: (
                        client_of(b).reconnects > reconnects and client_of(b).status == "connected"
                    ),
                    "b's failover to another server",
                )
                told_at_failover, asked_at_failover = told, len(asks)
                await until(
                    lambda: (
                        told >= told_at_failover + AFTER_FAILOVER
                        and len(asks) >= asked_at_failover + 2 * ASKERS
                    ),
                    "tells and asks after the failover",
                )
                stop_pumping.set()
                hung = await never_ending(pending)
                nursery.cancel_scope.cancel()
            assert not hung, f"requests that never ended: {hung}"

            assert client_of(b).server_info.get("port") != b_server.port  # (it failed over)
            assert set(asks) <= ENDINGS, asks  # (no ActorStopped: the sink never stopped)
            assert set(stops) <= ENDINGS, stops
            assert set(lookups) <= {"answered", "unanswered"}, _tally(lookups)
            assert len(stops) == VICTIMS
            assert all(ref.statistics().state == "running" for ref in [sink, *echoes])

            # Every watch ends: of the actors stopped before, and of the others once
            # they stop now.
            for ref in watched:
                await ref.stop()
            for ref in victims:
                await ref.stop()  # (stops that ended interrupted may have been lost)
            await until(
                lambda: _all_notified(watcher, stopped_there + watched_there),
                "a Terminated for every watched actor",
            )
            notices = await watcher.ask("notices")
            assert all(len(notices[ref]) == 1 for ref in stopped_there + watched_there)
            errors = [n.error for ref in watched_there for n in notices[ref] if n.error is not None]
            assert not errors, errors

            # Every tell accounted, exactly: handled on b, a dead letter on b or a,
            # or unconfirmed on a (lost on the way, found by a confirm round).
            async def accounted() -> int:
                handled, _dead, dead = told_handled_and_dead(await there.ask("handled"), a, b)
                return len(handled) + dead + Node.of(a).unconfirmed

            await until(lambda: _at_least(accounted, told), "every tell accounted")
            await trio.sleep(3 * HEARTBEAT)  # (a few more rounds: nothing counted twice)
            handled, dead, _ = told_handled_and_dead(await there.ask("handled"), a, b)
            unconfirmed = Node.of(a).unconfirmed
            assert len(handled) + len(dead) + unconfirmed == told, (told, handled, dead)
            assert handled | dead <= set(range(told))
            print(
                f"failover: {told} tells ({len(handled)} handled, {len(dead)} dead letters, "
                f"{unconfirmed} unconfirmed); asks {_tally(asks)}; stops {_tally(stops)}; "
                f"lookups {_tally(lookups)}"
            )


async def _all_notified(watcher: ta.ActorRef, refs: list[ta.ActorRef]) -> bool:
    notices = await watcher.ask("notices")
    return all(ref in notices for ref in refs)


async def _at_least(count: Callable[[], Any], target: int) -> bool:
    return bool(await count() >= target)


def _tally(outcomes: list[str]) -> dict[str, int]:
    return {outcome: outcomes.count(outcome) for outcome in sorted(set(outcomes))}


async def test_asks_in_flight_while_the_server_restarts_never_end_as_actor_stopped(
    tmp_path: Path,
) -> None:
    # A lone server killed and started again on its port: both nodes lose their
    # connection and reconnect, one after the other; an ask sent meanwhile meets
    # nothing serving the other node. Asks end answered, or with NodeDown (the
    # asking node's own connection was lost) or ConnectionInterrupted -- never with
    # ActorStopped: the actors never stopped. No tell is lost silently.
    with contextlib.ExitStack() as later, trio.fail_after(4 * HANG):
        first = later.enter_context(running_nats_server(tmp_path, name="first"))
        async with nodes_on([first], ["a", "b"]) as (a, b):
            server = first
            sink = b.spawn(Sink, name="sink")
            echoes = [b.spawn(Sink) for _ in range(ASKERS)]
            b.register("directory", b.spawn(Directory, {"echoes": echoes}, name="directory"))
            b.register("sink", sink)
            await Node.of(b).flush()
            there = await a.lookup("sink")
            echoes_there = await (await a.lookup("directory")).ask("echoes")
            assert await there.ask("ready") == "ready"

            told = 0
            asks: list[str] = []
            pending: set[str] = set()
            stop_pumping = trio.Event()

            async def asker(index: int) -> None:
                number = 0
                echo = echoes_there[index]
                while not stop_pumping.is_set():
                    number += 1
                    tag = f"ask {index}.{number}"
                    message = ("sleep", HEARTBEAT / 2, tag) if number % 4 == 1 else tag
                    pending.add(tag)
                    error: BaseException | None = None
                    try:
                        assert await echo.ask(message) == tag
                    except (ta.NodeDown, ta.ActorStopped) as raised:
                        error = raised
                    finally:
                        pending.discard(tag)
                    asks.append(outcome_of(error))

            async def teller() -> None:
                nonlocal told
                while not stop_pumping.is_set():
                    for _ in range(10):
                        there.tell(("tell", told))
                        told += 1
                    await trio.sleep(PACE)

            clients = [client_of(a), client_of(b)]
            async with trio.open_nursery() as nursery:
                nursery.start_soon(teller)
                for index in range(ASKERS):
                    nursery.start_soon(asker, index)
                await until(lambda: told >= BEFORE_KILL and len(asks) >= 2 * ASKERS, "traffic")
                reconnects = [client.reconnects for client in clients]
                server.kill()  # (the nodes run on while it starts again: in a thread)
                again = running_nats_server(tmp_path, port=server.port, name="second")
                await trio.to_thread.run_sync(later.enter_context, again)
                await until(
                    lambda: all(
                        client.reconnects > before and client.status == "connected"
                        for client, before in zip(clients, reconnects, strict=True)
                    ),
                    "both nodes reconnected",
                )
                told_then, asked_then = told, len(asks)
                await until(
                    lambda: (
                        told >= told_then + AFTER_FAILOVER and len(asks) >= asked_then + 2 * ASKERS
                    ),
                    "traffic after the restart",
                )
                stop_pumping.set()
                hung = await never_ending(pending)
                nursery.cancel_scope.cancel()
            assert not hung, f"asks that never ended: {hung}"
            assert set(asks) <= ENDINGS, _tally(asks)  # (no ActorStopped)
            assert all(ref.statistics().state == "running" for ref in [sink, *echoes])

            async def accounted() -> int:
                handled, _dead, dead = told_handled_and_dead(await there.ask("handled"), a, b)
                return len(handled) + dead + Node.of(a).unconfirmed

            await until(lambda: _at_least(accounted, told), "every tell accounted")
            await trio.sleep(3 * HEARTBEAT)  # (a few more rounds: nothing counted twice)
            handled, dead, _ = told_handled_and_dead(await there.ask("handled"), a, b)
            unconfirmed = Node.of(a).unconfirmed
            # The asking node lost its own connection: the tells the server had not
            # confirmed were counted unconfirmed -- delivered or not, nobody can say
            # -- so some of them may have been handled too. None is lost silently.
            assert len(handled) + len(dead) <= told <= len(handled) + len(dead) + unconfirmed, (
                f"told {told}: {len(handled)} handled, {len(dead)} dead letters, "
                f"{unconfirmed} unconfirmed"
            )
            print(
                f"restart: {told} tells ({len(handled)} handled, {len(dead)} dead letters, "
                f"{unconfirmed} unconfirmed); asks {_tally(asks)}"
            )

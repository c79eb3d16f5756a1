"""Reconnecting, against real ``nats-server`` processes: a server restarted on its
port, failing over to the next server of the list, servers a cluster announces,
lame-duck mode, and giving up -- with nothing published during a gap lost
silently (sent after the reconnect, or refused with an error)."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import trio
import trio.testing

from nats_server import NatsServer, running_nats_server
from trio_actors import nats

# Real time: short waits keep the tests short; never giving up keeps them independent
# of how long a restarted server takes to start.
FAST = nats.Reconnect(wait=0.01, max_wait=0.05, max_rounds=None)


async def next_event(events: nats.EventStream, kind: type[nats.ConnectionEvent]) -> object:
    async for event in events:
        if isinstance(event, kind):
            return event
    raise AssertionError(f"the events ended before a {kind.__name__}")  # pragma: no cover


@contextmanager
def restarted(server: NatsServer, tmp_path: Path) -> Iterator[NatsServer]:
    """``server`` killed, then a new one on the same port."""
    server.kill()
    with running_nats_server(tmp_path, port=server.port, name="restarted") as again:
        yield again


async def test_across_a_server_restart_nothing_published_in_the_gap_is_lost(
    nats_server: NatsServer, tmp_path: Path
) -> None:
    with trio.fail_after(30):
        async with (
            nats.connect(nats_server.url, reconnect=FAST) as nc,
            nc.events() as events,
            nc.subscribe("gap") as sub,
        ):
            await nc.flush()
            nc.publish("gap", b"before")
            assert (await sub.receive()).data == b"before"
            nats_server.kill()
            lost = await next_event(events, nats.Disconnected)
            assert isinstance(lost, nats.Disconnected)
            assert lost.server == nats_server.url
            assert nc.status == "reconnecting"
            for number in range(100):  # buffered: no connection now
                nc.publish("gap", b"%d" % number)
            with running_nats_server(tmp_path, port=nats_server.port, name="restarted"):
                back = await next_event(events, nats.Reconnected)
                assert back == nats.Reconnected(nats_server.url)
                got = [(await sub.receive()).data for _ in range(100)]
                assert got == [b"%d" % n for n in range(100)]  # resubscribed first, in order
                statistics = nc.statistics()
                assert (statistics.status, statistics.reconnects) == ("connected", 1)
                await nc.close()  # (while the server runs)
                assert nc.statistics().unsent == 0


async def test_a_request_made_in_the_gap_is_answered_after_the_reconnect(
    nats_server: NatsServer, tmp_path: Path
) -> None:
    async def echo(nc: nats.Client, sub: nats.Subscription) -> None:
        async for message in sub:
            assert message.reply is not None
            nc.publish(message.reply, b"echo " + message.data)

    with trio.fail_after(30):
        async with (
            nats.connect(nats_server.url, reconnect=FAST) as nc,
            nc.events() as events,
            nc.subscribe("echo") as sub,
            trio.open_nursery() as nursery,
        ):
            nursery.start_soon(echo, nc, sub)
            assert (await nc.request("echo", b"1")).data == b"echo 1"  # (inbox subscribed)
            nats_server.kill()
            await next_event(events, nats.Disconnected)
            reply: list[bytes] = []
            answered = trio.Event()

            async def ask() -> None:
                reply.append((await nc.request("echo", b"2")).data)
                answered.set()

            nursery.start_soon(ask)
            await trio.testing.wait_all_tasks_blocked()
            assert nc.status == "reconnecting"
            with running_nats_server(tmp_path, port=nats_server.port, name="restarted"):
                await answered.wait()
                assert reply == [b"echo 2"]
                sub.unsubscribe()  # (the echo task's iteration ends)
                await nc.close()  # (while the server runs)


async def test_a_request_that_went_out_before_the_loss_fails_with_connection_lost(
    nats_server: NatsServer,
) -> None:
    with trio.fail_after(30):
        async with (
            nats.connect(nats_server.url, reconnect=FAST) as nc,
            nc.subscribe("silent") as sub,
        ):
            await nc.flush()
            async with trio.open_nursery() as nursery:

                async def kill_once_received() -> None:
                    await sub.receive()  # the request reached the server (and came back)
                    nats_server.kill()

                nursery.start_soon(kill_once_received)
                with pytest.raises(nats.ConnectionLost, match="may or may not have been handled"):
                    await nc.request("silent", b"?")
            assert nc._conn.requests == {}


async def test_what_is_published_in_the_gap_is_bounded_and_overflow_raises(
    nats_server: NatsServer,
) -> None:
    with trio.fail_after(30):
        async with (
            nats.connect(
                nats_server.url, reconnect=nats.Reconnect(wait=0.01, buffer_bytes=1000)
            ) as nc,
            nc.events() as events,
        ):
            await nc.flush()
            nats_server.kill()
            await next_event(events, nats.Disconnected)
            nc.publish("a", b"x" * 500)
            with pytest.raises(nats.BufferFull, match=r"reconnecting.*buffer_bytes=1000"):
                nc.publish("a", b"x" * 500)
            assert nc.messages_out == 1
            with pytest.raises(nats.ConnectionClosed, match="closed with 1 published"):
                await nc.close(send_within=0.1)  # (no server comes back: one is unsent)
            assert nc.statistics().unsent == 1


async def test_giving_up_ends_the_block_saying_what_was_never_sent(
    nats_server: NatsServer,
) -> None:
    with trio.fail_after(30):
        with pytest.RaisesGroup(
            pytest.RaisesExc(
                nats.ConnectionClosed,
                match=r"gave up reconnecting after 3 rounds through 1 servers \(2 published",
            )
        ):
            async with (
                nats.connect(
                    nats_server.url, reconnect=nats.Reconnect(wait=0.01, max_rounds=3)
                ) as nc,
                nc.events() as events,
            ):
                nats_server.kill()
                await next_event(events, nats.Disconnected)
                nc.publish("a", b"1")
                nc.publish("a", b"2")
                await trio.sleep_forever()
        assert nc.status == "closed"
        assert nc.statistics().unsent == 2


async def test_without_reconnecting_the_loss_ends_the_block(nats_server: NatsServer) -> None:
    with trio.fail_after(30):
        with pytest.RaisesGroup(pytest.RaisesExc(nats.ConnectionClosed, match="closed")):
            async with nats.connect(nats_server.url, reconnect=None) as nc:
                await nc.flush()
                nats_server.kill()
                await trio.sleep_forever()
        with pytest.raises(nats.ConnectionClosed):
            nc.publish("a", b"after")


async def test_fails_over_to_the_next_server_of_the_list(tmp_path: Path) -> None:
    with (
        running_nats_server(tmp_path, name="first") as first,
        running_nats_server(tmp_path, name="second") as second,
    ):
        with trio.fail_after(30):
            async with (
                nats.connect([first.url, second.url], reconnect=FAST) as nc,
                nc.events() as events,
                nc.subscribe("s") as sub,
            ):
                await nc.flush()
                first.kill()
                assert await next_event(events, nats.Reconnected) == nats.Reconnected(second.url)
                nc.publish("s", b"on the second")
                assert (await sub.receive()).data == b"on the second"


def cluster_config(name: str, routes: list[str]) -> str:
    return (
        "cluster { name: test, listen: 127.0.0.1:-1, routes: ["
        + ", ".join(f'"{route}"' for route in routes)
        + "] }\n"
    )


async def test_servers_a_cluster_announces_join_the_pool(tmp_path: Path) -> None:
    with running_nats_server(tmp_path, name="a", config=cluster_config("a", [])) as a:
        route = f"nats://127.0.0.1:{a.ports['cluster'][0].rsplit(':', 1)[1]}"
        with running_nats_server(tmp_path, name="b", config=cluster_config("b", [route])) as b:
            with trio.fail_after(30):
                async with nats.connect(a.url, reconnect=FAST) as nc, nc.events() as events:
                    while b.url not in nc.servers:  # (announced once the route is up)
                        found = await next_event(events, nats.ServersDiscovered)
                        assert isinstance(found, nats.ServersDiscovered)
                    a.kill()
                    assert await next_event(events, nats.Reconnected) == nats.Reconnected(b.url)


async def test_lame_duck_mode_is_reported_and_the_client_moves_on(tmp_path: Path) -> None:
    # (The server's minimum duration; the grace period is how long until it starts
    # closing connections: the one client's goes first.)
    config = 'lame_duck_duration: "30s"\nlame_duck_grace_period: "1s"\n'
    with (
        running_nats_server(tmp_path, name="leaving", config=config) as leaving,
        running_nats_server(tmp_path, name="staying") as staying,
    ):
        with trio.fail_after(30):
            async with (
                nats.connect([leaving.url, staying.url], reconnect=FAST) as nc,
                nc.events() as events,
            ):
                await nc.flush()
                leaving.process.send_signal(signal.SIGUSR2)  # nats-server --signal ldm
                assert await next_event(events, nats.LameDuck) == nats.LameDuck(leaving.url)
                assert await next_event(events, nats.Reconnected) == nats.Reconnected(staying.url)

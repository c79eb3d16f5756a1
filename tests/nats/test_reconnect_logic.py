"""The reconnect logic, deterministic: the server pool's order, the backoff, and the
client against scripted in-memory servers under MockClock (``fake_server.py``) --
when it gives up, when a connection is declared stale, what a new connection is
sent first, and how a server's ``-ERR`` and malformed bytes end a connection."""

from __future__ import annotations

import pytest
import trio
import trio.testing
from fake_server import FakeServers

from trio_actors import nats
from trio_actors.nats._handshake import ServerAddress, parse_url
from trio_actors.nats._servers import ServerPool


def test_urls_parse_with_credentials_and_default_port() -> None:
    assert parse_url("nats://u%40x:p%3Aw@example.org") == ServerAddress(
        "example.org", 4222, "u@x", "p:w"
    )
    assert parse_url("127.0.0.1:5000", discovered=True) == ServerAddress(
        "127.0.0.1", 5000, discovered=True
    )
    assert parse_url("nats://[::1]:4223").url == "nats://[::1]:4223"
    with pytest.raises(ValueError, match=r"must look like nats://host:port, got 'http://x'"):
        parse_url("http://x")
    with pytest.raises(ValueError, match="is not a number"):
        parse_url("nats://h:port")
    with pytest.raises(TypeError, match="is a str"):
        parse_url(4222)


def test_a_round_starts_after_the_server_lost_and_ends_with_it_lame_ducks_last() -> None:
    a, b, c = (parse_url(f"nats://h:{port}") for port in (1, 2, 3))
    pool = ServerPool([a, b, c, a])
    assert pool.servers == [a, b, c]  # (a duplicate is one server)
    assert pool.round(b) == [c, a, b]
    assert pool.round(None) == [a, b, c]
    pool.lame_duck(c)
    assert pool.round(b) == [a, b, c]
    added = pool.discover(["h:2", "h:4", 7, "bad:port"])
    assert [server.url for server in added] == ["nats://h:4"]


def test_the_backoff_doubles_up_to_its_cap_with_jitter_below_it() -> None:
    policy = nats.Reconnect(wait=1, max_wait=4, jitter=0.5)
    assert [policy.delay(n, lambda: 0.0) for n in range(5)] == [0, 1, 2, 4, 4]
    assert [policy.delay(n, lambda: 0.999) for n in range(1, 4)] == pytest.approx(
        [0.5, 1, 2], abs=0.01
    )


@pytest.mark.parametrize(
    ("options", "message"),
    [
        ({"wait": 0}, r"wait=...\) must be > 0"),
        ({"max_wait": float("inf")}, "finite"),
        ({"wait": True}, "number of seconds"),
        ({"jitter": 1.5}, "fraction from 0 to 1"),
        ({"max_rounds": 0}, r"max_rounds=...\) is a whole number >= 1 \(None: no limit\)"),
        ({"buffer_bytes": 1.5}, "whole number"),
    ],
)
def test_a_bad_reconnect_policy_is_refused_naming_the_option(
    options: dict[str, object], message: str
) -> None:
    with pytest.raises((TypeError, ValueError), match=message):
        nats.Reconnect(**options)  # type: ignore[arg-type]


async def test_bad_connect_options_are_refused() -> None:
    with pytest.raises(TypeError, match=r"reconnect is a nats.Reconnect\(...\) or None"):
        async with nats.connect(reconnect=3):  # type: ignore[arg-type]
            pass  # pragma: no cover
    with pytest.raises(ValueError, match="ping_interval is a number of seconds > 0"):
        async with nats.connect(ping_interval=0):
            pass  # pragma: no cover
    with pytest.raises(ValueError, match="max_outstanding_pings is a whole number"):
        async with nats.connect(max_outstanding_pings=0):
            pass  # pragma: no cover


async def test_gives_up_after_its_rounds_at_the_times_the_backoff_says(
    monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.testing.MockClock
) -> None:
    fake = FakeServers()
    server = fake.add(4001)
    policy = nats.Reconnect(wait=1, max_wait=4, jitter=0, max_rounds=4)
    async with trio.open_nursery() as nursery:
        fake.install(monkeypatch, nursery)
        with pytest.RaisesGroup(
            pytest.RaisesExc(nats.ConnectionClosed, match="gave up reconnecting after 4 rounds")
        ):
            async with nats.connect(server.url, reconnect=policy) as nc:
                await nc.flush()
                server.down = True
                lost_at = trio.current_time()
                await server.connections[0].close()
                await trio.sleep_forever()
        # (Round 0 at once, then 1, 2 and 4 s between rounds.)
        assert [t - lost_at for t in server.attempts[1:]] == [0, 1, 3, 7]
        nursery.cancel_scope.cancel()


async def test_a_server_that_answers_no_ping_is_declared_stale(
    monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.testing.MockClock
) -> None:
    fake = FakeServers()
    hanging, healthy = fake.add(4001), fake.add(4002)
    async with trio.open_nursery() as nursery:
        fake.install(monkeypatch, nursery)
        async with (
            nats.connect(
                [hanging.url, healthy.url], ping_interval=10, max_outstanding_pings=2
            ) as nc,
            nc.events() as events,
        ):
            hanging.hung = True
            start = trio.current_time()
            lost = await events.receive()
            assert lost == nats.Disconnected(
                hanging.url,
                "stale connection: the server answered none of 2 PINGs sent 10 s apart",
            )
            assert trio.current_time() - start == 30  # PINGs at 10 and 20; stale at 30
            assert await events.receive() == nats.Reconnected(healthy.url)
            await nc.flush()  # (the healthy server answers)
        nursery.cancel_scope.cancel()


async def test_a_new_connection_is_sent_the_subscriptions_then_the_kept_messages_then_pings(
    monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.testing.MockClock
) -> None:
    fake = FakeServers()
    first, second = fake.add(4001), fake.add(4002)
    policy = nats.Reconnect(wait=1, jitter=0)
    async with trio.open_nursery() as nursery:
        fake.install(monkeypatch, nursery)
        async with (
            nats.connect([first.url, second.url], reconnect=policy) as nc,
            nc.events() as events,
            nc.subscribe("a.*") as _a,
            nc.subscribe("b", queue="q") as _b,
        ):
            gone = nc.subscribe_nowait("gone")
            await nc.flush()
            first.down = second.down = True  # (round 0 fails: the client waits 1 s)
            await first.connections[0].close()
            assert isinstance(await events.receive(), nats.Disconnected)
            gone.unsubscribe()  # (while disconnected: it is not subscribed again)
            nc.publish("x", b"1")
            nc.publish("y", b"2", headers={"K": "v"})
            flushed = trio.Event()

            async def flush() -> None:
                await nc.flush()
                flushed.set()

            nursery.start_soon(flush)
            await trio.testing.wait_all_tasks_blocked()
            assert nc.status == "reconnecting"
            second.down = False
            assert await events.receive() == nats.Reconnected(second.url)
            reconnected_at = trio.current_time()
            await flushed.wait()
            assert trio.current_time() == reconnected_at  # (not the pinger's PING, later)
            lines = second.connections[0].lines
            assert lines[1] == b"PING"  # (the handshake: CONNECT, PING)
            assert lines[2:] == [
                b"SUB a.* 1",
                b"SUB b q 2",
                b"PUB x 1",
                lines[5],  # HPUB y ...
                b"PING",  # (for the flush made while disconnected)
            ]
            assert lines[5].startswith(b"HPUB y ")
            assert nc.statistics().reconnects == 1
        nursery.cancel_scope.cancel()


async def test_what_the_lost_socket_had_is_gone_and_what_waited_behind_it_is_sent_again(
    monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.testing.MockClock
) -> None:
    fake = FakeServers()
    server = fake.add(4001)
    outcomes: dict[str, str] = {}

    async def request(name: str) -> None:
        try:
            await nc.request(name, b"?")
        except nats.ConnectionLost:
            outcomes[name] = "lost"
        except nats.ConnectionClosed:
            outcomes[name] = "closed"  # (the client closed while it waited)

    async with trio.open_nursery() as nursery:
        fake.install(monkeypatch, nursery)
        async with nats.connect(server.url) as nc, nc.events() as events:
            await nc.flush()
            server.reading = trio.Event()
            nc.publish("primer", b"")  # (the server's pending read takes it, then it stops)
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(request, "in.flight")  # its PUB: the writer's blocked batch
            await trio.testing.wait_all_tasks_blocked()
            nc.publish("behind", b"1")  # behind the blocked send_all, not handed to it
            nc.publish("behind", b"2")
            nursery.start_soon(request, "kept")
            await trio.testing.wait_all_tasks_blocked()
            await server.connections[0].close()
            server.reading.set()  # (the next connection is read)
            assert isinstance(await events.receive(), nats.Disconnected)
            assert await events.receive() == nats.Reconnected(server.url)
            await nc.flush()
            assert outcomes == {"in.flight": "lost"}  # (it went to the lost socket)
            sent_again = [line.split()[:2] for line in server.connections[1].lines[2:]]
            assert sent_again == [
                [b"SUB", b"_INBOX." + nc._conn.inbox_prefix.split(".")[1].encode() + b".*"],
                [b"PUB", b"behind"],
                [b"PUB", b"behind"],
                [b"PUB", b"kept"],  # (its request waits for a reply on this connection)
                [b"PING"],
            ]
            assert len(nc._conn.requests) == 1
        assert outcomes == {"in.flight": "lost", "kept": "closed"}
        nursery.cancel_scope.cancel()


async def test_an_err_then_close_is_reported_and_without_reconnect_raised_with_its_text(
    monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.testing.MockClock
) -> None:
    fake = FakeServers()
    server = fake.add(4001)
    async with trio.open_nursery() as nursery:
        fake.install(monkeypatch, nursery)
        with pytest.RaisesGroup(
            pytest.RaisesExc(
                nats.ServerError,
                match="the server closed the connection after: Maximum Connections Exceeded",
            )
        ):
            async with nats.connect(server.url, reconnect=None) as nc, nc.events() as events:
                await server.connections[0].send(b"-ERR 'Maximum Connections Exceeded'\r\n")
                assert await events.receive() == nats.ServerErrorReported(
                    "Maximum Connections Exceeded"  # (the protocol core unquotes it)
                )
                await server.connections[0].close()
                await trio.sleep_forever()
        assert nc.statistics().server_errors == 1
        nursery.cancel_scope.cancel()


async def test_malformed_bytes_end_the_connection_and_the_client_reconnects(
    monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.testing.MockClock
) -> None:
    fake = FakeServers()
    server = fake.add(4001)
    async with trio.open_nursery() as nursery:
        fake.install(monkeypatch, nursery)
        async with nats.connect(server.url) as nc, nc.events() as events:
            await server.connections[0].send(b"BOGUS\r\n")
            lost = await events.receive()
            assert isinstance(lost, nats.Disconnected)
            assert "the protocol does not allow" in lost.reason
            assert await events.receive() == nats.Reconnected(server.url)
            nc.publish("after", b"ok")  # (frames are made again)
            await nc.flush()
            assert b"PUB after 2" in server.connections[1].lines
        nursery.cancel_scope.cancel()


async def test_an_info_announcing_servers_and_lame_duck_mode_is_reported(
    monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.testing.MockClock
) -> None:
    fake = FakeServers()
    server = fake.add(4001)
    async with trio.open_nursery() as nursery:
        fake.install(monkeypatch, nursery)
        async with nats.connect(server.url) as nc, nc.events() as events:
            await server.connections[0].send(
                b'INFO {"connect_urls":["127.0.0.1:4002"],"ldm":true}\r\n'
            )
            assert await events.receive() == nats.ServersDiscovered(
                server.url, ("nats://127.0.0.1:4002",)
            )
            assert await events.receive() == nats.LameDuck(server.url)
            assert nc.servers == [server.url, "nats://127.0.0.1:4002"]
            assert nc._pool.round(None)[-1].port == 4001  # tried last from now on
        nursery.cancel_scope.cancel()

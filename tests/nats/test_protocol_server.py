"""The protocol core against a real ``nats-server``: over a plain trio socket, the
bytes it makes are what the server takes, and what the server sends parses."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import trio

from nats_server import NatsServer
from trio_actors.nats import ClientProtocol, Event, Headers, Info, Msg, Pong

CONNECT = {"verbose": False, "pedantic": True, "headers": True, "no_responders": True}


class Wire:
    """A socket and a protocol: send bytes, read events until one of a type."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.protocol = ClientProtocol()
        self.seen: list[Event] = []

    async def until(self, kind: type[Event]) -> Event:
        while True:
            for event in self.protocol.events():
                self.seen.append(event)
                if isinstance(event, kind):
                    return event
            data = await self.stream.receive_some(65536)
            assert data, f"the server closed the connection; seen: {self.seen}"
            self.protocol.receive_data(data)

    async def send(self, *chunks: bytes) -> None:
        await self.stream.send_all(b"".join(chunks))


@asynccontextmanager
async def open_wire(server: NatsServer) -> AsyncIterator[Wire]:
    """A connection that has had INFO and sent CONNECT; closed at the end."""
    async with await trio.open_tcp_stream(server.host, server.port) as stream:
        wire = Wire(stream)
        info = await wire.until(Info)
        assert isinstance(info, Info)
        assert wire.protocol.headers_supported
        await wire.send(wire.protocol.connect(CONNECT))
        yield wire


async def test_publish_subscribe_and_headers_through_a_real_server(nats_server: NatsServer) -> None:
    with trio.fail_after(20):
        async with open_wire(nats_server) as wire:
            p = wire.protocol
            assert p.max_payload == 1024 * 1024  # the server's default
            await wire.send(
                p.subscribe(1, "orders.*"),
                p.subscribe(2, "orders.>", queue="workers"),
                p.publish("orders.new", b"hello", reply="answers.here"),
                p.publish("orders.new", b"", headers=Headers([("K", "1"), ("K", "2")])),
                p.unsubscribe(1, max_msgs=1),
                p.publish("orders.old", b"only the queue sees this"),
                p.ping(),
            )
            await wire.until(Pong)
            messages = [event for event in wire.seen if isinstance(event, Msg)]
            got = sorted((m.sid, m.subject, m.reply or "", m.data) for m in messages)
            assert got == [  # (sid 1 had two already: the UNSUB with max 1 ends it at once)
                (1, "orders.new", "", b""),
                (1, "orders.new", "answers.here", b"hello"),
                (2, "orders.new", "", b""),
                (2, "orders.new", "answers.here", b"hello"),
                (2, "orders.old", "", b"only the queue sees this"),
            ]
            with_headers = [m for m in messages if m.headers is not None]
            assert [m.headers.get_all("K") for m in with_headers if m.headers] == [["1", "2"]] * 2


async def test_no_responders_comes_back_as_status_503(nats_server: NatsServer) -> None:
    with trio.fail_after(20):
        async with open_wire(nats_server) as wire:
            p = wire.protocol
            await wire.send(
                p.subscribe(1, "_INBOX.t.*"), p.publish("nobody.home", b"?", reply="_INBOX.t.1")
            )
            reply = await wire.until(Msg)
            assert isinstance(reply, Msg)
            assert (reply.subject, reply.status, reply.data) == ("_INBOX.t.1", 503, b"")


async def test_the_server_answers_a_ping_and_pings_back_are_answered(
    nats_server: NatsServer,
) -> None:
    with trio.fail_after(20):
        async with open_wire(nats_server) as wire:
            await wire.send(wire.protocol.ping())
            assert await wire.until(Pong) == Pong()

"""A scripted NATS server in memory, for the reconnect logic under MockClock: no
sockets, no real time, so the tests can say *when* a reconnect or a give-up happens.

``FakeServers.install(monkeypatch, nursery)`` makes ``trio.open_tcp_stream`` hand
the client one end of an in-memory stream pair; the other end is served here: an
``INFO``, the handshake's ``PONG``, then every line the client sends is recorded
(and a ``PING`` answered, unless the server is ``hung``). A server that is ``down``
refuses connections with ``OSError``; one whose ``reading`` is cleared reads
nothing, and the client's writer blocks in ``send_all``.
"""

from __future__ import annotations

import json

import pytest
import trio
import trio.testing


class FakeConnection:
    def __init__(self, server: FakeServer, stream: trio.abc.Stream) -> None:
        self.server = server
        self.stream = stream
        self.lines: list[bytes] = []  # every control line the client sent, in order

    async def send(self, data: bytes) -> None:
        await self.stream.send_all(data)

    async def close(self) -> None:
        await self.stream.aclose()


class FakeServer:
    def __init__(self, port: int, info: dict[str, object]) -> None:
        self.port = port
        self.url = f"nats://127.0.0.1:{port}"
        self.info = {"server_id": f"fake-{port}", "max_payload": 1_048_576, "headers": True}
        self.info.update(info)
        self.down = False
        self.hung = False  # answers no PING (a stale connection)
        # Set: reads what the client sends. Cleared: reads nothing, so the client's
        # send_all blocks (the streams are in lockstep, like a full socket buffer).
        self.reading = trio.Event()
        self.reading.set()
        self.connections: list[FakeConnection] = []
        self.attempts: list[float] = []  # trio.current_time() of each connection attempt


class FakeServers:
    def __init__(self) -> None:
        self.servers: dict[int, FakeServer] = {}
        self._nursery: trio.Nursery | None = None

    def add(self, port: int, **info: object) -> FakeServer:
        self.servers[port] = FakeServer(port, info)
        return self.servers[port]

    def install(self, monkeypatch: pytest.MonkeyPatch, nursery: trio.Nursery) -> None:
        self._nursery = nursery
        monkeypatch.setattr(trio, "open_tcp_stream", self._open)

    async def _open(self, host: str, port: int) -> trio.abc.Stream:
        await trio.lowlevel.checkpoint()
        server = self.servers.get(port)
        if server is not None:
            server.attempts.append(trio.current_time())
        if server is None or server.down:
            raise OSError(f"all attempts to connect to {host}:{port} failed")
        # Client to server in lockstep (its send_all returns once the server has read
        # the bytes); server to client buffered.
        upstream_send, upstream_receive = trio.testing.lockstep_stream_one_way_pair()
        downstream_send, downstream_receive = trio.testing.memory_stream_one_way_pair()
        client_end = trio.StapledStream(upstream_send, downstream_receive)
        server_end = trio.StapledStream(downstream_send, upstream_receive)
        connection = FakeConnection(server, server_end)
        server.connections.append(connection)
        assert self._nursery is not None
        self._nursery.start_soon(self._serve, connection)
        return client_end

    async def _serve(self, connection: FakeConnection) -> None:
        server = connection.server
        stream = connection.stream
        buffer = b""
        try:
            await stream.send_all(b"INFO " + json.dumps(server.info).encode() + b"\r\n")
            while True:
                await server.reading.wait()
                data = await stream.receive_some(65_536)
                if not data:
                    return
                buffer += data
                while b"\r\n" in buffer:
                    line, buffer = buffer.split(b"\r\n", 1)
                    if line.startswith((b"PUB ", b"HPUB ")):
                        size = int(line.split()[-1])
                        while len(buffer) < size + 2:
                            buffer += await stream.receive_some(65_536)
                        buffer = buffer[size + 2 :]
                    connection.lines.append(line)
                    if line == b"PING" and not server.hung:
                        await stream.send_all(b"PONG\r\n")
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return

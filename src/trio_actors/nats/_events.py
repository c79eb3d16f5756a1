"""What a client tells about its connection as it happens: disconnects, reconnects,
lame-duck notices, servers discovered, and every ``-ERR`` of the server -- so none
of them is swallowed. :meth:`Client.events <trio_actors.nats.Client.events>` hands
them to any task that listens."""

from __future__ import annotations

import attrs
import trio

__all__ = [
    "ConnectionEvent",
    "Disconnected",
    "EventStream",
    "LameDuck",
    "Reconnected",
    "ServerErrorReported",
    "ServersDiscovered",
]


@attrs.frozen
class ConnectionEvent:
    """Something that happened to a client's connection."""


@attrs.frozen
class Disconnected(ConnectionEvent):
    """The connection to ``server`` was lost (``reason`` says how); the client
    reconnects unless it was told not to."""

    server: str
    reason: str


@attrs.frozen
class Reconnected(ConnectionEvent):
    """Connected again, to ``server``; every subscription is subscribed again and
    what was published meanwhile has been handed to the new connection."""

    server: str


@attrs.frozen
class LameDuck(ConnectionEvent):
    """``server`` is shutting down (lame-duck mode): it will close the connection
    soon; the client will reconnect to another server first if it knows one."""

    server: str


@attrs.frozen
class ServersDiscovered(ConnectionEvent):
    """``server`` announced other servers of its cluster, now in the pool."""

    server: str
    added: tuple[str, ...]


@attrs.frozen
class ServerErrorReported(ConnectionEvent):
    """The server sent ``-ERR`` (``message`` is the server's; a permissions
    violation, for instance, which does not end the connection)."""

    message: str


class EventStream:
    """The events of one listener, in order (see :meth:`Client.events
    <trio_actors.nats.Client.events>`). Iterate it or call :meth:`receive`; when the
    listener falls ``buffer`` events behind, newer ones are dropped and counted in
    its ``dropped`` attribute."""

    def __init__(self, buffer: int) -> None:
        self._send, self._receive = trio.open_memory_channel[ConnectionEvent](buffer)
        self.dropped = 0

    def _put(self, event: ConnectionEvent) -> None:
        try:
            self._send.send_nowait(event)
        except trio.WouldBlock:
            self.dropped += 1
        except trio.ClosedResourceError:
            pass

    def _close(self) -> None:
        self._send.close()

    async def receive(self) -> ConnectionEvent:
        """The next event. A checkpoint. Raises ``trio.EndOfChannel`` once the
        client is closed and every event has been received."""
        return await self._receive.receive()

    def __aiter__(self) -> EventStream:
        return self

    async def __anext__(self) -> ConnectionEvent:
        try:
            return await self.receive()
        except trio.EndOfChannel:
            raise StopAsyncIteration from None

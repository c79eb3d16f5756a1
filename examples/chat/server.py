"""A TCP chat server built from actors.

Run it with ``python examples/chat/server.py [PORT]`` (default 8888) and connect
with ``nc localhost 8888``: the first line you type is your name, every later line
is said to the room; ``/who`` lists who is here, ``/crash`` crashes the room (to
watch supervision restart it). Ctrl-C shuts the server down cleanly.

The actors:

* ``Lobby`` -- the supervisor. It owns the room and one ``Connection`` per client,
  knows who is connected, and puts the members back in the room after a restart.
* ``Room`` -- the chat state: who is in the room; it broadcasts each line to every
  member's ``Connection``. It is supervised with ``Restart``: a crash (``/crash``)
  gives a fresh ``Room``, whose ``on_start`` asks the lobby who is connected --
  before any line that waited in its mailbox meanwhile is handled: none is lost.
* ``Connection`` -- writes lines to one client's socket (an ``async`` handler: it
  awaits the socket). Its mailbox is ``Bounded(OUTBOX, overflow="drop_old")``: the
  room only ever ``tell``\\ s it, which never waits, so a client that reads slowly
  cannot hold up the room or anyone else; if its backlog reaches ``OUTBOX`` lines
  the oldest are dropped (they become ``"overflow"`` dead letters) and the client is
  told how many it missed. We chose ``"drop_old"`` because a chat reader who falls
  behind wants the latest lines, not a stale backlog; ``"fail"`` would make the room
  handle ``MailboxFull`` for each member, and ``send`` would let one slow client
  stall the whole room -- exactly what must not happen.

Reading from a client is a plain trio task per connection (``trio.serve_tcp``
starts it): it tells the room each line. Shutting down: the listeners close, the
room says goodbye, every ``Connection`` is drain-stopped (what is queued for its
client is written first), then the sockets close and the actor system exits --
nothing said before the shutdown is lost for a client that keeps reading. A client
that does not read gets ``DRAIN_TIMEOUT`` seconds, then what is left for it is
dropped (dead letters, reason ``"stranded"``), so it cannot hold up the shutdown.
"""

from __future__ import annotations

import signal
import socket
import sys
from functools import partial
from typing import Any

import trio

import trio_actors as ta

OUTBOX = 64
"""Lines a client may have waiting before the oldest are dropped."""

MAX_LINE = 4096
"""Longest line a client may send, in bytes."""

DRAIN_TIMEOUT = 5.0
"""Seconds a leaving client's outbox may take to be written before the rest is
dropped (a client that does not read must not hold up the shutdown)."""


class Connection(ta.Actor):
    """Writes the lines told to it to one client's socket."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.dropped_reported = 0

    async def receive(self, message: Any) -> Any:
        match message:
            case ("line", text):
                dropped = self.ref.statistics().dead_letters.overflow
                if dropped > self.dropped_reported:
                    missed = dropped - self.dropped_reported
                    self.dropped_reported = dropped
                    await self.write(f"*** you missed {missed} lines: reading too slowly")
                await self.write(text)
        return None

    async def write(self, text: str) -> None:
        try:
            await self.stream.send_all(text.encode() + b"\n")
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            self.stop()  # the client is gone; what is still queued is dead-lettered


class Room(ta.Actor):
    """The members and the broadcast."""

    def __init__(self, lobby: ta.ActorRef) -> None:
        self.lobby = lobby
        self.members: dict[str, ta.ActorRef] = {}

    async def on_start(self) -> None:
        # on_start finishes before the first message is handled: after a restart,
        # the members are back before any line that waited in the mailbox.
        self.members = await self.lobby.ask("members")
        if self.members:
            self.broadcast("*** the room restarted")

    def receive(self, message: Any) -> Any:
        match message:
            case ("join", name, connection):
                self.members[name] = connection
                self.broadcast(f"*** {name} joined")
            case ("leave", name):
                if self.members.pop(name, None) is not None:
                    self.broadcast(f"*** {name} left")
            case ("say", name, "/who"):
                if (asker := self.members.get(name)) is not None:  # (it may have left)
                    asker.tell(("line", "*** here: " + ", ".join(sorted(self.members))))
            case ("say", name, "/crash"):
                raise RuntimeError(f"{name} crashed the room")
            case ("say", name, text):
                self.broadcast(f"<{name}> {text}")
            case "closing":
                self.broadcast("*** the server is shutting down")
        return None

    def broadcast(self, text: str) -> None:
        for connection in self.members.values():
            connection.tell(("line", text))


class Lobby(ta.Actor):
    """Supervises the room and the connections; knows who is connected."""

    def on_start(self) -> None:
        self.connections: dict[str, ta.ActorRef] = {}
        self.closing = False
        self.room = self.spawn(
            Room, self.ref, name="room", supervision=ta.Restart(max_restarts=10, within=60.0)
        )

    def receive(self, message: Any) -> Any:
        match message:
            case ("connect", wanted, stream):
                name = self.unique(wanted)
                connection = self.spawn(  # (named by the runtime: a nickname is reused)
                    Connection, stream, mailbox=ta.Bounded(OUTBOX, overflow="drop_old")
                )
                self.connections[name] = connection
                connection.tell(("line", f"*** welcome, {name}"))
                self.room.tell(("join", name, connection))
                return name, connection, self.room
            case ("disconnect", name):
                self.connections.pop(name, None)
                if not self.closing:  # (while closing, nobody is left to hear it)
                    self.room.tell(("leave", name))
            case "members":
                return dict(self.connections)
            case "closing":
                self.closing = True
                self.room.tell("closing")
                return list(self.connections.values())
        return None

    def unique(self, wanted: str) -> str:
        base = "".join(ch for ch in wanted if ch.isalnum() or ch in "-_")[:20] or "guest"
        name, n = base, 1
        while name in self.connections:
            n += 1
            name = f"{base}{n}"
        return name


async def read_lines(stream: trio.SocketStream) -> Any:
    """The lines a client sends (without line ends), until it closes."""
    buffer = b""
    while True:
        try:
            data = await stream.receive_some(MAX_LINE)
        except trio.BrokenResourceError:
            return  # the client went away abruptly (a reset): as good as closed
        if not data:
            return
        buffer += data
        while b"\n" in buffer:
            line, buffer = buffer.split(b"\n", 1)
            yield line.decode(errors="replace").rstrip("\r")
        if len(buffer) > MAX_LINE:
            return  # not a chat client


async def handle_client(stream: trio.SocketStream, *, lobby: ta.ActorRef) -> None:
    """One client: its first line is its name; every later line goes to the room."""
    lines = read_lines(stream)
    try:
        wanted = await anext(lines, None)
        if wanted is None:
            return
        name, connection, room = await lobby.ask(("connect", wanted, stream))
        try:
            async for line in lines:
                room.tell(("say", name, line))
        finally:
            lobby.tell(("disconnect", name))
            with trio.CancelScope(shield=True):
                await close_connection(connection)
    finally:
        await lines.aclose()
        await stream.aclose()


async def close_connection(connection: ta.ActorRef) -> None:
    """Stop a ``Connection`` once what is queued for its client is written -- or
    after ``DRAIN_TIMEOUT`` seconds, dropping the rest (as dead letters), if the
    client does not read."""
    with trio.move_on_after(DRAIN_TIMEOUT):
        await connection.stop(drain=True)
    await connection.stop()  # at once, if the drain timed out; else nothing to do


async def serve(
    port: int,
    closing: trio.Event,
    *,
    send_buffer: int | None = None,
    task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED,
) -> ta.SystemStatistics:
    """Serve chat on ``127.0.0.1:port`` until ``closing`` is set, then shut down
    cleanly. Reports the port (``port=0`` picks a free one) through ``task_status``
    and returns the actor system's final statistics.

    ``send_buffer`` sets each client socket's send buffer (bytes), for tests that
    need a slow client to be slow quickly.
    """
    async with ta.open_actor_system() as system:
        lobby = system.spawn(Lobby, name="lobby")

        async def client(stream: trio.SocketStream) -> None:
            if send_buffer is not None:
                stream.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, send_buffer)
            await handle_client(stream, lobby=lobby)

        async with trio.open_nursery() as clients:
            async with trio.open_nursery() as listening:
                listeners = await listening.start(
                    partial(trio.serve_tcp, client, port, host="127.0.0.1", handler_nursery=clients)
                )
                task_status.started(listeners[0].socket.getsockname()[1])
                await closing.wait()
                listening.cancel_scope.cancel()  # no new clients
            connections = await lobby.ask("closing")
            async with trio.open_nursery() as closing_all:  # all at once: none waits for another
                for connection in connections:
                    closing_all.start_soon(close_connection, connection)
            clients.cancel_scope.cancel()  # the readers end; their sockets close
        return system.statistics()


async def main(port: int) -> None:
    closing = trio.Event()
    async with trio.open_nursery() as nursery:

        async def on_signals() -> None:
            with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
                async for _ in signals:
                    print("shutting down...", flush=True)
                    closing.set()
                    return

        nursery.start_soon(on_signals)
        bound = await nursery.start(serve, port, closing)
        print(f"chat on 127.0.0.1:{bound} -- connect with: nc localhost {bound}", flush=True)
        await closing.wait()
    print("stopped", flush=True)


if __name__ == "__main__":
    trio.run(main, int(sys.argv[1]) if len(sys.argv) > 1 else 8888)

"""The trio transport of the NATS client: :func:`connect`, one stream's tasks, and
reconnecting (the API is ``_client.py``; the state, ``_connection.py``).

:func:`connect` opens a connection (``_handshake.py``: TCP, TLS, ``INFO`` /
``CONNECT`` / ``PING`` / ``PONG``, so a refused connection fails on entry), then one
task, the **supervisor**, runs in the nursery of the ``async with`` block for as
long as the client lives. For each connection it runs three tasks and waits for
the first of them to end the connection:

* the **reader** feeds the bytes to the connection (``_connection.py``) and acts on
  each event: a message goes to its subscription (or to the request waiting for it),
  a ``PING`` is answered, a ``PONG`` wakes the oldest :meth:`Client.flush`, an
  ``INFO`` adds the servers it announces to the pool (and may say the server is in
  lame-duck mode), a server ``-ERR`` is recorded and reported as an event;
* the **writer** sends what :meth:`Client.publish` and the other operations have
  buffered, all of it in one ``send_all`` per wake-up;
* the **pinger** sends a ``PING`` every ``ping_interval`` and declares the
  connection stale when ``max_outstanding_pings`` of them went unanswered (a
  server that hangs, or a network that silently drops everything).

When the connection is lost, the supervisor **reconnects** (``_servers.py`` says to
which server and after what backoff): meanwhile, :meth:`Client.publish` keeps
what is published in a bounded buffer (:exc:`BufferFull` past
``Reconnect.buffer_bytes``, never a silent drop); once reconnected, the
connection has queued every subscription again, then the buffered messages, then a
``PING`` for each :meth:`Client.flush` still waiting, and the writer sends them. A
request whose message had gone out on the lost connection fails with
:exc:`ConnectionLost` (its reply, if any, went to the lost connection); one still in
the buffer is sent on the new connection and waits for its reply there. When
reconnecting gives up (or ``reconnect=None``), the block is cancelled and ends with
:exc:`ConnectionClosed`.

So :meth:`Client.publish` is synchronous and never a checkpoint: it checks its input,
appends the bytes to the buffer and wakes the writer.

Delivery is NATS core's: at most once. What the writer handed to the lost
connection's socket may or may not have reached the server; what was published
after the loss was noticed is sent after the reconnect, or raises.
"""

from __future__ import annotations

import itertools
import logging
import random
import ssl
import sys
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import trio

from ._client import DEFAULT_MAX_PENDING_BYTES, Client
from ._connection import Connection
from ._events import Disconnected, LameDuck, Reconnected, ServerErrorReported, ServersDiscovered
from ._handshake import (
    ConnectionClosed,
    ConnectSettings,
    ServerAddress,
    ServerError,
    open_connection,
    parse_url,
)
from ._servers import Reconnect, ServerPool
from ._values import Err, Event, Info, Ping, ProtocolError
from ._writer import queue_frame, write

__all__ = ["connect"]

DEFAULT_URL = "nats://127.0.0.1:4222"
_READ_SIZE = 65_536
_log = logging.getLogger("trio_actors.nats")
_random = random.Random()  # (the reconnect backoff's jitter)


def _socket_fd(stream: trio.abc.Stream) -> int | None:
    """The file descriptor :meth:`Client.publish` may write through to: a plain
    TCP connection's, where ``os.write`` takes a socket (not Windows); ``None`` for
    TLS (bytes must go through the SSLStream) and for test streams."""
    if isinstance(stream, trio.SocketStream) and sys.platform != "win32":
        return stream.socket.fileno()
    return None


@attrs.define(eq=False)
class _Stream:
    """One stream a connection runs on (a reconnect opens the next)."""

    stream: trio.abc.Stream
    server: ServerAddress
    fd: int | None = attrs.field(init=False)

    def __attrs_post_init__(self) -> None:
        self.fd = _socket_fd(self.stream)


@attrs.define
class _Options:
    """What :func:`connect` was told about timing and buffering (the client's
    attributes of the same names read and set them)."""

    reconnect: Reconnect | None
    max_pending_bytes: int
    connect_timeout: float
    ping_interval: float
    max_outstanding_pings: int


class _Lost(Exception):
    """Ends one connection (the message says why); the supervisor reconnects."""


# --- one stream's tasks -------------------------------------------------------


async def _read(client: Client, stream: _Stream) -> None:
    conn = client._conn
    receive_some = stream.stream.receive_some
    while True:
        data = await receive_some(_READ_SIZE)
        if not data:
            if conn.error is not None:
                raise _Lost(f"the server closed the connection after: {conn.error}")
            raise _Lost("the server closed the connection")
        conn.receive_data(data)
        client._write_through = True
        events = conn.events()  # (messages handed to their subscriptions and requests)
        if events:
            _handle(client, events, stream)


async def _ping(client: Client, stream: _Stream) -> None:
    conn = client._conn
    while True:
        await trio.sleep(client._options.ping_interval)
        frame = conn.keepalive_ping(client._options.max_outstanding_pings)
        if frame is None:
            raise _Lost(
                f"stale connection: the server answered none of {conn.outstanding_pings} "
                f"PINGs sent {client._options.ping_interval} s apart"
            )
        queue_frame(client, frame, message=False)


def _handle(client: Client, events: list[Event], stream: _Stream) -> None:
    """Act on what one read brought besides messages (the connection has
    recorded it). Never a checkpoint."""
    for event in events:
        if type(event) is Ping:
            queue_frame(client, client._conn.protocol.pong(), message=False)
        elif type(event) is Err:
            for callback in tuple(client._on_server_error):
                try:
                    callback(event.message)
                except Exception:
                    _log.exception("nats: an on_server_error callback raised; ignored")
            client._report(ServerErrorReported(event.message))
        elif type(event) is Info:
            _learn(client, event.options, stream.server)


def _learn(client: Client, info: dict[str, Any], server: ServerAddress) -> None:
    """What an ``INFO`` says beyond its limits: other servers, lame-duck mode."""
    added = client._pool.discover(info.get("connect_urls"))
    if added:
        client._report(ServersDiscovered(server.url, tuple(s.url for s in added)))
    if info.get("ldm"):
        client._pool.lame_duck(server)
        client._report(LameDuck(server.url))


async def _serve(client: Client, stream: _Stream) -> str:
    """Run one stream's tasks until the first of them ends it; return why."""
    reason = "closed"
    async with trio.open_nursery() as nursery:

        async def run(part: Callable[[Client, _Stream], Awaitable[None]]) -> None:
            nonlocal reason
            try:
                await part(client, stream)
            except _Lost as lost:
                reason = str(lost)
            except ProtocolError as error:
                # (The connection has replaced the broken codec: frames can
                # still be made, until the next stream's.)
                reason = f"the server sent what the protocol does not allow: {error}"
            except (OSError, trio.BrokenResourceError, trio.ClosedResourceError) as error:
                cause = error.__cause__  # (an SSLStream's error says nothing itself)
                reason = f"{type(error).__name__}: {error or cause}"
            finally:
                nursery.cancel_scope.cancel()

        for part, task_name in (
            (_read, "nats reader"),
            (write, "nats writer"),
            (_ping, "nats pinger"),
        ):
            nursery.start_soon(run, part, name=task_name)
    return reason


# --- the supervisor: losing a connection and reconnecting -------------------------


async def _supervise(client: Client, stream: _Stream) -> None:
    """Serve stream after stream until the client closes or gives up (or the
    ``connect`` block ends: :attr:`_io`)."""
    with client._io:
        await _serve_connections(client, stream)


async def _serve_connections(client: Client, stream: _Stream) -> None:
    conn = client._conn
    try:
        while True:
            reason = await _serve(client, stream)
            await trio.aclose_forcefully(stream.stream)
            if client._closing or client.closed:
                return
            error = conn.error
            _lose(client, stream, reason)
            reconnect = client._options.reconnect
            if reconnect is None:
                if error is not None:
                    raise ServerError(reason)
                raise ConnectionClosed(reason)
            found = await _find_server(client, reconnect, reason)
            if found is None:
                return  # close() while reconnecting
            stream = found
            _resume(client, stream)
    finally:
        if not client._closing:
            conn.counters.unsent += conn.unsent_messages()
        client._close()


def _lose(client: Client, stream: _Stream, reason: str) -> None:
    """The stream is gone: the connection keeps the messages not yet handed to
    it and fails the requests that went out on it; say so."""
    client._stream = None
    client._conn.lost()
    client._status_changed.set()
    client._status_changed = trio.Event()
    client._report(Disconnected(stream.server.url, reason))


async def _find_server(client: Client, policy: Reconnect, reason: str) -> _Stream | None:
    """Rounds through the pool, with backoff between them, until a server takes
    the connection (``None``: the client closed meanwhile). A checkpoint.

    Raises:
        ConnectionClosed: ``policy.max_rounds`` rounds failed.
    """
    last = reason
    rounds = itertools.count() if policy.max_rounds is None else range(policy.max_rounds)
    timeout = client._options.connect_timeout
    client._reconnecting = trio.CancelScope()
    with client._reconnecting:
        for round_number in rounds:
            await trio.sleep(policy.delay(round_number, _random.random))
            for server in client._pool.round(client._server):
                try:
                    with trio.fail_after(timeout):
                        stream, _ = await open_connection(server, client._settings, client._conn)
                except trio.TooSlowError:
                    last = f"{server.url} did not finish the handshake within {timeout} s"
                except (OSError, ServerError, ProtocolError, ConnectionClosed) as error:
                    last = f"{server.url}: {error}"
                else:
                    return _Stream(stream, server)
    if client.closed:
        return None
    raise ConnectionClosed(
        f"gave up reconnecting after {policy.max_rounds} rounds through "
        f"{len(client._pool.servers)} servers ({client._conn.unsent_messages()} published "
        f"messages never sent); the last error: {last}"
    )


def _resume(client: Client, stream: _Stream) -> None:
    """Connected again: the connection has queued what to send first (every
    subscription again, then what was kept, then a PING for every flush still
    waiting); wake the writer and say so. Never a checkpoint."""
    client._wake_writer = trio.Event()
    client._wake_writer.set()
    client._stream = stream
    client._server = stream.server
    client._status_changed.set()
    client._status_changed = trio.Event()
    client._report(Reconnected(stream.server.url))
    _learn(client, client._conn.protocol.server_info, stream.server)


@asynccontextmanager
async def connect(
    servers: str | list[str] = DEFAULT_URL,
    *,
    name: str | None = None,
    reconnect: Reconnect | None = Reconnect(),  # noqa: B008 - frozen: one shared value is fine
    max_pending_bytes: int = DEFAULT_MAX_PENDING_BYTES,
    connect_timeout: float = 2.0,
    ping_interval: float = 120.0,
    max_outstanding_pings: int = 2,
    tls: ssl.SSLContext | None = None,
    tls_hostname: str | None = None,
    tls_handshake_first: bool = False,
    token: str | None = None,
    user: str | None = None,
    password: str | None = None,
    nkey_seed: str | Path | None = None,
    credentials: str | Path | None = None,
) -> AsyncIterator[Client]:
    """Connect to a NATS server: ``async with nats.connect(url) as nc:``.

    ``servers`` is a ``nats://host:port`` URL or a list of them, tried in order
    until one accepts (each within ``connect_timeout`` seconds). Entering is a
    checkpoint; it fails with the reason of the last server tried (``OSError``,
    :exc:`TLSError`, :exc:`ServerError`, :exc:`ProtocolError`,
    ``trio.TooSlowError``). The servers that INFO announces join the pool. TLS and
    authentication (``tls=``, ``tls_hostname=``, ``tls_handshake_first=`` for a
    server configured with ``handshake_first``, ``token=``, ``user=`` and
    ``password=``, ``nkey_seed=``, ``credentials=``) are described in the
    reference's "Security" section.

    A lost connection is made again as ``reconnect`` says (a :class:`Reconnect`;
    ``None``: never), and meanwhile the block goes on (``status`` says
    ``"reconnecting"``; :meth:`Client.events` tells). A connection is declared lost
    also when ``max_outstanding_pings`` PINGs sent ``ping_interval`` seconds apart
    went unanswered.

    Leaving closes the client: what was published is sent first (for at most 5 s;
    :meth:`Client.close`). The block runs beside the client's tasks, in their
    nursery: if the client gives up (or cannot reconnect), the block is cancelled
    and ends with :exc:`ConnectionClosed` (:exc:`ServerError` after a server's
    ``-ERR`` with ``reconnect=None``); like a nursery, an exception leaving the block
    comes wrapped in an ``ExceptionGroup``. A cancellation from outside the block
    cancels the block's code, not the connection: the client's tasks serve until the
    block has ended, so cleanup in it (shielded) can still publish and ``flush``;
    leaving by an exception or a cancellation does not wait to send what is left.
    """
    urls = [servers] if isinstance(servers, str) else list(servers)
    if not urls:
        raise ValueError("servers must name at least one nats:// URL")
    if reconnect is not None and not isinstance(reconnect, Reconnect):
        raise TypeError(f"reconnect is a nats.Reconnect(...) or None, got {reconnect!r}")
    for option, value in (("connect_timeout", connect_timeout), ("ping_interval", ping_interval)):
        if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
            raise ValueError(f"{option} is a number of seconds > 0, got {value!r}")
    if (
        isinstance(max_outstanding_pings, bool)
        or not isinstance(max_outstanding_pings, int)
        or max_outstanding_pings < 1
    ):
        raise ValueError(
            f"max_outstanding_pings is a whole number >= 1, got {max_outstanding_pings!r}"
        )
    pool = ServerPool(parse_url(url) for url in urls)
    settings = ConnectSettings(
        name=name,
        tls=tls,
        tls_hostname=tls_hostname,
        tls_handshake_first=tls_handshake_first,
        token=token,
        user=user,
        password=password,
        nkey_seed=nkey_seed,
        credentials=credentials,
    )
    connection = Connection()
    last: BaseException | None = None
    for server in list(pool.servers):
        try:
            with trio.fail_after(connect_timeout):
                stream, protocol = await open_connection(server, settings, connection)
        except (OSError, ServerError, ProtocolError, ConnectionClosed, trio.TooSlowError) as error:
            last = error
            continue
        break
    else:
        assert last is not None
        raise last
    first = _Stream(stream, server)
    options = _Options(
        reconnect, max_pending_bytes, connect_timeout, ping_interval, max_outstanding_pings
    )
    client = Client(connection, first, pool, settings, options)
    _learn(client, protocol.server_info, server)
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_supervise, client, first, name="nats supervisor")
            try:
                yield client
                await client.close()
            finally:
                client._close()
                client._io.cancel()
                nursery.cancel_scope.cancel()
    finally:
        if client._stream is not None:
            await trio.aclose_forcefully(client._stream.stream)

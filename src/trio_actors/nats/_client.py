"""The trio transport of the NATS client: one connection, its tasks, and the API.

:func:`connect` opens a TCP connection, reads the server's ``INFO``, sends
``CONNECT`` and checks it with a ``PING`` (so a refused connection -- an
authorization error -- fails here, as an exception, not later); then two tasks
own the socket, in a nursery of the ``async with`` block:

* the **reader** feeds the bytes to the protocol core (``_protocol.py``) and acts on
  each event: a message goes to its subscription (or to the request waiting for it),
  a ``PING`` is answered, a ``PONG`` wakes the oldest :meth:`Client.flush`, a
  server ``-ERR`` is recorded (:attr:`Client.last_error`) and, if the server closes
  the connection after it, raised from the block;
* the **writer** sends what :meth:`Client.publish` and the other operations have
  buffered, all of it in one ``send_all`` per wake-up.

So :meth:`Client.publish` is synchronous and never a checkpoint: it checks its input,
appends the bytes to a bounded buffer (:exc:`BufferFull` past ``max_pending_bytes``,
never a silent drop) and wakes the writer.

Not here yet (issue 17, next): reconnecting across a server restart or the servers
INFO announces, TLS, authentication, lame-duck mode.
"""

from __future__ import annotations

import itertools
import secrets
import ssl
from collections import deque
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager, suppress
from pathlib import Path
from threading import get_ident
from typing import Any

import trio

from ._handshake import (
    ConnectionClosed,
    ConnectSettings,
    ServerError,
    open_connection,
    parse_url,
)
from ._protocol import (
    ClientProtocol,
    Err,
    Headers,
    Info,
    Msg,
    Ping,
    Pong,
    ProtocolError,
    check_subject,
)

__all__ = [
    "BufferFull",
    "Client",
    "ConnectionClosed",
    "NoResponders",
    "ServerError",
    "SlowConsumer",
    "Subscription",
    "connect",
]

DEFAULT_URL = "nats://127.0.0.1:4222"
DEFAULT_MAX_PENDING_BYTES = 64 * 1024 * 1024
DEFAULT_PENDING_MESSAGES = 65_536
_READ_SIZE = 65_536


class NoResponders(Exception):
    """A request found nobody subscribed to its subject (the server's status 503)."""


class BufferFull(Exception):
    """:meth:`Client.publish` would exceed the buffer of bytes not yet sent."""


class SlowConsumer(Exception):
    """A subscription dropped messages: its buffer was full (it was not read fast
    enough). Raised once by the iteration, after which it goes on."""


class Subscription:
    """Messages of one ``SUB``, in the order the server sent them.

    Iterate it (``async for msg in sub``) or call :meth:`receive`. Leaving the
    ``async with`` of :meth:`Client.subscribe` unsubscribes; the iteration then ends.
    """

    def __init__(
        self, client: Client, sid: int, subject: str, queue: str | None, pending: int
    ) -> None:
        self.client = client
        self.sid = sid
        self.subject = subject
        self.queue = queue
        self._send, self._receive = trio.open_memory_channel[Msg](pending)
        self.delivered = 0
        self.dropped = 0
        self._unreported_drops = 0

    def __repr__(self) -> str:
        return f"<Subscription {self.sid} to {self.subject!r}>"

    def _deliver(self, message: Msg) -> None:
        try:
            self._send.send_nowait(message)
        except trio.WouldBlock:
            self.dropped += 1
            self._unreported_drops += 1
        except trio.ClosedResourceError:
            pass  # unsubscribed: the server may still have sent some
        else:
            self.delivered += 1

    async def receive(self) -> Msg:
        """The next message. A checkpoint.

        Raises:
            SlowConsumer: messages were dropped since the last call (once).
            trio.EndOfChannel: the subscription has ended.
        """
        if self._unreported_drops:
            count, self._unreported_drops = self._unreported_drops, 0
            await trio.lowlevel.checkpoint()
            raise SlowConsumer(
                f"subscription {self.sid} to {self.subject!r} dropped {count} messages: "
                "its buffer was full"
            )
        return await self._receive.receive()

    def __aiter__(self) -> Subscription:
        return self

    async def __anext__(self) -> Msg:
        try:
            return await self.receive()
        except trio.EndOfChannel:
            raise StopAsyncIteration from None

    def unsubscribe(self) -> None:
        """End the subscription (``UNSUB``). Never a checkpoint; idempotent."""
        self.client._unsubscribe(self)


class _Request:
    __slots__ = ("event", "reply")

    def __init__(self) -> None:
        self.event = trio.Event()
        self.reply: Msg | None = None


class Client:
    """A connection to a NATS server (made by :func:`connect`)."""

    def __init__(
        self,
        stream: trio.abc.Stream,
        protocol: ClientProtocol,
        *,
        max_pending_bytes: int = DEFAULT_MAX_PENDING_BYTES,
    ) -> None:
        self._stream = stream
        self._protocol = protocol
        self._thread = get_ident()  # its buffers and events are the trio thread's
        self.max_pending_bytes = max_pending_bytes
        self._out: list[bytes] = []
        self._pending_bytes = 0
        self._wake_writer = trio.Event()
        self._sids = itertools.count(1)
        self._subscriptions: dict[int, Subscription] = {}
        self._pongs: deque[trio.Event] = deque()
        self._inbox_prefix = f"_INBOX.{secrets.token_hex(11)}"
        self._inbox_sid: int | None = None
        self._requests: dict[str, _Request] = {}
        self._tokens = itertools.count(1)
        self._closed = False
        self._closing = False  # close() was called: the reader's end is no error
        self.last_error: str | None = None
        # Statistics.
        self.messages_in = self.bytes_in = self.messages_out = self.bytes_out = 0

    @property
    def server_info(self) -> dict[str, Any]:
        """The server's latest ``INFO``."""
        return self._protocol.server_info

    @property
    def closed(self) -> bool:
        return self._closed

    # --- sending ----------------------------------------------------------------------

    def _send(self, data: bytes) -> None:
        if get_ident() != self._thread:
            raise RuntimeError(
                "a NATS client is used from the trio thread that connected it only; from "
                "another thread, call trio.from_thread.run_sync(nc.publish, ...)"
            )
        if self._closed:
            raise ConnectionClosed("the connection is closed")
        if self._pending_bytes + len(data) > self.max_pending_bytes:
            raise BufferFull(
                f"{self._pending_bytes} bytes wait to be sent; {len(data)} more would be over "
                f"max_pending_bytes={self.max_pending_bytes}"
            )
        self._out.append(data)
        self._pending_bytes += len(data)
        self._wake_writer.set()

    def publish(
        self,
        subject: str,
        payload: bytes = b"",
        *,
        reply: str | None = None,
        headers: Headers | Mapping[str, str] | None = None,
    ) -> None:
        """Publish ``payload`` to ``subject``. Synchronous, never a checkpoint: the
        bytes are buffered and one writer task sends them, in order. From the trio
        thread only (another thread: ``trio.from_thread.run_sync(nc.publish, ...)``).

        Raises:
            RuntimeError: called from another thread.
            TypeError, ValueError: a bad subject, payload or header (as the message
                says).
            MaxPayloadExceeded: larger than the server's ``max_payload``.
            BufferFull: more than ``max_pending_bytes`` would wait to be sent.
            ConnectionClosed: the connection is closed.
        """
        data = self._protocol.publish(subject, payload, reply=reply, headers=headers)
        self._send(data)
        self.messages_out += 1
        self.bytes_out += len(payload)

    @asynccontextmanager
    async def subscribe(
        self, subject: str, *, queue: str | None = None, pending: int = DEFAULT_PENDING_MESSAGES
    ) -> AsyncIterator[Subscription]:
        """Subscribe to ``subject`` (wildcards allowed; in queue group ``queue``):
        the block iterates the :class:`Subscription`; leaving it unsubscribes.
        ``pending``: how many messages it buffers before it drops (then the
        iteration raises :exc:`SlowConsumer` once)."""
        subscription = self.subscribe_nowait(subject, queue=queue, pending=pending)
        try:
            yield subscription
        finally:
            subscription.unsubscribe()

    def subscribe_nowait(
        self, subject: str, *, queue: str | None = None, pending: int = DEFAULT_PENDING_MESSAGES
    ) -> Subscription:
        """:meth:`subscribe` without the block: call :meth:`Subscription.unsubscribe`
        yourself. Never a checkpoint."""
        sid = next(self._sids)
        self._send(self._protocol.subscribe(sid, subject, queue=queue))
        subscription = Subscription(self, sid, subject, queue, pending)
        self._subscriptions[sid] = subscription
        return subscription

    def _unsubscribe(self, subscription: Subscription) -> None:
        if self._subscriptions.pop(subscription.sid, None) is None:
            return
        subscription._send.close()
        if not self._closed:
            self._send(self._protocol.unsubscribe(subscription.sid))

    async def request(
        self,
        subject: str,
        payload: bytes = b"",
        *,
        headers: Headers | Mapping[str, str] | None = None,
    ) -> Msg:
        """Publish a request and wait for its first reply. A checkpoint. Cancelled,
        it leaves nothing behind (a late reply is dropped).

        Raises:
            NoResponders: nobody is subscribed to ``subject``.
            ConnectionClosed: the connection closed before a reply came.
        """
        check_subject(subject)
        if self._inbox_sid is None:
            self._inbox_sid = next(self._sids)
            self._send(self._protocol.subscribe(self._inbox_sid, f"{self._inbox_prefix}.*"))
        reply_subject = f"{self._inbox_prefix}.{next(self._tokens)}"
        waiter = _Request()
        self._requests[reply_subject] = waiter
        try:
            self.publish(subject, payload, reply=reply_subject, headers=headers)
            await waiter.event.wait()
        finally:
            del self._requests[reply_subject]
        reply = waiter.reply
        if reply is None:
            raise ConnectionClosed(f"the connection closed before {subject!r} replied")
        if reply.status == 503 and not reply.data:
            raise NoResponders(f"no responders for {subject!r}")
        return reply

    async def flush(self) -> None:
        """Wait until the server has had everything sent so far (a ``PING`` and its
        ``PONG``). A checkpoint.

        Raises:
            ConnectionClosed: the connection closed first.
        """
        pong = trio.Event()
        self._pongs.append(pong)
        self._send(self._protocol.ping())
        await pong.wait()
        if self._closed:
            raise ConnectionClosed("the connection closed before the server answered")

    async def drain(self) -> None:
        """Unsubscribe every subscription (each one's iteration then ends after the
        messages it already has), send what is buffered, and close. A checkpoint."""
        for subscription in list(self._subscriptions.values()):
            subscription.unsubscribe()
        await self.close()

    async def close(self) -> None:
        """Send what is buffered (waiting at most 5 s for the server to have it),
        then close the connection: a later :meth:`publish` raises
        :exc:`ConnectionClosed`, subscriptions end. A checkpoint; idempotent."""
        if self._closed:
            await trio.lowlevel.checkpoint()
            return
        with trio.move_on_after(5), suppress(ConnectionClosed):
            await self.flush()
        self._closing = True
        self._close()
        await self._stream.aclose()

    # --- the tasks --------------------------------------------------------------------

    async def _write(self) -> None:
        stream = self._stream
        while True:
            await self._wake_writer.wait()
            self._wake_writer = trio.Event()
            out, self._out = self._out, []
            self._pending_bytes = 0
            if out:
                await stream.send_all(b"".join(out))

    async def _read(self) -> None:
        protocol = self._protocol
        stream = self._stream
        while True:
            data = await stream.receive_some(_READ_SIZE)
            protocol.receive_data(data)
            for event in protocol.events():
                self._handle(event)
            if not data:
                return  # the server closed the connection

    def _handle(self, event: object) -> None:
        if type(event) is Msg:
            self.messages_in += 1
            self.bytes_in += len(event.data)
            subscription = self._subscriptions.get(event.sid)
            if subscription is not None:
                subscription._deliver(event)
            elif event.sid == self._inbox_sid:
                waiter = self._requests.get(event.subject)
                if waiter is not None and waiter.reply is None:
                    waiter.reply = event
                    waiter.event.set()
        elif type(event) is Ping:
            self._send(self._protocol.pong())
        elif type(event) is Pong:
            if self._pongs:
                self._pongs.popleft().set()
        elif type(event) is Err:
            self.last_error = event.message
        elif type(event) is Info:
            pass  # (the protocol keeps it: server_info)

    def _close(self) -> None:
        """Closed: wake everyone who waits on the connection."""
        self._closed = True
        for pong in self._pongs:
            pong.set()
        self._pongs.clear()
        for waiter in self._requests.values():
            waiter.event.set()
        for subscription in list(self._subscriptions.values()):
            subscription._send.close()
        self._subscriptions.clear()


@asynccontextmanager
async def connect(
    servers: str | list[str] = DEFAULT_URL,
    *,
    name: str | None = None,
    max_pending_bytes: int = DEFAULT_MAX_PENDING_BYTES,
    tls: ssl.SSLContext | None = None,
    tls_hostname: str | None = None,
    token: str | None = None,
    user: str | None = None,
    password: str | None = None,
    nkey_seed: str | Path | None = None,
    credentials: str | Path | None = None,
) -> AsyncIterator[Client]:
    """Connect to a NATS server: ``async with nats.connect(url) as nc:``.

    ``servers`` is a ``nats://host:port`` URL or a list of them, tried in order
    until one accepts. Entering is a checkpoint; it fails with the reason of the
    last server tried (``OSError``, :exc:`ServerError`, :exc:`ProtocolError`).
    Leaving closes the connection: what was published is flushed first if the
    connection still works (for at most 5 s). The block runs beside the
    connection's tasks, in their nursery: if the server closes the connection, the
    block is cancelled and ends with :exc:`ConnectionClosed` (or :exc:`ServerError`
    after an ``-ERR``); like a nursery, an exception leaving the block comes
    wrapped in an ``ExceptionGroup``.
    """
    urls = [servers] if isinstance(servers, str) else list(servers)
    if not urls:
        raise ValueError("servers must name at least one nats:// URL")
    addresses = [parse_url(url) for url in urls]
    settings = ConnectSettings(
        name=name,
        tls=tls,
        tls_hostname=tls_hostname,
        token=token,
        user=user,
        password=password,
        nkey_seed=nkey_seed,
        credentials=credentials,
    )
    last: BaseException | None = None
    for address in addresses:
        try:
            stream, protocol = await open_connection(address, settings)
        except (OSError, ServerError, ProtocolError, ConnectionClosed) as error:
            last = error
            continue
        break
    else:
        assert last is not None
        raise last
    client = Client(stream, protocol, max_pending_bytes=max_pending_bytes)
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(client._write, name="nats writer")

            async def read() -> None:
                try:
                    await client._read()
                except trio.ClosedResourceError:
                    if not client._closing:
                        raise
                finally:
                    client._close()
                if client._closing:
                    return  # close() or drain(): the block goes on, without a connection
                # The server ended the connection (the block did not): say so, from
                # the block (reconnecting is not built yet).
                if client.last_error is not None:
                    raise ServerError(
                        f"the server closed the connection after: {client.last_error}"
                    )
                raise ConnectionClosed("the server closed the connection")

            nursery.start_soon(read, name="nats reader")
            try:
                yield client
                if not client.closed:
                    with trio.move_on_after(5):
                        await client.flush()
            finally:
                client._close()
                nursery.cancel_scope.cancel()
    finally:
        await trio.aclose_forcefully(stream)

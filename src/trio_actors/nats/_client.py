"""The NATS client's API: :class:`Client`, its errors and its statistics.

:meth:`Client.publish` is synchronous and never a checkpoint: it checks its input,
has the connection (``_connection.py``, the sans-io state) make the frame, and
either writes it through to an idle socket or appends it to the buffer the writer
task sends (``_writer.py``; the tasks, reconnecting and :func:`connect` are
``_transport.py``'s).
Subscribing, requesting and flushing enter what they wait for in the connection's
tables and queue their frames the same way.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager, suppress
from threading import get_ident
from typing import TYPE_CHECKING, Any, Literal, cast

import attrs
import trio

from ._checks import check_subject
from ._connection import Connection, ConnectionState, Request
from ._events import (
    ConnectionEvent,
    EventStream,
)
from ._handshake import (
    ConnectionClosed,
    ConnectSettings,
)
from ._servers import ServerPool
from ._subscription import Subscription
from ._values import Headers, Msg
from ._writer import queue_frame

if TYPE_CHECKING:
    from ._transport import _Options, _Stream

__all__ = [
    "Client",
    "ClientStatistics",
    "ConnectionLost",
    "NoResponders",
]

DEFAULT_MAX_PENDING_BYTES = 64 * 1024 * 1024
DEFAULT_PENDING_MESSAGES = 65_536
_CLOSED = ConnectionState.CLOSED
_CLOSE_WITHIN = 5.0  # seconds close() waits for the server to have what was published

Status = Literal["connected", "reconnecting", "closed"]


class NoResponders(Exception):
    """A request found nobody subscribed to its subject (the server's status 503)."""


class ConnectionLost(Exception):
    """The connection was lost after a request's message went out and before its
    reply came: the request may or may not have been handled. (The client
    reconnects; the request is not sent again.)"""


@attrs.frozen
class ClientStatistics:
    """A snapshot of a client's counters (:meth:`Client.statistics`)."""

    status: Status
    server: str | None  # the URL connected to; None while reconnecting or closed
    messages_in: int
    bytes_in: int  # payload bytes
    messages_out: int
    bytes_out: int  # payload bytes
    reconnects: int
    pending_bytes: int  # buffered, not yet handed to the socket
    subscriptions: int
    dropped: int  # messages subscriptions dropped (slow consumers), all together
    server_errors: int  # -ERR received
    unsent: int  # published messages never sent: buffered when the client closed


class Client:
    """A connection to a NATS server that reconnects (made by :func:`connect`)."""

    # The trio side of a sans-io ``_connection.Connection``, which holds the state
    # (the handshake's, the sids, the pings, the requests, the frames to send and
    # to replay): the client holds the stream, the writer's flags, the listeners
    # and the cancel scopes of its tasks (``_transport.py``).

    def __init__(
        self,
        connection: Connection,
        stream: _Stream,
        pool: ServerPool,
        settings: ConnectSettings,
        options: _Options,
    ) -> None:
        self._conn = connection
        self._stream: _Stream | None = stream  # None: reconnecting (or closed after it)
        self._server = stream.server  # connected to, or the latest lost
        self._pool = pool
        self._settings = settings
        self._options = options
        self._thread = get_ident()  # its buffers and events are the trio thread's
        self._wake_writer = trio.Event()
        self._writing = False  # the writer is in send_all
        self._write_through = True  # see _queue
        self._before_writing: list[Callable[[], object]] = []  # see before_writing
        self._listeners: set[EventStream] = set()
        self._on_server_error: list[Callable[[str], object]] = []  # see on_server_error
        self._status_changed = trio.Event()
        self._closing = False  # close() was called: the connection's end is no error
        self._reconnecting = trio.CancelScope()
        # The connection's tasks ignore a cancellation from outside the ``connect``
        # block: they serve until the block has ended -- so that its own cleanup
        # (a node's last answers and "bye") can still be sent -- and are cancelled
        # by its end (``connect``).
        self._io = trio.CancelScope(shield=True)

    def __repr__(self) -> str:
        return f"<nats.Client {self.status} {self._server.url}>"

    # --- what connect() was told, and the counters (the connection's) ------------------

    @property
    def max_pending_bytes(self) -> int:
        return self._options.max_pending_bytes

    @max_pending_bytes.setter
    def max_pending_bytes(self, value: int) -> None:  # (as when it was a plain attribute)
        self._options.max_pending_bytes = value

    @property
    def connect_timeout(self) -> float:
        return self._options.connect_timeout

    @connect_timeout.setter
    def connect_timeout(self, value: float) -> None:  # (as when it was a plain attribute)
        self._options.connect_timeout = value

    @property
    def ping_interval(self) -> float:
        return self._options.ping_interval

    @ping_interval.setter
    def ping_interval(self, value: float) -> None:  # (as when it was a plain attribute)
        self._options.ping_interval = value

    @property
    def max_outstanding_pings(self) -> int:
        return self._options.max_outstanding_pings

    @max_outstanding_pings.setter
    def max_outstanding_pings(self, value: int) -> None:  # (as when it was a plain attribute)
        self._options.max_outstanding_pings = value

    @property
    def last_error(self) -> str | None:
        """The latest server ``-ERR`` (``None``: none yet)."""
        return self._conn.last_error

    @property
    def messages_in(self) -> int:
        return self._conn.counters.messages_in

    @property
    def bytes_in(self) -> int:
        return self._conn.counters.bytes_in

    @property
    def messages_out(self) -> int:
        return self._conn.counters.messages_out

    @property
    def bytes_out(self) -> int:
        return self._conn.counters.bytes_out

    @property
    def reconnects(self) -> int:
        return self._conn.counters.reconnects

    @property
    def server_errors(self) -> int:
        return self._conn.counters.server_errors

    @property
    def unsent(self) -> int:
        return self._conn.counters.unsent

    @property
    def server_info(self) -> dict[str, Any]:
        """The latest ``INFO`` of the server connected to (or last connected to)."""
        return self._conn.protocol.server_info

    @property
    def closed(self) -> bool:
        return self._conn.state is _CLOSED

    @property
    def status(self) -> Status:
        """``"connected"``, ``"reconnecting"`` or ``"closed"``."""
        if self._conn.state is _CLOSED:
            return "closed"
        return "reconnecting" if self._stream is None else "connected"

    @property
    def servers(self) -> list[str]:
        """The server pool's URLs (those given, then those discovered)."""
        return [server.url for server in self._pool.servers]

    @property
    def waiting_to_write(self) -> bool:
        """Whether published frames wait in the buffer for the writer's next turn
        on a live connection (not while reconnecting, when a publish may raise
        ``BufferFull``, nor once closed)."""
        return bool(self._conn.out) and self._stream is not None and not self.closed

    def before_writing(self, callback: Callable[[], object]) -> Callable[[], None]:
        """Call ``callback()`` at each turn of the writer, before it takes what waits
        in the buffer: one who holds messages back while frames wait (a node's
        outbox coalescing its tells) publishes them there, to leave in the same
        write. ``callback`` never waits; what it raises is logged and ignored.
        Returns what removes it."""
        self._before_writing.append(callback)

        def remove() -> None:
            with suppress(ValueError):
                self._before_writing.remove(callback)

        return remove

    def on_server_error(self, callback: Callable[[str], object]) -> Callable[[], None]:
        """Call ``callback(message)`` with each ``-ERR`` of the server, from the
        connection's reader, at once -- before anything read after it is handled
        (a flush that the server answered after the ``-ERR`` returns after the
        callback): who published can tell what the server refused (a permissions
        violation names the subject) before taking it as sent. ``callback`` never
        waits; what it raises is logged and ignored. Returns what removes it.
        (:meth:`events` reports the same as :class:`ServerErrorReported`, later.)"""
        self._on_server_error.append(callback)

        def remove() -> None:
            with suppress(ValueError):
                self._on_server_error.remove(callback)

        return remove

    def statistics(self) -> ClientStatistics:
        """The counters now. Never a checkpoint."""
        conn = self._conn
        counters = conn.counters
        return ClientStatistics(
            status=self.status,
            server=None if self._stream is None else self._stream.server.url,
            messages_in=counters.messages_in,
            bytes_in=counters.bytes_in,
            messages_out=counters.messages_out,
            bytes_out=counters.bytes_out,
            reconnects=counters.reconnects,
            pending_bytes=conn.pending_bytes,
            subscriptions=len(conn.subscriptions),
            dropped=counters.dropped_by_ended + sum(s.dropped for s in conn.subscriptions.values()),
            server_errors=counters.server_errors,
            unsent=counters.unsent,
        )

    async def wait_connected(self) -> None:
        """Return once connected (at once if connected now). A checkpoint.

        Raises:
            ConnectionClosed: the client closed (or gave up reconnecting) first.
        """
        await trio.lowlevel.checkpoint()
        while self._stream is None:
            if self.closed:
                raise ConnectionClosed("the client is closed")
            await self._status_changed.wait()

    @asynccontextmanager
    async def events(self, *, buffer: int = 256) -> AsyncIterator[EventStream]:
        """Listen to what happens to the connection (:class:`Disconnected`,
        :class:`Reconnected`, :class:`LameDuck`, :class:`ServersDiscovered`,
        :class:`ServerErrorReported`) for the length of the block: it iterates an
        :class:`EventStream` that ends when the client closes. A listener
        ``buffer`` events behind misses the newer ones (counted in its
        ``dropped``)."""
        if isinstance(buffer, bool) or not isinstance(buffer, int) or buffer < 1:
            raise ValueError(f"events(buffer=...) is a whole number >= 1, got {buffer!r}")
        stream = EventStream(buffer)
        self._listeners.add(stream)
        if self.closed:
            stream._close()
        try:
            yield stream
        finally:
            self._listeners.discard(stream)
            stream._close()

    def _report(self, event: ConnectionEvent) -> None:
        for listener in self._listeners:
            listener._put(event)

    # --- sending ----------------------------------------------------------------------

    def publish(
        self,
        subject: str,
        payload: bytes = b"",
        *,
        reply: str | None = None,
        headers: Headers | Mapping[str, str] | None = None,
    ) -> None:
        """Publish ``payload`` to ``subject``. Synchronous, never a checkpoint: the
        bytes are buffered and one writer task sends them, in order (while
        reconnecting, they wait for the new connection). From the trio thread only
        (another thread: ``trio.from_thread.run_sync(nc.publish, ...)``).

        Raises:
            RuntimeError: called from another thread.
            TypeError, ValueError: a bad subject, payload or header (as the message
                says).
            MaxPayloadExceeded: larger than the server's ``max_payload``.
            BufferFull: more than ``max_pending_bytes`` would wait to be sent (while
                reconnecting: more than ``Reconnect.buffer_bytes``).
            ConnectionClosed: the client is closed.
        """
        self._publish(subject, payload, reply, headers)

    def _publish(
        self,
        subject: str,
        payload: bytes,
        reply: str | None,
        headers: Headers | Mapping[str, str] | None,
    ) -> bytes | None:
        """:meth:`publish`; return the frame if it was buffered (``None``: handed
        to the socket)."""
        conn = self._conn
        data = conn.protocol.publish(subject, payload, reply=reply, headers=headers)
        buffered = queue_frame(self, data, message=True)
        counters = conn.counters
        counters.messages_out += 1
        counters.bytes_out += len(payload)
        return data if buffered else None

    @asynccontextmanager
    async def subscribe(
        self,
        subject: str,
        *,
        queue: str | None = None,
        pending: int = DEFAULT_PENDING_MESSAGES,
        callback: Callable[[Msg], object] | None = None,
    ) -> AsyncIterator[Subscription]:
        """Subscribe to ``subject`` (wildcards allowed; in queue group ``queue``):
        the block iterates the :class:`Subscription`; leaving it unsubscribes.
        ``pending``: how many messages it buffers before it drops (then the
        iteration raises :exc:`SlowConsumer` once). The subscription lasts across
        reconnects (messages published while disconnected do not reach it: NATS
        core keeps nothing). ``callback``: see :meth:`subscribe_nowait`."""
        subscription = self.subscribe_nowait(
            subject, queue=queue, pending=pending, callback=callback
        )
        try:
            yield subscription
        finally:
            subscription.unsubscribe()

    def subscribe_nowait(
        self,
        subject: str,
        *,
        queue: str | None = None,
        pending: int = DEFAULT_PENDING_MESSAGES,
        callback: Callable[[Msg], object] | None = None,
    ) -> Subscription:
        """:meth:`subscribe` without the block: call :meth:`Subscription.unsubscribe`
        yourself. Never a checkpoint.

        With ``callback``, each message is handed to ``callback(msg)`` instead of
        being buffered: called by the connection's reader task, at once, in order,
        so it must not block (it is never awaited; what it returns is ignored), and
        it holds up everything the connection receives while it runs -- what an
        actor runtime does to put a message in a mailbox. An exception from it is
        a bug and is not swallowed: it ends the ``async with`` block of
        :func:`connect`. Such a subscription cannot be iterated.
        """
        if isinstance(pending, bool) or not isinstance(pending, int) or pending < 1:
            raise ValueError(
                f"pending is how many messages the subscription buffers, a whole number "
                f">= 1, got {pending!r}"
            )
        if callback is not None and not callable(callback):
            raise TypeError(f"callback must be callable (it is given each Msg), got {callback!r}")
        conn = self._conn
        subscription = Subscription(self, conn.next_sid(), subject, queue, pending, callback)
        frame = conn.subscribe(subscription)
        try:
            queue_frame(self, frame, message=False)
        except BaseException:
            conn.unsubscribe(subscription.sid)
            raise
        return subscription

    def _unsubscribe(self, subscription: Subscription, *, send: bool = True) -> None:
        """End ``subscription`` (``send``: and send its ``UNSUB``; drain has)."""
        conn = self._conn
        if conn.unsubscribe(subscription.sid) is None:
            return
        conn.counters.dropped_by_ended += subscription.dropped
        subscription._end()
        if send and conn.state is not _CLOSED:
            queue_frame(self, conn.unsubscribe_frame(subscription.sid), message=False)

    async def request(
        self,
        subject: str,
        payload: bytes = b"",
        *,
        headers: Headers | Mapping[str, str] | None = None,
    ) -> Msg:
        """Publish a request and wait for its first reply. A checkpoint. Cancelled,
        it leaves nothing behind (a late reply is dropped). Made while
        reconnecting, it is sent once reconnected.

        Raises:
            NoResponders: nobody is subscribed to ``subject``.
            ConnectionLost: the connection was lost after the request went out (it
                may or may not have been handled).
            ConnectionClosed: the client closed before a reply came.
        """
        check_subject(subject)
        conn = self._conn
        inbox = conn.inbox_subscription()
        if inbox is not None:
            queue_frame(self, inbox, message=False)
        event = trio.Event()
        request: Request = conn.add_request(event)
        try:
            request.frame = self._publish(subject, payload, request.subject, headers)
            await event.wait()
        finally:
            conn.remove_request(request)
        reply = request.reply
        if reply is None:
            if request.lost:
                raise ConnectionLost(
                    f"the connection to {self._server.url} was lost after the request to "
                    f"{subject!r} went out: it may or may not have been handled"
                )
            raise ConnectionClosed(f"the connection closed before {subject!r} replied")
        if reply.status == 503 and not reply.data:
            raise NoResponders(f"no responders for {subject!r}")
        return reply

    async def flush(self) -> None:
        """Wait until the server has had everything sent so far (a ``PING`` and its
        ``PONG``); while reconnecting, until the new connection has sent it. A
        checkpoint.

        Raises:
            ConnectionClosed: the client closed first.
        """
        pong = trio.Event()
        conn = self._conn
        queue_frame(self, conn.protocol.ping(), message=False)
        conn.flush_ping(pong)  # (its frame is the one just queued)
        await pong.wait()
        if self.closed:
            raise ConnectionClosed("the connection closed before the server answered")

    async def drain(self) -> None:
        """Unsubscribe every subscription, wait until the server has confirmed it
        (a flush: what the server sent before the ``UNSUB`` still reaches the
        subscriptions -- nothing in flight is dropped), end them (each iteration
        ends after the messages it has), then send what is buffered and close (as
        :meth:`close`, within its time). A checkpoint."""
        draining = cast("list[Subscription]", list(self._conn.subscriptions.values()))
        for subscription in draining:
            queue_frame(self, self._conn.unsubscribe_frame(subscription.sid), message=False)
        with trio.move_on_after(_CLOSE_WITHIN), suppress(ConnectionClosed):
            await self.flush()
        for subscription in draining:
            self._unsubscribe(subscription, send=False)
        await self.close()

    async def close(self, *, send_within: float = _CLOSE_WITHIN) -> None:
        """Send what is buffered (waiting at most ``send_within`` seconds for the
        server to have it, through a reconnect if one is under way and there are
        messages to send), then close: a later :meth:`publish` raises
        :exc:`ConnectionClosed`, subscriptions and event streams end. A checkpoint;
        idempotent.

        Raises:
            ConnectionClosed: published messages could not be sent in time (how
                many: in the message and in ``statistics().unsent``).
        """
        if self.closed:
            await trio.lowlevel.checkpoint()
            return
        conn = self._conn
        with trio.move_on_after(send_within), suppress(ConnectionClosed):
            while self._stream is not None or conn.unsent_messages():
                await self.flush()
                if not conn.out:
                    break
        unsent = conn.unsent_messages()
        self._closing = True
        self._close()
        if self._stream is not None:
            await trio.aclose_forcefully(self._stream.stream)
        else:
            await trio.lowlevel.checkpoint()
        if unsent:
            conn.counters.unsent += unsent
            raise ConnectionClosed(
                f"closed with {unsent} published messages never sent: the server "
                f"({self._server.url}) did not take them within {send_within} s"
            )

    def _close(self) -> None:
        """Closed: wake everyone who waits on the client."""
        if self.closed:
            return
        self._conn.close()  # (wakes the flushes and requests, ends the subscriptions)
        self._reconnecting.cancel()
        for listener in self._listeners:
            listener._close()
        self._status_changed.set()

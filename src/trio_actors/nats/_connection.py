"""The state of a NATS client connection, without I/O (as h11's ``Connection`` is
for HTTP): the state machine lives here, in one table.

A :class:`Connection` lasts as long as its client, across every stream a reconnect
opens. It is fed the server's bytes (:meth:`Connection.receive_data`) and hands back
what they mean (:meth:`Connection.next_event` one at a time, for the handshake;
:meth:`Connection.events` in bulk, for the reader), and it makes the bytes to send.
It owns:

* the **state** (:class:`ConnectionState`), changed only through
  :data:`TRANSITIONS`: a stream opened, the server's ``INFO``, ``CONNECT`` sent, the
  handshake's ``PONG``, the stream lost, the client closed. An event the table does
  not list for the state raises :exc:`ConnectionStateError` naming both, and leaves
  the state as it was;
* the **handshake steps**: ``INFO``, then ``CONNECT`` and a ``PING``
  (:meth:`Connection.send_connect`), then the ``PONG`` that makes it
  ``CONNECTED``;
* the **outstanding pings**: the keep-alive ``PING`` s not yet answered
  (:meth:`Connection.keepalive_ping` says when the connection is stale) and the
  flush tokens, answered in order by the ``PONG`` s;
* the **sid table**: each subscription by its sid, with ``max_msgs`` (it ends
  itself after that many messages, as the server's ``UNSUB <sid> <max>`` does);
* the **request-inbox mux**: one wildcard inbox subscription, a reply subject per
  request, each reply to the request waiting for it;
* the **frames to send** and what to **replay after a reconnect**: on a lost
  stream, only whole messages not yet handed to it are kept (never the rest of a
  frame the socket took in part, nor a ``SUB`` or a ``PING``: those are made
  again), the requests whose message went out fail; once the new stream's
  handshake is done, the connection queues, in order, every subscription again
  (each with what is left of its ``max_msgs``), the inbox, the kept messages, and
  a ``PING`` per flush still waiting.

It imports no trio and does no I/O: the transport (``_transport.py``, and the API
in ``_client.py``) owns the socket, the clock and the tasks, and writes through or
buffers (``out``) the frames. What waits is woken through objects with a ``set()`` method (a
``trio.Event`` there); subscriptions are handed their messages through
``_deliver`` and ended through ``_end``. So everything here is tested as pure
state (``tests/nats/test_connection.py``).

::

    DISCONNECTED --open--> AWAITING_INFO --INFO--> SENDING_CONNECT
         ^                                               | send_connect
         |                                               v
         +--- lost (from any of them) ------------ AWAITING_PONG --PONG--> CONNECTED
                                                                  (replay) |
    (any) --close--> CLOSED            CONNECTED --lost--> DISCONNECTED <--+
"""

from __future__ import annotations

import enum
import itertools
import secrets
from collections import deque
from collections.abc import Mapping
from typing import Any, Final, Protocol

from ._protocol import ClientProtocol, _NeedData
from ._values import Err, Event, Info, Msg, Pong, ProtocolError

__all__: list[str] = []  # (private: the client's, and the tests')


class ConnectionState(enum.Enum):
    """Where a connection is (see :data:`TRANSITIONS`)."""

    DISCONNECTED = "disconnected"  # no stream: before the first, and after one is lost
    AWAITING_INFO = "awaiting INFO"  # a stream is open; the server speaks first
    SENDING_CONNECT = "sending CONNECT"  # INFO came: (TLS, then) CONNECT and a PING
    AWAITING_PONG = "awaiting PONG"  # CONNECT sent; its PONG says the server took it
    CONNECTED = "connected"
    CLOSED = "closed"  # for good


class Input(enum.Enum):
    """What changes a connection's state."""

    OPEN = "a stream opened"
    INFO = "INFO"
    SEND_CONNECT = "CONNECT sent"
    PONG = "PONG"
    LOST = "the stream lost"
    CLOSE = "close"


_S = ConnectionState
_I = Input

TRANSITIONS: Final[Mapping[ConnectionState, Mapping[Input, ConnectionState]]] = {
    _S.DISCONNECTED: {_I.OPEN: _S.AWAITING_INFO, _I.LOST: _S.DISCONNECTED, _I.CLOSE: _S.CLOSED},
    _S.AWAITING_INFO: {
        _I.INFO: _S.SENDING_CONNECT,
        _I.PONG: _S.AWAITING_INFO,  # (a stray PONG before the INFO: ignored, as it always was)
        _I.LOST: _S.DISCONNECTED,
        _I.CLOSE: _S.CLOSED,
    },
    _S.SENDING_CONNECT: {
        _I.SEND_CONNECT: _S.AWAITING_PONG,
        _I.LOST: _S.DISCONNECTED,
        _I.CLOSE: _S.CLOSED,
    },
    _S.AWAITING_PONG: {
        _I.INFO: _S.AWAITING_PONG,  # (a server may update its INFO at any time)
        _I.PONG: _S.CONNECTED,
        _I.LOST: _S.DISCONNECTED,
        _I.CLOSE: _S.CLOSED,
    },
    _S.CONNECTED: {
        _I.INFO: _S.CONNECTED,
        _I.PONG: _S.CONNECTED,  # (a keep-alive's or a flush's)
        _I.LOST: _S.DISCONNECTED,
        _I.CLOSE: _S.CLOSED,
    },
    # (Closed: what the stream still brings is ignored.)
    _S.CLOSED: {_I.INFO: _S.CLOSED, _I.PONG: _S.CLOSED, _I.LOST: _S.CLOSED, _I.CLOSE: _S.CLOSED},
}
"""The one transition table: state -> {input: next state}. Anything else raises."""

_CONNECTED: Final = ConnectionState.CONNECTED
_PING_FRAME: Final = b"PING\r\n"
_MESSAGE_FRAMES: Final = (b"PUB ", b"HPUB ")  # kept while disconnected; the rest is made again


class ConnectionStateError(ProtocolError):
    """An event the state does not allow (the message names both). The state is
    left unchanged. From the server (a ``PONG`` while ``CONNECT`` is being sent) it
    is the server's protocol error; from the client, a bug."""


class Waiter(Protocol):
    """What waits for a ``PONG`` or a reply: woken by ``set()`` (a ``trio.Event``)."""

    def set(self) -> None: ...


class Subscriber(Protocol):
    """What the sid table holds (a :class:`~trio_actors.nats.Subscription`)."""

    sid: int
    subject: str
    queue: str | None
    dropped: int  # (counted by the subscription: a slow consumer's)

    def _deliver(self, message: Msg) -> None: ...

    def _end(self) -> None: ...


class Request:
    """One request waiting for its reply on the inbox (``subject``: its reply
    subject)."""

    __slots__ = ("frame", "lost", "reply", "subject", "waiter")

    def __init__(self, subject: str, waiter: Waiter) -> None:
        self.subject = subject
        self.waiter = waiter
        self.frame: bytes | None = None  # its PUB while buffered, to tell whether it went out
        self.reply: Msg | None = None
        self.lost = False  # its message went out on a stream that was lost


class Counters:
    """What a connection counts, across its streams (payload bytes)."""

    __slots__ = (
        "bytes_in",
        "bytes_out",
        "dropped_by_ended",
        "handshakes",
        "messages_in",
        "messages_out",
        "server_errors",
        "unsent",
    )

    def __init__(self) -> None:
        self.messages_in = self.bytes_in = self.messages_out = self.bytes_out = 0
        self.server_errors = 0  # -ERR received on a live stream
        self.handshakes = 0  # done: the first connection, then each reconnect
        self.unsent = 0  # published messages never sent: buffered when the client closed
        self.dropped_by_ended = 0  # messages dropped by subscriptions since ended

    @property
    def reconnects(self) -> int:
        return max(self.handshakes - 1, 0)


class Connection:
    """A client connection's state across its streams, without I/O (see the
    module's docstring).

    Its attributes are read (and ``out``/``pending_bytes`` appended to) by the
    transport directly, not through methods: ``publish`` and the delivery of a
    ``MSG`` are the client's hot paths, and an attribute is the cheapest step.

    Attributes:
        state: the :class:`ConnectionState`.
        protocol: the codec of the current (or latest) stream: it parses what the
            server sends and makes the frames, with the latest ``INFO``'s limits.
        out: the frames waiting to be sent, in order (a ``bytearray``: the rest of
            a frame the socket took in part); ``pending_bytes``: their size.
        subscriptions: the sid table.
        pongs: a flush's waiter (or ``None``: a keep-alive ``PING``) per ``PING``
            not yet answered, in order; ``outstanding_pings``: how many keep-alive
            ``PING`` s went unanswered since the last ``PONG``.
        inbox_prefix, inbox_sid, requests: the request-inbox mux (``inbox_sid``
            is ``None`` until the first request).
        error: the latest ``-ERR`` on the current stream; ``last_error``: on any.
        counters: its :class:`Counters`.
    """

    def __init__(self, *, inbox_prefix: str | None = None) -> None:
        self.state = ConnectionState.DISCONNECTED
        self.protocol = ClientProtocol()
        self.out: list[bytes | bytearray] = []
        self.pending_bytes = 0
        self.subscriptions: dict[int, Subscriber] = {}
        self._limits: dict[int, int] = {}  # sid -> messages left (max_msgs)
        self._sids = itertools.count(1)
        self.pongs: deque[Waiter | None] = deque()
        self.outstanding_pings = 0
        self.inbox_prefix = inbox_prefix or f"_INBOX.{secrets.token_hex(11)}"
        self.inbox_sid: int | None = None
        self.requests: dict[str, Request] = {}
        self._tokens = itertools.count(1)
        self.error: str | None = None
        self.last_error: str | None = None
        self.counters = Counters()

    def __repr__(self) -> str:
        return (
            f"<nats.Connection {self.state.name} {len(self.subscriptions)} subscriptions "
            f"{len(self.out)} frames to send>"
        )

    def _change(self, event: Input) -> ConnectionState:
        """Go where :data:`TRANSITIONS` says ``event`` leads; return the state left."""
        state = self.state
        try:
            self.state = TRANSITIONS[state][event]
        except KeyError:
            raise ConnectionStateError(
                f"{event.value} is not allowed in state {state.name}"
            ) from None
        return state

    # --- the handshake --------------------------------------------------------------

    def open(self) -> None:
        """A new stream is open: the server's ``INFO`` comes next. The stream gets a
        fresh codec, which makes frames with the latest ``INFO``'s limits until the
        new server's comes."""
        self._change(Input.OPEN)
        protocol = ClientProtocol()
        protocol.server_info = self.protocol.server_info
        self.protocol = protocol
        self.error = None

    def send_connect(self, options: Mapping[str, Any]) -> bytes:
        """``CONNECT`` with ``options``, and the ``PING`` whose ``PONG`` ends the
        handshake: the bytes for the transport to send (after TLS, if needed)."""
        self._change(Input.SEND_CONNECT)
        return self.protocol.connect(options) + self.protocol.ping()

    def receive_data(self, data: bytes | bytearray) -> None:
        """Bytes from the server, split anywhere (see :class:`ClientProtocol`)."""
        self.protocol.receive_data(data)

    def next_event(self) -> Event | _NeedData:
        """The next event the bytes hold (:data:`NEED_DATA` if none yet), its
        transition made: what the handshake reads, one event at a time, so that it
        stops at its ``PONG`` and leaves the rest to the reader. A ``MSG`` is handed
        to its subscription or request as by :meth:`events`.

        Raises:
            ProtocolError: what the server sent is not the protocol (then the
                stream's codec is replaced, so that frames can still be made), or
                is not allowed in this state (:exc:`ConnectionStateError`).
        """
        try:
            event = self.protocol.next_event()
        except ProtocolError:
            self._renew_protocol()
            raise
        if isinstance(event, _NeedData):
            return event
        if type(event) is Msg:
            self._dispatch(event)
        else:
            self._control(event)
        return event

    # --- a live stream ----------------------------------------------------------------

    def events(self) -> list[Event]:
        """Every event the bytes so far hold: each ``MSG`` handed to its
        subscription (``_deliver``) or to the request waiting for it, and counted;
        a ``PONG`` answering the oldest ``PING``; ``INFO`` and ``-ERR`` recorded.
        Returns the events other than ``MSG`` (for the transport to act on: answer
        a ``PING``, report an ``-ERR``, learn from an ``INFO``). The reader's hot
        path.

        Raises:
            ProtocolError: as :meth:`next_event`.
        """
        try:
            parsed = self.protocol.events()
        except ProtocolError:
            self._renew_protocol()
            raise
        subscriptions = self.subscriptions
        limits = self._limits
        others: list[Event] = []
        received = received_bytes = 0
        for event in parsed:
            if type(event) is Msg:
                received += 1
                received_bytes += len(event.data)
                subscription = subscriptions.get(event.sid)
                if subscription is not None:
                    subscription._deliver(event)
                    if limits and event.sid in limits:
                        self._count(event.sid)
                elif event.sid == self.inbox_sid:
                    self._reply(event)
            else:
                if type(event) is Err:
                    self.error = self.last_error = event.message
                    self.counters.server_errors += 1
                else:
                    self._control(event)
                others.append(event)
        counters = self.counters
        counters.messages_in += received
        counters.bytes_in += received_bytes
        return others

    def _dispatch(self, message: Msg) -> None:
        """One ``MSG`` outside the bulk path (:meth:`events` inlines this)."""
        self.counters.messages_in += 1
        self.counters.bytes_in += len(message.data)
        subscription = self.subscriptions.get(message.sid)
        if subscription is not None:
            subscription._deliver(message)
            if message.sid in self._limits:
                self._count(message.sid)
        elif message.sid == self.inbox_sid:
            self._reply(message)

    def _reply(self, message: Msg) -> None:
        request = self.requests.get(message.subject)
        if request is not None and request.reply is None:
            request.reply = message
            request.waiter.set()

    def _count(self, sid: int) -> None:
        left = self._limits[sid] - 1
        if left:
            self._limits[sid] = left
            return
        del self._limits[sid]  # (the server has unsubscribed it: UNSUB <sid> <max>)
        self.subscriptions.pop(sid)._end()

    def _control(self, event: Event) -> None:
        kind = type(event)
        if kind is Pong:
            previous = self._change(Input.PONG)
            if previous is _CONNECTED:
                self.outstanding_pings = 0
                if self.pongs:
                    waiter = self.pongs.popleft()
                    if waiter is not None:
                        waiter.set()
            elif previous is ConnectionState.AWAITING_PONG:  # the handshake's: connected
                self._replay()
        elif kind is Info:
            self._change(Input.INFO)
        # (Ping: the transport answers; Err: in the handshake it refuses the
        # connection, on a live stream :meth:`events` records it; Ok: nothing.)

    def keepalive_ping(self, max_outstanding: int) -> bytes | None:
        """The keep-alive ``PING`` to send now, or ``None`` when ``max_outstanding``
        of them are still unanswered: the connection is stale."""
        if self.outstanding_pings >= max_outstanding:
            return None
        self.outstanding_pings += 1
        self.pongs.append(None)
        return self.protocol.ping()

    def flush_ping(self, waiter: Waiter) -> bytes:
        """The ``PING`` of a flush, whose ``PONG`` sets ``waiter`` (after a
        reconnect, the new stream's). Call it once the ``PING`` is queued (a full
        buffer, or a closed client, refuses it first)."""
        self.pongs.append(waiter)
        return _PING_FRAME

    # --- subscriptions and requests ---------------------------------------------------

    def next_sid(self) -> int:
        return next(self._sids)

    def subscribe(self, subscriber: Subscriber, *, max_msgs: int | None = None) -> bytes:
        """Enter ``subscriber`` in the sid table; return its ``SUB`` (and, with
        ``max_msgs``, the ``UNSUB`` that makes the server end it after that many
        messages, as it also ends here)."""
        frame = self.protocol.subscribe(subscriber.sid, subscriber.subject, queue=subscriber.queue)
        if max_msgs is not None:
            frame += self.protocol.unsubscribe(subscriber.sid, max_msgs=max_msgs)
            self._limits[subscriber.sid] = max_msgs
        self.subscriptions[subscriber.sid] = subscriber
        return frame

    def unsubscribe(self, sid: int) -> Subscriber | None:
        """Take ``sid`` out of the sid table; return what it held (``None``: it
        had ended already). The ``UNSUB`` is :meth:`unsubscribe_frame`."""
        self._limits.pop(sid, None)
        return self.subscriptions.pop(sid, None)

    def unsubscribe_frame(self, sid: int) -> bytes:
        return self.protocol.unsubscribe(sid)

    def inbox_subscription(self) -> bytes | None:
        """The ``SUB`` of the request inbox, the first time (``None`` after)."""
        if self.inbox_sid is not None:
            return None
        self.inbox_sid = next(self._sids)
        return self.protocol.subscribe(self.inbox_sid, f"{self.inbox_prefix}.*")

    def add_request(self, waiter: Waiter) -> Request:
        """A request with a reply subject of its own, waiting (call
        :meth:`inbox_subscription` first)."""
        request = Request(f"{self.inbox_prefix}.{next(self._tokens)}", waiter)
        self.requests[request.subject] = request
        return request

    def remove_request(self, request: Request) -> None:
        del self.requests[request.subject]

    # --- losing a stream, reconnecting, closing ---------------------------------------

    def lost(self) -> None:
        """The stream is gone: keep only the whole messages not yet handed to it
        (a frame taken in part, a ``SUB``, a ``PING`` are not kept: reconnecting
        makes again what matters), and wake each request whose message went out
        on it, ``lost``. Flush tokens keep waiting for the next stream."""
        self._change(Input.LOST)
        self.outstanding_pings = 0
        kept: list[bytes | bytearray] = [
            frame
            for frame in self.out
            if type(frame) is bytes and frame.startswith(_MESSAGE_FRAMES)
        ]
        self.out = kept
        self.pending_bytes = sum(map(len, kept))
        waiting = {id(frame) for frame in kept}
        for request in self.requests.values():
            if request.reply is None and id(request.frame) not in waiting:
                request.lost = True
                request.waiter.set()
        if self.protocol._broken is not None:
            self._renew_protocol()

    def _replay(self) -> None:
        """Connected (again): what to send first, in order -- every subscription
        (with what is left of its ``max_msgs``), the inbox, the kept messages, then
        a ``PING`` per flush still waiting (the keep-alive ones are forgotten)."""
        protocol = self.protocol
        frames: list[bytes | bytearray] = []
        for subscription in self.subscriptions.values():
            frames.append(
                protocol.subscribe(subscription.sid, subscription.subject, queue=subscription.queue)
            )
            left = self._limits.get(subscription.sid)
            if left is not None:
                frames.append(protocol.unsubscribe(subscription.sid, max_msgs=left))
        if self.inbox_sid is not None:
            frames.append(protocol.subscribe(self.inbox_sid, f"{self.inbox_prefix}.*"))
        flushes: deque[Waiter | None] = deque(p for p in self.pongs if p is not None)
        self.pongs = flushes
        self.outstanding_pings = 0
        self.counters.handshakes += 1
        self.out = frames + self.out + [protocol.ping() for _ in flushes]
        self.pending_bytes = sum(map(len, self.out))

    def unsent_messages(self) -> int:
        """How many whole messages wait in :attr:`out`."""
        return sum(frame.startswith(_MESSAGE_FRAMES) for frame in self.out)

    def close(self) -> None:
        """Closed for good: wake every flush and request (neither has its answer)
        and end every subscription."""
        if self._change(Input.CLOSE) is ConnectionState.CLOSED:
            return
        for waiter in self.pongs:
            if waiter is not None:
                waiter.set()
        self.pongs.clear()
        for request in self.requests.values():
            request.waiter.set()
        for subscription in list(self.subscriptions.values()):
            subscription._end()

    def _renew_protocol(self) -> None:
        """A codec the server's bytes broke makes no more frames: a fresh one with
        the same limits does (until the next stream's)."""
        protocol = ClientProtocol()
        protocol.server_info = self.protocol.server_info
        self.protocol = protocol

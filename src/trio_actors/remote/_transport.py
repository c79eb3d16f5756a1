"""How a node reaches the others: NATS, or an in-memory bus for deterministic tests.

A node needs three things of its connection, and this module's two transports give
exactly those: :meth:`~Transport.publish` (synchronous, never a checkpoint, so a
remote ``tell`` keeps T4), :meth:`~Transport.subscribe` with a callback that the
connection calls with each message, in order (no task hop between the network and
a mailbox), and :meth:`~Transport.flush` (the server has everything published so
far, so any no-responders answer for it has come back). A message is a
:class:`trio_actors.nats.Msg`; ``status == 503`` on a reply subject is NATS's
"no responders": nobody subscribed to the subject of a message published with that
reply subject.

* :class:`NatsTransport` -- a :func:`trio_actors.nats.connect` client.
* :class:`MemoryBus` -- what a NATS server does for a cluster of nodes in one trio
  run, without sockets: subjects with ``*`` and ``>`` wildcards, per-publisher
  order, no-responders, and :meth:`MemoryBus.disconnect` for a node that dies. It
  runs under ``MockClock``, so the contracts across nodes are deterministic.
"""

from __future__ import annotations

import json
import random
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager, contextmanager
from typing import Protocol

import trio

from .._interrupts import protect_module
from ..nats import Client, Headers, Msg

__all__ = ["MemoryBus", "MemoryTransport", "NatsTransport", "Transport", "subject_matches"]

Callback = Callable[[Msg], object]


class Transport(Protocol):
    """What a node needs of its connection to the cluster."""

    def publish(
        self,
        subject: str,
        payload: bytes,
        *,
        reply: str | None = None,
        headers: Headers | None = None,
    ) -> None:
        """Send (with ``headers``: a NATS header block -- an observed node's trace
        context, ``trio_actors/observe``); never blocks, never a checkpoint."""

    def takes_headers(self) -> bool:
        """Whether a message may carry headers (NATS: the server's INFO says so)."""

    def subscribe(
        self, subject: str, callback: Callback, *, queue: str | None = None
    ) -> Callable[[], None]:
        """Call ``callback`` with each message to ``subject`` (wildcards allowed), in
        order; return what unsubscribes. With ``queue``, the subscription is one
        member of that queue group: each message goes to one member of the group
        (the server chooses), not to all."""

    async def flush(self) -> None:
        """Wait until the cluster has had everything published so far."""

    def waiting_to_write(self) -> bool:
        """Whether what was published waits for the connection's writer's turn."""

    def before_writing(self, callback: Callable[[], object]) -> Callable[[], None]:
        """Call ``callback()`` at each turn of the writer, first (it may publish;
        it must not raise); return what removes it."""


class NatsTransport:
    """A node's connection through a NATS client."""

    def __init__(self, client: Client) -> None:
        self.client = client
        # The client's own method, not a call through one of ours: a remote tell
        # is one publish, and each Python call level costs ~0.2 us of its ~7 us.
        self.publish = client.publish

    def takes_headers(self) -> bool:
        return bool(self.client.server_info.get("headers", False))

    def subscribe(
        self, subject: str, callback: Callback, *, queue: str | None = None
    ) -> Callable[[], None]:
        return self.client.subscribe_nowait(subject, queue=queue, callback=callback).unsubscribe

    async def flush(self) -> None:
        await self.client.flush()

    def waiting_to_write(self) -> bool:
        return self.client.waiting_to_write

    def before_writing(self, callback: Callable[[], object]) -> Callable[[], None]:
        return self.client.before_writing(callback)


def subject_matches(pattern: str, subject: str) -> bool:
    """Whether NATS would deliver a message to ``subject`` to a subscription to
    ``pattern`` (``*``: one token; ``>``: one or more, last)."""
    wanted = pattern.split(".")
    tokens = subject.split(".")
    for index, token in enumerate(wanted):
        if token == ">":
            return len(tokens) > index
        if index >= len(tokens) or (token != "*" and token != tokens[index]):
            return False
    return len(tokens) == len(wanted)


class MemoryBus:
    """An in-memory NATS for the nodes of one trio run (tests, contracts).

    ``advisories``: tell the nodes when a connection is cut, as the system account's
    disconnect advisories do (``False``: they find out by missed heartbeats).

    Each node gets a ``MemoryTransport`` from :meth:`connect`; what one
    publishes is delivered to the matching subscriptions of every connected
    transport by that transport's own delivery task, in the order published. As
    a NATS client's frames wait for its writer task, what a transport published
    "waits to be written" until its own writer task's next turn (it is routed at
    once all the same): what coalesces behind a busy connection over NATS
    coalesces here too.
    """

    def __init__(self, *, advisories: bool = True, seed: int = 0) -> None:
        self._transports: list[MemoryTransport] = []
        self._random = random.Random(seed)  # (which member of a queue group: seeded)
        self.advisories = advisories
        self.published = 0  # messages, for tests
        self.lost = 0  # messages lost on the way (:meth:`losing`)
        self._losing: list[Callable[[str, bytes], bool]] = []

    @contextmanager
    def losing(self, which: Callable[[str, bytes], bool]) -> Iterator[None]:
        """For the length of the block, lose the messages for which ``which(subject,
        payload)`` is true, as a NATS server that dies loses what it was routing
        while both ends stay connected (counted in :attr:`lost`)."""
        self._losing.append(which)
        try:
            yield
        finally:
            self._losing.remove(which)

    @contextmanager
    def between_connections(self, transport: MemoryTransport) -> Iterator[None]:
        """For the length of the block, ``transport`` is between two connections (its
        server died; it reconnects to another): nothing reaches its subscriptions
        (a message only for them is answered with no-responders), and what it
        publishes waits, to be sent in order when the block ends -- as a NATS
        client buffers while it reconnects."""
        transport.reconnecting = True
        try:
            yield
        finally:
            transport.reconnecting = False
            held, transport._held = transport._held, []
            for subject, payload, reply, headers in held:
                transport.publish(subject, payload, reply=reply, headers=headers)

    @asynccontextmanager
    async def connect(self, name: str = "") -> AsyncIterator[MemoryTransport]:
        """A connection named ``name``, for as long as the block runs (its delivery
        task runs in it). A checkpoint."""
        transport = MemoryTransport(self, name)
        self._transports.append(transport)
        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(transport._deliver, name="memory bus delivery")
                nursery.start_soon(transport._write, name="memory bus writer")
                yield transport
                nursery.cancel_scope.cancel()
        finally:
            self.disconnect(transport)

    def disconnect(self, transport: MemoryTransport) -> None:
        """The connection is gone (a node died): its subscriptions go, what was
        waiting for it is lost, and publishing on it does nothing; with
        ``advisories``, the others are told as a NATS system account tells
        (``$SYS.ACCOUNT.MEMORY.DISCONNECT``, the connection's name in
        ``client.name``). Idempotent."""
        if transport in self._transports:
            self._transports.remove(transport)
            if self.advisories:
                advisory = {
                    "type": "io.nats.server.advisory.v1.client_disconnect",
                    "client": {"name": transport.name},
                    "reason": "Client Closed",
                }
                disconnect = "$SYS.ACCOUNT.MEMORY.DISCONNECT"
                self._route(disconnect, json.dumps(advisory).encode(), None, None)
        transport._subscriptions.clear()
        transport._inbox.clear()
        transport.connected = False

    def _route(
        self, subject: str, payload: bytes, reply: str | None, headers: Headers | None
    ) -> None:
        self.published += 1
        if any(which(subject, payload) for which in self._losing):
            self.lost += 1
            return
        found = False
        groups: dict[str, list[tuple[MemoryTransport, Callback]]] = {}
        for transport in self._transports:
            if transport.reconnecting:
                continue
            for pattern, callback, queue in list(transport._subscriptions.values()):
                if subject_matches(pattern, subject):
                    found = True
                    if queue is None:
                        transport._put(callback, Msg(subject, 0, reply, payload, headers))
                    else:
                        groups.setdefault(queue, []).append((transport, callback))
        for members in groups.values():  # (one member of each queue group, drawn)
            transport, callback = members[self._random.randrange(len(members))]
            transport._put(callback, Msg(subject, 0, reply, payload, headers))
        if not found and reply is not None:
            # NATS's no responders: a status 503 to the reply subject.
            for transport in self._transports:
                if transport.reconnecting:
                    continue
                for pattern, callback, _queue in list(transport._subscriptions.values()):
                    if subject_matches(pattern, reply):
                        transport._put(callback, Msg(reply, 0, None, b"", status=503))


class MemoryTransport:
    """One node's connection to a :class:`MemoryBus`."""

    def __init__(self, bus: MemoryBus, name: str = "") -> None:
        self.bus = bus
        self.name = name
        self.connected = True
        self.reconnecting = False  # (MemoryBus.between_connections)
        self._held: list[tuple[str, bytes, str | None, Headers | None]] = []  # published meanwhile
        self._subscriptions: dict[int, tuple[str, Callback, str | None]] = {}
        self._next_id = 0
        self._inbox: deque[tuple[Callback, Msg]] = deque()
        self._wake = trio.Event()
        self._unwritten = False  # (published since the writer's last turn)
        self._wake_writer = trio.Event()
        self._before_writing: list[Callable[[], object]] = []

    def publish(
        self,
        subject: str,
        payload: bytes,
        *,
        reply: str | None = None,
        headers: Headers | None = None,
    ) -> None:
        if self.reconnecting:
            self._held.append((subject, payload, reply, headers))
        elif self.connected:
            self.bus._route(subject, payload, reply, headers)
            if not self._unwritten:
                self._unwritten = True
                self._wake_writer.set()

    def takes_headers(self) -> bool:
        return True

    def waiting_to_write(self) -> bool:
        return self._unwritten

    def before_writing(self, callback: Callable[[], object]) -> Callable[[], None]:
        self._before_writing.append(callback)

        def remove() -> None:
            if callback in self._before_writing:
                self._before_writing.remove(callback)

        return remove

    async def _write(self) -> None:
        while True:
            await self._wake_writer.wait()
            for callback in list(self._before_writing):
                callback()
            self._wake_writer = trio.Event()
            self._unwritten = False

    def subscribe(
        self, subject: str, callback: Callback, *, queue: str | None = None
    ) -> Callable[[], None]:
        self._next_id += 1
        key = self._next_id
        self._subscriptions[key] = (subject, callback, queue)
        return lambda: self._subscriptions.pop(key, None) and None

    async def flush(self) -> None:
        # Routing is immediate: no-responders answers are queued already.
        await trio.lowlevel.checkpoint()

    def _put(self, callback: Callback, message: Msg) -> None:
        self._inbox.append((callback, message))
        self._wake.set()

    async def _deliver(self) -> None:
        inbox = self._inbox
        while True:
            await self._wake.wait()
            self._wake = trio.Event()
            while inbox:
                callback, message = inbox.popleft()
                callback(message)


protect_module(globals())

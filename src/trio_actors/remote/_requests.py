"""Requests of this node that wait for an answer: asks, stops and lookups.

Each request gets a number and waits for one reply on ``P.r.<node>.<incarnation>.
<n>`` (a :class:`_Waiter`). It ends in one of four ways, each once:

* its **reply** comes: the value, the error (rebuilt by the codec), or NATS's
  no-responders (status 503: nothing serves that node incarnation, or no node
  holds the name looked up);
* the **peer** that must answer it is declared down (``_peers.py``): ``NodeDown``
  ("may or may not have been handled") -- only those sent before the news, when it
  came by an advisory (later ones are answered by NATS);
* this node's **connection** is lost: ``NodeDown`` for every request (the message,
  or its answer, may have been lost with the socket);
* this node **closes**: the ask fails with ``ActorStopped``.

An asker's cancellation withdraws its ask on the other node (a ``CANCEL``) unless
it has already ended. A waiter's :attr:`_Waiter.failed` says why no answer will
come -- the request's own end, written here only, not the peer's state (a request
sent after a peer's down, or to no peer at all, a lookup, is not ended by it).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import trio

from .._errors import ActorNotFound, ActorStopped, NodeDown
from ._bad_input import Bad
from ._frames import Frames, Reply
from ._subjects import ASK, CANCEL, NONE, STOP, Peer, encode

if TYPE_CHECKING:
    from ..actors import ActorRef
    from ._codec import WireRef
    from ._node import Node
    from ._remote_cell import RemoteCell

__all__ = ["Requests"]


class _Waiter:
    """One request of this node waiting for its reply (from ``peer``, if one node
    must answer it)."""

    __slots__ = ("event", "failed", "lookup", "peer", "ref", "reply", "sent_at")

    def __init__(self, peer: Peer | None, *, lookup: bool = False) -> None:
        self.event = trio.Event()
        self.reply: Reply | None = None  # (parsed: Frames.reply)
        self.lookup = lookup
        self.ref: WireRef | None = None  # (a lookup's answer, parsed)
        self.peer = peer
        self.sent_at = trio.current_time()
        self.failed: str | None = None  # why no answer will come (the peer, or the connection)


class Requests:
    """This node's requests waiting for a reply, by number."""

    __slots__ = ("_node", "_replies", "made", "waiting")

    def __init__(self, node: Node) -> None:
        self._node = node
        self._replies = node.subjects.replies(node.name, node.incarnation)
        self.waiting: dict[int, _Waiter] = {}
        self.made = 0  # (the number of the newest request)

    @property
    def subject(self) -> str:
        """The subjects of the replies (subscribed by the node)."""
        return f"{self._replies}.*"

    def _request(self, peer: Peer | None, *, lookup: bool = False) -> tuple[int, str, _Waiter]:
        number = self.made = self.made + 1
        waiter = self.waiting[number] = _Waiter(peer, lookup=lookup)
        return number, f"{self._replies}.{number}", waiter

    async def ask(self, cell: RemoteCell, message: Any) -> Any:
        """A remote ask (see ``ActorRef.ask``). A checkpoint."""
        node = self._node
        node.check_thread("ask")
        body = node.codec.encode(message)
        if node.closed:
            await trio.lowlevel.checkpoint()
            raise ActorStopped(f"{cell.path}: this node has left the cluster; ask not sent")
        number, reply_subject, waiter = self._request(cell.peer)
        tells = node.tells
        try:
            tells.send(cell, ASK, body, reply_subject)
            try:
                await waiter.event.wait()
            except trio.Cancelled:
                if waiter.reply is None and not waiter.failed:
                    tells.send(cell, CANCEL, NONE, reply_subject)  # withdraw it there
                raise
        finally:
            del self.waiting[number]
        return self._answer_of(waiter, cell)

    def _answer_of(self, waiter: _Waiter, cell: RemoteCell) -> Any:
        reply = waiter.reply
        if waiter.failed:
            raise NodeDown(
                f"{cell.path}: {waiter.failed}, before it answered; the message may or "
                "may not have been handled"
            )
        if reply is None:
            raise ActorStopped(f"{cell.path}: this node left the cluster before it answered")
        if reply.ok is None:
            raise ActorStopped(
                f"{cell.path} is unreachable: nothing serves node {cell.node_name!r} "
                f"incarnation {cell.incarnation} (it stopped, or restarted as another)"
            )
        if reply.ok:
            return self._node.codec.decode(reply.body)
        raise self._node.codec.decode_error(reply.body)

    async def stop(self, cell: RemoteCell, *, drain: bool) -> None:
        """A remote ``stop``: returns once the actor has stopped. A checkpoint."""
        node = self._node
        node.check_thread("stop")
        if node.closed:
            await trio.lowlevel.checkpoint()
            return  # (this node can no longer reach it: as far as it can tell, stopped)
        number, reply_subject, waiter = self._request(cell.peer)
        try:
            node.tells.send(cell, STOP, encode(drain), reply_subject)
            await waiter.event.wait()
        finally:
            del self.waiting[number]
        if waiter.failed or (waiter.reply is not None and waiter.reply.ok is None):
            return  # its node is gone: it has stopped
        if waiter.reply is not None:
            self._answer_of(waiter, cell)

    def request_stop(self, cell: RemoteCell, *, drain: bool) -> None:
        """A remote ``stop_nowait``: sent, nothing waited for."""
        node = self._node
        node.check_thread("stop_nowait")
        if not node.closed:
            node.tells.send(cell, STOP, encode(drain), None)

    async def lookup(self, name: str) -> ActorRef:
        """The ref registered as ``name`` on any node. A checkpoint.

        Raises:
            ActorNotFound: no node has it.
        """
        node = self._node
        number, reply_subject, waiter = self._request(None, lookup=True)
        try:
            node.tells.out(node.subjects.name(name), b"", reply_subject)
            await waiter.event.wait()
        finally:
            del self.waiting[number]
        wire = waiter.ref
        if wire is None:
            raise ActorNotFound(f"no actor is registered as {name!r} on any node")
        return node.exports.ref_from_wire(*wire)

    def on_reply(self, reply: Reply) -> None:
        """A reply came (parsed: ``Frames.reply``; called by the connection's
        reader). A lookup's must hold a ref: one that does not is bad input, and
        the lookup goes on waiting (for its holder's answer, or NATS's)."""
        waiter = self.waiting.get(reply.number)
        if waiter is None or waiter.reply is not None:
            return
        if waiter.lookup and reply.ok is not None:
            wire = Frames.wire_ref(reply.body) if reply.ok else Bad("replies", "not a ref")
            if isinstance(wire, Bad):
                self._node.refused("replies", wire.why, self._replies)
                return
            waiter.ref = wire
        waiter.reply = reply
        waiter.event.set()

    # --- ended without a reply ----------------------------------------------------

    def waiting_on(self) -> Iterator[tuple[Peer, float]]:
        """The peers that requests still wait on, each with when it was sent (for
        the silence check; a request that ends meanwhile is skipped)."""
        for waiter in list(self.waiting.values()):
            peer = waiter.peer
            if peer is None or waiter.reply is not None or waiter.failed:
                continue
            yield peer, waiter.sent_at

    def peer_down(self, peer: Peer, said: str, sent_up_to: int | None) -> None:
        """``peer`` is down: the requests to it (up to number ``sent_up_to``, if
        given) fail with ``NodeDown``."""
        for number, waiter in self.waiting.items():
            if sent_up_to is not None and number > sent_up_to:
                continue  # (sent after the news: nothing serves it, NATS will say)
            if waiter.peer == peer and waiter.reply is None:
                waiter.failed = said
                waiter.event.set()

    def connection_lost(self, why: str) -> None:
        """This node's connection was lost: every request waiting for an answer
        fails with ``NodeDown`` (its message, or its answer, may have been lost with
        the socket: it may or may not have been handled)."""
        for waiter in self.waiting.values():
            if waiter.reply is None and not waiter.failed:
                waiter.failed = why
                waiter.event.set()

    def close(self) -> None:
        """This node left: every request still waiting ends (asks with
        ``ActorStopped``, stops as done, lookups as not found)."""
        for waiter in self.waiting.values():
            waiter.event.set()

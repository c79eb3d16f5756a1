"""The cluster's members as a node sees them: values, and a bounded stream of changes.

A node lists the nodes it knows to be up (``system.node.members()``: :class:`Member`
values) and tells whoever follows (``system.node.events()``: a
:class:`MembershipEvents` stream) when one joins (:class:`MemberJoined`), leaves
cleanly (:class:`MemberLeft`) or is declared down (:class:`MemberDown`). Both are
read from the node's peer table (``remote/_peers.py``), which is what the node
hears: heartbeats, ``bye`` and the server's disconnect advisories
(``docs/remote.rst``, "Membership").

The stream never makes the node wait: it holds at most ``capacity`` events not yet
received, and an event that finds it full is not queued but counted in
:attr:`MembershipEvents.dropped` (as a dead-letter subscription does).
"""

from __future__ import annotations

from types import TracebackType
from typing import Literal, TypeAlias

import attrs
import trio

DEFAULT_EVENTS_CAPACITY = 1_000

DownReason = Literal["silence", "advisory"]
"""Why a member was declared down: ``"silence"`` (no heartbeat for
``Cluster.heartbeats_missed`` beats) or ``"advisory"`` (the server said its
connection ended)."""


@attrs.frozen
class Member:
    """A node this node knows to be up.

    Attributes:
        name: the node's name, unique in its cluster.
        incarnation: this life of the node (random, new each time it starts: a node
            that restarts is a new member with the same name).
        since: when this node last saw it join (enter "up"), in this node's trio
            clock (``trio.current_time()``, so ``MockClock`` runs are exact): for
            this node itself, when it opened. A member declared down and heard
            again joins again, with a new ``since``. Trio time, not wall time:
            it is comparable with this node's own deadlines and never jumps;
            ``time.time() - (trio.current_time() - since)`` gives a wall time.
    """

    name: str
    incarnation: str
    since: float


@attrs.frozen
class MemberJoined:
    """``member`` entered "up": its first heartbeat (or another sign of life) came --
    a node that started, or one this node had declared down and hears again (the
    same incarnation: it only *was declared* down)."""

    member: Member


@attrs.frozen
class MemberLeft:
    """``member`` left the cluster cleanly (its ``bye``)."""

    member: Member


@attrs.frozen
class MemberDown:
    """``member`` was declared down: ``reason`` is ``"silence"`` (no heartbeat for
    ``Cluster.heartbeats_missed`` beats) or ``"advisory"`` (the NATS server said its
    connection ended: a ``kill -9`` is seen in milliseconds)."""

    member: Member
    reason: DownReason


MembershipEvent: TypeAlias = MemberJoined | MemberLeft | MemberDown
"""One change of the members."""


class MembershipEvents:
    """The membership changes a node sees from its subscription on
    (``system.node.events()``), in the order the node saw them.

    Iterate it (``async for event in system.node.events():``) or ``await
    receive()``; the iteration ends when the node leaves the cluster (its system
    closes) or when the subscription is closed. Use it as a context manager
    (``with system.node.events() as events:``) to unsubscribe when the block ends.

    The stream holds at most ``capacity`` events not yet received: an event that
    finds it full is not queued, and counted in ``dropped`` -- the node never
    waits for a subscriber (after a drop, read ``system.node.members()``: it is
    always current). The node holds it weakly: a stream nobody holds any more (nor
    a task waiting on it) is unsubscribed when it is collected, with what it held.

    Attributes:
        capacity: the most events it holds.
        dropped: events that found it full.
        closed: whether no event is offered any more (closed, or the node left).
    """

    __slots__ = ("__weakref__", "_receive", "_send", "capacity", "closed", "dropped")

    def __init__(self, capacity: int = DEFAULT_EVENTS_CAPACITY) -> None:
        if isinstance(capacity, bool) or not isinstance(capacity, int):
            raise TypeError(f"events(capacity=...) must be an int, got {capacity!r}")
        if capacity < 1:
            raise ValueError(f"events(capacity=...) must be >= 1, got {capacity!r}")
        self.capacity = capacity
        self.dropped = 0
        self._send, self._receive = trio.open_memory_channel[MembershipEvent](capacity)
        self.closed = False  # (no event is offered any more: closed, or the node left)

    def offer(self, event: MembershipEvent) -> None:
        """Queue ``event`` if there is room; count it as dropped if not. Never a
        checkpoint (the node's own call)."""
        try:
            self._send.send_nowait(event)
        except trio.WouldBlock:
            self.dropped += 1
        except trio.ClosedResourceError:
            pass  # (closed meanwhile)

    async def receive(self) -> MembershipEvent:
        """The next event; waits for one. A checkpoint.

        Raises:
            trio.EndOfChannel: the subscription (or the node) was closed and every
                event queued before has been received.
        """
        return await self._receive.receive()

    def receive_nowait(self) -> MembershipEvent:
        """The next event if one is queued. Never a checkpoint.

        Raises:
            trio.WouldBlock: none is queued.
            trio.EndOfChannel: the subscription (or the node) was closed and every
                event queued before has been received.
        """
        return self._receive.receive_nowait()

    def __aiter__(self) -> MembershipEvents:
        return self

    async def __anext__(self) -> MembershipEvent:
        try:
            return await self._receive.receive()
        except trio.EndOfChannel:
            raise StopAsyncIteration from None

    def close(self) -> None:
        """Unsubscribe: no event is offered from now on; those queued can still be
        received, then the iteration ends. Idempotent; never a checkpoint."""
        self.closed = True
        self._send.close()

    def __enter__(self) -> MembershipEvents:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        queued = self._receive.statistics().current_buffer_used
        return f"<MembershipEvents queued={queued} capacity={self.capacity} dropped={self.dropped}>"


__all__ = [
    "DEFAULT_EVENTS_CAPACITY",
    "DownReason",
    "Member",
    "MemberDown",
    "MemberJoined",
    "MemberLeft",
    "MembershipEvent",
    "MembershipEvents",
]

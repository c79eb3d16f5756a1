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

from typing import Literal, TypeAlias

import attrs

from ._interrupts import protect_module
from ._stream import Stream

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


class MembershipEvents(Stream[MembershipEvent]):
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

    __slots__ = ("closed",)

    def __init__(self, capacity: int = DEFAULT_EVENTS_CAPACITY) -> None:
        if isinstance(capacity, bool) or not isinstance(capacity, int):
            raise TypeError(f"events(capacity=...) must be an int, got {capacity!r}")
        if capacity < 1:
            raise ValueError(f"events(capacity=...) must be >= 1, got {capacity!r}")
        super().__init__(capacity)
        self.closed = False  # (no event is offered any more: closed, or the node left)

    def close(self) -> None:
        """Unsubscribe: no event is offered from now on; those queued can still be
        received, then the iteration ends. Idempotent; never a checkpoint."""
        self.closed = True
        super().close()


protect_module(globals())

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

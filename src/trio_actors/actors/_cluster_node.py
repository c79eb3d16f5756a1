"""What an actor system knows of the node it joined: :class:`ClusterNode`.

The remote layer (``trio_actors.remote``) sits above the actors layer, so the
system cannot name its ``Node``; it holds it as this protocol, which
:class:`trio_actors.remote.Node` implements (``Node.of(system)`` gives the node
itself).
"""

from __future__ import annotations

from typing import Protocol

from .._core._ref import ActorRef
from .._membership import DEFAULT_EVENTS_CAPACITY, Member, MembershipEvents
from .._statistics import NodeStatistics


class ClusterNode(Protocol):
    """A system's node in a cluster, as ``system.node`` gives it (a
    :class:`trio_actors.remote.Node`)."""

    @property
    def name(self) -> str:
        """The node's name, unique in its cluster."""
        ...

    @property
    def incarnation(self) -> str:
        """This life of the node (a node that restarts is a new incarnation)."""
        ...

    @property
    def unconfirmed(self) -> int:
        """Tells whose fate a lost connection or a node that died left unknown."""
        ...

    async def flush(self) -> None:
        """Wait until the cluster has had everything this node sent so far."""
        ...

    def statistics(self) -> NodeStatistics:
        """A snapshot of the node's counters: a :class:`~trio_actors.NodeStatistics`
        (never a checkpoint)."""
        ...

    async def lookup(self, name: str) -> ActorRef:
        """The ref registered under ``name`` anywhere in the cluster."""
        ...

    def members(self) -> list[Member]:
        """The nodes this node knows to be up, oldest first: this node too, from
        its start and while it hears its own heartbeats (see :doc:`/remote`,
        "Membership"). Never a checkpoint."""
        ...

    def events(self, *, capacity: int = DEFAULT_EVENTS_CAPACITY) -> MembershipEvents:
        """The membership changes from now on: ``async for event in
        system.node.events():`` -- :class:`~trio_actors.MemberJoined`,
        :class:`~trio_actors.MemberLeft`, :class:`~trio_actors.MemberDown`. A
        bounded stream (``capacity`` events not yet received; more are dropped
        and counted, the node never waits), ending when the node leaves. Never a
        checkpoint."""
        ...

    def registered(self) -> dict[str, ActorRef]:
        """Every name registered in the cluster, as this node knows it: this
        system's own and those the members hold (their claims, already exchanged:
        nothing is asked), and the shared names served here or by a member, each
        with its group's ref. Never a checkpoint."""
        ...


__all__ = ["ClusterNode"]

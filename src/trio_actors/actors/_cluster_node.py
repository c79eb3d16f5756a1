"""What an actor system knows of the node it joined: :class:`ClusterNode`.

The remote layer (``trio_actors.remote``) sits above the actors layer, so the
system cannot name its ``Node``; it holds it as this protocol, which
:class:`trio_actors.remote.Node` implements (``Node.of(system)`` gives the node
itself).
"""

from __future__ import annotations

from typing import Protocol

from .._core._ref import ActorRef
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


__all__ = ["ClusterNode"]

"""What an actor system knows of the node it joined: :class:`ClusterNode`, and
:class:`NodeListener`.

The remote layer (``trio_actors.remote``) sits above the actors layer, so the
system cannot name its ``Node``; it holds it as this protocol, which
:class:`trio_actors.remote.Node` implements (``Node.of(system)`` gives the node
itself). What the node hears of the system -- its names come and go, and its
exported actors stop -- it hears as a :class:`NodeListener`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from .._core._ref import ActorRef
from .._core._stopping import DEFAULT_SHUTDOWN
from .._interrupts import protect_module
from .._membership import DEFAULT_EVENTS_CAPACITY, Member, MembershipEvents
from .._placement import Placement, RoundRobin
from .._statistics import NodeStatistics

if TYPE_CHECKING:
    from .._core._bounded import Bounded
    from .._core._cell import ActorCell
    from .._core._registry import RegistryListener
    from .._supervision import RestartType, Supervision
    from ._actor import Actor


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

    async def spawn(
        self,
        actor_class: type[Actor],
        *args: Any,
        on: str | Placement = RoundRobin(),  # noqa: B008  (a frozen value)
        name: str | None = None,
        mailbox: Bounded | None = None,
        shutdown: float = DEFAULT_SHUTDOWN,
    ) -> ActorRef:
        """Spawn an actor on a node of the cluster -- the member named ``on``, or
        the one a placement rule (:class:`~trio_actors.RoundRobin`,
        :class:`~trio_actors.FewestActors`) chooses among those that list the class
        as spawnable -- and return its ref (see :doc:`/remote`, "Spawning on
        another node"). A checkpoint."""
        ...

    async def spawn_child(
        self,
        parent: ActorCell,
        actor_class: type[Actor],
        args: tuple[Any, ...],
        on: str | Placement,
        name: str | None,
        supervision: Supervision,
        mailbox: Bounded | None,
        shutdown: float,
        restart: RestartType,
    ) -> ActorRef:
        """``Actor.spawn_remote``'s work: a child of ``parent`` on another node."""
        ...

    def registered(self) -> dict[str, ActorRef]:
        """Every name registered in the cluster, as this node knows it: this
        system's own and those the members hold (their claims, already exchanged:
        nothing is asked), and the shared names served here or by a member, each
        with its group's ref. Never a checkpoint."""
        ...


# (For mypy only: a class made at import here moved S1-det 3,083 -> 3,112
# instructions per message under callgrind -- where objects land, not work done.)
if TYPE_CHECKING:

    class NodeListener(RegistryListener, Protocol):
        """What a node hears of its system: the names of its registry come and go
        (:class:`~trio_actors._core._registry.RegistryListener`), and its exported
        actors stop."""

        def exported_stopped(self, cell: ActorCell) -> None:
            """``cell``'s actor, a ref to which has left for another node (its
            ``export_number`` is set), has stopped: the node forgets it
            (``remote/_exports.py``). Called in the trio thread, once per stop."""
            ...


protect_module(globals())

__all__ = ["ClusterNode"]

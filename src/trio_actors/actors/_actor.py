"""The :class:`Actor` base class that application actors subclass.

An actor is a plain object with a ``receive`` method. The runtime guarantees that at
most one of its handlers (``on_start``, ``receive``, ``on_stop``) runs at a time, so
its state needs no locks. Users never call an actor's methods directly; they hold an
:class:`~trio_actors.ActorRef` and send it messages.

The kernel's half (handlers, ref, stop, watch, timers) is
:class:`~trio_actors._core._actor.ActorBase`; this module adds the actor's place in
its system -- :attr:`Actor.system` and :meth:`Actor.spawn` -- which the kernel, below
the system, cannot name.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

from .._core._actor import ActorBase
from .._core._bounded import Bounded
from .._core._stopping import DEFAULT_SHUTDOWN
from .._errors import ActorError
from .._interrupts import protect_module
from .._placement import Placement, RoundRobin
from .._supervision import DEFAULT_RESTART_TYPE, DEFAULT_SUPERVISION, RestartType, Supervision

if TYPE_CHECKING:
    from .._core._ref import ActorRef
    from ._system import ActorSystem

__all__ = ["Actor", "unknown_spawn_keyword"]


def unknown_spawn_keyword(factory: object, unknown: dict[str, Any]) -> TypeError:
    """The error for ``spawn(Cls, key=value)``: spawn's own options are keywords, the
    factory's arguments positional (trio's ``fn, *args`` convention)."""
    given = ", ".join(f"{key}={value!r}" for key, value in unknown.items())
    return TypeError(
        f"spawn() got unexpected keyword arguments {sorted(unknown)!r}: its keywords are "
        "name, supervision, mailbox, shutdown and restart; to pass keyword arguments to the "
        "actor, spawn "
        f"functools.partial({getattr(factory, '__qualname__', None) or repr(factory)}, {given})"
    )


class Actor(ActorBase):
    """Base class for actors.

    Subclasses define :meth:`receive` (plain or ``async def``) and may define
    :meth:`on_start` and :meth:`on_stop` (each plain or ``async def``).

    A plain handler runs inline in the runtime's serving loop: it is the fast path,
    and it cannot be interrupted. An ``async def`` handler runs in a trio task of its
    own while it awaits; it can be cancelled (by its asker, or by ``stop()``).

    The runtime's code is protected from ``KeyboardInterrupt``; the handlers are
    not (their code objects are marked unprotected when the class is first
    spawned), so Ctrl-C can interrupt a handler stuck in a loop.
    """

    __slots__ = ()

    @property
    def system(self) -> ActorSystem:
        """The :class:`~trio_actors.ActorSystem` this actor lives in."""
        # The kernel knows its system as a Host; the only Host is an ActorSystem.
        return cast("ActorSystem", self._cell().system)

    def spawn(
        self,
        actor_factory: type[Actor] | Callable[..., Actor],
        *args: Any,
        name: str | None = None,
        supervision: Supervision = DEFAULT_SUPERVISION,
        mailbox: Bounded | None = None,
        shutdown: float = DEFAULT_SHUTDOWN,
        restart: RestartType = DEFAULT_RESTART_TYPE,
        **unknown: Any,
    ) -> ActorRef:
        """Spawn a child of this actor and return its ref. Never a checkpoint.

        Arguments as for :meth:`ActorSystem.spawn <trio_actors.ActorSystem.spawn>`;
        ``name`` must be unique among this actor's live children. This actor
        supervises the child: a child's ``Escalate`` (or exceeded restart intensity)
        fails this actor. Children stop before their parent, and a restarting parent
        stops its children before its fresh instance starts.

        Raises:
            ActorError: this actor is stopping, draining or restarting (a child
                spawned then would outlive the stop or restart that should end it).
        """
        if unknown:
            raise unknown_spawn_keyword(actor_factory, unknown)
        cell = self._cell()
        system = cast("ActorSystem", cell.system)  # (as Actor.system, without a 2nd lookup)
        return system._spawn(
            cell, actor_factory, args, name, supervision, mailbox, shutdown, restart
        )

    async def spawn_remote(
        self,
        actor_class: type[Actor],
        *args: Any,
        on: str | Placement = RoundRobin(),  # noqa: B008  (a frozen value)
        name: str | None = None,
        supervision: Supervision = DEFAULT_SUPERVISION,
        mailbox: Bounded | None = None,
        shutdown: float = DEFAULT_SHUTDOWN,
        restart: RestartType = DEFAULT_RESTART_TYPE,
        **unknown: Any,
    ) -> ActorRef:
        """Spawn a child of this actor on a node of the cluster and return its ref
        (``docs/remote.rst``, "Children on other nodes"). A checkpoint: one request
        to the node chosen.

        The child runs on the member named ``on``, or on the one a placement rule
        chooses (:class:`~trio_actors.RoundRobin`, the default, or
        :class:`~trio_actors.FewestActors`) among those that list ``actor_class``
        as spawnable; ``*args`` cross as a message does. It is this actor's child
        as a local one is -- in :attr:`children`, stopped before this actor
        (newest first, within ``shutdown``), watched, and supervised by
        ``supervision`` and ``restart`` here, on this node: a failure of the child
        on its node, or its node's death, is this child's failure, which the
        strategy decides (deciders see the error, rebuilt as for an ask); a restart
        places a fresh instance by the same rule (a node that is down is passed
        over). Its ref stays the same across restarts: messages told while there
        is no instance are held and sent on to the next, in order.

        Raises:
            TypeError: as for ``system.node.spawn``, or ``mailbox`` is given for
                this node's side (it is the instance's), or an unknown keyword.
            NotSpawnable, NodeDown: as for ``system.node.spawn``.
            ActorError: this actor is not on a node (its system was opened
                without ``cluster=``), is stopping, draining or restarting, or the
                call came from another thread.
        """
        if unknown:
            raise unknown_spawn_keyword(actor_class, unknown)
        cell = self._cell()
        node = cast("ActorSystem", cell.system).node
        if node is None:
            raise ActorError(
                f"spawn_remote() of {cell.path}: its system is not a node of a cluster "
                "(open it with cluster= and node=); use spawn() for a local child"
            )
        return await node.spawn_child(
            cell, actor_class, args, on, name, supervision, mailbox, shutdown, restart
        )


protect_module(globals())

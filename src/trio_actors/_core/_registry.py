"""The registry: actors found by a name chosen by the application.

Erlang's ``register`` / ``whereis``, Akka's receptionist, pykka's ``ActorRegistry``:
``system.register("ledger", ref)`` anywhere, ``await system.lookup("ledger")``
anywhere else. Decisions:

* A name is any non-empty ``str``; it names one actor at a time. Registering a name
  held by another live actor is a ``ValueError`` (Erlang's ``badarg``); registering
  the same actor under the same name again changes nothing (so an ``on_start`` may
  register itself, and does no harm after a restart, which keeps the ref). One actor
  may hold several names.
* A name is freed when its actor stops accepting messages (the start of its stop),
  so ``lookup`` never returns an actor that would refuse the message; and it may be
  given to a successor at once. A restart keeps it (the ref is the same).
* ``lookup`` is ``async`` and always a checkpoint, so that the cluster (a later
  layer, ``docs/remote.rst``) can make the same call answer across nodes.
  ``register`` and ``unregister`` are synchronous and never checkpoints.
* A name registered ``shared=True`` (on a node only: ``docs/remote.rst``, "Names
  served by many actors") is held by every actor registered under it, here and on
  other nodes; a name is shared or single, never both. Its members are kept here
  apart from the single names, and leave it as a single name is freed: when their
  actor begins to stop, or is unregistered.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Protocol

from .._errors import ActorError, ActorNotFound, ActorStopped
from .._interrupts import protect_module

if TYPE_CHECKING:
    from ._cell import ActorCell


class RegistryListener(Protocol):
    """Hears a registry's names come and go (a node: they answer across the cluster)."""

    def claimed(self, name: str, cell: ActorCell) -> None: ...

    def released(self, name: str) -> None: ...

    def claimed_shared(self, name: str, cell: ActorCell) -> None: ...

    def released_shared(self, name: str, cell: ActorCell) -> None: ...


class Registry:
    """The names of one system's actors (each a live, accepting actor)."""

    __slots__ = ("_by_name", "_shared", "listener")

    def __init__(self) -> None:
        self._by_name: dict[str, ActorCell] = {}
        self._shared: dict[str, list[ActorCell]] = {}  # shared name -> its members here
        self.listener: RegistryListener | None = None

    def register(self, name: object, cell: ActorCell, *, shared: bool = False) -> None:
        """Give ``name`` to ``cell``'s actor (``shared``: as one more of its members).

        Raises:
            TypeError: ``name`` is not a str.
            ValueError: ``name`` is empty, or held by another live actor (on a node:
                here, or on another node of the cluster); or it is held the other way
                (shared, or single); or ``shared`` without a node.
            ActorStopped: the actor is stopping or has stopped.
        """
        if not isinstance(name, str):
            raise TypeError(f"register() needs a name (a str), got {name!r}")
        if not name:
            raise ValueError("register() needs a non-empty name")
        if not cell.accepting:
            raise ActorStopped(
                f"cannot register {name!r}: {cell.path} is {cell.state.value} (a name is "
                "held only by an actor that accepts messages)"
            )
        holder = self._by_name.get(name)
        if shared:
            self._register_shared(name, cell, holder)
            return
        if name in self._shared:
            raise ValueError(
                f"cannot register {name!r} for {cell.path}: it is a shared name here "
                f"({len(self._shared[name])} actor(s) of this node serve it); a name is shared "
                "or single, never both (register it with shared=True)"
            )
        if holder is cell:
            return
        if holder is not None:
            raise ValueError(
                f"cannot register {name!r} for {cell.path}: {holder.path} holds it (unregister "
                "it first, or wait for that actor to stop)"
            )
        if self.listener is not None:
            self.listener.claimed(name, cell)  # (first: it may refuse, as a cluster does)
        self._by_name[name] = cell
        if cell.registered_names is None:
            cell.registered_names = []
        cell.registered_names.append(name)

    def _register_shared(self, name: str, cell: ActorCell, holder: ActorCell | None) -> None:
        if holder is not None:
            raise ValueError(
                f"cannot register {name!r} as shared for {cell.path}: {holder.path} holds it "
                "alone; a name is shared or single, never both (unregister it first)"
            )
        if self.listener is None:
            raise ValueError(
                f"cannot register {name!r} as shared: a shared name is served across the "
                "nodes of a cluster, and this system is not a node (open it with cluster= "
                "and node=; within one system, a Pool spreads work over actors)"
            )
        members = self._shared.get(name)
        if members is not None and cell in members:
            return
        self.listener.claimed_shared(name, cell)  # (first: it may refuse)
        self._shared.setdefault(name, []).append(cell)
        if cell.registered_names is None:
            cell.registered_names = []
        cell.registered_names.append(name)

    def unregister(self, name: object, cell: ActorCell | None = None) -> None:
        """Free ``name`` (a shared name: ``cell``'s actor leaves it; without
        ``cell``, every actor of this system that serves it).

        Raises:
            TypeError: ``name`` is not a str.
            ActorNotFound: no actor holds it (``cell``'s actor does not).
        """
        checked = self._checked(name, "unregister")
        if checked in self._shared:
            self._unregister_shared(checked, cell)
            return
        if cell is not None and self._by_name.get(checked) is not cell:
            raise ActorNotFound(f"cannot unregister {name!r}: {cell.path} does not hold it")
        cell = self._by_name.pop(checked, None)
        if cell is None:
            raise ActorNotFound(f"cannot unregister {name!r}: no actor is registered under it")
        assert cell.registered_names is not None
        cell.registered_names.remove(name)  # type: ignore[arg-type]
        if self.listener is not None:
            self.listener.released(name)  # type: ignore[arg-type]

    def _unregister_shared(self, name: str, cell: ActorCell | None) -> None:
        members = self._shared[name]
        if cell is not None and cell not in members:
            raise ActorNotFound(f"cannot unregister {name!r}: {cell.path} does not serve it")
        for member in [cell] if cell is not None else list(members):
            self._leave_shared(name, member)

    def _leave_shared(self, name: str, cell: ActorCell) -> None:
        members = self._shared[name]
        members.remove(cell)
        if not members:
            del self._shared[name]
        if cell.registered_names is not None and name in cell.registered_names:
            cell.registered_names.remove(name)
        if self.listener is not None:
            self.listener.released_shared(name, cell)

    def shared(self) -> dict[str, list[ActorCell]]:
        """A snapshot: every shared name served here, and its members here."""
        return {name: list(members) for name, members in self._shared.items()}

    def lookup(self, name: object) -> ActorCell:
        """The actor holding ``name``.

        Raises:
            TypeError: ``name`` is not a str.
            ActorNotFound: no actor holds it.
        """
        cell = self._by_name.get(self._checked(name, "lookup"))
        if cell is None:
            raise ActorNotFound(f"no actor is registered as {name!r}")
        return cell

    def names(self) -> dict[str, ActorCell]:
        """A snapshot: every name and its actor, in the order they were registered."""
        return dict(self._by_name)

    def forget(self, cell: ActorCell) -> None:
        """``cell``'s actor stops accepting messages: free every name it holds."""
        names = cell.registered_names
        if names:
            for name in list(names):
                if self._by_name.get(name) is cell:
                    del self._by_name[name]
                    if self.listener is not None:
                        self.listener.released(name)
                elif cell in self._shared.get(name, ()):
                    self._leave_shared(name, cell)
            names.clear()

    @staticmethod
    def _checked(name: object, operation: str) -> str:
        if not isinstance(name, str):
            raise TypeError(f"{operation}() needs a name (a str), got {name!r}")
        return name


def wrong_system(operation: str) -> ActorError:
    """The error for a ref of another system given to this one's registry."""
    return ActorError(
        f"{operation}() got a ref to an actor of another actor system; a registry names "
        "the actors of its own system"
    )


protect_module(globals())

__all__ = ["Registry", "wrong_system"]

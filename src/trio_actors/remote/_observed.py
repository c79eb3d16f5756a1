"""An observed node: what a node calls when its system is observed, and the two parts
of a node that differ then.

An actor system opens with an observer or ``None`` (``_core/_observer.py``; one is
made by ``open_actor_system(tracing=...)``, ``trio_actors/observe``). The node of an
observed system asks it once for a :class:`NodeObserver` (an observer that does not
observe nodes has no ``node_observer``: the node is then not observed), and calls it
where messages cross:

* an **ask** to another node's actor or to a shared name (``Requests.ask``,
  ``GroupSends.ask``): :meth:`NodeObserver.ask` may send it with NATS headers (a
  traced ask carries its W3C ``traceparent``) -- headers that go again with the ask
  if a confirm round sends it again;
* an **ask from another node** that came with headers (``Node``'s observed
  subscription, ``Groups``' for shared names): :meth:`NodeObserver.received_ask`
  may make its envelope (a ``RemoteAsk`` of its own, whose handling it observes);
* a **tell** to another node's actor or to a shared name (:class:`ObservedTells`,
  :class:`ObservedGroups`, which the node uses instead of ``Tells`` and ``Groups``).

An unobserved node uses none of this: its parts are the plain ones, and the checks
(``node.observer is None``) are on the paths of asks, which cost tens of
microseconds, never on a tell's. Everything here runs in the node's trio thread.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from threading import get_ident
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from .._interrupts import protect_module
from ._groups import Groups
from ._tells import Tells

if TYPE_CHECKING:
    from .._core._cell import ActorCell
    from ..nats import Headers
    from ._group_cell import GroupCell
    from ._inbound import Answers, RemoteAsk
    from ._node import Node
    from ._remote_cell import RemoteCell

__all__ = ["NodeObserver", "ObservedGroups", "ObservedTells", "ObservesNodes", "observer_of"]


class NodeObserver(Protocol):
    """What an observed node calls (see the module docstring). Never a checkpoint;
    must not raise (what ``send`` and ``tell`` raise passes through)."""

    def ask(
        self,
        to: RemoteCell | GroupCell,
        message: Any,
        send: Callable[[Headers | None], Coroutine[Any, Any, Any]],
    ) -> Coroutine[Any, Any, Any]:
        """An ask of ``message`` to ``to``: return what the asker awaits instead of
        ``send(None)`` -- ``send(headers)`` is the request that sends it (with
        ``headers``, if not ``None``) and returns its answer or raises."""
        ...

    def received_ask(
        self, cell: ActorCell, message: Any, answers: Answers, reply: str, headers: Headers
    ) -> RemoteAsk | None:
        """An ask of ``message`` from another node for ``cell``, which came with
        ``headers``: the envelope to queue (answered on ``reply`` by ``answers``), or
        ``None`` for a plain one."""
        ...

    def told(
        self,
        to: Any,
        message: Any,
        tell: Callable[[Any, Any], None],
    ) -> None:
        """A tell of ``message`` to ``to`` (another node's actor, or a shared name's
        group): call ``tell(to, message)``, which sends it (and raises as the tell
        would)."""
        ...


@runtime_checkable
class ObservesNodes(Protocol):
    """An observer that observes nodes too."""

    def node_observer(self, node: Node) -> NodeObserver:
        """What ``node`` (being made: its parts do not exist yet) is to call."""
        ...


def observer_of(node: Node) -> NodeObserver | None:
    """The node observer of ``node`` (whose system is set): ``None`` if its system is
    not observed, or its observer does not observe nodes."""
    observer = node.system._observer
    return observer.node_observer(node) if isinstance(observer, ObservesNodes) else None


class ObservedTells(Tells):
    """An observed node's tells: each tell from the node's thread goes by way of
    :meth:`NodeObserver.told` (one from another thread goes by ``tell_from_elsewhere``
    instead: never observed)."""

    __slots__ = ()

    def tell(self, cell: RemoteCell, message: Any) -> None:
        observer = self._node.observer
        assert observer is not None
        observer.told(cell, message, super().tell)


class ObservedGroups(Groups):
    """An observed node's shared names: each tell from the node's thread goes by way
    of :meth:`NodeObserver.told`."""

    __slots__ = ()

    def tell(self, cell: GroupCell, message: Any) -> None:
        observer = self.node.observer
        assert observer is not None
        if get_ident() != self.node.thread_id:
            super().tell(cell, message)  # (from another thread: never observed)
        else:
            observer.told(cell, message, super().tell)


protect_module(globals())

"""A system both traced and metered (``open_actor_system(tracing=..., metrics=...)``):
one observer that gives each of the kernel's hooks to the tracer and the meter.

The cell class is the meter's subclass of the tracer's (an ask is timed around its
traced path); the dispatcher class and the lifecycle brackets are the tracer's (the
meter changes neither); a node's asks are timed around the tracer's, which adds
the trace headers. Nothing here is a checkpoint.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Any

from .._interrupts import protect_module

if TYPE_CHECKING:
    from .._core._cell import ActorCell
    from .._core._dead_letters import DeadLetterReason
    from .._core._dispatcher import Dispatcher
    from .._core._observer import Lifecycle
    from .._core._ref import ActorRef
    from ..nats import Headers
    from ..remote._inbound import Answers, RemoteAsk
    from ..remote._node import Node
    from ..remote._observed import NodeObserver
    from ._metered import MetricsObserver
    from ._tracer import TracingObserver

__all__ = ["BothObservers"]


class BothObservers:
    """The observer of a traced and metered system."""

    def __init__(self, tracer: TracingObserver, meter: MetricsObserver) -> None:
        self.tracer = tracer
        self.meter = meter

    def cell_class(self, base: type[ActorCell]) -> type[ActorCell]:
        return self.meter.cell_class(self.tracer.cell_class(base))

    def dispatcher_class(self, base: type[Dispatcher]) -> type[Dispatcher]:
        return self.meter.dispatcher_class(self.tracer.dispatcher_class(base))

    def failed(self, cell: ActorCell, error: BaseException, where: str) -> None:
        self.tracer.failed(cell, error, where)
        self.meter.failed(cell, error, where)

    def lifecycle(self, cell: ActorCell, what: Lifecycle) -> AbstractContextManager[None]:
        return self.tracer.lifecycle(cell, what)  # (the meter brackets nothing)

    def retired(self, cell: ActorCell) -> None:
        self.tracer.retired(cell)
        self.meter.retired(cell)

    def dead_letters(self, recipient: ActorRef, reason: DeadLetterReason, count: int) -> None:
        self.tracer.dead_letters(recipient, reason, count)
        self.meter.dead_letters(recipient, reason, count)

    def async_turn(self, cell: ActorCell, seconds: float) -> None:
        self.tracer.async_turn(cell, seconds)
        self.meter.async_turn(cell, seconds)

    def node_observer(self, node: Node) -> _BothNodeObservers:
        return _BothNodeObservers(self.tracer.node_observer(node), self.meter.node_observer(node))


class _BothNodeObservers:
    """A traced and metered node's observer (``remote/_observed.NodeObserver``)."""

    def __init__(self, tracer: NodeObserver, meter: NodeObserver) -> None:
        self.tracer = tracer
        self.meter = meter

    def ask(
        self, to: Any, message: Any, send: Callable[[Headers | None], Coroutine[Any, Any, Any]]
    ) -> Coroutine[Any, Any, Any]:
        def traced(headers: Headers | None) -> Coroutine[Any, Any, Any]:
            return self.tracer.ask(to, message, send)  # (the meter adds no headers)

        return self.meter.ask(to, message, traced)

    def received_ask(
        self, cell: ActorCell, message: Any, answers: Answers, reply: str, headers: Headers
    ) -> RemoteAsk | None:
        return self.tracer.received_ask(cell, message, answers, reply, headers)

    def told(self, to: Any, message: Any, tell: Callable[[Any, Any], None]) -> None:
        self.tracer.told(to, message, tell)  # (the meter counts no tells)


protect_module(globals())

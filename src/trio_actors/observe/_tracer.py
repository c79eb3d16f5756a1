"""The observer of a traced system: :class:`TracingObserver`, what the kernel and the
node call (``_core/_observer.py``, ``remote/_observed.py``) when a system is opened
with ``tracing=``.

**Contexts and trio tasks.** trio starts every task in a copy of the context of the
task that started it, and OpenTelemetry's current span is one context variable; so
a task inherits the span current where it was started, for its whole life. Three
consequences, and what the observer does about them:

* the dispatcher serves every plain handler; started inside a user's span, it would
  make that span the parent of every untraced handling's asks. The opener starts it
  -- and a node's tasks, and its connection's reader -- outside any trace
  (:meth:`TracingObserver.outside_traces`);
* an actor's serving task (``async`` handlers) would inherit the span of the
  message that started it, and keep it for the later, untraced ones: the
  dispatcher class starts serving tasks outside any trace too (:class:`ServesOutsideTraces`);
* a stop task inherits the span of whoever called ``stop``: its ``stop`` span is
  that span's child, as wanted. A restart task is started once the failing
  handler's span is no longer current: the failure's span is kept on the cell
  (``trace_cause``, by :meth:`TracingObserver.failed`) as its parent.

A traced message's own span is current exactly while its handler runs
(``_envelopes.py``); an untraced one's handler sees no span.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import TYPE_CHECKING, cast

import trio
from opentelemetry import context as otel_context
from opentelemetry import trace

from .._core._cell import ActorCell
from .._core._dispatcher import Dispatcher
from .._core._state import ActorState
from .._interrupts import protect_module
from ._cells import ObservedCell, observed_cell_class
from ._options import Tracing
from ._reused import reused_subclass
from ._spans import PATH, Spans, empty_context, ended_with

if TYPE_CHECKING:
    from .._core._dead_letters import DeadLetterReason
    from .._core._observer import Lifecycle
    from .._core._ref import ActorRef
    from ..actors import ActorSystem
    from ..remote._node import Node
    from ._remote import TracingNode

__all__ = ["ServesOutsideTraces", "TracingObserver", "tracing_observer"]

_ENDED = (ActorState.STOPPING, ActorState.STOPPED)


def tracing_observer(tracing: object) -> TracingObserver:
    """The observer of ``open_actor_system(tracing=tracing)``: ``True``, a
    ``TracerProvider`` or a :class:`~trio_actors.observe.Tracing`.

    Raises:
        TypeError: ``tracing`` is none of these.
    """
    if tracing is True:
        options = Tracing()
    elif isinstance(tracing, Tracing):
        options = tracing
    elif isinstance(tracing, trace.TracerProvider):
        options = Tracing(provider=tracing)
    else:
        raise TypeError(
            "tracing must be True or False, an OpenTelemetry TracerProvider, or a "
            f"trio_actors.observe.Tracing; got {tracing!r}"
        )
    return TracingObserver(options)


class ServesOutsideTraces(Dispatcher):
    """A traced system's dispatcher: it starts each serving task outside any trace
    (see the module docstring), and holds the system's :attr:`spans`, which its
    cells read (``_cells.py``: their classes, made once per process, hold nothing
    of a system)."""

    spans: Spans  # (set by TracingObserver.attach, before anything is spawned)

    def start_serving_task(self, cell: ActorCell) -> None:
        token = otel_context.attach(empty_context())
        try:
            super().start_serving_task(cell)
        finally:
            otel_context.detach(token)


class TracingObserver:
    """What a traced system's kernel and node call (see the module docstring)."""

    def __init__(self, options: Tracing) -> None:
        self.options = options
        self.spans = Spans(options)
        self._cell_classes: dict[type[ActorCell], type[ActorCell]] = {}

    def __repr__(self) -> str:
        return f"<TracingObserver {self.options!r}>"

    @contextmanager
    def outside_traces(self) -> Iterator[None]:
        """For the block, no span is current in this task (so none is in the tasks
        started in it). Not a checkpoint."""
        token = otel_context.attach(empty_context())
        try:
            yield
        finally:
            otel_context.detach(token)

    def attach(self, system: ActorSystem) -> None:
        """Give ``system`` (opening: its dispatcher, of :meth:`dispatcher_class`, not
        yet running, no actor spawned) its spans, which its cells find through its
        dispatcher."""
        dispatcher = system._dispatcher
        assert isinstance(dispatcher, ServesOutsideTraces), dispatcher
        dispatcher.spans = self.spans

    # --- the kernel's hooks (_core/_observer.py) -----------------------------------

    def cell_class(self, base: type[ActorCell]) -> type[ActorCell]:
        cell_class = self._cell_classes.get(base)
        if cell_class is None:
            cell_class = observed_cell_class(base, tells=self.options.tells != "none")
            self._cell_classes[base] = cell_class
        return cell_class

    def dispatcher_class(self, base: type[Dispatcher]) -> type[Dispatcher]:
        """``base`` made to serve outside traces: one class per process, as the cell
        classes (:func:`~._reused.reused_subclass`)."""
        if issubclass(base, ServesOutsideTraces):
            return base
        return reused_subclass(f"Traced{base.__name__}", (ServesOutsideTraces,), base, __name__)

    def failed(self, cell: ActorCell, error: BaseException, where: str) -> None:
        """An event ``failure`` on the span current, if one records (a plain
        handler's, a restart's, a stop's), and the failure's span kept on the cell as
        the parent of what it leads to (a restart, a stop by supervision)."""
        observed = cast(ObservedCell, cell)
        cause = observed.trace_failing  # (an async handler's failing message's)
        if cause is not None:
            observed.trace_failing = None
        span = trace.get_current_span()
        if span.is_recording():
            self.spans.failure_event(span, cell, error, where)
            if cause is None:
                cause = span.get_span_context()
        observed.trace_cause = cause

    def lifecycle(self, cell: ActorCell, what: Lifecycle) -> AbstractContextManager[None]:
        """A span ``restart <Class>`` or ``stop <Class>`` around the task's work --
        inside a trace only: the failure's (``trace_cause``), or for a stop asked for,
        its caller's (the current span, inherited by the stop task)."""
        return self._lifecycle(cell, what)

    @contextmanager
    def _lifecycle(self, cell: ActorCell, what: Lifecycle) -> Iterator[None]:
        observed = cast(ObservedCell, cell)
        cause = observed.trace_cause
        observed.trace_cause = None
        if what == "stop" and cell.stop_error is None:
            cause = None  # (asked for, not decided by supervision: its caller's span)
        parent = None if cause is None else trace.set_span_in_context(trace.NonRecordingSpan(cause))
        span = self.spans.lifecycle(cell, what, parent)
        if span is None:
            yield
            return
        restarts, stranded, failed_back = cell.restarts, cell.stranded_letters, cell.failed_back
        token = otel_context.attach(trace.set_span_in_context(span))
        error: BaseException | None = None
        try:
            yield
        except BaseException as raised:
            error = raised
            raise
        finally:
            otel_context.detach(token)
            if what == "restart":
                span.set_attribute("trio_actors.restart.delay", cell.restart_delay)
                if cell.restarts > restarts:
                    outcome = "replaced"
                else:
                    outcome = "stopped" if cell.state in _ENDED else "not_replaced"
            else:
                span.set_attribute(
                    "trio_actors.stop.stranded_tells", cell.stranded_letters - stranded
                )
                span.set_attribute("trio_actors.stop.failed_asks", cell.failed_back - failed_back)
                outcome = "stopped"
            if isinstance(error, trio.Cancelled):
                outcome = "cancelled"
            ended_with(span, outcome, error)

    def retired(self, cell: ActorCell) -> None:
        """Nothing to trace: a stop task's span says it stopped."""

    def dead_letters(self, recipient: ActorRef, reason: DeadLetterReason, count: int) -> None:
        """An event ``dead_letters`` on the span current, if one records: a tell
        inside a trace that no handler will take (to an actor that stopped, a full
        mailbox, another node that cannot take it...). Not for ``"stranded"``: those
        are made by a stop's cleanup, which its ``stop`` span counts."""
        if reason == "stranded":
            return
        span = trace.get_current_span()
        if span.is_recording():
            span.add_event(
                "dead_letters",
                {
                    PATH: recipient.path,
                    "trio_actors.dead_letter.reason": reason,
                    "trio_actors.dead_letter.count": count,
                },
            )

    def async_turn(self, cell: ActorCell, seconds: float) -> None:
        """Nothing to trace: each traced message of the turn has its own span."""

    # --- nodes (remote/_observed.py) -----------------------------------------------

    def node_observer(self, node: Node) -> TracingNode:
        """The node's observer (asks across nodes carry their context in headers).
        Imported only for a node: a traced system without one needs no msgspec."""
        from ._remote import TracingNode

        self.spans.node = node.name
        return TracingNode(self.spans, node)


protect_module(globals())

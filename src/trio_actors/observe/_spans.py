"""The spans of one traced system: their names, kinds, parents, attributes and
outcomes -- one place that says what a trace of trio-actors looks like.

=======================  ========  ==========================  ======================
span                     kind      name                        parent
=======================  ========  ==========================  ======================
an ask, asker's side     CLIENT    ``ask <ActorClass>``;       the current span
                                   across nodes ``ask <node>``
                                   or ``ask shared:<name>``
an ask's handling        SERVER    ``receive <ActorClass>``    the asker's CLIENT span
                                                               (across nodes: from the
                                                               ``traceparent`` header)
a tell, teller's side    PRODUCER  ``tell <ActorClass>`` (or   the current span
                                   ``<node>``, ``shared:..``)
a tell's handling        CONSUMER  ``receive <ActorClass>``    the PRODUCER span
a restart                INTERNAL  ``restart <ActorClass>``    the failure's span
a stop (by a stop task)  INTERNAL  ``stop <ActorClass>``       whoever stopped it (or
                                                               the failure's span)
=======================  ========  ==========================  ======================

Names carry the class, never the path (a backend groups spans by name: paths would
make one group per actor); the path is an attribute. Attributes (only on spans that
record: a path is an f-string made when asked): :data:`PATH`, :data:`CLASS`,
:data:`MESSAGE` (the message's type, never its ``repr``), :data:`NODE` (on a node),
:data:`PEER` (the other node of an ask or tell across nodes), :data:`QUEUED` (seconds
of trio time between queued and taken) and :data:`OUTCOME` -- how it ended:

* asker's side: ``value``, ``exception`` (the handler raised), ``cancelled_while_queued``
  (the asker was cancelled before the actor took it: withdrawn), ``cancelled``,
  ``stopped`` (``ActorStopped``), ``mailbox_full``, ``node_down``, ``in_doubt``
  (``ConnectionInterrupted``: it may or may not have been handled), ``not_permitted``,
  ``not_found`` (no member serves a shared name);
* handling: ``value``, ``exception``, ``abandoned`` (its asker was cancelled while
  it ran), ``stopped`` (cut short by a stop or restart; across nodes also: stranded
  before it was handled), ``withdrawn`` (across nodes: the asker's cancellation
  reached it queued), ``mailbox_full``.

An error outcome sets the span's status to ERROR and records the exception
(``Cancelled`` is neither: a cancellation is the caller's choice). The spans run in
the trio thread; none of this is a checkpoint.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import trio
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.propagate import get_global_textmap
from opentelemetry.trace import SpanKind, Status, StatusCode

from .. import __version__
from .._interrupts import protect_module
from ._outcomes import OUTCOME

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.propagators.textmap import TextMapPropagator
    from opentelemetry.trace import Span

    from .._core._cell import ActorCell
    from ._options import Tracing

__all__ = [
    "CLASS",
    "in_sampled_trace",
    "MESSAGE",
    "NODE",
    "PATH",
    "PEER",
    "QUEUED",
    "Spans",
]

PATH = "trio_actors.actor.path"
CLASS = "trio_actors.actor.class"
MESSAGE = "trio_actors.message.type"
NODE = "trio_actors.node"
PEER = "trio_actors.peer"
QUEUED = "trio_actors.queued.seconds"

try:
    # The key OpenTelemetry's context keeps the current span under. Read directly, a
    # tell's check "is a sampled span current?" costs ~65 ns instead of the ~250 ns
    # of trace.get_current_span() (six calls): it is on every tell of a traced
    # system (Tracing(tells="in_trace")). Private to the API, hence the fallback.
    from opentelemetry.trace.propagation import _SPAN_KEY as _KEY

    _SPAN_KEY: str | None = _KEY
except ImportError:  # pragma: no cover - an API that moved it
    _SPAN_KEY = None

_get_current = otel_context.get_current
_CLIENT = SpanKind.CLIENT
_SERVER = SpanKind.SERVER
_PRODUCER = SpanKind.PRODUCER
_CONSUMER = SpanKind.CONSUMER
_INTERNAL = SpanKind.INTERNAL
_EMPTY = otel_context.Context()


def ended_with(span: Span, outcome: str, error: BaseException | None = None) -> None:
    """Set ``span``'s outcome (and, for an error, its status and the exception), then
    end it."""
    span.set_attribute(OUTCOME, outcome)
    if error is not None and not isinstance(error, trio.Cancelled):
        span.record_exception(error)
        span.set_status(Status(StatusCode.ERROR, f"{type(error).__qualname__}: {error}"))
    span.end()


def in_sampled_trace() -> bool:
    """Whether the current span (in this task) is sampled: what decides whether a tell
    is traced under ``Tracing(tells="in_trace")``."""
    if _SPAN_KEY is None:  # pragma: no cover
        return bool(trace.get_current_span().get_span_context().trace_flags.sampled)
    span: Span | None = _get_current().get(_SPAN_KEY)  # type: ignore[assignment]
    return span is not None and bool(span.get_span_context().trace_flags.sampled)


def type_name(message: Any) -> str:
    """A message's type, as the attribute :data:`MESSAGE` shows it."""
    return type(message).__qualname__


class Spans:
    """The tracer of one traced system, and the rules of :class:`Tracing` it was
    opened with."""

    __slots__ = ("_propagator", "in_trace", "node", "roots", "tells", "tracer")

    def __init__(self, options: Tracing) -> None:
        provider = options.provider or trace.get_tracer_provider()
        self.tracer = provider.get_tracer("trio_actors", __version__)
        self.tells = options.tells
        self.in_trace = options.tells == "in_trace"  # (a tell is traced in a trace only)
        self.roots = options.roots
        self._propagator = options.propagator
        self.node: str | None = None  # (the node's name, once the system is one)

    def propagator(self) -> TextMapPropagator:
        """The propagator of trace contexts across nodes (the global one, read now,
        unless :class:`Tracing` named one)."""
        return self._propagator or get_global_textmap()

    def _attributes(self, cell: ActorCell, message: Any) -> dict[str, Any]:
        attributes = {PATH: cell.path, CLASS: cell.kinds.class_name, MESSAGE: type_name(message)}
        if self.node is not None:
            attributes[NODE] = self.node
        return attributes

    # --- asks -------------------------------------------------------------------

    def client(self, cell: ActorCell, message: Any) -> Span | None:
        """The CLIENT span of an ask to ``cell``, started, with the current span as
        its parent; ``None`` if it is not traced (sampled out; or outside any trace,
        and :attr:`Tracing.roots` is false)."""
        span = self._start_ask(f"ask {cell.kinds.class_name}")
        if span is not None:
            span.set_attributes(self._attributes(cell, message))
        return span

    def remote_client(self, name: str, path: str, peer: str | None, message: Any) -> Span | None:
        """:meth:`client` for an ask to another node's actor (``name``: the node's) or
        to a shared name (``name``: ``shared:<name>``; ``peer``: ``None``)."""
        span = self._start_ask(f"ask {name}")
        if span is not None:
            span.set_attributes(self._remote_attributes(path, peer, message))
        return span

    def _remote_attributes(self, path: str, peer: str | None, message: Any) -> dict[str, Any]:
        """The attributes of a span of an ask or tell to another node's actor (or a
        shared name's: no ``peer``)."""
        attributes: dict[str, Any] = {PATH: path, MESSAGE: type_name(message)}
        if peer is not None:
            attributes[PEER] = peer
        if self.node is not None:
            attributes[NODE] = self.node
        return attributes

    def _start_ask(self, name: str) -> Span | None:
        if not self.roots and not trace.get_current_span().get_span_context().is_valid:
            return None
        span = self.tracer.start_span(name, kind=_CLIENT)
        return span if span.is_recording() else None

    # --- handling -----------------------------------------------------------------

    def handling(
        self,
        cell: ActorCell,
        message: Any,
        kind: SpanKind,
        parent: Context,
        queued_at: float,
        start_time: int | None = None,
    ) -> Span:
        """The SERVER (an ask's) or CONSUMER (a tell's) span of a message ``cell``
        takes now (or, with ``start_time`` in ns, took then), child of ``parent``."""
        span = self.tracer.start_span(
            f"receive {cell.kinds.class_name}", context=parent, kind=kind, start_time=start_time
        )
        if span.is_recording():
            attributes = self._attributes(cell, message)
            attributes[QUEUED] = trio.current_time() - queued_at
            span.set_attributes(attributes)
        return span

    def unhandled(
        self,
        cell: ActorCell,
        message: Any,
        parent: Context,
        arrived_ns: int,
        outcome: str,
        error: BaseException | None = None,
    ) -> None:
        """A SERVER span from an ask's arrival (``arrived_ns``, wall clock) to now, for
        an ask from another node that ends here without being handled (``outcome``:
        ``withdrawn``, ``stopped``, ``mailbox_full``)."""
        span = self.tracer.start_span(
            f"receive {cell.kinds.class_name}", context=parent, kind=_SERVER, start_time=arrived_ns
        )
        if span.is_recording():
            span.set_attributes(self._attributes(cell, message))
        ended_with(span, outcome, error)

    # --- tells ------------------------------------------------------------------------

    def producer(self, name: str) -> Span | None:
        """The PRODUCER span of a tell (``name``: ``tell <class, node or shared
        name>``), started; ``None`` if it is not traced (:attr:`Tracing.tells`, the
        sampler)."""
        if self.in_trace and not in_sampled_trace():
            return None
        return self._producer(name)

    def _producer(self, name: str) -> Span | None:
        span = self.tracer.start_span(name, kind=_PRODUCER)
        return span if span.is_recording() else None

    def local_producer(self, cell: ActorCell, message: Any) -> Span | None:
        """:meth:`producer` of a tell to ``cell``, with its attributes (the caller
        checked :attr:`in_trace`'s rule: a tell's every nanosecond counts)."""
        span = self._producer(f"tell {cell.kinds.class_name}")
        if span is not None:
            span.set_attributes(self._attributes(cell, message))
        return span

    def remote_producer(self, name: str, path: str, peer: str | None, message: Any) -> Span | None:
        """:meth:`producer` of a tell to another node's actor or a shared name."""
        span = self.producer(f"tell {name}")
        if span is not None:
            span.set_attributes(self._remote_attributes(path, peer, message))
        return span

    # --- the lifecycle ------------------------------------------------------------

    def lifecycle(self, cell: ActorCell, what: str, parent: Context | None) -> Span | None:
        """The INTERNAL span of ``cell``'s ``what`` (``restart``, ``stop``), child of
        ``parent`` (``None``: the current span); ``None`` if there is no trace to
        put it in (a restart or a stop never starts a trace), or it is sampled out."""
        if not trace.get_current_span(parent).get_span_context().is_valid:
            return None
        span = self.tracer.start_span(f"{what} {cell.kinds.class_name}", context=parent)
        if not span.is_recording():
            return None
        attributes: dict[str, Any] = {PATH: cell.path, CLASS: cell.kinds.class_name}
        if self.node is not None:
            attributes[NODE] = self.node
        span.set_attributes(attributes)
        return span

    # --- events -------------------------------------------------------------------------

    def failure_event(self, span: Span, cell: ActorCell, error: BaseException, where: str) -> None:
        """The event ``failure`` on ``span``: ``cell`` failed ``where`` (supervision
        counted and logged it)."""
        span.add_event(
            "failure",
            {
                PATH: cell.path,
                "trio_actors.failure.where": where,
                "exception.type": type(error).__qualname__,
                "exception.message": str(error),
            },
        )


def now_ns() -> int:
    """The wall clock, in ns (what span timestamps are)."""
    return time.time_ns()


def empty_context() -> Context:
    """A context with no span (nor anything else) in it."""
    return _EMPTY


protect_module(globals())

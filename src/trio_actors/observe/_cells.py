"""Observed cells: how a traced system's actors take asks and tells.

An observed system spawns each actor with a subclass of the cell class it would use
otherwise (``Observer.cell_class``, chosen once per class and cached), made of the
mixins below and that class. Subclasses rather than a flag: the tell fast paths of
``ActorRef.tell`` read ``fast_tell`` and ``activates`` and nothing else, and an ask
goes through ``ask_message``; a subclass changes what those do for its actors, and
an untraced system's actors pay nothing. (No mixin adds a slot: the garbage
collector's walk over a cell is unchanged; ``trace_cause`` and ``trace_failing``
are class-level defaults, written to the instance's ``__dict__`` only when set.)
Each such class is made once per process, and holds nothing of a system: a cell
finds its system's spans through its dispatcher (``ServesOutsideTraces.spans``,
``_tracer.py``) -- see :func:`~._reused.reused_subclass` for why.

* :class:`TracesAsks` (a cell whose ``ask_message`` is the kernel's: unbounded or
  bounded mailboxes): a traced ask gets a CLIENT span and is queued as a
  :class:`~._envelopes.TracedAsk` -- always, also to an idle actor with a plain
  ``receive``, which an untraced ask would have answered in the asker's own task:
  the handler then runs where the serving loop runs it, with its span current, and
  the turn sampler sees it there. (Two task switches more than untraced: the price
  of a sampled ask, ``docs/observing.rst``.) An ask sampled out takes the untraced
  path, fast path included.
* :class:`WrapsAsks` (a cell with an ``ask_message`` of its own: a pool, a child on
  another node): a CLIENT span around the ask, current while it runs -- what the
  pool asks its worker is its child; no handling span of its own.
* :class:`TracesTells` (unbounded mailboxes, unless ``Tracing(tells="none")``): both
  tell fast paths are off, so every tell comes to :meth:`TracesTells.tell`, which
  queues a traced tell as a :class:`~._envelopes.TracedTell` and any other as
  before.

The checks of an ask (from another thread, an actor asking itself, an actor that no
longer accepts) are the kernel's own, raised or refused as without tracing.
"""

from __future__ import annotations

from collections.abc import Coroutine
from threading import get_ident
from typing import TYPE_CHECKING, Any

import trio
from opentelemetry import context as otel_context
from opentelemetry import trace

from .._core._cell import ActorCell
from .._core._foreign import current_task_of
from .._interrupts import protect_module
from ._envelopes import TracedAsk, TracedTell
from ._outcomes import outcome_of
from ._reused import reused_subclass
from ._spans import ended_with, in_sampled_trace

if TYPE_CHECKING:
    from opentelemetry.trace import Span, SpanContext

    from ._tracer import ServesOutsideTraces

__all__ = ["ObservedCell", "TracesAsks", "TracesTells", "WrapsAsks", "observed_cell_class"]


class ObservedCell(ActorCell):
    """What every observed cell has (its class is made by
    :func:`observed_cell_class`). Its system's spans are its dispatcher's
    (``self.dispatcher.spans``): nothing of a system is in the class."""

    # No __slots__: what it keeps of its own (trace_cause) goes to the instance's
    # __dict__ -- the kernel's ActorCell has one in the pure-Python build, but a
    # compiled ActorCell has none, and its interpreted subclass must make it.

    if TYPE_CHECKING:
        dispatcher: ServesOutsideTraces  # (a traced system's: observer.dispatcher_class)
    # The span of the failure it had last (or None), the parent of the restart or stop
    # that follows: the observer's failed() sets it, its lifecycle() takes it.
    trace_cause: SpanContext | None = None
    # An async handler's failing message's span, for failed() to take (_envelopes.py).
    trace_failing: SpanContext | None = None


class TracesAsks(ObservedCell):
    """Asks to this actor, traced: see the module docstring."""

    __slots__ = ()

    def ask_message(self, message: Any) -> Coroutine[Any, Any, Any]:
        task = current_task_of(self.system, "ask")
        spans = self.dispatcher.spans
        span = spans.client(self, message)
        if span is None:
            return super().ask_message(message)
        envelope = None
        try:
            if task is self.serving_task or not self.accepting:
                asking = super().ask_message(message)  # (raises, or refuses)
            else:
                envelope = TracedAsk(self, message, task, spans, trace.set_span_in_context(span))
                asking = self.queue_ask(message, task, envelope)
        except BaseException as error:
            ended_with(span, outcome_of(error), error)
            raise
        return asked_within(span, asking, envelope)


class WrapsAsks(ObservedCell):
    """Asks to this actor (its cell asks in its own way), in a CLIENT span."""

    __slots__ = ()

    def ask_message(self, message: Any) -> Coroutine[Any, Any, Any]:
        current_task_of(self.system, "ask")
        span = self.dispatcher.spans.client(self, message)
        if span is None:
            return super().ask_message(message)
        try:
            asking = super().ask_message(message)
        except BaseException as error:
            ended_with(span, outcome_of(error), error)
            raise
        return asked_within(span, asking, None)


async def asked_within(
    span: Span, asking: Coroutine[Any, Any, Any], envelope: TracedAsk | None
) -> Any:
    """Await ``asking`` with ``span`` (its CLIENT span) current; end the span with
    its outcome. A checkpoint (``asking`` is one)."""
    token = otel_context.attach(trace.set_span_in_context(span))
    try:
        value = await asking
    except BaseException as error:
        ended_with(span, _asker_outcome(error, envelope), error)
        raise
    finally:
        otel_context.detach(token)
    ended_with(span, "value")
    return value


def _asker_outcome(error: BaseException, envelope: TracedAsk | None) -> str:
    """What the asker's span says of an ask that raised ``error``: that its handler
    raised it, if so -- even an ``ActorStopped`` of the handler's own -- and a
    cancellation that withdrew it queued apart from one that abandoned it."""
    if envelope is not None:
        if isinstance(error, trio.Cancelled) and envelope.withdrawn:
            return "cancelled_while_queued"
        if envelope.outcome == "exception":
            return "exception"
    return outcome_of(error)


class TracesTells(ObservedCell):
    """Tells to this actor (an unbounded mailbox), traced: see the module docstring."""

    __slots__ = ()

    def __init__(self, *args: Any) -> None:
        super().__init__(*args)
        self.activates = False  # (as refresh_tell_paths leaves it, from the start)

    def refresh_tell_paths(self) -> None:
        super().refresh_tell_paths()
        self.activates = self.fast_tell = False  # every tell comes to tell()

    def tell(self, message: Any) -> None:
        dispatcher = self.dispatcher
        if get_ident() != dispatcher.thread_id or not self.accepting:
            super().tell(message)  # (from another thread: never traced; or refused)
            return
        spans = dispatcher.spans
        if spans.in_trace and not in_sampled_trace():
            self.enqueue(message)  # (as ActorCell.tell_forwarded: it accepts)
            return
        span = spans.local_producer(self, message)
        if span is None:
            self.enqueue(message)
            return
        self.queue_envelope(TracedTell(self, message, spans, trace.set_span_in_context(span)))
        span.end()


def observed_cell_class(base: type[ActorCell], *, tells: bool) -> type[ActorCell]:
    """The observed subclass of ``base`` (``tells``: whether tells are traced): one
    per process, shared by every traced system (:func:`~._reused.reused_subclass`)."""
    mixins: list[type[ObservedCell]] = []
    if tells and base is ActorCell:
        mixins.append(TracesTells)  # (bounded mailboxes, pools, children elsewhere: not)
    mixins.append(TracesAsks if base.ask_message is ActorCell.ask_message else WrapsAsks)
    return reused_subclass(f"Traced{base.__name__}", tuple(mixins), base, __name__)


protect_module(globals())

"""Traced messages: envelopes that carry their trace context to the actor, and make
the span of their handling.

A traced ask is queued as a :class:`TracedAsk` and a traced tell as a
:class:`TracedTell` -- subclasses of the kernel's ``Ask`` and ``Notice``
(``_core/_envelope.py``), so the serving loop finds them by position as it finds any
envelope, they keep their place among the plain tells around them (first in, first
out), and their ``message`` is the user's own: a stranded traced tell is a dead
letter of that message (``Notice.take_back``), never of a wrapper.

The handling span (SERVER for an ask, CONSUMER for a tell, ``_spans.py``) begins when
the actor takes the envelope, in the task that runs the handler, and its context is
made current there for the handler's length -- so what the handler asks or tells is
traced as its child:

* a plain handler, in the dispatcher: ``Ask.begin`` (``answer_plain`` calls it once
  the envelope is RUNNING), then the handler, then ``reply`` or ``fail``, at once;
* an ``async`` handler, in the actor's serving task: ``start``, then the handler,
  then ``reply``, ``fail`` or -- cut short, by a stop or by its asker's cancellation
  -- ``handler_ended``.

Whatever ends it ends the span and detaches the context, in the task that attached
it (the condition for ``contextvars``: OpenTelemetry's ``detach`` only logs
otherwise). None of this is a checkpoint.

A failure while handling a traced message is an event ``failure`` on its span when
supervision counts it (not for an ``expected_errors`` reply): added by the observer
while a plain handler's span is still current (``_tracer.py``), and here for an
``async`` handler, whose asker is failed before supervision sees the error
(``_handler_call.handle_async``). Either way the span's context is left on the cell
(``trace_failing``, then the observer's ``trace_cause``) as the parent of the
restart or stop the failure leads to.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, ClassVar, cast

import trio
from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind

from .._core._envelope import Ask, AskState, Notice
from .._interrupts import protect_module
from ._spans import ended_with, type_name

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.trace import Span

    from .._core._cell import ActorCell
    from ._cells import ObservedCell
    from ._spans import Spans

__all__ = [
    "BY_TASK",
    "DISPATCHER",
    "TASK",
    "Handling",
    "Trace",
    "TracedAsk",
    "TracedTell",
    "supervised",
]

_QUEUED = AskState.QUEUED
_RUNNING = AskState.RUNNING
_ABANDONED = AskState.ABANDONED

# Who runs the handler of a taken envelope (``Handling.taken_by``).
DISPATCHER = 1  # a plain handler: the failure event is the observer's (still current)
TASK = 2  # an async handler, in the actor's serving task: the event is made here
BY_TASK = 3  # a node's task asks the actor on its behalf (a pool): its failures are not


def supervised(cell: ActorCell, error: BaseException) -> bool:
    """Whether supervision counts ``error``, raised by an ``async`` handler of
    ``cell``, as a failure: what ``_failure.handler_failed`` decides (an expected
    error is a reply) -- and a stray ``Cancelled``, which the runtime makes a
    ``RuntimeError`` from (``_handler_call.stray_cancelled``), always is."""
    if not isinstance(error, cell.kinds.expected_errors):
        return True
    return isinstance(error, RuntimeError) and isinstance(error.__cause__, trio.Cancelled)


class Trace:
    """What a traced envelope carries, and its handling span while it runs."""

    __slots__ = ("context", "outcome", "queued_at", "span", "spans", "taken_by", "token")

    def __init__(self, spans: Spans, context: Context) -> None:
        self.spans = spans
        self.context = context  # the teller's or asker's: the parent of its handling span
        self.queued_at = trio.current_time()
        self.span: Span | None = None  # its handling span, while it runs
        self.token: object | None = None  # of its context made current, while it runs
        self.taken_by = 0  # DISPATCHER, TASK or BY_TASK, once taken
        self.outcome: str | None = None  # how its handling ended, once it has


class Handling(Ask):
    """What every traced envelope does (a mixin of ``Ask`` subclasses, each with a
    slot ``trace``)."""

    __slots__ = ()

    traced = True
    kind: ClassVar[SpanKind]  # of its handling span
    trace: Trace

    @property
    def outcome(self) -> str | None:
        """How its handling ended (``None``: not handled, or not yet)."""
        return self.trace.outcome

    def begin(self) -> None:
        self.take(DISPATCHER)

    def start(self) -> bool:
        if not super().start():
            return False  # (withdrawn)
        self.take(TASK)
        return True

    def take(self, taken_by: int) -> None:
        """Begin the handling span; but ``BY_TASK``, make it current here."""
        trace_ = self.trace
        span = trace_.spans.handling(
            self.cell, self.message, self.kind, trace_.context, trace_.queued_at
        )
        trace_.span = span
        trace_.taken_by = taken_by
        if taken_by != BY_TASK:
            trace_.token = otel_context.attach(trace.set_span_in_context(span, trace_.context))

    def reply(self, value: Any) -> None:
        running = self.state is _RUNNING
        super().reply(value)
        self.end("value" if running else "abandoned")

    def fail(self, error: BaseException) -> bool:
        running = self.state is _RUNNING
        failed = super().fail(error)
        trace_ = self.trace
        span = trace_.span
        if span is not None:
            if running and trace_.taken_by == TASK and supervised(self.cell, error):
                where = f"handling a {type_name(self.message)}"
                trace_.spans.failure_event(span, self.cell, error, where)
                cast("ObservedCell", self.cell).trace_failing = span.get_span_context()
            self.end("exception" if running else "abandoned", error)
        return failed

    def handler_ended(self, error: BaseException) -> None:
        if self.state is _ABANDONED:
            self.end("abandoned")
        else:
            self.end("stopped", error)  # (cut short by a stop or a restart)
        super().handler_ended(error)

    def end(self, outcome: str, error: BaseException | None = None) -> None:
        """End the handling span, if it runs (once), and detach its context."""
        trace_ = self.trace
        span = trace_.span
        if span is None:
            return
        trace_.span = None
        trace_.outcome = outcome
        token = trace_.token
        if token is not None:
            trace_.token = None
            otel_context.detach(token)  # type: ignore[arg-type]
        ended_with(span, outcome, error)


class TracedAsk(Handling):
    """A traced ask in one process: its asker's task waits in it as in any ``Ask``."""

    __slots__ = ("trace",)

    kind = SpanKind.SERVER

    def __init__(
        self,
        cell: ActorCell,
        message: Any,
        task: trio.lowlevel.Task,
        spans: Spans,
        context: Context,
    ) -> None:
        super().__init__(cell, message, task)
        self.trace = Trace(spans, context)


class TracedTell(Handling, Notice):
    """A traced tell: a notice nobody waits for, whose message is the user's."""

    __slots__ = ("trace",)

    kind = SpanKind.CONSUMER

    def __init__(self, cell: ActorCell, message: Any, spans: Spans, context: Context) -> None:
        super().__init__(cell, message)
        self.trace = Trace(spans, context)


protect_module(globals())

"""Traces across nodes: the trace context of an ask travels in its NATS message's
headers (W3C ``traceparent``, and ``tracestate`` or ``baggage`` when set: what the
propagator writes), so that one trace shows an ask from node A through an actor on
node B that asks an actor on node C.

* Sending (:meth:`TracingNode.ask`): a traced ask to another node's actor or to a
  shared name gets a CLIENT span (``ask <node>``, ``ask shared:<name>``), current
  while it waits; the propagator writes its context into the message's headers
  (``HPUB``), which go again with it if a confirm round sends it again. An ask
  sampled out carries no header; neither does one over a server whose ``INFO``
  says it takes no headers.
* Receiving (:meth:`TracingNode.received_ask`): an ask that came with a valid
  context is queued as a :class:`TracedRemoteAsk`, whose SERVER span is the remote
  CLIENT span's child; an ask without one (from an untraced node, or sampled out
  there) is queued as any. If it ends here without being handled -- its asker's
  ``CANCEL`` withdrew it queued, its actor stopped first, a full mailbox dropped it
  -- a SERVER span from its arrival to that end says so.
* Tells (:meth:`TracingNode.told`): a PRODUCER span on the sending node only. A
  tell across nodes carries no context: tells coalesce, up to 64 in one NATS
  message (``remote/_outbox.py``), which one ``traceparent`` cannot describe; the
  receiving node's handling of them is not traced (``docs/observing.rst``).

Imported only for a node (it imports the remote layer, and msgspec with it).
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any

from opentelemetry import context as otel_context
from opentelemetry import trace
from opentelemetry.trace import SpanKind

from .._core._envelope import AskState
from .._errors import MailboxFull
from .._interrupts import protect_module
from ..nats import Headers
from ..remote._group_cell import GroupCell
from ..remote._inbound import RemoteAsk
from ._envelopes import BY_TASK, Handling, Trace
from ._outcomes import outcome_of
from ._spans import ended_with, now_ns

if TYPE_CHECKING:
    from opentelemetry.context import Context
    from opentelemetry.trace import Span

    from .._core._cell import ActorCell
    from ..remote._inbound import Answers
    from ..remote._node import Node
    from ..remote._remote_cell import RemoteCell
    from ._spans import Spans

__all__ = ["TracedRemoteAsk", "TracingNode"]

_QUEUED = AskState.QUEUED
_WITHDRAWN = AskState.WITHDRAWN


class TracedRemoteAsk(Handling, RemoteAsk):
    """A traced ask from another node: a ``RemoteAsk`` whose handling has a SERVER
    span, child of its asker's (from the headers)."""

    __slots__ = ("arrived_ns", "trace")

    kind = SpanKind.SERVER

    def __init__(
        self,
        cell: ActorCell,
        message: Any,
        answers: Answers,
        answer_to: str,
        spans: Spans,
        context: Context,
    ) -> None:
        super().__init__(cell, message, answers, answer_to)
        self.trace = Trace(spans, context)
        self.arrived_ns = now_ns()

    def cancel(self) -> None:
        queued = self.state is _QUEUED
        super().cancel()
        if queued and self.state is _WITHDRAWN:  # (never handled: said here)
            self._unhandled("withdrawn")

    def fail(self, error: BaseException) -> bool:
        queued = self.state is _QUEUED
        failed = super().fail(error)
        if queued and failed:  # (stranded, refused, or dropped by a full mailbox)
            self._unhandled("mailbox_full" if isinstance(error, MailboxFull) else "stopped", error)
        return failed

    def _unhandled(self, outcome: str, error: BaseException | None = None) -> None:
        trace_ = self.trace
        trace_.outcome = outcome
        trace_.spans.unhandled(
            self.cell, self.message, trace_.context, self.arrived_ns, outcome, error
        )

    def taken_by_task(self) -> None:
        # (called in the connection's reader: the span is made current in the task)
        RemoteAsk.start(self)  # (RemoteAsk's own: the state, not Handling.start's span)
        self.take(BY_TASK)

    async def ask_from_task(self) -> Any:
        span = self.trace.span
        if span is None:
            return await super().ask_from_task()
        token = otel_context.attach(trace.set_span_in_context(span, self.trace.context))
        try:
            return await super().ask_from_task()
        finally:
            otel_context.detach(token)


class TracingNode:
    """What a traced node calls (``remote/_observed.py``'s ``NodeObserver``)."""

    def __init__(self, spans: Spans, node: Node) -> None:
        self.spans = spans
        self.node = node

    def ask(
        self,
        to: RemoteCell | GroupCell,
        message: Any,
        send: Callable[[Headers | None], Coroutine[Any, Any, Any]],
    ) -> Coroutine[Any, Any, Any]:
        if isinstance(to, GroupCell):
            span = self.spans.remote_client(to.path, to.path, None, message)
        else:
            span = self.spans.remote_client(to.node_name, to.path, to.node_name, message)
        if span is None:
            return send(None)
        return self._asked(span, send)

    async def _asked(
        self, span: Span, send: Callable[[Headers | None], Coroutine[Any, Any, Any]]
    ) -> Any:
        """Send the ask with ``span``'s context in its headers, ``span`` current while
        it waits; end ``span`` with its outcome. A checkpoint."""
        context = trace.set_span_in_context(span)
        headers = None
        if self.node.transport.takes_headers():
            carrier: dict[str, str] = {}
            self.spans.propagator().inject(carrier, context=context)
            try:
                headers = Headers(carrier) if carrier else None
            except (TypeError, ValueError) as error:  # (a propagator's, not NATS's)
                # The ask goes all the same, without its context: said on its span.
                span.add_event("trace_context_not_sent", {"exception.message": str(error)})
        token = otel_context.attach(context)
        try:
            value = await send(headers)
        except BaseException as error:
            ended_with(span, outcome_of(error), error)
            raise
        finally:
            otel_context.detach(token)
        ended_with(span, "value")
        return value

    def received_ask(
        self, cell: ActorCell, message: Any, answers: Answers, reply: str, headers: Headers
    ) -> RemoteAsk | None:
        context = self.spans.propagator().extract(headers)
        if not trace.get_current_span(context).get_span_context().is_valid:
            return None  # (no trace context: an ask like any)
        return TracedRemoteAsk(cell, message, answers, reply, self.spans, context)

    def told(self, to: Any, message: Any, tell: Callable[[Any, Any], None]) -> None:
        if isinstance(to, GroupCell):
            span = self.spans.remote_producer(to.path, to.path, None, message)
        else:
            span = self.spans.remote_producer(to.node_name, to.path, to.node_name, message)
        if span is None:
            tell(to, message)
            return
        try:
            tell(to, message)
        except BaseException as error:
            ended_with(span, "exception", error)
            raise
        span.end()


protect_module(globals())

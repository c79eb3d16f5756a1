"""Spans recorded by the OpenTelemetry SDK for the tracing tests: a tracer provider
whose spans go to an in-memory exporter the moment they end (``SimpleSpanProcessor``
exports in ``on_end``, in the trio thread: when an ask returns, its spans are there).

``tests/`` is on ``sys.path``: a test file imports these as ``from traces import
Recorded``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.sdk.trace.sampling import ALWAYS_OFF, ALWAYS_ON, Sampler
from opentelemetry.trace import SpanKind

import trio_actors as ta
from trio_actors.remote import Node

__all__ = ["ALWAYS_OFF", "ALWAYS_ON", "Front", "Recorded", "reach", "render"]


class Recorded:
    """A tracer provider (``provider``) and the spans it made, as they ended."""

    def __init__(self, sampler: Sampler = ALWAYS_ON) -> None:
        self.exporter = InMemorySpanExporter()
        self.provider = TracerProvider(sampler=sampler)
        self.provider.add_span_processor(SimpleSpanProcessor(self.exporter))

    @property
    def spans(self) -> Sequence[ReadableSpan]:
        """Every span ended so far, in the order they ended."""
        return self.exporter.get_finished_spans()

    def clear(self) -> None:
        self.exporter.clear()

    def named(self, name: str) -> list[ReadableSpan]:
        return [span for span in self.spans if span.name == name]

    def one(self, name: str, kind: SpanKind | None = None) -> ReadableSpan:
        """The one span named ``name`` (of ``kind``), or an assertion error saying
        which spans there were."""
        found = [s for s in self.named(name) if kind is None or s.kind is kind]
        assert len(found) == 1, f"{len(found)} spans {name!r} among {self.names()}"
        return found[0]

    def names(self) -> list[str]:
        return [span.name for span in self.spans]

    def children(self, parent: ReadableSpan) -> list[ReadableSpan]:
        return [span for span in self.spans if is_child(span, parent)]


def is_child(span: ReadableSpan, parent: ReadableSpan) -> bool:
    """Whether ``span``'s parent is ``parent`` (same trace, its span id)."""
    assert parent.context is not None
    return (
        span.parent is not None
        and span.parent.span_id == parent.context.span_id
        and span.parent.trace_id == parent.context.trace_id
    )


def attributes(span: ReadableSpan) -> dict[str, Any]:
    return dict(span.attributes or {})


def outcome(span: ReadableSpan) -> Any:
    return attributes(span).get("trio_actors.outcome")


def events(span: ReadableSpan) -> list[str]:
    return [event.name for event in span.events]


def render(spans: Sequence[ReadableSpan]) -> str:
    """The spans as an indented tree, parents first, children in the order they
    started: ``name [kind] node outcome`` -- what ``docs/observing.rst`` shows."""
    by_parent: dict[int | None, list[ReadableSpan]] = {}
    ids = {span.context.span_id for span in spans if span.context is not None}
    for span in sorted(spans, key=lambda s: s.start_time or 0):
        parent = span.parent.span_id if span.parent is not None else None
        by_parent.setdefault(parent if parent in ids else None, []).append(span)
    lines: list[str] = []

    def show(span: ReadableSpan, depth: int) -> None:
        found = attributes(span)
        node = found.get("trio_actors.node", "")
        where = f" on {node}" if node else ""
        end = found.get("trio_actors.outcome")
        said = f" -> {end}" if end else ""
        lines.append(f"{'  ' * depth}{span.name} [{span.kind.name}]{where}{said}")
        assert span.context is not None
        for child in by_parent.get(span.context.span_id, []):
            show(child, depth + 1)

    for root in by_parent.get(None, []):
        show(root, 0)
    return "\n".join(lines)


class Front(ta.Actor):
    """Asks the ref it was made with whatever it is asked; answers with the answer
    (the middle of a trace A -> B -> C)."""

    def __init__(self, back: ta.ActorRef) -> None:
        self.back = back

    async def receive(self, message: Any) -> Any:
        return await self.back.ask(message)


async def reach(
    owner: ta.ActorSystem, user: ta.ActorSystem, ref: ta.ActorRef, name: str
) -> ta.ActorRef:
    """``ref`` (an actor of ``owner``'s node) registered as ``name``, as ``user``'s
    node finds it: a ref across the nodes."""
    owner.register(name, ref)
    await Node.of(owner).flush()
    return await user.lookup(name)

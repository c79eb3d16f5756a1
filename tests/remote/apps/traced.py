"""The ``pingpong`` application, traced: at import (before ``trio-actors node
--tracing`` opens the system) it sets OpenTelemetry's global tracer provider, whose
spans are printed as they end -- ``span <name> <kind> <trace id> <parent span id>
<span id>`` -- for the test to follow one trace across the node processes."""

from __future__ import annotations

from collections.abc import Sequence

from opentelemetry import trace
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor, SpanExporter, SpanExportResult
from pingpong import main

__all__ = ["main"]


class Printed(SpanExporter):
    def export(self, spans: Sequence[ReadableSpan]) -> SpanExportResult:
        for span in spans:
            assert span.context is not None
            parent = f"{span.parent.span_id:016x}" if span.parent is not None else "-"
            print(
                f"span {span.name!r} {span.kind.name} {span.context.trace_id:032x} "
                f"{parent} {span.context.span_id:016x}",
                flush=True,
            )
        return SpanExportResult.SUCCESS


_provider = TracerProvider()
_provider.add_span_processor(SimpleSpanProcessor(Printed()))
trace.set_tracer_provider(_provider)

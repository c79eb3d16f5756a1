"""One trace across three nodes (docs/observing.rst): a checkout on node ``a`` asks the
orders actor on node ``b``, which asks the stock actor on node ``c`` -- and the
OpenTelemetry SDK's in-memory exporter shows it as one trace, printed as a tree.

Run it against a NATS server (needs ``pip install "trio-actors[cluster,otel]"
opentelemetry-sdk``)::

    python examples/tracing.py nats://127.0.0.1:4222

In an application the spans would go to a backend (an OTLP exporter, Jaeger,
Tempo...), each node its own process with its own tracer provider; here the three
nodes share one process and one provider, so that one exporter sees every span.
"""

from __future__ import annotations

import sys
from typing import Any

import trio
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import trio_actors as ta


class Stock(ta.Actor):
    """On node c: how many of each item are left."""

    def __init__(self) -> None:
        self.left = {"tea": 3}

    def receive(self, message: Any) -> Any:
        match message:
            case ("take", item):
                if self.left.get(item, 0) == 0:
                    raise LookupError(f"no {item} left")
                self.left[item] -= 1
                return self.left[item]


class Orders(ta.Actor):
    """On node b: takes an order by asking the stock on node c."""

    def __init__(self, stock: ta.ActorRef) -> None:
        self.stock = stock

    async def receive(self, message: Any) -> Any:
        match message:
            case ("order", item):
                left = await self.stock.ask(("take", item))
                return f"ordered {item}, {left} left"


async def main(cluster: str | ta.Cluster) -> tuple[str, list[ReadableSpan]]:
    """The checkout's answer, and the spans of its trace."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    tracer = provider.get_tracer("checkout")
    async with (
        ta.open_actor_system(cluster=cluster, node="a", tracing=provider) as a,
        ta.open_actor_system(cluster=cluster, node="b", tracing=provider) as b,
        ta.open_actor_system(cluster=cluster, node="c", tracing=provider) as c,
    ):
        c.register("stock", c.spawn(Stock, name="stock"))
        assert c.node is not None
        await c.node.flush()
        b.register("orders", b.spawn(Orders, await b.lookup("stock"), name="orders"))
        assert b.node is not None
        await b.node.flush()
        orders = await a.lookup("orders")
        exporter.clear()  # (the lookups made no spans; start from the checkout)
        with tracer.start_as_current_span("checkout"):
            answer = await orders.ask(("order", "tea"))
    return answer, list(exporter.get_finished_spans())


def tree(spans: list[ReadableSpan], *, durations: bool = True) -> list[str]:
    """The spans as an indented tree: ``name [KIND] on node -> outcome (ms)``."""
    known = {span.context.span_id for span in spans if span.context is not None}
    children: dict[int | None, list[ReadableSpan]] = {}
    for span in sorted(spans, key=lambda s: s.start_time or 0):
        parent = span.parent.span_id if span.parent is not None else None
        children.setdefault(parent if parent in known else None, []).append(span)
    lines: list[str] = []

    def show(span: ReadableSpan, depth: int) -> None:
        attributes = dict(span.attributes or {})
        line = f"{'  ' * depth}{span.name} [{span.kind.name}]"
        if "trio_actors.node" in attributes:
            line += f" on {attributes['trio_actors.node']}"
        if "trio_actors.outcome" in attributes:
            line += f" -> {attributes['trio_actors.outcome']}"
        if durations:
            line += f" ({((span.end_time or 0) - (span.start_time or 0)) / 1e6:.2f} ms)"
        lines.append(line)
        assert span.context is not None
        for child in children.get(span.context.span_id, []):
            show(child, depth + 1)

    for root in children.get(None, []):
        show(root, 0)
    return lines


if __name__ == "__main__":
    answer, spans = trio.run(main, sys.argv[1] if len(sys.argv) > 1 else "nats://127.0.0.1:4222")
    print(answer)
    trace_id = spans[0].context.trace_id if spans and spans[0].context else 0
    print(f"trace {trace_id:032x}")
    print("\n".join(tree(spans)))

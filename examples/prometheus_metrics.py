"""Prometheus scraping an actor system's metrics ("Observing a running system").

Run it (``pip install "trio-actors[otel]" opentelemetry-sdk
opentelemetry-exporter-prometheus``), then ``curl 127.0.0.1:9464/metrics`` while it
runs: ``trio_actors_messages_handled_total{trio_actors_actor_class="Counter"}``
grows. A scrape is collected in prometheus_client's HTTP thread; it asks the trio
thread for one snapshot of the actors (waiting at most ``Metrics.wait`` seconds).
"""

from __future__ import annotations

from typing import Any

import trio
from opentelemetry.exporter.prometheus import PrometheusMetricReader
from opentelemetry.sdk.metrics import MeterProvider
from prometheus_client import start_http_server

import trio_actors as ta


class Counter(ta.Actor):
    def __init__(self) -> None:
        self.count = 0

    def receive(self, message: Any) -> int:
        self.count += message
        return self.count


def serve_metrics(port: int) -> tuple[MeterProvider, Any]:
    """A meter provider whose metrics Prometheus scrapes on ``port``; the HTTP
    server (:func:`stop_serving` stops it)."""
    server, _thread = start_http_server(port, addr="127.0.0.1")
    return MeterProvider(metric_readers=[PrometheusMetricReader()]), server


def stop_serving(provider: MeterProvider, server: Any) -> None:
    server.shutdown()
    server.server_close()
    provider.shutdown()


async def main(port: int = 9464, messages: int = 1000, serve_for: float = 60.0) -> None:
    provider, server = serve_metrics(port)
    try:
        async with ta.open_actor_system(metrics=provider) as system:
            counter = system.spawn(Counter, name="counter")
            for _ in range(messages):
                counter.tell(1)
            print("total:", await counter.ask(0))
            print(f"scrape http://127.0.0.1:{port}/metrics (for {serve_for:.0f} s)")
            await trio.sleep(serve_for)
    finally:
        stop_serving(provider, server)


if __name__ == "__main__":
    trio.run(main)

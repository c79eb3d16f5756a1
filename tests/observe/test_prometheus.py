"""The how-to's example: Prometheus scrapes a system's metrics over HTTP (the scrape
runs in prometheus_client's thread, which asks the trio thread for a snapshot)."""

from __future__ import annotations

import importlib.util
import urllib.request
from pathlib import Path
from types import ModuleType

import pytest
import trio

import trio_actors as ta

pytest.importorskip("opentelemetry.exporter.prometheus")

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "prometheus_metrics.py"


def load_example() -> ModuleType:
    spec = importlib.util.spec_from_file_location("example_prometheus_metrics", EXAMPLE)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def scrape(port: int) -> str:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as response:
        return str(response.read().decode())


async def test_prometheus_scrapes_what_the_actors_did() -> None:
    example = load_example()
    provider, server = example.serve_metrics(0)  # (a free port)
    port = server.server_port
    try:
        async with ta.open_actor_system(metrics=provider) as system:
            counter = system.spawn(example.Counter, name="counter")
            for _ in range(250):
                counter.tell(1)
            assert await counter.ask(0) == 250
            page = await trio.to_thread.run_sync(scrape, port)
    finally:
        example.stop_serving(provider, server)
    series = dict(
        line.rsplit(" ", 1) for line in page.splitlines() if line and not line.startswith("#")
    )
    scope = (
        'otel_scope_name="trio_actors",otel_scope_schema_url="",'
        f'otel_scope_version="{ta.__version__}"'
    )
    labels = f'{{{scope},trio_actors_actor_class="Counter"}}'
    assert series[f"trio_actors_messages_handled_total{labels}"] == "251.0"
    assert series[f"trio_actors_actors_live{labels}"] == "1.0"

"""A node whose module sets up OpenTelemetry's global meter provider when it is
imported (as an application does for ``trio-actors node --metrics``); its function
handles a few messages and prints what one collection reports."""

from __future__ import annotations

from typing import Any

from opentelemetry.metrics import set_meter_provider
from opentelemetry.sdk.metrics import MeterProvider
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

import trio_actors as ta

READER = InMemoryMetricReader()
set_meter_provider(MeterProvider(metric_readers=[READER]))


class Echo(ta.Actor):
    def receive(self, message: Any) -> Any:
        return message


async def main(system: ta.ActorSystem) -> None:
    echo = system.spawn(Echo)
    for number in range(3):
        await echo.ask(number)
    data = READER.get_metrics_data()
    assert data is not None
    for resource in data.resource_metrics:
        for scope in resource.scope_metrics:
            for metric in scope.metrics:
                if metric.name == "trio_actors.messages.handled":
                    for point in metric.data.data_points:
                        attributes = dict(sorted((point.attributes or {}).items()))
                        print(f"handled {attributes} {point.value}", flush=True)  # type: ignore[union-attr]

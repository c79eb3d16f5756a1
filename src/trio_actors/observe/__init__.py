"""Observing a running system with OpenTelemetry: the options of
``open_actor_system(metrics=...)``.

This module imports no OpenTelemetry (``import trio_actors.observe`` stays cheap);
the modules that do are imported only when a system is opened with the option on
(``pip install "trio-actors[otel]"``).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import attrs

__all__ = ["Metrics"]


def _check_samples(instance: Any, attribute: Any, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"Metrics(samples_per_collection=...) must be an int >= 1, got {value!r}")


def _check_every(instance: Any, attribute: Any, value: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"Metrics({attribute.name}=...) must be an int >= 1, got {value!r}")


def _check_wait(instance: Any, attribute: Any, value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < math.inf:
        raise ValueError(f"Metrics(wait=...) must be seconds > 0 and finite, got {value!r}")


def _check_per_actor(instance: Any, attribute: Any, value: object) -> None:
    if value is not None and not callable(value):
        raise TypeError(
            f"Metrics(per_actor=...) must take an actor's path and say whether it gets "
            f"series of its own (or None), got {value!r}"
        )


@attrs.frozen
class Metrics:
    """What ``open_actor_system(metrics=...)`` reports through the OpenTelemetry
    metrics API (``metrics=True`` is ``Metrics()``; a ``MeterProvider`` is
    ``Metrics(provider=...)``). The instruments are listed in "Observing a running
    system" (``docs/observing.rst``).

    Attributes:
        provider: the ``MeterProvider`` whose meter ``trio_actors`` makes the
            instruments; ``None``: the global one
            (``opentelemetry.metrics.get_meter_provider()``, set by the
            application before the system opens).
        per_actor: called with each actor's path at each collection; the actors
            it accepts get series of their own (the attribute
            ``trio_actors.actor.path`` beside the class). ``None`` (the default):
            series per actor class only, so that their number stays bounded.
        turns_timed_every: every this many rounds of the dispatcher, one reads
            the clock after each message and so times each turn in it (a stretch
            of one actor's messages, for ``trio_actors.turn.duration``): a fair
            sample of the turns, at about twice the cost of an untimed round for
            the cheapest handlers (so about 2 % at the default, 64). ``1`` times
            every turn of every round.
        asks_timed_every: one ask to a local actor in this many is timed, for
            ``trio_actors.ask.duration`` (timing one costs about a third of the
            cheapest ask); ``1`` times each. Asks to other nodes' actors are each
            timed.
        samples_per_collection: the most turn (and ask) durations a histogram
            records per collection: a uniform sample of them; how many were left
            out is the counter ``trio_actors.histogram.unsampled``.
        wait: the longest an exporter's collection waits for the trio thread, in
            seconds; a trio thread busy for longer gives the last snapshot taken
            (and counts it as late).
    """

    provider: Any = None
    per_actor: Callable[[str], bool] | None = attrs.field(default=None, validator=_check_per_actor)
    turns_timed_every: int = attrs.field(default=64, validator=_check_every)
    asks_timed_every: int = attrs.field(default=16, validator=_check_every)
    samples_per_collection: int = attrs.field(default=4096, validator=_check_samples)
    wait: float = attrs.field(default=1.0, validator=_check_wait)

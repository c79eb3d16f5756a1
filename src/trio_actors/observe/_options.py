"""The options of tracing and metrics: :class:`Tracing` and :class:`Metrics`, values
(no OpenTelemetry imported here: ``import trio_actors`` never imports it, and
neither does this module)."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Literal

import attrs

from .._interrupts import protect_module

if TYPE_CHECKING:
    from opentelemetry.propagators.textmap import TextMapPropagator
    from opentelemetry.trace import TracerProvider

__all__ = ["TELLS", "Metrics", "Tracing"]

TELLS = ("none", "in_trace", "all")
"""The values of :attr:`Tracing.tells`."""


def _provider(instance: Tracing, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and not callable(getattr(value, "get_tracer", None)):
        raise TypeError(
            f"Tracing(provider=...) must be an OpenTelemetry TracerProvider (or None for "
            f"the global one), got {value!r}"
        )


def _propagator(instance: Tracing, attribute: attrs.Attribute[Any], value: object) -> None:
    if value is not None and not (
        callable(getattr(value, "inject", None)) and callable(getattr(value, "extract", None))
    ):
        raise TypeError(
            f"Tracing(propagator=...) must be an OpenTelemetry TextMapPropagator (or None "
            f"for the global one), got {value!r}"
        )


def _tells(instance: Tracing, attribute: attrs.Attribute[Any], value: object) -> None:
    if value not in TELLS:
        raise ValueError(f"Tracing(tells=...) must be one of {', '.join(TELLS)}; got {value!r}")


def _roots(instance: Tracing, attribute: attrs.Attribute[Any], value: object) -> None:
    if not isinstance(value, bool):
        raise TypeError(f"Tracing(roots=...) must be True or False, got {value!r}")


@attrs.frozen
class Tracing:
    """How a system traces with OpenTelemetry: ``open_actor_system(tracing=Tracing(
    ...))`` (``tracing=True`` is ``Tracing()``; a tracer provider ``p`` is
    ``Tracing(provider=p)``). Needs the ``otel`` extra (the OpenTelemetry API); the
    SDK, its exporters and its sampler are yours (see :ref:`traces`).

    Attributes:
        provider: the ``TracerProvider`` whose tracer makes the spans; ``None``: the
            global one (``opentelemetry.trace.get_tracer_provider()``), read when
            the system opens.
        tells: which tells get a ``PRODUCER`` span (and their handling a
            ``CONSUMER`` span): ``"in_trace"`` (the default) those told where a
            sampled span is current -- a tell outside any trace starts none;
            ``"all"`` every tell, the sampler deciding (a root trace per tell told
            outside one); ``"none"`` none, which keeps the tell fast paths of an
            unbounded mailbox. (Tells to bounded mailboxes, ``send``, timers'
            ticks and tells from other threads are never traced.)
        roots: whether an ``ask`` outside any trace may start one (the sampler
            decides); ``False``: only asks made inside a trace are traced.
        propagator: the ``TextMapPropagator`` that writes the trace context into
            the headers of asks to other nodes and reads it from them; ``None``: the
            global one (``opentelemetry.propagate.get_global_textmap()``: W3C
            ``traceparent`` and baggage by default), read at each use.
    """

    provider: TracerProvider | None = attrs.field(default=None, validator=_provider)
    tells: Literal["none", "in_trace", "all"] = attrs.field(default="in_trace", validator=_tells)
    roots: bool = attrs.field(default=True, validator=_roots)
    propagator: TextMapPropagator | None = attrs.field(default=None, validator=_propagator)


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
    ``Metrics(provider=...)``). The instruments are listed in :doc:`/observing`.

    Attributes:
        provider: the ``MeterProvider`` whose meter ``trio_actors`` makes the
            instruments; ``None``: the global one
            (``opentelemetry.metrics.get_meter_provider()``, set by the
            application before the system opens).
        per_actor: called with each actor's path at each collection; the actors
            it accepts get series of their own (the attribute
            ``trio_actors.actor.path`` beside the class). ``None`` (the default):
            series per actor class only, so that their number stays bounded.
            It is also called when an actor stops, and for timed turns and asks;
            if it raises, the actor gets its class's series (logged once).
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


protect_module(globals())

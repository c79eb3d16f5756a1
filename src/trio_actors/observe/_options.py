"""The options of tracing: :class:`Tracing`, a value (no OpenTelemetry imported here:
``import trio_actors`` never imports it, and neither does this module)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Literal

import attrs

if TYPE_CHECKING:
    from opentelemetry.propagators.textmap import TextMapPropagator
    from opentelemetry.trace import TracerProvider

__all__ = ["TELLS", "Tracing"]

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
    SDK, its exporters and its sampler are yours (see :doc:`/tracing`).

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

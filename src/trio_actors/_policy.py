"""How mailboxes are served: the :class:`ServingPolicy` value object.

A policy is three numbers; the serving loop (:mod:`trio_actors.mailbox`) reads them
once per turn. They are validated on construction so that a bad value fails where it
was written, naming the field and the value.
"""

from __future__ import annotations

import math
from typing import Any

import attrs

from ._interrupts import protect_module

DEFAULT_BATCH = 64
"""Messages of one mailbox handled per turn before the runtime yields."""

DEFAULT_CLEANUP_BATCH = 32
"""Stranded messages cleaned per step before the runtime yields (shielded)."""

DEFAULT_TIME_SLICE = 0.016
"""Seconds of trio-clock time after which a round of turns ends (and so the turn in
progress, if it is still running)."""


def is_finite(value: float) -> bool:
    """``math.isfinite``, also for ints beyond float range (``10**400``: not finite
    here, where ``math.isfinite`` raises ``OverflowError``)."""
    try:
        return math.isfinite(value)
    except OverflowError:
        return False


def positive_int(instance: Any, attribute: attrs.Attribute[int], value: object) -> None:
    """An attrs validator: an ``int`` (not a bool) ``>= 1``; the error names the class
    and the field (``ServingPolicy.batch``, ``Bounded.capacity``, ``Pool.size``)."""
    where = f"{type(instance).__name__}.{attribute.name}"
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{where} must be an int, got {value!r} of type {type(value).__name__}")
    if value < 1:
        raise ValueError(f"{where} must be >= 1, got {value!r}")


def _time_slice(instance: Any, attribute: attrs.Attribute[float | None], value: object) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(
            "ServingPolicy.time_slice must be a number of seconds or None, "
            f"got {value!r} of type {type(value).__name__}"
        )
    if not (value > 0 and is_finite(value)):
        raise ValueError(
            "ServingPolicy.time_slice must be a finite number of seconds > 0 "
            f"(or None for no slice), got {value!r}"
        )


@attrs.frozen
class ServingPolicy:
    """How each mailbox is served.

    Args:
        batch: at most this many messages of one mailbox are handled in one turn;
            then, if messages remain, the runtime yields to the trio scheduler before
            serving that mailbox again.
        cleanup_batch: when an actor stops, the messages left in its mailbox
            (stranded) are failed back or dead-lettered this many at a time, with a
            shielded yield between groups.
        time_slice: the dispatcher's round -- and so the turn in progress -- ends
            once this many seconds of trio-clock time have passed since the round
            began (checked between messages; a turn therefore never runs longer
            than this), or ``None`` for no time limit.

    Raises:
        TypeError: a field has the wrong type (the message names it).
        ValueError: a field is out of range (the message names it and the value).
    """

    batch: int = attrs.field(default=DEFAULT_BATCH, validator=positive_int)
    cleanup_batch: int = attrs.field(default=DEFAULT_CLEANUP_BATCH, validator=positive_int)
    time_slice: float | None = attrs.field(
        default=DEFAULT_TIME_SLICE,
        validator=_time_slice,  # type: ignore[arg-type]  # attrs' stub misreads Optional
    )

    def describe(self) -> str:
        """A short human-readable form, e.g. ``batch=64 cleanup=32 slice=16ms``."""
        slice_text = "none" if self.time_slice is None else f"{self.time_slice * 1000:g}ms"
        return f"batch={self.batch} cleanup={self.cleanup_batch} slice={slice_text}"


protect_module(globals())

__all__ = [
    "DEFAULT_BATCH",
    "DEFAULT_CLEANUP_BATCH",
    "DEFAULT_TIME_SLICE",
    "ServingPolicy",
]

"""What a pool is told besides work, and its routings (values only)."""

from __future__ import annotations

from typing import Any, Literal

import attrs

from ..._interrupts import protect_module
from ..._policy import positive_int

__all__ = ["ROUTINGS", "Broadcast", "Resize", "Routing"]

Routing = Literal["round_robin", "smallest_mailbox", "balancing"]
"""The type of ``Pool(..., routing=...)``."""
ROUTINGS: tuple[Routing, ...] = ("round_robin", "smallest_mailbox", "balancing")


@attrs.frozen
class Broadcast:
    """Told to a pool: ``message`` goes to every worker (each its own copy of the
    reference -- messages are shared, not copied)."""

    message: Any


@attrs.frozen
class Resize:
    """Told to a pool: grow or shrink it to ``size`` workers (``>= 1``)."""

    size: int = attrs.field(validator=positive_int)


protect_module(globals())

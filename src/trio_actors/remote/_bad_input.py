"""Bad input from the wire: counted by kind, logged rate-limited, never the node's end.

Every subscription of a node goes through :func:`listen`: a *parse* step that turns
the message into a value or a :class:`Bad` (``_frames.py``: one parser per subject
kind, none of which can raise), then the handler, given only values it can use. A
:class:`Bad` -- and what a handler refuses because a table is full
(``InputLimits``) -- is counted in :class:`BadInput`, the one place that counts
and logs it: the first of each kind, then every ``InputLimits.log_every``-th, with
the count so far (``NodeStatistics.bad_input`` has them all).

:class:`UndecodableBytes` bounds what the dead letters of undecodable tells hold:
a prefix of each (``InputLimits.undecodable_prefix`` bytes) within a budget for all
those the dead-letter log still holds (``InputLimits.undecodable_bytes``).
"""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, TypeVar

import attrs

from .._interrupts import protect_module
from .._statistics import BadInputCounts

if TYPE_CHECKING:
    import msgspec

    from .._cluster import InputLimits
    from .._core._dead_letters import DeadLetters
    from ..nats import Msg
    from ._transport import Transport

__all__ = ["KINDS", "Bad", "BadInput", "UndecodableBytes", "listen"]

_log = logging.getLogger("trio_actors")

KINDS = tuple(field.name for field in attrs.fields(BadInputCounts))
"""The kinds of bad input (the fields of :class:`~trio_actors.BadInputCounts`)."""

T = TypeVar("T")


class Bad:
    """Input of ``kind`` (one of :data:`KINDS`) the node cannot use, and why."""

    __slots__ = ("kind", "why")

    def __init__(self, kind: str, why: object) -> None:
        self.kind = kind
        self.why = why

    def __repr__(self) -> str:
        return f"<Bad {self.kind}: {self.why}>"


class BadInput:
    """One node's count of bad input by kind, and its rate-limited log."""

    __slots__ = ("_every", "_node_name", "counts")

    def __init__(self, node_name: str, limits: InputLimits) -> None:
        self._node_name = node_name
        self._every = limits.log_every
        self.counts = dict.fromkeys(KINDS, 0)

    def count(self, bad: Bad, subject: str) -> None:
        """Count ``bad`` (it came on ``subject``); log the first of its kind, then
        every ``log_every``-th. Never raises, never a checkpoint."""
        counts = self.counts
        seen = counts[bad.kind] = counts[bad.kind] + 1
        if seen == 1 or seen % self._every == 0:
            _log.warning(
                "node %s: ignored bad input (%s) on %s: %s -- %d of this kind so far "
                "(logged the first time, then every %d; see the node's statistics)",
                self._node_name,
                bad.kind,
                subject[:200],
                str(bad.why)[:200],
                seen,
                self._every,
            )

    def snapshot(self) -> BadInputCounts:
        return BadInputCounts(**self.counts)


def listen(
    transport: Transport,
    subject: str,
    bad_input: BadInput,
    parse: Callable[[Msg], T | Bad],
    handle: Callable[[T], object],
    *,
    queue: str | None = None,
) -> Callable[[], None]:
    """Subscribe to ``subject`` (in queue group ``queue``, if given): each message is
    parsed (``parse`` never raises), then given to ``handle`` if it is usable, else
    counted in ``bad_input``. Return what unsubscribes."""
    count = bad_input.count

    def on_message(message: Msg) -> None:
        parsed = parse(message)
        if isinstance(parsed, Bad):
            count(parsed, message.subject)
        else:
            handle(parsed)

    return transport.subscribe(subject, on_message, queue=queue)


class UndecodableBytes:
    """The bytes kept by the dead letters of tells a node could not decode: a prefix
    of each, within a budget for all the dead-letter log still holds."""

    __slots__ = ("_dead_letters", "_held", "_limit", "_prefix", "held")

    def __init__(self, dead_letters: DeadLetters, limits: InputLimits) -> None:
        self._dead_letters = dead_letters
        self._prefix = limits.undecodable_prefix
        self._limit = limits.undecodable_bytes
        self._held: deque[tuple[int, int]] = deque()  # (its number in the log, its bytes)
        self.held = 0  # bytes held now by the recent ones

    def kept(self, data: bytes | msgspec.Raw) -> bytes:
        """What the next dead letter (recorded right after this call) keeps of
        ``data``: its first bytes, as many as the prefix and the budget allow."""
        log = self._dead_letters
        self.forget_older_than(log.count - log.keep)
        size = min(memoryview(data).nbytes, self._prefix, self._limit - self.held)
        if size <= 0:
            return b""
        self._held.append((log.count + 1, size))
        self.held += size
        return bytes(memoryview(data)[:size])

    def forget_older_than(self, number: int) -> None:
        """The log no longer holds its letters up to ``number``: their bytes are free."""
        held = self._held
        while held and held[0][0] <= number:
            self.held -= held.popleft()[1]


protect_module(globals())

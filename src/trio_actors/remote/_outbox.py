"""The outbox: the tells waiting for the connection's writer, per node -- Nagle's
algorithm for tells (the rule, and why, is in ``_tells.py``'s docstring)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from .._interrupts import protect_module
from ._subjects import TELL

__all__ = ["BYTES_PER_MESSAGE", "TELLS_PER_MESSAGE", "Outbox", "Outgoing"]

TELLS_PER_MESSAGE: Final = 64
"""Tells to one node sent as one message at most (the runtime's yield batch)."""

BYTES_PER_MESSAGE: Final = 64 * 1024
"""Bytes of tells to one node sent as one message at most (well under NATS's
default ``max_payload`` of 1 MiB); a body this large goes alone, at once."""


Outgoing = tuple[Any, Any, bytes]
"""A tell waiting: its recipient (a remote actor's cell, ``_link.Told``, or a shared
name's group, ``_group_cell.GroupCell``), its message and its body."""


class Outbox:
    """The tells waiting for the connection's writer, by subject (a node's, or a
    shared name's).

    ``send(subject, tells, kind)`` sends a node's waiting tells as one message of
    ``kind`` (``TELL``, or ``SENDS`` for tells from ``send``; the node numbers and
    accounts them); :meth:`flush` sends them all (the node calls it at the writer's
    turn, and before anything else it sends). A node's waiting tells are of one
    kind: a tell of the other kind sends them first, so they leave in order.
    """

    __slots__ = ("_bytes", "_kinds", "_send", "waiting")

    def __init__(self, send: Callable[[str, list[Outgoing], int], None]) -> None:
        self._send = send
        self.waiting: dict[str, list[Outgoing]] = {}  # (node subject -> its tells, in order)
        self._bytes: dict[str, int] = {}
        self._kinds: dict[str, int] = {}

    def add(
        self, subject: str, told: Outgoing, kind: int = TELL, most: int = TELLS_PER_MESSAGE
    ) -> None:
        """Keep ``told`` for ``subject``'s next message (sent now if that is full:
        ``most`` tells, the same for every tell to ``subject``). Never a
        checkpoint."""
        size = len(told[2])
        tells = self.waiting.get(subject)
        if tells is not None and (
            self._bytes[subject] + size > BYTES_PER_MESSAGE or self._kinds[subject] != kind
        ):
            self._send_waiting(subject)  # (full, or of the other kind: this begins the next)
            tells = None
        if tells is None:
            tells = self.waiting[subject] = []
            self._bytes[subject] = 0
            self._kinds[subject] = kind
        tells.append(told)
        self._bytes[subject] += size
        if len(tells) >= most:
            self._send_waiting(subject)

    def _send_waiting(self, subject: str) -> None:
        tells = self.waiting.pop(subject)
        del self._bytes[subject]
        self._send(subject, tells, self._kinds.pop(subject))

    def flush(self) -> None:
        """Send every node's waiting tells now (oldest node first). Never a
        checkpoint; never raises (what cannot be sent is the node's to account)."""
        while self.waiting:
            self._send_waiting(next(iter(self.waiting)))


protect_module(globals())

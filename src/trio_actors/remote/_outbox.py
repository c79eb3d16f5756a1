"""Remote tells coalesced: a burst of tells to a node goes out as few NATS messages.

Every NATS message costs the same whatever it carries: a frame built and its
subjects checked here, a route looked up by the server, a frame parsed on the
receiving node. A stream of tells from one node to another pays that once per
*message*, not once per tell, when the tells travel together -- as Akka's Artery and
Erlang's distribution buffer theirs. The rule is Nagle's algorithm, with the
connection's own buffer as the signal:

* a tell leaves **at once**, alone, when nothing the node published waits for the
  connection's writer (the NATS client's writer task; see its write-through,
  ``nats/_client.py``) -- a lone tell costs what it did before;
* while something waits, the tell waits here instead, **per node**; at the writer's
  next turn (``Transport.before_writing``) each node's waiting tells are published
  as one message, just before the writer takes the buffer, so they leave in the
  same write as what was waiting -- no task of the outbox's own, no extra turn;
* a node's waiting tells go out at once when they reach :data:`TELLS_PER_MESSAGE`
  tells or would pass :data:`BYTES_PER_MESSAGE` bytes, and before *anything else*
  the node sends (an ask, a stop, a reply, a heartbeat...): what the node sends
  leaves in the order it was sent, as without an outbox (T2, and replies never
  overtake the tells made before them).

What a waiting tell's message meets when it goes (the connection closed, its
buffer full while reconnecting) has nobody to be raised to: those tells become dead
letters "unreachable", with a warning in the log -- as a tell from another thread
does. A tell sent at once raises to its caller, as before.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

if TYPE_CHECKING:
    from ._remote_cell import RemoteCell

__all__ = ["BYTES_PER_MESSAGE", "TELLS_PER_MESSAGE", "Outbox", "Told"]

TELLS_PER_MESSAGE: Final = 64
"""Tells to one node sent as one message at most (the runtime's yield batch)."""

BYTES_PER_MESSAGE: Final = 64 * 1024
"""Bytes of tells to one node sent as one message at most (well under NATS's
default ``max_payload`` of 1 MiB); a body this large goes alone, at once."""

Told = tuple["RemoteCell", Any, bytes]
"""A tell: its recipient, its message (kept for a dead letter) and its body."""


class Outbox:
    """The tells waiting for the connection's writer, by node subject.

    ``send(subject, tells)`` sends a node's waiting tells as one message (the node
    numbers and accounts them); :meth:`flush` sends them all (the node calls it at
    the writer's turn, and before anything else it sends).
    """

    __slots__ = ("_bytes", "_send", "waiting")

    def __init__(self, send: Callable[[str, list[Told]], None]) -> None:
        self._send = send
        self.waiting: dict[str, list[Told]] = {}  # (node subject -> its tells, in order)
        self._bytes: dict[str, int] = {}

    def add(self, subject: str, told: Told) -> None:
        """Keep ``told`` for ``subject``'s next message (sent now if that is full).
        Never a checkpoint."""
        size = len(told[2])
        tells = self.waiting.get(subject)
        if tells is not None and self._bytes[subject] + size > BYTES_PER_MESSAGE:
            self._send_waiting(subject)  # (full by its bytes: this one begins the next)
            tells = None
        if tells is None:
            tells = self.waiting[subject] = []
            self._bytes[subject] = 0
        tells.append(told)
        self._bytes[subject] += size
        if len(tells) >= TELLS_PER_MESSAGE:
            self._send_waiting(subject)

    def _send_waiting(self, subject: str) -> None:
        tells = self.waiting.pop(subject)
        del self._bytes[subject]
        self._send(subject, tells)

    def flush(self) -> None:
        """Send every node's waiting tells now (oldest node first). Never a
        checkpoint; never raises (what cannot be sent is the node's to account)."""
        while self.waiting:
            self._send_waiting(next(iter(self.waiting)))

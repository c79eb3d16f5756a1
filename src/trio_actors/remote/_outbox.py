"""Remote tells coalesced: a burst of tells to a node goes out as few NATS messages.

Every NATS message costs the same whatever it carries: a frame built and its
subjects checked here, a route looked up by the server, a frame parsed on the
receiving node. A stream of tells from one node to another pays that once per
*message*, not once per tell, when the tells travel together -- as Akka's Artery and
Erlang's distribution buffer theirs. The rule, in the manner of Nagle's algorithm
(and of the client's own write-through, ``nats/_client.py``):

* a tell when no burst is under way goes out **at once**, alone, and starts a burst;
* the tells after it, until the outbox's task has had its turn (the next scheduler
  pass), wait here, **per node**; that task then sends each node's as one message,
  and the burst goes on while tells keep coming -- it ends at the first pass that
  finds nothing waiting;
* a node's waiting tells go out at once when they reach :data:`TELLS_PER_MESSAGE`
  tells or would pass :data:`BYTES_PER_MESSAGE` bytes, and before *anything else* the node
  sends (an ask, a stop, a reply, a heartbeat...): what the node sends leaves in
  the order it was sent, as without an outbox (T2, and replies never overtake the
  tells made before them).

So a lone tell leaves as soon as before, and a burst is delayed by one scheduler
pass at most. What a waiting tell's message meets when it goes (the connection
closed, its buffer full while reconnecting) has nobody to be raised to: those tells
become dead letters "unreachable", with a warning in the log -- as a tell from
another thread does. A tell sent at once raises to its caller, as before.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Final

import trio

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
    """The tells waiting for the next scheduler pass, by node subject.

    ``send(subject, tells)`` sends a node's waiting tells as one message (the node
    numbers and accounts them); :meth:`run` is the task that sends them each pass.
    """

    __slots__ = ("_bytes", "_send", "_wake", "bursting", "waiting")

    def __init__(self, send: Callable[[str, list[Told]], None]) -> None:
        self._send = send
        self.waiting: dict[str, list[Told]] = {}  # (node subject -> its tells, in order)
        self._bytes: dict[str, int] = {}
        self.bursting = False  # a tell went out since the task's last turn
        self._wake = trio.Event()

    def start_burst(self) -> None:
        """A tell went out at once: the next ones wait for the task's turn."""
        self.bursting = True
        self._wake.set()

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
        checkpoint."""
        while self.waiting:
            self._send_waiting(next(iter(self.waiting)))

    async def run(self) -> None:
        """Each scheduler pass while a burst goes on, send what waits; sleep when
        a pass finds nothing. Cancelled, it leaves what waits to :meth:`flush`."""
        try:
            while True:
                await self._wake.wait()
                self._wake = trio.Event()
                while self.waiting:
                    self.flush()
                    await trio.lowlevel.checkpoint()
                self.bursting = False
        finally:
            self.bursting = False  # (without this task, a tell leaves at once)

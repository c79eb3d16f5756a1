"""A subscription: the messages of one ``SUB``, buffered for the task that reads
them. It outlives reconnects (the client subscribes it again on every new
connection, with the same sid)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from ._protocol import Msg

if TYPE_CHECKING:
    from ._client import Client

__all__ = ["SlowConsumer", "Subscription"]


class SlowConsumer(Exception):
    """A subscription dropped messages: its buffer was full (it was not read fast
    enough). Raised once by the iteration, after which it goes on."""


class Subscription:
    """Messages of one ``SUB``, in the order the server sent them.

    Iterate it (``async for msg in sub``) or call :meth:`receive`. Leaving the
    ``async with`` of :meth:`Client.subscribe` unsubscribes; the iteration then ends.
    """

    def __init__(
        self, client: Client, sid: int, subject: str, queue: str | None, pending: int
    ) -> None:
        self.client = client
        self.sid = sid
        self.subject = subject
        self.queue = queue
        self._send, self._receive = trio.open_memory_channel[Msg](pending)
        self.delivered = 0
        self.dropped = 0
        self._unreported_drops = 0

    def __repr__(self) -> str:
        return f"<Subscription {self.sid} to {self.subject!r}>"

    def _deliver(self, message: Msg) -> None:
        try:
            self._send.send_nowait(message)
        except trio.WouldBlock:
            self.dropped += 1
            self._unreported_drops += 1
        except trio.ClosedResourceError:
            pass  # unsubscribed: the server may still have sent some
        else:
            self.delivered += 1

    async def receive(self) -> Msg:
        """The next message. A checkpoint.

        Raises:
            SlowConsumer: messages were dropped since the last call (once).
            trio.EndOfChannel: the subscription has ended.
        """
        if self._unreported_drops:
            count, self._unreported_drops = self._unreported_drops, 0
            await trio.lowlevel.checkpoint()
            raise SlowConsumer(
                f"subscription {self.sid} to {self.subject!r} dropped {count} messages: "
                "its buffer was full"
            )
        return await self._receive.receive()

    def __aiter__(self) -> Subscription:
        return self

    async def __anext__(self) -> Msg:
        try:
            return await self.receive()
        except trio.EndOfChannel:
            raise StopAsyncIteration from None

    def unsubscribe(self) -> None:
        """End the subscription (``UNSUB``). Never a checkpoint; idempotent."""
        self.client._unsubscribe(self)

"""A subscription: the messages of one ``SUB``, buffered for the task that reads
them. It outlives reconnects (the client subscribes it again on every new
connection, with the same sid).

Reading is served in **yield batches**, as the runtime serves a mailbox: every
:meth:`Subscription.receive` is a cancellation point (a cancelled scope raises
``trio.Cancelled`` at once, whatever is buffered), but while messages are waiting
it yields to the scheduler only once every :data:`YIELD_EVERY` messages, not for
each one. A full scheduler pass costs ~8 µs here against ~1 µs for taking a
buffered message, so a reader that yielded for every message would spend most of
its time yielding (measured: ``NATS-pubsub`` in ``benchmarks/nats_client.py``, see
``docs/performance``). Other tasks still get their turn at least once per batch,
and whenever the buffer is empty the reader waits (which yields, of course).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from typing import TYPE_CHECKING, Final

import trio

from ._values import Msg

if TYPE_CHECKING:
    from ._client import Client

__all__ = ["YIELD_EVERY", "SlowConsumer", "Subscription"]

YIELD_EVERY: Final = 64
"""A subscription's reader yields to the scheduler at least once every this many
messages (the runtime's yield batch)."""


class SlowConsumer(Exception):
    """A subscription dropped messages: its buffer was full (it was not read fast
    enough). Raised once by the iteration, after which it goes on."""


class Subscription:
    """Messages of one ``SUB``, in the order the server sent them.

    Iterate it (``async for msg in sub``) or call :meth:`receive`. Leaving the
    ``async with`` of :meth:`Client.subscribe` unsubscribes; the iteration then ends
    after the messages already buffered. Several tasks may read one subscription:
    each message goes to one of them.
    """

    def __init__(
        self,
        client: Client,
        sid: int,
        subject: str,
        queue: str | None,
        pending: int,
        callback: Callable[[Msg], object] | None = None,
    ) -> None:
        self.client = client
        self.callback = callback
        self.sid = sid
        self.subject = subject
        self.queue = queue
        self.pending = pending
        self._messages: deque[Msg] = deque()
        self._readers = trio.lowlevel.ParkingLot()  # tasks waiting for a message
        self._waiting = 0  # how many (len(ParkingLot) costs a call per message)
        self._ended = False
        self._taken_without_yield = 0
        self.delivered = 0
        self.dropped = 0
        self._unreported_drops = 0

    def __repr__(self) -> str:
        return f"<Subscription {self.sid} to {self.subject!r}>"

    def _deliver(self, message: Msg) -> None:
        """Buffer a message from the server (the reader task calls this)."""
        if self._ended:
            return  # unsubscribed: the server may still have sent some
        if self.callback is not None:
            self.delivered += 1
            self.callback(message)
            return
        if len(self._messages) >= self.pending:
            self.dropped += 1
            self._unreported_drops += 1
            return
        self._messages.append(message)
        self.delivered += 1
        if self._waiting:
            self._readers.unpark()

    def _end(self) -> None:
        """No more messages will come: readers end once they have the buffered ones."""
        self._ended = True
        self._readers.unpark_all()

    async def receive(self) -> Msg:
        """The next message. A cancellation point always; a schedule point when it
        waits, and at least once every :data:`YIELD_EVERY` messages otherwise (see
        the module's docstring).

        Raises:
            SlowConsumer: messages were dropped since the last call (once).
            trio.EndOfChannel: the subscription has ended and every message buffered
                before has been received.
            TypeError: the subscription hands its messages to a callback.
        """
        if self.callback is not None:
            raise TypeError(
                f"subscription {self.sid} to {self.subject!r} hands its messages to "
                f"{self.callback!r}: there is nothing to receive"
            )
        if self._unreported_drops:
            count, self._unreported_drops = self._unreported_drops, 0
            await trio.lowlevel.checkpoint()
            raise SlowConsumer(
                f"subscription {self.sid} to {self.subject!r} dropped {count} messages: "
                "its buffer was full"
            )
        messages = self._messages
        if messages and self._taken_without_yield < YIELD_EVERY - 1:
            # Raises Cancelled if cancelled; otherwise returns without yielding, so
            # the message is still there.
            await trio.lowlevel.checkpoint_if_cancelled()
            self._taken_without_yield += 1
            return messages.popleft()
        self._taken_without_yield = 0
        if messages:
            await trio.lowlevel.checkpoint()
        while not messages:  # (another reader may have taken it meanwhile)
            if self._ended:
                await trio.lowlevel.checkpoint()
                raise trio.EndOfChannel
            self._waiting += 1
            try:
                await self._readers.park()
            finally:
                self._waiting -= 1
        return messages.popleft()

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

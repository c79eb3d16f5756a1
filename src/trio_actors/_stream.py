"""``Stream``: a bounded stream of values the runtime offers and a follower reads --
the shape of a dead-letter subscription and of a node's membership events.

The runtime never waits for a follower: :meth:`Stream.offer` queues a value if the
stream has room and counts it in :attr:`Stream.dropped` if not. The follower reads
with ``async for``, :meth:`Stream.receive` or :meth:`Stream.receive_nowait`; once
the stream is closed (by the follower, or by its source ending) what was queued can
still be read, then the iteration ends.
"""

from __future__ import annotations

from types import TracebackType
from typing import Generic, Self, TypeVar

import trio

from ._interrupts import protect_module

T = TypeVar("T")

__all__ = ["Stream"]


class Stream(Generic[T]):
    """A bounded stream of values (see the module).

    Attributes:
        capacity: the most values it holds not yet received.
        dropped: values that found it full.
    """

    __slots__ = ("__weakref__", "_receive", "_send", "capacity", "dropped")

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.dropped = 0
        self._send, self._receive = trio.open_memory_channel[T](capacity)

    def offer(self, value: T) -> None:
        """Queue ``value`` if there is room; count it as dropped if not. Never a
        checkpoint."""
        try:
            self._send.send_nowait(value)
        except trio.WouldBlock:
            self.dropped += 1
        except trio.ClosedResourceError:
            pass  # (closed meanwhile)

    async def receive(self) -> T:
        """The next value; waits for one. A checkpoint.

        Raises:
            trio.EndOfChannel: the stream was closed and every value queued before
                has been received.
        """
        return await self._receive.receive()

    def receive_nowait(self) -> T:
        """The next value if one is queued. Never a checkpoint.

        Raises:
            trio.WouldBlock: none is queued.
            trio.EndOfChannel: the stream was closed and every value queued before
                has been received.
        """
        return self._receive.receive_nowait()

    def __aiter__(self) -> Self:
        return self

    async def __anext__(self) -> T:
        try:
            return await self._receive.receive()
        except trio.EndOfChannel:
            raise StopAsyncIteration from None

    def close(self) -> None:
        """No value is offered from now on; those queued can still be received,
        then the iteration ends. Idempotent; never a checkpoint."""
        self._send.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        traceback: TracebackType | None,
    ) -> None:
        self.close()

    def __repr__(self) -> str:
        queued = self._receive.statistics().current_buffer_used
        name = type(self).__name__
        return f"<{name} queued={queued} capacity={self.capacity} dropped={self.dropped}>"


protect_module(globals())

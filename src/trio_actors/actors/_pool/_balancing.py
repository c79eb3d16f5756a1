"""What a balancing pool's shared queue holds besides tells: asks waiting for a free
worker (:class:`_Waiter`), and the envelopes that tell the pool when a worker it gave
work to is free again (:class:`_PoolAsk`, :class:`_Job`)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import trio

from ..._core._cell import ActorCell
from ..._core._envelope import Ask, Notice

if TYPE_CHECKING:
    from ._cell import PoolCell

__all__ = ["_Job", "_PoolAsk", "_Waiter"]


class _Waiter:
    """An ask waiting in a balancing pool for a free worker (removed from the queue
    if its asker is cancelled meanwhile)."""

    __slots__ = ("task",)

    def __init__(self, task: trio.lowlevel.Task) -> None:
        self.task = task


class _PoolAsk(Ask):
    """An ask a balancing pool gave a worker. The asker frees the worker when the
    ask ends for it (answered, failed, withdrawn) -- but if it was cancelled while
    the ``async`` handler ran, the handler's end frees it: a worker still unwinding
    a cancelled handler is given no other work."""

    __slots__ = ("pool",)

    def __init__(self, worker: ActorCell, message: Any, task: Any, pool: PoolCell) -> None:
        super().__init__(worker, message, task)
        self.pool: PoolCell | None = pool

    def handler_ended(self, error: BaseException) -> None:
        super().handler_ended(error)
        self.release()

    def release(self) -> None:
        """The worker is done with it (once: later calls do nothing)."""
        pool, self.pool = self.pool, None
        if pool is not None:
            pool.worker_done(self.cell)


class _Job:
    """A tell a balancing pool gave a worker, queued there as a :class:`Notice`
    whose sender this is: told when the worker is done with it -- handled, failed,
    or stranded (then the worker makes it a dead letter)."""

    __slots__ = ("done",)

    def __init__(self) -> None:
        self.done = trio.Event()

    def notice_finished(self, notice: Notice) -> None:
        self.done.set()

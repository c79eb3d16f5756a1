"""A balancing pool's shared queue: what it holds besides tells -- asks waiting for
a free worker (:class:`_Waiter`) --, the envelopes that tell the pool when a worker
it gave work to is free again (:class:`_PoolAsk`, :class:`_Job`), and its bound.

The bound. The workers of a balancing pool share one mailbox, the pool's queue, so
``Pool(..., routing="balancing", mailbox=Bounded(k, overflow))`` bounds that queue
(as Akka's ``BalancingPool`` bounds its shared mailbox): the queue is *full* when
``k`` messages wait in it -- tells, and asks waiting for a worker -- or when sends
or asks already wait for room in it. A message a worker is handling, or has been
handed (each worker holds one at a time), is no longer queued; so at most
``k + size`` messages sent to the pool are not yet being handled. Into a full queue
``send`` and ``ask`` wait for room, in one line, first come first served
(:class:`~trio_actors._core._bounded.WaitingSenders`, as for any bounded mailbox),
cancellable with nothing queued; ``tell`` meets the overflow policy, as the pool's
own: ``"fail"`` raises ``MailboxFull`` naming the pool, ``"drop_new"`` makes the
message an ``"overflow"`` dead letter of the pool, ``"drop_old"`` does that to the
oldest queued tell (or fails the oldest waiting ask back with ``MailboxFull``).
A message taken back from a worker that stops before it began (the pool hands it
to another) goes back to the front of the queue even when the queue is full.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import outcome
import trio

from ..._core._bounded import full_text
from ..._core._cell import ActorCell
from ..._core._envelope import Ask, Notice
from ..._errors import MailboxFull, describe_value
from ..._interrupts import protect_module

if TYPE_CHECKING:
    from ._cell import PoolCell

__all__ = ["_Job", "_PoolAsk", "_Waiter", "admit_waiting", "overflow", "queue_full"]


class _Waiter:
    """An ask waiting in a balancing pool for a free worker (removed from the queue
    if its asker is cancelled meanwhile)."""

    __slots__ = ("task",)

    def __init__(self, task: trio.lowlevel.Task) -> None:
        self.task = task

    def fail(self, error: BaseException) -> bool:
        """Raise ``error`` in the asker (the pool stopped while it waited for room,
        or ``"drop_old"`` dropped it from the queue)."""
        trio.lowlevel.reschedule(self.task, outcome.Error(error))
        return True


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
    or stranded (then the worker makes it a dead letter). ``then``: who tracks the
    tell beyond the pool (a tell from another node: its run), told next."""

    __slots__ = ("done", "then")

    def __init__(self) -> None:
        self.done = trio.Event()
        self.then: Any = None

    def notice_finished(self, notice: Notice) -> None:
        self.done.set()
        if self.then is not None:
            self.then.notice_finished(notice)


def queue_full(pool: PoolCell) -> bool:
    """Whether a balancing pool's queue has no room (see the module)."""
    bound = pool.queue_bound
    return bound is not None and (len(pool.shared) >= bound.capacity or bool(pool.senders))


def admit_waiting(pool: PoolCell) -> None:
    """Queue the oldest waiting sends and asks while the queue has room (a sender
    resumes; an asker waits on, for a worker now)."""
    senders, shared, bound = pool.senders, pool.shared, pool.queue_bound
    assert senders is not None
    assert bound is not None
    while senders and len(shared) < bound.capacity:
        shared.append(senders.admit_oldest())


def overflow(pool: PoolCell, message: Any, *, raising: bool) -> None:
    """A tell (or a tracked tell's :class:`Notice`) found the queue full: apply the
    overflow policy (``raising``: a tell in the trio thread, which ``"fail"`` raises
    in; from another thread or node it is a dead letter)."""
    bound = pool.queue_bound
    assert bound is not None
    policy = bound.overflow
    if policy == "drop_old":
        if pool.shared:  # (it is: the queue is full)
            oldest = pool.shared.popleft()
            if type(oldest) is _Waiter:
                pool.failed_back += oldest.fail(
                    MailboxFull(full_text(pool.path, bound, "the oldest ask was dropped"))
                )
            else:
                _overflow_letter(pool, oldest)
        pool.shared.append(message)
    elif policy == "fail" and raising:
        pool.failed_back += 1
        raise MailboxFull(full_text(pool.path, bound, f"{describe_value(message)} was not queued"))
    else:
        _overflow_letter(pool, message)


def _overflow_letter(pool: PoolCell, item: Any) -> None:
    """Make ``item`` -- a tell, or a tracked one's :class:`Notice` (which ends) --
    an ``"overflow"`` dead letter of the pool."""
    if type(item) is Notice:
        item.take_back()
        item = item.message
    pool.overflow_letters += 1
    pool.system.dead_letters.record(pool.ref, item, "overflow")


protect_module(globals())

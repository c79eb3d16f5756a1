"""The message counts of a pool and its workers, summed for its statistics."""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

from ..._core._state import ActorState
from ..._interrupts import protect_module
from ..._statistics import ActorStatistics, DeadLetterCounts

if TYPE_CHECKING:
    from ._cell import PoolCell

__all__ = ["WorkerCounts", "pool_statistics"]


class WorkerCounts:
    """The message counts of a pool and its workers, summed (see
    :func:`pool_statistics`)."""

    __slots__ = (
        "dead_letters",
        "expected_errors",
        "failed_back",
        "failures",
        "handled",
        "mailbox_depth",
        "senders_waiting",
        "withdrawn",
    )

    def __init__(self) -> None:
        self.mailbox_depth = self.senders_waiting = self.handled = self.withdrawn = 0
        self.failed_back = self.failures = self.expected_errors = 0
        self.dead_letters = [0, 0, 0]  # stopped, stranded, overflow

    def add(self, stats: ActorStatistics) -> None:
        self.mailbox_depth += stats.mailbox_depth
        self.senders_waiting += stats.senders_waiting
        self.handled += stats.handled
        self.withdrawn += stats.withdrawn
        self.failed_back += stats.failed_back
        self.failures += stats.failures
        self.expected_errors += stats.expected_errors
        letters = stats.dead_letters
        self.dead_letters[0] += letters.stopped
        self.dead_letters[1] += letters.stranded
        self.dead_letters[2] += letters.overflow

    def merge(self, other: WorkerCounts) -> None:
        for name in self.__slots__:
            if name == "dead_letters":
                for index, count in enumerate(other.dead_letters):
                    self.dead_letters[index] += count
            else:
                setattr(self, name, getattr(self, name) + getattr(other, name))


def pool_statistics(pool: PoolCell, own: ActorStatistics) -> ActorStatistics:
    """``pool``'s statistics from its own (``own``): the messages it was sent,
    wherever they went -- handled by a worker, withdrawn, failed back or
    dead-lettered, by the pool or by any worker, past or present; ``mailbox_depth``
    is what waits in the pool's queue and its workers'; ``failures`` and
    ``expected_errors`` count the workers' too; ``mailbox_capacity`` is a bounded
    balancing pool's queue's, ``senders_waiting`` counts the sends and asks waiting
    for room in it and in the workers. The workers' ``Terminated`` notices, which
    the pool handles itself, are not messages it was sent. ``state``, ``restarts``,
    ``timers`` and the longest turn are the pool's own."""
    counts = WorkerCounts()
    counts.add(own)
    counts.merge(pool.retired_counts)
    for worker in pool.retired:
        counts.add(worker.snapshot())
    for worker in pool.workers:
        if worker.state is not ActorState.STOPPED:  # (a stopped one is retired)
            counts.add(worker.snapshot())
    return attrs.evolve(
        own,
        mailbox_depth=counts.mailbox_depth + len(pool.shared),
        mailbox_capacity=own.mailbox_capacity
        if pool.queue_bound is None
        else pool.queue_bound.capacity,
        senders_waiting=counts.senders_waiting,
        handled=counts.handled - pool.worker_notices,
        dead_letters=DeadLetterCounts(*counts.dead_letters),
        withdrawn=counts.withdrawn,
        failed_back=counts.failed_back,
        failures=counts.failures,
        expected_errors=counts.expected_errors,
    )


protect_module(globals())

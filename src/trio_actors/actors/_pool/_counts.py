"""The message counts of a pool and its workers, summed for its statistics."""

from __future__ import annotations

from ..._statistics import ActorStatistics

__all__ = ["WorkerCounts"]


class WorkerCounts:
    """The message counts of a pool and its workers, summed (see
    :meth:`PoolCell.snapshot`)."""

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

"""A census of a system's live actors: one walk over all of them, for the
statistics service (``remote/_monitoring.py``, what ``trio-actors top`` asks).

Two walks, both synchronous in the trio thread (never a checkpoint; nothing else
runs while they do, so they see one consistent moment):

* :func:`handled_total` -- every message the system's actors have handled, the
  stopped ones' included (``ActorSystem.handled_by_stopped``, added once per stop):
  one addition per live actor (``SystemStatistics`` stays O(1) and has no such
  total, which needs this walk);
* :func:`busiest` -- the ``limit`` actors first by one key (messages handled per
  second since the previous census, mailbox depth, longest turn, dead letters,
  ...), with their statistics: one key per live actor from the counters the cell
  keeps, a partial sort (``heapq.nlargest``), and a snapshot of only the ones
  chosen.

The rate needs what each actor had handled at the previous census: a
:class:`Census` keeps it -- a plain dict from cell to count, replaced at each
census (a weak-keyed one costs about a microsecond more per actor: the dict keeps
a stopped actor's small cell until the next census, or until :meth:`Census.forget`).

The counts are the cells' own, so a node's total counts every message once: a
message sent to a pool is counted by the worker that handled it (a child of the
pool), and the pool's own count is of its workers' stop notices. (A pool's row
among the busiest shows its ``statistics()``, which add its workers' up.)
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Final

import attrs

from .._core._cell import ActorCell
from .._core._envelope import NO_MESSAGE
from .._interrupts import protect_module
from .._monitoring import SORTS
from .._statistics import ActorStatistics

if TYPE_CHECKING:
    from ._system import ActorSystem

__all__ = ["SORTS", "Busiest", "Census", "handled_total", "live_cells", "mailbox_depth"]

_snapshot = ActorCell.snapshot


def live_cells(system: ActorSystem) -> Iterator[ActorCell]:
    """Every live actor of ``system`` (not yet stopped), at every level. A
    generator: walk it without a checkpoint in between (the tree changes only when
    the trio thread runs something else)."""
    stack = list(system._cells.values())
    while stack:
        cell = stack.pop()
        yield cell
        if cell.children:
            stack.extend(cell.children.values())


def handled_total(system: ActorSystem) -> int:
    """Messages handled by every actor ``system`` has had, stopped ones included.
    Never a checkpoint."""
    return system.handled_by_stopped + sum(cell.handled for cell in live_cells(system))


def mailbox_depth(cell: ActorCell) -> int:
    """The messages ``cell`` holds, as its statistics count them (a child on another
    node: the tells held for its next instance too)."""
    depth = (cell.head is not NO_MESSAGE) + len(cell.mailbox or ()) - cell.withdrawn_queued
    held = getattr(cell, "held", None)  # (remote._children.RemoteChildCell)
    return depth if held is None else depth + len(held)


def _turn(cell: ActorCell) -> float:
    return max(cell.longest_turn_time, cell.sampled_turn_time)


def _dead_letters(cell: ActorCell) -> int:
    return cell.stopped_letters + cell.stranded_letters + cell.overflow_letters


_KEYS: Final[dict[str, Callable[[ActorCell], float]]] = {
    "handled": lambda cell: cell.handled,
    "mailbox": mailbox_depth,
    "turn": _turn,
    "dead_letters": _dead_letters,
    "failures": lambda cell: cell.failures,
    "restarts": lambda cell: cell.restarts,
}

_FROM_STATISTICS: Final[dict[str, Callable[[ActorStatistics], float]]] = {
    "handled": lambda stats: stats.handled,
    "mailbox": lambda stats: stats.mailbox_depth,
    "turn": lambda stats: stats.longest_turn_seconds,
    "dead_letters": lambda stats: stats.dead_letters.total,
    "failures": lambda stats: stats.failures,
    "restarts": lambda stats: stats.restarts,
}


@attrs.frozen
class Busiest:
    """The actors first by one key, from :meth:`Census.busiest`.

    Attributes:
        actors: ``(statistics, class name, rate)`` of each, first first; ``rate``
            is messages handled per second since the previous census (``None``:
            there was none).
        total: how many live actors there were.
        interval: seconds since the previous census (``None``: none).
    """

    actors: tuple[tuple[ActorStatistics, str, float | None], ...]
    total: int
    interval: float | None


class Census:
    """What each live actor had handled at the last census, for rates."""

    __slots__ = ("_at", "_handled")

    def __init__(self) -> None:
        self._handled: dict[ActorCell, int] = {}
        self._at: float | None = None

    def forget(self) -> None:
        """Drop what the last census saw (the next has no rates)."""
        self._handled = {}
        self._at = None

    def busiest(self, system: ActorSystem, sort: str, limit: int, now: float) -> Busiest:
        """The ``limit`` live actors of ``system`` first by ``sort`` (one of
        :data:`SORTS`, largest first; ties in walk order), with their statistics,
        at trio time ``now``; this census becomes the previous one. Never a
        checkpoint: one walk, O(actors), then O(limit) snapshots.

        Raises:
            ValueError: ``sort`` is not one of :data:`SORTS`, or ``limit`` < 0.
        """
        if sort not in SORTS:
            raise ValueError(f"sort is one of {', '.join(SORTS)}, got {sort!r}")
        if limit < 0:
            raise ValueError(f"limit is a whole number >= 0, got {limit}")
        cells = list(live_cells(system))
        previous, at = self._handled, self._at
        interval = None if at is None or now <= at else now - at
        # Cells whose class counts its statistics its own way (a pool adds its
        # workers', an anchor its held tells) are keyed by their snapshot.
        special = [type(cell).snapshot is not _snapshot for cell in cells]
        if sort == "rate":
            if interval is None:
                keys: list[float] = [0.0] * len(cells)
            else:
                get = previous.get
                keys = [(cell.handled - get(cell, 0)) / interval for cell in cells]
        elif any(special):
            key, of_statistics = _KEYS[sort], _FROM_STATISTICS[sort]
            keys = [
                of_statistics(cell.snapshot()) if odd else key(cell)
                for cell, odd in zip(cells, special, strict=True)
            ]
        else:
            key = _KEYS[sort]
            keys = [key(cell) for cell in cells]
        chosen = heapq.nlargest(limit, range(len(cells)), key=keys.__getitem__)
        actors = []
        for index in chosen:
            cell = cells[index]
            rate = None if interval is None else (cell.handled - previous.get(cell, 0)) / interval
            actors.append((cell.snapshot(), cell.kinds.class_name, rate))
        self._handled = {cell: cell.handled for cell in cells}
        self._at = now
        return Busiest(tuple(actors), len(cells), interval)


protect_module(globals())

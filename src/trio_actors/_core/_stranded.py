"""Stranded cleanup: what happens to the messages left in a stopped actor's mailbox.

Each stranded ask fails in its asker with :class:`~trio_actors.ActorStopped`; each
stranded tell becomes one :class:`~trio_actors.DeadLetter` with reason
``"stranded"``; an ask its asker already withdrew is simply dropped (it was counted
as withdrawn when it was cancelled). Nothing is lost silently.

The cleanup has its own cadence, :attr:`ServingPolicy.cleanup_batch
<trio_actors.ServingPolicy.cleanup_batch>` (32 by default), separate from the serving
batch: tuning the serving batch for throughput must never make abnormal cleanup less
responsive. Between groups the cleaner yields to the scheduler with a schedule point that is
not a cancel point (``trio.lowlevel.cancel_shielded_checkpoint``), so the cleanup
always finishes -- even when the whole system is being
cancelled -- while other tasks still get their turn. One :class:`CleanupCadence` can
span many actors (the system's exit stops them all with one shared cadence, counting
each actor stopped as one unit of work).
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any

import trio
import trio.lowlevel

from .._errors import ActorStopped
from .._interrupts import protect_module
from ._envelope import Ask, Notice

if TYPE_CHECKING:
    from ._cell import ActorCell
    from ._ref import ActorRef


class CleanupCadence:
    """Counts units of cleanup work and yields (shielded) every ``batch`` units."""

    __slots__ = ("batch", "used")

    def __init__(self, batch: int) -> None:
        self.batch = batch
        self.used = 0

    async def spend(self, units: int = 1) -> None:
        """Count ``units`` of work; yield (shielded) once a group is complete.

        A checkpoint only when a group completes; cancellation cannot interrupt it.
        """
        if self.group_complete_after(units):
            await trio.lowlevel.cancel_shielded_checkpoint()

    def group_complete_after(self, units: int) -> bool:
        """Count ``units`` of work; return ``True`` once a group is complete.

        Never a checkpoint: the caller must then yield as :meth:`spend` does. For
        loops over many cheap units (the system's exit, one unit per actor), where a
        coroutine per unit would cost more than the unit.
        """
        self.used += units
        if self.used >= self.batch:
            self.used = 0
            return True
        return False


async def clean_stranded(cell: ActorCell, stranded: deque[Any], cadence: CleanupCadence) -> None:
    """Fail back or dead-letter every message in ``stranded``, a group at a time.

    Not a checkpoint by itself, but yields (shielded) between groups of
    ``cadence.batch``; cancellation does not interrupt it. Whatever interrupts it
    otherwise (a ``KeyboardInterrupt`` delivered at a yield), the stop sequence
    cleans the rest at once (:func:`clean_stranded_now`).
    """
    ref = cell.ref  # one ref for all the dead letters of this cleanup
    while stranded:
        group = min(cadence.batch - cadence.used, len(stranded))
        _clean_group(cell, ref, stranded, group)
        await cadence.spend(group)


def clean_stranded_now(cell: ActorCell) -> None:
    """Fail back or dead-letter everything still stranded, without yielding: what an
    interrupted stop does before it ends (never a checkpoint)."""
    stranded = cell.stranded
    if stranded:
        _clean_group(cell, cell.ref, stranded, len(stranded))


def _clean_group(cell: ActorCell, ref: ActorRef, stranded: deque[Any], group: int) -> None:
    """Fail back or dead-letter the first ``group`` stranded messages (``ref``: the
    recipient the dead letters name)."""
    popleft = stranded.popleft
    if not cell.stranded_asks:
        tells = [popleft() for _ in range(group)]  # tells only: no check per item
    else:
        tells = []
        for _ in range(group):
            item = popleft()
            if isinstance(item, Notice):  # (or an observed tell's: observe/)
                cell.stranded_asks -= 1
                if item.take_back():  # a timer's (or a tell's) message: a dead letter
                    tells.append(item.message)
            elif isinstance(item, Ask):  # (or a pool's kind of ask)
                cell.stranded_asks -= 1
                if item.fail(ActorStopped(f"{cell.path} stopped before answering")):
                    cell.failed_back += 1
            else:
                tells.append(item)
    if tells:
        cell.stranded_letters += cell.system.dead_letters.record_many(ref, tells, "stranded")


protect_module(globals())

__all__ = ["CleanupCadence", "clean_stranded", "clean_stranded_now"]

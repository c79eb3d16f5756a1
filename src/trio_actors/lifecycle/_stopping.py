"""The stop sequence: what happens between "stop" and STOPPED.

Whoever owns an actor's stop -- a stop task started by ``stop()`` / ``Actor.stop()``,
or the system's exit -- runs :func:`finish_stop`:

1. a draining actor first handles what was queued;
2. a task still serving the actor (an async handler, already cancelled by an
   immediate stop) is waited for, so handlers never overlap ``on_stop``;
3. the stranded messages are cleaned up (``mailbox._stranded``), ``cleanup_batch``
   at a time with shielded yields;
4. ``on_stop`` runs, if the actor had started -- exactly once;
5. the actor becomes STOPPED and everyone waiting in ``stop()`` is released.

Steps 1--3 are shielded from cancellation: a stop, once begun, always completes.
``on_stop`` is not shielded (a shielded user hook could hang the system's exit
forever); if the system is being cancelled, an async ``on_stop`` sees ``Cancelled``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from ..mailbox._stranded import CleanupCadence, clean_stranded
from ._state import ActorState, LifecycleEvent, advance

if TYPE_CHECKING:
    from ..actors._cell import ActorCell


async def finish_stop(cell: ActorCell, cadence: CleanupCadence) -> None:
    """Take a stopping (or draining) actor to STOPPED. See the module docstring.

    A checkpoint when there is anything to wait for or clean; cancellation cannot
    stop the cleanup, and reaches only an async ``on_stop``.
    """
    with trio.CancelScope(shield=True):
        if cell.state is ActorState.DRAINING:
            await cell.wait_drained()
            if cell.state is ActorState.DRAINING:
                advance(cell, LifecycleEvent.DRAINED)
                cell.strand()
        await cell.wait_not_served()
        stranded = cell.stranded
        if stranded:
            await clean_stranded(cell, stranded, cadence)
        cell.stranded = None
    try:
        await _run_on_stop(cell)
    finally:
        cell.finished()


async def _run_on_stop(cell: ActorCell) -> None:
    kinds = cell.kinds
    if not (cell.started and kinds.has_on_stop):
        return
    try:
        if kinds.on_stop_async:
            await cell.instance.on_stop()
        else:
            cell.instance.on_stop()
    except Exception as error:
        cell.hook_failed("on_stop", error)


__all__ = ["finish_stop"]

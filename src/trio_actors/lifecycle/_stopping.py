"""The stop sequence: what happens between "stop" and STOPPED.

Whoever owns an actor's stop -- a stop task started by ``stop()`` / ``Actor.stop()``,
or the system's exit -- runs :func:`finish_stop`:

1. a draining actor first handles what was queued;
2. the stranded messages are cleaned up (``_stranded.py``), ``cleanup_batch``
   at a time with shielded yields: each stranded ask fails at once, before anything
   is waited for, so an asker that the actor's own handler waits for is never
   left waiting on the actor (T25);
3. a task still serving the actor (an async handler, already cancelled by an
   immediate stop, or a restart in progress) is waited for, so handlers never
   overlap ``on_stop``;
4. the actor's children stop **newest first, one at a time** (OTP's order, T29):
   each is stopped whole -- its handler cancelled, its stranded cleanup, its own
   children, its ``on_stop`` -- before the next older sibling begins, and a sibling
   not yet reached keeps serving meanwhile: children always stop before their
   parent;
5. ``on_stop`` runs, if the actor had started -- exactly once per instance;
6. the actor becomes STOPPED, its watchers are told, and everyone waiting in
   ``stop()`` is released.

Steps 1--4 are shielded from cancellation: a stop, once begun, always completes.
``on_stop`` is not shielded (a shielded user hook could hang the system's exit
forever); if the system is being cancelled, an async ``on_stop`` sees ``Cancelled``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from ._state import ActorState, LifecycleEvent, advance
from ._stranded import CleanupCadence, clean_stranded, clean_stranded_now

if TYPE_CHECKING:
    from ..actors._cell import ActorCell


def finish_idle_stop(cell: ActorCell) -> bool:
    """Take a stopping actor to STOPPED at once if steps 1--5 have nothing to do:
    nothing to drain, no task serving it, no children, nothing stranded, no
    ``on_stop`` to run. Returns whether it did. Never a checkpoint.

    The common case at the system's exit (idle actors without hooks), where the
    coroutines of :func:`finish_stop` would be most of the cost of a stop.
    """
    if _must_wait_or_clean(cell) or (cell.started and cell.kinds.has_on_stop):
        return False
    cell.finished()
    return True


def _must_wait_or_clean(cell: ActorCell) -> bool:
    """Whether steps 1--4 have anything to do (see the module docstring)."""
    return bool(
        cell.state is ActorState.DRAINING or cell.served_by_task or cell.children or cell.stranded
    )


async def finish_stop(cell: ActorCell, cadence: CleanupCadence) -> None:
    """Take a stopping (or draining) actor to STOPPED. See the module docstring.

    A checkpoint when there is anything to wait for or clean; cancellation cannot
    stop the cleanup, and reaches only an async ``on_stop``.

    Interrupted -- a ``KeyboardInterrupt`` that trio delivers at one of its awaits,
    or any other ``BaseException`` from a hook -- it still leaves the actor STOPPED
    and every stranded message failed back or dead-lettered before the exception
    goes on (:func:`_end_interrupted`); the children it had not reached are asked
    to stop, and their own stop tasks finish them.
    """
    cell.stopping_task = trio.lowlevel.current_task()
    try:
        if _must_wait_or_clean(cell):
            await _wait_and_clean(cell, cadence)
        await run_on_stop(cell)
    except BaseException:
        _end_interrupted(cell)
        raise
    finally:
        cell.finished()


def _end_interrupted(cell: ActorCell) -> None:
    """What an interrupted stop still does, at once (never a checkpoint): a drain
    ends, the stranded messages are cleaned without yielding, the children left
    begin their stops."""
    if cell.state is ActorState.DRAINING:
        advance(cell, LifecycleEvent.DRAINED)
        cell.strand()
    clean_stranded_now(cell)
    cell.stranded = None
    for child in list((cell.children or {}).values()):
        child.begin_stop(drain=False, cancel_handler=True)


async def _wait_and_clean(cell: ActorCell, cadence: CleanupCadence) -> None:
    """Steps 1--4 of the stop sequence, shielded. (An idle actor with nothing queued
    and no children skips them: a cancel scope per actor would double the cost of
    stopping 50,000 actors at system exit.)"""
    with trio.CancelScope(shield=True):
        if cell.state is ActorState.DRAINING:
            await cell.wait_drained()
            if cell.state is ActorState.DRAINING:
                advance(cell, LifecycleEvent.DRAINED)
                cell.strand()
        stranded = cell.stranded
        if stranded:
            await clean_stranded(cell, stranded, cadence)
        cell.stranded = None
        await cell.wait_not_served()
        await stop_children(cell)


async def stop_children(cell: ActorCell) -> None:
    """Stop every child of ``cell``, newest first, one at a time (T29).

    Each child is stopped whole before the next older one begins; the others keep
    serving until their turn (so a child's ``on_stop`` can still ask an older
    sibling). ``cell`` itself no longer accepts messages, so it spawns no child
    meanwhile. A checkpoint if there are children; cancellation cannot interrupt it.
    """
    children = cell.children
    if not children:
        return
    with trio.CancelScope(shield=True):
        while children:
            child = next(reversed(children.values()))  # the newest left
            child.begin_stop(drain=False, cancel_handler=True)
            await child.wait_stopped()  # it leaves ``children`` when it has stopped


async def run_on_stop(cell: ActorCell) -> None:
    """Run the current instance's ``on_stop`` if it started; log what it raises."""
    kinds = cell.kinds
    if not (cell.started and kinds.has_on_stop):
        return
    cell.started = False  # on_stop runs once per instance, even if it is cut short
    try:
        if kinds.on_stop_async:
            await cell.instance.on_stop()
        else:
            cell.instance.on_stop()
    except Exception as error:
        cell.stop_hook_failed(error)


__all__ = ["finish_idle_stop", "finish_stop", "run_on_stop", "stop_children"]

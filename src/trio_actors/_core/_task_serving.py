"""Serving by task: an actor whose ``receive`` (or ``on_start``) is ``async def``.

Such an actor is served by a short-lived task of its own, started when it gets work
(:meth:`Dispatcher.schedule <trio_actors._core._dispatcher.Dispatcher.schedule>`)
and ending when its mailbox runs dry: an idle actor has no task (S5: memory and
spawn rate). The task serves turns of at most ``batch`` messages (or one
``time_slice``) with a checkpoint between them, one handler at a time, each under
its own cancel scope (:func:`~trio_actors._core._handler_call.handle_async`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from .._interrupts import protect_module
from .._policy import ServingPolicy
from . import _failure
from ._handler_call import handle_async, stray_cancelled
from ._state import ActorState

if TYPE_CHECKING:
    from ._cell import ActorCell
    from ._dispatcher import Dispatcher

_STARTING = ActorState.STARTING
_RESTARTING = ActorState.RESTARTING
_DRAINING = ActorState.DRAINING


def may_go_on_after_failed_start(cell: ActorCell) -> bool:
    """After ``on_start`` raised and supervision decided: serve on as if it had
    finished (Resume)? Not if it is restarting or stopping now."""
    return cell.state is _STARTING or cell.state is _DRAINING


async def serve_in_task(dispatcher: Dispatcher, cell: ActorCell) -> None:
    """Serve an actor with async handlers until its mailbox runs dry.

    The task serves the actor from when it was started (``Serving.TASK``); when it
    ends it hands the actor to a restart task (if it is RESTARTING), back to the
    dispatcher (if only its ``on_start`` was async), to a new task (if work is left:
    an interrupted handler), or to nobody.

    Shielded, as the dispatcher is: a cancellation of the system block from outside
    does not reach the handlers; the exit cancels each actor's handler when it
    reaches that actor, and until then the actor keeps serving (an actor left idle
    with a queue by a dying task would never be served again, and whoever waits on
    it would wait forever).
    """
    cell.serving_task = trio.lowlevel.current_task()
    handed_back = False
    try:
        with trio.CancelScope(shield=True):
            if cell.state is _RESTARTING:
                return  # it failed (or a child escalated) before this task ran
            if not cell.started and not await _start_in_task(cell):
                return
            if not cell.kinds.receive_async:
                # Only on_start was async: plain receive goes back to the dispatcher.
                handed_back = cell.has_queued()
                return
            await serve_async_turns(dispatcher.policy, cell)
    finally:
        # From here on no other thread appends through the fast path; a tell of
        # one that landed after the loop's last look is found below.
        cell.close_tell_paths()
        cell.serving_task_done()
        if handed_back:
            dispatcher.schedule(cell)
        elif cell.state is _RESTARTING:
            cell.hand_to_restart()
        elif cell.state.serves and cell.has_queued() and cell.kinds.receive_async:
            dispatcher.start_serving_task(cell)  # work is left (interrupted): serve on
        else:
            cell.set_idle()


async def _start_in_task(cell: ActorCell) -> bool:
    """Run ``on_start`` (async or not) in the serving task; return whether the actor
    may now be served. A stop cancels it."""
    if cell.state is not _STARTING and cell.state is not _DRAINING:
        return False
    on_start = cell.instance.on_start
    with trio.CancelScope() as scope:
        cell.handler_scope = scope
        try:
            if cell.kinds.on_start_async:
                await on_start()
            else:
                on_start()
        except Exception as error:
            _failure.start_failed(cell, error)
            if not may_go_on_after_failed_start(cell):
                return False
        except trio.Cancelled as cancelled:
            if scope.cancel_called:
                raise  # its own: a stop's (the scope catches it)
            # Served shielded, nothing else cancels it: this one is stray, a failure.
            _failure.start_failed(cell, stray_cancelled(cell, cancelled))
            if not may_go_on_after_failed_start(cell):
                return False
        finally:
            cell.handler_scope = None
    if scope.cancelled_caught or cell.state is _RESTARTING:
        return False  # stopped while starting, or a child escalated meanwhile
    cell.mark_started()
    return True


async def serve_async_turns(policy: ServingPolicy, cell: ActorCell) -> None:
    """Serve turns until the mailbox is empty or the state no longer serves. A
    checkpoint between turns (and in every handler that is one)."""
    clock = trio.lowlevel.current_clock()
    observer = cell.system._observer
    while cell.has_queued() and cell.state.serves:
        turn_start = clock.current_time()
        n = 0
        while n < policy.batch and cell.has_queued() and cell.state.serves:
            n += 1
            await handle_async(cell, cell.pop_next())
            elapsed = clock.current_time() - turn_start
            if elapsed > cell.longest_turn_time:
                cell.note_turn(elapsed)
            if policy.time_slice is not None and elapsed >= policy.time_slice:
                break
        if n > cell.longest_turn:
            cell.longest_turn = n
        if observer is not None:
            observer.async_turn(cell, elapsed)
        if cell.has_queued():
            await trio.lowlevel.checkpoint()


protect_module(globals())

__all__ = ["may_go_on_after_failed_start", "serve_async_turns", "serve_in_task"]

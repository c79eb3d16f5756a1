"""An ask to an idle actor, answered in the asker's own task.

An ask to an actor that is started, accepting, idle and has a plain ``receive``
is handled right now in the asker's task -- exactly what the dispatcher would do
next, minus the two task switches (asker to dispatcher and back) that are most of
an ask's cost (``docs/performance.rst``). :meth:`ActorCell.ask_message` decides.
While the handler runs, the system's :class:`~trio_actors._core._serving_now.ServingNow`
names the actor, as it does for the dispatcher's turns (for the turn sampler).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs
import trio

from .._interrupts import protect_module
from ._handler_call import reply_plain

if TYPE_CHECKING:
    from ._cell import ActorCell


def _cancel_check_inlinable() -> bool:
    """Whether trio's tasks still have the private fields :func:`ask_idle`
    reads to tell whether ``checkpoint_if_cancelled`` would raise (trio's ``Task``,
    ``CancelStatus`` and ``Runner`` are attrs classes, so their fields can be listed)."""
    try:
        from trio._core._run import CancelStatus, Runner

        return (
            {"_cancel_status", "_runner"} <= attrs.fields_dict(trio.lowlevel.Task).keys()
            and "effectively_cancelled" in attrs.fields_dict(CancelStatus)
            and {"main_task", "ki_pending"} <= attrs.fields_dict(Runner).keys()
        )
    except (ImportError, TypeError, attrs.exceptions.NotAnAttrsClassError):  # pragma: no cover
        return False


CANCEL_CHECK_INLINED = _cancel_check_inlinable()


async def ask_idle(cell: ActorCell, message: Any, task: trio.lowlevel.Task) -> Any:
    """Answer an ask to an idle actor with a plain ``receive`` in the asker's task.

    The actor is started, accepting, has nothing queued and nobody serves it, so
    handling the message right now is exactly what the dispatcher would do next
    -- minus the two task switches (asker to dispatcher and back) that are most
    of an ask's cost. The cancellation contract is the queued path's:

    * cancelled before the call (a cancel point first): withdrawn, never handled;
    * the handler cannot be interrupted (it is plain), and the checkpoint after it
      delivers a cancellation that arrived meanwhile: the reply is discarded.

    A checkpoint (after the handler). A failure goes to supervision and its
    exception is raised here, as on the queued path. ``task`` is the asker's
    (the calling) task.
    """
    # trio.lowlevel.checkpoint_if_cancelled(), inlined on the task at hand: its
    # coroutine and second current_task() cost 2,290 of S2's 43,330 instructions
    # per ask (callgrind, S2 at 10,000 and 20,000 asks), 5% of every ask to an
    # idle actor. Where trio's private fields have moved, it is called instead.
    if (
        not CANCEL_CHECK_INLINED
        or task._cancel_status.effectively_cancelled
        or (task is (runner := task._runner).main_task and runner.ki_pending)
    ):
        try:
            await trio.lowlevel.checkpoint_if_cancelled()
        except trio.Cancelled:
            cell.note_withdrawn()
            raise
    # What the trio thread serves now, for the turn sampler: this actor until the
    # handler returns, then no plain handler (an async handler that asked is in the
    # record's handlers: _core/_serving_now.py).
    serving_now = cell.dispatcher.serving_now
    serving_now.cell = cell
    try:
        try:
            result = reply_plain(cell, cell.receive, message)
        finally:
            serving_now.cell = None
            cell.handled += 1  # (a KeyboardInterrupt in the handler too: it goes on)
    except Exception:
        await trio.lowlevel.checkpoint()
        raise
    await trio.lowlevel.checkpoint()
    return result


protect_module(globals())

__all__ = ["CANCEL_CHECK_INLINED", "ask_idle"]

"""Calls from other threads: one ordered inbox per system for their tells, and the
check that refuses everything else.

A ``tell`` from a thread other than the system's trio thread cannot touch the
mailbox (only the trio thread may schedule an actor), so it is queued here and the
trio thread is asked, once per batch, to take the inbox's messages in order
(``TrioToken.run_sync_soon``). One FIFO for all foreign threads keeps each thread's
tells in the order told.

The other way a foreign thread's tell gets in is the tell fast path (append to the
deque of an actor that is already scheduled): it must never overtake a message of
the same thread still in the inbox. So a message queued here first marks its actor
(``foreign_pending``, and the fast path and inline activation switched off), and the
trio thread enables those paths again only once no message for that actor is left
in the inbox (``ActorCell.refresh_tell_paths``).

Atomicity: :meth:`ForeignInbox.put` and the fast path each run without a call between
their test and their change, so under the GIL no other thread can run in between.
(On a free-threaded CPython build this does not hold: there, reach the system with
``trio.from_thread.run_sync(ref.tell, message)``.)
"""

from __future__ import annotations

from collections import deque
from threading import get_ident
from typing import TYPE_CHECKING, Any

import trio

from .._errors import ActorError
from .._interrupts import protect_module

if TYPE_CHECKING:
    from ._cell import ActorCell
    from ._host import Host


def current_task_of(system: Host, operation: str) -> trio.lowlevel.Task:
    """The calling task, checked to belong to ``system``'s trio run.

    Raises:
        RuntimeError: called outside a trio run.
        ActorError: called from another trio run (for example another thread).
    """
    try:
        task = trio.lowlevel.current_task()
    except RuntimeError:
        raise RuntimeError(
            f"ActorRef.{operation}() must be awaited inside the trio run that opened "
            "the actor system"
        ) from None
    # Another trio run can only be in another thread (runs do not nest), and a run
    # in this thread after the system's own has ended finds every actor stopped:
    # the thread is the check, and it is much cheaper than the run's token.
    if get_ident() != system.thread_id:
        raise ActorError(
            f"ActorRef.{operation}() called from another trio run (another thread?); "
            "refs belong to the run that opened their system -- use "
            "trio.from_thread.run() to reach it"
        )
    return task


class ForeignInbox:
    """The tells from other threads to one system's actors, in the order told."""

    __slots__ = ("_closed", "_drain_requested", "_items", "_token")

    def __init__(self, token: trio.lowlevel.TrioToken) -> None:
        self._token = token
        self._items: deque[tuple[ActorCell, Any]] = deque()
        self._drain_requested = False
        self._closed = False

    def put(self, cell: ActorCell, message: Any) -> None:
        """Queue ``message`` for ``cell`` (called from a foreign thread).

        Raises:
            ActorError: the system has exited, or its trio run has finished.
        """
        if self._closed:
            raise ActorError(
                f"tell to {cell.path} from another thread after its actor system exited"
            )
        # No call before the append: these lines run with no other thread between.
        cell.foreign_pending += 1
        cell.close_tell_paths()
        self._items.append((cell, message))
        if not self._drain_requested:
            self._drain_requested = True
            try:
                self._token.run_sync_soon(self._drain)
            except trio.RunFinishedError:
                self._closed = True  # nothing queued here will be delivered
                self._drain_requested = False
                self._items.clear()
                raise ActorError(
                    f"tell to {cell.path} from another thread after its trio run finished"
                ) from None

    def close(self) -> None:
        """The system has exited (trio thread): what is queued becomes dead letters
        (every actor has stopped), and later tells from threads raise."""
        self._closed = True
        self._drain()

    def _drain(self) -> None:
        """In the trio thread: hand every queued message to its actor, in order."""
        self._drain_requested = False  # a put from now on asks for another drain
        items = self._items
        while items:
            cell, message = items.popleft()
            cell.foreign_pending -= 1
            cell.tell_forwarded(message)
            if not cell.foreign_pending:
                cell.refresh_tell_paths()


protect_module(globals())

__all__ = ["ForeignInbox", "current_task_of"]

"""The ask envelope: a queued request whose asker is parked until it is answered.

A ``tell`` is queued as the bare message; an ``ask`` is queued as an :class:`Ask`,
which carries the asker's trio task so that the reply can be handed straight back
with ``trio.lowlevel.reschedule`` -- the cheapest wake-up trio has (no channel, no
event, no extra task).

The asker sleeps in ``wait_task_rescheduled``; the abort function follows trio's
contract exactly: it undoes only what was done before sleeping and returns
``Abort.SUCCEEDED`` only when nothing will reschedule the asker afterwards.

===========  ==================================================================
state        what a cancellation of the asker does
===========  ==================================================================
QUEUED       *withdrawn* (state WITHDRAWN): the ask stays in the deque but is
             skipped when popped (a bounded mailbox removes it at once, to free
             its room); the actor never handles it.
RUNNING      *abandoned* (state ABANDONED): an async handler's cancel scope is
             cancelled; a plain handler runs on and its reply is discarded.
DONE         nothing: the reply is already on its way (``Abort.FAILED``).
===========  ==================================================================
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Any, ClassVar, Final

import outcome
import trio

from .._interrupts import protect_module
from ._native import mypyc_attr

if TYPE_CHECKING:
    from ._cell import ActorCell


class _NoMessage:
    """The empty head slot of a mailbox (``None`` is a valid message)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "NO_MESSAGE"


NO_MESSAGE: Final[Any] = _NoMessage()


class AskState(enum.Enum):
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"  # answered or failed back
    WITHDRAWN = "withdrawn"
    ABANDONED = "abandoned"


_QUEUED: Final = AskState.QUEUED
_RUNNING: Final = AskState.RUNNING
_DONE: Final = AskState.DONE
_WITHDRAWN: Final = AskState.WITHDRAWN
_ABANDONED: Final = AskState.ABANDONED


@mypyc_attr(allow_interpreted_subclasses=True)
class Ask:
    """One ask in flight. Identity object; never shown to users."""

    __slots__ = ("cell", "message", "scope", "state", "task")

    # An observed envelope (``trio_actors/observe``) says so: a class attribute, no
    # slot, read only where a queued envelope is taken by a plain handler. (A
    # ClassVar: a compiled class's other attributes are its instances' fields,
    # which a subclass's class attribute would not override.)
    traced: ClassVar[bool] = False

    def __init__(self, cell: ActorCell, message: Any, task: trio.lowlevel.Task) -> None:
        self.cell = cell
        self.message = message
        self.task = task
        self.state = _QUEUED
        # The cancel scope of the async handler answering it, so that the asker's
        # cancellation can cancel exactly that handler's work.
        self.scope: trio.CancelScope | None = None

    async def wait(self) -> Any:
        """Park the asker until :meth:`reply` or :meth:`fail`. A checkpoint.

        Cancellation: withdraws a queued ask, abandons a running one; either way the
        asker gets ``Cancelled`` at once.
        """
        return await trio.lowlevel.wait_task_rescheduled(self._abort)

    def _abort(self, raise_cancel: Any) -> trio.lowlevel.Abort:
        if self.asker_cancelled():
            return trio.lowlevel.Abort.SUCCEEDED
        return trio.lowlevel.Abort.FAILED

    def asker_cancelled(self) -> bool:
        """The asker was cancelled: withdraw the ask if still queued, abandon it if
        running (cancelling an async handler). Return False if it is done already
        (the answer is on its way). Never a checkpoint."""
        state = self.state
        if state is _QUEUED:
            self.state = _WITHDRAWN
            self.cell.withdraw(self)
            return True
        if state is _RUNNING:
            self.state = _ABANDONED
            if self.scope is not None:
                self.scope.cancel()
            return True
        return False

    def begin(self) -> None:
        """A traced envelope is taken by a plain handler, which runs next in this
        task (``answer_plain``, once the state is RUNNING). Nothing to do for an
        untraced one (never called: ``traced`` is false)."""

    def start(self) -> bool:
        """The actor reached this ask; return False if it was withdrawn."""
        if self.state is _QUEUED:
            self.state = _RUNNING
            return True
        return False

    def reply(self, value: Any) -> None:
        """Hand the handler's return value to the asker (dropped if abandoned)."""
        if self.state is _RUNNING:
            self.state = _DONE
            trio.lowlevel.reschedule(self.task, outcome.Value(value))

    def fail(self, error: BaseException) -> bool:
        """Raise ``error`` in the asker, if it still waits; return whether it did.

        Works for a running ask (the handler raised) and for a queued one (failed
        back: stranded or refused); a withdrawn or abandoned ask is left alone.
        """
        if self.state is _RUNNING or self.state is _QUEUED:
            self.state = _DONE
            trio.lowlevel.reschedule(self.task, outcome.Error(error))
            return True
        return False

    def handler_ended(self, error: BaseException) -> None:
        """The async handler answering it ended without an answer: the runtime
        cancelled it (the asker gets ``error``), or its asker did (abandoned:
        nobody to tell)."""
        if self.state is _RUNNING:
            self.fail(error)

    @property
    def withdrawn(self) -> bool:
        return self.state is _WITHDRAWN

    @property
    def abandoned(self) -> bool:
        return self.state is _ABANDONED

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.message!r} {self.state.value}>"


@mypyc_attr(allow_interpreted_subclasses=True)
class Notice(Ask):
    """A message from the runtime -- a timer's tick, or a death watch's
    ``Terminated`` -- queued like an ask so that the serving loop finds it by
    position and nothing is checked per tell.

    Nobody waits for it: the handler's result is dropped. Its sender may
    *withdraw* it while it is queued (the timer was cancelled or its actor is
    restarting; the watcher unwatched): it is then skipped, never handled --
    a change of state only, so it is safe in the middle of the actor's own turn.
    While a timer's tick is queued, a periodic timer sends no further tick (no
    pile-up).
    """

    __slots__ = ("sender",)

    def __init__(self, cell: ActorCell, message: Any, sender: Any = None) -> None:
        self.cell = cell
        self.message = message
        self.state = _QUEUED
        self.scope = None
        # Told when the notice is done with (handled, withdrawn or dropped): the
        # timer whose tick it is, or None.
        self.sender = sender

    def _finished(self) -> None:
        if self.sender is not None:
            self.sender.notice_finished(self)

    def withdraw(self) -> None:
        """Its sender withdrew it: if still queued, it will be skipped."""
        if self.state is _QUEUED:
            self.state = _WITHDRAWN
            self.cell.withdraw(self)
            self._finished()

    def reply(self, value: Any) -> None:
        if self.state is _RUNNING:
            self.state = _DONE
            self._finished()

    def fail(self, error: BaseException) -> bool:
        """The handler raised (supervision sees it), or the tick was stranded: nobody
        to tell. Returns False: nothing was failed back."""
        if self.state is _RUNNING or self.state is _QUEUED:
            self.state = _DONE
            self._finished()
        return False

    def take_back(self) -> bool:
        """The notice will not be handled (stranded, or dropped by a full mailbox):
        return True if it was still queued, so its message becomes a dead letter."""
        if self.state is _QUEUED:
            self.state = _DONE
            self._finished()
            return True
        return False

    @property
    def queued(self) -> bool:
        return self.state is _QUEUED


protect_module(globals())

__all__ = ["NO_MESSAGE", "Ask", "AskState", "Notice"]

"""Calling an actor's handler, and where its outcome goes.

The one definition of how the runtime calls ``receive`` with a message:

* :func:`call_plain` -- a tell to a plain handler: a failure goes to supervision;
  a coroutine returned by a handler the runtime took for a plain one is a misuse,
  and a failure too. Anything that is not an ``Exception`` (a
  ``KeyboardInterrupt``) passes through: the callers keep their counts true and
  let it go on.
* :func:`reply_plain` -- the same for an ask: it returns the reply, or raises the
  failure after supervision has seen it (the asker gets the same exception).
* :func:`answer_plain` -- an ask envelope answered by the dispatcher: the reply or
  the failure goes to the envelope; a withdrawn one is skipped.
* :func:`handle_async` -- an async handler, under a cancel scope of its own, so that
  its asker's cancellation or a stop can cancel it; in progress, it is in the
  system's record of what the trio thread serves (``_core/_serving_now.py``).

The dispatcher keeps two inlined copies of :func:`call_plain`, on the paths of
every message of S1 and every activation of S3 and S4; each says so, and what the
call would cost. Never a checkpoint, except :func:`handle_async` (the handler's own).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import trio

from .._errors import ActorStopped
from .._interrupts import protect_module
from . import _failure
from ._envelope import Ask, AskState
from ._native import CoroutineType
from ._state import ActorState

if TYPE_CHECKING:
    from ._cell import ActorCell

_QUEUED: Final = AskState.QUEUED
_RUNNING: Final = AskState.RUNNING
_DONE: Final = AskState.DONE


def coroutine_returned(cell: ActorCell, result: Any) -> TypeError:
    """The misuse a plain call that returned a coroutine is (the coroutine is
    closed, never run)."""
    result.close()
    return TypeError(
        f"{type(cell.instance).__qualname__}.receive returned a coroutine; declare it "
        "'async def' (or make sure inspect.iscoroutinefunction sees it as one)"
    )


def stray_cancelled(cell: ActorCell, cancelled: BaseException) -> RuntimeError:
    """The failure a handler's stray ``Cancelled`` becomes: one that no scope of the
    runtime's cancelled (kept from an earlier cancellation and raised again, say).
    Let through, it would end the system block silently."""
    error = RuntimeError(
        f"a handler of {cell.path} raised trio.Cancelled that was not its own "
        "cancellation (a Cancelled kept and raised again?); it is a failure of the actor"
    )
    error.__cause__ = cancelled
    return error


def call_plain(cell: ActorCell, receive: Any, message: Any) -> None:
    """Call a plain ``receive`` with a tell. See the module docstring."""
    try:
        result = receive(message)
    except Exception as error:
        _failure.handler_failed(cell, error, message)
    else:
        if result is not None and type(result) is CoroutineType:
            _failure.handler_misused(cell, coroutine_returned(cell, result), message)


def reply_plain(cell: ActorCell, receive: Any, message: Any) -> Any:
    """Call a plain ``receive`` with an ask's message; return its reply.

    Raises:
        Exception: what the handler raised (or the misuse of a returned coroutine),
            once supervision has handled it as a failure.
    """
    try:
        result = receive(message)
    except Exception as error:
        _failure.handler_failed(cell, error, message)
        raise
    if result is not None and type(result) is CoroutineType:
        misuse = coroutine_returned(cell, result)
        _failure.handler_misused(cell, misuse, message)
        raise misuse
    return result


def answer_plain(cell: ActorCell, receive: Any, ask: Ask) -> None:
    """Answer a queued ask with a plain ``receive`` (the dispatcher's turn).

    Counts nothing itself, except an ask cut short by a ``KeyboardInterrupt`` (whose
    asker gets ``ActorStopped``, and which goes on) and a withdrawn ask (skipped).
    """
    if ask.state is not _QUEUED:
        cell.handled -= 1  # withdrawn: counted when it was cancelled
        cell.skipped_withdrawn()
        return
    ask.state = _RUNNING  # Ask.start(), inlined: every queued ask passes here
    if ask.traced:  # (an observed envelope: its span begins, _core/_observer.py)
        ask.begin()
    try:
        result = reply_plain(cell, receive, ask.message)
    except Exception as error:
        ask.fail(error)
    except BaseException as error:
        # KeyboardInterrupt and friends end the system; the asker must not hang.
        # (Counted here: the callers count a handled ask when this returns.)
        cell.handled += 1
        ask.fail(ActorStopped(f"{cell.path} stopped while answering: {error!r}"))
        raise
    else:
        ask.reply(result)


async def handle_async(cell: ActorCell, item: Any) -> None:
    """Run one async handler under its own cancel scope. A checkpoint if the
    handler is one.

    Whatever ends the handler -- a return, an exception, its asker's or a stop's
    cancellation, or the whole system being cancelled -- the asker is answered
    exactly once (or was released already, if it was cancelled itself).
    """
    if isinstance(item, Ask):  # or a Notice
        ask: Ask | None = item
        cell.asks_queued -= 1
        if not item.start():
            cell.skipped_withdrawn()
            return  # withdrawn
        message = item.message
    else:
        ask = None
        message = item
    # The handlers in progress, for the turn sampler (_core/_serving_now.py).
    in_progress = cell.dispatcher.serving_now.handlers
    try:
        with trio.CancelScope() as scope:
            cell.handler_scope = scope
            if ask is not None:
                ask.scope = scope
            try:
                handler = in_progress[cell] = cell.receive(message)
                try:
                    result = await handler
                finally:
                    # (del, not pop(cell, None) in the finally below, where the
                    # call may have raised: async-det 91,023 -> 90,797 instructions
                    # per message under callgrind)
                    del in_progress[cell]
            except Exception as error:
                if ask is not None:
                    ask.fail(error)
                _failure.handler_failed(cell, error, message)
            except trio.Cancelled as cancelled:
                if scope.cancel_called:
                    raise  # its own: its asker's or a stop's (the scope catches it)
                # Served shielded, nothing else cancels it: this one is stray.
                failure = stray_cancelled(cell, cancelled)
                if ask is not None:
                    ask.fail(failure)
                _failure.handler_misused(cell, failure, message)
            else:
                if ask is not None:
                    ask.reply(result)
            finally:
                cell.handler_scope = None
    finally:
        cell.handled += 1
        if ask is not None and ask.state is not _DONE:
            # Cut short: by stop(), by a group restart (T28), by the cancellation
            # of the whole system -- or by its asker (abandoned).
            ended = "restarted" if cell.state is ActorState.RESTARTING else "stopped"
            ask.handler_ended(ActorStopped(f"{cell.path} {ended} while answering"))


protect_module(globals())

__all__ = [
    "answer_plain",
    "call_plain",
    "coroutine_returned",
    "handle_async",
    "reply_plain",
    "stray_cancelled",
]

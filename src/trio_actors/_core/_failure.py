"""What supervision does when an actor fails: count and log the failure, ask the
actor's strategy (:mod:`trio_actors._supervision` holds the strategies, values
only) and carry out what it decides -- resume, stop, escalate, or restart within
the intensity of the actor's window or its parent's group window.

Never a checkpoint: called from the serving loops (``receive`` and ``on_start``
raised) and for a parent whose child escalated.
"""

from __future__ import annotations

import logging
from collections import deque
from typing import TYPE_CHECKING, Any

import trio

from .._errors import ActorError
from .._interrupts import protect_module
from .._supervision import (
    DEFAULT_SUPERVISION,
    ONE_FOR_ONE,
    Decider,
    Escalate,
    GroupStrategy,
    OneForAll,
    OneForOne,
    Restart,
    RestForOne,
    Resume,
    Stop,
    SupervisionStrategy,
)
from ._state import ActorState, LifecycleEvent, Serving, advance

if TYPE_CHECKING:
    from ._cell import ActorCell

logger = logging.getLogger("trio_actors")

_ESCALATE = Escalate()
_STOP = Stop()


def strategy_for(cell: ActorCell, error: BaseException) -> SupervisionStrategy:
    """The strategy that decides ``cell``'s failure with ``error``."""
    supervision = cell.supervision
    if type(supervision) is Decider:
        return supervision.decide(error)
    return supervision  # type: ignore[return-value]


class RestartWindow:
    """The failure times of one actor inside its ``Restart.within`` window (or of a
    parent's group restarts inside its group strategy's)."""

    __slots__ = ("_times",)

    def __init__(self) -> None:
        self._times: deque[float] = deque()

    def record(self, now: float, strategy: Restart | OneForAll | RestForOne) -> int:
        """Record a failure at ``now``; return the failures now in the window (at
        most one more than ``max_restarts``: more need not be kept). A parent's
        group window records its group restarts the same way."""
        times = self._times
        times.append(now)
        start = now - strategy.within
        while times and (times[0] <= start or len(times) > strategy.max_restarts + 1):
            times.popleft()
        return len(times)


def record_failure(cell: ActorCell, error: BaseException, where: str) -> None:
    """Count ``cell``'s failure (its own and the system's) and log it once, with the
    traceback: ``"<path> failed <where>"``; an observer hears of it."""
    cell.failures += 1
    system = cell.system
    system.failures += 1
    logger.error(
        "%s failed %s", cell.path, where, exc_info=(type(error), error, error.__traceback__)
    )
    if system._observer is not None:
        system._observer.failed(cell, error, where)


def handle_failure(
    cell: ActorCell, error: BaseException, where: str, *, escalated: bool = False
) -> None:
    """``cell`` failed ``where`` (e.g. "handling 'x'"): log, count, apply its strategy.

    Never a checkpoint. Called by the serving loops (``receive`` and ``on_start``
    raised) and, with ``escalated``, for a parent whose child escalated -- a parent
    that may be in the middle of an async handler of its own, which a stop cancels.
    """
    record_failure(cell, error, where)
    strategy = strategy_for(cell, error)
    if cell.restart_type == "temporary" and isinstance(strategy, Restart):
        strategy = _STOP  # a temporary actor is never restarted (OTP)
    state = cell.state
    if state is ActorState.STOPPING or state is ActorState.STOPPED:
        return  # on its way out already: nothing to decide
    if state is ActorState.RESTARTING:
        return  # a restart is under way already; this failure is logged and counted
    if isinstance(strategy, Resume):
        return
    if isinstance(strategy, Stop):
        _stop_with(cell, error, cancel_handler=escalated)
    elif isinstance(strategy, Escalate):
        escalate(cell, error, cancel_handler=escalated)
    elif state is ActorState.DRAINING:
        return  # restarting an actor that is draining to stop would only delay it
    else:
        _restart(cell, strategy, error, cancel_handler=escalated)


def _restart(
    cell: ActorCell, strategy: Restart, error: BaseException, *, cancel_handler: bool
) -> None:
    """Restart ``cell`` (with its group, under its parent's group strategy), unless
    the intensity is exceeded (then the failure escalates)."""
    parent = cell.parent
    group = ONE_FOR_ONE if parent is None else parent.kinds.children_strategy
    delay = restart_delay(cell, strategy, error, group, cancel_handler=cancel_handler)
    if delay is None:
        return
    cell.restart_cause = error  # the fresh instance's restarted_after
    if isinstance(group, OneForOne):
        begin_restart(cell, delay)
    else:
        assert parent is not None
        parent.restart_group(cell, group, delay, error)


def stopped_itself(cell: ActorCell) -> None:
    """A ``permanent`` actor called ``self.stop()``: it is restarted, as OTP restarts
    a permanent child that exits normally -- counted in the same intensity as its
    failures (its own ``Restart``'s, or the default's), with its fresh instance's
    ``restarted_after`` saying so. Not a failure: nothing is logged or counted as
    one."""
    supervision = cell.supervision
    strategy = supervision if isinstance(supervision, Restart) else DEFAULT_SUPERVISION
    assert isinstance(strategy, Restart)
    reason = ActorError(f"{cell.path} stopped itself; a permanent actor is restarted")
    _restart(cell, strategy, reason, cancel_handler=False)


def begin_restart(cell: ActorCell, delay: float) -> None:
    """Move ``cell`` to RESTARTING; its restart begins after ``delay`` seconds."""
    advance(cell, LifecycleEvent.FAILED)
    cell.end_timers()  # the fresh instance starts with none
    cell.restart_delay = delay
    if cell.serving is Serving.IDLE:
        cell.hand_to_restart()  # nobody serves it: restart it now
    # Otherwise whoever serves it (the dispatcher, or its serving task) hands it to
    # a restart task as soon as it sees RESTARTING (advance has ended an inline
    # turn): an async handler that is running finishes first, as between two
    # messages.


def restart_delay(
    cell: ActorCell,
    strategy: Restart,
    error: BaseException,
    group: GroupStrategy = ONE_FOR_ONE,
    *,
    cancel_handler: bool = False,
) -> float | None:
    """Count a failure in the restart window (the actor's own, or under a group
    strategy its parent's group window); return the delay before restarting, or
    ``None`` when the intensity is exceeded (the failure was escalated)."""
    intensity: Restart | OneForAll | RestForOne
    if isinstance(group, OneForOne):
        if cell.restart_window is None:
            cell.restart_window = RestartWindow()
        window, intensity, whose = cell.restart_window, strategy, ""
    else:
        parent = cell.parent
        assert parent is not None
        if parent.group_window is None:
            parent.group_window = RestartWindow()
        window, intensity = parent.group_window, group
        whose = f" (the group of {parent.path}'s children under {group!r})"
    recent = window.record(trio.current_time(), intensity)
    if recent > intensity.max_restarts:
        logger.error(
            "%s failed %d times within %gs (more than max_restarts=%d)%s: escalating",
            cell.path,
            recent,
            intensity.within,
            intensity.max_restarts,
            whose,
        )
        escalate(cell, error, cancel_handler=cancel_handler)
        return None
    if strategy.backoff is None:
        return 0.0
    return strategy.backoff.delay(recent, cell.system._random)


def escalate(cell: ActorCell, error: BaseException, *, cancel_handler: bool = False) -> None:
    """Stop ``cell`` with ``error`` and fail its parent with it (the system at the root)."""
    _stop_with(cell, error, cancel_handler=cancel_handler)
    parent = cell.parent
    if parent is None:
        cell.system._fail(error)
    else:
        handle_failure(parent, error, f"(escalated by {cell.path})", escalated=True)


def _stop_with(cell: ActorCell, error: BaseException, *, cancel_handler: bool) -> None:
    if cell.stop_error is None:
        cell.stop_error = error
    cell.begin_stop(drain=False, cancel_handler=cancel_handler)


# --- what a handler's or on_start's failure does to its actor ------------------------


def handler_failed(cell: ActorCell, error: BaseException, message: Any) -> None:
    """``receive`` raised ``error``: a reply if the actor expects it, otherwise a
    failure, handled by the supervision strategy. (Whoever called reports the
    error to an asker either way.) Never a checkpoint."""
    if isinstance(error, cell.kinds.expected_errors):
        cell.expected_errors += 1
        cell.system.expected_errors += 1
        return
    handler_misused(cell, error, message)


def handler_misused(cell: ActorCell, error: BaseException, message: Any) -> None:
    """``receive`` failed, whatever the expected errors: raised an unexpected
    error, or broke the rules (returned a coroutine). Supervision decides."""
    # The message's type only (docs/supervision.rst): its repr may raise, or be huge.
    handle_failure(cell, error, f"handling a {type(message).__qualname__}")


def start_failed(cell: ActorCell, error: BaseException) -> None:
    """``on_start`` raised: a failure, handled by the supervision strategy."""
    if cell.group_restart is not None:
        cell.group_restart.leave(cell)  # its turn is over, whatever is decided
    handle_failure(cell, error, "in on_start")


protect_module(globals())

__all__ = [
    "RestartWindow",
    "begin_restart",
    "escalate",
    "handle_failure",
    "handler_failed",
    "handler_misused",
    "record_failure",
    "restart_delay",
    "start_failed",
    "stopped_itself",
    "strategy_for",
]

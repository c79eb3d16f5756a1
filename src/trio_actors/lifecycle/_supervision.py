"""Supervision strategies: what happens when an actor fails.

A *failure* is an exception escaping ``receive`` or ``on_start`` (or the factory,
when a restart builds the new instance). Cancellation is never a failure. The
strategy given at spawn (``supervision=``) decides, in the manner of Erlang/OTP
supervisors and Akka's ``SupervisorStrategy``:

=============  =====================================================================
strategy       on failure
=============  =====================================================================
``Restart``    (default) a fresh instance from the same factory and arguments;
               ``on_stop`` runs on the old instance, ``on_start`` on the new one;
               the mailbox is kept; the failing message is not retried. More than
               ``max_restarts`` failures within ``within`` seconds escalate.
``Stop``       the actor stops (stranded cleanup as for ``stop()``).
``Resume``     the failing message is dropped; the same instance goes on.
``Escalate``   the failure goes to the parent as if the parent had failed; at the
               root it fails the system block.
=============  =====================================================================

Every failure is logged (logger ``trio_actors``, with the actor's path and the
traceback) and counted, whatever the strategy. The asker of a failing message always
gets the exception itself.

**Group strategies** (T28) are the parent's: its class's ``children_strategy`` says
what a child's restart does to the child's siblings, as an Erlang/OTP supervisor's
``strategy`` does:

================  ==================================================================
``OneForOne``     (default) a child that is restarted is restarted alone; each
                  child's ``Restart`` counts its own intensity.
``OneForAll``     a child that is restarted takes every sibling with it.
``RestForOne``    it takes the siblings spawned after it (those that may depend on
                  it), not the older ones.
================  ==================================================================

Under ``OneForAll`` and ``RestForOne`` the child's own strategy still decides
*whether* a failure restarts (a decider's ``Resume``, ``Stop`` or ``Escalate`` is the
child's alone), but the intensity is the group's, as in OTP: every restart of the
group counts in the parent's one window (the group strategy's ``max_restarts``
within ``within``), and one more escalates -- the failing child stops and its
parent fails with the error (T18). The child's ``Backoff``, if any, delays the whole
group. How the group restarts is ``_restarting.py``'s.
"""

from __future__ import annotations

import logging
import math
import random
from collections import deque
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, Literal

import attrs
import trio

from .._errors import ActorError
from .._policy import is_finite
from ._state import ActorState, LifecycleEvent, Serving, advance

if TYPE_CHECKING:
    from ..actors._cell import ActorCell

logger = logging.getLogger("trio_actors")


def _non_negative_number(instance: Any, attribute: attrs.Attribute[Any], value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(
            f"{type(instance).__name__}.{attribute.name} must be a number, got {value!r}"
        )
    if not (value >= 0 and is_finite(value)):
        raise ValueError(
            f"{type(instance).__name__}.{attribute.name} must be finite and >= 0, got {value!r}"
        )


def _positive_number(instance: Any, attribute: attrs.Attribute[Any], value: object) -> None:
    _non_negative_number(instance, attribute, value)
    if value == 0:
        raise ValueError(f"{type(instance).__name__}.{attribute.name} must be > 0, got 0")


def _positive_window(instance: Any, attribute: attrs.Attribute[Any], value: object) -> None:
    if value == math.inf:
        return  # an unlimited window: every failure counts, forever
    _positive_number(instance, attribute, value)


def _non_negative_int(instance: Any, attribute: attrs.Attribute[Any], value: object) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{type(instance).__name__}.{attribute.name} must be an int, got {value!r}")
    if value < 0:
        raise ValueError(f"{type(instance).__name__}.{attribute.name} must be >= 0, got {value}")


@attrs.frozen
class Backoff:
    """A growing delay before each restart, with messages queued meanwhile.

    The *n*-th failure within the restart window (``Restart.within``) waits
    ``min_delay * factor ** (n - 1)``, capped at ``max_delay``, then multiplied by a
    random factor in ``[1 - jitter, 1 + jitter]`` so that many actors failing
    together do not restart in lockstep. As failures age out of the window the delay
    shrinks back to ``min_delay``. Messages that arrive during the delay are queued,
    not lost; a stop during the delay stops the actor at once.

    Args:
        min_delay: seconds before the first restart (trio clock).
        max_delay: the cap.
        factor: growth per further failure in the window (>= 1).
        jitter: the random spread, a fraction in ``[0, 1)``; ``0`` is exact.
    """

    min_delay: float = attrs.field(default=0.1, validator=_non_negative_number)
    max_delay: float = attrs.field(default=10.0, validator=_non_negative_number)
    factor: float = attrs.field(default=2.0, validator=_non_negative_number)
    jitter: float = attrs.field(default=0.1, validator=_non_negative_number)

    def __attrs_post_init__(self) -> None:
        if self.max_delay < self.min_delay:
            raise ValueError(
                f"Backoff.max_delay ({self.max_delay!r}) is below min_delay ({self.min_delay!r})"
            )
        if self.factor < 1:
            raise ValueError(f"Backoff.factor must be >= 1, got {self.factor!r}")
        if self.jitter >= 1:
            raise ValueError(f"Backoff.jitter must be below 1, got {self.jitter!r}")

    def delay(self, failures_in_window: int, rng: random.Random) -> float:
        """Seconds to wait before the restart after this many recent failures."""
        exponent = max(failures_in_window - 1, 0)
        try:
            grown = self.min_delay * self.factor**exponent
        except OverflowError:  # (a huge factor, or a long unlimited window)
            grown = math.inf
        base = min(self.max_delay, grown)
        if self.jitter:
            base *= rng.uniform(1 - self.jitter, 1 + self.jitter)
        return base


@attrs.frozen
class Restart:
    """Replace a failed actor by a fresh instance (the default strategy).

    Args:
        max_restarts: restarts allowed within ``within`` seconds; one failure more
            escalates (to the parent, or at the root fails the system block).
        within: the window, in seconds of trio clock; ``math.inf`` counts every
            failure of the actor's life (then ``max_restarts`` is a lifetime budget).
        backoff: a :class:`Backoff` to delay restarts, or ``None`` to restart at
            once.
    """

    max_restarts: int = attrs.field(default=3, validator=_non_negative_int)
    within: float = attrs.field(default=5.0, validator=_positive_window)
    backoff: Backoff | None = attrs.field(
        default=None, validator=attrs.validators.optional(attrs.validators.instance_of(Backoff))
    )


@attrs.frozen
class Stop:
    """Stop a failed actor (its queued messages are stranded as for ``stop()``)."""


@attrs.frozen
class Resume:
    """Drop the failing message; the same instance keeps its state and goes on."""


@attrs.frozen
class Escalate:
    """Hand the failure to the parent, as if the parent itself had failed.

    At the root (an actor spawned by the system), the system block ends with an
    ``ExceptionGroup`` holding the original exception and its traceback.
    """


@attrs.frozen
class OneForOne:
    """Each child restarts alone (the default); its ``Restart`` counts its intensity."""


@attrs.frozen
class OneForAll:
    """A child's restart restarts every sibling too (newest first, then in spawn order).

    Args:
        max_restarts: group restarts allowed within ``within`` seconds; one more
            escalates (the failing child stops, the parent fails with its error).
        within: the window, in seconds of trio clock (``math.inf``: a lifetime).
    """

    max_restarts: int = attrs.field(default=3, validator=_non_negative_int)
    within: float = attrs.field(default=5.0, validator=_positive_window)


@attrs.frozen
class RestForOne:
    """A child's restart restarts it and the siblings spawned after it.

    Args:
        max_restarts: as :class:`OneForAll`'s.
        within: as :class:`OneForAll`'s.
    """

    max_restarts: int = attrs.field(default=3, validator=_non_negative_int)
    within: float = attrs.field(default=5.0, validator=_positive_window)


GroupStrategy = OneForOne | OneForAll | RestForOne
"""The type of ``Actor.children_strategy``."""
GROUP_STRATEGY_TYPES = (OneForOne, OneForAll, RestForOne)
ONE_FOR_ONE = OneForOne()


def check_children_strategy(owner: str, value: object) -> GroupStrategy:
    """An actor class's ``children_strategy``, checked.

    Raises:
        TypeError: naming the class (``owner``) and what it holds instead.
    """
    if isinstance(value, type) and value in GROUP_STRATEGY_TYPES:
        raise TypeError(
            f"{owner}.children_strategy must be an instance, got the class "
            f"{value.__name__}; write {value.__name__}()"
        )
    if not isinstance(value, GROUP_STRATEGY_TYPES):
        raise TypeError(
            f"{owner}.children_strategy must be OneForOne(), OneForAll(...) or "
            f"RestForOne(...), got {value!r}"
        )
    return value


RestartType = Literal["permanent", "transient", "temporary"]
"""The type of ``spawn(..., restart=...)``: OTP's restart types."""
RESTART_TYPES: tuple[RestartType, ...] = ("permanent", "transient", "temporary")
DEFAULT_RESTART_TYPE: RestartType = "transient"


def check_restart_type(restart: object) -> RestartType:
    """``spawn``'s ``restart`` argument, checked."""
    if not isinstance(restart, str):
        raise TypeError(f"restart must be 'permanent', 'transient' or 'temporary', got {restart!r}")
    if restart not in RESTART_TYPES:
        raise ValueError(
            f"restart must be 'permanent', 'transient' or 'temporary', got {restart!r}"
        )
    return restart


SupervisionStrategy = Restart | Stop | Resume | Escalate
"""Any one of the four strategies."""
Supervision = SupervisionStrategy | Mapping[type[Exception], SupervisionStrategy]
"""The type of ``spawn(..., supervision=...)``: a strategy, or a *decider* -- a mapping
from exception types to strategies, in which the most specific match wins and an
error no entry matches escalates."""
DEFAULT_SUPERVISION: SupervisionStrategy = Restart()
STRATEGY_TYPES = (Restart, Stop, Resume, Escalate)
_ESCALATE = Escalate()
_STOP = Stop()


class Decider:
    """A ``supervision=`` mapping, checked: the strategy for each exception type.

    The most specific match wins: the first class of the error's MRO that the
    mapping names (so ``{ValueError: Resume(), Exception: Restart()}`` resumes on a
    ``UnicodeError`` and restarts on a ``KeyError``); an error that matches no entry
    escalates, as an Akka decider's unhandled case does.
    """

    __slots__ = ("_by_type",)

    def __init__(self, by_type: Mapping[type[Exception], SupervisionStrategy]) -> None:
        self._by_type = dict(by_type)

    def decide(self, error: BaseException) -> SupervisionStrategy:
        """The strategy for ``error``."""
        by_type = self._by_type
        for cls in type(error).__mro__:
            strategy = by_type.get(cls)
            if strategy is not None:
                return strategy
        return _ESCALATE

    def __repr__(self) -> str:
        entries = ", ".join(f"{cls.__qualname__}: {s!r}" for cls, s in self._by_type.items())
        return f"{{{entries}}}"


def check_strategy(strategy: object) -> SupervisionStrategy | Decider:
    """Return ``strategy`` (a mapping as a :class:`Decider`) if it is one; raise a
    ``TypeError`` naming what is wrong otherwise."""
    if isinstance(strategy, STRATEGY_TYPES):
        return strategy
    if isinstance(strategy, Mapping):
        if not strategy:
            raise TypeError("supervision={} is empty: map exception types to strategies")
        for cls, chosen in strategy.items():
            if not (isinstance(cls, type) and issubclass(cls, Exception)):
                raise TypeError(
                    f"supervision mapping keys must be Exception subclasses, got {cls!r}"
                )
            if not isinstance(chosen, STRATEGY_TYPES):
                raise TypeError(
                    f"supervision mapping values must be Restart(...), Stop(), Resume() or "
                    f"Escalate(), got {chosen!r} for {cls.__qualname__}"
                )
        return Decider(strategy)
    raise TypeError(
        "supervision must be Restart(...), Stop(), Resume(), Escalate() or a mapping "
        f"from exception types to them, got {strategy!r}"
    )


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
    traceback: ``"<path> failed <where>"``."""
    cell.failures += 1
    cell.system.failures += 1
    logger.error(
        "%s failed %s", cell.path, where, exc_info=(type(error), error, error.__traceback__)
    )


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


__all__ = [
    "DEFAULT_SUPERVISION",
    "GROUP_STRATEGY_TYPES",
    "ONE_FOR_ONE",
    "Decider",
    "STRATEGY_TYPES",
    "Backoff",
    "Escalate",
    "GroupStrategy",
    "OneForAll",
    "OneForOne",
    "RestForOne",
    "Restart",
    "RestartWindow",
    "Resume",
    "Stop",
    "Supervision",
    "SupervisionStrategy",
    "begin_restart",
    "DEFAULT_RESTART_TYPE",
    "RESTART_TYPES",
    "RestartType",
    "check_children_strategy",
    "check_restart_type",
    "check_strategy",
    "escalate",
    "handle_failure",
    "record_failure",
    "restart_delay",
    "stopped_itself",
    "strategy_for",
]

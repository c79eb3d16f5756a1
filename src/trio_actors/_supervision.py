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
group. How the group restarts is ``_core/_restarting.py``'s; what a failure does,
``_core/_failure.py``'s.
"""

from __future__ import annotations

import math
import random
from collections.abc import Mapping
from typing import Any, Final, Literal

import attrs

from ._interrupts import protect_module
from ._policy import is_finite


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
DEFAULT_RESTART_TYPE: Final[RestartType] = "transient"


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
DEFAULT_SUPERVISION: Final[SupervisionStrategy] = Restart()
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


protect_module(globals())

__all__ = [
    "Backoff",
    "DEFAULT_RESTART_TYPE",
    "DEFAULT_SUPERVISION",
    "Decider",
    "Escalate",
    "GROUP_STRATEGY_TYPES",
    "GroupStrategy",
    "ONE_FOR_ONE",
    "OneForAll",
    "OneForOne",
    "RESTART_TYPES",
    "RestForOne",
    "Restart",
    "RestartType",
    "Resume",
    "STRATEGY_TYPES",
    "Stop",
    "Supervision",
    "SupervisionStrategy",
    "check_children_strategy",
    "check_restart_type",
    "check_strategy",
]

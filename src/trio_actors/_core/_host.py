"""What the kernel needs of the actor system that hosts its actors: the :class:`Host`
protocol.

The kernel (``_core``) sits below the system (``actors/_system.py``): a cell keeps
its system as a ``Host``, and every call the kernel makes into the system goes
through the names below -- the counters it keeps for statistics, the thread and
token that tell its trio run, and the few things only the system can do (start a
stop or restart task in its nursery, build a fresh instance, forget a stopped
actor, fail the system block). :class:`~trio_actors.ActorSystem`
implements it; ``mypy`` checks that it does wherever a system is made into a cell's
host.

The underscore names are the system's private methods: the kernel is their only
caller, and users never see them.
"""

from __future__ import annotations

import random
from typing import TYPE_CHECKING, Any, Protocol

import trio

from .._interrupts import protect_module

if TYPE_CHECKING:
    from ._actor import ActorBase
    from ._cell import ActorCell
    from ._dead_letters import DeadLetters
    from ._dispatcher import Dispatcher
    from ._foreign import ForeignInbox
    from ._kinds import HandlerKinds
    from ._observer import Observer
    from ._registry import Registry
    from ._timers import TimerService

__all__ = ["Host"]


class Host(Protocol):
    """The actor system, as the kernel sees it."""

    # Read by the serving paths and the thread checks.
    dead_letters: DeadLetters
    thread_id: int
    trio_token: trio.lowlevel.TrioToken
    _dispatcher: Dispatcher
    _foreign: ForeignInbox
    _registry: Registry
    _random: random.Random
    _observer: Observer | None  # (None: not observed; _core/_observer.py)

    # Written by the kernel, read by statistics().
    restarts: int
    failures: int
    expected_errors: int
    longest_turn_time: float
    longest_turn_path: str | None
    sampled_turn_time: float
    sampled_turn_path: str | None

    def _make_instance(self, factory: Any, args: tuple[Any, ...]) -> tuple[ActorBase, HandlerKinds]:
        """Call the factory for a restart; the checked instance and its kinds."""
        ...

    def _start_stop_task(self, cell: ActorCell) -> None:
        """Start the task that finishes ``cell``'s stop, in the system's nursery."""
        ...

    def _start_restart_task(self, cell: ActorCell, delay: float) -> None:
        """Start the task that restarts ``cell`` after ``delay`` seconds."""
        ...

    def _forget(self, cell: ActorCell) -> None:
        """``cell`` stopped: it is no longer among its siblings, nor counted live."""
        ...

    def _fail(self, error: BaseException) -> None:
        """A top-level actor escalated ``error``: the system block fails with it."""
        ...

    def _timers(self) -> TimerService:
        """The system's timer service (made with the first timer)."""
        ...


protect_module(globals())

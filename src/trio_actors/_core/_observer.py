"""What the kernel tells an observer of its system: the :class:`Observer` protocol.

A system opens with an ``Observer`` or with ``None`` (``open_actor_system(tracing=
...)`` makes one, in ``trio_actors/observe``; this module imports nothing of
OpenTelemetry). The rule that keeps "off" free: **nothing is added to the paths a
tell or an ask takes** (the shapes S1--S4 of ``docs/performance.rst``). A flag tested
per tell or per message would cost those paths a few percent each; instead the
observer chooses, once:

* at each spawn, the **cell class** (:meth:`Observer.cell_class`): a subclass of the
  one the system would use, which may override how asks and tells arrive. What it
  observes travels as an *envelope* (a subclass of
  :class:`~trio_actors._core._envelope.Ask` or ``Notice`` whose ``traced`` class
  attribute is true), which the serving loop finds by position as it finds any
  envelope; the user's message stays the envelope's ``message`` (a dead letter, a
  failure log, ``expected_errors`` see only it);
* when the system opens, the **dispatcher class** (:meth:`Observer.dispatcher_class`).

The kernel's other hooks are each behind one ``if observer is not None`` on a path
S1--S4 never take:

=============================================  ========================================
where                                          what is called, and what it costs off
=============================================  ========================================
``ActorSystem._spawn``                         :meth:`~Observer.cell_class`: a test
                                               per spawn
``ActorSystem.__init__``                       :meth:`~Observer.dispatcher_class`:
                                               once per system
``_handler_call.answer_plain``                 ``Ask.begin`` of a traced envelope: a
                                               class attribute read per *queued* ask
``_failure.record_failure``                    :meth:`~Observer.failed`: failures only
``_restarting.run_restart``,                   :meth:`~Observer.lifecycle`: per restart
``ActorSystem._stop_task``                     and per stop task
``_stopping.finished``                         :meth:`~Observer.retired`: per stop
``_dead_letters.DeadLetters.record[_many]``    :meth:`~Observer.dead_letters`: dead
                                               letters only
``_task_serving.serve_async_turns``            :meth:`~Observer.async_turn`: per turn
                                               of an ``async`` handler
=============================================  ========================================

The hooks run in the trio thread (a tell from another thread is never observed) and
must not raise: an exception from one is the observer's bug, and would surface where
the kernel called it. None is a checkpoint.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import TYPE_CHECKING, Literal, Protocol

from .._interrupts import protect_module

if TYPE_CHECKING:
    from ._cell import ActorCell
    from ._dead_letters import DeadLetterReason
    from ._dispatcher import Dispatcher
    from ._ref import ActorRef

__all__ = ["Lifecycle", "Observer"]

Lifecycle = Literal["restart", "stop"]
"""The sequences :meth:`Observer.lifecycle` brackets: a restart task's, a stop task's."""


class Observer(Protocol):
    """What an observed system calls. See the module docstring for where, and what each
    costs when the system is not observed."""

    def cell_class(self, base: type[ActorCell]) -> type[ActorCell]:
        """The cell class to spawn an actor with, where the system would use ``base``
        (``ActorCell``, ``BoundedCell``, a pool's or a remote child's cell): ``base``
        itself, or a subclass of it that adds no slot. Called at each spawn; cache
        the answer."""
        ...

    def dispatcher_class(self, base: type[Dispatcher]) -> type[Dispatcher]:
        """The dispatcher class of the system (``base``, or a subclass): called once,
        when the system opens."""
        ...

    def failed(self, cell: ActorCell, error: BaseException, where: str) -> None:
        """``cell`` failed ``where`` (``"handling a Job"``, ``"in on_start"``,
        ``"(escalated by system/child)"``...) with ``error`` -- every failure the
        runtime counts and logs, before its supervision decides. An expected error
        (``Actor.expected_errors``) is a reply, not a failure: not called."""
        ...

    def lifecycle(self, cell: ActorCell, what: Lifecycle) -> AbstractContextManager[None]:
        """What brackets ``cell``'s restart task (``"restart"``: from the failure's
        hand-over to the fresh instance, or to its end without one) or stop task
        (``"stop"``: drain, stranded cleanup, children, ``on_stop``), entered and
        left in that task. (The system's exit stops its actors without stop tasks:
        not bracketed.)"""
        ...

    def retired(self, cell: ActorCell) -> None:
        """``cell`` has stopped and let go of its instance: its counters (``handled``,
        ``restarts``, ``failures``...) are final. Called once per actor."""
        ...

    def dead_letters(self, recipient: ActorRef, reason: DeadLetterReason, count: int) -> None:
        """``count`` dead letters for ``recipient`` were recorded, with ``reason``."""
        ...

    def async_turn(self, cell: ActorCell, seconds: float) -> None:
        """A turn of ``cell``'s ``async`` handlers (up to a batch of messages, one
        after another in its serving task) took ``seconds`` of trio time. (The
        dispatcher's turns of plain handlers are the round clock's.)"""
        ...


protect_module(globals())

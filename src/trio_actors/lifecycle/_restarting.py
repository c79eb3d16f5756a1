"""The restart sequence: replacing a failed actor by a fresh instance.

Run by a restart task, which owns the actor (``RESTARTING``) from the failure until
the fresh instance is ready to start:

1. (the task that was serving the actor handed it over when it finished: the
   restart task owns the actor from its start);
2. the actor's children stop (each with stranded cleanup), before anything else;
3. ``on_stop`` runs on the old instance, if it had started;
4. the backoff delay elapses (if the strategy has one); messages keep queueing;
5. the factory makes a fresh instance (a failure here counts like any other);
6. the actor goes back to ``STARTING`` and is scheduled: ``on_start`` runs on the new
   instance before any queued message, exactly as after ``spawn``.

The mailbox is kept throughout; the failing message is not retried. A ``stop()``
during any step cancels the sequence and stops the actor at once.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio
from trio.lowlevel import enable_ki_protection

from ._state import ActorState, LifecycleEvent, Serving, advance, hand_over
from ._stopping import run_on_stop, stop_children
from ._supervision import Restart, escalate, record_failure, restart_delay, strategy_for
from ._watch import unwatch

if TYPE_CHECKING:
    from ..actors._actor import Actor
    from ..actors._cell import ActorCell
    from ..actors._kinds import HandlerKinds

# --- handing over to a restart, and the fresh instance (bound as ActorCell methods) ---


def hand_to_restart(cell: ActorCell) -> None:
    """Whoever serves a RESTARTING actor lets go (or nobody did): a restart task
    takes it over."""
    hand_over(cell, Serving.RESTART)
    cell.system._start_restart_task(cell, cell.restart_delay)


def make_instance(cell: ActorCell) -> tuple[Actor, HandlerKinds]:
    """A fresh instance from the actor's factory and its kinds (for a restart).

    Raises:
        TypeError: the factory did not make a new actor.
    """
    factory = cell.factory if cell.factory is not None else type(cell.instance)
    return cell.system._make_instance(factory, cell.args)


def install(cell: ActorCell, instance: Actor, kinds: HandlerKinds) -> None:
    """Make ``instance`` (fresh from the factory) this actor's instance.

    The watches the old instance made are dropped, with any ``Terminated`` they
    queued (Akka's default: the fresh instance watches what it chooses to), and the
    fresh instance is told why it exists: its ``restarted_after`` is the failure
    that led to it."""
    for target in list(cell.watching or ()):
        unwatch(cell, target)
    instance.restarted_after = cell.last_error
    if type(cell.actor_name) is int and cell.name_prefix is None:
        cell.name_prefix = cell.kinds.class_name  # the generated name stays
    cell.instance = instance
    cell.kinds = kinds
    cell.receive = instance.receive if kinds.receive_async else None
    instance._trio_actors_cell = cell
    cell.started = False
    cell.inline_ready = False
    cell.refresh_tell_paths()


# --- the restart task ---------------------------------------------------------------


@enable_ki_protection
async def run_restart(cell: ActorCell, delay: float) -> None:
    """Take a RESTARTING actor to a fresh instance; see the module docstring."""
    cell.serving_task = trio.lowlevel.current_task()
    replaced = False
    try:
        # Shielded from the system block's cancellation, as serving is: a stop (the
        # exit's, when it reaches this actor) cancels the scope itself.
        with trio.CancelScope(shield=True) as scope:
            cell.handler_scope = scope
            await stop_children(cell)
            await run_on_stop(cell)
            cell.started = False
            while True:
                if delay:
                    await trio.sleep(delay)
                try:
                    instance, kinds = cell.make_instance()
                except Exception as error:
                    next_delay = _after_failed_creation(cell, error)
                    if next_delay is None:
                        return
                    delay = next_delay
                    continue
                cell.install(instance, kinds)
                cell.restarts += 1
                cell.system.restarts += 1
                replaced = True
                break
    finally:
        cell.handler_scope = None
        cell.serving_task_done()
        if replaced and cell.state is ActorState.RESTARTING:
            advance(cell, LifecycleEvent.REPLACED)
        if replaced and cell.state in (ActorState.STARTING, ActorState.DRAINING):
            cell.dispatcher.schedule(cell)  # on_start first, then the queue
        elif cell.state is ActorState.RESTARTING:
            # No fresh instance, and nothing stopped it: the restart was interrupted
            # (a KeyboardInterrupt at one of its steps). A new restart task tries
            # again -- never left idle with its queue, which nobody would serve.
            cell.hand_to_restart()
        else:
            cell.set_idle()  # stopped (or escalated) meanwhile


def _after_failed_creation(cell: ActorCell, error: BaseException) -> float | None:
    """The factory failed while a restart built the fresh instance. A ``Restart``
    that decides the error tries again (after its backoff) until its intensity is
    exceeded; any other strategy a decider gives it escalates: with no instance
    there is nothing to resume, and a stop would hide a supervisor giving up."""
    record_failure(cell, error, "creating a fresh instance")
    strategy = strategy_for(cell, error)
    if not isinstance(strategy, Restart):
        escalate(cell, error)
        return None
    return restart_delay(cell, strategy, error)


__all__ = ["hand_to_restart", "install", "make_instance", "run_restart"]

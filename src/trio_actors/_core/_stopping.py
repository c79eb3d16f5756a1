"""The stop sequence: what happens between "stop" and STOPPED.

A stop begins with :func:`begin_stop`: the actor stops accepting (its tell paths
close, waiting senders are refused, its timers end, the watches it holds are
dropped), and either keeps serving what is queued (a drain) or moves it all to its
stranded messages at once (:func:`strand`, which ends any turn in progress) and
has its running async handler cancelled. Exactly when an actor first leaves the
accepting states a stop task is started to run the rest -- or the system's exit
runs it itself.

Whoever owns an actor's stop -- a stop task started by ``stop()`` / ``Actor.stop()``,
or the system's exit -- runs :func:`finish_stop`:

1. a draining actor first handles what was queued;
2. the stranded messages are cleaned up (``_stranded.py``), ``cleanup_batch``
   at a time with shielded yields: each stranded ask fails at once, before anything
   is waited for, so an asker that the actor's own handler waits for is never
   left waiting on the actor (T25);
3. a task still serving the actor (an async handler, already cancelled by an
   immediate stop, or a restart in progress) is waited for, so handlers never
   overlap ``on_stop``;
4. the actor's children stop **newest first, one at a time** (OTP's order, T29):
   each is stopped whole -- its handler cancelled, its stranded cleanup, its own
   children, its ``on_stop`` -- before the next older sibling begins, and a sibling
   not yet reached keeps serving meanwhile: children always stop before their
   parent;
5. ``on_stop`` runs, if the actor had started -- exactly once per instance;
6. the actor becomes STOPPED, its watchers are told, and everyone waiting in
   ``stop()`` is released.

Steps 1--4 are shielded from cancellation: a stop, once begun, always completes.
``on_stop`` is not shielded (a shielded user hook could hang the system's exit
forever); if the system is being cancelled, an async ``on_stop`` sees ``Cancelled``.

The actor's **shutdown timeout** (``spawn(..., shutdown=5.0)``, T27; OTP's child
``shutdown`` then ``brutal_kill``) bounds what the actor itself may take: from the
start of :func:`finish_stop`, a drain (step 1) still handling its queue is turned
into an immediate stop (its running async handler cancelled, what is left
stranded and cleaned as any immediate stop's), and an async ``on_stop`` (step 5) is
cancelled. Either is logged and counted as a failure (:class:`ShutdownTimeout`).
Each child's stop is bounded by its own timeout, and the time the children take is
not counted against the actor's own ``on_stop``. Code inside a shielded scope of the
user's own is the user's: a cancellation cannot reach it. An ``on_stop`` that a
restart runs on the old instance has the same bound.
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Final

import trio

from .._errors import ActorError, ActorStopped, ShutdownTimeout
from .._interrupts import protect_module
from ._envelope import NO_MESSAGE
from ._failure import record_failure
from ._foreign import current_task_of
from ._state import ActorState, LifecycleEvent, Serving, advance
from ._stranded import CleanupCadence, clean_stranded, clean_stranded_now
from ._watch import Terminated, forget_watches, notify_watchers

if TYPE_CHECKING:
    from ._cell import ActorCell


_STOPPING = ActorState.STOPPING
_STOPPED = ActorState.STOPPED
_DRAINING = ActorState.DRAINING
_TASK = Serving.TASK
_RESTART = Serving.RESTART

# The shutdown timeout an actor has unless ``spawn`` gives another: OTP's default
# for a worker (5,000 ms).
DEFAULT_SHUTDOWN: Final = 5.0


def check_shutdown(shutdown: object) -> float:
    """``spawn``'s ``shutdown`` argument, checked: seconds, ``>= 0``, ``math.inf``
    allowed (``0`` cancels an async ``on_stop`` at its first checkpoint)."""
    if isinstance(shutdown, bool) or not isinstance(shutdown, int | float):
        raise TypeError(f"shutdown must be a number of seconds (or math.inf), got {shutdown!r}")
    if not shutdown >= 0:  # (also refuses NaN)
        raise ValueError(f"shutdown must be >= 0 seconds (or math.inf), got {shutdown!r}")
    return float(shutdown)


# --- beginning a stop, and waiting for its end (bound as ActorCell methods) ------


async def stop_and_wait(cell: ActorCell, *, drain: bool) -> None:
    """:meth:`ActorRef.stop`."""
    _refuse_own_handler(cell, "stop", "; call self.stop() instead")
    cell.begin_stop(drain=drain, cancel_handler=True)  # (nothing, if stopped)
    await _until_stopped(cell)


def _refuse_own_handler(cell: ActorCell, operation: str, hint: str = "") -> None:
    """Raise if the caller is this actor's own handler or stop: waiting for the
    actor's stop there would wait for itself forever."""
    task = current_task_of(cell.system, operation)
    if cell.state is _STOPPED:
        return  # nothing left to wait for: no deadlock
    if task is cell.serving_task or task is cell.stopping_task:
        raise ActorError(
            f"{cell.path} awaited its own ref's {operation}() from its own handler, "
            f"which would deadlock (wait forever for itself){hint}"
        )


async def _until_stopped(cell: ActorCell) -> None:
    """Wait until the actor is STOPPED. A checkpoint, always."""
    if cell.state is _STOPPED:
        await trio.lowlevel.checkpoint()
    else:
        await cell.wait_stopped()


def begin_stop(
    cell: ActorCell, *, drain: bool, cancel_handler: bool, stop_task: bool = True
) -> None:
    """Start stopping; the rest of the stop runs in a system task. Idempotent.

    ``drain``: keep serving what is queued, then stop. ``cancel_handler``: cancel
    a running async handler (not when the actor stops itself from it).
    ``stop_task``: start the task that runs the rest of the stop -- unless the
    caller runs it itself (the system's exit). A stop task is started exactly
    when the actor first leaves the accepting states, so an actor DRAINING or
    STOPPING always has someone finishing its stop.
    """
    state = cell.state
    if state is _STOPPING or state is _STOPPED:
        if cancel_handler and cell.handler_scope is not None:
            cell.handler_scope.cancel()  # e.g. it stopped itself, then stop()
        return
    cell.close_tell_paths()
    if cell.registered_names:
        cell.system._registry.forget(cell)  # lookup never finds an actor that refuses
    if cell.watching:
        forget_watches(cell)  # it accepts nothing more: no Terminated either
    if cell.senders:
        refuse_senders(cell)  # senders still waiting were never queued
    cell.end_timers()
    if drain:
        if state is not _DRAINING:
            advance(cell, LifecycleEvent.DRAIN)
            if stop_task:
                cell.system._start_stop_task(cell)
        return
    advance(cell, LifecycleEvent.STOP)
    cell.strand()
    if cancel_handler and cell.handler_scope is not None:
        cell.handler_scope.cancel()
    if state is _DRAINING:
        cell.wake_drain_waiter()
    elif stop_task:
        cell.system._start_stop_task(cell)


def strand(cell: ActorCell) -> None:
    """Move everything queued to ``stranded`` (which ends any turn in progress)."""
    asks = cell.asks_queued
    cell.asks_queued = 0
    cell.ask_at = None
    cell.withdrawn_queued = 0
    head = cell.head
    mailbox = cell.mailbox
    if head is NO_MESSAGE and not mailbox:
        return
    if cell.stranded is None:
        cell.stranded = deque()
    if asks:
        cell.stranded_asks += asks
    if head is not NO_MESSAGE:
        cell.head = NO_MESSAGE
        cell.stranded.append(head)
    if mailbox:
        cell.stranded.extend(mailbox)
        mailbox.clear()


def refuse_senders(cell: ActorCell) -> None:
    """The actor stops accepting: every ``send`` and ``ask`` still waiting for room
    raises ActorStopped; a ``send`` from another node waiting there is a dead
    letter ``"stopped"``."""
    assert cell.senders is not None
    refused, tells = cell.senders.refuse_all(
        lambda what: ActorStopped(f"{cell.path} stopped while {what} waited for room")
    )
    cell.failed_back += refused
    if tells:  # (sends from another node: dead letters, as tells to a stopped actor)
        cell.stopped_letters += cell.system.dead_letters.record_many(cell.ref, tells, "stopped")


def went_idle_refusing(cell: ActorCell) -> None:
    """Called by a serving loop when this non-accepting actor's mailbox ran dry."""
    if cell.state is _DRAINING:
        cell.wake_drain_waiter()


def wake_drain_waiter(cell: ActorCell) -> None:
    if cell._drained is not None:
        cell._drained.set()
        cell._drained = None


async def wait_drained(cell: ActorCell) -> None:
    """Wait until a draining actor has handled its queue. A checkpoint."""
    while cell.state is _DRAINING and (cell.serving is not Serving.IDLE or cell.has_queued()):
        cell._drained = trio.Event()
        await cell._drained.wait()


def request_stop(cell: ActorCell, *, drain: bool) -> None:
    """:meth:`ActorRef.stop_nowait`: begin the stop, from any task of the run."""
    task = current_task_of(cell.system, "stop_nowait")
    cell.begin_stop(drain=drain, cancel_handler=task is not cell.serving_task)


async def wait_terminated(cell: ActorCell) -> Terminated:
    """:meth:`ActorRef.wait_stopped`. A checkpoint, always."""
    _refuse_own_handler(cell, "wait_stopped")
    await _until_stopped(cell)
    return Terminated(cell.ref, cell.stop_error)


def finished(cell: ActorCell) -> None:
    """The stop is complete: the actor is STOPPED, watchers and waiters are told."""
    advance(cell, LifecycleEvent.FINISHED)
    cell.stopping_task = None  # it may wait for other actors' stops from now on
    cell.system._forget(cell)
    if cell.parent is not None:
        cell.parent.child_finished(cell)
    if cell.group_restart is not None:
        cell.group_restart.leave(cell)  # a group restart goes on without it (T28)
    if cell.watching:
        forget_watches(cell)
    if cell.watchers:
        notify_watchers(cell)
    if cell._stopped is not None:
        cell._stopped.set()
    cell.release_instance()
    observer = cell.system._observer
    if observer is not None:
        observer.retired(cell)  # (its counters are final)


def stop_hook_failed(cell: ActorCell, error: BaseException) -> None:
    """``on_stop`` raised: logged and counted; the actor still ends stopped."""
    record_failure(cell, error, "in on_stop")


# --- the stop sequence --------------------------------------------------------------


def finish_idle_stop(cell: ActorCell) -> bool:
    """Take a stopping actor to STOPPED at once if steps 1--5 have nothing to do:
    nothing to drain, no task serving it, no children, nothing stranded, no
    ``on_stop`` to run. Returns whether it did. Never a checkpoint.

    The common case at the system's exit (idle actors without hooks), where the
    coroutines of :func:`finish_stop` would be most of the cost of a stop.
    """
    if _must_wait_or_clean(cell) or (cell.started and cell.kinds.has_on_stop):
        return False
    finished(cell)
    return True


def _must_wait_or_clean(cell: ActorCell) -> bool:
    """Whether steps 1--4 have anything to do (see the module docstring)."""
    serving = cell.serving  # (cell.served_by_task without the property: S5's exit)
    return bool(
        cell.state is _DRAINING
        or serving is _TASK
        or serving is _RESTART
        or cell.children
        or cell.stranded
    )


async def finish_stop(cell: ActorCell, cadence: CleanupCadence) -> None:
    """Take a stopping (or draining) actor to STOPPED. See the module docstring.

    A checkpoint when there is anything to wait for or clean; cancellation cannot
    stop the cleanup, and reaches only an async ``on_stop``.

    Interrupted -- a ``KeyboardInterrupt`` that trio delivers at one of its awaits,
    or any other ``BaseException`` from a hook -- it still leaves the actor STOPPED
    and every stranded message failed back or dead-lettered before the exception
    goes on (:func:`_end_interrupted`); the children it had not reached are asked
    to stop, and their own stop tasks finish them.
    """
    cell.stopping_task = trio.lowlevel.current_task()
    deadline = trio.current_time() + cell.shutdown
    try:
        if _must_wait_or_clean(cell):
            # The children's stops are bounded by their own timeouts: the time they
            # took is not this actor's, and its on_stop keeps the rest of its own.
            deadline += await _wait_and_clean(cell, cadence, deadline)
        await run_on_stop(cell, deadline)
    except BaseException:
        _end_interrupted(cell)
        raise
    finally:
        finished(cell)


def _end_interrupted(cell: ActorCell) -> None:
    """What an interrupted stop still does, at once (never a checkpoint): a drain
    ends, the stranded messages are cleaned without yielding, the children left
    begin their stops."""
    if cell.state is ActorState.DRAINING:
        advance(cell, LifecycleEvent.DRAINED)
        cell.strand()
    clean_stranded_now(cell)
    cell.stranded = None
    for child in list((cell.children or {}).values()):
        child.begin_stop(drain=False, cancel_handler=True)


async def _wait_and_clean(cell: ActorCell, cadence: CleanupCadence, deadline: float) -> float:
    """Steps 1--4 of the stop sequence, shielded; a drain ends at ``deadline``.
    Returns the (trio) time the children's stops took. (An idle actor with nothing
    queued and no children skips them: a cancel scope per actor would double the
    cost of stopping 50,000 actors at system exit.)"""
    with trio.CancelScope(shield=True):
        if cell.state is ActorState.DRAINING:
            with trio.CancelScope(deadline=deadline) as timeout:  # (not shielded off)
                await cell.wait_drained()
            if cell.state is ActorState.DRAINING:
                if not timeout.cancelled_caught:
                    # Drained: nobody serves it and nothing is queued (wait_drained
                    # returned without a checkpoint after seeing so): nothing strands.
                    advance(cell, LifecycleEvent.DRAINED)
                else:  # the shutdown timeout ended the drain: stop it at once
                    shutdown_timed_out(cell, "its drain")
                    cell.begin_stop(drain=False, cancel_handler=True)
        stranded = cell.stranded
        if stranded:
            await clean_stranded(cell, stranded, cadence)
        cell.stranded = None
        await cell.wait_not_served()
        began = trio.current_time()
        await stop_children(cell)
    return trio.current_time() - began


async def stop_children(cell: ActorCell) -> None:
    """Stop every child of ``cell``, newest first, one at a time (T29).

    Each child is stopped whole before the next older one begins; the others keep
    serving until their turn (so a child's ``on_stop`` can still ask an older
    sibling). ``cell`` itself no longer accepts messages, so it spawns no child
    meanwhile. A checkpoint if there are children; cancellation cannot interrupt it.
    """
    children = cell.children
    if not children:
        return
    with trio.CancelScope(shield=True):
        while children:
            child = next(reversed(children.values()))  # the newest left
            child.begin_stop(drain=False, cancel_handler=True)
            await child.wait_stopped()  # it leaves ``children`` when it has stopped


async def run_on_stop(cell: ActorCell, deadline: float) -> None:
    """Run the current instance's ``on_stop`` if it started; log what it raises. An
    async ``on_stop`` still running at ``deadline`` (trio time) is cancelled, and
    that is logged and counted as a failure (the shutdown timeout, T27)."""
    kinds = cell.kinds
    if not (cell.started and kinds.has_on_stop):
        return
    cell.started = False  # on_stop runs once per instance, even if it is cut short
    try:
        if kinds.on_stop_async:
            with trio.CancelScope(deadline=deadline) as scope:
                await cell.instance.on_stop()
            if scope.cancel_called:  # (also when the hook swallowed the Cancelled)
                shutdown_timed_out(cell, "its on_stop")
        else:
            cell.instance.on_stop()
    except Exception as error:
        stop_hook_failed(cell, error)


def shutdown_timed_out(cell: ActorCell, what: str) -> None:
    """The shutdown timeout cut ``what`` short: logged and counted as a failure."""
    record_failure(
        cell,
        ShutdownTimeout(
            f"{cell.path}: {what} did not finish within its shutdown timeout of "
            f"{cell.shutdown:g} s and was cancelled"
        ),
        "to stop in time",
    )


protect_module(globals())

__all__ = [
    "DEFAULT_SHUTDOWN",
    "begin_stop",
    "check_shutdown",
    "finish_idle_stop",
    "finish_stop",
    "finished",
    "refuse_senders",
    "request_stop",
    "run_on_stop",
    "stop_and_wait",
    "stop_children",
    "shutdown_timed_out",
    "stop_hook_failed",
    "strand",
    "wait_drained",
    "wait_terminated",
    "wake_drain_waiter",
    "went_idle_refusing",
]

"""The actor lifecycle as one state table.

This file is the whole state machine (in the manner of h11's ``_state.py``): the
states, the events, and the table of legal transitions. Everything else in the
runtime changes an actor's state only through :func:`advance`, so the table is the
truth and diagrams can be drawn from it.

::

    STARTING --started--> RUNNING --drain--> DRAINING --drained--> STOPPING --finished--> STOPPED
     |    ^                  |
     |    +----replaced----+ |
     +--failed--> RESTARTING <--failed--+

    stop:  STARTING, RUNNING, RESTARTING, DRAINING --> STOPPING
    drain: STARTING, RESTARTING --> DRAINING

(``docs/lifecycle_diagram.py`` draws the exact graph from :data:`TRANSITIONS`.)

* ``STARTING``: spawned (or replaced by a restart); ``on_start`` has not finished.
  Messages are accepted and queued; none is handled yet.
* ``RUNNING``: messages are accepted and handled.
* ``RESTARTING``: a failure is being handled by a restart: the children are stopped,
  the old instance's ``on_stop`` runs, the backoff (if any) elapses, a fresh
  instance is made. Messages are accepted and queued meanwhile.
* ``DRAINING``: ``stop(drain=True)`` was called; new messages are refused (tells
  become dead letters, asks raise ``ActorStopped``), queued ones are still handled.
* ``STOPPING``: new messages are refused; the running async handler (if any) is
  cancelled; the children stop; the stranded mailbox is cleaned up; ``on_stop`` runs.
* ``STOPPED``: final.

What each state allows is part of the table too (:class:`ActorState`'s
properties): whether it accepts messages (``STARTING``, ``RUNNING``,
``RESTARTING``), whether its queue is served (``RUNNING``, ``DRAINING``), whether it
may spawn children or start timers (``STARTING``, ``RUNNING``). Some events may
arrive in a state where they change nothing -- a second stop, a drain of an actor
already stopping -- and those pairs are declared as :data:`NO_OPS`: legal, and
:func:`advance` leaves the state as it is; every other pair outside the table is an
error.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Protocol

from .._errors import LifecycleError
from .._interrupts import protect_module


class ActorState(enum.Enum):
    """Where an actor is in its life. See the module docstring for each state.

    Attributes:
        accepts: ``tell`` queues and ``ask`` is accepted (otherwise a tell is a dead
            letter and an ask raises ``ActorStopped``).
        serves: its queued messages are handled.
        may_spawn: it may spawn children (not while stopping or restarting: a
            child spawned then would outlive the stop or restart meant to end it).
        may_start_timers: it may start timers (they end when it stops or restarts).
    """

    # Members are singletons: hash them by identity, not by name (Enum's own
    # __hash__ is Python code, and every transition looks a pair of them up).
    __hash__ = object.__hash__

    accepts: bool
    serves: bool
    may_spawn: bool
    may_start_timers: bool

    def __new__(
        cls, value: str, accepts: bool, serves: bool, may_spawn: bool, may_start_timers: bool
    ) -> ActorState:
        member = object.__new__(cls)
        member._value_ = value
        member.accepts = accepts
        member.serves = serves
        member.may_spawn = may_spawn
        member.may_start_timers = may_start_timers
        return member

    #            value         accepts serves may_spawn may_start_timers
    STARTING = ("starting", True, False, True, True)
    RUNNING = ("running", True, True, True, True)
    RESTARTING = ("restarting", True, False, False, False)
    DRAINING = ("draining", False, True, False, False)
    STOPPING = ("stopping", False, False, False, False)
    STOPPED = ("stopped", False, False, False, False)


class LifecycleEvent(enum.Enum):
    """What can happen to an actor."""

    __hash__ = object.__hash__

    STARTED = "started"  # on_start finished (or there is none)
    FAILED = "failed"  # a failure that the restart strategy will handle
    REPLACED = "replaced"  # a restart made the fresh instance; on_start is next
    DRAIN = "drain"  # stop(drain=True) was called
    DRAINED = "drained"  # a draining actor's mailbox ran empty
    STOP = "stop"  # stop() was called, or the system is exiting
    FINISHED = "finished"  # stranded cleanup and on_stop are done


S = ActorState
E = LifecycleEvent

TRANSITIONS: Mapping[tuple[ActorState, LifecycleEvent], ActorState] = {
    (S.STARTING, E.STARTED): S.RUNNING,
    (S.STARTING, E.FAILED): S.RESTARTING,
    (S.STARTING, E.DRAIN): S.DRAINING,
    (S.STARTING, E.STOP): S.STOPPING,
    (S.RUNNING, E.FAILED): S.RESTARTING,
    (S.RUNNING, E.DRAIN): S.DRAINING,
    (S.RUNNING, E.STOP): S.STOPPING,
    (S.RESTARTING, E.REPLACED): S.STARTING,
    (S.RESTARTING, E.DRAIN): S.DRAINING,
    (S.RESTARTING, E.STOP): S.STOPPING,
    (S.DRAINING, E.DRAINED): S.STOPPING,
    (S.DRAINING, E.STOP): S.STOPPING,
    (S.STOPPING, E.FINISHED): S.STOPPED,
}
"""Every legal transition, ``(state, event) -> new state``; nothing else is legal."""

NO_OPS: frozenset[tuple[ActorState, LifecycleEvent]] = frozenset(
    {
        (S.DRAINING, E.DRAIN),  # a second stop(drain=True)
        (S.STOPPING, E.DRAIN),  # a drain asked of an actor already stopping
        (S.STOPPING, E.STOP),  # a second stop
        (S.STOPPED, E.DRAIN),
        (S.STOPPED, E.STOP),
    }
)
"""Pairs that are legal and change nothing: ``advance`` returns the state as it is."""

ACCEPTING_STATES = frozenset(state for state in ActorState if state.accepts)
"""States in which ``tell`` enqueues and ``ask`` is accepted (``state.accepts``)."""

assert not NO_OPS & TRANSITIONS.keys(), "a pair is either a transition or a no-op"
del S, E


class Serving(enum.Enum):
    """Who serves an actor's mailbox: at most one at a time, and the lifecycle's
    second machine (:data:`SERVING_TRANSITIONS`).

    ``DISPATCHER`` is one value for "in the run queue" and "in an inline turn":
    nothing reads the difference, and telling them apart would cost a write at the
    start of every turn, on the path of every activation (S3, S4). Stopping is
    not a server: a stop moves what is queued to the actor's stranded messages in
    one step, which its stop sequence cleans up, and whoever serves the mailbox
    finds it empty and lets go (the stop waits for a task that serves it).
    """

    __hash__ = object.__hash__

    IDLE = "idle"  # nobody: nothing queued, or it may not be served now
    DISPATCHER = "dispatcher"  # the dispatcher: in its run queue or in an inline turn
    TASK = "task"  # its serving task (async handlers), from when the task is started
    RESTART = "restart"  # a restart task, from the hand-over until the fresh instance


V = Serving

SERVING_TRANSITIONS: Mapping[tuple[Serving, Serving], str] = {
    (V.IDLE, V.DISPATCHER): "work arrives for an actor served inline (plain handlers)",
    (V.IDLE, V.TASK): "work arrives for an actor with an async receive or on_start",
    (V.IDLE, V.RESTART): "it fails while idle (a child escalated): restarted at once",
    (V.DISPATCHER, V.IDLE): "its mailbox ran dry, or it stopped",
    (V.DISPATCHER, V.RESTART): "it failed in its turn, or while in the run queue",
    (V.TASK, V.IDLE): "its mailbox ran dry, or it stopped",
    (V.TASK, V.DISPATCHER): "its async on_start ran and its receive is plain",
    (V.TASK, V.TASK): "its task ended with work left (interrupted): a new one serves on",
    (V.TASK, V.RESTART): "it failed in an async handler or on_start",
    (V.RESTART, V.IDLE): "it stopped (or escalated) during the restart",
    (V.RESTART, V.RESTART): "its restart was interrupted: a new restart task tries again",
    (V.RESTART, V.DISPATCHER): "the fresh instance is served inline",
    (V.RESTART, V.TASK): "the fresh instance needs a task",
}
"""Every legal change of who serves an actor, with why it happens; nothing else is
legal (``hand_over``). Two inlined copies skip the check, on the paths of every
activation: ``ActorRef.tell`` (IDLE to DISPATCHER) and the dispatcher's turn
(DISPATCHER to IDLE); the serving tests check that they keep to the table."""
del V


class HasLifecycle(Protocol):
    """What :func:`advance` needs of an actor's runtime record."""

    state: ActorState
    accepting: bool
    inline_ready: bool

    def describe(self) -> str: ...


class HasServer(HasLifecycle, Protocol):
    """What :func:`hand_over` needs of an actor's runtime record."""

    serving: Serving

    def refresh_tell_paths(self) -> None: ...


def hand_over(subject: HasServer, to: Serving) -> None:
    """Make ``to`` the one who serves ``subject``, and recompute the tell paths.

    Raises:
        LifecycleError: ``(subject.serving, to)`` is not in
            :data:`SERVING_TRANSITIONS`; nothing is changed, and the message names
            the actor and both.
    """
    if (subject.serving, to) not in SERVING_TRANSITIONS:
        raise LifecycleError(
            f"illegal hand-over of {subject.describe()}: from {subject.serving.name} "
            f"to {to.name} (in state {subject.state.name})"
        )
    subject.serving = to
    subject.refresh_tell_paths()


def advance(subject: HasLifecycle, event: LifecycleEvent) -> ActorState:
    """Apply ``event`` to ``subject`` and return its new state.

    ``subject.accepting`` is kept equal to ``state.accepts`` (the tell fast path reads
    the flag rather than the state), and ``subject.inline_ready`` is cleared when
    the new state does not serve (which ends an inline turn in progress). A pair in
    :data:`NO_OPS` changes nothing.

    Raises:
        LifecycleError: ``(state, event)`` is in neither :data:`TRANSITIONS` nor
            :data:`NO_OPS`; the state is left unchanged and the message names
            actor, state and event.
    """
    try:
        new_state = TRANSITIONS[subject.state, event]
    except KeyError:
        if (subject.state, event) in NO_OPS:
            return subject.state
        raise LifecycleError(
            f"illegal lifecycle transition for {subject.describe()}: "
            f"event {event.name} in state {subject.state.name}"
        ) from None
    subject.state = new_state
    subject.accepting = new_state.accepts
    if not new_state.serves:
        subject.inline_ready = False
    return new_state


protect_module(globals())

__all__ = [
    "ACCEPTING_STATES",
    "NO_OPS",
    "SERVING_TRANSITIONS",
    "TRANSITIONS",
    "ActorState",
    "LifecycleEvent",
    "Serving",
    "advance",
    "hand_over",
]

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

An actor accepts messages exactly in ``STARTING``, ``RUNNING`` and ``RESTARTING``.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Protocol

from .._errors import LifecycleError


class ActorState(enum.Enum):
    """Where an actor is in its life. See the module docstring for each state."""

    # Members are singletons: hash them by identity, not by name (Enum's own
    # __hash__ is Python code, and every transition looks a pair of them up).
    __hash__ = object.__hash__

    STARTING = "starting"
    RUNNING = "running"
    RESTARTING = "restarting"
    DRAINING = "draining"
    STOPPING = "stopping"
    STOPPED = "stopped"


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

ACCEPTING_STATES = frozenset({S.STARTING, S.RUNNING, S.RESTARTING})
"""States in which ``tell`` enqueues and ``ask`` is accepted."""

del S, E


class HasLifecycle(Protocol):
    """What :func:`advance` needs of an actor's runtime record."""

    state: ActorState
    accepting: bool

    def describe(self) -> str: ...


def advance(subject: HasLifecycle, event: LifecycleEvent) -> ActorState:
    """Apply ``event`` to ``subject`` and return its new state.

    ``subject.accepting`` is kept equal to ``state in ACCEPTING_STATES`` (the tell
    fast path reads the flag rather than the state).

    Raises:
        LifecycleError: ``(state, event)`` is not in :data:`TRANSITIONS`; the state
            is left unchanged and the message names actor, state and event.
    """
    try:
        new_state = TRANSITIONS[subject.state, event]
    except KeyError:
        raise LifecycleError(
            f"illegal lifecycle transition for {subject.describe()}: "
            f"event {event.name} in state {subject.state.name}"
        ) from None
    subject.state = new_state
    subject.accepting = new_state in ACCEPTING_STATES
    return new_state


__all__ = ["ACCEPTING_STATES", "TRANSITIONS", "ActorState", "LifecycleEvent", "advance"]

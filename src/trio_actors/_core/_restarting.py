"""The restart sequence: replacing a failed actor by a fresh instance.

Run by a restart task, which owns the actor (``RESTARTING``) from the failure until
the fresh instance is ready to start:

1. (the task that was serving the actor handed it over when it finished: the
   restart task owns the actor from its start);
2. the actor's children stop (each with stranded cleanup), before anything else;
3. ``on_stop`` runs on the old instance, if it had started (an async one is
   cancelled if it outlives the actor's shutdown timeout, as in a stop);
4. the backoff delay elapses (if the strategy has one); messages keep queueing;
5. the factory makes a fresh instance (a failure here counts like any other);
6. the actor goes back to ``STARTING`` and is scheduled: ``on_start`` runs on the new
   instance before any queued message, exactly as after ``spawn``.

The mailbox is kept throughout; the failing message is not retried. A ``stop()``
during any step cancels the sequence and stops the actor at once.

**A group restart** (a parent whose ``children_strategy`` is ``OneForAll`` or
``RestForOne``, T28) runs the same sequence in every member -- the failed child and
the siblings it takes along (:func:`group_members`) -- each in its own restart task,
ordered as OTP orders it by one :class:`GroupRestart`: steps 2--3 **newest first,
one at a time**, then steps 4--6 **in spawn order, one at a time** (a member gets
its fresh instance only when the older members' ``on_start`` hooks have finished,
as OTP starts each child only after the previous one's ``init``; so an ``on_start``
must not wait on a newer member). The failed child is RESTARTING at once; each
sibling moves to RESTARTING only at its teardown turn (:func:`take_down`) and serves
until then (T29: a newer member's ``on_stop`` may ask it). A sibling running an
``async`` handler has it cancelled at its turn (OTP shuts siblings down; letting it
finish could deadlock it on an ask to a member already restarting), and its asker
gets :exc:`~trio_actors.ActorStopped`. A member that stops meanwhile leaves the
group when it has stopped and the others go on without it; a failure of a sibling
during the group restart joins it (:meth:`GroupRestart.join`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from .._interrupts import protect_module
from .._supervision import OneForAll, Restart, RestForOne
from ._failure import begin_restart, escalate, record_failure, restart_delay, strategy_for
from ._state import ActorState, LifecycleEvent, Serving, advance, hand_over
from ._stopping import run_on_stop, stop_children
from ._watch import unwatch

_MAY_JOIN = (ActorState.STARTING, ActorState.RUNNING)

if TYPE_CHECKING:
    from ._actor import ActorBase
    from ._cell import ActorCell
    from ._kinds import HandlerKinds

# --- handing over to a restart, and the fresh instance (bound as ActorCell methods) ---


def hand_to_restart(cell: ActorCell) -> None:
    """Whoever serves a RESTARTING actor lets go (or nobody did): a restart task
    takes it over."""
    hand_over(cell, Serving.RESTART)
    cell.system._start_restart_task(cell, cell.restart_delay)


def make_instance(cell: ActorCell) -> tuple[ActorBase, HandlerKinds]:
    """A fresh instance from the actor's factory and its kinds (for a restart).

    Raises:
        TypeError: the factory did not make a new actor.
    """
    factory = cell.factory if cell.factory is not None else type(cell.instance)
    return cell.system._make_instance(factory, cell.args)


def install(cell: ActorCell, instance: ActorBase, kinds: HandlerKinds) -> None:
    """Make ``instance`` (fresh from the factory) this actor's instance.

    The watches the old instance made are dropped, with any ``Terminated`` they
    queued (Akka's default: the fresh instance watches what it chooses to), and the
    fresh instance is told why it exists: its ``restarted_after`` is the failure
    that led to it."""
    for target in list(cell.watching or ()):
        unwatch(cell, target)
    instance.restarted_after = cell.restart_cause
    cell.group_window = None  # a fresh supervisor counts its group's restarts anew (OTP)
    if type(cell.actor_name) is int and cell.name_prefix is None:
        cell.name_prefix = cell.kinds.class_name  # the generated name stays
    cell.instance = instance
    cell.kinds = kinds
    cell.receive = instance.receive if kinds.receive_async else None
    instance._trio_actors_cell = cell
    cell.started = False
    cell.inline_ready = False
    cell.refresh_tell_paths()


# --- group restarts (T28; bound as an ActorCell method of the parent) ----------------


def restart_group(
    parent: ActorCell,
    failed: ActorCell,
    strategy: OneForAll | RestForOne,
    delay: float,
    error: BaseException,
) -> None:
    """``failed`` (a child of ``parent``) is to restart after ``delay`` for ``error``:
    restart the members of its group with it (each fresh instance's
    ``restarted_after`` is ``error``). ``failed`` is moved to RESTARTING now; each
    sibling only at its teardown turn, and serves until then (T29). A failure
    during a group restart joins it: the group grows by the members the new
    failure takes along, and the order holds over all of them. Never a checkpoint."""
    members = group_members(failed, strategy)
    ongoing = [m.group_restart for m in members if m.group_restart is not None]
    group = ongoing[0] if ongoing else GroupRestart(parent)
    assert all(g is group for g in ongoing), "two group restarts under one parent"
    group.join(members, failed, delay, error)


def group_members(failed: ActorCell, strategy: OneForAll | RestForOne) -> list[ActorCell]:
    """The siblings a restart of ``failed`` takes along, in spawn order, ``failed``
    included: all of them (one-for-all) or ``failed`` and the newer ones
    (rest-for-one) -- of those, the ones running or starting, and those in a group
    restart already (a sibling stopping, draining or restarting on its own is left
    to what it is doing)."""
    assert failed.parent is not None
    assert failed.parent.children is not None
    siblings = list(failed.parent.children.values())  # spawn order (insertion order)
    if isinstance(strategy, RestForOne):
        siblings = siblings[siblings.index(failed) :]
    return [
        s for s in siblings if s is failed or s.state in _MAY_JOIN or s.group_restart is not None
    ]


class GroupRestart:
    """The turns of one group restart: teardowns newest first, then fresh instances
    in spawn order.

    The group takes each member down at its turn -- the newest member not yet torn
    down: its running ``async`` handler is cancelled and it moves to RESTARTING (a
    ``temporary`` member is stopped instead, and never restarted, as in OTP). Until
    then a sibling keeps serving, so a newer member's ``on_stop`` may still ask it.
    Each member's restart task waits for its turns (checkpoints); a member whose
    fresh instance has started (or failed to) -- or that has stopped, or whose
    restart task ends without a fresh instance -- leaves, and the others go on.
    """

    __slots__ = ("_changed", "_done", "_taken", "_torn_down", "delay", "members", "parent")

    def __init__(self, parent: ActorCell) -> None:
        self.parent = parent
        self.members: list[ActorCell] = []  # spawn order
        self.delay = 0.0  # the latest failure's, for the members taken down from now on
        self._taken: set[ActorCell] = set()  # moved to RESTARTING (or stopped) by now
        self._torn_down: set[ActorCell] = set()
        self._done: set[ActorCell] = set()
        self._changed = trio.lowlevel.ParkingLot()

    def __repr__(self) -> str:
        return f"<GroupRestart of {[member.path for member in self.members]}>"

    def join(
        self, members: list[ActorCell], failed: ActorCell, delay: float, error: BaseException
    ) -> None:
        """``failed`` failed and takes ``members`` (spawn order) along: add the ones
        not in this group yet, restart ``failed`` now and take down the next member
        whose turn it is."""
        self.delay = delay
        joining = [m for m in members if m.group_restart is not self]
        for member in joining:
            member.group_restart = self
            self._torn_down.discard(member)  # (it left an earlier turn of this group)
            self._done.discard(member)
            self._taken.discard(member)
            if member is not failed:
                member.restart_cause = error  # why it restarts: its fresh restarted_after
        everyone = set(self.members).union(joining)
        children = self.parent.children or {}
        self.members = [c for c in children.values() if c in everyone]  # spawn order
        if failed not in self._taken:
            self._taken.add(failed)
            begin_restart(failed, delay)
        self._take_down_next()

    def _take_down_next(self) -> None:
        """Take down the newest member not yet torn down, if it is still serving."""
        for member in reversed(self.members):
            if member in self._torn_down:
                continue
            if member not in self._taken and member.state in _MAY_JOIN:
                self._taken.add(member)
                take_down(member, self.delay)
            return  # (one that stops meanwhile leaves when it has stopped)

    async def teardown_turn(self, cell: ActorCell) -> None:
        """Wait until every newer member has been torn down (or left)."""
        while not all(m in self._torn_down for m in self.members[self.members.index(cell) + 1 :]):
            await self._changed.park()

    async def start_turn(self, cell: ActorCell) -> None:
        """Wait until every member has been torn down and every older one has its
        fresh instance (or left)."""
        while not (
            all(m in self._torn_down for m in self.members)
            and all(m in self._done for m in self.members[: self.members.index(cell)])
        ):
            await self._changed.park()

    def torn_down(self, cell: ActorCell) -> None:
        self._torn_down.add(cell)
        self._changed.unpark_all()
        self._take_down_next()

    def leave(self, cell: ActorCell) -> None:
        """``cell``'s fresh instance has started, or it will not get one (it has
        stopped, or its restart ended without one): out of the way."""
        self._torn_down.add(cell)
        self._done.add(cell)
        if cell.group_restart is self:
            cell.group_restart = None
        self._changed.unpark_all()
        self._take_down_next()


def take_down(member: ActorCell, delay: float) -> None:
    """A sibling's teardown turn in a group restart: shut down a running ``async``
    handler (its asker gets ``ActorStopped``, as OTP's siblings are killed) and
    restart it -- or stop a ``temporary`` one for good."""
    if member.restart_type == "temporary":
        member.begin_stop(drain=False, cancel_handler=True)
        return
    if member.handler_scope is not None:
        member.handler_scope.cancel()
    begin_restart(member, delay)


# --- the restart task ---------------------------------------------------------------


async def run_restart(cell: ActorCell, delay: float) -> None:
    """Take a RESTARTING actor to a fresh instance; see the module docstring. (The
    restart task's body; an observer brackets it, ``_core/_observer.py``.)"""
    observer = cell.system._observer
    if observer is None:
        await _restart(cell, delay)
    else:
        with observer.lifecycle(cell, "restart"):
            await _restart(cell, delay)


async def _restart(cell: ActorCell, delay: float) -> None:
    cell.serving_task = trio.lowlevel.current_task()
    replaced = False
    group = cell.group_restart
    try:
        # Shielded from the system block's cancellation, as serving is: a stop (the
        # exit's, when it reaches this actor) cancels the scope itself.
        with trio.CancelScope(shield=True) as scope:
            cell.handler_scope = scope
            if group is not None:
                await group.teardown_turn(cell)
            await stop_children(cell)
            await run_on_stop(cell, trio.current_time() + cell.shutdown)
            cell.started = False
            if group is not None:
                group.torn_down(cell)
                if delay:  # (the group's one delay, before the members start in turn)
                    await trio.sleep(delay)
                    delay = 0.0
                await group.start_turn(cell)
            while True:
                if delay:
                    await trio.sleep(delay)
                try:
                    instance, kinds = make_instance(cell)
                except Exception as error:
                    next_delay = _after_failed_creation(cell, error)
                    if next_delay is None:
                        return
                    delay = next_delay
                    continue
                install(cell, instance, kinds)
                cell.restarts += 1
                cell.system.restarts += 1
                replaced = True
                break
    finally:
        cell.handler_scope = None
        if group is not None and not replaced:
            group.leave(cell)  # (a fresh instance leaves when it has started)
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


protect_module(globals())

__all__ = [
    "GroupRestart",
    "group_members",
    "hand_to_restart",
    "install",
    "make_instance",
    "restart_group",
    "run_restart",
    "take_down",
]

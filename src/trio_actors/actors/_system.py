"""The actor system: where actors live -- spawning, the registry, statistics, and
the stop of every actor when its block ends.

:func:`~trio_actors.open_actor_system` (``_opener.py``) makes one, in a nursery that
owns everything the runtime runs. The kernel (``_core``) knows the system as its
:class:`~trio_actors._core._host.Host`; the system knows its node, when it is one, as
a :class:`ClusterNode` (the remote layer sits above this one).
"""

from __future__ import annotations

import random
from collections.abc import Callable
from threading import get_ident
from typing import TYPE_CHECKING, Any, cast

import trio

from .._core._actor import cell_of_ref
from .._core._bounded import Bounded
from .._core._bounded_cell import BoundedCell
from .._core._cell import ActorCell
from .._core._dead_letters import DeadLetters
from .._core._dispatcher import Dispatcher
from .._core._foreign import ForeignInbox
from .._core._kinds import HandlerKinds, known_kinds
from .._core._ref import MADE_BY_THE_RUNTIME, ActorRef
from .._core._registry import Registry, wrong_system
from .._core._restarting import run_restart
from .._core._state import ActorState
from .._core._stopping import DEFAULT_SHUTDOWN, check_shutdown, finish_idle_stop, finish_stop
from .._core._stranded import CleanupCadence
from .._core._timers import TimerService
from .._errors import ActorError, ActorNotFound
from .._interrupts import protect_module
from .._policy import ServingPolicy
from .._statistics import DeadLetterCounts, SystemStatistics
from .._supervision import (
    DEFAULT_RESTART_TYPE,
    DEFAULT_SUPERVISION,
    RestartType,
    Supervision,
    check_restart_type,
    check_strategy,
)
from ._actor import Actor, unknown_spawn_keyword
from ._cluster_node import ClusterNode
from ._naming import Siblings, check_instance, check_name, free_name

if TYPE_CHECKING:
    from .._core._observer import Observer
    from ._cluster_node import NodeListener

_STOPPED = ActorState.STOPPED
_new_object = object.__new__


def _refs_made_by_a_store() -> bool:
    """Whether :meth:`ActorSystem._spawn` may make a ref as its constructor does,
    without calling it: ``object.__new__`` and the one store. In the pure build the
    constructor's check of the runtime's key is an interpreted ``__init__``, a frame
    per spawn (callgrind, ``python -m benchmarks.ablation --only spawn``: 19,858 ->
    ~19,300 instructions per spawn); compiled, the constructor is C, and a compiled
    class cannot be made by ``object.__new__`` at all (it says so: ``TypeError``)."""
    try:
        _new_object(ActorRef)
    except TypeError:
        return False
    return True


_REF_BY_STORE = _refs_made_by_a_store()


class ActorSystem:
    """A set of actors served together inside one trio nursery.

    Create one with :func:`open_actor_system`; do not instantiate it directly.

    Attributes:
        dead_letters: the :class:`~trio_actors.DeadLetters` log.
    """

    def __init__(
        self,
        nursery: trio.Nursery,
        serving: ServingPolicy,
        dead_letters: DeadLetters,
        seed: int,
        observer: Observer | None = None,
    ) -> None:
        self._nursery = nursery
        self._serving = serving
        # Observed (open_actor_system(tracing=...)): the observer chooses the
        # dispatcher's class and each actor's cell class; None costs nothing
        # (_core/_observer.py).
        self._observer = observer
        if observer is None:
            self._dispatcher = Dispatcher(serving, nursery)
        else:
            self._dispatcher = observer.dispatcher_class(Dispatcher)(serving, nursery)
            dead_letters.observer = observer
        self.dead_letters = dead_letters
        self.trio_token = trio.lowlevel.current_trio_token()
        self.thread_id = get_ident()
        self._foreign = ForeignInbox(self.trio_token)  # tells from other threads
        self._cells: Siblings = {}  # the top-level actors, by name (or serial)
        # The <class name> parts of names given to spawn in the form of generated
        # ones: actors of those classes get their generated names made at spawn.
        self._names_like_generated: set[str] = set()
        self._live = 0
        self._spawned = 0
        self._closed = False
        self._failed = False
        self._seed = seed
        self._random = random.Random(seed)  # every random choice of the runtime
        self.restarts = 0  # of all its actors, for statistics
        # Messages handled by its actors that have stopped (added once per stop, in
        # _forget): with a walk of the live ones, the node-wide total the statistics
        # service reports (actors/_census.py).
        self.handled_by_stopped = 0
        self.failures = 0  # likewise
        self.expected_errors = 0  # likewise
        self.longest_turn_time = 0.0  # of all its actors' turns, as the trio thread saw
        self.longest_turn_path: str | None = None
        self.sampled_turn_time = 0.0  # likewise, as the turn sampler saw (its only writer)
        self.sampled_turn_path: str | None = None
        self._timer_service: TimerService | None = None  # made with the first timer
        self._registry = Registry()
        self._node: ClusterNode | None = None  # with open_actor_system(cluster=...)
        # Hears of the stop of each exported actor (the node, from _join on: only
        # a node exports actors, so a cell with an export number has one).
        self._exported: NodeListener | None = None

    @property
    def node(self) -> ClusterNode | None:
        """This system's node in a cluster (``open_actor_system(cluster=...,
        node=...)``), or ``None``: its ``name`` and ``incarnation``."""
        return self._node

    @property
    def seed(self) -> int:
        """The seed of the runtime's random choices (the jitter of restart backoff):
        the one given to :func:`open_actor_system`, or the one it drew. Log it, and a
        run under ``MockClock`` can be replayed exactly with ``seed=system.seed``."""
        return self._seed

    # --- the registry (_core/_registry.py) ------------------------------------------

    def register(self, name: str, ref: ActorRef, *, shared: bool = False) -> None:
        """Register ``ref``'s actor under ``name``, for :meth:`lookup`. Synchronous;
        never a checkpoint.

        A name names one actor at a time, and is freed when that actor begins to
        stop (so a successor may take it at once); a restart keeps it. Registering
        the same actor under the same name again changes nothing; an actor may
        hold several names.

        ``shared=True`` (on a node only): the name is served by *every* actor
        registered under it so, on this node and on others -- a lookup gives a ref
        to the group, whose each tell or ask goes to one member, the NATS server's
        choice (``docs/remote.rst``, "Names served by many actors"). A member
        leaves when its actor begins to stop, or with :meth:`unregister`.

        Raises:
            TypeError: ``name`` is not a str, or ``ref`` is not an ``ActorRef``.
            ValueError: ``name`` is empty, or another live actor holds it -- on a
                node, here or on any node of the cluster this node has heard of
                (names are cluster-wide: see :doc:`/remote`); or it is held the
                other way, shared or single (the message names the node); or
                ``shared`` on a system that is not a node.
            ActorStopped: the actor is stopping or has stopped.
            ActorError: ``ref`` belongs to another system, or the call comes from
                another thread.
        """
        self._check_thread("register")
        cell = cell_of_ref(ref, "register()")
        if getattr(cell, "system", None) is not self:
            raise wrong_system("register")
        self._registry.register(name, cell, shared=bool(shared))

    def unregister(self, name: str, ref: ActorRef | None = None) -> None:
        """Free ``name``; for a shared name, ``ref``'s actor leaves it (without
        ``ref``: every actor of this system serving it). Synchronous; never a
        checkpoint.

        Raises:
            ActorNotFound: no actor is registered under ``name`` (or ``ref``'s
                actor does not hold it).
            TypeError: ``name`` is not a str.
            ActorError: called from another thread.
        """
        self._check_thread("unregister")
        cell = None if ref is None else cell_of_ref(ref, "unregister()")
        self._registry.unregister(name, cell)  # type: ignore[arg-type]

    async def lookup(self, name: str) -> ActorRef:
        """The ref of the actor registered under ``name`` -- in this system, or, on
        a node of a cluster, on any node (asked over the network when not here).
        Always a checkpoint.

        Raises:
            ActorNotFound: no actor is registered under ``name`` (a
                ``LookupError`` too).
            TypeError: ``name`` is not a str.
            ActorError: called from another thread.
        """
        self._check_thread("lookup")
        if self._node is None:
            await trio.lowlevel.checkpoint()
            return self._registry.lookup(name).ref
        try:
            found = self._registry.lookup(name).ref
        except ActorNotFound:
            return await self._node.lookup(name)
        await trio.lowlevel.checkpoint()
        return found

    def registered(self) -> dict[str, ActorRef]:
        """Every registered name and its actor's ref, in registration order (a
        snapshot of this process's registry; Erlang's ``registered()``)."""
        return {name: cell.ref for name, cell in self._registry.names().items()}

    def _check_thread(self, operation: str) -> None:
        if get_ident() != self.thread_id:
            raise ActorError(
                f"{operation}() called from another thread; the registry belongs to the "
                f"trio run that opened the system -- use trio.from_thread.run to reach it"
            )

    @property
    def serving(self) -> ServingPolicy:
        """The :class:`~trio_actors.ServingPolicy` every mailbox is served by."""
        return self._serving

    def spawn(
        self,
        actor_factory: type[Actor] | Callable[..., Actor],
        *args: Any,
        name: str | None = None,
        supervision: Supervision = DEFAULT_SUPERVISION,
        mailbox: Bounded | None = None,
        shutdown: float = DEFAULT_SHUTDOWN,
        restart: RestartType = DEFAULT_RESTART_TYPE,
        **unknown: Any,
    ) -> ActorRef:
        """Create a top-level actor and return its ref. Synchronous; never a checkpoint.

        Args:
            actor_factory: an :class:`~trio_actors.Actor` subclass, or any callable
                returning a new ``Actor`` instance (called again for each restart).
            *args: passed to ``actor_factory`` (trio's ``fn, *args`` convention).
            name: unique among the system's live top-level actors; generated if
                omitted.
            supervision: what happens when the actor fails:
                :class:`~trio_actors.Restart` (the default), :class:`~trio_actors.Stop`,
                :class:`~trio_actors.Resume` or :class:`~trio_actors.Escalate` (which,
                for a top-level actor, fails the system block).
            mailbox: ``None`` (the default) for an unbounded mailbox, or a
                :class:`~trio_actors.Bounded` capacity and overflow policy.
            shutdown: the actor's shutdown timeout in seconds of trio time (``>= 0``,
                ``math.inf`` for none; default 5.0, OTP's): how long its stop may take
                from when it begins -- a drain still handling its queue then becomes
                an immediate stop, an ``async`` ``on_stop`` still running is
                cancelled, and either is logged and counted as a failure
                (:class:`~trio_actors.ShutdownTimeout`). Its children's stops each
                have their own. It bounds the ``on_stop`` a restart runs, too.
            restart: OTP's restart type: ``"transient"`` (the default) is restarted
                only after a failure its strategy restarts; ``"temporary"`` is never
                restarted (a failure its strategy would restart stops it; under a
                parent's group strategy it is stopped, not restarted, with its
                group); ``"permanent"`` is also restarted after it stops itself
                (``self.stop()``), not only after a failure.

        ``on_start`` runs before the actor's first message; messages told
        meanwhile are queued.

        Raises:
            TypeError: ``actor_factory`` is not callable or did not return a new
                ``Actor``, the actor class does not define ``receive``, or
                ``supervision`` is not a strategy, or ``mailbox`` is neither ``None``
                nor a ``Bounded``, or ``shutdown`` is not a number, or ``restart``
                not a str, or a keyword is not one of these (pass the actor's own
                with ``functools.partial``).
            ValueError: ``name`` is empty, contains ``/`` or whitespace, or is
                taken; ``shutdown`` is negative or NaN; ``restart`` is not one of
                the three types.
            ActorError: the system has been closed.
        """
        if unknown:
            raise unknown_spawn_keyword(actor_factory, unknown)
        return self._spawn(None, actor_factory, args, name, supervision, mailbox, shutdown, restart)

    def _spawn(
        self,
        parent: ActorCell | None,
        factory: type[Actor] | Callable[..., Actor],
        args: tuple[Any, ...],
        name: str | None,
        supervision: Supervision,
        mailbox: Bounded | None,
        shutdown: float,
        restart: RestartType,
    ) -> ActorRef:
        """:meth:`spawn` of a top-level actor (``parent`` None) or of a child
        (:meth:`Actor.spawn <trio_actors.Actor.spawn>`)."""
        if get_ident() != self.thread_id:
            raise ActorError(
                "spawn() called from another thread; actors are spawned in the trio run "
                "that opened their system -- use trio.from_thread.run_sync(system.spawn, "
                "...) to reach it"
            )
        if self._closed and parent is None:
            # (A child may still be spawned by a parent the exit has not reached: the
            # parent's own stop stops it, as a restart of the parent may need it.)
            raise ActorError("cannot spawn: the actor system has been closed")
        if parent is not None and not parent.state.may_spawn:
            # Not while stopping, nor while restarting: a child spawned by the old
            # instance's on_stop would outlive the restart that should stop it.
            raise ActorError(f"cannot spawn a child of {parent.path}: it is {parent.state.value}")
        checked = supervision if supervision is DEFAULT_SUPERVISION else check_strategy(supervision)
        if shutdown is not DEFAULT_SHUTDOWN:
            shutdown = check_shutdown(shutdown)
        if restart is not DEFAULT_RESTART_TYPE:
            restart = check_restart_type(restart)
        if mailbox is not None and not isinstance(mailbox, Bounded):
            raise TypeError(
                f"mailbox must be None (unbounded) or a trio_actors.Bounded, got {mailbox!r}"
            )
        siblings = self._cells if parent is None else parent.children
        if name is not None:
            check_name(name, siblings, parent, self._names_like_generated)
        try:
            instance = factory(*args)
        except TypeError:
            if not callable(factory):
                raise TypeError(
                    "spawn() needs an Actor subclass or a callable returning an Actor, "
                    f"got {factory!r}"
                ) from None
            raise
        # A class known to the kinds cache is an actor class with a receive: for
        # the common spawn the instance needs no further check than being new.
        kinds = known_kinds(type(instance))
        if kinds is None or instance._trio_actors_cell is not None:
            kinds = check_instance(factory, instance)
        self._spawned += 1
        key: str | int
        if name is not None:
            key = name
        elif not (self._names_like_generated and kinds.class_name in self._names_like_generated):
            # The generated name is made when asked (ActorRef.name): formatting and
            # hashing it here would be a tenth of the spawn (measured).
            key = self._spawned
        else:  # a name given explicitly may have taken the generated one: check now
            key = free_name(f"{kinds.class_name}-{self._spawned}", siblings)
        cell_class = ActorCell if mailbox is None else BoundedCell
        if kinds.cell_class is not None:  # a pool (actors/_pool.py)
            if mailbox is not None:
                raise TypeError(
                    "a Pool's mailbox= is its workers': give it to Pool(..., mailbox=...)"
                )
            cell_class = kinds.cell_class
        if self._observer is not None:
            cell_class = self._observer.cell_class(cell_class)
        cell = cell_class(self, instance, kinds, key)
        if parent is None:
            self._cells[key] = cell
        else:
            cell.parent = parent
            if parent.children is None:
                parent.children = {}
            parent.children[key] = cell
        if checked is not DEFAULT_SUPERVISION:
            cell.supervision = checked
        if shutdown is not DEFAULT_SHUTDOWN:
            cell.shutdown = shutdown
        if restart is not DEFAULT_RESTART_TYPE:
            cell.restart_type = restart
        if args or factory is not type(instance):
            cell.factory = factory  # called again for each restart
            cell.args = args
        if mailbox is not None:
            cast(BoundedCell, cell).set_bound(mailbox)
        instance._trio_actors_cell = cell
        self._live += 1
        if kinds.has_on_start:
            self._dispatcher.schedule(cell)
        # new_ref(cell), inlined: the property and the call were ~70 ns of a ~2 µs
        # spawn (timeit, in-process). In the pure build, as the constructor would
        # make it, without the call (_refs_made_by_a_store, at the top).
        if _REF_BY_STORE:
            ref: ActorRef = _new_object(ActorRef)
            ref._cell = cell
            return ref
        return ActorRef(cell, MADE_BY_THE_RUNTIME)

    def _make_instance(self, factory: Any, args: tuple[Any, ...]) -> tuple[Actor, HandlerKinds]:
        """Call the factory for a restart; return the checked instance and its kinds."""
        instance = factory(*args)
        return instance, check_instance(factory, instance)

    def _start_stop_task(self, cell: ActorCell) -> None:
        self._nursery.start_soon(self._stop_task, cell, name=f"stop {cell.path}")

    async def _stop_task(self, cell: ActorCell) -> None:
        cadence = CleanupCadence(self._serving.cleanup_batch)
        if self._observer is None:
            await finish_stop(cell, cadence)
        else:
            with self._observer.lifecycle(cell, "stop"):
                await finish_stop(cell, cadence)

    def _start_restart_task(self, cell: ActorCell, delay: float) -> None:
        self._nursery.start_soon(run_restart, cell, delay, name=f"restart {cell.path}")

    def _fail(self, error: BaseException) -> None:
        """A top-level actor escalated ``error``: the system block fails with it."""
        if self._failed:
            return  # the first escalation ends the system (each one was logged)
        self._failed = True
        self._nursery.start_soon(_raise, error, name="trio-actors escalation")

    def _forget(self, cell: ActorCell) -> None:
        siblings = self._cells if cell.parent is None else cell.parent.children
        if siblings is not None and siblings.get(cell.actor_name) is cell:
            del siblings[cell.actor_name]
        self._live -= 1
        self.handled_by_stopped += cell.handled
        # (a ref to it left for another node: its node forgets it. The system first:
        # a cell's class-level default is the dearer read, and most systems are no node)
        if self._exported is not None and cell.export_number:
            self._exported.exported_stopped(cell)

    def statistics(self) -> SystemStatistics:
        """A snapshot of the system's counters: a :class:`~trio_actors.SystemStatistics`.

        Never a checkpoint; costs the same however many actors there are.
        """
        dispatcher = self._dispatcher
        by_reason = self.dead_letters.by_reason
        return SystemStatistics(
            live_actors=self._live,
            spawned=self._spawned,
            restarts=self.restarts,
            failures=self.failures,
            expected_errors=self.expected_errors,
            dead_letters=DeadLetterCounts(
                by_reason["stopped"],
                by_reason["stranded"],
                by_reason["overflow"],
                by_reason["unreachable"],
                by_reason["undecodable"],
                by_reason["refused"],
                by_reason["in-doubt"],
            ),
            rounds=dispatcher.rounds,
            longest_round_messages=dispatcher.clock.longest_round_messages,
            longest_round_seconds=dispatcher.clock.longest_round,
            longest_turn_seconds=max(self.longest_turn_time, self.sampled_turn_time),
            longest_turn_path=(
                self.longest_turn_path
                if self.longest_turn_time >= self.sampled_turn_time
                else self.sampled_turn_path
            ),
            timers=self.timers_active(),
        )

    # --- what the opener (_opener.py) does to the system --------------------------

    def _join(self, node: ClusterNode, listener: NodeListener) -> None:
        """The system is ``node`` of a cluster, whose ``listener`` hears the names,
        and the stops of the actors it exported."""
        self._node = node
        self._registry.listener = listener
        self._exported = listener

    def _leave(self) -> None:
        """The node is leaving: names registered from now on stay here. (It still
        hears its exported actors stop: forgetting them is always right.)"""
        self._registry.listener = None

    def _close(self) -> None:
        """Every actor has stopped: close the inbox of other threads' tells, the
        timers and the dispatcher (the nursery is cancelled next)."""
        self._foreign.close()
        if self._timer_service is not None:
            self._timer_service.close()
        self._dispatcher.close()

    def timers_active(self) -> int:
        """How many timers of this system's actors are active."""
        return 0 if self._timer_service is None else self._timer_service.active

    def _timers(self) -> TimerService:
        if self._timer_service is None:
            self._timer_service = TimerService(self._nursery)
        return self._timer_service

    @property
    def live_actors(self) -> int:
        """How many actors (at every level) are alive, not yet stopped."""
        return self._live

    def _stop_order(self) -> list[ActorCell]:
        """Every live actor, children before parents, newest sibling first."""
        # A stack of cells (no tuple per actor: 50,000 of them would wake the
        # garbage collector); a cell with children is pushed again under them.
        order: list[ActorCell] = []
        stack = list(self._cells.values())
        expanded: set[ActorCell] = set()
        while stack:
            cell = stack.pop()
            if cell.children and cell not in expanded:
                expanded.add(cell)
                stack.append(cell)
                stack.extend(cell.children.values())
            else:
                order.append(cell)
        return order

    async def _shutdown(self) -> None:
        """Stop every live actor, one at a time, newest first (T29, T25).

        Children stop before their parents, newest sibling first, and each actor is
        stopped whole (handler cancelled, stranded cleanup, ``on_stop``) before the
        next begins. An actor not yet reached keeps serving, so a newer actor's
        ``on_stop`` or shielded handler can still ask an older one and get its
        answer: the exit never waits on an actor that waits on an actor not yet
        served (T25). One cleanup cadence spans the whole exit (one unit per actor,
        plus the stranded messages). Cancellation reaches only async ``on_stop``
        hooks. A ``KeyboardInterrupt`` (or any exception) raised meanwhile does not
        end the exit: every actor still reaches STOPPED, then the first such
        exception is raised.
        """
        self._closed = True
        cadence = CleanupCadence(self._serving.cleanup_batch)
        interrupted: BaseException | None = None
        for cell in self._stop_order():
            try:
                if cell.state is _STOPPED:
                    continue  # stopped meanwhile (by its parent, or by itself)
                if not cell.accepting:
                    # DRAINING or STOPPING: its stop task finishes it; a drain in
                    # progress becomes an immediate stop.
                    cell.begin_stop(drain=False, cancel_handler=True)
                    with trio.CancelScope(shield=True):
                        await cell.wait_stopped()
                else:
                    cell.begin_stop(drain=False, cancel_handler=True, stop_task=False)
                    if not finish_idle_stop(cell):
                        await finish_stop(cell, cadence)
                if cadence.group_complete_after(1):  # one unit per actor
                    await trio.lowlevel.cancel_shielded_checkpoint()
            except BaseException as exc:
                # A cancellation that reached an on_stop, or a KeyboardInterrupt trio
                # delivered at one of these awaits: that actor's stop has ended it
                # anyway (finish_stop); the exit goes on with the others, then raises.
                if interrupted is None:
                    interrupted = exc
        if interrupted is not None:
            raise interrupted


async def _raise(error: BaseException) -> None:
    raise error


protect_module(globals())

__all__ = ["ActorSystem", "ClusterNode"]

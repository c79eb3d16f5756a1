"""The actor system: where actors live, and the block that owns their lifetime.

``open_actor_system()`` opens a nursery that owns everything the runtime runs: the
dispatcher task, the short-lived tasks of actors whose handlers are ``async def``,
and stop tasks. Leaving the block stops every actor still alive (T16), newest first
and one at a time (T29, T25), then cancels the nursery: no task is left behind.
"""

from __future__ import annotations

import math
import random
import re
import secrets
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from threading import get_ident
from typing import TYPE_CHECKING, Any, cast

import trio
from trio.lowlevel import enable_ki_protection

from .._cluster import Cluster, as_cluster, check_token
from .._core._actor import Actor, cell_of_ref, unknown_spawn_keyword
from .._core._bounded import Bounded
from .._core._bounded_cell import BoundedCell
from .._core._cell import ActorCell
from .._core._dead_letters import DEFAULT_RECENT_DEAD_LETTERS, DeadLetters
from .._core._dispatcher import Dispatcher
from .._core._foreign import ForeignInbox
from .._core._kinds import HandlerKinds, handler_kinds, known_kinds
from .._core._ref import ActorRef
from .._core._restarting import run_restart
from .._core._round_clock import is_default_clock
from .._core._state import ActorState
from .._core._stopping import DEFAULT_SHUTDOWN, check_shutdown, finish_idle_stop, finish_stop
from .._core._stranded import CleanupCadence
from .._core._timers import TimerService
from .._core._turn_sampler import DEFAULT_TURN_SAMPLING, SAMPLER
from .._errors import ActorError, ActorNotFound
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
from ._registry import Registry, wrong_system

if TYPE_CHECKING:
    from ..remote import Node

_NAME = re.compile(r"[^/\s]+")
_new_object = object.__new__
# A name that could be a generated one, ``<class name>-<serial>``.
_GENERATED_NAME = re.compile(r"(.+)-([1-9][0-9]{0,30})")
# Sibling actors by name; an actor whose name is generated is keyed by its serial
# number instead, and its name is made when asked (see ActorRef.name).
Siblings = dict[str | int, ActorCell]
_STOPPED = ActorState.STOPPED


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
    ) -> None:
        self._nursery = nursery
        self._serving = serving
        self._dispatcher = Dispatcher(serving, nursery)
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
        self.failures = 0  # likewise
        self.expected_errors = 0  # likewise
        self.longest_turn_time = 0.0  # of all its actors' turns, as the trio thread saw
        self.longest_turn_path: str | None = None
        self.sampled_turn_time = 0.0  # likewise, as the turn sampler saw (its only writer)
        self.sampled_turn_path: str | None = None
        self._timer_service: TimerService | None = None  # made with the first timer
        self._registry = Registry()
        self._node: Node | None = None  # with open_actor_system(cluster=...)

    @property
    def node(self) -> Node | None:
        """This system's node in a cluster (``open_actor_system(cluster=...,
        node=...)``), or ``None``: its ``name`` and ``incarnation``."""
        return self._node

    @property
    def seed(self) -> int:
        """The seed of the runtime's random choices (the jitter of restart backoff):
        the one given to :func:`open_actor_system`, or the one it drew. Log it, and a
        run under ``MockClock`` can be replayed exactly with ``seed=system.seed``."""
        return self._seed

    # --- the registry (actors/_registry.py) ------------------------------------------

    @enable_ki_protection
    def register(self, name: str, ref: ActorRef) -> None:
        """Register ``ref``'s actor under ``name``, for :meth:`lookup`. Synchronous;
        never a checkpoint.

        A name names one actor at a time, and is freed when that actor begins to
        stop (so a successor may take it at once); a restart keeps it. Registering
        the same actor under the same name again changes nothing; an actor may
        hold several names.

        Raises:
            TypeError: ``name`` is not a str, or ``ref`` is not an ``ActorRef``.
            ValueError: ``name`` is empty, or another live actor holds it -- on a
                node, here or on any node of the cluster this node has heard of
                (names are cluster-wide: see :doc:`/remote`).
            ActorStopped: the actor is stopping or has stopped.
            ActorError: ``ref`` belongs to another system, or the call comes from
                another thread.
        """
        self._check_thread("register")
        cell = cell_of_ref(ref, "register()")
        if getattr(cell, "system", None) is not self:
            raise wrong_system("register")
        self._registry.register(name, cell)

    @enable_ki_protection
    def unregister(self, name: str) -> None:
        """Free ``name``. Synchronous; never a checkpoint.

        Raises:
            ActorNotFound: no actor is registered under ``name``.
            TypeError: ``name`` is not a str.
            ActorError: called from another thread.
        """
        self._check_thread("unregister")
        self._registry.unregister(name)

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

    @enable_ki_protection
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
            self._check_name(name, siblings, parent)
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
            kinds = self._check_instance(factory, instance)
        self._spawned += 1
        key: str | int
        if name is not None:
            key = name
        elif not (self._names_like_generated and kinds.class_name in self._names_like_generated):
            # The generated name is made when asked (ActorRef.name): formatting and
            # hashing it here would be a tenth of the spawn (measured).
            key = self._spawned
        else:  # a name given explicitly may have taken the generated one: check now
            key = self._free_name(f"{kinds.class_name}-{self._spawned}", siblings)
        cell_class = ActorCell if mailbox is None else BoundedCell
        if kinds.cell_class is not None:  # a pool (actors/_pool.py)
            if mailbox is not None:
                raise TypeError(
                    "a Pool's mailbox= is its workers': give it to Pool(..., mailbox=...)"
                )
            cell_class = kinds.cell_class
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
        # spawn (timeit, in-process).
        ref: ActorRef = _new_object(ActorRef)
        ref._cell = cell
        return ref

    def _make_instance(self, factory: Any, args: tuple[Any, ...]) -> tuple[Actor, HandlerKinds]:
        """Call the factory for a restart; return the checked instance and its kinds."""
        instance = factory(*args)
        return instance, self._check_instance(factory, instance)

    @staticmethod
    def _check_instance(factory: Any, instance: object) -> HandlerKinds:
        """Check that ``factory`` made a new actor; return its class's kinds.

        Raises:
            TypeError: it is not an ``Actor``, its class has no ``receive``, or it
                is already spawned.
        """
        if not isinstance(instance, Actor):
            raise TypeError(
                f"spawn({_describe(factory)}) produced {instance!r} of type "
                f"{type(instance).__name__}, not an Actor; the factory must return an "
                "instance of a trio_actors.Actor subclass"
            )
        if instance._trio_actors_cell is not None:
            raise TypeError(
                f"spawn({_describe(factory)}) returned an actor that is already "
                "spawned; the factory must return a new instance each time"
            )
        return handler_kinds(type(instance))

    @staticmethod
    def _free_name(base: str, siblings: Siblings | None) -> str:
        """``base``, or ``base.2``, ``base.3`` ... if a sibling has that name."""
        if not siblings or base not in siblings:
            return base
        suffix = 2
        while f"{base}.{suffix}" in siblings:
            suffix += 1
        return f"{base}.{suffix}"

    def _check_name(
        self, name: object, siblings: Siblings | None, parent: ActorCell | None
    ) -> None:
        if not isinstance(name, str):
            raise TypeError(f"actor name must be a str, got {name!r}")
        if not _NAME.fullmatch(name):
            raise ValueError(
                f"actor name {name!r} is invalid: it must be non-empty and contain "
                "no '/' or whitespace"
            )
        generated = _GENERATED_NAME.fullmatch(name)
        if generated is not None:
            # From now on, generated names of that class are made (and checked) at
            # spawn: this one may take a future one.
            self._names_like_generated.add(generated[1])
        if siblings and (
            name in siblings
            or (
                generated is not None
                and (namesake := siblings.get(int(generated[2]))) is not None
                and namesake.name == name
            )
        ):
            where = "in this system" if parent is None else f"among the children of {parent.path}"
            raise ValueError(f"an actor named {name!r} is already alive {where}")

    def _start_stop_task(self, cell: ActorCell) -> None:
        self._nursery.start_soon(self._stop_task, cell, name=f"stop {cell.path}")

    @enable_ki_protection
    async def _stop_task(self, cell: ActorCell) -> None:
        await finish_stop(cell, CleanupCadence(self._serving.cleanup_batch))

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

    @enable_ki_protection
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

    @enable_ki_protection
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


def _describe(factory: object) -> str:
    return getattr(factory, "__qualname__", None) or repr(factory)


def _checked_seed(seed: object) -> int:
    """``seed`` if it is an int; a fresh one from the OS for ``None``."""
    if seed is None:
        return secrets.randbits(64)
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise TypeError(f"seed must be an int or None, got {seed!r}")
    return seed


def _checked_turn_sampling(turn_sampling: object) -> bool:
    """Whether to sample (``turn_sampling`` is seconds, or ``None`` for no).

    Raises:
        TypeError: neither a number nor ``None``.
        ValueError: under 1 ms (a thread waking more often would cost the trio
            thread its GIL), or not finite.
    """
    if turn_sampling is None:
        return False
    if isinstance(turn_sampling, bool) or not isinstance(turn_sampling, int | float):
        raise TypeError(f"turn_sampling must be seconds (a float) or None, got {turn_sampling!r}")
    if not 0.001 <= turn_sampling < math.inf:
        raise ValueError(
            f"turn_sampling must be at least 0.001 seconds and finite, got {turn_sampling!r}"
        )
    return True


def _real_clock() -> bool:
    """Whether the run's clock is trio's default one (whose time is the wall
    clock's: the turn sampler's readings are comparable with it)."""
    return is_default_clock(trio.lowlevel.current_clock())


def open_actor_system(
    *,
    serving: ServingPolicy | None = None,
    dead_letters_kept: int = DEFAULT_RECENT_DEAD_LETTERS,
    seed: int | None = None,
    turn_sampling: float | None = DEFAULT_TURN_SAMPLING,
    cluster: str | Cluster | None = None,
    node: str | None = None,
) -> AbstractAsyncContextManager[ActorSystem]:
    """Open an actor system whose actors live as long as the ``async with`` block.

    Entering is a checkpoint (it starts the system's dispatcher task in a nursery
    of its own); cancelled there, no system is opened.

    Args:
        serving: how mailboxes are served; the default is ``ServingPolicy()``
            (batch 64, cleanup batch 32, time slice 16 ms).
        dead_letters_kept: how many recent dead letters ``dead_letters.recent``
            keeps.
        seed: seeds every random choice the runtime makes (today: the jitter of
            :class:`~trio_actors.Backoff`), so that under ``MockClock`` a program
            runs the same every time (contract T30). ``None`` (the default) draws
            a fresh seed from the operating system, so that systems in different
            processes do not restart in lockstep; :attr:`ActorSystem.seed` tells
            which, to replay a run.
        turn_sampling: seconds between the turn sampler's looks at the trio
            thread (``mailbox/_turn_sampler.py``), which make a plain handler that
            blocks it (a ``time.sleep``, a CPU-bound loop) show in its actor's
            ``longest_turn_seconds``, at no cost to the serving paths; ``None``
            for none. Sampled only under trio's default clock (its time is the
            wall clock's).
        cluster, node: make the system a node named ``node`` of a cluster of
            systems in other processes or machines (``cluster``: a ``nats://`` URL
            or a :class:`~trio_actors.Cluster`): refs travel in messages and work
            across nodes, and the registry answers across them. Entering connects
            (and fails as :func:`trio_actors.nats.connect` does); leaving stops
            the actors first, then leaves the cluster.

    Leaving the block stops every actor still alive, children before their parents,
    newest first and one at a time (an actor not yet reached keeps serving): queued
    asks fail
    with :class:`~trio_actors.ActorStopped`, queued tells become dead letters,
    running async handlers are cancelled, ``on_stop`` hooks run; then no task of the
    system is left. This cleanup finishes even if the block is being cancelled.
    Like a nursery, an exception leaving the block comes wrapped in an
    ``ExceptionGroup``.

    Used without ``async with`` (``system = open_actor_system()``, or ``await``-ed),
    the first use says how to open it instead of failing obscurely.
    """
    return _SystemOpener(_open(serving, dead_letters_kept, seed, turn_sampling, cluster, node))


class _SystemOpener:
    """What :func:`open_actor_system` returns: an async context manager, only that."""

    __slots__ = ("_manager",)

    def __init__(self, manager: AbstractAsyncContextManager[ActorSystem]) -> None:
        self._manager = manager

    async def __aenter__(self) -> ActorSystem:
        return await self._manager.__aenter__()

    async def __aexit__(self, *exc_info: Any) -> bool | None:
        return await self._manager.__aexit__(*exc_info)

    def __getattr__(self, name: str) -> Any:
        raise AttributeError(
            f"open_actor_system() returns an async context manager, not the system "
            f"(no .{name}): write 'async with open_actor_system() as system:' and use "
            f"system.{name} inside the block"
        )

    def __await__(self) -> Any:
        raise TypeError(
            "open_actor_system() is not awaited: write 'async with open_actor_system() as system:'"
        )

    def __enter__(self) -> Any:
        raise TypeError(
            "open_actor_system() is an async context manager: write "
            "'async with open_actor_system() as system:' (inside a trio run)"
        )

    def __exit__(self, *exc_info: Any) -> None:  # pragma: no cover - __enter__ raised
        pass


@asynccontextmanager
async def _open(
    serving: ServingPolicy | None,
    dead_letters_kept: int,
    seed: int | None,
    turn_sampling: float | None,
    cluster: Any,
    node: str | None,
) -> AsyncIterator[ActorSystem]:
    """The body of :func:`open_actor_system`."""
    if serving is None:
        serving = ServingPolicy()
    elif not isinstance(serving, ServingPolicy):
        raise TypeError(f"serving must be a ServingPolicy, got {serving!r}")
    dead_letters = DeadLetters(dead_letters_kept)
    seed = _checked_seed(seed)
    sampled = _checked_turn_sampling(turn_sampling) and _real_clock()
    if (cluster is None) != (node is None):
        raise TypeError(
            "a node needs both cluster= (a nats:// URL or a Cluster) and node= (its name); "
            f"got cluster={cluster!r}, node={node!r}"
        )
    open_node = None
    if cluster is not None:  # (checked here, so that a mistake is not in a group)
        cluster = as_cluster(cluster)
        check_token(node, "node")
        open_node = _import_open_node()
    async with trio.open_nursery() as nursery:
        system = ActorSystem(nursery, serving, dead_letters, seed)
        await nursery.start(system._dispatcher.run, name="trio-actors dispatcher")
        if sampled:
            assert turn_sampling is not None
            SAMPLER.add(system.thread_id, turn_sampling)
        try:
            async with _node_of(system, open_node, cluster, node):
                try:
                    yield system
                finally:
                    await system._shutdown()  # (the node serves until its actors stopped)
        finally:
            if sampled:
                assert turn_sampling is not None
                SAMPLER.remove(system.thread_id, turn_sampling)
            dead_letters.close_subscriptions()  # (the exit's own letters are in)
            system._foreign.close()
            if system._timer_service is not None:
                system._timer_service.close()
            system._dispatcher.close()
            nursery.cancel_scope.cancel()


def _import_open_node() -> Callable[..., AbstractAsyncContextManager[Node]]:
    """``remote.open_node``: the one import of the remote layer, made only for a
    system with ``cluster=`` (without one, nothing of it, nor msgspec, is imported)."""
    try:
        from ..remote import open_node
    except ModuleNotFoundError as missing:
        if missing.name != "msgspec":
            raise
        raise ModuleNotFoundError(
            'a node needs msgspec (messages cross as msgpack): pip install "trio-actors[cluster]"',
            name="msgspec",
        ) from None
    return open_node


@asynccontextmanager
async def _node_of(
    system: ActorSystem,
    open_node: Callable[..., AbstractAsyncContextManager[Node]] | None,
    cluster: Cluster | None,
    node: str | None,
) -> AsyncIterator[None]:
    """The system as a node of ``cluster`` for the block (nothing without one)."""
    if open_node is None:
        yield
        return
    async with open_node(system, cluster, node) as opened:
        system._node = opened
        system._registry.listener = opened
        try:
            yield
        finally:
            system._registry.listener = None


__all__ = ["ActorSystem", "open_actor_system"]

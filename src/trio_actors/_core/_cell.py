"""The actor cell: the runtime's record of one live actor.

Users see an :class:`~trio_actors.Actor` (their object) and an
:class:`~trio_actors.ActorRef` (the handle, whose one slot points here); the cell
between them holds everything the runtime needs: the mailbox, the lifecycle state,
who serves it, the task and cancel scope of a running ``async`` handler, and the
counters behind statistics. It is deliberately a flat, slotted record: the tell
fast paths read two flags of it (and, to activate an idle actor, who serves it).

This module holds the record and what happens to its mailbox (queueing, asks,
sends, withdrawal); compaction is ``_core/_compaction.py``'s, a watch's notices
``_core/_watch.py``'s, what a failure does ``_core/_failure.py``'s. How an actor
stops is ``_core/_stopping.py``'s and how it restarts ``_core/_restarting.py``'s;
nine of their functions are methods here too (each calls the function, and the
class then binds the function in its place: ``CALLS_THROUGH``), for one of four
reasons each: a kind of cell differs there (the pool cell overrides
``strand``, ``wait_drained``, ``wake_drain_waiter`` and ``hand_to_restart``), a
ref needs it of any cell
(``stop_and_wait``, ``request_stop``, ``wait_terminated``: a remote actor's cell
has its own), or an import would run in a circle (``restart_group``, which
``_failure`` calls and ``_restarting`` defines on top of ``_failure``), or it is
the seam the contract suite's mutants replace to break a stop (``begin_stop``,
``tests/test_contracts_catch_broken_runtimes.py``). The rest are called as the
functions they are.

Invariants the serving loop relies on:

* ``serving`` says who serves the mailbox (:class:`~trio_actors._core._state.Serving`):
  nobody, the dispatcher (run queue or inline turn), its serving task, or a restart
  task; a mailbox is never served by two at once. It changes only as
  :data:`~trio_actors._core._state.SERVING_TRANSITIONS` allows.
* ``accepting`` is ``state.accepts``, kept by
  :func:`~trio_actors._core._state.advance`; so is ``inline_ready`` cleared
  when the state no longer serves.
* ``fast_tell`` and ``activates`` are a cache of the above for the tell fast paths,
  defined in one place (:meth:`ActorCell.refresh_tell_paths`).
* once the actor stops accepting, nothing is appended to ``mailbox`` again; an
  immediate stop moves what is queued to ``stranded`` in one step, which also ends
  any turn in progress.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Coroutine
from threading import get_ident
from typing import TYPE_CHECKING, Any, ClassVar, Final, Literal, NoReturn

import trio
import trio.lowlevel

from .._errors import ActorError, ActorStopped
from .._interrupts import protect_module
from .._statistics import ActorStatistics, DeadLetterCounts
from .._supervision import (
    DEFAULT_RESTART_TYPE,
    DEFAULT_SUPERVISION,
    Decider,
    RestartType,
    SupervisionStrategy,
)
from . import _compaction, _idle_ask, _restarting, _stopping
from ._bounded import Bounded, WaitingSenders
from ._envelope import NO_MESSAGE, Ask, Notice
from ._failure import RestartWindow
from ._foreign import current_task_of
from ._kinds import HandlerKinds
from ._native import deque_append, deque_popleft, mypyc_attr
from ._ref import ActorRef, ForeignCell, new_ref
from ._state import TRANSITIONS, ActorState, LifecycleEvent, Serving, advance, hand_over
from ._timers import Timer, cancel_timers

if TYPE_CHECKING:
    from .._supervision import OneForAll, RestForOne
    from ._actor import ActorBase
    from ._host import Host
    from ._watch import Terminated

_STARTING: Final = ActorState.STARTING
_STOPPING: Final = ActorState.STOPPING
_STOPPED: Final = ActorState.STOPPED
_DRAINING: Final = ActorState.DRAINING
_IDLE: Final = Serving.IDLE
_DISPATCHER: Final = Serving.DISPATCHER
_TASK: Final = Serving.TASK
_RESTART: Final = Serving.RESTART
_BORN_STARTED: Final = TRANSITIONS[_STARTING, LifecycleEvent.STARTED]


@mypyc_attr(allow_interpreted_subclasses=True)
class _TurnSlots:
    """The slots of :class:`ActorCell` that every activation reads or writes (the
    tell fast paths and the dispatcher's turn).

    CPython lays a base class's slots out before its subclass's, and sorts each
    class's by name: as a base, these sit together in the cell's first 112 bytes
    (the cold ones -- ``actor_name``, ``bounded``, ``instance``, ``kinds`` -- sorted
    in among them spread them over 144). On fan-out (S4: 10,000 cells, more than
    a core's second-level cache holds) that is about one cache line less per
    activation: under cachegrind (a 2 MiB last level) 10.8 -> 9.6 last-level misses
    per activation, instructions unchanged.
    """

    __slots__ = (
        "accepting",
        "activates",
        "asks_queued",
        "dispatcher",
        "fast_tell",
        "handled",
        "head",
        "inline_ready",
        "mailbox",
        "receive",
        "served_in",
        "serving",
    )


@mypyc_attr(allow_interpreted_subclasses=True)
class ActorCell(_TurnSlots):
    """The runtime's record of one actor; users hold its :class:`ActorRef`."""

    # Slots for what every actor sets or the serving loop reads (those of every
    # activation in _TurnSlots). Everything else is a class-level default, written
    # to the instance's ``__dict__`` (created on the first write) only by the actors
    # that need it -- watchers, children, restarts, async handlers, failures. Fewer
    # slots make a spawn cheaper and, above all, the garbage collector's walk over
    # 50,000 live actors: it visits every slot.
    __slots__ = (
        "__dict__",
        "__weakref__",
        "actor_name",
        "bounded",
        "instance",
        "kinds",
        "started",
        "state",
        "stopping_task",
        "system",
    )
    # (A compiled cell lets go of its instance, release_instance, only if told so.)
    __deletable__ = ("instance",)

    # --- class-level defaults (see above) ---
    remote: Literal[False] = False  # (another node's actor: remote/_remote_cell.py)
    parent: ActorCell | None = None  # set for a child only
    supervision: SupervisionStrategy | Decider = DEFAULT_SUPERVISION  # set if another is given
    shutdown: float = _stopping.DEFAULT_SHUTDOWN  # seconds (T27); set if another is given
    restart_type: RestartType = DEFAULT_RESTART_TYPE  # set if another is given
    # The factory (called again for each restart, with args): set unless it is the
    # instance's class called with no arguments (the common spawn(Cls)).
    factory: Any = None
    args: tuple[Any, ...] = ()
    popped = 0  # items ever taken from the front of the deque (once it is used)
    # Tells from other threads waiting in the system's foreign inbox: while any
    # does, the tell fast paths are off (_core._foreign).
    foreign_pending = 0
    deferred_notices: list[Notice] | None = None  # see _watch.tell_notice_soon
    senders: WaitingSenders | None = None  # parked in send() (BoundedCell only)
    children: dict[str | int, ActorCell] | None = None  # by name (see actor_name)
    # The class name a generated name is made of, once a restart may have changed
    # the instance's class (until then: the current class's, see ActorRef.name).
    name_prefix: str | None = None
    restart_window: RestartWindow | None = None
    registered_names: list[str] | None = None  # the registry names it holds
    # The number a node gave it when a ref to it first left for another node (0:
    # never exported): remote/_exports.py, which forgets the number when it stops.
    export_number = 0
    group_window: RestartWindow | None = None  # its children's group restarts (T28)
    group_restart: _restarting.GroupRestart | None = None  # the one it is part of
    watchers: dict[ActorCell, None] | None = None  # who watches it, in the order they began
    watching: set[ActorCell | ForeignCell] | None = None  # whom this actor watches
    stop_error: BaseException | None = None
    timers: dict[Any, Timer] | None = None  # the timers it started, by key (or self)
    # Where the asks queued in the deque are, as values of ``popped`` (below): the
    # serving loop handles the tells before an ask without checking each item.
    ask_at: deque[int] | None = None
    # Queued items moved aside by an immediate stop, until the cleanup has run, and
    # how many of them are asks (a cleanup group without one needs no check per item).
    stranded: deque[Any] | None = None
    stranded_asks = 0
    serving_task: trio.lowlevel.Task | None = None  # the serving or restart task, once running
    restart_delay = 0.0
    handler_scope: trio.CancelScope | None = None  # of a running async handler
    withdrawn = 0
    withdrawn_queued = 0  # withdrawn envelopes still in the mailbox, to be skipped
    failed_back = 0
    # Dead letters of this actor's messages, by reason.
    stopped_letters = 0
    stranded_letters = 0
    overflow_letters = 0
    failures = 0
    expected_errors = 0  # handled messages whose handler raised an expected error
    restarts = 0
    longest_turn = 0  # messages (turns of more than one message; see statistics())
    longest_turn_time = 0.0  # seconds, as the trio thread measured its turns
    sampled_turn_time = 0.0  # seconds, as the turn sampler saw one (its only writer)
    # Why its latest restart began: its failure, a sibling's under a group strategy,
    # or its own stop (restart="permanent") -- the fresh instance's restarted_after.
    # (Not its latest failure: an on_stop failing in the restart is not the cause.)
    restart_cause: BaseException | None = None
    _drained: trio.Event | None = None
    _stopped: trio.Event | None = None
    _task_done: trio.Event | None = None

    def __init__(
        self, system: Host, instance: ActorBase, kinds: HandlerKinds, name: str | int
    ) -> None:
        # The system sets parent, supervision, factory and args where they are not
        # the class-level defaults (ActorSystem.spawn).
        self.system = system
        # The mailbox's bound (a slot, not a class-level default: the tell path reads
        # it on every activation). BoundedCell.set_bound sets it.
        self.bounded: Bounded | None = None
        self.dispatcher = system._dispatcher
        self.instance = instance
        self.kinds = kinds
        # An async receive is bound now; a plain one on its first activation (see
        # Dispatcher._prepare_inline): a bound method is one more object per spawn.
        self.receive: Any = instance.receive if kinds.receive_async else None
        # The name given at spawn, or the serial number its generated name is made
        # of (an int; see ActorRef.name). Also its key among its siblings.
        self.actor_name = name
        if kinds.has_on_start:
            self.state = _STARTING
            self.started = False
        else:
            # Nothing to run before the first message: born started, in the state
            # the table gives STARTING on STARTED (what mark_started would do).
            self.state = _BORN_STARTED
            self.started = True
        self.accepting = True
        # The mailbox is the head slot followed by the deque. The message that wakes
        # an idle actor goes to the head slot; the deque is allocated on the first
        # backlog and kept.
        self.head: Any = NO_MESSAGE
        self.mailbox: deque[Any] | None = None
        self.serving = _IDLE  # who serves the mailbox (_core._state.Serving)
        # The tell paths (refresh_tell_paths, as it would compute them now).
        self.fast_tell = False
        self.activates = not kinds.needs_task
        self.asks_queued = 0  # Ask envelopes in the mailbox (withdrawn ones too)
        self.served_in = 0  # the dispatcher round whose turn left it work to do
        # Started and bound, with a plain receive, in a state that serves: the
        # dispatcher can serve it inline (advance clears it when the state stops
        # serving; a fresh instance is bound again).
        self.inline_ready = False
        self.stopping_task: trio.lowlevel.Task | None = None  # runs the stop sequence
        self.handled = 0

    @property
    def needs_task(self) -> bool:
        """Whether a task must serve it: its ``receive`` is async, or its async
        ``on_start`` has not run yet."""
        kinds = self.kinds
        return kinds.receive_async or (kinds.on_start_async and not self.started)

    @property
    def served_by_task(self) -> bool:
        """Whether a serving task or a restart task owns it (from the moment the task
        is started, before it first runs)."""
        return self.serving is _TASK or self.serving is _RESTART

    @property
    def ref(self) -> ActorRef:
        """A ref to this actor (a new handle each time; refs are values)."""
        return new_ref(self)

    @property
    def name(self) -> str:
        """:attr:`ActorRef.name`."""
        name = self.actor_name
        if type(name) is int:  # generated: <class name>-<serial>, made when asked
            return f"{self.name_prefix or self.kinds.class_name}-{name}"
        return name  # type: ignore[return-value]

    @property
    def path(self) -> str:
        """:attr:`ActorRef.path`."""
        parent = self.parent
        return f"{parent.path if parent is not None else 'system'}/{self.name}"

    def __repr__(self) -> str:
        return f"<ActorCell {self.path} {self.state.value}>"

    def describe(self) -> str:
        return f"actor {self.path}"

    def snapshot(self) -> ActorStatistics:
        """:meth:`ActorRef.statistics`."""
        mailbox = self.mailbox
        bounded = self.bounded
        return ActorStatistics(
            path=self.path,
            state=self.state.value,
            mailbox_depth=(self.head is not NO_MESSAGE)
            + len(mailbox or ())
            - self.withdrawn_queued,
            mailbox_capacity=None if bounded is None else bounded.capacity,
            senders_waiting=len(self.senders or ()),
            handled=self.handled,
            dead_letters=DeadLetterCounts(
                self.stopped_letters, self.stranded_letters, self.overflow_letters
            ),
            withdrawn=self.withdrawn,
            failed_back=self.failed_back,
            failures=self.failures,
            expected_errors=self.expected_errors,
            restarts=self.restarts,
            # A one-message turn (the common activation) is not counted as it
            # happens: it would cost every activation a comparison.
            longest_turn_messages=max(self.longest_turn, 1 if self.handled else 0),
            longest_turn_seconds=max(self.longest_turn_time, self.sampled_turn_time),
            timers=sum(1 for timer in (self.timers or {}).values() if timer.active),
        )

    # --- messages -----------------------------------------------------------------

    def tell(self, message: Any) -> None:
        """:meth:`ActorRef.tell` past its fast paths: the actor is busy, refusing, or
        the caller is another thread."""
        if get_ident() != self.dispatcher.thread_id:
            self.system._foreign.put(self, message)  # in order with its other tells
        else:
            self.tell_forwarded(message)

    def tell_forwarded(self, message: Any) -> None:
        """A tell in the trio thread, past the fast paths (or one from another
        thread, reaching it in the order told): queued, or a dead letter."""
        if self.accepting:
            self.enqueue(message)
        else:
            self.tell_refused(message)

    def tell_all_forwarded(self, messages: list[Any]) -> None:
        """:meth:`tell_forwarded` of each of ``messages``, in order (the tells of one
        message from another node, in the trio thread): once appending is all a
        tell has to do (``fast_tell``, as :meth:`ActorRef.tell` reads it), the rest
        are appended at once."""
        for index, message in enumerate(messages):
            if self.fast_tell:
                self.mailbox.extend(messages[index:] if index else messages)  # type: ignore[union-attr]
                return
            self.tell_forwarded(message)

    def tell_refused(self, message: Any) -> None:
        """A tell to an actor that no longer accepts: a dead letter (trio thread)."""
        self.stopped_letters += 1
        self.system.dead_letters.record(self.ref, message, "stopped")

    def refresh_tell_paths(self) -> None:
        """Recompute the two flags the tell fast paths read (:meth:`ActorRef.tell`):
        their one definition. Unless a tell from another thread is still pending
        (then both stay off until it is delivered, _core._foreign). The needs_task
        property is read before the test: from the test on there is no call, so no
        other thread can queue a tell in between.

        * ``fast_tell``: appending to the deque is all a tell has to do -- the actor
          accepts, is unbounded, someone serves it, and its deque is allocated;
        * ``activates``: a tell while it is idle may activate it inline (head slot,
          run queue) -- it accepts, is unbounded, and is served inline.
        """
        inline = not self.needs_task
        if not self.foreign_pending:
            unchecked = self.accepting and self.bounded is None
            self.activates = unchecked and inline
            self.fast_tell = unchecked and self.serving is not _IDLE and self.mailbox is not None

    def close_tell_paths(self) -> None:
        """Turn both tell fast paths off (until :meth:`refresh_tell_paths`): tells
        from other threads wait in the foreign inbox while the runtime rewrites the
        mailbox, or for good once the actor stops accepting."""
        self.activates = self.fast_tell = False

    def enqueue(self, item: Any) -> None:
        """Queue ``item`` (the actor accepts) and make sure someone serves it."""
        if self.serving is _IDLE:
            self.head = item  # idle: the mailbox is empty
            self.dispatcher.schedule(self)
        else:
            mailbox = self.mailbox
            if mailbox is None:
                mailbox = self.mailbox = deque((item,))
                self.refresh_tell_paths()  # opened once the item is in
                return
            deque_append(mailbox, item)  # (_native.py)

    def has_queued(self) -> bool:
        return self.head is not NO_MESSAGE or bool(self.mailbox)

    def pop_next(self) -> Any:
        """Take the oldest queued item (the caller checked :meth:`has_queued`)."""
        item = self.head
        if item is not NO_MESSAGE:
            self.head = NO_MESSAGE
            return item
        item = deque_popleft(self.mailbox)  # type: ignore[arg-type] # (_native.py)
        if isinstance(item, Ask):  # an ask or a timer's tick
            deque_popleft(self.ask_at)  # type: ignore[arg-type]
        self.popped += 1
        return item

    def set_idle(self) -> None:
        """Whoever served the actor found its mailbox empty (or cannot serve it any
        more): nobody serves it now."""
        hand_over(self, _IDLE)
        if not self.accepting:
            _stopping.went_idle_refusing(self)

    def ask_message(self, message: Any) -> Coroutine[Any, Any, Any]:
        """:meth:`ActorRef.ask`: check the call, and return the coroutine that asks.

        A plain function, not a coroutine of its own: ``ActorRef.ask`` awaits what
        it returns, one coroutine level less on every ask (~60 ns of S2's ~4 µs).
        The checks raise at that await, as they would inside a coroutine.
        """
        task = current_task_of(self.system, "ask")
        if task is self.serving_task:
            raise ActorError(
                f"{self.path} asked itself from its own handler, which would deadlock; "
                "call the method directly or tell yourself instead"
            )
        if not self.accepting:
            return self._refuse_ask()
        if self.inline_ready and self.serving is _IDLE:
            # Idle, started, plain receive: answered in the asker's own task.
            return _idle_ask.ask_idle(self, message, task)
        return self.queue_ask(message, task)

    async def _refuse_ask(self) -> NoReturn:
        """Fail an ask to an actor that no longer accepts (after a checkpoint)."""
        try:
            await trio.lowlevel.checkpoint()
        except trio.Cancelled:
            self.note_withdrawn()  # cancelled before it could even be refused
            raise
        self.failed_back += 1
        raise self._ask_refused()

    def _ask_refused(self) -> ActorStopped:
        return ActorStopped(f"{self.path} is {self.state.value}; ask not accepted")

    async def queue_ask(
        self, message: Any, task: trio.lowlevel.Task, ask: Ask | None = None
    ) -> Any:
        """Queue an ask behind the mailbox and wait for its answer. A checkpoint.
        ``ask``: the envelope to queue (a pool's, which hears when the handler is
        done with it), if not a new :class:`Ask`."""
        if ask is None:
            ask = Ask(self, message, task)
        self.queue_envelope(ask)
        return await ask.wait()

    def queue_envelope(self, envelope: Ask) -> None:
        """Queue an ask or a timer's tick, noting its position (the actor accepts)."""
        self.asks_queued += 1
        if self.serving is _IDLE:
            self.enqueue(envelope)  # idle: to the head slot (no fast path is open)
            return
        # Behind others, in the deque: note where. The position and the append must
        # see the same deque, so no other thread's fast-path tell may land between
        # them (there are calls in between): those wait in the foreign inbox meanwhile.
        self.close_tell_paths()
        if self.ask_at is None:
            self.ask_at = deque()
        self.ask_at.append(self.popped + len(self.mailbox or ()))
        self.enqueue(envelope)
        self.refresh_tell_paths()

    def queue_tick(self, tick: Notice) -> None:
        """A timer fired for this actor (which accepts messages): queue its tick."""
        self.queue_envelope(tick)

    def accept_ask(self, envelope: Ask) -> bool:
        """Queue an ask whose asker is not a task of this system (another node's):
        as :meth:`queue_ask` would, but nothing waits here -- the envelope itself
        delivers the answer, or the refusal (``ActorStopped`` at once if the actor
        does not accept). Never a checkpoint. Returns False if this kind of actor
        takes asks only from a task (a pool: the caller asks from a task instead)."""
        if self.accepting:
            self.queue_envelope(envelope)
        else:
            self.failed_back += 1
            envelope.fail(self._ask_refused())
        return True

    async def send_message(self, message: Any) -> None:
        """:meth:`ActorRef.send` to an unbounded mailbox: a tell that is a checkpoint."""
        current_task_of(self.system, "send")
        await self.send_checkpoint()
        if not self.accepting:
            await self.refuse_send()
        self.enqueue(message)
        await trio.lowlevel.cancel_shielded_checkpoint()

    async def send_checkpoint(self) -> None:
        """The cancel point at the start of ``send``: cancelled, it sent nothing."""
        try:
            await trio.lowlevel.checkpoint_if_cancelled()
        except trio.Cancelled:
            self.note_withdrawn()
            raise

    async def refuse_send(self) -> None:
        """Fail a ``send`` to an actor that no longer accepts (after a schedule point)."""
        self.failed_back += 1
        await trio.lowlevel.cancel_shielded_checkpoint()
        raise ActorStopped(f"{self.path} is {self.state.value}; send not accepted")

    def queue_notice(self, notice: Notice) -> None:
        """Queue ``notice`` if the actor accepts; if not, it ends at once (its
        sender is told) and its message is a dead letter."""
        if self.accepting:
            self.queue_envelope(notice)
        else:
            notice.take_back()
            self.tell_refused(notice.message)

    # Tells from another node are tracked until they end here by notices: in a
    # plain mailbox (first in, first out) the last tell of each message to an actor
    # is enough; where each tell may end apart from the others -- a bounded mailbox
    # drops any of them when full, a pool's workers end them in any order -- each is
    # tracked (remote/_taken_in.py). (A ClassVar: its subclasses override it.)
    each_tell_tracked: ClassVar[bool] = False

    def queue_tracked(self, notice: Notice, sending: bool) -> None:
        """Queue a tell from another node, tracked until it ends here by ``notice``
        (its sender, if any, is told once: handled, failed, or a dead letter);
        ``sending``: it came from a ``send``. Never a checkpoint."""
        self.queue_notice(notice)

    def mark_started(self) -> None:
        """``on_start`` finished (or there is none): serve messages from now on."""
        if self.group_restart is not None:
            self.group_restart.leave(self)  # started: the next member's turn (T28)
        self.started = True
        self.refresh_tell_paths()
        if self.state is _STARTING:
            advance(self, LifecycleEvent.STARTED)
        if self.parent is not None:
            self.parent.child_started(self)

    def note_turn(self, seconds: float) -> None:
        """A turn took ``seconds``, longer than any before it (the caller checked):
        the actor's longest, and perhaps the system's."""
        self.longest_turn_time = seconds
        system = self.system
        if seconds > system.longest_turn_time:
            system.longest_turn_time = seconds
            system.longest_turn_path = self.path

    def release_instance(self) -> None:
        """The actor has stopped: let go of its instance (and its bound ``receive``).

        The instance refers to its cell, so the two were a reference cycle that only
        the cyclic garbage collector freed: a system of 10,000 stopped actors left
        50,000 objects to a full collection, which then also scattered the next
        system's objects in memory. Released, a stopped actor is freed by reference
        counting, as soon as nothing else holds it. (A pool keeps its instance: its
        statistics read its configuration.)"""
        del self.instance
        self.receive = None

    def child_finished(self, child: ActorCell) -> None:
        """``child`` has stopped (a pool keeps its worker's counts). Nothing to do
        for most actors."""

    def child_started(self, child: ActorCell) -> None:
        """``child``'s ``on_start`` has finished, at its spawn or after a restart
        (a pool frees a balancing worker then). Nothing to do for most actors."""

    def note_withdrawn(self) -> None:
        self.withdrawn += 1

    def withdraw(self, envelope: Ask) -> None:
        """A queued ask (or notice) was withdrawn: it stays queued, to be skipped --
        until the withdrawn envelopes outnumber the live entries, when the deque is
        compacted (``_core/_compaction.py``). Each compaction removes at least half of what
        it walks, so it costs O(1) per withdrawal, amortised, and asks timing out
        behind a stuck handler cannot grow the mailbox without bound."""
        self.withdrawn += 1
        if self.accepting or self.state is _DRAINING:  # (not among the stranded)
            withdrawn = self.withdrawn_queued = self.withdrawn_queued + 1
            if (
                withdrawn >= _compaction.COMPACT_AT_LEAST
                and 2 * withdrawn > len(self.mailbox or ())
                and self.serving is not _DISPATCHER
            ):
                _compaction.compact(self)

    def skipped_withdrawn(self) -> None:
        """The serving loop reached a withdrawn envelope and skipped it."""
        self.withdrawn_queued -= 1

    # --- stopping: the code is _core/_stopping.py's, called here as methods (see the
    # module docstring for why they are methods). Each is a method that calls the
    # function, not the function bound as a class attribute: a cell compiled with
    # mypyc (the optional compiled kernel) can only have methods of its own. (The
    # functions are then bound in their place, for interpreted callers:
    # CALLS_THROUGH, below.)

    async def stop_and_wait(self, *, drain: bool) -> None:
        await _stopping.stop_and_wait(self, drain=drain)

    def request_stop(self, *, drain: bool) -> None:
        _stopping.request_stop(self, drain=drain)

    async def wait_terminated(self) -> Terminated:
        return await _stopping.wait_terminated(self)

    def begin_stop(self, *, drain: bool, cancel_handler: bool, stop_task: bool = True) -> None:
        _stopping.begin_stop(self, drain=drain, cancel_handler=cancel_handler, stop_task=stop_task)

    def strand(self) -> None:
        _stopping.strand(self)

    def wake_drain_waiter(self) -> None:
        _stopping.wake_drain_waiter(self)

    async def wait_drained(self) -> None:
        await _stopping.wait_drained(self)

    # --- restarting: _core/_restarting.py's, called as above ---

    def hand_to_restart(self) -> None:
        _restarting.hand_to_restart(self)

    def restart_group(
        self,
        failed: ActorCell,
        strategy: OneForAll | RestForOne,
        delay: float,
        error: BaseException,
    ) -> None:
        _restarting.restart_group(self, failed, strategy, delay, error)

    def end_timers(self) -> None:
        """End every timer this actor started (it stops or restarts)."""
        if self.timers:
            cancel_timers(self)

    async def wait_not_served(self) -> None:
        """Wait until no task serves this actor (a serving or a restart task). A
        checkpoint if one does."""
        while self.served_by_task:
            if self._task_done is None:
                self._task_done = trio.Event()
            await self._task_done.wait()

    def serving_task_done(self) -> None:
        """The serving (or restart) task is finishing: wake whoever waits for it. The
        task then hands the actor over (:func:`hand_over`) before it yields again."""
        self.serving_task = None
        if self._task_done is not None:
            self._task_done.set()
            self._task_done = None

    async def wait_stopped(self) -> None:
        """Wait until the actor is STOPPED (no checkpoint if it is already)."""
        if self.state is not _STOPPED:
            if self._stopped is None:
                self._stopped = trio.Event()
            await self._stopped.wait()


# The methods above that only call a function of _stopping or _restarting (which
# are never compiled). Called from interpreted code, each is a call more than the
# function -- in the pure build a frame -- and an exit's stop calls two (callgrind,
# `python -m benchmarks.ablation --only spawn-exit`, pure: 40,825 -> 39,623
# instructions per actor spawned and stopped with the functions bound in their
# place; the record cfcef21, whose class bound them so: 39,817).
CALLS_THROUGH: Final = (
    ("stop_and_wait", _stopping.stop_and_wait),
    ("request_stop", _stopping.request_stop),
    ("wait_terminated", _stopping.wait_terminated),
    ("begin_stop", _stopping.begin_stop),
    ("strand", _stopping.strand),
    ("wake_drain_waiter", _stopping.wake_drain_waiter),
    ("wait_drained", _stopping.wait_drained),
    ("hand_to_restart", _restarting.hand_to_restart),
    ("restart_group", _restarting.restart_group),
)


def _bind_the_functions() -> bool:
    """Make each method of :data:`CALLS_THROUGH` the function it calls, for callers
    that look it up on the class (the same call, one less); returns whether it did.
    Compiled, the class allows it too (mypyc makes a class that interpreted classes
    may extend a mutable type), and compiled callers still call the methods, which
    call the same functions; an immutable class (``TypeError``) keeps its methods."""
    for name, function in CALLS_THROUGH:
        try:
            setattr(ActorCell, name, function)
        except TypeError:
            return False
    return True


FUNCTIONS_BOUND: Final = _bind_the_functions()


protect_module(globals())

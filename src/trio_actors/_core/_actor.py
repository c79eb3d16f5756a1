"""The kernel's half of the :class:`~trio_actors.Actor` base class.

An actor is a plain object with a ``receive`` method. The runtime guarantees that at
most one of its handlers (``on_start``, ``receive``, ``on_stop``) runs at a time, so
its state needs no locks. Users never call an actor's methods directly; they hold an
:class:`~trio_actors.ActorRef` and send it messages.
"""

from __future__ import annotations

from threading import get_ident
from typing import TYPE_CHECKING, Any, ClassVar

from .._errors import ActorError
from .._interrupts import protect_module
from .._supervision import (
    ONE_FOR_ONE,
    GroupStrategy,
)
from ._failure import stopped_itself
from ._timers import Timer, check_delay
from ._watch import unwatch, watch

if TYPE_CHECKING:
    from ._cell import ActorCell
    from ._ref import ActorRef, ForeignCell


def cell_of_ref(ref: object, what: str = "watch()/unwatch()") -> ActorCell | ForeignCell:
    """The cell of ``ref``, a local actor's or another node's."""
    from ._ref import ActorRef

    if type(ref) is not ActorRef:
        raise TypeError(f"{what} needs an ActorRef, got {ref!r}")
    return ref._cell


class ActorBase:
    """The kernel's half of :class:`~trio_actors.Actor`: the actor's own life.

    Its handlers and their hooks, its ref and children, stopping itself, death watch
    and timers. :class:`~trio_actors.Actor` (``actors/_actor.py``) adds its place in
    the system: :attr:`~trio_actors.Actor.system` and
    :meth:`~trio_actors.Actor.spawn`. The kernel knows actors by this class;
    applications subclass :class:`~trio_actors.Actor`.
    """

    __slots__ = ("__dict__",)

    # Set (in the instance) when the instance is spawned; None before. A class-level
    # default rather than a slot, so that spawn can check it without an exception.
    _trio_actors_cell: ActorCell | None = None

    restarted_after: BaseException | None = None
    """For an instance a ``Restart`` made: the failure that led to it (set before its
    ``on_start`` runs; under a parent's ``OneForAll`` or ``RestForOne``, the failure
    of the sibling that restarted the group); ``None`` for the first instance. The old
    instance's watches are not carried over: a fresh instance watches what its
    ``on_start`` watches."""

    expected_errors: ClassVar[tuple[type[Exception], ...]] = ()
    """Exceptions that are replies, not failures (a tuple of ``Exception`` classes).

    When ``receive`` raises one of these (or a subclass), the asker gets it, with
    its type, and nothing else happens: no supervision, no restart, no failure
    counted, no log -- the instance keeps its state and goes on with its next
    message, as after a return. It is counted in the statistics' ``expected_errors``.
    A tell has no asker: its expected error is discarded like a tell's return
    value (and counted). Only ``receive`` has replies: an exception from
    ``on_start`` is a failure whatever its type. ::

        class Account(Actor):
            expected_errors = (Overdraft,)

    pykka sends an ask's exception to the caller and keeps the actor, Akka has
    ``StatusReply.Error``, Erlang replies ``{error, Reason}``: this is that.
    """

    children_strategy: ClassVar[GroupStrategy] = ONE_FOR_ONE
    """What a child's restart does to its siblings (T28), as an OTP supervisor's
    ``strategy``: :class:`~trio_actors.OneForOne` (the default: the child restarts
    alone), :class:`~trio_actors.OneForAll` (every sibling restarts with it) or
    :class:`~trio_actors.RestForOne` (it and the siblings spawned after it). Under
    the last two the intensity is the group's, counted in this actor. ::

        class Pipeline(Actor):
            children_strategy = RestForOne(max_restarts=3, within=5.0)
    """

    def receive(self, message: Any) -> Any:
        """Handle one message; the return value is the reply to an ``ask``.

        May be ``async def``: it then runs in a task of its own while it awaits, and
        is cancelled if its asker is cancelled (the actor goes on with its next
        message) or the actor is stopped. A plain ``receive`` cannot be
        interrupted. An exception raised here reaches the asker of the
        message (same type). Unless it is one of :attr:`expected_errors` (a reply),
        it is also a failure of the actor: it is logged and counted, and the
        actor's supervision strategy decides what happens next (by default a
        restart with a fresh instance).
        """
        raise NotImplementedError  # pragma: no cover - spawn refuses such actors

    def on_start(self) -> Any:
        """Called once before the first message is handled (plain or ``async def``).

        An ``async`` ``on_start`` is cancelled if the actor is stopped meanwhile;
        the instance then never started, so its ``on_stop`` does not run.

        Messages told before or during ``on_start`` are kept and handled after it.
        An exception here is a failure of the actor, handled by its supervision
        strategy like one in ``receive``.
        """

    def on_stop(self) -> Any:
        """Called once per started instance when it goes (plain or ``async def``).

        On a stop it runs after the children have stopped and the stranded mailbox
        has been cleaned up; on a restart it runs on the old instance, after its
        children have stopped. An exception here is
        logged and recorded; the actor still ends stopped. If the whole system is
        being cancelled, an ``async`` ``on_stop`` sees ``Cancelled`` at its first
        checkpoint.
        """

    @property
    def ref(self) -> ActorRef:
        """This actor's own :class:`~trio_actors.ActorRef` (set before ``on_start``)."""
        return self._cell().ref

    @property
    def children(self) -> tuple[ActorRef, ...]:
        """This actor's live children, oldest first (a snapshot; Akka's
        ``context.children``). A child is here from its ``spawn`` until it has
        stopped."""
        return tuple(child.ref for child in (self._cell().children or {}).values())

    @children.setter
    def children(self, value: object) -> None:
        raise AttributeError(
            f"{type(self).__qualname__}.children is the runtime's (read-only: this actor's "
            "live children); give your own attribute another name"
        )

    def child(self, name: str) -> ActorRef | None:
        """The live child called ``name``, or ``None`` (Akka's ``context.child``).

        Raises:
            TypeError: ``name`` is not a str.
        """
        if not isinstance(name, str):
            raise TypeError(f"child() needs a child's name (a str), got {name!r}")
        children = self._cell().children or {}
        found = children.get(name)  # an explicit name is its key
        if found is None:  # a generated name's key is its serial number
            found = next((c for c in children.values() if c.name == name), None)
        return None if found is None else found.ref

    def stop(self) -> None:
        """Ask for this actor's own stop once the current message returns.

        Never blocks and never a checkpoint. Messages still queued are stranded
        (asks fail with ``ActorStopped``, tells become dead letters), then
        ``on_stop`` runs. Calling it again, or while already stopping, does nothing;
        while draining (``stop(drain=True)``) it ends the drain, and the rest of
        the queue is stranded.

        An actor spawned with ``restart="permanent"`` is restarted instead (OTP's
        permanent child, restarted after a normal exit too): a fresh instance, the
        mailbox kept, counted in its restart intensity. A stop through its ref
        (``ref.stop()``, its parent's stop, the system's exit) stops it for good.
        """
        cell = self._cell_here("stop")
        if cell.restart_type == "permanent" and cell.accepting:
            if cell.state.serves:
                stopped_itself(cell)
            # (restarting already -- a second call in the same handler: nothing)
        else:
            cell.begin_stop(drain=False, cancel_handler=False)

    def tell_after(
        self, delay: float, message: Any, *, to: ActorRef | None = None, key: Any = None
    ) -> Timer:
        """Tell ``message`` to this actor (or ``to``) once, ``delay`` seconds of trio
        clock from now. Never a checkpoint.

        Returns a :class:`~trio_actors.Timer`; ``timer.cancel()`` withdraws it, even
        if its message is already queued. The timer ends when this actor stops or
        restarts. Starting a timer with the ``key`` of an active one replaces it.

        Raises:
            TypeError, ValueError: ``delay`` is not a number of seconds ``>= 0``, or
                ``to`` is not an ``ActorRef``.
            ActorError: this actor is not running (stopping, restarting, ...).
        """
        return self._start_timer("tell_after", delay, message, None, to, key)

    def tell_every(
        self,
        interval: float,
        message: Any,
        *,
        to: ActorRef | None = None,
        key: Any = None,
        first: float | None = None,
    ) -> Timer:
        """Tell ``message`` to this actor (or ``to``) every ``interval`` seconds of
        trio clock, the first time after ``first`` seconds (default: ``interval``).
        Never a checkpoint.

        Ticks stay on the grid ``first + k * interval``. No pile-up: while the
        previous tick is still queued, a due tick is skipped (counted in
        ``timer.skipped``); if the system was too busy to send ticks on time, one
        overdue tick is sent late and the others missed are skipped. Cancelling,
        stopping and restarting as for :meth:`tell_after`.

        Raises:
            TypeError, ValueError: ``interval`` is not a number of seconds ``> 0``
                (or ``first`` not ``>= 0``), or ``to`` is not an ``ActorRef``.
            ActorError: this actor is not running (stopping, restarting, ...).
        """
        period = check_delay("tell_every() interval", interval, positive=True)
        delay = period if first is None else first
        return self._start_timer("tell_every", delay, message, period, to, key)

    def _start_timer(
        self,
        what: str,
        delay: object,
        message: Any,
        interval: float | None,
        to: ActorRef | None,
        key: Any,
    ) -> Timer:
        cell = self._cell_here(what)
        seconds = check_delay(f"{what}() delay", delay, positive=False)
        target = cell if to is None else cell_of_ref(to, f"{what}(to=...)")
        if target.remote:
            raise TypeError(
                f"{what}(to=...) takes an actor of this system; {target.path} is another "
                "node's (start the timer without to= and tell it from the tick's handler)"
            )
        if not cell.state.may_start_timers:
            raise ActorError(
                f"{cell.path} cannot start a timer: it is {cell.state.value} (its timers "
                "end when it stops or restarts)"
            )
        return cell.system._timers().start(cell, target, message, seconds, interval, key)

    def watch(self, ref: ActorRef) -> None:
        """Get one :class:`~trio_actors.Terminated` when ``ref``'s actor stops.

        Never a checkpoint. The notice arrives through this actor's mailbox, in order
        with other messages, exactly once per stop, whatever the reason; at once if
        the actor has already stopped. Watching a live actor twice is the same as
        once; each ``watch`` of an actor that has already stopped delivers one
        ``Terminated``.

        An actor of another node is watched through its node: the ``Terminated``
        comes when it stops there, or with ``error`` a
        :class:`~trio_actors.NodeDown` when its node dies or cannot be reached.

        Raises:
            TypeError: ``ref`` is not an :class:`~trio_actors.ActorRef`.
        """
        watch(self._cell_here("watch"), cell_of_ref(ref))

    def unwatch(self, ref: ActorRef) -> None:
        """Stop watching ``ref``; a ``Terminated`` for it that is queued is withdrawn.

        Never a checkpoint.
        """
        unwatch(self._cell_here("unwatch"), cell_of_ref(ref))

    def _cell(self) -> ActorCell:
        cell = self._trio_actors_cell
        if cell is None:
            raise ActorError(
                f"{type(self).__name__} instance is not spawned yet: ref, system and "
                "stop() are available from on_start onwards, not in __init__"
            )
        return cell

    def _cell_here(self, operation: str) -> ActorCell:
        """:meth:`_cell`, checked to be called in its system's trio thread: a method
        that changes the actor's state refuses another thread before it touches
        anything."""
        cell = self._cell()
        if get_ident() != cell.system.thread_id:
            raise ActorError(
                f"{type(self).__name__}.{operation}() called from another thread; an "
                "actor's methods run in its system's trio thread (from a thread, "
                "use trio.from_thread.run_sync)"
            )
        return cell


protect_module(globals())

__all__ = ["ActorBase", "cell_of_ref"]

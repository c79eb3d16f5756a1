"""The :class:`ActorRef`: the only handle users hold on an actor.

A ref is a handle, not the actor's record: one slot that points at the runtime's
record of the actor (its *cell*, ``_cell.py``), and the public operations. Nothing a
ref exposes reaches the actor instance, its mailbox or the runtime's bookkeeping;
users cannot construct one (refs come from ``spawn``), copy one into a second
handle, or pickle one (until refs get a wire form with actors across processes).

Refs are values: two refs to the same actor compare equal and hash alike (a
``Terminated.ref`` equals the ref ``spawn`` returned), and the cell does not keep a
ref of its own -- one is made when asked (``Actor.ref``, a ``Terminated``, a dead
letter). That keeps a ref out of the actor's own footprint: a ref kept in the cell
was one more garbage-collected object per actor, and made spawning 50,000 actors
(S5) ~1.4x slower, nearly all of it the collector's walks (an in-process timing of
50,000 spawns, three runs each with the collector on and off).
A remote ref (actors across processes) will be an ``ActorRef`` too.

``tell`` keeps its fast path here, one attribute load away from the cell, rather
than a call into it.
"""

from __future__ import annotations

from collections.abc import Coroutine
from typing import TYPE_CHECKING, Any, Final, Literal, NoReturn, Protocol, final

from .._interrupts import protect_module
from ._native import deque_append
from ._state import Serving
from ._thread_mark import is_owned

if TYPE_CHECKING:
    from .._statistics import ActorStatistics
    from ._cell import ActorCell
    from ._dispatcher import Dispatcher
    from ._watch import Terminated


_IDLE: Final = Serving.IDLE
_DISPATCHER: Final = Serving.DISPATCHER


class ForeignCell(Protocol):
    """What a ref needs of a cell this system does not serve: another node's actor
    (``remote/_remote_cell.py``). A ref holds an :class:`ActorCell` or one of these.

    Its ``fast_tell`` and ``activates`` are always false, so the ref's fast paths,
    which read and write the local cell's mailbox slots, never run on it (mypy
    narrows the ref's cell to the local one by them); everything else is a call to
    the methods below, which an :class:`ActorCell` has too. ``remote`` tells the
    two apart where they differ (a local cell's is false): a watch goes through the
    foreign cell's node (``watch_from``, ``unwatch_from``, ``forget_watcher``).
    """

    @property
    def remote(self) -> Literal[True]: ...
    @property
    def fast_tell(self) -> Literal[False]: ...
    @property
    def activates(self) -> Literal[False]: ...
    @property
    def dispatcher(self) -> Dispatcher: ...  # (the local system's: its thread is compared)
    @property
    def name(self) -> str: ...
    @property
    def path(self) -> str: ...

    def tell(self, message: Any) -> None: ...
    def ask_message(self, message: Any) -> Coroutine[Any, Any, Any]: ...
    async def send_message(self, message: Any) -> None: ...
    async def stop_and_wait(self, *, drain: bool) -> None: ...
    def request_stop(self, *, drain: bool) -> None: ...
    async def wait_terminated(self) -> Terminated: ...
    def snapshot(self) -> ActorStatistics: ...
    def watch_from(self, watcher: ActorCell) -> None: ...
    def unwatch_from(self, watcher: ActorCell) -> None: ...
    def forget_watcher(self, watcher: ActorCell) -> None: ...


MADE_BY_THE_RUNTIME = object()
"""The key the runtime gives :class:`ActorRef`'s constructor (:func:`new_ref`,
``spawn``): called without it, the constructor refuses."""


@final
class ActorRef:
    """A handle on an actor: ``tell``, ``send``, ``ask``, ``stop`` and statistics.

    Refs are cheap, hashable and safe to share between actors and tasks of the same
    trio run. From another thread, ``tell`` forwards the message safely to the
    system's trio thread, keeping the order of that thread's tells; ``send``,
    ``ask``, ``stop`` and ``wait_stopped`` raise (use ``trio.from_thread.run``).
    (That guarantee relies on the GIL; on a free-threaded CPython build, reach the
    system with ``trio.from_thread.run_sync(ref.tell, message)`` instead.)
    """

    __slots__ = ("__weakref__", "_cell")

    _cell: ActorCell | ForeignCell

    def __init__(self, cell: Any = None, made_by: object = None) -> None:
        # A key, not a metaclass whose __call__ refuses (as trio's
        # NoPublicConstructor): a ref compiled with mypyc (the optional compiled
        # kernel) can have no metaclass, nor be made by object.__new__. (The pure
        # build's spawn makes its ref without this call: actors/_system.py.)
        if made_by is not MADE_BY_THE_RUNTIME:
            raise TypeError(
                f"{type(self).__module__}.{type(self).__qualname__} has no public "
                "constructor: refs come from ActorSystem.spawn() and Actor.spawn()"
            )
        self._cell = cell

    @property
    def name(self) -> str:
        """The name given at spawn, or the unique one generated for it."""
        return self._cell.name

    @property
    def path(self) -> str:
        """Where the actor lives, e.g. ``system/parent/child`` (computed when asked)."""
        return self._cell.path

    def tell(self, message: Any) -> None:
        """Send ``message`` without waiting for anything.

        Synchronous, never blocks, never a checkpoint. Messages from one sender are
        handled in the order they were told (FIFO per mailbox). To an actor that is
        stopping or stopped the message becomes a
        :class:`~trio_actors.DeadLetter` with reason ``"stopped"`` -- never an
        exception. To a full :class:`~trio_actors.Bounded` mailbox it does what the
        overflow policy says: raise :class:`~trio_actors.MailboxFull` (``"fail"``)
        or make a dead letter with reason ``"overflow"`` of the new message
        (``"drop_new"``) or the oldest queued one (``"drop_old"``).
        """
        cell = self._cell
        if cell.fast_tell:
            # Someone serves the actor, it accepts, its deque is allocated and
            # unbounded, and no tell from another thread waits in the system's
            # foreign inbox (ActorCell.refresh_tell_paths): appending is all there is
            # to do, from any thread. Under the GIL the test and the append cannot
            # be separated by another thread (no eval breaker between them).
            deque_append(cell.mailbox, message)  # type: ignore[arg-type] # (_native.py)
        elif (
            is_owned((dispatcher := cell.dispatcher).thread_mark)
            and cell.activates
            and cell.serving is _IDLE
        ):
            # An idle actor served inline (it accepts, is plain and unbounded, no
            # tell from another thread pending): the message goes to the head slot
            # and the actor to the run queue. This is ActorCell.enqueue and
            # Dispatcher.schedule inlined, with the hand-over from IDLE to DISPATCHER
            # and the tell paths it leaves (activates stays: it does not depend on
            # who serves): the path of every activation of fan-out and ping-pong,
            # where the two calls cost ~10%. The thread is checked first: from the
            # reads on there is no call, so no other thread can change the cell in
            # between (see _core._foreign). It is checked with the dispatcher's
            # thread mark rather than get_ident(): under callgrind, S4 4,918 ->
            # 4,617 and S3 4,514 -> 4,217 instructions per activation.
            cell.head = message
            cell.serving = _DISPATCHER
            cell.fast_tell = cell.mailbox is not None
            deque_append(dispatcher.run_queue, cell)
            if dispatcher.parked is not None:
                dispatcher.wake()
        else:
            cell.tell(message)  # busy, bounded, refusing, or from another thread

    async def ask(self, message: Any) -> Any:
        """Send ``message`` and wait for the handler's return value.

        A checkpoint, always. If the handler raises, the exception is raised here
        (same type). Raises :class:`~trio_actors.ActorStopped` if the actor is
        stopping or stopped, or stops before answering. To a full
        :class:`~trio_actors.Bounded` mailbox it first waits for room, whatever
        the overflow policy, in line with the waiting sends (as
        :meth:`send` does); it raises :class:`~trio_actors.MailboxFull` only if,
        once queued, a ``"drop_old"`` tell drops it.

        Cancellation: if the ask is still queued, or waiting for room, it is
        withdrawn and never handled;
        if an ``async`` handler is working on it, that handler is cancelled and the
        actor goes on with its next message; in these cases this raises
        ``Cancelled`` at once. A plain handler cannot be interrupted: a cancellation
        delivered while it runs (a ``cancel()`` from another task or from the
        handler) discards its reply and raises ``Cancelled`` when it returns. A
        *deadline* that expires while a plain handler runs is only seen by trio
        after the handler returns: if the ask was answered in the calling task
        (see below) the reply is discarded and this raises ``Cancelled``; if it was
        answered by the serving loop, the reply is already on its way and is
        returned, and the cancellation takes effect at your next checkpoint.

        An ask to an idle actor with a plain ``receive`` is handled in the calling
        task (it would be handled next anyway; this saves two task switches), so a
        plain handler must not depend on which task runs it.

        An actor asking itself from its own handler gets
        :class:`~trio_actors.ActorError` at once instead of a deadlock.
        """
        return await self._cell.ask_message(message)

    async def send(self, message: Any) -> None:
        """Send ``message``, waiting for room in a bounded mailbox (backpressure).

        A checkpoint, always. To an unbounded mailbox (or one with room) this is
        ``tell`` plus a checkpoint. To a full :class:`~trio_actors.Bounded` mailbox
        it waits until the actor has taken enough messages, whatever the overflow
        policy; waiting sends and asks are queued first come, first served, and
        while any wait, ``tell`` treats the mailbox as full (it does not overtake
        them -- except a tell under ``"drop_old"``, which drops the oldest queued
        message and is queued). When this returns, the message is queued.

        Cancellation: cancelled before or while waiting, nothing is queued and
        ``Cancelled`` is raised -- as if ``send`` had not been called.

        Raises:
            ActorStopped: the actor is stopping or stopped, or stops while this
                waits (the message was not queued).
            ActorError: an actor sending to its own full mailbox from its own
                handler (it would wait forever), or a call from another thread.
        """
        await self._cell.send_message(message)

    async def stop(self, *, drain: bool = False) -> None:
        """Stop the actor and wait until it has stopped.

        A checkpoint, always. Stopping means: no new messages are accepted; a
        running ``async`` handler is cancelled; the queued messages are stranded
        (asks fail with ``ActorStopped``, tells become dead letters with reason
        ``"stranded"``), ``cleanup_batch`` at a time; ``on_stop`` runs; then this
        returns. With ``drain=True`` the queued messages are handled first instead.

        Idempotent: concurrent calls all return once the actor has stopped.
        Cancellation ends only the waiting; the stop itself still completes.
        Awaiting your own ref's ``stop()`` from your own handler raises
        :class:`~trio_actors.ActorError` (use :meth:`Actor.stop
        <trio_actors.Actor.stop>`).
        """
        await self._cell.stop_and_wait(drain=drain)

    def stop_nowait(self, *, drain: bool = False) -> None:
        """Ask the actor to stop, without waiting: never blocks, never a checkpoint.

        The stop then runs as :meth:`stop` describes (a running ``async`` handler is
        cancelled -- unless this is called from that very handler, which then runs
        to its end, as with :meth:`Actor.stop <trio_actors.Actor.stop>`). What a
        plain handler uses to stop another actor, for example a child. Idempotent;
        :meth:`wait_stopped` waits for the end.

        Raises:
            ActorError: called from another thread (use ``trio.from_thread.run_sync``).
            RuntimeError: called outside a trio run.
        """
        self._cell.request_stop(drain=drain)

    async def wait_stopped(self) -> Terminated:
        """Wait until the actor has stopped; return its :class:`~trio_actors.Terminated`.

        A checkpoint, always (also when it has stopped already). From any task; it
        stops nothing itself. Cancellation ends only the waiting.

        Raises:
            ActorError: awaited from the actor's own handler or ``on_stop`` (it would
                wait for itself forever), or from another thread.
        """
        return await self._cell.wait_terminated()

    def statistics(self) -> ActorStatistics:
        """A snapshot of the actor's counters: an :class:`~trio_actors.ActorStatistics`.

        Never a checkpoint, and cheap: it reads counters the runtime keeps anyway.
        Works after the actor has stopped (its final counts).
        """
        return self._cell.snapshot()

    def __eq__(self, other: object) -> bool:
        if type(other) is not ActorRef:
            return NotImplemented
        return self._cell is other._cell

    def __hash__(self) -> int:
        return id(self._cell) >> 4

    def __repr__(self) -> str:
        return f"<ActorRef {self.path}>"

    def __str__(self) -> str:
        return self.path

    # A copy is the same handle (refs are immutable values). No wire form yet.
    def __copy__(self) -> ActorRef:
        return self

    def __deepcopy__(self, memo: object) -> ActorRef:
        return self

    def __reduce_ex__(self, protocol: object) -> NoReturn:
        raise TypeError(
            f"cannot pickle {self!r}: an ActorRef is a handle valid only inside the trio "
            "run of its actor system (refs that cross processes come with remote nodes)"
        )


def new_ref(cell: ActorCell | ForeignCell) -> ActorRef:
    """A ref to ``cell``'s actor (the only way to make one)."""
    return ActorRef(cell, MADE_BY_THE_RUNTIME)


def local_cell(ref: ActorRef) -> ActorCell:
    """The cell of ``ref``, an actor this process serves (as ``spawn`` returns).

    Raises:
        TypeError: ``ref`` is another node's actor.
    """
    cell = ref._cell
    if cell.remote:
        raise TypeError(f"{cell.path} is an actor of another node, not of this system")
    return cell


protect_module(globals())

__all__ = ["MADE_BY_THE_RUNTIME", "ActorRef", "ForeignCell", "local_cell", "new_ref"]

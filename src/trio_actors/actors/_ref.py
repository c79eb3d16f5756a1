"""The :class:`ActorRef`: the only handle users hold on an actor.

A ref exposes no actor state: you can only send it messages and stop it. There is
exactly one ref object per actor, and refs compare and hash by identity.

The object a user holds *is* the runtime's record of the actor: ``ActorCell``
(``_cell.py``) subclasses ``ActorRef`` and adds the state. One object per actor
instead of two saves a garbage-collected object per spawn (a collection of 50,000
actors walks every one of them) and a pointer hop and cache miss on every ``tell``.
This class holds only the public operations; the attributes they use are the
cell's.
"""

from __future__ import annotations

from threading import get_ident
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .._statistics import ActorStatistics
    from ._cell import ActorCell


class ActorRef:
    """A handle on an actor: ``tell``, ``send``, ``ask`` and ``stop``.

    Refs are cheap, hashable and safe to share between actors and tasks of the same
    trio run. From another thread, ``tell`` forwards the message safely to the
    system's trio thread; ``send``, ``ask`` and ``stop`` raise (use
    ``trio.from_thread.run``).
    (That guarantee relies on the GIL; on a free-threaded CPython build, reach the
    system with ``trio.from_thread.run_sync(ref.tell, message)`` instead.)
    """

    __slots__ = ()

    @property
    def name(self) -> str:
        """The name given at spawn, or the unique one generated for it."""
        cell: ActorCell = self  # type: ignore[assignment]
        name = cell.actor_name
        if type(name) is int:  # generated: <class name>-<serial>, made when asked
            return f"{cell.name_prefix or cell.kinds.class_name}-{name}"
        return name  # type: ignore[return-value]

    @property
    def path(self) -> str:
        """Where the actor lives, e.g. ``system/parent/child`` (computed when asked)."""
        cell: ActorCell = self  # type: ignore[assignment]
        parent = cell.parent
        return f"{parent.path if parent is not None else 'system'}/{self.name}"

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
        cell: ActorCell = self  # type: ignore[assignment]
        if cell.fast_tell:
            # The actor accepts messages and is already scheduled (in the run queue
            # or being served): appending is all there is to do. Under the GIL the
            # test and the append cannot be separated by another thread (no eval
            # breaker between them), so this path is safe from any thread.
            cell.mailbox.append(message)  # type: ignore[union-attr]
        elif (
            not cell.scheduled
            and cell.accepting
            and not cell.needs_task
            and get_ident() == (dispatcher := cell.dispatcher).thread_id
        ):
            # An idle actor served inline: the message goes to the head slot and the
            # actor to the run queue (ActorCell.enqueue, inlined: this is every
            # activation of fan-out and ping-pong).
            cell.head = message
            cell.scheduled = True
            cell.fast_tell = cell.mailbox is not None
            dispatcher.run_queue.append(cell)
            if dispatcher.parked is not None:
                dispatcher.wake()
        elif cell.accepting and get_ident() == cell.dispatcher.thread_id:
            cell.enqueue(message)
        else:
            cell.tell_refused(message)  # stopping, stopped, or another thread

    async def ask(self, message: Any) -> Any:
        """Send ``message`` and wait for the handler's return value.

        A checkpoint, always. If the handler raises, the exception is raised here
        (same type). Raises :class:`~trio_actors.ActorStopped` if the actor is
        stopping or stopped, or stops before answering, and
        :class:`~trio_actors.MailboxFull` if a full bounded mailbox refuses or drops
        the ask.

        Cancellation: if the ask is still queued it is withdrawn and never handled;
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
        cell: ActorCell = self  # type: ignore[assignment]
        return await cell.ask_message(message)

    async def send(self, message: Any) -> None:
        """Send ``message``, waiting for room in a bounded mailbox (backpressure).

        A checkpoint, always. To an unbounded mailbox (or one with room) this is
        ``tell`` plus a checkpoint. To a full :class:`~trio_actors.Bounded` mailbox
        it waits until the actor has taken enough messages, whatever the overflow
        policy; waiting senders are queued first come, first served, and while any
        wait, ``tell`` and ``ask`` treat the mailbox as full (they do not overtake
        a waiting sender -- except a tell under ``"drop_old"``, which drops the
        oldest queued message and is queued). When this returns, the message is
        queued.

        Cancellation: cancelled before or while waiting, nothing is queued and
        ``Cancelled`` is raised -- as if ``send`` had not been called.

        Raises:
            ActorStopped: the actor is stopping or stopped, or stops while this
                waits (the message was not queued).
            ActorError: an actor sending to its own full mailbox from its own
                handler (it would wait forever), or a call from another thread.
        """
        cell: ActorCell = self  # type: ignore[assignment]
        await cell.send_message(message)

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
        cell: ActorCell = self  # type: ignore[assignment]
        await cell.stop_and_wait(drain=drain)

    def statistics(self) -> ActorStatistics:
        """A snapshot of the actor's counters: an :class:`~trio_actors.ActorStatistics`.

        Never a checkpoint, and cheap: it reads counters the runtime keeps anyway.
        Works after the actor has stopped (its final counts).
        """
        cell: ActorCell = self  # type: ignore[assignment]
        return cell.snapshot()

    def __repr__(self) -> str:
        return f"<ActorRef {self.path}>"

    def __str__(self) -> str:
        return self.path


__all__ = ["ActorRef"]

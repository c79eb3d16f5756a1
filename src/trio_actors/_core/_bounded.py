"""Bounded mailboxes: the :class:`Bounded` policy and the messages waiting for room.

A bounded mailbox holds at most ``capacity`` queued messages (the message being
handled is no longer queued). What a full mailbox does with one more depends on how
it arrives:

==============================  =====================================================
arrival                         full mailbox
==============================  =====================================================
``await ref.send(m)``           waits for room (backpressure), first come first
                                served; cancellable with nothing enqueued
``await ref.ask(m)``            waits for room too, in the same line as the
                                senders (an ask that comes after a waiting send
                                gets room after it); cancellable with nothing
                                enqueued; then waits for its answer as any ask
``ref.tell(m)``, ``"fail"``     raises :class:`~trio_actors.MailboxFull`
``ref.tell(m)``, ``"drop_new"`` ``m`` becomes ``DeadLetter(reason="overflow")``
``ref.tell(m)``, ``"drop_old"`` the oldest queued message is dropped instead (a
                                tell becomes an overflow dead letter, an ask fails
                                back to its asker with ``MailboxFull``); ``m`` is
                                queued
==============================  =====================================================

The overflow policy is for ``tell``, which cannot wait; ``send`` and ``ask`` are
awaited, so they wait for room whatever the policy (a deadline on the caller's
cancel scope bounds the wait). While anything waits, the mailbox counts as full
for tells too, so a waiting ``send`` or ``ask`` is not overtaken -- except by a
tell under ``"drop_old"``, which always gets in by dropping the oldest queued
message. When a message leaves the mailbox, the oldest waiting message is queued
on its sender's behalf (the hand-off of trio's memory channels): a sender that
has resumed has been queued; an asker goes on waiting, for its answer now.

Death-watch notices (``Terminated``) are always queued, even into a full mailbox,
and never dropped: ``"drop_old"`` drops the oldest queued message that is not a
notice. Once queued, a notice counts toward the capacity like any message.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal

import attrs
import outcome
import trio

from .._interrupts import protect_module
from .._policy import positive_int
from ._envelope import Notice

Overflow = Literal["fail", "drop_new", "drop_old"]
OVERFLOW_POLICIES: tuple[Overflow, ...] = ("fail", "drop_new", "drop_old")


def _overflow(instance: Any, attribute: attrs.Attribute[str], value: object) -> None:
    if value not in OVERFLOW_POLICIES:
        raise ValueError(
            f"Bounded.overflow must be one of {', '.join(map(repr, OVERFLOW_POLICIES))}, "
            f"got {value!r}"
        )


@attrs.frozen
class Bounded:
    """A mailbox that holds at most ``capacity`` queued messages.

    Give it at spawn: ``system.spawn(Worker, mailbox=Bounded(100, overflow="drop_old"))``.

    Args:
        capacity: the most messages that may wait in the mailbox (``>= 1``).
        overflow: what a ``tell`` to a full mailbox does:
            ``"fail"`` raises :class:`~trio_actors.MailboxFull` (the default);
            ``"drop_new"`` turns the new message into
            ``DeadLetter(reason="overflow")``; ``"drop_old"`` drops the oldest
            queued message that way (a dropped ask fails back with
            ``MailboxFull``) and queues the new one. ``await ref.send()`` and
            ``await ref.ask()`` always wait for room instead.

    Raises:
        TypeError: ``capacity`` is not an int.
        ValueError: ``capacity < 1`` or an unknown ``overflow``.
    """

    capacity: int = attrs.field(validator=positive_int)
    overflow: Overflow = attrs.field(default="fail", validator=_overflow)


def full_text(path: str, bounded: Bounded, what: str) -> str:
    """The text of a :class:`~trio_actors.MailboxFull`: whose mailbox, its bound,
    what happened, and what to do about it."""
    return (
        f"the mailbox of {path} is full (capacity {bounded.capacity}, "
        f"overflow={bounded.overflow!r}): {what}; use 'await ref.send(...)' to wait "
        "for room, or a larger capacity or another overflow policy"
    )


# What an envelope waits with in WaitingSenders: its own task is parked elsewhere.
_ENVELOPE: Any = object()


class WaitingSenders:
    """The messages waiting for room in a bounded mailbox, oldest first.

    Two kinds wait in one line: a task parked in ``send`` (:meth:`wait`) with its
    message, and an ask's envelope (:meth:`add`) whose asker is parked in the
    envelope itself -- one wait for room and answer, as a queued ask's.
    """

    __slots__ = ("_waiting",)

    def __init__(self) -> None:
        # Insertion-ordered: the first key has waited longest. A send's key is its
        # task, its value the message; an envelope's key is the envelope.
        self._waiting: dict[Any, Any] = {}

    def __len__(self) -> int:
        return len(self._waiting)

    async def wait(
        self, task: trio.lowlevel.Task, message: Any, on_cancelled: Callable[[], None]
    ) -> None:
        """Park ``task`` (the caller) until :meth:`admit_oldest` or :meth:`refuse_all`.

        A checkpoint. Cancellation removes the sender with nothing enqueued and calls
        ``on_cancelled``; it is then as if ``send`` had never been called.
        """
        waiting = self._waiting
        waiting[task] = message

        def abort(raise_cancel: Any) -> trio.lowlevel.Abort:
            del waiting[task]
            on_cancelled()
            return trio.lowlevel.Abort.SUCCEEDED

        await trio.lowlevel.wait_task_rescheduled(abort)

    def add(self, envelope: Any) -> None:
        """Line ``envelope`` up behind whatever waits (an ask; its asker waits in
        it). Never a checkpoint. Whoever withdraws it calls :meth:`discard`; on
        :meth:`refuse_all` its ``fail(error)`` is called."""
        self._waiting[envelope] = _ENVELOPE

    def discard(self, envelope: Any) -> bool:
        """Take ``envelope`` out of the line; return whether it was waiting there."""
        return self._waiting.pop(envelope, None) is _ENVELOPE

    def admit_oldest(self) -> Any:
        """Take the longest-waiting message out of the line, for the caller to queue
        at once: a sender's message (the sender is resumed, to run once the caller
        has queued it) or an envelope (its asker waits on, for the answer). There
        must be one."""
        waiting = self._waiting
        key = next(iter(waiting))
        message = waiting.pop(key)
        if message is _ENVELOPE:
            return key
        trio.lowlevel.reschedule(key)
        return message

    def refuse_all(self, error: Callable[[str], BaseException]) -> tuple[int, list[Any]]:
        """Fail everything waiting with ``error("a send")`` or ``error("an ask")``:
        resume each sender with it raised, fail each envelope with it. Return how
        many were failed back (an envelope whose asker had gone is not), and the
        messages of the tells waiting as notices (``send``\\ s from another node:
        nobody to raise to) -- for the caller to make dead letters."""
        waiting, self._waiting = self._waiting, {}
        refused = 0
        tells: list[Any] = []
        for key, message in waiting.items():
            if message is not _ENVELOPE:
                trio.lowlevel.reschedule(key, outcome.Error(error("a send")))
                refused += 1
            elif type(key) is Notice:
                if key.take_back():
                    tells.append(key.message)
            else:
                refused += bool(key.fail(error("an ask")))
        return refused, tells


protect_module(globals())

__all__ = ["OVERFLOW_POLICIES", "Bounded", "Overflow", "WaitingSenders", "full_text"]

"""Bounded mailboxes: the :class:`Bounded` policy and the senders waiting for room.

A bounded mailbox holds at most ``capacity`` queued messages (the message being
handled is no longer queued). What a full mailbox does with one more depends on how
it arrives:

==============================  =====================================================
arrival                         full mailbox
==============================  =====================================================
``await ref.send(m)``           waits for room (backpressure), first come first
                                served; cancellable with nothing enqueued
``ref.tell(m)``, ``"fail"``     raises :class:`~trio_actors.MailboxFull`
``ref.tell(m)``, ``"drop_new"`` ``m`` becomes ``DeadLetter(reason="overflow")``
``ref.tell(m)``, ``"drop_old"`` the oldest queued message is dropped instead (a
                                tell becomes an overflow dead letter, an ask fails
                                back to its asker with ``MailboxFull``); ``m`` is
                                queued
``await ref.ask(m)``            as a tell, except that a refused ask fails back to
                                its asker with ``MailboxFull`` (an ask is never a
                                dead letter)
==============================  =====================================================

While senders wait, the mailbox counts as full for tells and asks too, so a
waiting ``send`` is not overtaken -- except by a tell under ``"drop_old"``, which
always gets in by dropping the oldest queued message. When a message leaves the mailbox, the oldest
waiting sender's message is queued on its behalf and that sender resumes (the
hand-off of trio's memory channels): a sender that has resumed has been queued.

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

from .._policy import positive_int

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
        overflow: what a ``tell`` (or ``ask``) to a full mailbox does:
            ``"fail"`` raises :class:`~trio_actors.MailboxFull` (the default);
            ``"drop_new"`` turns the new message into
            ``DeadLetter(reason="overflow")`` (a new ask fails with ``MailboxFull``
            instead); ``"drop_old"`` drops the oldest queued message that way (an
            ask fails back with ``MailboxFull``) and queues the new one. ``await ref.send()``
            always waits for room instead.

    Raises:
        TypeError: ``capacity`` is not an int.
        ValueError: ``capacity < 1`` or an unknown ``overflow``.
    """

    capacity: int = attrs.field(validator=positive_int)
    overflow: Overflow = attrs.field(default="fail", validator=_overflow)


class WaitingSenders:
    """Tasks parked in ``send`` until a bounded mailbox has room, oldest first."""

    __slots__ = ("_waiting",)

    def __init__(self) -> None:
        # Insertion-ordered: the first key is the sender that has waited longest.
        self._waiting: dict[trio.lowlevel.Task, Any] = {}

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

    def admit_oldest(self) -> Any:
        """Resume the longest-waiting sender and return its message for the caller to
        queue (before the sender runs again). There must be one."""
        waiting = self._waiting
        task = next(iter(waiting))
        message = waiting.pop(task)
        trio.lowlevel.reschedule(task)
        return message

    def refuse_all(self, error: Callable[[], BaseException]) -> int:
        """Resume every waiting sender with ``error()`` raised; return how many."""
        waiting, self._waiting = self._waiting, {}
        for task in waiting:
            trio.lowlevel.reschedule(task, outcome.Error(error()))
        return len(waiting)


__all__ = ["OVERFLOW_POLICIES", "Bounded", "Overflow", "WaitingSenders"]

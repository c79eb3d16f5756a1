"""The cell of an actor with a bounded mailbox.

:class:`BoundedCell` is an :class:`~trio_actors._core._cell.ActorCell` whose
``tell``, ``ask`` and ``send`` check the capacity first (the policy is in
:mod:`trio_actors._core._bounded`). It is a subclass so that an unbounded actor --
the default, and the hot path -- pays nothing for bounds: its ``tell`` never looks
at a capacity.

Two differences in how the mailbox is kept:

* every message goes to the deque (never the head slot), so the depth is
  ``len(mailbox)`` and a drop from the front is a ``popleft``;
* under ``"drop_old"`` a tell always gets in, by dropping the oldest queued
  message -- even while senders wait (they keep their place for the next room);
* the dispatcher serves a bounded mailbox one checked message at a time
  (``Dispatcher._serve_checked``), because ``"drop_old"`` may take messages from its
  front while a turn runs; each message taken hands its room to the oldest waiting
  sender at once.
"""

from __future__ import annotations

from collections import deque
from threading import get_ident
from typing import Any

import trio

from .._errors import ActorError, MailboxFull, describe_value
from .._interrupts import protect_module
from ._bounded import Bounded, WaitingSenders, full_text
from ._cell import ActorCell
from ._envelope import Ask, Notice
from ._foreign import current_task_of
from ._state import Serving


class BoundedCell(ActorCell):
    """An actor whose mailbox holds at most ``bounded.capacity`` messages."""

    __slots__ = ()

    bounded: Bounded

    def set_bound(self, bounded: Bounded) -> None:
        self.bounded = bounded
        self.refresh_tell_paths()  # neither fast path: a bounded tell checks the room
        self.senders = WaitingSenders()

    # --- arrivals -----------------------------------------------------------------

    def tell(self, message: Any) -> None:  # ActorRef.tell past its fast paths
        if get_ident() != self.dispatcher.thread_id:
            self.system._foreign.put(self, message)
        elif not self.accepting:
            self.tell_refused(message)
        elif self.is_full():
            self.overflow(message, raising=True)
        else:
            self.enqueue(message)

    def tell_forwarded(self, message: Any) -> None:
        """A tell from another thread, in the trio thread now: nobody to raise
        ``MailboxFull`` to, so an overflow under ``"fail"`` is a dead letter."""
        if not self.accepting:
            self.tell_refused(message)
        elif self.is_full():
            self.overflow(message, raising=False)
        else:
            self.enqueue(message)

    async def queue_ask(
        self, message: Any, task: trio.lowlevel.Task, ask: Ask | None = None
    ) -> Any:
        """Queue an ask and wait for its answer; into a full mailbox, wait for room
        first, in line with the waiting senders. A checkpoint. Cancelled while it
        waits for room, it leaves nothing behind (:meth:`withdraw`)."""
        if ask is None:
            ask = Ask(self, message, task)
        if self.is_full():
            assert self.senders is not None
            self.senders.add(ask)
        else:
            self.queue_envelope(ask)
        return await ask.wait()

    def accept_ask(self, envelope: Ask) -> bool:
        """An ask from another node meets the bound as :meth:`queue_ask`'s does: it
        waits for room in line (its asker's ``CANCEL`` withdraws it from there)."""
        if self.accepting and self.is_full():
            assert self.senders is not None
            self.senders.add(envelope)
            return True
        return super().accept_ask(envelope)

    def queue_envelope(self, envelope: Ask) -> None:
        self.asks_queued += 1
        if self.ask_at is None:
            self.ask_at = deque()
        self.ask_at.append(self.popped + len(self.mailbox or ()))  # always in the deque
        self.enqueue(envelope)

    each_tell_tracked = True  # (a full mailbox may drop any of them)

    def queue_tracked(self, notice: Notice, sending: bool) -> None:
        """A tell from another node: from a ``send``, into a full mailbox it waits
        for room in line with the local ``send``\\ s (its sender's window holds the
        others back); so does a tell while sends wait there (they may be its own
        node's, sent before it). Otherwise it meets the overflow policy as a tick
        does. Never a checkpoint."""
        if not self.accepting:
            self.queue_notice(notice)  # (refused: a dead letter)
        elif (sending or self.senders) and self.is_full():
            assert self.senders is not None
            self.senders.add(notice)
        else:
            self.queue_tick(notice)

    def queue_tick(self, tick: Notice) -> None:
        """A timer's tick obeys the overflow policy; with nobody to raise to, a
        ``"fail"`` overflow is a dead letter."""
        if not self.is_full():
            self.queue_envelope(tick)
        elif self.bounded.overflow == "drop_old":
            self.drop_oldest()
            self.queue_envelope(tick)
        else:
            tick.take_back()
            self.overflow_letters += 1
            self.system.dead_letters.record(self.ref, tick.message, "overflow")

    async def send_message(self, message: Any) -> None:
        """:meth:`ActorRef.send`: queue ``message``, waiting for room first."""
        task = current_task_of(self.system, "send")
        await self.send_checkpoint()
        if not self.accepting:
            await self.refuse_send()
        if not self.is_full():
            self.enqueue(message)
            await trio.lowlevel.cancel_shielded_checkpoint()
            return
        if task is self.serving_task:
            raise ActorError(
                f"{self.path} sent to its own full mailbox from its own handler, which "
                "would wait forever; use tell() (and its overflow policy) instead"
            )
        assert self.senders is not None
        await self.senders.wait(task, message, self.note_withdrawn)

    # --- the bound ------------------------------------------------------------------

    def is_full(self) -> bool:
        """No room: ``capacity`` messages queued, or sends or asks already waiting."""
        mailbox = self.mailbox
        return (mailbox is not None and len(mailbox) >= self.bounded.capacity) or bool(self.senders)

    def full_text(self, what: str) -> str:
        return full_text(self.path, self.bounded, what)

    def overflow(self, message: Any, *, raising: bool) -> None:
        """A tell found the mailbox full: apply the overflow policy."""
        policy = self.bounded.overflow
        if policy == "drop_old":
            self.drop_oldest()
            self.enqueue(message)
        elif policy == "fail" and raising:
            self.failed_back += 1
            raise MailboxFull(self.full_text(f"{describe_value(message)} was not queued"))
        else:
            self.overflow_letters += 1
            self.system.dead_letters.record(self.ref, message, "overflow")

    def drop_oldest(self) -> None:
        """Drop the oldest queued message to make room (``"drop_old"``) -- never a
        death-watch notice (``Terminated`` is delivered exactly once)."""
        mailbox = self.mailbox
        assert mailbox  # full, so not empty
        if type(mailbox[0]) is Notice and mailbox[0].sender is None:
            index = next(
                (
                    i
                    for i, item in enumerate(mailbox)
                    if not (type(item) is Notice and item.sender is None)
                ),
                None,
            )
            if index is None:
                return  # nothing but notices: the new message is queued on top
            item = mailbox[index]
            del mailbox[index]
            if self.asks_queued:  # the envelopes behind it moved up: locate them again
                self.ask_at = deque(
                    self.popped + i for i, queued in enumerate(mailbox) if isinstance(queued, Ask)
                )
        else:
            item = ActorCell.pop_next(self)  # not self.pop_next: this room is taken
        if type(item) is Notice:
            self.asks_queued -= 1
            if item.take_back():
                self.overflow_letters += 1
                self.system.dead_letters.record(self.ref, item.message, "overflow")
        elif isinstance(item, Ask):  # (or a pool's kind of ask)
            self.asks_queued -= 1
            if item.fail(MailboxFull(self.full_text("the oldest ask was dropped"))):
                self.failed_back += 1
            # (a withdrawn ask was counted when its asker was cancelled)
        else:
            self.overflow_letters += 1
            self.system.dead_letters.record(self.ref, item, "overflow")

    # --- the mailbox ------------------------------------------------------------------

    def withdraw(self, envelope: Ask) -> None:
        """A withdrawn ask (or notice) leaves the mailbox at once: its room is free.
        One still waiting for room just leaves the line: it was never queued."""
        self.withdrawn += 1
        if self.senders is not None and self.senders.discard(envelope):
            return
        mailbox = self.mailbox
        if mailbox is None:
            return
        # By identity: deque.remove() would compare user messages with ==.
        index = next((i for i, item in enumerate(mailbox) if item is envelope), None)
        if index is None:
            return  # not queued here any more (being stranded)
        del mailbox[index]
        self.asks_queued -= 1
        popped = self.popped
        self.ask_at = deque(popped + i for i, item in enumerate(mailbox) if isinstance(item, Ask))
        if self.senders:
            self.room_freed()

    def enqueue(self, item: Any) -> None:
        """Queue ``item`` in the deque (a bounded mailbox never uses the head slot)."""
        mailbox = self.mailbox
        if mailbox is None:
            mailbox = self.mailbox = deque()
        mailbox.append(item)
        if self.serving is Serving.IDLE:
            self.dispatcher.schedule(self)

    def pop_next(self) -> Any:
        item = ActorCell.pop_next(self)
        if self.senders:
            self.room_freed()
        return item

    def room_freed(self) -> None:
        """Queue the oldest waiting messages (sends and asks) while there is room."""
        senders = self.senders
        mailbox = self.mailbox
        assert senders is not None
        assert mailbox is not None
        capacity = self.bounded.capacity
        while senders and len(mailbox) < capacity:
            item = senders.admit_oldest()
            if isinstance(item, Ask):  # an ask: its asker waits on, for the answer
                self.queue_envelope(item)
            else:
                self.enqueue(item)


protect_module(globals())

__all__ = ["BoundedCell"]

"""Timers: an actor tells a message after a delay, or periodically.

``Actor.tell_after(delay, message)`` and ``Actor.tell_every(interval, message)``
return a :class:`Timer`. Timers run on the trio clock, so under
``trio.testing.MockClock`` they fire at exactly the virtual times they name.

Design
======

* **One task per system, not one per timer.** The :class:`TimerService` keeps a heap
  of deadlines and sleeps in a cancel scope whose deadline is the earliest one; a
  new, earlier timer moves that deadline (trio allows changing a scope's deadline at
  any time). The task is started with the system's first timer.
* **A tick is queued like an ask** (:class:`~trio_actors._core._envelope.Notice`):
  the serving loop finds it by position, so tells pay nothing for timers, and the
  timer keeps a handle on its queued tick. That gives two guarantees:

  - *no pile-up* (the policy is **skip**): when a periodic timer is due while its
    previous tick is still queued, no second tick is sent; the timer stays on its
    grid (``first``, ``first + interval``, ...) and counts the skipped tick.
    Ticks missed because the system was busy are skipped the same way, not sent in
    a burst to catch up;
  - *cancelled means cancelled*: once ``cancel()`` returns, the timer's message is
    never handled, even if a tick was already queued (it is withdrawn).
* **Timers belong to the actor that started them**: they all end when it stops or
  restarts (the fresh instance starts with none), including ticks already queued.
  A ``key`` names a timer: starting another with the same key replaces it.
* A tick to another actor that has stopped becomes a dead letter (reason
  ``"stopped"``) and ends the timer; a tick to a full bounded mailbox obeys its
  overflow policy (under ``"fail"`` it becomes an ``"overflow"`` dead letter:
  there is nobody to raise to).
"""

from __future__ import annotations

import heapq
import itertools
import math
from threading import get_ident
from typing import TYPE_CHECKING, Any

import trio

from .._errors import ActorError
from .._interrupts import protect_module
from ._envelope import Notice

if TYPE_CHECKING:
    from ._cell import ActorCell


MIN_INTERVAL = 1e-6
"""The shortest interval of a periodic timer, in seconds: a tick per microsecond of
trio clock is already more than any actor can take, and much shorter intervals
vanish in the clock's float rounding (the next tick would be due at once, forever)."""


def check_delay(what: str, value: object, *, positive: bool) -> float:
    """Validate a delay (``>= 0``) or a periodic interval (``positive``: at least
    :data:`MIN_INTERVAL`); return it as a float."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"{what} must be a number of seconds, got {value!r}")
    try:
        seconds = float(value)
    except OverflowError:  # an int beyond float range
        seconds = math.inf
    least = MIN_INTERVAL if positive else 0.0
    if not math.isfinite(seconds) or seconds < least:
        shortest = " (the shortest interval)" if positive else ""
        raise ValueError(
            f"{what} must be a finite number of seconds >= {least:g}{shortest}, got {value!r}"
        )
    return seconds


class Timer:
    """A handle on a timer started by :meth:`Actor.tell_after
    <trio_actors.Actor.tell_after>` or :meth:`Actor.tell_every
    <trio_actors.Actor.tell_every>`.

    Attributes:
        message: what the timer tells.
        interval: seconds between ticks, or ``None`` for a one-shot timer.
        key: the timer's key, or ``None``.
        deadline: the trio-clock time of the next tick (``inf`` once it has ended).
        fired: ticks sent so far (queued, or dead-lettered by a full bounded
            mailbox).
        skipped: ticks not sent because the previous one was still queued or the
            system was too busy to send them on time.
    """

    __slots__ = (
        "_count",
        "_origin",
        "_owner",
        "_pending",
        "_seq",
        "_service",
        "_target",
        "deadline",
        "fired",
        "interval",
        "key",
        "message",
        "skipped",
    )

    def __init__(
        self,
        service: TimerService,
        owner: ActorCell,
        target: ActorCell,
        message: Any,
        deadline: float,
        interval: float | None,
        key: Any,
    ) -> None:
        self._service = service
        self._owner = owner
        self._target = target
        self.message = message
        self.deadline = deadline
        self.interval = interval
        self.key = key
        self.fired = 0
        self.skipped = 0
        self._pending: Notice | None = None  # its tick, while queued
        self._seq = 0  # which heap entry is current
        # Deadlines are origin + count * interval: computed, not summed, so that a
        # long-running periodic timer does not drift.
        self._origin = deadline
        self._count = 0

    @property
    def active(self) -> bool:
        """True until the timer is cancelled, ends with its actor, or (one-shot) has
        fired."""
        return self.deadline != math.inf

    def cancel(self) -> None:
        """End the timer. Never a checkpoint; idempotent.

        A tick of this timer that is still queued is withdrawn (also after a
        one-shot timer has fired): once this returns, the message is never handled
        because of this timer.

        Raises:
            ActorError: called from another thread than its system's trio thread.
        """
        if get_ident() != self._target.system.thread_id:
            raise ActorError(
                f"{self!r}.cancel() called from another thread; a timer is cancelled "
                "in its system's trio thread (use trio.from_thread.run_sync)"
            )
        if self._pending is not None:
            self._pending.withdraw()  # calls notice_finished
        self._end()

    def notice_finished(self, tick: Notice) -> None:
        """Its tick was handled, withdrawn or dropped."""
        if self._pending is tick:
            self._pending = None
            if not self.active:
                self._forget()

    def _end(self, *, in_heap: bool = True) -> None:
        if self.deadline != math.inf:
            self.deadline = math.inf
            self._service.ended(in_heap=in_heap)
        if self._pending is None:
            self._forget()
        # else: the owner keeps it until its tick is done, so that a stop, a
        # restart or a new timer with its key can still withdraw the tick.

    def _forget(self) -> None:
        timers = self._owner.timers
        if timers is not None and timers.get(self._slot) is self:
            del timers[self._slot]

    @property
    def _slot(self) -> Any:
        return self if self.key is None else self.key

    def _fire(self, now: float) -> float | None:
        """Send a tick (unless the last one is still queued); return the next
        deadline, or ``None`` if the timer has ended."""
        target = self._target
        pending = self._pending
        if pending is not None and pending.queued:
            self.skipped += 1
        elif not target.accepting:
            target.tell_refused(self.message)  # a dead letter, reason "stopped"
            self._end(in_heap=False)
            return None
        else:
            tick = self._pending = Notice(target, self.message, self)
            self.fired += 1
            target.queue_tick(tick)
        interval = self.interval
        if interval is None:
            self._end(in_heap=False)
            return None
        self._count += 1
        deadline = self._origin + self._count * interval
        if deadline <= now:  # the system was busy: skip what was missed
            missed = math.floor((now - deadline) / interval) + 1
            self.skipped += missed
            self._count += missed
            deadline = self._origin + self._count * interval
            while deadline <= now:  # (float rounding at large clock values)
                self._count += 1
                self.skipped += 1
                deadline = self._origin + self._count * interval
        self.deadline = deadline
        return deadline

    def __repr__(self) -> str:
        every = "" if self.interval is None else f" every {self.interval:g}s"
        state = f"next at {self.deadline:g}" if self.active else "ended"
        return f"<Timer {self.message!r}{every} for {self._target.path}, {state}>"


class TimerService:
    """Fires every timer of one actor system from a single task (see the module
    docstring)."""

    def __init__(self, nursery: trio.Nursery) -> None:
        self._nursery = nursery
        self._heap: list[tuple[float, int, Timer]] = []
        self._counter = itertools.count()
        self._scope: trio.CancelScope | None = None
        self._service_scope: trio.CancelScope | None = None
        self._running = False
        self._closed = False
        self.active = 0  # timers started and not yet ended
        self._ended_in_heap = 0  # heap entries of ended timers, not yet popped

    def start(
        self,
        owner: ActorCell,
        target: ActorCell,
        message: Any,
        delay: float,
        interval: float | None,
        key: Any,
    ) -> Timer:
        """Start a timer owned by ``owner``; replaces the owner's timer with ``key``."""
        deadline = trio.current_time() + delay
        timer = Timer(self, owner, target, message, deadline, interval, key)
        if owner.timers is None:
            owner.timers = {}
        if key is not None and key in owner.timers:
            owner.timers[key].cancel()
        owner.timers[timer._slot] = timer
        self.active += 1
        self._schedule(timer)
        return timer

    def ended(self, *, in_heap: bool) -> None:
        """A timer ended; drop ended entries once they are most of the heap (a
        timer re-armed per message must not grow it without bound)."""
        self.active -= 1
        if not in_heap:
            return
        self._ended_in_heap += 1
        heap = self._heap
        if self._ended_in_heap > 64 and self._ended_in_heap * 2 > len(heap):
            heap[:] = [entry for entry in heap if entry[2].active and entry[1] == entry[2]._seq]
            heapq.heapify(heap)
            self._ended_in_heap = 0

    def _schedule(self, timer: Timer) -> None:
        timer._seq = seq = next(self._counter)
        heapq.heappush(self._heap, (timer.deadline, seq, timer))
        if not self._running:
            self._running = True
            self._nursery.start_soon(self._run, name="trio-actors timers")
        elif self._scope is not None and timer.deadline < self._scope.deadline:
            self._scope.deadline = timer.deadline

    def close(self) -> None:
        """End the timer task (the system has exited: every timer has ended)."""
        self._closed = True
        if self._service_scope is not None:
            self._service_scope.cancel()

    async def _run(self) -> None:
        """The timer task. Shielded, as the dispatcher is: a cancelled system block
        does not stop the timers of the actors its exit has not reached yet (they
        end when their actors stop); :meth:`close` ends it."""
        heap = self._heap
        with trio.CancelScope(shield=True) as self._service_scope:
            while not self._closed:
                await self._fire_due(heap)

    async def _fire_due(self, heap: list[tuple[float, int, Timer]]) -> None:
        """Sleep until the first deadline (or a new earlier one), then fire what is due."""
        with trio.CancelScope(deadline=heap[0][0] if heap else math.inf) as scope:
            self._scope = scope
            await trio.sleep_forever()
        self._scope = None
        now = trio.current_time()
        while heap and heap[0][0] <= now:
            _, seq, timer = heapq.heappop(heap)
            if seq != timer._seq or not timer.active:
                if not timer.active and self._ended_in_heap:
                    self._ended_in_heap -= 1
                continue  # ended
            if timer._fire(now) is not None:
                self._schedule(timer)


def cancel_timers(cell: ActorCell) -> None:
    """End every timer ``cell`` owns (it stops or restarts). Never a checkpoint."""
    timers, cell.timers = cell.timers, None
    for timer in list((timers or {}).values()):
        timer.cancel()


protect_module(globals())

__all__ = ["Timer", "TimerService", "cancel_timers", "check_delay"]

"""The alternative design: a minimal task-per-actor runtime, for comparison.

trio-actors serves plain handlers inline from one dispatcher task (see
``trio_actors._core._dispatcher``). The obvious alternative gives every actor a trio
task of its own; this module is a small, honest prototype of it, measured on the
same shapes, with the same shape code (:mod:`benchmarks.shapes`), against the same
floors:

* an actor is a :class:`TaskActor`: a deque and one trio task started at spawn;
* ``tell`` appends to the deque and, if the task is parked, wakes it with
  ``trio.lowlevel.reschedule`` -- the cheapest wake-up trio has (no channel, no
  event);
* the task serves its deque in turns of at most 64 messages (the length is taken at
  the start of the turn), calls the handler inline, catches and counts handler
  errors, checkpoints after a turn if messages remain, and parks in
  ``wait_task_rescheduled`` when the deque is empty;
* ``ask`` queues an :class:`AskEnvelope` holding the asker's task; the reply is
  handed back with ``reschedule``. Turns check envelopes only while one is queued,
  so tells pay nothing for asks;
* leaving the system block cancels the nursery: every parked task aborts.

Left out, because the shapes measured here do not exercise them: lifecycle hooks,
stop / drain, dead letters, async handlers, and cancellation of an ask (an asker
must not be cancelled while it waits). None of them is on the measured paths of
S1-S5, so leaving them out only flatters the prototype.

Shapes (registered by :mod:`benchmarks.run` as ``ALT-S1`` ... ``ALT-S5``):
:func:`alt_s1` and :func:`alt_s3` / :func:`alt_s4` against F1 and the S3 / S4
floors, and :func:`alt_s5_spawn` / :func:`alt_s5_stop` (no floor).
"""

from __future__ import annotations

from collections import deque
from collections.abc import AsyncIterator, Callable
from contextlib import AbstractAsyncContextManager, asynccontextmanager
from typing import Any

import outcome
import trio

import trio_actors as ta

from .shapes import BATCH, System, s1, s2, s3, s4, s5_spawn, s5_stop


class AskEnvelope:
    """A queued ask: the message and the task waiting for its reply."""

    __slots__ = ("message", "task")

    def __init__(self, message: Any, task: trio.lowlevel.Task) -> None:
        self.message = message
        self.task = task


def _abort_failed(raise_cancel: Any) -> trio.lowlevel.Abort:
    # The prototype's asks cannot be cancelled: the reply will come.
    return trio.lowlevel.Abort.FAILED


class TaskActor:
    """One actor of the prototype: a deque served by a trio task of its own."""

    __slots__ = ("asks", "failures", "mailbox", "parked", "receive", "task")

    def __init__(self, instance: ta.Actor) -> None:
        self.receive = instance.receive
        self.mailbox: deque[Any] = deque()
        self.task: trio.lowlevel.Task | None = None
        self.parked = False
        self.asks = 0  # AskEnvelopes in the mailbox
        self.failures = 0

    def tell(self, message: Any) -> None:
        """Queue ``message``; wake the actor's task if it is parked. Never blocks."""
        self.mailbox.append(message)
        if self.parked:
            self.parked = False
            trio.lowlevel.reschedule(self.task)  # type: ignore[arg-type]

    async def ask(self, message: Any) -> Any:
        """Queue ``message`` and wait for the handler's return value."""
        self.asks += 1
        self.tell(AskEnvelope(message, trio.lowlevel.current_task()))
        return await trio.lowlevel.wait_task_rescheduled(_abort_failed)

    def _unpark(self, raise_cancel: Any) -> trio.lowlevel.Abort:
        self.parked = False
        return trio.lowlevel.Abort.SUCCEEDED

    async def serve(self) -> None:
        """The actor's task: serve turns of at most 64 messages, park when empty."""
        self.task = trio.lowlevel.current_task()
        mailbox = self.mailbox
        popleft = mailbox.popleft
        receive = self.receive
        while True:
            if not mailbox:
                self.parked = True
                await trio.lowlevel.wait_task_rescheduled(self._unpark)
                continue
            turn = min(BATCH, len(mailbox))
            if self.asks:
                self._serve_mixed(turn)
            else:
                for _ in range(turn):
                    message = popleft()
                    try:
                        receive(message)
                    except Exception:
                        self.failures += 1
            if mailbox:
                await trio.lowlevel.checkpoint()

    def _serve_mixed(self, turn: int) -> None:
        popleft = self.mailbox.popleft
        receive = self.receive
        for _ in range(turn):
            item = popleft()
            if type(item) is AskEnvelope:
                self.asks -= 1
                result = outcome.capture(receive, item.message)
                if type(result) is outcome.Error:
                    self.failures += 1
                trio.lowlevel.reschedule(item.task, result)
            else:
                try:
                    receive(item)
                except Exception:
                    self.failures += 1


class TaskSystem:
    """The prototype's actor system: a nursery holding one task per actor."""

    def __init__(self, nursery: trio.Nursery) -> None:
        self._nursery = nursery

    def spawn(self, actor_factory: Callable[..., ta.Actor], /, *args: Any) -> TaskActor:
        actor = TaskActor(actor_factory(*args))
        self._nursery.start_soon(actor.serve)
        return actor


@asynccontextmanager
async def _open_task_system() -> AsyncIterator[TaskSystem]:
    async with trio.open_nursery() as nursery:
        yield TaskSystem(nursery)
        nursery.cancel_scope.cancel()


def open_task_system() -> AbstractAsyncContextManager[System]:
    """Open a prototype system; leaving the block cancels every actor's task."""
    return _open_task_system()


def alt_s1(loops: int, size: int) -> float:
    """S1 on the task-per-actor prototype."""
    return s1(open_task_system, loops, size)


def alt_s2(loops: int, size: int) -> float:
    """S2 on the task-per-actor prototype."""
    return s2(open_task_system, loops, size)


def alt_s3(loops: int, size: int) -> float:
    """S3 on the task-per-actor prototype."""
    return s3(open_task_system, loops, size)


def alt_s4(loops: int, size: int) -> float:
    """S4 on the task-per-actor prototype."""
    return s4(open_task_system, loops, size)


def alt_s5_spawn(loops: int, size: int) -> float:
    """S5 spawns on the task-per-actor prototype (until every task has parked)."""
    return s5_spawn(open_task_system, loops, size)


def alt_s5_stop(loops: int, size: int) -> float:
    """S5 exit on the task-per-actor prototype (cancelling every task)."""
    return s5_stop(open_task_system, loops, size)


__all__ = [
    "AskEnvelope",
    "TaskActor",
    "TaskSystem",
    "alt_s1",
    "alt_s2",
    "alt_s3",
    "alt_s4",
    "alt_s5_spawn",
    "alt_s5_stop",
    "open_task_system",
]

"""Tells from other threads keep each thread's order, whatever the trio side does."""

from __future__ import annotations

import sys
import threading
from typing import Any

import pytest
import trio
import trio.lowlevel
import trio.testing

import trio_actors as ta
from trio_actors._core import _cell, _compaction, _envelope
from trio_actors._core._ref import local_cell
from trio_actors._core._state import Serving

THREADS = 4
PER_THREAD = 50_000


class OrderChecker(ta.Actor):
    """Counts, per sender, the messages that arrive out of the order told."""

    def __init__(self) -> None:
        self.last: dict[Any, int] = {}
        self.inversions = 0
        self.handled = 0

    def receive(self, message: Any) -> Any:
        if message == "count":
            return self.handled, self.inversions
        sender, number = message
        if number <= self.last.get(sender, -1):
            self.inversions += 1
        self.last[sender] = number
        self.handled += 1
        return None


class BoundedOrderChecker(OrderChecker):
    pass


async def _tell_from_threads_and_trio(ref: ta.ActorRef) -> tuple[int, int]:
    """Four threads and one trio task tell numbered messages at once; return what
    the actor counted once all have arrived."""
    trio_side = 0

    def from_thread(sender: int) -> None:
        for number in range(PER_THREAD):
            ref.tell((sender, number))

    async def from_trio(done: threading.Event) -> None:
        nonlocal trio_side
        while not done.is_set():
            for _ in range(50):
                ref.tell(("trio", trio_side))
                trio_side += 1
            await trio.lowlevel.checkpoint()  # the actor is served, goes idle, is woken again

    async def threads(done: threading.Event) -> None:
        async with trio.open_nursery() as nursery:
            for sender in range(THREADS):
                nursery.start_soon(trio.to_thread.run_sync, from_thread, sender)
        done.set()

    done = threading.Event()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(threads, done)
        nursery.start_soon(from_trio, done)
    total = THREADS * PER_THREAD + trio_side
    while True:
        handled, inversions = await ref.ask("count")
        if handled == total:
            return handled, inversions
        await trio.lowlevel.checkpoint()  # tells from the threads may still be on their way


@pytest.fixture
def frequent_thread_switches() -> Any:
    """Switch threads every 10 µs (the default is 5 ms), for finer interleavings."""
    interval = sys.getswitchinterval()
    sys.setswitchinterval(1e-5)
    yield
    sys.setswitchinterval(interval)


@pytest.mark.usefixtures("frequent_thread_switches")
async def test_tells_from_threads_arrive_in_the_order_each_thread_told_them() -> None:
    # A stress test: whatever the interleaving, no thread's tells are reordered.
    # (The test below makes the one interleaving that did reorder them, step by step.)
    async with ta.open_actor_system() as system:
        ref = system.spawn(OrderChecker)
        handled, inversions = await _tell_from_threads_and_trio(ref)
        assert inversions == 0
        assert handled >= THREADS * PER_THREAD
        assert system.dead_letters.count == 0


async def test_a_threads_tell_never_overtakes_its_earlier_one_still_on_its_way() -> None:
    # The interleaving that reordered tells, made step by step: the thread's first
    # tell finds the actor idle and must travel to the trio thread; before it gets
    # there, a trio-side tell wakes the actor (which has a deque from an earlier
    # backlog), and the thread's second tell finds the actor scheduled.
    first_sent = threading.Event()
    woken = threading.Event()
    second_sent = threading.Event()

    async with ta.open_actor_system() as system:
        ref = system.spawn(OrderChecker)
        for number in range(3):  # a backlog: the actor's deque is allocated
            ref.tell(("warm-up", number))
        await ref.ask("count")

        def thread() -> None:
            ref.tell(("thread", 1))
            first_sent.set()
            woken.wait()
            ref.tell(("thread", 2))
            second_sent.set()

        worker = threading.Thread(target=thread)
        worker.start()
        first_sent.wait()  # blocks the trio thread: the first tell cannot arrive yet
        ref.tell(("trio", 1))
        woken.set()
        second_sent.wait()
        worker.join()
        while (await ref.ask("count"))[0] < 6:
            await trio.lowlevel.checkpoint()
        assert await ref.ask("count") == (6, 0)


async def test_tells_from_threads_to_a_bounded_mailbox_keep_their_order() -> None:
    async with ta.open_actor_system() as system:
        ref = system.spawn(BoundedOrderChecker, mailbox=ta.Bounded(10_000_000))
        _, inversions = await _tell_from_threads_and_trio(ref)
        assert inversions == 0


async def test_a_tell_from_a_thread_to_a_stopped_actor_is_a_dead_letter() -> None:
    async with ta.open_actor_system() as system:
        ref = system.spawn(OrderChecker)
        await ref.stop()
        await trio.to_thread.run_sync(ref.tell, ("thread", 1))
        while system.dead_letters.count == 0:
            await trio.lowlevel.checkpoint()
        letter = system.dead_letters.recent[-1]
        assert (letter.message, letter.reason) == (("thread", 1), "stopped")


async def test_spawn_from_another_thread_is_refused_and_changes_nothing() -> None:
    async with ta.open_actor_system() as system:
        with pytest.raises(ta.ActorError, match=r"spawn.*another thread"):
            await trio.to_thread.run_sync(system.spawn, OrderChecker)
        assert system.statistics().live_actors == 0
        assert system.statistics().spawned == 0


def _tell_from_a_thread(ref: ta.ActorRef, message: Any) -> None:
    """Tell ``message`` from another thread, now: the trio thread waits for it."""
    thread = threading.Thread(target=ref.tell, args=(message,))
    thread.start()
    thread.join()


class Blocker(ta.Actor):
    """Async: "block" waits until the test sets ``gate``; records the rest."""

    def __init__(self, log: list[Any], gate: trio.Event | None = None) -> None:
        self.log = log
        self.gate = gate

    async def receive(self, message: Any) -> Any:
        if message == "block":
            assert self.gate is not None
            await self.gate.wait()
        else:
            self.log.append(message)
        return message


async def test_a_threads_tell_during_a_compaction_waits_and_arrives(
    monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.testing.MockClock
) -> None:
    # The deque is rewritten in place; a fast-path append from another thread in the
    # middle would break the walk (or be lost): none may happen while it runs.
    log: list[Any] = []
    seen_during: list[bool] = []
    live_entries = _compaction.live_entries

    def during_the_walk(cell: Any, mailbox: Any) -> Any:
        seen_during.append(cell.fast_tell)
        _tell_from_a_thread(cell.ref, ("thread", len(seen_during)))
        return live_entries(cell, mailbox)

    monkeypatch.setattr(_compaction, "live_entries", during_the_walk)
    gate = trio.Event()
    async with ta.open_actor_system() as system:
        ref = system.spawn(Blocker, log, gate)
        ref.tell("block")
        await trio.testing.wait_all_tasks_blocked()
        ref.tell(("trio", 0))
        for _ in range(200):
            with trio.move_on_after(0.001):
                await ref.ask("times out")
        assert seen_during, "no compaction happened"
        assert seen_during == [False] * len(seen_during)
        gate.set()
        await trio.testing.wait_all_tasks_blocked()
        while len(log) < 1 + len(seen_during):  # the threads' tells are on their way
            await trio.lowlevel.checkpoint()
    assert log == [("trio", 0), *(("thread", n) for n in range(1, len(seen_during) + 1))]


@pytest.mark.replaces_the_kernel
async def test_a_threads_tell_between_an_asks_position_and_its_append_waits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # An ask queued behind others notes its position, then is appended; a fast-path
    # tell from another thread in between would take the ask's position.
    enqueue = _cell.ActorCell.enqueue
    injected: list[Any] = []

    def with_a_tell_first(cell: Any, item: Any) -> None:
        if isinstance(item, _envelope.Ask) and cell.serving is not Serving.IDLE and not injected:
            injected.append(item)
            _tell_from_a_thread(cell.ref, ("thread", 1))
        enqueue(cell, item)

    monkeypatch.setattr(_cell.ActorCell, "enqueue", with_a_tell_first)
    async with ta.open_actor_system() as system:
        ref = system.spawn(OrderChecker)
        for number in range(3):
            ref.tell(("trio", number))  # scheduled, with a deque
        assert await ref.ask("count") == (3, 0)
        assert injected
        while (await ref.ask("count"))[0] < 4:
            await trio.lowlevel.checkpoint()
        assert await ref.ask("count") == (4, 0)


async def test_a_threads_tell_as_a_serving_task_ends_is_still_handled(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Between the serving task's last look at the mailbox and its going idle, a
    # tell from another thread must not be left in the mailbox of an idle actor.
    log: list[Any] = []
    done = _cell.ActorCell.serving_task_done
    calls: list[int] = []

    def with_a_tell_first(cell: Any) -> None:
        calls.append(1)
        if len(calls) == 1:
            _tell_from_a_thread(cell.ref, ("thread", 1))
        done(cell)

    monkeypatch.setattr(_cell.ActorCell, "serving_task_done", with_a_tell_first)
    async with ta.open_actor_system() as system:
        ref = system.spawn(Blocker, log)
        for number in range(3):  # a backlog: the deque is allocated, the fast path open
            ref.tell(("trio", number))
        for _ in range(100):
            await trio.lowlevel.checkpoint()
            if len(log) == 4:
                break
        assert log == [("trio", 0), ("trio", 1), ("trio", 2), ("thread", 1)]


async def test_every_tell_from_a_thread_after_the_exit_raises() -> None:
    async with ta.open_actor_system() as system:
        ref = system.spawn(OrderChecker)
    errors: list[BaseException] = []

    def tell_three_times() -> None:
        for number in range(3):
            try:
                ref.tell(("late", number))
            except ta.ActorError as error:
                errors.append(error)

    await trio.to_thread.run_sync(tell_three_times)
    assert len(errors) == 3
    assert system.dead_letters.count == 0


async def test_the_thread_mark_is_owned_on_the_trio_thread_only() -> None:
    # ActorRef.tell checks the thread with the dispatcher's thread mark, not with
    # get_ident(): another thread's tell to an idle actor must not be activated
    # inline, but go through the foreign inbox (and still be handled).
    from trio_actors._core._thread_mark import is_owned

    async with ta.open_actor_system() as system:
        ref = system.spawn(OrderChecker)
        await ref.ask("count")  # started, and idle again
        dispatcher = local_cell(ref).dispatcher
        assert is_owned(dispatcher.thread_mark)

        def from_thread() -> bool:
            ref.tell(("thread", 0))
            return bool(is_owned(dispatcher.thread_mark))

        assert not await trio.to_thread.run_sync(from_thread)
        assert await ref.ask("count") == (1, 0)


class _LockWithoutIsOwned:
    """An RLock as a CPython without ``_is_owned`` would make it."""

    def acquire(self) -> bool:
        return True


async def test_the_mark_without_is_owned_compares_thread_idents(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Where RLock has no _is_owned (a CPython could drop it) the mark is one that
    # compares idents: owned by the thread that made it, by no other.
    from trio_actors._core import _thread_mark
    from trio_actors._core._thread_mark import _IdentMark

    assert _thread_mark._mark_class() is not _IdentMark  # (this CPython has it)
    monkeypatch.setattr(_thread_mark, "RLock", _LockWithoutIsOwned)
    assert _thread_mark._mark_class() is _IdentMark
    mark = _IdentMark()
    assert mark.acquire()
    assert mark._is_owned()
    assert _IdentMark._is_owned(mark)
    assert not await trio.to_thread.run_sync(mark._is_owned)

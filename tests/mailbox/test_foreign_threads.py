"""Tells from other threads keep each thread's order, whatever the trio side does."""

from __future__ import annotations

import sys
import threading
from typing import Any

import pytest
import trio
import trio.lowlevel

import trio_actors as ta

THREADS = 4
PER_THREAD = 50_000


class Recorder(ta.Actor):
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


class BoundedRecorder(Recorder):
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
        ref = system.spawn(Recorder)
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
        ref = system.spawn(Recorder)
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
        ref = system.spawn(BoundedRecorder, mailbox=ta.Bounded(10_000_000))
        _, inversions = await _tell_from_threads_and_trio(ref)
        assert inversions == 0


async def test_a_tell_from_a_thread_to_a_stopped_actor_is_a_dead_letter() -> None:
    async with ta.open_actor_system() as system:
        ref = system.spawn(Recorder)
        await ref.stop()
        await trio.to_thread.run_sync(ref.tell, ("thread", 1))
        while system.dead_letters.count == 0:
            await trio.lowlevel.checkpoint()
        letter = system.dead_letters.recent[-1]
        assert (letter.message, letter.reason) == (("thread", 1), "stopped")


async def test_spawn_from_another_thread_is_refused_and_changes_nothing() -> None:
    async with ta.open_actor_system() as system:
        with pytest.raises(ta.ActorError, match=r"spawn.*another thread"):
            await trio.to_thread.run_sync(system.spawn, Recorder)
        assert system.statistics().live_actors == 0
        assert system.statistics().spawned == 0

"""``system.dead_letters.subscribe()``: dead letters as a bounded stream."""

from __future__ import annotations

import gc
from typing import Any

import pytest
import trio
import trio.testing

from helpers import Echo
from trio_actors import Bounded, DeadLetter, open_actor_system


async def test_a_subscriber_sees_every_dead_letter_and_its_loop_ends_with_the_system() -> None:
    seen: list[DeadLetter] = []

    async def consume(letters: Any) -> None:
        async for letter in letters:
            seen.append(letter)

    async with trio.open_nursery() as nursery, open_actor_system() as system:
        nursery.start_soon(consume, system.dead_letters.subscribe())
        ref = system.spawn(Echo, name="gone")
        await ref.stop()
        ref.tell("late")  # stopped
        full = system.spawn(Echo, mailbox=Bounded(1, "drop_new"), name="full")
        full.tell("kept")
        full.tell("dropped")  # overflow
        slow = system.spawn(Echo, name="slow")
        await trio.testing.wait_all_tasks_blocked()
        slow.stop_nowait()
        slow.tell("after stop")
        # The exit is over; the consumer's loop ends by itself.
    assert [(letter.recipient.name, letter.message, letter.reason) for letter in seen] == [
        ("gone", "late", "stopped"),
        ("full", "dropped", "overflow"),
        ("slow", "after stop", "stopped"),
    ]


async def test_stranded_letters_reach_the_subscriber_too() -> None:
    async with open_actor_system() as system:
        letters = system.dead_letters.subscribe()
        ref = system.spawn(Echo)
        for number in range(3):
            ref.tell(number)
        await ref.stop()  # before the dispatcher served them: stranded
        got = [await letters.receive() for _ in range(3)]
        assert [(letter.message, letter.reason) for letter in got] == [
            (0, "stranded"),
            (1, "stranded"),
            (2, "stranded"),
        ]


async def test_a_full_subscription_drops_and_counts_never_blocking_the_sender() -> None:
    async with open_actor_system() as system:
        letters = system.dead_letters.subscribe(capacity=2)
        ref = system.spawn(Echo)
        await ref.stop()
        for number in range(5):
            ref.tell(number)  # never waits for the subscriber
        assert letters.dropped == 3
        assert system.dead_letters.count == 5
        assert [(await letters.receive()).message for _ in range(2)] == [0, 1]
        assert repr(letters) == "<DeadLetterSubscription queued=0 capacity=2 dropped=3>"


async def test_closing_unsubscribes_and_ends_the_iteration_after_what_it_holds() -> None:
    async with open_actor_system() as system:
        ref = system.spawn(Echo)
        await ref.stop()
        with system.dead_letters.subscribe() as letters:
            ref.tell("held")
        ref.tell("after close")  # not offered any more
        assert [letter.message async for letter in letters] == ["held"]
        letters.close()  # idempotent
        with pytest.raises(trio.EndOfChannel):
            await letters.receive()


async def test_two_subscribers_each_get_every_letter() -> None:
    async with open_actor_system() as system:
        first = system.dead_letters.subscribe()
        second = system.dead_letters.subscribe()
        ref = system.spawn(Echo)
        await ref.stop()
        ref.tell("x")
        assert (await first.receive()).message == "x"
        assert (await second.receive()).message == "x"


async def test_a_subscription_dropped_without_close_is_not_kept_by_the_system() -> None:
    # Subscribing per request and dropping the stream kept each one, with up to
    # `capacity` letters, for the system's life.
    async with open_actor_system() as system:
        kept = system.dead_letters.subscribe()
        for _ in range(100):
            system.dead_letters.subscribe(capacity=10)  # (dropped at once)
        gc.collect()
        assert len(system.dead_letters._subscriptions) == 1
        ref = system.spawn(Echo)
        await ref.stop()
        ref.tell("x")
        assert (await kept.receive()).message == "x"


async def test_a_task_waiting_on_a_subscription_keeps_it() -> None:
    async with open_actor_system() as system, trio.open_nursery() as nursery:
        got: list[Any] = []

        async def follow() -> None:
            got.append((await system.dead_letters.subscribe().receive()).message)

        nursery.start_soon(follow)
        await trio.testing.wait_all_tasks_blocked()
        gc.collect()
        ref = system.spawn(Echo)
        await ref.stop()
        ref.tell("x")
        await trio.testing.wait_all_tasks_blocked()
        assert got == ["x"]


@pytest.mark.parametrize(
    ("capacity", "error", "complaint"),
    [
        (0, ValueError, r"subscribe\(capacity=...\) must be >= 1, got 0"),
        (1.5, TypeError, r"must be an int, got 1.5"),
        (True, TypeError, r"must be an int, got True"),
    ],
)
async def test_a_bad_capacity_is_refused(
    capacity: Any, error: type[Exception], complaint: str
) -> None:
    async with open_actor_system() as system:
        with pytest.raises(error, match=complaint):
            system.dead_letters.subscribe(capacity=capacity)


async def test_a_subscription_made_after_the_system_closed_ends_at_once() -> None:
    async with open_actor_system() as system:
        pass
    letters = system.dead_letters.subscribe()
    assert [letter async for letter in letters] == []

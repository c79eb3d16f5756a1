"""A balancing pool honours ``Pool(..., mailbox=Bounded(k, overflow))``: its shared
queue holds at most ``k`` messages; ``send`` and ``ask`` wait for room in one line,
``tell`` meets the overflow policy (the other routings: the chosen worker's bound)."""

from __future__ import annotations

import functools
from collections.abc import Iterable
from typing import Any

import pytest
import trio
import trio.testing

from trio_actors import (
    Actor,
    ActorRef,
    ActorStopped,
    Bounded,
    MailboxFull,
    Pool,
    open_actor_system,
)

Clock = trio.testing.MockClock


class Timed(Actor):
    """Notes when it starts each message, then takes a virtual second over it."""

    def __init__(self, started: list[Any]) -> None:
        self.started = started

    async def receive(self, message: Any) -> Any:
        self.started.append(message)
        await trio.sleep(1)
        return message


def overflow_letters(system: Any) -> list[Any]:
    return [d.message for d in system.dead_letters.recent if d.reason == "overflow"]


async def test_sends_to_a_full_balancing_pool_wait_for_room(autojump_clock: Clock) -> None:
    # (Before: 500 sends returned at once, with 496 queued.)
    capacity, size = 8, 4
    started: list[Any] = []
    ahead: list[int] = []  # at each return of send: sent but not yet begun
    async with open_actor_system() as system:
        pool = system.spawn(
            Pool(Timed, (started,), size=size, routing="balancing", mailbox=Bounded(capacity))
        )
        await trio.testing.wait_all_tasks_blocked()
        began = trio.current_time()
        for number in range(500):
            await pool.send(number)
            ahead.append(number + 1 - len(started))
            assert pool.statistics().mailbox_depth <= capacity + size
        took = trio.current_time() - began
        await pool.stop(drain=True)
        # k queued, and at most one handed to each worker but not yet begun
        assert capacity <= max(ahead) <= capacity + size
        assert took >= (500 - capacity - size) / size  # the producer went at their pace
        assert sorted(started) == list(range(500))
        stats = pool.statistics()
        assert (stats.dead_letters.total, stats.failed_back, stats.withdrawn) == (0, 0, 0)
        assert stats.mailbox_capacity == capacity


@pytest.mark.parametrize("routing", ["round_robin", "smallest_mailbox"])
async def test_sends_to_a_routing_pool_wait_at_the_chosen_workers_bound(
    routing: Any, autojump_clock: Clock
) -> None:
    started: list[Any] = []
    ahead: list[int] = []
    async with open_actor_system() as system:
        pool = system.spawn(Pool(Timed, (started,), size=2, routing=routing, mailbox=Bounded(3)))
        await trio.testing.wait_all_tasks_blocked()
        for number in range(100):
            await pool.send(number)
            ahead.append(number + 1 - len(started))
        await pool.stop(drain=True)
        assert max(ahead) <= 2 * 3 + 2  # each worker: 3 queued and 1 in hand
        assert sorted(started) == list(range(100))
        assert system.dead_letters.count == 0


async def test_asks_and_sends_wait_for_room_in_one_line(autojump_clock: Clock) -> None:
    started: list[Any] = []
    async with open_actor_system() as system:
        pool = system.spawn(
            Pool(Timed, (started,), size=1, routing="balancing", mailbox=Bounded(2))
        )
        await trio.testing.wait_all_tasks_blocked()
        for number in range(3):  # one in hand, two queued: full
            await pool.send(number)
        scope = trio.CancelScope()
        answers: list[Any] = []

        async def ask(message: str, scope: trio.CancelScope | None = None) -> None:
            with scope or trio.CancelScope():
                answers.append(await pool.ask(message))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(ask, "a")
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(pool.send, "s")
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(ask, "cancelled", scope)
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(ask, "b")
            await trio.testing.wait_all_tasks_blocked()
            stats = pool.statistics()
            assert (stats.senders_waiting, stats.mailbox_depth) == (4, 2)
            scope.cancel()  # leaves the line: nothing queued, the next gets its turn
            await trio.testing.wait_all_tasks_blocked()
            assert pool.statistics().senders_waiting == 3
        assert started == [0, 1, 2, "a", "s", "b"]
        assert answers == ["a", "b"]
        stats = pool.statistics()
        assert (stats.withdrawn, stats.failed_back, stats.dead_letters.total) == (1, 0, 0)


@pytest.mark.parametrize("overflow", ["fail", "drop_new", "drop_old"])
async def test_a_tell_to_a_full_balancing_pool_meets_the_overflow_policy(
    overflow: Any, autojump_clock: Clock
) -> None:
    started: list[Any] = []
    async with open_actor_system() as system:
        pool = system.spawn(
            Pool(Timed, (started,), size=1, routing="balancing", mailbox=Bounded(2, overflow)),
            name="pool",
        )
        await trio.testing.wait_all_tasks_blocked()
        pool.tell("in hand")
        await trio.testing.wait_all_tasks_blocked()
        errors: list[str] = []

        async def ask() -> None:
            try:
                await pool.ask("asked")
            except MailboxFull as error:
                errors.append(str(error))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(ask)  # queued: room for it
            await trio.testing.wait_all_tasks_blocked()
            pool.tell(1)  # full now
            for number in (2, 3):
                try:
                    pool.tell(number)
                except MailboxFull as error:
                    errors.append(str(error))
        await pool.stop(drain=True)

        def full(what: str) -> str:
            return (
                f"the mailbox of system/pool is full (capacity 2, overflow={overflow!r}): "
                f"{what}; use 'await ref.send(...)' to wait for room, or a larger "
                "capacity or another overflow policy"
            )

        if overflow == "fail":
            assert started == ["in hand", "asked", 1]
            assert errors == [full("2 was not queued"), full("3 was not queued")]
            assert overflow_letters(system) == []
        elif overflow == "drop_new":
            assert started == ["in hand", "asked", 1]
            assert (errors, overflow_letters(system)) == ([], [2, 3])
        else:  # the ask, then the tell 1 are dropped to make room
            assert started == ["in hand", 2, 3]
            assert errors == [full("the oldest ask was dropped")]
            assert overflow_letters(system) == [1]
        assert all(d.recipient == pool for d in system.dead_letters.recent)


async def test_a_stop_fails_the_sends_and_asks_waiting_for_room(autojump_clock: Clock) -> None:
    started: list[Any] = []
    async with open_actor_system() as system:
        pool = system.spawn(
            Pool(Timed, (started,), size=1, routing="balancing", mailbox=Bounded(1))
        )
        await trio.testing.wait_all_tasks_blocked()
        await pool.send("in hand")
        await pool.send("queued")
        errors: list[str] = []

        async def waits(call: Any, message: str) -> None:
            try:
                await call(message)
            except ActorStopped as error:
                errors.append(str(error))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(waits, pool.send, "s")
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(waits, pool.ask, "a")
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(functools.partial(pool.stop, drain=True))
        assert sorted(errors) == [
            f"{pool.path} stopped while a send waited for room",
            f"{pool.path} stopped while an ask waited for room",
        ]
        assert started == ["in hand", "queued"]
        assert pool.statistics().failed_back == 2


async def test_a_tell_from_another_thread_to_a_full_balancing_pool_is_a_dead_letter() -> None:
    gate = trio.Event()

    class Held(Actor):
        async def receive(self, message: Any) -> Any:
            await gate.wait()

    async with open_actor_system() as system:
        pool = system.spawn(Pool(Held, size=1, routing="balancing", mailbox=Bounded(1)))
        await trio.testing.wait_all_tasks_blocked()
        pool.tell("in hand")
        await trio.testing.wait_all_tasks_blocked()
        pool.tell("queued")
        await trio.to_thread.run_sync(tell_each, pool, range(3))
        await trio.testing.wait_all_tasks_blocked()
        assert overflow_letters(system) == [0, 1, 2]
        gate.set()


async def test_an_ask_to_a_round_robin_pool_waits_at_its_workers_bound(
    autojump_clock: Clock,
) -> None:
    # (Before: MailboxFull at once when the chosen worker's mailbox was full.)
    started: list[Any] = []
    async with open_actor_system() as system:
        pool = system.spawn(Pool(Timed, (started,), size=1, mailbox=Bounded(1)))
        await trio.testing.wait_all_tasks_blocked()
        await pool.send("in hand")
        await pool.send("queued")
        with trio.testing.assert_checkpoints():
            assert await pool.ask("asked") == "asked"
        assert started == ["in hand", "queued", "asked"]
        stats = pool.statistics()
        assert (stats.failed_back, stats.dead_letters.total) == (0, 0)


def tell_each(ref: ActorRef, messages: Iterable[Any]) -> None:
    """Tell ``ref`` each of ``messages`` (from another thread, in these tests)."""
    for message in messages:
        ref.tell(message)

"""Routers: ``Pool`` (round robin, smallest mailbox, balancing), ``Broadcast``,
``Resize``, supervision of the workers, stopping and draining a pool."""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable
from typing import Any

import pytest
import trio
import trio.testing

from trio_actors import (
    Actor,
    ActorRef,
    ActorStopped,
    Backoff,
    Bounded,
    Broadcast,
    Escalate,
    Pool,
    Resize,
    Restart,
    Stop,
    open_actor_system,
)
from trio_actors._core import _stopping
from trio_actors._core._ref import local_cell

ROUTINGS = ["round_robin", "smallest_mailbox", "balancing"]


class Worker(Actor):
    """Takes 1 s per message (worker-1: ``slow`` s); records who handled what."""

    def __init__(self, log: list[tuple[str, Any]], slow: float = 1.0) -> None:
        self.log = log
        self.slow = slow

    async def receive(self, message: Any) -> Any:
        if message == "fail":
            raise RuntimeError("worker failed")
        name = self.ref.name
        await trio.sleep(self.slow if name == "worker-1" else 1.0)
        self.log.append((name, message))
        return name


class Plain(Actor):
    def __init__(self, log: list[tuple[str, Any]]) -> None:
        self.log = log

    def receive(self, message: Any) -> Any:
        self.log.append((self.ref.name, message))
        return self.ref.name


@pytest.mark.parametrize("routing", ROUTINGS)
async def test_every_message_is_handled_once_by_some_worker(
    routing: str, autojump_clock: trio.testing.MockClock
) -> None:
    log: list[tuple[str, Any]] = []
    async with open_actor_system() as system:
        pool = system.spawn(Pool(Worker, (log,), size=3, routing=routing), name="pool")  # type: ignore[arg-type]
        for number in range(12):
            pool.tell(number)
        assert await pool.ask("asked") in {"worker-1", "worker-2", "worker-3"}
        await pool.stop(drain=True)
    assert sorted(message for _, message in log if message != "asked") == list(range(12))
    assert {name for name, _ in log} == {"worker-1", "worker-2", "worker-3"}


async def test_round_robin_takes_the_workers_in_turn() -> None:
    log: list[tuple[str, Any]] = []
    async with open_actor_system() as system:
        pool = system.spawn(Pool(Plain, (log,), size=3))
        answers = [await pool.ask(number) for number in range(6)]
    assert answers == ["worker-1", "worker-2", "worker-3"] * 2


async def test_balancing_keeps_work_away_from_a_slow_worker(
    autojump_clock: trio.testing.MockClock,
) -> None:
    async def run(routing: str) -> float:
        log: list[tuple[str, Any]] = []
        async with open_actor_system() as system:
            pool = system.spawn(Pool(Worker, (log, 100.0), size=4, routing=routing))  # type: ignore[arg-type]
            began = trio.current_time()
            async with trio.open_nursery() as nursery:
                for number in range(60):
                    nursery.start_soon(pool.ask, number)
            took = trio.current_time() - began
            await pool.stop()
        return took

    balanced = await run("balancing")
    round_robin = await run("round_robin")
    # 60 one-second jobs on three fast workers: 20 s, plus the slow worker's one job
    # (100 s) running beside them; round robin gives the slow one 15 jobs.
    assert balanced == 100.0
    assert round_robin == 1500.0


async def test_a_cancelled_ask_waiting_in_a_balancing_pool_is_withdrawn(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log: list[tuple[str, Any]] = []
    async with open_actor_system() as system:
        pool = system.spawn(Pool(Worker, (log,), size=1, routing="balancing"))
        pool.tell("first")
        await trio.testing.wait_all_tasks_blocked()
        with trio.move_on_after(0.5):
            await pool.ask("never")  # waits for the one busy worker
        assert await pool.ask("after") == "worker-1"
        assert [message for _, message in log] == ["first", "after"]
        assert pool.statistics().withdrawn == 1


async def test_broadcast_reaches_every_worker() -> None:
    log: list[tuple[str, Any]] = []
    async with open_actor_system() as system:
        for routing in ROUTINGS:
            log.clear()
            pool = system.spawn(Pool(Plain, (log,), size=3, routing=routing))  # type: ignore[arg-type]
            await pool.ask("started")
            pool.tell(Broadcast("hello"))
            await pool.stop(drain=True)
            assert sorted(name for name, m in log if m == "hello") == [
                "worker-1",
                "worker-2",
                "worker-3",
            ], routing


async def test_resize_grows_and_shrinks_the_pool() -> None:
    log: list[tuple[str, Any]] = []
    async with open_actor_system() as system:
        pool = system.spawn(Pool(Plain, (log,), size=2))
        pool.tell(Resize(4))
        assert [await pool.ask(n) for n in range(4)] == [f"worker-{i}" for i in (1, 2, 3, 4)]
        pool.tell(Resize(1))
        await trio.testing.wait_all_tasks_blocked()
        assert {await pool.ask(n) for n in range(3)} == {"worker-1"}
        assert system.statistics().live_actors == 2  # the pool and one worker


async def test_a_failing_worker_is_restarted_by_the_pools_supervision(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log: list[tuple[str, Any]] = []
    async with open_actor_system() as system:
        pool = system.spawn(Pool(Worker, (log,), size=2, routing="balancing"))
        with pytest.raises(RuntimeError, match="worker failed"):
            await pool.ask("fail")
        assert await pool.ask("x") in {"worker-1", "worker-2"}
        assert system.statistics().restarts == 1


async def test_the_pool_stops_when_its_last_worker_has_stopped(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log: list[tuple[str, Any]] = []
    async with open_actor_system() as system:
        pool = system.spawn(Pool(Worker, (log,), size=2, supervision=Stop()))
        for _ in range(2):
            with pytest.raises(RuntimeError):
                await pool.ask("fail")
        terminated = await pool.wait_stopped()
        assert terminated.ref == pool
        with pytest.raises(ActorStopped):
            await pool.ask("x")


async def test_stopping_a_balancing_pool_strands_its_queue(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log: list[tuple[str, Any]] = []
    async with open_actor_system() as system:
        pool = system.spawn(Pool(Worker, (log,), size=1, routing="balancing"))
        for number in range(4):
            pool.tell(number)
        outcome: list[str] = []

        async def ask_queued() -> None:
            try:
                await pool.ask("queued")
            except ActorStopped:
                outcome.append("ActorStopped")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(ask_queued)
            await trio.testing.wait_all_tasks_blocked()
            assert pool.statistics().mailbox_depth == 4  # 3 tells and the ask wait
            await pool.stop()
        assert outcome == ["ActorStopped"]
        reasons = sorted(letter.reason for letter in system.dead_letters.recent)
        # The tell the worker was on: stranded there (its handler was cancelled
        # while it ran: handled); the three still in the pool: stranded.
        assert reasons == ["stranded"] * 3
        assert log == []


async def test_a_pool_is_registered_watched_and_counted_like_any_actor() -> None:
    log: list[tuple[str, Any]] = []
    async with open_actor_system() as system:
        pool = system.spawn(Pool(Plain, (log,), size=2), name="pool")
        system.register("workers", pool)
        assert await (await system.lookup("workers")).ask("x") == "worker-1"
        assert pool.path == "system/pool"
        assert pool.statistics().path == "system/pool"


@pytest.mark.parametrize(
    ("make", "error", "complaint"),
    [
        (lambda: Pool(Plain, size=0), ValueError, r"Pool.size must be >= 1, got 0"),
        (lambda: Pool(Plain, routing="random"), ValueError, r"Pool.routing must be 'round_rob"),  # type: ignore[arg-type]
        (lambda: Pool(3), TypeError, r"Pool.worker must be an Actor subclass or factory"),  # type: ignore[arg-type]
        (lambda: Pool(Plain, args=[1]), TypeError, r"Pool.args must be a tuple, got \[1\]"),  # type: ignore[arg-type]
        (lambda: Pool(Plain, mailbox=3), TypeError, r"Pool.mailbox must be None or a Bounded"),  # type: ignore[arg-type]
        (lambda: Resize(0), ValueError, r"Resize.size must be >= 1, got 0"),
    ],
)
def test_bad_pool_arguments_are_refused(make: Any, error: type[Exception], complaint: str) -> None:
    with pytest.raises(error, match=complaint):
        make()


async def test_a_pools_own_mailbox_argument_is_refused() -> None:
    async with open_actor_system() as system:
        with pytest.raises(TypeError, match=r"a Pool's mailbox= is its workers'"):
            system.spawn(Pool(Plain, ([],)), mailbox=Bounded(3))


@pytest.mark.parametrize("routing", ROUTINGS)
async def test_a_pool_restarted_by_an_escalating_worker_serves_with_fresh_workers(
    routing: str, autojump_clock: trio.testing.MockClock
) -> None:
    log: list[tuple[str, Any]] = []
    async with open_actor_system() as system:
        pool = system.spawn(Pool(Worker, (log,), size=2, routing=routing, supervision=Escalate()))  # type: ignore[arg-type]
        assert await pool.ask("first") in {"worker-1", "worker-2"}
        with pytest.raises(RuntimeError, match="worker failed"):
            await pool.ask("fail")  # escalates: the pool restarts, with new workers
        answers = {await pool.ask(number) for number in range(4)}
        # Only the fresh workers (asked one at a time, smallest-mailbox and balancing
        # may take the same idle one each time).
        assert answers <= {"worker-3", "worker-4"}
        assert pool.statistics().restarts == 1
        assert system.statistics().live_actors == 3
        assert system.dead_letters.count == 0


# --- regressions found by review (session 9) -------------------------------------------


async def test_broadcast_and_resize_told_before_the_workers_exist_are_kept() -> None:
    log: list[tuple[str, Any]] = []
    async with open_actor_system() as system:
        pool = system.spawn(Pool(Plain, (log,), size=2))
        pool.tell(Broadcast("hello"))  # before on_start has spawned the workers
        pool.tell(Resize(3))
        assert {await pool.ask(n) for n in range(3)} == {"worker-1", "worker-2", "worker-3"}
        assert sorted(name for name, m in log if m == "hello") == ["worker-1", "worker-2"]


async def test_growing_and_shrinking_at_once_leaves_the_system_alive() -> None:
    log: list[tuple[str, Any]] = []
    async with open_actor_system() as system:
        pool = system.spawn(Pool(Plain, (log,), size=2, routing="balancing"))
        await pool.ask("started")
        pool.tell(Resize(3))
        pool.tell(Resize(2))  # the third worker's feeder never ran
        assert await pool.ask("x") in {"worker-1", "worker-2"}


async def test_a_tell_from_another_thread_to_a_full_worker_is_a_dead_letter() -> None:
    class Slow(Actor):
        async def receive(self, message: Any) -> None:
            await trio.sleep(0.01)

    async with open_actor_system() as system:
        pool = system.spawn(Pool(Slow, size=1, mailbox=Bounded(1, "fail")))
        await pool.ask("started")
        await trio.to_thread.run_sync(tell_each, pool, range(5))
        await trio.sleep(0.5)
        assert system.dead_letters.by_reason["overflow"] >= 1


async def test_a_drain_ends_when_a_worker_stops_during_it(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log: list[tuple[str, Any]] = []
    async with open_actor_system() as system:
        pool = system.spawn(
            Pool(Worker, (log,), size=2, routing="balancing", supervision=Stop()),
            shutdown=math.inf,
        )
        await trio.testing.wait_all_tasks_blocked()
        for message in ("fail", "a", "b", "c"):
            pool.tell(message)
        with trio.move_on_after(100):
            await pool.stop(drain=True)
        assert pool.statistics().state == "stopped"
        assert sorted(m for _, m in log) == ["a", "b", "c"]


@pytest.mark.parametrize("routing", ["round_robin", "balancing"])
async def test_an_immediate_stop_ends_a_pools_drain_at_once(
    routing: str, autojump_clock: trio.testing.MockClock
) -> None:
    log: list[tuple[str, Any]] = []
    async with open_actor_system() as system:
        pool = system.spawn(Pool(Worker, (log,), size=1, routing=routing), shutdown=math.inf)  # type: ignore[arg-type]
        await trio.testing.wait_all_tasks_blocked()
        for number in range(100):
            pool.tell(number)
        pool.stop_nowait(drain=True)
        await trio.sleep(0.5)
        began = trio.current_time()
        await pool.stop()
        assert trio.current_time() - began < 1.0


async def test_a_drain_cut_by_the_shutdown_timeout_strands_the_pools_queue(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log: list[tuple[str, Any]] = []
    async with open_actor_system() as system:
        pool = system.spawn(Pool(Worker, (log,), size=1, routing="balancing"), shutdown=2.5)
        await trio.testing.wait_all_tasks_blocked()
        for number in range(10):
            pool.tell(number)
        await pool.stop(drain=True)
        handled = sum(1 for _, m in log if isinstance(m, int))
        # The worker's stats count the one cut short as handled; the rest are letters.
        assert handled + 1 + system.dead_letters.count == 10
        assert pool.statistics().failures == 1  # the ShutdownTimeout


# --- regressions found by review (session 10) ------------------------------------------


class Unwinding(Actor):
    """1 s per message; "cancel me" runs until cancelled, then unwinds for 5 s."""

    def __init__(self, log: list[tuple[str, Any]]) -> None:
        self.log = log

    async def receive(self, message: Any) -> Any:
        if message == "fail":
            raise RuntimeError("worker failed")
        if message == "cancel me":
            try:
                await trio.sleep_forever()
            finally:
                with trio.CancelScope(shield=True):
                    await trio.sleep(5)
        await trio.sleep(1)
        self.log.append((self.ref.name, message))
        return self.ref.name


async def assert_both_workers_serve(pool: Any, log: list[tuple[str, Any]]) -> None:
    """Two tells of a second's work each go to two different workers at once."""
    log.clear()
    pool.tell("a")
    pool.tell("b")
    await trio.sleep(1.5)
    assert len({name for name, _ in log}) == 2


@pytest.mark.parametrize("by", ["tell", "ask"])
async def test_a_restarting_balancing_worker_is_handed_no_work_until_it_has_started(
    by: str, autojump_clock: trio.testing.MockClock
) -> None:
    log: list[tuple[str, Any]] = []
    backoff = Restart(backoff=Backoff(min_delay=10.0, jitter=0.0))
    async with open_actor_system() as system:
        pool = system.spawn(
            Pool(Unwinding, (log,), size=2, routing="balancing", supervision=backoff)
        )
        await trio.testing.wait_all_tasks_blocked()
        if by == "tell":
            pool.tell("fail")
        else:
            with pytest.raises(RuntimeError, match="worker failed"):
                await pool.ask("fail")
        await trio.testing.wait_all_tasks_blocked()
        started = trio.current_time()
        for number in range(4):
            pool.tell(number)
        await trio.sleep(4.5)  # the healthy worker's four seconds, not the backoff's ten
        assert [m for _, m in log] == [0, 1, 2, 3]
        assert len({name for name, _ in log}) == 1
        await trio.sleep_until(started + 11)  # the other one has restarted: both serve
        await assert_both_workers_serve(pool, log)


async def test_a_worker_unwinding_a_cancelled_ask_is_handed_no_work(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log: list[tuple[str, Any]] = []
    async with open_actor_system() as system:
        pool = system.spawn(Pool(Unwinding, (log,), size=2, routing="balancing"))
        await trio.testing.wait_all_tasks_blocked()
        with trio.move_on_after(1):
            await pool.ask("cancel me")  # its worker unwinds until 6 s
        for number in range(3):
            pool.tell(number)
        await trio.sleep(3.5)  # the other worker's three seconds
        assert [m for _, m in log] == [0, 1, 2]
        assert len({name for name, _ in log}) == 1
        await trio.sleep(3)  # both free again
        await assert_both_workers_serve(pool, log)


async def test_a_pools_ask_stranded_in_a_worker_fails_back(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # A balancing pool's asks are of its own kind of envelope (_PoolAsk): stranded
    # or dropped, they are failed back as asks, never made dead letters like tells
    # (their askers would wait forever). Queued here behind a busy worker's handler.
    from trio_actors.actors._pool._balancing import _PoolAsk

    class Busy(Actor):
        async def receive(self, message: Any) -> Any:
            await trio.sleep(10)

    async with open_actor_system() as system:
        pool = system.spawn(Pool(Busy, size=1, routing="balancing"))
        await trio.testing.wait_all_tasks_blocked()
        worker = local_cell(pool).workers[0]  # type: ignore[attr-defined]  # (a PoolCell)
        worker.ref.tell("busy")
        await trio.testing.wait_all_tasks_blocked()
        task = trio.lowlevel.current_task()
        ask = _PoolAsk(worker, "queued", task, pool._cell)  # type: ignore[arg-type]
        async with trio.open_nursery() as nursery:
            nursery.start_soon(worker.ref.stop)
            with trio.fail_after(100), pytest.raises(ActorStopped, match="before answering"):
                await worker.queue_ask("queued", task, ask)  # (a letter: waits forever)
        assert system.dead_letters.count == 0


@pytest.mark.parametrize("routing", ROUTINGS)
async def test_a_pools_statistics_count_what_its_workers_did_past_and_present(
    routing: str, autojump_clock: trio.testing.MockClock
) -> None:
    log: list[tuple[str, Any]] = []
    async with open_actor_system() as system:
        pool = system.spawn(Pool(Plain, (log,), size=3, routing=routing))  # type: ignore[arg-type]
        await trio.testing.wait_all_tasks_blocked()
        for number in range(6):
            pool.tell(number)
        assert await pool.ask("asked") in {"worker-1", "worker-2", "worker-3"}
        await trio.testing.wait_all_tasks_blocked()
        pool.tell(Resize(1))  # two workers stop (with what they handled)
        await trio.testing.wait_all_tasks_blocked()
        stats = pool.statistics()
        assert len(log) == 7
        assert stats.handled == 7  # not the pool's own Terminated notices of workers
        assert stats.failed_back == stats.withdrawn == stats.dead_letters.total == 0
    final = pool.statistics()
    assert final.handled == 7
    assert final.state == "stopped"


async def test_a_workers_end_during_a_drain_does_not_end_the_drain(
    autojump_clock: trio.testing.MockClock,
) -> None:
    # The pool handles the Terminated of a worker that stopped just before its drain
    # began; its own mailbox then runs dry, and the serving loop says so
    # (went_idle_refusing) -- which must not end the drain of its shared queue (it
    # had: the rest of the queue was neither handled nor a dead letter; found by
    # T21 with pools). That call is made here directly: which task runs first when
    # the worker's stop and the drain meet in one scheduler batch is trio's choice.
    log: list[tuple[str, Any]] = []
    async with open_actor_system() as system:
        pool = system.spawn(  # (no shutdown timeout: the drain takes its 5 s whole)
            Pool(Worker, (log,), size=2, routing="balancing"), shutdown=math.inf
        )
        await trio.testing.wait_all_tasks_blocked()
        for number in range(10):
            pool.tell(number)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(functools.partial(pool.stop, drain=True))
            await trio.sleep(0.5)
            _stopping.went_idle_refusing(local_cell(pool))
        assert sorted(m for _, m in log) == list(range(10))
        assert system.dead_letters.count == 0


def tell_each(ref: ActorRef, messages: Iterable[Any]) -> None:
    """Tell ``ref`` each of ``messages`` (from another thread, in these tests)."""
    for message in messages:
        ref.tell(message)

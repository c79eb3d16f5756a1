"""Contracts T32 and T33: backpressure through ``ask`` and through a balancing pool.

T22 pins ``send`` into a full bounded mailbox; these pin the rest of "one process,
the same rules": an ``ask`` waits for room in the same line as the sends (T32), and
a balancing pool's shared queue is bounded by its workers' ``Bounded`` (T33).
"""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from .. import Actor, Bounded, MailboxFull, Pool, ServingPolicy
from ._harness import require, run_virtual, system_for
from ._registry import contract

CAPACITY = 3
CALLERS = 12  # callers of a full mailbox; every third one asks, the others send
POOL_SIZE = 3
POOL_CAPACITY = 4
PRODUCED = 60


def _asks(n: int) -> bool:
    return n % 3 == 1


class _Recorder(Actor):
    """Records each message and the mailbox depth it saw; costs virtual time; an
    ask's answer is its message."""

    def __init__(self, clock: trio.testing.MockClock, log: list[tuple[Any, int]]) -> None:
        self.clock = clock
        self.log = log

    def receive(self, message: Any) -> Any:
        self.log.append((message, self.ref.statistics().mailbox_depth))
        self.clock.jump(0.001)
        return message


class _AsyncRecorder(_Recorder):
    async def receive(self, message: Any) -> Any:
        self.log.append((message, self.ref.statistics().mailbox_depth))
        await trio.sleep(0.001)
        return message


def _caller(ref: Any, n: int, arrived: list[int], answers: dict[int, Any], scope: Any) -> Any:
    """Caller ``n``: sends, or (every third) asks. It notes its arrival just before
    it calls, and nothing yields in between, so ``arrived`` is the order in which
    the callers reached the mailbox."""

    async def call() -> None:
        with scope:
            arrived.append(n)
            if _asks(n):
                answers[n] = await ref.ask(n)
            else:
                await ref.send(n)
                answers[n] = "sent"

    return call


@contract(
    "T32",
    "asks wait for room in line",
    f"sends and asks (every third caller) to a full Bounded({CAPACITY}) mailbox wait "
    "in one line: the depth never exceeds the capacity, everything is handled in the "
    "order it arrived and every ask answered, none fails with MailboxFull, nothing is "
    "a dead letter; an ask cancelled while it waits leaves the line at once and is "
    "never handled (plain and async actors)",
)
def asks_wait_in_line(policy: ServingPolicy) -> None:
    for actor_class in (_Recorder, _AsyncRecorder):
        _asks_wait_in_line(policy, actor_class)


def _asks_wait_in_line(policy: ServingPolicy, actor_class: type[_Recorder]) -> None:
    kind = "async" if actor_class is _AsyncRecorder else "plain"
    log: list[tuple[Any, int]] = []
    arrived: list[int] = []
    answers: dict[int, Any] = {}
    victim: list[int] = []

    async def main(clock: trio.testing.MockClock) -> None:
        gate = trio.Event()

        class Gated(actor_class):  # type: ignore[valid-type,misc]
            async def on_start(self) -> None:
                await gate.wait()  # messages queue until the gate opens

        async with system_for(policy) as system:
            ref = system.spawn(Gated, clock, log, mailbox=Bounded(CAPACITY))
            scopes = [trio.CancelScope() for _ in range(CALLERS)]
            async with trio.open_nursery() as nursery:
                for n in range(CALLERS):
                    nursery.start_soon(_caller(ref, n, arrived, answers, scopes[n]))
                await trio.testing.wait_all_tasks_blocked()
                stats = ref.statistics()
                got = (stats.mailbox_depth, stats.senders_waiting)
                require(
                    got == (CAPACITY, CALLERS - CAPACITY),
                    f"{kind}: (depth, waiting) = {got} with {CALLERS} callers, "
                    f"expected {(CAPACITY, CALLERS - CAPACITY)}",
                )
                # An ask waiting for room -- one with a caller behind it, if the
                # scheduler's order left one (it may put every ask first or last).
                waiting = arrived[CAPACITY:]
                asks_waiting = [n for n in waiting[:-1] if _asks(n)] or [
                    n for n in waiting if _asks(n)
                ]
                victim.append(asks_waiting[0])
                scopes[victim[0]].cancel()
                await trio.testing.wait_all_tasks_blocked()
                stats = ref.statistics()
                after = (stats.mailbox_depth, stats.senders_waiting, stats.withdrawn)
                expected = (CAPACITY, CALLERS - CAPACITY - 1, 1)
                require(
                    after == expected,
                    f"{kind}: after an ask waiting for room was cancelled, (depth, "
                    f"waiting, withdrawn) = {after}, expected {expected}",
                )
                gate.set()
            await ref.stop(drain=True)
            stats = ref.statistics()
            require(
                (system.dead_letters.count, stats.failed_back, stats.withdrawn) == (0, 0, 1),
                f"{kind}: {system.dead_letters.count} dead letters, {stats.failed_back} "
                f"failed back, {stats.withdrawn} withdrawn (expected 0, 0, 1)",
            )

    try:
        run_virtual(main)
    except BaseExceptionGroup as group:
        full, _ = group.split(MailboxFull)
        if full is None:
            raise
        first: BaseException = full
        while isinstance(first, BaseExceptionGroup):
            first = first.exceptions[0]
        require(False, f"{kind}: a caller got MailboxFull: {first}")
    handled = [message for message, _ in log]
    expected = [n for n in arrived if n != victim[0]]
    require(
        handled == expected,
        f"{kind}: handled {handled}; expected the arrival order {arrived} without the "
        f"cancelled ask {victim[0]}",
    )
    deepest = max(depth for _, depth in log)
    require(deepest <= CAPACITY, f"{kind}: the mailbox held {deepest} > {CAPACITY}")
    wrong = {n: a for n, a in answers.items() if a != (n if _asks(n) else "sent")}
    require(not wrong, f"{kind}: callers ended wrongly: {wrong}")


class _Worker(Actor):
    """A pool's worker: notes each message as it begins it, then takes 10 ms."""

    def __init__(self, started: list[Any]) -> None:
        self.started = started

    async def receive(self, message: Any) -> Any:
        self.started.append(message)
        await trio.sleep(0.01)
        return message


@contract(
    "T33",
    "a balancing pool's bound",
    f"a balancing Pool(size={POOL_SIZE}, mailbox=Bounded({POOL_CAPACITY})): a producer "
    f"sending {PRODUCED} messages never has more than {POOL_CAPACITY} queued plus one "
    "handed to each worker and not yet begun, and waits for room; nothing is dropped "
    "or handled twice; with one worker, sends and asks waiting for room are served "
    "in the order they arrived, and a cancelled waiting ask leaves nothing",
)
def balancing_pool_bound(policy: ServingPolicy) -> None:
    _producer(policy)
    _pool_line(policy)


def _producer(policy: ServingPolicy) -> None:
    started: list[Any] = []
    ahead: list[int] = []  # at each return of send: sent, not yet begun

    async def main(clock: trio.testing.MockClock) -> None:
        async with system_for(policy) as system:
            bound = Bounded(POOL_CAPACITY)
            pool = system.spawn(
                Pool(_Worker, (started,), size=POOL_SIZE, routing="balancing", mailbox=bound)
            )
            await trio.testing.wait_all_tasks_blocked()
            for n in range(PRODUCED):
                await pool.send(n)
                ahead.append(n + 1 - len(started))
                depth = pool.statistics().mailbox_depth
                require(
                    depth <= POOL_CAPACITY + POOL_SIZE,
                    f"the pool held {depth} after send {n}",
                )
            await pool.stop(drain=True)
            stats = pool.statistics()
            require(
                (system.dead_letters.count, stats.failed_back) == (0, 0),
                f"{system.dead_letters.count} dead letters, {stats.failed_back} failed back",
            )

    run_virtual(main)
    most = max(ahead)
    require(
        most <= POOL_CAPACITY + POOL_SIZE,
        f"a producer had {most} messages sent and not yet begun, more than the "
        f"{POOL_CAPACITY} the queue holds plus one per worker ({POOL_SIZE})",
    )
    require(
        sorted(started) == list(range(PRODUCED)),
        f"begun {sorted(started)}, expected each of 0..{PRODUCED - 1} once",
    )


def _pool_line(policy: ServingPolicy) -> None:
    started: list[Any] = []
    arrived: list[int] = []
    answers: dict[int, Any] = {}
    victim: list[int] = []

    async def main(clock: trio.testing.MockClock) -> None:
        async with system_for(policy) as system:
            bound = Bounded(CAPACITY)
            pool = system.spawn(
                Pool(_Worker, (started,), size=1, routing="balancing", mailbox=bound)
            )
            await trio.testing.wait_all_tasks_blocked()
            scopes = [trio.CancelScope() for _ in range(CALLERS)]
            async with trio.open_nursery() as nursery:
                # One at a time: a pool's send and ask yield once before they line up.
                for n in range(CALLERS):
                    nursery.start_soon(_caller(pool, n, arrived, answers, scopes[n]))
                    await trio.testing.wait_all_tasks_blocked()
                waiting = pool.statistics().senders_waiting
                expected = CALLERS - CAPACITY - 1  # (one in the worker's hands)
                require(
                    waiting == expected,
                    f"pool: {waiting} callers wait for room, expected {expected}",
                )
                victim.append(next(n for n in arrived[CAPACITY + 1 : -1] if _asks(n)))
                scopes[victim[0]].cancel()
                await trio.testing.wait_all_tasks_blocked()
                waiting = pool.statistics().senders_waiting
                require(
                    waiting == expected - 1,
                    f"pool: {waiting} wait after a waiting ask was cancelled, "
                    f"expected {expected - 1}",
                )
            await pool.stop(drain=True)
            stats = pool.statistics()
            got = (system.dead_letters.count, stats.failed_back, stats.withdrawn)
            require(got == (0, 0, 1), f"pool: (dead letters, failed back, withdrawn) = {got}")

    run_virtual(main)
    expected = [n for n in arrived if n != victim[0]]
    require(
        started == expected,
        f"pool: begun {started}; expected the arrival order {arrived} without the "
        f"cancelled ask {victim[0]}",
    )


__all__: list[str] = []

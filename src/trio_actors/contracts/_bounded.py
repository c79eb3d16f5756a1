"""Contracts T22 and T23: backpressure and overflow of bounded mailboxes."""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from .. import Actor, Bounded, MailboxFull, ServingPolicy
from ._harness import require, run_virtual, system_for
from ._registry import contract

CAPACITY = 4
SENDERS = 12
CANCELLED = 7  # the sender whose send is cancelled while it waits


class _Recorder(Actor):
    """Records each message and the mailbox depth it saw; costs virtual time."""

    def __init__(self, clock: trio.testing.MockClock, log: list[tuple[Any, int]]) -> None:
        self.clock = clock
        self.log = log

    def receive(self, message: Any) -> Any:
        self.log.append((message, self.ref.statistics().mailbox_depth))
        self.clock.jump(0.001)


class _AsyncRecorder(_Recorder):
    async def receive(self, message: Any) -> Any:
        self.log.append((message, self.ref.statistics().mailbox_depth))
        await trio.sleep(0.001)


@contract(
    "T22",
    "backpressure",
    f"senders to a full Bounded({CAPACITY}) mailbox wait: none resumes before its "
    "message is queued, the depth never exceeds the capacity, waiting senders resume "
    "and are handled first come first served, and a send cancelled while it waits "
    "leaves nothing queued (never handled, no dead letter); send is a checkpoint "
    "(plain and async actors)",
)
def backpressure(policy: ServingPolicy) -> None:
    for actor_class in (_Recorder, _AsyncRecorder):
        _backpressure(policy, actor_class)


def _backpressure(policy: ServingPolicy, actor_class: type[_Recorder]) -> None:
    kind = "async" if actor_class is _AsyncRecorder else "plain"
    log: list[tuple[Any, int]] = []
    arrived: list[int] = []
    resumed: list[tuple[int, int]] = []  # (sender, messages taken when it resumed)
    victim: list[int] = []

    async def main(clock: trio.testing.MockClock) -> None:
        gate = trio.Event()

        class Gated(actor_class):  # type: ignore[valid-type,misc]
            async def on_start(self) -> None:
                await gate.wait()  # messages queue until the gate opens

        async with system_for(policy) as system:
            ref = system.spawn(Gated, clock, log, mailbox=Bounded(CAPACITY))
            scopes = [trio.CancelScope() for _ in range(SENDERS)]

            async def sender(n: int) -> None:
                with scopes[n]:
                    arrived.append(n)
                    await ref.send(n)
                    resumed.append((n, len(log)))

            async with trio.open_nursery() as nursery:
                for n in range(SENDERS):
                    nursery.start_soon(sender, n)
                await trio.testing.wait_all_tasks_blocked()
                require(
                    len(resumed) == CAPACITY,
                    f"{kind}: {len(resumed)} senders resumed with room for {CAPACITY}",
                )
                waiting = ref.statistics().senders_waiting
                require(
                    waiting == SENDERS - CAPACITY,
                    f"{kind}: {waiting} senders wait, expected {SENDERS - CAPACITY}",
                )
                victim.append(arrived[-2])  # one that waits, not the last
                scopes[victim[0]].cancel()
                await trio.testing.wait_all_tasks_blocked()
                gate.set()
            with trio.testing.assert_checkpoints():
                await ref.send("last")  # with room: still a checkpoint
            await ref.stop(drain=True)
            require(
                system.dead_letters.count == 0,
                f"{kind}: {system.dead_letters.count} dead letters",
            )
            require(
                ref.statistics().withdrawn == 1,
                f"{kind}: the cancelled send was counted "
                f"{ref.statistics().withdrawn} times as withdrawn",
            )

    run_virtual(main)
    handled = [message for message, _ in log]
    expected = [n for n in arrived if n != victim[0]]
    require(
        handled == [*expected, "last"],
        f"{kind}: handled {handled}; expected the sends in arrival order {arrived} "
        f"without the cancelled one ({victim[0]}), then 'last'",
    )
    deepest = max(depth for _, depth in log)
    require(deepest <= CAPACITY, f"{kind}: the mailbox held {deepest} > {CAPACITY}")
    # (Senders admitted in one step resume in trio's order within that step: the
    # queue order is what first come, first served means, checked above.)
    for n, taken in resumed:
        position = expected.index(n)  # fits once position + 1 - CAPACITY are taken
        require(
            taken >= position + 1 - CAPACITY,
            f"{kind}: sender {n} resumed when only {taken} messages had been taken: "
            "it did not wait for room",
        )


@contract(
    "T23",
    "overflow policies",
    "a tell to a full bounded mailbox: 'fail' raises MailboxFull and queues nothing, "
    "'drop_new' makes the new message DeadLetter(reason='overflow'), 'drop_old' "
    "makes the oldest queued one an overflow dead letter (or fails a dropped ask "
    "back with MailboxFull); every message is handled or dead-lettered exactly once",
)
def overflow_policies(policy: ServingPolicy) -> None:
    for overflow in ("fail", "drop_new", "drop_old"):
        _overflow(policy, overflow)


def _overflow(policy: ServingPolicy, overflow: Any) -> None:
    log: list[tuple[Any, int]] = []
    raised: list[int] = []
    ask_failed: list[str] = []

    async def main(clock: trio.testing.MockClock) -> None:
        async with system_for(policy) as system:
            gate = trio.Event()

            class Held(_AsyncRecorder):
                async def receive(self, message: Any) -> Any:
                    if message == "hold":
                        await gate.wait()
                        return None
                    return await super().receive(message)

            ref = system.spawn(Held, clock, log, mailbox=Bounded(CAPACITY, overflow=overflow))
            ref.tell("hold")
            await trio.testing.wait_all_tasks_blocked()

            async def ask() -> None:
                try:
                    await ref.ask("ask")
                except MailboxFull:
                    ask_failed.append("ask")

            async with trio.open_nursery() as nursery:
                nursery.start_soon(ask)
                await trio.testing.wait_all_tasks_blocked()
                for n in range(10):
                    try:
                        ref.tell(n)
                    except MailboxFull:
                        raised.append(n)
                gate.set()
            await ref.stop(drain=True)
            letters = [d.message for d in system.dead_letters.recent]
            reasons = {d.reason for d in system.dead_letters.recent}
            handled = [m for m, _ in log]
            expected: tuple[list[Any], list[Any], list[int], list[str]]
            if overflow == "fail":
                expected = (["ask", 0, 1, 2], [], list(range(3, 10)), [])
            elif overflow == "drop_new":
                expected = (["ask", 0, 1, 2], list(range(3, 10)), [], [])
            else:
                expected = ([6, 7, 8, 9], [0, 1, 2, 3, 4, 5], [], ["ask"])
            got = (handled, letters, raised, ask_failed)
            require(
                got == expected,
                f"overflow={overflow!r}: (handled, dead letters, raised, asks failed "
                f"back) = {got}, expected {expected}",
            )
            require(reasons <= {"overflow"}, f"overflow={overflow!r}: reasons {reasons}")
            deepest = max(depth for _, depth in log)
            require(deepest <= CAPACITY, f"{overflow}: the mailbox held {deepest}")

    run_virtual(main)


__all__: list[str] = []

"""Contracts T1--T5: asking, ordering, starting, checkpoints, stopped actors."""

from __future__ import annotations

import contextlib
from typing import Any

import trio
import trio.lowlevel
import trio.testing

from .. import Actor, ActorStopped, ServingPolicy
from ._harness import require, run_virtual, settle, system_for
from ._registry import contract


class _Echo(Actor):
    def receive(self, message: Any) -> Any:
        if isinstance(message, BaseException):
            raise message
        return ("echo", message)


class _AsyncEcho(Actor):
    async def receive(self, message: Any) -> Any:
        await trio.lowlevel.checkpoint()
        if isinstance(message, BaseException):
            raise message
        return ("echo", message)


class _Oops(Exception):
    pass


@contract(
    "T1",
    "ask round trip",
    "ask returns the handler's return value, for plain and async handlers; a "
    "handler's exception reaches the asker with its type",
)
def ask_round_trip(policy: ServingPolicy) -> None:
    async def main(clock: trio.testing.MockClock) -> None:
        async with system_for(policy) as system:
            for factory in (_Echo, _AsyncEcho):
                ref = system.spawn(factory)
                kind = factory.__name__
                for message in (1, "two", None, (3, 4)):
                    reply = await ref.ask(message)
                    require(
                        reply == ("echo", message),
                        f"{kind}: ask({message!r}) returned {reply!r}",
                    )
                try:
                    await ref.ask(_Oops("from the handler"))
                except _Oops as error:
                    require(
                        str(error) == "from the handler",
                        f"{kind}: wrong error {error!r}",
                    )
                else:
                    require(
                        False,
                        f"{kind}: the handler's exception did not reach the asker",
                    )
                reply = await ref.ask("after")
                require(reply == ("echo", "after"), f"{kind}: no reply after a failure")

    run_virtual(main)


class _Recorder(Actor):
    """Records the order of messages and whether two handlers ever overlapped."""

    def __init__(self, log: list[Any], overlaps: list[Any]) -> None:
        self.log = log
        self.overlaps = overlaps
        self.active = 0

    async def receive(self, message: Any) -> Any:
        self.active += 1
        if self.active > 1:
            self.overlaps.append(message)
        await trio.lowlevel.checkpoint()
        await trio.sleep(0.001)
        self.log.append(message)
        self.active -= 1
        return message


class _PlainRecorder(Actor):
    def __init__(self, log: list[Any]) -> None:
        self.log = log

    def receive(self, message: Any) -> Any:
        self.log.append(message)
        return message


@contract(
    "T2",
    "order and exclusion",
    "messages are handled in the order they were told; never two handlers of one "
    "actor at once, even when an async handler awaits",
)
def order_and_exclusion(policy: ServingPolicy) -> None:
    async def main(clock: trio.testing.MockClock) -> None:
        async with system_for(policy) as system:
            log: list[Any] = []
            overlaps: list[Any] = []
            plain_log: list[Any] = []
            slow = system.spawn(_Recorder, log, overlaps)
            plain = system.spawn(_PlainRecorder, plain_log)
            expected = list(range(300))
            for i in expected:
                slow.tell(i)
                plain.tell(i)
                if i % 50 == 0:
                    await trio.lowlevel.checkpoint()  # interleave sending with serving
            # Asks from several tasks while tells are queued: still one at a time.
            async with trio.open_nursery() as nursery:
                for k in range(10):
                    nursery.start_soon(slow.ask, ("ask", k))
            await slow.ask("end")
            await plain.ask("end")
        tells = [m for m in log if isinstance(m, int)]
        require(
            tells == expected,
            f"async actor handled tells out of order: {tells[:10]}...",
        )
        plain_tells = [m for m in plain_log if isinstance(m, int)]
        require(plain_tells == expected, "plain actor handled tells out of order")
        require(not overlaps, f"two handlers of one actor ran at once for {overlaps[:5]}")

    run_virtual(main)


class _Starter(Actor):
    def __init__(self, log: list[Any], gate: trio.Event) -> None:
        self.log = log
        self.gate = gate

    async def on_start(self) -> None:
        self.log.append("start-begin")
        self.ref.tell("told-during-start")
        await self.gate.wait()
        await trio.sleep(0.01)
        self.log.append("start-end")

    def receive(self, message: Any) -> Any:
        self.log.append(message)
        return message


class _PlainStarter(Actor):
    def __init__(self, log: list[Any]) -> None:
        self.log = log

    def on_start(self) -> None:
        self.ref.tell("told-during-start")
        self.log.append("start")

    def receive(self, message: Any) -> Any:
        self.log.append(message)
        return message


@contract(
    "T3",
    "start before first message",
    "on_start completes before the first message; messages told before or during "
    "on_start are kept and handled after it",
)
def start_before_first_message(policy: ServingPolicy) -> None:
    async def main(clock: trio.testing.MockClock) -> None:
        async with system_for(policy) as system:
            log: list[Any] = []
            gate = trio.Event()
            ref = system.spawn(_Starter, log, gate)
            ref.tell("told-before-start")
            await settle()
            ref.tell("told-while-starting")
            gate.set()
            reply = await ref.ask("asked")
            require(reply == "asked", f"ask returned {reply!r}")
            want = [
                "start-begin",
                "start-end",
                "told-before-start",
                "told-during-start",
                "told-while-starting",
                "asked",
            ]
            require(log == want, f"async on_start: handled {log}, expected {want}")

            plain_log: list[Any] = []
            plain = system.spawn(_PlainStarter, plain_log)
            plain.tell("told-before-start")
            await settle()  # on_start runs and tells itself
            await plain.ask("asked")
            want = ["start", "told-before-start", "told-during-start", "asked"]
            require(
                plain_log == want,
                f"plain on_start: handled {plain_log}, expected {want}",
            )

    run_virtual(main)


@contract(
    "T4",
    "checkpoints",
    "tell is never a checkpoint; ask and stop always are",
)
def checkpoints(policy: ServingPolicy) -> None:
    async def main(clock: trio.testing.MockClock) -> None:
        async with system_for(policy) as system:
            for factory in (_Echo, _AsyncEcho):
                ref = system.spawn(factory)
                try:
                    with trio.testing.assert_no_checkpoints():
                        for i in range(200):
                            ref.tell(i)
                    with trio.testing.assert_checkpoints():
                        await ref.ask("x")  # queued behind the tells
                    with trio.testing.assert_checkpoints():
                        await ref.ask("y")  # to an idle actor
                    with trio.testing.assert_checkpoints():
                        await ref.stop()
                    # ... and the same once the actor has stopped.
                    with trio.testing.assert_no_checkpoints():
                        ref.tell("late")
                    with trio.testing.assert_checkpoints():
                        await ref.stop()
                    with trio.testing.assert_checkpoints(), contextlib.suppress(ActorStopped):
                        await ref.ask("late")
                except AssertionError as error:
                    require(
                        False,
                        f"{factory.__name__}: {error or 'checkpoint rule broken'}",
                    )

    run_virtual(main)


@contract(
    "T5",
    "stopped actor",
    "ask to a stopped actor raises ActorStopped; tell to it becomes exactly one "
    "DeadLetter(reason='stopped')",
)
def stopped_actor(policy: ServingPolicy) -> None:
    async def main(clock: trio.testing.MockClock) -> None:
        async with system_for(policy) as system:
            ref = system.spawn(_Echo)
            await ref.ask("alive")
            await ref.stop()
            before = system.dead_letters.count
            marker = object()
            ref.tell(marker)
            after = system.dead_letters.count
            require(
                after == before + 1,
                f"tell to a stopped actor made {after - before} dead letters",
            )
            letter = system.dead_letters.recent[-1]
            require(
                letter.message is marker and letter.recipient == ref and letter.reason == "stopped",
                f"wrong dead letter {letter!r}",
            )
            try:
                await ref.ask("anyone?")
            except ActorStopped:
                pass
            else:
                require(False, "ask to a stopped actor did not raise ActorStopped")
            require(
                system.dead_letters.count == after,
                "an ask to a stopped actor became a dead letter",
            )

    run_virtual(main)

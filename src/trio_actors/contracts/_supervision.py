"""Contracts T17--T19 and T30: restart, restart intensity, death watch, reproducible
backoff."""

from __future__ import annotations

from typing import Any

import trio
import trio.lowlevel
import trio.testing

from .. import Actor, Backoff, Restart, ServingPolicy, Stop, Terminated, open_actor_system
from ._harness import captured_failures, require, run_virtual, settle, system_for
from ._registry import ContractViolation, contract


class _Boom(Exception):
    pass


class _Flaky(Actor):
    """Fails on "boom"; records which instance handled what, and its hooks."""

    made = 0

    def __init__(self, log: list[Any]) -> None:
        _Flaky.made += 1
        self.number = _Flaky.made
        self.log = log
        self.seen = 0

    def on_start(self) -> None:
        self.log.append(("start", self.number))

    def receive(self, message: Any) -> Any:
        self.seen += 1
        self.log.append((message, self.number))
        if message == "boom":
            raise _Boom(f"instance {self.number}")
        return (message, self.number, self.seen)

    def on_stop(self) -> None:
        self.log.append(("stop", self.number))


class _AsyncFlaky(_Flaky):
    async def on_start(self) -> None:  # type: ignore[override]
        await trio.lowlevel.checkpoint()
        self.log.append(("start", self.number))

    async def receive(self, message: Any) -> Any:
        await trio.lowlevel.checkpoint()
        return super().receive(message)


@contract(
    "T17",
    "restart",
    "under the restart strategy a failing handler gives a fresh instance (factory "
    "called again, on_start again); the failing message is not retried; later messages "
    "go to the new instance; the failing ask's asker gets the exception",
)
def restart(policy: ServingPolicy) -> None:
    async def main(clock: trio.testing.MockClock) -> None:
        with captured_failures():
            async with system_for(policy) as system:
                for factory in (_Flaky, _AsyncFlaky):
                    kind = factory.__name__
                    for backoff in (None, Backoff(min_delay=0.5, jitter=0.0)):
                        _Flaky.made = 0
                        log: list[Any] = []
                        ref = system.spawn(factory, log, supervision=Restart(backoff=backoff))
                        first = await ref.ask("a")
                        ref.tell("queued-1")
                        try:
                            await ref.ask("boom")
                        except _Boom as error:
                            require(str(error) == "instance 1", f"{kind}: wrong error {error}")
                        else:
                            require(False, f"{kind}: the failing ask's asker got no exception")
                        ref.tell("queued-2")
                        after = await ref.ask("b")
                        require(first == ("a", 1, 1), f"{kind}: {first}")
                        require(
                            after == ("b", 2, 2),
                            f"{kind}: after the failure 'b' got {after}, expected the fresh "
                            "instance 2 having seen only 'queued-2' before",
                        )
                        want = [
                            ("start", 1),
                            ("a", 1),
                            ("queued-1", 1),
                            ("boom", 1),
                            ("stop", 1),
                            ("start", 2),
                            ("queued-2", 2),
                            ("b", 2),
                        ]
                        require(log == want, f"{kind} (backoff {backoff}): {log}")
                        await ref.stop()

    run_virtual(main)


class _AlwaysFails(Actor):
    made = 0

    def __init__(self) -> None:
        _AlwaysFails.made += 1

    def receive(self, message: Any) -> Any:
        raise _Boom(f"failure {message}")


class _Parent(Actor):
    made = 0

    def __init__(self, log: list[Any]) -> None:
        _Parent.made += 1
        self.log = log

    def receive(self, message: Any) -> Any:
        if message == "spawn":
            return self.spawn(_AlwaysFails, name="child", supervision=Restart(max_restarts=1))
        return message


@contract(
    "T18",
    "restart intensity",
    "more than max_restarts failures within the window escalate to the parent; at the "
    "root the system block raises an ExceptionGroup holding the original error",
    absolute=False,
)
def restart_intensity(policy: ServingPolicy) -> None:
    async def spaced_out(clock: trio.testing.MockClock) -> None:
        # Failures further apart than the window never escalate.
        with captured_failures():
            async with system_for(policy) as system:
                _AlwaysFails.made = 0
                ref = system.spawn(_AlwaysFails, supervision=Restart(max_restarts=3, within=5.0))
                for i in range(10):
                    ref.tell(i)
                    await trio.sleep(2.0)
                require(
                    _AlwaysFails.made == 11,
                    f"10 spaced-out failures made {_AlwaysFails.made} instances",
                )
                require(system.live_actors == 1, "a spaced-out failure stopped the actor")

    run_virtual(spaced_out)

    async def to_parent(clock: trio.testing.MockClock) -> None:
        with captured_failures():
            async with system_for(policy) as system:
                _Parent.made = 0
                log: list[Any] = []
                parent = system.spawn(_Parent, log, supervision=Restart(max_restarts=5))
                child = await parent.ask("spawn")
                child.tell(1)
                child.tell(2)  # second failure within the window: more than 1 restart
                await settle()
                require(
                    _Parent.made == 2,
                    f"the child's exceeded intensity did not restart the parent "
                    f"({_Parent.made} parent instances)",
                )
                try:
                    await child.ask(3)
                except Exception as error:  # the escalating child has stopped
                    require(
                        type(error).__name__ == "ActorStopped",
                        f"the escalating child is still answering: {error!r}",
                    )

    run_virtual(to_parent)

    async def at_root(clock: trio.testing.MockClock) -> None:
        with captured_failures():
            async with system_for(policy) as system:
                ref = system.spawn(_AlwaysFails, supervision=Restart(max_restarts=3, within=5.0))
                for i in range(4):
                    ref.tell(i)
                await trio.sleep(1)  # the system fails meanwhile
                raise ContractViolation("the system block did not fail on exceeded intensity")

    try:
        run_virtual(at_root)
    except BaseExceptionGroup as group:
        matched, rest = group.split(_Boom)
        if matched is None:
            raise ContractViolation(
                f"the ExceptionGroup did not hold the error: {group!r}"
            ) from None
        require(rest is None, f"the ExceptionGroup held more than the error: {rest!r}")
        leaf = matched.exceptions[0]
        while isinstance(leaf, BaseExceptionGroup):
            leaf = leaf.exceptions[0]
        require(str(leaf) == "failure 3", f"the escalated error is {leaf!r}, not the 4th")
        require(leaf.__traceback__ is not None, "the escalated error lost its traceback")
    else:
        require(False, "the system block did not raise an ExceptionGroup")


class _Watcher(Actor):
    def __init__(self, notices: list[Any]) -> None:
        self.notices = notices

    def receive(self, message: Any) -> Any:
        if isinstance(message, Terminated):
            self.notices.append((message.ref, message.error))
            return None
        command, ref = message
        if command == "watch":
            self.watch(ref)
        elif command == "unwatch":
            self.unwatch(ref)
        return None


class _Victim(Actor):
    def receive(self, message: Any) -> Any:
        if message == "fail":
            raise _Boom("victim failed")
        return message


@contract(
    "T19",
    "death watch",
    "a watcher receives exactly one terminated message for a stop and for a failure; "
    "watching an actor that already stopped delivers it at once",
)
def death_watch(policy: ServingPolicy) -> None:
    async def main(clock: trio.testing.MockClock) -> None:
        with captured_failures():
            async with system_for(policy) as system:
                notices: list[Any] = []
                watcher = system.spawn(_Watcher, notices)
                stopped = system.spawn(_Victim)
                failed = system.spawn(_Victim, supervision=Stop())
                for ref in (stopped, failed, stopped):  # watching twice is watching once
                    watcher.tell(("watch", ref))
                await settle()
                await stopped.stop()
                failed.tell("fail")
                await settle()
                await stopped.stop()  # stopping again is no second stop
                await settle()
                require(
                    [n[0] for n in notices] == [stopped, failed],
                    f"expected one Terminated for each, got {notices}",
                )
                require(notices[0][1] is None, f"a stop reported an error: {notices[0]}")
                require(
                    isinstance(notices[1][1], _Boom),
                    f"a failure's Terminated did not carry the error: {notices[1]}",
                )
                notices.clear()
                watcher.tell(("watch", stopped))  # already stopped: delivered at once
                await settle()
                require(notices == [(stopped, None)], f"late watch delivered {notices}")

                # Unwatch withdraws the registration; a watcher that stops first gets
                # nothing and leaves nothing behind.
                notices.clear()
                target = system.spawn(_Victim)
                watcher.tell(("watch", target))
                watcher.tell(("unwatch", target))
                await settle()
                await target.stop()
                await settle()
                require(notices == [], f"an unwatched actor's stop was delivered: {notices}")
                other = system.spawn(_Victim)
                watcher.tell(("watch", other))
                await settle()
                await watcher.stop()
                letters_before = system.dead_letters.count
                await other.stop()
                require(notices == [], f"a stopped watcher got {notices}")
                # A watcher left registered would be told, and its Terminated become
                # a dead letter (it accepts nothing any more).
                require(
                    system.dead_letters.count == letters_before,
                    f"a stopped watcher stayed registered: {system.dead_letters.recent[-1:]}",
                )

    run_virtual(main)


class _Starts(Actor):
    """Records the trio time of each instance's start; fails on "boom"."""

    def __init__(self, starts: list[float]) -> None:
        self.starts = starts

    def on_start(self) -> None:
        self.starts.append(trio.current_time())

    def receive(self, message: Any) -> Any:
        if message == "boom":
            raise _Boom("again")
        return message


def _restart_times(policy: ServingPolicy, seed: int | None) -> tuple[list[float], int]:
    """One run: an actor with jittered backoff fails six times; its start times and
    the system's seed."""

    async def main(clock: trio.testing.MockClock) -> tuple[list[float], int]:
        starts: list[float] = []
        backoff = Backoff(min_delay=0.1, max_delay=5.0, factor=2.0, jitter=0.5)
        with captured_failures():
            async with open_actor_system(serving=policy, seed=seed) as system:
                ref = system.spawn(
                    _Starts,
                    starts,
                    supervision=Restart(max_restarts=10, within=1000.0, backoff=backoff),
                )
                for _ in range(6):
                    await ref.ask("ping")  # started (after the backoff, if restarting)
                    ref.tell("boom")
                await ref.ask("ping")
        return [start - starts[0] for start in starts], system.seed

    return run_virtual(main)


@contract(
    "T30",
    "reproducible backoff",
    "with open_actor_system(seed=...) and MockClock, restart times with jitter are the "
    "same on every run; another seed gives other times; a system opened without a seed "
    "draws one, and replaying with it gives the same times",
)
def reproducible_backoff(policy: ServingPolicy) -> None:
    first, seed = _restart_times(policy, 30)
    require(seed == 30, f"system.seed is {seed}, not the seed given (30)")
    require(len(first) == 7, f"{len(first)} starts, not 7 (one and six restarts)")
    again, _ = _restart_times(policy, 30)
    require(first == again, f"the same seed gave other restart times: {first} and {again}")
    other, _ = _restart_times(policy, 31)
    require(first != other, f"seeds 30 and 31 gave the same restart times {first}: no jitter?")
    drawn_times, drawn = _restart_times(policy, None)
    replayed, _ = _restart_times(policy, drawn)
    require(
        drawn_times == replayed,
        f"replaying with the drawn seed {drawn} gave other times: {drawn_times} and {replayed}",
    )

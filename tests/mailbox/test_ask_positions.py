"""The serving loop finds queued asks by position (``ActorCell.ask_at``), not by
checking every item: these tests keep the positions honest when the mailbox changes
under them."""

from typing import Any

import trio
import trio.testing

import trio_actors as ta


def run(main: Any) -> Any:
    return trio.run(main, clock=trio.testing.MockClock(autojump_threshold=0))


class Log(ta.Actor):
    """Plain receive, async on_start that waits on a gate (so messages queue)."""

    def __init__(self, log: list[Any], gate: trio.Event, watched: ta.ActorRef | None) -> None:
        self.log = log
        self.gate = gate
        self.watched = watched

    async def on_start(self) -> None:
        if self.watched is not None:
            self.watch(self.watched)  # stopped already: Terminated is queued first
        await self.gate.wait()
        if self.watched is not None:
            self.unwatch(self.watched)  # withdraws it: every ask moves up one place

    def receive(self, message: Any) -> Any:
        self.log.append(message)
        return ("reply", message)


async def _queue_mixed(actor: ta.ActorRef, nursery: trio.Nursery, replies: list[Any]) -> None:
    async def ask(message: Any) -> None:
        replies.append(await actor.ask(message))

    for i in range(3):
        actor.tell(f"t{i}")
        actor.tell(f"u{i}")
        nursery.start_soon(ask, f"a{i}")
        await trio.testing.wait_all_tasks_blocked()  # the ask is queued, in order


def test_asks_behind_tells_are_answered_in_order() -> None:
    async def main() -> None:
        log: list[Any] = []
        replies: list[Any] = []
        gate = trio.Event()
        async with ta.open_actor_system() as system, trio.open_nursery() as nursery:
            actor = system.spawn(Log, log, gate, None)
            await _queue_mixed(actor, nursery, replies)
            gate.set()
        assert log == ["t0", "u0", "a0", "t1", "u1", "a1", "t2", "u2", "a2"]
        # (the askers resume in one scheduler batch, which trio may shuffle)
        assert sorted(replies) == [("reply", "a0"), ("reply", "a1"), ("reply", "a2")]

    run(main)


def test_asks_are_found_after_a_queued_notice_is_withdrawn() -> None:
    async def main() -> None:
        log: list[Any] = []
        replies: list[Any] = []
        gate = trio.Event()
        async with ta.open_actor_system() as system, trio.open_nursery() as nursery:
            gone = system.spawn(Log, [], trio.Event(), None)
            await gone.stop()
            actor = system.spawn(Log, log, gate, gone)
            await _queue_mixed(actor, nursery, replies)
            gate.set()
        assert log == ["t0", "u0", "a0", "t1", "u1", "a1", "t2", "u2", "a2"]
        # (the askers resume in one scheduler batch, which trio may shuffle)
        assert sorted(replies) == [("reply", "a0"), ("reply", "a1"), ("reply", "a2")]

    run(main)


def test_asks_stay_in_place_across_small_batches() -> None:
    # batch 2: every turn ends between a tell and an ask at some point.
    async def main() -> None:
        log: list[Any] = []
        replies: list[Any] = []
        gate = trio.Event()
        policy = ta.ServingPolicy(batch=2, cleanup_batch=2)
        async with ta.open_actor_system(serving=policy) as system, trio.open_nursery() as nursery:
            actor = system.spawn(Log, log, gate, None)
            await _queue_mixed(actor, nursery, replies)
            gate.set()
        assert log == ["t0", "u0", "a0", "t1", "u1", "a1", "t2", "u2", "a2"]
        assert sorted(replies) == [("reply", "a0"), ("reply", "a1"), ("reply", "a2")]

    run(main)

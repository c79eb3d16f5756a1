"""The serving loop finds queued asks by position (``ActorCell.ask_at``), not by
checking every item: these tests keep the positions honest when the mailbox changes
under them."""

from typing import Any

import pytest
import trio
import trio.testing

import trio_actors as ta
from trio_actors.testing import run_virtual


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


@pytest.mark.parametrize(
    ("withdraw_a_notice", "batch"),
    [
        (False, 64),  # asks behind tells, in one turn
        (True, 64),  # a queued Terminated withdrawn ahead of them: every ask moves up
        (False, 2),  # batch 2: turns end between a tell and an ask
    ],
)
def test_asks_behind_tells_are_answered_in_order(withdraw_a_notice: bool, batch: int) -> None:
    async def main() -> None:
        log: list[Any] = []
        replies: list[Any] = []
        gate = trio.Event()
        policy = ta.ServingPolicy(batch=batch, cleanup_batch=min(batch, 32))
        async with ta.open_actor_system(serving=policy) as system, trio.open_nursery() as nursery:
            gone = None
            if withdraw_a_notice:
                gone = system.spawn(Log, [], trio.Event(), None)
                await gone.stop()
            actor = system.spawn(Log, log, gate, gone)
            await _queue_mixed(actor, nursery, replies)
            gate.set()
        assert log == ["t0", "u0", "a0", "t1", "u1", "a1", "t2", "u2", "a2"]
        # (the askers resume in one scheduler batch, which trio may shuffle)
        assert sorted(replies) == [("reply", "a0"), ("reply", "a1"), ("reply", "a2")]

    run_virtual(main)

"""Contracts across nodes, backpressure: RT32 ``send`` to a slow actor on another node.

The one-process contract T32 says that ``send`` and ``ask`` into a full bounded
mailbox wait for room in line; across nodes the same holds, and the sender's own
memory stays bounded: ``send`` waits while the link to the receiving node has its
window of tells unacknowledged (``remote/_link.py``), and a ``send`` that reaches a
full bounded mailbox waits there for room, in line (``remote/_taken_in.py``).
"""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from ... import Actor, Bounded, ServingPolicy
from ...remote import _link
from .._harness import require, run_virtual
from .._registry import contract
from ._nodes import nodes, reach

_CAPACITY = 3
_SENDS = _link.WINDOW + 1_000  # (enough to fill the window)


class _Slow(Actor):
    """Takes a millisecond per message; records each, and the depth of its mailbox
    as it takes it."""

    def __init__(self) -> None:
        self.seen: list[Any] = []
        self.deepest = 0

    async def receive(self, message: Any) -> Any:
        if message == "seen":
            return self.seen, self.deepest
        self.deepest = max(self.deepest, self.ref.statistics().mailbox_depth)
        await trio.sleep(0.001)
        self.seen.append(message)
        return None


@contract(
    "RT32",
    "backpressure across nodes",
    f"a sender that sends {_SENDS} messages to a slow actor with a Bounded({_CAPACITY}) "
    "mailbox on another node never has more tells unacknowledged on that link than its "
    "window (and reaches it: send waited), the actor's mailbox never holds more than "
    f"{_CAPACITY}, and nothing is dropped: every message handled, in order, no dead "
    "letter on either node",
)
def remote_backpressure(policy: ServingPolicy) -> None:
    async def main(clock: trio.testing.MockClock) -> None:
        async with nodes(policy, "b", "a") as (b, a):
            slow = b.spawn(_Slow, mailbox=Bounded(_CAPACITY, overflow="drop_new"))
            there = await reach(b, a, slow, "slow")
            link = there._cell.link  # type: ignore[union-attr]  # (a remote cell's)
            most = 0
            for number in range(_SENDS):
                await there.send(number)
                most = max(most, link.in_window)
            require(
                most <= _link.WINDOW,
                f"{most} tells unacknowledged on the link, its window is {_link.WINDOW}",
            )
            require(most == _link.WINDOW, f"the window was never reached ({most}): no test")
            await trio.sleep(_SENDS * 0.002)
            seen, deepest = await slow.ask("seen")
            dropped = [*a.dead_letters.recent, *b.dead_letters.recent]
            require(not dropped, f"dead letters: {dropped[:5]} ...")
            require(seen == list(range(_SENDS)), f"handled {len(seen)}, not all in order")
            require(deepest <= _CAPACITY, f"the mailbox held {deepest}")

    run_virtual(main)


__all__ = ["remote_backpressure"]

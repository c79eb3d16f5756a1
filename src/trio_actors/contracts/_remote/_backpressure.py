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

from ... import Actor, ActorRef, ActorSystem, Bounded, Pool, ServingPolicy
from ...remote import _link
from .._harness import require, run_virtual
from .._registry import contract
from ._nodes import nodes, reach

_CAPACITY = 3
_SENDS = _link.WINDOW + 1_000  # (enough to fill the window)


class _Slow(Actor):
    """Takes a millisecond per message; records each, and the depth of the mailbox
    it serves as it takes it (``of``: a pool's, whose worker it is -- then its
    workers share ``seen`` and ``deepest``)."""

    def __init__(self, of: dict[str, Any] | None = None) -> None:
        self.of = of
        self.seen: list[Any] = [] if of is None else of.setdefault("seen", [])
        self.deepest = [0] if of is None else of.setdefault("deepest", [0])

    async def receive(self, message: Any) -> Any:
        if message == "seen":
            return self.seen, self.deepest[0]
        serves = self.ref if self.of is None else self.of["pool"]
        self.deepest[0] = max(self.deepest[0], serves.statistics().mailbox_depth)
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
    "letter on either node; and the same sends to a balancing pool of two such "
    f"actors whose queue is a Bounded({_CAPACITY}): the pool never holds more than "
    f"{_CAPACITY} queued and one handed to each worker, every message handled, none "
    "dropped",
)
def remote_backpressure(policy: ServingPolicy) -> None:
    async def main(clock: trio.testing.MockClock) -> None:
        async with nodes(policy, "b", "a") as (b, a):
            bound = Bounded(_CAPACITY, overflow="drop_new")
            slow = b.spawn(_Slow, mailbox=bound)
            await _sends(b, a, slow, most_queued=_CAPACITY, in_order=True)
            of: dict[str, Any] = {}
            pool = of["pool"] = b.spawn(
                Pool(_Slow, (of,), size=2, routing="balancing", mailbox=bound)
            )
            # (a worker holds one at a time: as one takes its message, the other
            # may have one handed to it, queued in its own mailbox)
            await _sends(b, a, pool, most_queued=_CAPACITY + 1, in_order=False)

    run_virtual(main)


async def _sends(
    b: ActorSystem, a: ActorSystem, slow: ActorRef, *, most_queued: int, in_order: bool
) -> None:
    """RT32's sends from a to ``slow`` on b, and its checks: at most ``most_queued``
    in its mailbox as it takes each (a pool: in its queue and its workers');
    ``in_order``: handled in the order sent (a pool's two workers may finish theirs
    in either order)."""
    there = await reach(b, a, slow, f"slow-{slow.name}")
    link = there._cell.link  # type: ignore[union-attr]  # (a remote cell's)
    most = 0
    for number in range(_SENDS):
        await there.send(number)
        most = max(most, link.in_window)
        require(  # (at once: past the window, the rest of the run proves nothing)
            most <= _link.WINDOW,
            f"{most} tells unacknowledged on the link, its window is {_link.WINDOW}",
        )
    require(most == _link.WINDOW, f"the window was never reached ({most}): no test")
    await trio.sleep(_SENDS * 0.002)
    seen, deepest = await slow.ask("seen")
    dropped = [*a.dead_letters.recent, *b.dead_letters.recent]
    require(not dropped, f"dead letters: {dropped[:5]} ...")
    handled = seen if in_order else sorted(seen)
    require(handled == list(range(_SENDS)), f"handled {len(seen)}, not all in order")
    require(deepest <= most_queued, f"the mailbox held {deepest}")


__all__ = ["remote_backpressure"]

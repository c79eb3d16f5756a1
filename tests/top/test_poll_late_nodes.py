"""top: a node that answers after the nodes already shown is
still seen (a node that joins later, or one that was silent for a while and is
slower than the others: the busy one top is there to show)."""

from __future__ import annotations

from typing import Any

import trio
import trio.testing
from test_poll import OnTheBus

import trio_actors as ta
from trio_actors.remote import MemoryBus
from trio_actors.top._command import Options, _Live
from trio_actors.top._poll import Poller


def slow_answers(node: ta.ActorSystem, nursery: trio.Nursery, delay: float) -> None:
    """``node``'s statistics service answers ``delay`` seconds late."""
    monitoring: Any = node.node.monitoring  # type: ignore[union-attr]
    publish = monitoring._publish

    async def later(*args: Any) -> None:
        await trio.sleep(delay)
        publish(*args)

    monitoring._publish = lambda *args: nursery.start_soon(later, *args)


async def test_a_node_that_joins_later_and_answers_last_is_shown(
    autojump_clock: trio.testing.MockClock,
) -> None:
    bus = MemoryBus()
    cluster = ta.Cluster(bus=bus, name="c")
    options = Options(cluster, "mon", interval=1.0, wait=0.5, actors=5, once=False, json=False)
    async with (
        ta.open_actor_system(cluster=cluster, node="a"),
        bus.connect("top") as transport,
        trio.open_nursery() as nursery,
    ):
        live = _Live(Poller(OnTheBus(transport), "c", "mon"), options, [])
        nursery.start_soon(live._poll)
        await trio.sleep(1.5)  # (two polls: a shown)
        assert [row.summary.node for row in live.state.rows] == ["a"]
        async with ta.open_actor_system(cluster=cluster, node="b") as b:
            slow_answers(b, nursery, 0.1)  # (within --wait, after a's)
            await trio.sleep(5)
            shown = sorted(row.summary.node for row in live.state.rows if not row.stale)
            nursery.cancel_scope.cancel()
    assert shown == ["a", "b"]

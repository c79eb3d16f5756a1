"""A node's own stall (its event loop blocked, the process stopped) is not the
others' silence: on waking, it reads their heartbeats before judging them, so it
declares no live peer -- and not itself -- down; a peer that really fell silent
still is, as much later as the stall lasted.

Deterministic: trio's ``MockClock`` at rate 0, moved by hand. ``clock.jump(5)``
moves the time five seconds on while no task runs: exactly what a node sees
after its loop was blocked for five seconds."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest
import trio
import trio.testing

import trio_actors as ta
from trio_actors.remote import MemoryBus, Node
from trio_actors.remote._heartbeats import Heartbeats
from trio_actors.remote._peers import PeerState
from trio_actors.remote._subjects import Peer


async def run_for(clock: trio.testing.MockClock, seconds: float) -> None:
    """Let the nodes run for ``seconds`` of the mock clock, a tenth at a time."""
    for _ in range(round(seconds * 10)):
        clock.jump(0.1)
        await trio.testing.wait_all_tasks_blocked()


def record_downs(node: Node) -> list[tuple[Peer, str]]:
    """Every peer ``node`` declares down from now on, with what it said."""
    downs: list[tuple[Peer, str]] = []
    on_down = node.peers._on_down

    def recording(peer: Peer, said: str, *rest: object) -> None:
        downs.append((peer, said))
        on_down(peer, said, *rest)  # type: ignore[arg-type]

    node.peers._on_down = recording
    return downs


@asynccontextmanager
async def node(cluster: ta.Cluster, name: str) -> AsyncIterator[Node]:
    async with ta.open_actor_system(cluster=cluster, node=name) as system:
        yield Node.of(system)


async def test_a_node_s_own_stall_declares_no_live_peer_down_but_a_silent_one_still_is(
    mock_clock: trio.testing.MockClock, monkeypatch: pytest.MonkeyPatch
) -> None:
    cluster = ta.Cluster(bus=MemoryBus(advisories=False), heartbeat=1.0, heartbeats_missed=3)
    async with node(cluster, "a") as a, node(cluster, "b") as b:
        c_left = trio.Event()
        leave_c = trio.Event()
        c_peer: list[Peer] = []

        async def node_c() -> None:
            async with node(cluster, "c") as c:
                c_peer.append((c.name, c.incarnation))
                await leave_c.wait()
            c_left.set()  # (gone without a word: only its silence tells)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(node_c)
            await run_for(mock_clock, 2)
            [c] = c_peer
            b_peer = (b.name, b.incarnation)
            a_peer = (a.name, a.incarnation)
            assert a.peers.state(b_peer) is PeerState.UP
            assert a.peers.state(c) is PeerState.UP
            downs = record_downs(a)
            monkeypatch.setattr(Heartbeats, "say_bye", lambda self: None)
            leave_c.set()
            await run_for(mock_clock, 0.2)
            assert c_left.is_set()
            monkeypatch.undo()
            mock_clock.jump(5)  # the loop blocked for 5 s: nobody ran (silence: 3 s)
            await trio.testing.wait_all_tasks_blocked()
            await run_for(mock_clock, 1)
            assert downs == []  # (not b, which beat all along; not a itself; not yet c)
            await run_for(mock_clock, 3)  # (c's silence, counted while a ran)
            assert [peer for peer, _said in downs] == [c]
            assert "not heard from for 3 heartbeats" in downs[0][1]
            assert a.peers.state(b_peer) is PeerState.UP
            assert a.peers.state(a_peer) is PeerState.UP

"""A node's exit, plain or with a Ctrl-C (``KeyboardInterrupt``) at one of its steps:
the node closes (the tells waiting in its outbox go, the others hear ``bye``), and no
tell it made is silently gone -- each is handled by its receiver, a dead letter, or
counted in ``unconfirmed``.

The steps are the awaits of ``open_node``'s exit: ``Node.leave`` (its wait for the
answers still being made, its checkpoint) and the final flush of the connection. As
in ``tests/lifecycle/test_interrupts.py``, a monkeypatch makes one raise.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing
from test_nodes import Echo

import trio_actors as ta
from trio_actors.remote import MemoryBus, Node
from trio_actors.remote._peers import PeerState

TELLS = 100


def leave_interrupted_at_once(monkeypatch: pytest.MonkeyPatch, node: Node) -> None:
    async def interrupted(self: Node, **_: Any) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(node, "leave", interrupted.__get__(node))


def leave_interrupted_while_waiting(monkeypatch: pytest.MonkeyPatch, node: Node) -> None:
    leave = Node.leave

    async def interrupted(self: Node, **kwargs: Any) -> None:
        with trio.CancelScope() as scope:
            scope.cancel()  # (its wait and checkpoint end at once: then Ctrl-C)
            await leave(self, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(node, "leave", interrupted.__get__(node))


def final_flush_interrupted(monkeypatch: pytest.MonkeyPatch, node: Node) -> None:
    async def interrupted() -> None:
        await trio.lowlevel.checkpoint()
        raise KeyboardInterrupt

    monkeypatch.setattr(node.transport, "flush", interrupted)  # (this node's only)


def not_interrupted(monkeypatch: pytest.MonkeyPatch, node: Node) -> None:
    pass


@pytest.mark.parametrize(
    "interrupt",
    [
        not_interrupted,
        leave_interrupted_at_once,
        leave_interrupted_while_waiting,
        final_flush_interrupted,
    ],
)
async def test_a_node_s_exit_sends_its_waiting_tells_also_after_a_ctrl_c(
    interrupt: Any, monkeypatch: pytest.MonkeyPatch, autojump_clock: trio.testing.MockClock
) -> None:
    cluster = ta.Cluster(bus=MemoryBus())
    async with ta.open_actor_system(cluster=cluster, node="b") as b:
        recorder = b.spawn(Echo, name="recorder")
        b.register("recorder", recorder)
        assert b.node is not None
        await b.node.flush()
        nodes: list[Node] = []

        async def tell_then_leave() -> None:
            async with ta.open_actor_system(cluster=cluster, node="a") as a:
                there = await a.lookup("recorder")
                for number in range(TELLS):
                    there.tell(number)  # (most wait in the outbox as the block ends)
                assert a.node is not None
                nodes.append(Node.of(a))
                interrupt(monkeypatch, a.node)

        if interrupt is not_interrupted:
            await tell_then_leave()
        else:
            with pytest.raises(BaseExceptionGroup) as caught:
                await tell_then_leave()
            interrupts, others = caught.value.split(KeyboardInterrupt)
            assert interrupts is not None
            assert others is None, others
        monkeypatch.undo()
        [node] = nodes
        await trio.sleep(5)  # (b hears what came, and a's "bye")
        handled = await recorder.ask("seen")
        dead = [d.message for d in node.system.dead_letters.recent if d.reason == "unreachable"]
        missing = set(range(TELLS)) - set(handled) - set(dead)
        assert len(missing) <= node.unconfirmed, (sorted(missing), node.unconfirmed)
        assert handled == list(range(TELLS))  # (here, over the in-memory bus: all went)
        assert node.closed  # (closed: the outbox was sent, "bye" said)
        a_for_b = Node.of(b).peers.state(("a", node.incarnation))
        assert a_for_b in {PeerState.DOWN, PeerState.UNKNOWN}  # (b heard the bye)

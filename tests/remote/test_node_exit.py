"""A node's exit, plain or with a Ctrl-C (``KeyboardInterrupt``) at one of its steps:
the node closes (the tells waiting in its outbox go, the others hear ``bye``), and no
tell it made is silently gone -- each is handled by its receiver, a dead letter, or
counted in ``unconfirmed``.

The steps are the awaits of ``open_node``'s exit: ``Node.leave`` (its wait for the
answers still being made, its checkpoint) and the final flush of the connection. As
in ``tests/lifecycle/test_interrupts.py``, a monkeypatch makes one raise.
"""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from test_nodes import Echo

import trio_actors as ta
from helpers import Watcher
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


# --- SIGTERM to `trio-actors node`: a clean leave, as systemd, Docker and Kubernetes ask --

APPS = Path(__file__).parent / "apps"


async def read_until(stream: trio.abc.ReceiveStream, marker: bytes, seen: bytearray) -> None:
    """Read ``stream`` into ``seen`` until ``marker`` is in it (fail at its end)."""
    while marker not in seen:
        chunk = await stream.receive_some()
        assert chunk, f"the node's output ended: {bytes(seen)!r}"
        seen += chunk


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals")
async def test_sigterm_to_a_node_process_is_a_clean_leave(tmp_path: Path) -> None:
    from nats_server import running_nats_server

    with running_nats_server(tmp_path) as server, trio.fail_after(60):
        # Heartbeats every 30 s: a peer declared down within the minute heard "bye".
        command = [sys.executable, "-m", "trio_actors", "node", "pingpong:stoppable"]
        command += ["--cluster", server.url, "--name", "far", "--heartbeat", "30"]
        process = await trio.lowlevel.open_process(
            command, cwd=APPS, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
        )
        seen = bytearray()
        try:
            assert process.stdout is not None
            await read_until(process.stdout, b"far serving\n", seen)
            cluster = ta.Cluster(server.url, heartbeat=30)
            async with ta.open_actor_system(cluster=cluster, node="near") as near:
                recorder = await near.lookup("recorder")
                assert await recorder.ask("ping") == "ping"
                watcher = near.spawn(Watcher, name="watcher")
                watcher.tell(("watch", recorder))
                assert await watcher.ask("notices") == []  # (the watch is sent)
                outcomes: list[BaseException] = []

                async def hanging_ask() -> None:
                    try:
                        await recorder.ask("hang")
                    except ta.ActorError as error:
                        outcomes.append(error)

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(hanging_ask)
                    # (the far actor has the ask: one still on its way when the far
                    # node stops listening is another case, NodeDown "left")
                    await read_until(process.stdout, b"recorder: hanging\n", seen)
                    process.send_signal(signal.SIGTERM)
                    assert await process.wait() == 0
                [outcome] = outcomes  # (answered: the actor stopped, the node is not dead)
                assert type(outcome) is ta.ActorStopped, outcome
                notices: list[tuple[ta.ActorRef, BaseException | None]] = []
                while not notices:
                    notices = await watcher.ask("notices")
                    await trio.sleep(0.01)
                assert notices == [(recorder, None)]  # (an ordinary stop, not NodeDown)
                far = [p for p in Node.of(near).peers._records if p[0] == "far"]
                states = {Node.of(near).peers.state(peer) for peer in far}
                assert states <= {PeerState.DOWN}, states  # ("bye" heard: not silence)
            while chunk := await process.stdout.receive_some():
                seen += chunk
        finally:
            if process.returncode is None:
                process.kill()
            await process.wait()
            if process.stdout is not None:
                await process.stdout.aclose()
    output = seen.decode()
    assert "recorder: on_stop ran" in output, output
    assert "node far: stopped (SIGTERM); left the cluster" in output, output


async def test_leaving_with_the_server_gone_ends_without_raising_and_counts_the_unsent(
    tmp_path: Path,
) -> None:
    from nats_server import running_nats_server

    with running_nats_server(tmp_path) as server, trio.fail_after(60):
        cluster = ta.Cluster(server.url)
        async with ta.open_actor_system(cluster=cluster, node="b") as b:
            b.register("echo", b.spawn(Echo, name="echo"))
            await Node.of(b).flush()
            async with ta.open_actor_system(cluster=cluster, node="a") as a:
                echo = await a.lookup("echo")
                server.kill()  # (and a's client reconnects, in vain)
                for number in range(TELLS):
                    echo.tell(number)  # (waiting in the client's buffer: never sent)
                node = Node.of(a)
            # Left without raising (ConnectionClosed was raised out of the block).
            assert node.closed
            assert node.unsent >= 1  # (its "bye" at least: counted, not raised)
            assert node.unconfirmed == TELLS  # (the tells: handled or not, unknown)

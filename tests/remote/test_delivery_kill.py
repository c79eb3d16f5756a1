"""Every tell's fate known to its sender, with real processes: a real ``nats-server``,
a slow receiver node in a process of its own (``apps/slow_receiver.py``: it writes
the number of each tell it has handled to a file, unbuffered, so what a ``kill -9``
leaves there is exactly what was handled), and the sender node here, ``send``\\ ing
numbered tells while the receiver is killed with SIGKILL (and, in the second test,
first stopped with SIGSTOP long enough to be declared down, then continued).

The ledger is checked exactly on the sender once every tell is accounted (a dead
letter on the dead receiver is lost with it; its actor here never makes one):

* every tell is handled (in the receiver's file), or a dead letter on the sender --
  ``"unreachable"`` (never delivered) or ``"in-doubt"`` (its fate unknown) -- and
  nothing is missing: ``handled + unreachable + (in doubt and not handled) == told``;
* no tell is handled twice, and none is both handled and ``"unreachable"``, nor a
  dead letter twice: only an in-doubt tell may also have been handled;
* every in-doubt dead letter carries its message, to the actor it was for, and
  ``node.unconfirmed`` equals their number.

What the kill takes is up to the scheduler; no assertion depends on it or on how
long anything took (the trio deadlines only detect a hang). Each test prints its
ledger (``pytest -s``).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections import Counter
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio

import trio_actors as ta
from nats_server import running_nats_server
from trio_actors.remote import Node

pytestmark = [
    pytest.mark.skipif(sys.platform == "win32", reason="POSIX signals"),
    # ~20 s each on an idle 2-core machine (3 s of the receiver's work before the
    # kill, the sender's 100,000 sends, a second of silence before NodeDown): the
    # suite's 60 s would be too close under load. HANG still catches a hang.
    pytest.mark.timeout(150),
]

APPS = Path(__file__).parent / "apps"
HEARTBEAT = 0.25  # seconds, both nodes
MISSED = 4  # heartbeats: a silent node is declared down after about a second
COST = 150e-6  # seconds of CPU per tell in the receiver's actor: well below the sender
TELLS = 100_000
HANG = 45.0  # seconds: only a hang detector


class Receiver:
    """The receiver's process and the file of what its actor handled."""

    def __init__(self, process: trio.Process, log: Path) -> None:
        self.process = process
        self.log = log

    def handled_count(self, first: int = 0) -> int:
        """How many tells numbered ``first`` or more it has handled."""
        if not first:
            return self.log.read_bytes().count(b"\n") if self.log.exists() else 0
        return sum(number >= first for number in self.handled())

    def handled(self) -> list[int]:
        if not self.log.exists():
            return []
        return [int(line) for line in self.log.read_bytes().split()]

    def signal(self, number: signal.Signals) -> None:
        self.process.send_signal(number)

    async def kill(self) -> None:
        """SIGKILL, and wait until the process is gone (its file is then final)."""
        self.process.kill()
        await self.process.wait()


@asynccontextmanager
async def receiver_node(tmp_path: Path, url: str) -> AsyncIterator[Receiver]:
    """Start ``apps/slow_receiver.py``; yield once its actor can be looked up; kill it
    at the end if it still runs (its output, and its log, stay in ``tmp_path``)."""
    log = tmp_path / "handled.txt"
    command = [sys.executable, str(APPS / "slow_receiver.py"), url, str(log)]
    command += [str(HEARTBEAT), str(MISSED), str(COST)]
    errors = os.open(tmp_path / "receiver.err", os.O_WRONLY | os.O_CREAT)
    try:
        process = await trio.lowlevel.open_process(
            command, cwd=APPS, stdout=subprocess.PIPE, stderr=errors
        )
    finally:
        os.close(errors)  # (the process has its own copy)
    try:
        assert process.stdout is not None
        seen = bytearray()
        with trio.fail_after(HANG):
            while b"receiver serving" not in seen:
                chunk = await process.stdout.receive_some()
                assert chunk, (bytes(seen), (tmp_path / "receiver.err").read_text())
                seen += chunk
        yield Receiver(process, log)
    finally:
        if process.returncode is None:
            process.kill()
        await process.wait()
        if process.stdout is not None:
            await process.stdout.aclose()


@asynccontextmanager
async def sender_node(url: str) -> AsyncIterator[tuple[ta.ActorSystem, ta.ActorRef]]:
    """The sender node (every dead letter kept) and its ref to the receiver's actor."""
    cluster = ta.Cluster(url, heartbeat=HEARTBEAT, heartbeats_missed=MISSED)
    async with ta.open_actor_system(
        cluster=cluster, node="sender", dead_letters_kept=2 * TELLS
    ) as sender:
        slow = await sender.lookup("slow")
        assert await slow.ask("ping") == "pong"
        yield sender, slow


async def until(condition: Callable[[], bool], what: str) -> None:
    """Poll ``condition`` until it holds; fail naming ``what`` after :data:`HANG` s."""
    with trio.move_on_after(HANG):
        while not condition():  # noqa: ASYNC110 (a file another process writes)
            await trio.sleep(0.02)
        return
    pytest.fail(f"{what}: not within {HANG} s", pytrace=False)


class Ledger:
    """What became of the sender's tells ``0 .. told - 1``."""

    def __init__(self, sender: ta.ActorSystem, slow: ta.ActorRef, receiver: Receiver) -> None:
        self.sender, self.slow, self.receiver = sender, slow, receiver
        self.told = 0

    async def send(self, count: int) -> None:
        """``send`` the next ``count`` numbered tells (waiting while the window is full)."""
        for _ in range(count):
            await self.slow.send(("tell", self.told))
            self.told += 1

    def letters(self) -> tuple[list[int], list[int]]:
        """The sender's dead letters: the numbers of the tells ``"unreachable"`` and
        of those ``"in-doubt"`` -- checking each is a tell to ``slow`` with its
        message, for one of those two reasons."""
        unreachable: list[int] = []
        in_doubt: list[int] = []
        recent = self.sender.dead_letters.recent
        assert len(recent) == self.sender.dead_letters.count, "dead letters not all kept"
        for letter in recent:
            assert letter.recipient == self.slow, letter
            match letter.message, letter.reason:
                case ("tell", int(number)), "unreachable":
                    unreachable.append(number)
                case ("tell", int(number)), "in-doubt":
                    in_doubt.append(number)
                case _:
                    pytest.fail(f"an unexpected dead letter on the sender: {letter}")
        return unreachable, in_doubt

    def accounted(self) -> int:
        unreachable, in_doubt = self.letters()
        return len(set(self.receiver.handled()) | set(unreachable) | set(in_doubt))

    def check(self) -> dict[str, int]:
        """Check the ledger exactly (the module's docstring); return its counts."""
        handled = self.receiver.handled()
        unreachable, in_doubt = self.letters()
        twice = {number: n for number, n in Counter(handled).items() if n > 1}
        assert not twice, f"tells handled twice: {sorted(twice)[:10]}"
        assert len(set(unreachable)) == len(unreachable), "a tell unreachable twice"
        assert len(set(in_doubt)) == len(in_doubt), "a tell given back twice"
        both = set(handled) & set(unreachable)
        assert not both, f"tells handled and unreachable: {sorted(both)[:10]}"
        both = set(in_doubt) & set(unreachable)
        assert not both, f"tells in doubt and unreachable: {sorted(both)[:10]}"
        everything = set(range(self.told))
        strays = (set(handled) | set(unreachable) | set(in_doubt)) - everything
        assert not strays, sorted(strays)[:10]
        missing = everything - set(handled) - set(unreachable) - set(in_doubt)
        counts = {
            "told": self.told,
            "handled": len(handled),
            "unreachable": len(unreachable),
            "in doubt": len(in_doubt),
            "in doubt and handled": len(set(in_doubt) & set(handled)),
            "missing": len(missing),
            "unconfirmed": Node.of(self.sender).unconfirmed,
        }
        assert not missing, (f"tells lost uncounted: {sorted(missing)[:10]}", counts)
        in_doubt_only = len(set(in_doubt) - set(handled))
        assert len(handled) + len(unreachable) + in_doubt_only == self.told, counts
        assert Node.of(self.sender).unconfirmed == len(in_doubt), counts
        return counts

    async def settled(self) -> dict[str, int]:
        """Once every tell is accounted, and a few heartbeats more (so that what
        would be given back twice, or late, is): :meth:`check`."""
        await until(lambda: self.accounted() >= self.told, "every tell accounted")
        await trio.sleep(2 * HEARTBEAT * MISSED)
        return self.check()


def record_of(node: Node) -> str:
    """The record of the sender's open link to the receiver."""
    [link] = [link for peer, link in node.peers.open_links() if peer[0] == "receiver"]
    return link.record


async def test_kill_9_of_a_slow_receiver_leaves_every_tell_accounted_at_the_sender(
    tmp_path: Path,
) -> None:
    with running_nats_server(tmp_path) as server, trio.fail_after(3 * HANG):
        async with (
            receiver_node(tmp_path, server.url) as receiver,
            sender_node(server.url) as (sender, slow),
        ):
            ledger = Ledger(sender, slow, receiver)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(ledger.send, TELLS)
                # Killed mid-stream, with the window full of tells it took in.
                await until(lambda: receiver.handled_count() >= TELLS // 5, "handling")
                await receiver.kill()
            counts = await ledger.settled()
            print(f"kill -9 of a slow receiver: {counts}")
            # What it had taken in and not handled came back, with the message.
            assert counts["in doubt"] > 0, counts
            assert counts["handled"] < TELLS, counts


async def test_a_false_node_down_then_a_real_death_leaves_every_tell_accounted(
    tmp_path: Path,
) -> None:
    with running_nats_server(tmp_path) as server, trio.fail_after(3 * HANG):
        async with (
            receiver_node(tmp_path, server.url) as receiver,
            sender_node(server.url) as (sender, slow),
        ):
            node = Node.of(sender)
            ledger = Ledger(sender, slow, receiver)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(ledger.send, TELLS // 4)
                await until(lambda: receiver.handled_count() >= TELLS // 20, "handling")
                # Frozen (its event loop blocked) until the sender declares it
                # down and gives back its window in doubt; then it runs again.
                first_record = record_of(node)
                receiver.signal(signal.SIGSTOP)
                await until(lambda: node.unconfirmed > 0, "the receiver declared down")
                receiver.signal(signal.SIGCONT)
            down_at = node.unconfirmed

            async def answers() -> bool:
                with trio.move_on_after(HEARTBEAT * MISSED):
                    try:
                        return bool(await slow.ask("ping") == "pong")
                    except ta.NodeDown:
                        await trio.sleep(HEARTBEAT)
                return False

            with trio.fail_after(HANG):
                while not await answers():
                    pass
            # Back: told more, on a new record, and then really killed.
            first = ledger.told
            async with trio.open_nursery() as nursery:
                nursery.start_soon(ledger.send, TELLS // 4)
                await until(
                    lambda: receiver.handled_count(first) >= TELLS // 20,
                    "handling after the false down",
                )
                assert record_of(node) != first_record  # (told on a new record)
                await receiver.kill()
            counts = await ledger.settled()
            print(f"a false down (in doubt then: {down_at}), then kill -9: {counts}")
            assert down_at > 0
            assert counts["in doubt"] > down_at, counts  # (the new record's window too)
            assert receiver.handled_count(first) >= TELLS // 20, counts  # (the new record's)

"""A shared name with real processes: a real ``nats-server``, two member nodes in
processes of their own (``apps/shared_member.py``: each writes the number of each
tell its member handled to a file, unbuffered, so what a ``kill -9`` leaves there is
exactly what was handled), and the sender node here, telling and asking through the
group while one member node is killed with SIGKILL.

Checked once everything has ended (the trio deadlines only detect a hang):

* every ask ended once: answered by a member node, or ``NodeDown`` /
  ``ConnectionInterrupted`` (the killed node had taken it);
* every tell is handled by one member (in a file), or a dead letter on the sender
  with its message -- ``"in-doubt"`` (its taker died first), ``"unreachable"`` or
  ``"stopped"`` (no member took it) -- and nothing is missing; none is handled twice,
  and only an in-doubt tell may also have been handled (by the node that died);
* ``node.unconfirmed`` equals the in-doubt dead letters, and the surviving node
  handled tells after the kill.
"""

from __future__ import annotations

import os
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
    pytest.mark.timeout(150),
]

APPS = Path(__file__).parent / "apps"
HEARTBEAT = 0.25  # seconds, every node
MISSED = 4  # heartbeats: a silent node is declared down after about a second
COST = 300e-6  # seconds of CPU per message in a member
TELLS = 6_000
HANG = 45.0  # seconds: only a hang detector


class Member:
    """A member node's process and the file of what its member handled."""

    def __init__(self, process: trio.Process, log: Path) -> None:
        self.process = process
        self.log = log

    def handled(self) -> list[int]:
        if not self.log.exists():
            return []
        return [int(line) for line in self.log.read_bytes().split()]

    async def kill(self) -> None:
        """SIGKILL, and wait until the process is gone (its file is then final)."""
        self.process.kill()
        await self.process.wait()


@asynccontextmanager
async def member_node(tmp_path: Path, url: str, node: str) -> AsyncIterator[Member]:
    log = tmp_path / f"{node}.txt"
    command = [sys.executable, str(APPS / "shared_member.py"), url, node, str(log)]
    command += [str(HEARTBEAT), str(MISSED), str(COST)]
    errors = os.open(tmp_path / f"{node}.err", os.O_WRONLY | os.O_CREAT)
    try:
        process = await trio.lowlevel.open_process(
            command, cwd=APPS, stdout=subprocess.PIPE, stderr=errors
        )
    finally:
        os.close(errors)
    try:
        assert process.stdout is not None
        seen = bytearray()
        with trio.fail_after(HANG):
            while b"member serving" not in seen:
                chunk = await process.stdout.receive_some()
                assert chunk, (bytes(seen), (tmp_path / f"{node}.err").read_text())
                seen += chunk
        yield Member(process, log)
    finally:
        if process.returncode is None:
            process.kill()
        await process.wait()
        if process.stdout is not None:
            await process.stdout.aclose()


async def until(condition: Callable[[], bool], what: str) -> None:
    with trio.move_on_after(HANG):
        while not condition():  # noqa: ASYNC110 (files other processes write)
            await trio.sleep(0.02)
        return
    pytest.fail(f"{what}: not within {HANG} s", pytrace=False)


async def test_kill_9_of_a_member_node_leaves_every_message_to_the_shared_name_accounted(
    tmp_path: Path,
) -> None:
    with running_nats_server(tmp_path) as server, trio.fail_after(3 * HANG):
        cluster = ta.Cluster(server.url, heartbeat=HEARTBEAT, heartbeats_missed=MISSED)
        async with (
            member_node(tmp_path, server.url, "m1") as m1,
            member_node(tmp_path, server.url, "m2") as m2,
            ta.open_actor_system(
                cluster=cluster, node="sender", dead_letters_kept=2 * TELLS
            ) as sender,
        ):
            group = await sender.lookup("work")
            assert await group.ask("where") in ("m1", "m2")
            asked: list[str] = []

            async def ask() -> None:
                try:
                    asked.append(await group.ask("where"))
                except (ta.NodeDown, ta.ConnectionInterrupted) as error:
                    asked.append(type(error).__name__)

            async with trio.open_nursery() as nursery:
                for number in range(TELLS):
                    try:
                        group.tell(("tell", number))
                    except ta.MailboxFull:
                        await group.send(("tell", number))
                    if number % 50 == 0:
                        nursery.start_soon(ask)
                    if number == TELLS // 3:
                        await until(lambda: len(m1.handled()) >= TELLS // 10, "handling")
                        await m1.kill()  # (mid-stream, with tells queued there)
                        killed_with = len(m1.handled())
            groups = Node.of(sender).groups
            await until(lambda: groups.in_flight == 0, "every tell ended")
            handled = m1.handled() + m2.handled()
            assert len(m1.handled()) == killed_with  # (its file is final)
            letters = Counter(letter.reason for letter in sender.dead_letters.recent)
            numbers = {
                reason: [
                    letter.message[1]
                    for letter in sender.dead_letters.recent
                    if letter.reason == reason
                ]
                for reason in letters
            }
            in_doubt = numbers.get("in-doubt", [])
            elsewhere = [n for reason, ns in numbers.items() if reason != "in-doubt" for n in ns]
            counts = {
                "told": TELLS,
                "handled by m1": len(m1.handled()),
                "handled by m2": len(m2.handled()),
                **{f"dead letters {reason}": count for reason, count in letters.items()},
                "asks": dict(Counter(asked)),
            }
            print(f"kill -9 of a member node: {counts}")
            twice = [number for number, n in Counter(handled).items() if n > 1]
            assert not twice, (twice[:10], counts)
            assert not set(handled) & set(elsewhere), counts
            assert len(set(in_doubt)) == len(in_doubt), counts
            missing = set(range(TELLS)) - set(handled) - set(in_doubt) - set(elsewhere)
            assert not missing, (sorted(missing)[:10], counts)
            assert len(set(handled) | set(in_doubt) | set(elsewhere)) == TELLS, counts
            assert Node.of(sender).unconfirmed == len(in_doubt), counts
            assert in_doubt, counts  # (the killed node had tells queued)
            assert set(in_doubt) - set(handled), counts  # (not all of them handled)
            assert len(asked) == len(range(0, TELLS, 50)), counts
            assert set(asked) <= {"m1", "m2", "NodeDown", "ConnectionInterrupted"}, counts
            assert max(m2.handled()) > TELLS // 3, counts  # (m2 served on)

"""``trio-actors top``'s live view in a real terminal: tmux runs it against two real
node processes; the test sends keys and reads the screen (``tmux capture-pane``),
polling with a deadline that is only a safety net. Then ``q`` ends it with exit
code 0 and the terminal back in its normal mode. Every process is ended by PID."""

from __future__ import annotations

import os
import re
import shutil
import signal
import sys
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import trio
from busy_nodes import CLUSTER, busy_nodes

from helpers import gone

pytestmark = pytest.mark.skipif(shutil.which("tmux") is None, reason="needs tmux")

WITHIN = 30.0  # seconds for a screen to show what is awaited: a safety net only
STEP = 0.1  # seconds between two looks at the screen


@pytest.fixture(scope="module")
def busy_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with busy_nodes(tmp_path_factory.mktemp("busy")) as url:
        yield url


class Terminal:
    """A tmux server of the test's own (its own socket, no configuration file) with
    one 140x40 session running a shell command."""

    def __init__(self, socket: str, session: str) -> None:
        self.socket = socket
        self.session = session

    async def tmux(self, *arguments: str) -> str:
        done = await trio.run_process(
            ["tmux", "-L", self.socket, "-f", os.devnull, *arguments],
            capture_stdout=True,
            capture_stderr=True,
            env={**os.environ, "LANG": "C.UTF-8", "TERM": "xterm-256color"},
        )
        return done.stdout.decode()

    async def screen(self) -> str:
        return await self.tmux("capture-pane", "-p", "-t", self.session)

    async def keys(self, *keys: str) -> None:
        await self.tmux("send-keys", "-t", self.session, *keys)

    async def shows(self, what: str, found: Callable[[str], bool]) -> str:
        """The screen, once ``found(screen)``; fails with the screen after
        :data:`WITHIN` seconds."""
        screen = ""
        with trio.move_on_after(WITHIN):
            # (another process's screen: nothing to wait on but a look every STEP)
            while not found(screen := await self.screen()):  # noqa: ASYNC110
                await trio.sleep(STEP)
            return screen
        pytest.fail(f"the screen did not show {what} within {WITHIN} s:\n{screen}")

    async def ended(self) -> None:
        """Wait until the pane's command has ended (a deadline: a safety net)."""
        with trio.fail_after(WITHIN):
            while await self.pane("#{pane_dead}") != "1":  # noqa: ASYNC110 (likewise)
                await trio.sleep(STEP)

    async def pane(self, variable: str) -> str:
        return (await self.tmux("display", "-p", "-t", self.session, variable)).strip()


@asynccontextmanager
async def terminal(command: str) -> AsyncIterator[Terminal]:
    name = f"top-test-{os.getpid()}"
    term = Terminal(name, name)
    await term.tmux(
        "new-session", "-d", "-x", "140", "-y", "40", "-s", name, command,
        ";", "set-option", "-t", name, "remain-on-exit", "on",
    )  # fmt: skip
    server = int(await term.tmux("display", "-p", "-t", name, "#{pid}"))
    shell = int(await term.pane("#{pane_pid}"))
    try:
        yield term
    finally:
        pids = [server, shell, *children(shell)]  # (top itself, if it still runs)
        with trio.CancelScope(shield=True):
            await term.tmux("kill-server")
        for pid in pids:
            if not gone(pid):
                os.kill(pid, signal.SIGKILL)


def children(pid: int) -> list[int]:
    """The child processes of ``pid`` (from Linux's /proc; elsewhere none)."""
    try:
        listed = Path(f"/proc/{pid}/task/{pid}/children").read_text()
    except OSError:
        return []
    return [int(child) for child in listed.split()]


def row(screen: str, node: str) -> list[str]:
    """The words of ``node``'s row in the nodes table."""
    [line] = [line for line in screen.splitlines() if re.match(rf"^[> ]\s+{node}\s", line)]
    return line.split()


def rates_shown(screen: str) -> bool:
    try:
        rows = [row(screen, node) for node in ("n0", "n1")]
    except ValueError:
        return False
    return all(words[-5] not in ("-", "0") for words in rows)  # (MSG/S, from the right)


async def test_the_live_view_in_a_real_terminal(busy_cluster: str, tmp_path: Path) -> None:
    after = tmp_path / "after"
    top = (
        f"{sys.executable} -m trio_actors top --cluster {busy_cluster} "
        f"--cluster-name {CLUSTER} --interval 0.5 --wait 0.3"
    )
    command = f"{top}; echo $? > {after}/exit; stty -a > {after}/stty"
    after.mkdir()
    async with terminal(f"sh -c '{command}'") as term:
        screen = await term.shows("both nodes with their rates", rates_shown)
        assert f"cluster {CLUSTER}  2 node(s)  refreshed" in screen
        assert row(screen, "n0")[0] == ">"  # (the first node is selected)
        assert "NODE ^" in screen

        await term.keys("j", "Enter")
        screen = await term.shows(
            "n1's busiest actors", lambda s: "n1: busiest actors by rate" in s and "MSG/S v" in s
        )
        screen = await term.shows("its workers", lambda s: "system/worker-2" in s)
        assert row(screen, "n1")[0] == ">"
        paths = [line.split()[0] for line in screen.splitlines() if line.startswith("system/")]
        assert sorted(paths) == [
            "system/producer", "system/worker-0", "system/worker-1", "system/worker-2",
        ]  # fmt: skip

        await term.keys("s")
        await term.shows("the sort on UP", lambda s: "UP ^" in s and "NODE ^" not in s)
        await term.keys("S")
        await term.shows("the sort reversed", lambda s: "UP v" in s)
        await term.keys("a")
        await term.shows("the actors by mailbox", lambda s: "busiest actors by mailbox" in s)

        await term.keys("?")
        screen = await term.shows("the help", lambda s: "show / hide this help" in s)
        assert "n0 " not in screen
        await term.keys("?")
        await term.shows("the nodes again", lambda s: "show / hide this help" not in s)
        await term.keys("Escape")
        await term.shows("no actors", lambda s: "busiest actors" not in s)

        await term.keys("q")
        await term.ended()
        # (top's exit status, as the shell that ran it wrote it before it ended: tmux's
        # own #{pane_dead_status} stayed empty in some runs of tmux 3.3a)
        assert (after / "exit").read_text().strip() == "0"
        mode = (after / "stty").read_text().split()
        assert "icanon" in mode  # (cbreak mode restored: lines, echo)
        assert "echo" in mode

"""The chat example end to end: a real server on a loopback port, real clients.

Real sockets need the real clock, so the only time limit here is a guard against a
hang (``fail_after``); every check is about what arrived, in what order, never how
fast.
"""

import importlib.util
import signal
import socket
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
import trio

import trio_actors as ta

SERVER = Path(__file__).resolve().parent.parent / "examples" / "chat" / "server.py"
HANG_GUARD = 60  # seconds; a working run takes well under one


def load_server() -> ModuleType:
    spec = importlib.util.spec_from_file_location("chat_server", SERVER)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


chat = load_server()


class Client:
    """A line-oriented chat client on a trio socket."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.buffer = b""
        self.lines: list[str] = []

    @classmethod
    async def connect(cls, port: int, name: str, *, receive_buffer: int | None = None) -> "Client":
        sock = trio.socket.socket()
        if receive_buffer is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
        await sock.connect(("127.0.0.1", port))
        client = cls(trio.SocketStream(sock))
        await client.say(name)
        return client

    async def say(self, text: str) -> None:
        await self.stream.send_all(text.encode() + b"\n")

    async def read_line(self) -> str | None:
        while b"\n" not in self.buffer:
            data = await self.stream.receive_some(65536)
            if not data:
                return None
            self.buffer += data
        line, self.buffer = self.buffer.split(b"\n", 1)
        text = line.decode()
        self.lines.append(text)
        return text

    async def read_until(self, wanted: str) -> list[str]:
        """Lines up to and including ``wanted``."""
        got: list[str] = []
        while True:
            line = await self.read_line()
            assert line is not None, f"connection closed before {wanted!r}; got {got}"
            got.append(line)
            if line == wanted:
                return got

    async def read_to_end(self) -> list[str]:
        """The lines until the server closes the connection; then close ours."""
        got: list[str] = []
        while (line := await self.read_line()) is not None:
            got.append(line)
        await self.stream.aclose()
        return got


async def test_chat_with_a_slow_client_a_crashed_room_and_a_clean_shutdown() -> None:
    with trio.fail_after(HANG_GUARD):
        closing = trio.Event()
        async with trio.open_nursery() as nursery:
            result: list[ta.SystemStatistics] = []

            async def run_server(task_status: trio.TaskStatus[int]) -> None:
                result.append(
                    await chat.serve(0, closing, send_buffer=4096, task_status=task_status)
                )

            port = await nursery.start(run_server)
            alice = await Client.connect(port, "alice")
            await alice.read_until("*** alice joined")
            bob = await Client.connect(port, "bob")
            await alice.read_until("*** bob joined")
            await bob.read_until("*** bob joined")
            # A client that reads nothing until the end, with a small receive buffer.
            slow = await Client.connect(port, "slow", receive_buffer=4096)
            await alice.read_until("*** slow joined")
            await bob.read_until("*** slow joined")

            # A flood that the slow client cannot keep up with: the room must not
            # be held up -- bob gets every line, in order, while slow reads nothing.
            # alice and bob read each line before the next is said, so they never
            # fall behind, whatever the machine's speed.
            flood = [f"line {n:04d} " + "x" * 200 for n in range(1000)]
            for text in flood:
                await alice.say(text)
                assert await alice.read_line() == f"<alice> {text}"
                assert await bob.read_line() == f"<alice> {text}"

            # A crash of the room: supervision restarts it, the members are put
            # back, and the room goes on.
            # (The crash and a line right behind it, in one write: the line waits
            # in the room's mailbox while the room restarts, and reaches everyone.)
            await bob.stream.send_all(b"/crash\nright after the crash\n")
            for client in (alice, bob):
                assert await client.read_until("<bob> right after the crash") == [
                    "*** the room restarted",
                    "<bob> right after the crash",
                ]
            await alice.say("still here?")
            await bob.read_until("<alice> still here?")
            await bob.say("/who")
            await bob.read_until("*** here: alice, bob, slow")

            # Clean shutdown: everyone hears the goodbye after everything said
            # before it, then the connection closes.
            closing.set()
            ends: dict[str, list[str]] = {}

            async def read_to_end(name: str, client: Client) -> None:
                ends[name] = await client.read_to_end()

            async with trio.open_nursery() as readers:
                for name, client in (("alice", alice), ("bob", bob), ("slow", slow)):
                    readers.start_soon(read_to_end, name, client)
            alice_rest, bob_rest, slow_all = ends["alice"], ends["bob"], ends["slow"]

        stats = result[0]
        for rest in (alice_rest, bob_rest):
            assert rest[-1] == "*** the server is shutting down"
        # The slow client missed some lines -- dropped oldest-first from its outbox,
        # and told so -- but got the latest ones and the goodbye, in order.
        missed = [line for line in slow_all if line.startswith("*** you missed")]
        assert missed, "the slow client should have fallen behind"
        assert slow_all[-1] == "*** the server is shutting down"
        said = [line for line in slow_all if line.startswith("<alice> line")]
        assert said == sorted(said)
        assert said[-1] == f"<alice> {flood[-1]}"
        dropped = sum(int(line.split()[3]) for line in missed)
        assert dropped > 0
        # Nothing lost silently: every dead letter is an overflow of the slow
        # client's outbox, each announced to it.
        assert stats.dead_letters == ta.DeadLetterCounts(overflow=dropped)
        assert stats.restarts == 1


async def test_a_client_that_leaves_is_announced_and_its_name_freed() -> None:
    with trio.fail_after(HANG_GUARD):
        closing = trio.Event()
        async with trio.open_nursery() as nursery:
            port = await nursery.start(chat.serve, 0, closing)
            alice = await Client.connect(port, "alice")
            await alice.read_until("*** alice joined")
            other = await Client.connect(port, "alice")  # the name is taken
            await alice.read_until("*** alice2 joined")
            await other.stream.aclose()
            await alice.read_until("*** alice2 left")
            again = await Client.connect(port, "alice")
            await alice.read_until("*** alice2 joined")
            await again.say("/who")
            await again.read_until("*** here: alice, alice2")
            closing.set()
            await alice.read_to_end()
            await again.read_to_end()


@pytest.mark.parametrize("line", [b"", b"x" * 10_000])
async def test_a_client_that_sends_no_name_or_garbage_is_just_closed(line: bytes) -> None:
    with trio.fail_after(HANG_GUARD):
        closing = trio.Event()
        async with trio.open_nursery() as nursery:
            port = await nursery.start(chat.serve, 0, closing)
            stream = await trio.open_tcp_stream("127.0.0.1", port)
            try:
                if line:
                    await stream.send_all(line)
                await stream.send_eof()
                assert await stream.receive_some(100) == b""  # closed...
            except trio.BrokenResourceError:
                pass  # ...or reset, if the server closed with our bytes unread
            await stream.aclose()
            closing.set()


async def test_ctrl_c_shuts_the_server_process_down_cleanly() -> None:
    # The server as a user runs it, in its own process; Ctrl-C is SIGINT.
    with trio.fail_after(HANG_GUARD):
        process = await trio.lowlevel.open_process(
            [sys.executable, str(SERVER), "0"], stdout=subprocess.PIPE
        )
        try:
            assert process.stdout is not None
            banner = b""
            while b"\n" not in banner:
                banner += await process.stdout.receive_some(1024)
            port = int(banner.split(b"127.0.0.1:")[1].split()[0])
            client = await Client.connect(port, "ann")
            await client.read_until("*** ann joined")
            await client.say("hello")
            await client.read_until("<ann> hello")
            process.send_signal(signal.SIGINT)
            assert await client.read_to_end() == ["*** the server is shutting down"]
            rest = b""
            while data := await process.stdout.receive_some(1024):
                rest += data
            assert await process.wait() == 0
            assert rest.decode().split() == ["shutting", "down...", "stopped"]
        finally:
            if process.returncode is None:
                process.kill()
            with trio.CancelScope(shield=True):
                await process.wait()
                await process.stdout.aclose()  # type: ignore[union-attr]

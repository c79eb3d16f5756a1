"""The actors more than one contract across nodes runs (the others stay with theirs).

Their class names show in actor paths and in the names they are registered under.
"""

from __future__ import annotations

from typing import Any

import trio

from ... import Actor


def _echo(message: Any) -> Any:
    """The reply to ``message``, or what ``("raise", kind)`` asks to raise."""
    if message == ("raise", "value"):
        raise ValueError("bad value", 3)
    if message == ("raise", "private"):
        raise _Private("secret")
    return ("echo", message)


class _Echo(Actor):
    def receive(self, message: Any) -> Any:
        return _echo(message)


class _AsyncEcho(Actor):
    async def receive(self, message: Any) -> Any:
        await trio.lowlevel.checkpoint()
        return _echo(message)


class _Recorder(Actor):
    def __init__(self) -> None:
        self.seen: list[Any] = []

    def receive(self, message: Any) -> Any:
        if message == "seen":
            return list(self.seen)
        self.seen.append(message)
        return None


class _Gate(Actor):
    """Handles ``"wait"`` until the gate opens; records everything else."""

    def __init__(self, gate: trio.Event) -> None:
        self.gate = gate
        self.seen: list[Any] = []

    async def receive(self, message: Any) -> Any:
        if message == "wait":
            await self.gate.wait()
        elif message == "seen":
            return list(self.seen)
        else:
            self.seen.append(message)
        return None


class _Private(Exception):
    """Not allowed to cross: arrives as a RemoteError."""

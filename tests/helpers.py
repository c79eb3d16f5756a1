"""Test actors used by more than one test file.

Only actors whose behaviour is the same wherever they are used live here; an actor
that a file tunes for its own test (records, gates, fails on one message) stays in
that file under a name that says what it does. ``tests/`` is on ``sys.path`` (pytest
puts the directory of the root ``conftest.py`` there), so a test file imports these
as ``from helpers import Echo``.
"""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable
from typing import Any

import msgspec
import trio
import trio.testing

import trio_actors as ta


class Echo(ta.Actor):
    """A plain actor that answers every message with the message itself."""

    def receive(self, message: Any) -> Any:
        return message


class Failing(ta.Actor):
    """A plain actor whose every message is a failure: ``ValueError(message)``."""

    def receive(self, message: Any) -> Any:
        raise ValueError(message)


class Worker(ta.Actor):
    """A plain actor for statistics: ``"boom"`` fails it (``RuntimeError``), a float
    holds the thread that many seconds of ``clock``'s time, ``"child"`` spawns a
    child named ``child`` (its ref the answer); anything else is answered as is."""

    def __init__(self, clock: trio.testing.MockClock | None = None) -> None:
        self.clock = clock

    def receive(self, message: Any) -> Any:
        if message == "boom":
            raise RuntimeError("boom")
        if message == "child":
            return self.spawn(Worker, name="child")
        if isinstance(message, float) and self.clock is not None:
            self.clock.jump(message)  # a handler that holds the thread this long
        return message


class Costly(ta.Actor):
    """Each message "takes" 1 ms of virtual time: a plain handler that holds the
    thread, as seen by the ``MockClock`` it jumps."""

    def __init__(self, clock: trio.testing.MockClock) -> None:
        self.clock = clock

    def receive(self, message: Any) -> None:
        self.clock.jump(0.001)


class Watcher(ta.Actor):
    """Watches (and unwatches) the actors it is told to; ``"notices"`` answers the
    ``Terminated`` it got, in order, as ``(ref, name of the error's type or None)``."""

    def __init__(self) -> None:
        self.notices: list[ta.Terminated] = []

    def receive(self, message: Any) -> Any:
        match message:
            case ("watch", ta.ActorRef() as ref):
                self.watch(ref)
            case ("unwatch", ta.ActorRef() as ref):
                self.unwatch(ref)
            case ta.Terminated() as notice:
                self.notices.append(notice)
            case "notices":
                return [(n.ref, type(n.error).__name__ if n.error else None) for n in self.notices]
        return None


class Recorder(ta.Actor):
    """A plain actor that records every message; ``"seen"`` returns the record."""

    def __init__(self) -> None:
        self.seen: list[Any] = []

    def receive(self, message: Any) -> Any:
        if message == "seen":
            return list(self.seen)
        self.seen.append(message)
        return None


EVENTS: dict[int, trio.Event] = {}
"""The events :class:`Blocker` waits on, by number (a test clears them first)."""


class Blocker(ta.Actor):
    """``("block", n)`` and ``"block"`` / ``"slow"`` wait for ``EVENTS[n]`` (``n`` 0 for
    the latter); records all; ``"seen"`` returns the record."""

    def __init__(self) -> None:
        self.seen: list[Any] = []

    async def receive(self, message: Any) -> Any:
        if message == "seen":
            return list(self.seen)
        if isinstance(message, tuple) and message[0] == "block":
            await EVENTS.setdefault(message[1], trio.Event()).wait()
        elif message in ("block", "slow"):
            await EVENTS.setdefault(0, trio.Event()).wait()
        self.seen.append(message)
        return None


def letters(system: ta.ActorSystem, reason: str) -> list[Any]:
    """The messages of ``system``'s recent dead letters of ``reason``."""
    return [d.message for d in system.dead_letters.recent if d.reason == reason]


def link_of(ref: ta.ActorRef) -> Any:
    """The link (``remote/_link.py``) of the node a remote ``ref``'s actor lives on."""
    return ref._cell.link  # type: ignore[union-attr]  # (a remote cell's)


async def eventually(check: Callable[[], Awaitable[bool] | bool], within: float = 10) -> None:
    """Wait until ``check()`` holds (what travels over a network arrives in time),
    at most ``within`` seconds."""
    with trio.fail_after(within):
        while True:
            result = check()
            if not isinstance(result, bool):
                result = await result
            if result:
                return
            await trio.sleep(0.01)


def gone(pid: int) -> bool:
    """Whether no process has ``pid`` (any more): for the tests that start real node
    processes and check that none is left behind."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


def kind_of(payload: bytes) -> int | None:
    """The kind of a message to a node's actors (``None``: not one)."""
    try:
        kind, _number, _path, _body = msgspec.msgpack.decode(payload)
    except (msgspec.DecodeError, TypeError, ValueError):
        return None
    return kind if isinstance(kind, int) else None

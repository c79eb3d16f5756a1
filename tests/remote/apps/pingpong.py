"""A tiny cluster application for the ``trio-actors cluster`` tests: every node
registers an echo actor under its own name, finds the others' by name, asks each,
and returns (so the node exits 0). ``failing`` raises instead (exit 1);
``forever`` serves until Ctrl-C."""

from __future__ import annotations

import os
from typing import Any

import trio

import trio_actors as ta


class Echo(ta.Actor):
    """Answers with the message; ``asked`` is set once ``expected`` asks came."""

    def __init__(self, expected: int, asked: trio.Event) -> None:
        self.expected = expected
        self.asked = asked

    def receive(self, message: Any) -> Any:
        self.expected -= 1
        if self.expected <= 0:
            self.asked.set()
        return message


async def main(system: ta.ActorSystem) -> None:
    assert system.node is not None
    me = system.node.name
    others = [f"node-{n}" for n in range(2) if f"node-{n}" != me]
    asked = trio.Event()
    system.register(me, system.spawn(Echo, len(others), asked, name="echo"))
    await system.node.flush()
    with trio.fail_after(20):
        for other in others:
            while True:
                try:
                    ref = await system.lookup(other)
                    break
                except ta.ActorNotFound:
                    await trio.sleep(0.05)
            answer = await ref.ask(("hello from", me))
            print(f"{me} asked {other}: {answer!r}", flush=True)
        await asked.wait()  # (stay until the others have asked this node too)


async def failing(system: ta.ActorSystem) -> None:
    raise RuntimeError("this node fails on purpose")


async def forever(system: ta.ActorSystem) -> None:
    assert system.node is not None
    print(f"{system.node.name} serving (pid {os.getpid()})", flush=True)
    await trio.sleep_forever()


class Recorder(ta.Actor):
    """Answers ``"ping"``; never answers ``"hang"`` (its ask ends when the actor
    stops); says when it began to hang and when its ``on_stop`` ran."""

    async def receive(self, message: Any) -> Any:
        if message == "hang":
            print("recorder: hanging", flush=True)
            await trio.sleep_forever()
        return message

    def on_stop(self) -> None:
        print("recorder: on_stop ran", flush=True)


async def stoppable(system: ta.ActorSystem) -> None:
    """Register a ``recorder`` and serve until a signal stops the node."""
    assert system.node is not None
    system.register("recorder", system.spawn(Recorder, name="recorder"))
    await system.node.flush()
    print(f"{system.node.name} serving", flush=True)
    await trio.sleep_forever()


async def hold_or_wait(system: ta.ActorSystem) -> None:
    """``node-0`` holds an actor that never answers; ``node-1`` asks it and says how
    the ask ended (a ``kill -9`` of ``node-0``: ``NodeDown``, and by which route)."""
    assert system.node is not None
    if system.node.name == "node-0":
        system.register("held", system.spawn(Recorder, name="held"))
        await system.node.flush()
        print(f"node-0 serving (pid {os.getpid()})", flush=True)
        await trio.sleep_forever()
    while True:
        try:
            held = await system.lookup("held")
            break
        except ta.ActorNotFound:
            await trio.sleep(0.05)

    async def ask() -> None:
        try:
            await held.ask("hang")
        except ta.ActorError as error:
            print(f"node-1 saw {type(error).__name__}: {error}", flush=True)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(ask)
        await trio.sleep(0.01)
        await system.node.flush()
        print("node-1 waiting", flush=True)
        await trio.sleep_forever()

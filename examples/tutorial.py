"""The tutorial's program (docs/tutorial.rst), one step per function.

Run it: ``python examples/tutorial.py``. It prints what each step shows; the test
suite runs it under a ``MockClock`` and checks every line.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import trio

import trio_actors as ta

Report = Callable[[str], None]


# --- Step 1: an actor, tell and ask ------------------------------------------------


class Counter(ta.Actor):
    def __init__(self, start: int = 0) -> None:
        self.count = start

    def receive(self, message: Any) -> Any:
        match message:
            case ("add", n):
                self.count += n
            case "get":
                return self.count  # the reply to an ask
        return None


async def step1_tell_and_ask(system: ta.ActorSystem, report: Report) -> None:
    counter = system.spawn(Counter, 10, name="counter")
    counter.tell(("add", 1))  # returns at once: the message is queued
    counter.tell(("add", 2))
    report(f"count = {await counter.ask('get')}")  # asks wait for the reply


# --- Step 2: async handlers and cancellation --------------------------------------


class Lookup(ta.Actor):
    """Looks a word up, slowly, as a network call would."""

    async def receive(self, word: str) -> str:
        await trio.sleep(0.1 * len(word))  # a tenth of a second per letter
        return word.upper()


async def step2_cancellation(system: ta.ActorSystem, report: Report) -> None:
    lookup = system.spawn(Lookup)
    report(f"lookup('hi') = {await lookup.ask('hi')!r}")
    with trio.move_on_after(0.3) as scope:
        await lookup.ask("elephant")  # 0.8 s: the asker gives up after 0.3 s...
    report(f"gave up on 'elephant': {scope.cancelled_caught}")
    # ...and the handler working on it was cancelled too: the actor is free.
    start = trio.current_time()
    report(f"lookup('ok') = {await lookup.ask('ok')!r} in {trio.current_time() - start:.1f}s")


# --- Step 3: stopping ------------------------------------------------------------------


async def step3_stopping(system: ta.ActorSystem, report: Report) -> None:
    counter = system.spawn(Counter)
    for n in range(1, 5):
        counter.tell(("add", n))
    await counter.stop(drain=True)  # handles what is queued, then stops
    counter.tell(("add", 100))  # too late: a dead letter, never an exception
    try:
        await counter.ask("get")
    except ta.ActorStopped:
        report("the counter has stopped")
    letter = system.dead_letters.recent[-1]
    report(f"dead letter: {letter.message!r} ({letter.reason})")


# --- Step 4: supervision -----------------------------------------------------------


class Parser(ta.Actor):
    """Parses numbers; raises on anything else (a bug we did not foresee)."""

    def __init__(self) -> None:
        self.parsed = 0

    def receive(self, text: str) -> Any:
        if text == "parsed so far":
            return self.parsed
        number = int(text)  # ValueError for "forty-two"
        self.parsed += 1
        return number


class Service(ta.Actor):
    """Owns a Parser and restarts it when it fails."""

    def on_start(self) -> None:
        self.parser = self.spawn(
            Parser, name="parser", supervision=ta.Restart(max_restarts=3, within=10.0)
        )

    async def receive(self, text: str) -> Any:
        try:
            return await self.parser.ask(text)
        except ValueError:
            return None  # the asker gets the exception; supervision restarts it


async def step4_supervision(system: ta.ActorSystem, report: Report) -> None:
    service = system.spawn(Service, name="service")
    report(f"parse('42') = {await service.ask('42')}")
    report(f"parsed so far: {await service.ask('parsed so far')}")
    report(f"parse('forty-two') = {await service.ask('forty-two')}")
    report(f"parsed so far: {await service.ask('parsed so far')} (a fresh parser)")
    report(f"parse('7') = {await service.ask('7')}")


# --- Putting it together ------------------------------------------------------------


async def main() -> list[str]:
    lines: list[str] = []
    async with ta.open_actor_system() as system:
        for step in (step1_tell_and_ask, step2_cancellation, step3_stopping, step4_supervision):
            await step(system, lines.append)
    # Leaving the block stopped every actor still alive (the service and its parser).
    lines.append(f"actors alive: {system.live_actors}")
    return lines


if __name__ == "__main__":
    for line in trio.run(main):
        print(line)

"""A small busy node for the ``top`` tests (``trio-actors node busy:main``): a
producer that, 50 times a second, tells each of three workers a few messages
(worker-2 the most), and serves until a signal stops it."""

from __future__ import annotations

import os
from typing import Any

import trio

import trio_actors as ta

TICK = 0.02  # seconds between the producer's rounds


class Worker(ta.Actor):
    def __init__(self) -> None:
        self.count = 0

    def receive(self, message: Any) -> None:
        self.count += 1


class Producer(ta.Actor):
    def __init__(self, workers: list[ta.ActorRef]) -> None:
        self.workers = workers

    def on_start(self) -> None:
        self.tell_every(TICK, "tick")

    def receive(self, message: Any) -> None:
        for n, worker in enumerate(self.workers):
            for _ in range((n + 1) * 5):
                worker.tell(n)


async def main(system: ta.ActorSystem) -> None:
    assert system.node is not None
    workers = [system.spawn(Worker, name=f"worker-{n}") for n in range(3)]
    system.spawn(Producer, workers, name="producer")
    print(f"{system.node.name} busy (pid {os.getpid()})", flush=True)
    await trio.sleep_forever()

"""Run by test_interrupts.py in a process of its own: actors under load until a real
SIGINT arrives (and another once the exit has begun, if the test sends one); then
print the accounting as JSON.

The load task is KI protected so that its own count of what it sent stays exact
(``sent`` is counted right after each ``tell``); the runtime's statistics and the
dead letters must account for every one of those tells.
"""

from __future__ import annotations

import json
import signal
from collections import Counter
from typing import Any

import trio
from trio.lowlevel import checkpoint, enable_ki_protection

import trio_actors as ta


class Plain(ta.Actor):
    def receive(self, message: Any) -> Any:
        return message


class Async(ta.Actor):
    announced = False

    async def receive(self, message: Any) -> Any:
        await checkpoint()
        return message

    async def on_stop(self) -> None:
        if not Async.announced:  # the first of them the exit stops: it has begun
            Async.announced = True
            print("exit begun", flush=True)
        await checkpoint()


def main() -> None:
    # Ctrl-C as in a terminal, whatever this process inherited: a shell starting a
    # command in the background (``cmd &`` without job control) starts it with SIGINT
    # ignored, and Python then installs no KeyboardInterrupt handler, nor does trio --
    # the test's SIGINTs would do nothing and it would hang.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    sent = [0]
    refs: list[ta.ActorRef] = []
    systems: list[ta.ActorSystem] = []

    @enable_ki_protection
    async def load(task_status: trio.TaskStatus[None]) -> None:
        rounds = 0
        while True:
            for ref in refs:
                for _ in range(20):
                    ref.tell(rounds)
                    sent[0] += 1
            rounds += 1
            if rounds == 50:
                task_status.started()
            await checkpoint()

    async def run() -> None:
        async with ta.open_actor_system() as system:
            systems.append(system)
            for number in range(40):
                refs.append(system.spawn(Plain if number % 2 else Async))
            async with trio.open_nursery() as nursery:
                await nursery.start(load)
                print("ready", flush=True)
                await trio.sleep_forever()

    try:
        trio.run(run)
        ended = "returned"
    except KeyboardInterrupt:
        ended = "KeyboardInterrupt"
    except BaseExceptionGroup as group:
        ended = "group with KeyboardInterrupt" if group.split(KeyboardInterrupt)[0] else repr(group)
    statistics = [ref.statistics() for ref in refs]
    print(
        json.dumps(
            {
                "ended": ended,
                "sent": sent[0],
                "handled": sum(s.handled for s in statistics),
                "dead_letters": systems[0].dead_letters.count,
                "states": Counter(s.state for s in statistics),
                "live": systems[0].statistics().live_actors,
            }
        ),
        flush=True,
    )


if __name__ == "__main__":
    main()

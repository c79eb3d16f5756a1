"""Contract T24: timers end with their actor, and a cancelled timer's tick is never
handled."""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from .. import Actor, ActorRef, Restart, ServingPolicy, Timer
from ._harness import require, run_virtual, system_for
from ._registry import contract


class _Ticking(Actor):
    """Starts a periodic timer to itself and one to a peer; records every tick with
    the instance it reached (``generation``)."""

    generations = 0

    def __init__(self, log: list[tuple[str, int, Any, float]], peer: ActorRef) -> None:
        self.log = log
        self.peer = peer
        type(self).generations += 1
        self.generation = type(self).generations

    def on_start(self) -> None:
        self.tell_every(1.0, ("tick", self.generation))
        self.tell_after(2.5, ("once", self.generation))
        self.tell_every(1.0, ("peer", self.generation), to=self.peer)

    def receive(self, message: Any) -> Any:
        if message == "boom":
            raise RuntimeError("boom")
        self.log.append(("self", self.generation, message, trio.current_time()))


class _Peer(Actor):
    def __init__(self, log: list[tuple[str, int, Any, float]]) -> None:
        self.log = log

    def receive(self, message: Any) -> Any:
        self.log.append(("peer", 0, message, trio.current_time()))


class _Busy(Actor):
    """Holds its mailbox while a tick is queued, then cancels the tick's timer."""

    def __init__(self, log: list[Any]) -> None:
        self.log = log
        self.timer: Timer | None = None

    async def receive(self, message: Any) -> Any:
        if message == "start":
            self.timer = self.tell_after(1.0, "cancelled tick")
        elif message == "hold":
            await trio.sleep(2.0)  # the tick is queued meanwhile
            assert self.timer is not None
            self.timer.cancel()
        else:
            self.log.append(message)


@contract(
    "T24",
    "timers end with their actor",
    "an actor's periodic and one-shot timers (to itself and to another actor) "
    "deliver nothing once it has stopped, and nothing from the old instance after a "
    "restart; no tick becomes a dead letter; a timer cancelled while its tick is "
    "queued: that tick is never handled",
)
def timers_end_with_their_actor(policy: ServingPolicy) -> None:
    log: list[tuple[str, int, Any, float]] = []
    busy_log: list[Any] = []
    stopped_at: list[float] = []
    failed_at: list[float] = []
    active_after: list[int] = []

    async def main(clock: trio.testing.MockClock) -> None:
        _Ticking.generations = 0
        async with system_for(policy) as system:
            peer = system.spawn(_Peer, log)
            restarting = system.spawn(
                _Ticking, log, peer, supervision=Restart(max_restarts=10, within=100.0)
            )
            await trio.sleep(3.5)
            restarting.tell("boom")
            await trio.testing.wait_all_tasks_blocked()
            failed_at.append(trio.current_time())
            await trio.sleep(2.2)
            await restarting.stop()
            stopped_at.append(trio.current_time())
            await trio.sleep(10)
            active_after.append(system.statistics().timers)
            busy = system.spawn(_Busy, busy_log)
            busy.tell("start")
            busy.tell("hold")
            busy.tell("after")
            await trio.sleep(5)
            require(
                system.dead_letters.count == 0,
                f"{system.dead_letters.count} dead letters (a timer outlived its actor?)",
            )

    run_virtual(main)
    require(active_after == [0], f"{active_after[0]} timers still active after the stop")
    for where, generation, message, when in log:
        sent_by = message[1]
        if when > stopped_at[0]:
            require(False, f"{message!r} reached {where} at {when:g}, after the stop")
        if sent_by == 1 and when > failed_at[0]:
            require(
                False,
                f"{message!r} of the failed instance reached {where} at {when:g}, "
                f"after the restart at {failed_at[0]:g}",
            )
        if where == "self":
            require(
                generation == sent_by,
                f"instance {generation} got {message!r} from instance {sent_by}",
            )
    ticks = [(g, m) for w, g, m, _ in log if w == "self"]
    require(
        (1, ("tick", 1)) in ticks and (2, ("tick", 2)) in ticks,
        f"each instance should get its own ticks; got {ticks}",
    )
    require(
        busy_log == ["after"],
        f"handled {busy_log}: a tick withdrawn by cancel() was handled",
    )


__all__: list[str] = []

"""Contracts across nodes, a node's death: RT19 death watch across nodes, RT21
nothing lost across nodes.

What a watcher of a remote actor is told when the actor stops and when its node dies
(asks pending there fail with ``NodeDown``); and, with a node cut mid-stream as by
``kill -9``, that every ask ends and every tell is handled, a dead letter, or counted
in the sender's ``node.unconfirmed`` -- and no more counted than can have been lost.
"""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from ... import Actor, ActorRef, NodeDown, ServingPolicy, Terminated
from ...remote import MemoryBus
from .._harness import require, run_virtual
from .._registry import ContractViolation, contract
from ._actors import _Echo, _Gate, _Recorder
from ._nodes import nodes, reach


class _Watcher(Actor):
    def __init__(self) -> None:
        self.notices: list[Terminated] = []

    def receive(self, message: Any) -> Any:
        if isinstance(message, Terminated):
            self.notices.append(message)
        elif isinstance(message, tuple) and message[0] == "watch":
            self.watch(message[1])
        elif message == "notices":
            return list(self.notices)
        return None


class _CuttingBus(MemoryBus):
    """Cuts a node's connection just after a message to it was routed: that message
    (and what else waited for the node) is lost in flight, as with a ``kill -9``."""

    def __init__(self) -> None:
        super().__init__()
        self._cut: tuple[Any, str] | None = None
        self.cut_at: float | None = None  # (when it was cut)

    def cut_after_next(self, node: Any) -> None:
        """Cut ``node``'s connection after the next message to its actors."""
        self._cut = (node.transport, node.subject)

    def _route(self, subject: str, payload: bytes, reply: str | None) -> None:
        super()._route(subject, payload, reply)
        if self._cut is not None and subject == self._cut[1]:
            transport, _subject = self._cut
            self._cut = None
            self.cut_at = trio.current_time()
            self.disconnect(transport)


@contract(
    "RT19",
    "death watch across nodes",
    "a remote actor's watcher gets exactly one Terminated when it stops; when its node "
    "dies, every ask pending there fails with NodeDown and every watch of its actors "
    "ends with one Terminated whose error is NodeDown",
)
def remote_death_watch(policy: ServingPolicy) -> None:
    async def main(clock: trio.testing.MockClock) -> None:
        bus = MemoryBus()
        async with nodes(policy, "b", bus=bus) as (b,), nodes(policy, "a", bus=bus) as (a,):
            watcher = b.spawn(_Watcher)
            stopping = await reach(a, b, a.spawn(_Echo), "stopping")
            await watcher.ask(("watch", stopping))
            await stopping.stop()
            await trio.sleep(1)
            notices = await watcher.ask("notices")
            require(
                [(n.ref, n.error) for n in notices] == [(stopping, None)],
                f"after a remote stop the watcher got {notices}",
            )
            gate = trio.Event()
            dying = await reach(a, b, a.spawn(_Gate, gate), "dying")
            await watcher.ask(("watch", dying))
            outcomes: list[str] = []

            async def ask_pending() -> None:
                try:
                    await dying.ask("wait")
                except NodeDown:
                    outcomes.append("NodeDown")

            async with trio.open_nursery() as nursery:
                for _ in range(3):
                    nursery.start_soon(ask_pending)
                await trio.sleep(1)
                assert a.node is not None
                bus.disconnect(a.node.transport)  # type: ignore[arg-type]
            require(outcomes == ["NodeDown"] * 3, f"asks pending on the dead node: {outcomes}")
            await trio.sleep(5)
            notices = await watcher.ask("notices")
            errors = [type(n.error).__name__ for n in notices if n.ref == dying]
            require(errors == ["NodeDown"], f"watching an actor of the dead node gave {errors}")

    run_virtual(main)


@contract(
    "RT21",
    "nothing lost across nodes",
    "with a node dying mid-stream: every remote ask ends (a value, an exception or "
    "NodeDown; none hangs); every tell is handled, a dead letter, or counted in the "
    "sender's node.unconfirmed -- and only one its dead receiver may have lost is",
)
def remote_nothing_lost(policy: ServingPolicy) -> None:
    async def main(clock: trio.testing.MockClock) -> None:
        bus = _CuttingBus()
        async with nodes(policy, "a", "b", "c", bus=bus) as (a, b, c):
            recorders = {"b": b.spawn(_Recorder), "c": c.spawn(_Recorder)}
            refs = {
                "b": await reach(b, a, recorders["b"], "keeper-b"),
                "c": await reach(c, a, recorders["c"], "keeper-c"),
            }
            told: dict[str, list[int]] = {"b": [], "c": []}
            sent_at: dict[int, float] = {}
            outcomes: list[str] = []

            async def ask(ref: ActorRef, message: Any) -> None:
                try:
                    await ref.ask(message)
                    outcomes.append("value")
                except Exception as error:
                    outcomes.append(type(error).__name__)

            stuck = await reach(c, a, c.spawn(_Gate, trio.Event()), "stuck")
            with trio.move_on_after(60) as hang:
                async with trio.open_nursery() as nursery:
                    for _ in range(3):  # (pending when the node dies)
                        nursery.start_soon(ask, stuck, "wait")
                    for number in range(300):
                        target = "bc"[number % 2]
                        refs[target].tell(("told", number))
                        if not (target == "c" and bus.cut_at is not None):  # (unreachable)
                            told[target].append(number)
                            sent_at[number] = trio.current_time()
                        if number % 5 == 0:
                            nursery.start_soon(ask, refs[target], ("asked", number))
                        if number == 200:  # (node c dies with the next tells in flight)
                            bus.cut_after_next(c.node)
                        if number % 25 == 0:
                            await trio.sleep(0.01)
            require(not hang.cancelled_caught, f"asks hung; those that ended: {outcomes}")
            require(
                len(outcomes) == 63 and outcomes.count("NodeDown") >= 3,
                f"the asks ended as {outcomes}",
            )
            await trio.sleep(5)  # (the accounting waits for a flush)
            assert a.node is not None
            unconfirmed = a.node.unconfirmed
            handled = {
                name: {m[1] for m in await recorders[name].ask("seen") if m[0] == "told"}
                for name in ("b", "c")
            }
            dead = {
                letter.message[1]
                for system in (a, b, c)
                for letter in system.dead_letters.recent
                if isinstance(letter.message, tuple) and letter.message[0] == "told"
            }
            missing_b = sorted(set(told["b"]) - handled["b"] - dead)
            require(not missing_b, f"tells to a live node silently gone: {missing_b}")
            missing_c = sorted(set(told["c"]) - handled["c"] - dead)
            require(
                len(missing_c) <= unconfirmed,
                f"{len(missing_c)} tells to the dead node are gone, {unconfirmed} counted "
                f"unconfirmed: {missing_c}",
            )
            # Acknowledged every few milliseconds: only the last ones before the death
            # may be counted (a tell handled there may be among them).
            death = bus.cut_at
            if death is None:
                raise ContractViolation("node c was never cut: the program did not run")
            recent = [n for n in told["c"] if sent_at[n] > death - 0.02]
            require(
                unconfirmed <= len(recent),
                f"{unconfirmed} tells counted unconfirmed, but only {len(recent)} were sent "
                "in the last 20 ms before the node died (acknowledgements lost?)",
            )

    run_virtual(main)


__all__ = ["remote_death_watch", "remote_nothing_lost"]

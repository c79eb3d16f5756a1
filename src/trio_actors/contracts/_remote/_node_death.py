"""Contracts across nodes, a node's death: RT19 death watch across nodes, RT21
nothing lost across nodes.

What a watcher of a remote actor is told when the actor stops and when its node dies
(asks pending there fail with ``NodeDown``); and, with a node cut mid-stream as by
``kill -9``, that every ask ends and every tell is handled, a dead letter, or given
back on its sender ``"in-doubt"`` with its message (counted in ``node.unconfirmed``)
-- exactly, and only what can have been lost.
"""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

from ... import Actor, ActorRef, ActorSystem, NodeDown, Pool, ServingPolicy, Terminated
from ...nats import Headers
from ...remote import MemoryBus, Node
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
        self._cut = (node.transport, node.subject.removesuffix("*"))  # (from any node)

    def _route(
        self, subject: str, payload: bytes, reply: str | None, headers: Headers | None = None
    ) -> None:
        super()._route(subject, payload, reply, headers)
        if self._cut is not None and subject.startswith(self._cut[1]):
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
                bus.disconnect(Node.of(a).transport)  # type: ignore[arg-type]
            require(outcomes == ["NodeDown"] * 3, f"asks pending on the dead node: {outcomes}")
            await trio.sleep(5)
            notices = await watcher.ask("notices")
            errors = [type(n.error).__name__ for n in notices if n.ref == dying]
            require(errors == ["NodeDown"], f"watching an actor of the dead node gave {errors}")

    run_virtual(main)


@contract(
    "RT21",
    "nothing lost across nodes",
    "with a node dying mid-stream, some of its tells still queued in a blocked actor's "
    "mailbox and in a blocked balancing pool's queue: every remote ask ends (a value, an "
    "exception or NodeDown; none hangs); "
    "every tell is handled, a dead letter, or given back on its sender as a dead letter "
    '"in-doubt" with its message -- exactly: none missing, none two of these, the '
    "sender's node.unconfirmed equal to its in-doubt dead letters, none in doubt to a "
    "live node, and none in doubt that its receiver handled long before it died",
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
            stream = _Stream()
            refs["stuck"] = await reach(c, a, c.spawn(_Gate, trio.Event()), "stuck")
            pool = Pool(_Gate, (trio.Event(),), size=2, routing="balancing")
            refs["pooled"] = await reach(c, a, c.spawn(pool), "pooled")
            await stream.run(bus, c, refs)
            await trio.sleep(5)  # (the accounting waits for a flush)
            await stream.check_accounted(bus, (a, b, c), recorders)

    run_virtual(main)


class _Stream:
    """RT21's stream from node a to nodes b and c, and what it sent."""

    def __init__(self) -> None:
        self.told: dict[str, list[int]] = {"b": [], "c": [], "stuck": [], "pooled": []}
        """The tells sent to each recorder (and to c's blocked actor and pool)."""
        self.asked = 0
        """The asks made."""
        self.sent_at: dict[int, float] = {}
        """When each of them was sent."""
        self.outcomes: list[str] = []
        """How each ask ended: ``"value"`` or the exception's type name."""

    async def ask(self, ref: ActorRef, message: Any) -> None:
        self.asked += 1
        try:
            await ref.ask(message)
            self.outcomes.append("value")
        except Exception as error:
            self.outcomes.append(type(error).__name__)

    async def run(self, bus: _CuttingBus, c: ActorSystem, refs: dict[str, ActorRef]) -> None:
        """300 tells to b's and c's recorders in turn (and from the 50th on every
        third to c's actor blocked by three asks ``"wait"``, every seventh of the
        rest to c's pool whose two workers two such asks block: they stay queued
        there), an ask with every fifth to a recorder, and node c cut just after
        the first message routed to it once 201 tells have gone: every ask must
        end within 60 virtual seconds, at least the five waiting with
        ``NodeDown``."""
        with trio.move_on_after(60) as hang:
            async with trio.open_nursery() as nursery:
                for blocked, asks in (("stuck", 3), ("pooled", 2)):
                    for _ in range(asks):  # (pending when the node dies)
                        nursery.start_soon(self.ask, refs[blocked], "wait")
                await trio.sleep(0.01)
                for number in range(300):
                    target = _target(number)
                    refs[target].tell(("told", number))
                    self.told[target].append(number)
                    self.sent_at[number] = trio.current_time()
                    if number % 5 == 0 and target in ("b", "c"):
                        nursery.start_soon(self.ask, refs[target], ("asked", number))
                    if number == 200:  # (node c dies with the next tells in flight)
                        bus.cut_after_next(c.node)
                    if number % 25 == 0:
                        await trio.sleep(0.01)
        require(not hang.cancelled_caught, f"asks hung; those that ended: {self.outcomes}")
        require(
            len(self.outcomes) == self.asked and self.outcomes.count("NodeDown") >= 5,
            f"the asks ended as {self.outcomes}",
        )

    async def check_accounted(
        self, bus: _CuttingBus, systems: tuple[ActorSystem, ...], recorders: dict[str, ActorRef]
    ) -> None:
        """Each tell exactly accounted (see the contract's text)."""
        a = systems[0]
        assert a.node is not None
        handled: dict[str, set[int]] = {
            name: {m[1] for m in await recorders[name].ask("seen") if m[0] == "told"}
            for name in ("b", "c")
        }
        handled["stuck"] = handled["pooled"] = set()  # (blocked from the start)
        letters = [
            (letter.message[1], letter.reason)
            for system in systems
            for letter in system.dead_letters.recent
            if isinstance(letter.message, tuple) and letter.message[0] == "told"
        ]
        dead = [number for number, reason in letters if reason != "in-doubt"]
        in_doubt = [number for number, reason in letters if reason == "in-doubt"]
        require(
            len(set(dead)) == len(dead) and len(set(in_doubt)) == len(in_doubt),
            f"a tell was made a dead letter twice: {sorted(dead)} / {sorted(in_doubt)}",
        )
        require(
            a.node.unconfirmed == len(in_doubt),
            f"node.unconfirmed is {a.node.unconfirmed}, with {len(in_doubt)} tells in doubt",
        )
        require(not set(dead) & set(in_doubt), "a tell both a dead letter and in doubt")
        for name, told in self.told.items():
            missing = sorted(set(told) - handled[name] - set(dead) - set(in_doubt))
            require(not missing, f"tells to {name} silently gone: {missing}")
            twice = sorted(handled[name] & set(dead))
            require(not twice, f"tells to {name} handled and dead letters: {twice}")
        doubted_b = sorted(set(self.told["b"]) & set(in_doubt))
        require(not doubted_b, f"tells to a live node given back in doubt: {doubted_b}")
        # Acknowledged every few milliseconds once handled: of the tells node c
        # handled, only the last ones before its death may be in doubt.
        death = bus.cut_at
        if death is None:
            raise ContractViolation("node c was never cut: the program did not run")
        early = sorted(
            number
            for number in handled["c"] & set(in_doubt)
            if self.sent_at[number] <= death - 0.02
        )
        require(
            not early,
            f"tells node c handled long before it died were given back in doubt: {early} "
            "(acknowledgements lost?)",
        )


def _target(number: int) -> str:
    """Where RT21's stream sends its tell ``number``."""
    if number >= 50 and number % 3 == 0:
        return "stuck"
    if number >= 50 and number % 7 == 0:
        return "pooled"
    return "bc"[number % 2]


__all__ = ["remote_death_watch", "remote_nothing_lost"]

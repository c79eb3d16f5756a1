"""Contracts across nodes, shared names: RT34 a shared name spreads its messages and
loses none when a member's node dies.

Two nodes serve one shared name (two members each), a third asks and tells through
the group's ref; then one serving node is cut as by ``kill -9`` with messages in
flight to it. Every ask ends, once: answered, or -- taken by the dead node --
``NodeDown`` (within the time its death is heard, never by the bound for a message
nobody took); every tell is handled by a member, a dead letter there, or given back
on its sender ``"in-doubt"`` with its message (``node.unconfirmed`` counting them),
exactly -- none missing, none two of these but those that ended on the dead node in
its last moment (handled, or dead letters there), whose ends it had not said yet:
they come back in doubt too (in doubt: it may or may not have been handled; a
member's node says the ends of tells at its writer's next turn, as RT21 allows for
the acknowledgements of tells to one actor); every end reaches the sender; and the
asks after the death are all answered by the live node. (The dead node's own dead
letters are not read: it is gone.)
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import trio
import trio.testing

from ... import Actor, ActorSystem, ServingPolicy
from ...remote import MemoryBus, Node
from .._harness import require, run_virtual
from .._registry import contract
from ._nodes import HEARTBEAT, nodes

_WORK = 0.01  # virtual seconds a member takes per message


class _Member(Actor):
    """A member of the shared name: takes :data:`_WORK` per message, records the
    tells it handled while its node is alive (``alive[node]``) and when
    (``handled_at``), answers an ask with its node's name."""

    def __init__(
        self, node: str, alive: dict[str, bool], handled: list[int], handled_at: dict[int, float]
    ) -> None:
        self.node = node
        self.alive = alive
        self.handled = handled
        self.handled_at = handled_at

    async def receive(self, message: Any) -> Any:
        await trio.sleep(_WORK)
        if isinstance(message, tuple) and message[0] == "told":
            if self.alive[self.node]:  # (a dead node's later work reaches nobody)
                self.handled.append(message[1])
                self.handled_at[message[1]] = trio.current_time()
            return None
        return self.node


@contract(
    "RT34",
    "a shared name spreads its messages and loses none when a member's node dies",
    "asks through a shared name's group reach members on both serving nodes; when one "
    "serving node dies mid-stream, every ask ends once -- answered, or NodeDown if that "
    "node had taken it, within the time its death is heard -- and every tell is handled "
    "by a member, a dead letter there, or given back on its sender in doubt with its "
    "message, exactly (node.unconfirmed equal to those; handled and in doubt only if "
    "handled in the dead node's last moment), its end known to its sender; after the "
    "death every ask is answered by the live node",
)
def shared_name_spreads_and_loses_none(policy: ServingPolicy) -> None:
    async def main(clock: trio.testing.MockClock) -> None:
        bus = MemoryBus()  # (advisories: the death is heard at once)
        alive = {"a": True, "b": True}
        handled: dict[str, list[int]] = {"a": [], "b": []}
        handled_at: dict[int, float] = {}
        async with nodes(policy, "a", "b", "c", bus=bus) as (a, b, c):
            for system, name in ((a, "a"), (b, "b")):
                for _ in range(2):
                    member = system.spawn(_Member, name, alive, handled[name], handled_at)
                    system.register("work", member, shared=True)
            await trio.sleep(HEARTBEAT / 5)
            group = await c.lookup("work")
            first = Counter([str(await group.ask("where")) for _ in range(40)])
            require(
                set(first) == {"a", "b"},
                f"40 asks through the group were answered by {dict(first)}",
            )
            outcomes: list[str] = []
            failed_at: list[float] = []  # (when each ask that failed ended)

            async def ask() -> None:
                try:
                    outcomes.append(str(await group.ask("where")))
                except Exception as error:
                    outcomes.append(type(error).__name__)
                    failed_at.append(trio.current_time())

            told = list(range(200))
            with trio.move_on_after(20 * HEARTBEAT) as hang:
                async with trio.open_nursery() as nursery:
                    for number in told:
                        group.tell(("told", number))
                        nursery.start_soon(ask)
                        if number == 120:
                            await trio.sleep(_WORK * 3)
                            alive["b"] = False
                            bus.disconnect(Node.of(b).transport)  # type: ignore[arg-type]
                            died = trio.current_time()
                        if number % 20 == 0:
                            await trio.sleep(_WORK)
            require(not hang.cancelled_caught, f"asks hung; those that ended: {outcomes}")
            require(len(outcomes) == len(told), f"{len(told)} asks ended {len(outcomes)} times")
            ended = Counter(outcomes)
            require(
                set(ended) <= {"a", "b", "NodeDown"} and ended["NodeDown"] >= 1,
                f"the asks ended as {dict(ended)} (those node b had taken: NodeDown)",
            )
            late = [at - died for at in failed_at if at - died >= HEARTBEAT]
            require(not late, f"asks node b had taken ended only {late} s after its death")
            after = Counter([str(await group.ask("where")) for _ in range(20)])
            require(after == Counter({"a": 20}), f"after b's death, asks went to {after}")
            await trio.sleep(HEARTBEAT)
            _check_accounted(told, handled, (a, c))
            in_flight = Node.of(c).groups.in_flight
            require(in_flight == 0, f"the ends of {in_flight} tells never reached their sender")
            _check_doubted_late(handled_at, (a, c), died)

    run_virtual(main)


def _check_accounted(
    told: list[int], handled: dict[str, list[int]], systems: tuple[ActorSystem, ...]
) -> None:
    """Each tell handled once, a dead letter, or in doubt on its sender -- exactly."""
    sender = systems[-1]
    assert sender.node is not None
    letters = [
        (letter.message[1], letter.reason)
        for system in systems
        for letter in system.dead_letters.recent
        if isinstance(letter.message, tuple) and letter.message[0] == "told"
    ]
    in_doubt = [number for number, reason in letters if reason == "in-doubt"]
    dead = [number for number, reason in letters if reason != "in-doubt"]
    done = handled["a"] + handled["b"]
    require(len(set(done)) == len(done), "a tell was handled twice")
    require(
        sender.node.unconfirmed == len(in_doubt),
        f"node.unconfirmed is {sender.node.unconfirmed}, with {len(in_doubt)} tells in doubt",
    )
    accounted = Counter(dead + in_doubt)
    missing = sorted(set(told) - set(accounted) - set(done))
    require(not missing, f"tells silently gone: {missing}")
    require(bool(in_doubt), "no tell was in flight to the dead node: the program did not run")
    twice = sorted(number for number, count in accounted.items() if count > 1)
    require(not twice, f"tells given back twice, or both given back and dead letters: {twice}")
    handled_and_dead = sorted(set(done) & set(dead))
    require(not handled_and_dead, f"tells both handled and dead letters: {handled_and_dead}")


def _check_doubted_late(
    handled_at: dict[int, float], systems: tuple[ActorSystem, ...], died: float
) -> None:
    """A tell may be both handled and given back in doubt -- in doubt means it may
    or may not have been -- only if it was handled in the dead node's last moment:
    its end is said at the writer's next turn (as RT21 allows for the
    acknowledgements of tells to one actor)."""
    sender = systems[-1]
    doubted = {
        letter.message[1]
        for letter in sender.dead_letters.recent
        if letter.reason == "in-doubt" and isinstance(letter.message, tuple)
    }
    early = sorted(n for n in doubted if n in handled_at and handled_at[n] < died - _WORK)
    require(
        not early,
        f"tells handled long before their node died were given back in doubt: {early} "
        "(their ends were never said?)",
    )


__all__ = ["shared_name_spreads_and_loses_none"]

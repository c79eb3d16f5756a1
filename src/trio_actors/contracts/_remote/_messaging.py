"""Contracts across nodes, messaging: RT1 ask round trip, RT2 order per sender node,
RT4 checkpoints, RT5 stopped or unreachable remote actor.

What a remote tell and a remote ask do while both nodes live: the value and the
exceptions that come back, the order things are handled and answered in, which calls
are checkpoints, and what becomes of a message to an actor that has stopped or to a
node that has left.
"""

from __future__ import annotations

from contextlib import suppress
from typing import Any

import trio
import trio.testing

from ... import Actor, ActorStopped, ActorSystem, RemoteError, ServingPolicy
from ...nats import Headers
from ...remote import MemoryBus, MemoryTransport, Node, _link, _outbox
from .._harness import require, run_virtual
from .._registry import contract
from ._actors import _AsyncEcho, _Echo, _Recorder
from ._nodes import HEARTBEAT, nodes, reach


class _Teller(Actor):
    """Given ``(target, count)``: tells ``target`` ``count`` times, then answers."""

    def receive(self, message: Any) -> Any:
        target, count = message
        for number in range(count):
            target.tell(("told by the handler", number))
        return "answered"


class _SpyBus(MemoryBus):
    """Counts the messages sent to actors that await an answer: asks (and stops)."""

    def __init__(self) -> None:
        super().__init__()
        self.asks = 0
        self.subjects: list[str] = []  # (of every message, in the order routed)

    def _route(
        self, subject: str, payload: bytes, reply: str | None, headers: Headers | None = None
    ) -> None:
        if ".n." in subject and reply is not None and ".r." in reply:  # (answer awaited)
            self.asks += 1
        self.subjects.append(subject)
        super()._route(subject, payload, reply, headers)


@contract(
    "RT1",
    "ask round trip across nodes",
    "a remote ask returns the handler's value as it was (tuples stay tuples), for "
    "plain and async handlers; an allowed exception (builtin, the package's) reaches "
    "the asker with its type and arguments, any other as a RemoteError naming it",
)
def remote_ask_round_trip(policy: ServingPolicy) -> None:
    async def main(clock: trio.testing.MockClock) -> None:
        async with nodes(policy, "a", "b") as (a, b):
            for factory in (_Echo, _AsyncEcho):
                kind = factory.__name__
                there = await reach(a, b, a.spawn(factory), kind)
                for message in (1, "two", None, (3, 4), [5, (6,)], {"k": (7,)}):
                    reply = await there.ask(message)
                    require(
                        reply == ("echo", message) and type(reply) is tuple,
                        f"{kind}: remote ask({message!r}) returned {reply!r}",
                    )
                try:
                    await there.ask(("raise", "value"))
                except ValueError as error:
                    require(error.args == ("bad value", 3), f"{kind}: wrong error {error!r}")
                else:
                    raise AssertionError(f"{kind}: the handler's ValueError did not arrive")
                try:
                    await there.ask(("raise", "private"))
                except RemoteError as error:
                    require(
                        error.type_name.endswith("_Private") and error.text == "secret",
                        f"{kind}: a RemoteError said {error.type_name!r}: {error.text!r}",
                    )
                else:
                    raise AssertionError(f"{kind}: the handler's _Private did not arrive")

    run_virtual(main)


@contract(
    "RT2",
    "order per sender node",
    "tells and asks from one node to one actor of another are handled in the order they "
    "were sent, also a tell sent while an ask before it waits for its answer, an ask "
    "after a burst of tells past the link's window, and tells "
    "sent while the actor's node is between two connections (sent again, in order, "
    "never dead letters; also a record's very first message); an ask's answer leaves "
    "after the tells its handler made before answering",
)
def remote_order(policy: ServingPolicy) -> None:
    async def main(clock: trio.testing.MockClock) -> None:
        bus = _SpyBus()
        async with nodes(policy, "a", "b", bus=bus) as (a, b), trio.open_nursery() as asks:
            there = await reach(a, b, a.spawn(_Recorder), "recorder")
            sent: list[Any] = []
            for number in range(300):
                if number % 50 == 49:
                    await there.ask(("asked", number))
                    sent.append(("asked", number))
                else:
                    there.tell(number)
                    sent.append(number)
            # An ask still unanswered, then a tell: the tell is handled after it.
            for number in range(20):
                sent_before = bus.asks
                asks.start_soon(there.ask, ("asked first", number))
                while bus.asks == sent_before:  # (until that task has sent it)
                    await trio.lowlevel.checkpoint()
                there.tell(("told next", number))
                sent += [("asked first", number), ("told next", number)]
            seen = await there.ask("seen")
            require(
                seen == sent, f"handled out of order: first difference near {_diff(seen, sent)}"
            )
            await _past_the_window(a, b)
            await _across_a_reconnect(a, b, bus)
            await _first_message_across_a_reconnect(a, b, bus)
            # Node b's handler tells node a's actor, then answers node a: what node b
            # sends leaves in that order (over NATS, the answer could otherwise wake
            # the asker before the tells have come).
            teller = await reach(b, a, b.spawn(_Teller), "teller")
            bus.subjects.clear()
            await teller.ask((a.spawn(_Recorder), 10))
            to_a = [kind for subject in bus.subjects if (kind := subject.split(".")[2:4]) in _TO_A]
            require(
                bool(to_a) and to_a[-1] == ["r", "a"] and ["n", "a"] in to_a,
                f"node b's answer left before the tells its handler made: {to_a}",
            )

    run_virtual(main)


async def _past_the_window(a: ActorSystem, b: ActorSystem) -> None:
    """A burst of tells past the link's window (held on node b, sent as it frees),
    then an ask: handled after every one of them."""
    there = await reach(a, b, a.spawn(_Recorder), "recorder past the window")
    burst = _link.WINDOW + 2 * _outbox.TELLS_PER_MESSAGE
    for number in range(burst):
        there.tell(number)
    seen = await there.ask("seen")
    require(
        seen == list(range(burst)),
        f"an ask after {burst} tells (past the window) saw {len(seen)} of them",
    )
    await trio.sleep(HEARTBEAT)  # (acknowledged: the window is free again)


async def _across_a_reconnect(a: ActorSystem, b: ActorSystem, bus: MemoryBus) -> None:
    """Node a is between two connections for a while (NATS answers no-responders):
    what node b tells its actor meanwhile waits, is sent again, and is handled
    before what b told after it (which came first, and waited)."""
    there = await reach(a, b, a.spawn(_Recorder), "recorder across a reconnect")
    assert a.node is not None
    assert b.node is not None
    for number in range(5):
        there.tell(number)
    await b.node.flush()
    transport = Node.of(a).transport
    assert isinstance(transport, MemoryTransport)
    with bus.between_connections(transport):
        for number in range(5, 10):
            there.tell(number)
            await b.node.flush()
        await trio.sleep(HEARTBEAT)  # (shorter than its silence: still up)
    for number in range(10, 15):
        there.tell(number)
    await trio.sleep(3 * HEARTBEAT)  # (b's next confirm round sends 5..9 again)
    seen = await there.ask("seen")
    letters = [d.reason for d in b.dead_letters.recent]
    require(
        seen == list(range(15)) and not letters,
        f"across a reconnect: handled {seen}, dead letters {letters}",
    )


async def _first_message_across_a_reconnect(a: ActorSystem, b: ActorSystem, bus: MemoryBus) -> None:
    """Node a's very first tell to node b (its record's first message) while node b
    is between two connections, then two more once it is back: handled in order,
    the first sent again, no dead letter."""
    there = await reach(b, a, b.spawn(_Recorder), "recorder of a's first tells")
    assert a.node is not None
    transport = Node.of(b).transport
    assert isinstance(transport, MemoryTransport)
    with bus.between_connections(transport):
        there.tell(0)
        await a.node.flush()
        await trio.sleep(HEARTBEAT / 10)
    for number in (1, 2):
        there.tell(number)
        await a.node.flush()
    await trio.sleep(3 * HEARTBEAT)
    seen = await there.ask("seen")
    letters = [d.reason for d in a.dead_letters.recent]
    require(
        seen == [0, 1, 2] and not letters,
        f"a record's first message across a reconnect: handled {seen}, dead letters {letters}",
    )


_TO_A = (["n", "a"], ["r", "a"])  # (tokens of node a's actors' and replies' subjects)


def _diff(seen: list[Any], sent: list[Any]) -> str:
    for index, (got, expected) in enumerate(zip(seen, sent, strict=False)):
        if got != expected:
            return f"#{index}: {got!r} where {expected!r} was sent"
    return f"lengths {len(seen)} and {len(sent)}"


@contract(
    "RT4",
    "remote tell is no checkpoint, remote ask always is",
    "tell to a remote actor never is a checkpoint; ask always is, also when it fails "
    "at once (a stopped actor, a node that has left)",
)
def remote_checkpoints(policy: ServingPolicy) -> None:
    async def main(clock: trio.testing.MockClock) -> None:
        async with nodes(policy, "a", "b") as (a, b):
            echo = a.spawn(_Echo)
            there = await reach(a, b, echo, "echo")
            with trio.testing.assert_no_checkpoints():
                for number in range(10):
                    there.tell(number)
            with trio.testing.assert_checkpoints():
                await there.ask(1)
            await echo.stop()
            with trio.testing.assert_checkpoints(), suppress(ActorStopped):
                await there.ask(2)
        with trio.testing.assert_no_checkpoints():
            there.tell("after its node left")
        with trio.testing.assert_checkpoints(), suppress(ActorStopped):
            await there.ask("after its node left")

    run_virtual(main)


@contract(
    "RT5",
    "stopped or unreachable remote actor",
    "an ask to a remote actor that has stopped, or whose node is gone, raises "
    "ActorStopped; a tell becomes a dead letter -- 'stopped' on the actor's node, "
    "'unreachable' on the sender's when nothing serves the node",
)
def remote_stopped(policy: ServingPolicy) -> None:
    async def main(clock: trio.testing.MockClock) -> None:
        bus = MemoryBus()
        async with nodes(policy, "b", bus=bus) as (b,):
            async with nodes(policy, "a", bus=bus) as (a,):
                echo = a.spawn(_Echo)
                there = await reach(a, b, echo, "echo")
                await there.stop()
                there.tell("late")
                try:
                    await there.ask("late")
                except ActorStopped:
                    pass
                else:
                    raise AssertionError("an ask to a stopped remote actor was answered")
                await trio.sleep(1)
                letters = [(d.message, d.reason) for d in a.dead_letters.recent]
                require(letters == [("late", "stopped")], f"node a's dead letters: {letters}")
                other = await reach(a, b, a.spawn(_Echo), "other")
            # Node a has left: nothing serves it.
            other.tell("into the void")
            try:
                await other.ask("anyone?")
            except ActorStopped:
                pass
            else:
                raise AssertionError("an ask to a node that left was answered")
            await trio.sleep(1)
            letters = [(d.message, d.reason) for d in b.dead_letters.recent]
            require(
                letters == [("into the void", "unreachable")],
                f"node b's dead letters after a left: {letters}",
            )

    run_virtual(main)


__all__ = ["remote_ask_round_trip", "remote_checkpoints", "remote_order", "remote_stopped"]

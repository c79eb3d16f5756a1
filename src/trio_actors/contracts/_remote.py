"""Contracts RT1--RT21: what holds across nodes (remote.md's table).

Each runs two or three nodes of one cluster in one ``trio.run`` over the in-memory
bus (:class:`trio_actors.remote.MemoryBus`: subjects, per-publisher order,
no-responders, a node's connection cut as by ``kill -9``) under an autojumping
``MockClock``: deterministic, no server. The same behaviour over a real
``nats-server`` is what ``tests/remote`` checks. Registered only where the
``cluster`` extra (msgspec) is installed.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from functools import partial
from typing import Any

import trio
import trio.testing

from .. import (
    Actor,
    ActorRef,
    ActorStopped,
    ActorSystem,
    Cluster,
    NodeDown,
    RemoteError,
    ServingPolicy,
    Terminated,
    open_actor_system,
)
from ..remote import MemoryBus, Node
from ._harness import require, run_virtual
from ._registry import ContractViolation, contract

_HEARTBEAT = 0.5  # virtual seconds; a node silent for 3 beats is down


def _echo(message: Any) -> Any:
    """The reply to ``message``, or what ``("raise", kind)`` asks to raise."""
    if message == ("raise", "value"):
        raise ValueError("bad value", 3)
    if message == ("raise", "private"):
        raise _Private("secret")
    return ("echo", message)


class _Echo(Actor):
    def receive(self, message: Any) -> Any:
        return _echo(message)


class _AsyncEcho(Actor):
    async def receive(self, message: Any) -> Any:
        await trio.lowlevel.checkpoint()
        return _echo(message)


class _Recorder(Actor):
    def __init__(self) -> None:
        self.seen: list[Any] = []

    def receive(self, message: Any) -> Any:
        if message == "seen":
            return list(self.seen)
        self.seen.append(message)
        return None


class _Teller(Actor):
    """Given ``(target, count)``: tells ``target`` ``count`` times, then answers."""

    def receive(self, message: Any) -> Any:
        target, count = message
        for number in range(count):
            target.tell(("told by the handler", number))
        return "answered"


class _Gate(Actor):
    """Handles ``"wait"`` until the gate opens; records everything else."""

    def __init__(self, gate: trio.Event) -> None:
        self.gate = gate
        self.seen: list[Any] = []

    async def receive(self, message: Any) -> Any:
        if message == "wait":
            await self.gate.wait()
        elif message == "seen":
            return list(self.seen)
        else:
            self.seen.append(message)
        return None


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


class _Private(Exception):
    """Not allowed to cross: arrives as a RemoteError."""


class _SpyBus(MemoryBus):
    """Counts the messages sent to actors that await an answer: asks (and stops)."""

    def __init__(self) -> None:
        super().__init__()
        self.asks = 0
        self.subjects: list[str] = []  # (of every message, in the order routed)

    def _route(self, subject: str, payload: bytes, reply: str | None) -> None:
        if ".n." in subject and reply is not None and ".r." in reply:  # (answer awaited)
            self.asks += 1
        self.subjects.append(subject)
        super()._route(subject, payload, reply)


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


@asynccontextmanager
async def _nodes(
    policy: ServingPolicy, *names: str, bus: MemoryBus | None = None
) -> AsyncIterator[list[ActorSystem]]:
    cluster = Cluster(bus=bus or MemoryBus(), heartbeat=_HEARTBEAT)
    async with _open(policy, cluster, list(names)) as systems:
        yield systems


@asynccontextmanager
async def _open(
    policy: ServingPolicy, cluster: Cluster, names: list[str]
) -> AsyncIterator[list[ActorSystem]]:
    if not names:
        yield []
        return
    async with (
        open_actor_system(serving=policy, cluster=cluster, node=names[0]) as system,
        _open(policy, cluster, names[1:]) as others,
    ):
        yield [system, *others]


async def _reach(owner: ActorSystem, user: ActorSystem, ref: ActorRef, name: str) -> ActorRef:
    """``ref`` (of ``owner``) as ``user`` reaches it: registered, then looked up."""
    owner.register(name, ref)
    assert owner.node is not None
    await owner.node.flush()
    return await user.lookup(name)


@contract(
    "RT1",
    "ask round trip across nodes",
    "a remote ask returns the handler's value as it was (tuples stay tuples), for "
    "plain and async handlers; an allowed exception (builtin, the package's) reaches "
    "the asker with its type and arguments, any other as a RemoteError naming it",
)
def remote_ask_round_trip(policy: ServingPolicy) -> None:
    async def main(clock: trio.testing.MockClock) -> None:
        async with _nodes(policy, "a", "b") as (a, b):
            for factory in (_Echo, _AsyncEcho):
                kind = factory.__name__
                there = await _reach(a, b, a.spawn(factory), kind)
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
    "were sent, also a tell sent while an ask before it waits for its answer; an ask's "
    "answer leaves after the tells its handler made before answering",
)
def remote_order(policy: ServingPolicy) -> None:
    async def main(clock: trio.testing.MockClock) -> None:
        bus = _SpyBus()
        async with _nodes(policy, "a", "b", bus=bus) as (a, b), trio.open_nursery() as asks:
            there = await _reach(a, b, a.spawn(_Recorder), "recorder")
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
            # Node b's handler tells node a's actor, then answers node a: what node b
            # sends leaves in that order (over NATS, the answer could otherwise wake
            # the asker before the tells have come).
            teller = await _reach(b, a, b.spawn(_Teller), "teller")
            bus.subjects.clear()
            await teller.ask((a.spawn(_Recorder), 10))
            to_a = [kind for subject in bus.subjects if (kind := subject.split(".")[2:4]) in _TO_A]
            require(
                bool(to_a) and to_a[-1] == ["r", "a"] and ["n", "a"] in to_a,
                f"node b's answer left before the tells its handler made: {to_a}",
            )

    run_virtual(main)


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
        async with _nodes(policy, "a", "b") as (a, b):
            echo = a.spawn(_Echo)
            there = await _reach(a, b, echo, "echo")
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
        async with _nodes(policy, "b", bus=bus) as (b,):
            async with _nodes(policy, "a", bus=bus) as (a,):
                echo = a.spawn(_Echo)
                there = await _reach(a, b, echo, "echo")
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
                other = await _reach(a, b, a.spawn(_Echo), "other")
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


@contract(
    "RT6",
    "a cancelled remote ask is withdrawn",
    "an ask cancelled while still queued on the other node is withdrawn there: the "
    "actor never handles it",
)
def remote_cancel_withdraws(policy: ServingPolicy) -> None:
    async def main(clock: trio.testing.MockClock) -> None:
        async with _nodes(policy, "a", "b") as (a, b):
            gate = trio.Event()
            actor = a.spawn(_Gate, gate)
            there = await _reach(a, b, actor, "gate")
            async with trio.open_nursery() as nursery:
                nursery.start_soon(there.ask, "wait")
                await trio.sleep(1)
                with trio.move_on_after(1) as scope:
                    await there.ask("cancelled")
                require(scope.cancelled_caught, "the ask was answered past its gate")
                await trio.sleep(1)
                gate.set()
            await there.ask("after")
            seen = await actor.ask("seen")
            require(seen == ["after"], f"the actor handled {seen} (the cancelled ask too?)")
            withdrawn = actor.statistics().withdrawn
            require(withdrawn == 1, f"{withdrawn} asks withdrawn, not 1")

    run_virtual(main)


class _Cancellable(Actor):
    """``"wait"`` waits forever in an async handler; counts the cancellations."""

    def __init__(self) -> None:
        self.cancelled = 0

    async def receive(self, message: Any) -> Any:
        if message == "wait":
            try:
                await trio.sleep_forever()
            except trio.Cancelled:
                self.cancelled += 1
                raise
        return self.cancelled if message == "cancelled" else message


@contract(
    "RT7",
    "a remote ask cancelled while handled",
    "an ask cancelled while its async handler runs on the other node cancels that "
    "handler there, and the actor goes on with its next message",
)
def remote_cancel_running(policy: ServingPolicy) -> None:
    async def main(clock: trio.testing.MockClock) -> None:
        async with _nodes(policy, "a", "b") as (a, b):
            there = await _reach(a, b, a.spawn(_Cancellable), "cancellable")
            with trio.move_on_after(1) as scope:
                await there.ask("wait")
            require(scope.cancelled_caught, "the ask of a handler that never ends returned")
            with trio.move_on_after(30):
                cancelled = await there.ask("cancelled")
                require(cancelled == 1, f"the handler there was cancelled {cancelled} times, not 1")
                return
            raise AssertionError("the actor never answered the next ask: its handler runs on")

    run_virtual(main)


async def _asks_outcomes(asks: list[Any]) -> list[str]:
    """Await each of ``asks`` (in tasks), within 60 virtual seconds: how each ended."""
    outcomes: list[str] = ["hung"] * len(asks)

    async def one(index: int) -> None:
        try:
            outcomes[index] = repr(await asks[index])
        except Exception as error:
            outcomes[index] = type(error).__name__

    with trio.move_on_after(60):
        async with trio.open_nursery() as nursery:
            for index in range(len(asks)):
                nursery.start_soon(one, index)
                await trio.sleep(0.1)  # (in this order)
    return outcomes


@contract(
    "RT9",
    "stranded remote asks failed back; drain across nodes",
    "stop() from another node fails back the asks still queued there (ActorStopped at "
    "each asker, none hangs); stop(drain=True) handles the queued tells and asks first",
)
def remote_stranded_and_drained(policy: ServingPolicy) -> None:
    async def main(clock: trio.testing.MockClock) -> None:
        async with _nodes(policy, "a", "b") as (a, b):
            for drain in (False, True):
                gate = trio.Event()
                actor = a.spawn(_Gate, gate)
                there = await _reach(a, b, actor, f"gate-{drain}")
                there.tell("told")
                asks = [there.ask("wait"), there.ask(1), there.ask(2)]

                async def stop_then_open(
                    there: ActorRef = there, gate: trio.Event = gate, drain: bool = drain
                ) -> None:
                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(partial(there.stop, drain=drain))
                        await trio.sleep(1)
                        gate.set()

                outcomes = await _asks_outcomes([*asks, stop_then_open()])
                if drain:
                    expected = ["None", "None", "None", "None"]
                    seen = await actor.wait_stopped()
                    require(seen.error is None, f"the drained actor stopped with {seen.error!r}")
                else:
                    expected = ["ActorStopped", "ActorStopped", "ActorStopped", "None"]
                require(
                    outcomes == expected,
                    f"stop(drain={drain}) from another node: the asks ended {outcomes[:3]}, "
                    f"the stop {outcomes[3]} (expected {expected})",
                )

    run_virtual(main)


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
        async with _nodes(policy, "b", bus=bus) as (b,), _nodes(policy, "a", bus=bus) as (a,):
            watcher = b.spawn(_Watcher)
            stopping = await _reach(a, b, a.spawn(_Echo), "stopping")
            await watcher.ask(("watch", stopping))
            await stopping.stop()
            await trio.sleep(1)
            notices = await watcher.ask("notices")
            require(
                [(n.ref, n.error) for n in notices] == [(stopping, None)],
                f"after a remote stop the watcher got {notices}",
            )
            gate = trio.Event()
            dying = await _reach(a, b, a.spawn(_Gate, gate), "dying")
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
    "with a node dying mid-stream: every remote ask ends (a value, an exception or "
    "NodeDown; none hangs); every tell is handled, a dead letter, or counted in the "
    "sender's node.unconfirmed -- and only one its dead receiver may have lost is",
)
def remote_nothing_lost(policy: ServingPolicy) -> None:
    async def main(clock: trio.testing.MockClock) -> None:
        bus = _CuttingBus()
        async with _nodes(policy, "a", "b", "c", bus=bus) as (a, b, c):
            recorders = {"b": b.spawn(_Recorder), "c": c.spawn(_Recorder)}
            refs = {
                "b": await _reach(b, a, recorders["b"], "keeper-b"),
                "c": await _reach(c, a, recorders["c"], "keeper-c"),
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

            stuck = await _reach(c, a, c.spawn(_Gate, trio.Event()), "stuck")
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

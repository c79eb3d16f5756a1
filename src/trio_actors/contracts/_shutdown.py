"""Contracts T25 and T29: the exit never deadlocks; children stop as OTP stops them.

T29 checks the order: the system exit, a parent's stop and a restart stop children
newest first, one at a time, each whole (its ``on_stop`` has run) before the next
older sibling begins, while the siblings not yet reached keep serving -- observed
by having each ``on_stop`` ask its next older sibling, whose answer must come back.
The order must be the same on every run under ``MockClock``.

T25 runs programs in which actors ask each other while the system block is left:
busy async handlers, handlers that ask from inside ``CancelScope(shield=True)``,
``on_stop`` hooks that ask, parents and children, in many spawn orders. Each
program runs in a thread of its own (:func:`run_virtual_or_hang`), because a
deadlocked exit waits in shielded scopes that no cancellation can end: a watchdog
at a virtual deadline reports it instead.
"""

from __future__ import annotations

import math
import random
import threading
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import attrs
import outcome
import trio
import trio.testing

from .. import Actor, ActorStopped, Restart, ServingPolicy
from ._harness import captured_failures, count_tasks, require, run_virtual, settle, system_for
from ._registry import ContractViolation, contract

T = TypeVar("T")

EXIT_WITHIN = 600.0
"""Virtual seconds the exit of a T25 program may take (its handlers cost < 10 s)."""


def run_virtual_or_hang(
    main: Callable[[trio.testing.MockClock], Awaitable[T]], *, within: float
) -> T:
    """Run ``main`` under an autojumping ``MockClock`` in a thread of its own.

    If ``main`` is still running after ``within`` virtual seconds -- a deadlock,
    since virtual time only jumps when every task is blocked -- raise
    :class:`ContractViolation` and leave the stuck run behind in its (daemon)
    thread: a deadlock in shielded scopes cannot be cancelled. Deterministic: the
    verdict depends on virtual time only.
    """
    finished = threading.Event()
    hung: list[bool] = []
    result: list[outcome.Outcome[T]] = []

    async def watched(clock: trio.testing.MockClock) -> T:
        async def watchdog() -> None:
            await trio.sleep(within)
            hung.append(True)
            # Time stops for the stuck run: a task of it that still sleeps now and
            # then would otherwise make the clock jump for ever, a thread spinning
            # beside every test after this one (they ran ten times slower).
            clock.autojump_threshold = math.inf
            finished.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(watchdog)
            value = await main(clock)
            nursery.cancel_scope.cancel()
        return value

    def thread() -> None:
        try:
            result.append(outcome.capture(run_virtual, watched))
        finally:
            finished.set()

    threading.Thread(target=thread, name="trio-actors contract", daemon=True).start()
    finished.wait()
    if hung:
        raise ContractViolation(
            f"deadlocked: the program was still running after {within:.0f} s of virtual "
            "time (shielded waits that nothing will end)"
        )
    return result[0].unwrap()


# --- T29 ------------------------------------------------------------------------------


class _Sibling(Actor):
    """Records its ``on_stop`` and what its next older sibling answered then."""

    def __init__(self, log: list[str], older: Any = None) -> None:
        self.log = log
        self.older = older

    def receive(self, message: Any) -> Any:
        return f"{self.ref.name} serving"

    async def on_stop(self) -> None:
        if self.older is None:
            self.log.append(f"{self.ref.name} stopped")
            return
        try:
            answer = await self.older.ask("still serving?")
        except ActorStopped:
            answer = "refused"
        self.log.append(f"{self.ref.name} stopped, older said: {answer}")


class _Family(Actor):
    """Spawns three children (each knowing its older sibling) on start; fails on
    "fail" (to be restarted); records its own ``on_stop``."""

    def __init__(self, log: list[str]) -> None:
        self.log = log

    def on_start(self) -> None:
        older = None
        for name in ("c0", "c1", "c2"):
            older = self.spawn(_Sibling, self.log, older, name=name)

    def receive(self, message: Any) -> Any:
        if message == "fail":
            raise RuntimeError("fail, to be restarted")
        return None

    def on_stop(self) -> None:
        self.log.append(f"{self.ref.name} stopped")


def _expected_family(parent: str) -> list[str]:
    return [
        "c2 stopped, older said: c1 serving",
        "c1 stopped, older said: c0 serving",
        "c0 stopped",
        f"{parent} stopped",
    ]


def _t29_program(policy: ServingPolicy) -> list[list[str]]:
    """Stop a family, restart one, and leave the block with three top-level actors;
    return the three logs."""
    logs: list[list[str]] = [[], [], []]

    async def main(clock: trio.testing.MockClock) -> None:
        async with system_for(policy) as system:
            family = system.spawn(_Family, logs[0], name="stopped")
            restarted = system.spawn(
                _Family, logs[1], name="restarted", supervision=Restart(max_restarts=5)
            )
            await settle()
            await family.stop()
            restarted.tell("fail")
            await settle()
            # The exit: three top-level siblings, the oldest a family.
            system.spawn(_Family, logs[2], name="f")
            await settle()
            older = system.spawn(_Sibling, logs[2], name="t0")
            older = system.spawn(_Sibling, logs[2], older, name="t1")
            system.spawn(_Sibling, logs[2], older, name="t2")
            await settle()
            logs[1].append("-- exit --")
            await settle()

    run_virtual(main)
    return logs


@contract(
    "T29",
    "stop order as OTP",
    "the system exit, a parent's stop and a restart stop children newest first, one "
    "at a time: a sibling not yet reached keeps serving (an on_stop can ask it); the "
    "same order on every run",
)
def stop_order(policy: ServingPolicy) -> None:
    with captured_failures():  # the restart's failure is expected
        first = _t29_program(policy)
    stopped, restarted, at_exit = first
    require(
        stopped == _expected_family("stopped"),
        f"a parent's stop stopped its children as {stopped}",
    )
    require(
        restarted == [*_expected_family("restarted"), "-- exit --", *_expected_family("restarted")],
        f"a restart (then the exit) stopped the children as {restarted}",
    )
    expected_exit = [
        "t2 stopped, older said: t1 serving",
        "t1 stopped, older said: t0 serving",
        "t0 stopped",
        *_expected_family("f"),
    ]
    require(
        at_exit == expected_exit,
        f"the system exit stopped the actors as {at_exit}, expected {expected_exit}",
    )
    for attempt in range(2):
        with captured_failures():
            again = _t29_program(policy)
        require(again == first, f"run {attempt + 2} stopped in another order: {again}")


# --- T25 ------------------------------------------------------------------------------


@attrs.frozen
class Ask:
    """One ask a handler (or ``on_stop``) makes: to actor ``target`` (an index)."""

    target: int
    shielded: bool


@attrs.frozen
class ActorPlan:
    """One actor of a T25 program.

    ``parent`` is the index of an earlier actor (or -1: top level); ``busy`` the
    virtual seconds its async handler sleeps after the asks it makes on "go" (a
    quarter of that to answer a question; 0: a plain handler that answers at once);
    ``asks`` what its handler asks on "go"; ``on_stop_asks`` what its ``on_stop``
    asks.
    """

    parent: int
    busy: float
    asks: tuple[Ask, ...]
    on_stop_asks: tuple[Ask, ...]


@attrs.frozen
class ExitProgram:
    actors: tuple[ActorPlan, ...]
    go: tuple[int, ...]  # which actors are told "go", in this order
    exit_after: float = 0.1  # virtual seconds from the last "go" to leaving the block
    cancelled: bool = False  # the block is left by a cancellation from outside


def reported_program(*, cancelled: bool = False) -> ExitProgram:
    """The program from the report: a newer actor's handler asks, from a shielded
    scope, an older actor that is busy when the block exits."""
    return ExitProgram(
        cancelled=cancelled,
        actors=(
            ActorPlan(parent=-1, busy=1.0, asks=(), on_stop_asks=()),
            ActorPlan(parent=-1, busy=0.5, asks=(Ask(0, shielded=True),), on_stop_asks=()),
        ),
        go=(0, 1),
    )


def mutual_programs() -> list[ExitProgram]:
    """Two actors whose handlers ask each other from shielded scopes: deadlocked
    before the exit (the application's bug), the exit still ends it -- reaching the
    first of them fails the other's ask at once, and that one then answers. As
    siblings, and as parent and child."""
    return [
        ExitProgram(
            actors=tuple(
                ActorPlan(parent=parent, busy=0.5, asks=(Ask(1, shielded=True),), on_stop_asks=())
                if index == 0
                else ActorPlan(
                    parent=0 if parent == -2 else -1,
                    busy=0.5,
                    asks=(Ask(0, shielded=True),),
                    on_stop_asks=(),
                )
                for index in (0, 1)
            ),
            go=(0, 1),
        )
        for parent in (-1, -2)
    ]


def random_program(rng: random.Random) -> ExitProgram:
    """A program drawn from ``rng``: 2--6 actors, parents and children, any mix.

    Asks go down a random ranking of the actors (unrelated to their spawn order),
    so they never form a cycle: two actors whose handlers ask each other deadlock
    in any actor system, exiting or not, and that is the application's bug. Any
    deadlock left is the exit's.
    """
    count = rng.randint(2, 6)
    rank = list(range(count))
    rng.shuffle(rank)
    plans = []
    for index in range(count):
        parent = rng.randrange(-1, index) if index and rng.random() < 0.4 else -1
        busy = rng.choice((0.0, 0.0, 0.25, 1.0))
        lower = [i for i in range(count) if rank[i] < rank[index]]

        def asks(limit: int, lower: list[int] = lower) -> tuple[Ask, ...]:
            if not lower:
                return ()
            return tuple(
                Ask(rng.choice(lower), rng.random() < 0.6) for _ in range(rng.randint(0, limit))
            )

        plans.append(
            ActorPlan(
                parent=parent,
                busy=busy,
                asks=asks(3) if busy else (),  # a plain handler cannot await
                on_stop_asks=asks(2),
            )
        )
    go = [i for i in range(count) if rng.random() < 0.7]
    rng.shuffle(go)
    exit_after = rng.choice((0.0, 0.05, 0.1, 0.3))
    return ExitProgram(tuple(plans), tuple(go), exit_after, cancelled=rng.random() < 0.3)


class _Player(Actor):
    """An actor of a T25 program; ``outcomes`` gets one entry per ask it made."""

    def __init__(self, plan: ActorPlan, refs: list[Any], outcomes: list[str]) -> None:
        self.plan = plan
        self.refs = refs
        self.outcomes = outcomes

    def receive(self, message: Any) -> Any:
        if isinstance(message, tuple):  # ("spawn", plan, index): spawn a child
            _, plan, index = message
            factory = _AsyncPlayer if plan.busy else _Player
            self.refs[index] = self.spawn(factory, plan, self.refs, self.outcomes)
            return None
        return "answer"

    async def _ask_all(self, asks: tuple[Ask, ...]) -> None:
        """Make the asks in turn; a shielded one must end answered or stopped (an
        unshielded one may also end the handler with its own cancellation)."""
        for ask in asks:
            with trio.CancelScope(shield=ask.shielded):
                target = self.refs[ask.target]
                for _ in range(3):  # a backlog: the ask waits for the target's serving
                    target.tell("noise")
                entry = len(self.outcomes)
                self.outcomes.append("pending" if ask.shielded else "unshielded")
                try:
                    await target.ask("question")
                    self.outcomes[entry] = "answered"
                except ActorStopped:
                    self.outcomes[entry] = "stopped"

    async def on_stop(self) -> None:
        await self._ask_all(self.plan.on_stop_asks)


class _AsyncPlayer(_Player):
    async def receive(self, message: Any) -> Any:
        if message == "go":
            await self._ask_all(self.plan.asks)
            await trio.sleep(self.plan.busy)
            return None
        if message == "question":
            await trio.sleep(self.plan.busy / 4)
            return "answer"
        return super().receive(message)


def run_exit_program(policy: ServingPolicy, program: ExitProgram) -> None:
    """Run ``program``; raise :class:`ContractViolation` unless the exit completes
    in bounded virtual time, every shielded ask was answered or failed with
    ``ActorStopped``, and no task is left. A program whose block is cancelled
    from outside checks the same: the exit still serves the actors it has not
    reached."""
    outcomes: list[str] = []
    timing: list[float] = []

    async def main(clock: trio.testing.MockClock) -> None:
        before = count_tasks()
        with trio.CancelScope() as outside:
            await _play(program, outside, outcomes, timing)
        timing.append(trio.current_time())
        left = count_tasks() - before
        require(left == 0, f"{left} tasks left behind by the exit")

    async def _play(
        program: ExitProgram, outside: trio.CancelScope, outcomes: list[str], timing: list[float]
    ) -> None:
        async with system_for(policy) as system:
            refs: list[Any] = [None] * len(program.actors)
            for index, plan in enumerate(program.actors):
                factory = _AsyncPlayer if plan.busy else _Player
                if plan.parent < 0:
                    refs[index] = system.spawn(factory, plan, refs, outcomes)
                else:
                    await refs[plan.parent].ask(("spawn", plan, index))  # it spawns it
            await settle()
            for index in program.go:
                refs[index].tell("go")
            await trio.sleep(program.exit_after)  # handlers are mid-way at the exit
            timing.append(trio.current_time())
            if program.cancelled:
                outside.cancel()
                await trio.lowlevel.checkpoint()  # raises Cancelled: the block is left

    run_virtual_or_hang(main, within=EXIT_WITHIN)
    took = timing[1] - timing[0]
    require(took <= EXIT_WITHIN, f"the exit took {took:.1f} s of virtual time")
    pending = outcomes.count("pending")
    require(not pending, f"{pending} shielded asks between stopping actors never ended")


T25_PROGRAMS = 40
"""Seeded programs the registered contract runs (besides the reported one)."""


@contract(
    "T25",
    "exit never deadlocks",
    "leaving the system block while actors ask each other (from shielded scopes too, "
    "in any spawn order, parents and children, two of them each other) completes in "
    "bounded trio time; every ask is answered or fails with ActorStopped; no task is "
    "left",
)
def exit_never_deadlocks(policy: ServingPolicy) -> None:
    run_exit_program(policy, reported_program())
    run_exit_program(policy, reported_program(cancelled=True))
    for program in mutual_programs():
        run_exit_program(policy, program)
    rng = random.Random(25)
    for number in range(T25_PROGRAMS):
        program = random_program(rng)
        try:
            run_exit_program(policy, program)
        except ContractViolation as violation:
            raise ContractViolation(f"program {number}: {violation} -- {program}") from None


__all__ = [
    "ActorPlan",
    "Ask",
    "ExitProgram",
    "random_program",
    "reported_program",
    "run_exit_program",
    "run_virtual_or_hang",
]

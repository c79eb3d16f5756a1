"""The benchmark shapes S1-S5 of ``performance.md`` and their floors.

(S6 and S7 are in :mod:`benchmarks.fairness`, S8 in :mod:`benchmarks.heavy_tail`,
S9 in :mod:`benchmarks.vs_pykka`; they reuse the handlers and F1 defined here.)

Every timed function has pyperf's time-function signature ``f(loops, size) ->
seconds``: it returns the total wall time of ``loops`` repetitions of the shape's
timed region, read with :func:`time.perf_counter`. :mod:`benchmarks.run` registers
them with ``inner_loops`` set to the messages of one repetition (the actors, for
S5), so each pyperf value is seconds per message (per actor). Setup -- opening the
system, spawning, building handler objects -- happens before the clock starts,
unless it is the shape itself (S5). Every function that needs trio does all its
loops inside one ``trio.run`` of its own.

The runtime side of each shape is written once, over a tiny :class:`System`
protocol (``spawn`` returning something with ``tell`` / ``ask``), so that
:mod:`benchmarks.alternatives` measures the task-per-actor prototype with exactly
the same code; the runtime is always opened with the default
:class:`~trio_actors.ServingPolicy` (batch 64, cleanup batch 32, slice 16 ms).

The floors are the least that the same work can cost in Python; the handler
classes are shared between a shape and its floor.

S1 -- hot tell
    One actor, ``size`` (1,000,000) tells of ``1`` to a plain counting handler
    (:class:`Counter`), then one ask, which returns once every tell is handled.
    **F1** -- the least a batch-64 runtime can do per message: a method call that
    appends to a deque (the tell), then the pop and the handler call, with one
    ``trio.lowlevel.checkpoint()`` per 64 messages, inside ``trio.run``. The turn
    takes ``min(64, len(queue))`` messages -- a runtime may snapshot the mailbox
    length at the start of a turn, so no per-message emptiness test or counter is
    charged to the floor. **F0** -- the handler called ``size`` times in a bare
    loop: the cost of the useful work alone.
S2 -- ask round trip
    One task asks one actor with a plain echo handler (:class:`Echo`) ``size``
    (20,000) times, one ask at a time. **Floor** -- two trio tasks handing a value
    back and forth with ``trio.lowlevel.reschedule`` and
    ``wait_task_rescheduled``: the two hops every round trip between two tasks
    costs.
S3 -- actor ping-pong
    Two actors (:class:`Pinger`) tell each other a counter: a tell of ``size``
    (1,000,000) starts it, each handler tells its peer ``n - 1`` until ``n`` is 0,
    which sets a :class:`trio.Event` the timing task waits on. **Floor** -- the same
    two handler objects whose peers are :class:`FloorRef`\\ s: a tell appends
    ``(receive, message)`` to one deque, and a plain loop pops and calls until the
    deque is empty (inside ``trio.run`` only so the event can be set; it never
    yields).
S4 -- fan-out
    ``size`` (10,000) actors (:class:`Member`); :data:`S4_ROUNDS` (20) rounds, each
    telling every actor one message and waiting on a shared :class:`Countdown`
    whose event the last handler sets. Each actor gets exactly one message per
    activation -- the hard case for a runtime. **Floor** -- the same number of
    handler objects: per round, queue ``(receive, 1)`` for all of them, then pop
    and call in a plain loop; the pairs are kept in two parallel deques, because
    10,000 live tuples wake the cyclic GC and would make the floor about twice as
    slow (:func:`s4_floor_tuples`, report only, shows it).
S5 -- idle actors
    Spawn ``size`` (50,000) idle actors (:class:`Idle`: plain ``receive``, no
    hooks), then leave the system block. Two timings, no floor:
    :func:`s5_spawn_runtime` times the spawns until every task they started has run
    and parked (``wait_all_tasks_blocked``: nothing for trio-actors, one task per
    actor for the prototype of :mod:`benchmarks.alternatives`);
    :func:`s5_stop_runtime` times leaving the block (every actor stopped at system
    exit). RSS per idle actor is not a time; :mod:`benchmarks.memory` measures it.
"""

from __future__ import annotations

import time
from collections import deque
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager
from typing import Any, Protocol

import outcome
import trio
import trio.testing

import trio_actors as ta
from trio_actors.sweeps._shapes import Counter, Echo, s1, s2

BATCH = ta.DEFAULT_BATCH
"""Messages per turn of the runtime, and per checkpoint in F1."""

POLICY = ta.ServingPolicy()
"""The policy every runtime shape is served with: the defaults."""

S1_TELLS = 1_000_000
S2_ASKS = 20_000
S3_MESSAGES = 1_000_000
S4_ACTORS = 10_000
S4_ROUNDS = 20
S5_ACTORS = 50_000

TimeFunc = Callable[[int, int], float]
"""pyperf's time function: ``(loops, size) -> total seconds``."""


# --- what the runtime side needs of an actor system --------------------------------


class Ref(Protocol):
    """The part of :class:`~trio_actors.ActorRef` the shapes use."""

    def tell(self, message: Any) -> None: ...

    def ask(self, message: Any) -> Awaitable[Any]: ...


class System(Protocol):
    """The part of :class:`~trio_actors.ActorSystem` the shapes use."""

    def spawn(self, actor_factory: Callable[..., ta.Actor], /, *args: Any) -> Ref: ...


OpenSystem = Callable[[], AbstractAsyncContextManager[System]]
"""Opens an actor system whose block owns its actors (``open_actor_system``)."""


def open_runtime() -> AbstractAsyncContextManager[System]:
    """The system under test: trio-actors with the default policy."""
    return ta.open_actor_system(serving=POLICY)


# --- handlers, shared by each shape and its floor ----------------------------------


class Teller(Protocol):
    def tell(self, message: Any) -> None: ...


class Pinger(ta.Actor):
    """S3: tells its peer ``n - 1`` until ``n`` is 0, then sets ``done``."""

    def __init__(self) -> None:
        self.peer: Teller | None = None
        self.done = trio.Event()

    def receive(self, message: int) -> None:
        if message:
            self.peer.tell(message - 1)  # type: ignore[union-attr]
        else:
            self.done.set()


class Countdown:
    """S4: messages still to be handled this round; ``done`` is set at zero."""

    __slots__ = ("done", "remaining")

    def __init__(self) -> None:
        self.remaining = 0
        self.done = trio.Event()

    def reset(self, remaining: int) -> None:
        self.remaining = remaining
        self.done = trio.Event()


class Member(ta.Actor):
    """S4: adds the message to a total and counts the shared countdown down."""

    def __init__(self, countdown: Countdown) -> None:
        self.countdown = countdown
        self.total = 0

    def receive(self, message: int) -> None:
        self.total += message
        countdown = self.countdown
        countdown.remaining -= 1
        if not countdown.remaining:
            countdown.done.set()


class Idle(ta.Actor):
    """S5: never gets a message; a plain ``receive`` and no hooks."""

    def receive(self, message: Any) -> Any:
        return message


# --- S1: hot tell -------------------------------------------------------------------


def s1_runtime(loops: int, size: int) -> float:
    """S1 on trio-actors."""
    return s1(open_runtime, loops, size)


class FloorMailbox:
    """F1's tell: one method call that appends to a deque."""

    __slots__ = ("queue",)

    def __init__(self) -> None:
        self.queue: deque[Any] = deque()

    def tell(self, message: Any) -> None:
        self.queue.append(message)


def f1_floor(loops: int, size: int) -> float:
    """F1: tell, pop, handler call; one checkpoint per batch of 64, in trio."""

    async def main() -> float:
        mailbox = FloorMailbox()
        queue = mailbox.queue
        popleft = queue.popleft
        receive = Counter().receive
        checkpoint = trio.lowlevel.checkpoint
        start = time.perf_counter()
        for _ in range(loops):
            for _ in range(size):
                mailbox.tell(1)
            while queue:
                for _ in range(min(BATCH, len(queue))):
                    receive(popleft())
                await checkpoint()
        return time.perf_counter() - start

    return trio.run(main)


def f0_bare(loops: int, size: int) -> float:
    """F0: the S1 handler called ``size`` times in a bare loop (no trio)."""
    receive = Counter().receive
    start = time.perf_counter()
    for _ in range(loops):
        for _ in range(size):
            receive(1)
    return time.perf_counter() - start


# --- S2: ask round trip -------------------------------------------------------------


def s2_runtime(loops: int, size: int) -> float:
    """S2 on trio-actors."""
    return s2(open_runtime, loops, size)


def _abort_succeeded(raise_cancel: Any) -> trio.lowlevel.Abort:
    return trio.lowlevel.Abort.SUCCEEDED


def s2_floor(loops: int, size: int) -> float:
    """S2's floor: a value handed to a server task and back with ``reschedule``."""
    reschedule = trio.lowlevel.reschedule
    wait = trio.lowlevel.wait_task_rescheduled

    async def main() -> float:
        client = trio.lowlevel.current_task()

        async def serve(
            task_status: trio.TaskStatus[trio.lowlevel.Task] = trio.TASK_STATUS_IGNORED,
        ) -> None:
            task_status.started(trio.lowlevel.current_task())
            while True:  # cancelled when the benchmark is done
                value = await wait(_abort_succeeded)
                reschedule(client, outcome.Value(value))

        async with trio.open_nursery() as nursery:
            server: trio.lowlevel.Task = await nursery.start(serve)
            start = time.perf_counter()
            for _ in range(loops):
                for i in range(size):
                    reschedule(server, outcome.Value(i))
                    await wait(_abort_succeeded)
            elapsed = time.perf_counter() - start
            nursery.cancel_scope.cancel()
        return elapsed

    return trio.run(main)


# --- S3: ping-pong ------------------------------------------------------------------


def s3(open_system: OpenSystem, loops: int, size: int) -> float:
    """S3 on any system: two actors tell each other a counter down from ``size``."""

    async def main() -> float:
        ping, pong = Pinger(), Pinger()
        async with open_system() as system:
            ping_ref = system.spawn(lambda: ping)
            pong_ref = system.spawn(lambda: pong)
            ping.peer, pong.peer = pong_ref, ping_ref
            elapsed = 0.0
            for _ in range(loops):
                done = ping.done = pong.done = trio.Event()
                start = time.perf_counter()
                ping_ref.tell(size)
                await done.wait()
                elapsed += time.perf_counter() - start
            return elapsed

    return trio.run(main)


def s3_runtime(loops: int, size: int) -> float:
    """S3 on trio-actors."""
    return s3(open_runtime, loops, size)


class FloorRef:
    """A floor's tell: append ``(receive, message)`` to the one shared deque."""

    __slots__ = ("append", "receive")

    def __init__(self, receive: Callable[[Any], Any], queue: deque[Any]) -> None:
        self.receive = receive
        self.append = queue.append

    def tell(self, message: Any) -> None:
        self.append((self.receive, message))


def s3_floor(loops: int, size: int) -> float:
    """S3's floor: the two handlers passing the counter through a deque."""

    async def main() -> float:
        queue: deque[tuple[Callable[[Any], Any], Any]] = deque()
        popleft = queue.popleft
        ping, pong = Pinger(), Pinger()
        ping_ref = FloorRef(ping.receive, queue)
        ping.peer, pong.peer = FloorRef(pong.receive, queue), ping_ref
        elapsed = 0.0
        for _ in range(loops):
            ping.done = pong.done = trio.Event()
            start = time.perf_counter()
            ping_ref.tell(size)
            while queue:
                receive, message = popleft()
                receive(message)
            elapsed += time.perf_counter() - start
        return elapsed

    return trio.run(main)


# --- S4: fan-out --------------------------------------------------------------------


def s4(open_system: OpenSystem, loops: int, size: int) -> float:
    """S4 on any system: ``size`` actors, :data:`S4_ROUNDS` rounds of one tell each."""

    async def main() -> float:
        countdown = Countdown()
        async with open_system() as system:
            refs = [system.spawn(Member, countdown) for _ in range(size)]
            countdown.reset(size)
            for ref in refs:  # one round untimed: every actor started and served
                ref.tell(0)
            await countdown.done.wait()
            start = time.perf_counter()
            for _ in range(loops):
                for _ in range(S4_ROUNDS):
                    countdown.reset(size)
                    for ref in refs:
                        ref.tell(1)
                    await countdown.done.wait()
            return time.perf_counter() - start

    return trio.run(main)


def s4_runtime(loops: int, size: int) -> float:
    """S4 on trio-actors."""
    return s4(open_runtime, loops, size)


def s4_floor(loops: int, size: int) -> float:
    """S4's floor: the same handlers called through a deque in a plain loop.

    The ``(receive, message)`` pairs are kept in two parallel deques, so that no
    tuple is allocated per message (see :func:`s4_floor_tuples` for why).
    """

    async def main() -> float:
        countdown = Countdown()
        handlers = [Member(countdown).receive for _ in range(size)]
        receivers: deque[Callable[[Any], Any]] = deque()
        messages: deque[Any] = deque()
        append_receiver, pop_receiver = receivers.append, receivers.popleft
        append_message, pop_message = messages.append, messages.popleft
        start = time.perf_counter()
        for _ in range(loops):
            for _ in range(S4_ROUNDS):
                countdown.reset(size)
                for receive in handlers:
                    append_receiver(receive)
                    append_message(1)
                while receivers:
                    pop_receiver()(pop_message())
        return time.perf_counter() - start

    return trio.run(main)


def s4_floor_tuples(loops: int, size: int) -> float:
    """S4's floor with one ``(receive, message)`` tuple per message. Not the floor.

    With 10,000 tuples alive at once, the tuples survive young collections and
    trigger the cyclic GC's older generations: measured, that roughly doubles the
    cost per message compared with :func:`s4_floor`, which would flatter S4's
    ratio. Kept as a report-only benchmark to show that effect.
    """

    async def main() -> float:
        countdown = Countdown()
        handlers = [Member(countdown).receive for _ in range(size)]
        queue: deque[tuple[Callable[[Any], Any], Any]] = deque()
        append, popleft = queue.append, queue.popleft
        start = time.perf_counter()
        for _ in range(loops):
            for _ in range(S4_ROUNDS):
                countdown.reset(size)
                for handler in handlers:
                    append((handler, 1))
                while queue:
                    receive, message = popleft()
                    receive(message)
        return time.perf_counter() - start

    return trio.run(main)


# --- S5: idle actors ----------------------------------------------------------------


def s5_spawn(open_system: OpenSystem, loops: int, size: int) -> float:
    """S5 on any system, the spawns: ``size`` idle actors, ``loops`` systems."""

    async def main() -> float:
        elapsed = 0.0
        for _ in range(loops):
            async with open_system() as system:
                spawn = system.spawn
                start = time.perf_counter()
                for _ in range(size):
                    spawn(Idle)
                # Until every task the spawns started (none here; one per actor in
                # a task-per-actor design) has run and parked.
                await trio.testing.wait_all_tasks_blocked()
                elapsed += time.perf_counter() - start
        return elapsed

    return trio.run(main)


def s5_stop(open_system: OpenSystem, loops: int, size: int) -> float:
    """S5 on any system, the exit: leaving a block that holds ``size`` idle actors."""

    async def main() -> float:
        elapsed = 0.0
        for _ in range(loops):
            async with open_system() as system:
                spawn = system.spawn
                for _ in range(size):
                    spawn(Idle)
                await trio.testing.wait_all_tasks_blocked()
                start = time.perf_counter()
            elapsed += time.perf_counter() - start
        return elapsed

    return trio.run(main)


def s5_spawn_runtime(loops: int, size: int) -> float:
    """S5 spawns on trio-actors."""
    return s5_spawn(open_runtime, loops, size)


def s5_stop_runtime(loops: int, size: int) -> float:
    """S5 stops at system exit on trio-actors."""
    return s5_stop(open_runtime, loops, size)


__all__ = [
    "BATCH",
    "POLICY",
    "S1_TELLS",
    "S2_ASKS",
    "S3_MESSAGES",
    "S4_ACTORS",
    "S4_ROUNDS",
    "S5_ACTORS",
    "Counter",
    "Countdown",
    "Echo",
    "FloorMailbox",
    "FloorRef",
    "Idle",
    "Member",
    "OpenSystem",
    "Pinger",
    "Ref",
    "System",
    "Teller",
    "TimeFunc",
    "f0_bare",
    "f1_floor",
    "open_runtime",
    "s1",
    "s1_runtime",
    "s2",
    "s2_floor",
    "s2_runtime",
    "s3",
    "s3_floor",
    "s3_runtime",
    "s4",
    "s4_floor",
    "s4_floor_tuples",
    "s4_runtime",
    "s5_spawn",
    "s5_spawn_runtime",
    "s5_stop",
    "s5_stop_runtime",
]

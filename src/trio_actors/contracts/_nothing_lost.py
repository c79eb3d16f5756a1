"""Contract T21, nothing lost: random programs over several actors, one invariant.

A *program* is drawn up front (so each example is one deterministic ``trio.run``
under a ``MockClock``) and then run: actors of both handler kinds, top-level or
children of earlier ones, each with a supervision strategy (restart, resume, stop,
and for children escalate), a group strategy for its own children (one-for-one,
one-for-all, rest-for-one) and an unbounded or a small bounded mailbox (any overflow
policy) -- some of them pools of two such actors behind one ref (round robin,
smallest mailbox, balancing), whose counts are the pool's -- virtual handler costs
and failing messages (failures, and expected errors that are replies), receive
tells, sends and asks (with and without deadlines) while asks and sends are
cancelled, actors watch and unwatch each other from their plain or async handlers,
actors are stopped, drain-stopped and stopped without waiting
(``stop_nowait``), a handler raises ``KeyboardInterrupt``, and the system block is
cancelled from outside; then the block is left (or the interrupt ends it). The
invariant checked at the end:

* every tell was handled (its handler ran), is exactly one dead letter, or was
  refused at once with ``MailboxFull`` -- exactly one of these;
* every send ended in its sender exactly once: returned (then the message was
  handled or became a dead letter, once), ``ActorStopped`` (never queued) or
  ``Cancelled`` (never queued, never handled);
* every ask ended in its asker exactly once, as one of: a reply or the handler's
  exception (handled), ``Cancelled`` (withdrawn, or abandoned while handled), or
  ``ActorStopped`` or ``MailboxFull`` (failed back); a withdrawn ask never ran,
  an answered one did, and no ask became a dead letter;
* no handler ran twice for one message, and no task is left behind;
* no watcher got more ``Terminated`` notices for an actor than it asked for, and
  none for an actor that did not stop;
* the runtime counted as withdrawn every cancelled ask or send that never ran, and
  besides them at most one notice per ``unwatch``.

T31 checks the same runs against the runtime's own statistics (:func:`conserved`).

The pytest suite draws programs with hypothesis (2,000 examples in CI); the
registered contract runs a fixed set of seeded programs so that it is quick and the
same every time it runs.
"""

from __future__ import annotations

import functools
import random
from collections import Counter
from collections.abc import Callable
from typing import Any

import attrs
import trio
import trio.lowlevel
import trio.testing

from .. import (
    Actor,
    ActorRef,
    ActorStatistics,
    ActorStopped,
    Bounded,
    Escalate,
    MailboxFull,
    OneForAll,
    Pool,
    Restart,
    RestForOne,
    Resume,
    ServingPolicy,
    Stop,
    SupervisionStrategy,
    SystemStatistics,
    Terminated,
)
from ._harness import count_tasks, require, run_virtual, system_for
from ._registry import contract


@attrs.frozen
class ActorSpec:
    """One actor of a program.

    ``cost`` is virtual seconds per message; ``strategy`` one of
    :data:`STRATEGIES`; ``parent`` the index of an earlier actor (``-1``: top
    level). Top-level actors never escalate (that would end the program early).
    ``capacity`` bounds the mailbox (0: unbounded) with ``overflow`` one of
    :data:`OVERFLOWS`. ``group`` is its ``children_strategy``, one of
    :data:`GROUPS`. ``pool``, if not ``""``, makes it a :class:`~trio_actors.Pool`
    of :data:`POOL_SIZE` such probes with that routing (one of :data:`ROUTINGS`),
    each with the strategy and the mailbox above; the pool itself is supervised
    as a top-level actor or child would be.
    """

    is_async: bool
    cost: float
    strategy: str = "restart"
    parent: int = -1
    capacity: int = 0
    overflow: str = "fail"
    group: str = "one_for_one"
    pool: str = ""


STRATEGIES = ("restart", "resume", "stop", "escalate")
OVERFLOWS = ("fail", "drop_new", "drop_old")
GROUPS = ("one_for_one", "one_for_all", "rest_for_one")
ROUTINGS = ("round_robin", "smallest_mailbox", "balancing")
POOL_SIZE = 2


@attrs.frozen
class Op:
    """One step of a program.

    ``kind`` is one of ``tell``, ``send``, ``ask``, ``ask_deadline``,
    ``cancel_ask``, ``stop``, ``drain_stop``, ``stop_nowait``, ``watch``,
    ``unwatch``, ``sleep``, ``checkpoint``, ``interrupt`` (a tell whose handler
    raises ``KeyboardInterrupt``) and ``cancel_block`` (cancel the system block from
    outside); ``actor`` indexes the program's actors; ``fail`` makes the handler
    raise -- a failure, or with ``expected`` an expected error (a reply); ``value``
    is a deadline or a sleep in virtual seconds, or (for ``cancel_ask``) which
    earlier ask or send to cancel, or (for ``watch`` and ``unwatch``) which actor to
    watch or unwatch.
    """

    kind: str
    actor: int = 0
    fail: bool = False
    value: float = 0.0
    expected: bool = False


@attrs.frozen
class Program:
    actors: tuple[ActorSpec, ...]
    ops: tuple[Op, ...]


OP_KINDS = (
    "tell",
    "send",
    "ask",
    "ask_deadline",
    "cancel_ask",
    "stop",
    "drain_stop",
    "sleep",
    "checkpoint",
    "watch",
    "unwatch",
    "interrupt",
    "cancel_block",
    "stop_nowait",
)
_WEIGHTS = (30, 10, 15, 8, 8, 2, 2, 8, 8, 4, 2, 0.3, 0.3, 1)


def random_program(rng: random.Random, *, max_actors: int = 4, max_ops: int = 60) -> Program:
    """Draw a program from ``rng`` (the seeded counterpart of the hypothesis strategy)."""
    actors = []
    for index in range(rng.randint(1, max_actors)):
        parent = rng.randrange(-1, index) if index else -1
        strategies = STRATEGIES if parent >= 0 else STRATEGIES[:3]
        actors.append(
            ActorSpec(
                is_async=rng.random() < 0.5,
                cost=rng.choice((0.0, 0.0001, 0.002)),
                strategy=rng.choice(strategies),
                parent=parent,
                capacity=rng.choice((0, 0, 1, 2, 4)),
                overflow=rng.choice(OVERFLOWS),
                group=rng.choice(GROUPS),
            )
        )
    ops = []
    for _ in range(rng.randint(1, max_ops)):
        kind = rng.choices(OP_KINDS, _WEIGHTS)[0]
        value = 0.0
        if kind == "ask_deadline":
            value = rng.choice((0.0, 0.0005, 0.003, 0.05))
        elif kind == "sleep":
            value = rng.choice((0.0001, 0.001, 0.01))
        elif kind in ("cancel_ask", "watch", "unwatch"):
            value = float(rng.randint(0, 20))
        fail = rng.random() < 0.1
        expected = fail and rng.random() < 0.5
        ops.append(Op(kind, rng.randrange(len(actors)), fail, value, expected))
    # Drawn last, so that the seeded programs drawn before pools existed keep their
    # actors and steps: about one actor in five becomes a pool of probes.
    actors = [
        attrs.evolve(spec, pool=rng.choice(ROUTINGS)) if rng.random() < 0.2 else spec
        for spec in actors
    ]
    return Program(tuple(actors), tuple(ops))


def mailbox_for(spec: ActorSpec) -> Bounded | None:
    """The mailbox an :class:`ActorSpec` names (``None``: unbounded)."""
    if not spec.capacity:
        return None
    return Bounded(spec.capacity, overflow=spec.overflow)  # type: ignore[arg-type]


def strategy_for(spec: ActorSpec) -> SupervisionStrategy:
    """The supervision strategy an :class:`ActorSpec` names."""
    if spec.strategy == "restart":
        return Restart(max_restarts=1_000_000, within=1.0)
    if spec.strategy == "resume":
        return Resume()
    if spec.strategy == "stop":
        return Stop()
    if spec.parent < 0:
        return Restart(max_restarts=1_000_000, within=1.0)  # escalating at the top ends all
    return Escalate()


class _Failure(Exception):
    pass


class _Expected(Exception):
    """An expected error: the probes' reply, not their failure."""


class _Probe(Actor):
    """Records every message its handler is invoked for; costs virtual time."""

    expected_errors = (_Expected,)

    def __init__(
        self,
        clock: trio.testing.MockClock,
        cost: float,
        invoked: Counter[int],
        notices: Counter[tuple[int, Any]],
        index: int,
    ) -> None:
        self.clock = clock
        self.cost = cost
        self.invoked = invoked
        self.notices = notices
        self.index = index

    def receive(self, message: Any) -> Any:
        if type(message) is _SpawnChild:
            return self.spawn(*message.args, **message.options)
        if isinstance(message, Terminated):
            self.notices[self.index, message.ref] += 1
            return None
        if type(message) is _Watch:
            if message.watch:
                self.watch(message.target)
            else:
                self.unwatch(message.target)
            return None
        ident, fail = message
        self.invoked[ident] += 1
        if fail == "interrupt":
            raise KeyboardInterrupt(f"injected by program step {ident}")
        if self.cost:
            self.clock.jump(self.cost)
        if fail == "expected":
            raise _Expected(ident)
        if fail:
            raise _Failure(ident)
        return ident


@attrs.frozen
class _Watch:
    """Told to a probe: watch (or unwatch) ``target`` from its handler."""

    target: ActorRef
    watch: bool


@attrs.frozen
class _SpawnChild:
    """Asked of a probe during the program's setup: spawn a child, reply its ref."""

    args: tuple[Any, ...]
    options: dict[str, Any]


class _AsyncProbe(_Probe):
    async def receive(self, message: Any) -> Any:
        if isinstance(message, Terminated | _Watch | _SpawnChild):
            return super().receive(message)  # (watch and unwatch from an async handler)
        ident, fail = message
        self.invoked[ident] += 1
        if fail == "interrupt":
            raise KeyboardInterrupt(f"injected by program step {ident}")
        if self.cost:
            await trio.sleep(self.cost)
        if fail == "expected":
            raise _Expected(ident)
        if fail:
            raise _Failure(ident)
        return ident


_GROUP_STRATEGIES = {
    "one_for_all": OneForAll(max_restarts=1_000_000, within=1.0),
    "rest_for_one": RestForOne(max_restarts=1_000_000, within=1.0),
}


@functools.cache
def probe_class(is_async: bool, group: str) -> type[_Probe]:
    """The probe class for a handler kind and a group strategy (one class each)."""
    base = _AsyncProbe if is_async else _Probe
    if group == "one_for_one":
        return base
    return type(
        f"{base.__name__}_{group}", (base,), {"children_strategy": _GROUP_STRATEGIES[group]}
    )


def message_fail(op: Op) -> bool | str:
    """What the probe's handler is told to do: succeed, fail, raise an expected
    error, or raise ``KeyboardInterrupt``."""
    if op.kind == "interrupt":
        return "interrupt"
    if op.fail and op.expected:
        return "expected"
    return op.fail


@attrs.frozen
class ProgramRun:
    """What a program sent, and the runtime's own counts at its end (for T31).

    ``sent[i]``: the messages the program addressed to actor ``i`` (tells, including
    those refused with ``MailboxFull``, sends and asks); ``statistics[i]``: that
    actor's :class:`~trio_actors.ActorStatistics` once the system block has exited;
    ``system``: the system's :class:`~trio_actors.SystemStatistics` then.
    """

    sent: tuple[int, ...]
    statistics: tuple[ActorStatistics, ...]
    system: SystemStatistics
    notices: tuple[int, ...]
    """The ``Terminated`` notices each actor handled or got as dead letters."""
    unwatches: tuple[int, ...]
    """The ``unwatch`` steps told to each actor (each may withdraw one notice)."""


def run_program(program: Program, policy: ServingPolicy) -> ProgramRun:
    """Run ``program`` and check the nothing-lost invariant; see the module docstring.

    Returns what it sent and the runtime's counts at the end (see :func:`conserved`).

    Raises:
        ContractViolation: the invariant does not hold (the reason says how).
    """
    invoked: Counter[int] = Counter()
    sent: Counter[int] = Counter()
    unwatches: Counter[int] = Counter()
    final: list[Any] = []
    refs: list[Any] = []
    notices: Counter[tuple[int, Any]] = Counter()
    watches: Counter[tuple[int, Any]] = Counter()
    tells: dict[int, int] = {}  # message id -> actor index
    refused: set[int] = set()  # tells refused at once with MailboxFull
    sends: dict[int, int] = {}
    asks: dict[int, int] = {}
    outcome: dict[int, list[str]] = {}
    dead: list[Any] = []
    withdrawn_by_runtime: list[int] = []

    async def asker(
        ref: Any,
        ident: int,
        fail: bool | str,
        deadline: float | None,
        scope: trio.CancelScope,
    ) -> None:
        with scope:
            if deadline is not None:
                scope.deadline = trio.current_time() + deadline
            try:
                await ref.ask((ident, fail))
            except (_Failure, _Expected):
                outcome[ident].append("handled")
                return
            except (ActorStopped, MailboxFull):
                outcome[ident].append("failed back")
                return
            except trio.Cancelled:
                outcome[ident].append("cancelled")
                raise
            outcome[ident].append("handled")

    async def sender(ref: Any, ident: int, fail: bool | str, scope: trio.CancelScope) -> None:
        with scope:
            try:
                await ref.send((ident, fail))
            except ActorStopped:
                outcome[ident].append("failed back")
                return
            except trio.Cancelled:
                outcome[ident].append("cancelled")
                raise
            outcome[ident].append("queued")

    async def main(clock: trio.testing.MockClock) -> None:
        before = count_tasks()
        systems: list[Any] = []
        try:
            with trio.CancelScope() as block:
                await run_steps(clock, block, systems)
        except BaseException as error:
            if not _only_interrupts(error):
                raise
            # An injected KeyboardInterrupt ended the block, after every actor stopped.
        finally:
            if systems:
                system = systems[0]
                dead.append(system.dead_letters)
                final.append(([r.statistics() for r in refs], system.statistics()))
                withdrawn_by_runtime.append(sum(r.statistics().withdrawn for r in refs))
        left = count_tasks() - before
        require(left == 0, f"{left} tasks left behind")

    async def run_steps(
        clock: trio.testing.MockClock, block: trio.CancelScope, systems: list[Any]
    ) -> None:
        ident = 0
        scopes: list[trio.CancelScope] = []
        async with trio.open_nursery() as outside, system_for(policy) as system:
            systems.append(system)
            for index, spec in enumerate(program.actors):
                factory = probe_class(spec.is_async, spec.group)
                args: tuple[Any, ...] = (factory, clock, spec.cost, invoked, notices, index)
                strategy = strategy_for(spec)
                mailbox = mailbox_for(spec)
                if spec.pool:
                    # Its probes share its index: what they handle is the pool's.
                    pool = Pool(
                        factory,
                        args[1:],
                        size=POOL_SIZE,
                        routing=spec.pool,  # type: ignore[arg-type]
                        supervision=strategy,
                        mailbox=mailbox,
                    )
                    args, mailbox = (pool,), None
                if spec.parent >= 0:
                    # A child: its parent spawns it (setup, before any program step).
                    options = {"supervision": strategy, "mailbox": mailbox}
                    sent[spec.parent] += 1
                    refs.append(await refs[spec.parent].ask(_SpawnChild(args, options)))
                else:
                    if isinstance(strategy, Escalate):
                        strategy = Restart(max_restarts=1_000_000, within=1.0)
                    refs.append(system.spawn(*args, supervision=strategy, mailbox=mailbox))
            for op in program.ops:
                ref = refs[op.actor]
                if op.kind in ("tell", "send", "ask", "ask_deadline", "interrupt"):
                    sent[op.actor] += 1
                if op.kind in ("tell", "interrupt"):
                    ident += 1
                    tells[ident] = op.actor
                    try:
                        ref.tell((ident, message_fail(op)))
                    except MailboxFull:
                        refused.add(ident)
                elif op.kind == "send":
                    ident += 1
                    sends[ident] = op.actor
                    outcome[ident] = []
                    scope = trio.CancelScope()
                    scopes.append(scope)
                    outside.start_soon(sender, ref, ident, message_fail(op), scope)
                elif op.kind in ("ask", "ask_deadline"):
                    ident += 1
                    asks[ident] = op.actor
                    outcome[ident] = []
                    scope = trio.CancelScope()
                    scopes.append(scope)
                    deadline = op.value if op.kind == "ask_deadline" else None
                    outside.start_soon(asker, ref, ident, message_fail(op), deadline, scope)
                elif op.kind == "cancel_ask":
                    if scopes:
                        scopes[int(op.value) % len(scopes)].cancel()
                elif op.kind == "stop":
                    outside.start_soon(ref.stop)
                elif op.kind == "drain_stop":
                    outside.start_soon(functools.partial(ref.stop, drain=True))
                elif op.kind == "stop_nowait":
                    ref.stop_nowait()
                elif op.kind in ("watch", "unwatch"):
                    target = refs[int(op.value) % len(refs)]
                    if target != ref:
                        sent[op.actor] += 1
                        watch = op.kind == "watch"
                        try:
                            ref.tell(_Watch(target, watch))  # from the probe's handler
                        except MailboxFull:
                            continue
                        if watch:
                            watches[op.actor, target] += 1
                        else:
                            unwatches[op.actor] += 1
                elif op.kind == "cancel_block":
                    block.cancel()
                elif op.kind == "sleep":
                    await trio.sleep(op.value)
                else:
                    await trio.lowlevel.checkpoint()

    run_virtual(main)

    letters = [d.message[0] for d in dead[0].recent if isinstance(d.message, tuple)]
    others = [d for d in dead[0].recent if not isinstance(d.message, tuple)]
    require(
        dead[0].count == len(letters) + len(others),
        "more dead letters than the log kept (test too big)",
    )
    lettered = Counter(letters)
    for ident in tells:
        fates = invoked[ident] + lettered[ident] + (ident in refused)
        require(
            fates == 1,
            f"tell {ident}: handled {invoked[ident]} times, dead-lettered "
            f"{lettered[ident]} times, refused {int(ident in refused)} times (must be "
            "exactly one in all)",
        )
    cancelled_never_ran = 0
    for ident in sends:
        ends = outcome[ident]
        require(len(ends) == 1, f"send {ident} ended {len(ends)} times: {ends}")
        fates = invoked[ident] + lettered[ident]
        if ends[0] == "queued":
            require(
                fates == 1,
                f"send {ident} returned, then was handled {invoked[ident]} times and "
                f"dead-lettered {lettered[ident]} times (must be exactly one in all)",
            )
        else:
            require(fates == 0, f"send {ident} ended {ends[0]} but its message went on")
            cancelled_never_ran += ends[0] == "cancelled"
    for ident in asks:
        ends = outcome[ident]
        require(len(ends) == 1, f"ask {ident} ended {len(ends)} times: {ends}")
        require(lettered[ident] == 0, f"ask {ident} became a dead letter")
        require(invoked[ident] <= 1, f"ask {ident} was handled {invoked[ident]} times")
        end = ends[0]
        if end == "handled":
            require(invoked[ident] == 1, f"ask {ident} was answered but never handled")
        elif end == "cancelled" and invoked[ident] == 0:
            cancelled_never_ran += 1
    for (watcher, target), count in notices.items():
        require(
            count <= watches[watcher, target],
            f"actor {watcher} got {count} Terminated for {target} after "
            f"{watches[watcher, target]} watch requests",
        )
    unwatched = sum(unwatches.values())
    require(
        cancelled_never_ran <= withdrawn_by_runtime[0] <= cancelled_never_ran + unwatched,
        f"the runtime counted {withdrawn_by_runtime[0]} withdrawn; {cancelled_never_ran} "
        f"cancelled asks and sends never ran, and {unwatched} unwatch steps may each "
        "have withdrawn a notice",
    )
    statistics, system_statistics = final[0]
    notices_of: Counter[int] = Counter()
    for (watcher, _target), count in notices.items():
        notices_of[watcher] += count
    paths = {ref.path: index for index, ref in enumerate(refs)}
    for letter in others:
        if isinstance(letter.message, Terminated):
            # (to a pool's worker: the pool's)
            path = letter.recipient.path
            index = paths.get(path, paths.get(path.rpartition("/")[0]))
            if index is None:
                require(False, f"a notice to {path}, which no step addressed")
            else:
                notices_of[index] += 1
    actors = range(len(program.actors))
    return ProgramRun(
        tuple(sent[index] for index in actors),
        tuple(statistics),
        system_statistics,
        tuple(notices_of[index] for index in actors),
        tuple(unwatches[index] for index in actors),
    )


def _only_interrupts(error: BaseException) -> bool:
    """Whether ``error`` is a ``KeyboardInterrupt``, or a group of nothing else."""
    if isinstance(error, KeyboardInterrupt):
        return True
    if isinstance(error, BaseExceptionGroup):
        _matched, rest = error.split(KeyboardInterrupt)
        return rest is None
    return False


def conserved(run: ProgramRun) -> None:
    """T31's law on a finished run: for every actor, what it was sent -- by the
    program, and the death-watch notices of the runtime -- equals what the runtime's
    statistics account for: handled, withdrawn, failed back, dead letters, and still
    queued (nothing, once the block has exited); and the system's dead-letter counts
    are the sums of its actors'. (An ``unwatch`` may withdraw a notice not yet
    handled, which is then counted as withdrawn: each allows one more.)

    Raises:
        ContractViolation: the law does not hold (the reason names the actor and
            every count).
    """
    for index, stats in enumerate(run.statistics):
        letters = stats.dead_letters.total
        accounted = (
            stats.handled + stats.withdrawn + stats.failed_back + letters + stats.mailbox_depth
        )
        # What the program sent, and the notices the runtime sent that were handled
        # or dead-lettered; a notice withdrawn by an unwatch is counted as withdrawn
        # and is known only to be one of at most as many as there were unwatches.
        sent = run.sent[index] + run.notices[index]
        require(
            sent <= accounted <= sent + run.unwatches[index],
            f"actor {index} ({stats.path}) was sent {run.sent[index]} messages and "
            f"{run.notices[index]} notices it handled or got as dead letters (and "
            f"{run.unwatches[index]} unwatch steps); its statistics account for "
            f"{accounted}: handled {stats.handled}, withdrawn {stats.withdrawn}, failed "
            f"back {stats.failed_back}, dead letters {letters}, queued {stats.mailbox_depth}",
        )
    for reason in ("stopped", "stranded", "overflow"):
        actors = sum(getattr(stats.dead_letters, reason) for stats in run.statistics)
        system = getattr(run.system.dead_letters, reason)
        require(
            actors == system,
            f"dead letters '{reason}': the actors count {actors}, the system {system}",
        )


SEEDED_PROGRAMS = 150
"""How many seeded programs the registered contract runs."""


@contract(
    "T21",
    "nothing lost",
    "any interleaving of tell, ask, cancel, stop, drain-stop and handler failure "
    "across several actors ends with every message exactly one of handled / "
    "withdrawn / failed back / dead letter, and no task left behind",
)
def nothing_lost(policy: ServingPolicy) -> None:
    _seeded(range(SEEDED_PROGRAMS), policy, lambda run: None)


def _seeded(seeds: range, policy: ServingPolicy, check: Callable[[ProgramRun], None]) -> None:
    """Run the seeded programs (T21's invariant on each), then ``check`` each run."""
    for seed in seeds:
        program = random_program(random.Random(seed))
        try:
            check(run_program(program, policy))
        except AssertionError as violation:
            require(False, f"seed {seed}: {violation}")


@contract(
    "T31",
    "conservation",
    "for any program, per actor, what was sent equals handled + withdrawn + failed "
    "back + dead letters (+ still queued) in the runtime's own statistics, and the "
    "system's dead-letter counts are the sums of its actors'",
)
def conservation(policy: ServingPolicy) -> None:
    _seeded(range(10_000, 10_000 + CONSERVATION_PROGRAMS), policy, conserved)


CONSERVATION_PROGRAMS = 60
"""How many seeded programs T31 runs (others than T21's)."""


__all__ = [
    "CONSERVATION_PROGRAMS",
    "OP_KINDS",
    "OVERFLOWS",
    "POOL_SIZE",
    "ROUTINGS",
    "STRATEGIES",
    "ActorSpec",
    "Op",
    "Program",
    "ProgramRun",
    "conserved",
    "random_program",
    "run_program",
    "mailbox_for",
    "strategy_for",
]

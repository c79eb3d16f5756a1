"""T21's run: a program interpreted as one ``trio.run`` under a ``MockClock``.

:func:`run_program` opens one system, spawns the program's actors (:func:`_spawn`:
top-level ones by the system, children by their parent's handler, all before the
first step) and runs the steps in order from a task outside the actors. The
interpreter is one ``match`` on the step's kind (:func:`_step`), each kind's handling
a small function below it. Asks and sends wait in tasks of their own
(:func:`_ask_task`, :func:`_send_task`), each in a cancel scope that a later
``cancel_ask`` step may cancel; the whole block runs in a scope that
``cancel_block`` cancels. Everything is written to a
:class:`~._invariants.Ledger`; after the block has exited (or an injected
``KeyboardInterrupt`` has ended it) no task may be left, and the ledger is checked
(:func:`~._invariants.check_nothing_lost`).
"""

from __future__ import annotations

import functools
from typing import Any

import attrs
import trio
import trio.lowlevel
import trio.testing

from ... import (
    ActorRef,
    ActorStopped,
    ActorSystem,
    Escalate,
    MailboxFull,
    Pool,
    Restart,
    ServingPolicy,
)
from .._harness import count_tasks, require, run_virtual, system_for
from ._invariants import Ledger, ProgramRun, RunEnd, check_nothing_lost
from ._probes import _Expected, _Failure, _SpawnChild, _Watch, probe_class
from ._program import POOL_SIZE, ActorSpec, Op, Program, mailbox_for, message_fail, strategy_for


def run_program(program: Program, policy: ServingPolicy) -> ProgramRun:
    """Run ``program`` and check the nothing-lost invariant; see the package docstring.

    Returns what it sent and the runtime's counts at the end (see
    :func:`~._invariants.conserved`).

    Raises:
        ContractViolation: the invariant does not hold (the reason says how).
    """
    ledger = Ledger()
    run_virtual(functools.partial(_main, program, policy, ledger))
    return check_nothing_lost(program, ledger)


async def _main(
    program: Program, policy: ServingPolicy, ledger: Ledger, clock: trio.testing.MockClock
) -> None:
    """Run the program in the block's cancel scope; record the runtime's view as the
    block exits, even when an injected ``KeyboardInterrupt`` ends it; then check that
    no task is left behind."""
    before = count_tasks()
    opened: list[ActorSystem] = []
    try:
        with trio.CancelScope() as block:
            await _run_steps(program, policy, ledger, clock, block, opened)
    except BaseException as error:
        if not _only_interrupts(error):
            raise
        # An injected KeyboardInterrupt ended the block, after every actor stopped.
    finally:
        if opened:
            ledger.end = _end_of(opened[0], ledger.refs)
    left = count_tasks() - before
    require(left == 0, f"{left} tasks left behind")


def _end_of(system: ActorSystem, refs: list[ActorRef]) -> RunEnd:
    """The runtime's own view of a run whose system block has exited."""
    statistics = [ref.statistics() for ref in refs]
    return RunEnd(
        system.dead_letters,
        statistics,
        system.statistics(),
        sum(stats.withdrawn for stats in statistics),
    )


def _only_interrupts(error: BaseException) -> bool:
    """Whether ``error`` is a ``KeyboardInterrupt``, or a group of nothing else."""
    if isinstance(error, KeyboardInterrupt):
        return True
    if isinstance(error, BaseExceptionGroup):
        _matched, rest = error.split(KeyboardInterrupt)
        return rest is None
    return False


@attrs.define(eq=False)
class _Interpreter:
    """What the steps of one run share while it runs."""

    ledger: Ledger
    clock: trio.testing.MockClock
    block: trio.CancelScope
    """The system block's scope (``cancel_block`` cancels it)."""
    outside: trio.Nursery
    """Where the waiting asks, sends and stops run: outside the system."""
    scopes: list[trio.CancelScope] = attrs.Factory(list)
    """The scope of every ask and send so far, in step order (for ``cancel_ask``)."""
    ident: int = 0
    """The last message id given out."""

    def next_ident(self) -> int:
        """A new message id (tells, sends and asks share one sequence)."""
        self.ident += 1
        return self.ident


async def _run_steps(
    program: Program,
    policy: ServingPolicy,
    ledger: Ledger,
    clock: trio.testing.MockClock,
    block: trio.CancelScope,
    opened: list[ActorSystem],
) -> None:
    """Open the system, spawn the program's actors, then run its steps in order."""
    async with trio.open_nursery() as outside, system_for(policy) as system:
        opened.append(system)
        run = _Interpreter(ledger, clock, block, outside)
        for index, spec in enumerate(program.actors):
            ledger.refs.append(await _spawn(run, system, index, spec))
        for op in program.ops:
            await _step(run, op)


async def _spawn(run: _Interpreter, system: ActorSystem, index: int, spec: ActorSpec) -> ActorRef:
    """Spawn the program's actor ``index`` as ``spec`` says: a probe or a pool of
    them, at the top level (where ``escalate`` becomes ``restart``) or as a child its
    parent spawns from its handler."""
    ledger = run.ledger
    factory = probe_class(spec.is_async, spec.group)
    args: tuple[Any, ...] = (factory, run.clock, spec.cost, ledger.invoked, ledger.notices, index)
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
        ledger.sent[spec.parent] += 1
        child: ActorRef = await ledger.refs[spec.parent].ask(_SpawnChild(args, options))
        return child
    if isinstance(strategy, Escalate):
        strategy = Restart(max_restarts=1_000_000, within=1.0)
    return system.spawn(*args, supervision=strategy, mailbox=mailbox)


async def _step(run: _Interpreter, op: Op) -> None:
    """Run one step of the program (the kinds are listed on :class:`~._program.Op`)."""
    ref = run.ledger.refs[op.actor]
    match op.kind:
        case "tell" | "interrupt":
            _tell(run, op, ref)
        case "send":
            _send(run, op, ref)
        case "ask" | "ask_deadline":
            _ask(run, op, ref)
        case "cancel_ask":
            _cancel(run, op)
        case "stop":
            run.outside.start_soon(ref.stop)
        case "drain_stop":
            run.outside.start_soon(functools.partial(ref.stop, drain=True))
        case "stop_nowait":
            ref.stop_nowait()
        case "watch" | "unwatch":
            _watch(run, op, ref)
        case "cancel_block":
            run.block.cancel()
        case "sleep":
            await trio.sleep(op.value)
        case _:  # "checkpoint"
            await trio.lowlevel.checkpoint()


def _tell(run: _Interpreter, op: Op, ref: ActorRef) -> None:
    """A tell (an ``interrupt`` is one whose handler raises ``KeyboardInterrupt``);
    a full mailbox may refuse it at once with ``MailboxFull``."""
    run.ledger.sent[op.actor] += 1
    ident = run.next_ident()
    run.ledger.tells[ident] = op.actor
    try:
        ref.tell((ident, message_fail(op)))
    except MailboxFull:
        run.ledger.refused.add(ident)


def _send(run: _Interpreter, op: Op, ref: ActorRef) -> None:
    """A send, waiting in a task of its own for room in the mailbox."""
    run.ledger.sent[op.actor] += 1
    ident = run.next_ident()
    run.ledger.sends[ident] = op.actor
    ends: list[str] = []
    run.ledger.outcome[ident] = ends
    scope = trio.CancelScope()
    run.scopes.append(scope)
    run.outside.start_soon(_send_task, ends, ref, ident, message_fail(op), scope)


def _ask(run: _Interpreter, op: Op, ref: ActorRef) -> None:
    """An ask, waiting in a task of its own; ``ask_deadline`` gives it a deadline."""
    run.ledger.sent[op.actor] += 1
    ident = run.next_ident()
    run.ledger.asks[ident] = op.actor
    ends: list[str] = []
    run.ledger.outcome[ident] = ends
    scope = trio.CancelScope()
    run.scopes.append(scope)
    deadline = op.value if op.kind == "ask_deadline" else None
    run.outside.start_soon(_ask_task, ends, ref, ident, message_fail(op), deadline, scope)


def _cancel(run: _Interpreter, op: Op) -> None:
    """Cancel an earlier ask or send (which one: ``op.value``, modulo how many)."""
    if run.scopes:
        run.scopes[int(op.value) % len(run.scopes)].cancel()


def _watch(run: _Interpreter, op: Op, ref: ActorRef) -> None:
    """Tell the probe to watch or unwatch another actor (which one: ``op.value``,
    modulo how many) from its handler; never itself, and a request a full mailbox
    refuses is not counted."""
    target = run.ledger.refs[int(op.value) % len(run.ledger.refs)]
    if target == ref:
        return
    run.ledger.sent[op.actor] += 1
    watch = op.kind == "watch"
    try:
        ref.tell(_Watch(target, watch))  # from the probe's handler
    except MailboxFull:
        return
    if watch:
        run.ledger.watches[op.actor, target] += 1
    else:
        run.ledger.unwatches[op.actor] += 1


async def _ask_task(
    ends: list[str],
    ref: ActorRef,
    ident: int,
    fail: bool | str,
    deadline: float | None,
    scope: trio.CancelScope,
) -> None:
    """Ask and record how the ask ended in its asker: ``handled`` (a reply or the
    handler's exception), ``failed back`` or ``cancelled``."""
    with scope:
        if deadline is not None:
            scope.deadline = trio.current_time() + deadline
        try:
            await ref.ask((ident, fail))
        except (_Failure, _Expected):
            ends.append("handled")
            return
        except (ActorStopped, MailboxFull):
            ends.append("failed back")
            return
        except trio.Cancelled:
            ends.append("cancelled")
            raise
        ends.append("handled")


async def _send_task(
    ends: list[str], ref: ActorRef, ident: int, fail: bool | str, scope: trio.CancelScope
) -> None:
    """Send and record how the send ended in its sender: ``queued``, ``failed back``
    or ``cancelled``."""
    with scope:
        try:
            await ref.send((ident, fail))
        except ActorStopped:
            ends.append("failed back")
            return
        except trio.Cancelled:
            ends.append("cancelled")
            raise
        ends.append("queued")


__all__ = ["run_program"]

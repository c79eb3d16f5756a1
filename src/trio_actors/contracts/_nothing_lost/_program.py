"""T21's programs: what a program is made of, and how one is drawn from a seed.

A :class:`Program` is a tuple of actors (:class:`ActorSpec`) and a tuple of steps
(:class:`Op`), drawn up front so that each example runs as one deterministic
``trio.run`` (see ``_run``). :func:`random_program` is the seeded counterpart of the
hypothesis strategy in ``tests/strategies.py``; both draw from the constants here, so
a change to them (or to the order :func:`random_program` draws in) changes which
program a seed or an example stands for. :func:`mailbox_for`, :func:`strategy_for`
and :func:`message_fail` say what a spec or a step means to the runtime.
"""

from __future__ import annotations

import random

import attrs

from ... import Bounded, Escalate, Restart, Resume, Stop, SupervisionStrategy


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
    """A whole program: its actors (by index), then its steps in order."""

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


def message_fail(op: Op) -> bool | str:
    """What the probe's handler is told to do: succeed, fail, raise an expected
    error, or raise ``KeyboardInterrupt``."""
    if op.kind == "interrupt":
        return "interrupt"
    if op.fail and op.expected:
        return "expected"
    return op.fail


__all__ = [
    "GROUPS",
    "OP_KINDS",
    "OVERFLOWS",
    "POOL_SIZE",
    "ROUTINGS",
    "STRATEGIES",
    "ActorSpec",
    "Op",
    "Program",
    "mailbox_for",
    "message_fail",
    "random_program",
    "strategy_for",
]

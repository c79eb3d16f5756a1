"""T21's and T31's invariants: what a run records, and what is checked after it.

The interpreter (``_run``) writes a :class:`Ledger` as it goes -- what each step
addressed to which actor, and how each ask and send ended in its caller -- and the
probes add what their handlers were invoked for and the notices they got. Once the
system block has exited, :func:`check_nothing_lost` holds the ledger against the
dead letters and the runtime's counts (T21, one check per kind of message, in this
order: the dead-letter log kept everything, tells, sends, asks, watches, the
runtime's count of withdrawn messages) and returns the :class:`ProgramRun` that
:func:`conserved` checks against the runtime's own statistics (T31).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import attrs

from ... import (
    ActorRef,
    ActorStatistics,
    DeadLetter,
    DeadLetters,
    SystemStatistics,
    Terminated,
)
from .._harness import require
from ._program import Program


@attrs.frozen
class RunEnd:
    """The runtime's own view once the system block has exited."""

    dead_letters: DeadLetters
    """The system's dead-letter log."""
    statistics: list[ActorStatistics]
    """Each program actor's statistics, by index."""
    system: SystemStatistics
    withdrawn: int
    """The messages the runtime counted as withdrawn, over every program actor."""


@attrs.define(eq=False)
class Ledger:
    """What one run of a program did and saw, written as it runs.

    Message ids (``ident``) number the program's tells, sends and asks from 1, in
    step order; the probes' handlers record them in ``invoked``.
    """

    refs: list[ActorRef] = attrs.Factory(list)
    """The program's actors, by index (a pool: the pool's ref)."""
    invoked: Counter[int] = attrs.Factory(Counter)
    """How many times a handler ran for each message id."""
    sent: Counter[int] = attrs.Factory(Counter)
    """Messages addressed to each actor: tells, sends, asks, watch steps, spawns."""
    unwatches: Counter[int] = attrs.Factory(Counter)
    """``unwatch`` steps told to each actor (each may withdraw one notice)."""
    notices: Counter[tuple[int, Any]] = attrs.Factory(Counter)
    """``Terminated`` notices handled, by (watcher index, watched ref)."""
    watches: Counter[tuple[int, Any]] = attrs.Factory(Counter)
    """``watch`` steps told, by (watcher index, watched ref)."""
    tells: dict[int, int] = attrs.Factory(dict)
    """Tell (and interrupt) message id -> actor index."""
    refused: set[int] = attrs.Factory(set)
    """Tells refused at once with ``MailboxFull``."""
    sends: dict[int, int] = attrs.Factory(dict)
    """Send message id -> actor index."""
    asks: dict[int, int] = attrs.Factory(dict)
    """Ask message id -> actor index."""
    outcome: dict[int, list[str]] = attrs.Factory(dict)
    """How each send and ask ended in its caller (a list: it must end exactly once)."""
    end: RunEnd | None = None
    """The runtime's view after the block, once it has exited."""


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


def check_nothing_lost(program: Program, ledger: Ledger) -> ProgramRun:
    """T21's invariant on a finished run (see the package docstring); the run's counts.

    Raises:
        ContractViolation: the invariant does not hold (the reason says how).
    """
    assert ledger.end is not None  # (set as the block exits, before any check)
    end = ledger.end
    recent = end.dead_letters.recent
    letters = [d.message[0] for d in recent if isinstance(d.message, tuple)]
    others = [d for d in recent if not isinstance(d.message, tuple)]
    require(
        end.dead_letters.count == len(letters) + len(others),
        "more dead letters than the log kept (test too big)",
    )
    lettered = Counter(letters)
    _check_tells(ledger, lettered)
    cancelled_never_ran = _check_sends(ledger, lettered)
    cancelled_never_ran += _check_asks(ledger, lettered)
    _check_notices(ledger)
    _check_withdrawn(ledger, end.withdrawn, cancelled_never_ran)
    actors = range(len(program.actors))
    notices_of = _notices_of(ledger, others)
    return ProgramRun(
        tuple(ledger.sent[index] for index in actors),
        tuple(end.statistics),
        end.system,
        tuple(notices_of[index] for index in actors),
        tuple(ledger.unwatches[index] for index in actors),
    )


def _check_tells(ledger: Ledger, lettered: Counter[int]) -> None:
    """Every tell was handled, is one dead letter, or was refused: exactly one."""
    invoked, refused = ledger.invoked, ledger.refused
    for ident in ledger.tells:
        fates = invoked[ident] + lettered[ident] + (ident in refused)
        require(
            fates == 1,
            f"tell {ident}: handled {invoked[ident]} times, dead-lettered "
            f"{lettered[ident]} times, refused {int(ident in refused)} times (must be "
            "exactly one in all)",
        )


def _check_sends(ledger: Ledger, lettered: Counter[int]) -> int:
    """Every send ended once: returned (then handled or one dead letter), or failed
    back or cancelled (then never queued). Returns how many were cancelled."""
    invoked = ledger.invoked
    cancelled = 0
    for ident in ledger.sends:
        ends = ledger.outcome[ident]
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
            cancelled += ends[0] == "cancelled"
    return cancelled


def _check_asks(ledger: Ledger, lettered: Counter[int]) -> int:
    """Every ask ended once, never as a dead letter, was handled at most once, and
    was handled if answered. Returns how many were cancelled before they ran."""
    invoked = ledger.invoked
    cancelled_never_ran = 0
    for ident in ledger.asks:
        ends = ledger.outcome[ident]
        require(len(ends) == 1, f"ask {ident} ended {len(ends)} times: {ends}")
        require(lettered[ident] == 0, f"ask {ident} became a dead letter")
        require(invoked[ident] <= 1, f"ask {ident} was handled {invoked[ident]} times")
        end = ends[0]
        if end == "handled":
            require(invoked[ident] == 1, f"ask {ident} was answered but never handled")
        elif end == "cancelled" and invoked[ident] == 0:
            cancelled_never_ran += 1
    return cancelled_never_ran


def _check_notices(ledger: Ledger) -> None:
    """No watcher got more ``Terminated`` for an actor than it asked for."""
    for (watcher, target), count in ledger.notices.items():
        require(
            count <= ledger.watches[watcher, target],
            f"actor {watcher} got {count} Terminated for {target} after "
            f"{ledger.watches[watcher, target]} watch requests",
        )


def _check_withdrawn(ledger: Ledger, withdrawn: int, cancelled_never_ran: int) -> None:
    """The runtime counted every cancelled ask or send that never ran as withdrawn,
    and besides them at most one notice per ``unwatch``."""
    unwatched = sum(ledger.unwatches.values())
    require(
        cancelled_never_ran <= withdrawn <= cancelled_never_ran + unwatched,
        f"the runtime counted {withdrawn} withdrawn; {cancelled_never_ran} "
        f"cancelled asks and sends never ran, and {unwatched} unwatch steps may each "
        "have withdrawn a notice",
    )


def _notices_of(ledger: Ledger, others: list[DeadLetter]) -> Counter[int]:
    """The notices each actor handled or got as dead letters (a dead letter to a
    pool's worker counts as the pool's); a notice to no program actor is a violation."""
    notices_of: Counter[int] = Counter()
    for (watcher, _target), count in ledger.notices.items():
        notices_of[watcher] += count
    paths = {ref.path: index for index, ref in enumerate(ledger.refs)}
    for letter in others:
        if isinstance(letter.message, Terminated):
            # (to a pool's worker: the pool's)
            path = letter.recipient.path
            index = paths.get(path, paths.get(path.rpartition("/")[0]))
            if index is None:
                require(False, f"a notice to {path}, which no step addressed")
            else:
                notices_of[index] += 1
    return notices_of


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


__all__ = ["Ledger", "ProgramRun", "RunEnd", "check_nothing_lost", "conserved"]

"""Assertions on dead letters and statistics, with messages that say what differed."""

from __future__ import annotations

from typing import Any

import attrs

from .. import ActorRef, ActorStatistics, ActorSystem, DeadLetter, SystemStatistics


def dead_letters(
    system: ActorSystem, *, recipient: ActorRef | None = None, reason: str | None = None
) -> list[DeadLetter]:
    """The system's recent dead letters, oldest first, optionally only those for
    ``recipient`` and/or with ``reason``."""
    return [
        letter
        for letter in system.dead_letters.recent
        if (recipient is None or letter.recipient == recipient)
        and (reason is None or letter.reason == reason)
    ]


def assert_dead_letters(
    system: ActorSystem,
    messages: list[Any],
    *,
    recipient: ActorRef | None = None,
    reason: str | None = None,
) -> None:
    """Assert that the dead letters (for ``recipient``, with ``reason``, if given)
    carried exactly ``messages``, in this order."""
    letters = dead_letters(system, recipient=recipient, reason=reason)
    got = [letter.message for letter in letters]
    if got != messages:
        which = " ".join(
            part
            for part in (
                f"for {recipient.path}" if recipient is not None else "",
                f"with reason {reason!r}" if reason is not None else "",
            )
            if part
        )
        detail = "\n".join(f"  {letter}" for letter in letters) or "  (none)"
        raise AssertionError(
            f"dead letters {which or '(all)'}: expected messages {messages!r}, "
            f"got {got!r}:\n{detail}"
        )


def assert_no_dead_letters(system: ActorSystem) -> None:
    """Assert that the system has made no dead letter at all."""
    if system.dead_letters.count:
        detail = "\n".join(f"  {letter}" for letter in system.dead_letters.recent)
        raise AssertionError(
            f"expected no dead letters, found {system.dead_letters.count}:\n{detail}"
        )


def assert_statistics(subject: ActorRef | ActorSystem, **expected: Any) -> None:
    """Assert fields of ``subject.statistics()``: an ``ActorRef``'s
    (:class:`~trio_actors.ActorStatistics`) or an ``ActorSystem``'s
    (:class:`~trio_actors.SystemStatistics`). Only the fields named are compared.

    Raises:
        TypeError: a field name that the record does not have.
        AssertionError: listing every field that differs.
    """
    stats: ActorStatistics | SystemStatistics = subject.statistics()
    fields = {field.name for field in attrs.fields(type(stats))}
    unknown = sorted(set(expected) - fields)
    if unknown:
        raise TypeError(
            f"{type(stats).__name__} has no field {', '.join(unknown)}; "
            f"fields: {', '.join(sorted(fields))}"
        )
    wrong = {
        name: (value, getattr(stats, name))
        for name, value in expected.items()
        if getattr(stats, name) != value
    }
    if wrong:
        lines = "\n".join(
            f"  {name}: expected {want!r}, got {got!r}" for name, (want, got) in wrong.items()
        )
        raise AssertionError(f"statistics of {subject!r} differ:\n{lines}")


__all__ = ["assert_dead_letters", "assert_no_dead_letters", "assert_statistics", "dead_letters"]

"""How an ask ended, as traces and metrics both say it: the attribute
``trio_actors.outcome`` and the asker's outcome of an ask that raised
(:func:`outcome_of`). No OpenTelemetry here: a value and a mapping."""

from __future__ import annotations

import trio

from .._errors import (
    ActorNotFound,
    ActorStopped,
    ConnectionInterrupted,
    MailboxFull,
    NodeDown,
    NotPermitted,
)
from .._interrupts import protect_module

__all__ = ["OUTCOME", "outcome_of"]

OUTCOME = "trio_actors.outcome"
"""The attribute that says how an ask (or a message's handling) ended."""

# What an ask raised, as its asker's outcome: the first class that matches (a
# ConnectionInterrupted is a NodeDown, told apart first).
_OUTCOMES: tuple[tuple[type[BaseException], str], ...] = (
    (trio.Cancelled, "cancelled"),
    (ConnectionInterrupted, "in_doubt"),
    (NodeDown, "node_down"),
    (NotPermitted, "not_permitted"),
    (MailboxFull, "mailbox_full"),
    (ActorStopped, "stopped"),
    (ActorNotFound, "not_found"),
)


def outcome_of(error: BaseException) -> str:
    """The asker's outcome of an ask that raised ``error``: one of ``cancelled``,
    ``in_doubt``, ``node_down``, ``not_permitted``, ``mailbox_full``, ``stopped``,
    ``not_found``, else ``exception`` (the handler raised it)."""
    for kind, outcome in _OUTCOMES:
        if isinstance(error, kind):
            return outcome
    return "exception"


protect_module(globals())

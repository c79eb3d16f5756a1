"""Compaction: withdrawn envelopes leave a plain mailbox's deque in batches.

A withdrawn ask (its asker was cancelled) or notice (``unwatch``) stays queued, to
be skipped by the serving loop, until the withdrawn envelopes outnumber the live
entries (:meth:`ActorCell.withdraw` decides); then :func:`compact` drops them all in
one walk. Each compaction removes at least half of what it walks, so it costs O(1)
per withdrawal, amortised, and asks timing out behind a stuck handler cannot grow
the mailbox without bound. (A bounded mailbox removes a withdrawn envelope at once
instead, to free its room: ``BoundedCell.withdraw``.)
"""

from __future__ import annotations

from collections import deque
from typing import TYPE_CHECKING, Any

from .._interrupts import protect_module
from ._envelope import Ask, AskState

if TYPE_CHECKING:
    from ._cell import ActorCell

# Withdrawn envelopes in a deque before it may be compacted (fewer are not worth
# a walk over the deque).
COMPACT_AT_LEAST = 64


def compact(cell: ActorCell) -> None:
    """Drop the withdrawn envelopes from ``cell``'s deque, in place, and locate the
    queued asks again. Never a checkpoint.

    Only while no inline turn can be running on this actor (``withdraw`` checks: it
    is served by a task, or idle): an inline turn counts messages ahead by the asks'
    positions, and a withdrawal can happen inside it (a plain handler cancelling an
    asker). A task re-reads the mailbox per message, and keeps its reference to the
    deque, which is why it is rewritten in place.
    """
    mailbox = cell.mailbox
    if not mailbox:
        return
    # No other thread's fast-path tell may append while the deque is walked and
    # rewritten: those wait in the foreign inbox meanwhile (_core._foreign).
    cell.close_tell_paths()
    kept, positions = live_entries(cell, mailbox)
    dropped = len(mailbox) - len(kept)
    mailbox.clear()
    mailbox.extend(kept)
    cell.ask_at = positions
    cell.asks_queued -= dropped
    cell.withdrawn_queued -= dropped
    cell.refresh_tell_paths()


def live_entries(cell: ActorCell, mailbox: deque[Any]) -> tuple[list[Any], deque[int]]:
    """The entries of ``mailbox`` that are not withdrawn envelopes, and the
    positions the asks among them will have."""
    kept: list[Any] = []
    positions: deque[int] = deque()
    base = cell.popped
    for item in mailbox:
        if isinstance(item, Ask):  # or a Notice
            if item.state is AskState.WITHDRAWN:
                continue
            positions.append(base + len(kept))
        kept.append(item)
    return kept, positions


protect_module(globals())

__all__ = ["COMPACT_AT_LEAST", "compact", "live_entries"]

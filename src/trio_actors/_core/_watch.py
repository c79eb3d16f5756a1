"""Death watch: an actor asks to be told when another actor stops.

``watcher.watch(ref)`` registers the watcher with the watched actor; when the
watched actor stops -- for any reason -- each watcher gets exactly one
:class:`Terminated` through its mailbox, in order with its other messages. Watching an
actor that has already stopped delivers it at once. ``unwatch`` withdraws the
registration, and a ``Terminated`` already queued for it. A watcher that stops
first is unregistered when it stops accepting messages: it gets nothing and leaves
nothing behind in the watched actor.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import attrs

from .._interrupts import protect_module
from ._envelope import Notice
from ._state import ActorState

if TYPE_CHECKING:
    from ._cell import ActorCell
    from ._ref import ActorRef, ForeignCell


@attrs.frozen
class Terminated:
    """Told to a watcher when an actor it watches has stopped.

    Attributes:
        ref: the actor that stopped (equal to the ref ``spawn`` returned).
        error: the exception that stopped it (a failure under ``Stop()``, or one
            escalated past it), or ``None`` for an ordinary stop.
    """

    ref: ActorRef
    error: BaseException | None = None


def watch(watcher: ActorCell, target: ActorCell | ForeignCell) -> None:
    """Register ``watcher`` for ``target``'s stop (idempotent). Never a checkpoint.
    An actor of another node (a ``RemoteCell``) is watched through its node."""
    if target.remote:
        target.watch_from(watcher)
        if watcher.watching is None:
            watcher.watching = set()
        watcher.watching.add(target)  # (forgotten at a restart or stop, as any)
        return
    if target.state is ActorState.STOPPED:
        # On the next scheduler pass: the watcher is likely in its own turn.
        tell_notice_soon(watcher, Terminated(target.ref, target.stop_error))
        return
    if watcher.watching is None:
        watcher.watching = set()
    if target in watcher.watching:
        return
    watcher.watching.add(target)
    if target.watchers is None:
        target.watchers = {}
    target.watchers[watcher] = None


def unwatch(watcher: ActorCell, target: ActorCell | ForeignCell) -> None:
    """Withdraw ``watcher``'s registration and any ``Terminated`` it has queued."""
    if watcher.watching is not None:
        watcher.watching.discard(target)
    if target.remote:
        target.unwatch_from(watcher)
        return
    if target.watchers is not None:
        target.watchers.pop(watcher, None)
    withdraw_notices(watcher, lambda item: isinstance(item, Terminated) and item.ref == target.ref)


def notify_watchers(target: ActorCell) -> None:
    """``target`` has stopped: tell each watcher once, then forget them.

    Watchers are told in the order they started watching (``watchers`` is a dict
    used as an ordered set), so the order is deterministic.
    """
    watchers, target.watchers = target.watchers, None
    if not watchers:
        return
    notice = Terminated(target.ref, target.stop_error)
    for watcher in watchers:
        if watcher.watching is not None:
            watcher.watching.discard(target)
        tell_notice(watcher, notice)


def forget_watches(watcher: ActorCell) -> None:
    """``watcher`` stops accepting messages: unregister it everywhere."""
    watching, watcher.watching = watcher.watching, None
    for target in watching or ():
        if target.remote:
            target.forget_watcher(watcher)
        elif target.watchers is not None:
            target.watchers.pop(watcher, None)


# --- the notices a watcher is told (never dropped by a bounded mailbox's capacity) ---


def tell_notice(cell: ActorCell, message: Any) -> None:
    """Queue a death-watch notice (``Terminated``) for ``cell``: like ``tell``, but as
    a :class:`Notice` (so that ``unwatch`` can withdraw it), and never dropped or
    refused by a bounded mailbox's capacity. Never a checkpoint."""
    cell.queue_notice(Notice(cell, message))


def tell_notice_soon(cell: ActorCell, message: Any) -> None:
    """:func:`tell_notice`, on the next scheduler pass: for a notice that this
    actor's own plain handler causes (``watch`` of an actor that has stopped).
    In the middle of an inline stretch, whose pops are counted only at its end,
    a notice queued at once would be placed by a stale count (the dispatcher
    then spun forever). Until it is queued, ``unwatch`` withdraws it as well."""
    notice = Notice(cell, message)
    if cell.deferred_notices is None:
        cell.deferred_notices = []
    cell.deferred_notices.append(notice)
    cell.system.trio_token.run_sync_soon(_queue_deferred, cell, notice)


def _queue_deferred(cell: ActorCell, notice: Notice) -> None:
    deferred = cell.deferred_notices
    if deferred is None or not any(item is notice for item in deferred):
        return  # withdrawn meanwhile
    deferred[:] = [item for item in deferred if item is not notice]
    cell.queue_notice(notice)


def withdraw_notices(cell: ActorCell, predicate: Callable[[Any], bool]) -> None:
    """Withdraw the notices queued for ``cell`` whose message ``predicate`` accepts:
    they will be skipped. Changes no positions, so it is safe during the actor's
    own turn."""
    queued = [cell.head, *(cell.mailbox or ())]
    for item in queued:
        # (the runtime's own notices only: a tell from another node queued as a
        # notice, _taken_in.py, is never withdrawn, whatever its message)
        if type(item) is Notice and item.sender is None and item.queued and predicate(item.message):
            item.withdraw()
    if cell.deferred_notices:
        kept = [item for item in cell.deferred_notices if not predicate(item.message)]
        cell.withdrawn += len(cell.deferred_notices) - len(kept)
        cell.deferred_notices = kept


protect_module(globals())

__all__ = [
    "Terminated",
    "forget_watches",
    "notify_watchers",
    "tell_notice",
    "tell_notice_soon",
    "unwatch",
    "watch",
    "withdraw_notices",
]

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

from typing import TYPE_CHECKING

import attrs

from ._state import ActorState

if TYPE_CHECKING:
    from ._cell import ActorCell
    from ._ref import ActorRef


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


def watch(watcher: ActorCell, target: ActorCell) -> None:
    """Register ``watcher`` for ``target``'s stop (idempotent). Never a checkpoint.
    An actor of another node (a ``RemoteCell``) is watched through its node."""
    watch_from = getattr(target, "watch_from", None)
    if watch_from is not None:
        watch_from(watcher)
        if watcher.watching is None:
            watcher.watching = set()
        watcher.watching.add(target)  # (forgotten at a restart or stop, as any)
        return
    if target.state is ActorState.STOPPED:
        # On the next scheduler pass: the watcher is likely in its own turn.
        watcher.tell_notice_soon(Terminated(target.ref, target.stop_error))
        return
    if watcher.watching is None:
        watcher.watching = set()
    if target in watcher.watching:
        return
    watcher.watching.add(target)
    if target.watchers is None:
        target.watchers = {}
    target.watchers[watcher] = None


def unwatch(watcher: ActorCell, target: ActorCell) -> None:
    """Withdraw ``watcher``'s registration and any ``Terminated`` it has queued."""
    if watcher.watching is not None:
        watcher.watching.discard(target)
    unwatch_from = getattr(target, "unwatch_from", None)
    if unwatch_from is not None:  # (another node's actor)
        unwatch_from(watcher)
        return
    if target.watchers is not None:
        target.watchers.pop(watcher, None)
    watcher.withdraw_notices(lambda item: isinstance(item, Terminated) and item.ref == target.ref)


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
        watcher.tell_notice(notice)


def forget_watches(watcher: ActorCell) -> None:
    """``watcher`` stops accepting messages: unregister it everywhere."""
    watching, watcher.watching = watcher.watching, None
    for target in watching or ():
        forget = getattr(target, "forget_watcher", None)  # (another node's actor)
        if forget is not None:
            forget(watcher)
        elif target.watchers is not None:
            target.watchers.pop(watcher, None)


__all__ = ["Terminated", "forget_watches", "notify_watchers", "unwatch", "watch"]

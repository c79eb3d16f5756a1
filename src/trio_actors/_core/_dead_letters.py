"""Dead letters: messages that reached no handler and no asker.

Every message given to ``tell`` ends as exactly one of handled or dead letter (an
``ask`` ends handled, withdrawn or failed back instead). Three reasons make a dead
letter:

* ``"stopped"`` -- told to an actor that had stopped or was stopping;
* ``"stranded"`` -- still queued when its actor stopped;
* ``"overflow"`` -- dropped by a bounded mailbox (or, told to one on another node,
  by its sender, past what the link to that node holds: ``remote/_tells.py``).

Recording is cheap because stranded cleanup can produce a million dead letters a
second: the log keeps ``(recipient, message, reason)`` tuples in a bounded deque and
builds :class:`DeadLetter` records only when someone reads :attr:`DeadLetters.recent`
-- or when someone subscribes (:meth:`DeadLetters.subscribe`): then each dead letter
is also offered to every subscription's bounded channel, without ever waiting (a full
channel counts the letter as ``dropped`` for that subscriber, and the runtime and the
sender go on).
"""

from __future__ import annotations

import weakref
from collections import deque
from collections.abc import Iterator, Sequence
from itertools import repeat
from typing import TYPE_CHECKING, Any, Literal, overload

import attrs

from .._interrupts import protect_module
from .._stream import Stream

if TYPE_CHECKING:
    from ._observer import Observer
    from ._ref import ActorRef

DeadLetterReason = Literal[
    "stopped", "stranded", "overflow", "unreachable", "undecodable", "refused", "in-doubt"
]

DEFAULT_RECENT_DEAD_LETTERS = 10_000
DEFAULT_SUBSCRIPTION_CAPACITY = 1_000


@attrs.frozen
class DeadLetter:
    """A message that no handler took.

    Attributes:
        recipient: the actor it was for.
        message: the message itself, unchanged.
        reason: ``"stopped"`` (told to a stopping or stopped actor), ``"stranded"``
            (left queued when the actor stopped), ``"overflow"`` (dropped by a
            bounded mailbox), ``"unreachable"`` (told to an actor on another node
            that nothing served when the tell arrived -- never delivered: the node,
            or that incarnation of it, is gone, or it was between two connections)
            or
            ``"undecodable"`` (a tell from another node that this node cannot decode,
            e.g. a type its cluster does not register: the message is its first
            bytes, ``InputLimits.undecodable_prefix`` at most) or ``"refused"`` (a
            tell to another node that the NATS server refused to carry: this node may
            not send to it, ``docs/security.rst``) or ``"in-doubt"`` (a tell to
            another node whose fate is unknown -- that node died, was declared down,
            or the tell was lost on the way, before the node acknowledged it: it
            may or may not have been handled; retrying it is the application's
            choice, ``docs/remote.rst``).
    """

    recipient: ActorRef
    message: Any
    reason: Literal[
        "stopped", "stranded", "overflow", "unreachable", "undecodable", "refused", "in-doubt"
    ]


class _RecentView(Sequence[DeadLetter]):
    """A read-only snapshot of the most recent dead letters, oldest first."""

    __slots__ = ("_items",)

    def __init__(self, items: tuple[tuple[Any, Any, DeadLetterReason], ...]) -> None:
        self._items = items

    def __len__(self) -> int:
        return len(self._items)

    @overload
    def __getitem__(self, index: int) -> DeadLetter: ...
    @overload
    def __getitem__(self, index: slice) -> Sequence[DeadLetter]: ...
    def __getitem__(self, index: int | slice) -> DeadLetter | Sequence[DeadLetter]:
        if isinstance(index, slice):
            return [DeadLetter(*item) for item in self._items[index]]
        return DeadLetter(*self._items[index])

    def __iter__(self) -> Iterator[DeadLetter]:
        for item in self._items:
            yield DeadLetter(*item)

    def __repr__(self) -> str:
        return f"<{len(self)} recent dead letters>"


class DeadLetterSubscription(Stream[DeadLetter]):
    """A stream of the dead letters recorded from its subscription on.

    Iterate it (``async for letter in subscription``) or ``await receive()``; the
    iteration ends when the system closes (after its exit has stopped every actor,
    so the exit's own dead letters are in it) or when the subscription is closed.
    Use it as a context manager (``with system.dead_letters.subscribe() as
    letters:``) to unsubscribe when the block ends; otherwise it stays subscribed
    until the system closes -- or until nothing holds it any more (no variable, no
    task waiting on it): the system holds it weakly, so a subscription dropped
    without ``close()`` goes, with the letters it held, when it is collected.

    The channel holds at most ``capacity`` letters not yet received: a letter that
    finds it full is not queued, and counted in ``dropped`` -- the runtime and
    the sender never wait for a subscriber.

    Attributes:
        capacity: the channel's size.
        dropped: letters that found the channel full.
    """

    __slots__ = ("_log",)

    def __init__(self, log: DeadLetters, capacity: int) -> None:
        super().__init__(capacity)
        self._log = log

    def close(self) -> None:
        """Unsubscribe: no letter is offered from now on; the ones queued can still be
        received, then the iteration ends. Idempotent."""
        self._log.unsubscribe(self)
        super().close()


class DeadLetters:
    """The system's dead-letter log.

    Attributes:
        count: how many dead letters there have been since the system opened.
        by_reason: the same count split by reason (``"stopped"``, ``"stranded"``,
            ``"overflow"``).
    """

    __slots__ = ("_closed", "_recent", "_subscriptions", "by_reason", "count", "observer")

    def __init__(self, keep: int = DEFAULT_RECENT_DEAD_LETTERS) -> None:
        if isinstance(keep, bool) or not isinstance(keep, int):
            raise TypeError(f"dead letters to keep must be an int, got {keep!r}")
        if keep < 0:
            raise ValueError(f"dead letters to keep must be >= 0, got {keep!r}")
        self.count = 0
        self.by_reason: dict[DeadLetterReason, int] = {
            "stopped": 0,
            "stranded": 0,
            "overflow": 0,
            "unreachable": 0,
            "undecodable": 0,
            "refused": 0,
            "in-doubt": 0,
        }
        self._recent: deque[tuple[Any, Any, DeadLetterReason]] = deque(maxlen=keep)
        # (held weakly: a subscription its user dropped without closing it goes,
        # with the letters it held, when it is collected -- not kept for the
        # system's life; a task waiting on it, or iterating it, holds it)
        self._subscriptions: weakref.WeakSet[DeadLetterSubscription] = weakref.WeakSet()
        self._closed = False
        self.observer: Observer | None = None  # (the system's, if it is observed)

    def subscribe(self, *, capacity: int = DEFAULT_SUBSCRIPTION_CAPACITY) -> DeadLetterSubscription:
        """A stream of every dead letter from now on (see
        :class:`DeadLetterSubscription`): ``async for letter in
        system.dead_letters.subscribe():``. Never a checkpoint.

        Args:
            capacity: letters the subscription holds before it drops (and counts)
                new ones; ``>= 1``.

        Raises:
            TypeError: ``capacity`` is not an int.
            ValueError: ``capacity`` is below 1.
        """
        if isinstance(capacity, bool) or not isinstance(capacity, int):
            raise TypeError(f"subscribe(capacity=...) must be an int, got {capacity!r}")
        if capacity < 1:
            raise ValueError(f"subscribe(capacity=...) must be >= 1, got {capacity!r}")
        subscription = DeadLetterSubscription(self, capacity)
        if self._closed:
            subscription.close()  # the system has closed: nothing will come
        else:
            self._subscriptions.add(subscription)
        return subscription

    def unsubscribe(self, subscription: DeadLetterSubscription) -> None:
        """Stop offering letters to ``subscription`` (its :meth:`close` calls this)."""
        self._subscriptions.discard(subscription)

    def close_subscriptions(self) -> None:
        """The system has closed: every subscription's iteration ends after what it
        holds (and one made later ends at once)."""
        self._closed = True
        for subscription in list(self._subscriptions):
            subscription.close()

    @property
    def keep(self) -> int:
        """How many of the most recent dead letters :attr:`recent` holds at most."""
        return self._recent.maxlen or 0

    @property
    def recent(self) -> Sequence[DeadLetter]:
        """The most recent dead letters, newest last (a snapshot)."""
        return _RecentView(tuple(self._recent))

    def record(self, recipient: ActorRef, message: Any, reason: DeadLetterReason) -> None:
        """Record one dead letter. Never a checkpoint."""
        self.count += 1
        self.by_reason[reason] += 1
        self._recent.append((recipient, message, reason))
        if self._subscriptions:
            self._offer(DeadLetter(recipient, message, reason))
        if self.observer is not None:
            self.observer.dead_letters(recipient, reason, 1)

    def record_many(
        self, recipient: ActorRef, messages: Sequence[Any], reason: DeadLetterReason
    ) -> int:
        """Record a group of dead letters for one recipient; return how many."""
        self._recent.extend(zip(repeat(recipient), messages, repeat(reason)))
        n = len(messages)
        self.count += n
        self.by_reason[reason] += n
        if self._subscriptions:
            for message in messages:
                self._offer(DeadLetter(recipient, message, reason))
        if self.observer is not None:
            self.observer.dead_letters(recipient, reason, n)
        return n

    def _offer(self, letter: DeadLetter) -> None:
        for subscription in self._subscriptions:
            subscription.offer(letter)

    def __repr__(self) -> str:
        return f"<DeadLetters count={self.count}>"


protect_module(globals())

__all__ = ["DeadLetter", "DeadLetterReason", "DeadLetterSubscription", "DeadLetters"]

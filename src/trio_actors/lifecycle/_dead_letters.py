"""Dead letters: messages that reached no handler and no asker.

Every message given to ``tell`` ends as exactly one of handled or dead letter (an
``ask`` ends handled, withdrawn or failed back instead). Three reasons make a dead
letter:

* ``"stopped"`` -- told to an actor that had stopped or was stopping;
* ``"stranded"`` -- still queued when its actor stopped;
* ``"overflow"`` -- dropped by a bounded mailbox.

Recording is cheap because stranded cleanup can produce a million dead letters a
second: the log keeps ``(recipient, message, reason)`` tuples in a bounded deque and
builds :class:`DeadLetter` records only when someone reads :attr:`DeadLetters.recent`.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterator, Sequence
from itertools import repeat
from typing import TYPE_CHECKING, Any, Literal, overload

import attrs

if TYPE_CHECKING:
    from ..actors._ref import ActorRef

DeadLetterReason = Literal["stopped", "stranded", "overflow"]

DEFAULT_RECENT_DEAD_LETTERS = 10_000


@attrs.frozen
class DeadLetter:
    """A message that no handler took.

    Attributes:
        recipient: the actor it was for.
        message: the message itself, unchanged.
        reason: ``"stopped"`` (told to a stopping or stopped actor), ``"stranded"``
            (left queued when the actor stopped) or ``"overflow"`` (dropped by a
            bounded mailbox).
    """

    recipient: ActorRef
    message: Any
    reason: Literal["stopped", "stranded", "overflow"]


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


class DeadLetters:
    """The system's dead-letter log.

    Attributes:
        count: how many dead letters there have been since the system opened.
        by_reason: the same count split by reason (``"stopped"``, ``"stranded"``,
            ``"overflow"``).
    """

    __slots__ = ("_recent", "by_reason", "count")

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
        }
        self._recent: deque[tuple[Any, Any, DeadLetterReason]] = deque(maxlen=keep)

    @property
    def recent(self) -> Sequence[DeadLetter]:
        """The most recent dead letters, newest last (a snapshot)."""
        return _RecentView(tuple(self._recent))

    def record(self, recipient: ActorRef, message: Any, reason: DeadLetterReason) -> None:
        """Record one dead letter. Never a checkpoint."""
        self.count += 1
        self.by_reason[reason] += 1
        self._recent.append((recipient, message, reason))

    def record_many(
        self, recipient: ActorRef, messages: Sequence[Any], reason: DeadLetterReason
    ) -> int:
        """Record a group of dead letters for one recipient; return how many."""
        self._recent.extend(zip(repeat(recipient), messages, repeat(reason)))
        n = len(messages)
        self.count += n
        self.by_reason[reason] += n
        return n

    def __repr__(self) -> str:
        return f"<DeadLetters count={self.count}>"


__all__ = ["DeadLetter", "DeadLetterReason", "DeadLetters"]

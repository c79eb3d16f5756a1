"""Turn times for the metrics: the round clock of a metered system
(:class:`MeteredRoundClock`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from .._core._round_clock import RoundClock

if TYPE_CHECKING:
    from .._core._cell import ActorCell
    from ._source import MetricsSource

__all__ = ["MeteredRoundClock"]


class MeteredRoundClock(RoundClock):
    """The round clock, also timing turns for the turn-time histogram.

    Every ``Metrics.turns_timed_every``-th round of the dispatcher is *timed*: it
    reads the clock after each message (instead of every 16 or so), so each turn
    in it -- a stretch of one actor's messages -- begins and ends at a reading and
    is timed whole. The other rounds run as without metrics. Which rounds are
    timed does not depend on what they hold, so the turns timed are a fair sample
    of all turns. A timed round costs about twice an untimed one for handlers of
    a few hundred nanoseconds, and no more than the handlers themselves for slow
    ones. Never a checkpoint.
    """

    source: MetricsSource
    every: int  # (Metrics.turns_timed_every)
    _rounds = 0
    _timed: ActorCell | None = None  # the turn followed in a timed round: whose,
    _timed_from = 0  # the round's count of messages before its first,
    _timed_at = 0.0  # and the reading it began after
    _end_at = 0.0  # (the round's last reading, from _attribute)

    def begin_round(self) -> int:
        check = super().begin_round()
        self._rounds += 1
        if self._rounds % self.every:
            return check
        # A timed round: the dispatcher finds this instance's next_check before the
        # class's (an untimed round calls RoundClock's own, at no cost added).
        self.next_check = self._timed_check  # type: ignore[method-assign]
        self._timed = None
        return 1

    def _timed_check(self, used: int, cell: ActorCell, turn: int) -> int:
        """``next_check`` in a timed round: the reading after each message."""
        before_used, before_time = self._read_used, self._read_time
        check = RoundClock.next_check(self, used, cell, turn)
        self._follow(before_used, before_time, used, cell, turn, self._read_time, False)
        if self.policy.time_slice is None:  # (then the batch bounds the round)
            return used + 1 if used < self.policy.batch else 0
        return used + 1 if check else 0

    def end_round(self, used: int, last: ActorCell | None, turn: int) -> None:
        if "next_check" not in self.__dict__:
            super().end_round(used, last, turn)
            return
        del self.next_check
        before_used, before_time = self._read_used, self._read_time
        self._end_at = before_time  # (the round ended at a reading: unless _attribute reads)
        super().end_round(used, last, turn)  # (one more reading: _attribute keeps it)
        if last is not None:
            self._follow(before_used, before_time, used, last, turn, self._end_at, True)
        self._timed = None

    def _attribute(self, now: float, used: int, cell: ActorCell, turn: int) -> None:
        self._end_at = now
        super()._attribute(now, used, cell, turn)

    def _follow(
        self,
        before_used: int,
        before_time: float,
        used: int,
        cell: ActorCell,
        turn: int,
        now: float,
        ended: bool,
    ) -> None:
        """A reading at ``now`` after ``used`` messages, in ``cell``'s turn of
        ``turn`` messages so far (``ended``: the round's last, which ends it); the
        reading before was after ``before_used`` messages (-1: something not a turn
        ran since: a plain ``on_start``), at ``before_time``."""
        began = used - turn  # (the round's count of messages before the turn)
        timed = self._timed
        if began == before_used:  # it began right after the reading before
            if timed is not None:  # (so the one followed until then ended there)
                self.source.turn(timed, before_time - self._timed_at, "inline")
            if ended:
                self.source.turn(cell, now - before_time, "inline")
                self._timed = None
            else:
                self._timed, self._timed_from, self._timed_at = cell, began, before_time
        elif timed is cell and began == self._timed_from and before_used >= 0:
            if ended:  # (else it goes on past this reading: followed further)
                self.source.turn(cell, now - self._timed_at, "inline")
        else:
            self._timed = None  # (it began before something else ran: not timed)

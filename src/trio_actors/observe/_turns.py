"""Turn times for the metrics: the round clock of a metered system
(:class:`MeteredRoundClock`)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import trio

from .._core._round_clock import RoundClock
from .._interrupts import protect_module
from .._policy import ServingPolicy

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
    of all turns. Never a checkpoint.

    A timed round sets the clock's ``timing``: ``next_check`` then reads after each
    message and passes each reading to :meth:`timed_reading` (a test of the flag
    per reading, in every round: a compiled kernel's dispatcher calls the class's
    ``next_check``, so an instance's own, as this clock had, would go unseen).
    Every attribute is set in ``__init__``: one added to the instance later, or
    one taken away, would slow every attribute read of the clock (measured: S1
    ~10 % slower); switching the instance's class per timed round instead cost S1
    ~15 %. Measured with metrics on against off, in one process
    (``docs/observing.rst``): S1 1.07, S3 1.02, S4 1.01.
    """

    def __init__(
        self, policy: ServingPolicy, clock: trio.abc.Clock, source: MetricsSource, every: int
    ) -> None:
        super().__init__(policy, clock)
        self.source = source
        self.every = every  # (Metrics.turns_timed_every)
        self._countdown = every  # (rounds until the next timed one)
        self._timed: ActorCell | None = None  # the turn followed in a timed round: whose,
        self._timed_from = 0  # the round's count of messages before its first,
        self._timed_at = 0.0  # and the reading it began after
        self._end_at = 0.0  # (the round's last reading, from _attribute)

    def begin_round(self) -> int:
        check = RoundClock.begin_round(self)
        self._countdown -= 1
        if self._countdown:
            return check
        self._countdown = self.every
        self.timing = True
        self._timed = None
        return 1

    def timed_reading(self, now: float, used: int, cell: ActorCell, turn: int) -> None:
        """A reading of a timed round, after each message."""
        self._follow(self._read_used, self._read_time, used, cell, turn, now, False)

    def end_round(self, used: int, last: ActorCell | None, turn: int) -> None:
        if not self.timing:
            RoundClock.end_round(self, used, last, turn)
            return
        before_used, before_time = self._read_used, self._read_time
        self._end_at = before_time  # (the round ended at a reading: unless _attribute reads)
        super().end_round(used, last, turn)  # (one more reading: _attribute keeps it)
        if last is not None:
            self._follow(before_used, before_time, used, last, turn, self._end_at, True)
        self._timed = None
        self.timing = False

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


protect_module(globals())

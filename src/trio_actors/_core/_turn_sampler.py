"""The turn sampler: a thread that sees a handler block the trio thread.

The serving loop reads the clock only every few messages (``_round_clock``): a
plain handler that blocks -- a ``time.sleep``, a CPU-bound loop, a blocking socket
call -- in the middle of a stretch of other actors' messages shows in the system's
``longest_round_seconds`` but not in its own actor's ``longest_turn_seconds``.
Timing every handler would cost two clock reads per message (87 ns, measured with
``python -m timeit -s "import time; pc=time.perf_counter" "pc(); pc()"``, against
S3's ~313 ns per message). So the trio thread only keeps a record of whose message
it handles now, and a daemon thread looks at it instead:

* the trio thread keeps each open system's
  :class:`~trio_actors._core._serving_now.ServingNow` up to date: which actor's
  plain handler runs now (in the dispatcher's round, or for an ask answered in
  the asker's task), and which async handlers are in progress;
* every ``interval`` seconds (``open_actor_system(turn_sampling=0.05)``, the
  default) the sampler's thread reads each record: the actor whose plain handler
  runs, or whose async handler's coroutine runs (``ServingNow.serving``), if any;
* two samples in a row that see the same actor with the same count of handled
  messages (so the same message, or the same stretch of one turn) saw one turn
  last at least the time between them: the actor's sampled longest turn is raised
  to that (and the system's, with the actor's path).

So a handler that blocks for 0.5 s shows as a turn of at least ~0.45 s, and any
that blocks for twice the interval (0.1 s) or longer shows. The resolution is the
interval, plus up to Python's switch interval (5 ms) when the
handler holds the GIL (a CPU loop; ``time.sleep`` and blocking I/O release it). A
plain ``on_start`` (not a turn) is not counted. Sampled turns are wall-clock time:
the sampler runs only under trio's default clock, whose time is the wall clock's
(under ``MockClock`` a blocked thread passes no virtual time, and a test's
statistics stay the same on every run). An async handler is seen only while one of
its steps runs; two samples that each land in a step of the same message count as
one turn, the time it waited in between included (as its own
``longest_turn_seconds`` counts the waits).

It reads a record rather than walking the trio thread's frames
(``sys._current_frames``, as it did first) because code compiled with mypyc has no
frames (issue 34).

Costs: on the trio thread, keeping the record (a store per activation of a plain
actor, two per ask answered in the asker's task, a dict entry per async message:
``_core/_serving_now.py``, measured in ``docs/performance.rst``), whether a
sampler reads it or not; the thread wakes ``1 / interval`` times a second while a
system with sampling is open (each sample a few microseconds holding the GIL, plus
a look at each async handler in progress when no plain one runs) and waits without
waking when none is. One thread serves every system of the process
(:data:`SAMPLER`). A wake costs the trio thread most when it yields often: trio
releases the GIL at each scheduler pass and takes it back at once, and CPython's
GIL lets a waiting thread ask for it only after a switch interval (5 ms) with no
release in between -- so the woken sampler may wait until the trio thread stops
passing through its scheduler that often (it holds the GIL for 5 ms, or sleeps),
and meanwhile each pass pays for waking it (``python -m benchmarks.gil_waiter``).
A deep mailbox served in batches of 64 is that case: S1 (1,000,000 tells) pays
3--7 % for the sampler; fan-out and ping-pong, whose rounds last a time slice,
1--2 % (``python -m benchmarks.turn_sampler 10 --size 1000000``,
``docs/performance.rst``).

Each field it writes (``ActorCell.sampled_turn_time``, the system's
``sampled_turn_time`` and ``sampled_turn_path``) has no other writer, so nothing
the trio thread records is overwritten.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from .._interrupts import protect_module

if TYPE_CHECKING:
    from ._cell import ActorCell
    from ._serving_now import ServingNow

# Seconds between samples. Each wake makes the trio thread hand the GIL over (and,
# while it yields often, pay for the sampler waiting for it: see Costs above): at
# 0.01 s that cost S1 1.02x on a quiet machine and up to 1.17x on a busy one; at
# 0.05 s, 1.01--1.07x (benchmarks/turn_sampler.py, docs/performance.rst).
DEFAULT_TURN_SAMPLING = 0.05


class TurnSampler:
    """Samples the open systems' records of what their trio thread serves now (see
    the module docstring).

    ``add`` and ``remove`` are called from the trio threads (a system opening and
    closing), with the system's :class:`ServingNow` (its dispatcher's: systems that
    share a trio thread are sampled each by its own); the samples are taken by the
    sampler's own thread, started by the first ``add`` (unless ``run_thread`` is
    false). :meth:`sample` is the whole of one sample, with the time given, so that
    tests take samples themselves.
    """

    def __init__(
        self, now: Callable[[], float] = time.perf_counter, *, run_thread: bool = True
    ) -> None:
        self._now = now
        self._run_thread = run_thread  # (False: a test takes the samples)
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._records: dict[ServingNow, float] = {}  # an open system's -> its interval
        # Per record: what its last sample saw -- (cell, handled, since).
        self._seen: dict[ServingNow, tuple[ActorCell, int, float]] = {}
        self._thread: threading.Thread | None = None

    def add(self, serving_now: ServingNow, interval: float) -> None:
        """A system opened, whose trio thread's record is ``serving_now``: sample
        it every ``interval`` seconds."""
        with self._lock:
            self._records[serving_now] = interval
            if self._thread is None and self._run_thread:
                self._thread = threading.Thread(
                    target=self._run, name="trio-actors turn sampler", daemon=True
                )
                self._thread.start()
            self._wake.notify()

    def remove(self, serving_now: ServingNow) -> None:
        """That system closed."""
        with self._lock:
            if self._records.pop(serving_now, None) is not None:
                self._seen.pop(serving_now, None)

    def _run(self) -> None:
        while True:
            with self._lock:
                while not self._records:
                    self._seen.clear()  # (drop the cells it held)
                    self._wake.wait()
                interval = min(self._records.values())
                self._wake.wait(interval)  # (an add wakes it early: harmless)
            self.sample(self._now())

    def sample(self, now: float) -> None:
        """Take one sample of every open system's record, at ``now``."""
        with self._lock:
            self._sample(now)

    def _sample(self, now: float) -> None:
        seen_before = self._seen
        for serving_now in self._records:
            cell = serving_now.serving()
            if cell is None:
                seen_before.pop(serving_now, None)
                continue
            handled = cell.handled
            seen = seen_before.get(serving_now)
            if seen is not None and seen[0] is cell and seen[1] == handled:
                _lasted(cell, now - seen[2])
            else:
                seen_before[serving_now] = (cell, handled, now)


def _lasted(cell: ActorCell, seconds: float) -> None:
    """A sampled turn of ``cell`` has lasted ``seconds`` so far."""
    if seconds > cell.sampled_turn_time:
        cell.sampled_turn_time = seconds
        system: Any = cell.system
        if seconds > system.sampled_turn_time:
            system.sampled_turn_time = seconds
            system.sampled_turn_path = cell.path


SAMPLER = TurnSampler()
"""The process's one sampler."""


protect_module(globals())

__all__ = ["DEFAULT_TURN_SAMPLING", "SAMPLER", "TurnSampler"]

"""The turn sampler: a thread that sees a handler block the trio thread.

The serving loop reads the clock only every few messages (``_round_clock``): a
plain handler that blocks -- a ``time.sleep``, a CPU-bound loop, a blocking socket
call -- in the middle of a stretch of other actors' messages shows in the system's
``longest_round_seconds`` but not in its own actor's ``longest_turn_seconds``.
Timing every handler would cost two clock reads per message (87 ns, measured with
``python -m timeit -s "import time; pc=time.perf_counter" "pc(); pc()"``, against
S3's ~313 ns per message). So the trio thread pays nothing, and a daemon thread
looks instead:

* every ``interval`` seconds (``open_actor_system(turn_sampling=0.05)``, the
  default) it takes the trio thread's current frame (``sys._current_frames``) and
  walks out to the innermost frame of the runtime that serves an actor's message
  -- the dispatcher's round (:meth:`Dispatcher._serve_turns`), an ask answered in
  the asker's task (:func:`ask_idle`), an async handler
  (:func:`handle_async`) -- and reads which actor it serves (its ``cell``);
* two samples in a row that see the same frame serving the same actor with the
  same count of handled messages (so the same message, or the same stretch of one
  turn) saw one turn last at least the time between them: the actor's sampled
  longest turn is raised to that (and the system's, with the actor's path).

So a handler that blocks for 0.5 s shows as a turn of at least ~0.45 s, and any
that blocks for twice the interval (0.1 s) or longer shows. The resolution is the
interval, plus up to Python's switch interval (5 ms) when the
handler holds the GIL (a CPU loop; ``time.sleep`` and blocking I/O release it). A
plain ``on_start`` (not a turn) is not counted. Sampled turns are wall-clock time:
the sampler runs only under trio's default clock, whose time is the wall clock's
(under ``MockClock`` a blocked thread passes no virtual time, and a test's
statistics stay the same on every run).

Costs: nothing on the trio thread's paths; the thread wakes ``1 / interval``
times a second while a system with sampling is open (each sample a few
microseconds holding the GIL, but the trio thread waits for the handover, which on
a busy machine is the thread scheduler's delay) and waits without waking when none
is. One thread
serves every system of the process (:data:`SAMPLER`).

Each field it writes (``ActorCell.sampled_turn_time``, the system's
``sampled_turn_time`` and ``sampled_turn_path``) has no other writer, so nothing
the trio thread records is overwritten.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Callable
from types import CodeType, FrameType
from typing import TYPE_CHECKING, Any

from .._interrupts import protect_module
from ._dispatcher import Dispatcher
from ._handler_call import handle_async
from ._idle_ask import ask_idle

if TYPE_CHECKING:
    from ._cell import ActorCell

# Seconds between samples. Each sample makes the trio thread hand the GIL over and
# wait for the sampler's thread to be scheduled: at 0.01 s that cost S1 (a trio
# thread that never yields) 1.02x on a quiet machine and up to 1.17x on a busy one;
# at 0.05 s, 1.01--1.02x (benchmarks/turn_sampler.py, docs/performance.rst).
DEFAULT_TURN_SAMPLING = 0.05

# The runtime's frames that serve a message (their local "cell" is the actor), and
# those that run something else for an actor from inside them (not a turn).
_SERVING_CODES: frozenset[CodeType] = frozenset(
    {Dispatcher._serve_turns.__code__, ask_idle.__code__, handle_async.__code__}
)
_NOT_A_TURN_CODES: frozenset[CodeType] = frozenset(
    {Dispatcher._start_inline.__code__, Dispatcher._prepare_inline.__code__}
)


def serving_cell(frame: FrameType | None) -> tuple[FrameType, ActorCell] | None:
    """The innermost runtime frame on ``frame``'s stack that serves an actor's
    message, and the actor; ``None`` if the thread serves none now."""
    while frame is not None:
        code = frame.f_code
        if code in _SERVING_CODES:
            cell = frame.f_locals.get("cell")
            return None if cell is None else (frame, cell)
        if code in _NOT_A_TURN_CODES:
            return None
        frame = frame.f_back
    return None


class TurnSampler:
    """Samples the trio threads of the open systems (see the module docstring).

    ``add`` and ``remove`` are called from the trio threads (a system opening and
    closing); the samples are taken by the sampler's own thread, started by the
    first ``add`` (unless ``run_thread`` is false). :meth:`sample` is the whole of
    one sample, with the time given, so that tests take samples themselves.
    """

    def __init__(
        self, now: Callable[[], float] = time.perf_counter, *, run_thread: bool = True
    ) -> None:
        self._now = now
        self._run_thread = run_thread  # (False: a test takes the samples)
        self._lock = threading.Lock()
        self._wake = threading.Condition(self._lock)
        self._threads: dict[int, list[float]] = {}  # trio thread -> its systems' intervals
        # Per trio thread: what its last sample saw -- (frame, cell, handled, since).
        self._seen: dict[int, tuple[FrameType, ActorCell, int, float]] = {}
        self._thread: threading.Thread | None = None

    def add(self, thread_id: int, interval: float) -> None:
        """A system on ``thread_id`` opened, sampled every ``interval`` seconds."""
        with self._lock:
            self._threads.setdefault(thread_id, []).append(interval)
            if self._thread is None and self._run_thread:
                self._thread = threading.Thread(
                    target=self._run, name="trio-actors turn sampler", daemon=True
                )
                self._thread.start()
            self._wake.notify()

    def remove(self, thread_id: int, interval: float) -> None:
        """That system closed."""
        with self._lock:
            intervals = self._threads.get(thread_id)
            if intervals is None or interval not in intervals:
                return
            intervals.remove(interval)
            if not intervals:
                del self._threads[thread_id]
                self._seen.pop(thread_id, None)

    def _run(self) -> None:
        while True:
            with self._lock:
                while not self._threads:
                    self._seen.clear()  # (drop the frames it held)
                    self._wake.wait()
                interval = min(min(intervals) for intervals in self._threads.values())
                self._wake.wait(interval)  # (an add wakes it early: harmless)
            self.sample(self._now())

    def sample(self, now: float) -> None:
        """Take one sample of every trio thread with an open system, at ``now``."""
        with self._lock:
            self._sample(now)

    def _sample(self, now: float) -> None:
        frames = sys._current_frames()
        for thread_id in self._threads:
            found = serving_cell(frames.get(thread_id))
            if found is None:
                self._seen.pop(thread_id, None)
                continue
            frame, cell = found
            handled = cell.handled
            seen = self._seen.get(thread_id)
            if seen is not None and seen[0] is frame and seen[1] is cell and seen[2] == handled:
                _lasted(cell, now - seen[3])
            else:
                self._seen[thread_id] = (frame, cell, handled, now)
        del frames


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

__all__ = ["DEFAULT_TURN_SAMPLING", "SAMPLER", "TurnSampler", "serving_cell"]

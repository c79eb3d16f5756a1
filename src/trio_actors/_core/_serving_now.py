"""What the trio thread serves now: the record the turn sampler reads.

Each system's dispatcher owns one :class:`ServingNow`. The trio thread keeps it up
to date; the turn sampler's thread reads it (``_core/_turn_sampler.py``) through
:meth:`ServingNow.serving`, and nothing else does. Its writers, all on the trio
thread:

* ``cell``, the actor whose plain handler runs now, or ``None``:

  - the dispatcher's round (:meth:`Dispatcher._serve_turns
    <trio_actors._core._dispatcher.Dispatcher._serve_turns>`) stores it once per
    activation, once the actor is ready to be served inline, and clears it when
    the round ends (normally or by an exception) and before a plain ``on_start``
    runs (not a turn);
  - an ask answered in the asker's task (:func:`~trio_actors._core._idle_ask.ask_idle`)
    stores it around the handler's call;

* ``handlers``, the async handlers in progress: actor -> the handler's coroutine,
  from the call to its end (:func:`~trio_actors._core._handler_call.handle_async`).
  A task stops at each ``await`` and others run, so being in progress is not
  running: the reader asks the coroutine (``cr_running`` is true while one of its
  steps runs, whatever it awaits inside).

A record, not the frames: a thread can see another's Python frames
(``sys._current_frames``), but code compiled with mypyc has none, and the runtime's
hot modules are meant to be compilable (issue 34). The runtime never compiles the
user's handlers: their coroutines say whether they run on either build (an
awaitable without ``cr_running`` is never seen running).

Costs on the trio thread, sampled or not (callgrind, ``python -m
benchmarks.ablation``; ``docs/performance.rst``): the dispatcher's store per
activation (~60 instructions, ~1.3 % of a fan-out or ping-pong message); two
stores per ask answered in the asker's task; a dict entry per async message.
Driving each async handler's coroutine through a trampoline that named the actor
around every step instead -- the other way to know which one runs -- measured
~3,900 instructions more per message and ~690 per step (+5.7 % for a handler with
one ``await``). The reader's cost grows with the async handlers in progress
instead, and is the sampler thread's, 20 times a second: a look at each, when no
plain handler runs.

Nothing here is a checkpoint.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._interrupts import protect_module

if TYPE_CHECKING:
    from ._cell import ActorCell


class ServingNow:
    """Whose message the trio thread of one system handles now (see the module
    docstring).

    Attributes:
        cell: the actor whose plain handler runs now, or ``None``.
        handlers: the async handlers in progress, actor -> coroutine.
    """

    __slots__ = ("cell", "handlers")

    def __init__(self) -> None:
        self.cell: ActorCell | None = None
        self.handlers: dict[ActorCell, Any] = {}

    def __repr__(self) -> str:
        cell = self.serving()
        return f"<ServingNow {'nothing' if cell is None else cell.path}>"

    def serving(self) -> ActorCell | None:
        """The actor whose message the trio thread handles now, if any: the plain
        handler's (an ask answered in the asker's task may run inside an async
        handler's step: it is the innermost), else the async handler's whose
        coroutine runs. Called from any thread."""
        cell = self.cell
        if cell is None and self.handlers:
            # (A copy made in one step: the trio thread may change the dict between
            # two steps of a loop over it.)
            for candidate, coroutine in list(self.handlers.items()):
                if getattr(coroutine, "cr_running", False):
                    return candidate
        return cell


protect_module(globals())

__all__ = ["ServingNow"]

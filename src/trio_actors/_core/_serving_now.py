"""What the trio thread serves now: the record the turn sampler reads.

Each system's dispatcher owns one :class:`ServingNow`; its ``cell`` names the actor
whose message the trio thread is handling at this moment, and is ``None`` whenever
the thread runs anything else (another task, trio's scheduler, an ``on_start``,
the dispatcher's own bookkeeping between rounds). The turn sampler's thread reads
it (``_core/_turn_sampler.py``); nothing else does. Its writers, all on the trio
thread:

* the dispatcher's round (:meth:`Dispatcher._serve_turns
  <trio_actors._core._dispatcher.Dispatcher._serve_turns>`): one store per
  activation, once the actor is ready to be served inline; ``None`` when the round
  ends (normally or by an exception) and when a plain ``on_start`` is about to run;
* an ask answered in the asker's task (:func:`~trio_actors._core._idle_ask.ask_idle`):
  around the handler's call, restoring what was there (it may run inside an async
  handler's step);
* an async handler (:func:`~trio_actors._core._handler_call.handle_async`), through
  :func:`publishing`, while the system is sampled: a task stops at each ``await``
  and others run, so the record names the actor for each step of the handler's
  coroutine, not for the whole call.

A record, not the frames: a thread can see another's Python frames
(``sys._current_frames``), but code compiled with mypyc has none, and the runtime's
hot modules are meant to be compilable (issue 34). The cost on the trio thread is
the dispatcher's store per activation and the idle ask's three (measured with
callgrind in ``docs/performance.rst``), and nothing per async step unless a sampler
reads the record.

Nothing here is a checkpoint; :func:`publishing` yields exactly what the handler's
coroutine yields, so the handler's checkpoints are its own, and a cancellation is
delivered to the handler as it would be without it.
"""

from __future__ import annotations

import types
from collections.abc import Coroutine, Generator
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from ._cell import ActorCell


class ServingNow:
    """The actor whose message the trio thread handles now (see the module
    docstring).

    Attributes:
        cell: that actor's cell, or ``None``.
        samplers: how many turn samplers read this record (written under the
            sampler's lock, read by the trio thread): an async handler's steps are
            published only while it is not zero.
    """

    __slots__ = ("cell", "samplers")

    def __init__(self) -> None:
        self.cell: ActorCell | None = None
        self.samplers = 0

    def __repr__(self) -> str:
        cell = self.cell
        return f"<ServingNow {'nothing' if cell is None else cell.path}>"


@types.coroutine
def publishing(
    serving_now: ServingNow, cell: ActorCell, coroutine: Coroutine[Any, Any, Any]
) -> Generator[Any, Any, Any]:
    """Await ``coroutine`` (``cell``'s async handler), with ``serving_now`` naming
    ``cell`` while each of its steps runs, and restored when the step stops.

    A trampoline: what the coroutine yields (trio's traps) goes out unchanged, and
    what comes back in -- a value, or an exception thrown in (``Cancelled``,
    ``KeyboardInterrupt``) -- goes to the coroutine unchanged; its return value or
    exception is this one's. Closed (the awaiting coroutine was), it closes the
    coroutine, as ``await`` would. Not a checkpoint of its own.

    Ctrl-C: trio decides by walking the frames from where the signal landed; this
    generator's code is not marked, so its frame inherits the protection of the
    runtime's frames that await it (the serving task is protected), and the user's
    handler frames stay unprotected (``_core/_kinds.py``) as they are without it.
    """
    send = coroutine.send
    value: Any = None
    thrown: BaseException | None = None
    while True:
        previous = serving_now.cell
        serving_now.cell = cell
        try:
            yielded = send(value) if thrown is None else coroutine.throw(thrown)
        except StopIteration as returned:
            return returned.value
        finally:
            serving_now.cell = previous
            thrown = None  # (no cycle: the exception's traceback holds this frame)
        try:
            value = yield yielded
        except GeneratorExit:
            coroutine.close()  # (as await does: PEP 380)
            raise
        except BaseException as error:
            thrown = error
            value = None


__all__ = ["ServingNow", "publishing"]

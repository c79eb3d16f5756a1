"""Debug mode: the serving invariants, asserted while the runtime runs.

Off by default. On when ``trio_actors`` is imported with the environment variable
``TRIO_ACTORS_DEBUG`` set (to anything but ``""`` or ``"0"``), or from
:func:`enable_serving_checks`; the test suite turns it on for every test
(``tests/conftest.py``). The checks replace methods of the kernel, so they need the
kernel running as Python: on a compiled build, ``TRIO_ACTORS_DEBUG`` set at import
loads the kernel from the source the wheel ships (``_compiled.py``), and
:func:`enable_serving_checks` called on a kernel already running compiled raises.
It makes every tell, every read and change of who serves
an actor and every round of the dispatcher pay for a check, so it is for tests and
for hunting a bug, never for production.

What it checks:

* **who serves**: every change of ``ActorCell.serving`` -- through
  ``hand_over`` and through the inlined writes on the activation path alike -- is a
  pair of :data:`~trio_actors.lifecycle.SERVING_TRANSITIONS`; an actor handed to
  nobody (IDLE) has nothing queued, no queued ask counted and no position of one
  noted;
* **the tell paths**: at every tell from the trio thread with no tell of another
  thread pending, ``fast_tell`` and ``activates`` are what
  ``ActorCell.refresh_tell_paths`` computes;
* **the mailbox**, after every round of the dispatcher, for every actor in its run
  queue: the noted positions of queued asks are exactly where the envelopes are in
  the deque (counted from ``popped``, so never below it), ``asks_queued`` is the
  number of envelopes queued and ``withdrawn_queued`` the number of withdrawn ones
  (in a mailbox longer than 4,096, only that an envelope is at each noted position).

A violation is reported where it is found: by default it raises
:class:`ServingInvariantError` (inside the dispatcher, that ends the system block
with it); :func:`collecting_violations` collects them instead, for a test that
shows the checks catch a broken runtime.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from threading import get_ident
from typing import Any

from trio.lowlevel import enable_ki_protection

from .._interrupts import protect_module
from ._cell import ActorCell
from ._compiled import compiled, debug_requested
from ._dispatcher import Dispatcher
from ._envelope import NO_MESSAGE, Ask, AskState
from ._ref import ActorRef
from ._state import SERVING_TRANSITIONS, Serving


class ServingInvariantError(AssertionError):
    """A serving invariant does not hold (debug mode): always a bug in the runtime."""


def _raise(violation: str) -> None:
    raise ServingInvariantError(violation)


_report: Callable[[str], None] = _raise
_enabled = False
seen_transitions: set[tuple[Serving, Serving]] = set()
"""Every change of who serves an actor seen since the checks were enabled."""


def enabled() -> bool:
    """Whether the checks are installed."""
    return _enabled


@contextmanager
def collecting_violations() -> Iterator[list[str]]:
    """Within the block, violations are appended to the list it gives (instead of
    raised). The checks must be enabled."""
    global _report
    if not _enabled:
        raise RuntimeError("collecting_violations() needs enable_serving_checks() first")
    found: list[str] = []
    saved, _report = _report, found.append
    try:
        yield found
    finally:
        _report = saved


def enable_serving_checks() -> None:
    """Install the checks (for the rest of the process; idempotent).

    Raises:
        RuntimeError: the kernel runs compiled (``trio_actors.compiled``): the checks
            replace its methods, which its compiled callers would never call (set
            ``TRIO_ACTORS_DEBUG`` before importing ``trio_actors`` instead).
    """
    global _enabled
    if _enabled:
        return
    if compiled:
        raise RuntimeError(
            "trio-actors debug mode needs the kernel running as Python: its checks "
            "replace methods of the kernel (ActorRef.tell, the dispatcher's round, who "
            "serves an actor), which the compiled kernel's own callers would never "
            "call. Set TRIO_ACTORS_DEBUG=1 before trio_actors is imported: the kernel "
            "is then loaded from its source, which the compiled wheel ships"
        )
    _enabled = True
    _check_who_serves()
    _check_tell_paths()
    _check_rounds()


def _check_who_serves() -> None:
    # The slot's member descriptor (a base class of the cell defines it).
    slot = next(
        klass.__dict__["serving"] for klass in ActorCell.__mro__ if "serving" in klass.__dict__
    )

    def get(cell: ActorCell) -> Serving:
        return slot.__get__(cell, type(cell))  # type: ignore[no-any-return]

    def set_(cell: ActorCell, to: Serving) -> None:
        try:
            before = slot.__get__(cell, type(cell))
        except AttributeError:
            slot.__set__(cell, to)  # the cell's first write, in __init__
            return
        slot.__set__(cell, to)
        if before is to and to is not Serving.TASK and to is not Serving.RESTART:
            return  # (hand_over refuses these; only an inlined write could make one)
        seen_transitions.add((before, to))
        if (before, to) not in SERVING_TRANSITIONS:
            _report(f"{cell.path} in {cell.state.name}: handed from {before.name} to {to.name}")
        if to is Serving.IDLE:
            left = [
                what
                for what, wrong in (
                    ("messages queued", cell.head is not NO_MESSAGE or bool(cell.mailbox)),
                    (f"asks_queued={cell.asks_queued}", cell.asks_queued != 0),
                    ("ask positions noted", bool(cell.ask_at)),
                    (f"withdrawn_queued={cell.withdrawn_queued}", cell.withdrawn_queued != 0),
                )
                if wrong
            ]
            if left:
                _report(f"{cell.path} in {cell.state.name}: IDLE with {', '.join(left)}")

    # (The runtime's functions are KI-protected, _interrupts.py: so are these.)
    ActorCell.serving = property(  # type: ignore[assignment]
        enable_ki_protection(get), enable_ki_protection(set_)
    )


def _check_tell_paths() -> None:
    tell = ActorRef.tell

    def checked_tell(ref: ActorRef, message: Any) -> None:
        cell = ref._cell
        if (
            not cell.remote
            and get_ident() == cell.dispatcher.thread_id
            and not cell.foreign_pending
        ):
            found = (cell.fast_tell, cell.activates)
            cell.refresh_tell_paths()
            expected = (cell.fast_tell, cell.activates)
            if found != expected:
                _report(
                    f"{cell.path} in {cell.state.name}, {cell.serving.name}: tell paths "
                    f"(fast_tell, activates) were {found}, should be {expected}"
                )
        tell(ref, message)

    ActorRef.tell = enable_ki_protection(checked_tell)  # type: ignore[method-assign, assignment]


def _check_rounds() -> None:
    serve_round = Dispatcher._serve_round

    def checked_round(dispatcher: Dispatcher, run_queue: deque[ActorCell]) -> None:
        serve_round(dispatcher, run_queue)
        for cell in run_queue:
            _check_mailbox(cell)

    Dispatcher._serve_round = enable_ki_protection(checked_round)  # type: ignore[method-assign, assignment]


_WALK_AT_MOST = 4096
"""A longer mailbox is not walked after every round (that would make a long backlog
quadratic): only the noted positions are checked to hold envelopes."""


def _check_mailbox(cell: ActorCell) -> None:
    if len(cell.mailbox or ()) > _WALK_AT_MOST:
        _check_positions_only(cell)
        return
    # One copy, in C (atomic under the GIL): other threads may append tells meanwhile.
    mailbox = list(cell.mailbox or ())
    queued = [cell.head, *mailbox] if cell.head is not NO_MESSAGE else mailbox
    envelopes = [item for item in queued if isinstance(item, Ask)]
    withdrawn = sum(1 for item in envelopes if item.state is AskState.WITHDRAWN)
    positions = list(cell.ask_at or ())
    noted = [cell.popped + i for i, item in enumerate(mailbox) if isinstance(item, Ask)]
    problems = []
    if len(envelopes) != cell.asks_queued:
        problems.append(f"asks_queued={cell.asks_queued} but {len(envelopes)} queued")
    if withdrawn != cell.withdrawn_queued:
        problems.append(f"withdrawn_queued={cell.withdrawn_queued} but {withdrawn} queued")
    if positions != noted:
        problems.append(f"ask positions noted {positions}, queued at {noted}")
    if problems:
        _report(f"{cell.path} in {cell.state.name}: {'; '.join(problems)}")


def _check_positions_only(cell: ActorCell) -> None:
    mailbox = cell.mailbox
    assert mailbox is not None
    for at in cell.ask_at or ():
        index = at - cell.popped
        if not 0 <= index < len(mailbox) or not isinstance(mailbox[index], Ask):
            _report(f"{cell.path} in {cell.state.name}: no ask queued at its noted position {at}")
            return


if debug_requested():
    enable_serving_checks()


protect_module(globals())

__all__ = [
    "ServingInvariantError",
    "collecting_violations",
    "enable_serving_checks",
    "enabled",
    "seen_transitions",
]

"""The trio thread's mark: what ``ActorRef.tell`` asks to know whether it runs on the
thread of its actor's system (``is_owned(mark)``).

A lock the trio thread takes when the system opens and never releases is owned by
that thread exactly: ``RLock._is_owned`` compares its owner's ident with the
caller's, as ``thread_id == get_ident()`` does, but as a method of a C object the
interpreter calls it for ~80 instructions, where the call of ``get_ident`` costs ~370
(callgrind, CPython 3.11: S4 4,918 -> 4,617 instructions per activation).
``_is_owned`` is the lock's own (``threading.Condition`` uses it) but not in the
type stubs, and CPython could drop it: then the mark compares idents, in Python.
Never a checkpoint.
"""

from __future__ import annotations

from collections.abc import Callable
from threading import RLock, get_ident
from typing import Any, Final

from .._interrupts import protect_module

__all__ = ["is_owned", "thread_mark"]


class _IdentMark:
    """The mark where ``RLock`` has no ``_is_owned``: owned by the thread that made
    it."""

    __slots__ = ("_ident",)

    def __init__(self) -> None:
        self._ident = get_ident()

    def acquire(self) -> bool:
        return True  # (owned from the start)

    def _is_owned(self) -> bool:
        return get_ident() == self._ident


def _mark_class() -> Any:
    lock_class = type(RLock())
    return lock_class if hasattr(lock_class, "_is_owned") else _IdentMark


_MARK_CLASS: Final = _mark_class()

is_owned: Final[Callable[[Any], bool]] = _MARK_CLASS._is_owned
"""``is_owned(mark)`` is ``mark._is_owned()``, as a function of the mark's class:
compiled code (the optional compiled kernel) calls a method of a C object by
looking it up on the type every time (~220 instructions, callgrind), the function
in ~50; the interpreter specializes both forms alike."""


def thread_mark() -> Any:
    """A mark owned by the calling thread (for its life): ``is_owned(mark)`` is true
    on that thread only."""
    mark = _MARK_CLASS()
    mark.acquire()
    return mark


protect_module(globals())

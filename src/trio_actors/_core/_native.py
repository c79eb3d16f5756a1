"""How a compiled kernel's classes are built: mypyc's class options, as no-ops in the
pure-Python build.

mypyc reads ``@mypyc_attr(...)`` on a class it compiles (by name: the decorator must
be ``mypy_extensions.mypyc_attr``); at run time, where ``mypy_extensions`` is not
installed (the runtime needs only trio and attrs), the decorator is this module's,
which returns the class unchanged.

``allow_interpreted_subclasses``: a compiled class that interpreted classes extend --
the cell (a bounded mailbox's, a pool's, a remote child's, an observed one), the
ask envelope, the dispatcher (observed). Calls from compiled code still go straight
to the compiled methods unless a subclass overrides them.

``CoroutineType``, ``MethodType``: the types of ``types``, as constants (``Final``):
compiled code reads an imported name from the module's dict (~150 instructions,
every handler's result is checked against the first), a constant of a compiled
module from a C static.

``deque_append``, ``deque_appendleft``, ``deque_popleft``: ``deque``'s methods, to
be called with the deque first (``deque_append(mailbox, message)``). Compiled code
calls ``mailbox.append(message)`` by looking ``append`` up on the deque's type every
time (``PyObject_VectorcallMethod``: ~230 instructions, callgrind), and the method
itself in ~60; the interpreter specializes both forms alike. The kernel's hot paths
(a tell, the serving loop's run queue) use these.
"""

from __future__ import annotations

import types
from collections import deque
from collections.abc import Callable
from typing import Final, TypeVar

from .._interrupts import protect_module

_T = TypeVar("_T")

try:
    from mypy_extensions import mypyc_attr
except ImportError:  # (the runtime does not need mypy_extensions)

    def mypyc_attr(*attrs: str, **kwattrs: object) -> Callable[[_T], _T]:
        """mypyc's class options: nothing, uncompiled."""

        def unchanged(cls: _T) -> _T:
            return cls

        return unchanged


CoroutineType: Final = types.CoroutineType
MethodType: Final = types.MethodType

deque_append: Final = deque.append
deque_appendleft: Final = deque.appendleft
deque_popleft: Final = deque.popleft

protect_module(globals())

__all__ = [
    "CoroutineType",
    "MethodType",
    "deque_append",
    "deque_appendleft",
    "deque_popleft",
    "mypyc_attr",
]

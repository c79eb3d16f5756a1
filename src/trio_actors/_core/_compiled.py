"""Which build of the kernel is running: pure Python, or its hot modules compiled.

The kernel's hot modules -- those every message passes through -- can be compiled
with mypyc into C extension modules (``TRIO_ACTORS_COMPILE=1 pip install .``,
``setup.py``): the same source, the same behaviour, fewer instructions per message
(``docs/performance.rst``, "The compiled kernel"). A source or editable install is
pure Python, as is a wheel built where compiling failed (``setup.py`` says why).

:data:`COMPILED_MODULES` is the one list of what is compiled (``setup.py`` reads it
from this file); :data:`compiled` says whether they all are, in this process.
"""

from __future__ import annotations

import importlib
from importlib.machinery import EXTENSION_SUFFIXES

from .._interrupts import protect_module

COMPILED_MODULES = (
    "trio_actors._core._cell",
    "trio_actors._core._dispatcher",
    "trio_actors._core._envelope",
    "trio_actors._core._foreign",
    "trio_actors._core._handler_call",
    "trio_actors._core._idle_ask",
    "trio_actors._core._native",
    "trio_actors._core._ref",
    "trio_actors._core._round_clock",
    "trio_actors._core._serving_now",
    "trio_actors._core._thread_mark",
)
"""The modules a compiled build compiles (read by ``setup.py`` as a literal)."""


def compiled_modules() -> list[str]:
    """Those of :data:`COMPILED_MODULES` that are extension modules here."""
    found = []
    for name in COMPILED_MODULES:
        origin = importlib.import_module(name).__file__ or ""
        if origin.endswith(tuple(EXTENSION_SUFFIXES)):
            found.append(name)
    return found


compiled: bool = compiled_modules() == list(COMPILED_MODULES)
"""Whether this process runs the compiled kernel (every module of the kernel's
compiled list, ``COMPILED_MODULES``, an extension module here). ``False`` for a
source or editable install, or a wheel built without ``TRIO_ACTORS_COMPILE=1``."""


protect_module(globals())

__all__ = ["COMPILED_MODULES", "compiled", "compiled_modules"]

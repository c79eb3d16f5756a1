"""Which build of the kernel is running: pure Python, or its hot modules compiled.

The kernel's hot modules -- those every message passes through -- can be compiled
with mypyc into C extension modules (``TRIO_ACTORS_COMPILE=1 pip install .``,
``setup.py``): the same source, the same behaviour, fewer instructions per message
(``docs/performance.rst``, "The compiled kernel"). A source or editable install is
pure Python, as is a wheel built where compiling failed (``setup.py`` says why).

:data:`COMPILED_MODULES` is the one list of what is compiled (``setup.py`` reads it
from this file); :data:`compiled` says whether they all are, in this process.

Debug mode runs the kernel from its Python source on either build: its checks
replace methods of the kernel (``_debug.py``), which a compiled kernel's own calls
would never go through. A compiled wheel ships the source of each compiled module
beside it, so with ``TRIO_ACTORS_DEBUG`` set when ``trio_actors`` is imported this
module -- the first to import the kernel -- puts a finder first on
``sys.meta_path`` that loads those modules from their ``.py`` files (and
:data:`compiled` is then ``False``: the kernel runs as pure Python).
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from collections.abc import Sequence
from importlib.abc import MetaPathFinder
from importlib.machinery import EXTENSION_SUFFIXES, ModuleSpec
from types import ModuleType

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


def debug_requested() -> bool:
    """Whether ``TRIO_ACTORS_DEBUG`` asks for debug mode (set to anything but ``""``
    or ``"0"``)."""
    return os.environ.get("TRIO_ACTORS_DEBUG", "") not in ("", "0")


class KernelFromSource(MetaPathFinder):
    """Finds the compiled modules' Python source, for debug mode (module docstring).
    Any other module, or one whose ``.py`` is not there, is left to the other
    finders."""

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> ModuleSpec | None:
        if fullname not in COMPILED_MODULES or not path:
            return None
        file_name = fullname.rpartition(".")[2] + ".py"
        for folder in path:
            source = os.path.join(folder, file_name)
            if os.path.isfile(source):
                return importlib.util.spec_from_file_location(fullname, source)
        return None


def load_kernel_from_source() -> None:
    """Load the compiled modules from their source from now on (idempotent). Only
    before the first import of any of them does it change what runs."""
    if not any(isinstance(finder, KernelFromSource) for finder in sys.meta_path):
        sys.meta_path.insert(0, KernelFromSource())


def compiled_modules() -> list[str]:
    """Those of :data:`COMPILED_MODULES` that are extension modules here."""
    found = []
    for name in COMPILED_MODULES:
        origin = importlib.import_module(name).__file__ or ""
        if origin.endswith(tuple(EXTENSION_SUFFIXES)):
            found.append(name)
    return found


if debug_requested():
    load_kernel_from_source()

compiled: bool = compiled_modules() == list(COMPILED_MODULES)
"""Whether this process runs the compiled kernel (every module of the kernel's
compiled list, ``COMPILED_MODULES``, an extension module here). ``False`` for a
source or editable install, or a wheel built without ``TRIO_ACTORS_COMPILE=1``, or
debug mode (``TRIO_ACTORS_DEBUG``), which loads the kernel from its source."""


protect_module(globals())

__all__ = [
    "COMPILED_MODULES",
    "KernelFromSource",
    "compiled",
    "compiled_modules",
    "debug_requested",
    "load_kernel_from_source",
]

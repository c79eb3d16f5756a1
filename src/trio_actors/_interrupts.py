"""Ctrl-C and the runtime: every function of the runtime is protected, by construction.

trio delivers a ``KeyboardInterrupt`` at once only where protection is off; where it
is on, at the main task's next checkpoint (``trio.lowlevel.enable_ki_protection``).
It decides by walking the interrupted thread's frames out to the first function
marked one way or the other. The runtime's bookkeeping -- a mailbox and its
counts, a stop sequence, a dead letter -- must never be left half updated, so it
must never be where a ``KeyboardInterrupt`` lands; the actors' handlers, which are
the user's code, must stay interruptible (``_core/_kinds.py`` marks them so).

Protecting the entry points alone (a decorator on each public method) is not
enough once part of the kernel is compiled (mypyc, ``docs/performance.rst``):
compiled functions have no frames, and cannot be marked. A compiled function cannot
be interrupted in itself -- the interpreter delivers a signal only between the
bytecodes of interpreted code -- but an interpreted function it calls can, and the
walk from there skips the compiled callers and may reach the user's handler,
unprotected, that called ``ref.tell``: the interrupt would land in the middle of
the tell's bookkeeping. So every runtime module ends with
``protect_module(globals())``, which marks every function and method it defines
(compiled ones have no code object to mark, and need none), and
``tests/test_interrupts.py`` checks that no module of the runtime forgot. The NATS
client (``nats``) and the tools built on the public API (``contracts``,
``sweeps``, ``testing``, ``top``) are not the runtime's bookkeeping and keep
Python's plain behaviour.

Protected does not mean uninterruptible: the interrupt is delivered to the main
task at its next checkpoint, and the runtime's own loops have checkpoints.
"""

from __future__ import annotations

import inspect
from collections.abc import Iterator
from types import FunctionType
from typing import Any

from trio.lowlevel import enable_ki_protection


def runtime_functions(namespace: dict[str, Any]) -> Iterator[FunctionType]:
    """Every interpreted function defined in the module whose globals are
    ``namespace``: its functions, and its classes' methods, properties, static and
    class methods, and the methods attrs generated for its classes (a decorator's
    wrapper is unwrapped to the module's own code; a compiled function is not a
    ``FunctionType``, and is skipped)."""
    filename = namespace.get("__file__")

    def own(candidate: object) -> FunctionType | None:
        if not isinstance(candidate, FunctionType):
            return None
        function = inspect.unwrap(candidate)
        if isinstance(function, FunctionType) and (
            function.__code__.co_filename == filename
            or function.__code__.co_filename.startswith("<attrs generated")
        ):
            return function
        return None

    for value in list(namespace.values()):
        if isinstance(value, type):  # (an imported class's methods are another file's)
            for member in vars(value).values():
                if isinstance(member, property):
                    parts: tuple[object, ...] = (member.fget, member.fset, member.fdel)
                elif isinstance(member, staticmethod | classmethod):
                    parts = (member.__func__,)
                else:
                    parts = (member,)
                for part in parts:
                    if (function := own(part)) is not None:
                        yield function
        elif (function := own(value)) is not None:
            yield function


PROTECTED_MODULES: set[str] = set()
"""The modules :func:`protect_module` has marked (an actor class of the runtime's
keeps its handlers protected: ``_core/_kinds.py``)."""


def protect_module(namespace: dict[str, Any]) -> None:
    """Mark every function and method of a runtime module KI-protected (see the
    module docstring). Called once, at the end of the module, with ``globals()``."""
    for function in runtime_functions(namespace):
        enable_ki_protection(function)
    PROTECTED_MODULES.add(namespace["__name__"])


protect_module(globals())

__all__ = ["PROTECTED_MODULES", "protect_module", "runtime_functions"]

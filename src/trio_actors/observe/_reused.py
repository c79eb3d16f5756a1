"""The classes an observed system runs its kernel with -- subclasses of the kernel's
cell and dispatcher classes, made at run time -- made once per process, not once
per system: :func:`reused_subclass`.

Why: on the compiled build an instance of a class that extends a compiled one never
gives back its reference to its class (mypyc's ``tp_dealloc`` does not release it,
and CPython's ``subtype_dealloc`` leaves that to a base's ``tp_dealloc`` when the
base is a heap type, as mypyc's classes are) -- a reference the collector cannot
see, so such a class, once it had an instance, lives as long as the process. A
class made per system, holding the system's state in class attributes, kept every
closed system's state alive, and the class itself (tests: a closed metered or
traced system leaves nothing alive). So these classes hold nothing of one system:
what they need of it, an instance reaches through its dispatcher (a metered cell
its source through the dispatcher's round clock, a traced cell its spans through
the dispatcher).
"""

from __future__ import annotations

from typing import TypeVar, cast

from .._interrupts import protect_module

__all__ = ["reused_subclass"]

C = TypeVar("C")


def reused_subclass(name: str, mixins: tuple[type, ...], base: type[C], module: str) -> type[C]:
    """The subclass of ``base`` with ``mixins`` before it (and no slot of its own):
    the one made before, while it lives, else a new one named ``name`` in
    ``module``. Found among ``base``'s subclasses, which CPython holds weakly: in the
    pure-Python build a class no system uses any more goes, as any class; in the
    compiled build the one class is reused. Not on a message's path: once per cell
    class and observer, and once per system for its dispatcher."""
    bases: tuple[type, ...] = (*mixins, base)
    for subclass in base.__subclasses__():
        if subclass.__bases__ == bases and subclass.__module__ == module:
            return subclass
    return cast("type[C]", type(name, bases, {"__slots__": (), "__module__": module}))


protect_module(globals())

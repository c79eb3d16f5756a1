"""The names and the instances that spawning checks: an actor's name among its
siblings (given, or generated when asked), and that a factory made a new actor."""

from __future__ import annotations

import re
from typing import TYPE_CHECKING, Any, TypeAlias

from .._core._kinds import HandlerKinds, handler_kinds
from .._interrupts import protect_module
from ._actor import Actor

if TYPE_CHECKING:
    from .._core._cell import ActorCell

__all__ = ["Siblings", "check_instance", "check_name", "free_name"]

_NAME = re.compile(r"[^/\s]+")
# A name that could be a generated one, ``<class name>-<serial>``.
_GENERATED_NAME = re.compile(r"(.+)-([1-9][0-9]{0,30})")
# Sibling actors by name; an actor whose name is generated is keyed by its serial
# number instead, and its name is made when asked (see ActorRef.name).
Siblings: TypeAlias = "dict[str | int, ActorCell]"


def check_instance(factory: Any, instance: object) -> HandlerKinds:
    """Check that ``factory`` made a new actor; return its class's kinds.

    Raises:
        TypeError: it is not an ``Actor``, its class has no ``receive``, or it
            is already spawned.
    """
    if not isinstance(instance, Actor):
        raise TypeError(
            f"spawn({_describe(factory)}) produced {instance!r} of type "
            f"{type(instance).__name__}, not an Actor; the factory must return an "
            "instance of a trio_actors.Actor subclass"
        )
    if instance._trio_actors_cell is not None:
        raise TypeError(
            f"spawn({_describe(factory)}) returned an actor that is already "
            "spawned; the factory must return a new instance each time"
        )
    return handler_kinds(type(instance))


def free_name(base: str, siblings: Siblings | None) -> str:
    """``base``, or ``base.2``, ``base.3`` ... if a sibling has that name."""
    if not siblings or base not in siblings:
        return base
    suffix = 2
    while f"{base}.{suffix}" in siblings:
        suffix += 1
    return f"{base}.{suffix}"


def check_name(
    name: object, siblings: Siblings | None, parent: ActorCell | None, like_generated: set[str]
) -> None:
    """Check ``name`` for a new actor among ``siblings``; a name in the form of a
    generated one adds its class name to ``like_generated``.

    Raises:
        TypeError: it is not a str.
        ValueError: it is empty, contains ``/`` or whitespace, or is taken.
    """
    if not isinstance(name, str):
        raise TypeError(f"actor name must be a str, got {name!r}")
    if not _NAME.fullmatch(name):
        raise ValueError(
            f"actor name {name!r} is invalid: it must be non-empty and contain no '/' or whitespace"
        )
    generated = _GENERATED_NAME.fullmatch(name)
    if generated is not None:
        # From now on, generated names of that class are made (and checked) at
        # spawn: this one may take a future one.
        like_generated.add(generated[1])
    if siblings and (
        name in siblings
        or (
            generated is not None
            and (namesake := siblings.get(int(generated[2]))) is not None
            and namesake.name == name
        )
    ):
        where = "in this system" if parent is None else f"among the children of {parent.path}"
        raise ValueError(f"an actor named {name!r} is already alive {where}")


def _describe(factory: object) -> str:
    return getattr(factory, "__qualname__", None) or repr(factory)


protect_module(globals())

"""What kind of handlers an actor class has, worked out once per class.

Whether ``receive`` and the hooks are plain or ``async def`` decides how the runtime
serves the actor: plain handlers run inline in the serving loop, ``async def`` ones in
a task of their own. Inspecting that on every spawn would cost more than the spawn,
so it is computed once per class and cached; a class found in the cache has been
checked to be an actor class with a ``receive``, which is what lets ``spawn`` skip
those checks (:func:`known_kinds`).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import attrs
import trio

from .._interrupts import PROTECTED_MODULES, protect_module
from .._supervision import ONE_FOR_ONE, GroupStrategy, check_children_strategy
from ._actor import ActorBase


@attrs.frozen
class HandlerKinds:
    """How one actor class's handlers must be called."""

    receive_async: bool
    has_on_start: bool
    on_start_async: bool
    has_on_stop: bool
    on_stop_async: bool
    class_name: str  # the start of the actor's generated names
    expected_errors: tuple[type[Exception], ...] = ()  # Actor.expected_errors, checked
    children_strategy: GroupStrategy = ONE_FOR_ONE  # Actor.children_strategy, checked
    # The cell class of a runtime-made actor class (a pool: actors._pool.PoolCell);
    # None for every user class (ActorCell, or BoundedCell with a bounded mailbox).
    cell_class: Any = None
    # A task is needed to serve the actor while receive is async, or until an async
    # on_start has run.
    needs_task: bool = attrs.field(init=False)

    @needs_task.default
    def _needs_task(self) -> bool:
        return self.receive_async or self.on_start_async


_cache: dict[type, HandlerKinds] = {}


def _is_async(function: Callable[..., Any]) -> bool:
    return inspect.iscoroutinefunction(function)


def handler_kinds(cls: type[ActorBase]) -> HandlerKinds:
    """Return (and cache) the :class:`HandlerKinds` of an actor class.

    Raises:
        TypeError: the class does not define ``receive``.
    """
    kinds = _cache.get(cls)
    if kinds is None:
        if cls.receive is ActorBase.receive:
            raise TypeError(
                f"{cls.__qualname__} does not define receive(self, message); "
                "every actor needs a receive method (plain or async def)"
            )
        if not callable(cls.receive):
            raise TypeError(
                f"{cls.__qualname__}.receive is {cls.receive!r}, not a method; define "
                "receive(self, message) (plain or async def)"
            )
        if inspect.isasyncgenfunction(cls.receive) or inspect.isgeneratorfunction(cls.receive):
            raise TypeError(
                f"{cls.__qualname__}.receive is a generator function; an ask's reply is "
                "what receive returns, so it must be a plain or async def that returns"
            )
        _without_ki_protection(cls)
        kinds = HandlerKinds(
            receive_async=_is_async(cls.receive),
            has_on_start=cls.on_start is not ActorBase.on_start,
            on_start_async=_is_async(cls.on_start),
            has_on_stop=cls.on_stop is not ActorBase.on_stop,
            on_stop_async=_is_async(cls.on_stop),
            class_name=cls.__name__,
            expected_errors=_expected_errors(cls),
            children_strategy=check_children_strategy(cls.__qualname__, cls.children_strategy),
            cell_class=getattr(cls, "_trio_actors_cell_class", None),
        )
        _cache[cls] = kinds
    return kinds


def _expected_errors(cls: type[ActorBase]) -> tuple[type[Exception], ...]:
    """The class's ``expected_errors``, checked to be a tuple of ``Exception`` classes.

    Raises:
        TypeError: naming the class and what is wrong with the value.
    """
    value: object = cls.expected_errors
    where = f"{cls.__qualname__}.expected_errors"
    if isinstance(value, type):
        raise TypeError(
            f"{where} must be a tuple of exception classes, got the class "
            f"{value.__qualname__}; write ({value.__qualname__},)"
        )
    if not isinstance(value, tuple):
        raise TypeError(f"{where} must be a tuple of exception classes, got {value!r}")
    for item in value:
        if not (isinstance(item, type) and issubclass(item, Exception)):
            raise TypeError(
                f"{where} must hold Exception subclasses only, got {item!r} (a "
                "KeyboardInterrupt, Cancelled or other BaseException is never a reply)"
            )
    return value


def _without_ki_protection(cls: type[ActorBase]) -> None:
    """Let Ctrl-C interrupt the class's own handlers, as it would any trio task.

    The runtime's code is protected from ``KeyboardInterrupt`` (trio then delivers
    it at a checkpoint of the main task, between the runtime's steps, never in the
    middle of one); code that runtime code calls inherits that protection, so an
    inline plain handler stuck in a loop could not be interrupted. Marking the
    handlers' code unprotected ends the inheritance at them. (trio's marks are per
    code object, so a call costs nothing.)
    """
    for name in ("__init__", "receive", "on_start", "on_stop"):
        function = getattr(cls, name)
        if (
            function is not getattr(ActorBase, name)
            and hasattr(function, "__code__")
            and function.__module__ not in PROTECTED_MODULES  # (the runtime's own actors')
        ):
            trio.lowlevel.disable_ki_protection(function)


known_kinds: Callable[[type], HandlerKinds | None] = _cache.get
"""The kinds of an actor class :func:`handler_kinds` has checked, or ``None``."""


protect_module(globals())

__all__ = ["HandlerKinds", "handler_kinds", "known_kinds"]

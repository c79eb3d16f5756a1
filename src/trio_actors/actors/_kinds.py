"""What kind of handlers an actor class has, worked out once per class.

Whether ``receive`` and the hooks are plain or ``async def`` decides how the runtime
serves the actor: plain handlers run inline in the serving loop, ``async def`` ones in
a task of their own. Inspecting that on every spawn would cost more than the spawn,
so it is computed once per class and cached.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import attrs

from ._actor import Actor


@attrs.frozen
class HandlerKinds:
    """How one actor class's handlers must be called."""

    receive_async: bool
    has_on_start: bool
    on_start_async: bool
    has_on_stop: bool
    on_stop_async: bool


_cache: dict[type, HandlerKinds] = {}


def _is_async(function: Callable[..., Any]) -> bool:
    return inspect.iscoroutinefunction(function)


def handler_kinds(cls: type[Actor]) -> HandlerKinds:
    """Return (and cache) the :class:`HandlerKinds` of an actor class.

    Raises:
        TypeError: the class does not define ``receive``.
    """
    kinds = _cache.get(cls)
    if kinds is None:
        if cls.receive is Actor.receive:
            raise TypeError(
                f"{cls.__qualname__} does not define receive(self, message); "
                "every actor needs a receive method (plain or async def)"
            )
        kinds = HandlerKinds(
            receive_async=_is_async(cls.receive),
            has_on_start=cls.on_start is not Actor.on_start,
            on_start_async=_is_async(cls.on_start),
            has_on_stop=cls.on_stop is not Actor.on_stop,
            on_stop_async=_is_async(cls.on_stop),
        )
        _cache[cls] = kinds
    return kinds


__all__ = ["HandlerKinds", "handler_kinds"]

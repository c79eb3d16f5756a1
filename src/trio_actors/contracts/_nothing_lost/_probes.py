"""T21's probes: the actors a program runs, which record what their handlers see.

A probe's handler counts every program message it is invoked for (``invoked``,
shared by the whole run: a message handled twice shows up as a count of two), costs
the virtual time its spec says, and then replies, fails, raises an expected error or
raises ``KeyboardInterrupt``, as the step's :func:`~._program.message_fail` told it.
Besides the program's messages, a probe spawns children during the setup
(:class:`_SpawnChild`), watches and unwatches other actors from its handler
(:class:`_Watch`) and counts the ``Terminated`` notices it gets (``notices``).

The class names show in actor paths (and so in T31's messages); they are kept.
"""

from __future__ import annotations

import functools
from collections import Counter
from typing import Any

import attrs
import trio
import trio.testing

from ... import Actor, ActorRef, OneForAll, RestForOne, Terminated


class _Failure(Exception):
    pass


class _Expected(Exception):
    """An expected error: the probes' reply, not their failure."""


class _Probe(Actor):
    """Records every message its handler is invoked for; costs virtual time."""

    expected_errors = (_Expected,)

    def __init__(
        self,
        clock: trio.testing.MockClock,
        cost: float,
        invoked: Counter[int],
        notices: Counter[tuple[int, Any]],
        index: int,
    ) -> None:
        self.clock = clock
        self.cost = cost
        self.invoked = invoked
        self.notices = notices
        self.index = index

    def receive(self, message: Any) -> Any:
        if type(message) is _SpawnChild:
            return self.spawn(*message.args, **message.options)
        if isinstance(message, Terminated):
            self.notices[self.index, message.ref] += 1
            return None
        if type(message) is _Watch:
            if message.watch:
                self.watch(message.target)
            else:
                self.unwatch(message.target)
            return None
        ident, fail = message
        self.invoked[ident] += 1
        if fail == "interrupt":
            raise KeyboardInterrupt(f"injected by program step {ident}")
        if self.cost:
            self.clock.jump(self.cost)
        if fail == "expected":
            raise _Expected(ident)
        if fail:
            raise _Failure(ident)
        return ident


@attrs.frozen
class _Watch:
    """Told to a probe: watch (or unwatch) ``target`` from its handler."""

    target: ActorRef
    watch: bool


@attrs.frozen
class _SpawnChild:
    """Asked of a probe during the program's setup: spawn a child, reply its ref."""

    args: tuple[Any, ...]
    options: dict[str, Any]


class _AsyncProbe(_Probe):
    async def receive(self, message: Any) -> Any:
        if isinstance(message, Terminated | _Watch | _SpawnChild):
            return super().receive(message)  # (watch and unwatch from an async handler)
        ident, fail = message
        self.invoked[ident] += 1
        if fail == "interrupt":
            raise KeyboardInterrupt(f"injected by program step {ident}")
        if self.cost:
            await trio.sleep(self.cost)
        if fail == "expected":
            raise _Expected(ident)
        if fail:
            raise _Failure(ident)
        return ident


_GROUP_STRATEGIES = {
    "one_for_all": OneForAll(max_restarts=1_000_000, within=1.0),
    "rest_for_one": RestForOne(max_restarts=1_000_000, within=1.0),
}


@functools.cache
def probe_class(is_async: bool, group: str) -> type[_Probe]:
    """The probe class for a handler kind and a group strategy (one class each)."""
    base = _AsyncProbe if is_async else _Probe
    if group == "one_for_one":
        return base
    return type(
        f"{base.__name__}_{group}", (base,), {"children_strategy": _GROUP_STRATEGIES[group]}
    )


__all__ = ["probe_class"]

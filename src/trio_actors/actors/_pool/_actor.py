"""``Pool``, the factory a pool is spawned from, and ``PoolActor``, its own actor."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs

from ..._core._bounded import Bounded
from ..._core._cell import ActorCell
from ..._core._state import ActorState
from ..._core._stopping import DEFAULT_SHUTDOWN, check_shutdown
from ..._core._watch import Terminated
from ..._interrupts import protect_module
from ..._policy import positive_int
from ..._supervision import DEFAULT_SUPERVISION, Supervision, check_strategy
from .._actor import Actor
from ._cell import PoolCell
from ._messages import ROUTINGS, Routing

__all__ = ["Pool", "PoolActor"]


def _check_routing(instance: Any, attribute: attrs.Attribute[Any], value: object) -> None:
    if value not in ROUTINGS:
        raise ValueError(
            f"Pool.routing must be 'round_robin', 'smallest_mailbox' or 'balancing', got {value!r}"
        )


@attrs.frozen
class Pool:
    """A pool of workers behind one ref; pass it to ``spawn`` as the factory.

    Args:
        worker: the workers' ``Actor`` subclass or factory (called once per worker,
            and again for each restart), with ``args``.
        size: how many workers (``>= 1``).
        routing: ``"round_robin"`` (the default), ``"smallest_mailbox"`` or
            ``"balancing"`` (see the module).
        supervision: each worker's strategy (default ``Restart()``).
        mailbox: each worker's mailbox (``None``: unbounded; a
            :class:`~trio_actors.Bounded`). The workers of a balancing pool share
            the pool's queue, so there it bounds that queue: ``send`` and ``ask``
            to a pool with ``capacity`` messages waiting wait for room, ``tell``
            meets the overflow policy.
        shutdown: each worker's shutdown timeout.
    """

    worker: Callable[..., Actor]
    args: tuple[Any, ...] = ()
    size: int = attrs.field(default=4, validator=positive_int)
    routing: Routing = attrs.field(default="round_robin", validator=_check_routing)
    supervision: Supervision = DEFAULT_SUPERVISION
    mailbox: Bounded | None = None
    shutdown: float = DEFAULT_SHUTDOWN

    def __attrs_post_init__(self) -> None:
        if not callable(self.worker):
            raise TypeError(
                f"Pool.worker must be an Actor subclass or factory, got {self.worker!r}"
            )
        if not isinstance(self.args, tuple):
            raise TypeError(f"Pool.args must be a tuple, got {self.args!r}")
        if self.supervision is not DEFAULT_SUPERVISION:
            check_strategy(self.supervision)
        if self.mailbox is not None and not isinstance(self.mailbox, Bounded):
            raise TypeError(f"Pool.mailbox must be None or a Bounded, got {self.mailbox!r}")
        if self.shutdown is not DEFAULT_SHUTDOWN:
            check_shutdown(self.shutdown)

    def __call__(self) -> PoolActor:
        return PoolActor(self)


class PoolActor(Actor):
    """The pool's own actor: spawns the workers, and hears of their ends."""

    _trio_actors_cell_class: type[ActorCell]  # PoolCell, set below

    def __init__(self, config: Pool) -> None:
        self.config = config

    def on_start(self) -> None:
        pool = self._pool()
        if pool.state is ActorState.DRAINING:
            # Restarted while a drain was asked for: a draining actor spawns no
            # children, and a pool without workers has nobody to drain to -- it
            # stops (what it holds is stranded: asks fail back, tells are letters).
            pool.ready.set()
            pool.begin_stop(drain=False, cancel_handler=False)
            return
        pool.grow(self.config.size)

    def on_stop(self) -> None:
        # (Also when the pool restarts: its workers have stopped by now, and the
        # fresh instance's on_start spawns new ones.)
        self._pool().workers_gone()

    def receive(self, message: Any) -> Any:
        if type(message) is Terminated:  # a worker stopped
            pool = self._pool()
            pool.worker_notices += 1  # (the runtime's message, not counted as handled)
            pool.worker_ended(message.ref)
        return None

    def _pool(self) -> PoolCell:
        cell = self._trio_actors_cell
        assert isinstance(cell, PoolCell)
        return cell


PoolActor._trio_actors_cell_class = PoolCell


protect_module(globals())

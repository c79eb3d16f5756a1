"""A metered system: the observer (``_core/_observer.py``) that feeds a system's
:class:`~trio_actors.observe._source.MetricsSource` from the kernel's hooks, and
times asks.

* a stopped actor's counts go to its class's retired totals (``retired``);
* dead letters by recipient class (another node's actor: by peer) and reason;
* an ``async`` handler's turns, as its serving task times them;
* **asks**, from ``ask()`` to their end, by target class and outcome: a local
  actor's through its cell class (a subclass chosen at spawn, whose
  ``ask_message`` times one ask in ``Metrics.asks_timed_every``: the wrapper
  costs about a third of the cheapest ask), another node's -- each one -- through
  the node's observer.

Everything runs in the trio thread; nothing is a checkpoint but the asks' own
awaits.
"""

from __future__ import annotations

from collections.abc import Callable, Coroutine
from contextlib import AbstractContextManager, nullcontext
from typing import TYPE_CHECKING, Any, cast

import trio

from .._core._cell import ActorCell
from .._core._dispatcher import Dispatcher
from .._interrupts import protect_module
from ..actors._pool._cell import PoolCell
from ._instruments import Attributes, meter_of, registry_for
from ._outcomes import outcome_of
from ._reused import reused_subclass
from ._source import MetricsSource
from ._turns import MeteredRoundClock

if TYPE_CHECKING:
    from .._core._dead_letters import DeadLetterReason
    from .._core._observer import Lifecycle
    from .._core._ref import ActorRef
    from ..actors import ActorSystem
    from ..nats import Headers
    from ..remote._inbound import Answers, RemoteAsk
    from ..remote._node import Node
    from . import Metrics

__all__ = ["MetricsObserver"]


async def _timed(
    source: MetricsSource, attributes: Attributes, asking: Coroutine[Any, Any, Any]
) -> Any:
    """Await ``asking``; give its time and outcome to ``source``."""
    now = source.now
    start = now()
    try:
        answer = await asking
    except BaseException as error:
        source.ask_ended(attributes, outcome_of(error), now() - start)
        raise
    source.ask_ended(attributes, "value", now() - start)
    return answer


class _AsksTimed(ActorCell):
    """A cell whose asks are timed (the mixin of :meth:`MetricsObserver.cell_class`;
    first in the subclass's bases, so its ``ask_message`` comes first). It finds its
    system's source through its dispatcher's round clock: the class holds nothing of
    one system (see :func:`_timed_cell_class`)."""

    __slots__ = ()

    def ask_message(self, message: Any) -> Coroutine[Any, Any, Any]:
        if isinstance(self.parent, PoolCell):  # (a pool routing its ask: timed there)
            return super().ask_message(message)
        source = cast(MeteredRoundClock, self.dispatcher.clock).source  # (attach sets it)
        source.asks_until_timed -= 1
        if source.asks_until_timed:  # (not this one: counted as left out)
            source.asks_not_timed += 1
            return super().ask_message(message)
        source.asks_until_timed = source.options.asks_timed_every
        try:
            asking = super().ask_message(message)
        except Exception as error:  # (refused before it was sent: a stopped actor...)
            source.ask_ended(source.class_of(self), outcome_of(error), 0.0)
            raise
        return _timed(source, source.class_of(self), asking)


def _timed_cell_class(base: type[ActorCell]) -> type[ActorCell]:
    """The subclass of ``base`` whose asks are timed: one per process, holding
    nothing of a system (:func:`~._reused.reused_subclass` says why: made per system,
    holding the system's source in a class attribute, it kept every metered system
    alive after it closed on the compiled build --
    test_closed_systems_are_not_kept_alive_by_their_metrics)."""
    return reused_subclass(f"Metered{base.__name__}", (_AsksTimed,), base, __name__)


class _NodeAsksTimed:
    """What a metered node calls (``remote/_observed.NodeObserver``): its asks to
    other nodes' actors and shared names are timed; nothing else changes."""

    def __init__(self, source: MetricsSource) -> None:
        self.source = source

    def ask(
        self, to: Any, message: Any, send: Callable[[Headers | None], Coroutine[Any, Any, Any]]
    ) -> Coroutine[Any, Any, Any]:
        peer = getattr(to, "peer", None)
        where = peer[0] if isinstance(peer, tuple) else f"shared:{getattr(to, 'shared_name', '?')}"
        return _timed(self.source, self.source.remote_attributes(where), send(None))

    def received_ask(
        self, cell: ActorCell, message: Any, answers: Answers, reply: str, headers: Headers
    ) -> RemoteAsk | None:
        return None

    def told(self, to: Any, message: Any, tell: Callable[[Any, Any], None]) -> None:
        tell(to, message)


class MetricsObserver:
    """The observer of a metered system (``open_actor_system(metrics=...)``): made
    before the system, which it observes once :meth:`attach` has made its source."""

    def __init__(self, options: Metrics) -> None:
        self.options = options
        self.source: MetricsSource | None = None
        self._cell_classes: dict[type[ActorCell], type[ActorCell]] = {}

    def attach(self, system: ActorSystem) -> MetricsSource:
        """Make ``system`` (opening: its dispatcher not yet running) a source of the
        instruments of the options' meter, fed by this observer and a metered round
        clock; collections read it until it closes (:meth:`MetricsSource.close`)."""
        options = self.options
        registry = registry_for(meter_of(options))
        source = self.source = MetricsSource(system, options, registry.histograms)
        dispatcher = system._dispatcher
        dispatcher.clock = MeteredRoundClock(
            dispatcher.policy, trio.lowlevel.current_clock(), source, options.turns_timed_every
        )
        source.on_closed = registry.closed
        registry.add(source)
        return source

    def _source(self) -> MetricsSource:
        source = self.source
        assert source is not None, "a metered system's source is set as it opens"
        return source

    def cell_class(self, base: type[ActorCell]) -> type[ActorCell]:
        timed = self._cell_classes.get(base)
        if timed is None:
            timed = self._cell_classes[base] = _timed_cell_class(base)
        return timed

    def dispatcher_class(self, base: type[Dispatcher]) -> type[Dispatcher]:
        return base  # (its round clock is replaced: attach)

    def failed(self, cell: ActorCell, error: BaseException, where: str) -> None:
        pass  # (counted by the cell itself: the walk reads it)

    def lifecycle(self, cell: ActorCell, what: Lifecycle) -> AbstractContextManager[None]:
        return nullcontext()

    def retired(self, cell: ActorCell) -> None:
        self._source().retire(cell)

    def dead_letters(self, recipient: ActorRef, reason: DeadLetterReason, count: int) -> None:
        self._source().dead_lettered(recipient, reason, count)

    def async_turn(self, cell: ActorCell, seconds: float) -> None:
        self._source().turn(cell, seconds, "async")

    def node_observer(self, node: Node) -> _NodeAsksTimed:
        return _NodeAsksTimed(self._source())


protect_module(globals())

"""The instruments of a system's metrics (their names, kinds and units, the
attribute keys of their series) and the :class:`Registry` that makes them, once per
OpenTelemetry meter, with callbacks that read every system measured on that meter
(``_source.py``).

A meter's instruments are made once (the SDK keeps the first instrument of a name
and drops a second one's callbacks). The SDK calls the callbacks of one collection
in the order the instruments were made: the first one's begins a collection, and
every instrument of it reads the snapshot each system took for it -- one walk per
system and collection. Callbacks run in the exporter's thread; they never read trio
state (``MetricsSource.snapshot``).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable
from typing import TYPE_CHECKING, Any
from weakref import WeakKeyDictionary

import attrs
from opentelemetry.metrics import CallbackOptions, Histogram, Meter, Observation

import trio_actors

from .._interrupts import protect_module

if TYPE_CHECKING:
    from . import Metrics
    from ._source import MetricsSource, Snapshot

__all__ = [
    "BUCKETS",
    "INSTRUMENTS",
    "Attributes",
    "Instrument",
    "Registry",
    "meter_of",
    "registry_for",
]

NODE = "trio_actors.node"
CLASS = "trio_actors.actor.class"
PATH = "trio_actors.actor.path"
PEER = "trio_actors.peer"
REASON = "trio_actors.dead_letter.reason"
TURN_KIND = "trio_actors.turn.kind"
BAD_INPUT_KIND = "trio_actors.bad_input.kind"
INSTRUMENT = "trio_actors.instrument"

# Histogram buckets (seconds): from a cheap handler's turn to a slow ask.
BUCKETS = (1e-5, 5e-5, 1e-4, 5e-4, 1e-3, 5e-3, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0)

Attributes = tuple[tuple[str, str], ...]  # (sorted: hashable, and equal sets are equal)


@attrs.frozen
class Instrument:
    """One instrument: its name, kind, unit and description."""

    name: str
    kind: str  # "counter", "updown", "gauge" (observable) or "histogram"
    unit: str
    description: str


INSTRUMENTS = (
    Instrument(
        "trio_actors.messages.handled",
        "counter",
        "{message}",
        "Messages handled by actors, per actor class (stopped actors' included).",
    ),
    Instrument(
        "trio_actors.dead_letters",
        "counter",
        "{message}",
        "Messages no handler took, per recipient class (or peer, for another "
        "node's actor) and reason.",
    ),
    Instrument(
        "trio_actors.tells.in_doubt",
        "counter",
        "{message}",
        "Tells to other nodes whose fate is unknown (given back in doubt), per peer.",
    ),
    Instrument(
        "trio_actors.mailbox.depth",
        "updown",
        "{message}",
        "Messages queued, summed over the actors of a class.",
    ),
    Instrument(
        "trio_actors.mailbox.depth.max",
        "gauge",
        "{message}",
        "The deepest mailbox among the actors of a class.",
    ),
    Instrument("trio_actors.actors.live", "updown", "{actor}", "Live actors, per actor class."),
    Instrument("trio_actors.restarts", "counter", "{restart}", "Restarts, per actor class."),
    Instrument(
        "trio_actors.failures",
        "counter",
        "{failure}",
        "Handler failures, per actor class.",
    ),
    Instrument(
        "trio_actors.cluster.members",
        "updown",
        "{node}",
        "The nodes this node sees up in its cluster (itself included).",
    ),
    Instrument(
        "trio_actors.node.bad_input",
        "counter",
        "{message}",
        "Messages from the wire this node could not take, per kind.",
    ),
    Instrument(
        "trio_actors.histogram.unsampled",
        "counter",
        "{observation}",
        "Observations left out of a histogram's sample, per instrument.",
    ),
    Instrument(
        "trio_actors.turn.duration",
        "histogram",
        "s",
        "Turn times, as the round clock attributes them to one actor (inline "
        "handlers) or as an async handler's serving task measures them.",
    ),
    Instrument(
        "trio_actors.ask.duration",
        "histogram",
        "s",
        "Ask latency, from ask() to its end, per target class and outcome.",
    ),
)


_COUNTERS = frozenset(i.name for i in INSTRUMENTS if i.kind == "counter")


class Registry:
    """The instruments of one meter and the systems they observe. A meter's
    instruments are made once (the SDK keeps the first instrument of a name and
    drops a second one's callbacks), and each observable's callback reads every
    live source, summing equal attribute sets.

    A counter never goes down (an exporter reads a counter that decreases as a
    reset: Prometheus' ``rate()`` would show a spike). So when a system closes, its
    last counts stay in the registry's :attr:`retired` totals, added to every later
    collection -- the registry keeps those numbers, not the system; its up-down
    counters and gauges (live actors, queued messages) end with it.
    """

    def __init__(self, meter: Meter) -> None:
        self.sources: list[MetricsSource] = []
        self.histograms: dict[str, Histogram] = {}
        self.collection = 0
        # The counters of closed systems, by instrument and attribute set.
        self.retired: dict[str, dict[Attributes, float]] = {name: {} for name in _COUNTERS}
        self._lock = threading.Lock()
        leader = True
        for instrument in INSTRUMENTS:
            if instrument.kind == "histogram":
                self.histograms[instrument.name] = meter.create_histogram(
                    instrument.name,
                    unit=instrument.unit,
                    description=instrument.description,
                    explicit_bucket_boundaries_advisory=list(BUCKETS),
                )
                continue
            make: Callable[..., Any] = {
                "counter": meter.create_observable_counter,
                "updown": meter.create_observable_up_down_counter,
                "gauge": meter.create_observable_gauge,
            }[instrument.kind]
            make(
                instrument.name,
                callbacks=[self._callback(instrument, leader)],
                unit=instrument.unit,
                description=instrument.description,
            )
            leader = False

    def add(self, source: MetricsSource) -> None:
        with self._lock:
            self.sources.append(source)

    def closed(self, source: MetricsSource, last: Snapshot | None) -> None:
        """``source``'s system has closed (trio thread) with ``last`` its final
        snapshot: its counters go to the retired totals, and the registry forgets
        the system."""
        with self._lock:
            self.sources = [s for s in self.sources if s is not source]
            if last is None:
                return
            for name, totals in self.retired.items():
                for value, attributes in last.series.get(name, ()):
                    totals[attributes] = totals.get(attributes, 0) + value

    def _callback(
        self, instrument: Instrument, leader: bool
    ) -> Callable[[CallbackOptions], Iterable[Observation]]:
        combine: Callable[[float, float], float] = (
            max if instrument.kind == "gauge" else lambda a, b: a + b
        )
        name = instrument.name

        def observe(options: CallbackOptions) -> Iterable[Observation]:
            snapshots, values = self._snapshots(leader, name)
            for snapshot in snapshots:
                for value, attributes in snapshot.series.get(name, ()):
                    before = values.get(attributes)
                    values[attributes] = value if before is None else combine(before, value)
            return [Observation(value, dict(key)) for key, value in values.items()]

        return observe

    def _snapshots(self, leader: bool, name: str) -> tuple[list[Snapshot], dict[Attributes, float]]:
        """Each live source's snapshot for the current collection, and the retired
        totals of instrument ``name`` -- read together, so that a system closing
        meanwhile counts once: in its last snapshot, or in the totals. The SDK calls
        the callbacks of one collection in the order the instruments were made: the
        first one's (the ``leader``) begins a collection, and the others read the
        snapshots taken for it -- one walk per system and collection. (Called in
        another order, a callback takes a snapshot of its own: never a stale one.)"""
        with self._lock:
            if leader:
                self.collection += 1
            collection = self.collection
            sources = list(self.sources)
            retired = dict(self.retired.get(name, {}))
        snapshots = []
        for source in sources:
            snapshot = source.snapshot(collection)
            if snapshot is not None:
                snapshots.append(snapshot)
        return snapshots, retired


_registries: WeakKeyDictionary[Meter, Registry] = WeakKeyDictionary()
_registries_lock = threading.Lock()


def registry_for(meter: Meter) -> Registry:
    """The instruments of ``meter`` (made at its first system)."""
    with _registries_lock:
        registry = _registries.get(meter)
        if registry is None:
            registry = _registries[meter] = Registry(meter)
        return registry


def meter_of(options: Metrics) -> Meter:
    """The meter of the options' provider (or the global one)."""
    from opentelemetry import metrics

    provider = options.provider if options.provider is not None else metrics.get_meter_provider()
    with _registries_lock:  # (one meter per provider: the global proxy makes one per call)
        meter = _meters.get(provider)
        if meter is None:
            meter = _meters[provider] = provider.get_meter("trio_actors", trio_actors.__version__)
        return meter


_meters: WeakKeyDictionary[Any, Meter] = WeakKeyDictionary()


protect_module(globals())

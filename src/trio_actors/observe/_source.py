"""A system as a source of metrics (``open_actor_system(metrics=...)``): what its
actors did, read in the trio thread, for the instruments of ``_instruments.py``.

Nothing here runs on a serving path. The numbers come from three places:

* **a walk** of the live actors, in the trio thread, when an exporter collects:
  messages handled, mailbox depths, live actors, restarts and failures, per actor
  class (``MetricsSource.take``). Actors that stopped leave their counts in
  *retired* totals (``MetricsSource.retired``), so a counter never goes down when
  its actors stop (Prometheus reads a counter that decreases as a reset);
* **a few hooks** on paths S1-S4 never take: a stopped actor released, a dead
  letter, an async turn's end, an ask's end;
* **the round clock's own readings** (``MeteredRoundClock``): the time it
  attributes to one actor's turn, the interval the ``longest_turn`` statistic uses,
  with no clock read added.

Histogram observations (turn and ask durations) are kept in a bounded uniform
sample between collections (``Reservoir``) and recorded at collection: a
``Histogram.record`` costs microseconds, which per turn would double the cost of a
cheap handler. What the sample leaves out is counted
(``trio_actors.histogram.unsampled``), so a histogram's count can be scaled.

**Threads.** Exporters collect in their own thread (the periodic reader's, or a
Prometheus scrape's). A callback never reads trio state: it asks the trio thread
for a snapshot (``trio_token.run_sync_soon``) and waits at most
``Metrics.wait`` seconds; a trio thread busier than that, or a system that has
closed, gives the last snapshot taken. In the trio thread itself (an
``InMemoryMetricReader`` in a test) the snapshot is taken at once. Snapshots are
immutable; one taken for a collection serves every instrument of that collection
(one walk per system and collection, not one per instrument: ``Registry``).
"""

from __future__ import annotations

import logging
import math
import random
import threading
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping
from threading import get_ident
from typing import TYPE_CHECKING, Any

import attrs
import trio
from opentelemetry.metrics import Histogram

from .._core._cell import ActorCell
from .._core._round_clock import clock_reader
from .._interrupts import protect_module
from ..actors._census import live_cells, mailbox_depth
from ._instruments import (
    BAD_INPUT_KIND,
    CLASS,
    INSTRUMENT,
    NODE,
    PATH,
    PEER,
    REASON,
    TURN_KIND,
    Attributes,
)
from ._outcomes import OUTCOME

if TYPE_CHECKING:
    from ..actors import ActorRef, ActorSystem
    from . import Metrics

__all__ = ["MetricsSource", "Reservoir", "Snapshot"]

_logger = logging.getLogger("trio_actors.observe")


class Reservoir:
    """A uniform sample of at most ``size`` observations of one histogram between
    two collections, and how many it saw: Li's algorithm L, which draws how many
    observations to skip before the next one kept, so that an observation past
    the first ``size`` costs a comparison, not a random number."""

    __slots__ = ("_next", "_random", "_weight", "samples", "seen", "size")

    def __init__(self, size: int, rng: random.Random) -> None:
        self.size = size
        self._random = rng
        self.samples: list[tuple[Attributes, float]] = []
        self.seen = 0
        self._weight = 1.0
        self._next = size  # (the number of the next observation kept past the first size)

    def add(self, attributes: Attributes, value: float) -> None:
        seen = self.seen
        self.seen = seen + 1
        if seen < self.size:
            self.samples.append((attributes, value))
            if seen + 1 == self.size:
                self._draw()
        elif seen == self._next:
            self.samples[self._random.randrange(self.size)] = (attributes, value)
            self._draw()

    def _draw(self) -> None:
        """The next observation to keep (algorithm L's skip)."""
        rng = self._random
        self._weight *= math.exp(math.log(rng.random() or 1e-300) / self.size)
        skip = math.log(rng.random() or 1e-300) / math.log1p(-self._weight or -1e-300)
        self._next = self.seen + int(skip)

    def take(self) -> tuple[list[tuple[Attributes, float]], int]:
        """The sample and how many observations it left out; empty again after."""
        samples, left_out = self.samples, self.seen - len(self.samples)
        self.samples, self.seen = [], 0
        self._weight, self._next = 1.0, self.size
        return samples, left_out


@attrs.frozen
class Snapshot:
    """One system's observations at one time: per instrument, (value, attributes)
    pairs. Immutable: another thread reads it without a lock."""

    collection: int  # (the registry's count of collections when it was taken)
    series: Mapping[str, tuple[tuple[float, Attributes], ...]]


class _ClassTotals:
    """Per actor class (and, for actors the options name, per path)."""

    __slots__ = ("depth", "depth_max", "failures", "handled", "live", "restarts")

    def __init__(self) -> None:
        self.live = self.handled = self.depth = self.depth_max = 0
        self.restarts = self.failures = 0

    def add(self, other: _ClassTotals) -> None:
        self.live += other.live
        self.handled += other.handled
        self.depth += other.depth
        self.depth_max = max(self.depth_max, other.depth_max)
        self.restarts += other.restarts
        self.failures += other.failures


class MetricsSource:
    """One system's metrics: its hooks' counts, its histogram samples, and its
    snapshots. Created by the opener; every method but :meth:`snapshot` runs in
    the trio thread.

    Its attributes are many but of four kinds, each read where they are written:
    what it reads the system with (the system, options, node, thread, clock, trio
    token, histograms); the attribute sets it makes once (``_base``, ``_by_class``,
    ``_outcomes``); what the hooks count between collections (retired totals, dead
    letters, in-doubt tells, the two reservoirs, what was left unsampled or
    untimed); and the snapshot handed to an exporter's thread (the last one, the
    lock, lateness, closing). They stay one object because a snapshot reads all
    the counts at one moment of the trio thread.
    """

    def __init__(
        self, system: ActorSystem, options: Metrics, histograms: Mapping[str, Histogram]
    ) -> None:
        self.system = system
        self.options = options
        self.histograms = histograms  # (the registry's, by name: recorded at each take)
        self.node: Any = None  # (a remote.Node: set_node)
        self.thread_id = system.thread_id
        self.now = clock_reader(trio.lowlevel.current_clock())  # (the trio clock's time)
        self.trio_token = system.trio_token
        self._base: Attributes = ()
        self._by_class: dict[str, Attributes] = {}
        self._outcomes: dict[tuple[Attributes, str], Attributes] = {}
        self.retired: dict[Attributes, list[int]] = defaultdict(lambda: [0, 0, 0])
        self.dead_letters: Counter[Attributes] = Counter()
        self.in_doubt: Counter[Attributes] = Counter()
        rng = random.Random(system.seed)
        self.turns = Reservoir(options.samples_per_collection, rng)
        self.asks = Reservoir(options.samples_per_collection, rng)
        self.unsampled: Counter[str] = Counter()
        self.asks_until_timed = 1  # (the first is timed)
        self.asks_not_timed = 0  # (since the last collection)
        self.closed = False
        self.late = 0  # collections the trio thread did not answer within the wait
        self._late_in = -2  # (the last of them)
        self._last: Snapshot | None = None
        self._lock = threading.Lock()
        self.per_actor_failed = 0  # (calls of Metrics.per_actor that raised: logged once)
        # (Registry.closed: given the source and its last snapshot)
        self.on_closed: Callable[[MetricsSource, Snapshot | None], None] | None = None

    def set_node(self, node: Any) -> None:
        """The system became node ``node``: its series carry the node's name, those
        counted before it joined (its actors' starts) too."""
        self.node = node
        self._base = base = ((NODE, node.name),)
        self._by_class.clear()
        self._outcomes.clear()

        def named(attributes: Attributes) -> Attributes:
            return attributes if attributes[:1] == base else (*base, *attributes)

        retired = list(self.retired.items())
        self.retired.clear()
        for attributes, totals in retired:
            self.retired[named(attributes)] = totals
        for counts in (self.dead_letters, self.in_doubt):
            moved = list(counts.items())
            counts.clear()
            for attributes, count in moved:
                counts[named(attributes)] = count
        for reservoir in (self.turns, self.asks):
            reservoir.samples = [(named(key), value) for key, value in reservoir.samples]

    # --- attributes --------------------------------------------------------------

    def _of(self, cell: ActorCell) -> Attributes:
        """The attribute set of ``cell``'s series: node and class (and its path, if
        the options name it)."""
        name = cell.kinds.class_name
        per_actor = self.options.per_actor
        if per_actor is not None:
            path = cell.path
            try:
                own = per_actor(path)
            except Exception:  # (the user's code, called from the dispatcher and stops)
                if not self.per_actor_failed:  # (said once: it may fail for every actor)
                    _logger.exception("trio-actors: Metrics.per_actor raised for %s", path)
                self.per_actor_failed += 1
                own = False
            if own:
                return (*self._class_attributes(name), (PATH, path))
        return self._class_attributes(name)

    def _class_attributes(self, name: str) -> Attributes:
        attributes = self._by_class.get(name)
        if attributes is None:
            attributes = self._by_class[name] = (*self._base, (CLASS, name))
        return attributes

    # --- hooks (trio thread) -------------------------------------------------------

    def retire(self, cell: ActorCell) -> None:
        """``cell`` stopped: its counts go on in its class's retired totals."""
        totals = self.retired[self._of(cell)]
        totals[0] += cell.handled
        totals[1] += cell.restarts
        totals[2] += cell.failures

    def dead_lettered(self, recipient: ActorRef, reason: str, count: int) -> None:
        """``count`` dead letters for ``recipient`` (a local actor: by its class;
        another node's: by the peer)."""
        cell = recipient._cell
        if isinstance(cell, ActorCell):
            key = (*self._class_attributes(cell.kinds.class_name), (REASON, reason))
        else:
            peer = getattr(cell, "peer", None)
            shared = getattr(cell, "shared_name", "?")  # (a shared name's group)
            where = peer[0] if isinstance(peer, tuple) else f"shared:{shared}"
            key = (*self._base, (PEER, where), (REASON, reason))
            if reason == "in-doubt":
                self.in_doubt[(*self._base, (PEER, where))] += count
        self.dead_letters[key] += count

    def turn(self, cell: ActorCell, seconds: float, kind: str) -> None:
        """A turn of ``cell`` took ``seconds`` (``kind``: inline or async)."""
        self.turns.add((*self._of(cell), (TURN_KIND, kind)), seconds)

    def ask_ended(self, attributes: Attributes, outcome: str, seconds: float) -> None:
        """An ask to an actor of ``attributes`` ended after ``seconds``."""
        key = self._outcomes.get((attributes, outcome))
        if key is None:
            key = self._outcomes[attributes, outcome] = (*attributes, (OUTCOME, outcome))
        self.asks.add(key, seconds)

    def class_of(self, cell: ActorCell) -> Attributes:
        """``cell``'s attribute set (for :meth:`ask_ended`)."""
        return self._of(cell)

    def remote_attributes(self, peer: str) -> Attributes:
        """The attribute set of an ask to another node's actor."""
        return (*self._base, (CLASS, "remote"), (PEER, peer))

    # --- snapshots ------------------------------------------------------------------

    def take(self, collection: int) -> Snapshot:
        """Walk the live actors and read the counters (trio thread), for collection
        number ``collection``; record the histograms' samples."""
        totals: dict[Attributes, _ClassTotals] = defaultdict(_ClassTotals)
        # By the cell's kinds first (one per actor class: no attributes made per
        # actor), unless the options give some actors series of their own.
        by_kinds: dict[Any, _ClassTotals] = {}
        per_actor = self.options.per_actor
        for cell in live_cells(self.system):
            if per_actor is None:
                entry = by_kinds.get(cell.kinds)
                if entry is None:
                    entry = by_kinds[cell.kinds] = _ClassTotals()
            else:
                entry = totals[self._of(cell)]
            entry.live += 1
            entry.handled += cell.handled
            entry.restarts += cell.restarts
            entry.failures += cell.failures
            depth = mailbox_depth(cell)
            entry.depth += depth
            if depth > entry.depth_max:
                entry.depth_max = depth
        for kinds, counted in by_kinds.items():
            totals[self._class_attributes(kinds.class_name)].add(counted)
        for attributes, (handled, restarts, failures) in self.retired.items():
            entry = totals[attributes]
            entry.handled += handled
            entry.restarts += restarts
            entry.failures += failures
        series: dict[str, list[tuple[float, Attributes]]] = defaultdict(list)
        for attributes, entry in totals.items():
            series["trio_actors.messages.handled"].append((entry.handled, attributes))
            series["trio_actors.restarts"].append((entry.restarts, attributes))
            series["trio_actors.failures"].append((entry.failures, attributes))
            if not entry.live and attributes[-1][0] == PATH:
                continue  # (an actor of its own series that stopped: its counts stay)
            series["trio_actors.actors.live"].append((entry.live, attributes))
            series["trio_actors.mailbox.depth"].append((entry.depth, attributes))
            series["trio_actors.mailbox.depth.max"].append((entry.depth_max, attributes))
        for key, count in self.dead_letters.items():
            series["trio_actors.dead_letters"].append((count, key))
        for key, count in self.in_doubt.items():
            series["trio_actors.tells.in_doubt"].append((count, key))
        node = self.node
        if node is not None and not self.closed:
            series["trio_actors.cluster.members"].append((len(node.members()), self._base))
            for kind, count in attrs.asdict(node.statistics().bad_input).items():
                series["trio_actors.node.bad_input"].append(
                    (count, (*self._base, (BAD_INPUT_KIND, kind)))
                )
        for name, reservoir in (
            ("trio_actors.turn.duration", self.turns),
            ("trio_actors.ask.duration", self.asks),
        ):
            samples, left_out = reservoir.take()
            if reservoir is self.asks:
                left_out, self.asks_not_timed = left_out + self.asks_not_timed, 0
            self.unsampled[name] += left_out
            histogram = self.histograms[name]
            for attributes, seconds in samples:
                histogram.record(seconds, dict(attributes))
        for name, count in self.unsampled.items():
            series["trio_actors.histogram.unsampled"].append(
                (count, (*self._base, (INSTRUMENT, name)))
            )
        snapshot = Snapshot(collection, {k: tuple(v) for k, v in series.items()})
        self._last = snapshot
        return snapshot

    def snapshot(self, collection: int) -> Snapshot | None:
        """The system's observations for collection number ``collection``, from any
        thread: the snapshot already taken for it, else one taken now (in the trio
        thread at once; from another thread, asked of the trio thread with a wait
        of at most ``Metrics.wait`` seconds). The last one taken if the system has
        closed or the trio thread did not answer in time (stale, not stuck)."""
        last = self._last
        if self.closed or collection in (self._late_in, None if last is None else last.collection):
            return last  # (closed; taken for this collection; or late for it already)
        if get_ident() == self.thread_id:
            return self.take(collection)
        with self._lock:  # (one request at a time; the others use its snapshot)
            last = self._last
            if last is not None and last.collection == collection:
                return last
            done = threading.Event()
            box: list[Snapshot] = []
            try:
                self.trio_token.run_sync_soon(self._take_for, collection, box, done)
            except trio.RunFinishedError:
                return self._last
            if not done.wait(self.options.wait):
                self.late += 1
                self._late_in = collection  # (the collection's other instruments: no wait)
                return self._last
            return box[0] if box else self._last

    def _take_for(self, collection: int, box: list[Snapshot], done: threading.Event) -> None:
        """:meth:`take` for another thread (in the trio thread: never raises, which
        would end the run)."""
        try:
            if not self.closed:
                box.append(self.take(collection))
        except Exception:
            _logger.exception("trio-actors: taking a metrics snapshot failed")
        finally:
            done.set()

    def close(self) -> None:
        """The system is closing (trio thread): its last snapshot goes to the
        registry (``on_closed``: its counters stay there, added to every later
        collection), which then forgets the system. Never raises: the system's
        close must go on whatever metrics do."""
        last = None
        try:
            last = self.take(-1)
        except Exception:
            _logger.exception("trio-actors: the last metrics snapshot failed")
        finally:
            self.closed = True
            on_closed = self.on_closed
            if on_closed is not None:
                try:
                    on_closed(self, last)
                except Exception:
                    _logger.exception("trio-actors: releasing a closed system's metrics failed")


protect_module(globals())

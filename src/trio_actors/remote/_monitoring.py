"""A node's statistics service: what ``trio-actors top`` asks, answered
(``trio_actors/_monitoring.py`` has the subjects and the documents;
``docs/observing.rst`` the reference).

The node subscribes to ``$SRV.*``, ``$SRV.*.ta-<cluster>``,
``$SRV.*.ta-<cluster>.<node>`` (the verbs ``PING``, ``INFO``, ``STATS``; other verbs
are ignored: they are other tools') and to its endpoint ``ta.<cluster>.s.<node>``,
unless ``Cluster(monitoring=False)``.

**The reader is never held.** The connection's reader only parses a request's
subjects -- which verb, where to answer (or why not: bad input ``monitoring``, or
nothing at all for a request of another cluster) -- and queues it; past
:data:`QUEUED` waiting requests, one more is dropped and counted. The node's task
:meth:`Monitoring.run` answers them in order, with a checkpoint after each.

**The work is bounded.** ``PING`` and ``INFO`` answers are made once. A summary (a
walk of the live actors for the handled total: ``actors/_census.py``) is made at
most once per :data:`FRESH` seconds of the node's clock; a ``STATS`` within that
time gets the same summary. The busiest actors (a walk with a key per actor) are
likewise computed at most once per :data:`FRESH` seconds: the same request again
within it gets the same answer, another waits for the time to pass (the task
sleeps; the requests behind it wait in the queue). What the census keeps for rates
(each live actor's count) is dropped after :data:`FORGET_AFTER` seconds without a
request for it.

Every computation runs in the trio thread, synchronously, inside :meth:`run`; it
cannot fail on what a request holds (a bad endpoint request is answered with
ADR-32's error headers), and a publish the connection refuses is said in the log.
"""

from __future__ import annotations

import importlib.metadata
import json
import logging
import math
import time
from collections import deque
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Final, NamedTuple

import trio

from .._interrupts import protect_module
from .._monitoring import (
    ERROR,
    ERROR_CODE,
    INFO_RESPONSE,
    PING_RESPONSE,
    STATS_RESPONSE,
    VERBS,
    ActorRow,
    ActorsAnswer,
    NodeSummary,
    endpoint,
    endpoint_info,
    parse_actors_request,
    parse_monitor_reply,
    service_document,
    service_subjects,
)
from ..actors._census import Census, handled_total
from ..nats import Headers
from ._bad_input import Bad
from ._frames import _valid_reply

if TYPE_CHECKING:
    from ..nats import Msg
    from ._node import Node

__all__ = ["FORGET_AFTER", "FRESH", "QUEUED", "Monitoring", "Request"]

QUEUED: Final = 64
"""Requests a node queues at once; one more is dropped (bad input ``monitoring``)."""
FRESH: Final = 0.1
"""Seconds a summary, or a census of the busiest actors, is answered again for
(at most ten computations of each a second)."""
FORGET_AFTER: Final = 30.0
"""Seconds without a request for the busiest actors after which the counts kept
for their rates are dropped."""

_ENDPOINT: Final = ""  # (Request.verb of a request to the endpoint)

_log = logging.getLogger("trio_actors")


def _version() -> str:
    # (the layers keep trio_actors.__version__ out of reach here: the same value,
    # from the installed distribution's metadata)
    try:
        return importlib.metadata.version("trio-actors")
    except importlib.metadata.PackageNotFoundError:  # pragma: no cover - a bare checkout
        return "0.0.0+unknown"


class Request(NamedTuple):
    """A request taken from the wire: its verb (``""``: the endpoint), where to
    answer, its body, and the subject it came on."""

    verb: str
    reply: str
    body: bytes
    subject: str


class Monitoring:
    """One node's statistics service (see the module's docstring).

    Attributes:
        requests, errors, last_error, processing_ns: its endpoint's counts (the
            ``$SRV.STATS`` answer's ``num_requests``, ``num_errors``,
            ``last_error``, ``processing_time``).
    """

    def __init__(self, node: Node) -> None:
        self._node = node
        cluster = node.cluster
        self._cluster = cluster.name
        self._own = f"ta.{cluster.name}."
        # Each node its own user (trio-actors secure): it answers only on subjects
        # that name it, which its permissions allow.
        self._secure = cluster.user == node.name
        self._queue: deque[Request] = deque()
        self._wake = trio.Event()
        self._opened = trio.current_time()
        self._started = datetime.now(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")
        version = _version()
        base = (cluster.name, node.name, node.incarnation, version)
        self._ping = json.dumps(service_document(PING_RESPONSE, *base)).encode()
        info = service_document(INFO_RESPONSE, *base)
        info["description"] = f"trio-actors node {node.name} of cluster {cluster.name}"
        info["endpoints"] = [endpoint_info(cluster.name, node.name)]
        self._info = json.dumps(info).encode()
        self._stats_base = service_document(STATS_RESPONSE, *base)
        self._summary: NodeSummary | None = None
        self._census = Census()
        self._census_at = -math.inf  # (trio time of the last census)
        self._busiest: tuple[str, int, bytes] | None = None  # (sort, limit, answer)
        self.requests = 0
        self.errors = 0
        self.last_error = ""
        self.processing_ns = 0

    def listen(self) -> list[Callable[[], None]]:
        """Subscribe to the service's subjects; return what unsubscribes."""
        node = self._node
        subjects = service_subjects(self._cluster, node.name)
        queue = self._queue_request
        found = [node.listen(subject, self._parse_verb, queue) for subject in subjects]
        own_endpoint = endpoint(self._cluster, node.name)
        found.append(node.listen(own_endpoint, self._parse_endpoint, queue))
        return found

    # --- in the connection's reader: parse and queue (never raises) ------------------

    def _parse_verb(self, message: Msg) -> Request | Bad | None:
        verb = message.subject.split(".", 2)[1] if message.subject.count(".") else ""
        if verb not in VERBS:
            return None  # (another tool's verb: not ours to answer, nor bad)
        return self._request(verb, message)

    def _parse_endpoint(self, message: Msg) -> Request | Bad | None:
        return self._request(_ENDPOINT, message)

    def _request(self, verb: str, message: Msg) -> Request | Bad | None:
        reply = message.reply
        if reply is None or not _valid_reply(reply):
            return Bad("monitoring", f"no subject to answer on: {reply!r}")
        parsed = parse_monitor_reply(self._cluster, reply)
        name = self._node.name
        if parsed is not None:
            monitor, node, number = parsed
            if node == "-":
                reply = f"{self._own}m.{monitor}.{name}.{number}"
            elif node != name:
                return Bad("monitoring", f"its reply subject names node {node!r}, not this one")
        elif reply.startswith(self._own):
            return Bad("monitoring", "its reply subject is not a monitor's")
        elif reply.startswith("ta."):
            return None  # (a request of another cluster's monitor: its nodes answer)
        elif reply.startswith("$"):  # ($SRV..., $SYS...: an answer there is a request)
            return Bad("monitoring", "its reply subject is a service's or the system's")
        elif self._secure:
            return Bad(
                "monitoring",
                "a node with a user of its own answers only on "
                f"{self._own}m.<monitor>.<node>.<n> (its permissions)",
            )
        return Request(verb, reply, bytes(message.data), message.subject)

    def _queue_request(self, request: Request | None) -> None:
        if request is None:
            return
        if len(self._queue) >= QUEUED:
            self._node.refused(
                "monitoring", f"more than {QUEUED} requests wait: dropped", request.subject
            )
            return
        self._queue.append(request)
        self._wake.set()

    # --- the node's task ------------------------------------------------------------

    async def run(self) -> None:
        """Answer the queued requests, in order, a checkpoint after each; forget the
        census's counts after :data:`FORGET_AFTER` seconds without a request for
        them. Runs until cancelled (with the node's tasks)."""
        while True:
            with trio.move_on_after(FORGET_AFTER):
                await self._wake.wait()
            self._wake = trio.Event()
            if trio.current_time() - self._census_at >= FORGET_AFTER:
                self._census.forget()
                self._busiest = None
            while self._queue:
                request = self._queue.popleft()
                if request.verb == _ENDPOINT:
                    await self._answer_endpoint(request)
                else:
                    self._answer_verb(request)
                await trio.lowlevel.checkpoint()

    def _answer_verb(self, request: Request) -> None:
        if request.verb == "PING":
            self._publish(request.reply, self._ping)
        elif request.verb == "INFO":
            self._publish(request.reply, self._info)
        else:
            self._publish(request.reply, json.dumps(self.stats_document()).encode())

    async def _answer_endpoint(self, request: Request) -> None:
        began = time.perf_counter_ns()
        self.requests += 1
        try:
            sort, limit = parse_actors_request(request.body)
        except ValueError as error:
            self.errors += 1
            self.last_error = str(error)
            headers = {ERROR: self.last_error, ERROR_CODE: "400"}
            self._publish(request.reply, b"", headers)
            self.processing_ns += time.perf_counter_ns() - began
            return
        cached = self._busiest
        now = trio.current_time()
        if cached is None or cached[:2] != (sort, limit) or now - self._census_at >= FRESH:
            wait = self._census_at + FRESH - now
            if wait > 0:  # (another census a moment ago: the next one after FRESH)
                await trio.sleep(wait)
                began = time.perf_counter_ns()  # (the sleep is not the work)
            cached = self._busiest = (sort, limit, self._busiest_answer(sort, limit))
        self._publish(request.reply, cached[2])
        self.processing_ns += time.perf_counter_ns() - began

    # --- what it answers --------------------------------------------------------------

    def summary(self) -> NodeSummary:
        """The node's summary now (made again only after :data:`FRESH` seconds).
        Never a checkpoint: a walk of the live actors."""
        now = trio.current_time()
        if self._summary is not None and now - self._summary.clock < FRESH:
            return self._summary
        node = self._node
        system = node.system
        stats = system.statistics()
        self._summary = NodeSummary(
            node=node.name,
            incarnation=node.incarnation,
            cluster=self._cluster,
            clock=now,
            uptime=now - self._opened,
            live_actors=stats.live_actors,
            spawned=stats.spawned,
            handled=handled_total(system),
            restarts=stats.restarts,
            failures=stats.failures,
            expected_errors=stats.expected_errors,
            dead_letters=stats.dead_letters,
            unconfirmed=node.unconfirmed,
            longest_turn_seconds=stats.longest_turn_seconds,
            longest_turn_path=stats.longest_turn_path,
            longest_round_seconds=stats.longest_round_seconds,
            members=len(node.membership.members()),
            bad_input=node.bad_input.snapshot(),
            not_permitted=node.not_permitted,
        )
        return self._summary

    def stats_document(self) -> dict[str, object]:
        """The ``$SRV.STATS`` answer (ADR-32's ``stats_response``), the summary as
        its endpoint's ``data``."""
        requests = self.requests
        statistics = {
            **endpoint_info(self._cluster, self._node.name),
            "num_requests": requests,
            "num_errors": self.errors,
            "last_error": self.last_error,
            "processing_time": self.processing_ns,
            "average_processing_time": self.processing_ns // requests if requests else 0,
            "data": self.summary().to_json(),
        }
        del statistics["metadata"]  # (INFO's, not STATS')
        return {**self._stats_base, "started": self._started, "endpoints": [statistics]}

    def _busiest_answer(self, sort: str, limit: int) -> bytes:
        node = self._node
        now = trio.current_time()
        busiest = self._census.busiest(node.system, sort, limit, now)
        self._census_at = now
        rows = tuple(
            ActorRow(
                path=stats.path,
                actor_class=actor_class,
                state=stats.state,
                mailbox=stats.mailbox_depth,
                handled=stats.handled,
                rate=rate,
                dead_letters=stats.dead_letters.total,
                failures=stats.failures,
                restarts=stats.restarts,
                longest_turn_seconds=stats.longest_turn_seconds,
            )
            for stats, actor_class, rate in busiest.actors
        )
        answer = ActorsAnswer(
            node=node.name,
            incarnation=node.incarnation,
            clock=now,
            interval=busiest.interval,
            sort=sort,
            total_actors=busiest.total,
            actors=rows,
        )
        return json.dumps(answer.to_json()).encode()

    def _publish(self, subject: str, payload: bytes, headers: dict[str, str] | None = None) -> None:
        try:
            self._node.transport.publish(
                subject, payload, headers=None if headers is None else Headers(headers)
            )
        except Exception as error:  # (closed, full while reconnecting: said, not raised)
            _log.warning(
                "node %s: could not answer on %s: %s", self._node.name, subject[:200], error
            )


protect_module(globals())

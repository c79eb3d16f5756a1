"""The statistics service on the wire: its subjects, its JSON documents, and their
parsers -- values only, shared by the nodes that answer (``remote/_monitoring.py``)
and the monitor that asks (``trio-actors top``, ``trio_actors/top/``).

Every node is a service in the manner of NATS's service API (ADR-32), named
``ta-<cluster>``, its id the node's name:

=======================================  ============================================
subject                                  answered with
=======================================  ============================================
``$SRV.PING``, ``$SRV.PING.ta-<cluster>``,  ``io.nats.micro.v1.ping_response``
``$SRV.PING.ta-<cluster>.<node>``
``$SRV.INFO...`` (the same three forms)  ``io.nats.micro.v1.info_response``: one
                                         endpoint, ``statistics``
``$SRV.STATS...`` (likewise)             ``io.nats.micro.v1.stats_response``: the
                                         endpoint's counts and, as its ``data``, the
                                         node's summary (:class:`NodeSummary`)
``ta.<cluster>.s.<node>``                the node's busiest actors
                                         (:class:`ActorsAnswer`); the request is
                                         ``{"sort": "rate", "limit": 20}`` (both
                                         optional); a bad one is answered with the
                                         headers ``Nats-Service-Error`` and
                                         ``Nats-Service-Error-Code`` (400)
=======================================  ============================================

**Answers name the answering node.** A monitor asks with the reply subject
``ta.<cluster>.m.<monitor>.<node>.<n>`` (``-`` for ``<node>`` when the request goes
to every node); a node answers on that subject with its own name in place of
``-``, and only if the token is ``-`` or its own name -- so a server that lets each
node publish only on ``ta.<cluster>.m.*.<its name>.*`` makes the subject the
answer's proof of origin, as for every other answer in a cluster. A monitor drops
an answer whose payload names another node than its subject. Where nodes do not
each have a user of their own (an open server), a node answers any other reply
subject as it is (an ``_INBOX...`` of the ``nats`` CLI: ``nats micro ls``), except
the subjects of other clusters (nodes of several clusters hear the same
``$SRV.PING``).

The parsers raise :exc:`ValueError` (saying what is wrong) for anything but the
documents below -- never another exception, whatever the bytes.
"""

from __future__ import annotations

import json
import math
from collections.abc import Mapping
from typing import Any, Final

import attrs

from ._interrupts import protect_module
from ._statistics import BadInputCounts, DeadLetterCounts

__all__ = [
    "ACTORS",
    "DEFAULT_LIMIT",
    "ENDPOINT",
    "ERROR",
    "ERROR_CODE",
    "INFO_RESPONSE",
    "MAX_LIMIT",
    "PING_RESPONSE",
    "SORTS",
    "STATS_RESPONSE",
    "SUMMARY",
    "VERBS",
    "ActorRow",
    "WrongNode",
    "ActorsAnswer",
    "NodeSummary",
    "endpoint",
    "endpoint_info",
    "monitor_replies",
    "monitor_reply",
    "parse_actors",
    "parse_actors_request",
    "parse_monitor_reply",
    "parse_stats",
    "service_name",
    "service_document",
    "service_request",
    "service_subjects",
]

VERBS: Final = ("PING", "INFO", "STATS")
PING_RESPONSE: Final = "io.nats.micro.v1.ping_response"
INFO_RESPONSE: Final = "io.nats.micro.v1.info_response"
STATS_RESPONSE: Final = "io.nats.micro.v1.stats_response"
SUMMARY: Final = "io.trio_actors.node_statistics.v1"
ACTORS: Final = "io.trio_actors.actors.v1"
ENDPOINT: Final = "statistics"
ERROR: Final = "Nats-Service-Error"
ERROR_CODE: Final = "Nats-Service-Error-Code"

SORTS: Final = ("rate", "handled", "mailbox", "turn", "dead_letters", "failures", "restarts")
"""What the busiest actors may be sorted by (largest first): messages handled per
second since the node's previous answer of this kind, messages handled, mailbox
depth, longest turn, dead letters, failures, restarts."""
DEFAULT_SORT: Final = "rate"
DEFAULT_LIMIT: Final = 20
MAX_LIMIT: Final = 100


# --- subjects ------------------------------------------------------------------------------


def service_name(cluster: str) -> str:
    """The service name of ``cluster``'s nodes (ADR-32's alphabet: a cluster's)."""
    return f"ta-{cluster}"


def service_subjects(cluster: str, node: str) -> tuple[str, str, str]:
    """What ``node`` subscribes to for the ``$SRV`` verbs: every service's, its
    cluster's, its own (``*``: the verb)."""
    name = service_name(cluster)
    return ("$SRV.*", f"$SRV.*.{name}", f"$SRV.*.{name}.{node}")


def service_request(verb: str, cluster: str, node: str | None = None) -> str:
    """Where a monitor asks ``verb`` of every node of ``cluster``, or of ``node``."""
    name = service_name(cluster)
    return f"$SRV.{verb}.{name}" if node is None else f"$SRV.{verb}.{name}.{node}"


def endpoint(cluster: str, node: str) -> str:
    """``node``'s endpoint: its busiest actors."""
    return f"ta.{cluster}.s.{node}"


def monitor_replies(cluster: str, monitor: str) -> str:
    """What monitor ``monitor`` subscribes to for its answers."""
    return f"ta.{cluster}.m.{monitor}.*.*"


def monitor_reply(cluster: str, monitor: str, node: str | None, number: str) -> str:
    """The reply subject of a monitor's request ``number`` to ``node`` (``None``:
    to every node)."""
    return f"ta.{cluster}.m.{monitor}.{node or '-'}.{number}"


def parse_monitor_reply(cluster: str, subject: str) -> tuple[str, str, str] | None:
    """``(monitor, node or "-", number)`` of a monitor's reply subject in
    ``cluster``, or ``None`` if ``subject`` is not one."""
    prefix = f"ta.{cluster}.m."
    if not subject.startswith(prefix):
        return None
    tokens = subject[len(prefix) :].split(".")
    if len(tokens) != 3 or not all(tokens) or any(t in ("*", ">") for t in tokens):
        return None
    monitor, node, number = tokens
    return monitor, node, number


# --- the documents -------------------------------------------------------------------------


class WrongNode(ValueError):
    """An answer whose payload names another node (or cluster) than its subject: on
    a server where each node has its own user, a forgery, or a node's bug."""


def _fields(value: object, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise ValueError(f"{what} is not a JSON object")
    return value


def _whole(document: Mapping[str, Any], key: str) -> int:
    value = document.get(key)
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"{key} is not a whole number >= 0: {value!r}"[:200])
    return value


def _seconds(document: Mapping[str, Any], key: str, *, optional: bool = False) -> float:
    value = document.get(key)
    if optional and value is None:
        return math.nan
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise ValueError(f"{key} is not a number: {value!r}"[:200])
    return float(value)


def _text(document: Mapping[str, Any], key: str, *, optional: bool = False) -> str | None:
    value = document.get(key)
    if optional and value is None:
        return None
    if not isinstance(value, str):
        raise ValueError(f"{key} is not a string: {value!r}"[:200])
    return value


def _counts(document: Mapping[str, Any], key: str, names: tuple[str, ...]) -> dict[str, int]:
    """The counts of ``names`` in the object at ``key`` (a missing name is 0: a node
    of another version may count fewer kinds; names it does not know are left)."""
    table = _fields(document.get(key), key)
    return {name: _whole(table, name) for name in names if name in table}


_DEAD_LETTERS: Final = tuple(field.name for field in attrs.fields(DeadLetterCounts))
_BAD_INPUT: Final = tuple(field.name for field in attrs.fields(BadInputCounts))


@attrs.frozen
class NodeSummary:
    """One node's summary: the ``data`` of its ``statistics`` endpoint in its
    ``$SRV.STATS`` answer (type ``io.trio_actors.node_statistics.v1``).

    Attributes:
        node, incarnation, cluster: which node it is.
        clock: the node's trio clock when it answered (seconds; rates between two
            summaries are computed on it, so they are the node's own time).
        uptime: seconds since the node opened (on that clock).
        live_actors, spawned, restarts, failures, expected_errors: its system's
            (``SystemStatistics``).
        handled: messages handled by all its actors, stopped ones included.
        dead_letters: its dead letters by reason.
        unconfirmed: its tells given back in doubt (``system.node.unconfirmed``).
        longest_turn_seconds, longest_turn_path: its longest turn, and whose.
        longest_round_seconds: the longest its dispatcher held the trio thread.
        members: the nodes it knows to be up, itself included.
        bad_input: what it could not use of what arrived, by kind.
        not_permitted: its messages the server refused to carry.
    """

    node: str
    incarnation: str
    cluster: str
    clock: float
    uptime: float
    live_actors: int
    spawned: int
    handled: int
    restarts: int
    failures: int
    expected_errors: int
    dead_letters: DeadLetterCounts
    unconfirmed: int
    longest_turn_seconds: float
    longest_turn_path: str | None
    longest_round_seconds: float
    members: int
    bad_input: BadInputCounts
    not_permitted: int

    def to_json(self) -> dict[str, Any]:
        """The JSON object (before ``json.dumps``)."""
        return {
            "type": SUMMARY,
            "node": self.node,
            "incarnation": self.incarnation,
            "cluster": self.cluster,
            "clock": self.clock,
            "uptime": self.uptime,
            "live_actors": self.live_actors,
            "spawned": self.spawned,
            "handled": self.handled,
            "restarts": self.restarts,
            "failures": self.failures,
            "expected_errors": self.expected_errors,
            "dead_letters": attrs.asdict(self.dead_letters),
            "unconfirmed": self.unconfirmed,
            "longest_turn": {"seconds": self.longest_turn_seconds, "path": self.longest_turn_path},
            "longest_round_seconds": self.longest_round_seconds,
            "members": self.members,
            "bad_input": attrs.asdict(self.bad_input),
            "not_permitted": self.not_permitted,
        }

    @classmethod
    def from_json(cls, value: object) -> NodeSummary:
        """The summary a JSON object holds.

        Raises:
            ValueError: it is not one (the message says what is wrong).
        """
        document = _fields(value, "the summary")
        if document.get("type") != SUMMARY:
            raise ValueError(f"the summary's type is not {SUMMARY}")
        turn = _fields(document.get("longest_turn"), "longest_turn")
        return cls(
            node=_text(document, "node") or "",
            incarnation=_text(document, "incarnation") or "",
            cluster=_text(document, "cluster") or "",
            clock=_seconds(document, "clock"),
            uptime=_seconds(document, "uptime"),
            live_actors=_whole(document, "live_actors"),
            spawned=_whole(document, "spawned"),
            handled=_whole(document, "handled"),
            restarts=_whole(document, "restarts"),
            failures=_whole(document, "failures"),
            expected_errors=_whole(document, "expected_errors"),
            dead_letters=DeadLetterCounts(**_counts(document, "dead_letters", _DEAD_LETTERS)),
            unconfirmed=_whole(document, "unconfirmed"),
            longest_turn_seconds=_seconds(turn, "seconds"),
            longest_turn_path=_text(turn, "path", optional=True),
            longest_round_seconds=_seconds(document, "longest_round_seconds"),
            members=_whole(document, "members"),
            bad_input=BadInputCounts(**_counts(document, "bad_input", _BAD_INPUT)),
            not_permitted=_whole(document, "not_permitted"),
        )


@attrs.frozen
class ActorRow:
    """One of a node's busiest actors.

    Attributes:
        path, state, handled, failures, restarts: as in ``ActorStatistics``.
        actor_class: its class's name (``class`` in the JSON).
        mailbox: messages queued (``ActorStatistics.mailbox_depth``).
        rate: messages handled per second since the node's previous answer of
            this kind (``None``: it had none).
        dead_letters: its messages that became dead letters.
        longest_turn_seconds: its longest turn.
    """

    path: str
    actor_class: str
    state: str
    mailbox: int
    handled: int
    rate: float | None
    dead_letters: int
    failures: int
    restarts: int
    longest_turn_seconds: float

    def to_json(self) -> dict[str, Any]:
        return {
            "path": self.path,
            "class": self.actor_class,
            "state": self.state,
            "mailbox": self.mailbox,
            "handled": self.handled,
            "rate": self.rate,
            "dead_letters": self.dead_letters,
            "failures": self.failures,
            "restarts": self.restarts,
            "longest_turn": self.longest_turn_seconds,
        }

    @classmethod
    def from_json(cls, value: object) -> ActorRow:
        """Raises: ValueError: not an actor's row."""
        row = _fields(value, "an actor")
        rate = _seconds(row, "rate", optional=True)
        return cls(
            path=_text(row, "path") or "",
            actor_class=_text(row, "class") or "",
            state=_text(row, "state") or "",
            mailbox=_whole(row, "mailbox"),
            handled=_whole(row, "handled"),
            rate=None if math.isnan(rate) else rate,
            dead_letters=_whole(row, "dead_letters"),
            failures=_whole(row, "failures"),
            restarts=_whole(row, "restarts"),
            longest_turn_seconds=_seconds(row, "longest_turn"),
        )


@attrs.frozen
class ActorsAnswer:
    """A node's answer on its endpoint: its busiest actors (type
    ``io.trio_actors.actors.v1``).

    Attributes:
        node, incarnation: which node.
        clock: its trio clock when it answered.
        interval: seconds the rates are over (``None``: no rates yet).
        sort: what the actors are sorted by (one of :data:`SORTS`).
        total_actors: its live actors (``actors`` are the first of them).
        actors: the rows, first first.
    """

    node: str
    incarnation: str
    clock: float
    interval: float | None
    sort: str
    total_actors: int
    actors: tuple[ActorRow, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "type": ACTORS,
            "node": self.node,
            "incarnation": self.incarnation,
            "clock": self.clock,
            "interval": self.interval,
            "sort": self.sort,
            "total_actors": self.total_actors,
            "actors": [row.to_json() for row in self.actors],
        }


def service_document(
    kind: str, cluster: str, node: str, incarnation: str, version: str
) -> dict[str, Any]:
    """The fields every ``$SRV`` answer of ``node`` begins with (ADR-32's "standard
    fields"; ``kind``: the answer's type)."""
    return {
        "type": kind,
        "name": service_name(cluster),
        "id": node,
        "version": version,
        "metadata": {"cluster": cluster, "node": node, "incarnation": incarnation},
    }


def endpoint_info(cluster: str, node: str) -> dict[str, Any]:
    """The ``statistics`` endpoint as ``$SRV.INFO`` describes it (no queue group:
    the endpoint is one node's)."""
    return {
        "name": ENDPOINT,
        "subject": endpoint(cluster, node),
        "queue_group": "",
        "metadata": {"answers": ACTORS},
    }


def _loads(payload: bytes) -> object:
    try:
        return json.loads(payload)
    except (ValueError, RecursionError) as error:  # (UnicodeDecodeError is a ValueError)
        raise ValueError(f"not JSON: {str(error)[:100]}") from None


def parse_stats(payload: bytes, cluster: str, node: str) -> NodeSummary:
    """The summary in a ``$SRV.STATS`` answer that came on a subject naming
    ``node``.

    Raises:
        WrongNode: the answer of another node, or of another cluster's.
        ValueError: not such an answer (the message says what is wrong).
    """
    document = _fields(_loads(payload), "the answer")
    if document.get("type") != STATS_RESPONSE:
        raise ValueError(f"not a {STATS_RESPONSE}")
    if document.get("name") != service_name(cluster) or document.get("id") != node:
        raise WrongNode(f"not the answer of node {node!r} of cluster {cluster!r}"[:200])
    endpoints = document.get("endpoints")
    if not isinstance(endpoints, list):
        raise ValueError("endpoints is not a list")
    for entry in endpoints:
        if isinstance(entry, dict) and entry.get("name") == ENDPOINT:
            summary = NodeSummary.from_json(entry.get("data"))
            if summary.node != node or summary.cluster != cluster:
                raise WrongNode(f"the summary is not node {node!r}'s"[:200])
            return summary
    raise ValueError(f"no {ENDPOINT} endpoint")


def parse_actors(payload: bytes, node: str) -> ActorsAnswer:
    """A node's answer on its endpoint, which came on a subject naming ``node``.

    Raises:
        WrongNode: another node's answer.
        ValueError: not such an answer.
    """
    document = _fields(_loads(payload), "the answer")
    if document.get("type") != ACTORS:
        raise ValueError(f"not a {ACTORS}")
    if document.get("node") != node:
        raise WrongNode(f"not node {node!r}'s answer"[:200])
    actors = document.get("actors")
    if not isinstance(actors, list) or len(actors) > MAX_LIMIT:
        raise ValueError(f"actors is not a list of at most {MAX_LIMIT}")
    sort = _text(document, "sort")
    if sort not in SORTS:
        raise ValueError(f"sort is not one of {', '.join(SORTS)}")
    interval = _seconds(document, "interval", optional=True)
    return ActorsAnswer(
        node=node,
        incarnation=_text(document, "incarnation") or "",
        clock=_seconds(document, "clock"),
        interval=None if math.isnan(interval) else interval,
        sort=sort,
        total_actors=_whole(document, "total_actors"),
        actors=tuple(ActorRow.from_json(row) for row in actors),
    )


def parse_actors_request(payload: bytes) -> tuple[str, int]:
    """``(sort, limit)`` of a request to a node's endpoint: a JSON object with
    ``sort`` (one of :data:`SORTS`, default ``"rate"``) and ``limit`` (0 to
    :data:`MAX_LIMIT`, default 20), both optional; an empty payload asks for the
    defaults.

    Raises:
        ValueError: anything else (the message is the error a node answers with).
    """
    if not payload.strip():
        return DEFAULT_SORT, DEFAULT_LIMIT
    request = _fields(_loads(payload), "the request")
    unknown = sorted(set(request) - {"sort", "limit"})
    if unknown:
        raise ValueError(f"unknown key {unknown[0][:40]!r}: the keys are sort and limit")
    sort = request.get("sort", DEFAULT_SORT)
    if sort not in SORTS:
        raise ValueError(f"sort is one of {', '.join(SORTS)}, got {sort!r}"[:200])
    limit = request.get("limit", DEFAULT_LIMIT)
    if isinstance(limit, bool) or not isinstance(limit, int) or not 0 <= limit <= MAX_LIMIT:
        raise ValueError(f"limit is a whole number from 0 to {MAX_LIMIT}, got {limit!r}"[:200])
    return sort, limit


protect_module(globals())

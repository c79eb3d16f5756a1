"""How ``trio-actors top`` asks the nodes: a monitor on a NATS connection of its
own, which subscribes to the answers to it and publishes each request with a reply
subject that names the node asked (or ``-``: every node), as
``trio_actors/_monitoring.py`` says.

It never uses ``Client.request``: those replies would go to an ``_INBOX`` subject,
which names no node -- in a secure deployment no node may publish there, and an
answer there could not be told from one another node forged. Each answer's
subject names its node; one whose payload names another is dropped and counted
(:attr:`Poller.forged`), as is one that is not a document of the service
(:attr:`Poller.bad`). Request numbers carry a random prefix of this monitor's, so
two ``top`` runs with the same monitor user do not take each other's answers.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Callable
from typing import Final, Protocol

import trio

from .._monitoring import (
    ERROR,
    ActorsAnswer,
    NodeSummary,
    WrongNode,
    endpoint,
    monitor_replies,
    monitor_reply,
    parse_actors,
    parse_monitor_reply,
    parse_stats,
    service_request,
)
from ..nats import Msg

__all__ = ["Connection", "Poller"]

_NO_RESPONDERS: Final = 503


class Connection(Protocol):
    """What the poller needs of its connection: a :class:`trio_actors.nats.Client`
    (or, in tests, a connection to an in-memory bus)."""

    def subscribe_nowait(self, subject: str, *, callback: Callable[[Msg], object]) -> object:
        """Call ``callback`` with each message to ``subject``, from the reader."""

    def publish(self, subject: str, payload: bytes, *, reply: str | None = None) -> None:
        """Send; never a checkpoint."""


class _Asked:
    """One request waiting for its answers."""

    __slots__ = ("answers", "done", "error", "expected", "parse")

    def __init__(self, parse: Callable[[Msg, str], object], expected: set[str]) -> None:
        self.parse = parse
        self.expected = expected  # (nodes whose answers end the wait early)
        self.answers: dict[str, object] = {}
        self.error = ""
        self.done = trio.Event()


class Poller:
    """Ask the nodes of ``cluster`` as monitor ``monitor`` on ``client``.

    Attributes:
        forged: answers whose payload named another node than their subject.
        bad: answers that were not the service's documents.
    """

    def __init__(self, client: Connection, cluster: str, monitor: str) -> None:
        self._client = client
        self._cluster = cluster
        self._monitor = monitor
        self._prefix = secrets.token_hex(4)
        self._number = 0
        self._asked: dict[str, _Asked] = {}
        self.forged = 0
        self.bad = 0
        client.subscribe_nowait(monitor_replies(cluster, monitor), callback=self._on_answer)

    def _ask(
        self,
        subject: str,
        node: str | None,
        body: bytes,
        parse: Callable[[Msg, str], object],
        expected: set[str],
    ) -> tuple[str, _Asked]:
        self._number += 1
        number = f"{self._prefix}-{self._number}"
        asked = self._asked[number] = _Asked(parse, expected)
        reply = monitor_reply(self._cluster, self._monitor, node, number)
        try:
            self._client.publish(subject, body, reply=reply)
        except Exception as error:  # (full while reconnecting, closed: no answer)
            asked.error = f"not sent: {error}"
            asked.done.set()
        return number, asked

    def _on_answer(self, message: Msg) -> None:
        """An answer (from the connection's reader: never raises)."""
        parsed = parse_monitor_reply(self._cluster, message.subject)
        if parsed is None:
            return
        _monitor, node, number = parsed
        asked = self._asked.get(number)
        if asked is None:
            return  # (late: its wait is over; or not one of this run's)
        if message.status == _NO_RESPONDERS:  # (nobody serves the subject asked)
            asked.error = "no answer: no node serves it"
            asked.done.set()
            return
        if node == "-" or node in asked.answers:
            self.bad += 1
            return
        try:
            asked.answers[node] = asked.parse(message, node)
        except WrongNode:
            self.forged += 1
        except ValueError:
            self.bad += 1
        if asked.expected and asked.expected <= asked.answers.keys():
            asked.done.set()

    async def _wait(self, number: str, asked: _Asked, wait: float) -> None:
        try:
            with trio.move_on_after(wait):
                await asked.done.wait()
        finally:
            del self._asked[number]

    async def summaries(self, wait: float, expected: set[str]) -> list[NodeSummary]:
        """Every node's summary (``$SRV.STATS.ta-<cluster>``): the answers that came
        within ``wait`` seconds, or as soon as every node in ``expected`` has
        answered (or the server said nobody serves the cluster's service). A
        checkpoint."""

        def parse(message: Msg, node: str) -> NodeSummary:
            return parse_stats(message.data, self._cluster, node)

        request = service_request("STATS", self._cluster)
        number, asked = self._ask(request, None, b"", parse, expected)
        await self._wait(number, asked, wait)
        return [a for a in asked.answers.values() if isinstance(a, NodeSummary)]

    async def actors(self, node: str, sort: str, limit: int, wait: float) -> ActorsAnswer | str:
        """``node``'s busiest actors by ``sort`` (at most ``limit``), or why not
        (its error answer, or no answer within ``wait`` seconds). A checkpoint."""

        def parse(message: Msg, answering: str) -> ActorsAnswer | str:
            headers = message.headers
            if headers is not None and headers.get(ERROR) is not None:
                return f"{answering} says: {headers[ERROR]}"
            return parse_actors(message.data, answering)

        body = json.dumps({"sort": sort, "limit": limit}).encode()
        subject = endpoint(self._cluster, node)
        number, asked = self._ask(subject, node, body, parse, {node})
        await self._wait(number, asked, wait)
        found = asked.answers.get(node)
        if isinstance(found, ActorsAnswer | str):
            return found
        return asked.error or f"no answer from {node} within {wait:g}s"

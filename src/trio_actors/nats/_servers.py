"""Which server to reconnect to, and when: the server pool and the reconnect
policy. Pure logic (no I/O, no clock): the client sleeps the delays it computes.

The pool starts with the servers given to :func:`~trio_actors.nats.connect`, in
their order, and grows by those the servers announce (``INFO``'s
``connect_urls``: the other members of a cluster). After a connection is lost,
reconnecting goes round the pool in *rounds*: every server once, starting with the
one after the server just lost and ending with it (so a cluster fails over at once,
and a lone server restarting is tried again), servers in lame-duck mode last.
Before each round but the first, the client waits :meth:`Reconnect.delay`: an
exponential backoff with jitter, so that many clients of a restarted server do not
all knock at the same instant.
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable, Iterable
from typing import Any

import attrs

from ._handshake import ServerAddress, parse_url

__all__ = ["Reconnect"]

DEFAULT_RECONNECT_BUFFER_BYTES = 8 * 1024 * 1024


def _positive(instance: object, attribute: attrs.Attribute[float], value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise TypeError(f"Reconnect({attribute.name}=...) is a number of seconds, got {value!r}")
    if not (value > 0 and math.isfinite(value)):
        raise ValueError(f"Reconnect({attribute.name}=...) must be > 0 and finite, got {value!r}")


def _fraction(instance: object, attribute: attrs.Attribute[float], value: float) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 <= value <= 1:
        raise ValueError(f"Reconnect(jitter=...) is a fraction from 0 to 1, got {value!r}")


def _count(instance: object, attribute: attrs.Attribute[Any], value: int | None) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(
            f"Reconnect({attribute.name}=...) is a whole number >= 1 (None: no limit), "
            f"got {value!r}"
        )


@attrs.frozen
class Reconnect:
    """How a client reconnects after it lost its server (pass
    ``reconnect=None`` to :func:`~trio_actors.nats.connect` for never).

    Attributes:
        wait: the delay before the second round through the pool, in seconds; it
            doubles each round, up to ``max_wait``.
        max_wait: the longest delay between rounds.
        jitter: each delay is shortened by a random fraction of it up to this
            (``0.5``: a delay of 2 s is between 1 and 2 s).
        max_rounds: rounds through the pool before giving up (the ``async with``
            block then ends with :exc:`~trio_actors.nats.ConnectionClosed`);
            ``None``: never give up.
        buffer_bytes: how many bytes of messages published while disconnected are
            kept to be sent once reconnected; past it, ``publish`` raises
            :exc:`~trio_actors.nats.BufferFull`.
    """

    wait: float = attrs.field(default=0.05, validator=_positive)
    max_wait: float = attrs.field(default=2.0, validator=_positive)
    jitter: float = attrs.field(default=0.5, validator=_fraction)
    max_rounds: int | None = attrs.field(default=60, validator=_count)
    buffer_bytes: int = attrs.field(default=DEFAULT_RECONNECT_BUFFER_BYTES, validator=_count)

    def delay(self, round_number: int, draw: Callable[[], float] = random.random) -> float:
        """Seconds to wait before round ``round_number`` (0 for the first: none).
        ``draw`` gives a float in [0, 1) (``random.random``; a test passes its own)."""
        if round_number <= 0:
            return 0.0
        full = min(self.max_wait, self.wait * 2.0 ** min(round_number - 1, 64))
        return full * (1.0 - self.jitter * draw())


class ServerPool:
    """The servers a client may connect to (see the module's docstring)."""

    def __init__(self, servers: Iterable[ServerAddress]) -> None:
        self.servers: list[ServerAddress] = []
        self._lame_ducks: set[tuple[str, int]] = set()
        for server in servers:
            self._add(server)

    def _add(self, server: ServerAddress) -> bool:
        key = (server.host, server.port)
        if any((known.host, known.port) == key for known in self.servers):
            return False
        self.servers.append(server)
        return True

    def discover(self, connect_urls: object) -> list[ServerAddress]:
        """Add the servers an ``INFO``'s ``connect_urls`` announces (``host:port``
        strings); return the new ones. Malformed entries are ignored: they are the
        server's to get right, and the pool still holds every server given."""
        if not isinstance(connect_urls, list):
            return []
        added = []
        for url in connect_urls:
            try:
                server = parse_url(url, discovered=True)
            except (TypeError, ValueError):
                continue
            if self._add(server):
                added.append(server)
        return added

    def lame_duck(self, server: ServerAddress) -> None:
        """``server`` said it is shutting down: try it last from now on."""
        self._lame_ducks.add((server.host, server.port))

    def round(self, current: ServerAddress | None) -> list[ServerAddress]:
        """The order to try the servers in one round after losing ``current``."""
        servers = self.servers
        if current is not None and current in servers:
            at = servers.index(current) + 1
            servers = servers[at:] + servers[:at]
        return sorted(servers, key=lambda s: (s.host, s.port) in self._lame_ducks)

"""The configuration of a cluster: where its NATS servers are and what may cross.

A value only (like :class:`~trio_actors.ServingPolicy`): ``open_actor_system(
cluster=Cluster(...), node="worker-1")`` makes the system a node of the cluster;
the remote layer (``trio_actors.remote``) is imported only then.
"""

from __future__ import annotations

import dataclasses
import enum
import re
import ssl
import sys
from collections.abc import Sequence
from contextlib import AbstractAsyncContextManager
from os import PathLike
from pathlib import Path
from typing import Any, Protocol

import attrs

from ._cluster_config import read_config
from ._interrupts import protect_module
from .nats._handshake import parse_url

__all__ = [
    "Bus",
    "Cluster",
    "InputLimits",
    "as_cluster",
    "check_token",
    "kind_of_class",
    "message_types",
    "read_cluster_file",
    "spawnable_name",
]


class Bus(Protocol):
    """What ``Cluster(bus=...)`` takes instead of NATS servers: an in-memory bus
    (:class:`trio_actors.remote.MemoryBus`, for tests; the remote layer sits above
    this value and checks that it is one)."""

    advisories: bool

    def connect(self, name: str = "") -> AbstractAsyncContextManager[Any]:
        """A connection named ``name`` for as long as the block runs."""
        ...


_TOKEN = re.compile(r"[A-Za-z0-9_-]+")


def check_token(value: object, what: str) -> str:
    """``value`` if it is a name usable in a NATS subject token: letters, digits,
    ``_`` and ``-``."""
    if not isinstance(value, str):
        raise TypeError(f"{what} must be a str, got {value!r}")
    if not _TOKEN.fullmatch(value):
        raise ValueError(
            f"{what} must be letters, digits, '_' and '-' (it is part of NATS subjects), "
            f"got {value!r}"
        )
    return value


def _whole(minimum: int) -> Any:
    def check(limits: InputLimits, attribute: attrs.Attribute[int], value: object) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
            raise ValueError(
                f"InputLimits({attribute.name}=...) is a whole number >= {minimum}, got {value!r}"
            )

    return check


@attrs.frozen
class InputLimits:
    """What a node may hold because of what arrives from the wire, and how loudly it
    says it refused something (``Cluster(limits=...)``; ``docs/remote.rst``,
    "What a node tolerates"). Every table keyed by what other nodes send is bounded
    here, and freed when the node that sent it is declared down.

    Attributes:
        peers: other nodes (incarnations) a node keeps in its peer table at once.
            A heartbeat or a sign of life from one more is ignored (counted as
            ``over_limit``) until silent ones leave the table.
        names: names held by other nodes a node keeps in its view.
        watches: watches of its actors by other nodes it keeps (one per reply
            subject).
        undecodable_prefix: bytes of a tell it could not decode kept in its dead
            letter (the first ones).
        undecodable_bytes: bytes all such dead letters among the recent ones
            hold together; past it, a new one keeps fewer (or none).
        log_every: bad input of one kind is logged the first time, then every
            ``log_every`` times, with the count so far.
        announce_every: seconds between two announcements of all a node's names
            (each new node met asks for one; those that come within the window
            share one at its end), and between two answers to the ``hello`` of a
            node that joins (an answer is one heartbeat; likewise shared).
        held_bytes: bytes of tells from other nodes a node holds at once, all
            senders together, because they came ahead of one sent before them
            (held to be delivered in order until the earlier one comes or is
            given up: ``docs/remote.rst``, "Tells between two connections");
            past it, the oldest gap is given up at once.
    """

    peers: int = attrs.field(default=1_024, validator=_whole(1), kw_only=True)
    names: int = attrs.field(default=16_384, validator=_whole(0), kw_only=True)
    watches: int = attrs.field(default=16_384, validator=_whole(0), kw_only=True)
    undecodable_prefix: int = attrs.field(default=1_024, validator=_whole(0), kw_only=True)
    undecodable_bytes: int = attrs.field(default=1 << 20, validator=_whole(0), kw_only=True)
    log_every: int = attrs.field(default=1_000, validator=_whole(1), kw_only=True)
    announce_every: float = attrs.field(default=0.1, kw_only=True)
    held_bytes: int = attrs.field(default=1 << 24, validator=_whole(0), kw_only=True)

    def __attrs_post_init__(self) -> None:
        every = self.announce_every
        if isinstance(every, bool) or not isinstance(every, int | float) or not 0 <= every < 1e9:
            raise ValueError(f"InputLimits(announce_every=...) is seconds >= 0, got {every!r}")


def _limits(value: object) -> InputLimits:
    if not isinstance(value, InputLimits):
        raise TypeError(f"Cluster limits is an InputLimits(...), got {value!r}")
    return value


def _servers(value: str | Sequence[str]) -> tuple[str, ...]:
    servers = (value,) if isinstance(value, str) else tuple(value)
    if not servers or not all(isinstance(server, str) for server in servers):
        raise TypeError(f"Cluster servers are a nats:// URL or a list of them, got {value!r}")
    return servers


def kind_of_class(cls: type) -> str | None:
    """What kind of registrable class ``cls`` is -- ``"msgspec.Struct"``,
    ``"dataclass"``, ``"attrs class"`` or ``"Enum"`` -- or ``None``."""
    msgspec = sys.modules.get("msgspec")  # (not imported here: a Struct needs it loaded)
    if msgspec is not None and issubclass(cls, msgspec.Struct):
        return "msgspec.Struct"
    if dataclasses.is_dataclass(cls):
        return "dataclass"
    if attrs.has(cls):
        return "attrs class"
    if issubclass(cls, enum.Enum):
        return "Enum"
    return None


def message_types(value: Sequence[type]) -> tuple[type, ...]:
    """``Cluster(types=...)``, checked: classes of the kinds :func:`kind_of_class`
    knows, each named once (they cross by ``module.QualName``)."""
    if isinstance(value, type) or not isinstance(value, Sequence | set | frozenset):
        raise TypeError(f"Cluster(types=...) takes a list of classes, got {value!r}")
    named: dict[str, type] = {}
    for cls in value:
        if not isinstance(cls, type) or kind_of_class(cls) is None:
            raise TypeError(
                "Cluster(types=...) takes msgspec.Struct subclasses, dataclasses, attrs "
                f"classes and Enum subclasses, got {cls!r}"
            )
        name = f"{cls.__module__}.{cls.__qualname__}"
        if named.setdefault(name, cls) is not cls:
            raise ValueError(f"Cluster(types=...) has two classes named {name!r}")
    return tuple(named.values())


def _errors(value: Sequence[type[BaseException]]) -> tuple[type[BaseException], ...]:
    return tuple(value)


def spawnable_name(cls: type) -> str:
    """How a class is named when a node asks another to spawn it:
    ``module:QualName``."""
    return f"{cls.__module__}:{cls.__qualname__}"


def _spawnable(value: Sequence[type]) -> tuple[type, ...]:
    """``Cluster(spawnable=...)``, checked: classes another node may name (by
    ``module:QualName``: defined at a module's top level or in a class, not inside a
    function), each once. That each is an ``Actor`` subclass is checked by the node
    (this value sits below the actors)."""
    if isinstance(value, type) or not isinstance(value, Sequence | set | frozenset):
        raise TypeError(f"Cluster(spawnable=...) takes a list of actor classes, got {value!r}")
    named: dict[str, type] = {}
    for cls in value:
        if not isinstance(cls, type):
            raise TypeError(f"Cluster(spawnable=...) takes actor classes, got {cls!r}")
        if "<locals>" in cls.__qualname__:
            raise ValueError(
                f"Cluster(spawnable=...): {cls.__qualname__} is defined inside a function; "
                "another node names a class by module:QualName, so define it at a "
                "module's top level"
            )
        if named.setdefault(spawnable_name(cls), cls) is not cls:
            raise ValueError(
                f"Cluster(spawnable=...) has two classes named {spawnable_name(cls)!r}"
            )
    return tuple(named.values())


@attrs.frozen
class Cluster:
    """Where a node finds the others, and what their messages may hold.

    Attributes:
        servers: the NATS servers, a ``nats://host:port`` URL or a list of them
            (the servers a server announces join them). Ignored with ``bus``.
        name: the cluster's name: nodes of different clusters on the same servers
            never see each other.
        types: the classes messages may hold -- ``msgspec.Struct`` subclasses,
            dataclasses, attrs classes and ``Enum`` subclasses -- which then arrive
            as themselves (every node registers the same ones: they cross by
            ``module.QualName``); builtins and refs need no registering.
        errors: exception types a remote handler's exception is rebuilt as (the
            package's own errors and builtin exceptions always are); any other
            arrives as :class:`~trio_actors.RemoteError`.
        spawnable: the actor classes another node may spawn on this one
            (``system.node.spawn``), each named there by ``module:QualName``; any
            other is refused (:exc:`~trio_actors.NotSpawnable`). Empty by default:
            remote spawn never runs code the node did not list.
        pickle: pickle what msgpack cannot hold. Unpickling runs whatever code the
            bytes name: only on a network where every node is trusted.
        bus: an in-memory :class:`~trio_actors.remote.MemoryBus` instead of NATS:
            the nodes of one trio run, for tests (deterministic under ``MockClock``).
        system_user: a user of the servers' system account (with
            ``system_password``, or ``system_credentials`` a credentials file):
            each node then listens to its disconnect advisories on a second
            connection, and a node whose connection ends (a ``kill -9``, a crash)
            is down within milliseconds, not after missed heartbeats.
        heartbeat: seconds between a node's heartbeats.
        heartbeats_missed: how many beats a node may miss before another node
            that waits on it declares it down (:exc:`~trio_actors.NodeDown`).
        limits: what a node may hold because of what other nodes (or any client
            of the servers) send it: :class:`~trio_actors.InputLimits`.
        monitoring: the node answers the statistics service (``$SRV.PING``,
            ``$SRV.INFO``, ``$SRV.STATS`` and its endpoint of busiest actors:
            what ``trio-actors top`` shows); ``False``: it subscribes to none of
            them.

    ``tls``, ``tls_hostname``, ``token``, ``user``, ``password``, ``nkey_seed`` and
    ``credentials`` are passed to :func:`trio_actors.nats.connect` as they are.
    """

    servers: tuple[str, ...] = attrs.field(default=("nats://127.0.0.1:4222",), converter=_servers)
    name: str = attrs.field(default="trio-actors", kw_only=True)
    types: tuple[type, ...] = attrs.field(default=(), converter=message_types, kw_only=True)
    errors: tuple[type[BaseException], ...] = attrs.field(
        default=(), converter=_errors, kw_only=True
    )
    spawnable: tuple[type, ...] = attrs.field(default=(), converter=_spawnable, kw_only=True)
    pickle: bool = attrs.field(default=False, kw_only=True)
    tls: ssl.SSLContext | None = attrs.field(default=None, kw_only=True)
    tls_hostname: str | None = attrs.field(default=None, kw_only=True)
    token: str | None = attrs.field(default=None, kw_only=True, repr=False)
    user: str | None = attrs.field(default=None, kw_only=True)
    password: str | None = attrs.field(default=None, kw_only=True, repr=False)
    nkey_seed: str | Path | None = attrs.field(default=None, kw_only=True, repr=False)
    credentials: str | Path | None = attrs.field(default=None, kw_only=True)
    bus: Bus | None = attrs.field(default=None, kw_only=True)
    system_user: str | None = attrs.field(default=None, kw_only=True)
    system_password: str | None = attrs.field(default=None, kw_only=True, repr=False)
    system_credentials: str | Path | None = attrs.field(default=None, kw_only=True)
    heartbeat: float = attrs.field(default=1.0, kw_only=True)
    heartbeats_missed: int = attrs.field(default=3, kw_only=True)
    limits: InputLimits = attrs.field(factory=InputLimits, converter=_limits, kw_only=True)
    monitoring: bool = attrs.field(default=True, kw_only=True)

    def __attrs_post_init__(self) -> None:
        for server in self.servers:
            parse_url(server)  # (a ValueError that says what a URL looks like)
        check_token(self.name, "Cluster name")
        if not isinstance(self.pickle, bool):
            raise TypeError(f"Cluster pickle is True or False, got {self.pickle!r}")
        if not isinstance(self.monitoring, bool):
            raise TypeError(f"Cluster monitoring is True or False, got {self.monitoring!r}")
        if (
            isinstance(self.heartbeat, bool)
            or not isinstance(self.heartbeat, int | float)
            or not 0 < self.heartbeat < float("inf")
        ):
            raise ValueError(f"Cluster heartbeat is seconds > 0, got {self.heartbeat!r}")
        missed = self.heartbeats_missed
        if isinstance(missed, bool) or not isinstance(missed, int) or missed < 1:
            raise ValueError(f"Cluster heartbeats_missed is a whole number >= 1, got {missed!r}")

    @classmethod
    def from_toml(cls, path: str | PathLike[str]) -> Cluster:
        """The cluster a node configuration file describes (its ``node`` key, if
        any, is for ``open_actor_system(cluster=path)`` and ``trio-actors node``:
        see ``trio_actors._cluster_config`` and the CLI reference for the keys).
        Reads the file, the files it names (TLS, credentials), and imports the
        classes of its ``types`` and ``errors``.

        Raises:
            ValueError: the file cannot be read, is not TOML, or has a mistake;
                the message names the file and the key.
        """
        cluster, _node = read_cluster_file(path)
        return cluster

    def connect_options(self) -> dict[str, Any]:
        """The keyword arguments for :func:`trio_actors.nats.connect`."""
        return {
            "tls": self.tls,
            "tls_hostname": self.tls_hostname,
            "token": self.token,
            "user": self.user,
            "password": self.password,
            "nkey_seed": self.nkey_seed,
            "credentials": self.credentials,
        }


def read_cluster_file(path: str | PathLike[str]) -> tuple[Cluster, str | None]:
    """The cluster a node configuration file describes, and its ``node`` key
    (``None``: none). See :meth:`Cluster.from_toml`.

    Raises:
        ValueError: a mistake in the file (the message names the file and the key).
    """
    options, node = read_config(path)
    try:
        return Cluster(**options), node
    except (TypeError, ValueError) as error:  # (a value Cluster itself refuses)
        raise ValueError(f"{path}: {error}") from None


def as_cluster(value: object) -> Cluster:
    """``open_actor_system``'s ``cluster=``: a ``nats://`` URL or a :class:`Cluster`."""
    if isinstance(value, str):
        return Cluster(value)
    if not isinstance(value, Cluster):
        raise TypeError(f"cluster is a nats:// URL or a Cluster(...), got {value!r}")
    return value


protect_module(globals())

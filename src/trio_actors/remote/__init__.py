"""Actors across processes and machines: nodes on NATS (``docs/remote.rst``).

Imported only when a system is opened with ``cluster=``. One concept per module:

* ``_node.py`` -- a node, a system's presence in a cluster: the wiring of the
  parts below, and the dispatch of what arrives for its actors;
* ``_subjects.py`` -- the subjects and the kinds of message on the wire;
* ``_peers.py`` -- the other nodes: one ``PeerState`` each, one transition table,
  one writer;
* ``_heartbeats.py`` -- heartbeats, silence and the server's advisories: what the
  peer table hears;
* ``_tells.py`` -- tells sent, kept until acknowledged or given back, and
  everything else a node publishes, in order after them;
* ``_fates.py`` -- what became of each message of tells sent: acknowledged,
  bounced, refused, sent again or given back;
* ``_outbox.py`` -- the tells waiting for the connection's writer (coalesced);
* ``_link.py`` -- one record of tells to a node: its window, and what became of each;
* ``_taken_in.py`` -- tells from other nodes, taken in in order (held across a gap)
  and acknowledged per actor;
* ``_tracked.py`` -- a sending node's record as the receiver tracks it: runs,
  streams, marks and skipped ranges;
* ``_requests.py`` -- asks, stops and lookups waiting for their reply;
* ``_watches.py`` -- death watch across nodes, both sides;
* ``_exports.py`` -- refs on the wire, both ways;
* ``_inbound.py`` -- asks and stops from other nodes, queued and answered;
* ``_names.py`` -- the cluster's registered names;
* ``_groups.py`` -- names served by many actors (shared names): the members' queue
  group here and the view of where the others serve them;
* ``_group_cell.py`` -- a group's ref;
* ``_group_sends.py`` -- each message to a group until it ends (tells sent together);
* ``_spawning.py`` -- spawns on other nodes, asked and answered; the placement rules;
* ``_children.py`` -- children on other nodes: the anchor their parent supervises;
* ``_members.py`` -- the members (the peers up) and who follows their changes;
  the answers to a joining node's hello;
* ``_frames.py`` -- what arrives, parsed: one parser per subject kind, none can raise;
* ``_bad_input.py`` -- bad input counted by kind and logged rate-limited, and the
  bytes undecodable dead letters may hold;
* ``_remote_cell.py`` -- the record behind a ref to an actor of another node;
* ``_codec.py`` -- what crosses, encoded;
* ``_classes.py`` -- the classes a cluster registers, and how their instances cross;
* ``_transport.py`` -- NATS, or for tests an in-memory bus;
* ``_refused.py`` -- what the server refused to carry (permissions), mapped to
  what the node published;
* ``_monitoring.py`` -- the statistics service: what ``trio-actors top`` asks,
  answered by a task of the node's (the subjects and documents are
  ``trio_actors/_monitoring.py``'s);
* ``_observed.py`` -- an observed node (``open_actor_system(tracing=...)`` or
  ``metrics=``): what it calls, and its tells' parts then.
"""

from __future__ import annotations

import ipaddress
import logging
import secrets
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager, suppress
from functools import partial
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import trio

from .. import nats
from .._cluster import Cluster, as_cluster, check_token
from .._interrupts import protect_module
from ._node import Node
from ._refused import on_server_error
from ._spawning import spawnable_classes
from ._subjects import connection_name
from ._transport import MemoryBus, MemoryTransport, NatsTransport, Transport

if TYPE_CHECKING:
    from ..actors import ActorSystem

_FLUSH_WITHIN = 2.0  # seconds a leaving node waits for the server to take its last words

_log = logging.getLogger("trio_actors")

__all__ = [
    "MemoryBus",
    "MemoryTransport",
    "NatsTransport",
    "Node",
    "Transport",
    "open_node",
    "open_server_warning",
    "spawnable_classes",
]


@asynccontextmanager
async def open_node(system: ActorSystem, cluster: str | Cluster, name: str) -> AsyncIterator[Node]:
    """Make ``system`` a node of ``cluster`` named ``name`` for the length of the
    block: connect, subscribe, and serve the node's own task. A checkpoint.
    Leaving it leaves the cluster (what was published is sent first)."""
    cluster = as_cluster(cluster)
    check_token(name, "node")
    spawnable = spawnable_classes(cluster)  # (TypeError now, before connecting)
    incarnation = secrets.token_hex(6)
    client_name = connection_name(cluster.name, name, incarnation)
    async with (
        _connect(cluster, client_name) as transport,
        _advisories(cluster, transport) as advisories,
        trio.open_nursery() as nursery,
    ):
        node = Node(system, transport, cluster, name, incarnation, nursery, spawnable)
        if advisories is not None:
            node.follow_advisories(advisories)
        nursery.start_soon(node.run, name=f"trio-actors node {name}")
        if isinstance(transport, NatsTransport):
            nursery.start_soon(node.follow_connection, transport.client)
            transport.client.on_server_error(partial(on_server_error, node))
        try:
            yield node
        finally:
            try:
                with trio.CancelScope(shield=True):  # (bounded: leave() waits at most 5 s)
                    await node.leave()
                    # What the node sent last -- answers, acknowledgements, its "bye"
                    # -- reaches the server also when the block ends by an exception
                    # or a cancellation from outside (the client then closes without
                    # a flush).
                    with trio.move_on_after(_FLUSH_WITHIN), suppress(Exception):
                        await transport.flush()
            finally:  # (also after a Ctrl-C at one of those awaits)
                node.close()  # (done by leave(), unless it was interrupted)
                node.finish()
                nursery.cancel_scope.cancel()


@asynccontextmanager
async def _connect(cluster: Cluster, client_name: str) -> AsyncIterator[Transport]:
    if cluster.bus is not None:
        async with cluster.bus.connect(client_name) as memory:
            yield memory
        return
    warning = open_server_warning(cluster, client_name)
    if warning is not None:
        _log.warning(warning)
    options = cluster.connect_options()
    async with nats.connect(list(cluster.servers), name=client_name, **options) as client:
        try:
            yield NatsTransport(client)
        finally:
            # The node has left (and flushed, for at most _FLUSH_WITHIN): a client
            # still reconnecting -- its server gone -- closes at once, and what it
            # could not send is counted (Node.unsent), never raised out of the block.
            within = _FLUSH_WITHIN if client.status == "connected" else 0.0
            with trio.CancelScope(shield=True), suppress(nats.ConnectionClosed):
                await client.close(send_within=within)


def open_server_warning(cluster: Cluster, client_name: str) -> str | None:
    """What to warn of when a node connects without credentials to a server that is
    not on this machine (``None``: it has credentials, or every server is on a
    loopback address): an open server is a trusted network only."""
    options = cluster.connect_options()
    if any(options[key] is not None for key in ("token", "user", "nkey_seed", "credentials")):
        return None
    remote = [server for server in cluster.servers if not _loopback(server)]
    if not remote:
        return None
    return (
        f"{client_name} connects without credentials to {', '.join(remote)}: an open "
        "server is a trusted network only -- any client it lets in reads every message "
        "and can speak for any node (tell, ask and stop any actor, take names, forge a "
        "node's bye); give each node its own user (trio-actors secure; see the "
        "Security page of the docs)"
    )


def _loopback(url: str) -> bool:
    host = urlsplit(url if "://" in url else f"nats://{url}").hostname or ""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:  # (a name: not known to be this machine)
        return False


@asynccontextmanager
async def _advisories(cluster: Cluster, transport: Transport) -> AsyncIterator[Transport | None]:
    """Where the node hears of connections that end: the system account, on a
    connection of its own (``Cluster(system_user=...)``); the in-memory bus itself;
    nowhere otherwise (heartbeats then)."""
    if cluster.bus is not None:
        yield transport if cluster.bus.advisories else None
        return
    if cluster.system_user is None and cluster.system_credentials is None:
        yield None
        return
    async with nats.connect(
        list(cluster.servers),
        name=f"ta.{cluster.name}.advisories",
        user=cluster.system_user,
        password=cluster.system_password,
        credentials=cluster.system_credentials,
        tls=cluster.tls,
        tls_hostname=cluster.tls_hostname,
    ) as client:
        yield NatsTransport(client)


def _fix_module_names() -> None:
    # Tracebacks and docs say trio_actors.remote.Node, not trio_actors.remote._node.Node.
    for name in ("MemoryBus", "MemoryTransport", "NatsTransport", "Node"):
        globals()[name].__module__ = __name__


_fix_module_names()
del _fix_module_names


protect_module(globals())

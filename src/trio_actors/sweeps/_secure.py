"""``trio-actors secure``: a secure deployment's files, written for a list of nodes
(``docs/security.rst`` is its reference).

``trio-actors secure NODE [NODE ...] --out DIR [--cluster-name NAME] [--cluster URL]
[--allow NODE:NODE,...] [--monitor [NAME]]`` writes into ``DIR`` (made with mode
0700; every file mode 0600, none overwritten):

* ``nats-server.conf`` -- two accounts: ``NODES``, one user per node named after
  it (a random password) with subject permissions such that it publishes only on
  subjects that carry its own name (its control messages, its answers, its
  messages to the actors of the nodes it is allowed to reach) and subscribes only
  to its own inbound subjects and the cluster's shared ones (heartbeats, name
  announcements, lookups); and ``SYS``, the system account, with one
  **subscribe-only** user for disconnect advisories. Nobody else gets in (no
  ``no_auth_user``).
* ``<NODE>.toml`` -- each node's configuration file (``Cluster.from_toml``): the
  servers, the cluster's name, the node's name, its user and password, and the
  advisories user. It holds secrets: it is the node's credentials file.
* with ``--monitor``, ``<NAME>.toml`` (default name ``ta-monitor``) -- the
  configuration file of a monitor (``trio-actors top --config``): a user of account
  ``NODES`` that may ask the nodes' statistics service and hear the answers, and
  nothing else -- it cannot tell, ask, stop, watch or look up an actor, hear a
  heartbeat, or answer as a node. It sees actor paths, classes and counts, never
  a message.

The decisions (``docs/security.rst`` says why): users and passwords, not nkeys --
a disconnect advisory names the connection's *user*, and a node named after its
user can check that an advisory of node X is X's connection (an nkey user is its
public key, which the other nodes would have to be given). Answers on explicit
permissions, not ``allow_responses``: an answer's subject names the node answering
(``P.r.<asker>.<incarnation>.<answerer>.<n>``), so a node answers only as itself,
at any time (the server's response permissions expire after two minutes by
default, are lost when the answering node reconnects, and keep an entry for every
message of tells received, whose reply subject nobody answers).
"""

from __future__ import annotations

import argparse
import os
import re
import secrets
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from urllib.parse import urlsplit

from .. import Cluster

__all__ = [
    "ADVISORIES_USER",
    "MONITOR_USER",
    "monitor_permissions",
    "node_permissions",
    "run_secure",
    "write_deployment",
]

ADVISORIES_USER = "ta-advisories"
"""The system-account user of a secure deployment: it may subscribe to disconnect
advisories and nothing else, and publish nothing."""

MONITOR_USER = "ta-monitor"
"""The monitor's name when ``--monitor`` gives none."""

_SERVER_CONF = "nats-server.conf"
_NAME = re.compile(r"[A-Za-z0-9_-]+")  # (as Cluster's names: NATS subject tokens)


def node_permissions(
    cluster: str, node: str, reaches: Iterable[str] | None
) -> dict[str, list[str]]:
    """The subjects node ``node`` of cluster ``cluster`` may publish to and subscribe
    to (``reaches``: the nodes whose actors it may send to; ``None``: all). Its
    answers to others' requests go on subjects that name it, allowed here like any
    other -- not by the server's response permissions (``allow_responses``: see the
    module's docstring)."""
    p = f"ta.{cluster}"
    sends = [f"{p}.n.*.*.{node}"] if reaches is None else [f"{p}.n.{t}.*.{node}" for t in reaches]
    return {
        "publish": [
            f"{p}.hb.{node}.*",  # its heartbeats and bye
            f"{p}.names.{node}.*",  # its claims and releases of names
            f"{p}.a.{node}.>",  # its acknowledgements of tells
            f"{p}.r.*.*.{node}.*",  # its answers to others' requests
            f"{p}.t.*.*.{node}.*",  # the stops of its actors that others watch
            f"{p}.name.*.{node}",  # its lookups
            f"{p}.shared.*.{node}",  # its tells and asks to shared names
            f"{p}.m.*.{node}.*",  # its answers to monitors (the statistics service)
            *sends,  # tells, asks, stops, watches and confirm rounds to others' actors
        ],
        "subscribe": [
            f"{p}.n.{node}.*.*",  # messages for its actors
            f"{p}.r.{node}.*.*.*",  # replies to its requests
            f"{p}.t.{node}.*.*.*",  # stops of actors it watches
            f"{p}.u.{node}.*.*",  # no-responders answers to its tells
            f"{p}.a.*.*.{node}.*",  # acknowledgements of its tells
            f"{p}.hb.*.*",  # every node's heartbeats
            f"{p}.names.*.*",  # every node's name announcements
            f"{p}.name.*.*",  # lookups of the names it registers
            f"{p}.shared.*.*",  # messages to the shared names it serves
            "$SRV.*",  # the statistics service: NATS's service API's requests to all,
            f"$SRV.*.ta-{cluster}",  # to its cluster's nodes,
            f"$SRV.*.ta-{cluster}.{node}",  # and to it;
            f"{p}.s.{node}",  # and its busiest actors
        ],
    }


def monitor_permissions(cluster: str, monitor: str) -> dict[str, list[str]]:
    """The subjects monitor ``monitor`` of cluster ``cluster`` may publish to and
    subscribe to: the statistics service's requests, and the answers to its own
    (``trio_actors/_monitoring.py``)."""
    p = f"ta.{cluster}"
    return {
        "publish": [
            "$SRV.*",  # NATS's service API: a verb to every service,
            f"$SRV.*.ta-{cluster}",  # to the cluster's nodes,
            f"$SRV.*.ta-{cluster}.*",  # to one of them;
            f"{p}.s.*",  # a node's busiest actors
        ],
        "subscribe": [f"{p}.m.{monitor}.*.*"],  # the nodes' answers to it
    }


def _user(name: str, password: str, permissions: Mapping[str, list[str]]) -> str:
    return (
        f'      {{\n        user: "{name}", password: "{password}",\n'
        "        permissions: {\n"
        f"          publish: {{ allow: [{_quoted(permissions['publish'])}] }},\n"
        f"          subscribe: {{ allow: [{_quoted(permissions['subscribe'])}] }}\n"
        "        }\n      }"
    )


def _quoted(subjects: Sequence[str]) -> str:
    return ", ".join(f'"{subject}"' for subject in subjects)


def server_configuration(
    cluster: str,
    passwords: Mapping[str, str],
    advisories_password: str,
    allowed: Mapping[str, list[str]] | None,
    port: int,
    monitor: tuple[str, str] | None = None,
) -> str:
    """The text of the ``nats-server`` configuration (see the module docstring;
    ``monitor``: the monitor's name and password, if there is one)."""
    users = []
    for node, password in passwords.items():
        reaches = None if allowed is None else allowed.get(node, [])
        users.append(_user(node, password, node_permissions(cluster, node, reaches)))
    if monitor is not None:
        name, password = monitor
        users.append(_user(name, password, monitor_permissions(cluster, name)))
    return (
        f"# trio-actors secure: cluster {cluster!r}, nodes {', '.join(passwords)}\n"
        "# Holds every node's password: readable by the server's user only.\n"
        f"port: {port}\n"
        "accounts {\n"
        "  SYS {\n    users = [\n"
        f'      {{\n        user: "{ADVISORIES_USER}", password: "{advisories_password}",\n'
        "        permissions: {\n"
        '          publish: { deny: [">"] },\n'
        '          subscribe: { allow: ["$SYS.ACCOUNT.*.DISCONNECT"] }\n'
        "        }\n      }\n    ]\n  }\n"
        "  NODES {\n    users = [\n" + ",\n".join(users) + "\n    ]\n  }\n"
        "}\n"
        "system_account: SYS\n"
    )


def node_file(
    cluster: str, servers: Sequence[str], node: str, password: str, advisories_password: str
) -> str:
    """The text of node ``node``'s configuration file (``Cluster.from_toml``)."""
    return (
        f"# trio-actors secure: node {node!r} of cluster {cluster!r}. Holds its password:\n"
        "# readable by the node's user only. Add types = [...] and errors = [...] here.\n"
        f"servers = [{_quoted(servers)}]\n"
        f'cluster = "{cluster}"\n'
        f'node = "{node}"\n\n'
        "[auth]\n"
        f'user = "{node}"\n'
        f'password = "{password}"\n\n'
        "[system]\n"
        f'user = "{ADVISORIES_USER}"\n'
        f'password = "{advisories_password}"\n'
    )


def monitor_file(cluster: str, servers: Sequence[str], monitor: str, password: str) -> str:
    """The text of the monitor's configuration file (``trio-actors top --config``)."""
    return (
        f"# trio-actors secure: monitor {monitor!r} of cluster {cluster!r} (trio-actors top\n"
        "# --config). Holds its password: readable by the monitor's user only.\n"
        f"servers = [{_quoted(servers)}]\n"
        f'cluster = "{cluster}"\n\n'
        "[auth]\n"
        f'user = "{monitor}"\n'
        f'password = "{password}"\n'
    )


def _write_secret(path: Path, text: str) -> None:
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as file:
        file.write(text)


def write_deployment(
    out: Path,
    nodes: Sequence[str],
    *,
    cluster: str = "trio-actors",
    servers: Sequence[str] = ("nats://127.0.0.1:4222",),
    allowed: Mapping[str, list[str]] | None = None,
    monitor: str | None = None,
) -> list[Path]:
    """Write the server's configuration and each node's file into ``out`` (see the
    module docstring), and with ``monitor`` (a name) the monitor's; return their
    paths (the server's first, the monitor's last).

    Raises:
        ValueError: a node name that is not a subject token, twice, or the
            advisories user's; an ``allowed`` entry naming an unknown node; a
            monitor named as a node or not a subject token; a file already there
            (nothing is overwritten); a server that is not a URL.
    """
    Cluster(list(servers), name=cluster)  # (a ValueError for a bad URL or name)
    for node in nodes:
        if not _NAME.fullmatch(node):
            raise ValueError(
                f"a node's name is letters, digits, '_' and '-' (part of NATS subjects), "
                f"got {node!r}"
            )
    if not nodes:
        raise ValueError("name at least one node")
    if "-" in nodes:  # (a lookup's reply subject has "-" where its answerer goes)
        raise ValueError("'-' stands for no node in the subjects: name the node otherwise")
    if len(set(nodes)) != len(nodes):
        raise ValueError(f"a node is named twice: {', '.join(nodes)}")
    if ADVISORIES_USER in nodes:
        raise ValueError(f"{ADVISORIES_USER!r} is the advisories user's name: not a node's")
    for sender, receivers in (allowed or {}).items():
        for node in (sender, *receivers):
            if node not in nodes:
                raise ValueError(f"--allow names {node!r}, which is not one of the nodes")
    if monitor is not None:
        if not _NAME.fullmatch(monitor) or monitor == "-":
            raise ValueError(
                f"the monitor's name is letters, digits, '_' and '-' (part of NATS "
                f"subjects), not '-', got {monitor!r}"
            )
        if monitor in nodes or monitor == ADVISORIES_USER:
            raise ValueError(f"the monitor's name {monitor!r} is a node's or the advisories user's")
    out.mkdir(mode=0o700, parents=True, exist_ok=True)
    paths = [out / _SERVER_CONF, *(out / f"{node}.toml" for node in nodes)]
    if monitor is not None:
        paths.append(out / f"{monitor}.toml")
    for path in paths:
        if path.exists():
            raise ValueError(f"{path} exists: not overwritten (choose another --out)")
    passwords = {node: secrets.token_urlsafe(24) for node in nodes}
    advisories = secrets.token_urlsafe(24)
    watcher = None if monitor is None else (monitor, secrets.token_urlsafe(24))
    port = urlsplit(servers[0]).port or 4222
    configuration = server_configuration(cluster, passwords, advisories, allowed, port, watcher)
    _write_secret(paths[0], configuration)
    for node, path in zip(nodes, paths[1 : 1 + len(nodes)], strict=True):
        _write_secret(path, node_file(cluster, servers, node, passwords[node], advisories))
    if watcher is not None:
        _write_secret(paths[-1], monitor_file(cluster, servers, *watcher))
    return paths


def parse_allow(entries: Sequence[str] | None) -> dict[str, list[str]] | None:
    """``--allow a:b,c`` (repeatable): which nodes each node may send to.

    Raises:
        ValueError: an entry not of the form ``NODE:NODE[,NODE...]``.
    """
    if not entries:
        return None
    allowed: dict[str, list[str]] = {}
    for entry in entries:
        sender, colon, receivers = entry.partition(":")
        targets = [target.strip() for target in receivers.split(",")]
        if not colon or not sender.strip() or not all(targets):
            raise ValueError(f"--allow expects NODE:NODE[,NODE...], got {entry!r}")
        allowed.setdefault(sender.strip(), []).extend(targets)
    return allowed


def run_secure(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    try:
        paths = write_deployment(
            Path(args.out),
            args.nodes,
            cluster=args.cluster_name,
            servers=args.cluster or ("nats://127.0.0.1:4222",),
            allowed=parse_allow(args.allow),
            monitor=args.monitor,
        )
    except (ValueError, TypeError) as error:
        parser.error(str(error))
    print(f"wrote {', '.join(str(path) for path in paths)} (mode 0600)")
    print("then:")
    print(f"  nats-server -c {paths[0]}")
    for path in paths[1 : 1 + len(args.nodes)]:
        print(f"  trio-actors node MODULE:FUNCTION --config {path}")
    if args.monitor is not None:
        print(f"  trio-actors top --config {paths[-1]}")
    return 0

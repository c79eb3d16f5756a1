"""``trio-actors top``: connect, then the live view, one snapshot (``--once``), or its
JSON (``--json``) -- ``docs/observing.rst`` is the reference.

The live view is rich's ``Live`` on the terminal's alternate screen, with its own
refresh thread off: every drawing happens in the trio thread, after a poll and
after a key. One task polls every ``--interval`` seconds (every node's summary, and
the selected node's busiest actors while they are shown; at once after a key that
changes what is asked); another reads the keys (``_terminal.py``). Ctrl-C ends it
with exit code 130, the terminal restored.

Exit codes: 0 quit (or a snapshot printed); 1 ``--once``/``--json`` and no node
answered; 2 a bad option, no connection (or one the client gave up on), or the
server refused the monitor's subscription (a one-line error, never a traceback);
130 Ctrl-C.
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import sys
import time
from collections.abc import Callable
from typing import Any, Final

import attrs
import trio

from .. import Cluster, nats
from ._model import STALE_AFTER, TopState, observe, on_key, with_actors
from ._poll import Poller

__all__ = ["Options", "options_from", "run_top"]

_CONNECT_ERRORS: Final = (
    OSError,
    nats.ServerError,
    nats.ProtocolError,
    nats.ConnectionClosed,
    trio.TooSlowError,
)


@attrs.frozen
class Options:
    """What the command line asks of ``top``."""

    cluster: Cluster
    monitor: str
    interval: float
    wait: float
    actors: int
    once: bool
    json: bool


def options_from(args: argparse.Namespace) -> Options:
    """The options, checked.

    Raises:
        ValueError: a bad option or configuration file (the message says which).
    """
    cluster = Cluster() if args.config is None else Cluster.from_toml(args.config)
    changes: dict[str, Any] = {}
    if args.cluster:
        changes["servers"] = args.cluster
    if args.cluster_name is not None:
        changes["name"] = args.cluster_name
    try:
        cluster = attrs.evolve(cluster, **changes)
    except (TypeError, ValueError) as error:
        raise ValueError(str(error)) from None
    for option in ("interval", "wait"):
        value = getattr(args, option)
        if not 0 < value < 3600:
            raise ValueError(f"--{option} is seconds > 0 (below an hour), got {value:g}")
    if not 1 <= args.actors <= 100:
        raise ValueError(f"--actors is a whole number from 1 to 100, got {args.actors}")
    # A secure deployment's monitor is its user (its permissions name it); else
    # a name of this run's own.
    monitor = cluster.user or f"top-{secrets.token_hex(4)}"
    once = bool(args.once or args.json)
    return Options(cluster, monitor, args.interval, args.wait, args.actors, once, args.json)


def _say(message: str) -> None:
    print(f"trio-actors top: {message}", file=sys.stderr, flush=True)


def _leaves(error: BaseException) -> list[BaseException]:
    if isinstance(error, BaseExceptionGroup):
        return [leaf for inner in error.exceptions for leaf in _leaves(inner)]
    return [error]


def run_top(args: argparse.Namespace, parser: argparse.ArgumentParser) -> int:
    """The ``top`` command (the CLI has checked that rich is there, unless
    ``--json``)."""
    try:
        options = options_from(args)
    except ValueError as error:
        parser.error(str(error))
    if not options.once and not (sys.stdin.isatty() and sys.stdout.isatty()):
        parser.error("the live view needs a terminal: use --once or --json for a snapshot")
    try:
        code, show = trio.run(_top, options)
    except BaseException as error:
        leaves = _leaves(error)
        if any(isinstance(leaf, KeyboardInterrupt) for leaf in leaves):
            return 130
        closed = [leaf for leaf in leaves if isinstance(leaf, nats.ConnectionClosed)]
        if not closed:
            raise
        _say(f"the connection to {', '.join(options.cluster.servers)} closed: {closed[0]}")
        return 2
    if show is not None:  # (a snapshot, printed once the connection is closed)
        try:
            show()
            sys.stdout.flush()
        except BrokenPipeError:  # (| head): what Python's documentation advises
            os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
            return 1
    return code


Shown = tuple[int, Callable[[], None] | None]
"""An exit code, and what prints the snapshot (``None``: nothing to print)."""


async def _top(options: Options) -> Shown:
    cluster = options.cluster
    servers = ", ".join(cluster.servers)
    connected = False
    try:
        async with nats.connect(
            list(cluster.servers),
            name=f"ta.{cluster.name}.top.{options.monitor}",
            **cluster.connect_options(),
        ) as client:
            connected = True
            refused: list[str] = []
            client.on_server_error(refused.append)
            poller = Poller(client, cluster.name, options.monitor)
            await client.flush()  # (subscribed, or refused: the -ERR came before the PONG)
            if refused:
                _say(
                    f"the server refused: {refused[0]} -- a secure deployment's monitor "
                    "needs a monitor's configuration file (trio-actors secure ... --monitor)"
                )
                return 2, None
            if options.once:
                return await _snapshot(poller, options)
            return await _Live(poller, options, refused).run(), None
    except _CONNECT_ERRORS as error:
        if connected:
            raise
        _say(f"cannot connect to {servers}: {type(error).__name__}: {error}")
        return 2, None


async def _snapshot(poller: Poller, options: Options) -> Shown:
    """``--once`` / ``--json``: two polls ``--interval`` apart (so that rates
    exist), then the table or the JSON."""
    began = trio.current_time()
    state = TopState(options.cluster.name)
    first = await poller.summaries(options.wait, set())
    state = observe(state, first, trio.current_time())
    await trio.sleep_until(began + options.interval)
    second = await poller.summaries(options.wait, {summary.node for summary in first})
    state = observe(state, second, trio.current_time())
    if poller.forged or poller.bad:
        _say(f"dropped {poller.forged} forged and {poller.bad} unreadable answer(s)")
    if not state.rows:
        servers = ", ".join(options.cluster.servers)
        _say(f"no node of cluster {options.cluster.name!r} answered at {servers}")
        return 1, None
    if options.json:
        nodes = [
            {
                **row.summary.to_json(),
                "messages_per_second": row.message_rate,
                "dead_letters_per_second": row.dead_rate,
                "answered": row.missed == 0,
            }
            for row in state.rows
        ]
        text = json.dumps({"cluster": options.cluster.name, "nodes": nodes}, indent=2)
        return 0, lambda: print(text)
    from rich.console import Console

    from ._view import nodes_table

    table = nodes_table(state, marks=False)
    width = None if sys.stdout.isatty() else 200  # (a pipe: no wrapping at 80)
    return 0, lambda: Console(width=width).print(table)


class _Live:
    """The live view: its state, what draws it, and its two tasks."""

    def __init__(self, poller: Poller, options: Options, refused: list[str]) -> None:
        self.poller = poller
        self.options = options
        self.refused = refused
        self.state = TopState(options.cluster.name)
        self.refreshed = ""
        self.poke = trio.Event()
        self.draw: Callable[[], None] = lambda: None

    async def run(self) -> int:
        from rich.console import Console
        from rich.live import Live

        from ._terminal import cbreak, read_keys

        fd = sys.stdin.fileno()
        console = Console()
        send, receive = trio.open_memory_channel[str](64)
        with (
            cbreak(fd),
            Live(console=console, screen=True, auto_refresh=False, transient=True) as live,
        ):
            self.draw = lambda: self._draw(live)
            self.draw()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(read_keys, fd, send)
                nursery.start_soon(self._poll)
                async with receive:
                    async for key in receive:
                        self._key(key)
                        if self.state.quit:
                            break
                nursery.cancel_scope.cancel()
        return 0

    def _draw(self, live: Any) -> None:
        from ._view import render

        live.update(render(self.state, self.refreshed), refresh=True)

    def _key(self, key: str) -> None:
        before = self.state
        self.state = on_key(before, key)
        asked = (self.state.detail, self.state.selected, self.state.actor_sort)
        if self.state.detail and asked != (before.detail, before.selected, before.actor_sort):
            self.poke.set()  # (what is asked changed: poll now)
        if before.paused and not self.state.paused:
            self.poke.set()
        self.draw()

    async def _poll(self) -> None:
        options, poller = self.options, self.poller
        while True:
            began = trio.current_time()
            if not self.state.paused:
                expected = {row.summary.node for row in self.state.rows if not row.stale}
                summaries = await poller.summaries(options.wait, expected)
                self.state = observe(self.state, summaries, trio.current_time())
                selected = self.state.selected
                if self.state.detail and selected is not None:
                    sort = self.state.actor_sort
                    answer = await poller.actors(selected, sort, options.actors, options.wait)
                    if self.state.selected == selected and self.state.actor_sort == sort:
                        self.state = with_actors(self.state, answer)
                self.refreshed = time.strftime("%H:%M:%S")
                self.state = attrs.evolve(self.state, notice=self._notice())
                self.draw()
            with trio.move_on_at(began + options.interval):
                await self.poke.wait()
            self.poke = trio.Event()

    def _notice(self) -> str:
        said = []
        if self.refused:
            said.append(f"the server refused: {self.refused[-1]}")
        if self.poller.forged or self.poller.bad:
            said.append(
                f"dropped {self.poller.forged} forged, {self.poller.bad} unreadable answer(s)"
            )
        stale = sum(row.stale for row in self.state.rows)
        if stale:
            said.append(f"{stale} node(s) silent for {STALE_AFTER}+ polls")
        return "; ".join(said)

"""How ``trio-actors top`` draws a :class:`~._model.TopState` with rich: the nodes
table, the selected node's busiest actors, the footer with the keys, the help.

Pure: :func:`render` returns a renderable made from the state alone (the time of
the last refresh is the caller's, passed in), so a test renders it into a
``Console(record=True)`` and reads the text. ``--once`` prints :func:`nodes_table`.
Markers a plain capture keeps (no colour needed): ``>`` before the selected node,
``v``/``^`` after the sorted column's name.
"""

from __future__ import annotations

import math

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from .._monitoring import ActorRow
from ._model import ACTOR_SORTS, COLUMNS, HELP, TopState, selected_row, sorted_rows

__all__ = ["actors_table", "duration", "help_table", "nodes_table", "rate", "render", "seconds"]


def duration(value: float) -> str:
    """An uptime: ``42s``, ``5m03s``, ``2h05m``, ``3d04h``."""
    whole = int(value)
    days, rest = divmod(whole, 86_400)
    hours, rest = divmod(rest, 3_600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d{hours:02d}h"
    if hours:
        return f"{hours}h{minutes:02d}m"
    if minutes:
        return f"{minutes}m{secs:02d}s"
    return f"{secs}s"


def rate(value: float | None) -> str:
    """Per second: ``-`` (not known yet), ``0``, ``12.5``, ``345``, ``12.3k``, ``4.5M``."""
    if value is None or not math.isfinite(value):
        return "-"
    if value >= 999_950:
        return f"{value / 1e6:.1f}M"
    if value >= 9_999.5:
        return f"{value / 1e3:.1f}k"
    if value >= 99.5 or value == 0:
        return f"{value:.0f}"
    return f"{value:.1f}"


def seconds(value: float) -> str:
    """A turn's length: ``-`` (none timed), ``850us``, ``12.4ms``, ``1.20s``."""
    if value <= 0:
        return "-"
    if value < 1e-3:
        return f"{value * 1e6:.0f}us"
    if value < 1:
        return f"{value * 1e3:.1f}ms"
    return f"{value:.2f}s"


def _header(name: str, sorted_by: bool, descending: bool) -> str:
    return f"{name} {'v' if descending else '^'}" if sorted_by else name


def nodes_table(state: TopState, *, marks: bool = True) -> Table:
    """One row per node incarnation, in the state's order (``marks``: the
    selection's ``>`` and the sort's ``^``/``v``)."""
    table = Table(box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False)
    right = {"UP", "ACTORS", "MSG/S", "DEAD/S", "IN DOUBT", "LONGEST TURN"}
    if marks:
        table.add_column("", width=1, no_wrap=True)
    for index, name in enumerate(COLUMNS):
        table.add_column(
            _header(name, marks and index == state.sort_column, state.descending),
            justify="right" if name in right else "left",
            no_wrap=True,
            overflow="ellipsis",
            max_width=48 if name == "ACTOR" else None,
        )
    for row in sorted_rows(state):
        summary = row.summary
        chosen = marks and summary.node == state.selected
        cells = [
            summary.node,
            duration(summary.uptime),
            str(summary.live_actors),
            "no answer" if row.stale else rate(row.message_rate),
            "" if row.stale else rate(row.dead_rate),
            str(summary.unconfirmed),
            seconds(summary.longest_turn_seconds),
            summary.longest_turn_path or "-",
        ]
        style = "dim" if row.stale else ("reverse" if chosen else "")
        table.add_row(*(([">" if chosen else ""]) if marks else []), *cells, style=style)
    return table


def _actor_key(row: ActorRow, sort: str) -> float:
    if sort == "rate":
        return -1.0 if row.rate is None else row.rate
    if sort == "mailbox":
        return row.mailbox
    if sort == "turn":
        return row.longest_turn_seconds
    return row.dead_letters


def actors_table(state: TopState) -> RenderableType:
    """The selected node's busiest actors (sorted here too by the state's actor
    sort, so a change shows at once; the next answer is sorted by the node)."""
    answer = state.actors
    title = f"{state.selected}: busiest actors by {state.actor_sort.replace('_', ' ')}"
    if answer is None:
        return Text(f"{title} -- {state.actors_error or 'waiting for an answer'}")
    table = Table(
        title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False
    )
    names = ("PATH", "CLASS", "STATE", "MSG/S", "QUEUED", "HANDLED", "DEAD", "FAIL", "RESTARTS")
    sorted_by = {"MSG/S": "rate", "QUEUED": "mailbox", "DEAD": "dead_letters"}
    for name in (*names, "LONGEST TURN"):
        marked = sorted_by.get(name, "turn" if name == "LONGEST TURN" else "") == state.actor_sort
        table.add_column(
            _header(name, marked, True),
            justify="left" if name in ("PATH", "CLASS", "STATE") else "right",
            no_wrap=True,
            overflow="ellipsis",
            max_width=56 if name == "PATH" else None,
        )
    rows = sorted(answer.actors, key=lambda row: _actor_key(row, state.actor_sort), reverse=True)
    for row in rows:
        table.add_row(
            row.path,
            row.actor_class,
            row.state,
            rate(row.rate),
            str(row.mailbox),
            str(row.handled),
            str(row.dead_letters),
            str(row.failures),
            str(row.restarts),
            seconds(row.longest_turn_seconds),
        )
    shown = f"{len(rows)} of {answer.total_actors} actors"
    note = f"{shown}; rates over {answer.interval:.1f}s" if answer.interval else shown
    if state.actors_error:
        note += f" -- latest poll: {state.actors_error}"
    return Group(table, Text(note, style="dim"))


def help_table() -> Table:
    table = Table(title="keys", title_justify="left", box=box.SIMPLE, show_header=False)
    table.add_column(no_wrap=True)
    table.add_column()
    for keys, what in HELP:
        table.add_row(keys, what)
    return table


def render(state: TopState, refreshed: str = "") -> RenderableType:
    """The whole screen (``refreshed``: when the last poll ended, as the caller
    says it)."""
    nodes = len({row.summary.node for row in state.rows})
    status = "paused" if state.paused else f"refreshed {refreshed}" if refreshed else "polling"
    header = Text.assemble(
        ("trio-actors top", "bold"), f"  cluster {state.cluster}  {nodes} node(s)  {status}"
    )
    parts: list[RenderableType] = [header]
    if state.help:
        parts.append(help_table())
    elif state.rows:
        parts.append(nodes_table(state))
        if state.detail and selected_row(state) is not None:
            parts.append(actors_table(state))
    else:
        parts.append(Text("no node has answered yet", style="dim"))
    sort = COLUMNS[state.sort_column]
    order = "descending" if state.descending else "ascending"
    actor_sort = ACTOR_SORTS.index(state.actor_sort) + 1
    footer = (
        f"? help  q quit  j/k select  enter actors  s/S sort ({sort}, {order})  "
        f"a actors' sort ({actor_sort}/{len(ACTOR_SORTS)})  p pause"
    )
    parts.append(Text(footer, style="dim"))
    if state.notice:
        parts.append(Text(state.notice, style="bold red"))
    return Group(*parts)

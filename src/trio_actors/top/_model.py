"""What ``trio-actors top`` shows, as a value: the nodes' rows with their rates, the
selection, the sorts, the view -- and how answers and keys change it.

Pure: no I/O, no clock, no terminal (the caller passes the time and the answers),
so every screen and every key is tested without a cluster. :class:`TopState` is
frozen; :func:`observe`, :func:`with_actors` and :func:`on_key` return a new one.

Rates are computed from two summaries of the same node incarnation, on the node's
own clock (``NodeSummary.clock``), so a slow network or a late poll does not bend
them. A node that restarts is a new incarnation: a new row, whose rates start
again; the old one's row goes at once when the new one answers in its place, else
after :data:`DROP_AFTER` seconds without an answer (and is shown as "no answer"
after :data:`STALE_AFTER` polls without one).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any, Final

import attrs

from .._monitoring import ActorsAnswer, NodeSummary

__all__ = [
    "ACTOR_SORTS",
    "COLUMNS",
    "DROP_AFTER",
    "HELP",
    "STALE_AFTER",
    "NodeRow",
    "TopState",
    "observe",
    "on_key",
    "selected_row",
    "sorted_rows",
    "with_actors",
]

COLUMNS: Final = ("NODE", "UP", "ACTORS", "MSG/S", "DEAD/S", "IN DOUBT", "LONGEST TURN", "ACTOR")
"""The nodes table's columns (keys ``1`` to ``8`` sort by them)."""

ACTOR_SORTS: Final = ("rate", "mailbox", "turn", "dead_letters")
"""What the busiest actors are sorted by, in the order ``a`` goes through them."""

STALE_AFTER: Final = 3
"""Polls without an answer after which a node's row says "no answer"."""
DROP_AFTER: Final = 30.0
"""Seconds without an answer after which a node's row is dropped."""

HELP: Final = (
    ("up / down, k / j", "select a node"),
    ("enter / right", "show the selected node's busiest actors"),
    ("left / esc", "back to the nodes"),
    ("s / S", "sort the nodes by the next column / reverse the order"),
    ("1 ... 8", "sort the nodes by that column"),
    ("a", "sort the busiest actors by the next key (rate, mailbox, turn, dead letters)"),
    ("p", "pause / resume polling"),
    ("? / h", "show / hide this help"),
    ("q / ctrl-c", "quit"),
)
"""The keys, as the help shows them."""


@attrs.frozen
class NodeRow:
    """One node incarnation's row.

    Attributes:
        summary: its latest summary.
        message_rate: messages handled per second between its last two summaries
            (``None``: one summary so far).
        dead_rate: dead letters per second, likewise.
        seen_at: the monitor's time of its latest answer.
        missed: polls since then without an answer from it.
    """

    summary: NodeSummary
    message_rate: float | None = None
    dead_rate: float | None = None
    seen_at: float = 0.0
    missed: int = 0

    @property
    def key(self) -> tuple[str, str]:
        return (self.summary.node, self.summary.incarnation)

    @property
    def stale(self) -> bool:
        """Whether it has missed :data:`STALE_AFTER` polls."""
        return self.missed >= STALE_AFTER


@attrs.frozen
class TopState:
    """Everything the screen shows.

    Attributes:
        cluster: the cluster's name.
        rows: the nodes' rows, in the order they first answered.
        selected: the selected node's name (it stays selected as the rows re-sort).
        detail: whether the selected node's busiest actors are shown.
        sort_column: the nodes table's sort (an index into :data:`COLUMNS`).
        descending: largest first.
        actor_sort: the busiest actors' sort (one of :data:`ACTOR_SORTS`).
        actors: the selected node's latest answer (``None``: none yet).
        actors_error: why there is none (an error answer, or no answer).
        paused: polling is paused (the screen keeps what it had).
        help: the help is shown.
        quit: the user asked to quit.
        polls: polls so far.
        notice: a line for the footer (a server's error, ...).
    """

    cluster: str
    rows: tuple[NodeRow, ...] = ()
    selected: str | None = None
    detail: bool = False
    sort_column: int = 0
    descending: bool = False
    actor_sort: str = "rate"
    actors: ActorsAnswer | None = None
    actors_error: str = ""
    paused: bool = False
    help: bool = False
    quit: bool = False
    polls: int = 0
    notice: str = ""


def _rates(previous: NodeSummary, summary: NodeSummary) -> tuple[float | None, float | None]:
    elapsed = summary.clock - previous.clock
    handled = summary.handled - previous.handled
    dead = summary.dead_letters.total - previous.dead_letters.total
    if elapsed <= 0 or handled < 0 or dead < 0:
        return None, None
    return handled / elapsed, dead / elapsed


def observe(state: TopState, summaries: Sequence[NodeSummary], now: float) -> TopState:
    """``state`` after a poll answered by ``summaries`` at the monitor's time ``now``."""
    heard = {(summary.node, summary.incarnation): summary for summary in summaries}
    answered_names = {node for node, _incarnation in heard}
    rows: list[NodeRow] = []
    known = set()
    for row in state.rows:
        summary = heard.get(row.key)
        if summary is None:
            gone = row.summary.node in answered_names  # (a new incarnation answered)
            if gone or now - row.seen_at >= DROP_AFTER:
                continue
            rows.append(attrs.evolve(row, missed=row.missed + 1))
        elif summary.clock == row.summary.clock:  # (the node's cached summary again)
            rows.append(attrs.evolve(row, seen_at=now, missed=0))
        else:
            message_rate, dead_rate = _rates(row.summary, summary)
            rows.append(NodeRow(summary, message_rate, dead_rate, now, 0))
        known.add(row.key)
    for key, summary in heard.items():
        if key not in known:
            rows.append(NodeRow(summary, seen_at=now))
    new = attrs.evolve(state, rows=tuple(rows), polls=state.polls + 1)
    return _keep_selection(new)


def with_actors(state: TopState, answer: ActorsAnswer | str | None) -> TopState:
    """``state`` with the selected node's busiest actors (an error's text, or
    ``None`` for no answer)."""
    if isinstance(answer, ActorsAnswer):
        if answer.node != state.selected:
            return state  # (an answer for a node no longer selected)
        return attrs.evolve(state, actors=answer, actors_error="")
    return attrs.evolve(state, actors_error=answer or "no answer")


def _column_key(column: int) -> Callable[[NodeRow], Any]:
    keys: tuple[Callable[[NodeRow], Any], ...] = (
        lambda row: row.summary.node,
        lambda row: row.summary.uptime,
        lambda row: row.summary.live_actors,
        lambda row: -1.0 if row.message_rate is None else row.message_rate,
        lambda row: -1.0 if row.dead_rate is None else row.dead_rate,
        lambda row: row.summary.unconfirmed,
        lambda row: row.summary.longest_turn_seconds,
        lambda row: row.summary.longest_turn_path or "",
    )
    return keys[column]


def sorted_rows(state: TopState) -> list[NodeRow]:
    """The rows in the table's order (ties: by node name, then incarnation)."""
    by_name = sorted(state.rows, key=lambda row: row.key)
    return sorted(by_name, key=_column_key(state.sort_column), reverse=state.descending)


def selected_row(state: TopState) -> NodeRow | None:
    """The selected node's row (its newest incarnation's first in table order)."""
    for row in sorted_rows(state):
        if row.summary.node == state.selected:
            return row
    return None


def _keep_selection(state: TopState) -> TopState:
    """The selection still names a node shown, else the first row (or nothing)."""
    if selected_row(state) is not None:
        return state
    rows = sorted_rows(state)
    first = rows[0].summary.node if rows else None
    return attrs.evolve(state, selected=first, actors=None, actors_error="")


def _move(state: TopState, step: int) -> TopState:
    names: list[str] = []
    for row in sorted_rows(state):
        if row.summary.node not in names:
            names.append(row.summary.node)
    if not names:
        return state
    at = names.index(state.selected) if state.selected in names else 0
    chosen = names[max(0, min(len(names) - 1, at + step))]
    if chosen == state.selected:
        return state
    return attrs.evolve(state, selected=chosen, actors=None, actors_error="")


def on_key(state: TopState, key: str) -> TopState:
    """``state`` after ``key`` (a character, or ``up``, ``down``, ``left``,
    ``right``, ``enter``, ``escape``: ``_terminal.decode_keys``). An unknown key
    changes nothing; with the help shown, any key but ``q`` hides it."""
    if key == "q":
        return attrs.evolve(state, quit=True)
    if state.help:
        return attrs.evolve(state, help=False)
    if key in ("?", "h"):
        return attrs.evolve(state, help=True)
    if key in ("up", "k"):
        return _move(state, -1)
    if key in ("down", "j"):
        return _move(state, 1)
    if key in ("enter", "right"):
        return attrs.evolve(state, detail=state.selected is not None)
    if key in ("left", "escape"):
        return attrs.evolve(state, detail=False)
    if key == "s":
        return attrs.evolve(state, sort_column=(state.sort_column + 1) % len(COLUMNS))
    if key == "S":
        return attrs.evolve(state, descending=not state.descending)
    if len(key) == 1 and "1" <= key <= str(len(COLUMNS)):
        return attrs.evolve(state, sort_column=int(key) - 1)
    if key == "a":
        following = ACTOR_SORTS[(ACTOR_SORTS.index(state.actor_sort) + 1) % len(ACTOR_SORTS)]
        return attrs.evolve(state, actor_sort=following)
    if key == "p":
        return attrs.evolve(state, paused=not state.paused)
    return state

"""What ``trio-actors top`` shows, as a value (``top/_model.py``): rates from two
summaries on the node's clock, a node's new incarnation, silent nodes marked then
dropped, the selection, the sorts both ways, and every key the help lists."""

from __future__ import annotations

from typing import Any

import attrs
import pytest

import trio_actors as ta
from trio_actors._monitoring import ActorRow, ActorsAnswer, NodeSummary
from trio_actors.top._model import (
    ACTOR_SORTS,
    COLUMNS,
    DROP_AFTER,
    HELP,
    STALE_AFTER,
    TopState,
    observe,
    on_key,
    selected_row,
    sorted_rows,
    with_actors,
)


def summary(node: str = "n0", **changes: Any) -> NodeSummary:
    base = NodeSummary(
        node=node,
        incarnation=f"{node}-1",
        cluster="c",
        clock=100.0,
        uptime=10.0,
        live_actors=3,
        spawned=3,
        handled=0,
        restarts=0,
        failures=0,
        expected_errors=0,
        dead_letters=ta.DeadLetterCounts(),
        unconfirmed=0,
        longest_turn_seconds=0.0,
        longest_turn_path=None,
        longest_round_seconds=0.0,
        members=1,
        bad_input=ta.BadInputCounts(),
        not_permitted=0,
    )
    return attrs.evolve(base, **changes)


def answer(node: str, paths: list[str]) -> ActorsAnswer:
    rows = tuple(
        ActorRow(path, "Worker", "running", n, 10 * n, float(n), 0, 0, 0, 0.001 * n)
        for n, path in enumerate(paths)
    )
    return ActorsAnswer(node, f"{node}-1", 100.0, 1.0, "rate", len(rows), rows)


def test_rates_come_from_two_summaries_on_the_nodes_clock() -> None:
    state = observe(TopState("c"), [summary(handled=100)], now=0.0)
    [row] = state.rows
    assert (row.message_rate, row.dead_rate) == (None, None)
    later = summary(clock=102.0, handled=600, dead_letters=ta.DeadLetterCounts(stranded=4))
    state = observe(state, [later], now=5.0)  # (the monitor's time does not matter)
    [row] = state.rows
    assert (row.message_rate, row.dead_rate) == (250.0, 2.0)
    assert (row.summary, row.seen_at, state.polls) == (later, 5.0, 2)


def test_the_same_cached_summary_again_keeps_the_rates() -> None:
    state = observe(TopState("c"), [summary(handled=0)], now=0.0)
    state = observe(state, [summary(clock=101.0, handled=50)], now=1.0)
    again = observe(state, [summary(clock=101.0, handled=50)], now=1.05)
    assert again.rows[0].message_rate == 50.0


def test_a_new_incarnation_is_a_new_row_whose_rates_start_again() -> None:
    state = observe(TopState("c"), [summary(handled=10)], now=0.0)
    state = observe(state, [summary(clock=101.0, handled=20)], now=1.0)
    restarted = summary(incarnation="n0-2", clock=5.0, handled=3)
    state = observe(state, [restarted], now=2.0)
    [row] = state.rows  # (the old incarnation went when the new one answered)
    assert (row.summary.incarnation, row.message_rate) == ("n0-2", None)


def test_two_live_incarnations_of_one_name_keep_a_row_each() -> None:
    twins = [summary(), summary(incarnation="n0-2")]
    state = observe(TopState("c"), twins, now=0.0)
    state = observe(state, [attrs.evolve(s, clock=101.0, handled=5) for s in twins], now=1.0)
    assert [(row.summary.incarnation, row.message_rate) for row in sorted_rows(state)] == [
        ("n0-1", 5.0),
        ("n0-2", 5.0),
    ]


def test_a_silent_node_says_no_answer_then_goes() -> None:
    state = observe(TopState("c"), [summary("n0"), summary("n1")], now=0.0)
    for poll in range(1, STALE_AFTER + 1):
        state = observe(state, [summary("n0", clock=100.0 + poll)], now=float(poll))
        silent = next(row for row in state.rows if row.summary.node == "n1")
        assert (silent.missed, silent.stale) == (poll, poll >= STALE_AFTER)
    state = observe(state, [summary("n0", clock=200.0)], now=DROP_AFTER)
    assert [row.summary.node for row in state.rows] == ["n0"]


def test_the_first_node_is_selected_and_the_selection_follows_its_node() -> None:
    state = observe(TopState("c"), [summary("n1"), summary("n0")], now=0.0)
    assert state.selected == "n0"  # (first in the table's order: by name)
    state = on_key(state, "down")
    assert state.selected == "n1"
    state = on_key(on_key(state, "3"), "S")  # (by actors, descending: n1 has more)
    state = observe(state, [summary("n1", clock=101.0, live_actors=9), summary("n0")], now=1.0)
    assert [row.summary.node for row in sorted_rows(state)] == ["n1", "n0"]
    assert state.selected == "n1"
    assert selected_row(state) is not None
    state = observe(state, [summary("n0")], now=DROP_AFTER + 1)
    assert state.selected == "n0"  # (its node gone: the first row)


@pytest.mark.parametrize("column", range(len(COLUMNS)))
def test_every_column_sorts_both_ways(column: int) -> None:
    low = summary(
        "a", uptime=1.0, live_actors=1, unconfirmed=0, longest_turn_seconds=0.1,
        longest_turn_path="system/a",
    )  # fmt: skip
    high = summary(
        "b", uptime=9.0, live_actors=9, unconfirmed=5, longest_turn_seconds=0.9,
        longest_turn_path="system/b",
    )  # fmt: skip
    state = observe(TopState("c"), [high, low], now=0.0)
    state = observe(
        state,
        [
            attrs.evolve(high, clock=101.0, handled=90, dead_letters=ta.DeadLetterCounts(9)),
            attrs.evolve(low, clock=101.0, handled=10, dead_letters=ta.DeadLetterCounts(1)),
        ],
        now=1.0,
    )
    state = on_key(state, str(column + 1))
    assert state.sort_column == column
    assert [row.summary.node for row in sorted_rows(state)] == ["a", "b"]
    assert [row.summary.node for row in sorted_rows(on_key(state, "S"))] == ["b", "a"]


def test_s_goes_through_the_columns_and_round() -> None:
    state = TopState("c")
    seen = []
    for _ in range(len(COLUMNS)):
        state = on_key(state, "s")
        seen.append(state.sort_column)
    assert seen == [*range(1, len(COLUMNS)), 0]


def test_every_key_the_help_lists_does_what_it_says() -> None:
    state = observe(TopState("c"), [summary("n0"), summary("n1")], now=0.0)
    listed = " ".join(keys for keys, _what in HELP)
    for key in ("up", "down", "k", "j", "enter", "right", "left", "esc", "s", "S", "a", "p"):
        assert key in listed
    assert on_key(state, "j").selected == on_key(state, "down").selected == "n1"
    assert on_key(on_key(state, "j"), "k").selected == "n0"
    assert on_key(on_key(state, "j"), "up").selected == "n0"
    assert on_key(state, "k").selected == "n0"  # (stays at the top)
    shown = on_key(state, "enter")
    assert shown.detail
    assert on_key(state, "right").detail
    assert not on_key(shown, "left").detail
    assert not on_key(shown, "escape").detail
    assert on_key(state, "S").descending
    assert on_key(state, "a").actor_sort == ACTOR_SORTS[1] == "mailbox"
    cycled = state
    for _ in ACTOR_SORTS:
        cycled = on_key(cycled, "a")
    assert cycled.actor_sort == "rate"
    paused = on_key(state, "p")
    assert paused.paused
    assert not on_key(paused, "p").paused
    for key in ("?", "h"):
        helped = on_key(state, key)
        assert helped.help
        assert not on_key(helped, "j").help  # (any key hides it)
        assert on_key(helped, "j").selected == state.selected  # (and does nothing else)
    assert on_key(state, "q").quit
    assert on_key(on_key(state, "?"), "q").quit
    assert on_key(state, "x") == state  # (not a key: nothing)


def test_the_selected_nodes_actors_and_their_errors() -> None:
    state = observe(TopState("c"), [summary("n0"), summary("n1")], now=0.0)
    state = on_key(state, "enter")
    state = with_actors(state, answer("n0", ["system/a", "system/b"]))
    assert state.actors is not None
    assert [row.path for row in state.actors.actors] == ["system/a", "system/b"]
    assert with_actors(state, answer("n1", ["system/x"])) == state  # (not the selected)
    failed = with_actors(state, "n0 says: limit is a whole number")
    assert failed.actors == state.actors  # (the last answer stays)
    assert failed.actors_error == "n0 says: limit is a whole number"
    assert with_actors(state, None).actors_error == "no answer"
    moved = on_key(state, "j")
    assert (moved.selected, moved.actors) == ("n1", None)

"""How ``trio-actors top`` draws its state (``top/_view.py``), read back as text from
a recording console; and the keys decoded from the terminal's bytes
(``top/_terminal.py``)."""

from __future__ import annotations

import pytest
from rich.console import Console, RenderableType
from test_model import answer, summary

import trio_actors as ta
from trio_actors.top._model import HELP, TopState, observe, on_key, with_actors
from trio_actors.top._terminal import decode_keys
from trio_actors.top._view import duration, nodes_table, rate, render, seconds


def text(renderable: RenderableType, width: int = 120) -> str:
    console = Console(record=True, width=width, color_system=None)
    console.print(renderable)
    return console.export_text()


def two_nodes() -> TopState:
    state = TopState("shop")
    first = [summary("n0", handled=0), summary("n1", handled=0)]
    state = observe(state, first, now=0.0)
    second = [
        summary(
            "n0",
            clock=101.0,
            handled=1500,
            uptime=3725.0,
            longest_turn_seconds=0.0124,
            longest_turn_path="system/shard-7",
            unconfirmed=2,
        ),
        summary("n1", clock=101.0, handled=12, dead_letters=ta.DeadLetterCounts(3)),
    ]
    return observe(state, second, now=1.0)


def test_the_nodes_table_has_a_row_per_node_with_its_rates() -> None:
    screen = text(render(two_nodes(), "12:00:01"))
    assert "trio-actors top  cluster shop  2 node(s)  refreshed 12:00:01" in screen
    [n0] = [line for line in screen.splitlines() if " n0 " in line]
    assert n0.split() == [">", "n0", "1h02m", "3", "1500", "0", "2", "12.4ms", "system/shard-7"]
    [n1] = [line for line in screen.splitlines() if " n1 " in line]
    assert n1.split() == ["n1", "10s", "3", "12.0", "3.0", "0", "-", "-"]
    assert "NODE ^" in screen
    assert "s/S sort (NODE, ascending)" in screen


def test_the_sort_marker_follows_the_sort() -> None:
    state = on_key(on_key(two_nodes(), "4"), "S")
    screen = text(render(state))
    assert "MSG/S v" in screen
    assert "NODE ^" not in screen
    lines = [line for line in screen.splitlines() if " n0 " in line or " n1 " in line]
    assert ["n0" in lines[0], "n1" in lines[1]] == [True, True]  # (1500/s first)


def test_a_silent_node_says_no_answer() -> None:
    state = two_nodes()
    for poll in range(3):
        state = observe(state, [summary("n0", clock=102.0 + poll)], now=2.0 + poll)
    [n1] = [line for line in text(render(state)).splitlines() if " n1 " in line]
    assert "no answer" in n1


def test_the_busiest_actors_of_the_selected_node() -> None:
    state = on_key(two_nodes(), "enter")
    screen = text(render(state))
    assert "n0: busiest actors by rate -- waiting for an answer" in screen
    state = with_actors(state, answer("n0", ["system/a", "system/b", "system/c"]))
    screen = text(render(state))
    assert "n0: busiest actors by rate" in screen
    assert "MSG/S v" in screen
    rows = [line.split() for line in screen.splitlines() if line.startswith("system/")]
    assert rows == [
        ["system/c", "Worker", "running", "2.0", "2", "20", "0", "0", "0", "2.0ms"],
        ["system/b", "Worker", "running", "1.0", "1", "10", "0", "0", "0", "1.0ms"],
        ["system/a", "Worker", "running", "0", "0", "0", "0", "0", "0", "-"],
    ]
    assert "3 of 3 actors; rates over 1.0s" in screen
    by_turn = on_key(on_key(state, "a"), "a")
    assert "busiest actors by turn" in text(render(by_turn))
    assert "LONGEST TURN v" in text(render(by_turn))
    failed = with_actors(state, "n0 says: too many")
    assert "latest poll: n0 says: too many" in text(render(failed))
    assert "system/a" not in text(render(on_key(state, "left")))


def test_the_help_lists_every_key() -> None:
    screen = text(render(on_key(two_nodes(), "?")))
    for keys, what in HELP:
        assert keys in screen
        assert what in screen
    assert " n0 " not in screen  # (the help in the table's place)


def test_nothing_answered_yet_and_paused() -> None:
    assert "no node has answered yet" in text(render(TopState("shop")))
    assert "paused" in text(render(on_key(two_nodes(), "p"), "12:00:00"))


def test_the_snapshot_table_has_no_marks() -> None:
    screen = text(nodes_table(two_nodes(), marks=False))
    assert ">" not in screen
    assert "^" not in screen
    assert screen.splitlines()[0].split() == [
        "NODE",
        "UP",
        "ACTORS",
        "MSG/S",
        "DEAD/S",
        "IN",
        "DOUBT",
        "LONGEST",
        "TURN",
        "ACTOR",
    ]


@pytest.mark.parametrize(
    ("value", "shown"),
    [(0, "0s"), (42.9, "42s"), (303, "5m03s"), (7_500, "2h05m"), (273_600, "3d04h")],
)
def test_durations(value: float, shown: str) -> None:
    assert duration(value) == shown


@pytest.mark.parametrize(
    ("value", "shown"),
    [
        (None, "-"),
        (float("inf"), "-"),
        (0.0, "0"),
        (0.25, "0.2"),
        (12.5, "12.5"),
        (345.4, "345"),
        (12_345, "12.3k"),
        (4_500_000, "4.5M"),
    ],
)
def test_rates(value: float | None, shown: str) -> None:
    assert rate(value) == shown


@pytest.mark.parametrize(
    ("value", "shown"), [(0.0, "-"), (0.00085, "850us"), (0.0124, "12.4ms"), (1.2, "1.20s")]
)
def test_turn_lengths(value: float, shown: str) -> None:
    assert seconds(value) == shown


@pytest.mark.parametrize(
    ("data", "keys"),
    [
        (b"jkq", ["j", "k", "q"]),
        (b"\x1b[A\x1b[B\x1b[C\x1b[D", ["up", "down", "right", "left"]),
        (b"\x1bOA\x1bOB", ["up", "down"]),  # (application mode)
        (b"\r\n", ["enter", "enter"]),
        (b"\x1b", ["escape"]),
        (b"\x1b[15~s", ["s"]),  # (F5: its whole sequence dropped)
        (b"\x1b[1;5Aa", ["a"]),  # (ctrl-up: likewise)
        (b"\x01\x7f?", ["?"]),  # (other control characters dropped)
        (b"\xc3\xa9S", ["S"]),  # (not ASCII: dropped)
        (b"", []),
    ],
)
def test_keys_decoded_from_the_terminals_bytes(data: bytes, keys: list[str]) -> None:
    assert decode_keys(data) == keys

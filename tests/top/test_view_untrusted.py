"""What a node sends is shown as text, never as markup or
terminal control (a node's answer is input: an actor may be named ``[bold]`` or
``x[`` with a child ``]``; a forged or buggy answer may hold anything)."""

from __future__ import annotations

import io

from rich.console import Console
from test_model import answer, summary

from trio_actors.top._model import TopState, observe, on_key, with_actors
from trio_actors.top._view import nodes_table, render

HOSTILE = "system/x[/]/[bold red]b\x1b]0;title\x1b\\\x1b[2J\x9b2J"


def terminal_output(state: TopState) -> str:
    out = io.StringIO()
    Console(file=out, force_terminal=True, width=400).print(render(state, "now"))
    return out.getvalue()


def test_a_node_s_strings_are_neither_markup_nor_terminal_control() -> None:
    state = observe(TopState("c"), [summary(longest_turn_path=HOSTILE)], now=0.0)
    state = on_key(state, "enter")
    state = with_actors(state, answer("n0", [HOSTILE]))
    shown = terminal_output(state)  # (rich's MarkupError on "[/]" before)
    assert "\x1b]0;" not in shown
    assert "\x1b[2J" not in shown
    assert "\x9b" not in shown
    assert "[bold red]b" in shown  # (as the node sent it: text)


def test_an_error_answer_s_text_is_no_terminal_control() -> None:
    state = observe(TopState("c"), [summary()], now=0.0)
    state = with_actors(on_key(state, "enter"), "n0 says: \x1b[2Jbad")
    assert "\x1b[2J" not in terminal_output(state)


def test_the_snapshot_table_shows_a_hostile_path_as_text() -> None:
    state = observe(TopState("c"), [summary(longest_turn_path=HOSTILE)], now=0.0)
    out = io.StringIO()
    Console(file=out, width=400).print(nodes_table(state, marks=False))
    assert "x[/]/[bold red]b" in out.getvalue()

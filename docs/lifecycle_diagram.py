"""Draw the lifecycle diagrams (SVG) from the tables of ``trio_actors.lifecycle``.

Run by ``conf.py`` on every docs build (and runnable alone:
``python docs/lifecycle_diagram.py lifecycle.svg serving.svg``), so the pictures in
the docs are always the tables in the code: for ``TRANSITIONS`` each state a box
and each ``(state, event) -> state`` an arrow labelled with the event; for
``SERVING_TRANSITIONS`` each server a box and each hand-over an arrow. Plain SVG,
no Graphviz needed.
"""

from __future__ import annotations

import math
import sys
from collections import defaultdict
from enum import Enum
from pathlib import Path
from xml.sax.saxutils import escape

from trio_actors.lifecycle import SERVING_TRANSITIONS, TRANSITIONS, ActorState, Serving

# Where each state sits (column, row); a state added to the enum without a place here
# is put on a new row, so the diagram never silently drops it.
PLACES = {
    ActorState.STARTING: (0, 1),
    ActorState.RUNNING: (1, 1),
    ActorState.RESTARTING: (0, 0),
    ActorState.DRAINING: (2, 0),
    ActorState.STOPPING: (2, 2),
    ActorState.STOPPED: (2, 3),
}
SERVING_PLACES = {
    Serving.IDLE: (0, 1),
    Serving.DISPATCHER: (1, 0),
    Serving.TASK: (1, 2),
    Serving.RESTART: (2, 1),
}
BOX_W, BOX_H, GAP_X, GAP_Y, MARGIN = 130, 40, 130, 90, 30
Node = Enum  # a member of ActorState or Serving


def _position(
    node: Node, places: dict[Node, tuple[int, int]], extra: dict[Node, tuple[int, int]]
) -> tuple[float, float]:
    column, row = places.get(node) or extra[node]
    return MARGIN + column * (BOX_W + GAP_X), MARGIN + row * (BOX_H + GAP_Y)


def _border_point(cx: float, cy: float, dx: float, dy: float) -> tuple[float, float]:
    """Where a ray from a box centre in direction (dx, dy) leaves the box."""
    scale = min(
        (BOX_W / 2) / abs(dx) if dx else math.inf,
        (BOX_H / 2) / abs(dy) if dy else math.inf,
    )
    return cx + dx * scale, cy + dy * scale


def _hits_a_box(
    points: list[tuple[float, float]],
    boxes: dict[Node, tuple[float, float]],
    ends: tuple[Node, Node],
) -> bool:
    pad = 6
    for state, (x, y) in boxes.items():
        if state in ends:
            continue
        for px, py in points:
            if x - pad <= px <= x + BOX_W + pad and y - pad <= py <= y + BOX_H + pad:
                return True
    return False


def _curve(
    c1: tuple[float, float], c2: tuple[float, float], bend: float
) -> tuple[tuple[float, float], list[tuple[float, float]]]:
    """The control point of a quadratic curve bent ``bend`` px sideways, and samples."""
    dx, dy = c2[0] - c1[0], c2[1] - c1[1]
    length = math.hypot(dx, dy) or 1.0
    nx, ny = -dy / length, dx / length
    control = ((c1[0] + c2[0]) / 2 + nx * bend, (c1[1] + c2[1]) / 2 + ny * bend)
    samples = []
    for i in range(1, 40):
        t = i / 40
        samples.append(
            (
                (1 - t) ** 2 * c1[0] + 2 * (1 - t) * t * control[0] + t**2 * c2[0],
                (1 - t) ** 2 * c1[1] + 2 * (1 - t) * t * control[1] + t**2 * c2[1],
            )
        )
    return control, samples


def render() -> str:
    """Return the SVG text of the lifecycle diagram (states and events)."""
    events: dict[tuple[Node, Node], list[str]] = defaultdict(list)
    for (source, event), target in TRANSITIONS.items():
        events[source, target].append(event.value)
    return _render(list(ActorState), PLACES, events, final=ActorState.STOPPED, rows=4)


def render_serving() -> str:
    """Return the SVG text of the serving diagram (who serves an actor)."""
    hand_overs: dict[tuple[Node, Node], list[str]] = {pair: [] for pair in SERVING_TRANSITIONS}
    return _render(list(Serving), SERVING_PLACES, hand_overs, final=None, rows=3)


def _render(
    nodes: list[Node],
    places: dict[Node, tuple[int, int]],
    events: dict[tuple[Node, Node], list[str]],
    *,
    final: Node | None,
    rows: int,
) -> str:
    # A node added to its enum without a place is put on a new row, so the diagram
    # never silently drops it.
    unplaced = [node for node in nodes if node not in places]
    extra = {node: (i, rows) for i, node in enumerate(unplaced)}
    boxes = {node: _position(node, places, extra) for node in nodes}
    width = MARGIN * 2 + 3 * BOX_W + 2 * GAP_X
    rows = rows + 1 if unplaced else rows
    height = MARGIN * 2 + rows * BOX_H + (rows - 1) * GAP_Y + 20  # (room for a loop)
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        'font-family="sans-serif" font-size="12">',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" '
        'markerWidth="7" markerHeight="7" orient="auto-start-reverse">'
        '<path d="M 0 0 L 10 5 L 0 10 z"/></marker></defs>',
    ]
    ordered = sorted(events.items(), key=lambda kv: (kv[0][0].value, kv[0][1].value))
    for (source, target), labels in ordered:
        x1, y1 = boxes[source]
        x2, y2 = boxes[target]
        if source is target:  # a loop under the box
            bottom, left, right = y1 + BOX_H, x1 + BOX_W / 2 - 14, x1 + BOX_W / 2 + 14
            parts.append(
                f'<path d="M {left:.1f} {bottom:.1f} C {left - 10:.1f} {bottom + 40:.1f} '
                f'{right + 10:.1f} {bottom + 40:.1f} {right:.1f} {bottom:.1f}" fill="none" '
                'stroke="black" marker-end="url(#arrow)"/>'
            )
            continue
        c1 = (x1 + BOX_W / 2, y1 + BOX_H / 2)
        c2 = (x2 + BOX_W / 2, y2 + BOX_H / 2)
        # Bend an arrow around any box in its way; a two-way pair bends apart.
        first = 14.0 if (target, source) in events else 0.0
        for bend in (first, first + 50, first - 50, first + 100, first - 100, first + 160):
            control, samples = _curve(c1, c2, bend)
            if not _hits_a_box(samples, boxes, (source, target)):
                break
        start = _border_point(*c1, control[0] - c1[0], control[1] - c1[1])
        end = _border_point(*c2, control[0] - c2[0], control[1] - c2[1])
        parts.append(
            f'<path d="M {start[0]:.1f} {start[1]:.1f} Q {control[0]:.1f} {control[1]:.1f} '
            f'{end[0]:.1f} {end[1]:.1f}" fill="none" stroke="black" '
            'marker-end="url(#arrow)"/>'
        )
        mx = (start[0] + 2 * control[0] + end[0]) / 4
        my = (start[1] + 2 * control[1] + end[1]) / 4
        # Labels sit on the outer side of a bent arrow, clear of its partner.
        side = control[0] - (c1[0] + c2[0]) / 2
        anchor = "middle" if abs(side) < 1 else ("start" if side > 0 else "end")
        mx += 6 if anchor == "start" else -6 if anchor == "end" else 0
        parts.append(
            f'<text x="{mx:.1f}" y="{my - 4:.1f}" text-anchor="{anchor}" fill="#225">'
            f"{escape(', '.join(labels))}</text>"
        )
    for state in nodes:
        x, y = boxes[state]
        fill = "#e8f0ff" if state is not final else "#eee"
        parts.append(
            f'<rect x="{x}" y="{y}" width="{BOX_W}" height="{BOX_H}" rx="8" '
            f'fill="{fill}" stroke="black"/>'
        )
        parts.append(
            f'<text x="{x + BOX_W / 2}" y="{y + BOX_H / 2 + 4}" text-anchor="middle" '
            f'font-weight="bold">{state.name}</text>'
        )
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


def write(path: Path, serving_path: Path | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(), encoding="utf-8")
    if serving_path is not None:
        serving_path.write_text(render_serving(), encoding="utf-8")


if __name__ == "__main__":
    write(
        Path(sys.argv[1] if len(sys.argv) > 1 else "lifecycle.svg"),
        Path(sys.argv[2] if len(sys.argv) > 2 else "serving.svg"),
    )

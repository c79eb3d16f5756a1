"""Draw the actor lifecycle diagram (SVG) from ``trio_actors.lifecycle.TRANSITIONS``.

Run by ``conf.py`` on every docs build (and runnable alone:
``python docs/lifecycle_diagram.py out.svg``), so the picture in the docs is always
the table in the code: each state a box, each ``(state, event) -> state`` an arrow
labelled with the event. Plain SVG, no Graphviz needed.
"""

from __future__ import annotations

import math
import sys
from collections import defaultdict
from pathlib import Path
from xml.sax.saxutils import escape

from trio_actors.lifecycle import TRANSITIONS, ActorState

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
BOX_W, BOX_H, GAP_X, GAP_Y, MARGIN = 130, 40, 130, 90, 30


def _position(state: ActorState, extra: dict[ActorState, tuple[int, int]]) -> tuple[float, float]:
    column, row = PLACES.get(state) or extra[state]
    return MARGIN + column * (BOX_W + GAP_X), MARGIN + row * (BOX_H + GAP_Y)


def _border_point(cx: float, cy: float, dx: float, dy: float) -> tuple[float, float]:
    """Where a ray from a box centre in direction (dx, dy) leaves the box."""
    scale = min(
        (BOX_W / 2) / abs(dx) if dx else math.inf,
        (BOX_H / 2) / abs(dy) if dy else math.inf,
    )
    return cx + dx * scale, cy + dy * scale


def _boxes(extra: dict[ActorState, tuple[int, int]]) -> dict[ActorState, tuple[float, float]]:
    return {state: _position(state, extra) for state in ActorState}


def _hits_a_box(
    points: list[tuple[float, float]],
    boxes: dict[ActorState, tuple[float, float]],
    ends: tuple[ActorState, ActorState],
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
    """Return the SVG text of the lifecycle diagram."""
    unplaced = [s for s in ActorState if s not in PLACES]
    extra = {state: (i, 4) for i, state in enumerate(unplaced)}
    boxes = _boxes(extra)
    events: dict[tuple[ActorState, ActorState], list[str]] = defaultdict(list)
    for (source, event), target in TRANSITIONS.items():
        events[source, target].append(event.value)
    width = MARGIN * 2 + 3 * BOX_W + 2 * GAP_X
    rows = 5 if unplaced else 4
    height = MARGIN * 2 + rows * BOX_H + (rows - 1) * GAP_Y
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
    for state in ActorState:
        x, y = boxes[state]
        fill = "#e8f0ff" if state is not ActorState.STOPPED else "#eee"
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


def write(path: Path) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render(), encoding="utf-8")


if __name__ == "__main__":
    write(Path(sys.argv[1] if len(sys.argv) > 1 else "lifecycle.svg"))

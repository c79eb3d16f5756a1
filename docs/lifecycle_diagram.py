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
    ActorState.RESTARTING: (1, 0),
    ActorState.DRAINING: (2, 1),
    ActorState.STOPPING: (2, 2),
    ActorState.STOPPED: (1, 2),
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


def render() -> str:
    """Return the SVG text of the lifecycle diagram."""
    unplaced = [s for s in ActorState if s not in PLACES]
    extra = {state: (i, 3) for i, state in enumerate(unplaced)}
    events: dict[tuple[ActorState, ActorState], list[str]] = defaultdict(list)
    for (source, event), target in TRANSITIONS.items():
        events[source, target].append(event.value)
    width = MARGIN * 2 + 3 * BOX_W + 2 * GAP_X
    height = MARGIN * 2 + (4 if unplaced else 3) * BOX_H + (3 if unplaced else 2) * GAP_Y
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        'font-family="sans-serif" font-size="12">',
        '<defs><marker id="arrow" viewBox="0 0 10 10" refX="10" refY="5" '
        'markerWidth="7" markerHeight="7" orient="auto-start-reverse">'
        '<path d="M 0 0 L 10 5 L 0 10 z"/></marker></defs>',
    ]
    for (source, target), labels in sorted(
        events.items(), key=lambda kv: (kv[0][0].value, kv[0][1].value)
    ):
        x1, y1 = _position(source, extra)
        x2, y2 = _position(target, extra)
        c1 = (x1 + BOX_W / 2, y1 + BOX_H / 2)
        c2 = (x2 + BOX_W / 2, y2 + BOX_H / 2)
        dx, dy = c2[0] - c1[0], c2[1] - c1[1]
        # Two-way pairs are drawn side by side rather than on top of each other.
        back = (target, source) in events
        nx, ny = (-dy, dx) if back else (0.0, 0.0)
        norm = math.hypot(nx, ny) or 1.0
        shift = 8 if back else 0
        ox, oy = nx / norm * shift, ny / norm * shift
        sx, sy = _border_point(*c1, dx, dy)
        ex, ey = _border_point(*c2, -dx, -dy)
        parts.append(
            f'<line x1="{sx + ox:.1f}" y1="{sy + oy:.1f}" x2="{ex + ox:.1f}" y2="{ey + oy:.1f}" '
            'stroke="black" marker-end="url(#arrow)"/>'
        )
        mx, my = (sx + ex) / 2 + ox * 2, (sy + ey) / 2 + oy * 2
        parts.append(
            f'<text x="{mx:.1f}" y="{my - 4:.1f}" text-anchor="middle" fill="#225">'
            f"{escape(', '.join(labels))}</text>"
        )
    for state in ActorState:
        x, y = _position(state, extra)
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

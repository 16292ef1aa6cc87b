"""The one look every plotly figure of the lab shares: the white template, a left-aligned title, tight margins, a
height that grows with the rows shown, and the floor a log axis draws an exact 0 at.
"""

from __future__ import annotations

from typing import Any

import plotly.graph_objects as go

TEMPLATE = "plotly_white"


LOG_FLOOR = 1e-18  # an exact 0 cannot sit on a log axis: drawn at this floor instead


def finish(fig: go.Figure, title: str, height: int | None = None, **layout: Any) -> go.Figure:
    """The common look: white template, a left-aligned title, tight margins."""
    layout.setdefault("margin", {"l": 70, "r": 30, "t": 70, "b": 50})
    fig.update_layout(
        template=TEMPLATE, title={"text": title, "x": 0.01, "xanchor": "left", "font": {"size": 15}}, **layout
    )
    if height is not None:
        fig.update_layout(height=height)
    return fig


def rows_height(n_rows: int, per_row: int = 24, extra: int = 160, lo: int = 300) -> int:
    return max(lo, per_row * n_rows + extra)


def none_if(values: list[list[float]], bad: Any) -> list[list[float | None]]:
    """Replace cells for which `bad(x)` holds with None (drawn blank)."""
    return [[None if bad(x) else x for x in row] for row in values]

"""The one look the lab's output shares.

Figures (plotly): the white template, a left-aligned title, tight margins, a height that grows with the rows shown,
the floor a log axis draws an exact 0 at. Terminal tables (rich): columns sized when the width is known so words
wrap whole at 80 columns, numbers written one way (`cell`), readable without colour. JSON (`print_json`): strict,
a NaN or ±inf written as null and listed under "non_finite".
"""

from __future__ import annotations

import json
import math
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from rich import box
from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.table import Table
from rich.text import Text

if TYPE_CHECKING:  # figures arrive built: the terminal path never imports plotly
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


# ---- terminal tables ------------------------------------------------------------------------------------------
def cell(x: Any) -> str:
    if isinstance(x, float):
        return f"{x:.4g}" if abs(x) < 1e5 else f"{x:,.0f}"
    if isinstance(x, list):
        return "[" + ", ".join(cell(y) for y in x) + "]"
    return str(x)


def longest_word(text: str) -> int:
    return max((cell_len(w) for w in text.split()), default=0)


def fit_widths(natural: list[int], minimum: list[int], room: int) -> list[int]:
    """Column widths that fit `room`: shrink the widest column that can still wrap, one cell at a time, never
    below its longest word. If even the words do not fit, the widest column folds first, one cell at a time (not
    every column at once, as rich would), down to 1 cell each: rich folds what is left."""
    widths = list(natural)
    while sum(widths) > room:
        can = [i for i, (wd, mn) in enumerate(zip(widths, minimum, strict=True)) if wd > mn]
        if not can:
            break
        widths[max(can, key=lambda i: widths[i])] -= 1
    while sum(widths) > room and max(widths) > 1:
        widths[max(range(len(widths)), key=lambda i: widths[i])] -= 1
    return widths


class FitTable:
    """A rich table whose columns are sized at render time, when the width is known: words wrap whole, so
    "accepted" or "SWA-only" never print as "accepte/d" or "SWA-onl/y" (rich alone folds them at 80 columns).
    Columns stand 2 spaces apart, 1 where the longest words need that room (the 9 columns of step 6B's draft
    block at the real widths, whose ids run to ⟨129279⟩); only where even then they do not fit is a word folded."""

    def __init__(self, columns: list[str], rows: list[list[str]]):
        self.columns, self.rows = columns, rows

    def __rich_console__(self, console: Console, options: ConsoleOptions) -> RenderResult:
        cols = list(zip(self.columns, *self.rows, strict=True))
        natural = [max(cell_len(line) for x in col for line in x.split("\n")) for col in cols]
        minimum = [max(longest_word(x) for x in col) for col in cols]
        for pad in (1, 0):  # columns 2 spaces apart, else 1
            table = Table(box=box.SIMPLE_HEAVY, padding=(0, pad, 0, 0), show_edge=False)
            for name in self.columns:
                table.add_column(name, overflow="fold")
            room = options.max_width - table._extra_width - pad * len(cols)  # separators, then the padding
            if sum(minimum) <= room:
                break
        for column, width in zip(table.columns, fit_widths(natural, minimum, room), strict=True):
            column.width = max(width, 1)
        for row in self.rows:
            table.add_row(*row)
        yield table


def simple_table(title: str, columns: Iterable[str], rows: Iterable[Iterable[Any]]) -> Group:
    return Group(Text(title, style="bold"), FitTable(list(columns), [[cell(x) for x in row] for row in rows]))


# ---- JSON ----------------------------------------------------------------------------------------------------
def to_jsonable(x: Any, where: str = "", bad: list[str] | None = None) -> Any:
    """x with str keys and lists; a NaN or ±inf float becomes None (JSON has neither) and its path goes to `bad`."""
    if isinstance(x, dict):
        return {str(k): to_jsonable(v, f"{where}.{k}" if where else str(k), bad) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [to_jsonable(v, f"{where}[{i}]", bad) for i, v in enumerate(x)]
    if isinstance(x, float) and not math.isfinite(x):
        if bad is not None:
            bad.append(f"{where} = {x}")
        return None
    return x


def print_json(report: Any, indent: int | None = 1, flush: bool = False) -> None:
    """Strict JSON on stdout (never NaN or Infinity): non-finite numbers are null and listed under "non_finite".
    indent None: one line (a JSON line of a stream such as `serve --json`; flush: it leaves at once)."""
    bad: list[str] = []
    data = to_jsonable(report, "", bad)
    if bad and isinstance(data, dict):
        data["non_finite"] = {"note": "these numbers were NaN or ±inf; JSON has neither, so they are null", "at": bad}
    print(json.dumps(data, ensure_ascii=False, indent=indent, allow_nan=False), flush=flush)

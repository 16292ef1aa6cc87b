"""The one look the lab's output shares.

Figures (plotly): the white template, a left-aligned title, tight margins, a height that grows with the rows shown,
the floor a log axis draws an exact 0 at. Terminal tables (rich): columns sized when the width is known so words
wrap whole at 80 columns, numbers written one way (`cell`), readable without colour. JSON (`print_json`): strict,
a NaN or ±inf written as null and listed under "non_finite". Progress (rich, on stderr): `shown` and `phase`, below.
"""

from __future__ import annotations

import contextlib
import contextvars
import json
import math
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from rich import box
from rich.cells import cell_len
from rich.console import Console, ConsoleOptions, Group, RenderResult
from rich.progress import BarColumn, Progress, SpinnerColumn, TaskProgressColumn, TextColumn, TimeElapsedColumn
from rich.table import Table
from rich.text import Text

from .text import Texts, check_lang, lang_table

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


# ---- progress of a command's long parts ----------------------------------------------------------------------
# Progress of a command's long parts, so a run at the real widths (`--preset flash-cpu`: minutes) is never silent.
#
#     with shown(lang, enabled) as bar:  a rich progress display on stderr for everything inside (where stderr is not
#                                     a terminal nothing is drawn: a pipe, --json or a test reads the same output as
#                                     before); bar: the rich Progress, None where nothing is drawn
#     with phase(key) as advance:     one line of it: messages.toml [progress] `key` in the shown language, a spinner
#                                     and its seconds while the part runs, ✓ once it is done; advance(done, total)
#                                     turns it into a bar (the weights: values drawn of all)
#
# Outside `shown` (a notebook, a test, the lab preset's millisecond parts) `phase` is a no-op, so the model code
# can name its phases without knowing who watches. The texts live in lab/lang/<lang>/messages.toml [progress].

PROGRESS_TEXT = Texts(lang_table("messages", "progress"), "progress")
_CURRENT: contextvars.ContextVar[tuple[Progress, str] | None] = contextvars.ContextVar("progress", default=None)
Advance = Callable[[int, int], None]


def _none(done: int, total: int) -> None:
    return None


@contextlib.contextmanager
def shown(lang: str = "en", enabled: bool = True, console: Console | None = None) -> Iterator[Progress | None]:
    """A progress display for the phases run inside, in `lang`, on stderr (or `console`); `enabled=False`: none."""
    lang = check_lang(lang)
    out = Console(stderr=True) if console is None else console
    if not enabled or not out.is_terminal:
        yield None
        return
    bar = Progress(
        SpinnerColumn(finished_text="[green]✓"),
        TextColumn("{task.description}"),
        BarColumn(bar_width=20),
        TaskProgressColumn(),  # the percentage where the part counts its steps, nothing where it cannot
        TimeElapsedColumn(),
        console=out,
        refresh_per_second=4,
    )
    token = _CURRENT.set((bar, lang))
    try:
        with bar:
            yield bar
    finally:
        _CURRENT.reset(token)


@contextlib.contextmanager
def phase(key: str, **fmt: object) -> Iterator[Advance]:
    """One part of the work, told while it runs; yields advance(done, total) for a part that can count its steps."""
    current = _CURRENT.get()
    if current is None:
        yield _none
        return
    bar, lang = current
    task = bar.add_task(PROGRESS_TEXT(key, lang, **fmt), total=None)

    def advance(done: int, total: int) -> None:
        bar.update(task, completed=done, total=total)

    try:
        yield advance
    finally:
        bar.update(task, total=1, completed=1)
        bar.stop_task(task)
        bar.refresh()

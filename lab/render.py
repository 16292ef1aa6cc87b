"""Rich rendering of step views and of `inspect` reports (terminal and notebook).

Nothing here computes model numbers: it lays out what `walkthrough` built.
"""

from __future__ import annotations

from typing import Any

from rich import box
from rich.console import Console, Group
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from .steps import get_column, ui
from .walkthrough import StepView, ViewTable, fmt_params


def cell(x: Any) -> str:
    if isinstance(x, float):
        return f"{x:.4g}" if abs(x) < 1e5 else f"{x:,.0f}"
    if isinstance(x, list):
        return "[" + ", ".join(cell(y) for y in x) + "]"
    return str(x)


def rich_table(t: ViewTable, max_rows: int = 24) -> Group:
    table = Table(box=box.SIMPLE_HEAVY)
    for c in t.columns:
        table.add_column(str(c), overflow="fold")
    rows = t.rows if len(t.rows) <= max_rows else t.rows[: max_rows - 1]
    for row in rows:
        table.add_row(*(cell(x) for x in row))
    if len(t.rows) > max_rows:
        table.add_row(*(["…"] + [""] * (len(t.columns) - 1)))
    return Group(Text(t.title, style="bold underline"), table)


def render_view(view: StepView) -> Panel:
    step, lang = view.step, view.lang
    parts: list[Any] = [Text(step.t("what", lang)), Text("")]
    parts.append(Text(ui("equation", lang) + ":  ", style="bold").append(step.equation, style="cyan"))
    if view.shapes:
        shapes = "   ".join(f"{name} [{', '.join(map(str, s))}]" for name, s in view.shapes)
        parts.append(Text(ui("shapes", lang) + ":  ", style="bold").append(shapes, style="magenta"))
    for name, value in view.facts:
        parts.append(Text(f"• {name}: ", style="bold").append(cell(value)))
    for t in view.tables:
        parts.append(rich_table(t))
    for c in view.checks:
        mark, style = ("✓", "green") if c.ok else ("✗", "red")
        parts.append(Text(f"{mark} {c.name}: ", style=style).append(f"{c.value:.3g} (≤ {c.threshold:g})"))
    for n in view.notes:
        parts.append(Text("ℹ " + n, style="yellow"))
    parts.append(Text(ui("look_at", lang) + ":", style="bold"))
    for bullet in step.t("look_at", lang):
        parts.append(Text("  → " + bullet))
    parts.append(Text(ui("real_scale", lang) + ": ", style="dim").append(step.t("real_scale", lang), style="dim"))
    title = f"[bold]{step.label(lang)}[/bold]  ·  {ui('column', lang)} {get_column(step.column).label(lang)}"
    return Panel(Group(*parts), title=title, title_align="left", border_style="blue")


def render_walk(console: Console, walk, lang: str) -> None:
    head = Text(f"dspark-lab · {ui('preset', lang)}: {walk.cfg.name} · {ui('seed', lang)}: {walk.seed} · "
                f"{ui('weights', lang)}: {ui('untrained', lang)}\n{ui('prompt', lang)}: {walk.prompt!r} "
                f"({walk.tokens.size(1)} tokens)", style="bold")
    console.print(head)
    for view in walk.views.values():
        console.print(render_view(view))


def render_inspect(console: Console, report: dict[str, Any], lang: str) -> None:
    p = report["params"]
    t = Table(title=f"{ui('params', lang)} · {report['preset']} ({report['device']})", box=box.SIMPLE_HEAVY,
              title_justify="left")
    t.add_column("group")
    t.add_column(ui("params", lang), justify="right")
    t.add_column("exact", justify="right")
    for k in ("backbone", "engram", "draft", "total"):
        t.add_row(k, fmt_params(p[k]), f"{p[k]:,}")
    console.print(t)
    kb = Table(title=ui("bytes_per_token", lang), box=box.SIMPLE_HEAVY, title_justify="left")
    kb.add_column(ui("cache_kind", lang))
    kb.add_column("B / entry", justify="right")
    kb.add_column("B / token", justify="right")
    e, pt = report["kv_bytes_per_entry"], report["kv_bytes_per_token"]
    kb.add_row(ui("cache_window", lang), str(e["window"]),
               f"ring: {report['window_bytes_per_sequence']:,} B / sequence")
    kb.add_row(ui("cache_compressed", lang), str(e["compressed_kv"]), f"{pt['compressed_kv']:g}")
    kb.add_row(ui("cache_index", lang), str(e["index_k"]), f"{pt['index_k']:g}")
    kb.add_row("global KV", "", f"[bold]{pt['global']:g}[/bold]")
    console.print(kb)
    roles = Table(title=ui("role", lang), box=box.SIMPLE, title_justify="left")
    for c in ("layer", "part", "ratio", "mode", "reads KV of", "reads top-k of", "RoPE", "extra"):
        roles.add_column(c)
    for r in report["roles"]:
        extra = " ".join(x for x, on in (("candidate-source", r["is_candidate_source"]), ("Engram", r["has_engram"]),
                                         ("tap", r["is_tap"])) if on)
        roles.add_row(str(r["layer"]), r["part"], str(r["ratio"]), r["mode"],
                      "—" if r["reads_kv_of"] is None else str(r["reads_kv_of"]),
                      "—" if r["reads_topk_of"] is None else str(r["reads_topk_of"]), r["rope"], extra)
    console.print(roles)

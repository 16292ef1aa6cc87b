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

from .steps import get_column, ui, verify_label
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
    head = Text(
        f"dspark-lab · {ui('preset', lang)}: {walk.cfg.name} · {ui('seed', lang)}: {walk.seed} · "
        f"{ui('weights', lang)}: {ui(walk.weights, lang)}\n{ui('prompt', lang)}: {walk.prompt!r} "
        f"({walk.tokens.size(1)} tokens)",
        style="bold",
    )
    console.print(head)
    for view in walk.views.values():
        console.print(render_view(view))


def render_inspect(console: Console, report: dict[str, Any], lang: str) -> None:
    p = report["params"]
    t = Table(
        title=f"{ui('params', lang)} · {report['preset']} ({report['device']})",
        box=box.SIMPLE_HEAVY,
        title_justify="left",
    )
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
    kb.add_row(
        ui("cache_window", lang), str(e["window"]), f"ring: {report['window_bytes_per_sequence']:,} B / sequence"
    )
    kb.add_row(ui("cache_compressed", lang), str(e["compressed_kv"]), f"{pt['compressed_kv']:g}")
    kb.add_row(ui("cache_index", lang), str(e["index_k"]), f"{pt['index_k']:g}")
    kb.add_row("global KV", "", f"[bold]{pt['global']:g}[/bold]")
    console.print(kb)
    roles = Table(title=ui("role", lang), box=box.SIMPLE, title_justify="left")
    for c in ("layer", "part", "ratio", "mode", "reads KV of", "reads top-k of", "RoPE", "extra"):
        roles.add_column(c)
    for r in report["roles"]:
        extra = " ".join(
            x
            for x, on in (
                ("candidate-source", r["is_candidate_source"]),
                ("Engram", r["has_engram"]),
                ("tap", r["is_tap"]),
            )
            if on
        )
        roles.add_row(
            str(r["layer"]),
            r["part"],
            str(r["ratio"]),
            r["mode"],
            "—" if r["reads_kv_of"] is None else str(r["reads_kv_of"]),
            "—" if r["reads_topk_of"] is None else str(r["reads_topk_of"]),
            r["rope"],
            extra,
        )
    console.print(roles)


STRIP_STYLE = {
    "accepted": "bold black on green",
    "rejected": "strike white on red",
    "not verified": "dim",
    "resampled": "bold black on yellow",
    "bonus": "bold white on blue",
    "anchor": "bold",
}


def render_generate(console: Console, report, lang: str) -> None:
    """Plain vs speculative: the texts, tokens/s, and one strip per round."""
    j = report.to_json()
    tok = report.texts

    def show(i: int) -> str:
        return tok[i].replace("▁", " ")

    console.print(
        Text(
            f"{ui('prompt', lang)}: {report.prompt!r}  ·  {ui('block_size', lang)}: {report.block}  ·  "
            f"{ui('temperature', lang)}: {report.temperature}  ·  {ui('seed', lang)}: {report.seed}",
            style="bold",
        )
    )
    strip = Text()
    strip.append(show(report.spec.tokens[0][0]), style=STRIP_STYLE["anchor"])  # from the prompt's forward
    for r in report.spec.rows(0):
        strip.append("│", style="dim")
        for t, st in zip(r.draft, r.status, strict=True):
            strip.append(show(t), style=STRIP_STYLE[st])
        strip.append(show(r.next_token), style=STRIP_STYLE[r.next_kind])
    strip.append("│", style="dim")
    legend = Text("  ").join(Text(verify_label(k, lang), style=v) for k, v in STRIP_STYLE.items() if k != "anchor")
    console.print(
        Panel(Group(strip, legend), title="DSpark: draft → verify, one strip segment per round", title_align="left")
    )
    t = Table(box=box.SIMPLE_HEAVY)
    for c in ("", "text", "tokens", "target forwards", "tokens/s"):
        t.add_column(c)
    for name, key in (("plain", "plain"), ("speculative", "speculative")):
        d = j[key]
        t.add_row(name, d["text"], str(len(d["tokens"])), str(d["target_forwards"]), f"{d['tokens_per_s']:.1f}")
    console.print(t)
    s = j["speculative"]
    same = "identical" if j["identical_tokens"] else "different (sampling: same distribution, other draws)"
    console.print(
        f"{ui('accepted_length', lang)}: {s['mean_accepted_length']:.3f}  ·  "
        f"{ui('acceptance_rate', lang)}: {s['acceptance_rate']:.3f}  ·  rounds: {s['rounds']}  ·  "
        f"tokens: {same}  ·  speed-up: {j['speedup']:.2f}×"
    )
    if report.weights == "untrained":
        console.print(Text(ui("warning_untrained", lang), style="yellow"))


def render_profile(console: Console, report: dict[str, Any], lang: str) -> None:
    p, m = report["parity"], report["tap_mix"]
    for name, d in ((ui("parity", lang), p), ("tap mix 0.5/0.5 vs mean", m)):
        ok = d["max_abs_diff"] <= d["threshold"]
        console.print(
            Text(
                f"{'✓' if ok else '✗'} {name}: max |Δ| = {d['max_abs_diff']:.3g} (≤ {d['threshold']:g})",
                style="green" if ok else "red",
            )
        )
    a = report["acceptance"]
    t = Table(
        title=f"{ui('acceptance_rate', lang)} · τ = {a['mean_accepted_length']:.3f} over {a['rounds']} rounds",
        box=box.SIMPLE_HEAVY,
        title_justify="left",
    )
    for c in ("position", "reached", "conditional", "cumulative", "mean confidence c", "mean p_d(x)"):
        t.add_column(c)
    for row in a["per_position"]:
        t.add_row(
            *(
                cell(row[k]) if row[k] is not None else "—"
                for k in ("position", "reached", "cond_accept", "cum_accept", "mean_confidence", "mean_draft_prob")
            )
        )
    console.print(t)
    v = Table(title=ui("verify_cost", lang) + " (seconds)", box=box.SIMPLE_HEAVY, title_justify="left")
    for c in ("k", "verify p50", "p95", "p99", "k decodes p50", "p95", "p99", "verify / k decodes"):
        v.add_column(c)
    for k, d in report["verify_cost"].items():
        a1, b1 = d["verify_s"], d["k_decodes_s"]
        v.add_row(
            k,
            *(f"{a1[q]:.4f}" for q in ("p50", "p95", "p99")),
            *(f"{b1[q]:.4f}" for q in ("p50", "p95", "p99")),
            f"{d['ratio_p50']:.2f}",
        )
    console.print(v)
    console.print(ui("run_conditions", lang) + ": " + ", ".join(f"{k}={v}" for k, v in report["conditions"].items()))

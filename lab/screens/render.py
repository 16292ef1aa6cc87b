"""Rich rendering of step views and of `inspect`, `generate` and `profile` reports (terminal and notebook).

Nothing here computes model numbers: it lays out what the walk built (walk.py, view.py). Everything reads without colour
and at 80 columns: table columns are never narrower than their longest word, and the accept/reject strip
marks every token with a symbol as well as a colour.
"""

from __future__ import annotations

import shlex
import shutil
import sys
import sysconfig
from pathlib import Path
from typing import Any

from rich import box
from rich.columns import Columns
from rich.console import Console, Group
from rich.panel import Panel
from rich.text import Text

from ..lesson.notes import NOTES, equation
from ..lesson.steps import get_column
from ..lesson.summary import fmt_params
from ..lesson.view import StepView, ViewTable, tokenization_note
from ..style import FitTable, cell, simple_table
from ..text import UI, Texts, lang_table, verify_label

# strings of the generate and profile screens, both languages (step views use notes.NOTES)
TEXT = lang_table("screens", "text")
TEXT = Texts(TEXT, "screen")

STRIP = {  # verify outcome → (marker, colour): the marker alone must tell them apart
    "anchor": ("▸", "bold"),
    "accepted": ("✓", "bold black on green"),
    "rejected": ("✗", "strike white on red"),
    "not verified": ("·", "dim"),
    "not sent": ("○", "dim italic"),  # drafted past the verify length ℓ: the target never saw it
    "resampled": ("↻", "bold black on yellow"),
    "bonus": ("+", "bold white on blue"),
}


def rich_table(t: ViewTable, max_rows: int = 24) -> Group:
    rows = t.rows if len(t.rows) <= max_rows else t.rows[: max_rows - 1]
    cells = [[cell(x) for x in row] for row in rows]
    if len(t.rows) > max_rows:
        cells.append(["…"] + [""] * (len(t.columns) - 1))
    return Group(Text(""), Text(t.title, style="bold underline"), FitTable([str(c) for c in t.columns], cells))


def render_view(view: StepView) -> Panel:
    step, lang = view.step, view.lang
    parts: list[Any] = [
        Text(f"{UI('column', lang)} {get_column(step.column).label(lang)}", style="dim"),
        Text(step.t("what", lang)),
        Text(""),
    ]
    parts.append(Text(UI("equation", lang) + ":  ", style="bold").append(equation(step, lang), style="cyan"))
    if view.shapes:
        shapes = "   ".join(f"{name} [{', '.join(map(str, s))}]" for name, s in view.shapes)
        parts.append(Text(UI("shapes", lang) + ":  ", style="bold").append(shapes, style="magenta"))
    for name, value in view.facts:
        parts.append(Text(f"• {name}: ", style="bold").append(cell(value)))
    parts += [rich_table(t) for t in view.tables] + ([Text("")] if view.tables else [])
    for c in view.checks:
        mark, style = ("✓", "green") if c.ok else ("✗", "red")
        parts.append(Text(f"{mark} {c.name}: ", style=style).append(f"{c.value:.3g} (≤ {c.threshold:g})"))
    for n in view.notes:
        parts.append(Text("ℹ " + n, style="yellow"))
    parts.append(Text(UI("look_at", lang) + ":", style="bold"))
    for bullet in step.t("look_at", lang):
        parts.append(Text("  → " + bullet))
    parts.append(Text(UI("real_scale", lang) + ": ", style="dim").append(step.t("real_scale", lang), style="dim"))
    return Panel(Group(*parts), title=f"[bold]{step.label(lang)}[/bold]", title_align="left", border_style="blue")


def render_walk(console: Console, walk, lang: str) -> None:
    head = Text(
        f"dspark-lab · {UI('preset', lang)}: {walk.cfg.name} · {UI('seed', lang)}: {walk.seed} · "
        f"{UI('weights', lang)}: {UI(walk.weights, lang)}\n{NOTES('prompt_label', lang)}: {walk.prompt!r} "
        f"({NOTES('n_tokens', lang, n=walk.tokens.size(1))})",
        style="bold",
    )
    console.print(head)
    real_widths_note(console, walk.cfg, walk.tokenizer, lang)
    for view in walk.views.values():
        console.print(render_view(view))
    for line in next_lines(lang):  # the end of `make lab`: where to go from here, typed as this shell can run it
        console.print(Text(line, style="bold"))


def lab_command(cwd: Path | None = None) -> tuple[str, str | None]:
    """How a reader types `dspark-lab` in this shell, and the virtualenv's activate script when that makes it plain.

    Plain `dspark-lab` where PATH finds this install's own script; otherwise the script's path, relative to the
    current folder when under it (`make lab` in a fresh clone: `.venv/bin/dspark-lab`, the venv not active);
    `python -m lab` through this interpreter where no script is installed (a checkout on PYTHONPATH)."""
    here = Path.cwd() if cwd is None else cwd

    def typed(path: Path) -> str:
        for a, b in ((path, here), (path.parent.resolve() / path.name, here.resolve())):  # a symlinked folder too
            try:
                rel = str(a.relative_to(b))
            except ValueError:
                continue
            return shlex.quote(rel if "/" in rel else f"./{rel}")
        return shlex.quote(str(path))

    bindir = Path(sysconfig.get_path("scripts"))
    script = bindir / "dspark-lab"
    if not script.is_file():
        return f"{typed(Path(sys.executable))} -m lab", None
    found = shutil.which("dspark-lab")
    if found is not None and Path(found).resolve() == script.resolve():
        return "dspark-lab", None
    activate = bindir / "activate"
    return typed(script), typed(activate) if activate.is_file() else None


def next_lines(lang: str, cwd: Path | None = None) -> list[str]:
    """The walk's closing lines: the commands to try next, each as `lab_command` says this shell runs it."""
    cli, activate = lab_command(cwd)
    lines = [TEXT("next", lang, cli=cli)]
    if activate is not None:
        lines.append(TEXT("next_activate", lang, activate=activate))
    return lines


def real_widths_note(console: Console, cfg, tokenizer, lang: str) -> None:
    """One line when the text runs through the lab's ids inside a larger vocabulary (an untrained real-width run)."""
    from dspark_mini.tokenizer import WiderVocabTokenizer  # torch: only when a command renders

    if isinstance(tokenizer, WiderVocabTokenizer):
        fmt = {"name": cfg.name, "vocab": cfg.vocab_size, "dim": cfg.dim, "layers": cfg.n_layers}
        console.print(Text(UI("note_real_widths", lang, lab=tokenizer.lab.vocab_size, **fmt), style="yellow"))


def render_inspect(console: Console, report: dict[str, Any], lang: str) -> None:
    p = report["params"]
    console.print(
        simple_table(
            f"{UI('params', lang)} · {report['preset']} ({report['device']})",
            [TEXT("group", lang), UI("params", lang), TEXT("exact", lang)],
            [[k, fmt_params(p[k]), f"{p[k]:,}"] for k in ("backbone", "engram", "draft", "total")],
        )
    )
    e, pt = report["kv_bytes_per_entry"], report["kv_bytes_per_token"]
    ring = f"{report['window_bytes_per_sequence']:,} B {NOTES('per_seq', lang)}"
    console.print(
        simple_table(
            UI("bytes_per_token", lang),
            [UI("cache_kind", lang), f"B {NOTES('per_entry', lang)}", f"B {NOTES('per_token', lang)}"],
            [
                [UI("cache_window", lang), str(e["window"]), ring],
                [UI("cache_compressed", lang), str(e["compressed_kv"]), f"{pt['compressed_kv']:g}"],
                [UI("cache_index", lang), str(e["index_k"]), f"{pt['index_k']:g}"],
                [NOTES("global", lang), "", f"{pt['global']:g}"],
            ],
        )
    )
    extra = (("candidate-source", "is_candidate_source"), ("Engram", "has_engram"), ("tap", "is_tap"))
    rows = [
        [
            r["layer"],
            r["part"],
            r["ratio"],
            r["mode"],
            "—" if r["reads_kv_of"] is None else r["reads_kv_of"],
            "—" if r["reads_topk_of"] is None else r["reads_topk_of"],
            r["rope"],
            " ".join(name for name, key in extra if r[key]),
        ]
        for r in report["roles"]
    ]
    cols = [UI("layer", lang), NOTES("part", lang), UI("ratio", lang), TEXT("mode", lang), UI("reads_kv_of", lang)]
    cols += [UI("reads_topk_of", lang), "RoPE", TEXT("extra", lang)]
    console.print(simple_table(UI("role", lang), cols, rows))


def strip_token(text: str) -> str:
    """A token as the strip prints it: newline ↵, tab ⇥, a leading space ▁ (as in the tables)."""
    return text.replace("\n", "↵").replace("\t", "⇥").replace(" ", "▁")


def strip_text(report, lang: str) -> Text:
    """One strip for sequence 0: "▸first │ ✓tok ✗tok ·tok ↻tok ○tok ○tok │ … │ ✓tok +tok", each token marked by what
    verify did (colour on top of the marker, never instead of it). Every drafted token is shown: the ℓ sent to verify,
    the target's own token, then those past ℓ marked ○ (not sent to verify)."""
    tok = report.texts

    def add(token: int, kind: str) -> None:
        mark, style = STRIP[kind]
        strip.append(mark + strip_token(tok[token]), style=style)
        strip.append(" ")

    strip = Text()
    add(report.spec.tokens[0][0], "anchor")  # from the prompt's forward
    for r in report.spec.rows(0):
        strip.append("│ ", style="dim")
        drafts = list(zip(r.draft, r.status, strict=True))
        for t, st in drafts[: r.verify_len]:  # the ℓ drafts sent to verify
            add(t, st)
        add(r.next_token, r.next_kind)  # the target's own token: the committed text reads left to right
        for t, st in drafts[r.verify_len :]:  # drafted, never sent to verify
            add(t, st)
    strip.rstrip()  # no closing │: wrapped alone onto the last line, it read as one more, empty round
    return strip


def strip_legend(lang: str) -> Columns:
    """ "✓ accepted   ✗ rejected   …", laid out as columns so an item never wraps apart."""
    items = [
        (mark, TEXT("first", lang) if kind == "anchor" else verify_label(kind, lang))
        for kind, (mark, _) in STRIP.items()
    ]
    items += [("│", TEXT("round_edge", lang)), ("↵", TEXT("newline", lang))]
    return Columns([Text(f"{mark} {label}", style="dim") for mark, label in items], padding=(0, 3))


def render_generate(console: Console, report, lang: str) -> None:
    """Plain vs speculative: the texts, tokens/s, and one strip per round."""
    j = report.to_json()
    drafted = max((r.k for r in report.spec.rows(0)), default=report.verify_len)
    console.print(
        Text(
            f"{NOTES('prompt_label', lang)}: {report.prompt!r}  ·  {UI('block_size', lang)}: {drafted}  ·  "
            f"{UI('verify_len', lang)}: {report.verify_len} ({TEXT('fixed_policy', lang)})  ·  "
            f"{UI('temperature', lang)}: {report.temperature}  ·  {UI('seed', lang)}: {report.seed}",
            style="bold",
        )
    )
    console.print(Text(tokenization_note(report.words, lang)))
    strip = Group(strip_text(report, lang), strip_legend(lang))
    # rules above and below, no side borders: a panel's │ beside the strip's own round boundary │ at a line's end
    # or start would read as one more, empty round
    console.print(Panel(strip, title=TEXT("strip_title", lang), title_align="left", box=box.HORIZONTALS))
    rows = [
        [
            TEXT(key, lang),
            j[key]["text"].replace("\n", "↵ "),
            len(j[key]["tokens"]),
            j[key]["target_forwards"],
            f"{j[key]['tokens_per_s']:.1f}",
        ]
        for key in ("plain", "speculative")
    ]
    cols = ["", TEXT("text", lang), TEXT("tokens", lang), TEXT("forwards", lang), TEXT("tokens_per_s", lang)]
    console.print(simple_table("", cols, rows))
    s = j["speculative"]
    greedy = report.temperature == 0
    if j["identical_tokens"]:
        same = TEXT("identical", lang)
    else:
        same = TEXT("different_greedy", lang, i=j["first_difference"]) if greedy else TEXT("different", lang)
    console.print(
        f"{UI('accepted_length', lang)}: {s['mean_accepted_length']:.3f}  ·  "
        f"{UI('acceptance_rate', lang)}: {s['acceptance_rate']:.3f}  ·  {TEXT('rounds', lang)}: {s['rounds']}  ·  "
        f"{TEXT('same_tokens', lang)}: {same}  ·  {TEXT('speedup', lang)}: {j['speedup']:.2f}×"
    )
    if greedy and not j["identical_tokens"]:
        console.print(Text(TEXT("near_tie", lang, dtype=report.dtype), style="yellow"))
    if report.weights == "untrained":
        console.print(Text(UI("warning_untrained", lang), style="yellow"))
    real_widths_note(console, report.cfg, report.tokenizer, lang)


def render_profile(console: Console, report: dict[str, Any], lang: str) -> None:
    p, m = report["parity"], report["tap_mix"]
    for name, d in ((UI("parity", lang), p), (TEXT("tap_check", lang), m)):
        ok = d["max_abs_diff"] <= d["threshold"]
        console.print(
            Text(
                f"{'✓' if ok else '✗'} {name}: max |Δ| = {d['max_abs_diff']:.3g} (≤ {d['threshold']:g})",
                style="green" if ok else "red",
            )
        )
    a = report["acceptance"]
    keys = ("position", "reached", "cond_accept", "cum_accept", "mean_confidence", "mean_draft_prob")
    console.print(
        simple_table(
            TEXT("acceptance_title", lang, a=UI("acceptance_rate", lang), t=a["mean_accepted_length"], n=a["rounds"]),
            [TEXT(k, lang) for k in ("position", "reached", "conditional", "cumulative", "mean_c", "mean_pd")],
            [[row[k] if row[k] is not None else "—" for k in keys] for row in a["per_position"]],
        )
    )
    rows = []
    for k, d in report["verify_cost"].items():
        a1, b1 = d["verify_s"], d["k_decodes_s"]
        rows.append(
            [k, *(f"{a1[q]:.4f}" for q in ("p50", "p95", "p99")), *(f"{b1[q]:.4f}" for q in ("p50", "p95", "p99"))]
            + [f"{d['ratio_p50']:.2f}"]
        )
    cols = ["k", TEXT("verify_p50", lang), "p95", "p99", TEXT("decodes_p50", lang), "p95", "p99", TEXT("ratio", lang)]
    console.print(simple_table(f"{UI('verify_cost', lang)} ({TEXT('seconds', lang)})", cols, rows))
    vs = report.get("verify_steps")
    if vs:
        lengths = [L for L in vs if L.isdigit()]
        ks = list(vs[lengths[0]]) if lengths else []
        pw = vs.get("pairwise", {})
        cell = lambda L, k: f"{vs[L][k]:.3f} ({pw[L][k]:.3f})" if L in pw else f"{vs[L][k]:.3f}"
        rows = [[L, *(cell(L, k) for k in ks)] for L in lengths]
        console.print(
            simple_table(TEXT("verify_steps", lang), [TEXT("cache_length", lang), *(f"k={k}" for k in ks)], rows)
        )
    console.print(UI("run_conditions", lang) + ": " + ", ".join(f"{k}={v}" for k, v in report["conditions"].items()))

"""The handouts as self-contained HTML pages (A4, printed by chromium): the style and the DSpark Mono faces inline,
nothing fetched.

summary_page(column, context, lang)   one column of the map on one A4 page
worksheet_page(sheet, context, lang)  the 6B worksheet (page 1) and its answer key (page 2)

`context` holds what every page quotes: the prompt, its token count, the seed of the walk.
"""

from __future__ import annotations

import html
from importlib import resources
from typing import Any

from ..present.fonts import MONO_STACK, font_face_css
from ..text import UI, Texts, check_lang, lang_table

T = Texts(lang_table("handouts", "text"), "handouts")
T_TASKS: dict[str, tuple[str, ...]] = {lang: tasks for lang, tasks in lang_table("handouts", "lists")["tasks"].items()}
STATUS = {"accepted": "kept", "rejected": "rejected", "not verified": "not_verified"}  # verify's words → the sheet's


def esc(x: Any) -> str:
    return html.escape(str(x), quote=True)


def page(lang: str, title: str, body: str) -> str:
    """A whole page: the faces, the style, `body`."""
    css = resources.files(__package__).joinpath("handouts.css").read_text(encoding="utf-8")
    return (
        f'<!DOCTYPE html><html lang="{esc(lang)}"><head><meta charset="utf-8"><title>{esc(title)}</title>'
        f"<style>{font_face_css()}:root {{ --mono: {MONO_STACK}; }}\n{css}</style></head>"
        f"<body>{body}</body></html>\n"
    )


def header(lang: str, heading: str) -> str:
    return f'<header><p class="lab">{esc(T("lab_line", lang))}</p><h1>{esc(heading)}</h1></header>'


def footer(context: dict[str, Any], lang: str) -> str:
    text = T("source", lang, prompt=context["prompt"], n=context["n_tokens"], seed=context["seed"])
    return f"<footer>{esc(text)}</footer>"


def shapes_table(shapes: list[tuple[str, list[int]]]) -> str:
    rows = "".join(
        f'<tr><th>{esc(n)}</th><td class="mono">[{esc(", ".join(map(str, s)))}]</td></tr>' for n, s in shapes
    )
    return f'<table class="shapes">{rows}</table>'


def step_section(step: dict[str, Any], lang: str) -> str:
    parts = [
        f'<h2><span class="sid">{esc(step["id"])}</span> {esc(step["title"])}</h2>',
        f'<p class="short">{esc(step["short"])}</p>',
        f'<div class="eq"><h3>{esc(UI("equation", lang))}</h3><pre class="mono">{esc(step["equation"])}</pre></div>',
    ]
    if step["shapes"]:
        parts.append(f'<div class="sh"><h3>{esc(UI("shapes", lang))}</h3>{shapes_table(step["shapes"])}</div>')
    if step["facts"]:
        rows = "".join(f'<tr><th>{esc(n)}</th><td class="mono">{esc(v)}</td></tr>' for n, v in step["facts"])
        parts.append(f'<div class="facts"><h3>{esc(T("numbers", lang))}</h3><table>{rows}</table></div>')
    return f'<section class="step" data-step="{esc(step["id"])}">{"".join(parts)}</section>'


def summary_page(column: dict[str, Any], context: dict[str, Any], lang: str, total: int) -> str:
    """One column's handout: each step's idea, equation, shapes and facts, then the questions."""
    lang = check_lang(lang)
    heading = f"{T('summary_title', lang, n=column['n'], total=total)} · {column['label']}"
    steps = "".join(step_section(s, lang) for s in column["steps"])
    questions = "".join(f"<li>{esc(q)}</li>" for q in column["questions"])
    body = (
        f'<main class="summary">{header(lang, heading)}{steps}'
        f'<section class="questions"><h2>{esc(T("questions", lang))}</h2><ol>{questions}</ol></section>'
        f"{footer(context, lang)}</main>"
    )
    return page(lang, heading, body)


def round_table(sheet: dict[str, Any], lang: str, key: bool) -> str:
    """The round's rows: given p_d, p_t, c and u; r and the verdict blank on the sheet, filled in the key."""
    cols = ("col_i", "col_draft", "col_pd", "col_pt", "col_c", "col_ratio", "col_u", "col_keep")
    head = "".join(f"<th>{esc(T(c, lang))}</th>" for c in cols)
    body = []
    for row in sheet["rows"]:
        u = esc(row["u"]) if row["u"] is not None else f'<span class="none">{esc(T("not_drawn", lang))}</span>'
        ratio = esc(row["ratio"]) if key else ""
        verdict = esc(T(STATUS[row["status"]], lang)) if key else ""
        cells = (esc(row["i"]), f"«{esc(row['token'])}»", esc(row["p_d"]), esc(row["p_t"]), esc(row["c"]))
        tds = "".join(f'<td class="mono">{c}</td>' for c in cells)
        tds += f'<td class="mono blank">{ratio}</td><td class="mono">{u}</td><td class="blank">{verdict}</td>'
        body.append(f'<tr data-status="{esc(row["status"])}">{tds}</tr>')
    return f'<table class="round"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody></table>'


def setting(sheet: dict[str, Any], context: dict[str, Any], lang: str) -> str:
    counters = ", ".join(str(r["counter"]) for r in sheet["rows"] if r["counter"] is not None)
    text = T(
        "setting",
        lang,
        prompt=context["prompt"],
        pos=sheet["position"],
        anchor=sheet["anchor"],
        k=sheet["k"],
        sent=sheet["sent"],
        t=sheet["temperature"],
    )
    return (
        f'<p class="setting">{esc(text)}</p><p class="rule">{esc(T("rule", lang))}</p>'
        f'<p class="draws">{esc(T("draws", lang, seed=sheet["seed"], counters=counters))}</p>'
        f'<p class="legend">{esc(T("legend", lang))}</p>'
    )


def worksheet_page(sheet: dict[str, Any], context: dict[str, Any], lang: str) -> str:
    """Page 1: the round to work by hand; page 2: the answer key."""
    lang = check_lang(lang)
    tasks = "".join(f"<li>{esc(t)}</li>" for t in T_TASKS[lang])
    blanks = "".join(
        f'<p class="blank-line">{esc(T(k, lang))}</p>' for k in ("blank_committed", "blank_tau", "blank_survival")
    )
    kind = UI(sheet["next_kind"], lang)
    committed = " ".join(f"«{t}»" for t in sheet["committed"])
    said = T(
        "key_committed",
        lang,
        tokens=committed,
        n=sheet["n_accepted"],
        next=sheet["next"],
        kind=kind,
        tau=sheet["tau"],
    )
    survival = T("key_survival", lang, values=", ".join(sheet["survival"]))
    key = "".join(f'<p class="answer">{esc(x)}</p>' for x in (said, survival, T("key_check", lang)))
    body = (
        f'<main class="worksheet"><section class="sheet">{header(lang, T("worksheet_title", lang))}'
        f"{setting(sheet, context, lang)}{round_table(sheet, lang, key=False)}"
        f'<h2>{esc(T("tasks_title", lang))}</h2><ol class="tasks">{tasks}</ol>{blanks}{footer(context, lang)}</section>'
        f'<section class="key">{header(lang, T("key_title", lang))}{round_table(sheet, lang, key=True)}{key}'
        f"{footer(context, lang)}</section></main>"
    )
    return page(lang, T("worksheet_title", lang), body)

"""The presenter's slides: every step of the lesson cut into builds a clicker can walk, one screen each.

A step's panel (lab.screens.widgets.step_panel_content, what the notebooks show) is 2–8 screens long at a projector's
font size; here it becomes a row of slides, in the order a teacher explains it:

  text      the title, the column, the idea in a few lines (deck.toml's [short]) beside the map
  equation  the equation (large, monospace), the tensor shapes
  figure    one slide per figure: its title as wrapping text, the plot sized to the screen
  table     one slide per table (at most MAX_ROWS rows: every slide fits one screen)
  checks    the facts, whether the independent recomputations agree, the real scale

Each slide carries a short form (`html`, at most SLIDE_WORDS words of prose) and speaker notes (`notes`): the step's
long explanation, what to look at, every check and the view's notes, shown by the presenter's speaker view.

The 6B draft-block table also gets a narration: sentences a Next press lights one at a time, each with the
cells it speaks about (`data-col` / `data-row` attributes, lit by the page). Everything here is plain data and
escaped HTML; presenter_app.js lays it out and draws the figures with plotly.js.
"""

from __future__ import annotations

import html
import json
import re
from typing import Any

from ..lesson.steps import COLUMNS, FLOW, STEP_IDS, get_step
from ..text import UI, lang_table

BUILDS = ("text", "equation", "figure", "table", "checks")
NARRATED_STEP = "6B"
MAX_ROWS = 10  # rows a table slide shows (then "… N rows"): one screen at 1280×720 with ≥ 20 px text
# at most this many words of prose on a build slide (tables, equations and plots aside); Vietnamese writes every
# syllable as a word, so its cap is higher. The rounds' pages (presenter_app.js) have ROUND_WORDS.
SLIDE_WORDS = dict(en=60, vi=80)  # numbers, not sentences: no lab/lang file for them
ROUND_WORDS = dict(en=75, vi=95)

TEXT: dict[str, dict[str, str]] = lang_table("deck", "text")
SHORT: dict[str, dict[str, str]] = lang_table("deck", "short")  # each step's idea in a few lines, for the slide


def tr(key: str, lang: str, **fmt: Any) -> str:
    return TEXT[key][lang].format(**fmt)


def n_drafts(n: int, lang: str) -> str:
    """ "1 draft", "3 drafts": the count with its noun agreeing, in `lang`."""
    return tr("n_draft_one" if n == 1 else "n_draft_many", lang, n=n)


def slide_words(html_text: str) -> int:
    """The words of prose a slide shows: its HTML without tables, equations and plots, tags dropped."""
    text = re.sub(r"<(table|pre)\b.*?</\1>", " ", html_text, flags=re.S | re.I)
    return len(html.unescape(re.sub(r"<[^>]+>", " ", text)).split())


def esc(x: Any) -> str:
    return html.escape(str(x), quote=True)


def cell(x: Any) -> str:
    """A table value as the notebooks write it (lab.screens.widgets.cell_text), escaped."""
    from ..screens.widgets import cell_text

    return esc(cell_text(x))


def plain_title(text: str) -> str:
    """A plotly title as plain text: <br> → space, other tags dropped, entities decoded."""
    text = re.sub(r"<br\s*/?>", " ", text or "", flags=re.I)
    return html.unescape(re.sub(r"<[^>]+>", "", text)).strip()


# ---- one step's slides ------------------------------------------------------------------------------------
def text_slide(c: dict[str, Any], lang: str) -> str:
    """The idea in a few lines (deck.toml's [short]); the step's long text is text_notes'."""
    layer = f" · {UI('layer', lang)} {c['layer']}" if c["layer"] is not None else ""
    return (
        f'<p class="column">{esc(UI("column", lang))} {esc(c["column"])}{esc(layer)}</p>'
        f'<p class="what">{esc(SHORT[c["step"]][lang])}</p>'
    )


def look_notes(c: dict[str, Any], lang: str) -> str:
    bullets = "".join(f"<li>{esc(b)}</li>" for b in c["look_at"])
    return f"<h4>{esc(tr('notes_look', lang))}</h4><ul>{bullets}</ul>"


def text_notes(c: dict[str, Any], lang: str) -> str:
    """The speaker notes of the idea slide: the step's whole explanation, what to look at, the layer note."""
    note = f"<p>{esc(c['layer_note'])}</p>" if c["layer_note"] else ""
    return f"<p>{esc(c['what'])}</p>{look_notes(c, lang)}{note}"


def equation_slide(c: dict[str, Any], lang: str) -> str:
    shapes = "".join(
        f"<tr><th>{esc(name)}</th><td class='mono'>[{esc(', '.join(map(str, shape)))}]</td></tr>"
        for name, shape in c["shapes"]
    )
    table = f'<h3>{esc(UI("shapes", lang))}</h3><table class="shapes">{shapes}</table>' if shapes else ""
    return f'<h3>{esc(UI("equation", lang))}</h3><pre class="equation mono">{esc(c["equation"])}</pre>{table}'


def figure_slide(title: str, index: int) -> str:
    return f'<h3 class="figure-title">{esc(title)}</h3><div class="figure" data-figure="{index}"></div>'


def table_slide(table: dict[str, Any], lang: str, tid: str) -> str:
    """One view table; every cell tagged with its column and row (`data-col`, `data-row`) for the narration."""
    rows = table["rows"]
    shown = rows if len(rows) <= MAX_ROWS else rows[: MAX_ROWS - 1]
    head = "".join(f'<th data-col="{j}">{esc(h)}</th>' for j, h in enumerate(table["columns"]))
    body = "".join(
        f'<tr data-row="{i}">' + "".join(f'<td data-col="{j}">{cell(x)}</td>' for j, x in enumerate(row)) + "</tr>"
        for i, row in enumerate(shown)
    )
    if len(rows) > len(shown):
        body += f'<tr><td colspan="{len(table["columns"])}">{esc(tr("rows_more", lang, n=len(rows)))}</td></tr>'
    return (
        f'<h3>{esc(table["title"])}</h3><div class="table-wrap"><table id="{tid}">'
        f"<thead><tr>{head}</tr></thead><tbody>{body}</tbody></table></div>"
    )


def checks_slide(c: dict[str, Any], lang: str) -> str:
    out = []
    if c["facts"]:
        from ..screens.widgets import cell_text

        rows = "".join(f"<tr><th>{esc(n)}</th><td>{esc(cell_text(v))}</td></tr>" for n, v in c["facts"])
        out.append(f'<h3>{esc(tr("facts", lang))}</h3><table class="facts">{rows}</table>')
    if c["checks"]:
        bad = [k for k in c["checks"] if not k["ok"]]
        n = len(c["checks"])
        if bad:
            items = "".join(f'<li class="bad">✗ {esc(k["name"])}</li>' for k in bad)
            out.append(f'<p class="checks bad">{esc(tr("checks_fail", lang, bad=len(bad), n=n))}</p><ul>{items}</ul>')
        else:
            out.append(f'<p class="checks ok">{esc(tr("checks_pass", lang, ok=n, n=n))}</p>')
    out.append(f'<p class="scale"><b>{esc(UI("real_scale", lang))}:</b> {esc(c["real_scale"])}</p>')
    return "".join(out)


def checks_notes(c: dict[str, Any], lang: str) -> str:
    """The speaker notes of the checks slide: every check with its value, then the view's notes (the details a
    teacher may want to answer a question with; the slide shows only the facts and whether the checks pass)."""
    items = "".join(
        f"<li>{'✓' if k['ok'] else '✗'} {esc(k['name'])}: {k['value']:.3g} (≤ {k['threshold']:g})</li>"
        for k in c["checks"]
    )
    checks = f"<h4>{esc(tr('notes_checks', lang))}</h4><ul>{items}</ul>" if items else ""
    return checks + "".join(f"<p>{esc(n)}</p>" for n in c["notes"] if not about_the_lesson_table(n, lang))


def about_the_lesson_table(note: str, lang: str) -> bool:
    """Whether a view note reads the lesson comparison table, which the deck leaves to the notebooks."""
    from ..lesson.notes import NOTES

    return any(note.startswith(NOTES[k][lang].split("{")[0]) for k in ("lesson_pd", "lesson_prefix"))


def draft_table_narration(state: Any, table: dict[str, Any], lang: str, requests: int) -> list[dict[str, Any]] | None:
    """The 6B draft-block table's narration: five sentences, each with the cells it lights (CSS selectors inside
    the slide). None when `table` is not that table (its columns are named by lab.lesson.walk's NOTES). The walk's
    ℓ is the one the `dspark` scheduler picks at `requests` in flight (lab/present/presenter.py sets it)."""
    from ..lesson.notes import NOTES
    from ..lesson.view_6b import load_plan

    cols = table["columns"]
    need = {k: NOTES[k][lang] for k in ("pos_short", "pd_col", "pt_col", "ratio_col", "c_col")}
    if cols[0] != need["pos_short"] or not set(need.values()) <= set(cols) or UI("draft_token", lang) not in cols:
        return None
    col = {k: cols.index(v) for k, v in need.items()}
    draft_col = cols.index(UI("draft_token", lang))
    verdicts = {UI(k, lang) for k in ("accepted", "rejected", "not_verified", "not_sent")}
    status_col = next(j for j in range(len(cols)) if any(str(r[j]).strip() in verdicts for r in table["rows"]))
    walk = state.walk
    rd = walk.round
    tok = lambda i: walk.tokenizer.token_text(int(i)).replace("\n", "↵")  # noqa: E731
    lit = lambda *js: [f'[data-col="{j}"]' for j in js]  # noqa: E731
    first_bad = [f'tr[data-row="{rd.n_accepted}"]'] if rd.n_accepted < rd.verify_len else []
    last = len(table["rows"]) - 1  # the row of the target's own token
    ell = load_plan(rd.confidence, requests).verify_len  # what the scheduler sends at this load
    return [
        {
            "text": tr("n6b_draft", lang, a=tok(rd.anchor), drafts=n_drafts(len(rd.draft), lang), col=cols[draft_col]),
            "lit": lit(draft_col),
        },
        {"text": tr("n6b_conf", lang), "lit": lit(col["pd_col"], col["c_col"])},
        {"text": tr("n6b_target", lang), "lit": lit(col["pt_col"], col["ratio_col"])},
        {
            "text": tr(
                "n6b_verdict" if ell == rd.verify_len else "n6b_verdict_fixed",
                lang,
                n=rd.n_accepted,
                l=rd.verify_len,
                drafts=n_drafts(rd.verify_len, lang),
                r=requests,
                s=ell,
            ),
            "lit": lit(status_col) + first_bad,
        },
        {
            "text": tr("n6b_next", lang, t=tok(rd.next_token), kind=UI(rd.next_kind, lang), tau=rd.tau),
            "lit": [f'tr[data-row="{last}"]'],
        },
    ]


def step_slides(state: Any, sid: str, requests: int) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """One step's slides in the state's language, and its figures as plotly JSON (each slide's `figure` indexes
    them; the figure's own title moves into the slide, where it wraps instead of being cut). Each slide has its
    short form (`html`: what the room reads) and its speaker notes (`notes`: the long form, for ?notes)."""
    from ..lesson.notes import NOTES
    from ..screens.widgets import step_panel_content

    c = step_panel_content(state, sid)
    lang = c["lang"]
    look = look_notes(c, lang)
    figures, slides = [], []
    for i, fig in enumerate(c["figures"]):
        spec = json.loads(fig.to_json())
        title = plain_title(((spec.get("layout") or {}).get("title") or {}).get("text", ""))
        spec.setdefault("layout", {})["title"] = {"text": ""}
        figures.append(spec)
        slides.append({"kind": "figure", "html": figure_slide(title, i), "figure": i, "notes": look})
    slides = [
        {"kind": "text", "html": text_slide(c, lang), "notes": text_notes(c, lang)},
        {"kind": "equation", "html": equation_slide(c, lang), "notes": look},
        *slides,
    ]
    for i, table in enumerate(c["tables"]):
        if table["title"] == NOTES["lesson_title"][lang]:
            continue  # the setting of a lesson the class has not seen: the notebooks show it, the deck does not
        tid = f"t-{sid}-{i}"
        slide = {"kind": "table", "html": table_slide(table, lang, tid), "notes": look}
        if sid == NARRATED_STEP:
            narration = draft_table_narration(state, table, lang, requests)
            if narration:
                slide["narration"] = narration
                said = "".join(f"<li>{esc(n['text'])}</li>" for n in narration)
                slide["notes"] = f"<h4>{esc(tr('notes_table', lang))}</h4><ol>{said}</ol>{look}"
        slides.append(slide)
    slides.append({"kind": "checks", "html": checks_slide(c, lang), "notes": checks_notes(c, lang)})
    for s in slides:
        s["step"], s["title"] = sid, c["title"]
    return slides, figures


def deck(state: Any, requests: int) -> dict[str, Any]:
    """Every step's slides and figures in the state's language: {"slides": [...], "figures": {step: [...]}};
    `requests`: the load R the 6B narration names (the walk's ℓ is the scheduler's at that load)."""
    slides, figures = [], {}
    for sid in STEP_IDS:
        s, f = step_slides(state, sid, requests)
        slides += s
        figures[sid] = f
    return {"slides": slides, "figures": figures}


def map_data(lang: str) -> dict[str, Any]:
    """The 4-column map as data the page lays out in HTML (text that wraps and scales with the font control):
    the columns left to right with their steps top to bottom, and the flow edges."""
    return {
        "columns": [
            {
                "id": col.id,
                "label": col.label(lang),
                "steps": [{"id": s, "title": get_step(s).t("title", lang)} for s in col.step_ids],
            }
            for col in COLUMNS
        ],
        "flow": [[e.src, e.dst, e.bidirectional] for e in FLOW],
    }


def strings() -> dict[str, dict[str, str]]:
    """This module's strings, {key: {vi, en}} (the build names and the 6B narration)."""
    return TEXT

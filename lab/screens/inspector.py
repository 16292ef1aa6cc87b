"""The 6B inspector in JupyterLab: the draft block's table (draft tokens, p_d(x), confidence c, what verify used and
kept), the strip and logits figures, the ℓ and temperature sliders, and the `requests in flight` slider that shows
which drafts the `dspark` scheduler would send at that load. Callbacks are plain functions tests call.
"""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import Any

import ipywidgets as widgets

from ..lesson.notes import NOTES
from ..lesson.steps import get_step
from ..lesson.view_6b import check_load, lesson_table, load_plan, next_row, status_text, verdict_text, verify_rows
from ..text import UI
from .plots import token_text
from .plots_6b import draft_strip, logits_bar
from .widgets import (
    LOAD_STEPS,
    TEXT,
    LabState,
    figure_output,
    set_figure,
    table_html,
    tagged,
    temperature_slider,
    verify_len_slider,
)


# ---- the 6B inspector ----------------------------------------------------------------------------------
def inspector_6b_content(state: LabState) -> dict[str, Any]:
    """Step 6B as plain data: the logits bar, the draft strip, one row per drafted position with the numbers verify
    used (draft token, p_d(x), p_t(x), min(1, p_t/p_d), confidence c, the target's argmax, the verdict — at T = 0
    the one-hot values, with the softmax T = 1 ones beside as `*_t1`; None where a draft past ℓ was never sent to
    verify), the target's own token, the verdict line, the note on what the numbers are, and the lesson's setting
    next to the lab's."""
    walk, lang = state.walk, state.lang
    rd = walk.round
    rows = [
        {
            "position": row["position"],
            "draft_token": token_text(walk.tokenizer, row["token"]),
            "draft_prob": row["p_d"],
            "target_prob": row["p_t"],
            "ratio": row["ratio"],
            "confidence": row["confidence"],
            "target_token": None if row["target_argmax"] is None else token_text(walk.tokenizer, row["target_argmax"]),
            "sent": row["sent"],
            "status": row["status"],
            "status_text": status_text(row, lang),
            "sampled_not_argmax": row["sampled_not_argmax"],
            "draft_prob_t1": row["soft_p_d"],
            "target_prob_t1": row["soft_p_t"],
        }
        for row in verify_rows(walk)
    ]
    nxt = next_row(walk)
    lesson = lesson_table(walk, lang)
    greedy = walk.temperature == 0
    return {
        "k": rd.k,  # drafted: the whole trained block
        "verify_len": rd.verify_len,  # ℓ sent to verify (the state's `verify_len`, a fixed policy)
        "temperature": state.temperature,
        "rows": rows,
        "next": {
            "position": nxt["position"],
            "token": token_text(walk.tokenizer, nxt["token"]),
            "target_token": token_text(walk.tokenizer, nxt["target_argmax"]),
            "status": nxt["status"],
            "status_text": status_text(nxt, lang),
            "sampled_not_argmax": nxt["sampled_not_argmax"],
        },
        "next_token": token_text(walk.tokenizer, rd.next_token),
        "next_kind": rd.next_kind,
        "n_accepted": rd.n_accepted,
        "tau": rd.tau,
        "verdict": verdict_text(walk, lang),
        "numbers_note": NOTES("t0_note", lang) if greedy else NOTES("t_note", lang, t=f"{walk.temperature:g}"),
        "lesson": {"title": lesson.title, "columns": lesson.columns, "rows": lesson.rows},
        "logits": logits_bar(walk, 10, lang),
        "strip": draft_strip(rd, walk.tokenizer, lang, temperature=walk.temperature),
    }


def draft_table_html(content: dict[str, Any], lang: str) -> str:
    """The draft positions as an HTML table, one `dspark-draft-row` per draft position (then the target's own
    token), with the numbers verify used; at T = 0 a last column holds the softmax T = 1 values (not used)."""
    greedy = content["temperature"] == 0
    columns = ["#", UI("draft_token", lang)]
    columns += [NOTES(k, lang) for k in ("pd_col", "pt_col", "ratio_col", "c_col", "argmax_col")]
    columns += [TEXT("verify_col", lang)] + ([NOTES("soft_col", lang)] if greedy else [])

    def num(x: float | None, fmt: str = ".4g") -> str:
        return "—" if x is None else f"{x:{fmt}}"

    rows = [
        [r["position"], r["draft_token"], num(r["draft_prob"]), num(r["target_prob"]), num(r["ratio"])]
        + [num(r["confidence"]), r["target_token"] or "—", r["status_text"]]
        + ([f"{num(r['draft_prob_t1'], '.3g')} / {num(r['target_prob_t1'], '.3g')}"] if greedy else [])
        for r in content["rows"]
    ]
    nxt = content["next"]
    rows.append([nxt["position"], nxt["token"], "", "", "", "", nxt["target_token"], nxt["status_text"]])
    rows[-1] += [""] if greedy else []
    title = f"{UI('draft_token', lang)} · k = {content['k']} · ℓ = {content['verify_len']}"
    classes = ["dspark-draft-row" + ("" if r["sent"] else " dspark-not-sent") for r in content["rows"]]
    return table_html({"title": title, "columns": columns, "rows": rows}, classes + ["dspark-next-row"])


def load_content(state: LabState, requests: int) -> dict[str, Any]:
    """What the scheduler would verify of the state's round with `requests` copies of it in flight (the 6B walk's
    scheduler table, `view_6b.load_plan`), and ℓ at every load of the slider, as plain data."""
    requests = check_load(requests)
    rd, tok = state.walk.round, state.walk.tokenizer
    plan = load_plan(rd.confidence, requests)
    return {
        "requests": requests,
        "verify_len": plan.verify_len,
        "lengths": list(plan.lengths),
        "mean_verify_len": plan.mean_verify_len,
        "batch_tokens": plan.batch_tokens,
        "throughput": plan.throughput,
        "k": rd.k,
        "fixed_verify_len": rd.verify_len,
        "drafts": [{"token": token_text(tok, t), "sent": i < plan.verify_len} for i, t in enumerate(rd.draft)],
        "sweep": [(r, load_plan(rd.confidence, r).verify_len) for r in LOAD_STEPS],
    }


def load_html(content: dict[str, Any], lang: str) -> str:
    """The load section: one line with ℓ, the drafts marked ● sent / ○ not sent, ℓ at every load, the caveat."""
    e = html.escape
    line = TEXT(
        "load_line",
        lang,
        r=content["requests"],
        l=content["verify_len"],
        k=content["k"],
        b=content["batch_tokens"],
        m=f"{content['mean_verify_len']:.2f}",
        t=f"{content['throughput']:.0f}",
    )
    cells = []
    for d in content["drafts"]:
        style = "background:#8fd19e;font-weight:bold" if d["sent"] else "background:#f7f7f7;color:#777"
        cls = "dspark-load-sent" if d["sent"] else "dspark-load-not-sent"
        mark = "●" if d["sent"] else "○"
        cells.append(f"<span class='{cls}' style='{style};padding:2px 6px;margin:2px'>{mark} {d['token']}</span>")
    sweep = " · ".join(
        (f"<b>R = {r}: ℓ = {n}</b>" if r == content["requests"] else f"R = {r}: ℓ = {n}") for r, n in content["sweep"]
    )
    return (
        f"<div style='margin:6px 0'><b>{e(TEXT('load_title', lang))}</b><p>{e(line)}</p>"
        f"<div>{''.join(cells)}</div>"
        f"<p style='font-size:12px'>{e(TEXT('load_sweep', lang))}: {sweep}</p>"
        f"<p style='color:#92400e'>ℹ {e(TEXT('load_sim', lang, l=content['fixed_verify_len']))}</p></div>"
    )


def inspector_6b(state: LabState, sliders: bool = True) -> widgets.VBox:
    """Step 6B: the logits bar, the draft strip, the per-position table (the numbers verify used), the scheduler
    under load and the lesson's setting next to the lab's, with a verify-length slider ℓ (1..trained block: a fixed
    policy; the draft always runs the whole block) and a temperature slider (0..2) that re-draft only — the prompt's
    forward is kept — and a "requests in flight" slider (1..256, log steps) that shows the ℓ the dspark scheduler
    would pick for this round at that load (display only: nothing is recomputed in the model).
    `sliders=False` leaves the ℓ and temperature sliders out (the app has them among its controls)."""
    cfg = state.walk.cfg
    title = tagged(widgets.HTML(), "dspark-inspector-title")
    ell = tagged(verify_len_slider(state, cfg), "dspark-verify-len-slider")
    temp = tagged(temperature_slider(state), "dspark-temperature-slider")
    load = tagged(
        widgets.SelectionSlider(options=list(LOAD_STEPS), value=LOAD_STEPS[0], continuous_update=False),
        "dspark-load-slider",
    )
    load.style.description_width = temp.style.description_width = "initial"  # "Temperature", never "Temperat…"
    status = tagged(widgets.HTML(), "dspark-inspector-status")
    logits_out = tagged(figure_output(), "dspark-logits")
    strip_out = tagged(figure_output(), "dspark-draft-strip")
    table = tagged(widgets.HTML(), "dspark-draft-table")
    load_view = tagged(widgets.HTML(), "dspark-load")
    lesson = tagged(widgets.HTML(), "dspark-lesson-table")

    def render_load(change: dict[str, Any] | None = None) -> None:
        load_view.value = load_html(load_content(state, load.value), state.lang)

    def render(changed: set[str] | None = None, recomputed: set[str] | None = None) -> None:
        if changed is not None and not (recomputed or changed & {"lang"}):
            return
        lang = state.lang
        content = inspector_6b_content(state)
        title.value = (
            f"<h3 style='margin:4px 0'>{html.escape(TEXT('inspector', lang))} · "
            f"{html.escape(get_step('6B').t('title', lang))}</h3>"
            f"<p>{html.escape(content['verdict'])}</p>"
        )
        ell.description, temp.description = "ℓ", UI("temperature", lang)
        load.description = UI("requests_in_flight", lang)
        ell.value, temp.value = state.verify_len, state.temperature  # no-op updates when already equal
        if changed is None or recomputed & {"forward", "views"}:  # a new draft leaves the logits as they are
            set_figure(logits_out, content["logits"])
        set_figure(strip_out, content["strip"])
        note_html = f"<p style='color:#92400e'>ℹ {html.escape(content['numbers_note'])}</p>"
        table.value = draft_table_html(content, lang) + note_html
        render_load()
        lesson.value = table_html(content["lesson"])

    def on_slider(name: str, widget: widgets.Widget) -> Callable[[dict[str, Any]], None]:
        def handler(change: dict[str, Any]) -> None:
            try:
                state.update(**{name: change["new"]})
                status.value = ""
            except (TypeError, ValueError) as err:
                status.value = f"<span style='color:#b91c1c'>{html.escape(str(err))}</span>"
                widget.value = getattr(state, name)

        return handler

    ell.observe(on_slider("verify_len", ell), names="value")
    temp.observe(on_slider("temperature", temp), names="value")
    load.observe(render_load, names="value")
    render()
    state.subscribe(render)
    parts: list[widgets.Widget] = [title]
    if sliders:
        parts.append(widgets.HBox([ell, temp]))
    parts += [status, logits_out, strip_out, table, load, load_view, lesson]
    return tagged(widgets.VBox(parts, layout=widgets.Layout(width="100%")), "dspark-inspector")

"""ipywidgets for JupyterLab: the lab's state, the clickable 4-column map, step panels and the 6B inspector.

Every callback is a thin shell around a plain function that tests call directly:
  LabState.update(**changes) → what was recomputed   prompt/seed/weights → forward + draft + views,
                                                     block/temperature → draft only (`redraft`),
                                                     lang → views only (`build_views`), step/layer → nothing;
  open_step(state, id) → the panel's content          (what a click on a map block does);
  step_panel_content / inspector_6b_content           plain data (text, tables, plotly figures).
Widgets only lay that data out. Figures are shown in `widgets.Output`s holding plotly's own JSON mime
bundle, which JupyterLab renders offline (no `anywidget` needed, nothing fetched).
"""

from __future__ import annotations

import html
import json
from collections.abc import Callable, Iterator
from typing import Any

import ipywidgets as widgets
import plotly.graph_objects as go

from dspark_mini.validate import check_seed, check_temperature

from ..text import DEFAULT_PROMPT, UI, Texts, check_lang
from .figures import step_figures
from .notes import NOTES, equation
from .plots import default_layer, resolve_layer, step_layers, token_text
from .plots_6b import draft_strip, logits_bar
from .steps import COLUMNS, FLOW, STEP_IDS, Step, get_column, get_step, steps_in_column
from .view import StepView, Walk
from .view_6b import check_load, lesson_table, load_plan, next_row, status_text, verdict_text, verify_rows
from .views import view_2a, view_4a, view_5a
from .walk import build_views, check_block, redraft, run_walk

WEIGHTS: tuple[str, ...] = ("trained", "untrained")
FIELDS: tuple[str, ...] = ("prompt", "seed", "block", "temperature", "lang", "weights", "step", "layer")
FORWARD_FIELDS: frozenset[str] = frozenset({"prompt", "seed", "weights"})
DRAFT_FIELDS: frozenset[str] = frozenset({"block", "temperature"})
TEMPERATURE_MAX = 2.0
PLOTLY_MIME = "application/vnd.plotly.v1+json"
COLUMN_COLOURS: tuple[str, ...] = ("#dbeafe", "#dcfce7", "#fef3c7", "#fce7f3")  # map columns 1..4
MAX_TABLE_ROWS = 24
AUTO_LAYER = "auto"  # the layer dropdown's value for "each step's default" (a Dropdown cannot hold None)
LOAD_STEPS: tuple[int, ...] = tuple(2**i for i in range(9))  # the load slider: 1, 2, 4, …, 256 requests in flight

TEXT = {
    "auto": {"vi": "tự động", "en": "auto"},
    "recomputed": {"vi": "đã tính lại", "en": "recomputed"},
    "display_only": {"vi": "chỉ hiển thị lại", "en": "display only"},
    "forward": {"vi": "forward của prompt", "en": "prompt forward"},
    "draft": {"vi": "vòng DSpark", "en": "DSpark round"},
    "views": {"vi": "bảng", "en": "views"},
    "layer_fallback": {
        "vi": "Bước {step} không có dữ liệu ở lớp {layer}; đang hiện lớp {shown} (có: {allowed}).",
        "en": "Step {step} has no data at layer {layer}; showing layer {shown} (available: {allowed}).",
    },
    "inspector": {"vi": "Bộ soi bước 6B", "en": "Step 6B inspector"},
    "verify_col": {"vi": "Kết quả verify", "en": "Verify"},
    "load_title": {"vi": "Bộ lập lịch khi tải cao", "en": "The scheduler under load"},
    "load_line": {
        "vi": "R = {r} yêu cầu đang chạy: chính sách dspark (Algorithm 1) sẽ verify ℓ = {l} trong k = {k} token "
        "nháp của vòng này (B = {b} token trong batch, ℓ trung bình = {m}, Θ = {t} token/giây kỳ vọng).",
        "en": "R = {r} requests in flight: the dspark policy (Algorithm 1) would verify ℓ = {l} of this round's "
        "k = {k} drafts (B = {b} batch tokens, mean ℓ = {m}, Θ = {t} expected tokens/s).",
    },
    "load_sim": {
        "vi": "Mô phỏng: c của vòng này xếp chồng R lần thành đầu vào [R, k], với bảng SPS(B) đo sẵn của lab; "
        "● = sẽ gửi đi verify, ○ = không gửi. Vòng ở trên dùng chính sách cố định ℓ = {l} (thanh trượt ℓ).",
        "en": "A simulation: this round's c stacked R times as the [R, k] input, with the lab's shipped SPS(B) "
        "table; ● = would be sent to verify, ○ = not sent. The round above used a fixed policy, ℓ = {l} "
        "(the ℓ slider).",
    },
    "load_sweep": {"vi": "ℓ theo R", "en": "ℓ by R"},
}
TEXT = Texts(TEXT, "widget")


# ---- the state ---------------------------------------------------------------------------------------
Listener = Callable[[set[str], set[str]], None]  # (changed fields, recomputed parts)


class LabState:
    """What the learner chose (prompt, seed, block, temperature, lang, weights, step, layer) and the Walk.
    `block` is the verify length ℓ of a fixed policy (the draft always runs its whole trained block).

    `update` validates every change first (nothing is half-applied), recomputes only what the change
    needs, then tells the subscribed widgets. `runs` counts the forwards, DSpark rounds and view builds.
    """

    def __init__(
        self,
        prompt: str = DEFAULT_PROMPT,
        seed: int = 0,
        lang: str = "en",
        block: int | None = None,
        temperature: float = 0.0,
        weights: str = "trained",
        step: str = "1A",
        layer: int | None = None,
    ) -> None:
        lang = check_lang(lang)
        walk = run_walk(
            check_prompt(prompt),
            seed=check_seed(seed),
            lang=lang,
            block=block,
            temperature=check_temperature(temperature),
            weights=check_weights(weights),
        )
        self._init(walk, lang, weights, step, layer, runs={"forward": 1, "draft": 1, "views": 1})

    @classmethod
    def from_walk(cls, walk: Walk, lang: str | None = None, step: str = "1A", layer: int | None = None) -> LabState:
        """A state around a Walk already computed (its prompt, seed, block and temperature); views are
        rebuilt only when `lang` differs from the language they were built in."""
        state = cls.__new__(cls)
        built = next(iter(walk.views.values())).lang if walk.views else None
        lang = check_lang(lang or built or "en")
        runs = {"forward": 0, "draft": 0, "views": 0}
        if lang != built or set(walk.views) != set(STEP_IDS):
            walk = build_views(walk, lang)
            runs["views"] = 1
        state._init(walk, lang, walk.weights, step, layer, runs)
        return state

    def _init(self, walk: Walk, lang: str, weights: str, step: str, layer: int | None, runs: dict[str, int]) -> None:
        self.walk = walk
        self.prompt, self.seed = walk.prompt, walk.seed
        self.block, self.temperature = walk.block, walk.temperature
        self.lang, self.weights = lang, weights
        self.step = get_step(step).id
        self.layer = self._check_layer(layer)
        self.runs = runs
        self._listeners: list[Listener] = []

    # -- validation --
    def _check_layer(self, layer: int | None) -> int | None:
        n = self.walk.cfg.n_layers
        if layer is None:
            return None
        if isinstance(layer, bool) or not isinstance(layer, int) or not 0 <= layer < n:
            raise ValueError(f"layer = {layer!r} is invalid: allowed None (each step's default) or 0..{n - 1}")
        return layer

    def check(self, name: str, value: Any) -> Any:
        """`value` validated (and normalized) for field `name`; a bad one raises ValueError (or TypeError, for a
        value of the wrong kind) naming it. Seeds and temperatures go through dspark_mini.validate, as in the CLI."""
        if name == "prompt":
            return check_prompt(value)
        if name == "seed":
            return check_seed(value)
        if name == "block":
            return check_block(self.walk.cfg, value)
        if name == "temperature":
            return check_temperature(value)
        if name == "lang":
            return check_lang(value)
        if name == "weights":
            return check_weights(value)
        if name == "step":
            return get_step(value).id
        if name == "layer":
            return self._check_layer(value)
        raise ValueError(f"unknown setting {name!r}: allowed {', '.join(FIELDS)}")

    # -- changes --
    def update(self, **changes: Any) -> set[str]:
        """Apply `changes` and return what was recomputed: a subset of {"forward", "draft", "views"}."""
        new = {name: self.check(name, value) for name, value in changes.items()}
        changed = {name for name, value in new.items() if value != getattr(self, name)}
        if not changed:
            return set()
        values = {name: new.get(name, getattr(self, name)) for name in FIELDS}
        walk, recomputed = self.walk, set()
        if changed & FORWARD_FIELDS:
            walk = run_walk(
                values["prompt"],
                seed=values["seed"],
                lang=values["lang"],
                block=values["block"],
                temperature=values["temperature"],
                weights=values["weights"],
            )
            recomputed = {"forward", "draft", "views"}
        else:
            if changed & DRAFT_FIELDS:
                walk = redraft(walk, values["block"], values["temperature"])  # the prompt's forward is reused
                recomputed.add("draft")
            if "lang" in changed:
                walk = build_views(walk, values["lang"])
                recomputed.add("views")
        for name in FIELDS:
            setattr(self, name, values[name])
        self.walk = walk
        for part in recomputed:
            self.runs[part] += 1
        for listener in list(self._listeners):
            listener(changed, recomputed)
        return recomputed

    def subscribe(self, listener: Listener) -> None:
        """Call `listener(changed, recomputed)` after every update that changed something."""
        self._listeners.append(listener)

    def unsubscribe(self, listener: Listener) -> None:
        if listener in self._listeners:
            self._listeners.remove(listener)

    def __repr__(self) -> str:
        return (
            f"LabState(prompt={self.prompt!r}, seed={self.seed}, block={self.block}, "
            f"temperature={self.temperature}, lang={self.lang!r}, weights={self.weights!r}, "
            f"step={self.step!r}, layer={self.layer})"
        )


def check_prompt(prompt: Any) -> str:
    if not isinstance(prompt, str) or not prompt.strip():
        raise ValueError("prompt is empty: give some text to run through the model")
    return prompt


def check_weights(weights: Any) -> str:
    if weights not in WEIGHTS:
        raise ValueError(f"weights = {weights!r} is invalid: allowed {', '.join(map(repr, WEIGHTS))}")
    return weights


def describe_update(recomputed: set[str], lang: str) -> str:
    """ "recomputed: prompt forward, DSpark round, views" — the status line after a change."""
    if not recomputed:
        return TEXT("display_only", lang)
    parts = [TEXT(p, lang) for p in ("forward", "draft", "views") if p in recomputed]
    return f"{TEXT('recomputed', lang)}: {', '.join(parts)}"


# ---- figures inside widgets ----------------------------------------------------------------------------
def figure_bundle(fig: go.Figure) -> dict[str, Any]:
    """The notebook output of a figure: plotly's JSON mime bundle (rendered offline by JupyterLab)."""
    spec = json.loads(fig.to_json())
    spec["config"] = {"displaylogo": False, "responsive": True}
    title = fig.layout.title.text or "plotly figure"
    return {
        "output_type": "display_data",
        "data": {PLOTLY_MIME: spec, "text/plain": f"<Figure: {title}>"},
        "metadata": {},
    }


def figure_output(fig: go.Figure | None = None) -> widgets.Output:
    """An Output widget showing `fig` (empty if None); `set_figure` replaces what it shows."""
    out = widgets.Output(layout=widgets.Layout(width="100%"))
    if fig is not None:
        set_figure(out, fig)
    return out


def set_figure(out: widgets.Output, fig: go.Figure) -> None:
    out.outputs = (figure_bundle(fig),)


def shown_figure(out: widgets.Output) -> dict[str, Any] | None:
    """The plotly JSON (data, layout) an Output shows, or None."""
    for item in out.outputs:
        if PLOTLY_MIME in item.get("data", {}):
            return item["data"][PLOTLY_MIME]
    return None


def walk_widgets(root: widgets.Widget) -> Iterator[widgets.Widget]:
    """`root` and every widget below it (children of boxes), depth first."""
    yield root
    for child in getattr(root, "children", ()):
        yield from walk_widgets(child)


def find_widgets(root: widgets.Widget, dom_class: str) -> list[widgets.Widget]:
    """Widgets below `root` carrying the DOM class `dom_class` (the lab tags its parts "dspark-…")."""
    return [w for w in walk_widgets(root) if dom_class in getattr(w, "_dom_classes", ())]


def tagged(widget: widgets.Widget, *dom_classes: str) -> widgets.Widget:
    for c in dom_classes:
        widget.add_class(c)
    return widget


# ---- step panels ---------------------------------------------------------------------------------------
def panel_layer(state: LabState, step_id: str) -> tuple[int | None, str | None]:
    """The layer a step's panel shows for the state's layer choice, and a note when it had to fall back."""
    walk, sid = state.walk, get_step(step_id).id
    allowed = step_layers(walk, sid)
    if not allowed:
        return None, None
    if state.layer is None or state.layer in allowed:
        return resolve_layer(walk, sid, state.layer), None
    shown = default_layer(walk, sid)
    return shown, TEXT(
        "layer_fallback", state.lang, step=sid, layer=state.layer, shown=shown, allowed=", ".join(map(str, allowed))
    )


def step_view(state: LabState, step_id: str, layer: int | None) -> StepView:
    """The step's view in the state's language; 2A, 4A and 5A are rebuilt for a non-default layer."""
    sid = get_step(step_id).id
    walk = state.walk
    builders = {"2A": view_2a, "4A": view_4a, "5A": view_5a}
    if sid in builders and layer is not None and layer != default_layer(walk, sid):
        return builders[sid](walk, StepView(get_step(sid), state.lang), layer=layer)
    view = walk.views.get(sid)
    if view is None or view.lang != state.lang:
        view = build_views(walk, state.lang, (sid,)).views[sid]
    return view


def step_panel_content(state: LabState, step_id: str | None = None) -> dict[str, Any]:
    """Everything a step's panel shows, as plain data: title ("1A · …"), column, explanation, equation,
    what to look at, real scale, the view's shapes/facts/tables/checks/notes, the layer and the figures."""
    step = get_step(step_id or state.step)
    lang = state.lang
    layer, layer_note = panel_layer(state, step.id)
    view = step_view(state, step.id, layer)
    figures = step_figures(state.walk, step.id, lang, layer)
    return {
        "step": step.id,
        "lang": lang,
        "title": step.label(lang),
        "column": get_column(step.column).label(lang),
        "what": step.t("what", lang),
        "equation": equation(step, lang),
        "look_at": list(step.t("look_at", lang)),
        "real_scale": step.t("real_scale", lang),
        "shapes": [(name, list(shape)) for name, shape in view.shapes],
        "facts": list(view.facts),
        "tables": [
            {"title": t.title, "columns": list(t.columns), "rows": [list(r) for r in t.rows]} for t in view.tables
        ],
        "checks": [{"name": c.name, "value": c.value, "threshold": c.threshold, "ok": c.ok} for c in view.checks],
        "notes": list(view.notes),
        "layer": layer,
        "layers": list(step_layers(state.walk, step.id)),
        "layer_note": layer_note,
        "figure": figures[0],
        "figures": figures,
    }


def cell_text(x: Any) -> str:
    if isinstance(x, float):
        return f"{x:.4g}" if abs(x) < 1e5 else f"{x:,.0f}"
    if isinstance(x, (list, tuple)):
        return "[" + ", ".join(cell_text(y) for y in x) + "]"
    return str(x)


def table_html(table: dict[str, Any], row_class: str | list[str] = "") -> str:
    """One view table as HTML (at most MAX_TABLE_ROWS rows, then "…"); `row_class` tags every row, or each
    row with its own class when it is a list."""
    e = html.escape
    rows = table["rows"]
    shown = rows if len(rows) <= MAX_TABLE_ROWS else rows[: MAX_TABLE_ROWS - 1]
    classes = row_class if isinstance(row_class, list) else [row_class] * len(shown)
    pad = "style='padding:2px 10px;text-align:left'"
    head = "".join(f"<th {pad}>{e(str(c))}</th>" for c in table["columns"])
    cells = ["".join(f"<td {pad}>{e(cell_text(x))}</td>" for x in row) for row in shown]
    body = "".join(
        (f'<tr class="{c}">' if c else "<tr>") + tds + "</tr>" for tds, c in zip(cells, classes, strict=False)
    )
    if len(rows) > len(shown):
        body += f"<tr><td colspan='{len(table['columns'])}'>… ({len(rows)} rows)</td></tr>"
    return (
        f"<div style='margin:6px 0'><b>{e(table['title'])}</b><table class='dspark-table' "
        f"style='border-collapse:collapse;font-size:12px'><thead><tr>{head}</tr></thead>"
        f"<tbody>{body}</tbody></table></div>"
    )


def panel_html(content: dict[str, Any], part: str = "head") -> str:
    """The text of a panel: "head" (title, explanation, equation, look at) or "body" (shapes, facts,
    tables, checks, notes, real scale)."""
    e, lang = html.escape, content["lang"]
    if part == "head":
        bullets = "".join(f"<li>{e(b)}</li>" for b in content["look_at"])
        note = f"<p style='color:#b45309'>{e(content['layer_note'])}</p>" if content["layer_note"] else ""
        layer = f" · {UI('layer', lang)} {content['layer']}" if content["layer"] is not None else ""
        return (
            f"<h3 style='margin:4px 0'>{e(content['title'])}</h3>"
            f"<div style='color:#555'>{e(UI('column', lang))} {e(content['column'])}{e(layer)}</div>"
            f"<p>{e(content['what'])}</p>"
            f"<p><b>{e(UI('equation', lang))}:</b> <code>{e(content['equation'])}</code></p>"
            f"<b>{e(UI('look_at', lang))}:</b><ul>{bullets}</ul>{note}"
        )
    if part != "body":
        raise ValueError(f"part = {part!r} is invalid: allowed 'head', 'body'")
    out = []
    if content["shapes"]:
        shapes = " · ".join(f"{n} [{', '.join(map(str, s))}]" for n, s in content["shapes"])
        out.append(f"<p><b>{e(UI('shapes', lang))}:</b> <code>{e(shapes)}</code></p>")
    if content["facts"]:
        out.append(
            "<ul>" + "".join(f"<li><b>{e(str(n))}:</b> {e(cell_text(v))}</li>" for n, v in content["facts"]) + "</ul>"
        )
    out += [table_html(t) for t in content["tables"]]
    for c in content["checks"]:
        mark, colour = ("✓", "#15803d") if c["ok"] else ("✗", "#b91c1c")
        out.append(f"<div style='color:{colour}'>{mark} {e(c['name'])}: {c['value']:.3g} (≤ {c['threshold']:g})</div>")
    out += [f"<div style='color:#92400e'>ℹ {e(n)}</div>" for n in content["notes"]]
    out.append(f"<p style='color:#777'>{e(UI('real_scale', lang))}: {e(content['real_scale'])}</p>")
    return "".join(out)


def panel_widget(content: dict[str, Any]) -> widgets.VBox:
    """A step panel laid out from `step_panel_content`: text, the figures, then the numbers."""
    children = [tagged(widgets.HTML(panel_html(content, "head")), "dspark-panel-head")]
    children += [tagged(figure_output(f), "dspark-panel-figure") for f in content["figures"]]
    children.append(tagged(widgets.HTML(panel_html(content, "body")), "dspark-panel-body"))
    box = widgets.VBox(children, layout=widgets.Layout(border="1px solid #ccc", padding="8px", width="100%"))
    return tagged(box, "dspark-panel", f"dspark-panel-{content['step']}")


def step_panel(state: LabState, step_id: str | None = None) -> widgets.VBox:
    """The panel of one step (default: the state's step) as a widget."""
    return panel_widget(step_panel_content(state, step_id))


# ---- the clickable 4-column map --------------------------------------------------------------------------
def map_layout(lang: str = "en") -> dict[str, Any]:
    """The architecture map as plain data from the registry: the 4 columns left to right, each with its
    steps top to bottom in flow order (the reading order of the lesson), and the flow edges."""
    lang = check_lang(lang)

    def block(s: Step) -> dict[str, Any]:
        return {
            "id": s.id,
            "title": s.t("title", lang),
            "short": s.t("short", lang),
            "label": s.label(lang),
            "column": s.column,
            "order": s.order,
        }

    return {
        "direction": "top-to-bottom",
        "columns": [
            {"id": c.id, "label": c.label(lang), "steps": [block(s) for s in steps_in_column(c)]} for c in COLUMNS
        ],
        "flow": [{"src": e.src, "dst": e.dst, "bidirectional": e.bidirectional} for e in FLOW],
        "order": list(STEP_IDS),
    }


def flow_text(lang: str = "en") -> str:
    """ "Flow: 1A → 1B → … → 4A ↔ 6A → 5A → 6B" from the registry's edges (lesson order)."""
    parts = [STEP_IDS[0]]
    for a, b in zip(STEP_IDS, STEP_IDS[1:], strict=False):
        both = any(e.bidirectional and {e.src, e.dst} == {a, b} for e in FLOW)
        parts += ["↔" if both else "→", b]
    return f"{UI('flow', lang)}: " + " ".join(parts)


def button_label(step: Step, lang: str) -> str:
    return f"{step.id} · {step.t('title', lang)}"


def open_step(state: LabState, step_id: str) -> dict[str, Any]:
    """What a click on a map block does: make it the state's step and return its panel content."""
    state.update(step=step_id)
    return step_panel_content(state, state.step)


MAP_STYLE = (
    "<style>.dspark-map-button{white-space:normal !important;height:auto !important;"
    "min-height:44px;text-align:left;line-height:1.25;padding:6px}</style>"
)


def build_map(state: LabState, on_open: Callable[[dict[str, Any]], None] | None = None) -> widgets.GridBox:
    """The 4 columns as a grid: a header per column, then one button per step ("1A · title", tooltip = the
    step's short line, coloured by column). A click calls `open_step` and hands the content to `on_open`.
    The buttons follow the state's language and highlight its step."""
    lay = map_layout(state.lang)
    depth = max(len(c["steps"]) for c in lay["columns"])
    headers = [
        widgets.HTML((MAP_STYLE if i == 0 else "") + f"<b>{html.escape(c['label'])}</b>")
        for i, c in enumerate(lay["columns"])
    ]
    buttons: dict[str, widgets.Button] = {}
    cells: list[widgets.Widget] = list(headers)
    for row in range(depth):
        for c in lay["columns"]:
            if row >= len(c["steps"]):
                cells.append(widgets.Box())
                continue
            sid = c["steps"][row]["id"]
            btn = widgets.Button(layout=widgets.Layout(width="auto", height="auto"))
            btn.style.button_color = COLUMN_COLOURS[c["id"] - 1]
            tagged(btn, "dspark-map-button", f"dspark-step-{sid}")

            def click(_: widgets.Button, sid: str = sid) -> None:
                content = open_step(state, sid)
                if on_open is not None:
                    on_open(content)

            btn.on_click(click)
            buttons[sid] = btn
            cells.append(btn)

    def refresh(changed: set[str] | None = None, recomputed: set[str] | None = None) -> None:
        if changed is not None and not changed & {"lang", "step"}:
            return
        for sid, btn in buttons.items():
            step = get_step(sid)
            btn.description = button_label(step, state.lang)
            btn.tooltip = step.t("short", state.lang)
            current = sid == state.step
            btn.style.font_weight = "bold" if current else "normal"
            btn.layout.border = "2px solid #1f2937" if current else "1px solid #d1d5db"
        for h, col in zip(headers, COLUMNS, strict=True):
            h.value = (MAP_STYLE if col.id == 1 else "") + f"<b>{html.escape(col.label(state.lang))}</b>"

    refresh()
    state.subscribe(refresh)
    grid = widgets.GridBox(
        cells, layout=widgets.Layout(grid_template_columns=f"repeat({len(COLUMNS)}, 1fr)", grid_gap="6px", width="100%")
    )
    return tagged(grid, "dspark-map")


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
        "k": rd.drafted,  # drafted: the whole trained block
        "verify_len": rd.block,  # ℓ sent to verify (the state's `block`, a fixed policy)
        "block": state.block,
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
    scheduler table, `walkthrough.load_plan`), and ℓ at every load of the slider, as plain data."""
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
        "k": rd.drafted,
        "fixed_verify_len": rd.block,
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
    block = tagged(
        widgets.IntSlider(value=state.block, min=1, max=cfg.dspark_block_size, step=1, continuous_update=False),
        "dspark-block-slider",
    )
    temp = tagged(
        widgets.FloatSlider(
            value=state.temperature,
            min=0.0,
            max=TEMPERATURE_MAX,
            step=0.05,
            continuous_update=False,
            readout_format=".2f",
        ),
        "dspark-temperature-slider",
    )
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
        block.description, temp.description = "ℓ", UI("temperature", lang)
        load.description = UI("requests_in_flight", lang)
        block.value, temp.value = state.block, state.temperature  # no-op updates when already equal
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

    block.observe(on_slider("block", block), names="value")
    temp.observe(on_slider("temperature", temp), names="value")
    load.observe(render_load, names="value")
    render()
    state.subscribe(render)
    parts: list[widgets.Widget] = [title]
    if sliders:
        parts.append(widgets.HBox([block, temp]))
    parts += [status, logits_out, strip_out, table, load, load_view, lesson]
    return tagged(widgets.VBox(parts, layout=widgets.Layout(width="100%")), "dspark-inspector")


# ---- the whole app ---------------------------------------------------------------------------------------
class LabApp:
    """The controls, the map, the panel area and the 6B inspector around one LabState (see `lab_app`)."""

    def __init__(self, state: LabState) -> None:
        self.state = state
        self.syncing = False  # True while the app itself sets a control (its observer must not react)
        cfg = state.walk.cfg
        lay = widgets.Layout(width="auto")
        self.controls: dict[str, widgets.Widget] = {
            "prompt": widgets.Text(value=state.prompt, continuous_update=False, layout=widgets.Layout(width="60%")),
            "seed": widgets.IntText(value=state.seed, layout=widgets.Layout(width="160px")),
            "block": widgets.IntSlider(value=state.block, min=1, max=cfg.dspark_block_size, continuous_update=False),
            "temperature": widgets.FloatSlider(
                value=state.temperature,
                min=0.0,
                max=TEMPERATURE_MAX,
                step=0.05,
                continuous_update=False,
                readout_format=".2f",
            ),
            "lang": widgets.ToggleButtons(options=[("vi", "vi"), ("en", "en")], value=state.lang, layout=lay),
            "weights": widgets.Dropdown(options=self.weight_options(), value=state.weights, layout=lay),
            "layer": widgets.Dropdown(options=self.layer_options(), value=self.control_value("layer"), layout=lay),
        }
        for name, w in self.controls.items():
            tagged(w, "dspark-control", f"dspark-control-{name}")
            w.observe(self.on_control(name), names="value")
        self.status = tagged(widgets.HTML(), "dspark-status")
        self.flow = widgets.HTML()
        self.map = build_map(state, self.show)
        self.panel_area = tagged(widgets.VBox([step_panel(state)]), "dspark-panel-area")
        self.inspector = inspector_6b(state, sliders=False)
        c = self.controls
        rows = [
            widgets.HBox([c["prompt"], c["seed"]]),
            widgets.HBox([c["block"], c["temperature"]]),
            widgets.HBox([c["lang"], c["weights"], c["layer"]]),
        ]
        self.widget = tagged(
            widgets.VBox(rows + [self.status, self.flow, self.map, self.panel_area, self.inspector]), "dspark-app"
        )
        self.relabel()
        state.subscribe(self.on_state)

    def weight_options(self) -> list[tuple[str, str]]:
        lang = self.state.lang
        return [(UI(w, lang), w) for w in WEIGHTS]

    def layer_options(self) -> list[tuple[str, int | str]]:
        lang = self.state.lang
        layers = range(self.state.walk.cfg.n_layers)
        return [(TEXT("auto", lang), AUTO_LAYER)] + [(f"{UI('layer', lang)} {i}", i) for i in layers]

    def control_value(self, name: str) -> Any:
        """The state's value of `name` as its control holds it (layer None ↔ AUTO_LAYER)."""
        value = getattr(self.state, name)
        return AUTO_LAYER if name == "layer" and value is None else value

    def on_control(self, name: str) -> Callable[[dict[str, Any]], None]:
        def handler(change: dict[str, Any]) -> None:
            if not self.syncing:
                value = change["new"]
                self.apply(name, None if name == "layer" and value == AUTO_LAYER else value)

        return handler

    def apply(self, name: str, value: Any) -> set[str]:
        """Route one control change through `LabState.update`; a refused value is shown and reverted."""
        try:
            recomputed = self.state.update(**{name: value})
        except (TypeError, ValueError) as err:
            self.status.value = f"<span style='color:#b91c1c'>{html.escape(str(err))}</span>"
            self.sync()
            return set()
        done = describe_update(recomputed, self.state.lang)
        self.status.value = f"<span style='color:#555'>{html.escape(done)}</span>"
        return recomputed

    def show(self, content: dict[str, Any]) -> None:
        """Put a step's panel in the panel area (what the map's `on_open` does)."""
        self.panel_area.children = (panel_widget(content),)

    def on_state(self, changed: set[str], recomputed: set[str]) -> None:
        self.sync()
        if "lang" in changed:
            self.relabel()
        stale = recomputed & {"forward", "views"} or ("draft" in recomputed and self.state.step == "6B")
        if stale or "layer" in changed:
            self.show(step_panel_content(self.state))

    def sync(self) -> None:
        """Set every control to the state's value without triggering updates."""
        self.syncing = True
        try:
            for name, w in self.controls.items():
                if w.value != self.control_value(name):
                    w.value = self.control_value(name)
        finally:
            self.syncing = False

    def relabel(self) -> None:
        lang, c = self.state.lang, self.controls
        names = {
            "prompt": "prompt",
            "seed": "seed",
            "block": "verify_len",
            "temperature": "temperature",
            "lang": "language",
            "weights": "weights",
            "layer": "layer",
        }
        self.syncing = True
        try:
            for name, key in names.items():
                c[name].description = UI(key, lang)
                c[name].style.description_width = "initial"
            c["weights"].options, c["weights"].value = self.weight_options(), self.state.weights
            c["layer"].options, c["layer"].value = self.layer_options(), self.control_value("layer")
        finally:
            self.syncing = False
        self.flow.value = f"<i>{html.escape(flow_text(lang))}</i> — {html.escape(UI('map_hint', lang))}"


def lab_app(
    prompt: str = DEFAULT_PROMPT, lang: str = "en", seed: int = 0, state: LabState | None = None
) -> widgets.VBox:
    """The whole lab in one widget: controls (prompt, seed, verify length ℓ, temperature, language, weights, layer),
    the clickable 4-column map, the panel of the chosen step and the 6B inspector. Pass `state` to reuse a
    LabState (then `prompt`, `lang` and `seed` are ignored)."""
    return LabApp(state if state is not None else LabState(prompt, seed=seed, lang=lang)).widget


__all__ = [
    "AUTO_LAYER",
    "FIELDS",
    "WEIGHTS",
    "LabApp",
    "LabState",
    "build_map",
    "describe_update",
    "draft_table_html",
    "figure_bundle",
    "figure_output",
    "find_widgets",
    "flow_text",
    "inspector_6b",
    "inspector_6b_content",
    "lab_app",
    "load_content",
    "load_html",
    "map_layout",
    "open_step",
    "panel_html",
    "panel_layer",
    "panel_widget",
    "set_figure",
    "shown_figure",
    "step_panel",
    "step_panel_content",
    "walk_widgets",
]

"""ipywidgets for JupyterLab: the lab's state, the clickable 4-column map, step panels and the 6B inspector.

Every callback is a thin shell around a plain function that tests call directly:
  LabState.update(**changes) → what was recomputed   prompt/seed/weights → forward + draft + views,
                                                     verify_len/temperature → draft only (`redraft`),
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

from dspark_mini import get_config, get_tokenizer
from dspark_mini.validate import check_int, check_seed, check_temperature

from ..lesson.notes import equation
from ..lesson.steps import COLUMNS, FLOW, STEP_IDS, Step, get_column, get_step, steps_in_column
from ..lesson.view import StepView, Walk
from ..lesson.views import view_2a, view_4a, view_5a
from ..lesson.walk import build_views, check_verify_len, redraft, run_walk
from ..text import DEFAULT_PROMPT, UI, Texts, check_lang, lang_table
from ..text import check_prompt as prompt_check
from ..weights import check_weights
from .figures import step_figures
from .plots import default_layer, resolve_layer, step_layers

PROMPT_FIELD = "prompt"  # the field's name in a refusal: LabState.update(prompt=…) and the app's control take it

FIELDS: tuple[str, ...] = ("prompt", "seed", "verify_len", "temperature", "lang", "weights", "step", "layer")


FORWARD_FIELDS: frozenset[str] = frozenset({"prompt", "seed", "weights"})


DRAFT_FIELDS: frozenset[str] = frozenset({"verify_len", "temperature"})


TEMPERATURE_MAX = 2.0


PLOTLY_MIME = "application/vnd.plotly.v1+json"


COLUMN_COLOURS: tuple[str, ...] = ("#dbeafe", "#dcfce7", "#fef3c7", "#fce7f3")  # map columns 1..4


MAX_TABLE_ROWS = 24


AUTO_LAYER = "auto"  # the layer dropdown's value for "each step's default" (a Dropdown cannot hold None)


LOAD_STEPS: tuple[int, ...] = tuple(2**i for i in range(9))  # the load slider: 1, 2, 4, …, 256 requests in flight


TEXT = lang_table("widgets", "text")


TEXT = Texts(TEXT, "widget")


# ---- the state ---------------------------------------------------------------------------------------
Listener = Callable[[set[str], set[str]], None]  # (changed fields, recomputed parts)


class LabState:
    """What the learner chose (prompt, seed, verify_len, temperature, lang, weights, step, layer) and the Walk.
    `verify_len` is ℓ of a fixed policy (the draft always runs its whole trained block).

    `update` validates every change first (nothing is half-applied), recomputes only what the change
    needs, then tells the subscribed widgets. `runs` counts the forwards, DSpark rounds and view builds.
    """

    def __init__(
        self,
        prompt: str = DEFAULT_PROMPT,
        seed: int = 0,
        lang: str = "en",
        verify_len: int | None = None,
        temperature: float = 0.0,
        weights: str = "trained",
        step: str = "1A",
        layer: int | None = None,
    ) -> None:
        lang = check_lang(lang)
        walk = run_walk(
            check_prompt(prompt, lang),
            seed=check_seed(seed),
            lang=lang,
            verify_len=verify_len,
            temperature=check_temperature(temperature),
            weights=check_weights(weights),
            prompt_option=PROMPT_FIELD,
        )
        self._init(walk, lang, weights, step, layer, runs={"forward": 1, "draft": 1, "views": 1})

    @classmethod
    def from_walk(cls, walk: Walk, lang: str | None = None, step: str = "1A", layer: int | None = None) -> LabState:
        """A state around a Walk already computed (its prompt, seed, verify_len and temperature); views are
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
        self.verify_len, self.temperature = walk.verify_len, walk.temperature
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
        return check_int(layer, "layer", 0, n - 1, allowed=f"None (each step's default) or 0..{n - 1}")

    def check(self, name: str, value: Any) -> Any:
        """`value` validated (and normalized) for field `name`; a bad one raises ValueError (or TypeError, for a
        value of the wrong kind) naming it. Seeds and temperatures go through dspark_mini.validate, as in the CLI."""
        if name == "prompt":
            return check_prompt(value, self.lang)
        if name == "seed":
            return check_seed(value)
        if name == "verify_len":
            return check_verify_len(self.walk.cfg, value)
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
                verify_len=values["verify_len"],
                temperature=values["temperature"],
                weights=values["weights"],
                prompt_option=PROMPT_FIELD,
            )
            recomputed = {"forward", "draft", "views"}
        else:
            if changed & DRAFT_FIELDS:
                walk = redraft(walk, values["verify_len"], values["temperature"])  # the prompt's forward is reused
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
            f"LabState(prompt={self.prompt!r}, seed={self.seed}, verify_len={self.verify_len}, "
            f"temperature={self.temperature}, lang={self.lang!r}, weights={self.weights!r}, "
            f"step={self.step!r}, layer={self.layer})"
        )


def check_prompt(prompt: Any, lang: str = "en") -> str:
    """The prompt field, NFC: lab.text.check_prompt against the lab model, its refusals naming the field."""
    cfg = get_config("lab")
    return prompt_check(prompt, get_tokenizer(cfg).encode, cfg, PROMPT_FIELD, lang)[0]


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


def verify_len_slider(state: LabState, cfg: Any) -> widgets.IntSlider:
    """The ℓ slider of the app and the 6B inspector: 1 … the trained block (k), at the state's ℓ."""
    return widgets.IntSlider(value=state.verify_len, min=1, max=cfg.dspark_block_size, step=1, continuous_update=False)


def temperature_slider(state: LabState) -> widgets.FloatSlider:
    """The temperature slider of the app and the 6B inspector: 0 (greedy) … TEMPERATURE_MAX, at the state's T."""
    return widgets.FloatSlider(
        value=state.temperature,
        min=0.0,
        max=TEMPERATURE_MAX,
        step=0.05,
        continuous_update=False,
        readout_format=".2f",
    )


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

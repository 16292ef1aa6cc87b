"""The whole lab app of notebook 00 / 05: the controls (prompt, seed, ℓ, temperature, language, layer, weights), the
clickable 4-column map, the open step's panel and the 6B inspector, wired to one `LabState` so a change recomputes
only what it must (a language change only re-renders).
"""

from __future__ import annotations

import html
from collections.abc import Callable
from typing import Any

import ipywidgets as widgets

from ..text import DEFAULT_PROMPT, UI
from ..weights import WEIGHTS
from .inspector import inspector_6b
from .widgets import (
    AUTO_LAYER,
    TEXT,
    LabState,
    build_map,
    describe_update,
    flow_text,
    panel_widget,
    step_panel,
    step_panel_content,
    tagged,
    temperature_slider,
    verify_len_slider,
)


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
            "verify_len": verify_len_slider(state, cfg),
            "temperature": temperature_slider(state),
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
            widgets.HBox([c["verify_len"], c["temperature"]]),
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
            "verify_len": "verify_len",
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

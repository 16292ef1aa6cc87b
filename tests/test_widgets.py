"""The ipywidgets layer (lab/screens/widgets.py), headless: LabState recomputes only what a change needs, the
clickable map opens the right panel, the 6B inspector re-drafts (only) when its sliders move, and the app
routes every control through LabState.update. Clicks are `button.click()`, slider moves set `.value`."""

from __future__ import annotations

import dataclasses

import ipywidgets as widgets
import pytest

from lab.lesson.steps import COLUMNS, FLOW, STEP_IDS, get_step
from lab.lesson.walk import redraft, run_walk
from lab.screens import app as A
from lab.screens import inspector as I
from lab.screens import widgets as W
from lab.text import LANGS


@pytest.fixture(scope="module")
def walk():
    return run_walk(seed=0)


@pytest.fixture
def state(walk):
    return W.LabState.from_walk(walk)


def one(root: widgets.Widget, dom_class: str) -> widgets.Widget:
    found = W.find_widgets(root, dom_class)
    assert len(found) == 1, (dom_class, len(found))
    return found[0]


def strip_positions(out: widgets.Output) -> int:
    """The drafts sent to verify (ℓ) in the round the strip shows (it shows all the drafted ones)."""
    meta = W.shown_figure(out)["layout"]["meta"]
    assert meta["draft_positions"] == 5  # the whole trained block is always drafted
    return meta["verify_lens"][0]


# ---- LabState -----------------------------------------------------------------------------------------
def test_from_walk_reuses_the_walk(walk, state):
    assert state.walk is walk and state.runs == {"forward": 0, "draft": 0, "views": 0}
    assert (state.prompt, state.seed, state.verify_len, state.lang) == (
        walk.prompt,
        0,
        walk.cfg.dspark_block_size,
        "en",
    )
    vi = W.LabState.from_walk(walk, lang="vi")
    assert vi.runs["views"] == 1 and vi.walk.trace is walk.trace and vi.walk.views["1A"].lang == "vi"


def test_block_change_redrafts_only(state):
    trace, logits, views = state.walk.trace, state.walk.logits, state.walk.views
    assert state.update(verify_len=2) == {"draft"}
    assert state.walk.trace is trace and state.walk.logits is logits  # the prompt's forward was not rerun
    assert state.walk.round.verify_len == 2 and state.verify_len == 2
    assert state.walk.views["1A"] is views["1A"] and state.walk.views["6B"] is not views["6B"]
    assert state.runs == {"forward": 0, "draft": 1, "views": 0}
    assert state.update(temperature=0.8) == {"draft"} and state.walk.trace is trace
    assert state.walk.temperature == 0.8 and state.runs["draft"] == 2


def test_lang_rebuilds_views_only(state):
    trace, rnd = state.walk.trace, state.walk.round
    assert state.update(lang="vi") == {"views"}
    assert state.walk.trace is trace and state.walk.round is rnd
    assert all(v.lang == "vi" for v in state.walk.views.values()) and len(state.walk.views) == 10
    assert state.update(lang="vi", verify_len=1) == {"draft"}  # lang unchanged → only the draft
    assert state.walk.views["6B"].lang == "vi"


def test_step_and_layer_are_display_only(state):
    walk = state.walk
    assert state.update(step="3c") == set() and state.step == "3C"
    assert state.update(layer=2) == set() and state.layer == 2
    assert state.update(layer=None) == set() and state.layer is None
    assert state.walk is walk and state.runs == {"forward": 0, "draft": 0, "views": 0}


def test_prompt_and_seed_rerun_the_forward(state):
    trace = state.walk.trace
    assert state.update(seed=1, verify_len=2, lang="vi") == {"forward", "draft", "views"}
    assert state.walk.trace is not trace and state.walk.seed == 1 and state.walk.round.verify_len == 2
    assert state.walk.views["3A"].lang == "vi" and state.runs["forward"] == 1
    assert state.update(prompt="Hello world.") == {"forward", "draft", "views"}
    assert state.walk.prompt == "Hello world."
    assert state.walk.tokens[0].tolist() == state.walk.tokenizer.encode("Hello world.")


def test_no_op_changes_recompute_and_notify_nothing(state):
    calls = []
    state.subscribe(lambda changed, recomputed: calls.append((changed, recomputed)))
    assert state.update(verify_len=state.verify_len, lang="en", step="1A") == set()
    assert calls == []
    state.update(verify_len=1)
    assert calls == [({"verify_len"}, {"draft"})]


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"verify_len": 0}, r"verify_len = 0 is invalid: allowed 1..5"),
        ({"verify_len": 6}, r"verify_len = 6 is invalid"),
        ({"verify_len": "2"}, r"verify_len = '2' is invalid"),
        ({"verify_len": True}, r"verify_len = True is invalid"),
        ({"temperature": -0.1}, r"temperature = -0.1 is invalid: allowed 0 \(greedy\) or a finite number ≥ 1e-06"),
        ({"temperature": float("nan")}, r"temperature = nan is invalid"),
        ({"temperature": float("inf")}, r"temperature = inf is invalid"),
        ({"temperature": -float("inf")}, r"temperature = -inf is invalid"),
        ({"temperature": 1e-320}, r"temperature = 1e-320 is invalid"),  # would overflow logits / T
        ({"prompt": ""}, r"prompt is empty"),
        ({"prompt": "   "}, r"prompt is empty"),
        ({"seed": -1}, r"seed = -1 is invalid: allowed an integer in 0..9223372036854775807 \(0 ≤ seed < 2\*\*63\)"),
        ({"seed": 2**63}, r"seed = 9223372036854775808 is invalid"),
        ({"seed": 2**64}, r"seed = 18446744073709551616 is invalid"),  # torch: "Overflow when unpacking long"
        ({"step": "9Z"}, r"unknown step id '9Z': valid ids are 1A, 1B"),
        ({"layer": 8}, r"layer = 8 is invalid: allowed None \(each step's default\) or 0..7"),
        ({"layer": -1}, r"layer = -1 is invalid"),
        ({"lang": "fr"}, r"unknown language 'fr'"),
        ({"weights": "bogus"}, r"weights = 'bogus' is invalid: allowed 'trained', 'untrained'"),
        ({"colour": "red"}, r"unknown setting 'colour': allowed prompt, seed"),
        ({"verify_len": 2, "temperature": -1.0}, r"temperature = -1.0 is invalid"),
    ],
)
def test_bad_input_is_refused_and_nothing_changes(state, changes, message):
    walk, before = state.walk, repr(state)
    with pytest.raises(ValueError, match=message):
        state.update(**changes)
    assert state.walk is walk and repr(state) == before


@pytest.mark.parametrize(
    "changes, message",
    [
        ({"seed": True}, r"seed = True is invalid"),
        ({"seed": 1.5}, r"seed = 1.5 is invalid"),
        ({"seed": "3"}, r"seed = '3' is invalid"),
        ({"temperature": "1"}, r"temperature = '1' is invalid"),
        ({"temperature": False}, r"temperature = False is invalid"),
        ({"temperature": None}, r"temperature = None is invalid"),
    ],
)
def test_a_value_of_the_wrong_kind_is_a_type_error_and_nothing_changes(state, changes, message):
    walk, before = state.walk, repr(state)
    with pytest.raises(TypeError, match=message):
        state.update(**changes)
    assert state.walk is walk and repr(state) == before


def test_switching_weights_reruns_the_forward_and_changes_the_draft(walk):
    state = W.LabState.from_walk(walk, lang="vi")
    assert state.weights == "trained"
    assert state.update(weights="untrained") == {"forward", "draft", "views"}
    untrained = state.walk.round
    assert state.walk.weights == "untrained" and max(untrained.draft_probs) < 0.1 * max(walk.round.draft_probs)
    state.update(weights="trained")
    assert state.walk.round.draft_probs == walk.round.draft_probs  # back to the same trained numbers


def test_constructor_validates_and_is_deterministic(walk):
    with pytest.raises(ValueError, match="prompt is empty"):
        W.LabState(prompt="")
    fresh = W.LabState(seed=0, verify_len=2)
    assert fresh.runs == {"forward": 1, "draft": 1, "views": 1}
    assert fresh.walk.logits.equal(walk.logits) and fresh.walk.round.verify_len == 2
    assert fresh.walk.round == redraft(walk, 2, 0.0, views=False).round  # same seed → same numbers


# ---- panels ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("lang", LANGS)
def test_every_step_panel_content(walk, lang):
    state = W.LabState.from_walk(walk, lang=lang)
    for sid in STEP_IDS:
        content = W.step_panel_content(state, sid)
        step = get_step(sid)
        assert content["step"] == sid and sid in content["title"] and step.t("title", lang) in content["title"]
        assert content["what"] == step.t("what", lang) and content["look_at"] == list(step.t("look_at", lang))
        view = state.walk.views[sid]
        assert [t["title"] for t in content["tables"]] == [t.title for t in view.tables]
        assert content["figures"] and content["figure"] is content["figures"][0]
        assert content["layer_note"] is None and (content["layer"] is None) == (not content["layers"])


def test_panel_follows_the_layer_and_falls_back_with_a_note(state):
    state.update(layer=5)
    c5a = W.step_panel_content(state, "5A")
    assert c5a["layer"] == 5 and c5a["layer_note"] is None
    assert "layer 5" in c5a["tables"][0]["title"]  # the view is rebuilt for the chosen layer
    assert "layer 5" in c5a["figure"].layout.title.text
    c1b = W.step_panel_content(state, "1B")
    assert c1b["layer"] == 0 and "no data at layer 5" in c1b["layer_note"] and "0, 3" in c1b["layer_note"]
    assert W.step_panel_content(state, "3A")["layer"] is None


def test_step_panel_widget_shows_text_tables_and_figures(state):
    panel = W.step_panel(state, "2A")
    assert isinstance(panel, widgets.VBox) and "dspark-panel-2A" in panel._dom_classes
    assert "2A · mHC" in one(panel, "dspark-panel-head").value
    figs = W.find_widgets(panel, "dspark-panel-figure")
    assert len(figs) == 2 and all(isinstance(f, widgets.Output) for f in figs)
    shown = W.shown_figure(figs[0])
    assert shown["layout"]["template"]["layout"]["paper_bgcolor"] == "white" and len(shown["data"][0]["z"]) == 4
    body = one(panel, "dspark-panel-body").value
    assert "<table" in body and "✓" in body
    assert "http" not in str(figs[0].outputs)


# ---- the map --------------------------------------------------------------------------------------------
@pytest.mark.parametrize("lang", LANGS)
def test_map_layout_is_the_registry(lang):
    lay = W.map_layout(lang)
    assert [c["id"] for c in lay["columns"]] == [1, 2, 3, 4]
    assert [tuple(s["id"] for s in c["steps"]) for c in lay["columns"]] == [c.step_ids for c in COLUMNS]
    assert [c["label"] for c in lay["columns"]] == [c.label(lang) for c in COLUMNS]
    assert [(e["src"], e["dst"], e["bidirectional"]) for e in lay["flow"]] == [tuple(e) for e in FLOW]
    assert lay["order"] == list(STEP_IDS) and lay["direction"] == "top-to-bottom"
    assert W.flow_text(lang).endswith("1A → 1B → 2A → 3A → 3B → 3C → 4A ↔ 6A → 5A → 6B")


@pytest.mark.parametrize("lang", LANGS)
def test_clicking_each_block_opens_its_panel(walk, lang):
    state = W.LabState.from_walk(walk, lang=lang)
    runs = dict(state.runs)
    opened = []
    grid = W.build_map(state, opened.append)
    assert isinstance(grid, widgets.GridBox) and grid.layout.grid_template_columns == "repeat(4, 1fr)"
    buttons = W.find_widgets(grid, "dspark-map-button")
    assert len(buttons) == 10 and all(isinstance(b, widgets.Button) for b in buttons)
    for sid in STEP_IDS:
        btn = one(grid, f"dspark-step-{sid}")
        step = get_step(sid)
        assert btn.description == f"{sid} · {step.t('title', lang)}" and btn.tooltip == step.t("short", lang)
        btn.click()
        content = opened[-1]
        assert content["step"] == sid == state.step
        assert sid in content["title"] and step.t("title", lang) in content["title"]
        assert btn.style.font_weight == "bold"
    assert len(opened) == 10 and state.runs == runs  # opening a panel recomputes nothing


def test_map_grid_is_four_columns_coloured_by_column(state):
    grid = W.build_map(state, None)
    cells = grid.children
    assert len(cells) % 4 == 0
    for row in range(1, len(cells) // 4):
        for col in range(4):
            cell = cells[4 * row + col]
            if isinstance(cell, widgets.Button):
                assert get_step(cell.description.split(" · ")[0]).column == col + 1
                assert cell.style.button_color == W.COLUMN_COLOURS[col]
    one(grid, "dspark-step-6A").click()  # on_open may be None
    assert state.step == "6A"


def test_map_relabels_when_the_language_changes(state):
    grid = W.build_map(state, None)
    btn = one(grid, "dspark-step-1B")
    state.update(lang="vi")
    assert btn.description == f"1B · {get_step('1B').t('title', 'vi')}"
    assert "Đầu vào" in grid.children[0].value


# ---- the 6B inspector -----------------------------------------------------------------------------------
def test_inspector_block_slider_redrafts_only(state):
    box = I.inspector_6b(state)
    assert isinstance(box, widgets.VBox)
    slider = one(box, "dspark-verify-len-slider")
    assert (slider.min, slider.max, slider.value) == (1, 5, 5)
    trace = state.walk.trace
    logits_shown = one(box, "dspark-logits").outputs
    for k in (1, 2, 3, 2):
        slider.value = k
        assert state.verify_len == k and state.walk.round.verify_len == k
        assert strip_positions(one(box, "dspark-draft-strip")) == k
        assert one(box, "dspark-draft-table").value.count("dspark-draft-row") == 5  # every drafted token
        assert one(box, "dspark-draft-table").value.count("dspark-not-sent") == 5 - k
        assert state.walk.trace is trace  # the forward was not rerun
    assert state.runs["forward"] == 0 and state.runs["draft"] == 4
    assert one(box, "dspark-logits").outputs is logits_shown  # a new draft does not redraw the logits
    logits = W.shown_figure(one(box, "dspark-logits"))
    assert len(logits["data"][0]["y"]) == 10


def test_inspector_load_slider_shrinks_l_and_marks_the_drafts_sent(state):
    """ "Requests in flight" 1..256 (log steps): the ℓ the dspark scheduler would pick for this round at that load
    (this round's c stacked R times), display only — the model is not run again."""
    box = I.inspector_6b(state, sliders=False)  # the load slider stays: the app has no such control
    load, shown = one(box, "dspark-load-slider"), one(box, "dspark-load")
    assert list(load.options) == [2**i for i in range(9)] and load.value == 1
    runs = dict(state.runs)
    seen = {}
    for requests in (1, 8, 64, 256):
        load.value = requests
        content = I.load_content(state, requests)
        ell = content["verify_len"]
        seen[requests] = ell
        assert f"R = {requests} requests in flight" in shown.value and f"ℓ = {ell} of this round" in shown.value
        assert shown.value.count("dspark-load-sent") == ell
        assert shown.value.count("dspark-load-not-sent") == content["k"] - ell
        assert "stacked R times" in shown.value
    ells = [seen[r] for r in sorted(seen)]
    assert (
        all(a >= b for a, b in zip(ells[:-1], ells[1:], strict=True)) and seen[256] < seen[1]
    )  # more load, never a longer ℓ
    assert state.runs == runs  # display only
    state.update(lang="vi")
    assert "yêu cầu đang chạy" in shown.value and load.description == "Số yêu cầu đang chạy R"
    state.update(verify_len=2)  # a new round: the load view follows it (ℓ of the fixed policy in the note)
    assert "ℓ = 2 (thanh trượt ℓ)" in shown.value
    with pytest.raises(ValueError, match="requests in flight = 300 is invalid"):
        I.load_content(state, 300)


def test_inspector_temperature_slider_and_content(state):
    box = I.inspector_6b(state)
    one(box, "dspark-temperature-slider").value = 1.0
    assert state.temperature == 1.0 and state.runs == {"forward": 0, "draft": 1, "views": 0}
    content = I.inspector_6b_content(state)
    rd = state.walk.round
    assert [r["draft_prob"] for r in content["rows"]] == rd.draft_probs
    assert [r["confidence"] for r in content["rows"]] == rd.confidence
    assert [r["status"] for r in content["rows"]] == rd.status
    assert content["next_kind"] in ("resampled", "bonus") and content["tau"] == rd.n_accepted + 1
    assert content["verdict"] in one(box, "dspark-inspector-title").value.replace("&#x27;", "'")


def test_inspector_follows_state_changes_from_elsewhere(state):
    box = I.inspector_6b(state, sliders=False)
    assert not any(isinstance(w, widgets.IntSlider) for w in W.walk_widgets(box))
    state.update(verify_len=1)
    assert strip_positions(one(box, "dspark-draft-strip")) == 1
    state.update(lang="vi")
    assert "Bộ soi bước 6B" in one(box, "dspark-inspector-title").value
    assert "Token nháp" in one(box, "dspark-draft-table").value


def test_inspector_shows_what_verify_used_at_t0(state):
    box = I.inspector_6b(state)
    content, rd = I.inspector_6b_content(state), state.walk.round
    assert state.temperature == 0.0
    for i, row in enumerate(content["rows"]):
        assert row["draft_prob"] == 1.0 and row["target_prob"] == float(rd.draft[i] == rd.target_argmax[i])
        assert (row["ratio"] == 1.0) == (row["status"] == "accepted")  # min(1, p_t/p_d) from the shown numbers
        assert (row["draft_prob_t1"], row["target_prob_t1"]) == (rd.draft_probs[i], rd.target_probs[i])
    table = one(box, "dspark-draft-table").value
    assert "softmax T = 1" in table and "one-hot" in table and table.count("dspark-next-row") == 1
    lesson = one(box, "dspark-lesson-table").value
    assert "0.167" in lesson and "37, 38, 39" in lesson
    state.update(lang="vi")
    assert "Xác suất nháp p_d(x)" in one(box, "dspark-draft-table").value


def test_inspector_says_sampled_not_argmax_where_it_happens(walk):
    said = 0
    for seed in range(10):
        state = W.LabState.from_walk(redraft(dataclasses.replace(walk, seed=seed), None, 1.0))
        content, rd = I.inspector_6b_content(state), state.walk.round
        for i, row in enumerate(content["rows"]):
            differs = row["status"] == "accepted" and rd.draft[i] != rd.target_argmax[i]
            assert ("sampled, not argmax" in row["status_text"]) == differs == row["sampled_not_argmax"]
            said += differs
        nxt = content["next"]
        assert ("sampled, not argmax" in nxt["status_text"]) == (rd.next_token != rd.target_argmax[rd.n_accepted])
        said += nxt["sampled_not_argmax"]
        assert "softmax T = 1" not in I.draft_table_html(content, "en")  # at T > 0 the table holds what verify used
    assert said >= 2


# ---- the app ------------------------------------------------------------------------------------------
def test_app_controls(state):
    app = A.lab_app(state=state)
    assert isinstance(app, widgets.VBox) and "dspark-app" in app._dom_classes
    kinds = {
        "prompt": widgets.Text,
        "seed": widgets.IntText,
        "verify_len": widgets.IntSlider,
        "temperature": widgets.FloatSlider,
        "lang": widgets.ToggleButtons,
        "weights": widgets.Dropdown,
        "layer": widgets.Dropdown,
    }
    for name, kind in kinds.items():
        assert isinstance(one(app, f"dspark-control-{name}"), kind), name
    block, temp = one(app, "dspark-control-verify_len"), one(app, "dspark-control-temperature")
    assert (block.min, block.max) == (1, state.walk.cfg.dspark_block_size) and (temp.min, temp.max) == (0.0, 2.0)
    assert [v for _, v in one(app, "dspark-control-lang").options] == ["vi", "en"]
    assert [v for _, v in one(app, "dspark-control-weights").options] == ["trained", "untrained"]
    layer = one(app, "dspark-control-layer")
    assert [v for _, v in layer.options] == [W.AUTO_LAYER] + list(range(state.walk.cfg.n_layers))
    assert layer.value == W.AUTO_LAYER and layer.label == "auto"  # a real selection, not an empty dropdown
    assert len(W.find_widgets(app, "dspark-map-button")) == 10 and one(app, "dspark-inspector")


def test_app_map_click_shows_the_panel(state):
    app = A.lab_app(state=state)
    area = one(app, "dspark-panel-area")
    for sid in ("3C", "6B", "1A"):
        one(app, f"dspark-step-{sid}").click()
        assert f"dspark-panel-{sid}" in area.children[0]._dom_classes
        assert get_step(sid).label("en") in one(area, "dspark-panel-head").value.replace("&amp;", "&")


def test_app_block_control_redrafts_and_updates_the_inspector(state):
    app = A.lab_app(state=state)
    trace = state.walk.trace
    one(app, "dspark-control-verify_len").value = 1
    assert state.walk.trace is trace and state.walk.round.verify_len == 1
    assert strip_positions(one(app, "dspark-draft-strip")) == 1
    assert "DSpark round" in one(app, "dspark-status").value.split("dspark-status")[-1]


def test_app_lang_layer_and_weights(state):
    app = A.lab_app(state=state)
    one(app, "dspark-step-5A").click()
    one(app, "dspark-control-layer").value = 6
    area = one(app, "dspark-panel-area")
    assert state.layer == 6 and "layer 6" in one(area, "dspark-panel-body").value
    one(app, "dspark-control-lang").value = "vi"
    assert state.lang == "vi" and get_step("5A").t("title", "vi") in one(area, "dspark-panel-head").value
    assert one(app, "dspark-control-verify_len").description == "Độ dài verify ℓ"  # --block: the verify length
    assert one(app, "dspark-control-layer").value == 6  # relabelled options keep the choice
    one(app, "dspark-control-layer").value = W.AUTO_LAYER
    assert state.layer is None and "lớp 0" in one(area, "dspark-panel-body").value
    assert state.runs["forward"] == 0
    weights = one(app, "dspark-control-weights")
    weights.value = "untrained"
    assert state.weights == "untrained" and state.runs["forward"] == 1
    assert [label for label, _ in weights.options] == ["đã huấn luyện", "chưa huấn luyện"]


def test_app_refuses_an_empty_prompt_and_reruns_on_a_new_one(state):
    app = A.lab_app(state=state)
    prompt = one(app, "dspark-control-prompt")
    prompt.value = "   "
    assert prompt.value == state.prompt and "prompt is empty" in W.find_widgets(app, "dspark-status")[0].value
    prompt.value = "DSpark drafts, the target verifies."
    assert state.prompt == prompt.value and state.runs["forward"] == 1
    assert "prompt forward" in W.find_widgets(app, "dspark-status")[0].value


def test_app_refuses_a_seed_torch_cannot_take_and_keeps_the_old_one(state):
    app = A.lab_app(state=state)
    seed = one(app, "dspark-control-seed")
    seed.value = 2**64  # torch.Generator.manual_seed would fail with "Overflow when unpacking long"
    status = W.find_widgets(app, "dspark-status")[0].value
    assert seed.value == state.seed == 0 and "seed = 18446744073709551616 is invalid" in status
    assert "0 ≤ seed &lt; 2**63" in status and state.runs["forward"] == 0


def test_lab_app_builds_its_own_state():
    app = A.lab_app(prompt="Xin chào.", lang="vi", seed=2)
    assert "Đầu vào" in one(app, "dspark-step-1A").description
    assert one(app, "dspark-control-seed").value == 2 and one(app, "dspark-control-lang").value == "vi"


def test_figure_bundle_is_plotly_json(state):
    fig = W.step_panel_content(state, "6A")["figure"]
    bundle = W.figure_bundle(fig)
    assert set(bundle["data"]) == {W.PLOTLY_MIME, "text/plain"}
    assert bundle["data"][W.PLOTLY_MIME]["layout"]["title"]["text"] == fig.layout.title.text
    out = W.figure_output(fig)
    assert W.shown_figure(out) == bundle["data"][W.PLOTLY_MIME] and W.shown_figure(W.figure_output()) is None

"""The plotly figures (lab/screens/plots.py): each step's figure in both languages, the numbers they draw equal the
trace's, masked entries are blank, bad step ids / layers / arguments raise ValueError naming what is allowed."""

from __future__ import annotations

import dataclasses
import math
import re

import plotly.graph_objects as go
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from dspark_mini import get_config
from dspark_mini.kv_cache import kv_bytes
from dspark_mini.schedule import layer_roles
from dspark_mini.speculative import Round, acceptance_stats, generate_speculative
from lab.evaluation.profiling import reliability
from lab.lesson.steps import STEP_IDS
from lab.lesson.view_6b import verify_rows
from lab.lesson.views import sinkhorn_errors
from lab.lesson.walk import redraft, run_walk
from lab.screens import figures, plots, plots_6b
from lab.text import LANGS

NO_LAYER_STEPS = ("1A", "3A", "6A", "6B")


@pytest.fixture(scope="module")
def walk():
    return run_walk(seed=0)


def make_round(status: list[str], next_kind: str, position: int = 5) -> Round:
    k = len(status)
    n = status.count("accepted")
    return Round(
        position=position,
        anchor=10,
        draft=[20 + i for i in range(k)],
        draft_probs=[0.5] * k,
        confidence=[0.9 - 0.1 * i for i in range(k)],
        target_probs=[0.4] * k,
        target_argmax=[30 + i for i in range(k + 1)],
        status=status,
        n_accepted=n,
        next_token=40,
        next_kind=next_kind,
        committed=[20 + i for i in range(n)] + [40],
    )


# ---- every step --------------------------------------------------------------------------------------
@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("step_id", STEP_IDS)
def test_every_step_has_a_main_figure_in_both_languages(walk, step_id, lang):
    figs = figures.step_figures(walk, step_id, lang)
    assert figs and all(isinstance(f, go.Figure) for f in figs)
    main = figures.figure_for_step(walk, step_id, lang)
    assert main.to_json() == figs[0].to_json()
    for f in figs:
        assert f.layout.title.text
        assert f.layout.template.layout.paper_bgcolor == "white"  # plotly_white
        assert "http" not in f.to_json()  # no hot links
    other = figures.figure_for_step(walk, step_id, "vi" if lang == "en" else "en")
    assert other.layout.title.text != main.layout.title.text


@pytest.mark.parametrize("step_id", STEP_IDS)
def test_every_allowed_layer_draws(walk, step_id):
    allowed = plots.step_layers(walk, step_id)
    assert (allowed == ()) == (step_id in NO_LAYER_STEPS)
    for layer in allowed:
        assert isinstance(figures.figure_for_step(walk, step_id, "en", layer), go.Figure)
    if allowed:
        assert plots.default_layer(walk, step_id) in allowed


def test_default_layers_follow_the_terminal_views(walk):
    cfg = walk.cfg
    assert plots.default_layer(walk, "4A") == cfg.candidate_source_layer
    assert plots.default_layer(walk, "3C") == cfg.candidate_source_layer
    assert cfg.compress_ratios[plots.default_layer(walk, "3B")] == 2
    assert plots.default_layer(walk, "1B") == cfg.engram_layer_ids[0]
    assert plots.step_layers(walk, "1B") == tuple(cfg.engram_layer_ids)
    assert plots.step_layers(walk, "3B") == tuple(cfg.kv_source_layers)
    assert plots.step_layers(walk, "2A") == tuple(range(cfg.n_layers))


def test_bad_step_or_layer_names_what_is_allowed(walk):
    with pytest.raises(ValueError, match=r"'9Z'.*1A, 1B"):
        figures.figure_for_step(walk, "9Z")
    with pytest.raises(ValueError, match=r"layer = 2 is invalid for step 1B: allowed 0, 3"):
        figures.figure_for_step(walk, "1B", layer=2)
    with pytest.raises(ValueError, match=r"layer = 99 is invalid for step 4A: allowed 0, 1"):
        figures.figure_for_step(walk, "4A", layer=99)
    with pytest.raises(ValueError, match="step 3A takes no layer"):
        figures.figure_for_step(walk, "3A", layer=0)
    with pytest.raises(ValueError, match="invalid for step 5A"):
        plots.router(walk, layer=True)
    with pytest.raises(ValueError, match="unknown language 'fr'"):
        figures.figure_for_step(walk, "1A", "fr")
    assert figures.figure_for_step(walk, " 6b ").layout.title.text  # ids normalize like the registry's


def test_figures_are_deterministic(walk):
    again = run_walk(seed=0)
    for sid in ("1B", "3C", "6B"):
        assert figures.figure_for_step(walk, sid).to_json() == figures.figure_for_step(again, sid).to_json()


# ---- 1A, 1B, 2A ---------------------------------------------------------------------------------------
def test_1a_four_identical_lanes(walk):
    fig = plots.embedding_lanes(walk, dims=8)
    heat = [t for t in fig.data if isinstance(t, go.Heatmap)]
    assert len(heat) == walk.cfg.hc_mult
    assert all(h.z == heat[0].z for h in heat)
    assert list(heat[0].y) == plots.position_labels(walk)
    assert len(heat[0].z[0]) == 8 and "[1, 0, 0, 0]" in fig.layout.title.text
    with pytest.raises(ValueError, match="dims = 0 is invalid"):
        plots.embedding_lanes(walk, dims=0)


def test_position_labels_are_unique_and_escaped(walk):
    labels = plots.position_labels(walk)
    assert len(set(labels)) == len(labels) == walk.tokens.size(1)
    first = walk.tokenizer.token_text(int(walk.tokens[0, 0]))
    assert labels[0] == f"0·{first}" and "Xin".startswith(first)  # the default prompt starts "Xin chào"
    [newline] = walk.tokenizer.encode("\n")
    assert plots.token_text(walk.tokenizer, 0) == "&lt;bos&gt;" and plots.token_text(walk.tokenizer, newline) == "\\n"


def test_1b_engram_gates(walk):
    for layer in plots.step_layers(walk, "1B"):
        fig = plots.engram_gates(walk, layer, "vi")
        gate = walk.trace.get("1B", "gate", layer)[0]
        assert torch.tensor(fig.data[0].z, dtype=gate.dtype).equal(gate)
        assert len(fig.data[0].x) == 4 and f"lớp {layer}" in fig.layout.title.text


def test_2a_sinkhorn_convergence_matches_the_trace(walk):
    for sub in ("attn", "ffn"):
        fig = plots.sinkhorn_convergence(walk, layer=2, sublayer=sub)
        errs = sinkhorn_errors(walk.trace.get("2A", f"{sub}_comb_history", 2)[:, 0, -1])
        rows, cols = fig.data
        assert list(rows.x) == list(range(1, walk.cfg.hc_sinkhorn_iters + 1))
        assert list(rows.customdata) == [e[1] for e in errs] and list(cols.customdata) == [e[2] for e in errs]
        assert min(rows.y) > 0 and fig.layout.yaxis.type == "log"
        # the trained combs converge slowly: each iteration ends on the columns (≈ 1e-6 off: the eps), the rows are
        # still a few % off after 20 (the row error shrinks, it does not reach 1e-3)
        assert errs[-1][2] < 1e-3 and errs[-1][1] < errs[0][1]
    with pytest.raises(ValueError, match="sublayer = 'mlp' is invalid"):
        plots.sinkhorn_convergence(walk, sublayer="mlp")
    n = walk.tokens.size(1)
    with pytest.raises(ValueError, match=f"position = {n} is invalid: allowed -{n}..{n - 1}"):
        plots.sinkhorn_convergence(walk, position=n)


def test_2a_comb_heatmap_is_doubly_stochastic(walk):
    fig = plots.comb_heatmap(walk, layer=1, position=3, lang="vi")
    z = torch.tensor(fig.data[0].z, dtype=torch.float64)
    assert z.equal(walk.trace.get("2A", "attn_comb", 1)[0, 3])
    row_err = sinkhorn_errors(walk.trace.get("2A", "attn_comb_history", 1)[:, 0, 3])[-1][1]  # after the last iteration
    assert torch.allclose(z.sum(0), torch.ones_like(z[0]), atol=1e-3)  # columns: the last normalisation
    assert (z.sum(1) - 1).abs().max() <= row_err + 1e-12 and row_err < 0.1  # rows: as far as 20 iterations got
    assert fig.data[0].text[0][0] == f"{z[0, 0]:.3f}" and "vị trí 3" in fig.layout.title.text


# ---- 3A, 3B, 3C --------------------------------------------------------------------------------------
def test_3a_one_square_per_layer_toy_and_real(walk):
    fig = plots.layer_roles_chart(walk.cfg)
    lab_pts = sum(len(t.x) for t in fig.data if t.xaxis == "x")
    real_pts = sum(len(t.x) for t in fig.data if t.xaxis == "x2")
    assert lab_pts == len(layer_roles(walk.cfg)) and real_pts == len(layer_roles(get_config("flash")))
    names = {t.legendgroup for t in fig.data}
    assert {"SWA-only", "Full", "Reuse", "Reindex"} <= names
    stars = [txt for t in fig.data if t.xaxis == "x" for txt in t.text if "★" in txt]
    assert len(stars) == 1  # one candidate source


def test_3a_parts_are_named_in_the_chart_language():
    parts = {lang: {y for t in plots.layer_roles_chart(lang=lang).data for y in t.y} for lang in ("en", "vi")}
    assert parts["en"] == {"encoder", "decoder", "draft"}
    assert parts["vi"] == {"encoder (mã hóa)", "decoder (giải mã)", "bộ vẽ nháp (draft)"}  # the English word kept
    for lang, names in parts.items():
        order = plots.layer_roles_chart(lang=lang).layout.yaxis.categoryarray
        assert set(order) == names  # every square sits on a category the axis lists


def test_3b_each_raw_position_pools_into_at_most_one_entry(walk):
    for layer in plots.step_layers(walk, "3B"):
        fig = plots.compression_map(walk, layer)
        z = fig.data[0].z
        ratio = walk.cfg.compress_ratios[layer]
        assert len(z) == int(walk.trace.get("3B", "n_compressed", layer))
        for col in range(len(z[0])):
            assert sum(row[col] is not None for row in z) <= 1
        for row in z:
            assert math.isclose(sum(v for v in row if v is not None), 1.0, abs_tol=1e-9)
            assert sum(v is not None for v in row) == ratio
        S = walk.tokens.size(1)
        assert ("carry" in fig.layout.title.text) == (ratio > 1 and S % ratio > 0)


def test_3c_indexer_blank_where_invisible_picks_and_candidates(walk):
    for layer in plots.step_layers(walk, "3C"):
        fig = plots.indexer_scores(walk, layer)
        d = walk.trace.data["3C"][layer]
        scores = d["scores"][0]
        z = fig.data[0].z
        for q in range(scores.size(0)):
            for t in range(scores.size(1)):
                assert (z[q][t] is None) == (not math.isfinite(float(scores[q, t])))
        picks = next(t for t in fig.data if t.name == "picked (top-k)")
        assert len(picks.x) == int((d["topk_idxs"][0] >= 0).sum())
        labels = plots.position_labels(walk)
        assert all(z[labels.index(y)][x] is not None for x, y in zip(picks.x, picks.y, strict=True))
        pools = [t for t in fig.data if t.name == "candidate pool"]
        has_pool = "candidates" in d or "candidates_used" in d
        assert len(pools) == int(has_pool)
        if has_pool:
            mask = d.get("candidates", d.get("candidates_used"))[0]
            assert len(pools[0].x) == int(mask.sum())


# ---- 4A, 6A, 5A --------------------------------------------------------------------------------------
def test_4a_shares_stack_to_one_and_probs_skip_masked_keys(walk):
    for layer in plots.step_layers(walk, "4A"):
        fig = plots.attention_shares(walk, layer)
        bars = [t for t in fig.data if isinstance(t, go.Bar)]
        assert len(bars) == 3 and fig.layout.barmode == "stack"
        for h in range(walk.cfg.n_heads):
            assert math.isclose(sum(b.y[h] for b in bars), 1.0, abs_tol=1e-9)
        heat = next(t for t in fig.data if isinstance(t, go.Heatmap))
        assert len(heat.z) == walk.cfg.n_heads
        assert all(any(row[c] is not None for row in heat.z) for c in range(len(heat.x)))
        n_comp = sum(str(x).startswith("c") for x in heat.x)
        assert (n_comp > 0) == (walk.cfg.compress_ratios[layer] > 0)
    only_bars = plots.attention_shares(walk, show_probs=False)
    assert all(isinstance(t, go.Bar) for t in only_bars.data)


def test_6a_kv_bytes_real_scale_is_890_per_token():
    fig = plots.kv_bytes_vs_context("en", max_tokens=1_048_576)
    real_global = next(t for t in fig.data if t.xaxis == "x2" and t.legendgroup == "global_kv")
    real_window = next(t for t in fig.data if t.xaxis == "x2" and t.legendgroup == "window_kv")
    assert real_global.x[-1] == 1_048_576 and fig.layout.xaxis2.type == "log"
    assert math.isclose(real_global.customdata[-1] / 1_048_576, 890.0, rel_tol=1e-3)
    flash = get_config("flash")
    assert real_window.customdata[-1] == real_window.customdata[-2] == kv_bytes(flash)["window_per_sequence"]
    assert "890" in fig.layout.title.text
    glob, window = plots.kv_curve(get_config("lab"), [1, 2, 4])
    assert 0 < glob[0] < glob[1] <= glob[2] and window[0] < window[1]  # the ratio-1 source writes at L = 1
    with pytest.raises(ValueError, match="max_tokens = 1 is invalid"):
        plots.kv_bytes_vs_context(max_tokens=1)


def test_5a_router_marks_the_chosen_experts_and_load_counts_them(walk):
    layer = 3
    fig = plots.router(walk, layer, "vi")
    idx = walk.trace.get("5A", "indices", layer)[0]
    marks = fig.data[1]
    assert len(marks.x) == idx.numel()
    assert sorted(marks.x) == sorted(idx.flatten().tolist())
    load = plots.expert_load(walk, layer)
    assert sum(load.data[0].y) == idx.numel() and len(load.data[0].x) == walk.cfg.n_routed_experts


# ---- 6B ----------------------------------------------------------------------------------------------
def test_6b_logits_bar_top_k(walk):
    fig = plots_6b.logits_bar(walk, k=5)
    probs = walk.logits[0, -1].softmax(-1)
    top = torch.topk(probs, 5)
    assert list(fig.data[0].y) == pytest.approx(top.values.tolist())
    assert list(fig.layout.xaxis.ticktext) == [plots.token_text(walk.tokenizer, t) for t in top.indices.tolist()]
    assert list(fig.data[0].y) == sorted(fig.data[0].y, reverse=True)
    for bad in (0, walk.cfg.vocab_size + 1, 2.5):
        with pytest.raises(ValueError, match="is invalid: allowed 1.."):
            plots_6b.logits_bar(walk, k=bad)


@pytest.mark.parametrize("block", [1, 2, 3])
def test_6b_draft_strip_has_k_positions(walk, block):
    w = redraft(walk, block, 0.0, views=False)
    fig = plots_6b.draft_strip(w.round, w.tokenizer, temperature=0.0)
    heat = fig.data[0]
    k = w.round.block  # the whole trained block is drafted; the first `block` are sent to verify
    assert fig.layout.meta["draft_positions"] == k == 5 and len(heat.x) == k + 1
    assert fig.layout.meta["verify_lens"] == [block]
    codes = {k: i for i, k in enumerate(plots_6b.STRIP_KINDS)}
    assert heat.z[0][:k] == [codes[s] for s in w.round.status] and w.round.status[block:] == ["not sent"] * (k - block)
    assert heat.z[0][k] == codes[w.round.next_kind]
    marks = ["" if i < block else "○" for i in range(k)]
    assert heat.text[0][:k] == [m + plots.token_text(w.tokenizer, t) for m, t in zip(marks, w.round.draft, strict=True)]
    assert all("the target never saw this draft" in h for h in heat.hovertext[0][block:k])
    assert len(fig.layout.shapes) == 1 and fig.layout.shapes[0].x0 == block - 0.5  # the ℓ line
    assert "p_d(x)" in heat.hovertext[0][0] and "c = " in heat.hovertext[0][0]


def test_6b_draft_strip_colours_every_kind(walk):
    rounds = [
        make_round(["accepted", "accepted", "accepted"], "bonus"),
        make_round(["accepted", "rejected", "not verified"], "resampled"),
        make_round(["rejected"], "resampled", position=9),
        dataclasses.replace(  # drafts 3, verifies 1: the last 2 never reach the target
            make_round(["accepted", "not sent", "not sent"], "bonus"), verify_len=1, target_probs=[0.4]
        ),
    ]
    fig = plots_6b.draft_strip(rounds, walk.tokenizer, "vi", temperature=1.0)  # kept drafts ≠ argmax: sampled
    z = fig.data[0].z
    codes = {k: i for i, k in enumerate(plots_6b.STRIP_KINDS)}
    assert z[0] == [codes["accepted"]] * 3 + [codes["bonus"]]
    assert z[1] == [codes["accepted"], codes["rejected"], codes["not verified"], codes["resampled"]]
    assert z[2] == [codes["rejected"], None, None, codes["resampled"]]
    assert z[3] == [codes["accepted"], codes["not sent"], codes["not sent"], codes["bonus"]]
    assert fig.layout.meta == {"draft_positions": 3, "verify_lens": [3, 3, 1, 1], "rounds": 4, "temperature": 1.0}
    assert "được giữ (lấy mẫu, không phải argmax)" in fig.data[0].hovertext[0][0]
    assert "thay token nháp d2" in fig.data[0].hovertext[1][3]
    legend = {"được giữ", "bị từ chối", "không xét", "không gửi đi verify", "lấy mẫu lại", "token thưởng"}
    assert {t.name for t in fig.data[1:]} == legend
    for bad in ([], [1, 2], "round"):
        with pytest.raises(ValueError, match="needs a Round"):
            plots_6b.draft_strip(bad, walk.tokenizer, temperature=0.0)
    for bad_t in (float("nan"), -1.0, 1e-320):
        with pytest.raises(ValueError, match="temperature = .* is invalid"):
            plots_6b.draft_strip(rounds, walk.tokenizer, temperature=bad_t)


HOVER_NUMBERS = re.compile(r"p_d\(x\) = ([^ ]+) · p_t\(x\) = ([^ ]+) · min\(1, p_t/p_d\) = ([^ ]+) \(")


def hover_numbers(hover: str) -> tuple[float, float, str]:
    """(p_d, p_t, ratio) from the hover's first numbers line: the ones verify used."""
    p_d, p_t, ratio = HOVER_NUMBERS.search(hover).groups()
    return float(p_d), float(p_t), ratio


def test_6b_draft_strip_hover_at_t0_shows_the_one_hot_numbers_verify_used(walk):
    greedy = dataclasses.replace(  # a greedy round: d1 is the target's argmax (kept), d2 is not (rejected)
        make_round(["accepted", "rejected", "not verified"], "resampled"), target_argmax=[20, 31, 32, 33]
    )
    real = redraft(walk, None, 0.0, views=False)
    for rd in (greedy, real.round):
        hovers = plots_6b.draft_strip(rd, walk.tokenizer, temperature=0.0).data[0].hovertext[0][: rd.verify_len]
        for i, hover in enumerate(hovers):
            p_d, p_t, ratio = hover_numbers(hover)
            one_hot = float(rd.draft[i] == rd.target_argmax[i])
            assert (p_d, p_t) == (1.0, one_hot)  # not the softmax T = 1 values rd.draft_probs / rd.target_probs
            assert ratio == ("—" if rd.status[i] == "not verified" else f"{one_hot:g}")
            assert "(one-hot, T = 0: what verify used)" in hover
            soft = f"softmax T = 1 (not used by verify): p_d(x) = {rd.draft_probs[i]:.4f} · p_t(x) = "
            assert soft + f"{rd.target_probs[i]:.4f}" in hover  # the softened numbers, labelled apart
        if rd is greedy:
            assert [hover_numbers(h)[:2] for h in hovers] == [(1.0, 1.0), (1.0, 0.0), (1.0, 0.0)]
        else:  # the same numbers as the 6B table (which reads the draft's argmax from its logits)
            assert [hover_numbers(h)[:2] for h in hovers] == [(row["p_d"], row["p_t"]) for row in verify_rows(real)]


def test_6b_draft_strip_hover_at_t1_shows_the_softmax_verify_used(walk):
    w = redraft(walk, None, 1.0, views=False)
    fig = plots_6b.draft_strip(w.round, w.tokenizer, "vi", temperature=1.0)
    for i, hover in enumerate(fig.data[0].hovertext[0][: w.round.verify_len]):
        p_d, p_t, _ = hover_numbers(hover)
        assert p_d == float(f"{w.round.draft_probs[i]:.4g}") and p_t == float(f"{w.round.target_probs[i]:.4g}")
        assert "softmax(logits / T), T = 1: số verify đã dùng" in hover and "verify không dùng" not in hover


def test_6b_acceptance_by_position_from_real_rounds(walk):
    res = generate_speculative(walk.model, walk.tokens, 8, seed=0)
    rounds = [r[0] for r in res.rounds]
    stats = acceptance_stats(rounds)
    fig = plots_6b.acceptance_by_position(stats, "en")
    cond, cum, conf, pd = fig.data
    assert list(cond.y) == [p["cond_accept"] for p in stats["per_position"]]
    assert list(cum.y) == [p["cum_accept"] for p in stats["per_position"]]
    assert list(conf.y) == [p["mean_confidence"] for p in stats["per_position"]]
    assert str(stats["rounds"]) in fig.layout.title.text
    strip = plots_6b.draft_strip(rounds, walk.tokenizer, temperature=0.0)
    assert strip.layout.meta["rounds"] == len(rounds)
    with pytest.raises(ValueError, match="acceptance_stats"):
        plots_6b.acceptance_by_position({"rounds": 3})


def test_6b_verify_cost_curve_p50_with_p95_error_bars():
    from lab.evaluation.profiling import profile

    report = profile(prompts=2, new_tokens=4, reps=2, cache_len=12)
    fig = plots_6b.verify_cost_curve(report, "vi")
    ks = sorted(report["verify_cost"], key=int)
    verify, decodes = fig.data
    assert list(verify.x) == [int(k) for k in ks]
    for trace, key in ((verify, "verify_s"), (decodes, "k_decodes_s")):
        p50 = [report["verify_cost"][k][key]["p50"] * 1e3 for k in ks]
        p95 = [report["verify_cost"][k][key]["p95"] * 1e3 for k in ks]
        assert list(trace.y) == pytest.approx(p50)
        assert list(trace.error_y.array) == pytest.approx([b - a for a, b in zip(p50, p95, strict=True)])
    assert "threads" in fig.layout.title.text
    assert plots_6b.verify_cost_curve(report["verify_cost"]).data[0].y == verify.y  # the part alone works too
    with pytest.raises(ValueError, match="profile"):
        plots_6b.verify_cost_curve({"verify_cost": {}})


def test_reliability_diagram_and_ece():
    rounds = [
        make_round(["accepted", "rejected", "not verified"], "resampled"),
        make_round(["rejected", "not verified", "not verified"], "resampled"),
    ]
    rel = reliability(rounds, n_bins=10)
    # reached points: (0.9, kept), (0.8, not kept), (0.9, not kept) → bins 0.8: 0/1, 0.9: 1/2
    assert rel["points"] == 3
    assert [(b["n"], b["observed"]) for b in rel["bins"]] == [(1, 0.0), (2, 0.5)]
    assert rel["ece"] == pytest.approx((0.8 + 2 * 0.4) / 3)
    fig = plots_6b.reliability_diagram(rounds, "en", n_bins=10)
    assert "ECE = 0.533" in fig.layout.title.text
    with pytest.raises(ValueError, match="source = 'x' is invalid"):
        reliability(rounds, source="x")


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.tuples(st.integers(1, 3), st.integers(0, 3), st.floats(0, 1)), min_size=1, max_size=12),
    st.integers(1, 8),
)
def test_reliability_bins_cover_every_point(specs, n_bins):
    rounds = []
    for k, n, c in specs:
        n = min(n, k)
        status = ["accepted"] * n + (["rejected"] if n < k else []) + ["not verified"] * (k - n - 1)
        r = make_round(status, "bonus" if n == k else "resampled")
        r.confidence = [c] * k
        rounds.append(r)
    rel = reliability(rounds, n_bins)
    assert sum(b["n"] for b in rel["bins"]) == rel["points"] == sum(min(r.n_accepted + 1, r.verify_len) for r in rounds)
    assert 0.0 <= rel["ece"] <= 1.0
    assert all(b["lo"] <= b["predicted"] <= b["hi"] for b in rel["bins"])


def test_figure_texts_exist_in_both_languages():
    for key, by_lang in plots.TEXT.items():
        assert set(by_lang) == set(LANGS) and all(by_lang.values()), key

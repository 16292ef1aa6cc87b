"""Plotly figures of the ten steps and of step 6B's inspection (LAB_SPEC §6 "Plots").

Every function reads what `walkthrough.run_walk` (or `profiling.profile`, `speculative.acceptance_stats`)
already computed and returns a `plotly.graph_objects.Figure`: no model is run here, nothing is fetched
(no hot links, no kaleido), and titles and axes follow `lang` ("vi" or "en"). `figure_for_step` gives the
main figure of each step and `step_figures` all of its figures, main first.

A few conventions hold throughout: positions are labelled "p·token" (unique, so categorical axes never
merge two tokens), matrices are drawn with row 0 on top, blank cells are masked entries (−inf scores,
probabilities that are exactly 0), and the template is `plotly_white`.
"""

from __future__ import annotations

import html
import math
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

from dspark_mini import get_config
from dspark_mini.config import ModelConfig
from dspark_mini.kv_cache import kv_bytes
from dspark_mini.schedule import LayerRole, layer_roles
from dspark_mini.speculative import ACCEPTED, BONUS, NOT_SENT, NOT_VERIFIED, REJECTED, RESAMPLED, Round
from dspark_mini.tokenizer import LabTokenizer
from dspark_mini.validate import check_temperature

from ..evaluation.profiling import reliability
from ..text import UI, Texts, check_lang, verify_label
from .steps import STEP_IDS, get_step
from .view import Walk
from .view_6b import round_verify_rows
from .view_6b import status_text as row_status  # "accepted (sampled, not argmax)"
from .views import role_name, sinkhorn_errors

TEMPLATE = "plotly_white"
SUBLAYERS: tuple[str, ...] = ("attn", "ffn")
LOG_FLOOR = 1e-18  # an exact 0 cannot sit on a log axis: drawn at this floor instead

# Colours of the draft strip, light enough for black token text inside the cells.
STRIP_KINDS: tuple[str, ...] = (ACCEPTED, REJECTED, NOT_VERIFIED, NOT_SENT, RESAMPLED, BONUS)
STRIP_COLOURS: Mapping[str, str] = MappingProxyType(
    {
        ACCEPTED: "#8fd19e",
        REJECTED: "#f4a3a3",
        NOT_VERIFIED: "#e0e0e0",
        NOT_SENT: "#f7f7f7",  # near-white: drafted, never shown to the target (the cell text also starts with ○)
        RESAMPLED: "#ffe066",
        BONUS: "#9cc3f0",
    }
)
ROLE_COLOURS: Mapping[str, str] = MappingProxyType(
    {
        "SWA-only": "#bdbdbd",
        "Full": "#1f4e99",
        "Reindex": "#ff7f0e",
        "Reuse": "#7fb3e6",
        "Draft (SWA)": "#9467bd",
    }
)

# Figure texts that the shared UI table (`steps.UI`) does not hold.
TEXT = {
    "sinkhorn": {
        "vi": "Hội tụ Sinkhorn của comb — lớp {layer}, {sub}, vị trí {pos}",
        "en": "Sinkhorn convergence of comb — layer {layer}, {sub}, position {pos}",
    },
    "max_err": {"vi": "sai lệch lớn nhất so với 1", "en": "max deviation from 1"},
    "comb": {
        "vi": "comb 4×4 (từ làn i → làn j) — lớp {layer}, {sub}, vị trí {pos}",
        "en": "comb 4×4 (from lane i → to lane j) — layer {layer}, {sub}, position {pos}",
    },
    "from_lane": {"vi": "từ làn i", "en": "from lane i"},
    "to_lane": {"vi": "đến làn j", "en": "to lane j"},
    "lanes": {
        "vi": "4 làn giống hệt nhau: {dims} chiều đầu của mỗi làn · pre₀ = {pre}",
        "en": "4 identical lanes: first {dims} dims of each lane · pre₀ = {pre}",
    },
    "dim": {"vi": "chiều", "en": "dim"},
    "engram": {"vi": "Cổng Engram của từng làn — lớp {layer}", "en": "Engram gate per lane — layer {layer}"},
    "roles": {
        "vi": "Vai trò các lớp (E = Engram · T = lớp đích DSpark · ★ = nguồn ứng viên)",
        "en": "Layer roles (E = Engram · T = DSpark tap · ★ = candidate source)",
    },
    "compressor": {
        "vi": "Nén — lớp {layer} (tỉ lệ {ratio}): token gốc → mục nén, được đọc bởi lớp {readers}",
        "en": "Compression — layer {layer} (ratio {ratio}): raw tokens → compressed entries, read by layers {readers}",
    },
    "carry": {"vi": "chờ (carry): vị trí {pos}", "en": "carry (waiting): positions {pos}"},
    "entry": {"vi": "mục nén", "en": "compressed entry"},
    "indexer": {
        "vi": "Điểm indexer — lớp {layer} ({role}); ô trống = không nhìn thấy",
        "en": "Indexer scores — layer {layer} ({role}); blank = not visible",
    },
    "query": {"vi": "truy vấn (vị trí)", "en": "query (position)"},
    "pick": {"vi": "được chọn (top-k)", "en": "picked (top-k)"},
    "candidate": {"vi": "nhóm ứng viên", "en": "candidate pool"},
    "shares": {
        "vi": "Attention của token cuối theo đầu — lớp {layer}",
        "en": "Last token's attention by head — layer {layer}",
    },
    "probs": {
        "vi": "xác suất theo key (w = cửa sổ, c = nén)",
        "en": "probability per key (w = window, c = compressed)",
    },
    "share": {"vi": "tỉ phần", "en": "share"},
    "window": {"vi": "cửa sổ", "en": "window"},
    "compressed": {"vi": "KV nén", "en": "compressed"},
    "sink": {"vi": "sink", "en": "sink"},
    "head": {"vi": "đầu", "en": "head"},
    "key": {"vi": "key", "en": "key"},
    "kv": {
        "vi": "Byte KV theo độ dài ngữ cảnh (KV toàn cục thật: {real:g} B/token)",
        "en": "KV bytes vs context length (real global KV: {real:g} B/token)",
    },
    "context": {"vi": "độ dài ngữ cảnh (token)", "en": "context length (tokens)"},
    "bytes": {"vi": "byte mỗi chuỗi", "en": "bytes per sequence"},
    "global_kv": {"vi": "KV toàn cục (nén + index)", "en": "global KV (compressed + index)"},
    "window_kv": {"vi": "cửa sổ FP8 (cố định)", "en": "FP8 window (constant)"},
    "router": {
        "vi": "Điểm router (√softplus) — lớp {layer}; ◆ = expert được chọn",
        "en": "Router scores (√softplus) — layer {layer}; ◆ = chosen experts",
    },
    "load": {"vi": "Tải expert trên prompt — lớp {layer}", "en": "Expert load over the prompt — layer {layer}"},
    "tokens_routed": {"vi": "số token", "en": "tokens routed"},
    "topk": {
        "vi": "Top-{k} token ở vị trí cuối (logits [B, V] → softmax)",
        "en": "Top-{k} tokens at the last position (logits [B, V] → softmax)",
    },
    "uniform": {"vi": "đều 1/V", "en": "uniform 1/V"},
    "strip": {
        "vi": "Token nháp d1..dk và kết quả verify<br>(○ = không gửi đi verify, sau vạch ℓ); ô cuối: token của "
        "forward thật",
        "en": "Draft tokens d1..dk and what verify did<br>(○ = not sent to verify, past the ℓ line); last cell: "
        "the target's own token",
    },
    "not_sent": {
        "vi": "sau ℓ = {l}: forward thật không hề thấy token này, nên không có p_t(x) hay tỉ lệ",
        "en": "past ℓ = {l}: the target never saw this draft, so it has no p_t(x) and no ratio",
    },
    "after_anchor": {"vi": "ℓ = 0: chỉ verify ô anchor", "en": "ℓ = 0: only the anchor slot verified"},
    "round": {
        "vi": "vòng {i} · vị trí {pos}<br>anchor '{anchor}'",
        "en": "round {i} · pos {pos}<br>anchor '{anchor}'",
    },
    "target_col": {"vi": "forward thật", "en": "target"},
    "replaces": {"vi": "thay token nháp d{i}", "en": "replaces draft d{i}"},
    "after": {"vi": "sau d{k}", "en": "after d{k}"},
    "argmax": {"vi": "argmax của forward thật", "en": "target argmax"},
    "used_t0": {"vi": "one-hot, T = 0: số verify đã dùng", "en": "one-hot, T = 0: what verify used"},
    "used_t": {
        "vi": "softmax(logits / T), T = {t}: số verify đã dùng",
        "en": "softmax(logits / T), T = {t}: what verify used",
    },
    "soft": {"vi": "softmax T = 1 (verify không dùng)", "en": "softmax T = 1 (not used by verify)"},
    "acceptance": {
        "vi": "Tỉ lệ giữ theo vị trí, chỉ trên các token nháp đã gửi đi verify ({n} vòng, τ trung bình = {tau:.2f})",
        "en": "Acceptance by position, over the drafts sent to verify only ({n} rounds, mean τ = {tau:.2f})",
    },
    "cond": {"vi": "có điều kiện (đã tới vị trí)", "en": "conditional (position reached)"},
    "cum": {"vi": "tích lũy (trên mọi vòng)", "en": "cumulative (over all rounds)"},
    "mean_c": {"vi": "đầu tin cậy c trung bình", "en": "mean confidence c"},
    "mean_pd": {"vi": "p_d(x) trung bình", "en": "mean draft probability p_d(x)"},
    "draft_pos": {"vi": "vị trí nháp", "en": "draft position"},
    "rate": {"vi": "tỉ lệ", "en": "rate"},
    "verify": {
        "vi": "Chi phí verify: một lượt qua k + 1 hàng vs k bước giải mã<br><sup>{cond}</sup>",
        "en": "Verify cost: one pass over k + 1 rows vs k decode steps<br><sup>{cond}</sup>",
    },
    "one_verify": {"vi": "1 lượt verify (p50, thanh lỗi tới p95)", "en": "one verify (p50, error bar to p95)"},
    "k_decodes": {"vi": "k bước giải mã (p50, thanh lỗi tới p95)", "en": "k decode steps (p50, error bar to p95)"},
    "ms": {"vi": "thời gian (ms)", "en": "time (ms)"},
    "block_k": {"vi": "số token nháp k", "en": "draft tokens k"},
    "reliability": {
        "vi": "Biểu đồ tin cậy: {src} dự đoán vs tỉ lệ giữ thật (ECE = {ece:.3f}, {n} điểm)",
        "en": "Reliability: predicted {src} vs observed acceptance (ECE = {ece:.3f}, {n} points)",
    },
    "predicted": {"vi": "giá trị dự đoán (trung bình mỗi ngăn)", "en": "predicted (bin mean)"},
    "observed": {"vi": "tỉ lệ giữ thật", "en": "observed acceptance"},
    "ideal": {"vi": "hiệu chuẩn hoàn hảo", "en": "perfect calibration"},
}
TEXT = Texts(TEXT, "figure")


# ---- small helpers ---------------------------------------------------------------------------------
def token_text(tokenizer: LabTokenizer, token_id: int) -> str:
    """A token's text for a figure: escapes as `repr` shows them, `<bos>` safe from plotly's HTML."""
    return html.escape(repr(tokenizer.token_text(int(token_id)))[1:-1], quote=False)


def position_labels(walk: Walk) -> list[str]:
    """ "p·token" for every prompt position: unique, so a categorical axis never merges two tokens."""
    return [f"{p}·{token_text(walk.tokenizer, t)}" for p, t in enumerate(walk.tokens[0].tolist())]


def finish(fig: go.Figure, title: str, height: int | None = None, **layout: Any) -> go.Figure:
    """The common look: white template, a left-aligned title, tight margins."""
    layout.setdefault("margin", {"l": 70, "r": 30, "t": 70, "b": 50})
    fig.update_layout(
        template=TEMPLATE, title={"text": title, "x": 0.01, "xanchor": "left", "font": {"size": 15}}, **layout
    )
    if height is not None:
        fig.update_layout(height=height)
    return fig


def rows_height(n_rows: int, per_row: int = 24, extra: int = 160, lo: int = 300) -> int:
    return max(lo, per_row * n_rows + extra)


def none_if(values: list[list[float]], bad: Any) -> list[list[float | None]]:
    """Replace cells for which `bad(x)` holds with None (drawn blank)."""
    return [[None if bad(x) else x for x in row] for row in values]


def backbone_layers(walk: Walk, trace_step: str) -> tuple[int, ...]:
    return tuple(l for l in walk.trace.layers(trace_step) if l < walk.cfg.n_layers)


def role_of(cfg: ModelConfig, layer: int) -> LayerRole:
    return next(r for r in layer_roles(cfg) if r.layer == layer)


def check_position(walk: Walk, position: int) -> int:
    S = walk.tokens.size(1)
    if isinstance(position, bool) or not isinstance(position, int) or not -S <= position < S:
        raise ValueError(f"position = {position!r} is invalid: allowed {-S}..{S - 1} (the prompt has {S} tokens)")
    return position % S


def check_sublayer(sublayer: str) -> str:
    if sublayer not in SUBLAYERS:
        raise ValueError(f"sublayer = {sublayer!r} is invalid: allowed {', '.join(map(repr, SUBLAYERS))}")
    return sublayer


# ---- which layers each step can show -----------------------------------------------------------------
LAYER_SOURCES: Mapping[str, str] = MappingProxyType(
    {"1B": "1B", "2A": "2A", "3B": "3B", "3C": "3C", "4A": "4A", "5A": "5A"}
)


def step_layers(walk: Walk, step_id: str) -> tuple[int, ...]:
    """Backbone layers whose data step `step_id` can show (empty: the step takes no layer)."""
    sid = get_step(step_id).id
    return backbone_layers(walk, LAYER_SOURCES[sid]) if sid in LAYER_SOURCES else ()


def default_layer(walk: Walk, step_id: str) -> int | None:
    """The layer a step shows when none is chosen (the one its terminal view shows)."""
    sid = get_step(step_id).id
    allowed = step_layers(walk, sid)
    if not allowed:
        return None
    cfg = walk.cfg
    if sid in ("3C", "4A") and cfg.candidate_source_layer in allowed:
        return cfg.candidate_source_layer
    if sid == "3B":
        return next((l for l in allowed if cfg.compress_ratios[l] > 1), allowed[0])
    return allowed[0]


def resolve_layer(walk: Walk, step_id: str, layer: int | None) -> int | None:
    """`layer` checked against `step_layers` (None → `default_layer`); a bad one raises ValueError naming it."""
    sid = get_step(step_id).id
    allowed = step_layers(walk, sid)
    if not allowed:
        if layer is not None:
            raise ValueError(f"step {sid} takes no layer (got layer = {layer!r}): pass layer=None")
        return None
    if layer is None:
        return default_layer(walk, sid)
    if isinstance(layer, bool) or not isinstance(layer, int) or layer not in allowed:
        raise ValueError(f"layer = {layer!r} is invalid for step {sid}: allowed {', '.join(map(str, allowed))}")
    return layer


# ---- 1A · embedding → 4 lanes ----------------------------------------------------------------------
def embedding_lanes(walk: Walk, lang: str = "en", dims: int = 16) -> go.Figure:
    """Step 1A: the first `dims` dimensions of each of the 4 lanes [S, 4, D] — four identical blocks."""
    streams = walk.trace.get("1A", "streams")[0]  # [S, hc, D]
    pre = walk.trace.get("1A", "pre_mix")[0, 0].tolist()
    hc, D = streams.size(1), streams.size(2)
    if isinstance(dims, bool) or not isinstance(dims, int) or not 1 <= dims <= D:
        raise ValueError(f"dims = {dims!r} is invalid: allowed 1..{D}")
    ys = position_labels(walk)
    lim = float(streams[..., :dims].abs().max())
    fig = make_subplots(
        rows=1,
        cols=hc,
        shared_yaxes=True,
        horizontal_spacing=0.02,
        subplot_titles=[f"{UI('lane', lang)} {j}" for j in range(hc)],
    )
    for j in range(hc):
        fig.add_trace(
            go.Heatmap(
                z=streams[:, j, :dims].tolist(),
                x=list(range(dims)),
                y=ys,
                colorscale="RdBu",
                zmid=0,
                zmin=-lim,
                zmax=lim,
                showscale=j == hc - 1,
                hovertemplate=f"{UI('lane', lang)} {j}<br>%{{y}}<br>{TEXT('dim', lang)} %{{x}}: "
                "%{z:.3f}<extra></extra>",
            ),
            row=1,
            col=j + 1,
        )
        fig.update_xaxes(title_text=TEXT("dim", lang), row=1, col=j + 1)
    fig.update_yaxes(autorange="reversed", row=1, col=1)
    pre_txt = "[" + ", ".join(f"{x:g}" for x in pre) + "]"
    return finish(fig, TEXT("lanes", lang, dims=dims, pre=pre_txt), rows_height(len(ys)))


# ---- 1B · Engram -----------------------------------------------------------------------------------
def engram_gates(walk: Walk, layer: int | None = None, lang: str = "en") -> go.Figure:
    """Step 1B: the gate g ∈ (0, 1) of every position (rows) on each of the 4 lanes (columns)."""
    layer = resolve_layer(walk, "1B", layer)
    gate = walk.trace.get("1B", "gate", layer)[0]  # [S, hc]
    ys = position_labels(walk)
    xs = [f"{UI('lane', lang)} {j}" for j in range(gate.size(1))]
    fig = go.Figure(
        go.Heatmap(
            z=gate.tolist(),
            x=xs,
            y=ys,
            colorscale="Viridis",
            zmin=0,
            zmax=1,
            text=[[f"{g:.2f}" for g in row] for row in gate.tolist()],
            texttemplate="%{text}",
            colorbar={"title": UI("gate", lang)},
            hovertemplate="%{y} · %{x}: %{z:.3f}<extra></extra>",
        )
    )
    fig.update_yaxes(autorange="reversed", title_text=UI("position", lang))
    return finish(fig, TEXT("engram", lang, layer=layer), rows_height(len(ys)))


# ---- 2A · mHC --------------------------------------------------------------------------------------
def sinkhorn_convergence(
    walk: Walk, layer: int = 0, sublayer: str = "attn", lang: str = "en", position: int = -1
) -> go.Figure:
    """Step 2A: max |row sum − 1| and max |column sum − 1| of comb after each Sinkhorn iteration (log y)."""
    layer = resolve_layer(walk, "2A", layer)
    sub = check_sublayer(sublayer)
    pos = check_position(walk, position)
    hist = walk.trace.get("2A", f"{sub}_comb_history", layer)[:, 0, pos]  # [iters, hc, hc]
    errs = sinkhorn_errors(hist)
    its = [i for i, _, _ in errs]
    fig = go.Figure()
    for idx, key, dash in ((1, "row_sum", "solid"), (2, "col_sum", "dash")):
        vals = [e[idx] for e in errs]
        fig.add_trace(
            go.Scatter(
                x=its,
                y=[max(v, LOG_FLOOR) for v in vals],
                mode="lines+markers",
                name=f"max |{UI(key, lang)} − 1|",
                line={"dash": dash},
                customdata=vals,
                hovertemplate=f"{UI('iteration', lang)} %{{x}}: %{{customdata:.2e}}<extra></extra>",
            )
        )
    fig.update_xaxes(title_text=UI("iteration", lang), dtick=2)
    fig.update_yaxes(type="log", title_text=TEXT("max_err", lang), exponentformat="power")
    return finish(fig, TEXT("sinkhorn", lang, layer=layer, sub=sub, pos=pos), 380)


def comb_heatmap(walk: Walk, layer: int = 0, sublayer: str = "attn", position: int = -1, lang: str = "en") -> go.Figure:
    """Step 2A: the 4×4 comb matrix (from lane i → to lane j) at one position, values written in the cells."""
    layer = resolve_layer(walk, "2A", layer)
    sub = check_sublayer(sublayer)
    pos = check_position(walk, position)
    c = walk.trace.get("2A", f"{sub}_comb", layer)[0, pos].tolist()  # [hc, hc]
    n = len(c)
    fig = go.Figure(
        go.Heatmap(
            z=c,
            x=[f"→ {j}" for j in range(n)],
            y=[f"{i} →" for i in range(n)],
            colorscale="Blues",
            zmin=0,
            zmax=1,
            text=[[f"{x:.3f}" for x in row] for row in c],
            texttemplate="%{text}",
            hovertemplate="%{y} %{x}: %{z:.4f}<extra></extra>",
        )
    )
    fig.update_yaxes(autorange="reversed", title_text=TEXT("from_lane", lang))
    fig.update_xaxes(title_text=TEXT("to_lane", lang), side="top")
    return finish(
        fig,
        TEXT("comb", lang, layer=layer, sub=sub, pos=pos),
        440,
        width=620,
        margin={"l": 70, "r": 30, "t": 110, "b": 30},
    )


# ---- 3A · layer roles ------------------------------------------------------------------------------
def layer_roles_chart(cfg: ModelConfig | None = None, lang: str = "en") -> go.Figure:
    """Step 3A: one square per layer coloured by its role, the lab model (`cfg`) above the real one (flash)."""
    presets = [(UI("toy", lang), cfg or get_config("lab")), (UI("real", lang), get_config("flash"))]
    fig = make_subplots(rows=2, cols=1, vertical_spacing=0.28, subplot_titles=[name for name, _ in presets])
    names = {"SWA-only": "role_swa_only", "Full": "role_full", "Reuse": "role_reuse", "Reindex": "role_reindex"}
    shown: set[str] = set()
    for row, (_, c) in enumerate(presets, start=1):
        roles = layer_roles(c)
        for mode, colour in ROLE_COLOURS.items():
            sel = [r for r in roles if r.mode == mode]
            if not sel:
                continue
            marks = [
                ("E" if r.has_engram else "") + ("T" if r.is_tap else "") + ("★" if r.is_candidate_source else "")
                for r in sel
            ]
            hover = [
                f"{UI('layer', lang)} {r.layer} · {r.part} · {UI('ratio', lang)} {r.ratio}<br>"
                f"{UI('reads_kv_of', lang)}: {r.reads_kv_of} · {UI('reads_topk_of', lang)}: {r.reads_topk_of}"
                f"<br>RoPE {r.rope}"
                for r in sel
            ]
            label = UI(names[mode], lang) if mode in names else mode
            fig.add_trace(
                go.Scatter(
                    x=[r.layer for r in sel],
                    y=[r.part for r in sel],
                    mode="markers+text",
                    marker={
                        "symbol": "square",
                        "size": 22 if row == 1 else 13,
                        "color": colour,
                        "line": {"width": 1, "color": "#444"},
                    },
                    text=marks,
                    textposition="top center",
                    textfont={"size": 10},
                    name=label,
                    legendgroup=mode,
                    showlegend=mode not in shown,
                    hovertext=hover,
                    hovertemplate="%{hovertext}<extra>" + label + "</extra>",
                ),
                row=row,
                col=1,
            )
            shown.add(mode)
        fig.add_vline(x=c.n_encoder_layers - 0.5, line={"dash": "dot", "color": "#666"}, row=row, col=1)
        fig.update_xaxes(title_text=UI("layer", lang), dtick=1 if row == 1 else 2, row=row, col=1)
        fig.update_yaxes(
            categoryorder="array", categoryarray=["draft", "decoder", "encoder"], range=[-0.6, 2.8], row=row, col=1
        )
    return finish(fig, TEXT("roles", lang), 520, legend={"orientation": "h", "y": -0.18})


# ---- 3B · compressor -------------------------------------------------------------------------------
def compression_map(walk: Walk, layer: int | None = None, lang: str = "en") -> go.Figure:
    """Step 3B: which raw positions (columns) are pooled into which compressed entry (rows), with the gate weight.

    Ratio 2: each entry pools two neighbours with softmax gates (mean over channels shown); ratio 1: one
    entry per token (weight 1). Positions of the unfinished group (the carry) have no entry yet.
    """
    layer = resolve_layer(walk, "3B", layer)
    cfg, S = walk.cfg, walk.tokens.size(1)
    ratio = cfg.compress_ratios[layer]
    n = int(walk.trace.get("3B", "n_compressed", layer))
    starts = walk.trace.get("3B", "group_positions", layer).tolist()
    z: list[list[float | None]] = [[None] * S for _ in range(n)]
    if ratio > 1:
        gate = walk.trace.get("3B", "gate", layer)[0].mean(-1)  # [n, ratio]
        for j, s in enumerate(starts[:n]):
            for i in range(ratio):
                z[j][s + i] = float(gate[j, i])
    else:
        for j, s in enumerate(starts[:n]):
            z[j][s] = 1.0
    xs = position_labels(walk)
    ys = [f"c{j}" for j in range(n)]
    readers = [r.layer for r in layer_roles(cfg) if r.reads_kv_of == layer]
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=xs,
            y=ys,
            colorscale="Oranges",
            zmin=0,
            zmax=1,
            text=[["" if v is None else f"{v:.2f}" for v in row] for row in z],
            texttemplate="%{text}",
            colorbar={"title": UI("gate", lang)},
            hovertemplate="%{y} ← %{x}: %{z:.3f}<extra></extra>",
        )
    )
    carry = list(range(n * max(ratio, 1), S)) if ratio > 1 else []
    title = TEXT("compressor", lang, layer=layer, ratio=ratio, readers=", ".join(map(str, readers)) or "—")
    if carry:
        title += " · " + TEXT("carry", lang, pos=", ".join(map(str, carry)))
    fig.update_yaxes(autorange="reversed", title_text=TEXT("entry", lang))
    fig.update_xaxes(title_text=UI("position", lang), tickangle=-45)
    return finish(fig, title, rows_height(n, 26, 220))


# ---- 3C · indexer ----------------------------------------------------------------------------------
def indexer_scores(walk: Walk, layer: int | None = None, lang: str = "en") -> go.Figure:
    """Step 3C: index scores [queries × compressed positions] (−inf blank), top-k picks (×) and the candidate
    pool (open squares: the pool a candidate source publishes, or the one a Reindex layer is masked to)."""
    layer = resolve_layer(walk, "3C", layer)
    cfg = walk.cfg
    data = walk.trace.data["3C"][layer]
    scores = data["scores"][0]  # [S, T]
    idxs = data["topk_idxs"][0]  # [S, k], −1 = nothing
    S, T = scores.shape
    ys = position_labels(walk)
    ratio = cfg.compress_ratios[layer]
    xs = list(range(T))
    z = none_if(scores.tolist(), lambda x: not math.isfinite(x))
    hover = [[f"{ys[q]} → c{t} (raw {t * ratio}..{t * ratio + ratio - 1})" for t in xs] for q in range(S)]
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=xs,
            y=ys,
            colorscale="RdBu",
            zmid=0,
            hovertext=hover,
            name=UI("score", lang),
            colorbar={"title": UI("score", lang)},
            hovertemplate="%{hovertext}: %{z:.3f}<extra></extra>",
        )
    )
    cand = data.get("candidates", data.get("candidates_used"))
    if cand is not None:
        qs, ts = torch.nonzero(cand[0], as_tuple=True)
        fig.add_trace(
            go.Scatter(
                x=ts.tolist(),
                y=[ys[q] for q in qs.tolist()],
                mode="markers",
                name=TEXT("candidate", lang),
                hoverinfo="skip",
                marker={"symbol": "square-open", "size": 16, "color": "#2ca02c", "line": {"width": 1.5}},
            )
        )
    pq = [(q, int(t)) for q in range(S) for t in idxs[q].tolist() if t >= 0]
    fig.add_trace(
        go.Scatter(
            x=[t for _, t in pq],
            y=[ys[q] for q, _ in pq],
            mode="markers",
            name=TEXT("pick", lang),
            marker={"symbol": "diamond", "size": 9, "color": "#111"},  # ◆ = chosen, as 5A's experts (✗ = rejected)
            hovertemplate="%{y} → c%{x}<extra>top-k</extra>",
        )
    )
    fig.update_yaxes(autorange="reversed", title_text=TEXT("query", lang))
    fig.update_xaxes(title_text=UI("compressed_position", lang), dtick=1)
    role = role_name(role_of(cfg, layer), lang)
    return finish(
        fig, TEXT("indexer", lang, layer=layer, role=role), rows_height(S), legend={"orientation": "h", "y": -0.12}
    )


# ---- 4A · attention --------------------------------------------------------------------------------
def attention_shares(walk: Walk, layer: int | None = None, lang: str = "en", show_probs: bool = True) -> go.Figure:
    """Step 4A: per head, the last query's attention split into window / compressed / sink (stacked bars),
    and beside it the probability of every key it can see (w = window position, c = compressed entry)."""
    layer = resolve_layer(walk, "4A", layer)
    d = walk.trace.data["4A"][layer]
    H = d["probs"].size(2)
    heads = [f"{TEXT('head', lang)} {h}" for h in range(H)]
    parts = [
        ("window", "window_share", "#4c78a8"),
        ("compressed", "compressed_share", "#f58518"),
        ("sink", "sink_share", "#9d9d9d"),
    ]
    fig = (
        make_subplots(
            rows=1,
            cols=2,
            column_widths=[0.32, 0.68],
            horizontal_spacing=0.1,
            subplot_titles=[TEXT("share", lang), TEXT("probs", lang)],
        )
        if show_probs
        else go.Figure()
    )
    where = {"row": 1, "col": 1} if show_probs else {}
    for key, name, colour in parts:
        vals = d[name][0, -1].tolist()
        fig.add_trace(
            go.Bar(
                x=heads,
                y=vals,
                name=TEXT(key, lang),
                marker_color=colour,
                text=[f"{v:.2f}" for v in vals],
                textposition="inside",
                hovertemplate="%{x}: %{y:.3f}<extra>" + TEXT(key, lang) + "</extra>",
            ),
            **where,
        )
    fig.update_layout(barmode="stack")
    fig.update_yaxes(range=[0, 1], title_text=TEXT("share", lang), **where)
    if show_probs:
        probs = d["probs"][0, -1]  # [H, T]
        n_window = int(d["n_window_keys"])
        kpos = d["window_key_pos"].tolist()
        keep = [t for t in range(probs.size(1)) if float(probs[:, t].abs().max()) > 0]
        labels = [
            f"w{kpos[t]}·{token_text(walk.tokenizer, walk.tokens[0, kpos[t]])}"
            if t < n_window and kpos[t] >= 0
            else f"w{t}"
            if t < n_window
            else f"c{t - n_window}"
            for t in keep
        ]
        z = none_if(probs[:, keep].tolist(), lambda x: x == 0)
        fig.add_trace(
            go.Heatmap(
                z=z,
                x=labels,
                y=heads,
                colorscale="Purples",
                zmin=0,
                colorbar={"thickness": 10, "len": 0.8},
                hovertemplate="%{y} → %{x}: %{z:.3f}<extra></extra>",
            ),
            row=1,
            col=2,
        )
        fig.update_yaxes(autorange="reversed", row=1, col=2)
        fig.update_xaxes(tickangle=-45, title_text=TEXT("key", lang), row=1, col=2)
    return finish(
        fig, TEXT("shares", lang, layer=layer), 420, legend={"orientation": "h", "y": -0.3, "traceorder": "normal"}
    )


# ---- 6A · KV bytes ---------------------------------------------------------------------------------
def kv_curve(cfg: ModelConfig, lengths: Sequence[int]) -> tuple[list[float], list[float]]:
    """Global KV bytes (compressed + index entries actually written: ⌊L / ratio⌋ per source) and FP8 window
    bytes (every layer's ring, full once L ≥ window) of one sequence of each length L."""
    b = kv_bytes(cfg)
    per_entry = b["compressed_entry"] + b["index_entry"]
    ratios = [cfg.compress_ratios[s] for s in cfg.kv_source_layers]
    n_window_layers = cfg.n_layers + cfg.n_mtp_layers
    glob = [float(sum(L // r for r in ratios) * per_entry) for L in lengths]
    window = [float(n_window_layers * min(L, cfg.window_size) * b["window_entry"]) for L in lengths]
    return glob, window


def kv_bytes_vs_context(lang: str = "en", max_tokens: int = 1_048_576) -> go.Figure:
    """Step 6A: KV bytes of one sequence vs context length (log–log), the lab model and the real one side by
    side: the global KV grows with L (890 B/token at real scale), the window rings stay constant."""
    lang = check_lang(lang)
    if isinstance(max_tokens, bool) or not isinstance(max_tokens, int) or max_tokens < 2:
        raise ValueError(f"max_tokens = {max_tokens!r} is invalid: allowed an integer ≥ 2")
    lengths = sorted({2**i for i in range(max_tokens.bit_length()) if 2**i <= max_tokens} | {max_tokens})
    presets = [(UI("toy", lang), get_config("lab")), (UI("real", lang), get_config("flash"))]
    fig = make_subplots(rows=1, cols=2, subplot_titles=[name for name, _ in presets], horizontal_spacing=0.12)
    for col, (_, cfg) in enumerate(presets, start=1):
        glob, window = kv_curve(cfg, lengths)
        for vals, key, colour in ((glob, "global_kv", "#d62728"), (window, "window_kv", "#1f77b4")):
            fig.add_trace(
                go.Scatter(
                    x=lengths,
                    y=[max(v, 1.0) for v in vals],
                    mode="lines+markers",
                    name=TEXT(key, lang),
                    line={"color": colour},
                    legendgroup=key,
                    showlegend=col == 1,
                    customdata=vals,
                    hovertemplate="L = %{x:,}: %{customdata:,.0f} B<extra></extra>",
                ),
                row=1,
                col=col,
            )
        fig.update_xaxes(type="log", title_text=TEXT("context", lang), row=1, col=col)
        fig.update_yaxes(
            type="log",
            exponentformat="SI",
            ticksuffix="B",
            title_text=TEXT("bytes", lang) if col == 1 else None,
            row=1,
            col=col,
        )
    real = kv_bytes(get_config("flash"))["global_per_token"]
    return finish(fig, TEXT("kv", lang, real=round(real, 2)), 420, legend={"orientation": "h", "y": -0.25})


# ---- 5A · MoE --------------------------------------------------------------------------------------
def router(walk: Walk, layer: int = 0, lang: str = "en") -> go.Figure:
    """Step 5A: router scores [tokens × experts] with the chosen experts of each token marked (◆)."""
    layer = resolve_layer(walk, "5A", layer)
    d = walk.trace.data["5A"][layer]
    scores, idx = d["scores"][0], d["indices"][0]  # [S, E], [S, k]
    ys = position_labels(walk)
    xs = list(range(scores.size(1)))
    fig = go.Figure(
        go.Heatmap(
            z=scores.tolist(),
            x=xs,
            y=ys,
            colorscale="YlGnBu",
            colorbar={"title": UI("score", lang)},
            hovertemplate="%{y} · expert %{x}: %{z:.3f}<extra></extra>",
        )
    )
    chosen = [(q, int(e)) for q in range(idx.size(0)) for e in idx[q].tolist()]
    fig.add_trace(
        go.Scatter(
            x=[e for _, e in chosen],
            y=[ys[q] for q, _ in chosen],
            mode="markers",
            name=UI("expert", lang),
            showlegend=False,
            marker={"symbol": "diamond", "size": 10, "color": "#d62728", "line": {"width": 1, "color": "white"}},
            hovertemplate="%{y} → expert %{x}<extra></extra>",
        )
    )
    fig.update_yaxes(autorange="reversed", title_text=UI("position", lang))
    fig.update_xaxes(title_text=UI("expert", lang), dtick=1)
    return finish(fig, TEXT("router", lang, layer=layer), rows_height(len(ys)))


def expert_load(walk: Walk, layer: int = 0, lang: str = "en") -> go.Figure:
    """Step 5A: how many prompt tokens each expert received at `layer`."""
    layer = resolve_layer(walk, "5A", layer)
    load = walk.trace.get("5A", "load", layer).tolist()
    fig = go.Figure(
        go.Bar(
            x=list(range(len(load))),
            y=load,
            marker_color="#4c78a8",
            text=load,
            textposition="outside",
            hovertemplate="expert %{x}: %{y}<extra></extra>",
        )
    )
    fig.update_xaxes(title_text=UI("expert", lang), dtick=1)
    fig.update_yaxes(title_text=TEXT("tokens_routed", lang), rangemode="tozero")
    return finish(fig, TEXT("load", lang, layer=layer), 340)


# ---- 6B · head, draft, verify ----------------------------------------------------------------------
def logits_bar(walk: Walk, k: int = 10, lang: str = "en") -> go.Figure:
    """Step 6B: the top-k tokens of the last position's logits, as probability bars (dotted line: 1/V)."""
    logits = walk.logits[0, -1]
    V = logits.numel()
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= V:
        raise ValueError(f"k = {k!r} is invalid: allowed 1..{V}")
    probs = logits.softmax(-1)
    top = torch.topk(logits, k)
    ids = top.indices.tolist()
    texts = [token_text(walk.tokenizer, t) for t in ids]
    fig = go.Figure(
        go.Bar(
            x=list(range(k)),
            y=[float(probs[t]) for t in ids],
            marker_color="#4c78a8",
            customdata=[[t, float(lv)] for t, lv in zip(ids, top.values.tolist(), strict=True)],
            text=[f"{float(probs[t]):.3f}" for t in ids],
            textposition="outside",
            hovertext=texts,
            hovertemplate="%{hovertext} (id %{customdata[0]}): p = %{y:.4f}, logit %{customdata[1]:.3f}<extra></extra>",
            showlegend=False,
        )
    )
    fig.add_hline(y=1.0 / V, line={"dash": "dot", "color": "#888"})  # named in the legend, not over a bar's value
    fig.add_trace(
        go.Scatter(x=[None], y=[None], mode="lines", line={"dash": "dot", "color": "#888"}, name=TEXT("uniform", lang))
    )
    fig.update_xaxes(tickvals=list(range(k)), ticktext=texts, title_text=UI("token", lang))
    fig.update_yaxes(title_text=UI("probability", lang), rangemode="tozero")
    legend = {"orientation": "h", "x": 1, "xanchor": "right", "y": 1.02, "yanchor": "bottom"}
    return finish(fig, TEXT("topk", lang, k=k), 380, showlegend=True, legend=legend)


def draft_strip(
    round_or_rounds: Round | Sequence[Round], tokenizer: LabTokenizer, lang: str = "en", *, temperature: float
) -> go.Figure:
    """Step 6B: one row per round, one cell per drafted position d1..dk coloured by what verify did (accepted /
    rejected / not verified; past the round's verify length ℓ, not sent — a dashed line marks ℓ, and the cell
    text starts with ○), then the target's own token (resampled / bonus).

    The hover shows the numbers verify used at the rounds' `temperature` (`round_verify_rows`): at T = 0 the
    one-hot values, p_d(x) = 1 and p_t(x) ∈ {0, 1}, with the softmax T = 1 values on a separate, labelled line;
    at T > 0 softmax(logits / T). Then min(1, p_t/p_d), c and the target's argmax.
    `fig.layout.meta` holds {"draft_positions": k_max (drafted), "verify_lens": [ℓ per round], "rounds": n,
    "temperature": T} for readers that check it.
    """
    lang = check_lang(lang)
    temperature = check_temperature(temperature)
    rounds = [round_or_rounds] if isinstance(round_or_rounds, Round) else list(round_or_rounds)
    if not rounds or not all(isinstance(r, Round) for r in rounds):
        raise ValueError("draft_strip needs a Round or a non-empty sequence of Rounds")
    k = max(r.drafted for r in rounds)
    code = {kind: i for i, kind in enumerate(STRIP_KINDS)}
    xs = [f"d{i + 1}" for i in range(k)] + [TEXT("target_col", lang)]
    ys = [
        TEXT("round", lang, i=n + 1, pos=r.position, anchor=token_text(tokenizer, r.anchor))
        for n, r in enumerate(rounds)
    ]
    status_text = {kind: verify_label(kind, lang) for kind in STRIP_KINDS}
    used = TEXT("used_t0", lang) if temperature == 0 else TEXT("used_t", lang, t=f"{temperature:g}")
    z, text, hover = [], [], []
    for r in rounds:
        zr: list[int | None] = [None] * (k + 1)
        tx, hv = [""] * (k + 1), [""] * (k + 1)
        for i, row in enumerate(round_verify_rows(r, temperature)):
            zr[i], tx[i] = code[row["status"]], token_text(tokenizer, row["token"])
            if not row["sent"]:
                tx[i] = "○" + tx[i]
                hv[i] = (
                    f"d{i + 1} = '{tx[i][1:]}' · {row_status(row, lang)}<br>{TEXT('not_sent', lang, l=r.block)}<br>"
                    f"p_d(x) = {row['p_d']:.4g} · c = {row['confidence']:.3f}"
                )
                continue
            ratio = "—" if row["ratio"] is None else f"{row['ratio']:.4g}"
            hv[i] = (
                f"d{i + 1} = '{tx[i]}' · {row_status(row, lang)}<br>"
                f"p_d(x) = {row['p_d']:.4g} · p_t(x) = {row['p_t']:.4g} · min(1, p_t/p_d) = {ratio} ({used})<br>"
            )
            if row["soft_p_d"] is not None:
                hv[i] += f"{TEXT('soft', lang)}: p_d(x) = {row['soft_p_d']:.4f} · p_t(x) = {row['soft_p_t']:.4f}<br>"
            hv[i] += (
                f"c = {row['confidence']:.3f} · {TEXT('argmax', lang)}: '{token_text(tokenizer, row['target_argmax'])}'"
            )
        if r.next_kind == RESAMPLED:
            where = TEXT("replaces", lang, i=r.n_accepted + 1)
        else:
            where = TEXT("after", lang, k=r.block) if r.block else TEXT("after_anchor", lang)
        zr[k], tx[k] = code[r.next_kind], token_text(tokenizer, r.next_token)
        nxt = {"status": r.next_kind, "sampled_not_argmax": r.next_token != r.target_argmax[r.n_accepted]}
        hv[k] = f"'{tx[k]}' · {row_status(nxt, lang)} ({where}) · τ = {r.tau}"
        z.append(zr)
        text.append(tx)
        hover.append(hv)
    n = len(STRIP_KINDS)
    scale = [[edge, STRIP_COLOURS[kind]] for i, kind in enumerate(STRIP_KINDS) for edge in (i / n, (i + 1) / n)]
    fig = go.Figure(
        go.Heatmap(
            z=z,
            x=xs,
            y=ys,
            text=text,
            hovertext=hover,
            texttemplate="%{text}",
            textfont={"size": 14},
            colorscale=scale,
            zmin=-0.5,
            zmax=n - 0.5,
            showscale=False,
            xgap=3,
            ygap=3,
            hovertemplate="%{hovertext}<extra></extra>",
        )
    )
    for kind in STRIP_KINDS:  # legend entries for the colours
        fig.add_trace(
            go.Scatter(
                x=[None],
                y=[None],
                mode="markers",
                name=status_text[kind],
                marker={"symbol": "square", "size": 12, "color": STRIP_COLOURS[kind]},
            )
        )
    for n_round, r in enumerate(rounds):  # the verify length ℓ: a dashed line after the last draft sent
        if r.block < r.drafted:
            x = r.block - 0.5
            fig.add_shape(
                type="line", x0=x, x1=x, y0=n_round - 0.5, y1=n_round + 0.5, line={"dash": "dash", "color": "#333"}
            )
    fig.update_yaxes(autorange="reversed")
    fig.update_xaxes(side="top", title_text=TEXT("draft_pos", lang))
    meta = {"draft_positions": k, "verify_lens": [r.block for r in rounds], "rounds": len(rounds)}
    fig.update_layout(meta={**meta, "temperature": temperature})
    return finish(
        fig,
        TEXT("strip", lang),
        rows_height(len(rounds), 56, 260, 320),
        legend={"orientation": "h", "y": -0.02, "yanchor": "top"},  # below the cells, not over them
        margin={"l": 130, "r": 30, "t": 150, "b": 70},  # a two-line title above the top axis
    )


def acceptance_by_position(stats: Mapping[str, Any], lang: str = "en") -> go.Figure:
    """Step 6B: conditional and cumulative acceptance per draft position (bars), mean confidence c and mean
    draft probability p_d(x) beside them (lines) — from `speculative.acceptance_stats(rounds)`, which counts a
    position only in the rounds that sent it to verify (a draft past ℓ is neither accepted nor rejected)."""
    lang = check_lang(lang)
    if not isinstance(stats, Mapping) or "per_position" not in stats:
        raise ValueError("stats must be the dict of dspark_mini.speculative.acceptance_stats(rounds)")
    per = stats["per_position"]
    xs = [p["position"] for p in per]
    fig = go.Figure()
    for key, name, colour in (("cond_accept", "cond", "#54a24b"), ("cum_accept", "cum", "#4c78a8")):
        vals = [p[key] for p in per]
        fig.add_trace(
            go.Bar(
                x=xs,
                y=vals,
                name=TEXT(name, lang),
                marker_color=colour,
                text=["—" if v is None else f"{v:.2f}" for v in vals],
                textposition="outside",
            )
        )
    for key, name, dash in (("mean_confidence", "mean_c", "solid"), ("mean_draft_prob", "mean_pd", "dot")):
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=[p.get(key) for p in per],
                mode="lines+markers",
                name=TEXT(name, lang),
                line={"color": "#e45756", "dash": dash},
            )
        )
    fig.update_layout(barmode="group")
    fig.update_xaxes(title_text=TEXT("draft_pos", lang), dtick=1)
    fig.update_yaxes(title_text=TEXT("rate", lang), range=[0, 1.1])
    title = TEXT("acceptance", lang, n=stats.get("rounds", 0), tau=stats.get("mean_accepted_length", 0.0))
    return finish(fig, title, 380, legend={"orientation": "h", "y": -0.25})


def reliability_diagram(
    rounds: Sequence[Round], lang: str = "en", n_bins: int = 5, source: str = "confidence"
) -> go.Figure:
    """Step 6B: does the confidence head predict survival? Observed acceptance per bin of predicted c
    (marker size = points in the bin) against the diagonal of perfect calibration; ECE in the title."""
    lang = check_lang(lang)
    rel = reliability(rounds, n_bins, source)
    bins = rel["bins"]
    fig = go.Figure(
        go.Scatter(x=[0, 1], y=[0, 1], mode="lines", name=TEXT("ideal", lang), line={"dash": "dot", "color": "#888"})
    )
    fig.add_trace(
        go.Scatter(
            x=[b["predicted"] for b in bins],
            y=[b["observed"] for b in bins],
            mode="lines+markers",
            name=TEXT("observed", lang),
            customdata=[b["n"] for b in bins],
            marker={"size": [8 + 4 * math.sqrt(b["n"]) for b in bins], "color": "#e45756"},
            hovertemplate="%{x:.3f} → %{y:.3f} (n = %{customdata})<extra></extra>",
        )
    )
    fig.update_xaxes(range=[0, 1], title_text=TEXT("predicted", lang))
    fig.update_yaxes(range=[0, 1.05], title_text=TEXT("observed", lang))
    src = "c" if source == "confidence" else "p_d(x)"
    return finish(fig, TEXT("reliability", lang, src=src, ece=rel["ece"], n=rel["points"]), 400)


def verify_cost_curve(report: Mapping[str, Any], lang: str = "en") -> go.Figure:
    """Step 6B: p50 time of one verify over k + 1 rows vs k single-token decodes, against k; error bars
    reach p95. `report` is `profiling.profile()` (or its "verify_cost" part)."""
    lang = check_lang(lang)
    cost = report.get("verify_cost", report) if isinstance(report, Mapping) else None
    if (
        not isinstance(cost, Mapping)
        or not cost
        or not all(isinstance(v, Mapping) and "verify_s" in v and "k_decodes_s" in v for v in cost.values())
    ):
        raise ValueError(
            "report must be lab.evaluation.profiling.profile()'s dict (or its 'verify_cost' part: "
            "{k: {'verify_s': {...}, 'k_decodes_s': {...}}})"
        )
    ks = sorted(cost, key=int)
    fig = go.Figure()
    for key, name, colour in (("verify_s", "one_verify", "#54a24b"), ("k_decodes_s", "k_decodes", "#e45756")):
        p50 = [cost[k][key]["p50"] * 1e3 for k in ks]
        p95 = [cost[k][key]["p95"] * 1e3 for k in ks]
        up = [b - a for a, b in zip(p50, p95, strict=True)]
        fig.add_trace(
            go.Scatter(
                x=[int(k) for k in ks],
                y=p50,
                mode="lines+markers",
                name=TEXT(name, lang),
                line={"color": colour},
                error_y={"type": "data", "symmetric": False, "array": up, "arrayminus": [0.0] * len(ks)},
                hovertemplate="k = %{x}: p50 %{y:.3f} ms<extra></extra>",
            )
        )
    c = report.get("conditions", {}) if isinstance(report, Mapping) else {}
    cond = ", ".join(f"{k} {c[k]}" for k in ("device", "dtype", "threads", "cache_length", "torch") if k in c) or "—"
    fig.update_xaxes(title_text=TEXT("block_k", lang), dtick=1)
    fig.update_yaxes(title_text=TEXT("ms", lang), rangemode="tozero")
    return finish(fig, TEXT("verify", lang, cond=cond), 380, legend={"orientation": "h", "y": -0.25})


# ---- one figure per step -----------------------------------------------------------------------------
def step_figures(walk: Walk, step_id: str, lang: str = "en", layer: int | None = None) -> list[go.Figure]:
    """All figures of a step, main first (2A: comb then Sinkhorn convergence; 5A: router then load;
    6B: logits then the draft strip). A bad step id or layer raises ValueError naming what is allowed."""
    sid = get_step(step_id).id
    lang = check_lang(lang)
    layer = resolve_layer(walk, sid, layer)
    if sid == "1A":
        return [embedding_lanes(walk, lang)]
    if sid == "1B":
        return [engram_gates(walk, layer, lang)]
    if sid == "2A":
        return [comb_heatmap(walk, layer, "attn", -1, lang), sinkhorn_convergence(walk, layer, "attn", lang)]
    if sid == "3A":
        return [layer_roles_chart(walk.cfg, lang)]
    if sid == "3B":
        return [compression_map(walk, layer, lang)]
    if sid == "3C":
        return [indexer_scores(walk, layer, lang)]
    if sid == "4A":
        return [attention_shares(walk, layer, lang)]
    if sid == "6A":
        return [kv_bytes_vs_context(lang)]
    if sid == "5A":
        return [router(walk, layer, lang), expert_load(walk, layer, lang)]
    if sid == "6B":
        figs = [logits_bar(walk, 10, lang)]
        if walk.round is not None:
            figs.append(draft_strip(walk.round, walk.tokenizer, lang, temperature=walk.temperature))
        return figs
    raise ValueError(f"step {sid} has no figure: allowed {', '.join(STEP_IDS)}")  # unreachable while STEPS has 10


def figure_for_step(walk: Walk, step_id: str, lang: str = "en", layer: int | None = None) -> go.Figure:
    """The main figure of a step (see `step_figures`)."""
    return step_figures(walk, step_id, lang, layer)[0]


__all__ = [
    "acceptance_by_position",
    "attention_shares",
    "comb_heatmap",
    "compression_map",
    "default_layer",
    "draft_strip",
    "embedding_lanes",
    "engram_gates",
    "expert_load",
    "figure_for_step",
    "indexer_scores",
    "kv_bytes_vs_context",
    "kv_curve",
    "layer_roles_chart",
    "logits_bar",
    "position_labels",
    "reliability",
    "reliability_diagram",
    "resolve_layer",
    "router",
    "sinkhorn_convergence",
    "step_figures",
    "step_layers",
    "token_text",
    "verify_cost_curve",
]


# ---- training and the mini DeepSpec comparison (notebook 07) -----------------------------------------
# These read the report that `dspark-lab train all` writes (lab/weights/report.json, `lab.weights.report()`):
# `target` (its validation curve), `drafters[name]["quality"][domain]` (τ and acceptance at T = 1 "t1" and
# greedy, the threshold sweep, tokens/s), `drafters[name]["train"]["sts"]` (STS on its fit rounds),
# `drafters[name]["heldout_calibration"]` (the same ECE on the evaluation's rounds) and `conditions`.
DRAFTER_NAMES: Mapping[str, str] = MappingProxyType(
    {"dspark": "DSpark", "dspark-rnn": "DSpark-RNN", "dflash": "DFlash", "eagle3": "Eagle3", "mtp1": "MTP-1"}
)
DRAFTER_COLOURS: Mapping[str, str] = MappingProxyType(
    {"dspark": "#e45756", "dspark-rnn": "#f58518", "dflash": "#4c78a8", "eagle3": "#54a24b", "mtp1": "#9d9d9d"}
)
TEMPERATURE_LABELS: tuple[str, ...] = ("t1", "greedy")

_TRAINING_TEXT: Mapping[str, Mapping[str, str]] = {
    "dom_math": {"vi": "toán", "en": "math"},
    "dom_code": {"vi": "mã", "en": "code"},
    "dom_chat": {"vi": "trò chuyện", "en": "chat"},
    "dom_mean": {"vi": "trung bình", "en": "mean"},
    "temp_t1": {"vi": "T = 1", "en": "T = 1"},
    "temp_greedy": {"vi": "greedy (T = 0)", "en": "greedy (T = 0)"},
    "target_title": {
        "vi": "Huấn luyện mô hình mục tiêu: loss và độ chính xác trên tập kiểm định ({steps} bước, {seconds})",
        "en": "Training the target: validation loss and accuracy ({steps} steps, {seconds})",
    },
    "step": {"vi": "bước huấn luyện", "en": "training step"},
    "val_loss": {"vi": "loss kiểm định", "en": "validation loss"},
    "val_acc": {"vi": "độ chính xác kiểm định", "en": "validation accuracy"},
    "tau_title": {
        "vi": "Độ dài được giữ τ mỗi vòng (kể cả token của mô hình mục tiêu) — Bảng 1 thu nhỏ",
        "en": "Accepted length τ per round (the target's own token included) — Table 1 in miniature",
    },
    "tau_ratio": {
        "vi": "DSpark ÷ DFlash: {t1:.2f} (T = 1), {greedy:.2f} (greedy)",
        "en": "DSpark ÷ DFlash: {t1:.2f} (T = 1), {greedy:.2f} (greedy)",
    },
    "tau_axis": {"vi": "τ (token mỗi vòng)", "en": "τ (tokens per round)"},
    "cond_title": {
        "vi": "Tỉ lệ giữ có điều kiện theo vị trí nháp, {temp} — Hình 2 thu nhỏ",
        "en": "Conditional acceptance by draft position, {temp} — Figure 2 in miniature",
    },
    "cond_axis": {"vi": "P(giữ d_i | đã giữ d_1..d_(i−1))", "en": "P(d_i kept | d_1..d_(i−1) kept)"},
    "sweep_title": {
        "vi": "Ngưỡng tin cậy tĩnh — {name}, T = 1 (Hình 5 thu nhỏ)",
        "en": "Static confidence threshold — {name}, T = 1 (Figure 5 in miniature)",
    },
    "threshold": {"vi": "ngưỡng c", "en": "threshold on c"},
    "verified": {"vi": "ô được verify mỗi vòng", "en": "verified slots per round"},
    "committed": {"vi": "τ (token được ghi mỗi vòng)", "en": "τ (tokens committed per round)"},
    "verify_rate": {"vi": "tỉ lệ verify hữu ích = τ ÷ ô verify", "en": "verify rate = τ ÷ verified slots"},
    "tokens": {"vi": "token mỗi vòng", "en": "tokens per round"},
    "sts_title": {
        "vi": "Hiệu chuẩn STS đầu tin cậy của {name}: ECE của xác suất sống sót tiền tố theo vị trí",
        "en": "STS calibration of {name}'s confidence: ECE of prefix survival per position",
    },
    "sts_sub": {
        "vi": "nhiệt độ chọn trên {fit} vòng hiệu chuẩn; kiểm định riêng trên {held} vòng của phần đánh giá",
        "en": "temperatures fitted on {fit} calibration rounds; held out: {held} rounds of the evaluation",
    },
    "ece_before": {"vi": "ECE trước STS (vòng dùng để chọn)", "en": "ECE before STS (fit rounds)"},
    "ece_after": {
        "vi": "ECE sau STS (vòng dùng để chọn; nhãn: nhiệt độ T_i)",
        "en": "ECE after STS (fit rounds; label: temperature T_i)",
    },
    "ece_held_raw": {"vi": "ECE thô (vòng kiểm định riêng)", "en": "ECE raw (held-out rounds)"},
    "ece_held_sts": {"vi": "ECE sau STS (vòng kiểm định riêng)", "en": "ECE after STS (held-out rounds)"},
    "ece": {"vi": "ECE (20 ngăn)", "en": "ECE (20 bins)"},
    "speed_title": {
        "vi": "Tốc độ thật: token/s dự đoán ÷ token/s thường<br><sup>{cond}</sup>",
        "en": "Wall-clock speed-up: speculative ÷ plain tokens/s<br><sup>{cond}</sup>",
    },
    "speed_axis": {"vi": "lần nhanh hơn", "en": "speed-up (×)"},
    "plain": {"vi": "giải mã thường", "en": "plain decoding"},
}
if set(_TRAINING_TEXT) & set(TEXT):  # pragma: no cover - a guard for whoever adds keys above
    raise RuntimeError(f"figure text keys defined twice: {sorted(set(_TRAINING_TEXT) & set(TEXT))}")
TEXT = TEXT | _TRAINING_TEXT


def _drafter_rows(report: Mapping[str, Any]) -> Mapping[str, Any]:
    """report["drafters"], checked: every drafter has "quality" with the same domains."""
    drafters = report.get("drafters") if isinstance(report, Mapping) else None
    if (
        not isinstance(drafters, Mapping)
        or not drafters
        or not all(
            isinstance(v, Mapping) and isinstance(v.get("quality"), Mapping) and v["quality"] for v in drafters.values()
        )
    ):
        raise ValueError(
            "report must be the dict of lab.weights.report() (lab/weights/report.json): "
            "{'drafters': {name: {'quality': {domain: {'t1': …, 'greedy': …}}}}}"
        )
    return drafters


def _domains(report: Mapping[str, Any]) -> list[str]:
    return list(next(iter(_drafter_rows(report).values()))["quality"])


def domain_label(domain: str, lang: str) -> str:
    """A domain's name in `lang` (unknown domains keep their own name)."""
    key = f"dom_{domain}"
    return TEXT(key, lang) if key in TEXT else domain


def drafter_label(name: str) -> str:
    return DRAFTER_NAMES.get(name, name)


def _check_drafter_in(report: Mapping[str, Any], drafter: str, needs: str) -> Mapping[str, Any]:
    """report["drafters"][drafter], which must hold `needs` (a train key, or a quality key in every domain)."""
    rows = _drafter_rows(report)
    if needs == "sts":
        ok = [n for n, v in rows.items() if isinstance(v.get("train"), Mapping) and v["train"].get("sts")]
    else:
        ok = [n for n, v in rows.items() if all(isinstance(r, Mapping) and needs in r for r in v["quality"].values())]
    if drafter not in ok:
        raise ValueError(f"drafter = {drafter!r} has no {needs!r} in the report: allowed {', '.join(map(repr, ok))}")
    return rows[drafter]


def mean_tau(report: Mapping[str, Any], drafter: str, label: str = "t1") -> float:
    """τ of one drafter at `label` ("t1" or "greedy"), averaged over the report's domains (the macro mean)."""
    rows = _drafter_rows(report)[drafter]["quality"]
    return sum(r[label]["tau"] for r in rows.values()) / len(rows)


def target_curve(report: Mapping[str, Any], lang: str = "en") -> go.Figure:
    """The target's validation loss (left axis) and accuracy (right axis) against the training step."""
    lang = check_lang(lang)
    target = report.get("target") if isinstance(report, Mapping) else None
    curve = target.get("curve") if isinstance(target, Mapping) else None
    if not isinstance(curve, Mapping) or not all(k in curve for k in ("val_steps", "val_loss", "val_accuracy")):
        raise ValueError("report must hold target.curve with val_steps, val_loss and val_accuracy (report.json)")
    fig = make_subplots(specs=[[{"secondary_y": True}]])
    for key, name, colour, right in (
        ("val_loss", "val_loss", "#e45756", False),
        ("val_accuracy", "val_acc", "#4c78a8", True),
    ):
        fig.add_trace(
            go.Scatter(
                x=list(curve["val_steps"]),
                y=list(curve[key]),
                mode="lines+markers",
                name=TEXT(name, lang),
                line={"color": colour},
                hovertemplate=f"{TEXT('step', lang)} %{{x}}: %{{y:.3f}}<extra></extra>",
            ),
            secondary_y=right,
        )
    fig.update_xaxes(title_text=TEXT("step", lang))
    fig.update_yaxes(title_text=TEXT("val_loss", lang), rangemode="tozero", secondary_y=False)
    fig.update_yaxes(title_text=TEXT("val_acc", lang), range=[0, 1], secondary_y=True)
    seconds = report.get("seconds", {}).get("target")
    steps = target.get("steps", curve["val_steps"][-1] if curve["val_steps"] else 0)
    title = TEXT("target_title", lang, steps=steps, seconds="—" if seconds is None else f"{seconds:.0f} s")
    return finish(fig, title, 360, legend={"orientation": "h", "y": -0.25})


def tau_bars(report: Mapping[str, Any], lang: str = "en") -> go.Figure:
    """Table 1 in miniature: τ per domain (and their mean) per drafter, at T = 1 (left) and greedy (right).

    `fig.layout.meta` holds {"dspark_over_dflash": {"t1": …, "greedy": …}} when both drafters are in the report."""
    lang = check_lang(lang)
    rows = _drafter_rows(report)
    domains = _domains(report)
    xs = [domain_label(d, lang) for d in domains] + [TEXT("dom_mean", lang)]
    fig = make_subplots(
        rows=1,
        cols=2,
        shared_yaxes=True,
        horizontal_spacing=0.04,
        subplot_titles=[TEXT(f"temp_{t}", lang) for t in TEMPERATURE_LABELS],
    )
    for col, label in enumerate(TEMPERATURE_LABELS, start=1):
        for name, v in rows.items():
            ys = [v["quality"][d][label]["tau"] for d in domains]
            ys.append(sum(ys) / len(ys))
            fig.add_trace(
                go.Bar(
                    x=xs,
                    y=ys,
                    name=drafter_label(name),
                    legendgroup=name,
                    showlegend=col == 1,
                    marker_color=DRAFTER_COLOURS.get(name),
                    text=[f"{y:.2f}" for y in ys],
                    textposition="outside",
                    hovertemplate=f"{drafter_label(name)} · %{{x}}: τ = %{{y:.3f}}<extra></extra>",
                ),
                row=1,
                col=col,
            )
    fig.update_layout(barmode="group")
    fig.update_yaxes(title_text=TEXT("tau_axis", lang), rangemode="tozero", row=1, col=1)
    title = TEXT("tau_title", lang)
    if "dspark" in rows and "dflash" in rows:
        ratio = {t: mean_tau(report, "dspark", t) / mean_tau(report, "dflash", t) for t in TEMPERATURE_LABELS}
        fig.update_layout(meta={"dspark_over_dflash": ratio})
        title += "<br><sup>" + TEXT("tau_ratio", lang, **ratio) + "</sup>"
    return finish(fig, title, 420, legend={"orientation": "h", "y": -0.15})


def cond_accept_lines(report: Mapping[str, Any], lang: str = "en", label: str = "t1") -> go.Figure:
    """Figure 2 in miniature: conditional acceptance per draft position, one panel per domain, one line per
    drafter (MTP-1 drafts one token: a single point). Positions never reached are gaps."""
    lang = check_lang(lang)
    if label not in TEMPERATURE_LABELS:
        raise ValueError(f"label = {label!r} is invalid: allowed {', '.join(map(repr, TEMPERATURE_LABELS))}")
    rows = _drafter_rows(report)
    domains = _domains(report)
    fig = make_subplots(
        rows=1,
        cols=len(domains),
        shared_yaxes=True,
        horizontal_spacing=0.03,
        subplot_titles=[domain_label(d, lang) for d in domains],
    )
    for col, d in enumerate(domains, start=1):
        for name, v in rows.items():
            ys = list(v["quality"][d][label]["cond_accept"])
            fig.add_trace(
                go.Scatter(
                    x=list(range(1, len(ys) + 1)),
                    y=ys,
                    mode="lines+markers",
                    name=drafter_label(name),
                    legendgroup=name,
                    showlegend=col == 1,
                    line={"color": DRAFTER_COLOURS.get(name)},
                    hovertemplate=f"{drafter_label(name)} · d%{{x}}: %{{y:.3f}}<extra></extra>",
                ),
                row=1,
                col=col,
            )
        fig.update_xaxes(title_text=TEXT("draft_pos", lang), dtick=1, row=1, col=col)
    fig.update_yaxes(range=[0, 1.05])
    fig.update_yaxes(title_text=TEXT("cond_axis", lang), row=1, col=1)
    return finish(
        fig, TEXT("cond_title", lang, temp=TEXT(f"temp_{label}", lang)), 380, legend={"orientation": "h", "y": -0.3}
    )


def threshold_sweep_chart(report: Mapping[str, Any], drafter: str = "dspark", lang: str = "en") -> go.Figure:
    """Figure 5 in miniature: per domain, verified slots per round and τ (bars, left axis) and the verify rate
    τ ÷ verified (line, right axis) against a static threshold on the confidence c (T = 1)."""
    lang = check_lang(lang)
    rows = _check_drafter_in(report, drafter, "threshold_sweep")["quality"]
    domains = list(rows)
    fig = make_subplots(
        rows=1,
        cols=len(domains),
        horizontal_spacing=0.08,
        subplot_titles=[domain_label(d, lang) for d in domains],
        specs=[[{"secondary_y": True}] * len(domains)],
    )
    for col, d in enumerate(domains, start=1):
        sweep = rows[d]["threshold_sweep"]
        xs = [s["threshold"] for s in sweep]
        for key, name, colour in (("verified_per_round", "verified", "#c7c7c7"), ("tau", "committed", "#e45756")):
            fig.add_trace(
                go.Bar(
                    x=xs,
                    y=[s[key] for s in sweep],
                    name=TEXT(name, lang),
                    legendgroup=key,
                    showlegend=col == 1,
                    marker_color=colour,
                    hovertemplate=f"{TEXT(name, lang)} @ %{{x}}: %{{y:.2f}}<extra></extra>",
                ),
                row=1,
                col=col,
                secondary_y=False,
            )
        fig.add_trace(
            go.Scatter(
                x=xs,
                y=[s["verify_rate"] for s in sweep],
                mode="lines+markers",
                name=TEXT("verify_rate", lang),
                legendgroup="verify_rate",
                showlegend=col == 1,
                line={"color": "#4c78a8"},
                hovertemplate=f"{TEXT('verify_rate', lang)} @ %{{x}}: %{{y:.3f}}<extra></extra>",
            ),
            row=1,
            col=col,
            secondary_y=True,
        )
        fig.update_xaxes(title_text=TEXT("threshold", lang), dtick=0.1, row=1, col=col)
        fig.update_yaxes(rangemode="tozero", row=1, col=col, secondary_y=False)
        fig.update_yaxes(range=[0, 1.05], row=1, col=col, secondary_y=True)
    fig.update_yaxes(title_text=TEXT("tokens", lang), row=1, col=1, secondary_y=False)
    fig.update_yaxes(title_text=TEXT("verify_rate", lang), row=1, col=len(domains), secondary_y=True)
    fig.update_layout(barmode="overlay", bargap=0.15)
    title = TEXT("sweep_title", lang, name=drafter_label(drafter))
    return finish(fig, title, 400, legend={"orientation": "h", "y": -0.3}, margin={"l": 70, "r": 70, "t": 80, "b": 50})


def sts_ece_bars(report: Mapping[str, Any], drafter: str = "dspark", lang: str = "en") -> go.Figure:
    """Sequential temperature scaling: ECE of the prefix survival a_i = Π_{j≤i} c_j before and after STS at each
    draft position on the rounds the temperatures were fitted on (`train.sts`, the fitted T_i written on the
    "after" bar), and, where the report holds the drafter's `heldout_calibration`, the raw and calibrated ECE on
    the evaluation's rounds, which the fit never saw (hatched bars)."""
    lang = check_lang(lang)
    row = _check_drafter_in(report, drafter, "sts")
    sts = row["train"]["sts"]
    held = row.get("heldout_calibration")
    if held is not None and (
        not isinstance(held, Sequence)
        or [h.get("position") if isinstance(h, Mapping) else None for h in held] != [s["position"] for s in sts]
        or not all("ece_raw" in h and "ece_sts" in h for h in held)
    ):
        raise ValueError(
            f"heldout_calibration of {drafter!r} must hold one {{'position', 'ece_raw', 'ece_sts', 'n'}} per "
            f"position of its sts: allowed positions {[s['position'] for s in sts]}"
        )
    xs = [s["position"] for s in sts]
    fig = go.Figure()
    for key, name, colour in (("ece_before", "ece_before", "#c7c7c7"), ("ece_after", "ece_after", "#e45756")):
        fig.add_trace(
            go.Bar(
                x=xs,
                y=[s[key] for s in sts],
                name=TEXT(name, lang),
                marker_color=colour,
                text=[f"T = {s['temperature']:g}" for s in sts] if key == "ece_after" else None,
                textposition="outside",
                customdata=[
                    [s["predicted_before" if key == "ece_before" else "predicted_after"], s["observed"]] for s in sts
                ],
                hovertemplate="d%{x}: ECE %{y:.4f} · a = %{customdata[0]:.3f} vs %{customdata[1]:.3f}<extra></extra>",
            )
        )
    title = TEXT("sts_title", lang, name=drafter_label(drafter))
    if held is not None:
        for key, name, colour in (("ece_raw", "ece_held_raw", "#7f7f7f"), ("ece_sts", "ece_held_sts", "#9e1b1b")):
            fig.add_trace(
                go.Bar(
                    x=xs,
                    y=[h[key] for h in held],
                    name=TEXT(name, lang),
                    marker={"color": colour, "pattern": {"shape": "/", "fgcolor": "white"}},
                    customdata=[h.get("n") for h in held],
                    hovertemplate="d%{x}: ECE %{y:.4f} · n = %{customdata}<extra></extra>",
                )
            )
        fit_n, held_n = sts[0].get("n", "—"), held[0].get("n", "—")
        title += "<br><sup>" + TEXT("sts_sub", lang, fit=fit_n, held=held_n) + "</sup>"
    fig.update_layout(barmode="group")
    fig.update_xaxes(title_text=TEXT("draft_pos", lang), dtick=1)
    fig.update_yaxes(title_text=TEXT("ece", lang), rangemode="tozero")
    return finish(fig, title, 400, legend={"orientation": "h", "y": -0.25})


def speed_bars(report: Mapping[str, Any], lang: str = "en") -> go.Figure:
    """Wall-clock tokens/s of speculative ÷ plain decoding per domain (and their mean) per drafter; a dotted line
    at 1 (= plain). Hover shows both tokens/s; the run conditions are in the title."""
    lang = check_lang(lang)
    rows = _drafter_rows(report)
    domains = _domains(report)
    if not all("speed" in v["quality"][d] for v in rows.values() for d in domains):
        raise ValueError("report has no tokens/s (quality[domain]['speed']) for every drafter and domain")
    xs = [domain_label(d, lang) for d in domains] + [TEXT("dom_mean", lang)]
    fig = go.Figure()
    for name, v in rows.items():
        sp = [v["quality"][d]["speed"] for d in domains]
        ys = [s["ratio"] for s in sp]
        ys.append(sum(ys) / len(ys))
        custom = [[s["plain_tok_s"], s["spec_tok_s"]] for s in sp] + [[None, None]]
        fig.add_trace(
            go.Bar(
                x=xs,
                y=ys,
                name=drafter_label(name),
                marker_color=DRAFTER_COLOURS.get(name),
                text=[f"{y:.2f}×" for y in ys],
                textposition="outside",
                customdata=custom,
                hovertemplate=f"{drafter_label(name)} · %{{x}}: %{{y:.2f}}× (%{{customdata[0]:.1f}} → "
                "%{customdata[1]:.1f} tok/s)<extra></extra>",
            )
        )
    fig.add_hline(y=1.0, line={"dash": "dot", "color": "#555"}, annotation_text=TEXT("plain", lang))
    c = report.get("conditions", {})
    keys = ("cpu", "threads", "torch", "speed_prompts", "max_new_tokens")
    cond = ", ".join(f"{k} {c[k]}" for k in keys if k in c) or "—"
    fig.update_layout(barmode="group")
    fig.update_yaxes(title_text=TEXT("speed_axis", lang), rangemode="tozero")
    return finish(fig, TEXT("speed_title", lang, cond=html.escape(cond)), 400, legend={"orientation": "h", "y": -0.15})


__all__ += [  # the figures of notebook 07
    "DRAFTER_NAMES",
    "cond_accept_lines",
    "domain_label",
    "drafter_label",
    "mean_tau",
    "speed_bars",
    "sts_ece_bars",
    "target_curve",
    "tau_bars",
    "threshold_sweep_chart",
]

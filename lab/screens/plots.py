"""Plotly figures of the ten steps (1A–5A; step 6B's are plots_6b.py, notebook 07's plots_training.py).

Every function reads what `walk.run_walk` (or `profiling.profile`, `speculative.acceptance_stats`)
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

import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

from dspark_mini import get_config
from dspark_mini.config import ModelConfig
from dspark_mini.hf_tokenizer import HFTokenizer
from dspark_mini.kv_cache import kv_bytes
from dspark_mini.schedule import LayerRole, layer_roles
from dspark_mini.validate import check_int, is_integer

from ..lesson.steps import get_step
from ..lesson.view import Walk
from ..lesson.views import role_name, sinkhorn_errors
from ..style import LOG_FLOOR, finish, none_if, rows_height
from ..text import UI, Texts, check_lang, lang_table

SUBLAYERS: tuple[str, ...] = ("attn", "ffn")


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
TEXT = lang_table("figures", "text")


TEXT = Texts(TEXT, "figure")


# ---- small helpers ---------------------------------------------------------------------------------
def token_text(tokenizer: HFTokenizer, token_id: int) -> str:
    """A token's text for a figure: escapes as `repr` shows them, `<bos>` safe from plotly's HTML."""
    return html.escape(repr(tokenizer.token_text(int(token_id)))[1:-1], quote=False)


def position_labels(walk: Walk) -> list[str]:
    """ "p·token" for every prompt position: unique, so a categorical axis never merges two tokens."""
    return [f"{p}·{token_text(walk.tokenizer, t)}" for p, t in enumerate(walk.tokens[0].tolist())]


def backbone_layers(walk: Walk, trace_step: str) -> tuple[int, ...]:
    return tuple(l for l in walk.trace.layers(trace_step) if l < walk.cfg.n_layers)


def role_of(cfg: ModelConfig, layer: int) -> LayerRole:
    return next(r for r in layer_roles(cfg) if r.layer == layer)


def check_position(walk: Walk, position: int) -> int:
    S = walk.tokens.size(1)
    check_int(position, "position", -S, S - 1, f"the prompt has {S} tokens", bare=True)
    return position % S


def check_sublayer(sublayer: str) -> str:
    if sublayer not in SUBLAYERS:
        raise ValueError(f"sublayer = {sublayer!r} is invalid: allowed {', '.join(map(repr, SUBLAYERS))}")
    return sublayer


# ---- 1A · embedding → 4 lanes ----------------------------------------------------------------------
def embedding_lanes(walk: Walk, lang: str = "en", dims: int = 16) -> go.Figure:
    """Step 1A: the first `dims` dimensions of each of the 4 lanes [S, 4, D] — four identical blocks."""
    streams = walk.trace.get("1A", "streams")[0]  # [S, hc, D]
    pre = walk.trace.get("1A", "pre_mix")[0, 0].tolist()
    hc, D = streams.size(1), streams.size(2)
    check_int(dims, "dims", 1, D, bare=True)
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
                f"{UI('layer', lang)} {r.layer} · {TEXT('part_' + r.part, lang)} · {UI('ratio', lang)} {r.ratio}<br>"
                f"{UI('reads_kv_of', lang)}: {r.reads_kv_of} · {UI('reads_topk_of', lang)}: {r.reads_topk_of}"
                f"<br>RoPE {r.rope}"
                for r in sel
            ]
            label = UI(names[mode], lang) if mode in names else mode
            fig.add_trace(
                go.Scatter(
                    x=[r.layer for r in sel],
                    y=[TEXT(f"part_{r.part}", lang) for r in sel],
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
            categoryorder="array",
            categoryarray=[TEXT(f"part_{part}", lang) for part in ("draft", "decoder", "encoder")],
            range=[-0.6, 2.8],
            row=row,
            col=1,
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
    check_int(max_tokens, "max_tokens", 2)
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
    listed = ", ".join(map(str, allowed))
    if layer not in allowed or not is_integer(layer):
        raise ValueError(f"layer = {layer!r} is invalid for step {sid}: allowed {listed}")
    return layer

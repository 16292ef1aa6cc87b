"""Step 6B's figures: the logits of the last position, the draft strip (draft tokens, what verify did, ℓ and the
target's own token), acceptance by position with the confidence beside it, the reliability diagram and the cost
of one verify against k decode steps.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

import plotly.graph_objects as go
import torch

from dspark_mini.hf_tokenizer import HFTokenizer
from dspark_mini.speculative import ACCEPTED, BONUS, NOT_SENT, NOT_VERIFIED, REJECTED, RESAMPLED, Round
from dspark_mini.validate import check_int, check_temperature

from ..evaluation.profiling import reliability
from ..lesson.view import Walk
from ..lesson.view_6b import round_verify_rows
from ..lesson.view_6b import status_text as row_status  # "accepted (sampled, not argmax)"
from ..style import finish, rows_height
from ..text import UI, check_lang, verify_label
from .plots import TEXT, token_text

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


# ---- 6B · head, draft, verify ----------------------------------------------------------------------
def logits_bar(walk: Walk, k: int = 10, lang: str = "en") -> go.Figure:
    """Step 6B: the top-k tokens of the last position's logits, as probability bars (dotted line: 1/V)."""
    logits = walk.logits[0, -1]
    V = logits.numel()
    check_int(k, "k", 1, V, bare=True)
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
    round_or_rounds: Round | Sequence[Round], tokenizer: HFTokenizer, lang: str = "en", *, temperature: float
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
    k = max(r.k for r in rounds)
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
                    f"d{i + 1} = '{tx[i][1:]}' · {row_status(row, lang)}<br>"
                    f"{TEXT('not_sent', lang, l=r.verify_len)}<br>"
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
            where = TEXT("after", lang, k=r.verify_len) if r.verify_len else TEXT("after_anchor", lang)
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
        if r.verify_len < r.k:
            x = r.verify_len - 0.5
            fig.add_shape(
                type="line", x0=x, x1=x, y0=n_round - 0.5, y1=n_round + 0.5, line={"dash": "dash", "color": "#333"}
            )
    fig.update_yaxes(autorange="reversed")
    fig.update_xaxes(side="top", title_text=TEXT("draft_pos", lang))
    meta = {"draft_positions": k, "verify_lens": [r.verify_len for r in rounds], "rounds": len(rounds)}
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


def committed_histogram(
    p_t: torch.Tensor,
    with_residual: torch.Tensor,
    without_residual: torch.Tensor,
    tokenizer: HFTokenizer,
    lang: str = "en",
    top: int = 10,
) -> go.Figure:
    """Notebook 06: the target's exact probability of its `top` most likely tokens beside how often verify
    committed each, with the residual and without it (the broken verifier). Tokens are shown as their text pieces."""
    lang = check_lang(lang)
    top = check_int(top, "top", 1)
    best = torch.topk(p_t, min(top, p_t.numel())).indices.tolist()
    ticks = [f"'{token_text(tokenizer, i)}'" for i in best]
    fig = go.Figure(go.Bar(name=TEXT("hist_target", lang), x=ticks, y=[float(p_t[i]) for i in best]))
    for name, samples in (("hist_residual", with_residual), ("hist_broken", without_residual)):
        counts = torch.bincount(samples.long(), minlength=p_t.numel())
        fig.add_trace(go.Bar(name=TEXT(name, lang), x=ticks, y=[float(counts[i]) / len(samples) for i in best]))
    fig.update_layout(barmode="group")
    fig.update_xaxes(title_text=TEXT("hist_token", lang))
    fig.update_yaxes(title_text=TEXT("hist_prob", lang))
    return finish(fig, TEXT("hist_title", lang, k=len(best)), 340, legend={"orientation": "h", "y": -0.3})

"""Plotly figures of confidence-scheduled verification: the SPS(B) cost tables and the load simulation.

    sps_curves(tables)             SPS(B) and the token throughput B·SPS(B), measured points and synthetic curves
    throughput_vs_requests(sim)    throughput vs concurrent requests R per policy, one panel per table (paper Fig. 7)
    verify_len_vs_requests(sim)    mean verify length ℓ vs R per policy, one panel per table (paper Fig. 8)
    theta_path(theta, stop, best)  Θ along the greedy path with the early stop and the global argmax marked

`sim` is `simulate(...)`'s dict or `dspark-lab schedule --json`'s report (its "sim" part is used). Nothing is
run here; titles and axes follow `lang` ("vi" or "en"); the look is lab.screens.plots' (plotly_white, left title).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import plotly.graph_objects as go
import torch
from plotly.subplots import make_subplots

from dspark_mini.validate import check_int

from ..style import finish
from ..text import Texts, check_lang, lang_table
from .sps import SPSTable

POLICY_COLOURS: Mapping[str, str] = {
    "fixed": "#7f7f7f",
    "threshold": "#f58518",
    "dspark": "#4c78a8",
    "dspark-async": "#54a24b",
    "retrospective": "#e45756",
}
DEFAULT_MAX_B = 1536  # 256 requests × 6 rows
TABLE_COLOURS: Mapping[str, str] = {"measured": "#4c78a8", "smooth": "#54a24b", "staircase": "#e45756"}

TEXT = lang_table("serving_figures", "text")
TEXT = Texts(TEXT, "serving figure")


def table_name(name: str, lang: str) -> str:
    """A cost table's name as a figure shows it ("measured", "smooth", "staircase" in `lang`; any other as given)."""
    key = f"table_{name}"
    return TEXT(key, lang) if key in TEXT else name


def sps_curves(tables: Mapping[str, SPSTable], lang: str = "en", max_batch_tokens: int | None = None) -> go.Figure:
    """Left: SPS(B) as the scheduler reads it (forced monotone, interpolated), with the measured medians and p95
    of a measured table as markers; right: B·SPS(B), the tokens per second a full batch of B would verify.
    Both axes logarithmic. tables: name → SPSTable; B runs 1..max_batch_tokens (default the largest measured)."""
    lang = check_lang(lang)
    if not isinstance(tables, Mapping) or not tables or not all(isinstance(t, SPSTable) for t in tables.values()):
        raise ValueError("tables must be a non-empty mapping name → SPSTable (lab.serving.sps)")
    measured = [t.max_batch_tokens for t in tables.values() if t.step_stats[0] is not None]
    top = max(measured) if measured else DEFAULT_MAX_B
    if max_batch_tokens is not None:
        top = check_int(max_batch_tokens, "max_batch_tokens", 2)
    b = torch.unique(torch.logspace(0, torch.log10(torch.tensor(float(top))), 200).round().long())
    fig = make_subplots(rows=1, cols=2, subplot_titles=(TEXT("sps_panel", lang), TEXT("tok_panel", lang)))
    for name, t in tables.items():
        colour = TABLE_COLOURS.get(name, None)
        sps = t.steps_per_s(b)
        line = {"color": colour, "shape": "linear"}
        for col, y in ((1, sps), (2, b.double() * sps)):
            fig.add_trace(
                go.Scatter(
                    x=b.tolist(),
                    y=y.tolist(),
                    mode="lines",
                    name=table_name(name, lang),
                    legendgroup=name,
                    showlegend=col == 1,
                    line=line,
                    hovertemplate=f"{table_name(name, lang)} B = %{{x}}: %{{y:.4g}}<extra></extra>",
                ),
                row=1,
                col=col,
            )
        if t.step_stats[0] is not None:  # measured: the medians and how far p95 reaches
            bt = list(t.batch_tokens)
            raw = list(t.raw_steps_per_s)
            low = [1.0 / s["p95"] for s in t.step_stats]
            for col, scale in ((1, [1] * len(bt)), (2, bt)):
                y = [r * k for r, k in zip(raw, scale, strict=True)]
                down = [(r - lo) * k for r, lo, k in zip(raw, low, scale, strict=True)]
                fig.add_trace(
                    go.Scatter(
                        x=bt,
                        y=y,
                        mode="markers",
                        name=TEXT("measured_points", lang, name=table_name(name, lang)),
                        legendgroup=name + "-points",
                        showlegend=col == 1,
                        marker={"color": colour, "size": 7},
                        error_y={"type": "data", "symmetric": False, "array": [0.0] * len(bt), "arrayminus": down},
                        hovertemplate="B = %{x}: %{y:.4g}<extra></extra>",
                    ),
                    row=1,
                    col=col,
                )
    fig.update_xaxes(type="log", title_text=TEXT("batch_tokens", lang))
    fig.update_yaxes(type="log")
    return finish(fig, TEXT("sps_title", lang), 420, legend={"orientation": "h", "y": -0.3})


def sim_of(report: Mapping[str, Any]) -> Mapping[str, Any]:
    """The sim[table][policy][R] part of a schedule report (or the sim itself), checked."""
    sim = report.get("sim", report) if isinstance(report, Mapping) else None
    ok = (
        isinstance(sim, Mapping)
        and sim
        and all(
            isinstance(per, Mapping) and per and all(isinstance(rs, Mapping) and rs for rs in per.values())
            for per in sim.values()
        )
    )
    if not ok:
        raise ValueError("sim must be simulate()'s dict or a schedule report: sim[table][policy][R] = {throughput, …}")
    return sim


def _per_request(
    report: Mapping[str, Any], metric: str, title: str, axis: str, lang: str, tables: Sequence[str] | None
) -> go.Figure:
    lang = check_lang(lang)
    sim = sim_of(report)
    names = list(sim) if tables is None else list(tables)
    for n in names:
        if n not in sim:
            raise ValueError(f"table {n!r} is not in the simulation: allowed {', '.join(map(repr, sim))}")
    titles = [table_name(n, lang) for n in names]
    fig = make_subplots(rows=1, cols=len(names), subplot_titles=titles, shared_yaxes=metric == "mean_verify_len")
    for i, name in enumerate(names, start=1):
        for policy, per_r in sim[name].items():
            rs = sorted(per_r, key=int)
            fig.add_trace(
                go.Scatter(
                    x=[int(r) for r in rs],
                    y=[per_r[r][metric] for r in rs],
                    mode="lines+markers",
                    name=policy,
                    legendgroup=policy,
                    showlegend=i == 1,
                    line={"color": POLICY_COLOURS.get(policy)},
                    hovertemplate=f"{policy}, R = %{{x}}: %{{y:.4g}}<extra>{table_name(name, lang)}</extra>",
                ),
                row=1,
                col=i,
            )
    fig.update_xaxes(type="log", dtick=0.30102999566, title_text=TEXT("requests", lang))  # a tick per power of 2
    if metric == "throughput":
        fig.update_yaxes(type="log")
    else:
        fig.update_yaxes(rangemode="tozero")
    fig.update_yaxes(title_text=TEXT(axis, lang), row=1, col=1)
    return finish(fig, TEXT(title, lang), 420, legend={"orientation": "h", "y": -0.3})


def throughput_vs_requests(
    report: Mapping[str, Any], lang: str = "en", tables: Sequence[str] | None = None
) -> go.Figure:
    """Committed tokens per second vs R, one line per policy, one panel per table (the paper's Fig. 7)."""
    return _per_request(report, "throughput", "thr_title", "throughput", lang, tables)


def verify_len_vs_requests(
    report: Mapping[str, Any], lang: str = "en", tables: Sequence[str] | None = None
) -> go.Figure:
    """Mean verify length ℓ (drafts sent to verify per request and round) vs R (the paper's Fig. 8)."""
    return _per_request(report, "mean_verify_len", "len_title", "verify_len", lang, tables)


def theta_path(
    theta: Sequence[float] | torch.Tensor,
    stop: int,
    best: int,
    lang: str = "en",
    requests: int = 32,
    table: str = "staircase",
) -> go.Figure:
    """Θ_n, the expected committed tokens per second after admitting the first n candidates of the greedy path,
    with Algorithm 1's early stop and the global argmax marked (notebook 08, the staircase stall)."""
    lang = check_lang(lang)
    ys = [float(x) for x in (theta.tolist() if isinstance(theta, torch.Tensor) else theta)]
    fig = go.Figure(go.Scatter(x=list(range(len(ys))), y=ys, mode="lines", name="Θ_n", showlegend=False))
    fig.add_vline(x=stop, line_dash="dot", annotation_text=TEXT("early_stop", lang))
    fig.add_vline(x=best, line_dash="dash", annotation_text=TEXT("global_best", lang))
    fig.update_xaxes(title_text=TEXT("theta_admitted", lang))
    fig.update_yaxes(title_text=TEXT("theta_axis", lang))
    title = TEXT("theta_title", lang, r=requests, table=table_name(table, lang))
    return finish(fig, title, 320)

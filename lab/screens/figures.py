"""Which figure each step shows, and at which layer: the one place the notebooks' panels, the presenter's slides and
the widgets ask for a step's figures (`step_figures`).
"""

from __future__ import annotations

import plotly.graph_objects as go

from ..lesson.steps import STEP_IDS, get_step
from ..lesson.view import Walk
from ..text import check_lang
from .plots import (
    attention_shares,
    comb_heatmap,
    compression_map,
    embedding_lanes,
    engram_gates,
    expert_load,
    indexer_scores,
    kv_bytes_vs_context,
    layer_roles_chart,
    resolve_layer,
    router,
    sinkhorn_convergence,
)
from .plots_6b import draft_strip, logits_bar


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

"""The notebooks' figures speak the chosen language and show tokens as text.

Every figure a notebook draws comes from a plot function (lab/screens/plots*.py, lab/serving/plots.py,
lab/paper/figures.py) or, for notebook 09's one inline chart, from labels the notebook picks by LANG. Here each
plot function a notebook calls is drawn in "en" and in "vi" from the same inputs and every label a reader sees
(title, subplot titles, axis titles, legend entries, annotations, categorical ticks) is compared with its English
counterpart: a Vietnamese label equal to the English one is English left untranslated, unless it holds only
names that read the same in both languages (policy and table names of the CLI, model names, units, symbols).
Figures that show tokens must show them as text pieces: no tick label there is a bare integer (an id).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from functools import cache
from pathlib import Path

import plotly.graph_objects as go
import pytest

from lab.sync.nbsync import sources

# words that read the same in both languages: names (policies, drafters, tables as the CLI spells them), units
NEUTRAL = {
    "dspark", "dflash", "eagle", "eagle3", "async", "fixed", "threshold", "retrospective", "dspark-async", "mtp",
    "gib", "mib", "kib", "bf16", "fp8", "fp4", "fp32", "mxfp4", "sps", "ece", "sts", "swa", "csa", "hca", "mla",
    "kv", "moe", "qwen3", "lab", "flash", "h200", "engram", "sinkhorn", "comb", "argmax", "logit", "logits", "top",
    "token", "tokens", "ms", "ema", "lora", "rope", "draft", "verify", "batch", "prefill", "decode", "anchor",
    "sink", "greedy", "rnn", "lite", "algorithm",
}  # fmt: skip
WORD = re.compile(r"[^\W\d_]{3,}")  # a word of 3+ letters (symbols like τ, ℓ, Θ, B are not words)


def _text(x) -> str | None:
    if isinstance(x, str):
        return x
    if isinstance(x, dict):
        return x.get("text")
    return None


def labels(fig: go.Figure) -> list[tuple[str, str]]:
    """Every text a reader sees on `fig`, in a fixed order: [(where, text)]."""
    j = fig.to_plotly_json()
    lay, out = j.get("layout", {}), []
    if t := _text(lay.get("title")):
        out.append(("title", t))
    for key in sorted(k for k in lay if re.fullmatch(r"[xy]axis\d*", k)):
        axis = lay[key]
        if t := _text(axis.get("title")):
            out.append((f"{key}.title", t))
        out += [(f"{key}.ticktext", str(t)) for t in axis.get("ticktext") or ()]
    out += [(f"annotation{i}", a["text"]) for i, a in enumerate(lay.get("annotations") or ()) if a.get("text")]
    for shape in lay.get("shapes") or ():
        if t := _text(shape.get("label")):
            out.append(("shape", t))
    for i, tr in enumerate(j.get("data", [])):
        if tr.get("name") and tr.get("showlegend", True) is not False:
            out.append((f"trace{i}.name", tr["name"]))
        for axis in ("x", "y"):
            values = tr.get(axis)
            if values is None or not len(values):
                continue
            ref = tr.get(f"{axis}axis", axis)  # "x", "x2", …: the axis it is drawn on
            relabelled = bool(lay.get(f"{axis}axis{ref[1:]}", {}).get("ticktext"))  # ints placed, texts shown
            ids = tr.get("type") == "bar" and not relabelled and all(type(v) is int for v in values)  # bars over ids
            if all(isinstance(v, str) for v in values) or ids:  # categories, or ids drawn as numbers
                out += [(f"trace{i}.{axis}", str(v)) for v in values]
    return out


def untranslated(en: str, vi: str) -> bool:
    """True when the Vietnamese label is the English one and holds a word that is not a shared name."""
    if en != vi:
        return False
    plain = re.sub(r"<[^>]+>", " ", en)  # html tags of plotly text
    return any(w.lower() not in NEUTRAL for w in WORD.findall(plain))


# ---- the figures of the notebooks, drawn from the inputs the notebooks give them --------------------------------
@cache
def _walk():
    from lab.lesson.walk import run_walk

    return run_walk(seed=0)


@cache
def _lossless():
    """Notebook 06's histogram inputs in miniature: a target distribution and two committed samples."""
    import torch

    p_t = torch.softmax(torch.randn(8192, generator=torch.Generator().manual_seed(0), dtype=torch.float64) * 4, 0)
    g = torch.Generator().manual_seed(1)
    good = torch.multinomial(p_t, 2000, replacement=True, generator=g)
    broken = torch.multinomial(p_t**3 / (p_t**3).sum(), 2000, replacement=True, generator=g)
    from dspark_mini.tokenizer import default_tokenizer

    return p_t, good, broken, default_tokenizer()


@cache
def _schedule():
    from lab.serving.schedule import read_streams, read_table, schedule_report, tables_for

    streams, measured = read_streams(None), read_table(None)
    return tables_for(measured), schedule_report(streams, measured, seed=0, cost_reps=1)


@cache
def _paper():
    from lab.paper import docs

    return docs.read_items(Path(__file__).resolve().parents[1] / "runs" / "paper")


def _figures() -> dict[str, tuple[Callable[[str], go.Figure], bool]]:
    """plot function as notebooks call it → (draw(lang), whether the figure shows tokens)."""
    from dspark_mini.speculative import acceptance_stats
    from lab.lesson.walk import redraft
    from lab.paper.figures import BUILDERS, figure
    from lab.screens import plots, plots_6b, plots_training
    from lab.serving import plots as serving_plots
    from lab.weights import report

    w = _walk
    layer = lambda: w().cfg.candidate_source_layer  # noqa: E731
    out = {
        "plots.engram_gates": (lambda lang: plots.engram_gates(w(), lang=lang), True),
        "plots.comb_heatmap": (lambda lang: plots.comb_heatmap(w(), layer=0, lang=lang), False),
        "plots.sinkhorn_convergence": (lambda lang: plots.sinkhorn_convergence(w(), layer=0, lang=lang), False),
        "plots.indexer_scores": (lambda lang: plots.indexer_scores(w(), layer(), lang=lang), True),
        "plots.attention_shares": (lambda lang: plots.attention_shares(w(), layer(), lang=lang), True),
        "plots.kv_bytes_vs_context": (lambda lang: plots.kv_bytes_vs_context(lang=lang), False),
        "plots.router": (lambda lang: plots.router(w(), layer=0, lang=lang), True),
        "plots.expert_load": (lambda lang: plots.expert_load(w(), layer=0, lang=lang), False),
        "plots_6b.logits_bar": (lambda lang: plots_6b.logits_bar(w(), 10, lang=lang), True),
        "plots_6b.draft_strip": (
            lambda lang: plots_6b.draft_strip(redraft(w(), 2, 0.0).round, w().tokenizer, lang=lang, temperature=0.0),
            True,
        ),
        "plots_6b.acceptance_by_position": (
            lambda lang: plots_6b.acceptance_by_position(acceptance_stats([w().round]), lang=lang),
            False,
        ),
        "plots_6b.committed_histogram": (lambda lang: plots_6b.committed_histogram(*_lossless(), lang=lang), True),
        "plots_training.target_curve": (lambda lang: plots_training.target_curve(report(), lang), False),
        "plots_training.tau_bars": (lambda lang: plots_training.tau_bars(report(), lang), False),
        "plots_training.cond_accept_lines": (lambda lang: plots_training.cond_accept_lines(report(), lang), False),
        "plots_training.threshold_sweep_chart": (
            lambda lang: plots_training.threshold_sweep_chart(report(), "dspark", lang),
            False,
        ),
        "plots_training.sts_ece_bars": (lambda lang: plots_training.sts_ece_bars(report(), "dspark", lang), False),
        "plots_training.speed_bars": (lambda lang: plots_training.speed_bars(report(), lang), False),
        "plots.sps_curves": (lambda lang: serving_plots.sps_curves(_schedule()[0], lang=lang), False),
        "plots.throughput_vs_requests": (
            lambda lang: serving_plots.throughput_vs_requests(_schedule()[1], lang=lang),
            False,
        ),
        "plots.verify_len_vs_requests": (
            lambda lang: serving_plots.verify_len_vs_requests(_schedule()[1], lang=lang),
            False,
        ),
        "plots.theta_path": (lambda lang: serving_plots.theta_path([1.0, 2.0, 1.5, 3.0], 1, 3, lang=lang), False),
    }
    for name in BUILDERS:
        out[f"figure:{name}"] = (lambda lang, name=name: figure(_paper()[name], lang), False)
    return out


FIGURES = _figures()


def build_all(lang: str) -> dict[str, tuple[go.Figure, bool]]:
    return {name: (draw(lang), tokens) for name, (draw, tokens) in FIGURES.items()}


def called_plots(text: str) -> Iterator[str]:
    """The plot calls in a notebook source: `plots.x(`, `plots_6b.x(`, `plots_training.x(`, `figure(items["x"]`."""
    yield from re.findall(r"\b(plots(?:_6b|_training)?\.\w+)\(", text)
    yield from (f"figure:{n}" for n in re.findall(r"\bfigure\(items\[\"(\w+)\"\]", text))


def test_every_plot_a_notebook_calls_is_checked_here() -> None:
    missing = {
        (src.stem, call) for src in sources() for call in called_plots(src.read_text("utf-8")) if call not in FIGURES
    }
    assert not missing, f"add these plot calls to FIGURES: {sorted(missing)}"


def test_notebooks_build_no_figure_with_literal_labels() -> None:
    """A figure drawn inside a notebook takes its labels from tr() or a LANG table, never a literal string."""
    literal = re.compile(r"\b(title|xaxis_title|yaxis_title|annotation_text|name|title_text)=\"[^\"]*[A-Za-z]{3}")
    found = {(src.stem, m.group(0)) for src in sources() for m in literal.finditer(src.read_text("utf-8"))}
    assert not found, sorted(found)


@pytest.mark.parametrize("name", sorted(FIGURES))
def test_figure_labels_follow_the_language(name) -> None:
    draw, shows_tokens = FIGURES[name]
    en, vi = labels(draw("en")), labels(draw("vi"))
    assert [k for k, _ in en] == [k for k, _ in vi], f"{name}: the two languages draw different labels"
    token_tick = lambda k: shows_tokens and (k.endswith((".x", ".y", ".ticktext")))  # noqa: E731  a token's text
    english = [(k, a) for (k, a), (_, b) in zip(en, vi, strict=True) if untranslated(a, b) and not token_tick(k)]
    assert not english, f"{name}: English labels in Vietnamese mode: {english}"
    if shows_tokens:
        ids = [(k, t) for k, t in vi if (".x" in k or ".y" in k or "ticktext" in k) and t.strip().isdigit()]
        assert not ids, f"{name}: token ids where token text belongs: {ids}"

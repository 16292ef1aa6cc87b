"""The figures of training and of the drafters' comparison (notebook 07), read from the report `dspark-lab train all`
writes (lab/weights/report.json): the target's curve, τ per drafter and domain, conditional acceptance by position,
the static-threshold sweep, STS before and after, tokens/s.
"""

from __future__ import annotations

import html
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..style import finish
from ..text import Texts, check_lang, lang_table

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


TEXT: Mapping[str, Mapping[str, str]] = lang_table("training_figures", "text")


TEXT = Texts(TEXT, "training figure")


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

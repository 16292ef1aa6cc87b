"""The paper's figures from the items' JSON (plotly, the lab's look), in vi or en; and their PNGs.

The figure builders only read the JSON records, so the notebook draws exactly what the PNGs show. PNGs are
screenshots by the system's chromium (Playwright, as `make pictures` does) of the figure rendered offline with the
plotly.js bundled in the plotly package: no kaleido, no new dependency. Without a chromium no PNG is drawn and
the run says so (the JSON and the pages are complete without them).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import plotly.graph_objects as go
from plotly.subplots import make_subplots

from ..style import finish
from ..weights import DRAFTER_LABEL
from .texts import T, lab_domain, lab_domains, paper_domain, paper_pair

PAPER_LABEL = {"dspark": "DSpark", "dspark-rnn": "DSpark-RNN", "dflash": "DFlash", "eagle3": "Eagle3"}  # the paper's
# one colour a drafter in every panel (the paper's curves in its lab drafter's colour, dotted)
COLOUR = {"dspark": "#636efa", "dspark-rnn": "#ef553b", "dflash": "#00cc96", "eagle3": "#ab63fa", "mtp1": "#ffa15a"}
SIZE = {"width": 1000, "height": 420}


def labels(domains: list[str], lang: str) -> list[str]:
    """The lab domains' readable names in `lang` (the x axis and the subplot titles)."""
    return [lab_domain(d, lang) for d in domains]


def fig_table1(item: dict[str, Any], lang: str) -> go.Figure:
    tau = item["lab"]["tau"]
    domains = lab_domains(next(iter(tau.values())))
    x = labels(domains, lang)
    fig = go.Figure(
        [
            go.Bar(name=DRAFTER_LABEL[n], x=x, y=[tau[n][d]["t1"] for d in domains], marker_color=COLOUR.get(n))
            for n in tau
        ]
    )
    fig.update_yaxes(title=T("tau", lang))
    return finish(fig, T("t1_title", lang), barmode="group")


def fig_fig2(item: dict[str, Any], lang: str) -> go.Figure:
    lab, paper = item["lab"]["cond_accept"]["t1"], item["paper"]["cond_accept"]
    domains = lab_domains(lab)
    titles = [  # each lab domain beside its paper domain (texts.PAPER_DOMAIN_OF), whose curves are dotted
        T("subplot_pair", lang, lab=lab_domain(d, lang), paper=paper_domain(paper_pair(d), lang))
        if paper_pair(d) in paper
        else lab_domain(d, lang)
        for d in domains
    ]
    fig = make_subplots(1, len(domains), subplot_titles=titles, shared_yaxes=True)
    for i, d in enumerate(domains, 1):
        for n, c in lab[d].items():
            fig.add_trace(
                go.Scatter(
                    x=list(range(1, len(c) + 1)),
                    y=c,
                    name=DRAFTER_LABEL[n],
                    legendgroup=n,
                    showlegend=i == 1,
                    mode="lines+markers",
                    line={"color": COLOUR.get(n)},
                ),
                1,
                i,
            )
        for n, c in paper.get(paper_pair(d) or "", {}).items():
            fig.add_trace(
                go.Scatter(
                    x=list(range(1, len(c) + 1)),
                    y=c,
                    name=T("paper_trace", lang, name=PAPER_LABEL[n]),
                    legendgroup=f"p{n}",
                    showlegend=i == 1,
                    line={"dash": "dot", "color": COLOUR.get(n)},
                    opacity=0.5,
                ),
                1,
                i,
            )
        fig.update_xaxes(title=T("position", lang), row=1, col=i)
    fig.update_yaxes(title=T("cond_accept", lang), row=1, col=1)
    return finish(fig, T("fig2_title", lang))


def fig_fig3(item: dict[str, Any], lang: str) -> go.Figure:
    lab = item["lab"]
    domains = lab_domains(next(iter(lab["tau"].values())))
    x = labels(domains, lang)
    fig = go.Figure([go.Bar(name=n, x=x, y=[t[d]["t1"] for d in domains]) for n, t in lab["tau"].items()])
    fig.update_yaxes(title=T("tau", lang))
    title = T(
        "fig3_title",
        lang,
        layers=f"{min(lab['layers'])}–{max(lab['layers'])}",
        depth=lab.get("dflash_depth", lab["depth"]),  # DFlash at the shipped DFlash's depth (records before: the lab's)
        block=lab["block"],
    )
    return finish(fig, title, barmode="group")


def fig_fig4(item: dict[str, Any], lang: str) -> go.Figure:
    lab = item["lab"]
    blocks = lab["blocks"]
    domains = lab_domains(lab["tau"][str(blocks[0])]["dspark"])
    fig = make_subplots(1, len(domains), subplot_titles=labels(domains, lang), shared_yaxes=True)
    for i, d in enumerate(domains, 1):
        for kind in ("dspark", "dflash"):
            fig.add_trace(
                go.Scatter(
                    x=blocks,
                    y=[lab["tau"][str(k)][kind][d]["t1"] for k in blocks],
                    name=DRAFTER_LABEL[kind],
                    legendgroup=kind,
                    showlegend=i == 1,
                    mode="lines+markers",
                    line={"color": COLOUR[kind]},
                ),
                1,
                i,
            )
        fig.update_xaxes(title=T("block_k", lang), row=1, col=i)
    fig.update_yaxes(title=T("tau", lang), row=1, col=1)
    return finish(fig, T("fig4_title", lang, depth=lab["depth"], dflash=lab.get("dflash_depth", lab["depth"])))


def fig_fig5(item: dict[str, Any], lang: str) -> go.Figure:
    sweep = item["lab"]["sweep"]
    domains = lab_domains(sweep)
    specs = [[{"secondary_y": True}] * len(domains)]
    fig = make_subplots(1, len(domains), subplot_titles=labels(domains, lang), specs=specs)
    for i, d in enumerate(domains, 1):
        th = [r["threshold"] for r in sweep[d]]
        for key, group, colour in (("verified_per_round", "v", "#9ecae1"), ("tau", "t", "#3182bd")):
            name = T("verified" if key == "verified_per_round" else key, lang)
            bar = go.Bar(x=th, y=[r[key] for r in sweep[d]], name=name, legendgroup=group, showlegend=i == 1)
            fig.add_trace(bar.update(marker_color=colour), 1, i)
        fig.add_trace(
            go.Scatter(
                x=th,
                y=[r["verify_rate"] for r in sweep[d]],
                name=T("verify_rate", lang),
                legendgroup="r",
                showlegend=i == 1,
                mode="lines+markers",
                line={"color": "#e6550d"},
            ),
            1,
            i,
            secondary_y=True,
        )
        fig.update_xaxes(title=T("threshold", lang), row=1, col=i)
    fig.update_yaxes(range=[0, 1], secondary_y=True)
    return finish(fig, T("fig5_title", lang), barmode="overlay")


def fig_fig6(item: dict[str, Any], lang: str) -> go.Figure:
    diagram = item["lab"].get("diagram", {})
    k = len(diagram.get("raw", []))
    fig = make_subplots(
        1, max(1, k), subplot_titles=[T("position_n", lang, i=i + 1) for i in range(k)], shared_yaxes=True
    )
    for i in range(k):
        fig.add_trace(
            go.Scatter(
                x=[0, 1],
                y=[0, 1],
                name=T("ideal", lang),
                legendgroup="i",
                showlegend=i == 0,
                line={"dash": "dot", "color": "#999"},
            ),
            1,
            i + 1,
        )
        for name, color in (("raw", "#e6550d"), ("sts", "#3182bd")):
            b = diagram[name][i]
            fig.add_trace(
                go.Scatter(
                    x=[x["predicted"] for x in b],
                    y=[x["observed"] for x in b],
                    name=T(name, lang),
                    legendgroup=name,
                    showlegend=i == 0,
                    mode="lines+markers",
                    line={"color": color},
                ),
                1,
                i + 1,
            )
        fig.update_xaxes(title=T("predicted", lang), range=[0, 1], row=1, col=i + 1)
    fig.update_yaxes(title=T("observed", lang), range=[0, 1], row=1, col=1)
    return finish(fig, T("fig6_title", lang))


CURVES = (
    ("dspark/dspark", "curve_dspark"),
    ("dspark/dspark-async", "curve_async"),
    ("dspark/fixed", "curve_fixed"),
    ("mtp1", "curve_mtp1"),
)


def fig_fig7(item: dict[str, Any], lang: str) -> go.Figure:
    curves = item["lab"]["curves"]
    fig = go.Figure(
        [
            go.Scatter(
                x=[p["aggregate_tok_s"] for p in curves[c]],
                y=[p["per_user_tok_s"] for p in curves[c]],
                text=[f"R = {p['requests']}" for p in curves[c]],
                name=T(label, lang),
                mode="lines+markers",
            )
            for c, label in CURVES
        ]
    )
    fig.update_xaxes(title=T("aggregate", lang), type="log")
    fig.update_yaxes(title=T("per_user", lang), type="log")
    return finish(fig, T("fig7_title", lang))


def fig_fig8(item: dict[str, Any], lang: str) -> go.Figure:
    budget = item["lab"]["budget"]
    fig = go.Figure(
        [
            go.Scatter(
                x=[p["requests"] for p in budget[c]],
                y=[p["verify_budget"] for p in budget[c]],
                name=T(label, lang),
                mode="lines+markers",
            )
            for c, label in CURVES
        ]
    )
    fig.update_xaxes(title=T("requests", lang), type="log")
    fig.update_yaxes(title=T("budget", lang), rangemode="tozero")
    return finish(fig, T("fig8_title", lang))


BUILDERS = {
    "table1": fig_table1,
    "fig2": fig_fig2,
    "fig3": fig_fig3,
    "fig4": fig_fig4,
    "fig5": fig_fig5,
    "fig6": fig_fig6,
    "fig7": fig_fig7,
    "fig8": fig_fig8,
}


def figure(item: dict[str, Any], lang: str) -> go.Figure:
    """The plotly figure of one item (Table 1's bars, Figures 2–8)."""
    return BUILDERS[item["item"]](item, lang)


def png_name(name: str, lang: str) -> str:
    return f"{name}.png" if lang == "en" else f"{name}.{lang}.png"


def draw_all(items: dict[str, dict[str, Any]], out: Path) -> tuple[list[Path], str | None]:
    """Every figure as a PNG in both languages (name.png, name.vi.png) in `out`. → (paths, why none were drawn)"""
    from dspark_mini.files import write_atomic

    from ..present.pictures import find_chromium

    try:
        chromium = find_chromium()
        from playwright.sync_api import sync_playwright
    except (OSError, ImportError) as e:
        return [], str(e)
    paths = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        page = browser.new_page(viewport=SIZE)
        for name, item in items.items():
            if name not in BUILDERS:
                continue
            for lang in ("en", "vi"):
                fig = figure(item, lang).update_layout(**SIZE)
                page.set_content(fig.to_html(include_plotlyjs=True, full_html=True, config={"staticPlot": True}))
                page.wait_for_selector(".main-svg")
                path = out / png_name(name, lang)
                write_atomic(path, page.locator(".plotly-graph-div").screenshot())
                paths.append(path)
        browser.close()
    return paths, None

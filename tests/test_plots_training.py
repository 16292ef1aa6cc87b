"""The figures of notebook 07 (screens/plots_training.py, from `target_curve` on): built from a small synthetic report
with known numbers, they draw exactly those numbers, in both languages; a report without what a figure needs raises
ValueError naming what is allowed; the shipped report draws without error."""

from __future__ import annotations

import math

import plotly.graph_objects as go
import pytest

from lab.screens import plots_training
from lab.text import LANGS
from lab.weights import report as shipped_report


def quality(tau_t1: float, tau_greedy: float, cond: list[float | None], ratio: float, sweep: bool = False) -> dict:
    row = {
        "t1": {"tau": tau_t1, "cond_accept": cond, "cum_accept": cond, "mean_confidence": [math.nan] * len(cond)},
        "greedy": {"tau": tau_greedy, "cond_accept": [c and c / 2 for c in cond], "cum_accept": cond},
        "speed": {"plain_tok_s": 10.0, "spec_tok_s": 10.0 * ratio, "ratio": ratio},
    }
    if sweep:
        row["threshold_sweep"] = [
            {"threshold": 0.0, "verified_per_round": 4.0, "tau": tau_t1, "verify_rate": tau_t1 / 4},
            {"threshold": 0.5, "verified_per_round": 2.0, "tau": 1.5, "verify_rate": 0.75},
        ]
    return row


@pytest.fixture
def report() -> dict:
    """Two domains, three drafters (k = 3, MTP-1 k = 1); DSpark ÷ DFlash = 1.25 (T = 1) and 1.5 (greedy)."""
    return {
        "seconds": {"target": 12.4},
        "target": {
            "steps": 30,
            "curve": {"val_steps": [10, 20, 30], "val_loss": [3.0, 2.0, 1.5], "val_accuracy": [0.2, 0.4, 0.5]},
        },
        "drafters": {
            "dspark": {
                "train": {
                    "sts": [
                        {
                            "position": 1,
                            "temperature": 1.1,
                            "ece_before": 0.04,
                            "ece_after": 0.02,
                            "predicted_before": 0.6,
                            "predicted_after": 0.61,
                            "observed": 0.62,
                            "n": 50,
                        },
                        {
                            "position": 2,
                            "temperature": 2.5,
                            "ece_before": 0.03,
                            "ece_after": 0.01,
                            "predicted_before": 0.3,
                            "predicted_after": 0.32,
                            "observed": 0.33,
                        },
                    ]
                },
                "heldout_calibration": [
                    {"position": 1, "ece_raw": 0.05, "ece_sts": 0.07, "n": 40},
                    {"position": 2, "ece_raw": 0.06, "ece_sts": 0.04, "n": 40},
                ],
                "quality": {
                    "en": quality(2.5, 3.0, [0.6, 0.5, 0.4], 1.2, sweep=True),
                    "vi": quality(2.5, 3.0, [0.7, None, None], 1.4, sweep=True),
                },
            },
            "dflash": {
                "train": {},
                "quality": {
                    "en": quality(2.0, 2.0, [0.5, 0.3, 0.2], 1.1),
                    "vi": quality(2.0, 2.0, [0.6, 0.4, 0.1], 1.3),
                },
            },
            "mtp1": {
                "train": {},
                "quality": {"en": quality(1.5, 1.75, [0.5], 1.5), "vi": quality(1.75, 1.5, [0.75], 1.6)},
            },
        },
        "conditions": {"cpu": "Test CPU", "threads": 1, "torch": "2.x", "speed_prompts": 2, "max_new_tokens": 48},
    }


def all_figures(rep: dict, lang: str) -> list[go.Figure]:
    return [
        plots_training.target_curve(rep, lang),
        plots_training.tau_bars(rep, lang),
        plots_training.cond_accept_lines(rep, lang, "t1"),
        plots_training.cond_accept_lines(rep, lang, "greedy"),
        plots_training.threshold_sweep_chart(rep, "dspark", lang),
        plots_training.sts_ece_bars(rep, "dspark", lang),
        plots_training.speed_bars(rep, lang),
    ]


@pytest.mark.parametrize("lang", LANGS)
def test_every_figure_builds_in_both_languages(report, lang):
    for fig in all_figures(report, lang):
        assert isinstance(fig, go.Figure) and fig.layout.title.text
        assert fig.layout.template.layout.paper_bgcolor == "white"  # plotly_white
        assert "http" not in fig.to_json()  # no hot links


def test_titles_and_labels_follow_the_language(report):
    en, vi = all_figures(report, "en"), all_figures(report, "vi")
    for a, b in zip(en, vi, strict=True):
        assert a.layout.title.text != b.layout.title.text
    assert en[1].layout.title.text.startswith("Accepted length τ per round")
    assert vi[1].layout.title.text.startswith("Độ dài được giữ τ mỗi vòng")
    assert [a.text for a in vi[2].layout.annotations] == ["tiếng Anh", "tiếng Việt"]  # subplot titles: the domains
    assert list(vi[1].data[0].x) == ["tiếng Anh", "tiếng Việt", "trung bình"]
    assert "Hình 2" in vi[2].layout.title.text and "Figure 2" in en[2].layout.title.text
    assert "greedy (T = 0)" in en[3].layout.title.text


def test_tau_bars_draw_tau_per_domain_and_the_mean(report):
    fig = plots_training.tau_bars(report, "en")
    assert len(fig.data) == 2 * 3  # two temperatures × three drafters
    first = fig.data[0]  # DSpark at T = 1
    assert first.name == "DSpark" and list(first.x) == ["English", "Vietnamese", "mean"]
    assert list(first.y) == [2.5, 2.5, 2.5]
    mtp1_greedy = fig.data[5]
    assert mtp1_greedy.name == "MTP-1" and list(mtp1_greedy.y) == pytest.approx([1.75, 1.5, 1.625])
    assert [t.showlegend for t in fig.data] == [True] * 3 + [False] * 3  # one legend entry per drafter
    assert fig.layout.meta["dspark_over_dflash"] == pytest.approx({"t1": 1.25, "greedy": 1.5})
    assert "DSpark ÷ DFlash: 1.25 (T = 1), 1.50 (greedy)" in fig.layout.title.text
    assert plots_training.mean_tau(report, "mtp1", "t1") == pytest.approx(1.625)


def test_tau_bars_without_dspark_or_dflash_have_no_ratio(report):
    del report["drafters"]["dflash"]
    fig = plots_training.tau_bars(report, "en")
    assert fig.layout.meta is None and "÷" not in fig.layout.title.text


def test_cond_accept_lines_one_panel_per_domain_one_line_per_drafter(report):
    fig = plots_training.cond_accept_lines(report, "en", "t1")
    assert len(fig.data) == 2 * 3
    by = {(t.name, t.xaxis): t for t in fig.data}
    math_dspark, chat_dspark = by["DSpark", "x"], by["DSpark", "x2"]
    assert list(math_dspark.x) == [1, 2, 3] and list(math_dspark.y) == [0.6, 0.5, 0.4]
    assert list(chat_dspark.y) == [0.7, None, None]  # positions never reached: gaps
    assert list(by["MTP-1", "x"].x) == [1] and list(by["MTP-1", "x"].y) == [0.5]  # one draft token: one point
    greedy = plots_training.cond_accept_lines(report, "en", "greedy")
    assert list(greedy.data[0].y) == [0.3, 0.25, 0.2]
    assert greedy.layout.yaxis.range == (0, 1.05)


def test_threshold_sweep_chart_draws_slots_tau_and_rate(report):
    fig = plots_training.threshold_sweep_chart(report, "dspark", "en")
    assert len(fig.data) == 2 * 3  # per domain: verified slots, τ (bars), verify rate (line)
    verified, tau, rate = fig.data[:3]
    assert isinstance(verified, go.Bar) and list(verified.x) == [0.0, 0.5] and list(verified.y) == [4.0, 2.0]
    assert list(tau.y) == [2.5, 1.5] and list(rate.y) == [0.625, 0.75]
    assert isinstance(rate, go.Scatter) and rate.yaxis == "y2"  # the rate sits on the right axis
    assert fig.layout.barmode == "overlay"
    assert "DSpark" in fig.layout.title.text and "Figure 5" in fig.layout.title.text


def test_sts_ece_bars_fit_rounds_and_held_out_rounds(report):
    fig = plots_training.sts_ece_bars(report, "dspark", "en")
    before, after, held_raw, held_sts = fig.data
    assert list(before.x) == [1, 2] and list(before.y) == [0.04, 0.03]
    assert list(after.y) == [0.02, 0.01] and list(after.text) == ["T = 1.1", "T = 2.5"]
    assert list(held_raw.x) == [1, 2] and list(held_raw.y) == [0.05, 0.06] and list(held_raw.customdata) == [40, 40]
    assert list(held_sts.y) == [0.07, 0.04] and held_sts.name == "ECE after STS (held-out rounds)"
    assert held_raw.marker.pattern.shape == "/"  # held-out bars are hatched
    assert "DSpark" in fig.layout.title.text
    assert "fitted on 50 calibration rounds; held out: 40 rounds" in fig.layout.title.text
    assert "50 vòng hiệu chuẩn" in plots_training.sts_ece_bars(report, "dspark", "vi").layout.title.text


def test_sts_ece_bars_without_held_out_rounds_draws_the_fit_only(report):
    del report["drafters"]["dspark"]["heldout_calibration"]
    fig = plots_training.sts_ece_bars(report, "dspark", "en")
    assert [t.name for t in fig.data] == [
        "ECE before STS (fit rounds)",
        "ECE after STS (fit rounds; label: temperature T_i)",
    ]
    assert "<sup>" not in fig.layout.title.text


def test_sts_ece_bars_held_out_rounds_must_match_the_positions(report):
    report["drafters"]["dspark"]["heldout_calibration"].pop()
    with pytest.raises(ValueError, match=r"heldout_calibration of 'dspark'.*allowed positions \[1, 2\]"):
        plots_training.sts_ece_bars(report, "dspark", "en")


def test_speed_bars_ratio_per_domain_and_conditions(report):
    fig = plots_training.speed_bars(report, "en")
    assert [t.name for t in fig.data] == ["DSpark", "DFlash", "MTP-1"]
    assert list(fig.data[0].y) == pytest.approx([1.2, 1.4, 1.3])
    assert list(fig.data[0].customdata[0]) == pytest.approx([10.0, 12.0])  # plain, speculative tokens/s
    assert [s.y0 for s in fig.layout.shapes] == [1.0]  # the plain-decoding line
    assert "cpu Test CPU, threads 1" in fig.layout.title.text


def test_target_curve_loss_left_accuracy_right(report):
    fig = plots_training.target_curve(report, "en")
    loss, acc = fig.data
    assert list(loss.x) == [10, 20, 30] and list(loss.y) == [3.0, 2.0, 1.5] and loss.yaxis == "y"
    assert list(acc.y) == [0.2, 0.4, 0.5] and acc.yaxis == "y2"
    assert "(30 steps, 12 s)" in fig.layout.title.text
    assert "(30 bước, 12 s)" in plots_training.target_curve(report, "vi").layout.title.text


@pytest.mark.parametrize("bad", [None, {}, {"drafters": {}}, {"drafters": {"dspark": {"quality": {}}}}])
def test_a_report_without_drafters_raises_naming_the_source(bad):
    with pytest.raises(ValueError, match="lab.weights.report"):
        plots_training.tau_bars(bad, "en")
    with pytest.raises(ValueError, match="lab.weights.report"):
        plots_training.cond_accept_lines(bad, "en")


def test_bad_arguments_raise_naming_what_is_allowed(report):
    with pytest.raises(ValueError, match="has no 'threshold_sweep'.*allowed 'dspark'"):
        plots_training.threshold_sweep_chart(report, "dflash", "en")
    with pytest.raises(ValueError, match="has no 'sts'.*allowed 'dspark'"):
        plots_training.sts_ece_bars(report, "mtp1", "en")
    with pytest.raises(ValueError, match="label = 'T1'.*allowed 't1', 'greedy'"):
        plots_training.cond_accept_lines(report, "en", "T1")
    with pytest.raises(ValueError, match="unknown language"):
        plots_training.tau_bars(report, "fr")
    with pytest.raises(ValueError, match="target.curve"):
        plots_training.target_curve({"drafters": report["drafters"]}, "en")
    del report["drafters"]["mtp1"]["quality"]["vi"]["speed"]
    with pytest.raises(ValueError, match="tokens/s"):
        plots_training.speed_bars(report, "en")


@pytest.mark.parametrize("lang", LANGS)
def test_the_shipped_report_draws(lang):
    rep = shipped_report()
    figs = all_figures(rep, lang) + [plots_training.sts_ece_bars(rep, "dspark-rnn", lang)]
    assert len(figs[1].data) == 2 * len(rep["drafters"])
    held = rep["drafters"]["dspark"]["heldout_calibration"]
    assert list(figs[5].data[3].y) == [h["ece_sts"] for h in held]  # the held-out ECE is drawn as recorded
    assert figs[1].layout.meta["dspark_over_dflash"]["t1"] == pytest.approx(rep["summary"]["dspark_over_dflash"]["t1"])

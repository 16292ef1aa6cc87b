"""One JSON record per item of the paper (Table 1, Figures 2–8, Appendix A): the lab's numbers, the paper's
beside them (lab/paper/paper_values.json) with the section they come from, and the run's conditions.

Derived numbers of the paper (domain means of Table 1, gains, column means of Figure 3) are computed here from
the transcribed table values, never typed.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..realtext import DOMAINS
from ..weights import DRAFTERS
from . import measure
from .variants import Variant


def mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs)


def record(name: str, paper: dict[str, Any], lab: dict[str, Any], conditions: dict[str, Any]) -> dict[str, Any]:
    return {"item": name, "section": paper["section"], "paper": paper, "lab": lab, "conditions": conditions}


def paper_domain_means(t1: dict[str, Any]) -> dict[str, dict[str, dict[str, float]]]:
    """Table 1 of the paper per target, drafter and paper domain (math, code, chat: its own, never the lab's): the
    mean over the domain's benchmarks."""
    idx = {b: i for i, b in enumerate(t1["benchmarks"])}
    return {
        target: {
            drafter: {d: mean([row[idx[b]] for b in bs]) for d, bs in t1["domains"].items()} | {"mean": mean(row)}
            for drafter, row in rows.items()
        }
        for target, rows in t1["targets"].items()
    }


def table1(res: dict[str, Any], paper: dict[str, Any], cond: dict[str, Any]) -> dict[str, Any]:
    lab: dict[str, Any] = {"tau": {}}
    for name in DRAFTERS:
        rows = res["shipped"][name]["domains"]
        by = {d: {"t1": rows[d]["t1"]["tau"], "greedy": rows[d]["greedy"]["tau"]} for d in DOMAINS}
        by["mean"] = {t: mean([by[d][t] for d in DOMAINS]) for t in ("t1", "greedy")}
        lab["tau"][name] = by
    tau = lab["tau"]
    lab["ratios"] = {
        f"{a}/{b}": {t: tau[a]["mean"][t] / tau[b]["mean"][t] for t in ("t1", "greedy")}
        for a, b in (("dspark", "dflash"), ("dspark", "eagle3"), ("dflash", "eagle3"))
    }
    means = paper_domain_means(paper)
    paper = {**paper, "domain_means": means}
    paper["ratios"] = {
        target: {
            f"{a}/{b}": m[a]["mean"] / m[b]["mean"]
            for a, b in (("dspark", "dflash"), ("dspark", "eagle3"), ("dflash", "eagle3"))
        }
        for target, m in means.items()
    }
    return record("table1", paper, lab, cond)


def fig2(res: dict[str, Any], paper: dict[str, Any], cond: dict[str, Any]) -> dict[str, Any]:
    lab = {
        t: {d: {n: res["shipped"][n]["domains"][d][t]["cond_accept"] for n in DRAFTERS} for d in DOMAINS}
        for t in ("t1", "greedy")
    }
    return record("fig2", paper, {"cond_accept": lab}, cond)


def fig3(res: dict[str, Any], paper: dict[str, Any], cond: dict[str, Any], depth: int, block: int) -> dict[str, Any]:
    runs = {}
    for layers in res["depths"]:
        runs[f"dspark_{layers}L"] = res["variants"][Variant("dspark", layers, block).name]
    df = res["dflash_depth"]
    runs[f"dflash_{df}L"] = res["variants"][Variant("dflash", df, block).name]
    lab = {
        "depth": depth,
        "dflash_depth": df,
        "block": block,
        "layers": res["depths"],
        "tau": {n: r["tau"] | {"mean": mean_tau(r["tau"])} for n, r in runs.items()},
        "runs": {n: training_record(r) for n, r in runs.items()},
    }
    cols = paper["columns"]
    paper = {**paper, "column_means": {c: mean([v[i] for v in paper["tau"].values()]) for i, c in enumerate(cols)}}
    return record("fig3", paper, lab, cond)


def fig4(res: dict[str, Any], paper: dict[str, Any], cond: dict[str, Any], depth: int) -> dict[str, Any]:
    n = res["dflash_depth"]
    lab: dict[str, Any] = {"depth": depth, "dflash_depth": n, "blocks": res["blocks"], "tau": {}, "gain_percent": {}}
    lab["runs"] = {}
    for k in res["blocks"]:
        ds, df = res["variants"][Variant("dspark", depth, k).name], res["variants"][Variant("dflash", n, k).name]
        lab["tau"][str(k)] = {
            "dspark": ds["tau"] | {"mean": mean_tau(ds["tau"])},
            "dflash": df["tau"] | {"mean": mean_tau(df["tau"])},
        }
        lab["gain_percent"][str(k)] = {
            t: {d: 100 * (ds["tau"][d][t] / df["tau"][d][t] - 1) for d in DOMAINS} for t in ("t1", "greedy")
        }
        lab["runs"][str(k)] = {"dspark": training_record(ds), "dflash": training_record(df)}
    return record("fig4", paper, lab, cond)


def mean_tau(tau: dict[str, dict[str, float]]) -> dict[str, float]:
    return {t: mean([tau[d][t] for d in DOMAINS]) for t in ("t1", "greedy")}


def training_record(r: dict[str, Any]) -> dict[str, Any]:
    keys = (
        "kind",
        "layers",
        "block",
        "draft_parameters",
        "target_cache_hash",
        "steps",
        "tokens_seen",
        "train_seconds",
        "eval_seconds",
        "final_loss",
    )
    return {k: r[k] for k in keys}


def fig5(res: dict[str, Any], paper: dict[str, Any], cond: dict[str, Any]) -> dict[str, Any]:
    rows = res["shipped"]["dspark"]["domains"]
    sweep = {d: rows[d]["threshold_sweep"] for d in DOMAINS}
    lab = {
        "drafter": "dspark",
        "temperature": 1.0,
        "sweep": sweep,
        "verified_non_increasing": {
            d: all(a["verified_per_round"] >= b["verified_per_round"] for a, b in zip(s, s[1:], strict=False))
            for d, s in sweep.items()
        },
        "verify_rate_non_decreasing": {
            d: all(a["verify_rate"] <= b["verify_rate"] + 1e-12 for a, b in zip(s, s[1:], strict=False))
            for d, s in sweep.items()
        },
    }
    return record("fig5", paper, lab, cond)


def fig6(res: dict[str, Any], paper: dict[str, Any], cond: dict[str, Any]) -> dict[str, Any]:
    rel = res["shipped"]["dspark"].get("reliability")
    lab = {"drafter": "dspark", "held_out": "the evaluation's rounds (seed 0); STS was fitted on seed 1", **(rel or {})}
    return record("fig6", paper, lab, cond)


def fig7(curves: dict[str, Any], sim_cond: dict[str, Any], paper: dict[str, Any], cond: dict[str, Any]):
    gains = {p: measure.matched_gain(curves[f"dspark/{p}"], curves["mtp1"]) for p in ("dspark", "dspark-async")}
    lab = {
        "curves": curves,
        "matched_gain": gains,
        "gain_range_percent": {
            p: [100 * min(g["gain"] for g in gs), 100 * max(g["gain"] for g in gs)] if gs else None
            for p, gs in gains.items()
        },
        "simulation": sim_cond,
    }
    return record("fig7", paper, lab, cond)


def fig8(curves: dict[str, Any], sim_cond: dict[str, Any], paper: dict[str, Any], cond: dict[str, Any]):
    lab = {
        "budget": {
            name: [{"requests": p["requests"], "verify_budget": p["verify_budget"]} for p in pts]
            for name, pts in curves.items()
        },
        "simulation": sim_cond,
    }
    return record("fig8", paper, lab, cond)


def appendix(paper: dict[str, Any], cond: dict[str, Any], samples: int, seed: int) -> dict[str, Any]:
    return record("appendix_a", paper, measure.appendix_a(paper, samples, seed), cond)

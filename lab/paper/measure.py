"""The paper's measurements on the shipped set: Table 1, Figures 2, 5 and 6 (held-out prompts, batch 1, fixed
block, no scheduler), Figures 7 and 8 (the load simulation on the shipped SPS table) and Appendix A (the
scheduler's own Θ path). Every number here is computed by the lab's code — lab.evaluation.quality,
lab.evaluation.calibration, lab.serving.simulate, dspark_mini.scheduler — never typed.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from dspark_mini.scheduler import RETROSPECTIVE, Scheduler, greedy_path, path_throughput, survival
from dspark_mini.speculative import generate_speculative, verify_block

from ..evaluation.calibration import ece, prefix_labels, to_logits
from ..evaluation.quality import eval_prompts, heldout_calibration, quality
from ..realtext import DOMAINS
from ..serving.simulate import Row, record_streams, simulate
from ..serving.sps import SPSTable
from ..weights import load_drafter

RELIABILITY_BINS = 10  # equal-width bins of the reliability diagram (the ECE itself uses calibration.ece's 20)


def shipped_quality(name: str, weights_dir: str | None, prompts: int, max_new_tokens: int, seed: int) -> dict:
    """τ and acceptance per domain at T = 1 and greedy of one shipped drafter (`quality`, batch 1, the trained
    block verified whole); for the DSpark drafter also its threshold sweep and the STS reliability (Fig. 6)."""
    model, drafter = load_drafter(name, weights_dir)
    rows = quality(model, drafter, DOMAINS, prompts, max_new_tokens, seed, keep_rounds=drafter.has_confidence)
    out: dict[str, Any] = {"domains": {}}
    rounds = []
    for domain, row in rows.items():
        rounds += row.pop("rounds_t1", [])
        out["domains"][domain] = row
    if drafter.has_confidence and rounds:
        out["reliability"] = reliability(rounds, model.mtp.confidence_temperatures)
    return out


def reliability(rounds: Sequence[Any], temperatures: Sequence[float] | None) -> dict[str, Any]:
    """Figure 6 on held-out rounds (the STS temperatures were fitted on another held-out seed): per position the
    ECE of the raw and of the STS survival (`heldout_calibration`), and the reliability diagram of both: per bin
    of predicted survival, the mean prediction, the observed "drafts 1..i kept" rate and the count."""
    ece_rows = heldout_calibration(rounds, temperatures)
    k = max(r.verify_len for r in rounds)
    full = [r for r in rounds if r.verify_len == k]
    conf = torch.tensor([r.confidence for r in full], dtype=torch.float64)  # [N, k] as reported (after STS)
    kept = torch.tensor([r.n_accepted for r in full])  # [N]
    temps = torch.tensor(list(temperatures) if temperatures is not None else [1.0] * k, dtype=torch.float64)[:k]
    raw = torch.sigmoid(to_logits(conf) * temps)  # [N, k] the head before STS (logits times T_i back)
    label = prefix_labels(kept, k)  # [N, k]: drafts 1..i all kept
    curves = {"raw": survival(raw), "sts": survival(conf)}  # [N, k] each
    diagram = {name: [bins(a[:, i], label[:, i], RELIABILITY_BINS) for i in range(k)] for name, a in curves.items()}
    check = [
        {
            "position": i + 1,
            "ece_raw": ece(curves["raw"][:, i], label[:, i]),
            "ece_sts": ece(curves["sts"][:, i], label[:, i]),
        }
        for i in range(k)
    ]
    return {
        "temperatures": temps.tolist(),
        "rounds": len(full),
        "ece": ece_rows,
        "ece_recomputed": check,
        "diagram": diagram,
    }


def bins(pred: torch.Tensor, label: torch.Tensor, n_bins: int) -> list[dict[str, float]]:
    """The non-empty equal-width bins of predictions in [0, 1]: mean prediction, observed rate, count."""
    b = (pred * n_bins).long().clamp(0, n_bins - 1)
    out = []
    for i in range(n_bins):
        m = b == i
        if bool(m.any()):
            out.append(
                {
                    "bin": i,
                    "predicted": float(pred[m].mean()),
                    "observed": float(label[m].double().mean()),
                    "n": int(m.sum()),
                }
            )
    return out


# ---- Figures 7 and 8: the load simulation ------------------------------------------------------------------
def mtp1_streams(weights_dir: str | None, prompts: int, max_new_tokens: int, seed: int) -> list[list[Row]]:
    """MTP-1's rounds as simulation rows: one draft, verified every round (confidence 1: MTP-1 has no head, and
    the fixed policy it serves under reads none); one stream per held-out prompt, batch 1, temperature 1."""
    model, drafter = load_drafter("mtp1", weights_dir)
    streams = []
    for domain in DOMAINS:
        p = eval_prompts(domain, prompts, seed=seed)  # [n, L]
        for i in range(p.size(0)):
            res = generate_speculative(model, p[i : i + 1], max_new_tokens, None, 1.0, seed + i, drafter=drafter)
            rows = [Row((1.0,), r.n_accepted) for r in res.rows(0) if r.verify_len == 1]
            if rows:
                streams.append(rows)
    return streams


def dspark_streams(weights_dir: str | None, prompts: int, max_new_tokens: int, seed: int) -> list[list[Row]]:
    """The shipped DSpark drafter's rounds (its STS-calibrated confidences, the full block verified)."""
    model, drafter = load_drafter("dspark", weights_dir)
    return record_streams(model, drafter, None, prompts, max_new_tokens, 1.0, seed)


def load_curves(
    ds_streams: list, mtp_streams: list, table: SPSTable, requests: Sequence[int], rounds: int, seed: int
) -> dict[str, Any]:
    """Per R: aggregate tokens/s (all requests), per-user tokens/s (÷ R) and the mean verify budget per request
    (1 + mean ℓ: the anchor slot and the verified drafts) of DSpark under Algorithm 1 (dspark), its production
    variant (dspark-async) and the full block (fixed), and of MTP-1 (one draft, always verified)."""
    ds = simulate(ds_streams, {"measured": table}, ("dspark", "dspark-async", "fixed"), requests, rounds, seed)
    mtp = simulate(mtp_streams, {"measured": table}, ("fixed",), requests, rounds, seed)
    curves = {f"dspark/{p}": ds["measured"][p] for p in ("dspark", "dspark-async", "fixed")}
    curves["mtp1"] = mtp["measured"]["fixed"]
    out = {}
    for name, by_r in curves.items():
        out[name] = [
            {
                "requests": int(r),
                "aggregate_tok_s": v["throughput"],
                "per_user_tok_s": v["throughput"] / int(r),
                "verify_budget": 1.0 + v["mean_verify_len"],
                "tau": v["tau"],
            }
            for r, v in sorted(by_r.items(), key=lambda kv: int(kv[0]))
        ]
    return out


def matched_gain(curve: list[dict[str, float]], base: list[dict[str, float]]) -> list[dict[str, float]]:
    """Per-user gain of `curve` over `base` at the same aggregate throughput: for each point of `base` whose
    aggregate lies inside `curve`'s range, `curve`'s per-user speed interpolated there (linear in log aggregate
    between its two neighbouring points) ÷ base's per-user speed − 1."""
    pts = sorted((math.log(p["aggregate_tok_s"]), p["per_user_tok_s"]) for p in curve)
    out = []
    for b in base:
        x = math.log(b["aggregate_tok_s"])
        for (x0, y0), (x1, y1) in zip(pts, pts[1:], strict=False):
            if x0 <= x <= x1:
                y = y0 if x1 == x0 else y0 + (y1 - y0) * (x - x0) / (x1 - x0)
                out.append(
                    {
                        "requests": b["requests"],
                        "aggregate_tok_s": b["aggregate_tok_s"],
                        "per_user_base": b["per_user_tok_s"],
                        "per_user": y,
                        "gain": y / b["per_user_tok_s"] - 1.0,
                    }
                )
                break
    return out


# ---- Appendix A --------------------------------------------------------------------------------------------
def appendix_a(values: dict[str, Any], samples: int = 20_000, seed: int = 0) -> dict[str, Any]:
    """The paper's counterexample run through the lab's scheduler: the Θ path of each branch (x1 = A or B),
    the verify length each policy picks, and the first output token's distribution — exactly (rejection sampling
    written out: accept x1 with min(1, p_t/p_d), else draw from the residual; ℓ = 0 draws from p_t) and sampled
    with the lab's verifier (`verify_block`, `samples` seeded draws)."""
    table = SPSTable(values["batch_tokens"], values["steps_per_s"], name="appendix-a")
    p_t = torch.tensor(values["p_t"], dtype=torch.float64)
    p_d = torch.tensor(values["p_d"], dtype=torch.float64)
    branches = {}
    for tok, c2 in values["c2"].items():
        conf = torch.tensor([[values["c1"], c2]], dtype=torch.float64)  # [R = 1, k = 2]
        _, v = greedy_path(survival(conf))
        theta = path_throughput(v, 1, table)  # [3]: Θ_0, Θ_1, Θ_2
        plans = {p: int(Scheduler(p, 2, table).plan(conf).lengths[0]) for p in ("dspark", RETROSPECTIVE)}
        branches[tok] = {"c2": c2, "theta": theta.tolist(), "verify_len": plans}
    out: dict[str, Any] = {"branches": branches, "policies": {}}
    gen = torch.Generator().manual_seed(seed)
    for policy in ("dspark", RETROSPECTIVE):
        ells = [branches[t]["verify_len"][policy] for t in ("A", "B")]  # ℓ after x1 = A (id 0), x1 = B (id 1)
        out["policies"][policy] = {
            "verify_len": dict(zip(("A", "B"), ells, strict=True)),
            "exact": first_token_law(ells, p_d, p_t).tolist(),
            "sampled": sampled_law(ells, p_d, p_t, samples, gen).tolist(),
            "samples": samples,
        }
    return out


def first_token_law(ells: Sequence[int], p_d: torch.Tensor, p_t: torch.Tensor) -> torch.Tensor:
    """P(first output token) when x1 ~ p_d and x1 is verified iff ℓ(x1) ≥ 1.  → [V]"""
    residual = (p_t - p_d).clamp(min=0)
    residual = residual / residual.sum() if float(residual.sum()) > 0 else p_t
    out = torch.zeros_like(p_t)
    for x, ell in enumerate(ells):
        if ell >= 1:
            keep = min(1.0, float(p_t[x] / p_d[x]))
            out[x] += p_d[x] * keep
            out += p_d[x] * (1 - keep) * residual
        else:
            out += p_d[x] * p_t
    return out


def sampled_law(ells: Sequence[int], p_d: torch.Tensor, p_t: torch.Tensor, n: int, gen: torch.Generator):
    """The same law by sampling through the lab's verifier (`verify_block` over the ℓ verified drafts)."""
    counts = torch.zeros_like(p_t)
    x1s = torch.multinomial(p_d, n, replacement=True, generator=gen)
    for x1 in x1s.tolist():
        ell = ells[x1]
        tokens = torch.tensor([x1])[:ell]
        v = verify_block(tokens, p_d[None].expand(ell, -1), p_t[None].expand(ell + 1, -1), gen)
        counts[x1 if v.n_accepted >= 1 else v.next_token] += 1
    return counts / n

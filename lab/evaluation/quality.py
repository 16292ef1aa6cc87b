"""A mini DeepSpec evaluation: accepted length τ per domain per drafter, conditional acceptance per position,
a static confidence-threshold sweep, and wall-clock tokens/s of plain vs speculative decoding.

Prompts are held-out lines of each domain of the real-text corpus (English and Vietnamese prose, code, sums:
the documents of its `test` split, which training never reads), the first `prompt_tokens` tokens of a line.
τ counts the target's own token (kept drafts + 1), as in the paper's Table 1. Conditional acceptance at
position i = P(draft i kept | drafts 1..i−1 kept) (the paper's Figure 2); cumulative = P(drafts 1..i all kept).

The threshold sweep (Figure 5) is read off the recorded rounds: a static threshold t verifies only the prefix
up to the first position with c_i < t. Whether draft i is kept depends only on positions ≤ i, so a round
truncated at ℓ keeps min(n, ℓ) drafts — exactly what running with the threshold would give for that round
(the rounds after it would differ, which changes which contexts are seen, not these statistics' meaning).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from typing import Any

import torch

from dspark_mini.drafters import Drafter
from dspark_mini.speculative import Round, acceptance_stats, generate_plain, generate_speculative
from dspark_mini.tokenizer import default_tokenizer
from dspark_mini.validate import check_int

from ..realtext import DOMAINS, check_domain
from ..realtext import prompts as held_out_lines

THRESHOLDS = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9)
N_PROMPTS = 12  # held-out prompts per domain (README, training/rebuild.py Recipe.eval_prompts)
MAX_NEW_TOKENS = 40  # new tokens per prompt (README, training/rebuild.py Recipe.max_new_tokens)
PROMPT_TOKENS = 16  # tokens of one held-out prompt
# short prompts outside every corpus template (bench/bench.py measures speculative ÷ plain on the same ones)
FREE_FORM = ("hello", "the cat", "x =", "why", "Xin chào", "def f(", "1 + 1 =", "once upon a time")


def eval_prompts(
    domain: str, n: int, prompt_tokens: int = PROMPT_TOKENS, seed: int = 0, split: str = "test"
) -> torch.Tensor:
    """n held-out prompts of one domain: the first `prompt_tokens` ids of lines of the corpus's held-out documents
    (`test`; the STS calibration reads `val`), drawn by `seed`.  → [n, L]"""
    check_domain(domain)
    for name, v in (("n", n), ("prompt_tokens", prompt_tokens)):
        check_int(v, name, 1)
    return held_out_lines(domain, n, prompt_tokens, seed, split)


def collect_rounds(
    model,
    drafter: Drafter,
    prompts: torch.Tensor,
    max_new_tokens: int,
    temperature: float,
    seed: int = 0,
    batch: int = 1,
    verify_len: int | None = None,
) -> list[Round]:
    """Every round of every prompt, `batch` prompts at a time (see `quality` for why 1 is the honest choice)."""
    rounds: list[Round] = []
    for i in range(0, prompts.size(0), batch):
        res = generate_speculative(
            model, prompts[i : i + batch], max_new_tokens, verify_len, temperature, seed + i, drafter=drafter
        )
        rounds += [r for rs in res.rounds for r in rs]
    return rounds


def summarize(rounds: Sequence[Round]) -> dict[str, Any]:
    """τ, conditional and cumulative acceptance per position, mean confidence per position."""
    st = acceptance_stats(list(rounds))
    per = st["per_position"]
    return {
        "tau": st["mean_accepted_length"],
        "rounds": st["rounds"],
        "cond_accept": [p["cond_accept"] for p in per],
        "cum_accept": [p["cum_accept"] for p in per],
        "mean_confidence": [p["mean_confidence"] for p in per],
    }


def threshold_sweep(rounds: Sequence[Round], thresholds: Sequence[float] = THRESHOLDS) -> list[dict[str, float]]:
    """Static confidence threshold t: verify drafts up to the first c_i < t.  Per t: verified slots per round
    (kept-for-verify drafts + 1), τ, and the verify rate τ / verified."""
    out = []
    for t in thresholds:
        verified = accepted = 0
        for r in rounds:
            ell = next((i for i, c in enumerate(r.confidence) if c < t), r.verify_len)
            verified += ell + 1
            accepted += min(r.n_accepted, ell) + 1
        n = max(1, len(rounds))
        out.append(
            {
                "threshold": t,
                "verified_per_round": verified / n,
                "tau": accepted / n,
                "verify_rate": accepted / verified if verified else 0.0,
            }
        )
    return out


def speed(
    model,
    drafter: Drafter,
    prompts: torch.Tensor,
    max_new_tokens: int,
    verify_len: int | None = None,
) -> dict[str, float]:
    """Greedy, batch 1, prompt by prompt, plain and speculative interleaved: total new tokens / total seconds."""
    plain_s = spec_s = 0.0
    n = 0
    for i in range(prompts.size(0)):
        p = prompts[i : i + 1]
        t0 = time.perf_counter()
        a = generate_plain(model, p, max_new_tokens)
        plain_s += time.perf_counter() - t0
        t0 = time.perf_counter()
        b = generate_speculative(model, p, max_new_tokens, verify_len, drafter=drafter)
        spec_s += time.perf_counter() - t0
        if a.tokens != b.tokens:  # greedy speculative decoding is lossless in float64: anything else is a bug
            raise RuntimeError(f"speculative output differs from plain decoding on prompt {i}")
        n += max_new_tokens
    return {"plain_tok_s": n / plain_s, "spec_tok_s": n / spec_s, "ratio": plain_s / spec_s}


def quality(
    model,
    drafter: Drafter,
    domains: Sequence[str] = DOMAINS,
    n_prompts: int = N_PROMPTS,
    max_new_tokens: int = MAX_NEW_TOKENS,
    seed: int = 0,
    on_progress: Callable[[str], None] | None = None,
    batch: int = 1,
    keep_rounds: bool = False,
) -> dict[str, Any]:
    """Per domain: τ and acceptance at temperature 1 ("t1") and greedy ("greedy"); for drafters with a
    confidence head also the threshold sweep (temperature 1). Batch 1 by default, as DeepSpec's evaluator:
    in a batch every sequence commits the shortest verdict, so a sequence that kept more re-drafts text it has
    already drafted, which inflates its τ."""
    for name, v in (("n_prompts", n_prompts), ("max_new_tokens", max_new_tokens)):
        check_int(v, name, 1)
    out: dict[str, Any] = {}
    for domain in domains:
        if on_progress is not None:
            on_progress(domain)
        prompts = eval_prompts(domain, n_prompts, seed=seed)
        row: dict[str, Any] = {}
        for label, T in (("t1", 1.0), ("greedy", 0.0)):
            rounds = collect_rounds(model, drafter, prompts, max_new_tokens, T, seed, batch)
            row[label] = summarize(rounds)
            if label == "t1" and drafter.has_confidence:
                row["threshold_sweep"] = threshold_sweep(rounds)
                if keep_rounds:
                    row["rounds_t1"] = rounds  # for a pooled held-out calibration (not JSON: pop it)
        out[domain] = row
    return out


def free_form_quality(
    model, drafter: Drafter, max_new_tokens: int = MAX_NEW_TOKENS, seed: int = 0, texts: Sequence[str] = FREE_FORM
) -> dict[str, Any]:
    """τ and acceptance at temperature 1 ("t1") and greedy on short free-form prompts (batch 1, each prompt as
    many ids as it encodes to): what a learner types, where the corpus prompts are the training's own style."""
    tok = default_tokenizer()
    prompts = [torch.tensor([tok.encode(t)]) for t in texts]  # [1, n] each
    out: dict[str, Any] = {}
    for label, T in (("t1", 1.0), ("greedy", 0.0)):
        rounds = [r for p in prompts for r in collect_rounds(model, drafter, p, max_new_tokens, T, seed)]
        out[label] = summarize(rounds)
    return out


def heldout_calibration(rounds: Sequence[Round], temperatures: Sequence[float] | None) -> list[dict[str, Any]]:
    """Per position, on rounds the STS temperatures were *not* fitted on: the ECE of the survival the drafter
    reported (calibrated) and of the raw head's (logits multiplied back by T_i), against "drafts 1..i kept"."""
    from .calibration import calibration_report, to_logits

    full = [r for r in rounds if r.verify_len == max(x.verify_len for x in rounds)]
    conf = torch.tensor([r.confidence for r in full], dtype=torch.float64)  # [N, k] as reported
    kept = torch.tensor([r.n_accepted for r in full])
    k = conf.size(1)
    temps = list(temperatures) if temperatures is not None else [1.0] * k
    raw = torch.sigmoid(to_logits(conf) * torch.tensor(temps[:k], dtype=torch.float64))  # undo z / T_i
    shown = calibration_report(raw, kept, temps[:k])
    return [
        {"position": row["position"], "ece_raw": row["ece_before"], "ece_sts": row["ece_after"], "n": row["n"]}
        for row in shown
    ]


def calibration_rounds(
    model,
    drafter: Drafter,
    n_prompts: int = N_PROMPTS,
    max_new_tokens: int = MAX_NEW_TOKENS,
    seed: int = 1,
    batch: int = 1,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Held-out verified rounds at temperature 1 for STS (prompts of every domain from the `val` documents, not the
    evaluation's `test` ones): confidences [N, k] and kept drafts [N] of the rounds that proposed the full block."""
    conf, kept = [], []
    for domain in DOMAINS:
        prompts = eval_prompts(domain, n_prompts, seed=seed, split="val")
        for r in collect_rounds(model, drafter, prompts, max_new_tokens, 1.0, seed, batch):
            if r.verify_len == model.cfg.dspark_block_size:
                conf.append(r.confidence)
                kept.append(r.n_accepted)
    return torch.tensor(conf, dtype=torch.float64), torch.tensor(kept)


def evaluate_drafters(
    entries: dict[str, tuple[Any, Drafter]],
    domains: Sequence[str] = DOMAINS,
    n_prompts: int = N_PROMPTS,
    max_new_tokens: int = MAX_NEW_TOKENS,
    speed_prompts: int = 2,
    seed: int = 0,
    on_progress: Callable[[str], None] | None = None,
) -> dict[str, Any]:
    """Table 1 / Figure 2 / Figure 5 in miniature for every (name → (model, drafter)) entry: `quality` per
    domain, then tokens/s of plain vs speculative decoding (greedy, batch 1) per domain."""
    for name, v in (("n_prompts", n_prompts), ("max_new_tokens", max_new_tokens)):
        check_int(v, name, 1)
    check_int(speed_prompts, "speed_prompts", 1, n_prompts, "n_prompts", bare=True)
    report: dict[str, Any] = {"conditions": conditions(n_prompts, max_new_tokens, speed_prompts, seed), "drafters": {}}
    for name, (model, drafter) in entries.items():
        rows = quality(
            model,
            drafter,
            domains,
            n_prompts,
            max_new_tokens,
            seed,
            None if on_progress is None else (lambda d, name=name: on_progress(f"{name} · {d}")),
        )
        for domain in domains:
            rows[domain]["speed"] = speed(
                model, drafter, eval_prompts(domain, speed_prompts, seed=seed), max_new_tokens
            )
        report["drafters"][name] = rows
    return report


def conditions(n_prompts: int, max_new_tokens: int, speed_prompts: int, seed: int) -> dict[str, Any]:
    from .conditions import cpu_model

    return {
        "n_prompts": n_prompts,
        "max_new_tokens": max_new_tokens,
        "speed_prompts": speed_prompts,
        "seed": seed,
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "cpu": cpu_model(),
        "speed": "greedy, batch 1, plain and speculative interleaved prompt by prompt",
    }


def decay(cond: Sequence[float | None]) -> float:
    """How much conditional acceptance falls after position 1: α₁ − mean(α₂..α_k), α_i the conditional acceptance
    at position i (positions never reached are skipped)."""
    rest = [c for c in cond[1:] if c is not None]
    if cond[0] is None or not rest:
        return 0.0
    return cond[0] - sum(rest) / len(rest)


def macro_tau(report: dict[str, Any], name: str, label: str = "t1") -> float:
    """Mean τ of one drafter over the domains in the report."""
    rows = report["drafters"][name]
    return sum(r[label]["tau"] for r in rows.values()) / len(rows)


def public_json(report: dict[str, Any]) -> dict[str, Any]:
    """The `--json` view: per drafter and domain `tau`, `cond_accept` (per position) and the tokens/s ratio."""
    out: dict[str, Any] = {"conditions": report["conditions"], "drafters": {}}
    for name, rows in report["drafters"].items():
        out["drafters"][name] = {
            domain: {
                "tau": {"t1": r["t1"]["tau"], "greedy": r["greedy"]["tau"]},
                "cond_accept": {"t1": r["t1"]["cond_accept"], "greedy": r["greedy"]["cond_accept"]},
                "cum_accept": {"t1": r["t1"]["cum_accept"], "greedy": r["greedy"]["cum_accept"]},
                "decay": {"t1": decay(r["t1"]["cond_accept"]), "greedy": decay(r["greedy"]["cond_accept"])},
                **(
                    {
                        "tokens_per_s": {"plain": r["speed"]["plain_tok_s"], "speculative": r["speed"]["spec_tok_s"]},
                        "tokens_per_s_ratio": r["speed"]["ratio"],
                    }
                    if "speed" in r
                    else {}
                ),
                **({"threshold_sweep": r["threshold_sweep"]} if "threshold_sweep" in r else {}),
            }
            for domain, r in rows.items()
        }
        out["drafters"][name]["mean_tau"] = {
            "t1": macro_tau(report, name, "t1"),
            "greedy": macro_tau(report, name, "greedy"),
        }
    return out

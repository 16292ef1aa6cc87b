"""Step 6B profiling (docs/speed.md): logit parity, the tap check (main_x against a second forward with hooks),
acceptance per position with the confidence beside it, and the cost of verifying k draft tokens in one pass vs
k single decode steps.

Every timing is reported as p50 / p95 / p99 with the run conditions; a number without its conditions
cannot be compared.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Sequence
from typing import Any

import torch

from dspark_mini import Trace
from dspark_mini.speculative import Round, acceptance_stats, generate_speculative
from dspark_mini.validate import check_int, check_seed, check_temperature

from .conditions import percentiles, run_conditions

TAP_CHECK = "main_x the draft received vs main_x rebuilt from the tap layers' inputs caught by hooks"


@torch.no_grad()
def parity(model, tokens: torch.Tensor) -> float:
    """max |Δ| between the logits of two forwards of the same input (must be 0; threshold 1e-9)."""
    a = model(tokens).logits
    b = model(tokens).logits
    return float((a - b).abs().max())


@torch.no_grad()
def hooked_forward(model, tokens: torch.Tensor, cache=None) -> tuple[Any, dict[int, torch.Tensor]]:
    """A forward (commit=False) whose tap layers' input streams are caught by forward pre-hooks on the blocks
    — not by the model's own tap code. → (output, {tap layer: [B, S, D] mean over the hc lanes})."""
    seen: dict[int, torch.Tensor] = {}
    handles = [
        model.layers[l].register_forward_pre_hook(lambda mod, args, l=l: seen.__setitem__(l, args[0].mean(dim=2)))
        for l in model.cfg.dspark_target_layer_ids
    ]
    try:
        out = model(tokens, cache=model.new_cache(tokens.size(0)) if cache is None else cache, commit=False)
    finally:
        for h in handles:
            h.remove()
    return out, seen


@torch.no_grad()
def main_x_error(model, main_x: torch.Tensor, hooked: dict[int, torch.Tensor]) -> float:
    """max |Δ| between the main_x the draft received and main_x recomputed by hand from hooked tap inputs:
    main_norm(Σ (1/n)·h_l) for the lab's "mean" mix (0.5·h₃ + 0.5·h₄), main_norm(main_proj([h_l…])) otherwise.
    The hand recomputation runs in float64 from the model's own tensors (for a float64 model: the same numbers)."""
    cfg, mtp = model.cfg, model.mtp
    parts = [hooked[l].double() for l in cfg.dspark_target_layer_ids]
    if cfg.dspark_tap_mix == "mean":
        mixed = sum((1.0 / len(parts)) * h for h in parts)
    else:
        mixed = torch.cat(parts, dim=-1) @ mtp.main_proj.weight.double().T
    eps, w = mtp.main_norm.eps, mtp.main_norm.weight.double()
    expected = mixed * torch.rsqrt(mixed.square().mean(-1, keepdim=True) + eps) * w
    return float((main_x.double() - expected).abs().max())


def main_x_threshold(model, main_x: torch.Tensor) -> float:
    """What `main_x_error` may be when the taps are right: 1e-9 in float64 (the lab's); in a narrower compute dtype
    the model's own rounding, 8 units of its last place at the largest |main_x| (bfloat16: 8 · 2⁻⁷ · max|x|) — a
    wrong tap layer or mix moves main_x by the order of |main_x| itself."""
    if main_x.dtype == torch.float64:
        return 1e-9
    return 8 * torch.finfo(main_x.dtype).eps * float(main_x.abs().max())


@torch.no_grad()
def tap_check(model, tokens: torch.Tensor) -> float:
    """The taps checked against a second forward: main_x recorded by a traced forward vs main_x rebuilt from
    the tap layers' inputs caught by hooks (0 when the draft reads the right layers, mixed the right way)."""
    return tap_check_with_threshold(model, tokens)[0]


@torch.no_grad()
def tap_check_with_threshold(model, tokens: torch.Tensor) -> tuple[float, float]:
    """(`tap_check`'s max |Δ|, what it may be in the model's dtype: `main_x_threshold`)."""
    trace = Trace(sinkhorn_history=False)
    model(tokens, cache=model.new_cache(tokens.size(0)), trace=trace, commit=False)
    main_x = trace.get("6B", "main_x")
    return main_x_error(model, main_x, hooked_forward(model, tokens)[1]), main_x_threshold(model, main_x)


def tap_mix_report(model, tokens: torch.Tensor) -> dict[str, Any]:
    """The tap check as `profile` reports it: its max |Δ|, its threshold in the model's dtype, what it compares."""
    error, threshold = tap_check_with_threshold(model, tokens)
    return {"max_abs_diff": error, "threshold": threshold, "what": TAP_CHECK}


@torch.inference_mode()
def verify_cost(model, prefix: torch.Tensor, ks: list[int], reps: int) -> dict[int, dict[str, Any]]:
    """Time one verify forward over [anchor, d1..dk] vs k single-token decode steps, on copies of one cache.

    Rows that verify would reject are recomputed by later rounds in the real loop; here both sides do the
    same k tokens from the same cache, so `ratio_p50` (verify ÷ k decodes) is the pure cost of batching k tokens
    into one pass, and `steps` (verify ÷ one decode step, the p50s) is what a verify costs in decode steps — the
    number the speculative loop pays per round (1 would be free batching). `steps_pairwise` is the same cost as
    the p50 over reps of each rep's own verify ÷ (its k decodes / k): the two sides of a pair run back to back,
    so a machine whose load drifts during the run moves both alike (the robust number on a shared machine).
    Both under torch.inference_mode, the verify without committing (as a verify that keeps nothing).
    """
    base = model.new_cache(1)
    model(prefix, cache=base)
    gen = torch.Generator().manual_seed(0)
    out: dict[int, dict[str, Any]] = {}
    for k in ks:
        rows = torch.randint(4, model.cfg.vocab_size, (1, k + 1), generator=gen)
        one, single = [], []
        for _ in range(reps):
            c = copy.deepcopy(base)
            t = time.perf_counter()
            model(rows, cache=c, commit=False)
            one.append(time.perf_counter() - t)
            c = copy.deepcopy(base)
            t = time.perf_counter()
            for i in range(k):
                model(rows[:, i : i + 1], cache=c)
            single.append(time.perf_counter() - t)
        v, d = percentiles(one), percentiles(single)
        pairs = percentiles([a / b * k for a, b in zip(one, single, strict=True)])
        out[k] = {
            "verify_s": v,
            "k_decodes_s": d,
            "ratio_p50": v["p50"] / d["p50"],
            "steps": v["p50"] / d["p50"] * k,
            "steps_pairwise": pairs["p50"],
        }
    return out


VERIFY_CACHE_LENGTHS = (32, 200)  # the cache lengths `profile` reports verify ÷ step at (docs/speed.md)


def verify_steps(model, ks: list[int], reps: int, cache_lengths=VERIFY_CACHE_LENGTHS, seed: int = 0) -> dict:
    """verify(k) ÷ one decode step at each cache length, after a prefix of that many random token ids (the cost
    hardly depends on the text).  → {str(L): {str(k): steps}}, plus {"pairwise": {str(L): {str(k): steps_pairwise}}}
    and {"detail": {str(L): verify_cost(...)}}."""
    vmax = model.cfg.max_seq_len - max(ks) - 1
    out: dict[str, Any] = {"pairwise": {}, "detail": {}}
    gen = torch.Generator().manual_seed(seed)
    for L in cache_lengths:
        check_int(L, "cache_length", 1, vmax, f"max_seq_len − one verify of {max(ks) + 1} tokens")
        prefix = torch.randint(4, model.cfg.vocab_size, (1, L), generator=gen)
        cost = verify_cost(model, prefix, ks, reps)
        out[str(L)] = {str(k): round(d["steps"], 3) for k, d in cost.items()}
        out["pairwise"][str(L)] = {str(k): round(d["steps_pairwise"], 3) for k, d in cost.items()}
        out["detail"][str(L)] = {str(k): v for k, v in cost.items()}
    return out


def profile(
    preset: str = "lab",
    seed: int = 0,
    prompts: int = 6,
    new_tokens: int = 24,
    reps: int = 15,
    cache_len: int = 48,
    temperature: float = 0.0,
    weights: str | None = None,
    checkpoint: str | None = None,
    verify_lengths: Sequence[int] = VERIFY_CACHE_LENGTHS,
    device: str | None = None,
    dtype: str | None = None,
    lang: str = "en",
) -> dict[str, Any]:
    """Everything `dspark-lab profile` reports, as data. Trained weights draft after held-out corpus prompts
    (the language they learned); untrained ones after random token ids. `verify_steps` gives verify(k) ÷ one
    decode step for k = 1..block at each of `verify_lengths` (`verify_cost[k]["steps"]` at `cache_len`).
    lang: the language of a memory refusal."""
    from dspark_mini.tokenizer import default_tokenizer

    from ..runtime.run import open_preset, preset_weights

    check_seed(seed)
    check_int(reps, "reps", 1)
    check_temperature(temperature)

    def check_cache_len(cfg: Any, tok: Any) -> None:
        verify = cfg.dspark_block_size + 1  # the same bound as the CLI's --cache-length
        why = f"max_seq_len {cfg.max_seq_len} − one verify of {verify} tokens"
        check_int(cache_len, "cache_len", 1, cfg.max_seq_len - verify, why)

    model, tok, _ = open_preset(preset, weights, checkpoint, seed, device, dtype, lang, check_cache_len)
    cfg, weights = model.cfg, preset_weights(preset, weights, checkpoint)  # what was loaded: trained or untrained
    # corpus prompts only in the lab's ids: the trained lab set, or a checkpoint that reads the lab's vocabulary
    corpus_ids = tok is default_tokenizer() if checkpoint is not None else weights == "trained"
    gen = torch.Generator().manual_seed(seed)
    tokens = torch.randint(4, cfg.vocab_size, (1, cache_len), generator=gen)
    batch = torch.randint(4, cfg.vocab_size, (prompts, 12), generator=gen)
    if corpus_ids:
        from ..realtext import DOMAINS
        from .quality import eval_prompts

        per = -(-prompts // len(DOMAINS))
        batch = torch.cat([eval_prompts(d, per, 12, seed) for d in DOMAINS])[:prompts]
    spec = generate_speculative(model, batch, new_tokens, temperature=temperature, seed=seed)
    rounds = [r for rs in spec.rounds for r in rs]
    stats = acceptance_stats(rounds)
    ks = list(range(1, cfg.dspark_block_size + 1))
    return {
        "preset": preset,
        "parity": {"max_abs_diff": parity(model, tokens), "threshold": 1e-9},
        "tap_mix": tap_mix_report(model, tokens),
        "acceptance": stats,
        "calibration": {
            "confidence": reliability(rounds, 5, "confidence"),
            "draft_probability": reliability(rounds, 5, "draft_probs"),
        },
        "acceptance_conditions": {
            "weights": weights,
            "prompts": prompts,
            "new_tokens": new_tokens,
            "temperature": temperature,
            "block": cfg.dspark_block_size,
        },
        "verify_cost": {str(k): v for k, v in verify_cost(model, tokens, ks, reps).items()},
        # verify(k) ÷ one decode step at cache lengths 32 and 200 ("verify_cost" has it at cache_len: "steps")
        "verify_steps": verify_steps(model, ks, reps, verify_lengths, seed),
        "conditions": run_conditions(model, 1, cache_len),
    }


def chi_square_test(
    samples: torch.Tensor, probs: torch.Tensor, alpha: float = 0.001, min_expected: float = 5.0
) -> dict[str, float | bool | int]:
    """Pearson's χ² of sampled token ids against exact probabilities [V].

    Bins with an expected count below `min_expected` are merged into one "rest" bin. The critical value
    of χ²(df) at 1 − alpha uses the Wilson–Hilferty approximation (no scipy needed):
    df · (1 − 2/(9 df) + z · √(2/(9 df)))³, z the standard normal quantile.
    """
    n = samples.numel()
    counts = torch.bincount(samples.flatten(), minlength=probs.numel()).double()
    expected = probs.double() * n
    big = expected >= min_expected
    obs = torch.cat([counts[big], counts[~big].sum().view(1)])
    exp = torch.cat([expected[big], expected[~big].sum().view(1)])
    keep = exp > 0
    obs, exp = obs[keep], exp[keep]
    stat = float(((obs - exp) ** 2 / exp).sum())
    df = max(1, int(keep.sum()) - 1)
    z = float(torch.distributions.Normal(0.0, 1.0).icdf(torch.tensor(1 - alpha)))
    critical = df * (1 - 2 / (9 * df) + z * (2 / (9 * df)) ** 0.5) ** 3
    return {"statistic": stat, "df": df, "critical": critical, "alpha": alpha, "n": n, "passes": stat <= critical}


def reliability(rounds: Sequence[Round], n_bins: int = 5, source: str = "confidence") -> dict[str, Any]:
    """Calibration data: one point per draft position that verify reached, predicted = c (or p_d(x)),
    outcome = kept. Returns equal-width bins [{lo, hi, n, predicted, observed}] and the ECE."""
    if source not in ("confidence", "draft_probs"):
        raise ValueError(f"source = {source!r} is invalid: allowed 'confidence', 'draft_probs'")
    check_int(n_bins, "n_bins", 1)
    points = [
        (getattr(r, source)[i], float(r.n_accepted > i))
        for r in rounds
        for i in range(r.verify_len)
        if r.n_accepted >= i
    ]
    bins = []
    for b in range(n_bins):
        lo, hi = b / n_bins, (b + 1) / n_bins
        inside = [(p, o) for p, o in points if lo <= p < hi or (b == n_bins - 1 and p == 1.0)]
        if inside:
            bins.append(
                {
                    "lo": lo,
                    "hi": hi,
                    "n": len(inside),
                    "predicted": sum(p for p, _ in inside) / len(inside),
                    "observed": sum(o for _, o in inside) / len(inside),
                }
            )
    ece = sum(b["n"] * abs(b["predicted"] - b["observed"]) for b in bins) / len(points) if points else 0.0
    return {"bins": bins, "ece": ece, "points": len(points), "source": source}

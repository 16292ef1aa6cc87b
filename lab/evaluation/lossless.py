"""Greedy speculative decoding against plain decoding, logit by logit: where the two can part, and by how much.

Plain decoding computes token i's logits in a one-token forward over the cache its own steps wrote; speculative
decoding computes them as one row of a verify forward (the anchor and ℓ drafts at once) over a cache that earlier
verify forwards wrote. In exact arithmetic the two are one function, and the verify rule keeps a draft only where it
is that row's argmax, so greedy speculative output equals plain output. In floating point they round differently:
one row and k + 1 rows are summed in other orders, and a near-tie inside the model (the sparse index's top-k, an
FP8 / FP4 quantum, a router's pick) can turn a last-bit difference into a visible one. Greedy output can then part
only at a position where the plain step's top-2 logit gap is smaller than what the two computations differ by there:
a near-tie, not a wrong verify.

  probe(model, prompt, max_new_tokens)  both decodings of one prompt [1, S] (the calls of `generate_plain` and
                                        `generate_speculative` themselves, read through a forward hook) → Probe
  Probe.first        the first position where the tokens differ (None: equal)
  Probe.delta        max |Δlogit| over the vocabulary between the two computations, at each position up to `first`
  Probe.gaps         the plain step's top-2 logit gap at each of those positions; Probe.gap: the one at `first`
  Probe.near_tie     gap ≤ delta[first]: the divergence is a near-tie (True when the tokens are equal)
  Probe.verified     each speculative token is the argmax of the verify row that decided it, each plain token the
                     argmax of its step: the verify rule read the row it had to
  summarize(probes)  one dtype's record: prompts, divergences (each with its gap and Δ), Δ's and the gaps' medians,
                     the positions at a near-tie (gap ≤ Δ: where a difference could appear)
  one_forward_delta(model, prompt, rows)  max |Δlogit| between a one-token forward and row 0 of a forward over
                     `rows` on the same cache: the rounding of one forward alone, no cache written by either
  lab_prompts(n)     n distinct short prompts: held-out lines of the three domains, their first tokens
  narrow_flash(dtype)  the layers of `flash-cpu` (every kind of attention, the sparse index, experts with FP8
                     activations, Engram, the concatenated taps) at narrow widths, seeded: what float64 can check
                     in a test, where the real widths need 40 GiB in float64
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from dspark_mini import build_model
from dspark_mini.config import flash_cpu_config
from dspark_mini.speculative import generate_plain, generate_speculative

from ..realtext import DOMAINS
from .quality import eval_prompts

# flash-cpu's counts and layer roles, with its widths narrowed (hidden 5120 → 128, heads 64 × 512 → 4 × 64, …)
NARROW_FLASH: dict[str, Any] = {
    "vocab_size": 8448,  # above the lab tokenizer's 8,192 ids
    "dspark_noise_token_id": 8400,  # not a lab id: the noise token is its own, as in the real model
    "dim": 128,
    "n_heads": 4,
    "head_dim": 64,
    "rope_head_dim": 16,
    "q_lora_rank": 64,
    "o_groups": 2,
    "o_lora_rank": 64,
    "index_n_heads": 4,
    "index_head_dim": 32,
    "moe_inter_dim": 64,
    "engram_head_dim": 32,
    "dspark_markov_rank": 16,
    "max_seq_len": 256,
}


def narrow_flash(dtype: str, seed: int = 0):
    """`flash-cpu`'s layers at NARROW_FLASH's widths, in compute dtype `dtype`, the seeded init (untrained)."""
    return build_model(flash_cpu_config(**NARROW_FLASH, dtype=dtype), seed=seed).eval()


@dataclass
class Probe:
    plain: list[int]  # greedy plain tokens
    speculative: list[int]  # greedy speculative tokens
    first: int | None  # first position where they differ
    delta: list[float]  # max |Δlogit| over the vocabulary at positions 0..first (0..n − 1 when equal)
    gaps: list[float]  # the plain step's top-2 logit gap at the same positions
    verified: bool  # every token is the argmax of the logits row that decided it

    @property
    def gap(self) -> float | None:
        """The plain step's top-2 logit gap where the tokens first differ."""
        return None if self.first is None else self.gaps[self.first]

    @property
    def near_tie(self) -> bool:
        return self.first is None or self.gap <= self.delta[self.first]

    def to_json(self) -> dict[str, Any]:
        return {
            "first": self.first,
            "gap": self.gap,
            "delta_at_first": None if self.first is None else self.delta[self.first],
            "near_tie": self.near_tie,
            "verified": self.verified,
        }


class _Rows:
    """A forward hook that keeps every call's logits (float64, batch row 0) and whether it committed."""

    def __init__(self, model: torch.nn.Module):
        self.calls: list[tuple[bool, torch.Tensor]] = []
        self.handle = model.register_forward_hook(self, with_kwargs=True)

    def __call__(self, module, args, kwargs, output) -> None:
        self.calls.append((kwargs.get("commit", True), output.logits[0].double().clone()))

    def __enter__(self) -> _Rows:
        return self

    def __exit__(self, *exc) -> None:
        self.handle.remove()


def plain_rows(model, prompt: torch.Tensor, n: int) -> tuple[list[int], torch.Tensor]:
    """`generate_plain`'s tokens and the logits each was the argmax of: [n, V] (the prefill's last row, then one
    row per one-token step)."""
    with _Rows(model) as rows:
        tokens = generate_plain(model, prompt, n).tokens[0]
    return tokens, torch.stack([logits[-1] for _, logits in rows.calls])


def speculative_rows(
    model, prompt: torch.Tensor, n: int, verify_len: int | None = None
) -> tuple[list[int], torch.Tensor]:
    """`generate_speculative`'s tokens and, for each, the logits row that decided it: [n, V] (the prefill's last row,
    then row j of a round's verify forward for the round's j-th committed token)."""
    with _Rows(model) as rows:
        res = generate_speculative(model, prompt, n, verify_len=verify_len)
    prefill, *verifies = rows.calls
    verifies = [logits for commit, logits in verifies if not commit]  # the verify forwards: commit=False
    if len(verifies) != len(res.rounds):
        raise RuntimeError(f"{len(verifies)} verify forwards for {len(res.rounds)} rounds")
    decided = [prefill[1][-1]]
    for logits, (r,) in zip(verifies, res.rounds, strict=True):
        decided += [logits[j] for j in range(len(r.committed))]  # row j decided the round's j-th committed token
    return res.tokens[0], torch.stack(decided[:n])


def probe(model, prompt: torch.Tensor, max_new_tokens: int, verify_len: int | None = None) -> Probe:
    """Both greedy decodings of one prompt [1, S], compared logit by logit up to their first difference."""
    if prompt.dim() != 2 or prompt.size(0) != 1:
        raise ValueError(f"prompt must be one sequence of shape [1, S] (got {tuple(prompt.shape)})")
    plain, pl = plain_rows(model, prompt, max_new_tokens)
    spec, sl = speculative_rows(model, prompt, max_new_tokens, verify_len)
    first = next((i for i, (a, b) in enumerate(zip(plain, spec, strict=True)) if a != b), None)
    upto = max_new_tokens if first is None else first + 1
    delta = (pl[:upto] - sl[:upto]).abs().amax(-1).tolist()
    top2 = pl[:upto].topk(2, dim=-1).values  # [upto, 2]
    gaps = (top2[:, 0] - top2[:, 1]).tolist()
    verified = pl.argmax(-1).tolist() == plain and sl.argmax(-1).tolist() == spec
    return Probe(plain, spec, first, delta, gaps, verified)


@torch.inference_mode()
def one_forward_delta(model, prompt: torch.Tensor, rows: torch.Tensor) -> float:
    """After a prefill of `prompt` [1, S]: max |Δlogit| between the one-token forward of rows[:, :1] and row 0 of the
    forward over `rows` [1, k + 1], both on the same cache and neither committed — one forward's rounding alone."""
    cache = model.new_cache(1)
    model(prompt, cache=cache)
    one = model(rows[:, :1], cache=cache, commit=False).logits[0, 0].double()
    batched = model(rows, cache=cache, commit=False).logits[0, 0].double()
    return float((one - batched).abs().max())


def lab_prompts(n: int, prompt_tokens: int = 12) -> list[torch.Tensor]:
    """n distinct prompts [1, prompt_tokens]: held-out lines of each domain in turn (English, Vietnamese, code,
    sums), their first tokens."""
    per = -(-n // len(DOMAINS))
    seen: set[tuple[int, ...]] = set()
    out: list[torch.Tensor] = []
    for d in DOMAINS:
        mine = 0
        for row in eval_prompts(d, 2 * per, prompt_tokens):  # twice as many lines: a line can repeat
            key = tuple(row.tolist())
            if mine < per and key not in seen:
                seen.add(key)
                out.append(row[None])
                mine += 1
    out = out[:n]
    if len(out) < n:
        raise ValueError(f"n = {n} is too many: only {len(out)} distinct prompts of {prompt_tokens} tokens")
    return out


def quantile(xs: Sequence[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, int(q * len(s)))]


def summarize(probes: Sequence[Probe], dtype: str) -> dict[str, Any]:
    """One dtype's record. Δ is taken where both decodings had written the same tokens so far (positions ≤ first)."""
    deltas = [d for p in probes for d in p.delta]
    gaps = [g for p in probes for g in p.gaps]
    ties = sum(g <= d for p in probes for g, d in zip(p.gaps, p.delta, strict=True))
    divergences = [
        {"prompt": i, "position": p.first, "gap": p.gap, "delta": p.delta[p.first], "near_tie": p.near_tie}
        for i, p in enumerate(probes)
        if p.first is not None
    ]
    return {
        "dtype": dtype,
        "prompts": len(probes),
        "new_tokens": len(probes[0].plain) if probes else 0,
        "positions": len(deltas),
        "divergent_prompts": len(divergences),
        "divergent_fraction": len(divergences) / len(probes) if probes else 0.0,
        "delta_median": quantile(deltas, 0.5),
        "delta_p99": quantile(deltas, 0.99),
        "delta_max": max(deltas),
        "gap_median": quantile(gaps, 0.5),
        "near_tie_positions": ties,  # positions whose plain gap is within Δ: the only places a difference can appear
        "divergences": divergences,
        "max_gap_at_divergence": max((d["gap"] for d in divergences), default=None),
        "all_near_ties": all(p.near_tie for p in probes),
        "all_verified": all(p.verified for p in probes),
    }

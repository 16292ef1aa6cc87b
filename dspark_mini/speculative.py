"""Step 6B · speculative decoding: draft a block, verify it with one real forward, keep what the target keeps.

A round, with the anchor x₀ at position p (sampled by the target, not yet run through it):
  1. the draft proposes x₁..x_k with distributions p_d^i (Markov head, left to right);
  2. the target runs once over [x₀, x₁..x_k] → p_t^1..p_t^{k+1} (commit=False: nothing is stored yet);
  3. left to right, keep x_i with probability min(1, p_t^i(x_i) / p_d^i(x_i)); at the first rejection draw the
     replacement from norm(max(0, p_t^i − p_d^i)); if all k are kept, draw a bonus token from p_t^{k+1};
  4. commit the rows [x₀, x₁..x_n] (n kept) to every cache — the rejected rows were never written, so the
     window rings, compressor carry, compressed KV, index keys, Engram history and draft rings all equal
     what plain decoding of the committed tokens leaves. τ = n + 1 tokens per round.
At temperature 0 both distributions are one-hot (argmax), so the same rule keeps exactly the draft tokens
that match the target's argmax: greedy speculative output equals greedy plain output token for token — in exact
arithmetic, and in float64 (tested logit for logit). In bfloat16 the verify forward (k + 1 rows) and a one-token step
round differently, so the two can part at a near-tie: only where the plain step's top-2 logit gap is within what the
two computations differ by there (measured: lab/evaluation/lossless.py, docs/reliability.md).
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import torch

from .drafters import Drafter, DSparkDrafter
from .dspark import DraftOutput
from .kv_cache import KVCache
from .model import Transformer, forward_ragged
from .sampling import new_generator, next_token, sample, token_distribution, uniform
from .validate import check_int, check_temperature, check_verify_len, renamed

ACCEPTED, REJECTED, NOT_VERIFIED, RESAMPLED, BONUS = "accepted", "rejected", "not verified", "resampled", "bonus"
NOT_SENT = "not sent"  # drafted, but beyond the verify length ℓ the scheduler chose: never shown to the target


@dataclass
class Verdict:
    n_accepted: int  # draft tokens kept (prefix)
    next_token: int  # the target's own token: the replacement at the first rejection, or the bonus
    kind: str  # RESAMPLED or BONUS
    ratios: list[float]  # min(1, p_t/p_d) per verified position


def verify_block(
    draft_tokens: torch.Tensor,
    draft_probs: torch.Tensor,
    target_probs: torch.Tensor,
    generator: torch.Generator | None = None,
    residual: bool = True,
) -> Verdict:
    """Rejection sampling over one block.

    draft_tokens [k]; draft_probs [k, V] (p_d rows the tokens were drawn from); target_probs [k + 1, V].
    `residual=False` is a deliberately broken verifier (it resamples from p_t instead of the residual) that
    the lab uses to show why the residual is needed.
    """
    k = draft_tokens.numel()
    ratios: list[float] = []
    for i in range(k):
        x = int(draft_tokens[i])
        pt, pd = target_probs[i], draft_probs[i]
        ratio = min(1.0, float(pt[x]) / max(float(pd[x]), 1e-12))
        ratios.append(ratio)
        u = uniform(generator, pt.device)
        if u < ratio:
            continue
        if residual:
            res = (pt - pd).clamp_min(0)
            mass = float(res.sum())
            dist = res / mass if mass > 1e-12 else pt  # no residual mass left: fall back to p_t
        else:
            dist = pt
        return Verdict(i, int(sample(dist, generator)), RESAMPLED, ratios)
    return Verdict(k, int(sample(target_probs[k], generator)), BONUS, ratios)


def verify_greedy(draft_tokens: torch.Tensor, target_argmax: torch.Tensor) -> Verdict:
    """`verify_block` at temperature 0, without its draws. draft_tokens [k]; target_argmax [k + 1] (the target's
    argmax at each verified row).

    Both distributions are one-hot there: p_d(x_i) = 1, and p_t(x_i) is 1 where x_i is the target's argmax, else 0.
    So the ratio is 1 (kept: u < 1 always) up to the first mismatch, 0 there (rejected: u < 0 never); the residual
    max(0, p_t − p_d) is the one-hot of the target's argmax, and so is the bonus row — the same verdict as
    `verify_block` on those rows (tested), read off one comparison."""
    k = draft_tokens.numel()
    match = (draft_tokens == target_argmax[:k]).tolist()  # [k] bools
    n = match.index(False) if False in match else k
    return Verdict(n, int(target_argmax[n]), RESAMPLED if n < k else BONUS, [1.0] * n + ([0.0] if n < k else []))


@dataclass
class Round:
    """One draft → verify → commit round of one sequence."""

    position: int  # position of the anchor
    anchor: int
    draft: list[int]
    draft_probs: list[float]  # p_d(x_i)
    confidence: list[float]  # c_i
    target_probs: list[float]  # p_t(x_i) of the drafted tokens
    target_argmax: list[int]  # the target's own choice at each verified row (k + 1 rows)
    status: list[str]  # per draft position: accepted / rejected / not verified
    n_accepted: int  # the verifier's verdict for this sequence
    next_token: int  # its replacement or bonus token
    next_kind: str  # resampled or bonus
    committed: list[int]  # tokens appended this round (in a batch: cut to the shortest verdict)
    verify_len: int | None = None  # ℓ: drafts sent to verify (None when made: the whole block, as `speculative_round`)

    def __post_init__(self) -> None:
        if self.verify_len is None:
            self.verify_len = len(self.draft)

    @property
    def tau(self) -> int:
        """Accepted length: kept drafts + the target's own token."""
        return self.n_accepted + 1

    @property
    def k(self) -> int:
        """k, the drafts proposed: the whole trained block for the parallel (DSpark-family) drafters; the first
        `verify_len` (ℓ) of them were sent to verify."""
        return len(self.draft)

    @property
    def block(self) -> int:
        """k's old name (still works, warns)."""
        renamed("Round.block", "Round.k", "Round")
        return self.k


@dataclass
class GenerateResult:
    tokens: list[list[int]]  # new tokens per sequence (prompt excluded)
    seconds: float
    rounds: list[list[Round]] = field(default_factory=list)  # per round, one record per sequence
    forwards: int = 0  # target forwards after the prefill

    @property
    def tokens_per_s(self) -> float:
        n = sum(len(t) for t in self.tokens)
        return n / self.seconds if self.seconds > 0 else float("inf")

    def rows(self, b: int = 0) -> list[Round]:
        """The rounds of sequence b."""
        return [r[b] for r in self.rounds]


def check_prompt(model: Transformer, prompt: torch.Tensor, max_new_tokens: int) -> None:
    if not isinstance(prompt, torch.Tensor) or prompt.dim() != 2 or prompt.dtype != torch.long:
        raise ValueError(f"prompt must be int64 token ids of shape [B, S] (got {getattr(prompt, 'shape', prompt)})")
    if prompt.size(1) == 0:
        raise ValueError("prompt is empty: give at least one token")
    check_int(max_new_tokens, "max_new_tokens", 1, bare=True)
    room = model.cfg.max_seq_len - prompt.size(1)
    if max_new_tokens > room:
        raise ValueError(
            f"max_new_tokens = {max_new_tokens} is invalid: allowed 1..{room} "
            f"(max_seq_len {model.cfg.max_seq_len} − prompt {prompt.size(1)})"
        )
    model.check_tokens(prompt, None)


def drafter_block(model: Transformer, drafter: Drafter | None = None) -> int:
    """k, the block a drafter was trained to draft (the model's own DSpark draft: cfg.dspark_block_size)."""
    return model.cfg.dspark_block_size if drafter is None else drafter.max_block(model)


def prefill(
    model: Transformer,
    prompt: torch.Tensor,
    temperature: float,
    gen: torch.Generator,
    drafter: Drafter | None = None,
):
    """Run the prompt, sample the first new token (the first anchor) for every sequence."""
    cache = model.new_cache(prompt.size(0))
    out = model(prompt, cache=cache, last_only=drafter is None)
    if drafter is not None:
        drafter.reset(prompt.size(0))
        drafter.observe(prompt, out, prompt.size(1))
    return cache, next_token(out.logits[:, -1], temperature, gen)  # [B]


@torch.inference_mode()
def generate_plain(
    model: Transformer,
    prompt: torch.Tensor,
    max_new_tokens: int,
    temperature: float = 0.0,
    seed: int = 0,
    sampler: str = "torch",
) -> GenerateResult:
    """One target forward per new token (prompts [B, S] of equal length); `sampler`: sampling.SAMPLERS."""
    check_prompt(model, prompt, max_new_tokens)
    check_temperature(temperature)
    gen = new_generator(seed, model.device, sampler)
    t0 = time.perf_counter()
    cache, nxt = prefill(model, prompt, temperature, gen)
    out = [nxt]
    while len(out) < max_new_tokens:
        logits = model(out[-1][:, None], cache=cache).logits[:, -1]
        out.append(next_token(logits, temperature, gen))
    tokens = torch.stack(out, 1).tolist()
    return GenerateResult(tokens, time.perf_counter() - t0, forwards=max_new_tokens - 1)


@torch.no_grad()
def round_record(
    position: int,
    anchor: int,
    d: DraftOutput,
    b: int,
    v: Verdict,
    target_probs: list[float],
    target_argmax: list[int],
    committed: list[int],
) -> Round:
    """Sequence b's Round: its draft (row b of d, k tokens), the verdict on the first ℓ = len(target_probs) of them
    and the tokens it committed; each draft position is accepted, rejected, not verified or not sent (past ℓ)."""
    sent, drafted = len(target_probs), d.tokens.size(1)
    status = [ACCEPTED] * v.n_accepted + ([REJECTED] if v.n_accepted < sent else [])
    status += [NOT_VERIFIED] * (sent - len(status)) + [NOT_SENT] * (drafted - sent)
    return Round(
        position=position,
        anchor=anchor,
        draft=d.tokens[b].tolist(),
        draft_probs=d.draft_probs[b].tolist(),
        confidence=d.confidence[b].tolist(),
        target_probs=target_probs,
        target_argmax=target_argmax,
        status=status,
        n_accepted=v.n_accepted,
        next_token=v.next_token,
        next_kind=v.kind,
        committed=committed,
        verify_len=sent,
    )


@torch.no_grad()  # a round only reads the model: no autograd graph (4,000 rows of one would hold GiBs)
def speculative_round(
    model: Transformer,
    cache,
    anchors: torch.Tensor,
    verify_len: int,
    temperature: float,
    gen: torch.Generator | None,
    residual: bool = True,
    trace=None,
    drafter: Drafter | None = None,
    draft_len: int | None = None,
) -> list[Round]:
    """Draft after each anchor [B], verify k of the drafts in one forward, commit the kept prefix (+ anchor).

    A parallel drafter (DSpark, DFlash: the model's own draft) always drafts its whole trained block — the block it
    was trained on — and `verify_len` is ℓ of a fixed policy: drafts beyond ℓ are recorded as
    `not sent`. A sequential drafter (Eagle3-lite, MTP-1) drafts only the k it will send. `draft_len` caps the
    parallel draft (generate passes what the sequence still needs: its last round drafts no more than that).
    In a batch every sequence commits the same number of rows: the shortest verdict n_min. A sequence that
    kept more drafts appends its draft n_min + 1 (the verifier accepted it) instead of its own next token, so
    each committed token is still exactly what the target would have produced.
    `drafter` defaults to the model's own DSpark draft (see `drafters.py` for the others).
    """
    drafter = DSparkDrafter() if drafter is None else drafter
    p = cache.length
    k = verify_len  # ℓ
    # a parallel drafter drafts its trained block, but never past max_seq_len (the last rounds of a full cache)
    room = model.cfg.max_seq_len - cache.length
    drafted = min(drafter.max_block(model), room, draft_len or room) if getattr(drafter, "parallel", False) else k
    drafted = max(drafted, k)
    d = drafter.propose(model, cache, anchors, drafted, temperature, gen, trace)
    sent = d.tokens[:, :k]  # [B, k] the drafts sent to verify
    rows = torch.cat([anchors[:, None], sent], dim=1)  # [B, k + 1]
    out = model(rows, cache=cache, commit=False)  # the verify forward: nothing stored yet
    argmax = out.logits.argmax(-1)  # [B, k + 1] the target's own choice at each row
    if temperature == 0:  # one-hot rows: the verdict is the first mismatch (the broken verifier agrees there)
        verdicts = [verify_greedy(sent[b], argmax[b]) for b in range(anchors.size(0))]
    else:
        target = token_distribution(out.logits, temperature)  # [B, k + 1, V]
        verdicts = [verify_block(sent[b], d.probs[b, :k], target[b], gen, residual) for b in range(anchors.size(0))]
    n_min = min(v.n_accepted for v in verdicts)
    cache.commit(out.pending, n_min + 1)  # anchor + kept drafts; the other rows were never written
    drafter.observe(rows, out, n_min + 1)
    shown = target if temperature > 0 else torch.softmax(out.logits, -1)
    tp = shown[:, :k].gather(-1, sent[..., None]).squeeze(-1)  # [B, k]
    result = []
    for b, v in enumerate(verdicts):
        drafts = d.tokens[b].tolist()
        last = drafts[n_min] if v.n_accepted > n_min else v.next_token
        committed = drafts[:n_min] + [last]
        result.append(round_record(p, int(anchors[b]), d, b, v, tp[b].tolist(), argmax[b].tolist(), committed))
    return result


@torch.inference_mode()
def generate_speculative(
    model: Transformer,
    prompt: torch.Tensor,
    max_new_tokens: int,
    verify_len: int | None = None,
    temperature: float = 0.0,
    seed: int = 0,
    residual: bool = True,
    drafter: Drafter | None = None,
    sampler: str = "torch",
) -> GenerateResult:
    """Speculative decoding: one draft + one verify forward per round (prompts [B, S]); the model's DSpark
    draft unless another `drafter` is given; `sampler`: sampling.SAMPLERS (greedy draws nothing)."""
    check_prompt(model, prompt, max_new_tokens)
    drafter = DSparkDrafter() if drafter is None else drafter
    k_max = check_verify_len(verify_len, drafter_block(model, drafter))
    check_temperature(temperature)
    gen = new_generator(seed, model.device, sampler)
    t0 = time.perf_counter()
    cache, anchors = prefill(model, prompt, temperature, gen, drafter)
    tokens = [[int(a)] for a in anchors]
    rounds: list[list[Round]] = []
    while len(tokens[0]) < max_new_tokens:
        need = max_new_tokens - len(tokens[0])  # the last round drafts no more than the sequence still needs
        k = min(k_max, need)
        anchors = torch.tensor([t[-1] for t in tokens], device=model.device)
        rs = speculative_round(model, cache, anchors, k, temperature, gen, residual, drafter=drafter, draft_len=need)
        rounds.append(rs)
        for t, r in zip(tokens, rs, strict=True):
            t += r.committed
    return GenerateResult([t[:max_new_tokens] for t in tokens], time.perf_counter() - t0, rounds, forwards=len(rounds))


@torch.no_grad()
def draft_requests(
    model: Transformer,
    caches: list[KVCache],
    anchors: list[int],
    temperature: float,
    gen: torch.Generator | None,
    drafter: Drafter | None = None,
) -> list[DraftOutput]:
    """The whole trained block for every request, each on its own batch-1 cache (its own draft rings).
    The confidences c [k] of each draft are what the scheduler reads before it picks the verify lengths."""
    drafter = DSparkDrafter() if drafter is None else drafter
    k = model.cfg.dspark_block_size
    dev = model.device
    return [
        drafter.propose(
            model, cache, torch.tensor([a], device=dev), min(k, model.cfg.max_seq_len - cache.length), temperature, gen
        )
        for cache, a in zip(caches, anchors, strict=True)
    ]


@torch.no_grad()
def verify_ragged(
    model: Transformer,
    caches: list[KVCache],
    anchors: list[int],
    drafts: list[DraftOutput],
    lengths: list[int],
    temperature: float,
    gen: torch.Generator | None,
    drafter: Drafter | None = None,
) -> list[Round]:
    """One target forward for R requests at their own cache lengths (`forward_ragged`), each verifying its own
    prefix [anchor, x_1..x_ℓr] of its draft, each committing its own verdict (no shortest verdict for all).
    ℓ_r = 0 sends only the anchor: that request decodes plainly this round (its token comes from p_t)."""
    drafter = DSparkDrafter() if drafter is None else drafter
    if not len(caches) == len(anchors) == len(drafts) == len(lengths):
        raise ValueError(
            f"verify_ragged: {len(caches)} caches, {len(anchors)} anchors, {len(drafts)} drafts, "
            f"{len(lengths)} lengths: allowed one of each per request"
        )
    dev = model.device
    rows = []
    for r, (a, d, n) in enumerate(zip(anchors, drafts, lengths, strict=True)):
        k = d.tokens.size(1)
        check_int(n, f"verify length ℓ[{r}]", 0, k)
        rows.append(torch.cat([torch.tensor([[a]], device=dev), d.tokens[:, :n]], dim=1))  # [1, 1 + ℓ_r]
    outs = forward_ragged(model, rows, caches)  # commit=False: nothing stored yet
    result = []
    for cache, row, d, n, out in zip(caches, rows, drafts, lengths, outs, strict=True):
        p = cache.length
        if temperature == 0:  # one-hot rows: the verdict is the first mismatch, as in `speculative_round`
            v = verify_greedy(d.tokens[0, :n], out.logits[0].argmax(-1))
        else:
            target = token_distribution(out.logits[0], temperature)  # [ℓ + 1, V]
            v = verify_block(d.tokens[0, :n], d.probs[0, :n], target, gen)
        cache.commit(out.pending, v.n_accepted + 1)  # anchor + kept drafts; the other rows were never written
        drafter.observe(row, out, v.n_accepted + 1)
        shown = target if temperature > 0 else torch.softmax(out.logits[0], -1)
        tp = shown[:n].gather(-1, d.tokens[0, :n, None]).squeeze(-1).tolist()  # p_t of the ℓ_r drafts sent
        committed = d.tokens[0, : v.n_accepted].tolist() + [v.next_token]
        result.append(round_record(p, int(row[0, 0]), d, 0, v, tp, out.logits[0].argmax(-1).tolist(), committed))
    return result


def acceptance_stats(rounds: list[Round]) -> dict:
    """τ, kept/k, and per-position conditional and cumulative acceptance (with mean confidence beside it)."""
    if not rounds:
        return {"rounds": 0, "mean_accepted_length": 0.0, "acceptance_rate": 0.0, "per_position": []}
    k = max(r.verify_len for r in rounds)
    per = []
    for i in range(k):
        full = [r for r in rounds if r.verify_len > i]
        reached = [r for r in full if r.n_accepted >= i]
        kept = [r for r in reached if r.n_accepted > i]
        per.append(
            {
                "position": i + 1,
                "reached": len(reached),
                "cond_accept": len(kept) / len(reached) if reached else None,
                "cum_accept": len(kept) / len(full) if full else None,
                "mean_confidence": sum(r.confidence[i] for r in full) / len(full) if full else None,
                "mean_draft_prob": sum(r.draft_probs[i] for r in full) / len(full) if full else None,
            }
        )
    return {
        "rounds": len(rounds),
        "mean_accepted_length": sum(r.tau for r in rounds) / len(rounds),
        "acceptance_rate": sum(r.n_accepted for r in rounds) / sum(r.verify_len for r in rounds),
        "per_position": per,
    }

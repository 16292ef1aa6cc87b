"""`dspark-lab serve`: R requests decoded concurrently with confidence-scheduled, ragged speculative rounds.

One round, for the requests in flight (continuous batching — a finished request's slot takes the next prompt):
  1. admit: a free slot takes the next prompt; its prefill runs on its own cache and samples its first token
     (the round's anchor), so prompts of any length join the running batch;
  2. draft: every request drafts the whole trained block (k = 5) on its own cache → tokens and confidences c;
  3. schedule: the policy turns the confidences [R, k] into verify lengths ℓ_r (`dspark_mini.scheduler`);
  4. verify: ONE target forward over all requests' [anchor, x_1..x_ℓr] rows, each at its own cache length
     (`dspark_mini.ragged`); each request keeps what rejection sampling keeps and commits its own verdict.
Greedy output of every request equals plain decoding of its prompt, whatever the policy and R (tests).
"""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass, field
from typing import Any

import torch

from dspark_mini.sampling import next_token
from dspark_mini.scheduler import POLICIES, Scheduler
from dspark_mini.speculative import Round, draft_requests, verify_ragged
from dspark_mini.validate import check_int, check_seed, check_temperature

MAX_REQUESTS = 1024  # slots in flight


@dataclass
class Request:
    """One prompt in flight: its own batch-1 cache, what it has produced so far, its rounds."""

    index: int  # position in the prompt list
    prompt: list[int]
    max_new_tokens: int
    cache: Any = None
    tokens: list[int] = field(default_factory=list)  # new tokens (prompt excluded); tokens[-1] is the anchor
    rounds: list[Round] = field(default_factory=list)

    @property
    def done(self) -> bool:
        return len(self.tokens) >= self.max_new_tokens


@dataclass
class ServeResult:
    policy: str
    requests: list[Request]
    seconds: float
    verify_lens: list[int] = field(default_factory=list)  # every ℓ_r of every round
    batch_tokens: list[int] = field(default_factory=list)  # B = Σ (1 + ℓ_r) per round
    plan_seconds: list[float] = field(default_factory=list)  # the scheduler's own time per round
    prefill_forwards: int = 0

    def to_json(self, detok=None) -> dict[str, Any]:
        reqs = []
        for r in self.requests:
            row = {
                "prompt": detok(r.prompt) if detok else r.prompt,
                "prompt_tokens": len(r.prompt),
                "tokens": r.tokens[: r.max_new_tokens],
                "rounds": len(r.rounds),
                "mean_accepted_length": (sum(x.n_accepted + 1 for x in r.rounds) / len(r.rounds) if r.rounds else None),
                "mean_verify_len": sum(x.verify_len for x in r.rounds) / len(r.rounds) if r.rounds else None,
            }
            if detok:
                row["text"] = detok(r.tokens[: r.max_new_tokens])
            reqs.append(row)
        n_tokens = sum(len(r["tokens"]) for r in reqs)
        return {
            "policy": self.policy,
            "requests": reqs,
            "tokens_per_s": n_tokens / self.seconds if self.seconds > 0 else None,
            "seconds": self.seconds,
            "rounds": len(self.batch_tokens),
            "mean_verify_len": sum(self.verify_lens) / len(self.verify_lens) if self.verify_lens else None,
            "batch_tokens_per_round": self.batch_tokens,
            "scheduler_ms_per_round_p50": (
                1e3 * sorted(self.plan_seconds)[len(self.plan_seconds) // 2] if self.plan_seconds else None
            ),
        }


def check_serve(prompts: list[list[int]], requests: int, policy: str, max_new_tokens: int, cfg) -> None:
    check_int(requests, "--requests", 1, MAX_REQUESTS)
    if policy not in POLICIES:
        raise ValueError(f"--policy = {policy!r} is invalid: allowed {', '.join(POLICIES)}")
    if not prompts:
        raise ValueError("no prompts: allowed at least one (one prompt per line in --prompts-file)")
    longest = max(len(p) for p in prompts)
    if min(len(p) for p in prompts) < 1:
        raise ValueError("a prompt is empty: allowed prompts of at least one token")
    room = cfg.max_seq_len - longest
    check_int(max_new_tokens, "--max-new-tokens", 1, room, f"max_seq_len {cfg.max_seq_len} − the longest prompt")


@torch.inference_mode()
def serve(
    model,
    prompts: list[list[int]],
    requests: int = 4,
    policy: str = "dspark",
    temperature: float = 0.0,
    max_new_tokens: int = 32,
    seed: int = 0,
    sps=None,
    threshold: float | None = None,
    on_round=None,
) -> ServeResult:
    """Decode every prompt (token ids) with at most `requests` in flight; `sps` is the cost table the dspark
    policies read (default: the shipped measured one)."""
    from .schedule import read_table

    cfg = model.cfg
    check_serve(prompts, requests, policy, max_new_tokens, cfg)
    temperature = check_temperature(temperature)
    gen = torch.Generator(device=model.device).manual_seed(check_seed(seed))
    k = cfg.dspark_block_size
    options = {} if threshold is None else {"threshold": threshold}
    table = sps if sps is not None else (read_table(None) if policy in ("dspark", "dspark-async") else None)
    scheduler = Scheduler(policy, k, sps=table, **options)
    queue = deque(Request(i, list(p), max_new_tokens) for i, p in enumerate(prompts))
    active: list[Request] = []
    finished: list[Request] = []
    history: deque = deque(maxlen=2)  # the confidences of the last two rounds (dspark-async reads the older)
    result = ServeResult(policy, finished, 0.0)
    t0 = time.perf_counter()
    while queue or active:
        while queue and len(active) < requests:  # 1. admit: prefill into the running batch
            req = queue.popleft()
            req.cache = model.new_cache(1)
            out = model(torch.tensor([req.prompt], device=model.device), cache=req.cache, last_only=True)
            req.tokens.append(int(next_token(out.logits[:, -1], temperature, gen)[0]))
            result.prefill_forwards += 1
            active.append(req)
        still = [r for r in active if not r.done]
        finished += [r for r in active if r.done]
        active = still
        if not active:
            continue
        anchors = [r.tokens[-1] for r in active]
        caches = [r.cache for r in active]
        drafts = draft_requests(model, caches, anchors, temperature, gen)  # 2. the whole block, each request
        # [R, k]; a request at the end of max_seq_len drafted fewer: its missing drafts have survival 0
        conf = torch.zeros(len(drafts), k, dtype=torch.float64)
        for r, d in enumerate(drafts):
            conf[r, : d.confidence.size(1)] = d.confidence[0].to("cpu", torch.float64)
        tp = time.perf_counter()
        stale = history[0] if len(history) == 2 else None
        plan = scheduler.plan(conf, stale=stale)  # 3. ℓ_r per request
        result.plan_seconds.append(time.perf_counter() - tp)
        history.append(conf)
        # never verify past what a request still needs (its last round may want fewer tokens)
        lengths = [
            min(int(n), r.max_new_tokens - len(r.tokens), d.tokens.size(1))
            for n, r, d in zip(plan.lengths, active, drafts, strict=True)
        ]
        rounds = verify_ragged(model, caches, anchors, drafts, lengths, temperature, gen)  # 4. one forward
        result.verify_lens += lengths
        result.batch_tokens.append(sum(1 + n for n in lengths))
        for req, rnd in zip(active, rounds, strict=True):
            req.rounds.append(rnd)
            req.tokens += rnd.committed
        if on_round is not None:
            on_round(len(finished), len(active))
    result.seconds = time.perf_counter() - t0
    finished.sort(key=lambda r: r.index)
    for r in finished:
        r.cache = None  # the caches are not part of the result
    return result

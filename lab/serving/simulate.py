"""Load simulation of confidence-scheduled verification: what each policy would do with R requests in flight.

The lab machine cannot run 256 concurrent requests at a realistic cost curve, but the scheduler only needs two
things per request and round, which a batch-1 run can record:

    Row(confidence = (c_1..c_k), n_accepted = n)   the calibrated confidences of the k drafts, and how many
                                                   drafts the target keeps when all k are verified.

Replaying rows is exact for one round: draft j is kept or not from positions ≤ j only (greedy: a match with the
target's argmax; sampling: u_j < p_t/p_d with the same u_j), so verifying a prefix ℓ keeps min(n, ℓ) drafts and
commits min(n, ℓ) + 1 tokens. What it leaves out: with a shorter commit the next round would start from another
context (the replay keeps the recorded sequence of rounds), and the draft's own cost and the scheduler's time
(the round time is the verify step 1/SPS(B) only — the objective Θ of Algorithm 1).

One simulated run (R, policy, table): R slots; each slot replays a stream (one recorded request, its rounds in
order) from a seeded random start, and takes a fresh random stream when its stream ends (continuous batching).
The replayed rows depend on the seed only, never on the policy, so every policy sees the same rounds. Per
round: plan = Scheduler.plan(confidences [R, k], stale = the batch's confidences `lag` rounds ago), then
B = Σ(1 + ℓ_r) and committed = Σ(min(n_r, ℓ_r) + 1), and the round takes 1/SPS(B) seconds. The first `lag`
rounds are only a warm-up (they give dspark-async its stale confidences, as in a running server). Reported:

    throughput        committed tokens / simulated seconds (all requests together)
    mean_verify_len   mean ℓ over request-rounds (0..k)
    tau               mean committed tokens per request-round (= min(n, ℓ) + 1)
    batch_tokens      mean B per round
"""

from __future__ import annotations

import json
import math
import random
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import torch

from dspark_mini.files import write_atomic
from dspark_mini.jsonlimits import MAX_DATA_BYTES, read_json
from dspark_mini.scheduler import DEFAULT_THRESHOLD, POLICIES, Scheduler, StepRate, check_policy
from dspark_mini.validate import check_int

from .sps import nearest_rank

SIM_REQUESTS = tuple(2**i for i in range(9))  # R = 1, 2, 4, …, 256
ROWS_FORMAT = "dspark-lab/verify-rows"


class Row(NamedTuple):
    """One request's round: confidences c_1..c_k and the drafts the target keeps when all k are verified."""

    confidence: tuple[float, ...]
    n_accepted: int


Stream = list[Row]  # one request's rounds, in order


def check_streams(streams: Sequence[Sequence[Any]]) -> tuple[list[torch.Tensor], list[torch.Tensor], int]:
    """Validate plain rows ((c_1..c_k), n) → per stream confidences [T_s, k] float64 and n_accepted [T_s] int64."""
    if not isinstance(streams, Sequence) or not streams:
        raise ValueError("streams is empty: allowed a non-empty list of streams (lists of (confidence, n) rows)")
    k = None
    confs, ns = [], []
    for s, stream in enumerate(streams):
        if not isinstance(stream, Sequence) or not stream:
            raise ValueError(f"streams[{s}] is empty: allowed a non-empty list of (confidence, n_accepted) rows")
        cs, n = [], []
        for t, row in enumerate(stream):
            try:
                c, acc = row
                c = [float(x) for x in c]
            except (TypeError, ValueError):
                raise ValueError(f"streams[{s}][{t}] must be a row (confidence list, n_accepted)") from None
            k = len(c) if k is None else k
            if len(c) != k or k < 1:
                raise ValueError(f"streams[{s}][{t}] has {len(c)} confidences: allowed k = {k} in every row")
            if not all(math.isfinite(x) and 0.0 <= x <= 1.0 for x in c):
                raise ValueError(f"streams[{s}][{t}].confidence = {c} is invalid: allowed values in [0, 1]")
            check_int(acc, f"streams[{s}][{t}].n_accepted", 0, k, bare=True)
            cs.append(c)
            n.append(acc)
        confs.append(torch.tensor(cs, dtype=torch.float64))
        ns.append(torch.tensor(n, dtype=torch.int64))
    return confs, ns, int(k)


def replay(streams: Sequence[Sequence[Any]], requests: int, rounds: int, seed: int = 0):
    """The rounds R slots see: a list of `rounds` pairs (confidences [R, k], n_accepted [R])."""
    check_int(requests, "requests", 1)
    check_int(rounds, "rounds", 1)
    confs, ns, _ = check_streams(streams)
    rng = random.Random(seed)
    slots = []  # [stream index, row index] per slot
    for _ in range(requests):
        s = rng.randrange(len(confs))
        slots.append([s, rng.randrange(len(ns[s]))])
    out = []
    for _ in range(rounds):
        c = torch.stack([confs[s][t] for s, t in slots])
        n = torch.stack([ns[s][t] for s, t in slots])
        out.append((c, n))
        for slot in slots:
            slot[1] += 1
            if slot[1] == len(ns[slot[0]]):  # request finished: the slot takes the next one
                slot[0], slot[1] = rng.randrange(len(confs)), 0
    return out


def run_policy(
    batches, scheduler: Scheduler, sps: StepRate, lag: int = 2, on_round: Callable[[int], None] | None = None
) -> dict[str, float]:
    """Play the replayed rounds under one scheduler; the round time is 1/SPS(B). The first `lag` rounds are a
    warm-up that only provides stale confidences (a running server has them); the rest are measured.
    `on_round(R)` hears of every measured round of R requests (a progress bar)."""
    check_int(lag, "lag", 1)
    if len(batches) <= lag:
        raise ValueError(f"{len(batches)} rounds leave nothing to measure after the warm-up of lag = {lag}")
    committed = seconds = verified = batch_tokens = slots = 0.0
    for t in range(lag, len(batches)):
        c, n = batches[t]
        plan = scheduler.plan(c, batches[t - lag][0])
        committed += float((torch.minimum(n, plan.lengths) + 1).sum())
        seconds += 1.0 / float(sps.steps_per_s(torch.tensor([plan.batch_tokens]))[0])
        verified += plan.capacity
        batch_tokens += plan.batch_tokens
        slots += n.numel()
        if on_round is not None:
            on_round(n.numel())
    return {
        "throughput": committed / seconds,
        "mean_verify_len": verified / slots,
        "tau": committed / slots,
        "batch_tokens": batch_tokens / (len(batches) - lag),
    }


def simulate(
    streams: Sequence[Sequence[Any]],
    tables: Mapping[str, StepRate],
    policies: Sequence[str] = POLICIES,
    requests: Sequence[int] = SIM_REQUESTS,
    rounds: int = 64,
    seed: int = 0,
    threshold: float = DEFAULT_THRESHOLD,
    lag: int = 2,
    on_round: Callable[[int], None] | None = None,
) -> dict[str, dict[str, dict[str, dict[str, float]]]]:
    """sim[table][policy][str(R)] = {throughput, mean_verify_len, tau, batch_tokens}, over `rounds` measured
    rounds after a warm-up of `lag` rounds (dspark-async reads the batch's confidences `lag` rounds old).

    streams: recorded or synthetic rows (see `Row`); tables: name → SPS table; R as a string key ("1" … "256");
    on_round(R): called after every measured round of R requests (a progress bar)."""
    if not isinstance(tables, Mapping) or not tables:
        raise ValueError("tables is empty: allowed a mapping name → SPS table (e.g. {'smooth': smooth_table()})")
    for p in policies:
        check_policy(p)
    for r in requests:
        check_int(r, "requests", 1)
    _, _, k = check_streams(streams)
    out: dict[str, dict[str, dict[str, dict[str, float]]]] = {name: {p: {} for p in policies} for name in tables}
    for r in requests:
        batches = replay(streams, r, rounds + lag, seed)
        for name, table in tables.items():
            for p in policies:
                sched = Scheduler(p, k, table, threshold=threshold)
                out[name][p][str(r)] = run_policy(batches, sched, table, lag, on_round)
    return out


def plan_cost(
    scheduler: Scheduler, confidences, stale=None, reps: int = 50, clock: Callable[[], float] = time.perf_counter
) -> dict[str, float]:
    """The scheduler's own time per round: p50 / p95 / p99 seconds of `scheduler.plan` over `reps` calls
    (nearest rank). It is reported beside the verify forward it must stay small next to."""
    check_int(reps, "reps", 1)
    times = []
    for _ in range(reps):
        t0 = clock()
        scheduler.plan(confidences, stale)
        times.append(clock() - t0)
    s = sorted(times)
    return {"p50": nearest_rank(s, 0.5), "p95": nearest_rank(s, 0.95), "p99": nearest_rank(s, 0.99), "n": reps}


# ---- rows: synthetic, recorded from the lab drafter, saved ------------------------------------------------
def synthetic_streams(
    n_streams: int = 48, rounds: int = 40, k: int = 5, seed: int = 0, drop: float = 0.06
) -> list[Stream]:
    """Perfectly calibrated synthetic rows shaped like the paper's: each round draws an easiness e ~ Beta(4, 1)
    (mean 0.8: most rounds easy, a tail of hard ones); the conditional acceptance at position j is
    q_j = max(0, e − drop·(j − 1)) (later drafts are harder); c_j = q_j and the target keeps draft j with
    probability q_j given drafts 1..j−1 kept. → n_streams streams of `rounds` rows each."""
    for name, v in (("n_streams", n_streams), ("rounds", rounds), ("k", k)):
        check_int(v, name, 1)
    g = torch.Generator().manual_seed(seed)
    beta = torch.distributions.Beta(torch.tensor(4.0), torch.tensor(1.0))
    torch_state = torch.get_rng_state()
    torch.manual_seed(seed)  # Beta.sample uses the global generator: seed it and restore it afterwards
    try:
        e = beta.sample((n_streams, rounds)).double()  # [S, T]
    finally:
        torch.set_rng_state(torch_state)
    q = (e[..., None] - drop * torch.arange(k, dtype=torch.float64)).clamp(0.0, 1.0)  # [S, T, k]
    kept = torch.rand(q.shape, generator=g, dtype=torch.float64) < q
    n = torch.cumprod(kept.long(), -1).sum(-1)  # [S, T]: length of the leading run of kept drafts
    return [[Row(tuple(q[s, t].tolist()), int(n[s, t])) for t in range(rounds)] for s in range(n_streams)]


def record_streams(
    model=None,
    drafter=None,
    domains: Sequence[str] | None = None,
    n_prompts: int = 4,
    max_new_tokens: int | None = None,
    temperature: float = 1.0,
    seed: int = 0,
    on_progress: Callable[[str], None] | None = None,
) -> list[Stream]:
    """Rows from real rounds: the trained lab model with its DSpark drafter (`load_drafter("dspark")` unless
    given), batch 1 on held-out prompts (lab.evaluation.quality.eval_prompts), the full trained block verified every
    round (generate_speculative); one stream per prompt. Rounds cut short at the end of a generation (fewer than
    k drafts) are dropped so every row has the same k. Temperature 1 by default, as the paper's offline numbers
    and the STS fit."""
    from dspark_mini.speculative import check_verify_len, drafter_block, generate_speculative
    from lab.evaluation.quality import MAX_NEW_TOKENS, eval_prompts
    from lab.realtext import DOMAINS
    from lab.weights import load_drafter

    if model is None:
        model, drafter = load_drafter("dspark")
    if drafter is None or not getattr(drafter, "has_confidence", False):
        raise ValueError("drafter must have a confidence head (a DSpark drafter, e.g. load_drafter('dspark'))")
    k = check_verify_len(None, drafter_block(model, drafter))
    domains = DOMAINS if domains is None else domains
    max_new_tokens = MAX_NEW_TOKENS if max_new_tokens is None else max_new_tokens
    streams: list[Stream] = []
    for domain in domains:
        prompts = eval_prompts(domain, n_prompts, seed=seed)  # [n, L]
        for i in range(prompts.size(0)):
            res = generate_speculative(
                model, prompts[i : i + 1], max_new_tokens, None, temperature, seed + i, drafter=drafter
            )
            rows = [Row(tuple(r.confidence), r.n_accepted) for r in res.rows(0) if r.verify_len == k]
            if rows:
                streams.append(rows)
        if on_progress is not None:
            on_progress(f"recorded {domain}: {len(streams)} streams so far")
    if not streams:
        raise ValueError("no full-block rounds were recorded: raise max_new_tokens")
    return streams


def save_streams(path: str | Path, streams: Sequence[Sequence[Any]], conditions: dict[str, Any] | None = None) -> Path:
    """JSON {"format", "version", "k", "conditions", "streams": [[{"confidence": [...], "n_accepted": n}, …], …]}."""
    confs, ns, k = check_streams(streams)
    doc = {
        "format": ROWS_FORMAT,
        "version": 1,
        "k": k,
        "conditions": dict(conditions or {}),
        "streams": [
            [{"confidence": c.tolist(), "n_accepted": int(a)} for c, a in zip(cs, n, strict=True)]
            for cs, n in zip(confs, ns, strict=True)
        ],
    }
    return write_atomic(path, json.dumps(doc) + "\n")  # atomically: the previous file survives a full disk


def load_streams(path: str | Path) -> list[Stream]:
    d = read_json(path, MAX_DATA_BYTES)
    if not isinstance(d, dict) or d.get("format") != ROWS_FORMAT:
        raise ValueError(f"{path}: format is invalid: allowed {ROWS_FORMAT!r}")
    try:
        streams = [[Row(tuple(r["confidence"]), r["n_accepted"]) for r in s] for s in d["streams"]]
    except (KeyError, TypeError) as e:
        raise ValueError(f"{path}: streams must hold rows with confidence and n_accepted ({e!r} missing)") from None
    check_streams(streams)
    return streams

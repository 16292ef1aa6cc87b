"""`dspark-lab serve`: R requests decoded concurrently with confidence-scheduled, ragged speculative rounds.

One round, for the requests in flight (continuous batching — a finished request's slot takes the next prompt):
  1. admit: a free slot takes the next prompt; its prefill runs on its own cache and samples its first token
     (the round's anchor), so prompts of any length join the running batch — the prompts admitted together
     (at the start, or when several requests finished in the same round) share one packed prefill forward;
  2. draft: every request drafts the whole trained block (k = 5) on its own cache → tokens and confidences c;
  3. schedule: the policy turns the confidences [R, k] into verify lengths ℓ_r (`dspark_mini.scheduler`);
  4. verify: ONE target forward over all requests' [anchor, x_1..x_ℓr] rows, each at its own cache length
     (`dspark_mini.ragged`); each request keeps what rejection sampling keeps and commits its own verdict.
Greedy output of every request equals plain decoding of its prompt, whatever the policy and R (tests, float64; in
bfloat16 up to near-ties, as `generate`: docs/reliability.md).

What stays alive is bounded by the R slots, never by the number of prompts (`serve_stream`):
  - prompts are taken from any iterable one at a time, when a slot is free (a file is read as it is served);
  - a request that has its tokens is finished at once: its cache (and every tensor of its rounds) is released,
    it leaves its slot, which takes the next prompt before the next round, and it is handed to the caller then
    — the caller prints it and lets it go;
  - the summary (`ServeStats`) is aggregates updated every round: counts and sums, how many rounds ran at each
    batch size B (at most R·(k + 1) distinct values) and a sample of the scheduler's own time per round
    (every round up to PLAN_SAMPLE rounds, a uniform sample beyond) for its median.
`serve` is the list form for a list of prompts: it returns every finished request (with its rounds), by prompt.
"""

from __future__ import annotations

import math
import random
import time
from collections import Counter, deque
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from dspark_mini.model import forward_ragged
from dspark_mini.sampling import new_generator, next_token
from dspark_mini.scheduler import POLICIES, Scheduler
from dspark_mini.speculative import Round, draft_requests, prefill, verify_ragged
from dspark_mini.validate import check_int, check_temperature

MAX_REQUESTS = 1024  # slots in flight
PLAN_SAMPLE = 4096  # scheduler times kept for the median: all of them up to this many rounds, a uniform sample beyond
PREFILL_PACK_TOKENS = 2048  # prompt tokens prefilled in one packed forward (bounds its logits [1, T, V])


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

    @property
    def new_tokens(self) -> list[int]:
        """What the request returns: its tokens, cut to max_new_tokens (a last round may commit one more)."""
        return self.tokens[: self.max_new_tokens]

    def to_json(self, detok: Callable[[list[int]], str] | None = None) -> dict[str, Any]:
        """One finished request as `serve --json` streams it (one JSON line)."""
        n = len(self.rounds)
        row = {
            "index": self.index,
            "prompt": detok(self.prompt) if detok else self.prompt,
            "prompt_tokens": len(self.prompt),
            "tokens": self.new_tokens,
            "rounds": n,
            "mean_accepted_length": sum(x.n_accepted + 1 for x in self.rounds) / n if n else None,
            "mean_verify_len": sum(x.verify_len for x in self.rounds) / n if n else None,
        }
        if detok:
            row["text"] = detok(self.new_tokens)
        return row


class Reservoir:
    """A uniform sample of at most `size` numbers of a stream (algorithm R, its own seeded generator): every
    number while fewer than `size` have come, so the median of a short run is exact."""

    def __init__(self, size: int = PLAN_SAMPLE, seed: int = 0) -> None:
        self.size = check_int(size, "size", 1)
        self.seen = 0
        self.values: list[float] = []
        self._rng = random.Random(seed)

    def add(self, x: float) -> None:
        self.seen += 1
        if len(self.values) < self.size:
            self.values.append(x)
        else:
            j = self._rng.randrange(self.seen)
            if j < self.size:
                self.values[j] = x

    def median(self) -> float | None:
        """The upper median (index n // 2 of the sorted sample), None before any number."""
        s = sorted(self.values)
        return s[len(s) // 2] if s else None


@dataclass
class ServeStats:
    """What the summary reports, accumulated as the run goes (its size does not grow with the prompts)."""

    policy: str
    requests: int = 0  # finished requests
    new_tokens: int = 0  # their tokens (each cut to max_new_tokens)
    rounds: int = 0  # verify forwards
    request_rounds: int = 0  # Σ over rounds of the requests in it (= draft passes)
    verify_len_sum: int = 0  # Σ ℓ_r over every request of every round
    batch_tokens: Counter = field(default_factory=Counter)  # B = Σ (1 + ℓ_r) → rounds that ran at B
    plan_seconds: Reservoir = field(default_factory=Reservoir)  # the scheduler's own time per round
    prefill_forwards: int = 0
    seconds: float = 0.0  # time spent serving (not the caller's time between two finished requests)

    def add_round(self, lengths: Sequence[int], plan_s: float) -> None:
        self.rounds += 1
        self.request_rounds += len(lengths)
        self.verify_len_sum += sum(lengths)
        self.batch_tokens[sum(1 + n for n in lengths)] += 1
        self.plan_seconds.add(plan_s)

    def add_finished(self, req: Request) -> None:
        self.requests += 1
        self.new_tokens += len(req.new_tokens)

    def to_json(self) -> dict[str, Any]:
        """The summary object (`serve --json` prints it last): the numbers the whole-run report always had."""
        b = self.batch_tokens
        plan = self.plan_seconds.median()
        return {
            "policy": self.policy,
            "requests": self.requests,
            "new_tokens": self.new_tokens,
            "tokens_per_s": self.new_tokens / self.seconds if self.seconds > 0 else None,
            "seconds": self.seconds,
            "rounds": self.rounds,
            "mean_verify_len": self.verify_len_sum / self.request_rounds if self.request_rounds else None,
            "batch_tokens_per_round": {
                "mean": sum(k * n for k, n in b.items()) / self.rounds if self.rounds else None,
                "max": max(b) if b else None,
                "rounds_at": {str(k): b[k] for k in sorted(b)},
            },
            "scheduler_ms_per_round_p50": 1e3 * plan if plan is not None else None,
            "prefill_forwards": self.prefill_forwards,
        }


@dataclass
class ServeResult:
    """`serve`'s answer: every finished request (by prompt), and the run's summary."""

    requests: list[Request]
    stats: ServeStats

    @property
    def policy(self) -> str:
        return self.stats.policy

    @property
    def seconds(self) -> float:
        return self.stats.seconds

    @property
    def batch_tokens(self) -> Counter:
        """B → the rounds that ran at B (max(…) is the largest batch of the run)."""
        return self.stats.batch_tokens


def check_serve_sizes(
    n_prompts: int, shortest: int, longest: int, requests: int, policy: str, max_new_tokens: int, cfg
) -> None:
    """The options against the prompts' count and their shortest / longest length (tokens)."""
    check_int(requests, "--requests", 1, MAX_REQUESTS)
    if policy not in POLICIES:
        raise ValueError(f"--policy = {policy!r} is invalid: allowed {', '.join(POLICIES)}")
    if n_prompts < 1:
        raise ValueError("no prompts: allowed at least one (one prompt per line in --prompts-file)")
    if shortest < 1:
        raise ValueError("a prompt is empty: allowed prompts of at least one token")
    room = cfg.max_seq_len - longest
    check_int(max_new_tokens, "--max-new-tokens", 1, room, f"max_seq_len {cfg.max_seq_len} − the longest prompt")


def check_serve(prompts: list[list[int]], requests: int, policy: str, max_new_tokens: int, cfg) -> None:
    lengths = [len(p) for p in prompts]
    shortest, longest = (min(lengths), max(lengths)) if lengths else (0, 0)
    check_serve_sizes(len(prompts), shortest, longest, requests, policy, max_new_tokens, cfg)


def check_prompt(prompt: list[int], index: int, max_new_tokens: int, cfg) -> None:
    """One prompt as it is admitted (a stream is checked prompt by prompt)."""
    room = cfg.max_seq_len - max_new_tokens
    if not 1 <= len(prompt) <= room:
        raise ValueError(
            f"prompt {index} has {len(prompt)} tokens: allowed 1..{room} "
            f"(max_seq_len {cfg.max_seq_len} − --max-new-tokens {max_new_tokens})"
        )


def packs(reqs: list[Request], budget: int = PREFILL_PACK_TOKENS) -> Iterator[list[Request]]:
    """The requests in order, in groups of at most `budget` prompt tokens (a longer prompt is a group alone)."""
    group: list[Request] = []
    tokens = 0
    for r in reqs:
        if group and tokens + len(r.prompt) > budget:
            yield group
            group, tokens = [], 0
        group.append(r)
        tokens += len(r.prompt)
    if group:
        yield group


def admit(model, reqs: list[Request], temperature: float, gen: torch.Generator) -> None:
    """Prefill the prompts of requests admitted together, each on its own new cache, in ONE forward — packed
    (`forward_ragged`: the token-wise work shared, attention per prompt) when there are several, the plain one
    when alone — and sample each one's first token (its first round's anchor), in admission order."""
    dev = model.device
    if len(reqs) == 1:  # alone: the model's own prefill, as generate's
        r = reqs[0]
        r.cache, first = prefill(model, torch.tensor([r.prompt], device=dev), temperature, gen)  # first: [1]
        r.tokens.append(int(first[0]))
        return
    for r in reqs:
        r.cache = model.new_cache(1)
    outs = forward_ragged(model, [torch.tensor([r.prompt], device=dev) for r in reqs], [r.cache for r in reqs])
    last = []
    for r, out in zip(reqs, outs, strict=True):
        r.cache.commit(out.pending)  # every prompt row
        last.append(out.logits[:, -1])  # [1, V]
    for r, logits in zip(reqs, last, strict=True):
        r.tokens.append(int(next_token(logits, temperature, gen)[0]))


def serve_round(
    model, active: list[Request], scheduler: Scheduler, history: deque, temperature: float, gen, stats: ServeStats
) -> int:
    """One draft → schedule → verify round of every request in flight; each commits its own verdict.
    → the new tokens it brought (each request counted up to its max_new_tokens). Its tensors die with it."""
    k = model.cfg.dspark_block_size
    anchors = [r.tokens[-1] for r in active]
    caches = [r.cache for r in active]
    drafts = draft_requests(model, caches, anchors, temperature, gen)  # 2. the whole block, each request
    # [R, k]; a request at the end of max_seq_len drafted fewer: its missing drafts have survival 0
    conf = torch.zeros(len(drafts), k, dtype=torch.float64)
    for r, d in enumerate(drafts):
        conf[r, : d.confidence.size(1)] = d.confidence[0].to("cpu", torch.float64)
    tp = time.perf_counter()
    plan = scheduler.plan(conf, stale=history[0] if len(history) == 2 else None)  # 3. ℓ_r per request
    plan_s = time.perf_counter() - tp
    history.append(conf)
    # never verify past what a request still needs (its last round may want fewer tokens)
    lengths = [
        min(int(n), r.max_new_tokens - len(r.tokens), d.tokens.size(1))
        for n, r, d in zip(plan.lengths, active, drafts, strict=True)
    ]
    rounds = verify_ragged(model, caches, anchors, drafts, lengths, temperature, gen)  # 4. one forward
    stats.add_round(lengths, plan_s)
    brought = 0
    for req, rnd in zip(active, rounds, strict=True):
        brought += min(len(rnd.committed), req.max_new_tokens - len(req.tokens))
        req.rounds.append(rnd)
        req.tokens += rnd.committed
    return brought


@torch.inference_mode()
def serve_stream(
    model,
    prompts: Iterable[Sequence[int]],
    requests: int = 4,
    policy: str = "dspark",
    temperature: float = 0.0,
    max_new_tokens: int = 32,
    seed: int = 0,
    sps=None,
    threshold: float | None = None,
    stats: ServeStats | None = None,
    on_tokens: Callable[[int], None] | None = None,
) -> Iterator[Request]:
    """Decode every prompt (token ids, taken from `prompts` only when a slot is free) with at most `requests` in
    flight; yield each request the moment it finishes, in order of finishing, its cache already released.

    `stats` (a ServeStats) is filled as the run goes; `on_tokens(n)` hears of every n new tokens (a progress
    bar); `sps` is the cost table the dspark policies read (default: the shipped measured one)."""
    from .schedule import read_table

    cfg = model.cfg
    check_int(requests, "--requests", 1, MAX_REQUESTS)
    if policy not in POLICIES:
        raise ValueError(f"--policy = {policy!r} is invalid: allowed {', '.join(POLICIES)}")
    check_int(max_new_tokens, "--max-new-tokens", 1, cfg.max_seq_len - 1, f"max_seq_len {cfg.max_seq_len} − 1")
    temperature = check_temperature(temperature)
    gen = new_generator(seed, model.device, "portable")  # the draws `generate` and the browser make for a seed
    options = {} if threshold is None else {"threshold": threshold}
    table = sps if sps is not None else (read_table(None) if policy in ("dspark", "dspark-async") else None)
    scheduler = Scheduler(policy, cfg.dspark_block_size, sps=table, **options)
    stats = ServeStats(policy) if stats is None else stats
    tell = on_tokens if on_tokens is not None else (lambda n: None)
    source = iter(prompts)
    active: list[Request] = []
    history: deque = deque(maxlen=2)  # the confidences of the last two rounds (dspark-async reads the older)
    index = 0
    t0 = time.perf_counter()
    while True:
        admitted = []  # 1. admit: free slots take the next prompts, prefilled together into the batch
        while len(active) + len(admitted) < requests:
            prompt = next(source, None)
            if prompt is None:
                break
            admitted.append(Request(index, list(prompt), max_new_tokens))
            check_prompt(admitted[-1].prompt, index, max_new_tokens, cfg)
            index += 1
        for group in packs(admitted):
            admit(model, group, temperature, gen)
            stats.prefill_forwards += 1
            tell(len(group))
        active += admitted
        if not active:
            break
        live = [r for r in active if not r.done]  # (with max_new_tokens 1 the prefill's token is all there is)
        if live:
            tell(serve_round(model, live, scheduler, history, temperature, gen, stats))
        finished = [r for r in active if r.done]
        active = [r for r in active if not r.done]
        while finished:  # out of its slot, its cache released, handed over (and no longer held here)
            req = finished.pop(0)
            req.cache = None
            stats.add_finished(req)
            stats.seconds += time.perf_counter() - t0
            yield req
            t0 = time.perf_counter()
    stats.seconds += time.perf_counter() - t0


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
) -> ServeResult:
    """Decode every prompt of a list (token ids) with at most `requests` in flight (`serve_stream`) → every
    finished request with its rounds, by prompt, and the summary."""
    check_serve(prompts, requests, policy, max_new_tokens, model.cfg)
    stats = ServeStats(policy)
    stream = serve_stream(model, prompts, requests, policy, temperature, max_new_tokens, seed, sps, threshold, stats)
    done = sorted(stream, key=lambda r: r.index)
    return ServeResult(done, stats)


# ---- the estimate `serve` prints before it starts ---------------------------------------------------------------
ESTIMATE_TAU = 3.5  # tokens a round commits, for the estimate: the lab drafter's τ is 3.1 (T = 1) … 4.4 (greedy)
PROBE_TOKENS = 8  # the probe prefills the first prompt cut to this many tokens
PROBE_RUNS = 3  # the probe keeps the fastest of this many runs


@torch.inference_mode()
def probe_round(model, prompt: Sequence[int]) -> dict[str, float]:
    """Seconds of one prefill, one draft pass and one whole-block verify (B = k + 1) of one request on a scratch
    cache, here and now — the rate `estimate_serve` scales. The fastest of PROBE_RUNS runs (the first one also
    builds the prepared weights); greedy, so no generator is touched."""
    ids = torch.tensor([list(prompt)[:PROBE_TOKENS]], device=model.device)  # [1, ≤ 8]
    seconds = {"prefill": math.inf, "draft": math.inf, "verify": math.inf}
    for _ in range(PROBE_RUNS):
        t0 = time.perf_counter()
        cache = model.new_cache(1)
        anchor = int(model(ids, cache=cache, last_only=True).logits[0, -1].argmax())
        t1 = time.perf_counter()
        drafts = draft_requests(model, [cache], [anchor], 0.0, None)
        t2 = time.perf_counter()
        verify_ragged(model, [cache], [anchor], drafts, [drafts[0].tokens.size(1)], 0.0, None)
        for key, dt in (("prefill", t1 - t0), ("draft", t2 - t1), ("verify", time.perf_counter() - t2)):
            seconds[key] = min(seconds[key], dt)
    return seconds


def estimate_serve(prompts: int, requests: int, max_new_tokens: int, k: int, probe: dict[str, float], table):
    """The work of serving `prompts` prompts: at most one prefill forward each (prompts admitted together share
    one), ≈ ⌈(max_new_tokens − 1) / τ⌉ rounds each
    at τ = ESTIMATE_TAU (each round one draft pass of the request, and a share of one verify forward of the
    min(R, prompts) in flight), timed by `probe` (`probe_round`); the verify forward at B = slots·(k + 1) is
    the probe's B = k + 1 scaled by the SPS table's curve `table`. → Estimate"""
    from .work import Estimate

    slots = min(requests, prompts)
    per_request = math.ceil((max_new_tokens - 1) / ESTIMATE_TAU)
    drafts = prompts * per_request
    verifies = math.ceil(drafts / slots)
    verify_s = probe["verify"] * table.step_seconds(slots * (k + 1)) / table.step_seconds(k + 1)
    seconds = prompts * probe["prefill"] + drafts * probe["draft"] + verifies * verify_s
    counts = {
        "prompts": prompts,
        "new_tokens": max_new_tokens,
        "slots": requests,
        "prefills": prompts,
        "drafts": drafts,
        "verifies": verifies,
        "tau": ESTIMATE_TAU,
    }
    return Estimate("serve", counts, seconds)

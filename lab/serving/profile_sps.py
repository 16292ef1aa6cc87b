"""`dspark-lab profile --sps`: SPS(B) of the lab model's verify forward on this machine.

What one step at B batch tokens is. A verify round of R requests runs the target once over R blocks of k + 1
rows (the anchor slot and the k drafts, lab: k = 5, 6 rows). Until the ragged batched verify exists, the
forward is built from the model API as R = B / (k + 1) sequences of k + 1 rows each, every sequence on its own
cache prefilled to `cache_len` tokens of held-out corpus text, run with `commit=False` so the cache stays as it
was and the same forward can be repeated; a B ≤ k + 1 is one sequence of B rows (B = 1: a plain decode step).
So B is 1..k + 1 or a multiple of k + 1, and the table records the B that really ran.

The sizes. DEFAULT_BATCH_TOKENS = 1, 6, 12, 24, …, 1536: a plain decode step, then R = 1, 2, 4, …, 256 full
blocks — the loads the simulation (`dspark-lab schedule`) plays, so at every R the fixed policy's B is a
measured point and the scheduler's smaller B fall between two of them (the table interpolates the step time
linearly). Powers of two, because the step time of a small model on a CPU is a floor (weight reads, Python
overhead) plus work per token: doubling spreads the points evenly over that curve. The default run (15
reps, one thread) takes ≈ 25 s on a 2-core Xeon, most of it at B = 1536.

Measured one size at a time (`measure_size`, with `lab.serving.sps.measure_sps`): that size's caches are
prefilled, it is warmed up and timed `reps` times, and its caches are freed before the next size — so the peak
memory is the largest single size's (B = 3072: 1.3 GB resident, the process included), not the sum over the
sizes (every allowed size at once: ≈ 45 GB). SPS = 1 / median step time, p50/p95/p99 kept, forced monotone.
(Interleaving the reps over the sizes would spread a slow drift of the machine over all of them, but it needs
every size's caches at once.)
Before it starts, `estimate_sps` says how many forwards that is and about how long they take here.
"""

from __future__ import annotations

import math
import os
import subprocess
import time
from collections.abc import Callable, Sequence
from pathlib import Path

import torch

from dspark_mini.validate import check_int, check_seed

from .sps import SPSTable, measure_sps

DEFAULT_BATCH_TOKENS = (1, 6, 12, 24, 48, 96, 192, 384, 768, 1536)  # a decode step, then R = 1 … 256 blocks of 6
MAX_BATCH_TOKENS = 3072  # 512 sequences of 6 rows, measured alone (1.3 GB resident at this size)
SPS_CACHE_LENGTH = 32  # a held-out prompt (16 tokens) plus the middle of a 40-token generation
ROOT = Path(__file__).resolve().parents[2]


def check_batch_tokens(sizes: Sequence[int], rows: int, name: str = "--batch-tokens") -> list[int]:
    """Sizes the lab's verify forward can run exactly: 1..rows (one sequence) or multiples of rows (rows = k + 1),
    at most MAX_BATCH_TOKENS, distinct. → sorted list."""
    allowed = f"distinct integers 1..{rows} or multiples of {rows} (k + 1 rows per request) up to {MAX_BATCH_TOKENS}"
    if not sizes:
        raise ValueError(f"{name} is empty: allowed {allowed}")
    for b in sizes:
        check_int(b, name, 1, MAX_BATCH_TOKENS, f"{allowed}")
        if b > rows and b % rows:
            raise ValueError(f"{name} = {b} is invalid: allowed {allowed}")
    if len(set(sizes)) != len(sizes):
        raise ValueError(f"{name} repeats a size: allowed {allowed}")
    return sorted(sizes)


def parse_batch_tokens(text: str, rows: int) -> list[int]:
    """'1,6,12' → [1, 6, 12] (checked by `check_batch_tokens`)."""
    try:
        sizes = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise ValueError(
            f"--batch-tokens = {text!r} is invalid: allowed comma-separated integers, e.g. 1,6,12"
        ) from None
    return check_batch_tokens(sizes, rows)


def layout(b: int, rows: int) -> tuple[int, int]:
    """B batch tokens → (sequences R, rows per sequence)."""
    return (1, b) if b <= rows else (b // rows, rows)


def corpus_rows(n: int, length: int, seed: int) -> torch.Tensor:
    """n held-out corpus snippets of `length` tokens: seeded windows of the test split's token stream (every source
    of the real-text corpus, documents closed by <eos>; a sum is shorter than a verify window's context, so the
    windows may cross documents).  → [n, length] int64"""
    from lab.realtext import token_stream

    stream = token_stream("test")  # [N]
    if stream.numel() <= length:
        raise ValueError(f"length = {length} is invalid: allowed 1..{stream.numel() - 1} (the test split's tokens)")
    gen = torch.Generator().manual_seed(seed)
    starts = torch.randint(0, stream.numel() - length, (n,), generator=gen)  # [n]
    return torch.stack([stream[s : s + length] for s in starts.tolist()])


@torch.no_grad()
def size_forward(model, b: int, cache_len: int, text: torch.Tensor) -> Callable[[], object]:
    """forward() for one size: one verify forward over B = b batch tokens (see the module docstring). Its R
    caches are prefilled here from `text` [≥ R, cache_len + rows]; they live as long as the returned function."""
    r, s = layout(b, model.cfg.dspark_block_size + 1)
    cache = model.new_cache(r)
    model(text[:r, :cache_len], cache=cache)
    block = text[:r, cache_len : cache_len + s].contiguous()  # [R, rows]

    @torch.no_grad()
    def forward() -> object:
        return model(block, cache=cache, commit=False).logits

    return forward


def measure_size(model, b: int, cache_len: int, text: torch.Tensor, reps: int, warmup: int) -> SPSTable:
    """One size measured on its own: its caches built, warmed up, timed `reps` times, and released on return."""
    forward = size_forward(model, b, cache_len, text)
    return measure_sps(lambda _b: forward(), [b], reps, warmup=warmup)


def git_state() -> str:
    """The source the numbers came from: commit id, '+dirty' when the working tree differs ('unknown' outside git)."""
    try:
        head = subprocess.run(
            ["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True, text=True, timeout=5, check=True
        ).stdout.strip()
        dirty = subprocess.run(
            ["git", "status", "--porcelain", "--untracked-files=no", "--", "dspark_mini"],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=5,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return head + ("+dirty (dspark_mini/ differs from the commit)" if dirty else "")


def profile_sps(
    sizes: Sequence[int] = DEFAULT_BATCH_TOKENS,
    reps: int = 15,
    cache_len: int = SPS_CACHE_LENGTH,
    weights: str = "trained",
    seed: int = 0,
    warmup: int = 1,
    model=None,
    on_size: Callable[[int], None] | None = None,
) -> SPSTable:
    """Measure the lab model's verify forward at each B of `sizes`, one size at a time (`measure_size`: only that
    size's caches are alive) → the forced-monotone SPS table with its run conditions. `model` defaults to
    `lab.weights.lab_model(weights, seed)`; `on_size(B)` hears of every size measured (a progress bar)."""
    from lab.evaluation.conditions import run_conditions
    from lab.weights import lab_model

    check_seed(seed)
    check_int(reps, "reps", 1)
    if model is None:
        model = lab_model(weights, seed)
    model.eval()
    rows = model.cfg.dspark_block_size + 1
    sizes = check_batch_tokens(list(sizes), rows, "batch_tokens")
    check_int(cache_len, "cache_len", 1, model.cfg.max_seq_len - rows, f"max_seq_len − one verify of {rows} rows")
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else None
    text = corpus_rows(max(layout(b, rows)[0] for b in sizes), cache_len + rows, seed)  # [R_max, L + rows]
    parts = []
    for b in sizes:
        parts.append(measure_size(model, b, cache_len, text, reps, warmup))
        if on_size is not None:
            on_size(b)
    cond = run_conditions(model, 0, cache_len)
    cond.update(
        {
            "batch": f"R = B / {rows} sequences of {rows} rows (anchor + block {rows - 1}); B ≤ {rows}: one sequence",
            "forward": "model(block [R, rows], cache prefilled with held-out corpus text, commit=False), no_grad",
            "order": "one size at a time (its caches built, warm-up, reps, caches freed), sizes ascending",
            "rows_per_request": rows,
            "weights": weights,
            "preset": model.cfg.name,
            "seed": seed,
            "source": git_state(),
            "load_average_1min_before": load,
        }
    )
    raw = [p.raw_steps_per_s[0] for p in parts]
    stats = [p.step_stats[0] for p in parts]
    return SPSTable(sizes, raw, "linear", "measured", {**parts[0].conditions, **cond}, stats, raw)


@torch.no_grad()
def estimate_sps(model, sizes: Sequence[int], reps: int, warmup: int, cache_len: int, table: SPSTable, seed: int = 0):
    """The work of `profile_sps`: per size one prefill of its R sequences and warmup + reps verify forwards
    (exact counts), timed by a probe here (the prefill of one sequence and one forward at B = k + 1, the fastest
    of three runs) scaled along the SPS table's curve `table` (prefill of R × cache_len tokens, verify at B).
    → Estimate"""
    from .work import Estimate

    rows = model.cfg.dspark_block_size + 1
    sizes = check_batch_tokens(list(sizes), rows, "batch_tokens")
    text = corpus_rows(1, cache_len + rows, seed)  # [1, L + rows]
    prefill_s = verify_s = math.inf
    for _ in range(3):
        t0 = time.perf_counter()
        forward = size_forward(model, rows, cache_len, text)
        t1 = time.perf_counter()
        forward()
        prefill_s, verify_s = min(prefill_s, t1 - t0), min(verify_s, time.perf_counter() - t1)
    t = table.step_seconds
    seconds = 0.0
    for b in sizes:
        r = layout(b, rows)[0]
        seconds += prefill_s * t(r * cache_len) / t(cache_len) + (warmup + reps) * verify_s * t(b) / t(rows)
    counts = {
        "sizes": len(sizes),
        "smallest": sizes[0],
        "largest": sizes[-1],
        "warmup": warmup,
        "reps": reps,
        "prefills": len(sizes),
        "forwards": len(sizes) * (warmup + reps),
        "batch_tokens": sum(sizes) * (warmup + reps),
    }
    return Estimate("sps", counts, seconds)

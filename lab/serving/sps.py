"""SPS(B): the target's verify steps per second as a function of the batch-token count B — the cost table the
confidence scheduler reads (dspark_mini/scheduler.py).

What a table holds. Measured (or synthetic) points (B_i, SPS_i), B_1 < B_2 < …, and a rule for the B in between:

  "linear"  the step time t = 1/SPS is interpolated linearly between measured points (an engine that runs
            exactly B tokens: cost grows smoothly with the work);
  "step"    B is padded up to the next measured size, t(B) = t(B_i) for the smallest B_i ≥ B (an engine that
            replays CUDA graphs captured at a few batch sizes: a batch of 65 runs the 128-graph).
Below B_1 the step costs t(B_1); beyond the last point the step time grows on with the slope of the last
segment (an estimate: measure far enough for the loads you simulate — `max_batch_tokens`).

Forced monotone, as the engines do (vLLM forces its profiled cost tables monotone): the step
time may not fall as B grows, so SPS(B) is non-increasing. A measured dip (noise, a lucky kernel) is raised to
the running maximum of the step time over the smaller sizes. The token throughput B·SPS(B) is deliberately
NOT forced non-decreasing: on a staircase it really drops right after each bucket edge (the padded tokens are
wasted work), and that drop is what makes Algorithm 1's early stop stall.

JSON (format "dspark-lab/sps-table", version 1):
    {"format": "dspark-lab/sps-table", "version": 1, "name": "measured", "interpolation": "linear",
     "points": [{"batch_tokens": 1, "steps_per_s": 812.0,           # forced monotone: what the scheduler reads
                 "raw_steps_per_s": 812.0,                           # optional: the measured median
                 "step_s": {"p50": 0.00123, "p95": 0.0013, "p99": 0.0014, "n": 20}},   # optional
                ...],
     "conditions": {...}}                                            # device, threads, dtype, reps, context, …
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from dspark_mini.files import write_atomic
from dspark_mini.jsonlimits import MAX_DATA_BYTES, JSONLimitError, read_json
from dspark_mini.validate import check_int, is_integer

FORMAT = "dspark-lab/sps-table"
VERSION = 1
INTERPOLATIONS = ("linear", "step")
DENSE_MAX = 1 << 16  # the integer lookup covers B ≤ min(largest measured B, this)
MONOTONE_RULE = "step time non-decreasing in B (SPS non-increasing); B·SPS(B) not forced"


class SPSTableError(ValueError):
    """A malformed SPS table (the message names the key)."""


def _is_pos(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x) and x > 0


def force_monotone(steps_per_s: Sequence[float]) -> list[float]:
    """SPS non-increasing in B: the running minimum (= the running maximum of the step time)."""
    out, low = [], math.inf
    for s in steps_per_s:
        low = min(low, s)
        out.append(low)
    return out


class SPSTable:
    """Steps per second of the verify forward at B batch tokens (see the module docstring).

    batch_tokens [N] ascending distinct ints ≥ 1; steps_per_s [N] each > 0, forced monotone on construction
    (`forced_steps_per_s`, what `steps_per_s(B)` interpolates); raw_steps_per_s [N] the measured medians
    before forcing (default: steps_per_s); step_stats [N] optional p50/p95/p99 of the step time."""

    def __init__(
        self,
        batch_tokens: Sequence[int],
        steps_per_s: Sequence[float],
        interpolation: str = "linear",
        name: str = "table",
        conditions: dict[str, Any] | None = None,
        step_stats: Sequence[dict[str, float] | None] | None = None,
        raw_steps_per_s: Sequence[float] | None = None,
    ):
        bt, sps = list(batch_tokens), list(steps_per_s)
        raw = list(raw_steps_per_s) if raw_steps_per_s is not None else sps
        if not bt:
            raise SPSTableError("points is empty: an SPS table needs at least one measured batch size")
        if len(sps) != len(bt):
            raise SPSTableError(f"steps_per_s has {len(sps)} values for {len(bt)} batch_tokens")
        for i, (b, s) in enumerate(zip(bt, sps, strict=True)):
            check_int(b, f"points[{i}].batch_tokens", 1, error=SPSTableError)
            if i and b <= bt[i - 1]:
                raise SPSTableError(
                    f"points[{i}].batch_tokens = {b} is invalid: allowed strictly ascending sizes (after {bt[i - 1]})"
                )
            if not _is_pos(s):
                raise SPSTableError(f"points[{i}].steps_per_s = {s!r} is invalid: allowed a finite number > 0")
        if interpolation not in INTERPOLATIONS:
            raise SPSTableError(
                f"interpolation = {interpolation!r} is invalid: allowed {', '.join(map(repr, INTERPOLATIONS))}"
            )
        if len(raw) != len(bt):
            raise SPSTableError(f"raw_steps_per_s has {len(raw)} values for {len(bt)} batch_tokens")
        for i, r in enumerate(raw):
            if not _is_pos(r):
                raise SPSTableError(f"points[{i}].raw_steps_per_s = {r!r} is invalid: allowed a finite number > 0")
        if step_stats is not None and len(step_stats) != len(bt):
            raise SPSTableError(f"step_stats has {len(step_stats)} entries for {len(bt)} batch_tokens")
        self.batch_tokens = tuple(bt)
        self.raw_steps_per_s = tuple(float(r) for r in raw)
        self.forced_steps_per_s = tuple(force_monotone([float(x) for x in sps]))
        self.interpolation = interpolation
        self.name = str(name)
        self.conditions = dict(conditions or {})
        self.step_stats = list(step_stats) if step_stats is not None else [None] * len(bt)
        self._b = torch.tensor(self.batch_tokens, dtype=torch.float64)
        self._t = 1.0 / torch.tensor(self.forced_steps_per_s, dtype=torch.float64)  # step seconds, non-decreasing
        # the engines' form: a lookup table over every integer B up to the largest measured one
        self._dense = self._interpolate(torch.arange(1, min(self.max_batch_tokens, DENSE_MAX) + 1).double())

    @property
    def max_batch_tokens(self) -> int:
        """The largest measured B (beyond it the table extrapolates)."""
        return self.batch_tokens[-1]

    def step_seconds(self, batch_tokens):
        """t(B) in seconds. An int gives a float; a tensor [N] gives a float64 tensor [N]."""
        scalar = not isinstance(batch_tokens, torch.Tensor)
        if not scalar and batch_tokens.dtype == torch.int64 and batch_tokens.numel():
            lo, hi = int(batch_tokens.min()), int(batch_tokens.max())
            if lo >= 1 and hi <= self._dense.numel():  # the common case: a table lookup
                return self._dense[batch_tokens.reshape(-1) - 1]
        b = torch.as_tensor(batch_tokens, dtype=torch.float64).reshape(-1)
        if bool((b < 1).any()) or not bool(torch.isfinite(b).all()):
            raise ValueError(f"batch_tokens must be ≥ 1 (got {batch_tokens!r})")
        t = self._interpolate(b)
        return float(t[0]) if scalar else t

    def _interpolate(self, b: torch.Tensor) -> torch.Tensor:
        """t(B) for B [N] float64 ≥ 1 by the table's rule (see the module docstring)."""
        bs, ts, n = self._b, self._t, self._b.numel()
        if n == 1:
            t = ts.expand_as(b).clone()
        else:
            hi = torch.searchsorted(bs, b).clamp(1, n - 1)  # segment [hi − 1, hi]; beyond the ends: the end ones
            lo = hi - 1
            slope = (ts[hi] - ts[lo]) / (bs[hi] - bs[lo])
            if self.interpolation == "linear":
                t = ts[lo] + slope * (b - bs[lo])
            else:  # pad up to the next captured size
                t = ts[torch.searchsorted(bs, b).clamp(max=n - 1)]
            t = torch.where(b <= bs[0], ts[0], t)
            beyond = b > bs[-1]
            t = torch.where(beyond, ts[-1] + slope * (b - bs[-1]), t)
        return t

    def steps_per_s(self, batch_tokens):
        """SPS(B) = 1 / t(B). An int gives a float; a tensor [N] gives a float64 tensor [N]."""
        t = self.step_seconds(batch_tokens)
        return 1.0 / t

    def to_dict(self) -> dict[str, Any]:
        points = []
        for b, s, raw, st in zip(
            self.batch_tokens, self.forced_steps_per_s, self.raw_steps_per_s, self.step_stats, strict=True
        ):
            p: dict[str, Any] = {"batch_tokens": b, "steps_per_s": s, "raw_steps_per_s": raw}
            if st is not None:
                p["step_s"] = dict(st)
            points.append(p)
        return {
            "format": FORMAT,
            "version": VERSION,
            "name": self.name,
            "interpolation": self.interpolation,
            "monotone": MONOTONE_RULE,
            "points": points,
            "conditions": self.conditions,
        }

    @classmethod
    def from_dict(cls, d: Any) -> SPSTable:
        """Validate a parsed table; an SPSTableError names the offending key."""
        if not isinstance(d, dict):
            raise SPSTableError(f"an SPS table must be a JSON object (got {type(d).__name__})")
        if d.get("format") != FORMAT:
            raise SPSTableError(f"format = {d.get('format')!r} is invalid: allowed {FORMAT!r}")
        if d.get("version") != VERSION:
            raise SPSTableError(f"version = {d.get('version')!r} is invalid: allowed {VERSION}")
        points = d.get("points")
        if not isinstance(points, list) or not points:
            raise SPSTableError("points is missing or empty: allowed a non-empty list of {batch_tokens, steps_per_s}")
        bt, sps, raw, stats = [], [], [], []
        for i, p in enumerate(points):
            if not isinstance(p, dict):
                raise SPSTableError(f"points[{i}] must be an object with batch_tokens and steps_per_s")
            for key in ("batch_tokens", "steps_per_s"):
                if key not in p:
                    raise SPSTableError(f"points[{i}].{key} is missing")
            bt.append(p["batch_tokens"])
            sps.append(p["steps_per_s"])
            raw.append(p.get("raw_steps_per_s", p["steps_per_s"]))
            st = p.get("step_s")
            if st is not None and (not isinstance(st, dict) or not all(_is_pos(v) for v in st.values())):
                raise SPSTableError(f"points[{i}].step_s must map names (p50, p95, …) to numbers > 0")
            stats.append(st)
        conditions = d.get("conditions", {})
        if not isinstance(conditions, dict):
            raise SPSTableError("conditions must be an object (device, threads, dtype, …)")
        name = d.get("name", "table")
        if not isinstance(name, str):
            raise SPSTableError(f"name = {name!r} is invalid: allowed a string")
        return cls(bt, sps, d.get("interpolation", "linear"), name, conditions, stats, raw)

    def __repr__(self) -> str:
        span = f"B {self.batch_tokens[0]}..{self.max_batch_tokens}"
        return f"SPSTable({self.name!r}, {len(self.batch_tokens)} points, {span}, {self.interpolation})"


def save_table(table: SPSTable, path: str | Path) -> Path:
    """The table as JSON, written atomically (dspark_mini.files): out of disk, the previous table is unchanged."""
    return write_atomic(path, json.dumps(table.to_dict(), indent=2) + "\n")


def load_table(path: str | Path) -> SPSTable:
    """Read and validate a table; errors name the file and the key."""
    path = Path(path)
    try:
        d = read_json(path, MAX_DATA_BYTES)
    except FileNotFoundError:
        raise SPSTableError(f"{path}: no such SPS table (make one with `dspark-lab profile --sps`)") from None
    except JSONLimitError as e:
        raise SPSTableError(f"{path}: not valid JSON: it {e}") from None
    try:
        return SPSTable.from_dict(d)
    except SPSTableError as e:
        raise SPSTableError(f"{path}: {e}") from None


# ---- measuring --------------------------------------------------------------------------------------------
def nearest_rank(sorted_xs: Sequence[float], q: float) -> float:
    """Nearest-rank quantile of sorted values (the convention of lab.evaluation.conditions.percentiles)."""
    return sorted_xs[min(len(sorted_xs) - 1, max(0, round(q * (len(sorted_xs) - 1))))]


def measure_sps(
    forward_fn: Callable[[int], object],
    batch_tokens: Sequence[int],
    reps: int = 10,
    *,
    warmup: int = 1,
    clock: Callable[[], float] = time.perf_counter,
    name: str = "measured",
    interpolation: str = "linear",
    conditions: dict[str, Any] | None = None,
) -> SPSTable:
    """Time `forward_fn(B)` — one verify forward over B batch tokens — and build the forced-monotone table.

    forward_fn must finish its work before returning (call torch.cuda.synchronize() inside on a GPU).
    Each B is warmed up `warmup` times; then the reps are interleaved (rep 1 of every B, rep 2 of every B, …)
    so a slow drift of the machine spreads over all sizes instead of bending the curve. SPS(B) = 1 / (median
    step time, nearest-rank p50); p50/p95/p99 of the step time are kept per point. `clock` is injectable
    (tests pass a deterministic fake clock)."""
    sizes = list(batch_tokens)
    if not sizes:
        raise ValueError("batch_tokens is empty: allowed a list of distinct integers ≥ 1")
    for b in sizes:
        if not is_integer(b) or b < 1:
            raise ValueError(f"batch_tokens contains {b!r}: allowed distinct integers ≥ 1")
    if len(set(sizes)) != len(sizes):
        raise ValueError("batch_tokens has repeated sizes: allowed distinct integers ≥ 1")
    for key, v, low in (("reps", reps, 1), ("warmup", warmup, 0)):
        check_int(v, key, low)
    sizes.sort()
    for b in sizes:
        for _ in range(warmup):
            forward_fn(b)
    times: dict[int, list[float]] = {b: [] for b in sizes}
    for _ in range(reps):
        for b in sizes:
            t0 = clock()
            forward_fn(b)
            dt = clock() - t0
            if not (math.isfinite(dt) and dt > 0):
                raise ValueError(f"the clock measured {dt!r} s for B = {b}: a step must take a positive time")
            times[b].append(dt)
    stats, raw = [], []
    for b in sizes:
        s = sorted(times[b])
        st = {"p50": nearest_rank(s, 0.5), "p95": nearest_rank(s, 0.95), "p99": nearest_rank(s, 0.99), "n": len(s)}
        stats.append(st)
        raw.append(1.0 / st["p50"])
    cond = {"reps": reps, "warmup": warmup, "statistic": "median step time (nearest-rank p50)", **(conditions or {})}
    cond["monotone"] = MONOTONE_RULE
    return SPSTable(sizes, raw, interpolation, name, cond, stats, raw)


# ---- synthetic tables -------------------------------------------------------------------------------------
POW2_SIZES = tuple(2**i for i in range(13))  # 1 … 4096


def affine_step_seconds(b: int, step_s: float, knee: int) -> float:
    """t(B) = t0 · (1 + B / knee): a weight-read floor t0 plus work per token; throughput B/t → knee/t0."""
    return step_s * (1.0 + b / knee)


def _check_synthetic(step_s: float, knee: int, sizes: Sequence[int]) -> None:
    if not _is_pos(step_s):
        raise ValueError(f"step_s = {step_s!r} is invalid: allowed a finite number > 0")
    check_int(knee, "knee", 1)
    if not sizes:
        raise ValueError("sizes is empty")


def smooth_table(step_s: float = 0.02, knee: int = 256, sizes: Sequence[int] = POW2_SIZES) -> SPSTable:
    """A smooth saturating engine: t(B) = t0 (1 + B/knee), linear interpolation (exact for this t).
    Θ along the scheduler's path is then unimodal and Algorithm 1's early stop finds the global optimum."""
    _check_synthetic(step_s, knee, sizes)
    sps = [1.0 / affine_step_seconds(b, step_s, knee) for b in sizes]
    cond = {"synthetic": f"t(B) = {step_s} s · (1 + B/{knee})", "monotone": MONOTONE_RULE}
    return SPSTable(list(sizes), sps, "linear", "smooth", cond)


def staircase_table(step_s: float = 0.02, knee: int = 256, buckets: Sequence[int] = POW2_SIZES) -> SPSTable:
    """A CUDA-graph-like engine: graphs captured at `buckets` (powers of two by default); a batch of B tokens
    runs the smallest bucket ≥ B, so t(B) = t0 (1 + bucket(B)/knee) — flat inside a bucket, a jump after it."""
    _check_synthetic(step_s, knee, buckets)
    sps = [1.0 / affine_step_seconds(b, step_s, knee) for b in buckets]
    cond = {
        "synthetic": f"t(B) = {step_s} s · (1 + bucket(B)/{knee}), buckets {list(buckets)}",
        "monotone": MONOTONE_RULE,
    }
    return SPSTable(list(buckets), sps, "step", "staircase", cond)

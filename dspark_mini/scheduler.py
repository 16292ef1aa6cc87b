"""Step 6B · confidence-scheduled verification: how many of its k draft tokens each request sends to verify.

The draft always proposes the whole trained block x_{r,1..k} for every request r of the batch, with calibrated
confidences c_{r,j} ≈ P(x_{r,j} kept | x_{r,1..j−1} kept). The scheduler picks a verify length ℓ_r ∈ {0..k} per
request (ℓ_r = 0: verify only the anchor slot, i.e. plain decoding for this round). Notation (the DSpark paper's,
§3.2.2):

    a_{r,j} = Π_{i≤j} c_{r,i}                 prefix survival: P(drafts 1..j of request r are all kept)
    B       = Σ_r (1 + ℓ_r)                   batch tokens of the verify forward (each anchor slot always runs)
    τ*      = Σ_r (1 + Σ_{j≤ℓ_r} a_{r,j})     expected committed tokens this round (kept drafts + one target token)
    SPS(B)  = target steps per second at B batch tokens (a profiled cost table, lab.serving.sps)
    Θ       = τ* · SPS(B)                     expected committed tokens per second — the objective

Extending request r from ℓ_r = j − 1 to j adds exactly a_{r,j} to τ* and one token to B, and a_{r,j} does not grow
with j (every c ≤ 1). So sorting all candidates (r, j) by a_{r,j}, largest first, gives a "greedy path" whose n-th
point admits the n best drafts and respects each request's prefix order (j before j + 1; ties are broken by
position, then request: an order that reads only indices, never values). The policies differ in where on
that path they stop:

  fixed         ℓ_r = L for everyone (L = k by default): the classic "verify the whole block".
  threshold     ℓ_r = the number of leading positions with a_{r,j} ≥ t (stop at the first survival below t).
                Static: it ignores the load. (DeepSpec's evaluator thresholds the per-position σ(c_j) instead
                of the product; here we threshold the survival, the quantity that is
                calibrated.)
  dspark        Algorithm 1 (paper §3.2.2): walk the path and stop at the first candidate that would not
                raise Θ (the early stop, below).
  dspark-async  the production variant (paper §5.2): the capacity K (draft tokens admitted in total) comes
                from confidences two rounds old, by a global search over the whole path; then the top-K
                current candidates of the path are admitted.
  retrospective NOT shipped, teaching only: the global argmax of Θ over the path of the *current* round.
                It looks at a_{r,j+1} — which reads the value of x_{r,j} through the confidence head's W1[x_j]
                — before deciding whether x_{r,j} is verified, and that biases the output (Appendix A;
                tests/test_scheduler.py shows P(A) = 0.85 where the target says 0.7).

The early stop (Algorithm 1, paper §3.2.2: start from Θ_best = R·SPS(R); for each candidate in
descending a, tentatively extend, and keep it if Θ > Θ_best, else break). With v_n the n-th largest survival on
the path, B_n = R + n and τ_n = R + v_1 + … + v_n, Θ_best is Θ_{n−1} as long as the walk goes on, so the n-th
candidate is admitted iff Θ_n > Θ_{n−1}, i.e.

    (τ_{n−1} + v_n) · SPS(B_n) > τ_{n−1} · SPS(B_n − 1)
    ⇔   v_n > τ_{n−1} · (SPS(B_n − 1) / SPS(B_n) − 1) = τ_{n−1} · (t(B_n) − t(B_n − 1)) / t(B_n − 1)

with t = 1/SPS the step time: the next draft's survival must beat the tokens already expected this round times
the relative slowdown of one more batch token. At low load the step hardly slows (verify nearly everything);
at high load τ is large and every token costs (only confident drafts pass). The first failure ends the walk
(`break`, not `continue`).

Why the early stop keeps decoding exact ("non-anticipating"). Rejection sampling over a verified prefix is
exact as long as the decision to verify x_{r,j} does not depend on the value of x_{r,j} itself. a_{r,j} reads
x_{r,<j} only (c_{r,j} sees W1[x_{r,j−1}]); whether the walk reaches (r, j) and admits it depends only on
candidates ranked above it (other requests, and r's own positions < j) and on a_{r,j}. The candidates that
carry x_{r,j}'s value (r, j+1..k) rank after it, so they are never read before the decision. The retrospective
search reads them; dspark-async never reads current values for K at all, and its top-K with an index-only
tie-break never lets (r, j+1) outrank (r, j).

When the early stop is optimal. The path holds, for every B, the best τ* of all ℓ vectors with that B (it adds
the largest survivals first, in prefix order), so the global argmax of Θ on the path is the optimum over all
ℓ vectors. With an affine step time t(B) = t0 + βB (the `smooth` table) the criterion above reads
v_n > β · Θ_{n−1}: along the walk Θ only grows and v only shrinks, so once a candidate fails every later one
fails too — the early stop is that global optimum. A CUDA-graph staircase breaks this: right after a bucket edge
the step time jumps, Θ dips, and the early stop halts even when filling the next bucket would pay (it "stalls");
the async global search steps over the dip.

Shapes: confidences [R, k] (a tensor or nested lists, any float dtype/device; the plan is computed on the CPU in
float64, as engines size the batch on the host); lengths [R] int64.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Protocol

import torch

from .validate import check_int, check_verify_len

POLICIES = ("fixed", "threshold", "dspark", "dspark-async")  # the shipped policies
RETROSPECTIVE = "retrospective"  # a biased global search, kept only to show the bias
ALL_POLICIES = POLICIES + (RETROSPECTIVE,)
NEEDS_TABLE = ("dspark", "dspark-async", RETROSPECTIVE)
DEFAULT_THRESHOLD = 0.1  # survival below which the static threshold stops: cut only drafts that almost surely die


class StepRate(Protocol):
    """An SPS(B) cost table: steps per second of the target's verify forward at B batch tokens.

    `lab.serving.sps.SPSTable` is the lab's; anything with this method works."""

    def steps_per_s(self, batch_tokens: torch.Tensor) -> torch.Tensor:  # [N] int64 → [N] float64, each > 0
        ...


@dataclass(frozen=True)
class Plan:
    """One round's verify plan for R requests."""

    policy: str
    lengths: torch.Tensor  # [R] int64: ℓ_r, the drafts request r sends to verify (0..k)
    batch_tokens: int  # B = Σ_r (1 + ℓ_r)
    expected_tokens: float  # τ* = Σ_r (1 + Σ_{j≤ℓ_r} a_{r,j}), with the current confidences
    throughput: float | None  # Θ = τ* · SPS(B) in expected tokens / s (None when no table was given)
    capacity: int  # Σ_r ℓ_r: draft tokens admitted

    @property
    def mean_verify_len(self) -> float:
        return self.capacity / self.lengths.numel()


def _allowed(names) -> str:
    return ", ".join(map(repr, names))


def check_policy(policy: str) -> str:
    if policy not in ALL_POLICIES:
        raise ValueError(
            f"policy = {policy!r} is invalid: allowed {_allowed(POLICIES)} "
            f"(and {RETROSPECTIVE!r}, the biased search kept for the Appendix A demo)"
        )
    return policy


def check_threshold(threshold: float) -> float:
    ok = isinstance(threshold, (int, float)) and not isinstance(threshold, bool) and math.isfinite(threshold)
    if not ok or not 0.0 <= threshold <= 1.0:
        raise ValueError(f"threshold = {threshold!r} is invalid: allowed a number in [0, 1]")
    return float(threshold)


def check_confidences(confidences, k: int, name: str = "confidences") -> torch.Tensor:
    """→ float64 CPU tensor [R, k]; a clear ValueError for a wrong shape, k, or values outside [0, 1]."""
    try:
        if isinstance(confidences, torch.Tensor):
            c = confidences.detach().to("cpu", torch.float64)
        else:  # nested lists: read in float64 directly (as_tensor would round them to float32 first)
            c = torch.as_tensor(confidences, dtype=torch.float64)
    except (TypeError, ValueError, RuntimeError) as e:
        raise ValueError(f"{name} must be numbers of shape [R, k] with k = {k} ({e})") from None
    if c.dim() != 2 or c.size(0) < 1:
        raise ValueError(f"{name} must have shape [R, k] with R ≥ 1 and k = {k} (got shape {tuple(c.shape)})")
    if c.size(1) != k:
        raise ValueError(f"{name} has k = {c.size(1)} draft positions but the scheduler was built for k = {k}")
    bad = ~torch.isfinite(c) | (c < 0) | (c > 1)
    if bool(bad.any()):
        r, j = (int(i) for i in bad.nonzero()[0])
        raise ValueError(
            f"{name}[{r}][{j}] = {float(c[r, j])!r} is invalid: allowed finite calibrated confidences in [0, 1]"
        )
    return c


def survival(confidences: torch.Tensor) -> torch.Tensor:
    """a_{r,j} = Π_{i≤j} c_{r,i}.  [R, k] → [R, k], non-increasing along j.

    The running min after the product guards the order against rounding in parallel scans (a GPU cumprod may
    associate differently); on the CPU it changes nothing."""
    return torch.cumprod(confidences, dim=1).cummin(dim=1).values


def greedy_path(a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """All candidates (r, j) sorted by survival, largest first, ties by position j then request r.

    a [R, k] → (order [R·k] flat ids m = j·R + r, values [R·k] the sorted survivals). Flattening position-major
    and sorting stably makes the tie-break depend on indices only."""
    flat = a.t().reshape(-1)  # [k·R]: m = j·R + r
    values, order = torch.sort(flat, descending=True, stable=True)
    return order, values


def path_throughput(values: torch.Tensor, n_requests: int, sps: StepRate) -> torch.Tensor:
    """Θ_n = (R + v_1 + … + v_n) · SPS(R + n) for n = 0..N.  values [N] → [N + 1] float64."""
    tau = n_requests + torch.cat([values.new_zeros(1), torch.cumsum(values, 0)])
    b = n_requests + torch.arange(values.numel() + 1, dtype=torch.int64)
    rate = torch.as_tensor(sps.steps_per_s(b), dtype=torch.float64)
    if rate.shape != b.shape or not bool((torch.isfinite(rate) & (rate > 0)).all()):
        raise ValueError("the SPS table returned steps/s that are not finite and > 0 for every batch size")
    return tau * rate


def early_stop_count(theta: torch.Tensor) -> int:
    """Algorithm 1's walk: admit candidates while each one strictly raises Θ; stop at the first that does not.
    theta [N + 1] (Θ_0 = nothing admitted) → n admitted."""
    up = theta[1:] > theta[:-1]
    return int(up.numel() if bool(up.all()) else int((~up).nonzero()[0]))


def global_best_count(theta: torch.Tensor) -> int:
    """The n with the largest Θ_n on the whole path (the first one on ties). theta [N + 1] → n."""
    return int(torch.argmax(theta))


def lengths_from_path(order: torch.Tensor, n: int, n_requests: int) -> torch.Tensor:
    """ℓ_r = how many of the first n path candidates belong to request r.  → [R] int64"""
    return torch.bincount(order[:n] % n_requests, minlength=n_requests)


class Scheduler:
    """One verify-length policy for drafts of k tokens.

    >>> s = Scheduler("dspark", k=5, sps=table)        # table: lab.serving.sps.SPSTable (or any StepRate)
    >>> plan = s.plan(confidences)                      # [R, 5] calibrated c
    >>> plan.lengths                                    # [R] ℓ_r ∈ 0..5
    `dspark-async` also takes `stale` = confidences from two rounds ago ([R', k], any R'); without them
    (the first rounds of a run) it verifies everything. The other policies ignore `stale`.
    """

    def __init__(
        self,
        policy: str,
        k: int,
        sps: StepRate | None = None,
        threshold: float = DEFAULT_THRESHOLD,
        length: int | None = None,
    ):
        self.policy = check_policy(policy)
        self.k = check_int(k, "k", 1, None, "the drafted block")
        self.threshold = check_threshold(threshold)
        self.length = check_verify_len(length, k, "length", lo=0)
        if sps is not None and not callable(getattr(sps, "steps_per_s", None)):
            raise ValueError("sps must be an SPS cost table with steps_per_s(batch_tokens) (lab.serving.sps)")
        if sps is None and policy in NEEDS_TABLE:
            raise ValueError(f"policy = {policy!r} needs an SPS cost table: pass sps= (see lab.serving.sps)")
        self.sps = sps

    def plan(self, confidences, stale=None) -> Plan:
        """The verify lengths for one round. confidences [R, k]; stale [R', k] (dspark-async only)."""
        c = check_confidences(confidences, self.k)
        n_req = c.size(0)
        a = survival(c)
        if self.policy == "fixed":
            lengths = torch.full((n_req,), self.length, dtype=torch.int64)
        elif self.policy == "threshold":
            lengths = (a >= self.threshold).sum(1)  # a is non-increasing: the count is the leading run
        else:
            order, values = greedy_path(a)
            if self.policy == "dspark":
                n = early_stop_count(path_throughput(values, n_req, self.sps))
            elif self.policy == RETROSPECTIVE:
                n = global_best_count(path_throughput(values, n_req, self.sps))
            else:  # dspark-async
                n = self.capacity(n_req, stale)
            lengths = lengths_from_path(order, n, n_req)
        return self._finish(lengths, a)

    def capacity(self, n_requests: int, stale=None) -> int:
        """dspark-async's K: the global argmax of Θ over the path built from stale confidences [R', k], with the
        current R anchors: Θ_n = (R + Σ_{top n stale} a) · SPS(R + n), n ≤ R·k. No stale → R·k (verify all)."""
        if stale is None:
            return n_requests * self.k
        s = check_confidences(stale, self.k, "stale")
        _, values = greedy_path(survival(s))
        values = values[: n_requests * self.k]
        if values.numel() < n_requests * self.k:  # fewer stale requests than now: the rest count as hopeless
            values = torch.cat([values, values.new_zeros(n_requests * self.k - values.numel())])
        return global_best_count(path_throughput(values, n_requests, self.sps))

    def _finish(self, lengths: torch.Tensor, a: torch.Tensor) -> Plan:
        n_req = lengths.numel()
        gained = torch.cat([a.new_zeros(n_req, 1), torch.cumsum(a, 1)], 1).gather(1, lengths[:, None]).sum()
        b = int(n_req + lengths.sum())
        tau = float(n_req + gained)
        theta = None
        if self.sps is not None:
            theta = tau * float(torch.as_tensor(self.sps.steps_per_s(torch.tensor([b]))).reshape(-1)[0])
        return Plan(self.policy, lengths, b, tau, theta, int(lengths.sum()))


def plan_round(policy: str, confidences, sps: StepRate | None = None, stale=None, **options) -> Plan:
    """One-shot convenience: Scheduler(policy, k, sps, **options).plan(confidences, stale), k read off [R, k]."""
    try:
        shape = tuple(torch.as_tensor(confidences).shape)
    except (TypeError, ValueError, RuntimeError):
        shape = ("ragged",)
    if len(shape) != 2 or shape[0] < 1 or shape[1] < 1:
        raise ValueError(f"confidences must have shape [R, k] with R ≥ 1 and k ≥ 1 (got shape {shape})")
    return Scheduler(policy, shape[1], sps, **options).plan(confidences, stale)

"""Step 6B · the verify-length policies (dspark_mini/scheduler.py): Algorithm 1 against a naive loop and a
brute-force search, threshold / fixed semantics, dspark-async's value-independent tie-break, the
non-anticipation property that makes a policy exact, the paper's Appendix A counterexample (chi-square), and
input validation.

Brute force: for R ≤ 3 requests and k ≤ 3 drafts every prefix-length vector ℓ ∈ {0..k}^R is enumerated and its
Θ(ℓ) = τ*(ℓ) · SPS(B(ℓ)) computed from the definitions (the DSpark paper's).
"""

from __future__ import annotations

import itertools
import random
from collections import deque

import pytest
import torch

from dspark_mini.scheduler import (
    ALL_POLICIES,
    POLICIES,
    RETROSPECTIVE,
    Scheduler,
    greedy_path,
    path_throughput,
    plan_round,
    survival,
)
from dspark_mini.speculative import verify_block
from lab.evaluation.profiling import chi_square_test
from lab.serving.sps import SPSTable, smooth_table, staircase_table

F64 = torch.float64


# ---- references --------------------------------------------------------------------------------------------
def theta_of(conf: list[list[float]], lengths: list[int], table) -> float:
    """Θ(ℓ) from the definitions: τ* = Σ_r (1 + Σ_{j≤ℓ_r} Π_{i≤j} c_{r,i}), B = Σ_r (1 + ℓ_r)."""
    tau, b = 0.0, 0
    for c, ell in zip(conf, lengths, strict=True):
        a, s = 1.0, 0.0
        for j in range(ell):
            a *= c[j]
            s += a
        tau += 1 + s
        b += 1 + ell
    return tau * table.steps_per_s(b)


def brute_force_best(conf, k, table) -> float:
    return max(theta_of(conf, list(ls), table) for ls in itertools.product(range(k + 1), repeat=len(conf)))


def naive_algorithm1(conf: list[list[float]], table) -> list[int]:
    """Algorithm 1 written as a plain loop: repeatedly take the eligible candidate (the next position of some
    request) with the largest survival — ties: lower position, then lower request — and stop at the first one
    that does not raise Θ."""
    n_req, k = len(conf), len(conf[0])
    a = [[1.0] * k for _ in conf]
    for r, c in enumerate(conf):
        p = 1.0
        for j in range(k):
            p *= c[j]
            a[r][j] = p
    ell = [0] * n_req
    tau, b = float(n_req), n_req
    best = tau * table.steps_per_s(b)
    while True:
        eligible = [(-a[r][ell[r]], ell[r], r) for r in range(n_req) if ell[r] < k]
        if not eligible:
            return ell
        _, j, r = min(eligible)
        theta = (tau + a[r][j]) * table.steps_per_s(b + 1)
        if not theta > best:
            return ell
        ell[r], tau, b, best = j + 1, tau + a[r][j], b + 1, theta


def random_table(rng: random.Random, top: int = 12) -> SPSTable:
    """A random forced-monotone linear table over 1..top (sometimes with a steep jump)."""
    t, times = 1.0, []
    for _ in range(top):
        t += rng.choice([0.0, 0.01, 0.05, 0.2, 0.6]) * rng.random()
        times.append(t)
    return SPSTable(list(range(1, top + 1)), [1 / x for x in times], rng.choice(["linear", "step"]))


def random_conf(rng: random.Random, n_req: int, k: int) -> list[list[float]]:
    grid = [0.0, 0.25, 0.5, 0.75, 1.0]  # coarse values make ties common
    if rng.random() < 0.5:
        return [[rng.choice(grid) for _ in range(k)] for _ in range(n_req)]
    return [[rng.random() for _ in range(k)] for _ in range(n_req)]


SMALL_TABLES = {
    "smooth": smooth_table(step_s=1.0, knee=4),
    "staircase": staircase_table(step_s=1.0, knee=4),
    "appendix-a": SPSTable([1, 2, 3], [1.0, 0.5, 0.45]),
}


# ---- Algorithm 1 and the global search vs brute force ---------------------------------------------------------
def test_algorithm1_matches_the_naive_loop_and_the_plan_bookkeeping():
    rng = random.Random(0)
    for case in range(400):
        n_req, k = rng.randint(1, 3), rng.randint(1, 3)
        table = random_table(rng) if case % 2 else rng.choice(list(SMALL_TABLES.values()))
        conf = random_conf(rng, n_req, k)
        plan = Scheduler("dspark", k, table).plan(conf)
        assert plan.lengths.tolist() == naive_algorithm1(conf, table), (conf, table)
        assert plan.batch_tokens == n_req + sum(plan.lengths.tolist())
        assert plan.throughput == pytest.approx(theta_of(conf, plan.lengths.tolist(), table), rel=1e-12)


def test_retrospective_search_finds_the_brute_force_optimum():
    """The greedy path holds, for every B, the best τ* among all ℓ vectors with that B (sorted marginal gains,
    prefix-closed), so its global argmax is the brute-force optimum — and it is still the wrong policy."""
    rng = random.Random(1)
    for _ in range(300):
        n_req, k = rng.randint(1, 3), rng.randint(1, 3)
        table = random_table(rng)
        conf = random_conf(rng, n_req, k)
        plan = Scheduler(RETROSPECTIVE, k, table).plan(conf)
        assert plan.throughput == pytest.approx(brute_force_best(conf, k, table), rel=1e-12)


def test_early_stop_is_optimal_on_a_smooth_table_and_can_stall_on_a_staircase():
    rng = random.Random(2)
    smooth = SMALL_TABLES["smooth"]  # affine step time: Θ is quasi-concave along the path
    for _ in range(300):
        n_req, k = rng.randint(1, 3), rng.randint(1, 3)
        conf = random_conf(rng, n_req, k)
        plan = Scheduler("dspark", k, smooth).plan(conf)
        assert plan.throughput == pytest.approx(brute_force_best(conf, k, smooth), rel=1e-12)
    # t(B) = 1 + bucket(B)/4: R = 4 anchors fill the 4-bucket (t = 2); one more token runs the 8-bucket (t = 3):
    # Θ dips from 4/2 to 5/3 and the walk stops at ℓ = 0, although filling the 8-bucket with four sure drafts
    # gives 8/3
    stair = SMALL_TABLES["staircase"]
    conf = [[1.0, 1.0]] * 4
    stalled = Scheduler("dspark", 2, stair).plan(conf)
    assert stalled.lengths.tolist() == [0, 0, 0, 0] and stalled.throughput == pytest.approx(2.0)
    best = Scheduler(RETROSPECTIVE, 2, stair).plan(conf)
    assert best.batch_tokens == 8 and best.throughput == pytest.approx(8 / 3)


def test_greedy_path_is_prefix_ordered_with_an_index_tie_break():
    conf = torch.tensor([[1.0, 1.0, 0.5], [1.0, 0.5, 1.0], [1.0, 1.0, 1.0]], dtype=F64)
    order, values = greedy_path(survival(conf))
    n_req = 3
    pairs = [(int(m) % n_req, int(m) // n_req) for m in order]  # (request, position)
    # ties at a = 1: position 1 of every request (requests in order), then position 2, then 3
    assert pairs[:6] == [(0, 0), (1, 0), (2, 0), (0, 1), (2, 1), (2, 2)]
    seen = {r: -1 for r in range(n_req)}
    for r, j in pairs:
        assert j == seen[r] + 1
        seen[r] = j
    assert torch.all(values[1:] <= values[:-1])


def test_path_throughput_is_the_definition():
    table = SMALL_TABLES["appendix-a"]
    theta = path_throughput(torch.tensor([0.8, 0.72], dtype=F64), 1, table)
    assert theta.tolist() == pytest.approx([1.0, 0.9, 2.52 * 0.45])


# ---- fixed and threshold ---------------------------------------------------------------------------------------
def test_fixed_verifies_the_block_or_the_given_length():
    conf = torch.rand(4, 5, generator=torch.Generator().manual_seed(0))
    assert Scheduler("fixed", 5).plan(conf).lengths.tolist() == [5] * 4
    assert Scheduler("fixed", 5, length=2).plan(conf).lengths.tolist() == [2] * 4
    plain = Scheduler("fixed", 5, length=0).plan(conf)  # ℓ = 0: plain decoding, only the anchor slots
    assert plain.lengths.tolist() == [0] * 4 and plain.batch_tokens == 4 and plain.expected_tokens == 4


def test_threshold_stops_at_the_first_survival_below_t():
    conf = [[0.9, 0.9, 0.5], [0.4, 1.0, 1.0], [0.6, 0.6, 1.0], [1.0, 1.0, 0.5]]
    # survivals: [.9 .81 .405], [.4 .4 .4], [.6 .36 .36], [1 1 .5]
    assert plan_round("threshold", conf, threshold=0.5).lengths.tolist() == [2, 0, 1, 3]  # a = t counts as ≥ t
    # a per-position threshold on c would verify request 2 fully (0.6, 0.6, 1.0 ≥ 0.5); the survival stops at 1
    assert plan_round("threshold", conf, threshold=0.0).lengths.tolist() == [3, 3, 3, 3]
    assert plan_round("threshold", conf, threshold=1.0).lengths.tolist() == [0, 0, 0, 2]
    assert plan_round("threshold", conf, threshold=0.41).lengths.tolist() == [2, 0, 1, 3]


def test_expected_tokens_is_one_plus_the_verified_survivals():
    conf = [[0.5, 0.5], [1.0, 0.2]]
    plan = plan_round("fixed", conf, length=1)
    assert plan.expected_tokens == pytest.approx((1 + 0.5) + (1 + 1.0))
    assert plan.throughput is None and plan.capacity == 2 and plan.mean_verify_len == 1.0


# ---- dspark-async -------------------------------------------------------------------------------------------
def test_async_capacity_is_the_global_argmax_over_the_stale_path():
    rng = random.Random(3)
    for _ in range(200):
        n_req, k = rng.randint(1, 3), rng.randint(1, 3)
        table = random_table(rng)
        stale, current = random_conf(rng, n_req, k), random_conf(rng, n_req, k)
        sched = Scheduler("dspark-async", k, table)
        cap = sched.capacity(n_req, stale)
        best_b = max(  # brute force on the stale values: the best total B (first best on ties)
            itertools.product(range(k + 1), repeat=n_req),
            key=lambda ls: (round(theta_of(stale, list(ls), table), 12), -sum(ls)),
        )
        assert theta_of(stale, list(best_b), table) == pytest.approx(
            Scheduler(RETROSPECTIVE, k, table).plan(stale).throughput, rel=1e-12
        )
        assert cap == Scheduler(RETROSPECTIVE, k, table).plan(stale).capacity
        plan = sched.plan(current, stale)
        assert plan.capacity == cap
        # the admitted set is the top-`cap` of the current path
        order, _ = greedy_path(survival(torch.tensor(current, dtype=F64)))
        expect = torch.bincount(order[:cap] % n_req, minlength=n_req)
        assert plan.lengths.tolist() == expect.tolist()


def test_async_without_history_verifies_everything():
    plan = Scheduler("dspark-async", 3, SMALL_TABLES["smooth"]).plan([[0.1, 0.1, 0.1], [0.9, 0.9, 0.9]])
    assert plan.lengths.tolist() == [3, 3]


def test_async_tie_break_reads_indices_not_values():
    table = SMALL_TABLES["smooth"]
    sched = Scheduler("dspark-async", 3, table)
    stale = [[0.95, 0.9, 0.2], [0.95, 0.2, 0.1], [0.95, 0.2, 0.1]]
    k_cap = sched.capacity(3, stale)
    assert k_cap == 4  # one more than a full position level: the tie-break decides who gets it
    # all current survivals tie: the admitted set is fixed by (position, request) only
    flat = sched.plan([[0.7, 1.0, 1.0]] * 3, stale).lengths.tolist()
    order = [(j, r) for j in range(3) for r in range(3)][:k_cap]
    assert flat == [sum(1 for _, r in order if r == q) for q in range(3)]
    # the same ranking with other values gives the same plan
    g = torch.Generator().manual_seed(5)
    for _ in range(20):
        v = float(torch.rand((), generator=g)) * 0.9 + 0.05
        assert sched.plan([[v, 1.0, 1.0]] * 3, stale).lengths.tolist() == flat


# ---- non-anticipation: what makes a policy exact ----------------------------------------------------------------
def anticipation_violations(policy: str, cases: int = 300, seed: int = 4) -> int:
    """Whether x_{r,j} is verified (ℓ_r ≥ j) may depend on c_{r,1..j} but not on c_{r,j+1..k}: those are
    computed from x_{r,j} itself (the confidence head reads W1[x_{r,j}]). For random small batches and tables,
    set c_{r,j+1..k} to all ones, all zeros and random values, and count the cases where the decision moves."""
    rng = random.Random(seed)
    g = torch.Generator().manual_seed(seed)
    bad = 0
    for _ in range(cases):
        n_req, k = rng.randint(1, 3), rng.randint(2, 3)
        table = random_table(rng) if rng.random() < 0.5 else rng.choice(list(SMALL_TABLES.values()))
        sched = Scheduler(policy, k, table, threshold=rng.random())
        conf = torch.tensor(random_conf(rng, n_req, k), dtype=F64)
        stale = torch.tensor(random_conf(rng, n_req, k), dtype=F64)
        r, j = rng.randrange(n_req), rng.randint(1, k - 1)  # the decision on x_{r,j} (1-based j)
        decisions = set()
        for tail in (torch.ones(k - j, dtype=F64), torch.zeros(k - j, dtype=F64), torch.rand(k - j, generator=g)):
            other = conf.clone()
            other[r, j:] = tail
            decisions.add(bool(sched.plan(other, stale).lengths[r] >= j))
        bad += len(decisions) > 1
    return bad


@pytest.mark.parametrize("policy", POLICIES)
def test_shipped_policies_never_read_a_value_before_deciding_on_it(policy):
    assert anticipation_violations(policy) == 0


def test_retrospective_search_does_read_the_value_it_decides_on():
    assert anticipation_violations(RETROSPECTIVE) > 0


def test_retrospective_search_reads_the_value_it_decides_on():
    table = SMALL_TABLES["appendix-a"]
    sched = Scheduler(RETROSPECTIVE, 2, table)
    assert sched.plan([[0.8, 0.9]]).lengths.tolist() == [2]  # x1 = A → c2 = 0.9: Θ2 = 1.134, admit x1
    assert sched.plan([[0.8, 0.0]]).lengths.tolist() == [0]  # x1 = B → c2 = 0: Θ2 = 0.81, reject x1


# ---- Appendix A: exactness under the scheduler ---------------------------------------------------------------------
A, B_TOK = 0, 1
P_D1, P_T1 = torch.tensor([0.5, 0.5], dtype=F64), torch.tensor([0.7, 0.3], dtype=F64)
P_D2, P_T2, P_T3 = torch.tensor([0.5, 0.5], dtype=F64), torch.tensor([0.6, 0.4], dtype=F64), torch.tensor([0.5, 0.5])


def first_tokens(policy: str, n: int, seed: int = 0) -> torch.Tensor:
    """The paper's Appendix A: R = 1, k = 2, c1 = 0.8, SPS(1, 2, 3) = (1, 0.5, 0.45); the draft
    samples x1 from p_d = (0.5, 0.5) over {A, B}; the confidence head then gives c2 = 0.9 after A and 0 after B.
    The scheduler picks ℓ, the real verifier (verify_block) runs over [x1..x_ℓ], and the first output token is
    recorded. The target's own distribution for it is p_t = (0.7, 0.3). → [n] first tokens."""
    table = SMALL_TABLES["appendix-a"]
    sched = Scheduler(policy, 2, table, threshold=0.5)
    gen = torch.Generator().manual_seed(seed)
    draft_probs = torch.stack([P_D1, P_D2])
    target_probs = torch.stack([P_T1, P_T2, P_T3.to(F64)])
    plans: dict[tuple, int] = {}  # ℓ as a function of (current c, stale c): the plan is deterministic
    history: deque = deque(maxlen=2)  # dspark-async reads the confidences of two rounds ago
    out = []
    for _ in range(n):
        x = torch.multinomial(draft_probs, 1, generator=gen).reshape(2)  # x1, x2 ~ p_d
        conf = ((0.8, 0.9 if int(x[0]) == A else 0.0),)
        stale = history[0] if len(history) == 2 else None
        key = (conf, stale)
        if key not in plans:
            plans[key] = int(sched.plan(conf, stale).lengths[0])
        ell = plans[key]
        v = verify_block(x[:ell], draft_probs[:ell], target_probs[: ell + 1], gen)
        out.append(int(x[0]) if v.n_accepted >= 1 else v.next_token)
        history.append(conf)
    return torch.tensor(out)


@pytest.mark.parametrize("policy", POLICIES)
def test_appendix_a_shipped_policies_are_exact(policy):
    tokens = first_tokens(policy, 8000)
    res = chi_square_test(tokens, P_T1)
    assert res["passes"], res
    assert abs(float((tokens == A).double().mean()) - 0.7) < 0.02


def test_appendix_a_retrospective_search_is_biased():
    tokens = first_tokens(RETROSPECTIVE, 8000)
    res = chi_square_test(tokens, P_T1)
    assert not res["passes"] and res["statistic"] > 10 * res["critical"], res
    # P(A) = P(x1 = A)·1 (verified, p_t/p_d ≥ 1) + P(x1 = B)·0.7 (unverified: the target samples) = 0.85
    assert abs(float((tokens == A).double().mean()) - 0.85) < 0.02
    assert chi_square_test(tokens, torch.tensor([0.85, 0.15], dtype=F64))["passes"]


# ---- validation ---------------------------------------------------------------------------------------------------
def test_policy_names():
    assert POLICIES == ("fixed", "threshold", "dspark", "dspark-async")
    assert ALL_POLICIES == POLICIES + ("retrospective",)
    with pytest.raises(ValueError, match=r"policy = 'greedy' is invalid: allowed 'fixed', 'threshold'"):
        Scheduler("greedy", 3)


@pytest.mark.parametrize("bad", [-0.1, 1.5, float("nan"), float("inf"), True, "0.5"])
def test_threshold_outside_the_unit_interval_is_rejected(bad):
    with pytest.raises(ValueError, match=r"threshold = .* is invalid: allowed a number in \[0, 1\]"):
        Scheduler("threshold", 3, threshold=bad)


@pytest.mark.parametrize("bad", [1.2, -0.01, float("nan"), float("inf")])
def test_confidences_outside_the_unit_interval_are_rejected(bad):
    conf = [[0.5, 0.5], [0.5, bad]]
    with pytest.raises(ValueError, match=r"confidences\[1\]\[1\] = .* is invalid: allowed finite .* in \[0, 1\]"):
        Scheduler("fixed", 2).plan(conf)


def test_shape_and_k_mismatches_are_rejected():
    table = SMALL_TABLES["smooth"]
    with pytest.raises(ValueError, match="k = 3 draft positions but the scheduler was built for k = 2"):
        Scheduler("dspark", 2, table).plan([[0.5, 0.5, 0.5]])
    with pytest.raises(ValueError, match=r"shape \[R, k\]"):
        Scheduler("dspark", 2, table).plan([0.5, 0.5])
    with pytest.raises(ValueError, match=r"shape \[R, k\]"):
        Scheduler("dspark", 2, table).plan(torch.zeros(0, 2))
    with pytest.raises(ValueError, match=r"stale has k = 3"):
        Scheduler("dspark-async", 2, table).plan([[0.5, 0.5]], stale=[[0.5, 0.5, 0.5]])
    with pytest.raises(ValueError, match=r"shape \[R, k\]"):
        plan_round("fixed", [[0.5, 0.5], [0.5]])


def test_other_arguments_are_validated():
    with pytest.raises(ValueError, match=r"k = 0 is invalid"):
        Scheduler("fixed", 0)
    with pytest.raises(ValueError, match=r"length = 4 is invalid: allowed 0\.\.3"):
        Scheduler("fixed", 3, length=4)
    for p in ("dspark", "dspark-async", RETROSPECTIVE):
        with pytest.raises(ValueError, match=f"policy = '{p}' needs an SPS cost table"):
            Scheduler(p, 3)
    with pytest.raises(ValueError, match="sps must be an SPS cost table"):
        Scheduler("dspark", 3, sps={1: 1.0})


def test_inputs_on_any_dtype_are_planned_on_the_cpu_in_float64():
    conf = torch.tensor([[0.9, 0.8, 0.1]], dtype=torch.float16)
    plan = Scheduler("dspark", 3, SMALL_TABLES["smooth"]).plan(conf)
    assert plan.lengths.dtype == torch.int64 and plan.lengths.device.type == "cpu"

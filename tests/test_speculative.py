"""Step 6B · speculative decoding: the verify rule, losslessness, exactness of the sampled output,
rollback of every cache, acceptance metrics and input validation.

Statistics: the chi-square tests compare counts with an exactly computed distribution. Bins with an
expected count < 5 are merged into one "rest" bin; the 0.999 quantile of χ²(df) comes from the
Wilson–Hilferty approximation  q ≈ df·(1 − 2/(9·df) + z·√(2/(9·df)))³  with z = Φ⁻¹(0.999) = 3.0902
(within ~1 % of the exact quantile for df ≥ 10, checked against scipy when it is installed). Every test
uses fixed seeds, so the outcome is deterministic; the margins are chosen so that a correct sampler sits
far below the critical value and the broken one far above it.
"""

from __future__ import annotations

import copy
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import dspark_mini.drafters as drafters_mod
from dspark_mini import build_model, get_config
from dspark_mini.dspark import DraftOutput
from dspark_mini.model import draft
from dspark_mini.speculative import (
    ACCEPTED,
    BONUS,
    NOT_SENT,
    REJECTED,
    RESAMPLED,
    Round,
    acceptance_stats,
    generate_plain,
    generate_speculative,
    speculative_round,
    verify_block,
    verify_greedy,
)
from dspark_mini.tokenizer import default_tokenizer
from tests.helpers import assert_same_snapshot

LAB_V = get_config("lab").vocab_size  # the lab vocabulary (words, characters, 256 bytes)

F64 = torch.float64
Z_999 = 3.090232306167813  # Φ⁻¹(0.999)


# ---- helpers -----------------------------------------------------------------------------------------


def chi2_critical(df: int, z: float = Z_999) -> float:
    """Wilson–Hilferty approximation of the χ²(df) quantile at Φ(z)."""
    a = 2.0 / (9.0 * df)
    return df * (1.0 - a + z * math.sqrt(a)) ** 3


def chi2_statistic(samples: torch.Tensor, probs: torch.Tensor, min_expected: float = 5.0) -> tuple[float, int]:
    """Pearson χ² of integer samples against probs [V]; bins with N·p < min_expected merged into one."""
    n = samples.numel()
    counts = torch.bincount(samples.flatten(), minlength=probs.numel()).to(F64)
    expected = probs.to(F64) * n
    big = expected >= min_expected
    obs = torch.cat([counts[big], counts[~big].sum()[None]])
    exp = torch.cat([expected[big], expected[~big].sum()[None]])
    if float(exp[-1]) < min_expected:  # fold a tiny rest bin into the smallest kept bin
        j = int(exp[:-1].argmin())
        obs[j] += obs[-1]
        exp[j] += exp[-1]
        obs, exp = obs[:-1], exp[:-1]
    if float(obs[exp == 0].sum()) > 0:
        return math.inf, obs.numel() - 1
    keep = exp > 0
    stat = float(((obs[keep] - exp[keep]) ** 2 / exp[keep]).sum())
    return stat, int(keep.sum()) - 1


def ids(cfg, batch: int, seqlen: int, seed: int) -> torch.Tensor:
    """Ordinary token ids 4..V−1 (no special ids, no noise token)."""
    g = torch.Generator().manual_seed(seed)
    return torch.randint(4, cfg.vocab_size, (batch, seqlen), generator=g, dtype=torch.long)


def one_hot(idx: torch.Tensor, V: int) -> torch.Tensor:
    return torch.zeros(*idx.shape, V, dtype=F64).scatter_(-1, idx[..., None], 1.0)


def random_dist(V: int, gen: torch.Generator, sharp: float = 1.0) -> torch.Tensor:
    return torch.softmax(torch.randn(V, generator=gen, dtype=F64) * sharp, -1)


def tile_cache(model, cache, batch: int):
    """A batch-`batch` cache holding `batch` copies of a batch-1 cache (every stored tensor expanded)."""
    out = model.new_cache(batch)
    for i, ring in cache.windows.items():
        out.windows[i].kv.copy_(ring.kv.expand(batch, -1, -1))
        out.windows[i].pos.copy_(ring.pos)
    for s, st_ in cache.sources.items():
        dst = out.sources[s]
        dst.kv.copy_(st_.kv.expand(batch, -1, -1))
        dst.index_k.copy_(st_.index_k.expand(batch, -1, -1))
        dst.count = st_.count
        if st_.carry_kv is not None:
            dst.carry_kv = st_.carry_kv.expand(batch, -1, -1).clone()
            dst.carry_score = st_.carry_score.expand(batch, -1, -1).clone()
    out.engram_history = cache.engram_history.expand(batch, -1).clone()
    out.length = cache.length
    return out


def check_greedy_round(r: Round, k: int) -> None:
    """A greedy round against the naive rule: keep the drafts that equal the target's argmax, left to right.
    k is the verify length ℓ: the model's draft proposes its whole trained block, drafts past ℓ were not sent."""
    assert r.verify_len == k and len(r.target_argmax) == k + 1 and len(r.status) == len(r.draft) >= k
    assert r.status[k:] == [NOT_SENT] * (len(r.draft) - k)
    n = 0
    while n < k and r.draft[n] == r.target_argmax[n]:
        n += 1
    assert r.n_accepted == n
    assert r.next_token == r.target_argmax[n]  # the replacement (first mismatch) or the bonus
    assert r.next_kind == (BONUS if n == k else RESAMPLED)
    assert r.status[:n] == [ACCEPTED] * n
    if n < k:
        assert r.status[n] == REJECTED and r.status[n + 1 : k] == ["not verified"] * (k - n - 1)
    assert 1 <= len(r.committed) <= n + 1
    assert r.committed[:-1] == r.draft[: len(r.committed) - 1]


# ---- verify_block ------------------------------------------------------------------------------------


def test_wilson_hilferty_against_scipy():
    stats = pytest.importorskip("scipy.stats")
    for df in (5, 10, 30, 100, 250):
        exact = float(stats.chi2.ppf(0.999, df))
        assert abs(chi2_critical(df) / exact - 1) < 0.02


@pytest.mark.parametrize("match", [0, 1, 2, 3, 4])
def test_verify_greedy_accepts_the_matching_prefix(match):
    V, k = 11, 4
    g = torch.Generator().manual_seed(match)
    target_arg = torch.randint(0, V, (k + 1,), generator=g)
    drafts = target_arg[:k].clone()
    if match < k:
        drafts[match] = (drafts[match] + 3) % V  # first mismatch
        drafts[match + 1 :] = torch.randint(0, V, (k - match - 1,), generator=g)
    target, draft_p = one_hot(target_arg, V), one_hot(drafts, V)
    for seed in range(5):  # greedy: the verdict does not depend on the random stream
        v = verify_block(drafts, draft_p, target, torch.Generator().manual_seed(seed))
        assert v.n_accepted == match
        assert v.next_token == int(target_arg[match])
        assert v.kind == (BONUS if match == k else RESAMPLED)
        assert v.ratios == [1.0] * match + ([0.0] if match < k else [])
        # the broken verifier (resampling from p_t) agrees on one-hot rows
        assert verify_block(drafts, draft_p, target, torch.Generator().manual_seed(seed), residual=False) == v
    # the draw-free verdict the greedy loop uses is the same one
    assert verify_greedy(drafts, target_arg) == v


def test_verify_draft_equal_to_target_accepts_everything():
    V, k = 7, 3
    g = torch.Generator().manual_seed(1)
    dists = torch.stack([random_dist(V, g) for _ in range(k + 1)])
    gen = torch.Generator().manual_seed(2)
    bonus = []
    for _ in range(300):
        drafts = torch.stack([torch.multinomial(dists[i], 1, generator=gen)[0] for i in range(k)])
        v = verify_block(drafts, dists[:k], dists, gen)
        assert v.n_accepted == k and v.kind == BONUS and v.ratios == [1.0] * k
        bonus.append(v.next_token)
    # the bonus comes from the last target row
    stat, df = chi2_statistic(torch.tensor(bonus), dists[k])
    assert stat < chi2_critical(df)
    # and a one-hot last row makes the bonus certain
    last = one_hot(torch.tensor(5), V)
    v = verify_block(torch.tensor([1, 2, 3]), dists[:k], torch.cat([dists[:k], last[None]]), gen)
    assert (v.n_accepted, v.next_token, v.kind) == (k, 5, BONUS)


def test_verify_ratios_are_min_one_pt_over_pd():
    V, k = 9, 4
    gen = torch.Generator().manual_seed(3)
    for _trial in range(200):
        pd = torch.stack([random_dist(V, gen, 2.0) for _ in range(k)])
        pt = torch.stack([random_dist(V, gen, 2.0) for _ in range(k + 1)])
        drafts = torch.stack([torch.multinomial(pd[i], 1, generator=gen)[0] for i in range(k)])
        v = verify_block(drafts, pd, pt, gen)
        naive = [min(1.0, float(pt[i, drafts[i]] / pd[i, drafts[i]])) for i in range(k)]
        assert len(v.ratios) == (v.n_accepted + 1 if v.n_accepted < k else k)
        assert v.ratios == pytest.approx(naive[: len(v.ratios)], rel=1e-12, abs=0)
        assert all(0.0 <= r <= 1.0 for r in v.ratios)
        if v.kind == RESAMPLED:  # a rejection needs p_t(x) < p_d(x), so x has no residual mass
            i = v.n_accepted
            assert v.ratios[i] < 1.0
            assert v.next_token != int(drafts[i])
            assert float(pt[i, v.next_token]) > float(pd[i, v.next_token])


def test_verify_acceptance_frequency_and_residual_distribution():
    """One position, N trials: P(accept) = Σ min(p_d, p_t); the replacement ~ norm(max(0, p_t − p_d));
    and the output token as a whole ~ p_t exactly (the lossless property, without a model)."""
    N = 6000
    pd = torch.tensor([0.40, 0.25, 0.15, 0.10, 0.06, 0.04], dtype=F64)
    pt = torch.tensor([0.10, 0.15, 0.20, 0.05, 0.30, 0.20], dtype=F64)
    beta = float(torch.minimum(pd, pt).sum())  # 0.55
    residual = (pt - pd).clamp_min(0) / (1 - beta)
    gen = torch.Generator().manual_seed(4)
    drafts = torch.multinomial(pd, N, replacement=True, generator=gen)
    target = torch.stack([pt, pt])
    out, out_broken, acc, repl = [], [], 0, []
    for x in drafts:
        v = verify_block(x[None], pd[None], target, gen)
        w = verify_block(x[None], pd[None], target, gen, residual=False)
        first = int(x) if v.n_accepted else v.next_token
        out.append(first)
        out_broken.append(int(x) if w.n_accepted else w.next_token)
        acc += v.n_accepted
        if not v.n_accepted:
            repl.append(v.next_token)
    sd = math.sqrt(beta * (1 - beta) / N)
    assert abs(acc / N - beta) < 5 * sd
    stat, df = chi2_statistic(torch.tensor(repl), residual)
    assert stat < chi2_critical(df)
    stat, df = chi2_statistic(torch.tensor(out), pt)
    assert stat < chi2_critical(df)
    stat_b, df_b = chi2_statistic(torch.tensor(out_broken), pt)
    assert stat_b > 3 * chi2_critical(df_b)  # resampling from p_t over-weights p_d's overlap


# ---- greedy losslessness -----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def model_k5():
    """The lab model with the real model's draft block of 5."""
    return build_model(get_config("lab", dspark_block_size=5), seed=0).eval()


@pytest.fixture(scope="module")
def fast_k5():
    """The trained lab model (its draft block is 5, the real model's), for the 30 × 64-token lossless runs: its
    drafts are often kept, so the accept path runs (an untrained draft over 8,192 ids is almost never kept)."""
    from lab.weights import lab_model

    m = lab_model("trained")
    assert m.cfg.dspark_block_size == 5
    return m


# block size → prompt length: each block size runs one batch of 30 prompts of its own length
LOSSLESS = {1: 5, 2: 9, 3: 12, 4: 17, 5: 23}
N_NEW = 64


@pytest.fixture(scope="module")
def greedy_reference(fast_k5):
    """30 random 5-token prompts and their plain greedy continuation, long enough for every prompt length.

    The prompt of length L for a block size is base + the first L − 5 greedy tokens, so its own greedy
    continuation is the next 64 tokens of the same reference (plain decoding is deterministic and a prefill
    equals token-by-token decoding, test_model.py); one plain run then serves five prompt lengths. The
    longest case is re-derived with its own `generate_plain` call below, for one row."""
    B, base_len = 30, 5
    base = ids(fast_k5.cfg, B, base_len, seed=100)
    ref = generate_plain(fast_k5, base, N_NEW + max(LOSSLESS.values()) - base_len)
    full = torch.cat([base, torch.tensor(ref.tokens)], dim=1)  # [B, 5 + 82]
    L = max(LOSSLESS.values())
    assert generate_plain(fast_k5, full[:1, :L], N_NEW).tokens[0] == full[0, L : L + N_NEW].tolist()
    return full


@pytest.mark.parametrize("k", sorted(LOSSLESS))
def test_greedy_speculative_equals_plain(fast_k5, greedy_reference, k):
    L, N = LOSSLESS[k], N_NEW
    prompt = greedy_reference[:, :L]
    B = prompt.size(0)
    expected = greedy_reference[:, L : L + N].tolist()  # what generate_plain(prompt, 64) returns
    spec = generate_speculative(fast_k5, prompt, N, verify_len=k)
    assert len(spec.tokens) == B == 30 and all(len(t) == N for t in spec.tokens)
    assert spec.tokens == expected
    # bookkeeping: every round commits the same number of tokens in every row, the anchor came from the prefill
    assert spec.forwards == len(spec.rounds) <= N - 1
    for b in (0, 17, 29):
        assert [spec.tokens[b][0]] + [t for r in spec.rows(b) for t in r.committed] == spec.tokens[b]
    for rs in spec.rounds:
        assert len({len(r.committed) for r in rs}) == 1
        kk = rs[0].verify_len
        assert 1 <= kk <= k
        n_min = min(r.n_accepted for r in rs)
        assert len(rs[0].committed) == n_min + 1
        for r in rs:
            check_greedy_round(r, kk)
    accepted = sum(r.n_accepted for rs in spec.rounds for r in rs)
    assert accepted > 0  # the accept path ran (the trained drafts are often kept)


def test_greedy_lossless_batch1_default_config_crossing_boundaries(lab_model, lab_cfg):
    """Batch 1, block 5: 7 prompt tokens + 44 new ones cross the window (8) many times, odd/even
    ratio-2 groups, the ratio-1 source and the candidate pool."""
    prompt = ids(lab_cfg, 1, 7, seed=200)
    plain = generate_plain(lab_model, prompt, 44)
    spec = generate_speculative(lab_model, prompt, 44)
    assert spec.tokens == plain.tokens
    assert all(len(r.draft) <= lab_cfg.dspark_block_size for r in spec.rows(0))
    for r in spec.rows(0):
        check_greedy_round(r, r.verify_len)
        assert len(r.committed) == r.n_accepted + 1  # batch 1: the whole verdict is committed
        assert r.confidence == [0.5] * len(r.draft)  # untrained confidence head


def forced_draft(plain_tokens: list[list[int]], prompt_len: int, V: int, wrong_every: int = 23):
    """A stand-in for `draft`: the target's own greedy continuation, except a deterministic sprinkling of
    wrong tokens (one position in `wrong_every` per row, at different positions in different rows, so the
    rows of a batch reject at different places)."""

    def fake(model, anchor, cache, block_size=None, temperature=0.0, generator=None, trace=None):
        p, B, k = cache.length, anchor.size(0), block_size
        toks = torch.empty(B, k, dtype=torch.long)
        for b in range(B):
            for i in range(1, k + 1):
                j = p - prompt_len + i  # the greedy token at position p + i (past the end: never sent to verify)
                good = plain_tokens[b][j] if j < len(plain_tokens[b]) else 0
                wrong = (7 * (p + i) + 3 * b) % wrong_every == 0
                toks[b, i - 1] = (good + 1) % V if wrong else good
        probs = one_hot(toks, V)
        return DraftOutput(
            tokens=toks,
            draft_probs=torch.ones(B, k, dtype=F64),
            confidence=torch.full((B, k), 0.5),
            logits=probs.clone(),
            probs=probs,
            hidden=torch.zeros(B, k, model.cfg.dim),
            positions=torch.arange(p, p + k),
        )

    return fake


@pytest.fixture(scope="module")
def forced_case(model_k5):
    prompt = ids(model_k5.cfg, 10, 7, seed=300)
    return prompt, generate_plain(model_k5, prompt, 48)


@pytest.mark.parametrize("k", [3, 5])
def test_greedy_lossless_with_a_mostly_right_draft(model_k5, forced_case, monkeypatch, k):
    """With drafts that are usually right, rounds keep several tokens (τ > 1), rows of a batch disagree
    on how many, and the output still equals plain greedy decoding token for token."""
    cfg = model_k5.cfg
    prompt, plain = forced_case
    L, N = prompt.size(1), len(plain.tokens[0])
    monkeypatch.setattr(drafters_mod, "draft", forced_draft(plain.tokens, L, cfg.vocab_size))
    spec = generate_speculative(model_k5, prompt, N, verify_len=k)
    assert spec.tokens == plain.tokens
    rows = [r for rs in spec.rounds for r in rs]
    for r in rows:
        check_greedy_round(r, r.verify_len)
    assert acceptance_stats(rows)["mean_accepted_length"] > 2.0  # per-row verdicts
    assert len(spec.rounds) < (N - 1) / 1.5  # the batch commits several tokens per round too
    # the batch min-commit path: some row kept more than the batch committed, and appended its draft
    assert any(r.n_accepted > len(r.committed) - 1 for r in rows)
    # batch 1 commits whole verdicts: fewer rounds than the batch of 10
    one = generate_speculative(model_k5, prompt[:1], N, verify_len=k)
    assert one.tokens == plain.tokens[:1]
    assert len(one.rounds) < len(spec.rounds)
    assert all(len(r.committed) == r.n_accepted + 1 for r in one.rows(0))


# ---- stochastic exactness ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def peaked():
    """The trained lab model on an everyday Vietnamese prompt: a target peaked enough that ~60 bins hold ≥ 5 expected
    counts at N = 4000, while the trained draft overlaps it by about half — enough for the broken verifier (no
    residual) to be told apart from the correct one by far. (A seeded untrained model spreads both over the 8,192
    ids: their overlap is a few %, and the two verifiers become indistinguishable at this N.)"""
    from lab.weights import lab_model

    m = lab_model("trained")
    ids = default_tokenizer().encode("Xin chào các bạn")
    prompt, anchor = torch.tensor([ids[:-1]]), ids[-1]
    with torch.no_grad():
        pt = torch.softmax(m(torch.tensor([ids])).logits[0, -1], -1)
        c1 = m.new_cache(1)
        m(prompt, cache=c1)
        # the whole trained block, as speculative_round drafts it (the block is bidirectional: its length matters)
        pd = draft(m, torch.tensor([anchor]), c1, None, 1.0, torch.Generator().manual_seed(0)).probs[0, 0]
    return {"model": m, "prompt": prompt, "anchor": anchor, "pt": pt, "pd": pd, "cache1": c1}


def test_tiled_cache_equals_a_batched_prefill(peaked):
    m, prompt = peaked["model"], peaked["prompt"]
    with torch.no_grad():
        real = m.new_cache(3)
        m(prompt.expand(3, -1), cache=real)
    assert_same_snapshot(tile_cache(m, peaked["cache1"], 3).snapshot(), real.snapshot(), atol=1e-12)


def test_a_round_builds_no_autograd_graph(peaked):
    """A round only reads the model: called with autograd on, its forwards still keep no graph (at 4,000 rows one
    held GiBs of activations and could exhaust a small machine's memory)."""
    m = peaked["model"]
    seen = []
    hook = m.register_forward_pre_hook(lambda mod, args: seen.append(torch.is_grad_enabled()))
    try:
        assert torch.is_grad_enabled()
        rounds = speculative_round(
            m,
            tile_cache(m, peaked["cache1"], 2),
            torch.full((2,), peaked["anchor"]),
            3,
            1.0,
            torch.Generator().manual_seed(0),
        )
    finally:
        hook.remove()
    assert len(rounds) == 2 and seen and not any(seen)  # the verify forward ran, without a graph


@pytest.mark.parametrize("residual", [True, False], ids=["residual", "broken-no-residual"])
def test_first_committed_token_follows_the_target_distribution(peaked, residual):
    m, pt, pd, anchor = peaked["model"], peaked["pt"], peaked["pd"], peaked["anchor"]
    B, rows = 4000, 500  # 4,000 rounds in 8 batches of 500: one batch of 4,000 peaks at ~9 GiB (vocab-wide rows)
    gen = torch.Generator().manual_seed(2024)
    rounds = []
    for _ in range(B // rows):
        cache = tile_cache(m, peaked["cache1"], rows)
        rounds += speculative_round(m, cache, torch.full((rows,), anchor), 3, 1.0, gen, residual=residual)
    first = torch.tensor([r.committed[0] for r in rounds])  # the token at position p + 1 of every row
    drafted = torch.tensor([r.draft[0] for r in rounds])
    # the test has power: the draft's own distribution is far from the target's ...
    tv = 0.5 * float((pd - pt).abs().sum())
    assert tv > 0.5
    stat_d, df_d = chi2_statistic(drafted, pt)
    assert stat_d > 10 * chi2_critical(df_d)
    stat_pd, df_pd = chi2_statistic(drafted, pd)  # ... and the drafts do follow p_d
    assert stat_pd < chi2_critical(df_pd)
    # acceptance of the first draft ≈ Σ min(p_d, p_t)
    beta = float(torch.minimum(pd, pt).sum())
    acc = sum(r.n_accepted > 0 for r in rounds) / B
    assert abs(acc - beta) < 5 * math.sqrt(beta * (1 - beta) / B)
    stat, df = chi2_statistic(first, pt)
    crit = chi2_critical(df)
    assert df >= 50
    if residual:
        assert stat < crit, f"χ² = {stat:.1f} ≥ {crit:.1f} (df {df}): the output is not distributed as p_t"
    else:
        assert stat > 2 * crit, f"the broken verifier should fail: χ² = {stat:.1f}, critical {crit:.1f}"


# ---- rollback: partial commits leave exactly what plain decoding leaves --------------------------------


@pytest.fixture(scope="module")
def rollback_model():
    """The lab preset itself: every cache mechanism (FP8 rings, FP4 compressed KV and index keys, ratio-2
    carries, Engram history, draft rings) as the lab ships it."""
    return build_model(get_config("lab"), seed=4).eval()


@st.composite
def rollback_case(draw):
    V = get_config("lab").vocab_size
    prompt = draw(st.lists(st.integers(0, V - 1), min_size=1, max_size=20))
    rounds = []
    for _ in range(draw(st.integers(1, 4))):
        k = draw(st.integers(1, 3))
        rows = draw(st.lists(st.integers(0, V - 1), min_size=k + 1, max_size=k + 1))  # [anchor, d1..dk]
        n = draw(st.integers(0, k))
        rounds.append((rows, n))
    return prompt, rounds


@settings(max_examples=100, deadline=None, derandomize=True)
@given(case=rollback_case())
def test_partial_commit_equals_plain_decoding(rollback_model, case):
    m = rollback_model
    assert m.cfg.vocab_size == get_config("lab").vocab_size
    prompt, rounds = case
    with torch.no_grad():
        spec = m.new_cache(1)
        m(torch.tensor([prompt]), cache=spec)
        plain = copy.deepcopy(spec)
        for rows, n in rounds:
            out = m(torch.tensor([rows]), cache=spec, commit=False)
            spec.commit(out.pending, n + 1)  # the anchor + n accepted drafts
            for j, tok in enumerate(rows[: n + 1]):
                logits = m(torch.tensor([[tok]]), cache=plain).logits[0, -1]
                assert float((out.logits[0, j] - logits).abs().max()) <= 1e-10
            assert spec.length == plain.length
            assert_same_snapshot(spec.snapshot(), plain.snapshot(), atol=1e-10)


# ---- metrics ------------------------------------------------------------------------------------------


def make_round(block: int, n: int, conf: list[float], dprobs: list[float]) -> Round:
    drafts = list(range(10, 10 + block))
    status = [ACCEPTED] * n + ([REJECTED] if n < block else [])
    status += ["not verified"] * (block - len(status))
    return Round(
        position=0,
        anchor=1,
        draft=drafts,
        draft_probs=dprobs,
        confidence=conf,
        target_probs=[0.5] * block,
        target_argmax=[0] * (block + 1),
        status=status,
        n_accepted=n,
        next_token=2,
        next_kind=BONUS if n == block else RESAMPLED,
        committed=drafts[:n] + [2],
    )


def test_acceptance_stats_by_hand():
    rounds = [
        make_round(3, 3, [0.9, 0.8, 0.7], [0.6, 0.5, 0.4]),
        make_round(3, 0, [0.3, 0.2, 0.1], [0.1, 0.1, 0.1]),
        make_round(3, 1, [0.6, 0.4, 0.2], [0.3, 0.2, 0.1]),
        make_round(2, 2, [0.5, 0.5], [0.2, 0.2]),
        make_round(1, 0, [0.4], [0.05]),
    ]
    s = acceptance_stats(rounds)
    assert s["rounds"] == 5
    assert s["mean_accepted_length"] == pytest.approx((4 + 1 + 2 + 3 + 1) / 5)  # τ = n + 1
    assert s["acceptance_rate"] == pytest.approx(6 / 12)  # kept / drafted
    per = s["per_position"]
    assert [p["position"] for p in per] == [1, 2, 3]
    # position 1: 5 rounds reach it, 3 keep it
    assert per[0]["reached"] == 5
    assert per[0]["cond_accept"] == pytest.approx(3 / 5) and per[0]["cum_accept"] == pytest.approx(3 / 5)
    assert per[0]["mean_confidence"] == pytest.approx((0.9 + 0.3 + 0.6 + 0.5 + 0.4) / 5)
    assert per[0]["mean_draft_prob"] == pytest.approx((0.6 + 0.1 + 0.3 + 0.2 + 0.05) / 5)
    # position 2: drafted in 4 rounds, reached (position 1 kept) in 3, kept in 2
    assert per[1]["reached"] == 3
    assert per[1]["cond_accept"] == pytest.approx(2 / 3) and per[1]["cum_accept"] == pytest.approx(2 / 4)
    assert per[1]["mean_confidence"] == pytest.approx((0.8 + 0.2 + 0.4 + 0.5) / 4)
    # position 3: drafted in 3 rounds, reached in 1, kept in 1
    assert per[2]["reached"] == 1
    assert per[2]["cond_accept"] == pytest.approx(1.0) and per[2]["cum_accept"] == pytest.approx(1 / 3)
    assert per[2]["mean_confidence"] == pytest.approx((0.7 + 0.1 + 0.2) / 3)
    # cumulative = product of the conditionals when every round drafts the full block
    full = [r for r in rounds if r.verify_len == 3]
    sf = acceptance_stats(full)["per_position"]
    prod = 1.0
    for p in sf:
        prod *= p["cond_accept"] if p["cond_accept"] is not None else 0.0
        assert p["cum_accept"] == pytest.approx(prod)
    assert acceptance_stats([]) == {
        "rounds": 0,
        "mean_accepted_length": 0.0,
        "acceptance_rate": 0.0,
        "per_position": [],
    }


def test_round_tau_and_block():
    r = make_round(3, 2, [0.5] * 3, [0.5] * 3)
    assert r.tau == 3 and r.verify_len == 3


# ---- bad input ----------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def good_prompt(lab_cfg):
    return ids(lab_cfg, 1, 4, seed=1)


@pytest.mark.parametrize("k", [0, 6, -1, True, "3"])
def test_bad_verify_len(lab_model, good_prompt, k):
    with pytest.raises(ValueError, match=r"verify_len = .* is invalid: allowed 1\.\.5 \(the trained draft block\)"):
        generate_speculative(lab_model, good_prompt, 4, verify_len=k)


def test_block_size_above_a_bigger_trained_block(model_k5, good_prompt):
    with pytest.raises(ValueError, match=r"allowed 1\.\.5"):
        generate_speculative(model_k5, good_prompt, 4, verify_len=6)


@pytest.mark.parametrize("gen", [generate_plain, generate_speculative])
def test_bad_temperature(lab_model, good_prompt, gen):
    with pytest.raises(ValueError, match="temperature = -0.5 is invalid"):
        gen(lab_model, good_prompt, 4, temperature=-0.5)


@pytest.mark.parametrize("gen", [generate_plain, generate_speculative])
@pytest.mark.parametrize(
    "prompt, match",
    [
        (torch.zeros(1, 0, dtype=torch.long), "prompt is empty"),
        (torch.tensor([[5, LAB_V]]), rf"token id {LAB_V} is out of range: allowed 0\.\.{LAB_V - 1}"),
        (torch.tensor([[5, -1]]), r"token id -1 is out of range"),
        (torch.tensor([[5, 6]], dtype=torch.int32), "prompt must be int64"),
        (torch.tensor([5, 6]), r"shape \[B, S\]"),
        ([[5, 6]], "prompt must be int64"),
    ],
    ids=["empty", "id>=V", "negative", "int32", "1-D", "list"],
)
def test_bad_prompt(lab_model, gen, prompt, match):
    with pytest.raises(ValueError, match=match):
        gen(lab_model, prompt, 4)


@pytest.mark.parametrize("gen", [generate_plain, generate_speculative])
@pytest.mark.parametrize(
    "n, match",
    [
        (0, r"max_new_tokens = 0 is invalid: allowed ≥ 1"),
        (-3, "max_new_tokens = -3 is invalid"),
        (253, r"max_new_tokens = 253 is invalid: allowed 1\.\.252"),
        (2.0, "max_new_tokens = 2.0 is invalid"),
        (True, "max_new_tokens = True is invalid"),
    ],
)
def test_bad_max_new_tokens(lab_model, good_prompt, gen, n, match):
    with pytest.raises(ValueError, match=match):
        gen(lab_model, good_prompt, n)


def test_generation_reaches_max_seq_len_exactly():
    cfg = get_config("lab", max_seq_len=16)
    m = build_model(cfg, seed=0).eval()
    prompt = ids(cfg, 2, 5, seed=9)
    plain = generate_plain(m, prompt, 11)
    spec = generate_speculative(m, prompt, 11)
    assert spec.tokens == plain.tokens and len(spec.tokens[0]) == 11
    with pytest.raises(ValueError, match=r"allowed 1\.\.11"):
        generate_speculative(m, prompt, 12)

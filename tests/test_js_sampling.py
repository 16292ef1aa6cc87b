"""lab/browser/model.js samples at temperature > 0 what the library samples with the portable generator: the same
seed gives the same tokens, drafts, verdicts and resampled or bonus tokens in node as in generate_speculative and
generate_plain (sampler="portable") and in one real `python -m lab generate --json --temperature … --seed …` run.

The grid (GRID): six prompts (English, Vietnamese, code, emoji, one token, a long one) × every verify length ℓ = 1..5,
each at one temperature of {0.3, 0.7, 1, 1.5} and one seed of {0, 1, 7, 2**63 − 1}, chosen so that every
(temperature, seed) pair occurs: 30 speculative and 30 plain runs. Together they hold rejections (a residual sample),
full accepts (a bonus sample), drafts never sent, and last rounds shorter than the block (checked below). A residual
of zero mass needs p_t ≤ p_d everywhere, which two softmaxes over the same vocabulary never give in practice; the
verify rule is also held equal to verify_block on given rows, where that case (and the fallback to p_t) is built.

Tokens, drafts, statuses, accepted lengths and kinds are compared exactly; confidences, p_d and p_t within 1e-9. The
float64 softmax can differ from torch's in the last bit (Math.exp beside torch's vectorised exp): measured here on
real rows, with the chance that such a difference moves a pick."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor

import numpy as np
import pytest
import torch

from dspark_mini.portable_random import PortableGenerator
from dspark_mini.sampling import token_distribution
from dspark_mini.speculative import generate_plain, generate_speculative, verify_block
from tests import test_js_model as js_model
from tests.test_js_model import NODE, PROMPTS, REPO, arr, long_ids, run_js

# the JS model tests' module fixtures, used here too: the lab model, its tokenizer, the weights dumped for node
model, tok, dump = js_model.model, js_model.tok, js_model.dump

pytestmark = pytest.mark.skipif(NODE is None, reason="node is not installed: cannot run lab/browser/model.js")

TOL = 1e-9
TEMPERATURES = (0.3, 0.7, 1.0, 1.5)
SEEDS = (0, 1, 7, 2**63 - 1)
NAMES = ("english", "vietnamese", "code", "emoji", "one token", "long")
NEW = {"english": 16, "vietnamese": 14, "code": 18, "emoji": 13, "one token": 12, "long": 16}


def grid() -> list[tuple[str, int, float, int]]:
    """(prompt, ℓ, T, seed): case c has ℓ = c mod 5 + 1 and prompt c div 5 (every prompt at every ℓ), T = c mod 4 and
    seed (c div 4) mod 4 (cases 0..15 cover all 16 pairs)."""
    return [(NAMES[c // 5], c % 5 + 1, TEMPERATURES[c % 4], SEEDS[(c // 4) % 4]) for c in range(5 * len(NAMES))]


GRID = grid()


@pytest.fixture(scope="module")
def prompts(tok) -> dict[str, list[int]]:
    ids = {name: tok.encode(PROMPTS[name]) for name in ("english", "vietnamese", "code", "emoji")}
    ids["one token"] = tok.encode("Hi")[:1]
    ids["long"] = long_ids(tok, 200)
    return ids


def js_seed(seed: int) -> int | str:
    """A seed as model.js takes it: a Number up to 2**53, a decimal string beyond."""
    return seed if seed < 2**53 else str(seed)


@pytest.fixture(scope="module")
def runs(model, prompts, dump, tmp_path_factory):
    """Each GRID case: (Python's speculative result, its plain tokens, model.js's generate result)."""
    tasks = [
        {
            "kind": "generate",
            "prompt": prompts[name],
            "max_new": NEW[name],
            "verify_len": ell,
            "temperature": T,
            "seed": js_seed(seed),
        }
        for name, ell, T, seed in GRID
    ]
    with ThreadPoolExecutor(1) as pool:  # node runs its tasks while Python generates the same
        node = pool.submit(run_js, dump, tasks, tmp_path_factory.mktemp("sampling"))
        py = []
        for name, ell, T, seed in GRID:
            x = torch.tensor([prompts[name]])
            spec = generate_speculative(model, x, NEW[name], ell, T, seed, sampler="portable")
            py.append((spec, generate_plain(model, x, NEW[name], T, seed, sampler="portable").tokens[0]))
        results, _ = node.result()
    return {case: (*p, js) for case, p, js in zip(GRID, py, results, strict=True)}


def close(a: list[float], b: list[float]) -> bool:
    return len(a) == len(b) and all(abs(x - y) <= TOL for x, y in zip(a, b, strict=True))


def test_sampled_generation_equals_pythons(runs):
    """Every case: plain and speculative tokens, and round by round the anchor, draft, statuses, accepted length,
    next token and kind exactly; confidences, p_d and p_t of the drafts within 1e-9."""
    worst = 0.0
    for (name, ell, T, seed), (spec, plain, js) in runs.items():
        where = f"{name}, ℓ = {ell}, T = {T}, seed = {seed}"
        assert js["plain"]["tokens"] == plain, where
        assert js["speculative"]["tokens"] == spec.tokens[0], where
        rows = spec.rows(0)
        assert len(js["speculative"]["strip"]) == len(rows), where
        for j, (a, r) in enumerate(zip(js["speculative"]["strip"], rows, strict=True)):
            got = (a["anchor"], a["draft"], a["status"], a["n_accepted"], a["next_token"], a["next_kind"])
            assert got == (r.anchor, r.draft, r.status, r.n_accepted, r.next_token, r.next_kind), f"{where}, {j}"
            assert (a["position"], a["verify_len"], a["committed"]) == (r.position, r.verify_len, r.committed)
            for field, py in (("confidence", r.confidence), ("draft_probs", r.draft_probs)):
                assert close(a[field], py), f"{where}, round {j}: {field}"
                worst = max([worst] + [abs(x - y) for x, y in zip(a[field], py, strict=True)])
            assert close(a["target_probs"], r.target_probs), f"{where}, round {j}: target_probs"
            worst = max([worst] + [abs(x - y) for x, y in zip(a["target_probs"], r.target_probs, strict=True)])
        assert js["speculative"]["mean_accepted_length"] == pytest.approx(
            sum(r.tau for r in rows) / len(rows), abs=0
        ), where
        assert js["temperature"] == T and int(js["seed"]) == seed
    print(f"\n{len(runs)} cases; max |JS − Python| over confidences, p_d, p_t: {worst:.3g}")


def test_the_grid_exercises_every_verdict(runs):
    """The compared runs hold each temperature and seed, every ℓ, rejections with a residual sample, full accepts with a
    bonus sample, partial accepts, drafts not sent and a last round that drafts fewer than the block."""
    assert {T for _, _, T, _ in runs} == set(TEMPERATURES) and {s for *_, s in runs} == set(SEEDS)
    assert {(T, s) for _, _, T, s in runs} == {(T, s) for T in TEMPERATURES for s in SEEDS}
    rounds = [r for spec, _, _ in runs.values() for r in spec.rows(0)]
    assert {r.next_kind for r in rounds} == {"resampled", "bonus"}
    assert any(0 < r.n_accepted < r.verify_len for r in rounds)
    assert any(r.n_accepted == 0 for r in rounds)
    assert any("not sent" in r.status for r in rounds) and any("not verified" in r.status for r in rounds)
    assert any(r.k < 5 for r in rounds)
    # and sampling moves the tokens: not the greedy run's (the same prompt, another draw)
    assert len({tuple(spec.tokens[0]) for (name, *_), (spec, _, _) in runs.items() if name == "english"}) > 1


def test_the_cli_run_is_what_model_js_draws(prompts, dump, tmp_path):
    """One real `python -m lab generate --json --temperature 0.7 --seed 2**63 − 1` (with its warm-up run before,
    which draws from a generator of its own): its tokens and strip are model.js's."""
    T, seed, ell, n = 0.7, 2**63 - 1, 3, 14
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-m", "lab", "generate", "--json", "--prompt", PROMPTS["story"], "--verify-len", str(ell)]
    cmd += ["--max-new-tokens", str(n), "--temperature", str(T), "--seed", str(seed)]
    cli = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True, env=env, timeout=300).stdout)
    task = {"kind": "generate", "prompt": cli["prompt_ids"], "max_new": n, "verify_len": ell}
    (js,), _ = run_js(dump, [{**task, "temperature": T, "seed": js_seed(seed)}], tmp_path)
    assert js["plain"]["tokens"] == cli["plain"]["tokens"]
    assert js["speculative"]["tokens"] == cli["speculative"]["tokens"]
    for a, b in zip(js["speculative"]["strip"], cli["speculative"]["strip"], strict=True):
        for field in ("anchor", "draft", "verify_len", "status", "next_token", "next_kind"):
            assert a[field] == b[field], field
        assert close(a["draft_probs"], b["draft_probs"]) and close(a["confidence"], b["confidence"])
    assert (js["k"], js["verify_len"], js["temperature"], int(js["seed"])) == (cli["k"], ell, T, seed)


def test_a_page_samples_what_the_module_samples(prompts, dump, tmp_path):
    """random.js then model.js as a page's scripts: the same draws as the module (and as Python, compared above);
    without random.js the page decodes greedily and refuses T > 0 with what to load."""
    opts = {"maxNewTokens": 10, "verifyLen": 4, "temperature": 1.5, "seed": js_seed(2**63 - 1)}
    (res,), _ = run_js(dump, [{"kind": "page_sampling", "prompt": prompts["emoji"], "opts": opts}], tmp_path)
    for run in ("speculative", "plain"):
        assert res["result"][run]["tokens"] == res["module"][run]["tokens"], run
    assert res["result"]["speculative"]["strip"] == res["module"]["speculative"]["strip"]
    assert len(res["greedy"]) == 10 and "needs random.js" in res["error"]


def verify_cases() -> list[tuple[str, list[int], torch.Tensor, torch.Tensor, int]]:
    """(name, draft tokens [k], p_d [k, V], p_t [k + 1, V], seed) for verify_block on given rows: random
    distributions (rejects and bonuses by seed), and rows whose residual has no mass (p_t ≤ p_d everywhere, unnormalised
    as verify_block allows), where the replacement comes from p_t itself."""
    gen = torch.Generator().manual_seed(3)
    V = 50
    cases = []
    for c in range(24):
        k = 1 + c % 4
        pd = torch.softmax(torch.randn(k, V, generator=gen, dtype=torch.float64) * 2, -1)
        pt = torch.softmax(torch.randn(k + 1, V, generator=gen, dtype=torch.float64) * 2, -1)
        tokens = [int(torch.multinomial(pd[i], 1, generator=gen)) for i in range(k)]
        cases.append((f"random {c}", tokens, pd, pt, SEEDS[c % 4] - c if c % 4 == 3 else SEEDS[c % 4] + c))
    pd = torch.full((2, V), 1.0 / V, dtype=torch.float64)
    pt = torch.cat([pd[:1] * 0.25, pd])  # [3, V] row 0: a quarter of p_d everywhere: ratio 1/4, a residual of no mass
    for seed in range(6):
        cases.append((f"no residual mass {seed}", [7, 9], pd, pt, seed))
    return cases


def test_verify_rule_equals_verify_block(dump, tmp_path):
    """DSparkModel.sampling.verifyBlock on the same rows and seed: the verdict, its ratios and the draws it read
    equal verify_block's, including rejects whose residual has no mass (the fallback to p_t)."""
    cases = verify_cases()
    tasks = [
        {
            "kind": "verify_block",
            "tokens": tokens,
            "pd": pd.reshape(-1).tolist(),
            "pt": pt.reshape(-1).tolist(),
            "vocab": pd.size(-1),
            "seed": js_seed(seed),
        }
        for _, tokens, pd, pt, seed in cases
    ]
    results, _ = run_js(dump, tasks, tmp_path)
    kinds, empty = set(), 0
    for (name, tokens, pd, pt, seed), js in zip(cases, results, strict=True):
        g = PortableGenerator(seed)
        v = verify_block(torch.tensor(tokens), pd, pt, g)
        assert (js["n_accepted"], js["next_token"], js["next_kind"]) == (v.n_accepted, v.next_token, v.kind), name
        assert js["ratios"] == v.ratios and js["draws"] == g.counter, name
        kinds.add(v.kind)
        empty += js.get("residual_mass") == 0.0
    assert kinds == {"resampled", "bonus"} and empty >= 3, (kinds, empty)


def pick_moves(js: np.ndarray, py: np.ndarray) -> np.ndarray:
    """For rows of weights [n, V] computed two ways: the chance over u that the sampling rule picks differently, at
    most Σ_i |c_i / total − c'_i / total'| (u must fall between the two normalised cumulative sums at some i). → [n]"""
    cj, cp = np.add.accumulate(js, -1), np.add.accumulate(py, -1)
    return np.abs(cj / cj[:, -1:] - cp / cp[:, -1:]).sum(-1)


def test_the_distributions_are_torchs_to_the_last_bits(model, prompts, dump, tmp_path):
    """softmax(logits / T) in model.js beside torch's on real rows (every row of three prompts at each T), and the
    residual of a reject (p_t, p_d: the softmaxes of two neighbouring rows): the largest difference, how many values
    differ, and the largest chance over u that a pick moves (pick_moves)."""
    with torch.no_grad():
        logits = torch.cat([model(torch.tensor([prompts[n]])).logits[0] for n in ("english", "vietnamese", "code")])
    V = logits.size(-1)
    tasks = [{"kind": "distribution", "logits": logits.reshape(-1).tolist(), "vocab": V, "T": T} for T in TEMPERATURES]
    pairs = {}
    for T in (0.7, 1.5):
        p = token_distribution(logits[:12], T)  # [12, V]
        pairs[T] = (p[:-1], p[1:])  # p_t, p_d [11, V]
        tasks.append(
            {"kind": "residual", "pt": p[:-1].reshape(-1).tolist(), "pd": p[1:].reshape(-1).tolist(), "vocab": V}
        )
    results, side = run_js(dump, tasks, tmp_path)
    worst, differ, chance = 0.0, 0, 0.0
    for T, res in zip(TEMPERATURES, results, strict=False):
        js = arr(res["probs"], side).reshape(-1, V)
        py = token_distribution(logits, T).numpy()
        worst = max(worst, float(np.abs(js - py).max()))
        differ += int((js != py).sum())
        chance = max(chance, float(pick_moves(js, py).max()))
    n = logits.size(0) * len(TEMPERATURES)
    print(
        f"\nsoftmax: {n} rows × {V}: max |Δp| {worst:.3g}, {differ} of {n * V} values differ; pick moves ≤ {chance:.3g}"
    )
    # model.js sums a row in the order of torch's eight-lane (AVX-512) softmax kernel: there only Math.exp's last bits
    # differ. A torch running another kernel (AVX2: four lanes) sums in another order, a factor common to the row
    # of at most (V − 1)·ε relative, which the pick does not see
    same_order = torch.backends.cpu.get_cpu_capability() == "AVX512"
    assert worst <= (1e-15 if same_order else (V - 1) * torch.finfo(torch.float64).eps)
    assert chance <= 1e-10
    worst, chance = 0.0, 0.0
    for (pt, pd), res in zip(pairs.values(), results[len(TEMPERATURES) :], strict=True):
        r = (pt - pd).clamp_min(0)  # as verify_block: res / mass
        py = (r / r.sum(-1, keepdim=True)).numpy()
        js = arr(res["dist"], side).reshape(-1, V)
        worst = max(worst, float(np.abs(js - py).max()))
        chance = max(chance, float(pick_moves(js, py).max()))
    print(f"residual: {2 * 11} rows: max |Δ| {worst:.3g}; pick moves ≤ {chance:.3g}")
    # the mass is summed in another order than torch's (a relative 1e-14 apart): a common factor the pick does not see
    assert worst <= 1e-13 and chance <= 1e-10

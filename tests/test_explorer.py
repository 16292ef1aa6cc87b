"""The DSpark Explorer (lab/present/, docs/explorer.html): one small self-contained page with no network URL, in sync
with its generator, holding the trained model's numbers, an in-page scheduler (JavaScript, run here with node) whose
verify length ℓ is `dspark_mini.scheduler`'s on every stored round, and an in-page verifier whose statistics match
Python's `verify_block` on the same stored distributions."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import torch

from dspark_mini.model import draft
from dspark_mini.scheduler import plan_round
from lab.evaluation.profiling import chi_square_test
from lab.lesson.view_6b import load_plan, shipped_sps
from lab.present import explorer
from lab.present.explorer import (
    DECIMALS,
    FIX_COMMAND,
    LOADS,
    MAX_BYTES,
    Policy,
    StoredRound,
    page_html,
    simulate_round,
    verify_length,
)
from lab.serving.sps import SPSTable
from lab.weights import lab_model

REPO = Path(__file__).resolve().parents[1]
PAGE = REPO / explorer.PAGE
NODE = shutil.which("node")
needs_node = pytest.mark.skipif(NODE is None, reason="node is not installed: cannot run the page's JavaScript")

# Runs the page's own verifier block (extracted from the page, not the package file) on its embedded data.
#   node harness.js PAGE sample PROMPT ROUND T POLICY SEED N → [[ℓ, n_accepted, first committed token], ...]
#   node harness.js PAGE greedy                              → per prompt, per round [n_accepted, next token] (k = 5)
#   node harness.js PAGE plan POLICIES → per prompt, per round {c: the stored greedy draft's confidences [K],
#                                        plans: per policy [lengths [R], B, τ*, Θ]} (R copies, as the page)
#   node harness.js PAGE sps TABLE B_MAX                     → [SPS(1), …, SPS(B_MAX)] of the table
# POLICY/POLICIES/TABLE are JSON ({"name": "dspark", "requests": 8} …; {batch_tokens, steps_per_s, interpolation}).
HARNESS = r"""
const fs = require("fs");
const vm = require("vm");
const [page, mode, ...args] = process.argv.slice(2);
const html = fs.readFileSync(page, "utf8");
const block = (id) => html.match(new RegExp(`<script[^>]*id="${id}"[^>]*>([\\s\\S]*?)</script>`))[1];
vm.runInThisContext(block("explorer-verify"));
const data = JSON.parse(block("explorer-data"));
let out;
if (mode === "sample") {
  const [prompt, round, T, policy, seed, n] = args.map((x) => JSON.parse(x));
  const prepared = prepareRound(data, prompt, round, T);
  const rand = mulberry32(seed);
  out = [];
  for (let i = 0; i < n; i++) {
    const r = simulateRound(prepared, policy, rand);
    out.push([r.verifyLen, r.verdict.nAccepted, r.committed[0]]);
  }
} else if (mode === "greedy") {
  out = data.prompts.map((p, pi) =>
    p.rounds.map((_, ri) => {
      const r = simulateRound(prepareRound(data, pi, ri, 0), { name: "fixed", k: data.k_max }, mulberry32(0));
      return [r.verdict.nAccepted, r.verdict.nextToken];
    }),
  );
} else if (mode === "plan") {
  const policies = JSON.parse(args[0]);
  out = data.prompts.map((p, pi) =>
    p.rounds.map((round, ri) => {
      const prepared = prepareRound(data, pi, ri, 0);
      const prev = [prepared.anchor, ...round.greedy.draft];
      const c = round.greedy.draft.map((_, i) => prepared.confidence(i, prev[i]));
      const plans = policies.map((policy) => {
        const plan = planLoad(c, policy, prepared.rate);
        return [plan.lengths, plan.batchTokens, plan.expectedTokens, plan.throughput];
      });
      return { c, plans };
    }),
  );
} else {
  const rate = spsRate(JSON.parse(args[0]));
  out = Array.from({ length: Number(args[1]) }, (_, i) => rate(i + 1));
}
console.log(JSON.stringify(out));
"""


def script(html: str, block_id: str) -> str:
    return re.search(rf'<script[^>]*id="{block_id}"[^>]*>(.*?)</script>', html, re.S).group(1)


def run_node(tmp_path: Path, *args) -> list:
    """Runs the harness; dicts and lists go to node as JSON."""
    args = [json.dumps(a) if isinstance(a, (dict, list)) else a for a in args]
    harness = tmp_path / "harness.js"
    harness.write_text(HARNESS, encoding="utf-8")
    done = subprocess.run([NODE, str(harness), str(PAGE), *map(str, args)], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def page() -> str:
    return PAGE.read_text(encoding="utf-8")


@pytest.fixture(scope="module")
def data(page) -> dict:
    return json.loads(script(page, "explorer-data"))


@pytest.fixture(scope="module")
def trained():
    return lab_model("trained")


# ---- the file ---------------------------------------------------------------------------------------------------
def test_page_is_small_and_offline(page):
    assert len(page.encode("utf-8")) <= MAX_BYTES
    low = page.lower()
    assert set(re.findall(r"url\(([a-z]+:[a-z0-9/+-]*)", low)) == {"data:font/woff2"}  # only the inlined font faces
    low = re.sub(r"url\(data:font/woff2;base64,[a-z0-9+/=]+\)", "", low)
    for bad in ("http://", "https://", "//cdn", "@import", "url(", "<link", "<iframe", "fetch(", "xmlhttprequest"):
        assert bad not in low, f"the page must not reach the network: found {bad!r}"
    assert not re.search(r"\bsrc\s*=", low), "every script is inlined: no src= attribute"
    assert re.findall(r"<script[^>]*>", page) == [
        '<script type="application/json" id="explorer-data">',
        '<script id="explorer-verify">',
        '<script id="explorer-app">',
    ]


def test_page_is_in_sync_with_the_generator(page, trained):
    assert page_html(trained) == page, f"docs/explorer.html is stale: run `{FIX_COMMAND}`"


def test_cli_writes_and_checks(tmp_path, monkeypatch, page, capsys):
    monkeypatch.setattr(explorer, "page_html", lambda model=None: page)  # the model run is the test above
    out = tmp_path / "site" / "explorer.html"
    assert explorer.main(["--out", str(out)]) == 0
    assert out.read_text(encoding="utf-8") == page
    assert explorer.main(["--check", "--out", str(out)]) == 0
    out.write_text(page + " ", encoding="utf-8")
    assert explorer.main(["--check", "--out", str(out)]) == 1
    assert FIX_COMMAND in capsys.readouterr().err
    assert [p.name for p in out.parent.iterdir()] == ["explorer.html"]  # no temporary file left behind


def test_strings_in_both_languages(data):
    ui = data["ui"]
    for key in ("accepted", "rejected", "not_verified", "not_sent", "resampled", "bonus", "temperature", "seed"):
        assert ui[key]["vi"] and ui[key]["en"], key
    app = explorer.asset("explorer_app.js") + explorer.asset("explorer_template.html")
    used = set(re.findall(r'data-t="(\w+)"', app)) | set(re.findall(r'\bt\("(\w+)"', app))
    used |= {f"policy_{name}" for name in data["policies"]}  # the policy menu's entries
    assert used <= set(ui), f"strings the page asks for but does not have: {sorted(used - set(ui))}"


def test_data_note_quotes_the_vocabulary_it_embeds(data):
    """The note's numbers are the embedded data's (no number typed into the text), in both languages: the page's
    words, and the probability the stored rows give to other tokens at T = 1 (mean and largest, in %)."""
    n = len(data["vocab"])
    mean, most = (f" {100 * data['outside_mass'][k]:.0f} %" for k in ("mean", "max"))
    for lang in ("vi", "en"):
        note = data["ui"]["note_data"][lang]
        assert f" {n:,} " in note and mean in note and most in note, lang
        assert not re.search(r"\{\w+\}", note), lang  # every placeholder filled


# ---- the data: the trained model's numbers ----------------------------------------------------------------------
def test_embedded_numbers_match_the_model(data, trained):
    """One prompt, recomputed by a different path than the generator's: a full forward for the target rows, and
    `draft` on a cache that holds the text up to the anchor for one round's draft logits and confidences. The page
    keeps only its words (`vocab_ids`: page id → lab id), so the model's rows are read at those ids."""
    ids = data["vocab_ids"]  # [W]
    assert ids == sorted(set(ids)) and len(data["vocab"]) == len(ids) == len(data["markov_w1"]) == len(data["conf_q"])
    pr = data["prompts"][0]
    K, start = data["k_max"], pr["prompt_len"]
    tokens = torch.tensor([[ids[t] for t in pr["tokens"]]])  # [1, S] lab ids
    with torch.inference_mode():
        logits = trained(tokens).logits[0]  # [S, V]
    step = 0.5 * 10 ** -DECIMALS["logits"]
    assert (torch.tensor(pr["target"], dtype=torch.float64) - logits[start:, ids]).abs().max() <= step + 1e-9
    assert logits[start:-1].argmax(-1).tolist() == tokens[0, start + 1 :].tolist()  # the greedy text
    p_out = 1 - torch.softmax(logits[start:].double(), -1)[:, ids].sum(-1)  # [rows] mass outside the page's words
    assert float(p_out.max()) <= data["outside_mass"]["max"] + 1e-12  # the note's bound holds for these rows

    ri = 1
    p = pr["rounds"][ri]["p"]
    cache = trained.new_cache(1)
    with torch.inference_mode():
        trained(tokens[:, :p], cache=cache)
        d = draft(trained, tokens[0, p : p + 1], cache, K, 0.0)
    assert d.tokens[0].tolist() == [ids[t] for t in pr["rounds"][ri]["greedy"]["draft"]]
    sr = StoredRound.from_data(data, 0, ri)
    prev = [sr.anchor] + [ids.index(t) for t in d.tokens[0, :-1].tolist()]  # page ids of x_{i−1}
    for i in range(K):
        assert (sr.draft_logits(i, prev[i]) - d.logits[0, i, ids]).abs().max() < 0.02  # base + Markov bias, rounded
        assert abs(sr.confidence(i, prev[i]) - float(d.confidence[0, i])) < 1e-3


def greedy_rounds(data: dict) -> list[list[list[int]]]:
    """Per prompt, per round: [n_accepted, next token] of the greedy round the generator recorded."""
    return [[[r["greedy"]["n"], r["greedy"]["next"]] for r in p["rounds"]] for p in data["prompts"]]


def test_python_twin_reproduces_the_greedy_rounds(data):
    """At T = 0 (k = 5, no threshold) the Python twin gives every recorded round."""

    def twin(pi: int, ri: int) -> list[int]:
        sr = StoredRound.from_data(data, pi, ri)
        v = simulate_round(sr, 0.0, Policy("fixed", k=data["k_max"]), torch.Generator().manual_seed(0)).verdict
        return [v.n_accepted, v.next_token]

    got = [[twin(pi, ri) for ri in range(len(p["rounds"]))] for pi, p in enumerate(data["prompts"])]
    assert got == greedy_rounds(data)


@needs_node
def test_page_reproduces_the_greedy_rounds(data, tmp_path):
    """At T = 0 (k = 5, no threshold) the page's JavaScript gives every recorded round (the page shows this check)."""
    assert run_node(tmp_path, "greedy") == greedy_rounds(data)


def test_verify_length_follows_the_policy():
    c = [0.9, 0.5, 0.9]
    assert verify_length(c, Policy("fixed", k=3)) == 3
    assert verify_length(c, Policy("fixed", k=2)) == 2
    assert verify_length(c, Policy("threshold", threshold=0.44)) == 2  # survival 0.9, 0.45, then 0.405 < 0.44
    assert verify_length(c, Policy("threshold", threshold=0.46)) == 1
    assert verify_length([0.3, 0.9], Policy("threshold", threshold=0.5)) == 0
    assert verify_length([1.0] * 5, Policy("dspark", requests=1)) == 5  # sure drafts: verify them all
    assert verify_length([0.01] * 5, Policy("dspark", requests=256)) == 0  # hopeless drafts under load: none
    with pytest.raises(ValueError, match="policy = 'retrospective' is invalid: allowed 'fixed', 'threshold'"):
        Policy("retrospective")
    with pytest.raises(ValueError, match="requests in flight"):
        Policy("dspark", requests=0)
    with pytest.raises(ValueError, match="length = 6 is invalid: allowed 0..3"):
        verify_length(c, Policy("fixed", k=6))


# ---- the page's scheduler against Python's ---------------------------------------------------------------------
PAGE_POLICIES = [{"name": "dspark", "requests": r} for r in LOADS] + [
    {"name": "fixed", "k": 3},
    {"name": "threshold", "threshold": 0.1},
    {"name": "threshold", "threshold": 0.5},
]


def python_plan(c: list[float], policy: dict) -> tuple[list[int], int, float, float]:
    """What Python plans for these confidences: `load_plan` (R copies, the presenter's path) for dspark, the
    Scheduler itself for the others, on the shipped SPS table."""
    if policy["name"] == "dspark":
        p = load_plan(c, policy["requests"])
        return list(p.lengths), p.batch_tokens, p.expected_tokens, p.throughput
    options = {"length": policy["k"]} if policy["name"] == "fixed" else {"threshold": policy["threshold"]}
    p = plan_round(policy["name"], [c], sps=shipped_sps(), **options)
    return p.lengths.tolist(), p.batch_tokens, p.expected_tokens, p.throughput


@needs_node
def test_page_scheduler_matches_python_on_every_stored_round(data, tmp_path):
    """On every stored round (its greedy draft's confidences), for R = 1, 2, 4, …, 256 and the static policies, the
    page's JavaScript gives every request the ℓ that dspark_mini/scheduler.py gives it, the same batch B, and the
    same τ* and Θ (up to the order of a float sum); the confidences are the Python twin's."""
    got = run_node(tmp_path, "plan", PAGE_POLICIES)
    seen = set()
    for pi, prompt in enumerate(data["prompts"]):
        assert len(got[pi]) == len(prompt["rounds"])
        for ri, (rnd, js) in enumerate(zip(prompt["rounds"], got[pi], strict=True)):
            sr = StoredRound.from_data(data, pi, ri)
            prev = [sr.anchor, *rnd["greedy"]["draft"]]
            assert js["c"] == pytest.approx([sr.confidence(i, prev[i]) for i in range(data["k_max"])], abs=1e-12)
            for policy, (lengths, b, tau, theta) in zip(PAGE_POLICIES, js["plans"], strict=True):
                want = python_plan(js["c"], policy)
                assert (lengths, b) == want[:2], (pi, ri, policy)
                assert (tau, theta) == pytest.approx(want[2:], rel=1e-12), (pi, ri, policy)
                assert lengths[0] == verify_length(js["c"], Policy(**policy)), (pi, ri, policy)
                seen.add((policy.get("requests"), lengths[0]))
    by_load = {r: {l for rr, l in seen if rr == r} for r in LOADS}
    assert by_load[1] != by_load[256] and len(set().union(*by_load.values())) == 6  # ℓ = 0..5 all occur: the
    # stored rounds exercise the whole walk, from "verify everything" to "verify nothing"


@needs_node
@pytest.mark.parametrize("interpolation", ["linear", "step"])
def test_page_sps_table_is_python_s(tmp_path, interpolation):
    """The page's SPS(B) equals SPSTable.steps_per_s bit for bit at every B the scheduler can ask for (R·(k + 1) ≤
    1536) and beyond the last measured size (extrapolated), for both interpolation rules; and a one-point table."""
    shipped = shipped_sps()
    table = SPSTable(shipped.batch_tokens, shipped.forced_steps_per_s, interpolation)
    b_max = table.max_batch_tokens + 200
    want = table.steps_per_s(torch.arange(1, b_max + 1)).tolist()
    stored = {"batch_tokens": list(table.batch_tokens), "steps_per_s": list(table.forced_steps_per_s)}
    assert run_node(tmp_path, "sps", stored | {"interpolation": interpolation}, b_max) == want
    one = SPSTable([6], [50.0], interpolation)
    got = run_node(tmp_path, "sps", {"batch_tokens": [6], "steps_per_s": [50.0], "interpolation": interpolation}, 9)
    assert got == one.steps_per_s(torch.arange(1, 10)).tolist()


def test_page_stores_the_shipped_sps_table(data):
    table = shipped_sps()
    assert data["sps"]["batch_tokens"] == list(table.batch_tokens)
    assert data["sps"]["steps_per_s"] == list(table.forced_steps_per_s)
    assert data["sps"]["interpolation"] == table.interpolation
    assert data["loads"] == [1, 2, 4, 8, 16, 32, 64, 128, 256] and data["load_default"] in data["loads"]


# ---- the page's verifier against Python's ------------------------------------------------------------------------
def rich_round(data: dict, T: float, policy: Policy) -> tuple[int, int]:
    """The first stored round (prompt, round) whose re-sampled outcomes vary enough for the χ² test to have power
    under `policy`: in 400 seeded Python rounds, ℓ takes ≥ 2 values, n_accepted ≥ 3 and the first committed token
    ≥ 5 (a round the drafter always gets right, or a policy that always sends the same ℓ, would test nothing)."""
    for pi, prompt in enumerate(data["prompts"]):
        for ri in range(len(prompt["rounds"])):
            sr, gen = StoredRound.from_data(data, pi, ri), torch.Generator().manual_seed(7)
            seen = set()
            for _ in range(400):
                s = simulate_round(sr, T, policy, gen)
                first = s.draft[0] if s.verdict.n_accepted else s.verdict.next_token
                seen.add((s.verify_len, s.verdict.n_accepted, first))
            if [len({x[i] for x in seen}) >= m for i, m in enumerate((2, 3, 5))] == [True] * 3:
                return pi, ri
    raise AssertionError(f"no stored round varies enough under {policy} at T = {T}: the page's data lost its spread")


@needs_node
@pytest.mark.parametrize(
    "policy", [{"name": "threshold", "threshold": 0.2}, {"name": "dspark", "requests": 32}], ids=lambda p: p["name"]
)
def test_page_verifier_matches_python_verify_block(data, tmp_path, policy):
    """20,000 seeded rounds of the page's JavaScript and 10,000 of `simulate_round` (which calls `verify_block`, and
    the scheduler on each re-sampled draft's confidences) on the same stored round: the distribution of (ℓ,
    n_accepted, first committed token) must be the same. A two-sample (homogeneity) χ² at α = 0.001 from the lab's
    one-sample helper: each sample against the pooled frequencies, the two statistics summed, df = bins − 1 (the
    same bins merged on both sides)."""
    T, n_js, n_py = 1.0, 20_000, 10_000
    prompt, rnd = rich_round(data, T, Policy(**policy))
    js = [tuple(x) for x in run_node(tmp_path, "sample", prompt, rnd, T, policy, 1, n_js)]
    sr = StoredRound.from_data(data, prompt, rnd)
    gen = torch.Generator().manual_seed(1)
    py = []
    for _ in range(n_py):
        s = simulate_round(sr, T, Policy(**policy), gen)
        first = s.draft[0] if s.verdict.n_accepted > 0 else s.verdict.next_token
        py.append((s.verify_len, s.verdict.n_accepted, first))
    bins = sorted(set(js) | set(py))
    assert len({b[0] for b in bins}) >= 2 and len({b[1] for b in bins}) >= 3 and len({b[2] for b in bins}) >= 5
    index = {b: i for i, b in enumerate(bins)}
    samples_js = torch.tensor([index[x] for x in js])
    samples_py = torch.tensor([index[x] for x in py])
    pooled = torch.bincount(torch.cat([samples_js, samples_py]), minlength=len(bins)).double() / (n_js + n_py)
    a = chi_square_test(samples_js, pooled)
    b = chi_square_test(samples_py, pooled, min_expected=5.0 * n_py / n_js)  # merge the same bins as for js
    assert a["df"] == b["df"] >= 5
    assert a["statistic"] + b["statistic"] <= a["critical"], (a, b)

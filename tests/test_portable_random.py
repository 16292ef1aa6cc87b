"""dspark_mini/portable_random.py and its JavaScript twin lab/browser/random.js: Philox4x32-10 gives Random123's
published answers in both; the same (seed, stream, counter) gives the same float64 bit for bit in node and in Python
(seeds 0, 1, 2**63 − 1 and a seeded spread, streams and counters up to 2**63 − 1); both languages pick the same token
as a naive reference on rows with zeros, one-hots, ties, tiny and subnormal weights and V = 8192, never a zero-weight
one; batches take one counter a row, row-major; the verify draw is speculative.py's comparison; a run is reproducible;
deterministic statistical checks with generous bounds; bad seeds, streams, counters and rows are refused by name.
One node process."""

from __future__ import annotations

import json
import math
import random
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from dspark_mini.portable_random import (
    PortableGenerator,
    accept,
    accept_ratio,
    philox4x32_10,
    pick,
    sample,
    uniform,
)

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "lab" / "browser" / "random.js"
NODE = shutil.which("node")
LAST = 2**63 - 1
TINY = 2.0**-1074  # the smallest subnormal float64

# Random123 (D. E. Shaw Research), tests/kat_vectors, the three "philox4x32 10" lines: counter [4], key [2] → [4].
KAT = [
    ((0x00000000,) * 4, (0x00000000,) * 2, (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    (
        (0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344),
        (0xA4093822, 0x299F31D0),
        (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1),
    ),
]


def naive_pick(row: list[float], u: float) -> int:
    """The rule, written as plainly as possible: sequential sums, u scaled by the total, the first c_i above it."""
    total = 0.0
    for p in row:
        total += p
    t = u * total
    c, last = 0.0, None
    for i, p in enumerate(row):
        c += p
        if p > 0:
            last = i
        if t < c:
            return i
    return last


def rows() -> dict[str, list[float]]:
    """Named rows of weights [V]: the hard cases of the rule."""
    rng = random.Random(7)
    big = [rng.random() ** 8 for _ in range(8192)]  # V = 8192, skewed
    sparse = [0.0] * 8192
    for i in rng.sample(range(8192), 40):
        sparse[i] = rng.random()
    soft = np.exp(np.array([rng.gauss(0, 4) for _ in range(8192)]))
    soft = (soft / soft.sum()).tolist()  # a softmax-like row, normalised, with tiny tails
    return {
        "one-hot first": [1.0] + [0.0] * 7,
        "one-hot last": [0.0] * 7 + [1.0],
        "one-hot middle of 8192": [0.0] * 4000 + [1.0] + [0.0] * 4191,
        "zeros around": [0.0, 0.0, 0.3, 0.0, 0.7, 0.0, 0.0],
        "ties": [0.25, 0.25, 0.25, 0.25],
        "unnormalised": [3.0, 0.0, 1.0, 4.0, 0.0, 1.0, 5.0],
        "tiny beside big": [1.0, 1e-300, 1e-20, 1e-17, 0.0, 1e-16, 1.0],
        "subnormal only": [0.0, TINY, 0.0, TINY * 3, 0.0],
        "one subnormal": [0.0, 0.0, TINY, 0.0],
        "subnormal and normal": [TINY, 1e-310, 0.5, TINY, 0.0],
        "huge": [1e300, 0.0, 1e300, 1e299],
        "float32 softmax": torch.softmax(torch.arange(16, dtype=torch.float32) / 3, -1).double().tolist(),
        "V 8192 skewed": big,
        "V 8192 sparse": sparse,
        "V 8192 softmax": soft,
    }


def us() -> list[float]:
    """u values that reach the ends and the middle: 0, the largest u, and a spread."""
    rng = random.Random(3)
    return [0.0, 1 - 2.0**-53, 0.5, 0.25, 2.0**-53] + [rng.getrandbits(53) * 2.0**-53 for _ in range(60)]


def seeds() -> list[int]:
    rng = random.Random(11)
    edges = [0, 1, 2, 3, 42, 2**31, 2**32 - 1, 2**32, 2**53 + 1, LAST - 1, LAST]
    return edges + [rng.getrandbits(63) for _ in range(40)]


def triples() -> list[tuple[int, int, int]]:
    """(seed, stream, counter): the edges and a seeded spread."""
    rng = random.Random(5)
    edges = [0, 1, 2**32 - 1, 2**32, LAST]
    out = [(s, t, c) for s in (0, 1, LAST) for t in edges for c in edges]
    out += [(s, rng.getrandbits(rng.choice([3, 32, 63])), rng.getrandbits(rng.choice([4, 33, 63]))) for s in seeds()]
    return out


# node harness.js RANDOM_JS IN OUT. IN = {kat, triples, runs [seed, stream, counter, n], rows, us, batch,
# accept, bad}; big integers travel as decimal strings. OUT = what random.js computes for each, the errors it raises,
# and whether a page's script defines DSparkRandom.
HARNESS = r"""
const fs = require("fs");
const vm = require("vm");
const [, , script, inPath, outPath] = process.argv;
const R = require(script);
const job = JSON.parse(fs.readFileSync(inPath, "utf8"));
const error = (f) => { try { f(); return null; } catch (e) { return [e.constructor.name, e.message]; } };
const runs = job.runs.map(([seed, stream, counter, n]) => {
  const g = new R.PortableGenerator(seed, stream, counter);
  const draws = Array.from({ length: n }, () => g.random());
  return [draws, g.counter.toString()];
});
const batch = (() => {
  const g = new R.PortableGenerator(job.batch.seed);
  return [R.sample(job.batch.probs, g), g.counter.toString()];
})();
const verdicts = job.accept.map(([seed, pt, pd]) => {
  const g = new R.PortableGenerator(seed);
  const ratio = R.acceptRatio(pt, pd);
  return [ratio, R.accept(ratio, g), g.counter.toString()];
});
const page = {};
vm.runInNewContext(fs.readFileSync(script, "utf8"), page);
const BAD = [
  () => R.uniform(-1, 0, 0), () => R.uniform(2n ** 63n, 0, 0), () => R.uniform("9223372036854775808", 0, 0),
  () => R.uniform(1.5, 0, 0), () => R.uniform(true, 0, 0), () => R.uniform(2 ** 60, 0, 0), () => R.uniform(null, 0, 0),
  () => R.uniform(0, -1, 0), () => R.uniform(0, 0, 2n ** 63n), () => new R.PortableGenerator("x"),
  () => R.pick([0.5, NaN], 0.5), () => R.pick([0.5, -0.1], 0.5), () => R.pick([0, 0], 0.5), () => R.pick([], 0.5),
  () => R.pick([1, Infinity], 0.5), () => R.pick([1e308, 1e308], 0.5), () => R.pick([1], 1),
  () => R.sample([[1], [NaN]], new R.PortableGenerator(0)), () => R.sample([1], Math.random),
  () => new R.PortableGenerator(0, 0, 2n ** 63n - 1n).random(), () => R.acceptRatio(NaN, 0.5),
  () => R.accept(NaN, new R.PortableGenerator(0)),
];
const out = {
  kat: job.kat.map(([ctr, key]) => R.philox4x32_10(ctr, key)),
  uniform: job.triples.map(([s, t, c]) => R.uniform(s, t, c)),
  uniformBig: job.triples.map(([s, t, c]) => R.uniform(BigInt(s), BigInt(t), BigInt(c))),
  runs,
  picks: job.rows.map((row) => job.us.map((u) => R.pick(row, u))),
  sampled: job.rows.map((row, i) => { const g = new R.PortableGenerator(i); return R.sample([row, row, row], g); }),
  batch,
  verdicts,
  bad: BAD.map(error),
  badSample: (() => {
    const g = new R.PortableGenerator(0);
    error(() => R.sample([[1], [-1]], g));
    return g.counter.toString();
  })(),
  pageGlobal: typeof page.DSparkRandom === "object" && page.DSparkRandom.uniform(0, 0, 0) === R.uniform(0, 0, 0),
};
fs.writeFileSync(outPath, JSON.stringify(out));
"""


@pytest.fixture(scope="module")
def job() -> dict:
    rng = random.Random(13)
    probs = torch.softmax(torch.randn(2, 6, 4, generator=torch.Generator().manual_seed(12)), -1).double()  # [2, 6, V]
    probs[0, 1, 2] = probs[1, 3, 0] = 0.0  # zero-weight tokens inside the batch
    return {
        "kat": [[list(c), list(k)] for c, k, _ in KAT],
        "triples": [[str(s), str(t), str(c)] for s, t, c in triples()],
        "runs": [[str(s), str(t), str(c), 50] for s, t, c in [(0, 0, 0), (1, 0, 0), (LAST, 3, 2**32 - 20), (9, 2, 0)]],
        "rows": list(rows().values()),
        "us": us(),
        "batch": {"seed": 77, "probs": probs.tolist()},
        "accept": [
            [str(s), *pair]
            for s, pair in zip(
                range(40),
                [(0.3, 0.6), (0.6, 0.3), (0.0, 0.5), (0.5, 0.0), (0.0, 0.0), (1e-13, 1e-14), (0.25, 0.25)] * 5
                + [(rng.random(), rng.random()) for _ in range(5)],
                strict=True,
            )
        ],
    }


@pytest.fixture(scope="module")
def js(job, tmp_path_factory) -> dict:
    if NODE is None:
        pytest.skip("node is not installed: cannot run lab/browser/random.js")
    folder = tmp_path_factory.mktemp("js-random")
    harness, source, result = folder / "harness.js", folder / "in.json", folder / "out.json"
    harness.write_text(HARNESS, encoding="utf-8")
    source.write_text(json.dumps(job), encoding="utf-8")
    subprocess.run([NODE, str(harness), str(SCRIPT), str(source), str(result)], check=True, timeout=600)
    return json.loads(result.read_text(encoding="utf-8"))


# ---- the core -------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("counter", "key", "expected"), KAT)
def test_philox_gives_random123s_known_answers(counter, key, expected):
    assert philox4x32_10(counter, key) == expected


def test_js_philox_gives_random123s_known_answers(js):
    assert [tuple(w) for w in js["kat"]] == [e for _, _, e in KAT]


def test_js_uniform_is_pythons_bit_for_bit(job, js):
    want = [uniform(s, t, c) for s, t, c in triples()]
    assert len(want) == len(js["uniform"]) > 100
    assert [float.hex(x) for x in js["uniform"]] == [float.hex(x) for x in want]
    assert js["uniformBig"] == js["uniform"]  # a BigInt and a decimal string are the same integer


def test_js_generator_runs_are_pythons(job, js):
    for (s, t, c, n), (draws, counter) in zip(job["runs"], js["runs"], strict=True):
        g = PortableGenerator(int(s), int(t), int(c))
        assert [float.hex(g.random()) for _ in range(n)] == [float.hex(x) for x in draws]
        assert int(counter) == g.counter == int(c) + n  # across the 2**32 carry of the counter's low word too


def test_uniform_is_a_multiple_of_2_to_the_minus_53_in_0_1():
    for s, t, c in triples():
        u = uniform(s, t, c)
        assert 0.0 <= u < 1.0 and (u * 2.0**53).is_integer()


def test_generator_is_uniform_at_its_counter():
    g = PortableGenerator(123, stream=4, counter=10)
    assert [g.random() for _ in range(5)] == [uniform(123, 4, c) for c in range(10, 15)]
    assert g.state == (123, 4, 15) and g.initial_seed() == 123
    g.set_state((123, 4, 12))
    assert g.random() == uniform(123, 4, 12)
    assert g.manual_seed(9).counter == 0 and g.random() == uniform(9, 4, 0)


def test_streams_seeds_and_counters_give_different_draws():
    draws = {uniform(s, t, c) for s in range(4) for t in range(4) for c in range(64)}
    assert len(draws) == 4 * 4 * 64  # 53-bit draws: a repeat here would be a wiring mistake, not chance


def test_same_seed_same_tokens_reproducible():
    probs = torch.softmax(torch.randn(3, 5, 300, generator=torch.Generator().manual_seed(0)), -1)  # [3, 5, V]
    a = sample(probs, PortableGenerator(5))
    b = sample(probs, PortableGenerator(5))
    c = sample(probs, PortableGenerator(6))
    assert torch.equal(a, b) and not torch.equal(a, c) and a.shape == (3, 5)


# ---- the sampling rule ----------------------------------------------------------------------------------------
def test_pick_is_the_naive_rule_and_never_picks_zero_weight(job):
    for name, row in rows().items():
        for u in job["us"]:
            got = pick(row, u)
            assert got == naive_pick(row, u), (name, u)
            assert row[got] > 0, (name, u)


@settings(max_examples=300, deadline=None, derandomize=True)
@given(
    row=st.lists(
        st.one_of(
            st.just(0.0),
            st.floats(0.0, 1.0, allow_subnormal=True),
            st.floats(0.0, 2.0**-1000, allow_subnormal=True),  # subnormal and tiny weights
            st.floats(0.0, 1e300),
        ),
        min_size=1,
        max_size=40,
    ).filter(lambda r: 0.0 < math.fsum(r) < 1e307),
    bits=st.integers(0, 2**53 - 1),
)
def test_pick_is_the_naive_rule_on_any_row(row, bits):
    u = bits * 2.0**-53  # every float a draw can be
    got = pick(row, u)
    assert got == naive_pick(row, u) and row[got] > 0


def test_js_picks_what_python_picks(job, js):
    for (name, row), got in zip(rows().items(), js["picks"], strict=True):
        assert got == [pick(row, u) for u in job["us"]], name


def test_pick_edges():
    assert pick([0.0, 0.0, 0.3, 0.0, 0.7], 0.0) == 2  # u = 0: the first token with weight, not a zero before it
    assert pick([0.3, 0.7, 0.0, 0.0], 1 - 2.0**-53) == 1  # the largest u: the last token with weight
    assert pick([0.25] * 4, 0.5) == 2  # t = 0.5 equals c_1: "t < c_i" goes to the next token
    assert pick([0.0, TINY, 0.0], 0.9) == 1  # t rounds up to a subnormal total: the last token with weight
    assert pick([TINY, TINY, 0.0], 0.9) == 1
    assert pick([1.0, 1e-17, 0.0], 1 - 2.0**-53) == 0  # 1e-17 does not move the float64 sum: never picked
    assert pick(torch.tensor([0.0, 2.0, 2.0], dtype=torch.float32), 0.6) == 2  # a tensor row, read as float64


def test_sample_takes_one_counter_a_row_in_row_major_order():
    probs = torch.softmax(torch.randn(2, 3, 4, 50, generator=torch.Generator().manual_seed(1)), -1)  # [2, 3, 4, V]
    g = PortableGenerator(31, stream=2)
    got = sample(probs, g)
    flat = probs.reshape(-1, 50).double()
    want = [pick(flat[n], uniform(31, 2, n)) for n in range(flat.size(0))]
    assert got.dtype == torch.long and got.shape == (2, 3, 4) and got.flatten().tolist() == want
    assert g.counter == 24
    assert sample(torch.zeros(0, 5), g).shape == (0,) and g.counter == 24  # an empty batch takes no draw
    one = sample(torch.tensor([0.0, 1.0, 0.0]), g)  # a single row [V] → a 0-d tensor, as sampling.sample
    assert one.shape == () and int(one) == 1 and g.counter == 25


def test_js_sample_is_pythons(job, js):
    for i, (row, got) in enumerate(zip(rows().values(), js["sampled"], strict=True)):
        assert got == sample(torch.tensor([row] * 3, dtype=torch.float64), PortableGenerator(i)).tolist()
    probs = torch.tensor(job["batch"]["probs"], dtype=torch.float64)  # [2, 6, 4]
    g = PortableGenerator(job["batch"]["seed"])
    assert js["batch"][0] == sample(probs, g).tolist() and int(js["batch"][1]) == g.counter == 12


def test_sample_reads_float32_and_bfloat16_as_their_float64_values():
    logits = torch.randn(4, 8192, generator=torch.Generator().manual_seed(2))  # [4, V]
    for dtype in (torch.float32, torch.bfloat16):
        probs = torch.softmax(logits, -1).to(dtype)
        assert torch.equal(sample(probs, PortableGenerator(3)), sample(probs.double(), PortableGenerator(3)))


# ---- the verify draw ------------------------------------------------------------------------------------------
def test_accept_is_speculative_verifys_comparison(job, js):
    for (seed, pt, pd), (ratio, kept, counter) in zip(job["accept"], js["verdicts"], strict=True):
        want = min(1.0, float(pt) / max(float(pd), 1e-12))  # speculative.verify_block's ratio
        assert accept_ratio(pt, pd) == want == ratio
        g = PortableGenerator(int(seed))
        assert accept(want, g) == (uniform(int(seed), 0, 0) < want) == kept
        assert g.counter == 1 == int(counter)  # one draw, always


def test_accept_keeps_at_ratio_one_and_rejects_at_ratio_zero():
    g = PortableGenerator(0)
    assert all(accept(1.0, g) for _ in range(2000)) and not any(accept(0.0, g) for _ in range(2000))
    assert g.counter == 4000


# ---- statistics (fixed seeds: deterministic) ------------------------------------------------------------------
def test_draws_look_uniform():
    g = PortableGenerator(2024)
    draws = np.array([g.random() for _ in range(100_000)])  # [N]
    assert abs(draws.mean() - 0.5) < 0.005 and abs(draws.var() - 1 / 12) < 0.002
    counts = np.bincount((draws * 20).astype(int), minlength=20)  # [20] bins
    chi2 = float(((counts - 5000) ** 2 / 5000).sum())
    assert chi2 < 60  # 19 degrees of freedom: the 0.9999 quantile is about 50
    other = np.array([uniform(2024, 1, c) for c in range(100_000)])  # stream 1 beside stream 0
    assert abs(np.corrcoef(draws, other)[0, 1]) < 0.02
    assert abs(np.corrcoef(draws[:-1], draws[1:])[0, 1]) < 0.02  # neighbouring counters


def test_sample_frequencies_follow_the_distribution():
    p = torch.tensor([0.5, 0.0, 0.25, 0.125, 0.0, 0.0625, 0.0625], dtype=torch.float64)  # [V]
    got = sample(p.expand(40_000, -1), PortableGenerator(99))  # [N]
    freq = torch.bincount(got, minlength=7).double() / got.numel()
    assert freq[1] == 0 and freq[4] == 0
    assert torch.allclose(freq, p, atol=0.01)
    big = torch.softmax(torch.randn(8192, generator=torch.Generator().manual_seed(6)) * 3, -1)  # V = 8192
    g, row = PortableGenerator(100), big.double().numpy()
    hits = np.array([pick(row, g.random()) for _ in range(5000)])  # [N] one row at a time: no [N, 8192] copy
    top = int(big.argmax())
    assert abs(float((hits == top).mean()) - float(big[top])) < 0.03  # ~5 standard deviations
    assert (row[hits] > 0).all()


# ---- bad input ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("seed", "error"), [(-1, ValueError), (2**63, ValueError), (1.5, TypeError), (True, TypeError), ("3", TypeError)]
)
def test_bad_seed_is_refused_by_name(seed, error):
    with pytest.raises(error, match=r"seed = .* is invalid: allowed an integer in 0\.\.9223372036854775807"):
        PortableGenerator(seed)
    with pytest.raises(error, match=r"0 ≤ seed < 2\*\*63"):
        uniform(seed, 0, 0)


def test_bad_stream_counter_rows_and_generator_are_refused_by_name():
    with pytest.raises(ValueError, match=r"stream = -1 is invalid: .*0 ≤ stream < 2\*\*63"):
        PortableGenerator(0, stream=-1)
    with pytest.raises(ValueError, match=r"counter = 9223372036854775808 is invalid"):
        uniform(0, 0, 2**63)
    g = PortableGenerator(0, counter=LAST - 1)
    assert g.random() == uniform(0, 0, LAST - 1) and g.counter == LAST  # the last counter stays < 2**63
    with pytest.raises(ValueError, match=r"counter = 9223372036854775807 is invalid: .*this stream is used up"):
        g.random()
    for row, match in [
        ([0.5, math.nan], r"row\[1\] = nan is invalid: allowed a finite number ≥ 0"),
        ([0.5, -0.1], r"row\[1\] = -0.1 is invalid"),
        ([1.0, math.inf], r"row\[1\] = inf is invalid"),
        ([0.0, 0.0], r"row sums to 0.0: allowed a finite total > 0"),
        ([1e308, 1e308], r"row sums to inf"),
    ]:
        with pytest.raises(ValueError, match=match):
            pick(row, 0.5)
    g = PortableGenerator(0)
    with pytest.raises(ValueError, match=r"probs\[1, 0\] = -1.0 is invalid"):
        sample(torch.tensor([[1.0], [-1.0]]), g)
    assert g.counter == 0  # a bad batch is refused before any draw
    with pytest.raises(ValueError, match=r"allowed \[\.\.\., V\], V ≥ 1"):
        sample(torch.zeros(3, 0), g)
    with pytest.raises(ValueError, match=r"u = 1.0 is invalid: allowed a float in \[0, 1\)"):
        pick([1.0], 1.0)
    with pytest.raises(TypeError, match=r"generator = .* is invalid: allowed a PortableGenerator"):
        sample(torch.ones(3), torch.Generator())
    with pytest.raises(ValueError, match=r"p_t = nan is invalid: allowed a finite number ≥ 0"):
        accept_ratio(math.nan, 0.5)
    with pytest.raises(ValueError, match=r"ratio = nan is invalid"):
        accept(math.nan, g)


def test_js_refuses_the_same_by_name(js):
    seed_msg = "is invalid: allowed an integer in 0..9223372036854775807 (0 ≤ seed < 2**63)"
    bad = js["bad"]
    assert all(b is not None for b in bad)
    for i in range(7):
        assert bad[i][1].startswith("seed = ") and seed_msg in bad[i][1], bad[i]
    assert "above 2**53 give a BigInt or a decimal string" in bad[5][1]
    assert bad[7][1].startswith("stream = -1 is invalid") and bad[8][1].startswith("counter = 9223372036854775808")
    assert bad[9][1].startswith('seed = "x" is invalid')
    assert bad[10][1] == "row[1] = NaN is invalid: allowed a finite number ≥ 0"
    assert bad[11][1] == "row[1] = -0.1 is invalid: allowed a finite number ≥ 0"
    assert bad[12][1].startswith("row sums to 0: allowed a finite total > 0")
    assert "V ≥ 1" in bad[13][1] and bad[14][1].startswith("row[1] = Infinity is invalid")
    assert bad[15][1].startswith("row sums to Infinity") and bad[16][1].startswith("u = 1 is invalid")
    assert bad[17][1].startswith("probs[1][0] = NaN is invalid") and bad[18][0] == "TypeError"
    assert "stream is used up" in bad[19][1] and bad[20][1].startswith("p_t = NaN is invalid")
    assert bad[21][1].startswith("ratio = NaN is invalid")
    assert js["badSample"] == "0"  # a bad batch is refused before any draw


def test_page_script_defines_the_global(js):
    assert js["pageGlobal"] is True

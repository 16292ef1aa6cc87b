"""lab/browser/model.js, the lab model in JavaScript (float64), computes what dspark_mini computes for the shipped `lab`
weights: the target's logits at every position of many prompts (English, Vietnamese, code, emoji, one token, a prompt
near max_seq_len) and every layer's output; incremental decoding and verify blocks on the caches, with the rollback of
a partial accept; the DSpark draft; and greedy plain and speculative generation, round by round, at every verify
length. Logits are compared by max |JS − Python| relative to the largest |logit| of the prompt (≤ 1e-9); discrete
choices (tokens, expert picks, indexer picks, accepted lengths) exactly.

The weights are dumped once per module as raw little-endian float64 with a JSON index; a node driver
(tests/js_model_driver.js) loads them into model.js and runs every task of a job in one process."""

from __future__ import annotations

import json
import math
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest
import torch

from dspark_mini.quant import fp4_qdq
from dspark_mini.tokenizer import LAB_TOKENIZER_DIR
from lab.browser.model_config import js_config
from lab.weights import lab_model

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "lab" / "browser" / "model.js"
DRIVER = REPO / "tests" / "js_model_driver.js"
NODE = shutil.which("node")
pytestmark = pytest.mark.skipif(NODE is None, reason="node is not installed: cannot run lab/browser/model.js")

TOL = 1e-9  # max |JS − Python| / max |Python logit| over a prompt's rows

PROMPTS = {
    "english": "The quick brown fox jumps over the lazy dog.",
    "vietnamese": "Hôm nay trời đẹp, chúng tôi đi dạo quanh hồ Hoàn Kiếm.",
    "code": "def f(x):\n    return x ** 2 + 1\n",
    "emoji": "Good luck 🍀🎉 with the test! 🚀",
    "story": "Once upon a time, there was a little girl who lived in a village near the forest.",
}


@pytest.fixture(scope="module")
def model():
    return lab_model("trained")


@pytest.fixture(scope="module")
def tok():
    from dspark_mini.tokenizer import default_tokenizer

    return default_tokenizer()


@pytest.fixture(scope="module")
def dump(model, tmp_path_factory) -> Path:
    """weights.bin (every tensor, float64 little-endian, end to end), index.json {"master": {name: {shape, offset,
    length}}, "qdq": the same names with the routed experts' weights MXFP4-QDQ'd here and flagged qdq "fp4"} and
    config.json (lab/browser/model_config.py)."""
    d = tmp_path_factory.mktemp("js_model")
    state = {k: v.detach().to(torch.float64).contiguous() for k, v in model.state_dict().items()}
    index: dict[str, dict] = {"master": {}, "qdq": {}}
    offset = 0
    with open(d / "weights.bin", "wb") as f:

        def put(arr: np.ndarray) -> tuple[int, int]:
            nonlocal offset
            f.write(arr.astype("<f8").tobytes())
            start, offset = offset, offset + arr.size
            return start, arr.size

        for name, t in state.items():
            start, n = put(t.numpy())
            index["master"][name] = {"shape": list(t.shape), "offset": start, "length": n}
            index["qdq"][name] = dict(index["master"][name])
            if ".experts." in name and "shared" not in name:
                start, n = put(fp4_qdq(t, 32, "e8m0").numpy())
                index["qdq"][name] = {"shape": list(t.shape), "offset": start, "length": n, "qdq": "fp4"}
    (d / "index.json").write_text(json.dumps(index))
    (d / "config.json").write_text(json.dumps(js_config(model)))
    return d


def run_js(dump: Path, tasks: list[dict], tmp_path: Path) -> tuple[list, np.ndarray]:
    """Run the tasks in one node process: (results, the float64 side file they reference)."""
    (tmp_path / "job.json").write_text(json.dumps({"tasks": tasks}))
    subprocess.run(
        [NODE, str(DRIVER), str(SCRIPT), str(dump), str(tmp_path / "job.json"), str(tmp_path)],
        check=True,
        timeout=600,
    )
    res = json.loads((tmp_path / "result.json").read_text())["results"]
    return res, np.fromfile(tmp_path / "result.bin", dtype="<f8")


def arr(ref: dict, side: np.ndarray) -> np.ndarray:
    return side[ref["bin"] : ref["bin"] + ref["n"]]


def rel_diff(js: np.ndarray, py: torch.Tensor) -> float:
    """max |JS − Python| / max |Python|."""
    p = py.detach().to(torch.float64).reshape(-1).numpy()
    assert js.shape == p.shape, f"JS gave {js.shape} values, Python {p.shape}"
    return float(np.abs(js - p).max() / max(np.abs(p).max(), 1e-300))


def long_ids(tok, n: int) -> list[int]:
    text = " ".join(PROMPTS.values()) * 20
    ids = tok.encode(text)
    assert len(ids) >= n
    return ids[:n]


# ---- the target's prefill --------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def prefill_cases(tok, model) -> dict[str, list[int]]:
    cases = {name: tok.encode(text) for name, text in PROMPTS.items()}
    cases["one token"] = tok.encode("Hi")[:1]
    cases["long"] = long_ids(tok, model.cfg.max_seq_len - 6)
    cases["full"] = long_ids(tok, model.cfg.max_seq_len)
    return cases


@pytest.fixture(scope="module")
def prefill_js(dump, prefill_cases, tmp_path_factory):
    tasks = [{"kind": "forward", "ids": ids, "trace": name == "english"} for name, ids in prefill_cases.items()]
    tasks += [{"kind": "forward", "ids": prefill_cases["vietnamese"], "weights": "qdq"}]
    return run_js(dump, tasks, tmp_path_factory.mktemp("prefill"))


@torch.no_grad()
def test_prefill_logits_equal_pythons_at_every_position(model, prefill_cases, prefill_js):
    results, side = prefill_js
    worst = {}
    for (name, ids), res in zip(prefill_cases.items(), results, strict=False):
        py = model(torch.tensor([ids])).logits[0]  # [S, V]
        worst[name] = rel_diff(arr(res["logits"], side), py)
        js_top = arr(res["logits"], side).reshape(len(ids), -1).argmax(-1)
        assert js_top.tolist() == py.argmax(-1).tolist(), name
    assert max(worst.values()) <= TOL, worst


@torch.no_grad()
def test_prefill_layers_taps_and_picks_equal_pythons(model, prefill_cases, prefill_js):
    """What each layer computed for the first prompt (model.js's trace, for teaching views) equals Python's trace: the
    block's output streams [S, hc, D], the mHC mixes, the attention and FFN inputs, the router's scores, choices and
    weights, the sink's share, the Engram rows and gates, the indexer's scores and picks, and the DSpark taps."""
    from dspark_mini.model import Trace

    results, side = prefill_js
    ids = prefill_cases["english"]
    trace = Trace(sinkhorn_history=False)
    out = model(torch.tensor([ids]), trace=trace)
    res = results[0]
    x_by_layer = []

    def keep(module, args, output):
        x_by_layer.append(output[0][0])

    hooks = [b.register_forward_hook(keep) for b in model.layers]
    try:
        model(torch.tensor([ids]))
    finally:
        for h in hooks:
            h.remove()
    for i, ref in enumerate(res["layers"]):
        assert rel_diff(arr(ref, side), x_by_layer[i]) <= TOL, f"layer {i}"
        chosen = trace.get("5A", "indices", i)[0]  # [S, k]
        assert sorted(map(sorted, np.array(res["chosen"][i]).reshape(len(ids), -1).tolist())) == sorted(
            map(sorted, chosen.tolist())
        ), f"layer {i} experts"
    for layer, rows in res["engram_rows"].items():
        assert rows == trace.get("1B", "row_ids", int(layer))[0].reshape(-1).tolist()
    for layer, picks in res["picks"].items():
        assert picks == trace.get("3C", "topk_idxs", int(layer))[0].reshape(-1).tolist(), f"layer {layer} picks"
    for layer, ref in res["taps"].items():
        assert rel_diff(arr(ref, side), out.taps[int(layer)][0]) <= TOL
    steps = {"attn_input": "4A", "ffn_input": "5A", "router_scores": "5A", "route_weights": "5A", "sink_share": "4A"}
    names = {"router_scores": "scores", "route_weights": "weights"}
    for i, fields in enumerate(res["fields"]):
        for name, ref in fields.items():
            py = trace.get(steps.get(name, "2A"), names.get(name, name), i)[0]
            if name == "route_weights":  # in the order the experts were chosen; compare as sorted sets
                js = np.sort(arr(ref, side).reshape(len(ids), -1), axis=-1)
                py = torch.sort(py, dim=-1).values
                assert rel_diff(js.reshape(-1), py) <= TOL, f"layer {i}: {name}"
            else:
                assert rel_diff(arr(ref, side), py) <= TOL, f"layer {i}: {name}"
    for layer, ref in res["engram_gates"].items():
        assert rel_diff(arr(ref, side), trace.get("1B", "gate", int(layer))[0]) <= TOL
    for layer, ref in res["index_scores"].items():
        py = trace.get("3C", "scores", int(layer))[0].reshape(-1)
        js = arr(ref, side)
        finite = torch.isfinite(py).numpy()
        assert np.array_equal(np.isfinite(js), finite), f"layer {layer}: the masked entries"
        assert rel_diff(js[finite], py[finite]) <= TOL, f"layer {layer}: indexer scores"


@torch.no_grad()
def test_already_qdq_expert_weights_give_the_same_logits(model, prefill_cases, prefill_js):
    results, side = prefill_js
    names = list(prefill_cases)
    master = arr(results[names.index("vietnamese")]["logits"], side)
    assert np.array_equal(arr(results[-1]["logits"], side), master)


# ---- decoding on the caches ------------------------------------------------------------------------------------------
def step_cases(tok) -> dict[str, list[tuple[list[int], int | None]]]:
    """Chunks fed one after another on one cache, each (ids, rows kept: None = all): a prompt then single tokens
    (past the window and across ratio-2 groups); verify blocks of 6 rows with partial accepts (the rest rolled back);
    a long prompt decoded up to max_seq_len."""
    ids = long_ids(tok, 256)
    single = [(ids[:9], None)] + [([t], None) for t in ids[9:31]]
    blocks = [(ids[:7], None)]
    pos = 7
    for keep in (3, 1, 6, 2, 5, 4, 1, 6):
        blocks.append((ids[pos : pos + 6], keep))
        pos += keep
    blocks.append((ids[pos : pos + 3], 2))
    long = [(ids[:243], None)] + [(ids[243 + 2 * j : 245 + 2 * j], 1 + j % 2) for j in range(4)]
    n = 243 + sum(1 + j % 2 for j in range(4))
    long += [(ids[n : n + 256 - n], None)]
    return {"single tokens": single, "verify blocks": blocks, "to max_seq_len": long}


@torch.no_grad()
def python_steps(model, steps) -> tuple[list[torch.Tensor], dict]:
    cache = model.new_cache()
    logits = []
    for ids, keep in steps:
        out = model(torch.tensor([ids]), cache=cache, commit=False)
        cache.commit(out.pending, keep)
        logits.append(out.logits[0])
    return logits, cache.snapshot()


@pytest.fixture(scope="module")
def steps_js(dump, tok, tmp_path_factory):
    cases = step_cases(tok)
    tasks = [{"kind": "steps", "steps": [[ids, keep] for ids, keep in steps]} for steps in cases.values()]
    return cases, *run_js(dump, tasks, tmp_path_factory.mktemp("steps"))


def test_decode_and_verify_blocks_give_pythons_logits(model, steps_js):
    cases, results, side = steps_js
    for (name, steps), res in zip(cases.items(), results, strict=True):
        py_logits, _ = python_steps(model, steps)
        assert len(res["logits"]) == len(py_logits)
        for j, (ref, py) in enumerate(zip(res["logits"], py_logits, strict=True)):
            assert rel_diff(arr(ref, side), py) <= TOL, f"{name}: chunk {j}"


def test_caches_after_partial_accepts_equal_pythons(model, steps_js):
    """Window rings and their positions, compressed latents, index keys, the open group's carry and the Engram
    history: what rolling back the rejected rows leaves, equal to Python's cache."""
    cases, results, side = steps_js
    for (name, steps), res in zip(cases.items(), results, strict=True):
        _, snap = python_steps(model, steps)
        js = res["snapshot"]
        assert set(js) == set(snap), name
        for key, value in snap.items():
            got = js[key]
            if isinstance(got, dict):
                v = value.reshape(-1)
                assert arr(got, side).shape == tuple(v.shape), f"{name}: {key}"
                if v.numel():
                    assert rel_diff(arr(got, side), v) <= TOL, f"{name}: {key}"
            else:
                assert got == value.reshape(-1).tolist() if value.dim() else got == int(value), f"{name}: {key}"


# ---- the DSpark draft and greedy generation -------------------------------------------------------------------------
GEN_PROMPTS = ("english", "vietnamese", "code")
GEN_NEW = {"english": 32, "vietnamese": 27, "code": 40}  # 27: the last round drafts fewer than the block


def near_the_end(tok) -> tuple[str, int]:
    """A prompt of about 240 tokens and the new tokens that fill the cache up to max_seq_len (256): the last rounds
    draft fewer tokens because the cache runs out of room."""
    text = tok.decode(long_ids(tok, 238))
    return text, 256 - len(tok.encode(text))


@torch.no_grad()
def test_draft_equals_pythons(model, tok, dump, tmp_path):
    from dspark_mini.model import Trace, draft

    cases = [(tok.encode(PROMPTS[name]), k) for name in PROMPTS for k in (5, 3, 1)]
    anchors = [model(torch.tensor([ids])).logits[0, -1].argmax().item() for ids, _ in cases]
    tasks = [{"kind": "draft", "prompt": ids, "anchor": a, "k": k} for (ids, k), a in zip(cases, anchors, strict=True)]
    tasks.append({**tasks[0], "weights": "qdq"})  # the draft layers' experts given already QDQ'd
    results, side = run_js(dump, tasks, tmp_path)
    assert np.array_equal(arr(results.pop()["logits"], side), arr(results[0]["logits"], side))
    for (ids, k), a, res in zip(cases, anchors, results, strict=True):
        cache = model.new_cache()
        model(torch.tensor([ids]), cache=cache)
        trace = Trace(sinkhorn_history=False)
        d = draft(model, torch.tensor([a]), cache, k, trace=trace)
        assert res["tokens"] == d.tokens[0].tolist()
        assert rel_diff(arr(res["logits"], side), d.logits[0]) <= TOL
        assert rel_diff(arr(res["base"], side), trace.get("6B", "base_logits")[0]) <= TOL
        assert rel_diff(arr(res["hidden"], side), d.hidden[0]) <= TOL
        assert np.abs(np.array(res["confidence"]) - d.confidence[0].numpy()).max() <= TOL
        assert np.abs(np.array(res["draft_probs"]) - d.draft_probs[0].numpy()).max() <= TOL


@pytest.fixture(scope="module")
def generations(tok, dump, tmp_path_factory):
    """(prompt name, ℓ) → (what `dspark-lab generate --json` computes, what model.js gives)."""
    from lab.lesson.generation import compare

    texts = {name: (PROMPTS[name], GEN_NEW[name]) for name in GEN_PROMPTS}
    texts["near the end"] = near_the_end(tok)
    keys = [(name, ell) for name in GEN_PROMPTS for ell in range(1, 6)] + [("near the end", 5), ("near the end", 2)]
    tasks = [
        {
            "kind": "generate",
            "prompt": tok.encode(texts[name][0]),
            "max_new": texts[name][1],
            "verify_len": ell,
            "tokenizer_json": str(LAB_TOKENIZER_DIR / "tokenizer.json"),
        }
        for name, ell in keys
    ]
    results, _ = run_js(dump, tasks, tmp_path_factory.mktemp("generate"))
    py = {key: compare(texts[key[0]][0], max_new_tokens=texts[key[0]][1], verify_len=key[1]).to_json() for key in keys}
    return {key: (py[key], res) for key, res in zip(keys, results, strict=True)}


def close(a, b) -> bool:
    if a is None or b is None:
        return a is b
    return abs(a - b) <= TOL


def test_greedy_generation_equals_the_cli_at_every_verify_length(generations):
    """Plain and speculative tokens, the rounds, and every round's draft, verdict and next token; draft
    probabilities and confidences within 1e-9."""
    for (name, ell), (py, js) in generations.items():
        where = f"{name}, ℓ = {ell}"
        assert js["prompt_ids"] == py["prompt_ids"], where
        assert (js["block"], js["verify_len"]) == (py["block"], py["verify_len"]), where
        assert js["plain"]["tokens"] == py["plain"]["tokens"], where
        assert js["speculative"]["tokens"] == py["speculative"]["tokens"], where
        assert js["plain"]["text"] == py["plain"]["text"] and js["speculative"]["text"] == py["speculative"]["text"]
        assert js["identical_tokens"] and py["identical_tokens"], where
        for field in ("rounds", "target_forwards", "mean_accepted_length", "acceptance_rate"):
            assert js["speculative"][field] == py["speculative"][field], f"{where}: {field}"
        assert len(js["speculative"]["strip"]) == len(py["speculative"]["strip"]), where
        for j, (a, b) in enumerate(zip(js["speculative"]["strip"], py["speculative"]["strip"], strict=True)):
            for field in ("anchor", "draft", "verify_len", "status", "next_token", "next_kind"):
                assert a[field] == b[field], f"{where}, round {j}: {field}"
            for field in ("draft_probs", "confidence"):
                assert all(map(close, a[field], b[field])), f"{where}, round {j}: {field}"
        for a, b in zip(js["speculative"]["per_position"], py["speculative"]["per_position"], strict=True):
            assert {k: a[k] for k in ("position", "reached", "cond_accept", "cum_accept")} == {
                k: b[k] for k in ("position", "reached", "cond_accept", "cum_accept")
            }, where
            assert close(a["mean_confidence"], b["mean_confidence"]), where
            assert close(a["mean_draft_prob"], b["mean_draft_prob"]), where


@torch.no_grad()
def test_each_rounds_verify_equals_pythons(model, tok, generations):
    """What a page shows of each verify beyond the CLI's strip — the anchor's position, the target's argmax at each
    row, its probability of each sent draft, the kept count and the committed tokens — equal Python's rounds."""
    from dspark_mini.speculative import generate_speculative

    for name, ell in (("english", 5), ("code", 3), ("near the end", 2)):
        _, js = generations[(name, ell)]
        ids = torch.tensor([js["prompt_ids"]])
        rounds = generate_speculative(model, ids, len(js["speculative"]["tokens"]), ell).rows(0)
        assert len(rounds) == len(js["speculative"]["strip"])
        for r, a in zip(rounds, js["speculative"]["strip"], strict=True):
            assert (a["position"], a["n_accepted"], a["committed"]) == (r.position, r.n_accepted, r.committed)
            assert a["target_argmax"] == r.target_argmax
            assert all(map(close, a["target_probs"], r.target_probs))


def test_the_runs_exercise_partial_accepts_and_every_verdict(generations):
    """The compared runs hold rejections, full accepts (bonus tokens) and a last round shorter than the block."""
    strips = [r for py, _ in generations.values() for r in py["speculative"]["strip"]]
    assert {r["next_kind"] for r in strips} == {"resampled", "bonus"}
    assert any(0 < r["status"].count("accepted") < r["verify_len"] for r in strips)
    assert any(len(r["draft"]) < 5 for r in strips)


def test_the_cli_json_is_what_compare_gives(tok, generations):
    """One run of `python -m lab generate --json` itself: the tokens and strip compared above are the CLI's."""
    import os
    import sys

    name, ell = "english", 2
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    cmd = [sys.executable, "-m", "lab", "generate", "--json", "--prompt", PROMPTS[name], "--verify-len", str(ell)]
    cmd += ["--max-new-tokens", str(GEN_NEW[name])]
    cli = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True, env=env, timeout=300).stdout)
    py, js = generations[(name, ell)]
    assert cli["speculative"]["tokens"] == js["speculative"]["tokens"] == py["speculative"]["tokens"]
    assert cli["speculative"]["strip"] == py["speculative"]["strip"]


# ---- the pieces: quantization, constants, the page script, bad input -------------------------------------------------
def quant_probe() -> torch.Tensor:
    """Values on, between and just beside the E4M3 and E2M1 grids (ties to even, saturation, the smallest scales),
    scaled so that each block of 32 has its amax at a binade edge or just past it; plus random rows.  → [n·32]"""
    from dspark_mini.quant import _build_grid_table

    grids = [_build_grid_table(m, fmt, torch.float64, "cpu")[0] for m, fmt in ((448.0, (-6, 3)), (6.0, (0, 1)))]
    vals = torch.cat([torch.cat([g, (g[1:] + g[:-1]) / 2]) for g in grids])
    vals = torch.cat(
        [vals, torch.nextafter(vals, torch.tensor(math.inf)), torch.nextafter(vals, torch.tensor(-math.inf))]
    )
    rows = []
    gen = torch.Generator().manual_seed(0)
    for scale in (1.0, 2.0**-9, 2.0**-126, 1e-4 / 448, 448.0, 3.0, 6.0 * 2**-9, 1e-300):
        v = vals * scale
        v = torch.cat([v, v.new_zeros(-v.numel() % 32)])
        rows.append(v)
        rows.append(torch.randn(32 * 8, generator=gen, dtype=torch.float64) * scale)
    edges = torch.tensor([448.0 * 2.0**k for k in range(-20, 20)] + [6.0 * 2.0**k for k in range(-20, 20)])
    for e in torch.cat([edges, torch.nextafter(edges, torch.tensor(math.inf))]):  # amax exactly at / past an edge
        rows.append(torch.cat([e.view(1), torch.randn(31, generator=gen, dtype=torch.float64) * float(e) / 8]))
    return torch.cat(rows)


def test_quantization_is_bit_for_bit_pythons(dump, tmp_path):
    from dspark_mini.quant import fp8_qdq

    x = quant_probe()
    results, side = run_js(dump, [{"kind": "quant", "x": x.tolist()}], tmp_path)
    res = results[0]
    for name, py in (("fp8", fp8_qdq(x, 32)), ("e8m0", fp4_qdq(x, 32, "e8m0")), ("e4m3", fp4_qdq(x, 16, "e4m3"))):
        js = arr(res[name], side)
        differ = np.flatnonzero(js != py.numpy())
        assert differ.size == 0, f"{name}: {differ.size} values differ, first at {differ[:5]}"


def test_constants_computed_in_javascript(model, dump, tmp_path):
    """The Engram primes equal Python's; the RoPE inverse frequencies JavaScript computes (Math.pow, when the config
    does not give Python's) are within an ulp of them."""
    from dspark_mini.engram import engram_primes

    results, _ = run_js(dump, [{"kind": "constants"}], tmp_path)
    res = results[0]
    assert res["primes"] == [list(p) for p in engram_primes(model.cfg)]
    cfg = js_config(model)
    for kind in ("window", "compressed"):
        py = np.array(cfg["rope_inv_freq"][kind])
        assert np.abs(np.array(res[kind]) - py).max() <= 4e-16 * py.max(), kind


def test_the_script_defines_a_global_in_a_page(dump, tok, tmp_path):
    """Run as a page's script (no `module`, no node globals) it defines DSparkModel, which generates the same tokens."""
    results, _ = run_js(dump, [{"kind": "page", "prompt": tok.encode(PROMPTS["story"])}], tmp_path)
    assert results[0]["global"] and results[0]["same"]


BAD = [  # (task, words the error must hold)
    ({"call": "forward", "ids": []}, "non-empty"),
    ({"call": "forward", "ids": [8192]}, "token id 8192 is out of range: allowed 0..8191"),
    ({"call": "forward", "ids": [-1]}, "allowed 0..8191"),
    ({"call": "forward", "ids": [1] * 257}, "exceeds max_seq_len = 256"),
    (
        {"call": "generate", "prompt": [1, 2], "opts": {"maxNewTokens": 255}},
        "maxNewTokens = 255 is invalid: allowed 1..254",
    ),
    ({"call": "generate", "prompt": [1, 2], "opts": {"verifyLen": 6}}, "verifyLen = 6 is invalid: allowed 1..5"),
    ({"call": "generate", "prompt": [1, 2], "opts": {"verifyLen": 0}}, "allowed 1..5"),
    ({"call": "generate", "prompt": [1, 2], "opts": {"temperature": -1}}, "temperature = -1 is invalid"),
    (
        {"call": "generate", "prompt": [1, 2], "opts": {"temperature": 1e-7}},
        "temperature = 1e-7 is invalid: allowed 0 (greedy) or a finite number ≥ 1e-6",
    ),
    ({"call": "generate", "prompt": [1, 2], "opts": {"temperature": "hot"}}, "temperature = hot is invalid"),
    ({"call": "generate", "prompt": [1, 2], "opts": {"temperature": 0.7, "seed": -1}}, "seed = -1 is invalid"),
    (
        {"call": "generate", "prompt": [1, 2], "opts": {"temperature": 0.7, "seed": str(2**63)}},
        'seed = "9223372036854775808" is invalid: allowed an integer in 0..9223372036854775807',
    ),
    (
        {"call": "generate", "prompt": [1, 2], "opts": {"temperature": 0.7, "seed": 2**60}},
        "above 2**53 give a BigInt or a decimal string",
    ),
    (
        {"call": "generate", "prompt": [1, 2], "opts": {"temperature": 0.7, "uniform_value": 1.0}},
        "uniform() gave 1: allowed a number in [0, 1)",
    ),
    ({"call": "draft", "prompt": [1, 2], "anchor": 5, "k": 6}, "k (the draft block size) = 6 is invalid: allowed 1..5"),
    ({"call": "create", "weights_change": {"head.weight": None}}, "tensor 'head.weight' is missing"),
    ({"call": "create", "weights_change": {"norm.weight": {"shape": [127], "length": 127}}}, "expected [128]"),
    (
        {"call": "create", "weights_change": {"layers.0.ffn.experts.0.w1.weight": {"qdq": "fp8"}}},
        'qdq = "fp8": allowed "fp4" or none',
    ),
    ({"call": "create", "config_drop": ["compress_map"]}, "config field 'compress_map' is missing"),
    ({"call": "create", "config_change": {"dtype": "bfloat16"}}, "config field 'dtype'"),
    ({"call": "create", "config_change": {"confidence_temperatures": [1, 2]}}, "'confidence_temperatures'"),
]


def test_bad_input_gets_a_clear_error(dump, tmp_path):
    results, _ = run_js(dump, [{"kind": "error", **task} for task, _ in BAD], tmp_path)
    for (task, words), res in zip(BAD, results, strict=True):
        assert res["error"] is not None and words in res["error"], (task, res["error"])


def test_the_driver_loads_the_pages_scripts_in_the_pages_order():
    """A page inlines lab/browser's MODEL_SCRIPTS in that order; the driver's page tasks load the same files."""
    from lab.browser import MODEL_SCRIPTS

    text = DRIVER.read_text(encoding="utf-8")
    assert f"const MODEL_SCRIPTS = {json.dumps(list(MODEL_SCRIPTS))};" in text
    assert MODEL_SCRIPTS[-1] == "model.js" and all((SCRIPT.parent / name).is_file() for name in MODEL_SCRIPTS)

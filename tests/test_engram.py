"""Tests for Engram (step 1B): primes, multipliers, n-gram hashing, and the gated forward pass."""

from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from dspark_mini.config import ModelConfig, flash_config, lab_config
from dspark_mini.engram import (
    Engram,
    advance_history,
    engram_multipliers,
    engram_num_embeddings,
    engram_primes,
    hash_ngram_ids,
    is_prime,
    new_history,
)
from dspark_mini.tokenizer import default_tokenizer

INT64_MIN, INT64_SPAN = -(2**63), 2**64


def lab(**changes: object) -> ModelConfig:
    tok = default_tokenizer()
    return lab_config(tok.vocab_size, tok.compressed_vocab_size, tok.noise, **changes)


def pad_id(cfg: ModelConfig) -> int:
    return default_tokenizer().compress_map[cfg.engram_pad_id]


def trial_division_prime(n: int) -> bool:
    return n >= 2 and all(n % d for d in range(2, math.isqrt(n) + 1))


# ---- primes and multipliers -----------------------------------------------------------------------
def test_is_prime() -> None:
    for n in range(-5, 3000):
        assert is_prime(n) == trial_division_prime(n), n
    primes = [2**61 - 1, 18446744073709551557, 16000057, 999999999989]
    composites = [
        561,
        41041,
        3215031751,
        3825123056546413051,
        (2**31 - 1) * (2**31 - 1),
        18446744073709551615,
        3317044064679887385961981,
    ]  # strong pseudoprimes to small bases
    assert all(is_prime(p) for p in primes)
    assert not any(is_prime(c) for c in composites[:-1])
    with pytest.raises(ValueError, match="exact below"):
        is_prime(composites[-1])


def test_multipliers_real_config() -> None:
    cfg = flash_config()
    m1, m14 = engram_multipliers(cfg, 1), engram_multipliers(cfg, 14)
    assert m1.dtype == torch.int64 and m1.shape == (4,)
    assert m1.tolist() == [76632096046245, 4839876093313, 35959672319349, 73987337458391]
    assert m14.tolist() == [67716810739261, 51510806800915, 30921347202721, 82619226485591]
    assert all(v % 2 == 1 for v in m1.tolist() + m14.tolist())
    with pytest.raises(ValueError, match="no Engram"):
        engram_multipliers(cfg, 2)


def test_primes_real_config() -> None:
    cfg = flash_config()
    primes = engram_primes(cfg)
    assert [len(p) for p in primes] == [24, 24]
    assert primes[0][0] == 16_000_057 and primes[0][-1] == 16_000_463
    assert engram_num_embeddings(cfg) == (384_006_168, 384_016_682)


def test_primes_lab_config() -> None:
    cfg = lab(engram_layer_ids=(0, 3), engram_n_heads=2, engram_vocab_size=832)
    assert engram_num_embeddings(cfg) == (5148, 5388)
    assert engram_primes(cfg) == ((839, 853, 857, 859, 863, 877), (881, 883, 887, 907, 911, 919))


@pytest.mark.parametrize(
    "cfg", [lab(), lab(engram_vocab_size=2, engram_n_heads=3), flash_config()], ids=["lab", "tiny", "flash"]
)
def test_primes_are_smallest_unused(cfg: ModelConfig) -> None:
    flat = [p for layer in engram_primes(cfg) for p in layer]
    assert len(flat) == len(cfg.engram_layer_ids) * cfg.engram_n_hash_cols
    assert len(set(flat)) == len(flat)  # distinct within and across layers
    start = cfg.engram_vocab_size - 1
    for i, p in enumerate(flat):
        assert p > start and is_prime(p)
        skipped = [q for q in range(start + 1, p) if is_prime(q)]
        assert set(skipped) <= set(flat[:i])  # every smaller candidate was already taken


# ---- hashing --------------------------------------------------------------------------------------
def naive_hash(tokens: list[int], history: list[int], mult: list[int], primes: tuple[int, ...]) -> list:
    """Pure-Python reference: explicit loops, Python ints wrapped to int64 after every product."""

    def wrap(v: int) -> int:
        return (v - INT64_MIN) % INT64_SPAN + INT64_MIN

    n_max = len(mult)
    heads = len(primes) // (n_max - 1)
    offsets = [sum(primes[:j]) for j in range(len(primes))]
    ext = list(history) + list(tokens)
    rows = []
    for t in range(len(tokens)):
        pos = t + len(history)
        r = wrap(ext[pos] * mult[0])
        row = []
        for n in range(2, n_max + 1):
            r = r ^ wrap(ext[pos - (n - 1)] * mult[n - 1])
            for h in range(heads):
                j = (n - 2) * heads + h
                row.append(r % primes[j] + offsets[j])
        rows.append(row)
    return rows


def random_case(cfg: ModelConfig, layer_id: int, B: int, S: int, seed: int) -> tuple:
    g = torch.Generator().manual_seed(seed)
    comp = torch.randint(0, cfg.engram_compressed_vocab_size, (B, S), generator=g)  # [B, S]
    hist = torch.randint(
        0, cfg.engram_compressed_vocab_size, (B, cfg.engram_max_ngram_size - 1), generator=g
    )  # [B, max_ngram - 1]
    primes = engram_primes(cfg)[cfg.engram_layer_ids.index(layer_id)]
    return comp, hist, engram_multipliers(cfg, layer_id), primes


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("which", ["lab", "flash", "lab5"])
def test_hash_matches_naive(which: str, seed: int) -> None:
    if which == "lab5":
        cfg = lab(engram_max_ngram_size=5, engram_n_heads=3)
    else:
        cfg = lab() if which == "lab" else flash_config()
    layer_id = cfg.engram_layer_ids[seed % 2]
    comp, hist, mult, primes = random_case(cfg, layer_id, B=2, S=7, seed=seed)
    rows = hash_ngram_ids(comp, hist, mult, primes)
    assert rows.shape == (2, 7, cfg.engram_n_hash_cols) and rows.dtype == torch.int64
    for b in range(2):
        assert rows[b].tolist() == naive_hash(comp[b].tolist(), hist[b].tolist(), mult.tolist(), primes)


def test_hash_wraps_like_int64() -> None:
    mult = torch.tensor([2**62 + 1, 2**61 + 3, 2**62 - 1], dtype=torch.int64)  # products overflow
    primes = (101, 103, 107, 109)
    comp = torch.tensor([[7, 1000, 12345, 3, 999999]])
    hist = torch.tensor([[65535, 42]])
    rows = hash_ngram_ids(comp, hist, mult, primes)
    assert rows[0].tolist() == naive_hash(comp[0].tolist(), hist[0].tolist(), mult.tolist(), primes)


def test_row_ids_in_their_ranges() -> None:
    cfg = flash_config()
    comp, hist, mult, primes = random_case(cfg, 14, B=3, S=50, seed=7)
    rows = hash_ngram_ids(comp, hist, mult, primes)  # [3, 50, 24]
    off = 0
    for j, p in enumerate(primes):
        col = rows[..., j]
        assert bool((col >= off).all()) and bool((col < off + p).all())
        off += p
    assert off == engram_num_embeddings(cfg)[1]


def test_heads_of_one_order_share_the_hash() -> None:
    """Both heads of order 2 reduce the same r_2, each by its own prime (head 1 offset by p0)."""
    cfg = lab()
    comp, hist, mult, primes = random_case(cfg, 0, B=1, S=20, seed=3)
    rows = hash_ngram_ids(comp, hist, mult, primes)
    ext = hist[0].tolist() + comp[0].tolist()  # previous 3 ids, then the sequence
    r2 = [(ext[t + 3] * int(mult[0])) ^ (ext[t + 2] * int(mult[1])) for t in range(20)]  # no overflow here
    assert rows[0, :, 0].tolist() == [r % primes[0] for r in r2]
    assert rows[0, :, 1].tolist() == [r % primes[1] + primes[0] for r in r2]


def test_history_helpers() -> None:
    cfg = lab()
    h = new_history(3, cfg, pad_id(cfg))
    assert h.shape == (3, 3) and h.dtype == torch.int64 and bool((h == pad_id(cfg)).all())
    h2 = advance_history(h, torch.tensor([[5], [6], [7]]))
    assert h2.tolist() == [[pad_id(cfg)] * 2 + [v] for v in (5, 6, 7)]
    h3 = advance_history(h2, torch.tensor([[1, 2, 3, 4]] * 3))
    assert h3.tolist() == [[2, 3, 4]] * 3
    assert advance_history(h3, torch.zeros(3, 0, dtype=torch.long)).tolist() == h3.tolist()


@settings(max_examples=30, deadline=None)
@given(cuts=st.lists(st.integers(1, 6), min_size=1, max_size=8), seed=st.integers(0, 2**16))
def test_chunked_equals_one_shot(cuts: list[int], seed: int) -> None:
    cfg = lab()
    S = sum(cuts)
    g = torch.Generator().manual_seed(seed)
    comp = torch.randint(0, cfg.engram_compressed_vocab_size, (2, S), generator=g)  # [2, S]
    mult = engram_multipliers(cfg, 3)
    primes = engram_primes(cfg)[1]
    hist = new_history(2, cfg, pad_id(cfg))
    whole = hash_ngram_ids(comp, hist, mult, primes)
    parts, start = [], 0
    for n in cuts:
        chunk = comp[:, start : start + n]
        parts.append(hash_ngram_ids(chunk, hist, mult, primes))
        hist = advance_history(hist, chunk)
        start += n
    assert torch.equal(torch.cat(parts, dim=1), whole)
    if S >= 3:
        assert torch.equal(hist, comp[:, -3:])


def test_sequence_start_uses_pad() -> None:
    """At t = 0 every look-back is the pad id: the same as hashing [pad, pad, pad, tok]."""
    cfg = lab()
    mult, primes, pad = engram_multipliers(cfg, 0), engram_primes(cfg)[0], pad_id(cfg)
    tok = default_tokenizer()
    comp = tok.compress(torch.tensor([tok.encode("Xin chào")]))  # [1, 3]: "X", "in", " chào"
    rows = hash_ngram_ids(comp, new_history(1, cfg, pad), mult, primes)
    longer = torch.cat([torch.full((1, 3), pad), comp], dim=1)  # [1, 6]
    ref = hash_ngram_ids(longer, torch.tensor([[0, 0, 0]]), mult, primes)[:, 3:]
    assert torch.equal(rows, ref)


def test_compressed_ids_make_case_insensitive_rows() -> None:
    tok, cfg = default_tokenizer(), lab()
    mod = Engram(cfg, 0)
    raw_a, raw_b = tok.encode("Xin chào các bạn"), tok.encode("xin Chào Các bạn")
    assert raw_a != raw_b  # other tokens …
    a, b = tok.compress(torch.tensor([raw_a])), tok.compress(torch.tensor([raw_b]))
    h = new_history(1, cfg, pad_id(cfg))
    assert torch.equal(mod.row_ids(a, h), mod.row_ids(b, h))  # … the same Engram rows


# ---- module ---------------------------------------------------------------------------------------
def test_meta_construction_at_real_size() -> None:
    cfg = flash_config()
    with torch.device("meta"):
        mod = Engram(cfg, 1)
    assert mod.embed.weight.is_meta
    assert tuple(mod.embed.weight.shape) == (384_006_168, 256)
    assert tuple(mod.wkv.weight.shape) == (5120 * 5, 24 * 256)
    assert tuple(mod.q_weight.shape) == tuple(mod.k_weight.shape) == (4, 5120)
    assert {n for n, _ in mod.named_parameters()} == {"embed.weight", "wkv.weight", "q_weight", "k_weight"}


def naive_forward(mod: Engram, x: torch.Tensor, rows: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Per token, per copy loop in float64 with Python math for the gate."""
    cfg = mod.cfg
    B, S, hc, D = x.shape
    table, W = mod.embed.weight.detach().double(), mod.wkv.weight.detach().double()
    w = (mod.q_weight * mod.k_weight).detach().double()
    out, gates = torch.empty_like(x), torch.empty(B, S, hc, dtype=torch.float64)
    for b in range(B):
        for s in range(S):
            e = torch.cat([table[int(r)] for r in rows[b, s]])
            kv = W @ e
            value = kv[hc * D :]
            for c in range(hc):
                key, xc = kv[c * D : (c + 1) * D], x[b, s, c]
                rx = 1 / math.sqrt(float((xc * xc).mean()) + cfg.norm_eps)
                rk = 1 / math.sqrt(float((key * key).mean()) + cfg.norm_eps)
                dot = sum(float(xc[d] * w[c, d] * key[d]) * rx * rk for d in range(D)) / math.sqrt(D)
                z = math.copysign(math.sqrt(max(abs(dot), 1e-6)), dot) if dot != 0 else 0.0
                g = 1 / (1 + math.exp(-z))
                gates[b, s, c] = g
                out[b, s, c] = xc + g * value
    return out, gates


def make_module(cfg: ModelConfig, layer_id: int, seed: int) -> Engram:
    torch.manual_seed(seed)
    mod = Engram(cfg, layer_id)
    with torch.no_grad():  # the model's Linear leaves init to Transformer.init_weights
        mod.embed.weight.normal_()
        mod.wkv.weight.normal_(std=mod.wkv.in_features**-0.5)
        mod.q_weight.copy_(1 + 0.5 * torch.randn_like(mod.q_weight))
        mod.k_weight.copy_(1 + 0.5 * torch.randn_like(mod.k_weight))
    return mod


def test_forward_matches_naive() -> None:
    cfg = lab(engram_table_quant=False)
    mod = make_module(cfg, 3, seed=0)
    comp = torch.randint(0, cfg.engram_compressed_vocab_size, (2, 3))
    rows = mod.row_ids(comp, new_history(2, cfg, pad_id(cfg)))
    x = torch.randn(2, 3, cfg.hc_mult, cfg.dim, dtype=torch.float64)  # [B, S, hc, D]
    out, info = mod(x, rows)
    ref_out, ref_gate = naive_forward(mod, x, rows)
    assert out.dtype == torch.float64 and out.shape == x.shape
    torch.testing.assert_close(info["gate"], ref_gate, rtol=1e-10, atol=1e-12)
    torch.testing.assert_close(out, ref_out, rtol=1e-10, atol=1e-12)
    assert bool((info["gate"] > 0).all()) and bool((info["gate"] < 1).all())
    assert torch.equal(info["row_ids"], rows)
    assert info["value"].shape == (2, 3, cfg.dim) and info["delta_norm"].shape == (2, 3)
    delta = out - x
    for c in range(cfg.hc_mult):  # the same value, scaled by each copy's gate
        torch.testing.assert_close(delta[:, :, c], info["gate"][:, :, c, None] * info["value"])
    torch.testing.assert_close(info["delta_norm"], delta.flatten(2).norm(dim=-1))


def test_equal_keys_different_x_give_different_gates() -> None:
    cfg = lab(engram_table_quant=False)
    mod = make_module(cfg, 0, seed=1)
    hc, D = cfg.hc_mult, cfg.dim
    with torch.no_grad():  # every copy reads the same key rows and the same weights
        W = mod.wkv.weight.view(hc + 1, D, -1)
        W[1:hc].copy_(W[0].expand(hc - 1, -1, -1))
        mod.q_weight.fill_(1.0)
        mod.k_weight.fill_(1.0)
    rows = mod.row_ids(torch.randint(0, cfg.engram_compressed_vocab_size, (1, 4)), new_history(1, cfg, pad_id(cfg)))
    x_same = torch.randn(1, 4, 1, D, dtype=torch.float64).expand(1, 4, hc, D)
    _, info = mod(x_same, rows)
    assert torch.allclose(info["gate"], info["gate"][..., :1].expand_as(info["gate"]))
    x = torch.randn(1, 4, hc, D, dtype=torch.float64)
    _, info = mod(x, rows)
    g = info["gate"]
    assert bool((g > 0).all() and (g < 1).all())
    assert all(len(set(g[0, s].tolist())) == hc for s in range(4))


def test_gate_extremes() -> None:
    cfg = lab(engram_table_quant=False)
    mod = make_module(cfg, 0, seed=2).requires_grad_(False)
    with torch.no_grad():
        mod.q_weight.fill_(1.0)
        mod.k_weight.fill_(1.0)
    rows = torch.zeros(1, 1, cfg.engram_n_hash_cols, dtype=torch.long)  # every column reads row 0
    _, info = mod(torch.zeros(1, 1, cfg.hc_mult, cfg.dim, dtype=torch.float64), rows)
    assert torch.allclose(info["gate"], torch.full_like(info["gate"], 0.5))  # x = 0 → dot = 0 → σ(0)
    e = mod.embed.weight[0].repeat(cfg.engram_n_hash_cols).detach()  # [n_hash_cols · head_dim]
    keys = (mod.wkv.weight[: cfg.hc_mult * cfg.dim].detach() @ e).view(cfg.hc_mult, cfg.dim)  # [hc, D]
    x = (keys * torch.tensor([1.0, -1.0, 3.0, 1.0], dtype=keys.dtype)[:, None])[None, None]  # [1,1,hc,D]
    x[0, 0, 3] = keys[0]  # copy 3 gets copy 0's key: not aligned with its own key
    _, info = mod(x, rows)
    aligned = 1 / (1 + math.exp(-(cfg.dim**0.25)))  # x̂ = k̂: dot = D / √D = √D, gate = σ(D^¼)
    assert abs(float(info["gate"][0, 0, 0]) - aligned) < 1e-12
    assert abs(float(info["gate"][0, 0, 1]) - (1 - aligned)) < 1e-12  # opposite sign → 1 − gate
    assert abs(float(info["gate"][0, 0, 2]) - aligned) < 1e-12  # RMS norm: scale of x does not matter
    assert abs(float(info["gate"][0, 0, 3]) - aligned) > 1e-3


def test_table_quant_applies_fp8_on_lookup() -> None:
    from dspark_mini.quant import fp8_qdq

    cfg_q = lab(engram_table_quant=True)
    mod_q = make_module(cfg_q, 0, seed=4)
    mod_f = Engram(lab(engram_table_quant=False), 0)
    mod_f.load_state_dict(mod_q.state_dict())
    rows = mod_q.row_ids(
        torch.randint(0, cfg_q.engram_compressed_vocab_size, (2, 5)), new_history(2, cfg_q, pad_id(cfg_q))
    )
    x = torch.randn(2, 5, cfg_q.hc_mult, cfg_q.dim, dtype=torch.float64)
    out_q, _ = mod_q(x, rows)
    out_raw, _ = mod_f(x, rows)
    assert not torch.equal(out_raw, out_q)  # quantization changes the result
    with torch.no_grad():  # a pre-quantized table without QDQ gives exactly the same numbers
        mod_f.embed.weight.copy_(fp8_qdq(mod_q.embed.weight, 32))
    out_f, _ = mod_f(x, rows)
    assert torch.equal(out_q, out_f)


def test_forward_keeps_input_dtype() -> None:
    cfg = lab(engram_table_quant=False)
    mod = make_module(cfg, 0, seed=5)
    rows = mod.row_ids(torch.randint(0, cfg.engram_compressed_vocab_size, (1, 3)), new_history(1, cfg, pad_id(cfg)))
    x = torch.randn(1, 3, cfg.hc_mult, cfg.dim, dtype=torch.float32)
    out, info = mod(x, rows)
    assert out.dtype == info["gate"].dtype == info["value"].dtype == torch.float32
    ref, _ = mod(x.double(), rows)
    torch.testing.assert_close(out.double(), ref, rtol=1e-4, atol=1e-4)


def test_engram_rejects_unknown_layer() -> None:
    with pytest.raises(ValueError, match="engram_layer_ids"):
        Engram(lab(), 1)

"""A port checklist of DeepSeek-V4.1-Flash's reference: one test per known mistake, asserting the model avoids it."""

from __future__ import annotations

import math

import torch
from conftest import make_tokens

import dspark_mini.attention as attention_mod
from dspark_mini import build_model
from dspark_mini.attention import SharedAttention
from dspark_mini.compressor import Compressor
from dspark_mini.engram import engram_multipliers, engram_num_embeddings, engram_primes
from dspark_mini.indexer import select_candidate_blocks
from dspark_mini.mhc import hc_post
from dspark_mini.moe import Expert, Gate
from dspark_mini.rope import rope_inv_freq
from dspark_mini.schedule import layer_roles

F64 = torch.float64
NEG = float("-inf")


def test_pitfall_01_ratio_above_zero_does_not_mean_compressor(lab_cfg, lab_model, flash_cfg, flash_meta):
    """V4 semantics ("ratio > 0 ⇒ this layer compresses") would build 38 compressors; V4.1 builds one per
    KV source: 4 in the real model, 3 in the lab."""
    real_ratio_layers = [i for i, r in enumerate(flash_cfg.compress_ratios[:40]) if r > 0]
    assert len(real_ratio_layers) == 38
    assert [i for i, b in enumerate(flash_meta.layers) if b.attn.compressor is not None] == [2, 8, 14, 20]
    assert sum(1 for r in lab_cfg.compress_ratios[:8] if r > 0) == 7
    assert [i for i, b in enumerate(lab_model.layers) if b.attn.compressor is not None] == [1, 3, 4]


def test_pitfall_02_ratio1_compressor_exists_and_has_no_gate(flash_meta):
    """Ratio 1 must be accepted, and its compressor is a plain projection: no gate, no carry."""
    c20 = flash_meta.layers[20].attn.compressor
    assert c20.ratio == 1 and not hasattr(c20, "wgate")
    assert all(hasattr(flash_meta.layers[i].attn.compressor, "wgate") for i in (2, 8, 14))
    assert sum(1 for n, _ in flash_meta.named_parameters() if n.endswith("compressor.wgate.weight")) == 3
    c = Compressor(16, 32, 1, 1e-20, F64, F64)  # constructing one is fine
    assert [n for n, _ in c.named_parameters()] == ["wkv.weight", "norm.weight"]


def test_pitfall_03_reindex_layers_own_no_wk(flash_meta, lab_model):
    """Only KV sources own index keys (`indexer.wk`); Reindex layers score against the source's keys."""
    for i in (24, 28, 32, 36):
        ix = flash_meta.layers[i].attn.indexer
        assert ix is not None and not ix.owns_k and not hasattr(ix, "wk")
    for i in (2, 8, 14, 20):
        assert flash_meta.layers[i].attn.indexer.wk.weight.shape == (128, 512)
    assert not hasattr(lab_model.layers[6].attn.indexer, "wk")


def test_pitfall_04_mhc_single_pass_sigmoid_pre_and_from_to_comb(traced_run, lab_cfg):
    """V4.1 collapses a sublayer's input with the *previous* sublayer's pre (not its own); pre is
    sigmoid + eps (not softmax); post = 2·sigmoid; comb is indexed from-copy i → to-copy j."""
    tr = traced_run["trace"]
    for layer in range(1, lab_cfg.n_layers):
        assert torch.equal(tr.get("2A", "pre_in", layer), tr.get("2A", "ffn_pre", layer - 1))
        assert not torch.allclose(tr.get("2A", "pre_in", layer), tr.get("2A", "attn_pre", layer))
    pre, post = tr.get("2A", "attn_pre", 2), tr.get("2A", "attn_post", 2)
    assert (pre.sum(-1) - 1).abs().max() > 0.1  # not a softmax
    assert ((post > 0) & (post < 2)).all() and (post > 1).any() and (post < 1).any()
    R = torch.randn(1, 1, 4, 3, dtype=F64)
    comb = torch.zeros(1, 1, 4, 4, dtype=F64)
    comb[..., 0, 3] = 1.0  # from copy 0 to copy 3
    out = hc_post(torch.zeros(1, 1, 3, dtype=F64), R, torch.zeros(1, 1, 4, dtype=F64), comb)
    assert torch.equal(out[0, 0, 3], R[0, 0, 0]) and torch.equal(out[0, 0, 0], torch.zeros(3, dtype=F64))


def test_pitfall_05_rope_theta_and_yarn_per_layer(lab_model, lab_cfg, flash_cfg):
    """Ratio-0 layers use θ = 10000 without YaRN; ratio > 0 layers use θ = 160000 with YaRN."""
    plain = rope_inv_freq(8, 10000.0, False)
    yarn = rope_inv_freq(8, 160000.0, True, lab_cfg.rope_factor, lab_cfg.original_seq_len, 32, 1)
    for i, blk in enumerate(lab_model.layers):
        want = plain if lab_cfg.compress_ratios[i] == 0 else yarn
        assert torch.equal(blk.attn.inv_freq, want), i
    assert not torch.allclose(plain, yarn)
    assert not torch.allclose(yarn, rope_inv_freq(8, 160000.0, False))  # YaRN actually changes something
    roles = layer_roles(flash_cfg)
    assert {r.rope for r in roles if r.ratio == 0} == {"θ=10000"}
    assert {r.rope for r in roles if r.ratio > 0} == {"θ=160000 + YaRN"}


def _layer0_out(model, x, start):
    with torch.no_grad():
        return model.layers[0].attn(x, torch.arange(start, start + x.size(1)), SharedAttention(), None, None)


def test_pitfall_06_inverse_rope_on_attention_output(lab_cfg, monkeypatch):
    """The output's rope tail must be rotated back at the query position. Then (without KV quantization)
    a window-only layer is shift invariant: same inputs at positions 0.. and 100.. give the same output."""
    m = build_model(lab_cfg.replace(kv_quant=False), seed=0)
    x = torch.randn(1, 6, lab_cfg.dim, generator=torch.Generator().manual_seed(1), dtype=F64)
    a, b = _layer0_out(m, x, 0), _layer0_out(m, x, 100)
    torch.testing.assert_close(a, b, rtol=0, atol=1e-11)
    real = attention_mod.apply_rope
    monkeypatch.setattr(attention_mod, "apply_rope", lambda t, ang, inverse=False: t if inverse else real(t, ang))
    a2, b2 = _layer0_out(m, x, 0), _layer0_out(m, x, 100)
    assert (a2 - b2).abs().max() > 1e-3  # without the inverse rotation the output depends on absolute position


def test_pitfall_07_wo_a_is_block_diagonal(lab_model, flash_meta, lab_cfg, monkeypatch):
    """wo_a maps each head group on its own (einsum with wo_a viewed [G, R, H·Dh/G]), not as one dense Linear:
    rank slice g of the wo_b input depends only on the heads of group g."""
    assert flash_meta.layers[0].attn.wo_a.weight.shape == (8 * 1024, 64 * 512 // 8)
    attn = lab_model.layers[0].attn
    G, R, H, Dh = lab_cfg.o_groups, lab_cfg.o_lora_rank, lab_cfg.n_heads, lab_cfg.head_dim
    assert attn.wo_a.weight.shape == (G * R, H * Dh // G)
    mids, os_ = [], []
    real = attention_mod.sparse_attention

    def spy(q, kv, mask, sink, scale):
        o, p, s = real(q, kv, mask, sink, scale)
        os_.append(o.clone())
        return o, p, s

    monkeypatch.setattr(attention_mod, "sparse_attention", spy)
    h = attn.wo_b.register_forward_pre_hook(lambda mod, args: mids.append(args[0].detach().clone()))
    x = torch.randn(1, 3, lab_cfg.dim, generator=torch.Generator().manual_seed(2), dtype=F64)
    try:
        _layer0_out(lab_model, x, 0)
    finally:
        h.remove()
    o = attention_mod.apply_rope(os_[0], attention_mod.rope_angles(torch.arange(3), attn.inv_freq), inverse=True)
    o = o.reshape(1, 3, H * Dh)
    W = attn.wo_a.weight.detach()
    per = H * Dh // G
    want = torch.cat([o[..., g * per : (g + 1) * per] @ W[g * R : (g + 1) * R].T for g in range(G)], -1)
    assert mids[0].shape == (1, 3, G * R)
    torch.testing.assert_close(mids[0], want, rtol=0, atol=1e-12)
    # a dense map (the same weight applied to all groups' concatenation, e.g. repeating wo_a) mixes groups
    dense = o @ torch.cat([W] * G, dim=1).T  # [1, 3, G·R]: every rank slice reads every head
    assert (dense - want).abs().max() > 1e-3


def test_pitfall_08_router_bias_only_selects():
    """The noaux_tc bias picks experts; the weights come from the unbiased sqrtsoftplus scores."""
    gate = Gate(2, 3, 1, 1.5, 1.0, F64, F64)
    with torch.no_grad():
        gate.weight.zero_()
        gate.weight[:, 0] = torch.tensor([2.0, 1.0, 0.0], dtype=F64)
        gate.bias.copy_(torch.tensor([0.0, 3.0, 0.0], dtype=F64))
        w, i, s = gate(torch.tensor([[1.0, 0.0]], dtype=F64))
    assert i.tolist() == [[1]]  # chosen because of the bias
    assert abs(float(w) - 1.5 * math.sqrt(math.log1p(math.e))) < 1e-14  # weight from a_1 = sqrt(softplus(1))
    assert abs(float(w) - 1.5 * (math.sqrt(math.log1p(math.e)) + 3.0)) > 1


def test_pitfall_09_swiglu_gate_clamped_only_from_above():
    """up = clamp(w3 x, −L, L) but gate = min(w1 x, L): a very negative gate is not raised to −L."""
    ex = Expert(1, 1, 10.0, False, F64)
    with torch.no_grad():
        for lin in (ex.w1, ex.w2, ex.w3):
            lin.weight.fill_(1.0)
        y_neg = float(ex(torch.tensor([[-30.0]], dtype=F64)))
        y_pos = float(ex(torch.tensor([[30.0]], dtype=F64)))
    silu = lambda v: v / (1 + math.exp(-v))  # noqa: E731
    assert abs(y_neg - silu(-30.0) * -10.0) < 1e-20  # gate stays −30, up clamps to −10
    assert abs(y_neg - silu(-10.0) * -10.0) > 1e-4  # symmetric clamping would give this
    assert abs(y_pos - silu(10.0) * 10.0) < 1e-12  # both clamp to +10 from above


def test_pitfall_10_newest_partial_block_is_pinned():
    """The block holding the newest visible entry is only partly filled; it must be kept even when its
    max score is the lowest."""
    scores = torch.tensor([[[9.0, 8.0, 7.0, 6.0, -5.0, NEG]]], dtype=F64)  # 5 visible, blocks of 2
    keep = select_candidate_blocks(scores, torch.tensor([5]), 1, 2)
    assert keep[0, 0].tolist() == [False, False, False, False, True, True]
    keep2 = select_candidate_blocks(scores, torch.tensor([5]), 2, 2)
    assert keep2[0, 0].tolist() == [True, True, False, False, True, True]


def test_pitfall_11_taps_are_mean_of_attention_input_stream(lab_model, lab_cfg):
    """DSpark taps are the mean over the hc copies of the stream *entering* the tap layer (its attention
    input stream, after any Engram), not a block output and not one copy."""
    tokens = make_tokens(lab_cfg, 2, 10, seed=3)
    ins, outs = {}, {}
    hooks = []
    for i in (2, 3, 4):
        blk = lab_model.layers[i]
        hooks.append(blk.register_forward_pre_hook(lambda mod, args, i=i: ins.__setitem__(i, args[0].clone())))
        hooks.append(blk.register_forward_hook(lambda mod, args, out, i=i: outs.__setitem__(i, out[0].clone())))
        if blk.engram is not None:
            hooks.append(
                blk.engram.register_forward_pre_hook(
                    lambda mod, args, i=i: outs.__setitem__(("pre_engram", i), args[0].clone())
                )
            )
    try:
        with torch.no_grad():
            out = lab_model(tokens)
    finally:
        for h in hooks:
            h.remove()
    assert sorted(out.taps) == list(lab_cfg.dspark_target_layer_ids) == [3, 4]
    for i in (3, 4):
        assert out.taps[i].shape == (2, 10, lab_cfg.dim)
        torch.testing.assert_close(out.taps[i], ins[i].mean(2), rtol=0, atol=0)
        assert (out.taps[i] - outs[i].mean(2)).abs().max() > 1e-3  # not the block output
        assert (out.taps[i] - ins[i][:, :, 0]).abs().max() > 1e-3  # not copy 0 alone
    torch.testing.assert_close(out.taps[4], outs[3].mean(2), rtol=0, atol=0)  # block 3's output enters block 4
    assert (out.taps[3] - outs[("pre_engram", 3)].mean(2)).abs().max() > 1e-6  # after layer 3's Engram


def test_pitfall_12_draft_block_is_bidirectional(lab_model, lab_cfg):
    """The DSpark draft block (anchor + noise rows) attends bidirectionally within the block, not causally:
    the anchor row's draft hidden state depends on the rows after it."""
    from dspark_mini.model import draft

    g = torch.Generator().manual_seed(12)
    prompt = torch.randint(4, lab_cfg.vocab_size, (1, 11), generator=g)
    with torch.no_grad():
        cache = lab_model.new_cache(1)
        lab_model(prompt, cache=cache)
        anchor = torch.tensor([7])
        one = draft(lab_model, anchor, cache, 1).hidden[0, 0]
        three = draft(lab_model, anchor, cache, 3).hidden[0, 0]
    # a causal block would give row 0 the same hidden state whatever follows it
    assert (one - three).abs().max() > 1e-6
    # and every draft layer's attention is a draft layer (ratio 0, window only)
    assert all(blk.attn.is_draft and blk.attn.ratio == 0 for blk in lab_model.mtp.layers)


def _primes_above(start: int, count: int) -> list[int]:
    out, n = [], start + 1
    while len(out) < count:
        if n > 1 and all(n % d for d in range(2, math.isqrt(n) + 1)):
            out.append(n)
        n += 1
    return out


def test_pitfall_13_engram_multipliers_and_prime_order(lab_cfg, lab_model):
    """Hash multipliers depend on the compressed vocabulary size, and primes are drawn layer → order → head;
    a different compressed vocab, seed or draw order silently moves every table row."""
    L, K, H = len(lab_cfg.engram_layer_ids), lab_cfg.engram_max_ngram_size - 1, lab_cfg.engram_n_heads
    for layer in lab_cfg.engram_layer_ids:
        a = engram_multipliers(lab_cfg, layer)
        b = engram_multipliers(
            lab_cfg.replace(engram_compressed_vocab_size=lab_cfg.engram_compressed_vocab_size + 1), layer
        )
        assert a.shape == (lab_cfg.engram_max_ngram_size,)
        assert all(x != y for x, y in zip(a.tolist(), b.tolist(), strict=True))
    flat = _primes_above(lab_cfg.engram_vocab_size - 1, L * K * H)
    layer_major = tuple(tuple(flat[l * K * H : (l + 1) * K * H]) for l in range(L))
    assert engram_primes(lab_cfg) == layer_major
    sizes = engram_num_embeddings(lab_cfg)
    assert sizes == tuple(sum(p) for p in layer_major) == (5148, 5388)  # the reference's layer-major sizes
    assert [lab_model.layers[l].engram.embed.num_embeddings for l in lab_cfg.engram_layer_ids] == list(sizes)
    # drawing the layer innermost (order → head → layer) would give other table sizes
    layer_minor = [sum(flat[j] for j in range(len(flat)) if j % L == l) for l in range(L)]
    assert tuple(layer_minor) != sizes
    # inside a layer: order-major, head-minor (the hash reads primes.view(orders, heads))
    assert list(engram_primes(lab_cfg)[0]) == sorted(engram_primes(lab_cfg)[0])

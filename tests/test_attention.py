"""Step 4A · attention: sparse softmax with a sink, MQA (K = V), inverse RoPE, grouped O-LoRA; RoPE and YaRN.

Naive per-query / per-head loops and hand-written RoPE/YaRN (written from the reference's formulas) are the references.
"""

from __future__ import annotations

import math

import pytest
import torch

import dspark_mini.attention as attention_mod
from dspark_mini.attention import SharedAttention, sparse_attention
from dspark_mini.indexer import window_mask
from dspark_mini.rope import apply_rope, rope_angles, rope_inv_freq
from tests.helpers import naive_rope

F64 = torch.float64
NEG = float("-inf")


# ---- naive references ---------------------------------------------------------------------------


def naive_sparse_attention(q, kv, mask, sink, scale):
    B, S, H, D = q.shape
    T = kv.shape[1]
    o = torch.zeros(B, S, H, D, dtype=F64)
    probs = torch.zeros(B, S, H, T, dtype=F64)
    share = torch.zeros(B, S, H, dtype=F64)
    for b in range(B):
        for s in range(S):
            for h in range(H):
                logits = {t: float(q[b, s, h] @ kv[b, t]) * scale for t in range(T) if mask[b, s, t]}
                m = max([float(sink[h]), *logits.values()])
                den = math.exp(float(sink[h]) - m) + sum(math.exp(v - m) for v in logits.values())
                for t, v in logits.items():
                    probs[b, s, h, t] = math.exp(v - m) / den
                    o[b, s, h] += probs[b, s, h, t] * kv[b, t]
                share[b, s, h] = math.exp(float(sink[h]) - m) / den
    return o, probs, share


def naive_yarn(d: int, theta: float, factor: float, L0: int, beta_fast: int, beta_slow: int) -> list[float]:
    f = [theta ** (-2 * j / d) for j in range(d // 2)]

    def corr(rot):
        return d * math.log(L0 / (2 * math.pi * rot)) / (2 * math.log(theta))

    lo = max(math.floor(corr(beta_fast)), 0)
    hi = min(math.ceil(corr(beta_slow)), d - 1)
    if hi == lo:
        hi += 0.001
    out = []
    for j in range(d // 2):
        rho = min(max((j - lo) / (hi - lo), 0.0), 1.0)
        out.append(f[j] / factor * rho + f[j] * (1 - rho))
    return out


# ---- sparse attention ---------------------------------------------------------------------------
def test_sparse_attention_matches_naive_loop():
    g = torch.Generator().manual_seed(0)
    B, S, H, T, D = 2, 3, 4, 6, 16
    q = torch.randn(B, S, H, D, generator=g, dtype=F64)
    kv = torch.randn(B, T, D, generator=g, dtype=F64)
    mask = torch.rand(B, S, T, generator=g) > 0.4
    mask[0, 1] = False  # a row with no valid key
    mask[1, 2] = True
    sink = torch.tensor([0.0, 1.5, -2.0, 0.7], dtype=F64)
    o, probs, share = sparse_attention(q, kv, mask, sink, D**-0.5)
    assert o.shape == (B, S, H, D) and probs.shape == (B, S, H, T) and share.shape == (B, S, H)
    n_o, n_probs, n_share = naive_sparse_attention(q, kv, mask, sink, D**-0.5)
    torch.testing.assert_close(o, n_o, rtol=0, atol=1e-13)
    torch.testing.assert_close(probs, n_probs, rtol=0, atol=1e-14)
    torch.testing.assert_close(share, n_share, rtol=0, atol=1e-14)
    # the sink takes part in the denominator: probabilities plus sink share sum to 1
    torch.testing.assert_close(probs.sum(-1) + share, torch.ones(B, S, H, dtype=F64), rtol=0, atol=1e-14)
    # masked keys get exactly zero
    assert (probs.masked_select(~mask[:, :, None, :].expand_as(probs)) == 0).all()
    # a row with no valid key yields zeros and gives everything to the sink
    assert torch.equal(o[0, 1], torch.zeros(H, D, dtype=F64))
    assert torch.equal(share[0, 1], torch.ones(H, dtype=F64))
    # the sink logit is not multiplied by the scale
    scaled = naive_sparse_attention(q, kv, mask, sink * D**-0.5, D**-0.5)[0]
    assert (o - scaled).abs().max() > 1e-3


def test_huge_sink_soaks_up_attention():
    g = torch.Generator().manual_seed(1)
    q = torch.randn(1, 2, 2, 8, generator=g, dtype=F64)
    kv = torch.randn(1, 5, 8, generator=g, dtype=F64)
    mask = torch.ones(1, 2, 5, dtype=torch.bool)
    o, probs, share = sparse_attention(q, kv, mask, torch.tensor([60.0, -60.0], dtype=F64), 8**-0.5)
    assert o[..., 0, :].abs().max() < 1e-20 and (share[..., 0] >= 1 - 1e-15).all()
    assert (share[..., 1] < 1e-20).all()  # a very negative sink is no sink
    torch.testing.assert_close(probs[..., 1, :].sum(-1), torch.ones(1, 2, dtype=F64), rtol=0, atol=1e-14)


# ---- the attention layer inside the lab model ---------------------------------------------------
def _q_and_keys(attn, x, positions, keys):
    with torch.no_grad():
        qr = attn.q_norm(attn.wq_a(x))
        q = (qr @ attn.wq_b.weight.T).unflatten(-1, (attn.n_heads, attn.head_dim))
    return naive_rope(q, positions, attn.inv_freq, attn.rope_dim)


def _o_lora(attn, o):
    """o [B, S, H, Dh] → y: per group g, wo_a rows g·R..(g+1)·R times the heads of group g; then wo_b."""
    B, S, H, D = o.shape
    G, R = attn.groups, attn.o_rank
    per = H // G
    Wa, Wb = attn.wo_a.weight.detach(), attn.wo_b.weight.detach()
    parts = []
    for g in range(G):
        og = o[:, :, g * per : (g + 1) * per].reshape(B, S, per * D)
        parts.append(og @ Wa[g * R : (g + 1) * R].T)
    return torch.cat(parts, -1) @ Wb.T, torch.cat(parts, -1)


@pytest.mark.parametrize("layer", [0, 5])
def test_attention_layer_matches_naive_mqa(lab_model, traced_run, lab_cfg, layer):
    """K = V = the one latent (window ‖ compressed); probs, inverse RoPE and O-LoRA from scratch."""
    tr = traced_run["trace"]
    attn = lab_model.layers[layer].attn
    S = 37
    pos = list(range(S))
    x = tr.get("4A", "attn_input", layer)
    with torch.no_grad():
        raw = attn.kv_norm(attn.wkv(x))
    window_raw = naive_rope(raw, pos, attn.inv_freq, attn.rope_dim)
    torch.testing.assert_close(tr.get("6A", "window_kv_raw", layer), window_raw, rtol=0, atol=1e-12)
    keys = tr.get("6A", "window_kv", layer)
    mask = window_mask(torch.arange(S), torch.arange(S), lab_cfg.window_size).expand(2, S, S)
    if layer == 5:  # a Reuse layer: layer 4's latents at layer 4's picks
        comp = tr.get("6A", "compressed_kv", 4)
        picks = tr.get("3C", "topk_idxs", 4)
        cm = torch.zeros(2, S, comp.size(1) + 1, dtype=torch.bool)
        cm.scatter_(-1, torch.where(picks >= 0, picks, comp.size(1)), True)
        keys = torch.cat([keys, comp], 1)
        mask = torch.cat([mask, cm[..., :-1]], -1)
    q = _q_and_keys(attn, x, pos, keys)
    sl = slice(0, 37, 6)  # a few queries for the scalar loop
    n_o, n_probs, n_share = naive_sparse_attention(
        q[:1, sl], keys[:1], mask[:1, sl], attn.attn_sink.detach(), lab_cfg.head_dim**-0.5
    )
    torch.testing.assert_close(tr.get("4A", "probs", layer)[:1, sl], n_probs, rtol=0, atol=1e-12)
    torch.testing.assert_close(tr.get("4A", "sink_share", layer)[:1, sl], n_share, rtol=0, atol=1e-12)
    # full output: o = Σ p·kv (the same latent as value), de-rotated at the query position, then O-LoRA
    probs = tr.get("4A", "probs", layer)
    o = torch.einsum("bsht,btd->bshd", probs, keys)
    o_inv = naive_rope(o, pos, attn.inv_freq, attn.rope_dim, sign=-1.0)
    y, _ = _o_lora(attn, o_inv)
    torch.testing.assert_close(traced_run["attn_out"][layer], y, rtol=0, atol=1e-11)
    # forgetting the inverse RoPE gives a different output
    assert (traced_run["attn_out"][layer] - _o_lora(attn, o)[0]).abs().max() > 1e-4


def _run_layer0(lab_model, x, positions):
    attn = lab_model.layers[0].attn
    with torch.no_grad():
        return attn(x, positions, SharedAttention(), None, None)


def test_o_lora_is_block_diagonal(lab_model, lab_cfg, monkeypatch):
    attn = lab_model.layers[0].attn
    G, R, H = attn.groups, attn.o_rank, attn.n_heads
    per = H // G
    x = torch.randn(1, 5, lab_cfg.dim, generator=torch.Generator().manual_seed(3), dtype=F64)
    pos = torch.arange(5)
    seen = {}
    h = attn.wo_b.register_forward_pre_hook(lambda mod, args: seen.__setitem__("mid", args[0].detach().clone()))
    captured = {}
    real = sparse_attention

    def spy(q, kv, mask, sink, scale, bump=None):
        o, p, s = real(q, kv, mask, sink, scale)
        captured["o"] = o.clone()
        if bump is not None:
            o = o.clone()
            o[:, :, bump * per : (bump + 1) * per] += 0.5
        return o, p, s

    try:
        monkeypatch.setattr(attention_mod, "sparse_attention", spy)
        base_y = _run_layer0(lab_model, x, pos)
        base_mid = seen["mid"]
        assert base_mid.shape == (1, 5, G * R)
        # the wo_b input is the naive per-group product of the de-rotated o
        o_inv = naive_rope(captured["o"], pos.tolist(), attn.inv_freq, attn.rope_dim, sign=-1.0)
        y, mid = _o_lora(attn, o_inv)
        torch.testing.assert_close(base_mid, mid, rtol=0, atol=1e-12)
        torch.testing.assert_close(base_y, y, rtol=0, atol=1e-12)
        for g in range(G):
            monkeypatch.setattr(attention_mod, "sparse_attention", lambda *a, g=g: spy(*a, bump=g))
            _run_layer0(lab_model, x, pos)
            delta = (seen["mid"] - base_mid).abs().view(1, 5, G, R).amax(dim=(0, 1, 3))
            assert delta[g] > 1e-3
            assert all(delta[k] == 0 for k in range(G) if k != g)  # other groups' rank slices untouched
    finally:
        h.remove()
    # a dense reading (every group through every rank slice) would mix groups: the cross blocks are non-zero
    Wa = attn.wo_a.weight.detach().view(G, R, -1)
    og = o_inv.reshape(1, 5, G, -1)
    cross = torch.einsum("bsgd,hrd->bsghr", og, Wa)  # group g through group h's weights
    assert cross[:, :, 0, 1].abs().max() > 1e-3
    wrong_grouping = torch.einsum("bsgd,grd->bsgr", og, attn.wo_a.weight.detach().view(R, G, -1).transpose(0, 1))
    assert (wrong_grouping.flatten(2) - mid).abs().max() > 1e-3


# ---- RoPE and YaRN ------------------------------------------------------------------------------
def test_rope_inv_freq_plain():
    for d, theta in ((8, 10000.0), (64, 10000.0), (8, 160000.0)):
        got = rope_inv_freq(d, theta, False)
        assert got.shape == (d // 2,) and got.dtype == F64
        want = torch.tensor([theta ** (-2 * j / d) for j in range(d // 2)], dtype=F64)
        torch.testing.assert_close(got, want, rtol=1e-15, atol=0)


@pytest.mark.parametrize(
    "d,theta,factor,L0",
    [
        (8, 160000.0, 4.0, 32),  # the lab: lo clamps to 0 (corr(β_fast) < 0)
        (64, 160000.0, 16.0, 65536),  # the real model: lo = 15, hi = 25
        (8, 10.0, 4.0, 635),  # hi clamps to d − 1 (= 7, unclamped 9) while lo = 1 is inside the ramp
        (16, 10000.0, 8.0, 4096),
    ],
)
def test_yarn_matches_naive(d, theta, factor, L0):
    got = rope_inv_freq(d, theta, True, factor, L0, 32, 1)
    want = torch.tensor(naive_yarn(d, theta, factor, L0, 32, 1), dtype=F64)
    torch.testing.assert_close(got, want, rtol=1e-14, atol=0)
    if L0 == 635:  # without the clamp of hi the ramp would be (j − 1)/8, not (j − 1)/6
        assert abs(float(got[3]) - (theta**-0.75 / factor * 2 / 6 + theta**-0.75 * 4 / 6)) < 1e-15
    plain = rope_inv_freq(d, theta, False)
    assert (got <= plain * (1 + 1e-15)).all() and (got >= plain / factor * (1 - 1e-15)).all()
    assert not torch.equal(got, plain)


def test_yarn_real_ramp_edges():
    got = rope_inv_freq(64, 160000.0, True, 16.0, 65536, 32, 1)
    plain = rope_inv_freq(64, 160000.0, False)
    torch.testing.assert_close(got[:16], plain[:16], rtol=0, atol=0)  # j ≤ lo = 15: unchanged
    torch.testing.assert_close(got[25:], plain[25:] / 16, rtol=1e-15, atol=0)  # j ≥ hi = 25: ÷ factor
    assert ((got[16:25] < plain[16:25]) & (got[16:25] > plain[16:25] / 16)).all()


def test_model_layers_use_the_right_rope(lab_model, lab_cfg):
    plain = rope_inv_freq(lab_cfg.rope_head_dim, 10000.0, False)
    yarn = torch.tensor(
        naive_yarn(lab_cfg.rope_head_dim, 160000.0, lab_cfg.rope_factor, lab_cfg.original_seq_len, 32, 1), dtype=F64
    )
    assert (plain - yarn).abs().max() > 1e-3
    for i, blk in enumerate(lab_model.layers):
        inv = blk.attn.inv_freq
        assert inv.shape == (lab_cfg.rope_head_dim // 2,)
        if lab_cfg.compress_ratios[i] == 0:
            torch.testing.assert_close(inv, plain, rtol=1e-15, atol=0)
        else:
            torch.testing.assert_close(inv, yarn, rtol=1e-14, atol=0)


def test_apply_rope_matches_naive_and_inverts():
    g = torch.Generator().manual_seed(4)
    inv = rope_inv_freq(8, 10000.0, False)
    pos = torch.tensor([0, 3, 17, 250])
    ang = rope_angles(pos, inv)
    assert ang.shape == (4, 4)
    for shape in ((2, 4, 24), (2, 4, 3, 24)):
        x = torch.randn(*shape, generator=g, dtype=F64)
        y = apply_rope(x, ang)
        assert y.shape == x.shape
        torch.testing.assert_close(y, naive_rope(x, pos.tolist(), inv, 8), rtol=0, atol=1e-13)
        assert torch.equal(y[..., :16], x[..., :16])  # only the last rope_dim channels rotate
        torch.testing.assert_close(apply_rope(y, ang, inverse=True), x, rtol=0, atol=1e-14)
        torch.testing.assert_close(
            apply_rope(x, ang, inverse=True), naive_rope(x, pos.tolist(), inv, 8, -1.0), rtol=0, atol=1e-13
        )
        # norms of the rotated pairs are preserved
        torch.testing.assert_close(y[..., 16:].norm(dim=-1), x[..., 16:].norm(dim=-1), rtol=0, atol=1e-13)


@pytest.mark.parametrize("yarn", [False, True])
def test_rope_dot_product_depends_only_on_distance(yarn):
    inv = rope_inv_freq(8, 10000.0, yarn, 4.0, 32, 32, 1)
    g = torch.Generator().manual_seed(5)
    q = torch.randn(1, 1, 8, generator=g, dtype=F64)
    k = torch.randn(1, 1, 8, generator=g, dtype=F64)

    def dot(m, n):
        qm = apply_rope(q, rope_angles(torch.tensor([m]), inv))
        kn = apply_rope(k, rope_angles(torch.tensor([n]), inv))
        return float((qm * kn).sum())

    for delta in (0, 1, 5, 13):
        ref = dot(delta, 0)
        for start in (3, 40, 199):
            assert abs(dot(start + delta, start) - ref) < 1e-11
    assert abs(dot(5, 0) - dot(0, 5)) > 1e-6  # but it does depend on the sign of the distance

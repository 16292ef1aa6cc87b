"""Steps 3A-3C · CSA2: the CED schedule (3A), the compressor (3B), the indexer, candidate filter and window (3C).

The schedule is checked against the reference's layer table written out by hand; the mechanisms against
scalar re-implementations of the reference's formulas.
"""

from __future__ import annotations

import pytest
import torch
from conftest import make_tokens

from dspark_mini.compressor import Compressor
from dspark_mini.indexer import Indexer, select_candidate_blocks, stable_topk, visible_counts, window_mask
from dspark_mini.quant import fp4_qdq
from dspark_mini.schedule import layer_roles, role_counts
from tests.helpers import naive_rope

F64 = torch.float64
NEG = float("-inf")


# ---- naive helpers ------------------------------------------------------------------------------


def naive_rmsnorm(v, weight, eps):
    return weight * v / torch.sqrt((v * v).mean(-1, keepdim=True) + eps)


def naive_pool_ratio2(x: torch.Tensor, comp: Compressor, eps: float) -> torch.Tensor:
    """x [B, S, D] → latents [B, S // 2, Dh]: per channel softmax over the pair, then RMSNorm."""
    Wkv, Wg = comp.wkv.weight.detach(), comp.wgate.weight.detach()
    B, S, _ = x.shape
    out = []
    for j in range(S // 2):
        k0, k1 = x[:, 2 * j] @ Wkv.T, x[:, 2 * j + 1] @ Wkv.T
        s0, s1 = x[:, 2 * j] @ Wg.T, x[:, 2 * j + 1] @ Wg.T
        w0 = torch.exp(s0) / (torch.exp(s0) + torch.exp(s1))
        c = w0 * k0 + (1 - w0) * k1
        out.append(naive_rmsnorm(c, comp.norm.weight.detach(), eps))
    return torch.stack(out, dim=1) if out else x.new_zeros(B, 0, Wkv.shape[0])


def naive_select(scores: torch.Tensor, visible: torch.Tensor, topk_blocks: int, bs: int) -> torch.Tensor:
    """scores [B, S, T] → bool [B, S, T], loops: block max, pin the newest block, drop −inf blocks."""
    B, S, T = scores.shape
    nb = -(-T // bs)
    keep = torch.zeros(B, S, T, dtype=torch.bool)
    for b in range(B):
        for s in range(S):
            bsc = [max(float(scores[b, s, t]) for t in range(j * bs, min(T, (j + 1) * bs))) for j in range(nb)]
            vis = int(visible[s])
            pinned = (vis - 1) // bs if vis > 0 else None
            cands = [j for j in range(nb) if j == pinned or bsc[j] > NEG]
            cands.sort(key=lambda j: (0 if j == pinned else 1, -bsc[j], j))
            for j in cands[:topk_blocks]:
                keep[b, s, j * bs : min(T, (j + 1) * bs)] = True
    return keep


# ---- 3A: the schedule ---------------------------------------------------------------------------
def expected_flash_roles():
    """The reference's layer table, written out row by row."""
    rows = {}
    for i in range(43):
        if i in (0, 1):
            rows[i] = ("SWA-only", 0, None, None)
        elif i >= 40:
            rows[i] = ("Draft (SWA)", 0, None, None)
        elif i in (2, 8, 14):
            rows[i] = ("Full", 2, i, i)
        elif i < 20:
            src = 2 if i < 8 else (8 if i < 14 else 14)
            rows[i] = ("Reuse", 2, src, src)
        elif i == 20:
            rows[i] = ("Full", 1, 20, 20)
        elif i in (24, 28, 32, 36):
            rows[i] = ("Reindex", 1, 20, i)
        else:
            rows[i] = ("Reuse", 1, 20, 20 if i < 24 else 4 * (i // 4))
    return rows


def test_layer_roles_flash_reproduce_the_reference_table(flash_cfg):
    roles = layer_roles(flash_cfg)
    assert len(roles) == 43
    want = expected_flash_roles()
    for r in roles:
        mode, ratio, kv_of, topk_of = want[r.layer]
        assert (r.mode, r.ratio, r.reads_kv_of, r.reads_topk_of) == (mode, ratio, kv_of, topk_of), r
        assert r.is_kv_source == (r.layer in (2, 8, 14, 20))
        assert r.owns_index_k == (r.layer in (2, 8, 14, 20))
        assert r.is_index_source == (r.layer in (2, 8, 14, 20, 24, 28, 32, 36))
        assert r.is_candidate_source == (r.layer == 20)
        assert r.uses_candidates == (r.layer in (24, 28, 32, 36))
        assert r.part == ("encoder" if r.layer < 20 else "decoder" if r.layer < 40 else "draft")
        assert r.rope == ("θ=10000" if ratio == 0 else "θ=160000 + YaRN")
        assert r.has_engram == (r.layer in (1, 14))
        assert r.is_tap == (r.layer in (37, 38, 39))
    assert flash_cfg.n_encoder_layers == 20


def test_layer_roles_lab(lab_cfg):
    roles = layer_roles(lab_cfg)
    got = [(r.layer, r.mode, r.ratio, r.part, r.reads_kv_of, r.reads_topk_of) for r in roles]
    assert got == [
        (0, "SWA-only", 0, "encoder", None, None),
        (1, "Full", 2, "encoder", 1, 1),
        (2, "Reuse", 2, "encoder", 1, 1),
        (3, "Full", 2, "encoder", 3, 3),
        (4, "Full", 1, "decoder", 4, 4),
        (5, "Reuse", 1, "decoder", 4, 4),
        (6, "Reindex", 1, "decoder", 4, 6),
        (7, "Reuse", 1, "decoder", 4, 6),
        *[(8 + i, "Draft (SWA)", 0, "draft", None, None) for i in range(lab_cfg.n_mtp_layers)],
    ]
    assert [r.layer for r in roles if r.owns_index_k] == [1, 3, 4]
    assert [r.layer for r in roles if r.is_candidate_source] == [4]
    assert [r.layer for r in roles if r.uses_candidates] == [6]
    assert [r.layer for r in roles if r.has_engram] == [0, 3]
    assert [r.layer for r in roles if r.is_tap] == [3, 4]


def _count_params(model, suffix: str) -> int:
    return sum(1 for n, _ in model.named_parameters() if n.endswith(suffix))


COUNT_SUFFIX = {
    "compressor.wkv": "compressor.wkv.weight",
    "compressor.wgate": "compressor.wgate.weight",
    "indexer.wq_b": "indexer.wq_b.weight",
    "indexer.wk": "indexer.wk.weight",
    "engram": "engram.embed.weight",
}


def test_role_counts_flash_match_checkpoint_and_modules(flash_cfg, flash_meta):
    want = {"compressor.wkv": 4, "compressor.wgate": 3, "indexer.wq_b": 8, "indexer.wk": 4, "engram": 2}
    assert role_counts(flash_cfg) == want
    got = {k: _count_params(flash_meta, s) for k, s in COUNT_SUFFIX.items()}
    assert got == want
    assert [i for i, b in enumerate(flash_meta.layers) if b.attn.compressor is not None] == [2, 8, 14, 20]
    assert [i for i, b in enumerate(flash_meta.layers) if b.attn.indexer is not None] == [2, 8, 14, 20, 24, 28, 32, 36]


def test_role_counts_lab_match_modules(lab_cfg, lab_model):
    want = {"compressor.wkv": 3, "compressor.wgate": 2, "indexer.wq_b": 4, "indexer.wk": 3, "engram": 2}
    assert role_counts(lab_cfg) == want
    assert {k: _count_params(lab_model, s) for k, s in COUNT_SUFFIX.items()} == want


# ---- 3B: the compressor -------------------------------------------------------------------------
def _random_compressor(ratio: int, seed: int = 0, D: int = 16, Dh: int = 32) -> Compressor:
    comp = Compressor(D, Dh, ratio, 1e-20, F64, F64)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for n, p in comp.named_parameters():
            p.copy_(
                torch.randn(p.shape, generator=g, dtype=F64) * (p.shape[-1] ** -0.5 if p.dim() == 2 else 0.2)
                + (1.0 if n.startswith("norm") else 0.0)
            )
    return comp


def test_compressor_ratio2_matches_naive_pooling():
    comp = _random_compressor(2)
    x = torch.randn(2, 7, 16, generator=torch.Generator().manual_seed(1), dtype=F64) * 2
    with torch.no_grad():
        latent, kv, score, gate = comp(x)
    assert latent.shape == (2, 3, 32) and kv.shape == (2, 7, 32) and score.shape == (2, 7, 32)
    assert gate.shape == (2, 3, 2, 32)
    torch.testing.assert_close(gate.sum(2), torch.ones(2, 3, 32, dtype=F64), rtol=0, atol=1e-14)
    torch.testing.assert_close(latent, naive_pool_ratio2(x, comp, 1e-20), rtol=0, atol=1e-12)
    # not a plain mean of the pair: the gate is a per-channel softmax of the scores
    mean = naive_rmsnorm((kv[:, 0:6:2] + kv[:, 1:6:2]) / 2, comp.norm.weight.detach(), 1e-20)
    assert (latent - mean).abs().max() > 1e-3


@pytest.mark.parametrize("chunks", [[1] * 9, [3, 1, 2, 3], [2, 5, 2]])
def test_compressor_carry_chunked_equals_one_shot(chunks):
    comp = _random_compressor(2, seed=3)
    x = torch.randn(1, sum(chunks), 16, generator=torch.Generator().manual_seed(2), dtype=F64)
    with torch.no_grad():
        one_shot = comp(x)[0]
        carry, outs, i = None, [], 0
        for n in chunks:
            latent, kv, score, _ = comp(x[:, i : i + n], carry)
            outs.append(latent)
            kv_all = kv if carry is None else torch.cat([carry[0], kv], 1)
            sc_all = score if carry is None else torch.cat([carry[1], score], 1)
            used = latent.size(1) * 2
            carry = (kv_all[:, used:], sc_all[:, used:])
            i += n
            assert carry[0].size(1) == i % 2  # an odd length leaves exactly one token waiting
    assert one_shot.shape == (1, 4, 32)
    torch.testing.assert_close(torch.cat(outs, 1), one_shot, rtol=0, atol=1e-13)


def test_compressor_ratio1_has_no_gate_and_no_carry():
    comp = _random_compressor(1)
    assert not hasattr(comp, "wgate")
    assert sorted(n for n, _ in comp.named_parameters()) == ["norm.weight", "wkv.weight"]
    x = torch.randn(1, 5, 16, generator=torch.Generator().manual_seed(4), dtype=F64)
    with torch.no_grad():
        latent, kv, score, gate = comp(x)
    assert latent.shape == (1, 5, 32) and score is None and gate is None
    torch.testing.assert_close(
        latent, naive_rmsnorm(x @ comp.wkv.weight.detach().T, comp.norm.weight.detach(), 1e-20), rtol=0, atol=1e-12
    )
    with pytest.raises(ValueError, match="compress ratio"):
        Compressor(16, 32, 4, 1e-20, F64, F64)


def test_model_compressors_and_cache_carry(lab_model, lab_cfg):
    m = lab_model
    assert m.layers[1].attn.compressor.ratio == 2 and hasattr(m.layers[1].attn.compressor, "wgate")
    assert m.layers[4].attn.compressor.ratio == 1 and not hasattr(m.layers[4].attn.compressor, "wgate")
    assert [i for i, b in enumerate(m.layers) if b.attn.compressor is not None] == [1, 3, 4]
    tokens = make_tokens(lab_cfg, 2, 11, seed=5)
    cache = m.new_cache(2)
    length = 0
    with torch.no_grad():
        for n in (1, 2, 3, 1, 4):
            m(tokens[:, length : length + n], cache=cache)
            length += n
            for s in (1, 3):
                st = cache.sources[s]
                assert st.carry_kv.shape == (2, length % 2, lab_cfg.head_dim)
                assert st.carry_score.shape == (2, length % 2, lab_cfg.head_dim)
                assert st.count == length // 2
            assert cache.sources[4].carry_kv is None and cache.sources[4].count == length


def test_model_compressed_latent_rope_and_index_keys(lab_model, traced_run, lab_cfg):
    """3B order: pooled latent (pre-RoPE) → index keys from it; the cached latent is RoPE'd at j·ratio."""
    tr = traced_run["trace"]
    for layer in (1, 4):
        attn = lab_model.layers[layer].attn
        x = tr.get("4A", "attn_input", layer)
        latent = tr.get("3B", "latent_pre_rope", layer)
        r = attn.ratio
        n = 37 // r
        assert latent.shape == (2, n, lab_cfg.head_dim)
        gpos = tr.get("3B", "group_positions", layer)
        assert gpos.tolist() == [j * r for j in range(n)]
        if r == 2:
            want = naive_pool_ratio2(x, attn.compressor, lab_cfg.norm_eps)
        else:
            want = naive_rmsnorm(
                x @ attn.compressor.wkv.weight.detach().T, attn.compressor.norm.weight.detach(), lab_cfg.norm_eps
            )
        torch.testing.assert_close(latent, want, rtol=0, atol=1e-11)
        rot = naive_rope(latent, gpos.tolist(), attn.inv_freq, lab_cfg.rope_head_dim)
        torch.testing.assert_close(tr.get("6A", "compressed_raw", layer), rot, rtol=0, atol=1e-12)
        torch.testing.assert_close(tr.get("6A", "compressed_kv", layer), fp4_qdq(rot, 16, "e4m3"), rtol=0, atol=1e-12)
        ix = attn.indexer
        k = naive_rmsnorm(latent @ ix.wk.weight.detach().T, ix.k_norm.weight.detach(), lab_cfg.norm_eps)
        k = fp4_qdq(naive_rope(k, gpos.tolist(), attn.inv_freq, lab_cfg.rope_head_dim), 32, "e8m0")
        torch.testing.assert_close(tr.get("6A", "index_k", layer), k, rtol=0, atol=1e-12)


# ---- 3C: indexer, candidates, window --------------------------------------------------------------
def test_only_kv_sources_own_index_keys(lab_model):
    for i, blk in enumerate(lab_model.layers):
        ix = blk.attn.indexer
        if i in (1, 3, 4):
            assert ix.owns_k and hasattr(ix, "wk") and hasattr(ix, "k_norm")
        elif i == 6:  # the Reindex layer scores against layer 4's keys
            assert ix is not None and not ix.owns_k and not hasattr(ix, "wk")
        else:
            assert ix is None


def test_visibility_scores_are_minus_inf_exactly_beyond(traced_run, lab_cfg):
    tr = traced_run["trace"]
    pos = torch.arange(37)
    for layer, ratio in ((1, 2), (3, 2), (4, 1)):
        scores = tr.get("3C", "scores", layer)
        T = 37 // ratio
        assert scores.shape == (2, 37, T)
        vis = tr.get("3C", "visible", layer)
        assert vis.tolist() == [(p + 1) // ratio for p in range(37)]
        assert torch.equal(visible_counts(pos, ratio), vis)
        seen = torch.arange(T)[None, :] < vis[:, None]
        assert torch.isfinite(scores[:, seen]).all()
        assert (scores[:, ~seen] == NEG).all()
        idx = tr.get("3C", "topk_idxs", layer)
        assert idx.shape == (2, 37, lab_cfg.index_topk)
        for p in range(37):
            picks = idx[:, p]
            assert (picks < vis[p]).all()
            assert int((picks[0] >= 0).sum()) == min(lab_cfg.index_topk, int(vis[p]))


def _random_indexer(owns_k: bool, kv_quant: bool, seed: int = 0) -> Indexer:
    ix = Indexer(16, 8, 64, 2, 32, 4, owns_k, 1e-20, kv_quant, F64)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for n, p in ix.named_parameters():
            rnd = torch.randn(p.shape, generator=g, dtype=F64) * p.shape[-1] ** -0.5
            p.copy_(torch.ones_like(p) if "norm" in n else rnd)
    return ix


def naive_index_scores(ix: Indexer, x, qr, positions, inv_freq, visible, index_k, rope_dim, quant: bool):
    B, S, _ = x.shape
    T = index_k.size(1)
    q = (qr @ ix.wq_b.weight.detach().T).unflatten(-1, (2, 32))
    q = naive_rope(q, positions, inv_freq, rope_dim)
    if quant:
        q = fp4_qdq(q, 32, "e8m0")
    w = (x @ ix.weights_proj.weight.detach().T) * (32**-0.5) * (2**-0.5)  # Di^−½ · Hi^−½
    out = torch.full((B, S, T), NEG, dtype=F64)
    for b in range(B):
        for s in range(S):
            for t in range(int(visible[s])):
                out[b, s, t] = sum(w[b, s, h] * max(0.0, float(q[b, s, h] @ index_k[b, t])) for h in range(2))
    return out


def naive_topk(scores, k):
    B, S, T = scores.shape
    k = min(k, T)
    out = torch.full((B, S, k), -1, dtype=torch.long)
    for b in range(B):
        for s in range(S):
            order = sorted((t for t in range(T) if scores[b, s, t] > NEG), key=lambda t: (-float(scores[b, s, t]), t))
            picks = sorted(order[:k])
            out[b, s, k - len(picks) :] = torch.tensor(picks, dtype=torch.long)
    return out


@pytest.mark.parametrize("kv_quant", [False, True])
def test_indexer_scores_and_topk_match_naive(kv_quant):
    ix = _random_indexer(True, kv_quant)
    g = torch.Generator().manual_seed(9)
    S, T = 9, 4
    x = torch.randn(2, S, 16, generator=g, dtype=F64)
    qr = torch.randn(2, S, 8, generator=g, dtype=F64)
    index_k = torch.randn(2, T, 32, generator=g, dtype=F64)
    pos = torch.arange(S)
    inv = 1.0 / 10000 ** (torch.arange(0, 8, 2, dtype=F64) / 8)
    angles = pos.to(F64)[:, None] * inv[None, :]
    vis = visible_counts(pos, 2)
    with torch.no_grad():
        idxs, scores, cand = ix(x, qr, angles, vis, index_k)
    assert idxs.shape == (2, S, 4) and scores.shape == (2, S, T) and cand is None
    want = naive_index_scores(ix, x, qr, pos.tolist(), inv, vis, index_k, 8, kv_quant)
    fin = torch.isfinite(want)
    assert torch.equal(fin, torch.isfinite(scores))
    torch.testing.assert_close(scores[fin], want[fin], rtol=0, atol=1e-12)
    assert torch.equal(idxs, naive_topk(scores, 4))
    # a wrong weight scale (no Hi^−½) would change every score by √2
    assert (scores[fin].abs() > 1e-6).any()


def test_model_indexer_scores_match_naive(lab_model, traced_run, lab_cfg):
    tr = traced_run["trace"]
    for layer, key_layer in ((3, 3), (6, 4)):
        attn = lab_model.layers[layer].attn
        x = tr.get("4A", "attn_input", layer)[:1, :12]
        with torch.no_grad():
            qr = attn.q_norm(attn.wq_a(x))
        index_k = tr.get("6A", "index_k", key_layer)[:1]
        vis = tr.get("3C", "visible", layer)[:12]
        want = naive_index_scores(
            attn.indexer, x, qr, list(range(12)), attn.inv_freq, vis, index_k, lab_cfg.rope_head_dim, lab_cfg.kv_quant
        )
        got = tr.get("3C", "scores", layer)[:1, :12]
        if layer == 6:  # the Reindex layer masks to the candidate pool (all of it is visible this early)
            cand = tr.get("3C", "candidates_used", 6)[:1, :12]
            want = want.masked_fill(~cand, NEG)
        fin = torch.isfinite(want)
        assert torch.equal(fin, torch.isfinite(got))
        torch.testing.assert_close(got[fin], want[fin], rtol=0, atol=1e-11)


def test_select_candidate_blocks_matches_naive_and_pins_newest_block():
    T, bs = 10, 2
    vis = torch.tensor([9, 3, 0, 10])
    scores = torch.full((1, 4, T), NEG, dtype=F64)
    # row 0: 9 visible; the newest block (4) holds entry 8 only and has the lowest score
    scores[0, 0, :9] = torch.tensor([5.0, 1.0, 4.0, 0.0, 3.0, 2.0, 6.0, 0.5, -9.0], dtype=F64)
    # row 1: 3 visible; blocks 2.. are all −inf
    scores[0, 1, :3] = torch.tensor([1.0, 2.0, 0.3], dtype=F64)
    # row 3: all visible, newest block 4 complete and the best
    scores[0, 3] = torch.arange(T, dtype=F64)
    for topk_blocks in (1, 2, 4, 8):
        got = select_candidate_blocks(scores, vis, topk_blocks, bs)
        assert got.shape == (1, 4, T) and got.dtype == torch.bool
        assert torch.equal(got, naive_select(scores, vis, topk_blocks, bs)), topk_blocks
    got = select_candidate_blocks(scores, vis, 2, bs)
    # row 0: pinned block 4 (score −9) kept although it is the lowest; plus the best block (3: max 6)
    assert got[0, 0].nonzero().flatten().tolist() == [6, 7, 8, 9]
    # without the pin the best two blocks would be 3 and 0
    assert sorted(scores[0, 0].view(-1, 2).amax(-1).topk(2).indices.tolist()) == [0, 3]
    # row 1: −inf blocks are dropped even when there is room for them
    got4 = select_candidate_blocks(scores, vis, 4, bs)
    assert got4[0, 1].nonzero().flatten().tolist() == [0, 1, 2, 3]
    # row 2: nothing visible, nothing kept
    assert not got4[0, 2].any()


def test_select_candidate_blocks_random_matches_naive():
    g = torch.Generator().manual_seed(11)
    T, S = 13, 13
    vis = visible_counts(torch.arange(S), 1)
    scores = torch.randn(2, S, T, generator=g, dtype=F64)
    scores = scores.masked_fill(torch.arange(T)[None, :] >= vis[:, None], NEG)
    for topk_blocks, bs in ((2, 2), (3, 4), (1, 3), (8, 2)):
        assert torch.equal(
            select_candidate_blocks(scores, vis, topk_blocks, bs), naive_select(scores, vis, topk_blocks, bs)
        )


def test_reindex_picks_inside_candidate_pool(traced_run, lab_cfg):
    tr = traced_run["trace"]
    pool = tr.get("3C", "candidates", 4)
    assert pool.shape == (2, 37, 37)
    assert torch.equal(tr.get("3C", "candidates_used", 6), pool)  # the pool is shared, not recomputed
    vis = tr.get("3C", "visible", 4)
    # the filter bites: late queries see more positions than the pool holds
    cap = lab_cfg.candidate_topk_blocks * lab_cfg.candidate_block_size
    assert int(vis[-1]) == 37 > cap
    # last query: 7 full blocks + the pinned newest block, which holds only entry 36 (37 is odd)
    assert (pool[:, -1].sum(-1) == cap - 1).all() and pool[:, -1, 36].all()
    assert (pool.sum(-1) <= cap).all()
    picks = tr.get("3C", "topk_idxs", 6)
    valid = picks >= 0
    assert valid.any()
    inside = pool.gather(-1, picks.clamp(min=0))
    assert inside[valid].all()
    # the pool is the naive two-level filter of layer 4's scores
    assert torch.equal(
        pool, naive_select(tr.get("3C", "scores", 4), vis, lab_cfg.candidate_topk_blocks, lab_cfg.candidate_block_size)
    )
    # layer 4 itself takes its top-k over all positions: some of its picks fall outside the pool
    own = tr.get("3C", "topk_idxs", 4)
    assert not pool.gather(-1, own.clamp(min=0))[own >= 0].all()


def test_reuse_layers_read_latest_sources(traced_run, lab_cfg):
    """A Reuse layer attends to the latest KV source's entries at the latest index source's picks."""
    tr = traced_run["trace"]
    n_comp = {1: 18, 2: 18, 3: 18, 4: 37, 5: 37, 6: 37, 7: 37}
    topk_of = {1: 1, 2: 1, 3: 3, 4: 4, 5: 4, 6: 6, 7: 6}
    for layer in range(1, 8):
        probs = tr.get("4A", "probs", layer)
        nw = int(tr.get("4A", "n_window_keys", layer))
        assert nw == 37 and probs.shape == (2, 37, lab_cfg.n_heads, 37 + n_comp[layer])
        used = probs[..., nw:] > 0  # [B, S, H, T]
        picks = tr.get("3C", "topk_idxs", topk_of[layer])
        want = torch.zeros(2, 37, n_comp[layer] + 1, dtype=torch.bool)
        want.scatter_(-1, torch.where(picks >= 0, picks, n_comp[layer]), True)
        assert torch.equal(
            used,
            want[
                ...,
                :-1,
            ]
            .unsqueeze(2)
            .expand_as(used),
        ), layer
    assert tr.get("4A", "probs", 0).shape == (2, 37, lab_cfg.n_heads, 37)  # ratio 0: window only


def test_stable_topk_ties_older_first():
    s = torch.tensor([[1.0, 3.0, 3.0, NEG, 3.0, 0.0]])
    v, i = stable_topk(s, 3)
    assert i.tolist() == [[1, 2, 4]] and v.tolist() == [[3.0, 3.0, 3.0]]


def test_window_mask_matches_naive_loop():
    W = 4
    qpos = torch.tensor([5, 6, 7, 8, 9])
    kpos = torch.tensor([4, 5, 6, 7, -1, 0, 1, 2, 3, 8, 9, 5])  # ring slots, −1 empty, this chunk's rows
    got = window_mask(qpos, kpos, W)
    assert got.shape == (5, 12)
    for a, q in enumerate(qpos.tolist()):
        for b, k in enumerate(kpos.tolist()):
            assert bool(got[a, b]) == (k != -1 and q - W < k <= q), (q, k)


def test_model_window_positions(traced_run, lab_cfg):
    """Every layer attends to at most W window keys per query, the query itself included."""
    tr = traced_run["trace"]
    for layer in (0, 5):
        probs = tr.get("4A", "probs", layer)[..., :37]
        used = probs > 0
        for p in range(37):
            cols = used[0, p, 0].nonzero().flatten().tolist()
            assert cols == list(range(max(0, p - lab_cfg.window_size + 1), p + 1))

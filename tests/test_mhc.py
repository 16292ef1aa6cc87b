"""Step 2A · mHC: Sinkhorn comb, the coefficient predictor, collapse/expand and single-pass timing.

Every check compares against a naive re-implementation written from the reference's formulas, element by element,
or against an invariant (doubly stochastic, one-hot first mix, no learned head mix).
"""

from __future__ import annotations

import math

import pytest
import torch
from conftest import make_tokens

from dspark_mini import Trace, build_model, get_config
from dspark_mini.mhc import HyperConnection, hc_post, hc_pre, identity_pre_mix, sinkhorn_comb

F64 = torch.float64


# ---- naive references ---------------------------------------------------------------------------
def naive_sinkhorn(logits: torch.Tensor, iters: int, eps: float) -> torch.Tensor:
    """One [n, n] matrix, scalar loops: row softmax + eps, column normalize, then (iters−1)× row, column."""
    n = logits.shape[0]
    M = [[0.0] * n for _ in range(n)]
    for i in range(n):
        row = [float(v) for v in logits[i]]
        mx = max(row)
        e = [math.exp(v - mx) for v in row]
        z = sum(e)
        for j in range(n):
            M[i][j] = e[j] / z + eps

    def cols():
        for j in range(n):
            c = sum(M[i][j] for i in range(n)) + eps
            for i in range(n):
                M[i][j] /= c

    def rows():
        for i in range(n):
            r = sum(M[i]) + eps
            for j in range(n):
                M[i][j] /= r

    cols()
    for _ in range(iters - 1):
        rows()
        cols()
    return torch.tensor(M, dtype=F64)


def naive_rmsnorm(v: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    return weight * v / torch.sqrt((v * v).mean(-1, keepdim=True) + eps)


def naive_mixes(x: torch.Tensor, hc: HyperConnection):
    """x [B, S, hc, D] → pre, post, comb computed token by token from the reference's formulas."""
    B, S, n, D = x.shape
    fn, base, scale = hc.fn.detach(), hc.base.detach(), hc.scale.detach()
    pre = torch.empty(B, S, n, dtype=F64)
    post = torch.empty(B, S, n, dtype=F64)
    comb = torch.empty(B, S, n, n, dtype=F64)
    for b in range(B):
        for s in range(S):
            v = x[b, s].reshape(-1).to(F64)  # copy-major flatten: [x_0 ‖ x_1 ‖ x_2 ‖ x_3]
            r = 1.0 / math.sqrt(float((v * v).mean()) + hc.norm_eps)
            m = (fn @ v) * r  # [24]
            for j in range(n):
                pre[b, s, j] = 1.0 / (1.0 + math.exp(-(float(m[j]) * float(scale[0]) + float(base[j])))) + hc.hc_eps
                post[b, s, j] = 2.0 / (1.0 + math.exp(-(float(m[n + j]) * float(scale[1]) + float(base[n + j]))))
            logits = (m[2 * n :] * scale[2] + base[2 * n :]).reshape(n, n)
            comb[b, s] = naive_sinkhorn(logits, hc.iters, hc.hc_eps)
    return pre, post, comb


def naive_hc_post(y, residual, post, comb):
    """new copy j = post_j · y + Σ_i comb[i, j] · R_i, with explicit loops over copies."""
    B, S, n, D = residual.shape
    out = torch.zeros(B, S, n, D, dtype=F64)
    for j in range(n):
        acc = post[..., j, None] * y
        for i in range(n):
            acc = acc + comb[..., i, j, None] * residual[:, :, i]
        out[:, :, j] = acc
    return out


def naive_hc_pre(x, pre):
    return sum(pre[..., i, None] * x[:, :, i] for i in range(x.shape[2]))


def random_hc(seed: int = 0, dim: int = 8, hc: int = 4) -> HyperConnection:
    g = torch.Generator().manual_seed(seed)
    m = HyperConnection(dim, hc, 20, 1e-6, 1e-20, F64)
    with torch.no_grad():
        m.fn.copy_(torch.randn(m.fn.shape, generator=g, dtype=F64) * (hc * dim) ** -0.5)
        m.base.copy_(torch.randn(m.base.shape, generator=g, dtype=F64) * 0.5)
        m.scale.copy_(torch.tensor([0.7, 1.3, 0.9], dtype=F64))
    return m


# ---- Sinkhorn -----------------------------------------------------------------------------------
def test_sinkhorn_20_iterations_is_doubly_stochastic():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(256, 4, 4, generator=g, dtype=F64)  # typical scale (std 1)
    hist = []
    comb = sinkhorn_comb(logits, 20, 1e-6, hist)
    assert comb.shape == (256, 4, 4)
    assert len(hist) == 20 and all(h.shape == (256, 4, 4) for h in hist)
    assert torch.equal(hist[-1], comb)
    assert (comb > 0).all()
    assert (comb.sum(-1) - 1).abs().max() < 1e-3  # rows
    assert (comb.sum(-2) - 1).abs().max() < 1e-3  # columns


def test_sinkhorn_first_iteration_far_from_doubly_stochastic_for_large_logits():
    g = torch.Generator().manual_seed(1)
    logits = torch.randn(64, 4, 4, generator=g, dtype=F64) * 8
    hist = []
    comb = sinkhorn_comb(logits, 20, 1e-6, hist)
    first = hist[0]
    # iteration 1 ends with a column pass: columns are (mostly) fine, rows are far off
    col_err, row_err = (first.sum(-2) - 1).abs(), (first.sum(-1) - 1).abs()
    assert col_err.median() < 1e-5
    assert row_err.max() > 0.5 and row_err.median() > 0.1
    # later iterations move the rows toward 1
    assert (comb.sum(-1) - 1).abs().max() < (first.sum(-1) - 1).abs().max() / 5


def test_sinkhorn_inference_path_equals_the_autograd_path():
    """Without autograd the matrix sits in an [hc+1, hc+1] buffer with an eps column and row, and each sum + eps
    is a plain matmul; with autograd each sum + eps is a baddbmm. Same numbers, bit for bit, history included."""
    g = torch.Generator().manual_seed(5)
    for shape in ((1, 1, 4, 4), (2, 6, 4, 4), (37, 4, 4), (3, 3, 3)):
        logits = torch.randn(shape, generator=g, dtype=F64) * 3
        h_inf, h_grad = [], []
        with torch.no_grad():
            fast = sinkhorn_comb(logits, 20, 1e-6, h_inf)
        slow = sinkhorn_comb(logits.clone().requires_grad_(True), 20, 1e-6, h_grad)
        assert fast.shape == slow.shape == shape
        assert torch.equal(fast, slow.detach()), shape
        assert len(h_inf) == len(h_grad) == 20 and all(torch.equal(a, b) for a, b in zip(h_inf, h_grad, strict=True))
        assert len({h.data_ptr() for h in h_inf}) == 20  # copies, not views of the live buffer


@pytest.mark.parametrize("scale", [0.5, 3.0])
def test_sinkhorn_step_order_matches_naive_loop(scale):
    g = torch.Generator().manual_seed(2)
    logits = torch.randn(6, 4, 4, generator=g, dtype=F64) * scale
    for iters in (1, 2, 20):
        hist = []
        got = sinkhorn_comb(logits, iters, 1e-6, hist)
        for k in range(6):
            want = naive_sinkhorn(logits[k], iters, 1e-6)
            torch.testing.assert_close(got[k], want, rtol=0, atol=1e-14)
        # the history holds the matrix after every iteration
        for it, h in enumerate(hist, start=1):
            torch.testing.assert_close(h[0], naive_sinkhorn(logits[0], it, 1e-6), rtol=0, atol=1e-14)


def test_sinkhorn_differs_from_column_first_order():
    """Guard: a column-softmax-first order (a transposed reading) gives a different matrix."""
    g = torch.Generator().manual_seed(3)
    logits = torch.randn(4, 4, generator=g, dtype=F64) * 3
    got = sinkhorn_comb(logits, 3, 1e-6)
    transposed_order = naive_sinkhorn(logits.T, 3, 1e-6).T
    assert (got - transposed_order).abs().max() > 1e-3


# ---- coefficient predictor, collapse and expand --------------------------------------------------
def test_hyperconnection_matches_naive():
    hc = random_hc(0)
    g = torch.Generator().manual_seed(5)
    x = torch.randn(2, 3, 4, 8, generator=g, dtype=F64) * 2
    hist = []
    with torch.no_grad():
        pre, post, comb = hc(x, hist)
    assert pre.shape == (2, 3, 4) and post.shape == (2, 3, 4) and comb.shape == (2, 3, 4, 4)
    assert len(hist) == 20
    n_pre, n_post, n_comb = naive_mixes(x, hc)
    torch.testing.assert_close(pre, n_pre, rtol=0, atol=1e-13)
    torch.testing.assert_close(post, n_post, rtol=0, atol=1e-13)
    torch.testing.assert_close(comb, n_comb, rtol=0, atol=1e-13)
    # pre is sigmoid + eps, not a softmax: it does not sum to 1 and every entry is in (eps, 1 + eps)
    assert ((pre.sum(-1) - 1).abs() > 1e-2).any()
    assert ((pre > 1e-6) & (pre < 1 + 1e-6)).all()
    # post = 2·sigmoid: in (0, 2), and some entries above 1 (a softmax or plain sigmoid could not)
    assert ((post > 0) & (post < 2)).all() and (post > 1).any()


def test_hyperconnection_rms_is_over_all_copies_and_scale_then_base():
    """Scaling the whole stream leaves the mixes unchanged (one RMS over hc·D values, no weight);
    scale multiplies the projection before base is added (changing base shifts, not scales)."""
    hc = random_hc(1)
    g = torch.Generator().manual_seed(6)
    x = torch.randn(1, 2, 4, 8, generator=g, dtype=F64)
    with torch.no_grad():
        a = hc(x)
        b = hc(x * 37.0)
        for u, v in zip(a, b, strict=True):
            torch.testing.assert_close(u, v, rtol=0, atol=1e-12)
        # scaling one copy only changes the mixes (the RMS is not per copy)
        x2 = x.clone()
        x2[:, :, 1] *= 5
        assert (hc(x2)[0] - a[0]).abs().max() > 1e-4
        # with fn = 0 the mixes are sigmoid(base) regardless of scale: base is added after scaling
        hc.fn.zero_()
        pre, post, _ = hc(x)
        torch.testing.assert_close(pre[0, 0], torch.sigmoid(hc.base[:4]) + 1e-6, rtol=0, atol=1e-15)
        torch.testing.assert_close(post[0, 0], 2 * torch.sigmoid(hc.base[4:8]), rtol=0, atol=1e-15)


def test_hc_pre_is_weighted_sum_of_copies():
    g = torch.Generator().manual_seed(7)
    x = torch.randn(2, 3, 4, 5, generator=g, dtype=F64)
    pre = torch.rand(2, 3, 4, generator=g, dtype=F64)
    y = hc_pre(x, pre)
    assert y.shape == (2, 3, 5)
    torch.testing.assert_close(y, naive_hc_pre(x, pre), rtol=0, atol=1e-14)
    one_hot = identity_pre_mix(2, 3, 4, F64, "cpu")
    assert one_hot.shape == (2, 3, 4)
    assert torch.equal(one_hot, torch.tensor([1.0, 0, 0, 0], dtype=F64).expand(2, 3, 4))
    assert torch.equal(hc_pre(x, one_hot), x[:, :, 0])


def test_hc_post_orientation_from_i_to_j():
    g = torch.Generator().manual_seed(8)
    R = torch.randn(1, 2, 4, 6, generator=g, dtype=F64)
    y = torch.randn(1, 2, 6, generator=g, dtype=F64)
    post = 2 * torch.rand(1, 2, 4, generator=g, dtype=F64)
    comb = torch.rand(1, 2, 4, 4, generator=g, dtype=F64)
    assert (comb - comb.transpose(-1, -2)).abs().max() > 0.1  # not symmetric
    out = hc_post(y, R, post, comb)
    assert out.shape == (1, 2, 4, 6)
    torch.testing.assert_close(out, naive_hc_post(y, R, post, comb), rtol=0, atol=1e-14)
    # a transposed comb (to-j → from-i) is a different function
    wrong = naive_hc_post(y, R, post, comb.transpose(-1, -2))
    assert (out - wrong).abs().max() > 1e-2
    # a permutation comb routes copy i to copy j exactly: comb[0, 2] = 1 sends R_0 to new copy 2
    perm = torch.zeros(1, 2, 4, 4, dtype=F64)
    for i, j in ((0, 2), (1, 0), (2, 3), (3, 1)):
        perm[..., i, j] = 1.0
    moved = hc_post(torch.zeros_like(y), R, post, perm)
    assert torch.equal(moved[:, :, 2], R[:, :, 0]) and torch.equal(moved[:, :, 0], R[:, :, 1])


# ---- inside the lab model -----------------------------------------------------------------------
@pytest.mark.parametrize("layer", [0, 3, 6])
def test_model_mixes_match_naive(lab_model, traced_run, layer):
    tr, x = traced_run["trace"], traced_run["block_in"][layer]
    blk = lab_model.layers[layer]
    xs = x[:1, :4]  # a few tokens (the naive loop is slow)
    n_pre, n_post, n_comb = naive_mixes(xs, blk.hc_attn)
    torch.testing.assert_close(tr.get("2A", "attn_pre", layer)[:1, :4], n_pre, rtol=0, atol=1e-12)
    torch.testing.assert_close(tr.get("2A", "attn_post", layer)[:1, :4], n_post, rtol=0, atol=1e-12)
    torch.testing.assert_close(tr.get("2A", "attn_comb", layer)[:1, :4], n_comb, rtol=0, atol=1e-12)
    hist = tr.get("2A", "attn_comb_history", layer)
    assert hist.shape == (20, 2, 37, 4, 4)
    assert torch.equal(hist[-1], tr.get("2A", "attn_comb", layer))


def test_model_combs_are_near_doubly_stochastic(traced_run, lab_cfg):
    tr = traced_run["trace"]
    for layer in range(lab_cfg.n_layers):
        for name in ("attn_comb", "ffn_comb"):
            c = tr.get("2A", name, layer)
            assert c.shape == (2, 37, 4, 4)
            assert (c.sum(-2) - 1).abs().max() < 1e-5  # the last pass normalizes columns
            assert (c.sum(-1) - 1).abs().max() < 1e-2  # rows: approximately (20 iterations)


def test_layer0_attention_input_is_rmsnorm_of_embedding():
    """Identity pre-mix: with no Engram before block 0, layer 0 reads RMSNorm(embedding) exactly."""
    cfg = get_config("lab", engram_layer_ids=(3,))
    m = build_model(cfg, seed=0)
    tokens = make_tokens(cfg, 2, 9, seed=4)
    tr = Trace()
    with torch.no_grad():
        m(tokens, trace=tr)
        emb = tr.get("1A", "embedding")
        assert emb.shape == (2, 9, cfg.dim)
        torch.testing.assert_close(emb, m.embed.weight[tokens], rtol=0, atol=0)
        want = m.layers[0].attn_norm(emb)
    u = tr.get("4A", "attn_input", 0)
    assert u.shape == (2, 9, cfg.dim)
    assert (u - want).abs().max() <= 1e-14
    torch.testing.assert_close(
        u, naive_rmsnorm(emb, m.layers[0].attn_norm.weight.detach(), cfg.norm_eps), rtol=0, atol=1e-12
    )
    assert torch.equal(tr.get("2A", "pre_in", 0), identity_pre_mix(2, 9, 4, F64, "cpu"))


def test_layer0_attention_input_with_engram_reads_copy0_after_engram(lab_model, traced_run):
    """In the lab config Engram sits before block 0: layer 0 reads RMSNorm of copy 0 of the
    post-Engram stream (still one-hot on copy 0)."""
    tr, x = traced_run["trace"], traced_run["block_in"][0]
    u = tr.get("4A", "attn_input", 0)
    with torch.no_grad():
        want = lab_model.layers[0].attn_norm(x[:, :, 0])
        plain = lab_model.layers[0].attn_norm(tr.get("1A", "embedding"))
    assert (u - want).abs().max() <= 1e-14
    assert (u - plain).abs().max() > 1e-3  # Engram did change the stream


def test_single_pass_timing_attention_input(lab_model, traced_run, lab_cfg):
    """Block ℓ's attention input is collapsed with block ℓ−1's FFN pre (not its own attn pre)."""
    tr = traced_run["trace"]
    for layer in range(lab_cfg.n_layers):
        pre_in = tr.get("2A", "pre_in", layer)
        if layer == 0:
            assert torch.equal(pre_in, identity_pre_mix(2, 37, 4, F64, "cpu"))
        else:
            assert torch.equal(pre_in, tr.get("2A", "ffn_pre", layer - 1))
        blk, x = lab_model.layers[layer], traced_run["block_in"][layer]
        w = blk.attn_norm.weight.detach()
        want = naive_rmsnorm(naive_hc_pre(x, pre_in), w, lab_cfg.norm_eps)
        torch.testing.assert_close(tr.get("4A", "attn_input", layer), want, rtol=0, atol=1e-12)
        if layer > 0:  # V4 timing (own attn pre) is a different input
            v4 = naive_rmsnorm(naive_hc_pre(x, tr.get("2A", "attn_pre", layer)), w, lab_cfg.norm_eps)
            assert (tr.get("4A", "attn_input", layer) - v4).abs().max() > 1e-3


def test_single_pass_timing_ffn_input_and_block_output(lab_model, traced_run, lab_cfg):
    """FFN input = ffn_norm(hc_pre(X_after_attn, attn_pre)); block output = hc_post(moe, X_after_attn)."""
    tr = traced_run["trace"]
    for layer in range(lab_cfg.n_layers):
        blk, x = lab_model.layers[layer], traced_run["block_in"][layer]
        get = lambda name, layer=layer: tr.get("2A", name, layer)  # noqa: E731
        x_attn = naive_hc_post(traced_run["attn_out"][layer], x, get("attn_post"), get("attn_comb"))
        w = blk.ffn_norm.weight.detach()
        want = naive_rmsnorm(naive_hc_pre(x_attn, get("attn_pre")), w, lab_cfg.norm_eps)
        v = tr.get("5A", "ffn_input", layer)
        assert v.shape == (2, 37, lab_cfg.dim)
        torch.testing.assert_close(v, want, rtol=0, atol=1e-11)
        v4 = naive_rmsnorm(naive_hc_pre(x_attn, get("ffn_pre")), w, lab_cfg.norm_eps)
        assert (v - v4).abs().max() > 1e-3
        out = naive_hc_post(traced_run["ffn_out"][layer], x_attn, get("ffn_post"), get("ffn_comb"))
        torch.testing.assert_close(traced_run["block_out"][layer], out, rtol=0, atol=1e-11)


def test_head_uses_last_ffn_pre_and_has_no_learned_mix(lab_model, traced_run, lab_cfg):
    tr = traced_run["trace"]
    last = lab_cfg.n_layers - 1
    hidden = tr.get("head", "hidden")
    want = naive_hc_pre(traced_run["block_out"][last], tr.get("2A", "ffn_pre", last))
    torch.testing.assert_close(hidden, want, rtol=0, atol=1e-12)
    torch.testing.assert_close(traced_run["out"].hidden, hidden, rtol=0, atol=0)
    names = [n for n, _ in lab_model.named_parameters()]
    assert not any("hc_head" in n for n in names)
    # outside the blocks (and the DSpark draft, `mtp.*`), only the embedding, final norm and head
    top = sorted(n for n in names if not n.startswith(("layers.", "mtp.")))
    assert top == ["embed.weight", "head.weight", "norm.weight"]
    # each block has exactly two coefficient predictors (attention and FFN), 3 tensors each
    hc_names = [n for n in names if n.startswith("layers.0.hc_")]
    assert sorted(hc_names) == sorted(f"layers.0.hc_{s}.{p}" for s in ("attn", "ffn") for p in ("fn", "base", "scale"))
    assert lab_model.layers[0].hc_attn.fn.shape == (24, 4 * lab_cfg.dim)


def test_trace_without_sinkhorn_history(lab_model, lab_cfg):
    tr = Trace(sinkhorn_history=False)
    with torch.no_grad():
        lab_model(make_tokens(lab_cfg, 1, 3, seed=0), trace=tr)
    assert "attn_comb" in tr.data["2A"][0]  # the final combs are still recorded
    assert "attn_comb_history" not in tr.data["2A"][0]
    assert "ffn_comb_history" not in tr.data["2A"][0]

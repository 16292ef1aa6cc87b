"""Step 5A · MoE: the sqrtsoftplus router with a select-only bias, clamped SwiGLU experts, MXFP4 weights.

Checked against scalar re-implementations written from the reference's formulas and hand-built cases.
"""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from dspark_mini import build_model, get_config
from dspark_mini.moe import Expert, Gate, MoE
from dspark_mini.quant import fp4_qdq, fp8_qdq

F64 = torch.float64


def fill_random(module: torch.nn.Module, seed: int, std: float | None = None) -> torch.nn.Module:
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in module.parameters():
            s = std if std is not None else (p.shape[-1] ** -0.5 if p.dim() == 2 else 0.3)
            p.copy_(torch.randn(p.shape, generator=g, dtype=F64).to(p.dtype) * s)
    return module


# ---- naive references ---------------------------------------------------------------------------
def naive_gate(x: torch.Tensor, W: torch.Tensor, bias: torch.Tensor, k: int, route_scale: float, temp: float):
    """One token x [D]: returns {expert: weight} from scalar formulas."""
    W, bias, x = W.detach(), bias.detach(), x.detach()
    E = W.shape[0]
    a = []
    for e in range(E):
        s = float(sum(float(W[e, d]) * float(x[d]) for d in range(W.shape[1]))) / temp
        a.append(math.sqrt(math.log1p(math.exp(s)) if s < 30 else s + math.log1p(math.exp(-s))))
    order = sorted(range(E), key=lambda e: -(a[e] + float(bias[e])))
    chosen = order[:k]
    w = [a[e] for e in chosen]
    if k > 1:
        z = sum(w) + 1e-20
        w = [v / z for v in w]
    return {e: v * route_scale for e, v in zip(chosen, w, strict=True)}, a


def naive_expert(x: torch.Tensor, w1, w2, w3, limit: float, route_weight: float = 1.0) -> torch.Tensor:
    """x [D] → [D]: gate clamped only from above, up clamped both sides, weight before w2."""
    x, w1, w2, w3 = x.detach(), w1.detach(), w2.detach(), w3.detach()
    g = w1 @ x
    u = w3 @ x
    g = torch.where(g > limit, torch.full_like(g, limit), g)
    u = torch.where(u > limit, torch.full_like(u, limit), torch.where(u < -limit, torch.full_like(u, -limit), u))
    h = g / (1 + torch.exp(-g)) * u
    return w2 @ (route_weight * h)


# ---- router -------------------------------------------------------------------------------------
@pytest.mark.parametrize("k", [1, 2, 3])
def test_gate_matches_naive(k):
    D, E = 16, 8
    gate = fill_random(Gate(D, E, k, 1.5, 0.7, F64, F64), 0)
    with torch.no_grad():
        gate.bias.copy_(torch.randn(E, generator=torch.Generator().manual_seed(9), dtype=F64) * 0.3)
    x = torch.randn(6, D, generator=torch.Generator().manual_seed(1), dtype=F64) * 2
    with torch.no_grad():
        weights, indices, scores = gate(x)
    assert weights.shape == (6, k) and indices.shape == (6, k) and scores.shape == (6, E)
    for n in range(6):
        want, a = naive_gate(x[n], gate.weight, gate.bias, k, 1.5, 0.7)
        torch.testing.assert_close(scores[n], torch.tensor(a, dtype=F64), rtol=0, atol=1e-13)
        got = {int(e): float(w) for e, w in zip(indices[n], weights[n], strict=True)}
        assert set(got) == set(want)
        for e in want:
            assert abs(got[e] - want[e]) < 1e-13
        if k > 1:
            assert abs(sum(got.values()) - 1.5) < 1e-12  # normalized, then × route_scale


def _gate_with_logits(logits: list[float], k: int, bias: list[float]) -> tuple[Gate, torch.Tensor]:
    """A gate whose router logits for x = e_0 are exactly `logits` (W[:, 0] = logits)."""
    E = len(logits)
    gate = Gate(2, E, k, 1.5, 1.0, F64, F64)
    with torch.no_grad():
        gate.weight.zero_()
        gate.weight[:, 0] = torch.tensor(logits, dtype=F64)
        gate.bias.copy_(torch.tensor(bias, dtype=F64))
    return gate, torch.tensor([[1.0, 0.0]], dtype=F64)


def test_bias_selects_but_does_not_weight():
    logits = [3.0, 2.0, 1.0, -1.0]
    a = [math.sqrt(math.log1p(math.exp(s))) for s in logits]
    with torch.no_grad():
        plain, x = _gate_with_logits(logits, 2, [0, 0, 0, 0])
        w0, i0, _ = plain(x)
        biased, _ = _gate_with_logits(logits, 2, [0, 0, 5.0, 0])
        w1, i1, s1 = biased(x)
    assert set(i0[0].tolist()) == {0, 1}
    assert set(i1[0].tolist()) == {0, 2}  # the bias changed WHICH experts are chosen
    torch.testing.assert_close(s1[0], torch.tensor(a, dtype=F64), rtol=0, atol=1e-14)  # scores are unbiased
    got = dict(zip(i1[0].tolist(), w1[0].tolist(), strict=True))
    # weights come from the unbiased scores of the chosen set, not from a + bias
    assert abs(got[0] - 1.5 * a[0] / (a[0] + a[2])) < 1e-14
    assert abs(got[2] - 1.5 * a[2] / (a[0] + a[2])) < 1e-14
    biased_weight = 1.5 * (a[2] + 5) / (a[0] + a[2] + 5)
    assert abs(got[2] - biased_weight) > 0.1
    # expert 0 is chosen in both cases; its weight is a_0 over the chosen unbiased sum in both
    got0 = dict(zip(i0[0].tolist(), w0[0].tolist(), strict=True))
    assert abs(got0[0] - 1.5 * a[0] / (a[0] + a[1])) < 1e-14


def test_bias_with_top1_weight_is_unbiased_score_times_route_scale():
    logits = [3.0, 2.0, 1.0, -1.0]
    a = [math.sqrt(math.log1p(math.exp(s))) for s in logits]
    with torch.no_grad():
        gate, x = _gate_with_logits(logits, 1, [0, 0, 0, 4.0])
        w, i, _ = gate(x)
    assert i.tolist() == [[3]]
    assert abs(float(w) - 1.5 * a[3]) < 1e-14  # k = 1: no normalization, no bias


def test_uniform_bias_changes_nothing():
    D, E = 8, 6
    gate = fill_random(Gate(D, E, 2, 1.5, 1.0, F64, F64), 3)
    x = torch.randn(5, D, generator=torch.Generator().manual_seed(4), dtype=F64)
    with torch.no_grad():
        w0, i0, _ = gate(x)
        gate.bias.add_(7.0)
        w1, i1, _ = gate(x)
    assert torch.equal(i0, i1)
    torch.testing.assert_close(w0, w1, rtol=0, atol=1e-15)


# ---- experts ------------------------------------------------------------------------------------
def _hand_expert(limit: float = 10.0, fp4: bool = False) -> Expert:
    """D = I = 3, w1 = w3 = identity, w2 = identity: gate = up = x."""
    ex = Expert(3, 3, limit, fp4, F64)
    with torch.no_grad():
        for lin in (ex.w1, ex.w2, ex.w3):
            lin.weight.copy_(torch.eye(3, dtype=F64))
    return ex


def test_swiglu_clamp_is_asymmetric():
    ex = _hand_expert(10.0)
    x = torch.tensor([[-20.0, 5.0, 20.0]], dtype=F64)
    with torch.no_grad():
        y = ex(x)
    assert y.shape == (1, 3)
    silu = lambda v: v / (1 + math.exp(-v))  # noqa: E731
    want = [silu(-20.0) * -10.0, silu(5.0) * 5.0, silu(10.0) * 10.0]  # gate: min(g, 10); up: clamp ±10
    torch.testing.assert_close(y[0], torch.tensor(want, dtype=F64), rtol=0, atol=1e-14)
    symmetric = [silu(-10.0) * -10.0, silu(5.0) * 5.0, silu(10.0) * 10.0]
    assert abs(float(y[0, 0]) - symmetric[0]) > 1e-3  # a symmetric gate clamp is a different function
    unclamped = silu(20.0) * 20.0
    assert abs(float(y[0, 2]) - unclamped) > 100


@pytest.mark.parametrize("fp4", [False, True])
def test_expert_matches_naive(fp4):
    D, I = 32, 64
    ex = fill_random(Expert(D, I, 1.5, fp4, F64), 5, std=0.6)  # small limit so both clamps bite
    x = torch.randn(7, D, generator=torch.Generator().manual_seed(6), dtype=F64)
    rw = torch.rand(7, 1, generator=torch.Generator().manual_seed(7), dtype=F64) * 2
    W = {n: getattr(ex, n).weight.detach() for n in ("w1", "w2", "w3")}
    if fp4:
        W = {n: fp4_qdq(w, 32, "e8m0") for n, w in W.items()}
    with torch.no_grad():
        y = ex(x, rw)
        pre = F.linear(x, W["w1"])
    assert (pre > 1.5).any() and (pre < -1.5).any()  # the clamps are active in this case
    assert y.shape == (7, D)
    for n in range(7):
        want = naive_expert(x[n], W["w1"], W["w2"], W["w3"], 1.5, float(rw[n]))
        torch.testing.assert_close(y[n], want, rtol=0, atol=1e-12)


def test_route_weight_multiplies_before_w2():
    """Linear in the weight; in bfloat16 the order of the multiply is visible bit for bit."""
    D, I = 32, 32
    ex = fill_random(Expert(D, I, 10.0, False, F64), 8)
    x = torch.randn(4, D, generator=torch.Generator().manual_seed(1), dtype=F64)
    rw = torch.tensor([[0.3], [1.7], [0.0], [2.5]], dtype=F64)
    with torch.no_grad():
        torch.testing.assert_close(ex(x, rw), rw * ex(x), rtol=0, atol=1e-13)
        assert torch.equal(ex(x, torch.zeros(4, 1, dtype=F64)), torch.zeros(4, D, dtype=F64))
    bf = Expert(D, I, 10.0, False, torch.bfloat16)
    with torch.no_grad():
        for n in ("w1", "w2", "w3"):
            getattr(bf, n).weight.copy_(getattr(ex, n).weight.to(torch.bfloat16))
        xb, rwb = x.to(torch.bfloat16), torch.tensor([[0.3], [1.7], [0.9], [2.5]])
        h = F.silu(F.linear(xb, bf.w1.weight).clamp(max=10.0)) * F.linear(xb, bf.w3.weight).clamp(-10, 10)
        before = F.linear(rwb.to(torch.bfloat16) * h, bf.w2.weight)
        after = rwb.to(torch.bfloat16) * F.linear(h, bf.w2.weight)
        got = bf(xb, rwb)
    assert torch.equal(got, before)
    assert not torch.equal(before, after)  # the two orders round differently in bfloat16


def test_expert_quant_uses_mxfp4_qdq_and_follows_edits():
    ex = fill_random(Expert(32, 32, 10.0, True, F64), 10)
    with torch.no_grad():
        for n in ("w1", "w2", "w3"):
            w = getattr(ex, n).weight
            q = ex.weight(n)
            assert q.shape == w.shape
            assert torch.equal(q, fp4_qdq(w, 32, "e8m0"))
            assert not torch.equal(q, w)
        first = ex.weight("w1")
        ex.w1.weight.mul_(3.0).add_(0.25)  # modified in place
        fresh = ex.weight("w1")
        assert torch.equal(fresh, fp4_qdq(ex.w1.weight, 32, "e8m0"))
        assert not torch.equal(fresh, first)
        ex.load_state_dict({k: v * -1 for k, v in ex.state_dict().items()})
        assert torch.equal(ex.weight("w2"), fp4_qdq(ex.w2.weight, 32, "e8m0"))
    # with autograd the QDQ value is the same (straight-through), recomputed each call
    x = torch.randn(3, 32, generator=torch.Generator().manual_seed(2), dtype=F64)
    y_grad = ex(x)
    y_grad.sum().backward()
    assert ex.w1.weight.grad is not None and ex.w1.weight.grad.abs().sum() > 0
    with torch.no_grad():
        torch.testing.assert_close(y_grad.detach(), ex(x), rtol=0, atol=1e-14)


def test_expert_quant_cache_refreshes_after_data_edit():
    ex = fill_random(Expert(32, 32, 10.0, True, F64), 11)
    x = torch.randn(3, 32, generator=torch.Generator().manual_seed(3), dtype=F64)
    with torch.no_grad():
        ex(x)  # a first forward (this used to fill a version-keyed QDQ cache)
        ex.w2.weight.data.zero_()  # the common "ablate this expert" idiom
        assert torch.equal(ex(x), torch.zeros(3, 32, dtype=F64))
        ex.w1.weight.data = torch.randn(32, 32, dtype=F64)
        assert torch.equal(ex.weight("w1"), fp4_qdq(ex.w1.weight, 32, "e8m0"))


# ---- the MoE layer ------------------------------------------------------------------------------
@pytest.mark.parametrize("fp4", [False, True])
@pytest.mark.parametrize("dense", [True, False])
@pytest.mark.parametrize(("B", "S", "k"), [(2, 5, 2), (1, 1, 2), (1, 3, 2), (2, 4, 3), (1, 2, 3)])
def test_moe_matches_naive_per_token_loop(fp4, dense, B, S, k):
    """Every way of batching the routed experts: few experts all run on every token, unchosen ones weighted 0
    (`dense`, the lab's 6 + 1 here); otherwise few (token, expert) pairs gather their experts' weights
    (N·k ≤ 2E), many are grouped by expert into a padded batch."""
    D, I, E = 32, 32, 6
    moe = fill_random(MoE(D, I, E, k, 1, 1.5, 1.0, 2.0, fp4, F64, F64), 12, std=0.4)
    assert moe.dense  # 7 stacked experts ≤ 3 × (k + 1) used
    moe.dense = dense
    assert moe.shared_experts is not None and moe.shared_experts.fp4 is False  # shared expert is not MXFP4
    x = torch.randn(B, S, D, generator=torch.Generator().manual_seed(13), dtype=F64)
    with torch.no_grad():
        y, info = moe(x)
    assert y.shape == (B, S, D)
    assert info["scores"].shape == (B, S, E) and info["indices"].shape == (B, S, k)
    assert info["weights"].shape == (B, S, k) and info["load"].shape == (E,)
    q = (lambda w: fp4_qdq(w, 32, "e8m0")) if fp4 else (lambda w: w)
    flat = x.reshape(-1, D)
    for n in range(flat.size(0)):
        chosen, _ = naive_gate(flat[n], moe.gate.weight, moe.gate.bias, k, 1.5, 1.0)
        want = torch.zeros(D, dtype=F64)
        for e, w in chosen.items():
            ex = moe.experts[e]
            want = want + naive_expert(flat[n], q(ex.w1.weight), q(ex.w2.weight), q(ex.w3.weight), 2.0, w)
        sh = moe.shared_experts
        want = want + naive_expert(flat[n], sh.w1.weight, sh.w2.weight, sh.w3.weight, 2.0)
        torch.testing.assert_close(y.reshape(-1, D)[n], want, rtol=0, atol=1e-12)
    assert int(info["load"].sum()) == B * S * k
    assert torch.equal(info["load"], torch.bincount(info["indices"].flatten(), minlength=E))


def test_dense_routing_only_for_few_experts():
    """Running every expert is the lab's choice (8 + 1 experts, top-2 + shared: 3× the used ones' arithmetic);
    the real 384 experts never run densely, and without a shared expert the rule counts the routed ones only."""
    assert MoE(8, 8, 8, 2, 1, 1.5, 1.0, 10.0, False, F64, F64).dense  # 9 ≤ 3 · 3
    assert MoE(8, 8, 4, 1, 1, 1.5, 1.0, 10.0, False, F64, F64).dense  # the lab's draft layers: 5 ≤ 3 · 2
    assert not MoE(8, 8, 384, 6, 1, 1.5, 1.0, 10.0, False, F64, F64).dense  # the real model: 385 > 3 · 7
    assert not MoE(8, 8, 8, 2, 0, 1.5, 1.0, 10.0, False, F64, F64).dense  # 8 > 3 · 2


def test_model_router_matches_naive_and_load_sums(lab_model, traced_run, lab_cfg):
    tr = traced_run["trace"]
    N, k, E = 2 * 37, lab_cfg.n_activated_experts, lab_cfg.n_routed_experts
    for layer in range(lab_cfg.n_layers):
        load = tr.get("5A", "load", layer)
        idx, w = tr.get("5A", "indices", layer), tr.get("5A", "weights", layer)
        assert tr.get("5A", "scores", layer).shape == (2, 37, E)
        assert idx.shape == (2, 37, k) and w.shape == (2, 37, k)
        assert int(load.sum()) == N * k
        assert torch.equal(load, torch.bincount(idx.flatten(), minlength=E))
        torch.testing.assert_close(w.sum(-1), torch.full((2, 37), lab_cfg.route_scale, dtype=F64), rtol=0, atol=1e-12)
    # the router sees the traced FFN input (one layer, a few tokens, scalar loop)
    gate, v = lab_model.layers[2].ffn.gate, tr.get("5A", "ffn_input", 2)
    for s in range(0, 37, 9):
        want, _ = naive_gate(v[0, s], gate.weight, gate.bias, k, lab_cfg.route_scale, lab_cfg.gate_temp)
        idx, wts = tr.get("5A", "indices", 2)[0, s].tolist(), tr.get("5A", "weights", 2)[0, s].tolist()
        got = dict(zip(idx, wts, strict=True))
        assert set(got) == set(want) and all(abs(got[e] - want[e]) < 1e-12 for e in want)


# ---- FP8 expert inputs (expert_act_quant) ----------------------------------------------------------------
def act(v: torch.Tensor) -> torch.Tensor:
    """A vector [n] as the reference's expert GEMM reads it: FP8 per 32 (`fp8_qdq`, checked against a naive
    per-block loop in test_quant)."""
    return fp8_qdq(v[None], 32)[0]


def naive_expert_act(x: torch.Tensor, w1, w2, w3, limit: float, route_weight: float = 1.0) -> torch.Tensor:
    """naive_expert with the reference's input QDQ: x before w1/w3, the weighted h before w2."""
    x, w1, w2, w3 = act(x.detach()), w1.detach(), w2.detach(), w3.detach()
    g = torch.where(w1 @ x > limit, torch.full_like(x[:1], limit), w1 @ x)
    u = (w3 @ x).clamp(-limit, limit)
    h = g / (1 + torch.exp(-g)) * u
    return w2 @ act(route_weight * h)


@pytest.mark.parametrize("fp4", [False, True])
def test_expert_act_quant_matches_naive(fp4):
    D, I = 32, 64
    ex = fill_random(Expert(D, I, 1.5, fp4, F64, act_fp8=True), 5, std=0.6)
    x = torch.randn(7, D, generator=torch.Generator().manual_seed(6), dtype=F64)
    rw = torch.rand(7, 1, generator=torch.Generator().manual_seed(7), dtype=F64) * 2
    W = {n: getattr(ex, n).weight.detach() for n in ("w1", "w2", "w3")}
    if fp4:
        W = {n: fp4_qdq(w, 32, "e8m0") for n, w in W.items()}
    with torch.no_grad():
        y = ex(x, rw)
        plain = Expert(D, I, 1.5, fp4, F64)
        plain.load_state_dict(ex.state_dict())
        assert float((y - plain(x, rw)).abs().max()) > 1e-4  # the inputs really are quantized
    for n in range(7):
        want = naive_expert_act(x[n], W["w1"], W["w2"], W["w3"], 1.5, float(rw[n]))
        torch.testing.assert_close(y[n], want, rtol=0, atol=1e-12)


@pytest.mark.parametrize("fp4", [False, True])
@pytest.mark.parametrize("path", ["dense", "gather", "sorted", "shared apart"])
def test_moe_act_quant_matches_naive_per_expert_loop(fp4, path):
    """Every expert code path with FP8 inputs equals a loop over each token's experts with the input QDQ:
    dense (every expert on every token), gather (few pairs), sorted (many pairs, grouped by expert), and two shared
    experts (one wider Expert outside the stack)."""
    D, I, E, k = 32, 32, 6, 2
    n_shared = 2 if path == "shared apart" else 1
    moe = fill_random(MoE(D, I, E, k, n_shared, 1.5, 1.0, 2.0, fp4, F64, F64, act_fp8=True), 12, std=0.4)
    moe.dense = path == "dense"
    S = 1 if path == "gather" else 5
    assert path != "gather" or 2 * S * k <= 2 * E  # few (token, expert) pairs: the gather path
    x = torch.randn(2, S, D, generator=torch.Generator().manual_seed(13), dtype=F64) * 2
    with torch.no_grad():
        y, info = moe(x)
    q = (lambda w: fp4_qdq(w, 32, "e8m0")) if fp4 else (lambda w: w)
    flat = x.reshape(-1, D)
    for n in range(flat.size(0)):
        chosen, _ = naive_gate(flat[n], moe.gate.weight, moe.gate.bias, k, 1.5, 1.0)  # the router reads x itself
        assert set(chosen) == set(info["indices"].reshape(-1, k)[n].tolist())
        want = torch.zeros(D, dtype=F64)
        for e, w in chosen.items():
            ex = moe.experts[e]
            want = want + naive_expert_act(flat[n], q(ex.w1.weight), q(ex.w2.weight), q(ex.w3.weight), 2.0, w)
        sh = moe.shared_experts
        want = want + naive_expert_act(flat[n], sh.w1.weight, sh.w2.weight, sh.w3.weight, 2.0)
        torch.testing.assert_close(y.reshape(-1, D)[n], want, rtol=0, atol=1e-12)


def test_act_quant_moves_the_output_not_the_routing():
    D, I, E, k = 32, 32, 6, 2
    on = fill_random(MoE(D, I, E, k, 1, 1.5, 1.0, 2.0, True, F64, F64, act_fp8=True), 14, std=0.4)
    off = MoE(D, I, E, k, 1, 1.5, 1.0, 2.0, True, F64, F64)
    off.load_state_dict(on.state_dict())
    x = torch.randn(2, 5, D, generator=torch.Generator().manual_seed(15), dtype=F64)
    with torch.no_grad():
        (y_on, i_on), (y_off, i_off) = on(x), off(x)
    assert torch.equal(i_on["indices"], i_off["indices"])  # the router reads x, never the QDQ'd input
    # (off, the dense path fuses the router into the experts' matmul: the same weights up to the last bit)
    torch.testing.assert_close(i_on["weights"], i_off["weights"], rtol=0, atol=1e-14)
    rel = float((y_on - y_off).abs().max() / y_off.abs().max())
    assert 1e-4 < rel < 0.2  # FP8 rounding of the inputs: a few % of the output, not a different function


def test_act_quant_gradients_flow_straight_through():
    """Training with FP8 inputs: the forward sees the QDQ values, the gradient passes the QDQ as identity (as the
    MXFP4 weights' does), so every weight and the input get gradients; dL/dw2 of one expert is Σ_n g_n ⊗ act(h_n)."""
    D, I, E, k = 32, 32, 6, 2
    moe = fill_random(MoE(D, I, E, k, 1, 1.5, 1.0, 2.0, True, F64, F64, act_fp8=True), 16, std=0.4)
    moe.dense = False  # the sorted path, as a training batch runs it
    x = (torch.randn(2, 8, D, generator=torch.Generator().manual_seed(17), dtype=F64) * 2).requires_grad_(True)
    y, info = moe(x)
    with torch.no_grad():
        torch.testing.assert_close(y, moe(x)[0], rtol=0, atol=1e-12)  # the same values with and without autograd
    y.square().sum().backward()
    assert x.grad is not None and x.grad.abs().sum() > 0
    used = set(info["indices"].flatten().tolist())
    for e in used:
        for n in ("w1", "w2", "w3"):
            assert getattr(moe.experts[e], n).weight.grad.abs().sum() > 0, (e, n)
    assert moe.shared_experts.w2.weight.grad.abs().sum() > 0 and moe.gate.weight.grad.abs().sum() > 0

    ex = fill_random(Expert(D, I, 2.0, False, F64, act_fp8=True), 18, std=0.4)
    xs = torch.randn(5, D, generator=torch.Generator().manual_seed(19), dtype=F64) * 2
    g = torch.randn(5, D, generator=torch.Generator().manual_seed(20), dtype=F64)
    (ex(xs) * g).sum().backward()
    with torch.no_grad():
        xq = fp8_qdq(xs, 32)
        h = F.silu(F.linear(xq, ex.w1.weight).clamp(max=2.0)) * F.linear(xq, ex.w3.weight).clamp(-2.0, 2.0)
        torch.testing.assert_close(ex.w2.weight.grad, g.T @ fp8_qdq(h, 32), rtol=0, atol=1e-12)


def test_model_runs_with_expert_act_quant():
    """The switch reaches every MoE of the model (backbone and draft), and moves the logits a little."""
    cfg_on = get_config("lab", expert_act_quant=True)
    on, off = build_model(cfg_on, seed=0).eval(), build_model(get_config("lab"), seed=0).eval()
    assert all(m.act_fp8 for m in on.modules() if isinstance(m, MoE))
    assert len([m for m in on.modules() if isinstance(m, MoE)]) == cfg_on.n_layers + cfg_on.n_mtp_layers
    tokens = torch.randint(0, cfg_on.vocab_size, (1, 12), generator=torch.Generator().manual_seed(21))
    with torch.no_grad():
        lo, lf = on(tokens).logits, off(tokens).logits
    assert torch.isfinite(lo).all() and 0 < float((lo - lf).norm()) < 0.5 * float(lf.norm())  # a little: < half

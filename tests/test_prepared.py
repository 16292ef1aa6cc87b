"""Static weights prepared once (docs/speed.md): the MXFP4 routed experts stacked and QDQ'd, the FP8 Engram
tables QDQ'd — built once for inference, rebuilt when a parameter changes, never used while training.

The reference is the per-use path (`quant.per_use_static_qdq()`: every forward re-quantizes every static weight,
as the model did before); the prepared path must give the very same numbers (max |Δ| == 0).
"""

from __future__ import annotations

import copy

import pytest
import torch

from dspark_mini import build_model
from dspark_mini.model import draft
from dspark_mini.moe import MoE
from dspark_mini.quant import fp4_qdq, fp8_qdq, per_use_static_qdq

F64 = torch.float64


def run_everything(model, tokens: torch.Tensor) -> dict[str, torch.Tensor]:
    """One-shot forward, prefill + decode steps, a verify block and a draft pass: every output and the cache."""
    out = {}
    with torch.no_grad():
        out["one_shot"] = model(tokens).logits
        cache = model.new_cache(tokens.size(0))
        out["prefill"] = model(tokens[:, :20], cache=cache).logits
        for i in range(20, 26):
            out[f"step{i}"] = model(tokens[:, i : i + 1], cache=cache).logits
        out["verify"] = model(tokens[:, 26:32], cache=cache, commit=False).logits
        d = draft(model, tokens[:, 26], cache)
        out["draft_logits"], out["draft_tokens"] = d.logits, d.tokens
        out.update({f"cache.{k}": v for k, v in cache.snapshot().items()})
    return out


def assert_identical(a: dict, b: dict) -> None:
    assert sorted(a) == sorted(b)
    for k in a:
        assert a[k].shape == b[k].shape, k
        if a[k].is_floating_point() and a[k].numel():
            assert float((a[k] - b[k]).abs().max()) == 0.0, k
        assert torch.equal(a[k], b[k]), k


@pytest.fixture(scope="module")
def trained():
    from lab.weights import lab_model

    return lab_model("trained").eval()


@pytest.mark.parametrize("weights", ["trained", "random"])
def test_prepared_path_is_bit_identical_to_per_use_qdq(weights, trained, lab_cfg):
    model = trained if weights == "trained" else build_model(lab_cfg, seed=7).eval()
    assert model.cfg.dtype == "float64" and model.cfg.expert_quant and model.cfg.engram_table_quant
    tokens = torch.randint(4, lab_cfg.vocab_size, (2, 37), generator=torch.Generator().manual_seed(3))
    with per_use_static_qdq():
        reference = run_everything(model, tokens)
    model.prepare()
    prepared = run_everything(model, tokens)
    assert_identical(reference, prepared)
    # and the prepared values are what the per-use path computes expert by expert / row by row
    moe = model.layers[1].ffn
    w13t, w2t = moe.stacked.value["w13t"], moe.stacked.value["w2t"]  # [E + 1, D, 2I] = [w1ᵀ ‖ w3ᵀ], [E + 1, I, D]
    I = moe.experts[0].w1.weight.size(0)
    assert w13t.shape[0] == w2t.shape[0] == moe.n_experts + 1 and moe.shared_in_stack
    for e, ex in enumerate(moe.experts):
        assert torch.equal(w13t[e, :, :I], ex.weight("w1").T) and torch.equal(w13t[e, :, I:], ex.weight("w3").T)
        assert torch.equal(w2t[e], ex.weight("w2").T)
    sh = moe.shared_experts  # unquantized
    assert torch.equal(w13t[-1], torch.cat([sh.w1.weight, sh.w3.weight]).T) and torch.equal(w2t[-1], sh.w2.weight.T)
    # the lab's MoE is dense: the router and every expert's gate/up in one matrix, every w2 in another
    w_in, w2 = moe.stacked.value["w_in_t"].mT, moe.stacked.value["w2"]  # w_in kept transposed: [D, E + (E+1)·2I]
    assert moe.dense and torch.equal(w_in[: moe.n_experts], moe.gate.weight)
    assert torch.equal(w_in[moe.n_experts :].view(moe.n_experts + 1, 2 * I, -1), w13t.mT)
    assert torch.equal(w2.view(moe.n_experts + 1, I, -1), w2t)
    eng = model.layers[0].engram
    assert torch.equal(eng.prepared.value, fp8_qdq(eng.embed.weight, 32))


def test_prepared_caches_are_not_in_the_state_dict(lab_cfg):
    model = build_model(lab_cfg, seed=0).eval()
    keys = {k: tuple(v.shape) for k, v in model.state_dict().items()}
    n_params = sum(p.numel() for p in model.parameters())
    model.prepare()
    with torch.no_grad():
        model(torch.tensor([[5, 6, 7]]))
    assert {k: tuple(v.shape) for k, v in model.state_dict().items()} == keys
    assert sum(p.numel() for p in model.parameters()) == n_params
    assert "layers.0.ffn.experts.3.w1.weight" in keys and not any("stack" in k or "prepared" in k for k in keys)
    clone = build_model(lab_cfg, seed=1)
    clone.load_state_dict(model.state_dict())  # loads unchanged, and the clone computes the same numbers
    with torch.no_grad():
        x = torch.tensor([[9, 10, 11, 12]])
        assert torch.equal(clone.eval()(x).logits, model(x).logits)


def small_moe(seed: int) -> MoE:
    moe = MoE(32, 32, 4, 2, 1, 1.5, 1.0, 10.0, True, F64, F64)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for p in moe.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=F64) * p.shape[-1] ** -0.5)
    return moe


def per_use(moe: MoE, x: torch.Tensor) -> torch.Tensor:
    with torch.no_grad(), per_use_static_qdq():
        return moe(x)[0]


def test_prepared_weights_follow_every_tracked_edit():
    moe = small_moe(1)
    x = torch.randn(1, 3, 32, generator=torch.Generator().manual_seed(2), dtype=F64)
    with torch.no_grad():
        first = moe(x)[0]
        assert moe.stacked.value is not None  # built by the first inference forward
        kept = moe.stacked.value
        assert torch.equal(moe(x)[0], first) and moe.stacked.value is kept  # reused, not rebuilt
        moe.experts[0].w1.weight.mul_(3.0)  # in place under no_grad: the version counter moves
        assert torch.equal(moe(x)[0], per_use(moe, x)) and moe.stacked.value is not kept
        moe.load_state_dict({k: -v for k, v in moe.state_dict().items()})  # copy_ into the parameters
        assert torch.equal(moe(x)[0], per_use(moe, x))
        moe.load_state_dict({k: v * 0.5 for k, v in moe.state_dict().items()}, assign=True)  # new Parameter objects
        assert torch.equal(moe(x)[0], per_use(moe, x))
        moe.experts[1].w2.weight.data = torch.randn(32, 32, dtype=F64)  # new storage
        assert torch.equal(moe(x)[0], per_use(moe, x))
        # an in-place edit *through .data* is invisible to autograd's version counter: prepare() after it
        for ex in moe.experts:
            ex.w2.weight.data.zero_()
        assert not torch.equal(moe(x)[0], per_use(moe, x))  # stale, as documented
        moe.prepare()
        assert torch.equal(moe(x)[0], per_use(moe, x))
        # routed experts ablated: what is left is the shared expert (run from the stack: a batched matmul, so equal
        # to the module's F.linear up to rounding)
        alone = moe.shared_experts(x.view(-1, 32)).view_as(x)
        torch.testing.assert_close(moe(x)[0], alone, rtol=0, atol=1e-14)


def test_a_deep_copy_prepares_its_own_weights():
    moe = small_moe(3)
    x = torch.randn(2, 2, 32, generator=torch.Generator().manual_seed(4), dtype=F64)
    with torch.no_grad():
        moe(x)
        twin = copy.deepcopy(moe)
        twin.experts[2].w3.weight.mul_(-1.0)
        assert torch.equal(twin(x)[0], per_use(twin, x))
        assert torch.equal(moe(x)[0], per_use(moe, x))  # the original is untouched


def test_training_requantizes_at_every_use_with_straight_through_gradients():
    moe = small_moe(5)
    x = torch.randn(2, 4, 32, generator=torch.Generator().manual_seed(6), dtype=F64)
    opt = torch.optim.SGD(moe.parameters(), lr=0.1)
    for _ in range(2):
        y, info = moe(x)
        with torch.no_grad():
            assert torch.equal(y, moe(x)[0])  # QAT sees the same values the prepared path serves
        opt.zero_grad()
        y.square().sum().backward()
        chosen = set(info["indices"].flatten().tolist())
        for e, ex in enumerate(moe.experts):
            for name in ("w1", "w2", "w3"):
                g = getattr(ex, name).weight.grad
                assert (g is not None and g.abs().sum() > 0) == (e in chosen), (e, name)
        opt.step()  # the next inference forward must see the stepped weights
        with torch.no_grad():
            assert torch.equal(moe(x)[0], per_use(moe, x))
    # the straight-through gradient of a stacked QDQ weight is the identity: same as an unquantized forward's
    ste = small_moe(8)
    plain = small_moe(8)
    for m in plain.modules():
        if isinstance(m, MoE):
            m.fp4 = False
    with torch.no_grad():  # give both the same routed weights as the plain one sees: its QDQ'd values
        for a, b in zip(ste.experts, plain.experts, strict=True):
            for n in ("w1", "w2", "w3"):
                getattr(b, n).weight.copy_(fp4_qdq(getattr(a, n).weight, 32, "e8m0"))
    ste(x)[0].sum().backward()
    plain(x)[0].sum().backward()
    for a, b in zip(ste.experts, plain.experts, strict=True):
        for n in ("w1", "w2", "w3"):
            ga, gb = getattr(a, n).weight.grad, getattr(b, n).weight.grad
            assert (ga is None) == (gb is None)
            if ga is not None:
                torch.testing.assert_close(ga, gb, rtol=0, atol=1e-12)


def test_engram_prepared_table_and_training_rows(lab_cfg):
    model = build_model(lab_cfg, seed=2)
    eng = model.layers[0].engram
    ids = torch.randint(0, eng.num_embeddings, (2, 5, eng.n_hash_cols), generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        rows = eng.lookup(ids)
        assert torch.equal(rows, fp8_qdq(eng.embed.weight[ids], 32))  # QDQ of the table row = QDQ of the row
    eng.embed.weight.grad = None
    eng.lookup(ids).sum().backward()  # training: rows QDQ'd at use, straight-through to the table
    assert eng.prepared.value is not None and eng.embed.weight.grad is not None
    counts = torch.bincount(ids.flatten(), minlength=eng.num_embeddings).to(F64)
    torch.testing.assert_close(eng.embed.weight.grad, counts[:, None].expand_as(eng.embed.weight), rtol=0, atol=0)


def test_every_prepared_weight_follows_in_place_edits(lab_cfg):
    """The attention's stacked projections and block-diagonal wo_a, the mHC scaled mixes, the router fused with
    the experts, the Engram gate weight: each rebuilt after an in-place edit under no_grad (version counter), so
    the prepared forward keeps matching the per-use reference."""
    model = build_model(lab_cfg, seed=11).eval()
    tokens = torch.randint(4, lab_cfg.vocab_size, (1, 40), generator=torch.Generator().manual_seed(2))  # T > top-k
    blk = model.layers[3]  # an Engram layer, a KV and index source

    def both() -> tuple[torch.Tensor, torch.Tensor]:
        with torch.no_grad():
            fast = model(tokens).logits
            with per_use_static_qdq():
                slow = model(tokens).logits
        return fast, slow

    fast, slow = both()
    assert torch.equal(fast, slow)
    edits = [
        blk.attn.wq_a.weight,
        blk.attn.indexer.weights_proj.weight,
        blk.attn.compressor.wgate.weight,
        blk.attn.wo_a.weight,
        blk.attn.kv_norm.weight,
        blk.attn.attn_sink,
        blk.hc_attn.scale,
        blk.hc_ffn.fn,
        blk.ffn.gate.weight,
        blk.ffn.gate.bias,
        blk.ffn.shared_experts.w2.weight,
        blk.engram.q_weight,
    ]
    for p in edits:
        with torch.no_grad():  # an uneven shift: it reorders the router's biased scores too
            p.add_(torch.linspace(-1.0, 1.0, p.numel(), dtype=p.dtype).view_as(p))
        new_fast, new_slow = both()
        assert torch.equal(new_fast, new_slow)
        assert not torch.equal(new_fast, fast)
        fast = new_fast

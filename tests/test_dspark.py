"""Step 6B · the DSpark draft, checked against naive references and invariants.

Taps (mean over the hc copies of the attention-input stream of the tap layers) → main_x (mean or concat_proj)
→ the draft rings (target latents at committed positions only) → one draft pass over [anchor, noise × (k−1)]
(bidirectional inside the block, never written to any cache) → Markov head (the only sequential part) →
tokens, draft probabilities and confidences.

The session model (`lab_model`) is shared, so every test that edits weights builds its own model.
"""

from __future__ import annotations

import copy

import pytest
import torch

import dspark_mini.attention as attention_mod
from dspark_mini import Trace, build_model, get_config
from dspark_mini.dspark import DraftOutput
from dspark_mini.model import draft
from dspark_mini.sampling import sample, token_distribution
from tests.helpers import assert_same_snapshot

F64 = torch.float64


def rand_ids(cfg, batch: int, seqlen: int, seed: int) -> torch.Tensor:
    """Ordinary token ids (4..V−1: no special ids, no noise token)."""
    g = torch.Generator().manual_seed(seed)
    return torch.randint(4, cfg.vocab_size, (batch, seqlen), generator=g, dtype=torch.long)


def prefill(model, tokens):
    cache = model.new_cache(tokens.size(0))
    with torch.no_grad():
        out = model(tokens, cache=cache)
    return cache, out


@pytest.fixture(scope="module")
def own_model(lab_cfg):
    """A private lab model whose confidence head gets random weights (the session model keeps w = 0)."""
    m = build_model(lab_cfg, seed=3).eval()
    with torch.no_grad():
        g = torch.Generator().manual_seed(11)
        w = m.mtp.confidence_head.weight
        w.copy_(torch.randn(w.shape, generator=g, dtype=F64).to(w.dtype) * 0.3)
    return m


# ---- taps and main_x ---------------------------------------------------------------------------------


def test_taps_are_the_hc_mean_of_the_stream_entering_the_tap_layers(lab_model, lab_cfg):
    tokens = rand_ids(lab_cfg, 2, 13, seed=1)
    seen = {}
    handles = [
        lab_model.layers[l].register_forward_pre_hook(
            lambda mod, args, l=l: seen.__setitem__(l, args[0].detach().clone())
        )
        for l in lab_cfg.dspark_target_layer_ids
    ]
    try:
        with torch.no_grad():
            out = lab_model(tokens)
    finally:
        for h in handles:
            h.remove()
    assert lab_cfg.dspark_target_layer_ids == (3, 4)
    assert sorted(out.taps) == [3, 4]
    for l in (3, 4):
        x = seen[l]  # [B, S, hc, D], after layer 3's Engram (the Engram runs before the block)
        assert x.shape == (2, 13, lab_cfg.hc_mult, lab_cfg.dim)
        naive = x.sum(dim=2) / lab_cfg.hc_mult
        torch.testing.assert_close(out.taps[l], naive, rtol=0, atol=1e-14)
    assert (out.taps[3] - out.taps[4]).abs().max() > 1e-3  # two different layers


def test_mean_mix_is_main_norm_of_half_plus_half(lab_model, lab_cfg):
    tokens = rand_ids(lab_cfg, 2, 9, seed=2)
    with torch.no_grad():
        out = lab_model(tokens)
        t3, t4 = out.taps[3], out.taps[4]
        half = 0.5 * t3 + 0.5 * t4
        # the 0.5/0.5 mix equals the mean of the two parts exactly (scaling by 1/2 is exact in binary)
        assert (half - torch.stack([t3, t4]).mean(0)).abs().max().item() == 0
        assert (half - (t3 + t4) / 2).abs().max().item() == 0
        main_x = lab_model.mtp.main_x(out.taps)
        nw = lab_model.mtp.main_norm.weight
        naive = half * torch.rsqrt(half.square().mean(-1, keepdim=True) + lab_cfg.norm_eps) * nw
        assert (main_x - lab_model.mtp.main_norm(half)).abs().max().item() == 0
        torch.testing.assert_close(main_x, naive, rtol=0, atol=1e-13)
    assert lab_model.mtp.main_proj is None  # "mean" has no projection


def test_concat_proj_mix():
    cfg = get_config("lab", dspark_tap_mix="concat_proj")
    m = build_model(cfg, seed=5).eval()
    assert m.mtp.main_proj is not None
    assert tuple(m.mtp.main_proj.weight.shape) == (cfg.dim, 2 * cfg.dim)
    assert any(n == "mtp.main_proj.weight" for n, _ in m.named_parameters())
    assert not any("main_proj" in n for n, _ in build_model(get_config("lab"), 0).named_parameters())
    tokens = rand_ids(cfg, 2, 7, seed=3)
    with torch.no_grad():
        out = m(tokens)
        cat = torch.cat([out.taps[3], out.taps[4]], dim=-1)  # [B, S, 2D]: tap 3 first
        naive = m.mtp.main_norm(cat @ m.mtp.main_proj.weight.T)
        torch.testing.assert_close(m.mtp.main_x(out.taps), naive, rtol=0, atol=1e-13)
        swapped = m.mtp.main_norm(torch.cat([out.taps[4], out.taps[3]], -1) @ m.mtp.main_proj.weight.T)
        assert (m.mtp.main_x(out.taps) - swapped).abs().max() > 1e-3  # the order of the taps matters


# ---- draft rings ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("S", [5, 8, 13])
def test_draft_rings_hold_target_latents_of_the_last_window(lab_model, lab_cfg, S):
    tokens = rand_ids(lab_cfg, 2, S, seed=S)
    cache, out = prefill(lab_model, tokens)
    W = lab_cfg.window_size
    positions = torch.arange(S)
    with torch.no_grad():
        main_x = lab_model.mtp.main_x(out.taps)
        for i, blk in enumerate(lab_model.mtp.layers):
            layer = lab_cfg.n_layers + i
            assert blk.layer_id == layer and lab_cfg.n_layers <= layer < lab_cfg.n_layers + lab_cfg.n_mtp_layers
            ring = cache.windows[layer]
            expected = blk.attn.latent(main_x, positions)[1]  # [B, S, Dh], FP8-QDQ'd
            kept = list(range(max(0, S - W), S))
            assert sorted(p for p in ring.pos.tolist() if p >= 0) == kept
            assert int((ring.pos >= 0).sum()) == min(S, W)
            for p in kept:
                torch.testing.assert_close(ring.kv[:, p % W], expected[:, p], rtol=0, atol=0)
    # the two draft layers keep different latents (own wkv / kv_norm)
    assert (cache.windows[8].kv - cache.windows[9].kv).abs().max() > 1e-3


def test_draft_pass_does_not_touch_the_cache(lab_model, lab_cfg):
    cache, _ = prefill(lab_model, rand_ids(lab_cfg, 2, 11, seed=4))
    before = cache.snapshot()
    with torch.no_grad():
        for T in (0.0, 1.0):
            draft(lab_model, torch.tensor([10, 20]), cache, 3, T, torch.Generator().manual_seed(0))
    assert_same_snapshot(cache.snapshot(), before)
    assert cache.length == 11


@pytest.mark.parametrize("n", [0, 1, 2, 4])
def test_partial_commit_writes_draft_ring_rows_only_for_committed_positions(lab_model, lab_cfg, n):
    S, W = 10, lab_cfg.window_size
    draft_layers = range(lab_cfg.n_layers, lab_cfg.n_layers + lab_cfg.n_mtp_layers)
    tokens = rand_ids(lab_cfg, 2, S + 4, seed=9)
    cache, _ = prefill(lab_model, tokens[:, :S])
    old = {
        l: (cache.windows[l].kv.clone(), cache.windows[l].pos.clone())
        for l in range(lab_cfg.n_layers, lab_cfg.n_layers + lab_cfg.n_mtp_layers)
    }
    with torch.no_grad():
        out = lab_model(tokens[:, S:], cache=cache, commit=False)
        assert cache.length == S and all(torch.equal(cache.windows[l].pos, old[l][1]) for l in draft_layers)
        # the pending rows are the draft layers' latents of main_x at the verified positions
        main_x = lab_model.mtp.main_x(out.taps)
        rows = lab_model.mtp.ring_rows(main_x, torch.arange(S, S + 4))
        for l in draft_layers:
            torch.testing.assert_close(out.pending.window[l], rows[l], rtol=0, atol=0)
        cache.commit(out.pending, n)
    assert cache.length == S + n
    for l in draft_layers:
        ring, (old_kv, old_pos) = cache.windows[l], old[l]
        for j in range(4):
            slot = (S + j) % W
            if j < n:  # committed: the verify row
                assert int(ring.pos[slot]) == S + j
                torch.testing.assert_close(ring.kv[:, slot], out.pending.window[l][:, j], rtol=0, atol=0)
            else:  # rejected: the slot still holds the old position and its old latent
                assert int(ring.pos[slot]) == int(old_pos[slot]) == S + j - W
                assert torch.equal(ring.kv[:, slot], old_kv[:, slot])
    # and the rings equal those of a cache that only ever saw the committed tokens
    plain, _ = prefill(lab_model, tokens[:, : S + n])
    for l in draft_layers:
        assert torch.equal(cache.windows[l].pos, plain.windows[l].pos)
        valid = plain.windows[l].pos >= 0
        torch.testing.assert_close(cache.windows[l].kv[:, valid], plain.windows[l].kv[:, valid], rtol=0, atol=1e-12)


def test_draft_reads_only_filled_ring_slots(lab_model, lab_cfg):
    """With fewer target positions than slots, the empty slots are masked: garbage there changes nothing."""
    cache, _ = prefill(lab_model, rand_ids(lab_cfg, 2, 5, seed=6))
    anchor = torch.tensor([33, 44])
    with torch.no_grad():
        ref = draft(lab_model, anchor, cache, 3)
        poisoned = copy.deepcopy(cache)
        for l in range(lab_cfg.n_layers, lab_cfg.n_layers + lab_cfg.n_mtp_layers):
            ring = poisoned.windows[l]
            ring.kv[:, ring.pos < 0] = 1e3
        got = draft(lab_model, anchor, poisoned, 3)
        assert torch.equal(got.logits, ref.logits) and torch.equal(got.hidden, ref.hidden)
        # ... while a filled slot is read
        touched = copy.deepcopy(cache)
        touched.windows[8].kv[:, 0] += 1.0
        assert (draft(lab_model, anchor, touched, 3).hidden - ref.hidden).abs().max() > 1e-6


# ---- the block is bidirectional ------------------------------------------------------------------------


def test_draft_block_attention_is_bidirectional(lab_model, lab_cfg, monkeypatch):
    S, k, W = 6, 3, lab_cfg.window_size
    cache, _ = prefill(lab_model, rand_ids(lab_cfg, 2, S, seed=12))
    masks = []
    real = attention_mod.sparse_attention

    def spy(q, kv, mask, sink, scale):
        masks.append(mask.clone())
        return real(q, kv, mask, sink, scale)

    monkeypatch.setattr(attention_mod, "sparse_attention", spy)
    tr = Trace()
    with torch.no_grad():
        draft(lab_model, torch.tensor([50, 60]), cache, k, trace=tr)
    assert len(masks) == lab_cfg.n_mtp_layers  # only the draft layers attend in a draft pass
    for l, mask in zip(range(lab_cfg.n_layers, lab_cfg.n_layers + lab_cfg.n_mtp_layers), masks, strict=True):
        assert mask.shape == (2, k, W + k)  # [ring ‖ block]
        ring_filled = cache.windows[l].pos >= 0
        assert int(cache.windows[l].pos.max()) == S - 1  # context strictly before the anchor (at S)
        assert torch.equal(mask[:, :, :W], ring_filled.expand(2, k, W))
        assert bool(mask[:, :, W:].all())  # every row sees every block row, later ones included
        probs = tr.get("4A", "probs", l)  # [B, k, H, W + k]
        assert bool((probs[..., W:] > 0).all())
        assert float(probs[..., :W][..., ~ring_filled].abs().max()) == 0.0
        assert torch.equal(tr.get("4A", "window_key_pos", l), torch.cat([cache.windows[l].pos, torch.arange(S, S + k)]))


def test_row0_sees_later_rows(lab_model, lab_cfg):
    """Row 0 (the anchor row) changes when noise rows are appended: with a causal block it could not."""
    cache, _ = prefill(lab_model, rand_ids(lab_cfg, 2, 9, seed=13))
    anchor = torch.tensor([70, 80])
    with torch.no_grad():
        h = {k: draft(lab_model, anchor, cache, k).hidden for k in (1, 2, 3)}
        assert (h[3][:, 0] - h[1][:, 0]).abs().max() > 1e-6
        assert (h[3][:, :2] - h[2][:, :2]).abs().max() > 1e-6
        # a second pass with the same block is identical (no hidden state between passes)
        assert torch.equal(draft(lab_model, anchor, cache, 3).hidden, h[3])


def test_draft_batch_rows_are_independent(lab_model, lab_cfg):
    tokens = rand_ids(lab_cfg, 2, 10, seed=14)
    anchor = torch.tensor([90, 91])
    cache, _ = prefill(lab_model, tokens)
    with torch.no_grad():
        both = draft(lab_model, anchor, cache, 3)
        for b in range(2):
            c1, _ = prefill(lab_model, tokens[b : b + 1])
            one = draft(lab_model, anchor[b : b + 1], c1, 3)
            assert torch.equal(one.tokens, both.tokens[b : b + 1])
            torch.testing.assert_close(one.logits, both.logits[b : b + 1], rtol=0, atol=1e-11)


# ---- Markov head, probabilities, confidence -------------------------------------------------------------


@pytest.mark.parametrize("T", [0.0, 0.7, 1.0])
def test_markov_head_probs_and_confidence(own_model, T):
    m, cfg = own_model, own_model.cfg
    S, k = 11, 3
    cache, _ = prefill(m, rand_ids(cfg, 3, S, seed=21))
    anchor = torch.tensor([100, 200, 300])
    tr = Trace()
    with torch.no_grad():
        d = draft(m, anchor, cache, k, T, torch.Generator().manual_seed(5), tr)
        base = tr.get("6B", "base_logits")  # [B, k, V]
        # base logits = the target's own head on the draft's own final norm of the hidden
        torch.testing.assert_close(base, m.head(m.mtp.norm(d.hidden)), rtol=0, atol=1e-12)
        prev = torch.cat([anchor[:, None], d.tokens[:, :-1]], dim=1)  # prev_0 = anchor, prev_i = x_{i−1}
        mh = m.mtp.markov_head
        bias = mh.head(mh.embed(prev))  # [B, k, V] = W2 · W1[prev]
        torch.testing.assert_close(d.logits, base + bias, rtol=0, atol=1e-12)
        assert (bias.abs().amax(-1) > 0).all()
        if T == 0:
            assert torch.equal(d.tokens, d.logits.argmax(-1))
            assert torch.equal(d.probs, torch.zeros_like(d.probs).scatter_(-1, d.tokens[..., None], 1.0))
            shown = torch.softmax(d.logits, -1).gather(-1, d.tokens[..., None]).squeeze(-1)
        else:
            torch.testing.assert_close(d.probs, torch.softmax(d.logits / T, -1), rtol=0, atol=1e-14)
            shown = d.probs.gather(-1, d.tokens[..., None]).squeeze(-1)
        torch.testing.assert_close(d.draft_probs, shown, rtol=0, atol=0)
        assert ((d.draft_probs > 0) & (d.draft_probs <= 1)).all()
        # confidence c_i = σ(w · [h_i ; W1[prev_i]])
        w = m.mtp.confidence_head.weight  # [1, D + r]
        assert w.shape == (1, cfg.dim + cfg.dspark_markov_rank) and w.abs().max() > 0
        z = torch.cat([d.hidden, mh.embed(prev)], dim=-1).to(w.dtype) @ w[0]
        torch.testing.assert_close(d.confidence, torch.sigmoid(z), rtol=0, atol=1e-14)
        assert (d.confidence - 0.5).abs().max() > 1e-3
        assert ((d.confidence > 0) & (d.confidence < 1)).all()
    # the trace records the draft outputs under step 6B
    assert torch.equal(tr.get("6B", "draft_tokens"), d.tokens)
    assert torch.equal(tr.get("6B", "draft_confidence"), d.confidence)
    assert torch.equal(tr.get("6B", "draft_probs"), d.draft_probs)


def test_markov_head_changes_the_tokens_of_later_positions(own_model):
    """The bias depends on the previous token, so x_2 depends on x_1 (the sequential part)."""
    m, cfg = own_model, own_model.cfg
    cache, _ = prefill(m, rand_ids(cfg, 1, 7, seed=22))
    tr = Trace()
    with torch.no_grad():
        d = draft(m, torch.tensor([123]), cache, 3, trace=tr)
        base = tr.get("6B", "base_logits")
        mh = m.mtp.markov_head
        other = (int(d.tokens[0, 0]) + 1) % cfg.vocab_size
        alt = base[0, 1] + mh.head(mh.embed(torch.tensor(other)))
        assert (alt - d.logits[0, 1]).abs().max() > 1e-3


def test_untrained_confidence_head_says_one_half(lab_model, lab_cfg):
    assert float(lab_model.mtp.confidence_head.weight.detach().abs().max()) == 0.0
    cache, _ = prefill(lab_model, rand_ids(lab_cfg, 2, 6, seed=23))
    with torch.no_grad():
        d = draft(lab_model, torch.tensor([5, 6]), cache, 3, 1.0, torch.Generator().manual_seed(0))
    assert torch.equal(d.confidence, torch.full_like(d.confidence, 0.5))


def test_confidence_head_is_high_precision_and_has_no_bias(lab_model):
    head = lab_model.mtp.confidence_head
    assert head.weight.dtype in (torch.float32, F64)
    assert getattr(head, "bias", None) is None


@pytest.mark.parametrize("k", [1, 2, 3])
def test_draft_output_shapes_and_positions(lab_model, lab_cfg, k):
    B, S, V, D = 2, 9, lab_cfg.vocab_size, lab_cfg.dim
    cache, _ = prefill(lab_model, rand_ids(lab_cfg, B, S, seed=24))
    with torch.no_grad():
        d = draft(lab_model, torch.tensor([7, 8]), cache, k, 0.0)
    assert isinstance(d, DraftOutput)
    assert d.tokens.shape == (B, k) and d.tokens.dtype == torch.long
    assert d.draft_probs.shape == (B, k) and d.confidence.shape == (B, k)
    assert d.logits.shape == (B, k, V) and d.probs.shape == (B, k, V)
    assert d.hidden.shape == (B, k, D)
    assert torch.equal(d.positions, torch.arange(S, S + k))  # the anchor sits at cache.length
    assert ((d.tokens >= 0) & (d.tokens < V)).all()
    # default block size = the trained block
    with torch.no_grad():
        assert draft(lab_model, torch.tensor([7, 8]), cache).tokens.shape == (B, lab_cfg.dspark_block_size)


def test_seeded_sampling_is_deterministic(lab_model, lab_cfg):
    cache, _ = prefill(lab_model, rand_ids(lab_cfg, 4, 6, seed=25))
    anchor = torch.tensor([9, 10, 11, 12])
    with torch.no_grad():
        a = draft(lab_model, anchor, cache, 3, 1.0, torch.Generator().manual_seed(7))
        b = draft(lab_model, anchor, cache, 3, 1.0, torch.Generator().manual_seed(7))
        c = draft(lab_model, anchor, cache, 3, 1.0, torch.Generator().manual_seed(8))
    assert torch.equal(a.tokens, b.tokens)
    assert not torch.equal(a.tokens, c.tokens)


def test_token_distribution_and_sample():
    logits = torch.tensor([[1.0, 3.0, 2.0], [0.0, -1.0, 5.0]], dtype=F64)
    g = token_distribution(logits, 0.0)
    assert torch.equal(g, torch.tensor([[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]], dtype=F64))
    torch.testing.assert_close(token_distribution(logits, 2.0), torch.softmax(logits / 2, -1), rtol=0, atol=0)
    with pytest.raises(ValueError, match="temperature"):
        token_distribution(logits, -0.1)
    gen = torch.Generator().manual_seed(0)
    for _ in range(20):
        assert sample(g, gen).tolist() == [1, 2]  # one-hot rows sample their argmax exactly
    assert sample(g[None].expand(3, 2, 3), gen).shape == (3, 2)


# ---- bad input -------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def primed(lab_model, lab_cfg):
    cache, _ = prefill(lab_model, rand_ids(lab_cfg, 2, 5, seed=30))
    return cache


@pytest.mark.parametrize("k", [0, 6, -1, "3", 2.0])
def test_bad_block_size(lab_model, primed, k):
    with pytest.raises(ValueError, match=r"block size.*1\.\.5"):
        draft(lab_model, torch.tensor([5, 6]), primed, k)


def test_bool_block_size_is_rejected(lab_model, primed):
    with pytest.raises(ValueError, match="block size"):
        draft(lab_model, torch.tensor([5, 6]), primed, True)


@pytest.mark.parametrize("anchor", [[5, get_config("lab").vocab_size], [-1, 5], [5, 100_000]])
def test_anchor_out_of_range(lab_model, primed, anchor):
    with pytest.raises(ValueError, match=rf"anchor token id .* out of range.*0\.\.{get_config('lab').vocab_size - 1}"):
        draft(lab_model, torch.tensor(anchor), primed, 3)


@pytest.mark.parametrize("anchor", [torch.tensor([5, 6], dtype=torch.int32), torch.tensor([[5, 6]]), torch.tensor(5)])
def test_anchor_wrong_dtype_or_shape(lab_model, primed, anchor):
    with pytest.raises(ValueError, match="anchor must be an int64 tensor"):
        draft(lab_model, anchor, primed, 3)


def test_draft_before_any_prompt(lab_model):
    with pytest.raises(ValueError, match="empty cache"):
        draft(lab_model, torch.tensor([5]), lab_model.new_cache(1), 3)


def test_draft_past_max_seq_len():
    cfg = get_config("lab", max_seq_len=16)
    m = build_model(cfg, seed=0).eval()
    cache, _ = prefill(m, rand_ids(cfg, 1, 14, seed=31))
    with torch.no_grad():
        assert draft(m, torch.tensor([5]), cache, 2).tokens.shape == (1, 2)  # positions 14, 15: fits
        with pytest.raises(ValueError, match="max_seq_len = 16"):
            draft(m, torch.tensor([5]), cache, 3)


def test_no_draft_layers():
    cfg = get_config("lab", n_mtp_layers=0, compress_ratios=(0, 2, 2, 2, 1, 1, 1, 1))
    m = build_model(cfg, seed=0).eval()
    assert m.mtp is None
    cache, out = prefill(m, rand_ids(cfg, 1, 4, seed=32))
    assert sorted(cache.windows) == list(range(8))  # no draft rings either
    assert sorted(out.pending.window) == list(range(8))
    with pytest.raises(ValueError, match="no draft layers"):
        draft(m, torch.tensor([5]), cache, 1)

"""The whole model: incremental decoding == one-shot forward, rollback by partial commit, determinism,
trace shapes and input validation."""

from __future__ import annotations

import pytest
import torch
from conftest import make_tokens

from dspark_mini import build_model, count_params
from tests.helpers import assert_same_snapshot

F64 = torch.float64


def run_chunks(model, tokens, chunks):
    cache = model.new_cache(tokens.size(0))
    outs, i = [], 0
    with torch.no_grad():
        for n in chunks:
            out = model(tokens[:, i : i + n], cache=cache)
            assert out.logits.shape == (tokens.size(0), n, model.cfg.vocab_size)
            outs.append(out.logits)
            i += n
    assert i == tokens.size(1) and cache.length == i
    return torch.cat(outs, 1), cache


@pytest.fixture(scope="module")
def prompt(lab_cfg):
    return make_tokens(lab_cfg, 2, 23, seed=7)  # odd, > window 8, > candidate pool 16


@pytest.fixture(scope="module")
def full(lab_model, prompt):
    with torch.no_grad():
        return lab_model(prompt)


@pytest.mark.parametrize(
    "chunks",
    [[23], [1] * 23, [5, 1, 3, 8, 6], [2, 2, 2, 17], [9, 14], [16, 7]],
    ids=["one-shot", "token-by-token", "irregular", "pairs-then-rest", "9+14", "16+7"],
)
def test_incremental_equals_full_forward(lab_model, prompt, full, chunks):
    logits, cache = run_chunks(lab_model, prompt, chunks)
    diff = (logits - full.logits).abs().max().item()
    assert diff <= 1e-5
    assert diff < 1e-11  # float64: only rounding differences
    # and every chunking leaves the same cache
    _, ref_cache = run_chunks(lab_model, prompt, [23])
    assert_same_snapshot(cache.snapshot(), ref_cache.snapshot(), atol=1e-12)


def test_cache_contents_after_prompt(lab_model, lab_cfg, prompt):
    _, cache = run_chunks(lab_model, prompt, [23])
    snap = cache.snapshot()
    assert int(snap["length"]) == 23
    for i in range(lab_cfg.n_layers):  # ring holds the last W positions, slot = position mod W
        pos = snap[f"window.{i}.pos"]
        assert sorted(pos.tolist()) == list(range(23 - 8, 23))
        assert all(p % 8 == slot for slot, p in enumerate(pos.tolist()))
        assert snap[f"window.{i}.kv"].shape == (2, 8, lab_cfg.head_dim)
    assert snap["source.1.kv"].shape == (2, 11, lab_cfg.head_dim)
    assert snap["source.1.index_k"].shape == (2, 11, lab_cfg.index_head_dim)
    assert snap["source.1.carry_kv"].shape == (2, 1, lab_cfg.head_dim)
    assert snap["source.4.kv"].shape == (2, 23, lab_cfg.head_dim)
    assert "source.4.carry_kv" not in snap
    compressed = lab_model.compress_map[prompt]
    assert torch.equal(snap["engram.history"], compressed[:, -3:])


def test_batch_rows_are_independent(lab_model, prompt, full):
    with torch.no_grad():
        for b in range(2):
            alone = lab_model(prompt[b : b + 1])
            torch.testing.assert_close(alone.logits, full.logits[b : b + 1], rtol=0, atol=1e-11)
            inc, _ = run_chunks(lab_model, prompt[b : b + 1], [4, 1, 18])
            torch.testing.assert_close(inc, full.logits[b : b + 1], rtol=0, atol=1e-11)


def test_two_forwards_are_identical(lab_model, prompt, full):
    with torch.no_grad():
        again = lab_model(prompt)
    assert (again.logits - full.logits).abs().max().item() == 0
    assert torch.equal(again.hidden, full.hidden)
    assert all(torch.equal(again.taps[k], full.taps[k]) for k in full.taps)


def test_last_only(lab_model, prompt, full):
    with torch.no_grad():
        out = lab_model(prompt, last_only=True)
    assert out.logits.shape == (2, 1, lab_model.cfg.vocab_size)
    torch.testing.assert_close(out.logits, full.logits[:, -1:], rtol=0, atol=1e-13)


def test_seed_determinism(lab_cfg):
    tokens = make_tokens(lab_cfg, 1, 6, seed=1)
    a, b, c = build_model(lab_cfg, seed=0), build_model(lab_cfg, seed=0), build_model(lab_cfg, seed=1)
    sa, sb, sc = a.state_dict(), b.state_dict(), c.state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    differing = [k for k in sa if not torch.equal(sa[k], sc[k])]
    # every randomly initialized tensor differs between seeds (norm weights, sinks, hc scales are constant)
    assert len(differing) > 0.5 * len(sa)
    assert "embed.weight" in differing and "head.weight" in differing
    with torch.no_grad():
        la, lb, lc = a(tokens).logits, b(tokens).logits, c(tokens).logits
    assert torch.equal(la, lb)
    assert (la - lc).abs().max() > 1e-3
    assert count_params(a) == count_params(c)


def test_commit_false_leaves_cache_unchanged(lab_model, prompt):
    _, cache = run_chunks(lab_model, prompt[:, :9], [9])
    before = cache.snapshot()
    with torch.no_grad():
        out = lab_model(prompt[:, 9:14], cache=cache, commit=False)
    assert out.pending.start == 9 and out.pending.seqlen == 5
    after = cache.snapshot()
    assert sorted(before) == sorted(after)
    assert all(torch.equal(before[k], after[k]) for k in before)


@pytest.mark.parametrize("n", range(6))
def test_partial_commit_is_rollback(lab_model, prompt, n):
    """Committing n rows of a 5-row forward == a plain forward over those n rows (speculative rollback)."""
    _, cache = run_chunks(lab_model, prompt[:, :9], [9])  # odd prefix: the ratio-2 carry is open
    _, ref = run_chunks(lab_model, prompt[:, :9], [9])
    with torch.no_grad():
        out = lab_model(prompt[:, 9:14], cache=cache, commit=False)
        cache.commit(out.pending, n)
        if n:
            lab_model(prompt[:, 9 : 9 + n], cache=ref)
    assert cache.length == 9 + n
    assert_same_snapshot(cache.snapshot(), ref.snapshot(), atol=1e-12)
    # and decoding continues identically from both caches
    with torch.no_grad():
        nxt = prompt[:, 9 + n : 10 + n]
        torch.testing.assert_close(
            lab_model(nxt, cache=cache).logits, lab_model(nxt, cache=ref).logits, rtol=0, atol=1e-11
        )


def test_commit_rejects_bad_calls(lab_model, prompt):
    _, cache = run_chunks(lab_model, prompt[:, :4], [4])
    with torch.no_grad():
        out = lab_model(prompt[:, 4:7], cache=cache, commit=False)
    with pytest.raises(ValueError, match="commit n = 4 is out of range"):
        cache.commit(out.pending, 4)
    cache.commit(out.pending, 1)
    with pytest.raises(ValueError, match="pending writes start at 4 but the cache holds 5 tokens"):
        cache.commit(out.pending, 1)


def test_trace_tensor_shapes(traced_run, lab_cfg):
    tr, B, S = traced_run["trace"], 2, 37
    D, V, H, E = lab_cfg.dim, lab_cfg.vocab_size, lab_cfg.n_heads, lab_cfg.n_routed_experts
    assert tr.get("1A", "tokens").shape == (B, S)
    assert tr.get("1A", "embedding").shape == (B, S, D)
    assert tr.get("1A", "streams").shape == (B, S, 4, D)
    assert tr.get("1A", "pre_mix").shape == (B, S, 4)
    assert tr.layers("2A") == list(range(lab_cfg.n_layers))
    for layer in range(lab_cfg.n_layers):
        assert tr.get("2A", "attn_comb", layer).shape == (B, S, 4, 4)
        assert tr.get("2A", "ffn_comb", layer).shape == (B, S, 4, 4)
        assert tr.get("2A", "attn_pre", layer).shape == (B, S, 4)
        T = 37 + {0: 0, 1: 18, 2: 18, 3: 18}.get(layer, 37)
        assert tr.get("4A", "probs", layer).shape == (B, S, H, T)
        assert tr.get("4A", "attn_input", layer).shape == (B, S, D)
        assert tr.get("5A", "scores", layer).shape == (B, S, E)
    assert tr.layers("3C") == [1, 3, 4, 6]
    assert tr.layers("3B") == [1, 3, 4]
    for layer, T in ((1, 18), (3, 18), (4, 37), (6, 37)):
        assert tr.get("3C", "scores", layer).shape == (B, S, T)
    assert tr.get("head", "logits").shape == (B, S, V)
    torch.testing.assert_close(tr.get("head", "logits"), traced_run["out"].logits, rtol=0, atol=0)
    assert traced_run["out"].hidden.shape == (B, S, D)
    assert sorted(traced_run["out"].taps) == [3, 4]
    # streams are the embedding copied into every lane
    emb = tr.get("1A", "embedding")
    assert all(torch.equal(tr.get("1A", "streams")[:, :, c], emb) for c in range(4))
    with pytest.raises(KeyError, match="trace has no 'nope' for step 4A layer 0"):
        tr.get("4A", "nope", 0)


@pytest.mark.parametrize(
    "make,match",
    [
        (lambda V: torch.zeros(1, 3), "int64 tensor of shape"),
        (lambda V: torch.zeros(3, dtype=torch.long), "int64 tensor of shape"),
        (lambda V: torch.zeros(1, 3, dtype=torch.int32), "int64 tensor of shape"),
        (lambda V: [[1, 2, 3]], "int64 tensor of shape"),
        (lambda V: torch.zeros(1, 0, dtype=torch.long), "tokens is empty"),
        (lambda V: torch.tensor([[1, V - 1, V]]), "token id {V} is out of range: allowed 0..{V1}"),
        (lambda V: torch.tensor([[1, -3, 2]]), "token id -3 is out of range: allowed 0.."),
        (lambda V: torch.zeros(1, 257, dtype=torch.long), "sequence length 257 exceeds max_seq_len = 256"),
    ],
    ids=["float", "1-D", "int32", "list", "empty", "too-big-id", "negative-id", "too-long"],
)
def test_bad_tokens_raise_value_error(lab_model, make, match):
    V = lab_model.cfg.vocab_size
    match = match.replace("{V}", str(V)).replace("{V1}", str(V - 1))
    with pytest.raises(ValueError, match=match):
        with torch.no_grad():
            lab_model(make(V))


def test_bad_tokens_against_cache(lab_model, lab_cfg):
    cache = lab_model.new_cache(2)
    with pytest.raises(ValueError, match="tokens batch 1 differs from the cache batch 2"):
        with torch.no_grad():
            lab_model(torch.zeros(1, 2, dtype=torch.long), cache=cache)
    with torch.no_grad():
        lab_model(make_tokens(lab_cfg, 2, 250, seed=2)[:, :250], cache=cache, commit=True)
    with pytest.raises(ValueError, match="sequence length 257 exceeds max_seq_len = 256"):
        with torch.no_grad():
            lab_model(torch.zeros(2, 7, dtype=torch.long), cache=cache)
    assert cache.length == 250  # the failed call wrote nothing


def test_zero_batch_raises_value_error(lab_model):
    with pytest.raises(ValueError, match="empty"):
        with torch.no_grad():
            lab_model(torch.zeros(0, 3, dtype=torch.long))


def test_gradients_reach_every_trained_part_through_the_quantized_caches(lab_cfg):
    """QAT: the FP8/FP4 cache simulation passes a straight-through gradient, so the KV projections,
    the compressors and the Engram tables learn. What gets no gradient from the LM loss, by design:
    the router's select-only bias (a load-balancing rule adjusts it), the indexers (their top-k is a
    discrete choice; the real model trains them with a separate distillation loss), and the draft."""
    from dspark_mini import build_model

    m = build_model(lab_cfg, seed=3)
    # 96 tokens: enough that the router sends some to every routed expert of every layer (with 40, one got none)
    x = torch.randint(4, lab_cfg.vocab_size, (3, 33), generator=torch.Generator().manual_seed(3))
    out = m(x[:, :-1])
    torch.nn.functional.cross_entropy(out.logits.reshape(-1, lab_cfg.vocab_size), x[:, 1:].reshape(-1)).backward()
    silent = {n for n, p in m.named_parameters() if p.grad is None or not p.grad.abs().sum() > 0}
    expected = {
        n
        for n, _ in m.named_parameters()
        if n.startswith("mtp.") or n.endswith("ffn.gate.bias") or ".attn.indexer." in n
    }
    assert silent == expected
    for name in (
        "layers.0.attn.wkv.weight",
        "layers.1.attn.compressor.wgate.weight",
        "layers.0.engram.embed.weight",
        "layers.4.attn.compressor.wkv.weight",
        "layers.0.ffn.experts.0.w1.weight",
    ):
        assert name not in silent

"""Baseline drafters (MTP-1, Eagle3-lite): shapes, greedy losslessness in the speculative loop, valid sampled rounds,
propose == the training-mode forward over the full sequence, the TTT mask against a naive per-row reference,
training lowers the loss, checkpoints round-trip and reject bad files, bad arguments are refused by name."""

from __future__ import annotations

import json

import pytest
import torch
import torch.nn.functional as F
from safetensors.torch import save_file

from dspark_mini import build_model, get_config
from dspark_mini.baselines import (
    FORMAT,
    Eagle3Draft,
    Eagle3Drafter,
    MTP1Draft,
    MTP1Drafter,
    config_diff,
    draft_heads,
    load_baseline,
    read_baseline_header,
    save_baseline,
    window_mask,
)
from dspark_mini.checkpoint import CheckpointError, config_to_dict
from dspark_mini.checkpoint import save as save_model
from dspark_mini.speculative import generate_plain, generate_speculative
from lab.realtext import token_stream
from lab.training.baselines import eagle3_losses, mtp1_losses, train_eagle3, train_mtp1

LAB_V = get_config("lab").vocab_size

torch.set_num_threads(1)

KINDS = {"mtp1": (MTP1Draft, MTP1Drafter), "eagle3": (Eagle3Draft, Eagle3Drafter)}


def ids(cfg, batch: int, seqlen: int, seed: int) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, cfg.vocab_size, (batch, seqlen), generator=g, dtype=torch.long)


@pytest.fixture(scope="module")
def stream():
    return token_stream("train")[:3000]  # the first 3 k ids of the real-text training stream


@pytest.fixture(scope="module")
def untrained(lab_cfg):
    return {"mtp1": MTP1Draft(lab_cfg, seed=0), "eagle3": Eagle3Draft(lab_cfg, seed=0)}


@pytest.fixture(scope="module")
def trained(lab_model, stream):
    m, log_m = train_mtp1(lab_model, stream, steps=10, batch=4, context=16, seed=1)
    e, log_e = train_eagle3(lab_model, stream, steps=10, batch=4, context=16, seed=1)
    return {"mtp1": m, "eagle3": e, "logs": {"mtp1": log_m, "eagle3": log_e}}


class Recording:
    """A drafter that forwards to another and keeps (cache length, anchors, DraftOutput) of every propose."""

    def __init__(self, inner):
        self.inner, self.kind, self.has_confidence, self.calls = inner, inner.kind, inner.has_confidence, []

    def max_block(self, model):
        return self.inner.max_block(model)

    def reset(self, batch):
        self.inner.reset(batch)

    def observe(self, tokens, out, n):
        self.inner.observe(tokens, out, n)

    def propose(self, model, cache, anchors, k, temperature, generator, trace=None):
        d = self.inner.propose(model, cache, anchors, k, temperature, generator, trace)
        self.calls.append((cache.length, anchors.clone(), d))
        return d


# ---- pieces and shapes --------------------------------------------------------------------------------
def test_window_mask_and_heads_by_hand():
    m = window_mask(torch.arange(5), torch.arange(5), 3)
    expected = [[i - 3 < t <= i for t in range(5)] for i in range(5)]
    assert m.tolist() == expected
    assert window_mask(torch.tensor([9]), torch.arange(6, 10), 3).tolist() == [[False, True, True, True]]
    assert (draft_heads(64), draft_heads(12), draft_heads(6)) == (4, 2, 1)  # even head widths
    with pytest.raises(ValueError, match="dim = 3"):
        draft_heads(3)


def test_module_shapes_and_dtypes(lab_model, lab_cfg, untrained):
    B, S, D, V, k = 2, 10, lab_cfg.dim, lab_cfg.vocab_size, lab_cfg.dspark_block_size
    x = ids(lab_cfg, B, S + k, seed=1)
    with torch.no_grad():
        out = lab_model(x)
        h, logits = untrained["mtp1"](lab_model, out.hidden[:, :S], x[:, 1 : S + 1])
        assert h.shape == (B, S, D) and logits.shape == (B, S, V)
        taps = untrained["eagle3"].tap_concat(out.taps)
        assert taps.shape == (B, S + k, len(lab_cfg.dspark_target_layer_ids) * D)
        h, logits = untrained["eagle3"](lab_model, taps[:, :S], x)
        assert h.shape == (B, k, S, D) and logits.shape == (B, k, S, V)
    for mod in untrained.values():
        assert {p.dtype for p in mod.parameters()} == {torch.float64}  # the lab preset's dtype
        assert not any(n.startswith(("embed", "head")) for n in mod.state_dict())  # the target's, not stored


def test_config_diff_ignores_only_the_dspark_draft_fields(lab_cfg):
    """A baseline reads the target, never the model's own DSpark draft: its Markov head may differ, the rest not."""
    assert config_diff(lab_cfg, lab_cfg.replace(dspark_markov_rank=8, dspark_tap_mix="concat_proj")) == []
    assert config_diff(lab_cfg, lab_cfg.replace(window_size=16, dspark_block_size=2)) == [
        "window_size",
        "dspark_block_size",
    ]


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_propose_shapes(lab_model, lab_cfg, untrained, kind):
    drafter = KINDS[kind][1](untrained[kind])
    prompt = ids(lab_cfg, 2, 11, seed=2)
    cache = lab_model.new_cache(2)
    with torch.no_grad():
        out = lab_model(prompt, cache=cache)
    drafter.reset(2)
    drafter.observe(prompt, out, 11)
    k = drafter.max_block(lab_model)
    assert k == (1 if kind == "mtp1" else lab_cfg.dspark_block_size)
    d = drafter.propose(lab_model, cache, prompt[:, -1], k, 1.0, torch.Generator().manual_seed(0))
    B, V, D = 2, lab_cfg.vocab_size, lab_cfg.dim
    assert d.tokens.shape == d.draft_probs.shape == d.confidence.shape == (B, k)
    assert d.logits.shape == d.probs.shape == (B, k, V) and d.hidden.shape == (B, k, D)
    assert d.positions.tolist() == list(range(11, 11 + k))
    assert torch.isnan(d.confidence).all() and not drafter.has_confidence and drafter.kind == kind
    torch.testing.assert_close(d.probs, torch.softmax(d.logits, -1))  # T = 1
    torch.testing.assert_close(d.draft_probs, d.probs.gather(-1, d.tokens[..., None]).squeeze(-1))
    assert drafter.feats.shape[1] == lab_cfg.window_size  # only the last window of rows is kept


# ---- the speculative loop -----------------------------------------------------------------------------
@pytest.fixture(scope="module")
def plain_ref(lab_model, lab_cfg):
    prompt = ids(lab_cfg, 2, 11, seed=3)  # 11 > window 8: the rolling window is exercised at once
    return prompt, generate_plain(lab_model, prompt, 24).tokens


@pytest.mark.parametrize("which", ["untrained", "trained"])
@pytest.mark.parametrize("kind,k", [("mtp1", 1), ("eagle3", 3), ("eagle3", 2)])
def test_greedy_speculative_equals_plain(lab_model, plain_ref, untrained, trained, which, kind, k):
    module = (untrained if which == "untrained" else trained)[kind]
    prompt, expected = plain_ref
    spec = generate_speculative(lab_model, prompt, 24, verify_len=k, drafter=KINDS[kind][1](module))
    assert spec.tokens == expected
    for rs in spec.rounds:
        for r in rs:
            assert r.verify_len <= k and 1 <= r.tau <= r.verify_len + 1
            # greedy: exactly the drafts matching the target's argmax are kept
            kept = 0
            while kept < r.verify_len and r.draft[kept] == r.target_argmax[kept]:
                kept += 1
            assert r.n_accepted == kept


@pytest.mark.parametrize("kind", sorted(KINDS))
def test_temperature_one_rounds_are_valid(lab_model, lab_cfg, trained, kind):
    prompt = ids(lab_cfg, 2, 6, seed=4)
    drafter = KINDS[kind][1](trained[kind])
    k = drafter.max_block(lab_model)
    spec = generate_speculative(lab_model, prompt, 20, temperature=1.0, seed=5, drafter=drafter)
    assert all(len(t) == 20 for t in spec.tokens)
    taus = [r.tau for rs in spec.rounds for r in rs]
    assert all(1 <= t <= k + 1 for t in taus) and len(set(taus)) > 1
    for rs in spec.rounds:
        assert len({len(r.committed) for r in rs}) == 1  # a batch commits the same number of rows
        for r in rs:
            assert all(0 < p <= 1 for p in r.draft_probs) and all(c != c for c in r.confidence)  # NaN confidence
    for b in range(2):  # the rows' commits spell the tokens; the last round may commit past 20 (the output is cut)
        committed = [spec.tokens[b][0]] + [t for r in spec.rows(b) for t in r.committed]
        assert committed[:20] == spec.tokens[b] and len(committed) - 20 < k + 1


@pytest.mark.parametrize("temperature", [0.0, 1.0])
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_propose_equals_the_training_forward_over_the_full_sequence(lab_model, lab_cfg, trained, kind, temperature):
    """The key consistency check: every propose of a whole generation (its window grows past window_size, rows
    arrive from the prefill and from verify forwards with partial commits) equals the training-mode forward of the
    module over the final sequence — one-shot target forward, all rows, no window bookkeeping."""
    module = trained[kind]
    rec = Recording(KINDS[kind][1](module))
    prompt = ids(lab_cfg, 2, 5, seed=6)
    spec = generate_speculative(lab_model, prompt, 26, temperature=temperature, seed=7, drafter=rec)
    full = torch.cat([prompt, torch.tensor(spec.tokens)], 1)  # [2, 31]
    with torch.no_grad():
        out = lab_model(full)
        assert len(rec.calls) == len(spec.rounds) > 5
        for p, anchors, d in rec.calls:
            assert torch.equal(full[:, p], anchors)  # the anchor sits at position p
            if kind == "mtp1":
                h, logits = module(lab_model, out.hidden[:, :p], torch.cat([full[:, 1:p], anchors[:, None]], 1))
                ref_logits, ref_h = logits[:, -1:], h[:, -1:]  # row p − 1
            else:
                k = d.tokens.size(1)
                toks = torch.cat([full[:, :p], anchors[:, None], d.tokens[:, : k - 1]], 1)  # [2, p + k]
                h, logits = module(lab_model, module.tap_concat(out.taps)[:, :p], toks, k)
                ref_logits, ref_h = logits[:, :, p - 1], h[:, :, p - 1]  # every step of row p − 1
            torch.testing.assert_close(d.logits, ref_logits, rtol=0, atol=1e-9)
            torch.testing.assert_close(d.hidden, ref_h, rtol=0, atol=1e-9)
            if temperature == 0:
                assert torch.equal(d.tokens, ref_logits.argmax(-1))


def naive_row(module, model, inputs: list[tuple[torch.Tensor, int]]) -> torch.Tensor:
    """The block output of the last row given explicit rows (input [B, D], RoPE position), one key at a time."""
    blk = module.block
    qkv = [blk.qkv(x[:, None], torch.tensor([pos])) for x, pos in inputs]  # each q, k, v [B, 1, H, hd]
    q = qkv[-1][0][:, 0]  # [B, H, hd]
    scores = torch.stack([(q * k[:, 0]).sum(-1) for _, k, _ in qkv], -1) / blk.head_dim**0.5  # [B, H, n]
    w = torch.softmax(scores, -1)
    o = sum(w[..., t, None] * v[:, 0] for t, (_, _, v) in enumerate(qkv))  # [B, H, hd]
    x = inputs[-1][0] + blk.wo(o.flatten(1))  # [B, D]
    u = blk.ffn_norm(x)
    return x + blk.w2(F.silu(blk.w1(u)) * blk.w3(u))


def test_eagle3_ttt_mask_against_a_naive_per_row_reference(lab_model, lab_cfg, trained):
    """Step j of row i sees the step-0 rows i − W < t ≤ i and its own rows of steps 1..j (RoPE position i + s)."""
    module, W, k = trained["eagle3"], lab_cfg.window_size, lab_cfg.dspark_block_size
    S = 12
    x = ids(lab_cfg, 2, S + k, seed=8)
    with torch.no_grad():
        taps = module.tap_concat(lab_model(x).taps)[:, :S]
        hidden, _ = module(lab_model, taps, x, k)  # [2, k, S, D]
        for i in (0, 3, 11):
            ctx = [
                (module.row_input(lab_model, x[:, t + 1 : t + 2], module.fc(taps[:, t : t + 1]))[:, 0], t)
                for t in range(max(0, i - W + 1), i + 1)
            ]
            for j in range(k):
                chain = [
                    (module.row_input(lab_model, x[:, i + 1 + s : i + 2 + s], hidden[:, s - 1, i : i + 1])[:, 0], i + s)
                    for s in range(1, j + 1)
                ]
                ref = naive_row(module, lab_model, ctx + chain)
                torch.testing.assert_close(hidden[:, j, i], ref, rtol=0, atol=1e-10)


def test_mtp1_row_sees_only_its_window(lab_model, lab_cfg, untrained):
    """Changing a row outside the window of row i (or after it) leaves row i unchanged."""
    module, W = untrained["mtp1"], lab_cfg.window_size
    g = torch.Generator().manual_seed(9)
    hidden = torch.randn(1, 14, lab_cfg.dim, generator=g, dtype=torch.float64)
    nxt = ids(lab_cfg, 1, 14, seed=9)
    with torch.no_grad():
        _, a = module(lab_model, hidden, nxt)
        hidden2 = hidden.clone()
        hidden2[:, 13 - W] += 1.0  # just outside row 13's window, inside row 12's
        _, b = module(lab_model, hidden2, nxt)
    torch.testing.assert_close(a[:, 13], b[:, 13], rtol=0, atol=0)
    assert not torch.allclose(a[:, 12], b[:, 12])
    torch.testing.assert_close(a[:, : 13 - W], b[:, : 13 - W], rtol=0, atol=0)


# ---- training -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_training_lowers_the_loss_on_a_fixed_batch_and_leaves_the_target_alone(lab_model, lab_cfg, stream, kind):
    before = {n: p.detach().clone() for n, p in lab_model.named_parameters()}
    k = lab_cfg.dspark_block_size
    g = torch.Generator().manual_seed(10)
    x = torch.stack(
        [stream[s : s + 16 + (2 if kind == "mtp1" else k)] for s in torch.randint(0, 2000, (4,), generator=g)]
    )
    losses = (lambda m: mtp1_losses(m, lab_model, x)) if kind == "mtp1" else (lambda m: eagle3_losses(m, lab_model, x))
    with torch.no_grad():
        start = float(losses(KINDS[kind][0](lab_cfg, seed=2))["loss"])  # the init the trainer starts from
    train = train_mtp1 if kind == "mtp1" else train_eagle3
    seen = []
    module, log = train(
        lab_model, stream, steps=16, batch=4, context=16, lr=3e-3, seed=2, on_step=lambda s, l: seen.append(s)
    )
    with torch.no_grad():
        end = float(losses(module)["loss"])
    assert end < start - 0.05, (start, end)
    assert log.steps == seen == list(range(1, 17)) and len(log.train_loss) == len(log.val_accuracy) == 16
    assert log.seconds > 0 and not module.training and not lab_model.training
    for n, p in lab_model.named_parameters():
        assert p.grad is None and torch.equal(p, before[n]), n  # frozen target: no gradient, no change


def test_trained_logs(trained):
    for kind in KINDS:
        log = trained["logs"][kind]
        assert len(log.train_loss) == 10 and all(l == l for l in log.train_loss)
        assert all(0 <= a <= 1 for a in log.val_accuracy)


# ---- checkpoints --------------------------------------------------------------------------------------
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_save_load_round_trip(tmp_path, lab_model, lab_cfg, trained, kind):
    module = trained[kind]
    path = save_baseline(module, tmp_path / f"{kind}.safetensors", {"steps": 10})
    header = read_baseline_header(path)
    assert header["kind"] == kind and header["meta"] == {"steps": 10} and header["format"] == FORMAT
    assert header["config"] == config_to_dict(lab_cfg)
    loaded = load_baseline(path, lab_model)
    assert type(loaded) is type(module) and not loaded.training
    for (n, p), (n2, q) in zip(module.state_dict().items(), loaded.state_dict().items(), strict=True):
        assert n == n2 and torch.equal(p, q)
    prompt = ids(lab_cfg, 1, 9, seed=11)
    a = generate_speculative(lab_model, prompt, 10, temperature=1.0, seed=3, drafter=KINDS[kind][1](module))
    b = generate_speculative(lab_model, prompt, 10, temperature=1.0, seed=3, drafter=KINDS[kind][1](loaded))
    assert a.tokens == b.tokens and [r.draft_probs for r in a.rows()] == [r.draft_probs for r in b.rows()]
    assert not list(tmp_path.glob(".*.tmp"))  # the atomic write left no temporary file


def rewrite(src, dst, header_changes=None, tensors=None) -> None:
    """Copy a baseline file with header fields and/or tensors replaced."""
    from safetensors import safe_open

    with safe_open(str(src), framework="pt") as f:
        md = dict(f.metadata())
        ts = {n: f.get_tensor(n) for n in f.keys()}
    md.update(header_changes or {})
    ts = tensors(ts) if tensors else ts
    save_file(ts, str(dst), metadata=md)


def test_bad_files_raise_checkpoint_error(tmp_path, lab_model, lab_cfg, untrained):
    good = save_baseline(untrained["eagle3"], tmp_path / "good.safetensors")
    cases = []

    junk = tmp_path / "junk.safetensors"
    junk.write_bytes(b"\x80\x04 not a checkpoint")
    cases.append((junk, "not a safetensors file"))
    model_ckpt = save_model(lab_model, tmp_path / "draft.safetensors", part="draft")
    cases.append((model_ckpt, "not a baseline drafter checkpoint.*dspark_mini.checkpoint.load"))
    for name, change, match in (
        ("kind", {"kind": "medusa"}, "kind = 'medusa'"),
        ("version", {"version": "9"}, "version '9'"),
        ("meta", {"meta": "[1, 2"}, "'meta' JSON"),
    ):
        rewrite(good, tmp_path / f"{name}.safetensors", change)
        cases.append((tmp_path / f"{name}.safetensors", match))
    rewrite(good, tmp_path / "mtp_kind.safetensors", {"kind": "mtp1"})  # eagle3 tensors under the mtp1 kind
    cases.append((tmp_path / "mtp_kind.safetensors", "missing.*unexpected.*fc.weight"))
    rewrite(
        good,
        tmp_path / "shape.safetensors",
        tensors=lambda ts: {**ts, "fc.weight": ts["fc.weight"][:, :3].contiguous()},
    )
    cases.append((tmp_path / "shape.safetensors", "tensor 'fc.weight': file has shape"))
    rewrite(good, tmp_path / "dtype.safetensors", tensors=lambda ts: {**ts, "norm.weight": ts["norm.weight"].float()})
    cases.append((tmp_path / "dtype.safetensors", "tensor 'norm.weight'.*F32"))
    rewrite(
        good, tmp_path / "missing.safetensors", tensors=lambda ts: {n: t for n, t in ts.items() if n != "proj.weight"}
    )
    cases.append((tmp_path / "missing.safetensors", "missing \\['proj.weight'\\]"))
    other = save_baseline(MTP1Draft(get_config("lab", window_size=16)), tmp_path / "other.safetensors")
    cases.append((other, "different target config — window_size: file 16, model 8"))
    bad_cfg = dict(config_to_dict(lab_cfg), dim=-1)
    rewrite(good, tmp_path / "cfg.safetensors", {"config": json.dumps(bad_cfg)})
    cases.append((tmp_path / "cfg.safetensors", "config is invalid"))
    cases.append((tmp_path / "absent.safetensors", "no checkpoint file"))
    for path, match in cases:
        with pytest.raises(CheckpointError, match=match):
            load_baseline(path, lab_model)
    with pytest.raises(CheckpointError, match="must end in .safetensors"):
        save_baseline(untrained["mtp1"], tmp_path / "x.pt")
    with pytest.raises(CheckpointError, match="meta must be a dict"):
        save_baseline(untrained["mtp1"], tmp_path / "x.safetensors", meta=[1])
    with pytest.raises(CheckpointError, match="needs an MTP1Draft or Eagle3Draft"):
        save_baseline(lab_model, tmp_path / "x.safetensors")


# ---- bad arguments ------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "changes,match",
    [
        ({"steps": 0}, "steps = 0 is invalid: allowed an integer ≥ 1"),
        ({"batch": 1.5}, "batch = 1.5 is invalid"),
        ({"context": 0}, "context = 0 is invalid"),
        ({"context": 300}, r"context = 300 is invalid: allowed 1\.\.25[0-9]"),
        ({"lr": 0.0}, "lr = 0.0 is invalid: allowed a finite number > 0"),
        ({"lr": float("nan")}, "lr = nan is invalid"),
        ({"train_ids": torch.zeros(2, 50, dtype=torch.long)}, "train_ids must be a 1-D int64"),
        ({"train_ids": torch.zeros(10, dtype=torch.long)}, "train_ids has 10 ids: allowed ≥"),
        ({"train_ids": torch.full((100,), 10_000)}, f"train_ids holds an id out of range: allowed 0..{LAB_V - 1}"),
        ({"module": "x"}, "module must be a"),
    ],
)
@pytest.mark.parametrize("train", [train_mtp1, train_eagle3])
def test_bad_training_arguments(lab_model, stream, train, changes, match):
    kwargs = dict(train_ids=stream, steps=1, batch=2, context=8, lr=1e-3) | changes
    with pytest.raises(ValueError, match=match):
        train(lab_model, **kwargs)


def test_bad_training_target_and_decay(lab_model, stream):
    with pytest.raises(ValueError, match="target must be a dspark_mini Transformer"):
        train_mtp1("model", stream)
    with pytest.raises(ValueError, match="decay = 1.5 is invalid: allowed 0 < decay ≤ 1"):
        train_eagle3(lab_model, stream, steps=1, decay=1.5)
    other = MTP1Draft(get_config("lab", window_size=16))
    with pytest.raises(ValueError, match="module was built for a different target config"):
        train_mtp1(lab_model, stream, steps=1, module=other)


def test_bad_drafter_use(lab_model, lab_cfg, untrained):
    prompt = ids(lab_cfg, 2, 6, seed=12)
    with pytest.raises(ValueError, match="verify_len = 2 is invalid: allowed 1..1"):
        generate_speculative(lab_model, prompt, 8, verify_len=2, drafter=MTP1Drafter(untrained["mtp1"]))
    k = lab_cfg.dspark_block_size
    with pytest.raises(ValueError, match=f"verify_len = {k + 1} is invalid: allowed 1..{k}"):
        generate_speculative(lab_model, prompt, 8, verify_len=k + 1, drafter=Eagle3Drafter(untrained["eagle3"]))
    with pytest.raises(ValueError, match="module must be a MTP1Draft"):
        MTP1Drafter(untrained["eagle3"])
    d = Eagle3Drafter(untrained["eagle3"])
    cache = lab_model.new_cache(2)
    with torch.no_grad():
        out = lab_model(prompt, cache=cache)
    with pytest.raises(ValueError, match="call reset"):
        d.observe(prompt, out, 6)
    with pytest.raises(ValueError, match="batch = 0 is invalid"):
        d.reset(0)
    d.reset(2)
    with pytest.raises(ValueError, match="seen no committed rows"):
        d.propose(lab_model, cache, prompt[:, -1], 2, 0.0, None)
    with pytest.raises(ValueError, match="n = 7 is invalid: allowed 1..6"):
        d.observe(prompt, out, 7)
    with pytest.raises(ValueError, match="tokens has shape"):
        d.observe(prompt[:1], out, 6)
    d.observe(prompt, out, 5)  # one row short of the cache
    with pytest.raises(ValueError, match="the cache holds 6 positions but the drafter observed 5"):
        d.propose(lab_model, cache, prompt[:, -1], 2, 0.0, None)
    d.reset(2)
    d.observe(prompt, out, 6)
    with pytest.raises(ValueError, match="anchors must be an int64 tensor"):
        d.propose(lab_model, cache, prompt[:, -1:], 2, 0.0, None)
    with pytest.raises(ValueError, match="anchors holds an id out of range"):
        d.propose(lab_model, cache, torch.tensor([0, 10_000]), 2, 0.0, None)
    with pytest.raises(ValueError, match="temperature = -1"):
        d.propose(lab_model, cache, prompt[:, -1], 2, -1.0, None)
    with pytest.raises(ValueError, match=r"model config differs from the draft's in \['window_size'\]"):
        Eagle3Drafter(Eagle3Draft(get_config("lab", window_size=16))).propose(
            lab_model, cache, prompt[:, -1], 2, 0.0, None
        )
    k = lab_cfg.dspark_block_size
    with pytest.raises(ValueError, match=f"steps = {k + 1} is invalid: allowed 1..{k}"):
        untrained["eagle3"](lab_model, torch.zeros(1, 4, 2 * lab_cfg.dim, dtype=torch.float64), prompt[:1], k + 1)


def test_the_loss_choices_against_a_naive_reference():
    """ "ce": −log p_d(x); "distill": 0.1·CE + 0.9·Σ|p_d − p_t|; "soft-ce": −Σ p_t log p_d — per row."""
    from lab.training.baselines import against_target

    g = torch.Generator().manual_seed(0)
    logp = torch.log_softmax(torch.randn(3, 7, generator=g, dtype=torch.float64), -1)
    p_t = torch.softmax(torch.randn(3, 7, generator=g, dtype=torch.float64), -1)
    labels = torch.tensor([1, 6, 0])
    for r in range(3):
        ce = -float(logp[r, labels[r]])
        l1 = sum(abs(float(logp[r, v].exp() - p_t[r, v])) for v in range(7))
        soft = -sum(float(p_t[r, v] * logp[r, v]) for v in range(7))
        assert float(against_target(logp, labels, p_t, "ce")[r]) == pytest.approx(ce, abs=1e-12)
        assert float(against_target(logp, labels, p_t, "distill")[r]) == pytest.approx(0.1 * ce + 0.9 * l1, abs=1e-12)
        assert float(against_target(logp, None, p_t, "soft-ce")[r]) == pytest.approx(soft, abs=1e-12)


@pytest.mark.parametrize("which", ["eagle3", "mtp1"])
def test_selection_keeps_the_best_held_out_checkpoint(which):
    """Measured every step on held-out windows: the module ends with the parameters of the best measurement (its
    acceptance re-measured equals the best recorded), and the curve is in the log."""
    from lab.training.baselines import eagle3_losses, mtp1_losses, train_eagle3, train_mtp1
    from lab.training.train import Selection

    target = build_model(get_config("lab"), seed=0)
    g = torch.Generator().manual_seed(1)
    k = target.cfg.dspark_block_size
    length = 16 + (k if which == "eagle3" else 2)
    held_out = torch.randint(4, target.cfg.vocab_size, (3, length), generator=g)
    train_ids = torch.randint(4, target.cfg.vocab_size, (400,), generator=g)
    select = Selection(held_out, every=1)
    trainer = train_eagle3 if which == "eagle3" else train_mtp1
    loss = "distill"
    module, log = trainer(target, train_ids, steps=4, batch=2, context=16, lr=0.05, seed=0, select=select, loss=loss)
    assert log.select_steps == [1, 2, 3, 4] and len(log.select_accept) == 4
    assert log.best_step == 1 + max(range(4), key=lambda i: (log.select_accept[i], -i))
    with torch.no_grad():
        again = (
            eagle3_losses(module, target, held_out, loss=loss)
            if which == "eagle3"
            else mtp1_losses(module, target, held_out, loss)
        )["accept"]
    assert float(again) == pytest.approx(max(log.select_accept), abs=1e-9)


def test_a_bad_recipe_loss_is_named():
    from lab.training.rebuild import Recipe

    with pytest.raises(ValueError, match="dflash_loss = 'kl' is invalid: allowed ce, distill"):
        Recipe(dflash_loss="kl")
    with pytest.raises(ValueError, match="select_every"):
        Recipe(select_every=-1)

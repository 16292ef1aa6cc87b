"""Training the target: the loss falls, the right parts learn, the checkpoint reproduces
its recorded numbers, and the CLI commands behave."""

from __future__ import annotations

import dataclasses
import json
import math

import pytest
import torch

from dspark_mini import build_model, get_config
from dspark_mini.checkpoint import load_model, read_header
from lab.cli import main
from lab.realtext import SOURCES, token_stream
from lab.training.train import evaluate, train_target, windows
from lab.weights import training_streams


@pytest.fixture(scope="module")
def streams():
    """The first ids of the real-text corpus's training and held-out streams: small, so the tests stay fast."""
    return token_stream("train")[:4000], token_stream("val")[:1200]


@pytest.fixture(scope="module")
def trained(streams):
    cfg = get_config("lab")
    return train_target(cfg, *streams, steps=24, batch=8, seq_len=32, seed=1, eval_every=8)


def test_loss_falls_and_accuracy_rises(trained) -> None:
    _, log = trained
    assert len(log.train_loss) == 24 and log.val_steps == [8, 16, 24]
    assert log.train_loss[-1] < 0.7 * log.train_loss[0]
    assert log.val_loss[-1] < log.val_loss[0] and log.val_accuracy[-1] > log.val_accuracy[0]


def test_what_learns_and_what_does_not(trained) -> None:
    model, _ = trained
    init = build_model(get_config("lab"), seed=1)
    assert next(model.parameters()).dtype == torch.float64  # cast back to the lab preset's dtype
    changed = {
        n
        for (n, p), (_, q) in zip(model.named_parameters(), init.named_parameters(), strict=True)
        if not torch.equal(p, q)
    }
    assert not any(n.startswith("mtp.") for n in changed)  # the draft trains later, against this target
    assert not any(".attn.indexer." in n for n in changed)  # top-k is discrete: no gradient reaches it
    assert "layers.0.attn.wkv.weight" in changed and "layers.0.engram.embed.weight" in changed  # QAT reaches them
    # the select-only bias moves by the balancing rule: γ·sign(mean − load) per step, never more
    bias, bias0 = model.layers[0].ffn.gate.bias, init.layers[0].ffn.gate.bias
    step = float((bias - bias0).detach().abs().max())  # trained in float32: allow its rounding
    assert "layers.0.ffn.gate.bias" in changed and 0 < step <= 24 * 1e-3 * (1 + 1e-5)


def test_windows_come_from_the_stream(streams) -> None:
    ids = streams[0]
    w = windows(ids, 4, 16, torch.Generator().manual_seed(0))
    assert w.shape == (4, 17)
    starts = [next(i for i in range(ids.numel() - 16) if torch.equal(ids[i : i + 17], row)) for row in w]
    assert len(starts) == 4


def test_cli_trains_saves_and_the_checkpoint_reproduces_its_numbers(tmp_path, capsys, streams) -> None:
    out = tmp_path / "target.safetensors"
    argv = [
        "train",
        "target",
        "--steps",
        "6",
        "--batch",
        "4",
        "--seq-len",
        "24",
        "--seed",
        "2",
        "--out",
        str(out),
        "--json",
    ]
    assert main(argv) == 0
    report = json.loads(capsys.readouterr().out)
    head = read_header(out)
    assert head["part"] == "target" and head["meta"]["steps"] == 6
    model = load_model(out)
    train, val = training_streams(2)
    assert head["meta"]["corpus"] == "lab/realtext" and head["meta"]["train_tokens"] == train.numel()
    loss, acc = evaluate(model, val, 24)
    assert abs(loss - report["meta"]["val_loss"]) < 1e-4 and abs(acc - report["meta"]["val_accuracy"]) < 1e-9


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["train", "target", "--steps", "0"], "steps = 0 is invalid"),
        (["train", "target", "--out", "weights.pt"], "ending in .safetensors"),
        (["train", "target", "--seq-len", "0"], "--seq-len = 0 is invalid"),
        (["data", "--lang", "fr"], "--lang"),
    ],
)
def test_bad_training_input(capsys, argv, needle) -> None:
    assert main(argv) == 2
    assert needle in " ".join(capsys.readouterr().err.split())


def test_data_command_json(capsys) -> None:
    assert main(["data", "--json"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert list(d["sources"]) == list(SOURCES) and d["corpus"] == "lab/realtext"
    assert d["train_stream_tokens"] == token_stream("train").numel()  # what `train target` reads


def test_draft_losses_match_a_naive_computation() -> None:
    from lab.training.train import draft_losses

    g = torch.Generator().manual_seed(0)
    logits, conf = torch.randn(2, 3, 7, generator=g), torch.randn(2, 3, generator=g)
    labels = torch.randint(0, 7, (2, 3), generator=g)
    p_t = torch.softmax(torch.randn(2, 3, 7, generator=g), -1)
    got = draft_losses(logits, conf, labels, p_t, gamma=4.0)
    w = [math.exp(-k / 4.0) for k in range(3)]
    ce = l1 = bce = 0.0
    for b in range(2):
        for k in range(3):
            p_d = torch.softmax(logits[b, k], -1)
            ce += w[k] * -math.log(float(p_d[labels[b, k]]))
            dist = float((p_d - p_t[b, k]).abs().sum())
            l1 += w[k] * dist
            c, y = 1 / (1 + math.exp(-float(conf[b, k]))), 1 - dist / 2
            bce += w[k] * -(y * math.log(c) + (1 - y) * math.log(1 - c))
    norm = 2 * sum(w)
    assert abs(float(got["ce"]) - ce / norm) < 1e-5 and abs(float(got["l1"]) - l1 / norm) < 1e-5
    assert abs(float(got["conf"]) - bce / norm) < 1e-5


def test_draft_training_changes_only_the_draft_and_raises_acceptance(trained, streams) -> None:
    from lab.training.train import train_draft

    model, _ = trained
    before = {n: p.detach().clone() for n, p in model.named_parameters()}
    log = train_draft(model, streams[0], steps=30, batch=8, context=16, seed=3)
    changed = {n for n, p in model.named_parameters() if not torch.equal(p, before[n])}
    assert changed and all(n.startswith("mtp.") for n in changed)  # embed, head and the target stay frozen
    assert "mtp.markov_head.embed.weight" in changed and "mtp.confidence_head.weight" in changed
    first, last = sum(log.val_accuracy[:5]) / 5, sum(log.val_accuracy[-5:]) / 5
    assert last > first  # the analytic acceptance 1 − ½‖p_d − p_t‖₁ on the training blocks rises


def test_cli_trains_a_draft_against_a_saved_target(tmp_path, capsys) -> None:
    target, draft = tmp_path / "t.safetensors", tmp_path / "d.safetensors"
    common = ["--batch", "4", "--seq-len", "16", "--json"]
    assert main(["train", "target", "--steps", "3", "--out", str(target), *common]) == 0
    capsys.readouterr()
    assert main(["train", "draft", "--target", str(target), "--steps", "4", "--out", str(draft), *common]) == 0
    report = json.loads(capsys.readouterr().out)
    assert read_header(draft)["part"] == "draft" and report["meta"]["kind"] == "dspark"
    assert len(report["curve"]["loss"]) == 4
    base = load_model(target)
    both = load_model(target, draft)
    names = [n for n, _ in both.named_parameters()]
    same = {
        n for (n, p), (_, q) in zip(both.named_parameters(), base.named_parameters(), strict=True) if torch.equal(p, q)
    }
    assert {n for n in names if not n.startswith("mtp.")} <= same  # the draft file changed only the draft
    assert any(n.startswith("mtp.") and n not in same for n in names)
    assert (
        main(["train", "draft", "--target", str(tmp_path / "missing.safetensors"), "--steps", "1", "--out", str(draft)])
        == 2
    )


def test_dflash_baseline_trains_without_the_sequential_part(streams) -> None:
    from lab.training.train import train_draft

    model = build_model(get_config("lab"), seed=5)
    conf_before = model.mtp.confidence_head.weight.detach().clone()
    train_draft(model, streams[0], steps=4, batch=4, context=12, seed=5, kind="dflash")
    assert torch.count_nonzero(model.mtp.markov_head.head.weight) == 0  # W2 = 0: no Markov bias
    assert torch.equal(model.mtp.confidence_head.weight, conf_before)  # no confidence head training
    with pytest.raises(ValueError, match="kind = 'eagle9' is invalid"):
        train_draft(model, streams[0], steps=1, kind="eagle9")


@pytest.mark.parametrize("kind", ["dspark-rnn", "eagle3", "mtp1"])
def test_cli_trains_every_drafter_kind(tmp_path, capsys, kind) -> None:
    from dspark_mini.baselines import load_baseline, read_baseline_header
    from dspark_mini.speculative import generate_plain, generate_speculative
    from lab.weights import load_drafter

    target = tmp_path / "target.safetensors"
    common = ["--batch", "2", "--seq-len", "16", "--json"]
    assert main(["train", "target", "--steps", "2", "--out", str(target), *common]) == 0
    capsys.readouterr()
    out = tmp_path / f"{kind}.safetensors"
    assert (
        main(["train", "draft", "--kind", kind, "--target", str(target), "--steps", "3", "--out", str(out), *common])
        == 0
    )
    report = json.loads(capsys.readouterr().out)
    assert report["meta"]["kind"] == kind and len(report["curve"]["loss"]) == 3
    if kind == "dspark-rnn":
        assert read_header(out)["config"]["dspark_markov_kind"] == "rnn"
        model, drafter = load_drafter(kind, tmp_path)
        assert type(model.mtp.markov_head).__name__ == "RNNHead"
    else:
        assert read_baseline_header(out)["kind"] == kind
        load_baseline(out, load_model(target))
        model, drafter = load_drafter(kind, tmp_path)
    prompt = torch.randint(4, model.cfg.vocab_size, (1, 9), generator=torch.Generator().manual_seed(1))
    assert generate_speculative(model, prompt, 8, drafter=drafter).tokens == generate_plain(model, prompt, 8).tokens


def test_model_for_draft_refuses_a_draft_file_and_a_bad_kind(tmp_path) -> None:
    from dspark_mini.checkpoint import CheckpointError, save
    from lab.training.train import model_for_draft

    model = build_model(get_config("lab"), seed=0)
    save(model, tmp_path / "target.safetensors", part="target")
    save(model, tmp_path / "draft.safetensors", part="draft")
    assert type(model_for_draft(tmp_path / "target.safetensors", "dspark-rnn").mtp.markov_head).__name__ == "RNNHead"
    with pytest.raises(CheckpointError, match="holds part 'draft'"):
        model_for_draft(tmp_path / "draft.safetensors", "dspark")
    with pytest.raises(ValueError, match="kind = 'eagle3' is invalid"):
        model_for_draft(tmp_path / "target.safetensors", "eagle3")


def test_training_blocks_draft_what_inference_drafts() -> None:
    """A training block (`anchor_blocks` + `block_rings`: ring at slots 0 … W − 1, block at W … W + k − 1) gives the
    draft's base logits that the inference draft gives at the anchor's true position after a prefill of the tokens
    before it — with a full ring (a ≥ W) and with a partial one (a < W: a short prompt's first rounds). The draft
    sees relative positions only, so the two agree to rounding (FP8 cache simulation off: its rounding depends on
    the absolute rotation)."""
    import dataclasses

    from lab.training.train import anchor_blocks, block_rings

    cfg = dataclasses.replace(get_config("lab"), kv_quant=False)
    model = build_model(cfg, seed=2).eval()
    W, k = cfg.window_size, cfg.dspark_block_size
    x = torch.randint(4, cfg.vocab_size, (1, W + k + 8), generator=torch.Generator().manual_seed(2))  # [1, S + 1]
    hi = x.size(1) - 1 - k  # every anchor 1 … hi, each once
    with torch.no_grad():
        taps, anchor, prev, labels, p_t, ring_pos = anchor_blocks(model, x, hi, torch.Generator().manual_seed(0))
        assert anchor.shape == (hi,) and prev.shape == labels.shape == (hi, k) and ring_pos.shape == (hi, W)
        assert p_t.shape == (hi, k, cfg.vocab_size) and all(t.shape == (hi, W, cfg.dim) for t in taps.values())
        cache = block_rings(model, taps, ring_pos, torch.float64)
        _, _, train_base = model.mtp.block_pass(anchor, model.embed, model.head, cache, k)  # [A, k, V]
        # each block's anchor position: where its k true tokens sit in x (random ids: one place)
        where = [
            next(a for a in range(1, hi + 1) if torch.equal(labels[i], x[0, a + 1 : a + 1 + k])) for i in range(hi)
        ]
        assert sorted(where) == list(range(1, hi + 1))
        for i, a in enumerate(where):
            filled = ring_pos[i][ring_pos[i] >= 0]
            assert torch.equal(filled, torch.arange(W - min(a, W), W))  # the last min(a, W) slots, in order
            inf_cache = model.new_cache(1)
            model(x[:, :a], cache=inf_cache)  # the prompt x_0 … x_{a−1}; the anchor x_a comes next
            _, _, base = model.mtp.block_pass(x[:, a], model.embed, model.head, inf_cache, k)  # [1, k, V]
            assert torch.allclose(base[0], train_base[i], rtol=0, atol=1e-9), a


@pytest.mark.parametrize("kind, layers", [("dspark", 3), ("dflash", 5), ("dspark", 1)])
def test_drafters_of_their_own_depth_share_one_target(tmp_path, streams, kind, layers) -> None:
    """A drafter sets its own depth (the paper: a 2-layer DSpark against a 5-layer DFlash; V4.1: 3): its file records
    n_mtp_layers and the draft layers' ratios, the target file is the same, and both load back as one model whose
    greedy speculative output equals plain decoding."""
    from dspark_mini.checkpoint import save
    from dspark_mini.drafters import DSparkDrafter
    from dspark_mini.speculative import generate_plain, generate_speculative
    from lab.training.train import model_for_draft, train_draft

    target = build_model(get_config("lab"), seed=0)
    save(target, tmp_path / "target.safetensors", part="target")
    model = model_for_draft(tmp_path / "target.safetensors", kind, seed=2, layers=layers)
    assert model.cfg.n_mtp_layers == len(model.mtp.layers) == layers
    assert model.cfg.compress_ratios == target.cfg.compress_ratios[: target.cfg.n_layers] + (0,) * layers
    train_draft(model, streams[0], steps=2, batch=2, context=16, kind=kind, anchors=2)
    save(model, tmp_path / "draft.safetensors", part="draft")
    header = read_header(tmp_path / "draft.safetensors")
    assert header["config"]["n_mtp_layers"] == layers
    back = load_model(tmp_path / "target.safetensors", tmp_path / "draft.safetensors")
    assert back.cfg == model.cfg
    for (n, p), (_, q) in zip(back.named_parameters(), model.named_parameters(), strict=True):
        assert torch.equal(p, q), n
    prompt = torch.randint(4, back.cfg.vocab_size, (1, 9), generator=torch.Generator().manual_seed(1))
    drafter = DSparkDrafter(kind)
    assert generate_speculative(back, prompt, 8, drafter=drafter).tokens == generate_plain(back, prompt, 8).tokens


def test_a_draft_of_another_backbone_is_refused(tmp_path) -> None:
    """Only the draft's own fields may differ from its target's: a backbone layer's compress ratio may not."""
    from dspark_mini.checkpoint import CheckpointError, save

    cfg = get_config("lab")
    save(build_model(cfg, seed=0), tmp_path / "target.safetensors", part="target")
    ratios = list(cfg.compress_ratios)
    ratios[cfg.n_layers - 1] = 0  # the last backbone layer reads its window only
    other = build_model(cfg.replace(compress_ratios=tuple(ratios)), seed=0)
    save(other, tmp_path / "draft.safetensors", part="draft")
    with pytest.raises(CheckpointError, match="compress_ratios"):
        load_model(tmp_path / "target.safetensors", tmp_path / "draft.safetensors")
    from lab.training.train import model_for_draft

    with pytest.raises(ValueError, match="layers = 0 is invalid"):
        model_for_draft(tmp_path / "target.safetensors", "dspark", layers=0)


def test_draft_selection_keeps_its_best_held_out_checkpoint(streams) -> None:
    """DSpark's draft measured on held-out windows every step ends with the `mtp.*` of its best measurement."""
    from lab.training.train import Selection, held_out_accept, train_draft

    model = build_model(get_config("lab"), seed=0)
    k = model.cfg.dspark_block_size
    length = 16 + k + 1
    held_out = streams[1][: 3 * length].view(3, length)
    select = Selection(held_out, every=1)
    log = train_draft(model, streams[0], steps=4, batch=2, context=16, lr=0.05, anchors=2, select=select, seed=5)
    assert log.select_steps == [1, 2, 3, 4]
    assert log.best_step == 1 + max(range(4), key=lambda i: (log.select_accept[i], -i))
    assert held_out_accept(model, held_out, 2, 4.0, 5) == pytest.approx(max(log.select_accept), abs=1e-12)


def test_the_recipe_selection_set_is_the_held_out_split() -> None:
    from lab.training.rebuild import QUICK, corpus_streams, selection

    assert selection(dataclasses.replace(QUICK, select_every=0), 20) is None  # select_every 0: off
    r = dataclasses.replace(QUICK, select_every=2, select_windows=3)
    s = selection(r, 20)
    _, val_ids = corpus_streams(r)
    assert s.every == 2 and torch.equal(s.windows, val_ids[:60].view(3, 20))

"""Training the target (issue: train it): the loss falls, the right parts learn, the checkpoint reproduces
its recorded numbers, and the CLI commands behave."""

from __future__ import annotations

import json

import pytest
import torch

from dspark_mini import build_model, get_config
from dspark_mini.checkpoint import load_model, read_header
from lab.cli import main
from lab.corpus import build_corpus, mix, split, token_stream
from lab.training import evaluate, train_target, windows


@pytest.fixture(scope="module")
def streams():
    corpus = build_corpus(0, 120)
    train, val = split(mix(corpus, 0), 0.2, 0)
    return token_stream(train), token_stream(val)


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
        "--lines",
        "60",
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
    corpus = build_corpus(2, 60)
    _, val = split(mix(corpus, 2), 0.1, 2)
    loss, acc = evaluate(model, token_stream(val), 24)
    assert abs(loss - report["meta"]["val_loss"]) < 1e-4 and abs(acc - report["meta"]["val_accuracy"]) < 1e-9


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["train", "target", "--steps", "0"], "steps = 0 is invalid"),
        (["train", "target", "--out", "weights.pt"], "ending in .safetensors"),
        (["train", "target", "--lines", "0"], "--lines = 0"),
        (["data", "--lines", "0"], "--lines = 0"),
    ],
)
def test_bad_training_input(capsys, argv, needle) -> None:
    assert main(argv) == 2
    assert needle in " ".join(capsys.readouterr().err.split())


def test_data_command_json(capsys) -> None:
    assert main(["data", "--json", "--lines", "40"]) == 0
    d = json.loads(capsys.readouterr().out)
    assert set(d["domains"]) >= {"math", "code", "chat"}

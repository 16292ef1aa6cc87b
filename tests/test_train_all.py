"""`dspark-lab train all --quick`: the whole rebuild pipeline in miniature, once through the CLI; its determinism
by running every stage again (target, each drafter's training and calibration, each drafter's evaluation) in this
process and comparing with what the run wrote. Replacing an existing set whole (the atomic swap) is tested on
fake phases in tests/test_weight_sets.py."""

from __future__ import annotations

import dataclasses
import json

import pytest
import torch
from rich.progress import Progress
from safetensors import safe_open

from dspark_mini.speculative import generate_plain, generate_speculative
from lab.cli import main
from lab.realtext import DOMAINS
from lab.training.rebuild import (
    QUICK,
    Recipe,
    build_cache_file,
    check_shipped,
    corpus_streams,
    eval_job,
    strict_json,
    train_job,
    train_target_file,
)
from lab.training.target_cache import load_cache
from lab.weights import DRAFTERS, drafter_header, file_sha256, load_drafter


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory):
    """One `train all --quick` into a fresh folder (built in a sibling folder and swapped in at its end)."""
    root = tmp_path_factory.mktemp("rebuild")
    out = root / "weights"
    assert main(["train", "all", "--quick", "--out", str(out), "--json"]) == 0
    assert sorted(p.name for p in root.iterdir()) == ["weights"]  # no partial folder left beside it
    return out


def tensors(path) -> dict[str, torch.Tensor]:
    with safe_open(str(path), "pt") as f:
        return {k: f.get_tensor(k) for k in f.keys()}


def test_quick_rebuild_writes_every_file_and_a_report(quick_run):
    out = quick_run
    assert check_shipped(out) == []  # every file, the manifest, each drafter bound to this target
    target = file_sha256(out / "target.safetensors")
    assert all(drafter_header(out / f"{k}.safetensors")["target_sha256"] == target for k in DRAFTERS)
    report = json.loads((out / "report.json").read_text())
    assert set(report["drafters"]) == set(DRAFTERS)
    for name in DRAFTERS:
        q = report["drafters"][name]["quality"]
        for domain in DOMAINS:
            for label in ("t1", "greedy"):
                assert 1.0 <= q[domain][label]["tau"] <= 1 + (1 if name == "mtp1" else 5)
            assert q[domain]["speed"]["plain_tok_s"] > 0
    assert "confidence_temperatures" in report["drafters"]["dspark"]["train"]
    # one target cache for every drafter: the same data hash, ids read, steps and batch; its own record
    cache = load_cache(out / "target_cache.safetensors")
    assert cache.sha256 == file_sha256(out / "target_cache.safetensors") == report["target_cache"]["sha256"]
    assert cache.target_sha256 == target
    assert report["target_cache"]["windows"] == [QUICK.draft_steps, QUICK.draft_batch, QUICK.draft_context + 6]
    assert cache.sequences.size(0) == QUICK.cache_prompts
    for name in DRAFTERS:
        train = report["drafters"][name]["train"]
        assert train["data_sha256"] == cache.sha256, name
        seen = QUICK.draft_steps * QUICK.draft_batch * (QUICK.draft_context + 6)  # steps × windows × ids
        assert train["tokens_seen"] == cache.tokens_seen == seen
        assert (train["steps"], train["batch"], train["lr"]) == (QUICK.draft_steps, QUICK.draft_batch, QUICK.draft_lr)
        assert train["parameters"] > 0 and train["train_seconds"] >= 0
    for name in DRAFTERS:
        assert report["summary"]["free_form_tau"][name] == {
            t: report["drafters"][name]["free_form"][t]["tau"] for t in ("t1", "greedy")
        }
    assert len(report["drafters"]["dspark"]["train"]["sts"]) == 5
    assert set(report["summary"]) >= {"mean_tau", "dspark_over_dflash", "decay", "tokens_per_s_ratio"}


SECONDS = ("train_seconds", "sts_seconds", "eval_seconds")  # the only fields that may differ


def as_json(x) -> str:
    """A record as report.json holds it (tuples → lists, a NaN → null), as one comparable text."""
    return json.dumps(strict_json(x), sort_keys=True, allow_nan=False)


def test_rebuild_is_deterministic(quick_run, tmp_path):
    """Every stage of the run again, here in this process, from the recipe in its report: the target, then each
    drafter trained (STS-calibrated) against it and evaluated, as `train all` does in its worker processes — only
    the tokens/s stage (a clock) is not repeated.
    Can still fail: every tensor of the six files must be equal bit for bit, and every stage's record (the target's
    loss curve, each drafter's train meta with its STS temperatures, τ and acceptance per domain and temperature,
    the threshold sweep, the held-out calibration) equal between the run and this process — an unseeded generator,
    a thread-count or order dependence shows here."""
    report = json.loads((quick_run / "report.json").read_text())
    recipe = Recipe(**report["recipe"])
    assert recipe == QUICK
    again: dict = {"seconds": {}}
    train_target_file(tmp_path, recipe, Progress(disable=True), again)
    assert as_json(again["target"]) == as_json(report["target"])
    build_cache_file(tmp_path, recipe, Progress(disable=True), again)
    assert as_json(again["target_cache"]) == as_json(report["target_cache"])  # its sha256 included
    for name in DRAFTERS:
        was = report["drafters"][name]
        meta = train_job(name, str(tmp_path), dataclasses.asdict(recipe))
        assert as_json({k: v for k, v in meta.items() if k not in SECONDS}) == as_json(
            {k: v for k, v in was["train"].items() if k not in SECONDS}
        ), name
        ev = eval_job(name, str(tmp_path), dataclasses.asdict(recipe))
        assert set(ev["quality"]) == set(was["quality"])
        for domain, row in ev["quality"].items():
            for label in ("t1", "greedy"):
                for key in ("tau", "rounds", "cond_accept", "cum_accept"):
                    assert row[label][key] == was["quality"][domain][label][key], (name, domain, label, key)
            if "threshold_sweep" in row or "threshold_sweep" in was["quality"][domain]:
                assert as_json(row["threshold_sweep"]) == as_json(was["quality"][domain]["threshold_sweep"])
        assert as_json(ev.get("heldout_calibration")) == as_json(was.get("heldout_calibration")), name
        assert as_json(ev["free_form"]) == as_json(was["free_form"]), name
    for name in ("target", "target_cache", *DRAFTERS):
        ta, tb = tensors(quick_run / f"{name}.safetensors"), tensors(tmp_path / f"{name}.safetensors")
        assert ta.keys() == tb.keys() and all(torch.equal(ta[k], tb[k]) for k in ta), name
    for name in ("target", "target_cache", *DRAFTERS):  # byte for byte too: no clock in a file's header
        assert file_sha256(quick_run / f"{name}.safetensors") == file_sha256(tmp_path / f"{name}.safetensors"), name


@pytest.mark.parametrize("name", DRAFTERS)
def test_rebuilt_drafters_load_and_stay_lossless(quick_run, name):
    model, drafter = load_drafter(name, quick_run)
    prompt = torch.randint(4, model.cfg.vocab_size, (2, 9), generator=torch.Generator().manual_seed(0))
    spec = generate_speculative(model, prompt, 12, drafter=drafter)
    assert spec.tokens == generate_plain(model, prompt, 12).tokens


def test_rebuild_refuses_a_file_path(tmp_path, capsys):
    assert main(["train", "all", "--quick", "--out", str(tmp_path / "w.safetensors")]) == 2
    assert "writes a folder" in capsys.readouterr().err


def test_self_distilled_windows_are_the_targets_own_continuations():
    """Each row starts with its prompt and goes on with exactly what the target writes for it alone; the prompts
    are seeded and in range. Can still fail: a row taken from another prompt's batch, a wrong split or offset."""
    from dspark_mini import build_model, get_config
    from lab.training.train import distill_prompts, self_distill

    model = build_model(get_config("lab"), seed=1)
    train_ids, _ = corpus_streams(QUICK)
    prompts = distill_prompts(train_ids, 6, seed=2, vocab_size=model.cfg.vocab_size, free_share=0.5, max_len=5)
    assert prompts == distill_prompts(train_ids, 6, seed=2, vocab_size=model.cfg.vocab_size, free_share=0.5, max_len=5)
    assert all(1 <= len(p) <= 5 and min(p) >= 4 and max(p) < model.cfg.vocab_size for p in prompts)
    rows = self_distill(model, prompts, 12)  # [6, 12]
    assert rows.shape == (6, 12)
    for p, row in zip(prompts, rows.tolist(), strict=True):
        assert row[: len(p)] == p
        assert row[len(p) :] == generate_plain(model, torch.tensor([p]), 12 - len(p)).tokens[0]
    with pytest.raises(ValueError, match="prompt 0 has 12 ids"):
        self_distill(model, [[5] * 12], 12)


def test_keep_target_rebuilds_the_same_drafters_around_the_same_target(quick_run, tmp_path):
    """`train all --keep-target`: the target file stays byte for byte (its record carried over, marked kept), and the
    drafters rebuilt against it are the run's own, tensor for tensor (the drafter stages are deterministic).
    Can still fail: a retrained or re-saved target, a drafter that depends on how the target got there."""
    import shutil

    out = tmp_path / "weights"
    shutil.copytree(quick_run, out)
    before = file_sha256(out / "target.safetensors")
    assert main(["train", "all", "--quick", "--keep-target", "--out", str(out), "--json"]) == 0
    assert file_sha256(out / "target.safetensors") == before and check_shipped(out) == []
    was, now = (json.loads((d / "report.json").read_text()) for d in (quick_run, out))
    assert now["target"] == was["target"] | {"kept": True} and now["seconds"]["target"] == 0.0
    for name in DRAFTERS:
        ta, tb = tensors(quick_run / f"{name}.safetensors"), tensors(out / f"{name}.safetensors")
        assert ta.keys() == tb.keys() and all(torch.equal(ta[k], tb[k]) for k in ta), name


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["train", "all", "--quick", "--keep-target"], "target.safetensors is missing"),
        (["train", "target", "--keep-target"], "--keep-target applies to `train all`"),
    ],
)
def test_keep_target_bad_input(tmp_path, capsys, argv, needle):
    out = tmp_path / ("empty" if "all" in argv else "t.safetensors")
    assert main([*argv, "--out", str(out)]) == 2
    assert needle in capsys.readouterr().err
    assert not out.exists() and list(tmp_path.iterdir()) == []  # refused before anything was written


def test_keep_target_refuses_a_drafter_in_the_targets_place(quick_run, tmp_path, capsys):
    import shutil

    out = tmp_path / "weights"
    shutil.copytree(quick_run, out)
    shutil.copyfile(out / "dspark.safetensors", out / "target.safetensors")
    assert main(["train", "all", "--quick", "--keep-target", "--out", str(out)]) == 2
    assert "is not a trained target with its record" in capsys.readouterr().err

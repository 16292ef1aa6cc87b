"""Nothing lost, ever: a weights folder is one set (lab/weights.py, lab/training/rebuild.py).

`train all` builds the set in a sibling folder and swaps it in at the end, so an interrupted run leaves the old
set byte for byte; `manifest.json` records every file's sha256 and each drafter's header the target's, so a
changed file or a drafter of another target is refused naming both files; checkpoint loading refuses
non-finite tensors and absurd headers (before building anything); writing into the shipped folder needs
--force; a bad --out is refused before any training. The real pipeline runs in tests/test_train_all.py; here
its phases are replaced by quick fakes where the test is about the folder, not the training.
"""

from __future__ import annotations

import json
import os
import shutil
import struct

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

import lab.training.commands as train_cli_mod
import lab.training.rebuild as train_all_mod
import lab.weights as weights_mod
from dspark_mini import build_model, get_config
from dspark_mini import checkpoint as ckpt
from dspark_mini.baselines import Eagle3Draft, load_baseline, save_baseline
from dspark_mini.checkpoint import CheckpointError, load, load_model, save, stamp_target
from dspark_mini.params import param_parts
from lab.cli import main
from lab.training.rebuild import QUICK, check_shipped, train_all
from lab.weights import (
    DRAFTERS,
    MANIFEST,
    SET_FILES,
    WEIGHTS_DIR,
    WeightSetError,
    file_sha256,
    lab_model,
    load_drafter,
    read_manifest,
    report,
    stamp_set,
)


@pytest.fixture
def shipped_copy(tmp_path):
    """A private copy of the shipped set (a test may damage it)."""
    return shutil.copytree(WEIGHTS_DIR, tmp_path / "weights")


@pytest.fixture(scope="module")
def other_target(tmp_path_factory):
    """A valid target file that is not the shipped one (the seed-1 init)."""
    path = tmp_path_factory.mktemp("other") / "target.safetensors"
    return save(build_model(get_config("lab"), seed=1), path, part="target")


def snapshot(folder) -> dict[str, bytes | None]:
    """Every path under `folder` with its bytes (None for a folder)."""
    return {str(p.relative_to(folder)): None if p.is_dir() else p.read_bytes() for p in sorted(folder.rglob("*"))}


def contents(path) -> tuple[dict[str, str], bytes]:
    """A safetensors file as (header metadata, the raw tensor bytes after the header). The header's key order is
    not stable from one write to the next, so files are compared this way rather than byte for byte."""
    data = path.read_bytes()
    n = struct.unpack("<Q", data[:8])[0]
    return json.loads(data[8 : 8 + n])["__metadata__"], data[8 + n :]


def flat(text: str) -> str:
    """Rich wraps long lines (and long paths) at the terminal width: compare without whitespace."""
    return "".join(text.split())


# ---- the recorded set ------------------------------------------------------------------------------------
def test_the_shipped_set_is_recorded():
    files = read_manifest(WEIGHTS_DIR)
    assert set(files) == set(SET_FILES)
    for name, entry in files.items():
        assert entry == {"sha256": file_sha256(WEIGHTS_DIR / name), "bytes": (WEIGHTS_DIR / name).stat().st_size}
    target = file_sha256(WEIGHTS_DIR / "target.safetensors")
    for k in DRAFTERS:
        with safe_open(str(WEIGHTS_DIR / f"{k}.safetensors"), "pt") as f:
            assert f.metadata()["target_sha256"] == target, k


def test_stamping_changes_no_tensor_and_refuses_another_target(tmp_path, shipped_copy, other_target):
    """stamp_set on a set whose drafters carry no target hash adds it without touching a tensor byte; a drafter
    that already records another target is refused, never re-stamped."""
    path = shipped_copy / "mtp1.safetensors"
    with safe_open(str(path), "pt") as f:
        md = {k: v for k, v in f.metadata().items() if k != "target_sha256"}
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    save_file(tensors, str(path), metadata=md)  # as it was before the binding existed
    (shipped_copy / MANIFEST).unlink()
    stamp_set(shipped_copy)
    assert contents(path) == contents(WEIGHTS_DIR / "mtp1.safetensors")  # the same header and tensor bytes
    assert check_shipped(shipped_copy) == []  # a new manifest, and the set verifies
    stamp_target(path, file_sha256(other_target))
    with pytest.raises(WeightSetError, match="trained against another target"):
        stamp_set(shipped_copy)


# ---- atomic swap ------------------------------------------------------------------------------------------
def fake_phases(monkeypatch, source):
    """train all's phases replaced by copies of the files of `source` (the swap is under test, not training)."""

    def target(work, recipe, bar, report):
        shutil.copy(source / "target.safetensors", work)
        report["target"] = {"trained": "target"}

    def drafters(work, recipe, bar, report):
        for k in DRAFTERS:
            shutil.copy(source / f"{k}.safetensors", work)
        report["drafters"] = json.loads((source / "report.json").read_text())["drafters"]

    monkeypatch.setattr(train_all_mod, "train_target_file", target)
    monkeypatch.setattr(train_all_mod, "train_drafters", drafters)
    monkeypatch.setattr(train_all_mod, "measure_speed", lambda *a: None)


def test_a_finished_run_swaps_the_new_set_in(tmp_path, shipped_copy, monkeypatch):
    fake_phases(monkeypatch, WEIGHTS_DIR)
    old_report = (shipped_copy / "report.json").read_bytes()
    new = train_all(shipped_copy, QUICK, quiet=True)
    assert (shipped_copy / "report.json").read_bytes() != old_report  # the new set is in place …
    assert json.loads((shipped_copy / "report.json").read_text())["recipe"] == new["recipe"]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["weights"]  # … and no partial or old folder is left
    assert check_shipped(shipped_copy) == []  # complete and verified (manifest written after the report)
    model, _ = load_drafter("eagle3", shipped_copy)
    assert model.cfg.vocab_size == get_config("lab").vocab_size


def test_an_interrupted_run_leaves_the_old_set_byte_for_byte(tmp_path, shipped_copy, monkeypatch):
    """The real target training of --quick, then Ctrl-C before any drafter is written."""
    before = snapshot(shipped_copy)
    seen = []

    def interrupted(work, recipe, bar, report):
        seen.append(work)
        assert (work / "target.safetensors").is_file() and work != shipped_copy  # the new target is elsewhere
        raise KeyboardInterrupt

    monkeypatch.setattr(train_all_mod, "train_drafters", interrupted)
    with pytest.raises(KeyboardInterrupt):
        train_all(shipped_copy, QUICK, quiet=True)
    assert seen and snapshot(shipped_copy) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["weights"]  # the partial folder is gone
    assert check_shipped(shipped_copy) == []
    lab_model(weights_dir=shipped_copy)
    load_drafter("mtp1", shipped_copy)


def test_a_failed_swap_puts_the_old_set_back(tmp_path, shipped_copy, monkeypatch):
    """A full disk (or anything) between the two renames: the old set is renamed back, the new one removed."""
    fake_phases(monkeypatch, WEIGHTS_DIR)
    before = snapshot(shipped_copy)
    real_rename, calls = os.rename, []

    def rename(src, dst):
        calls.append((src, dst))
        if len(calls) == 2:  # old → aside went through; new → in fails
            raise OSError("No space left on device")
        real_rename(src, dst)

    monkeypatch.setattr(os, "rename", rename)
    with pytest.raises(OSError, match="No space left"):
        train_all(shipped_copy, QUICK, quiet=True)
    assert len(calls) == 3 and snapshot(shipped_copy) == before
    assert sorted(p.name for p in tmp_path.iterdir()) == ["weights"]


# ---- a mismatched set is refused -----------------------------------------------------------------------------
def test_one_changed_byte_is_refused_naming_the_file_and_the_manifest(shipped_copy):
    path = shipped_copy / "dspark.safetensors"
    data = bytearray(path.read_bytes())
    data[-1] ^= 1  # one bit of the last tensor
    path.write_bytes(bytes(data))
    for load_it in (lambda: lab_model(weights_dir=shipped_copy), lambda: load_drafter("dspark", shipped_copy)):
        with pytest.raises(WeightSetError) as e:
            load_it()
        assert str(path) in str(e.value) and str(shipped_copy / MANIFEST) in str(e.value)
    load_drafter("eagle3", shipped_copy)  # the other files of the set still load
    (shipped_copy / "report.json").write_text("{}")
    with pytest.raises(WeightSetError, match="report.json does not match"):
        report(shipped_copy)


@pytest.mark.parametrize("drafter", ["dspark", "mtp1"])
def test_another_valid_target_is_refused(shipped_copy, other_target, drafter):
    """A new target beside old drafters (what an interrupted in-place rebuild used to leave): refused by the
    manifest, and without a manifest by the drafter's recorded target hash; both name both files."""
    target = shipped_copy / "target.safetensors"
    shutil.copy(other_target, target)
    with pytest.raises(WeightSetError) as e:
        load_drafter(drafter, shipped_copy)
    assert str(target) in str(e.value) and str(shipped_copy / MANIFEST) in str(e.value)
    (shipped_copy / MANIFEST).unlink()
    with pytest.raises(WeightSetError, match="trained against another target") as e:
        load_drafter(drafter, shipped_copy)
    assert str(shipped_copy / f"{drafter}.safetensors") in str(e.value) and str(target) in str(e.value)


def test_single_files_without_a_manifest_load_unless_their_target_differs(tmp_path, other_target):
    """`train target/draft` outputs (runs/…): no manifest; a drafter without a target hash loads, one that
    records another target does not."""
    runs = tmp_path / "runs"
    runs.mkdir()
    shutil.copy(WEIGHTS_DIR / "target.safetensors", runs)
    shutil.copy(WEIGHTS_DIR / "eagle3.safetensors", runs)
    draft = save(build_model(get_config("lab"), seed=3), runs / "dspark.safetensors", part="draft")
    lab_model(weights_dir=runs)  # no hash recorded: nothing to check
    load_drafter("eagle3", runs)  # the hash recorded matches this target
    stamp_target(draft, file_sha256(other_target))
    with pytest.raises(WeightSetError, match="trained against another target") as e:
        lab_model(weights_dir=runs)
    assert str(draft) in str(e.value) and str(runs / "target.safetensors") in str(e.value)


# ---- values and sizes in checkpoints ------------------------------------------------------------------------
@pytest.mark.parametrize("value", [float("nan"), float("inf"), float("-inf")])
def test_a_non_finite_tensor_is_refused_naming_it(tmp_path, value):
    cfg = get_config("lab")
    bad = build_model(cfg, seed=1)
    with torch.no_grad():
        bad.head.weight[3, 5] = value
    path = save(bad, tmp_path / "bad.safetensors")
    model = build_model(cfg, seed=2)
    before = model.head.weight.detach().clone()
    with pytest.raises(CheckpointError, match="non-finite") as e:
        load(model, path)
    assert "'head.weight'" in str(e.value) and str(path) in str(e.value)
    assert torch.equal(model.head.weight, before)  # refused before anything was copied
    module = Eagle3Draft(cfg)
    with torch.no_grad():
        next(iter(module.parameters()))[0] = value
    name = next(iter(module.state_dict()))
    path = save_baseline(module, tmp_path / "eagle3.safetensors")
    with pytest.raises(CheckpointError, match=f"tensor '{name}' holds non-finite"):
        load_baseline(path, model)


@pytest.mark.parametrize("field, value", [("vocab_size", 2**23), ("moe_inter_dim", 2**17), ("dim", 2**17)])
def test_an_absurd_header_is_refused_before_anything_is_built(tmp_path, other_target, monkeypatch, field, value):
    with safe_open(str(other_target), "pt") as f:
        md = dict(f.metadata())
        tensors = {k: f.get_tensor(k) for k in f.keys()}
    md["config"] = json.dumps({**json.loads(md["config"]), field: value})
    path = tmp_path / "huge.safetensors"
    save_file(tensors, str(path), metadata=md)

    def no_build(*args, **kwargs):
        raise AssertionError("build_model ran for an absurd header")

    monkeypatch.setattr(ckpt, "build_model", no_build)
    with pytest.raises(CheckpointError, match=r"about [\d,]+ parameters ≈ [\d,.]+ GiB in float64") as e:
        load_model(path)
    assert f"{value:,}" in str(e.value) or field == "moe_inter_dim"
    assert "allowed at most 8 GiB" in str(e.value) and str(path) in str(e.value)


def test_the_size_estimate_is_close_for_the_lab_model():
    cfg = get_config("lab")
    real = sum(t.numel() for t in build_model(cfg, device="meta").state_dict().values())
    assert 0.8 * real <= sum(param_parts(cfg).values()) <= real  # the largest pieces, a slight under-estimate


# ---- where training may write --------------------------------------------------------------------------------
@pytest.fixture
def no_training(monkeypatch):
    """Any training that starts fails the test: refusals must come before the long run."""

    def fail(*args, **kwargs):
        raise AssertionError("training started")

    for mod, name in [(train_all_mod, "build_set"), (train_cli_mod, "train_target"), (train_cli_mod, "train_draft")]:
        monkeypatch.setattr(mod, name, fail)


def test_the_shipped_folder_needs_force(shipped_copy, monkeypatch, capsys, no_training):
    monkeypatch.setattr(weights_mod, "WEIGHTS_DIR", shipped_copy)  # a copy stands in for lab/weights
    before = snapshot(shipped_copy)
    quick = ["--steps", "1", "--batch", "2", "--seq-len", "16", "--json"]
    target = str(shipped_copy / "target.safetensors")
    for argv in (
        ["train", "all", "--quick", "--out", str(shipped_copy)],
        ["train", "target", "--out", target, *quick],
        ["train", "draft", "--target", target, "--out", str(shipped_copy / "dspark.safetensors"), *quick],
    ):
        assert main(argv) == 2
        err = flat(capsys.readouterr().err)
        assert "--out" in err and "--force" in err and flat(str(shipped_copy)) in err
    assert snapshot(shipped_copy) == before


def test_force_writes_one_file_and_the_set_stays_honest(shipped_copy, monkeypatch, capsys):
    """`train target --force` into the shipped folder: its manifest entry follows the new target, and the old
    drafters, trained against the previous target, are then refused."""
    monkeypatch.setattr(weights_mod, "WEIGHTS_DIR", shipped_copy)
    target = shipped_copy / "target.safetensors"
    argv = ["train", "target", "--steps", "1", "--batch", "2", "--seq-len", "16", "--json"]
    assert main([*argv, "--out", str(target), "--force"]) == 0
    assert read_manifest(shipped_copy)["target.safetensors"]["sha256"] == file_sha256(target)
    with pytest.raises(WeightSetError, match="trained against another target"):
        lab_model(weights_dir=shipped_copy)


@pytest.mark.parametrize(
    "what, out",
    [
        ("all", "file"),  # a file where a folder should be
        ("all", "file/sub/weights"),  # a parent is a file
        ("target", "folder.safetensors"),  # a folder where a file should be
        ("target", "file/target.safetensors"),
        ("draft", "file/dspark.safetensors"),
    ],
)
def test_a_bad_out_is_refused_before_training(tmp_path, capsys, no_training, what, out):
    (tmp_path / "file").write_text("not a folder")
    (tmp_path / "folder.safetensors").mkdir()
    path = tmp_path / out
    before = snapshot(tmp_path)
    assert main(["train", what, "--quick" if what == "all" else "--json", "--out", str(path)]) == 2
    err = flat(capsys.readouterr().err)
    assert "--out" in err and flat(str(path)) in err
    assert snapshot(tmp_path) == before


def test_train_all_refuses_a_folder_holding_other_files(tmp_path, capsys, no_training):
    (tmp_path / "corpus.txt").write_text("my notes")
    assert main(["train", "all", "--quick", "--out", str(tmp_path)]) == 2
    err = flat(capsys.readouterr().err)
    assert "holdsotherfiles(corpus.txt)" in err and "--out" in err


@pytest.mark.skipif(os.geteuid() == 0, reason="root may write anywhere")
def test_an_unwritable_out_is_refused_before_training(tmp_path, capsys, no_training):
    locked = tmp_path / "locked"
    locked.mkdir(mode=0o500)
    try:
        assert main(["train", "all", "--quick", "--out", str(locked / "weights")]) == 2
        assert "notwritable" in flat(capsys.readouterr().err)
    finally:
        locked.chmod(0o700)

"""`dspark-lab train all --quick`: the whole rebuild pipeline in miniature, twice into one folder (it must be
deterministic, and the second set replaces the first whole)."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from safetensors import safe_open

from dspark_mini.speculative import generate_plain, generate_speculative
from lab.cli import main
from lab.train_all import check_shipped
from lab.weights import DRAFTERS, drafter_header, file_sha256, load_drafter


@pytest.fixture(scope="module")
def quick_runs(tmp_path_factory):
    """Two runs into one folder: the second replaces the first set (swapped in whole at its end); a copy of the
    first is kept to compare."""
    root = tmp_path_factory.mktemp("rebuild")
    out, first = root / "weights", tmp_path_factory.mktemp("first") / "weights"
    assert main(["train", "all", "--quick", "--out", str(out), "--json"]) == 0
    shutil.copytree(out, first)
    assert main(["train", "all", "--quick", "--out", str(out), "--json"]) == 0
    assert sorted(p.name for p in root.iterdir()) == ["weights"]  # no partial or old folder left beside it
    return [first, out]


def tensors(path) -> dict[str, torch.Tensor]:
    with safe_open(str(path), "pt") as f:
        return {k: f.get_tensor(k) for k in f.keys()}


def test_quick_rebuild_writes_every_file_and_a_report(quick_runs):
    out = quick_runs[1]
    assert check_shipped(out) == []  # every file, the manifest, each drafter bound to this target
    target = file_sha256(out / "target.safetensors")
    assert all(drafter_header(out / f"{k}.safetensors")["target_sha256"] == target for k in DRAFTERS)
    report = json.loads((out / "report.json").read_text())
    assert set(report["drafters"]) == set(DRAFTERS)
    for name in DRAFTERS:
        q = report["drafters"][name]["quality"]
        for domain in ("math", "code", "chat"):
            for label in ("t1", "greedy"):
                assert 1.0 <= q[domain][label]["tau"] <= 1 + (1 if name == "mtp1" else 5)
            assert q[domain]["speed"]["plain_tok_s"] > 0
    assert "confidence_temperatures" in report["drafters"]["dspark"]["train"]
    assert len(report["drafters"]["dspark"]["train"]["sts"]) == 5
    assert set(report["summary"]) >= {"mean_tau", "dspark_over_dflash", "decay", "tokens_per_s_ratio"}


def test_rebuild_is_deterministic(quick_runs):
    a, b = quick_runs
    for name in ("target", *DRAFTERS):
        ta, tb = tensors(a / f"{name}.safetensors"), tensors(b / f"{name}.safetensors")
        assert ta.keys() == tb.keys() and all(torch.equal(ta[k], tb[k]) for k in ta), name
    ra, rb = (json.loads((d / "report.json").read_text()) for d in (a, b))
    for name in DRAFTERS:
        for domain, row in ra["drafters"][name]["quality"].items():
            assert row["t1"]["tau"] == rb["drafters"][name]["quality"][domain]["t1"]["tau"]


@pytest.mark.parametrize("name", DRAFTERS)
def test_rebuilt_drafters_load_and_stay_lossless(quick_runs, name):
    model, drafter = load_drafter(name, quick_runs[0])
    prompt = torch.randint(4, model.cfg.vocab_size, (2, 9), generator=torch.Generator().manual_seed(0))
    spec = generate_speculative(model, prompt, 12, drafter=drafter)
    assert spec.tokens == generate_plain(model, prompt, 12).tokens


def test_rebuild_refuses_a_file_path(tmp_path, capsys):
    assert main(["train", "all", "--quick", "--out", str(tmp_path / "w.safetensors")]) == 2
    assert "writes a folder" in capsys.readouterr().err

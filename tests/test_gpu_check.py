"""bench/gpu_check.py without a GPU: the dry run checks the real-width model's shapes on meta, and the GPU run
refuses clearly when there is no CUDA device. (The GPU run itself is not part of CI.)"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest
import torch

from dspark_mini import build_model, get_config

SCRIPT = Path(__file__).resolve().parents[1] / "bench" / "gpu_check.py"


@pytest.fixture(scope="module")
def gpu_check():
    spec = importlib.util.spec_from_file_location("gpu_check", SCRIPT)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_dry_run_checks_every_real_width_tensor_on_meta(gpu_check):
    report = gpu_check.dry_run()
    assert report["problems"] == [] and report["tensors_checked"] > 2000
    assert report["layers"] == 40 and report["draft_layers"] == 3
    assert 33e9 < report["params"]["total"] < 34e9  # 16 of 384 experts, 100,000-row Engram tables


def test_without_cuda_the_gpu_run_is_refused_with_a_clear_line(gpu_check, tmp_path, capsys):
    if torch.cuda.is_available():
        pytest.skip("a CUDA device is present: the real run is bench/gpu_check.sh")
    assert gpu_check.main(["--out", str(tmp_path / "x.json")]) == 2
    assert "--dry-run" in capsys.readouterr().err and not (tmp_path / "x.json").exists()


def test_on_device_init_follows_the_same_rules():
    """init_weights(on_device=True) draws on the parameters' device: other numbers, the same rules (norms at 1,
    sinks and the confidence head at 0, the rest random)."""
    cfg = get_config("lab")
    a = build_model(cfg, seed=0)
    b = build_model(cfg, device="meta")
    b = b.to_empty(device="cpu").init_weights(0, on_device=True)
    for (name, pa), (_, pb) in zip(a.named_parameters(), b.named_parameters(), strict=True):
        assert torch.isfinite(pb).all(), name
        if name.endswith("norm.weight") or name.endswith("attn_sink") or name.endswith("confidence_head.weight"):
            assert torch.equal(pa, pb), name

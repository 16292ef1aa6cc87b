"""The shipped trained weights of the `lab` model and how the lab loads them.

`lab/weights/` holds what `dspark-lab train all` writes (nothing is downloaded):
  target.safetensors                     the trained backbone (part "target")
  dspark.safetensors, dspark-rnn.…,      drafts that live in the model (`mtp.*`, part "draft"); DSpark ones carry
  dflash.safetensors                     their STS temperatures in the header
  eagle3.safetensors, mtp1.safetensors   baseline drafters (their own modules)
  report.json                            the training settings and every number measured after training
`weights="trained"` (the default of walk / generate / the notebooks / the inspector) loads the target with the
DSpark draft; `weights="untrained"` builds the seeded random init instead (the picture of noise).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from dspark_mini import Transformer, build_model, get_config
from dspark_mini.baselines import Eagle3Drafter, MTP1Drafter, load_baseline
from dspark_mini.checkpoint import load_model
from dspark_mini.drafters import Drafter, DSparkDrafter

WEIGHTS_DIR = Path(__file__).resolve().parent / "weights"
WEIGHTS = ("trained", "untrained")
MODEL_DRAFTERS = ("dspark", "dspark-rnn", "dflash")  # stored as the model's own draft part (`mtp.*`)
BASELINE_DRAFTERS = ("eagle3", "mtp1")  # separate modules
DRAFTERS = MODEL_DRAFTERS + BASELINE_DRAFTERS


def check_weights(weights: str) -> str:
    if weights not in WEIGHTS:
        raise ValueError(f"weights = {weights!r} is invalid: allowed {', '.join(map(repr, WEIGHTS))}")
    return weights


def check_drafter(name: str) -> str:
    if name not in DRAFTERS:
        raise ValueError(f"drafter = {name!r} is invalid: allowed {', '.join(map(repr, DRAFTERS))}")
    return name


def weight_file(name: str, weights_dir: str | Path | None = None) -> Path:
    """The path of one shipped file ("target", a drafter name, or "report"); a clear error if it is missing."""
    d = Path(weights_dir) if weights_dir is not None else WEIGHTS_DIR
    path = d / ("report.json" if name == "report" else f"{name}.safetensors")
    if not path.is_file():
        raise FileNotFoundError(
            f"{path} is missing: the trained weights come with the repository (lab/weights/); "
            "`dspark-lab train all` rebuilds them, or use --weights untrained"
        )
    return path


def lab_model(weights: str = "trained", seed: int = 0, weights_dir: str | Path | None = None) -> Transformer:
    """The `lab` model: trained target + DSpark draft, or the untrained init of `seed`."""
    if check_weights(weights) == "untrained":
        return build_model(get_config("lab"), seed=seed)
    return load_model(weight_file("target", weights_dir), weight_file("dspark", weights_dir))


def load_drafter(name: str, weights_dir: str | Path | None = None) -> tuple[Transformer, Drafter]:
    """A trained target with one trained drafter: (model, drafter) ready for `generate_speculative`."""
    check_drafter(name)
    target = weight_file("target", weights_dir)
    if name in MODEL_DRAFTERS:
        model = load_model(target, weight_file(name, weights_dir))
        return model, DSparkDrafter(name)
    model = load_model(target)
    module = load_baseline(weight_file(name, weights_dir), model)
    return model, (Eagle3Drafter(module) if name == "eagle3" else MTP1Drafter(module))


def report(weights_dir: str | Path | None = None) -> dict[str, Any]:
    """The numbers recorded when the shipped weights were made (lab/weights/report.json)."""
    return json.loads(weight_file("report", weights_dir).read_text(encoding="utf-8"))

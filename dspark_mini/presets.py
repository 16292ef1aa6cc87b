"""Named presets: `lab` (the tiny teaching model, the default) and `flash` (DeepSeek-V4.1-Flash at real size).

Same code, different numbers. `lab` takes its vocabulary numbers from the lab tokenizer; `flash` has no
tokenizer here (the real one is 129,280 ids), so its Engram compressed ids fall back to id mod 99,092.
"""

from __future__ import annotations

from typing import Any

import torch

from .config import ConfigError, ModelConfig, flash_config, lab_config
from .model import Transformer
from .tokenizer import LabTokenizer, default_tokenizer

PRESETS = ("lab", "flash")


def get_config(preset: str = "lab", **changes: Any) -> ModelConfig:
    """The config of a preset, with fields overridden by keyword (validated)."""
    if preset == "lab":
        tok = default_tokenizer()
        return lab_config(tok.vocab_size, tok.compressed_vocab_size, tok.noise, **changes)
    if preset == "flash":
        return flash_config(**changes)
    raise ConfigError("preset", preset, f"one of {PRESETS}")


def get_tokenizer(cfg: ModelConfig) -> LabTokenizer | None:
    tok = default_tokenizer()
    return tok if cfg.vocab_size == tok.vocab_size else None


def build_model(
    cfg: ModelConfig, seed: int = 0, device: str | torch.device | None = None, init: bool = True
) -> Transformer:
    """Build and (unless on `meta`, or with init=False because a checkpoint will fill every weight)
    deterministically initialize a model for a config."""
    tok = get_tokenizer(cfg)
    cmap = torch.tensor(tok.compress_map) if tok is not None else None
    if device is not None and torch.device(device).type == "meta":
        with torch.device("meta"):
            return Transformer(cfg, cmap)
    model = Transformer(cfg, cmap)
    if init:
        model.init_weights(seed)
    return model.to(device) if device is not None else model

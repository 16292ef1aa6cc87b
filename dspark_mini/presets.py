"""Named presets: `lab` (the tiny teaching model, the default), `flash` (DeepSeek-V4.1-Flash at real size) and
`flash-cpu` (every width of `flash`, few layers, experts and Engram rows: the real widths on one CPU host).

Same code, different numbers. `lab` takes its vocabulary numbers from the lab tokenizer; `flash` has no
tokenizer here (the real one is 129,280 ids), so its Engram compressed ids fall back to id mod 99,092 (`flash-cpu`
too).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from .config import ConfigError, ModelConfig, flash_config, flash_cpu_config, lab_config
from .hf_tokenizer import HFTokenizer
from .model import Transformer
from .tokenizer import WiderVocabTokenizer, default_tokenizer

PRESETS = ("lab", "flash", "flash-cpu")


def get_config(preset: str = "lab", **changes: Any) -> ModelConfig:
    """The config of a preset, with fields overridden by keyword (validated)."""
    if preset == "lab":
        tok = default_tokenizer()
        return lab_config(tok.vocab_size, tok.compressed_vocab_size, tok.noise, **changes)
    if preset == "flash":
        return flash_config(**changes)
    if preset == "flash-cpu":
        return flash_cpu_config(**changes)
    raise ConfigError("preset", preset, f"one of {PRESETS}")


def get_tokenizer(cfg: ModelConfig) -> HFTokenizer | None:
    """The lab tokenizer when `cfg` reads its vocabulary (its Engram compress map then drives the model)."""
    tok = default_tokenizer()
    return tok if cfg.vocab_size == tok.vocab_size else None


def text_tokenizer(cfg: ModelConfig) -> HFTokenizer | WiderVocabTokenizer | None:
    """What turns text into a run of `cfg` without a tokenizer of its own: the lab tokenizer for `lab`; for a larger
    vocabulary (the untrained real widths) the lab ids inside it (`WiderVocabTokenizer`); None for a smaller one."""
    tok = default_tokenizer()
    if cfg.vocab_size == tok.vocab_size:
        return tok
    return WiderVocabTokenizer(tok, cfg.vocab_size) if cfg.vocab_size > tok.vocab_size else None


def build_model(
    cfg: ModelConfig,
    seed: int = 0,
    device: str | torch.device | None = None,
    init: bool = True,
    on_device: bool = False,
    progress: Callable[[int, int], None] | None = None,
) -> Transformer:
    """Build and (unless on `meta`, or with init=False because a checkpoint will fill every weight)
    deterministically initialize a model for a config.

    on_device=True builds every tensor on `device` and draws the init there in each tensor's own dtype
    (`Transformer.init_weights(on_device=True)`): the real widths, whose largest weights would need a float64 copy
    of billions of values on the host; same rules, other numbers than the default host draw."""
    tok = get_tokenizer(cfg)
    cmap = torch.tensor(tok.compress_map) if tok is not None else None
    if device is not None and torch.device(device).type == "meta":
        with torch.device("meta"):
            return Transformer(cfg, cmap)
    if on_device:
        with torch.device("cpu" if device is None else device):
            model = Transformer(cfg, cmap)
        return model.init_weights(seed, on_device=True, progress=progress) if init else model
    model = Transformer(cfg, cmap)
    if init:
        model.init_weights(seed, progress=progress)
    return model.to(device) if device is not None else model

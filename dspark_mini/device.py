"""Where a model runs: its device and its compute dtype, checked once for every loader (the lab's shipped set, a
checkpoint read back, a rank's shard).

  check_device("cuda:1")            cpu, cuda or cuda:N (N < the GPUs here) → torch.device; errors name the option
  check_dtype("bfloat16")           float64 / float32 / bfloat16, or None (the config's own)
  compute_config(cfg, "float32")    the config in that compute dtype: every module reads its dtype from the config,
                                    so the model is *built* in it; mHC, the router, the sinks and the head stay fp32
                                    (`attention.hp_dtype`), fp64 only for a float64 model
Whether a share of a checkpoint fits a device is the real-scale loader's question (lab/realscale/placement.py).
"""

from __future__ import annotations

import re
from dataclasses import replace

import torch

from .config import DTYPES, ModelConfig


class PlacementError(ValueError):
    """A device or dtype that cannot be used, or a share that does not fit the device; the message names the
    option, what is allowed or what to change."""


def check_device(device: str | torch.device | None, option: str = "--device") -> torch.device:
    """cpu, cuda or cuda:N (N < the GPUs here); a clear error naming `option` otherwise, or when CUDA is absent."""
    text = "cpu" if device is None else str(device)
    if not re.fullmatch(r"cpu|cuda(:\d+)?", text):
        raise PlacementError(f"{option} = {text!r} is invalid: allowed cpu, cuda or cuda:N")
    dev = torch.device(text)
    if dev.type == "cuda":
        n = torch.cuda.device_count() if torch.cuda.is_available() else 0
        if n == 0:
            raise PlacementError(f"{option} = {text!r} but this machine has no CUDA GPU: allowed cpu here")
        if dev.index is not None and dev.index >= n:
            raise PlacementError(
                f"{option} = {text!r} is invalid: this machine has {n} GPU(s), allowed cuda:0..cuda:{n - 1}"
            )
    return dev


def check_dtype(dtype: str | None, option: str = "--dtype") -> str | None:
    """One of float64 / float32 / bfloat16 (None: the config's own)."""
    if dtype is not None and dtype not in DTYPES:
        raise PlacementError(f"{option} = {dtype!r} is invalid: allowed one of {', '.join(DTYPES)}")
    return dtype


def compute_config(cfg: ModelConfig, dtype: str | None) -> ModelConfig:
    """`cfg` with compute dtype `dtype` (None: unchanged); see the module docstring."""
    if check_dtype(dtype, "dtype") is None or dtype == cfg.dtype:
        return cfg
    return replace(cfg, dtype=dtype)

"""The model a command runs on, wherever it runs: one process or a rank of torchrun, the lab's own set or a
checkpoint folder in the official layout.

  run_model(weights, seed, checkpoint, device, dtype, shard=True, free=None)
      checkpoint given → the model read back from it (under torchrun: only this rank's tensors are read);
      otherwise      → `lab.weights.lab_model` (the shipped set or the seeded init), its memory estimate checked
                       against what the device has free first, sharded under torchrun with several ranks.
`shard=False` keeps the whole model on every rank. In one process every step is a no-op but the checks, so a plain
CPU run pays nothing for the real-scale path; `lab_model` itself never imports this package.
"""

from __future__ import annotations

from pathlib import Path

from dspark_mini import get_config
from dspark_mini.device import check_device, check_dtype
from dspark_mini.model import Transformer

from ..weights import lab_model
from .distributed import maybe_distributed, maybe_distributed_load
from .export import load_checkpoint
from .placement import check_fits, estimate_rank
from .ranks import SINGLE


def run_model(
    weights: str = "trained",
    seed: int = 0,
    checkpoint: str | Path | None = None,
    device: str | None = None,
    dtype: str | None = None,
    shard: bool = True,
    free: int | None = None,
) -> Transformer:
    """See the module docstring. free: injected free bytes (tests); default measured on the device."""
    dev = check_device(device, "device")
    check_dtype(dtype, "dtype")
    if checkpoint is not None:  # under torchrun only this rank's tensors are read
        if shard:
            return maybe_distributed_load(checkpoint, device=str(dev), dtype=dtype)
        return load_checkpoint(checkpoint, device=dev, dtype=dtype, free=free)
    check_fits(estimate_rank(get_config("lab"), SINGLE, packed=False, dtype=dtype, style="lab"), dev, free)
    model = lab_model(weights, seed, device="cpu", dtype=dtype)
    return maybe_distributed(model, device=str(dev)) if shard else model.to(dev)

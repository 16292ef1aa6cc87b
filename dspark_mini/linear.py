"""`Linear` without the default init: `Transformer.init_weights` (or a checkpoint) sets every weight
(`Embedding`: without it on `meta` only).

Skipping torch's per-layer kaiming init halves the time to build the real-size model on `meta`
(≈ 46 k expert projections). `cast` converts only when the dtype differs: a no-op `.to()` still costs a
dispatch from Python, about as much as a small real op, and the lab model calls it hundreds of times a step.
"""

import torch
from torch import nn


class Linear(nn.Linear):
    def __init__(self, in_features: int, out_features: int, bias: bool = False, dtype=None, device=None):
        super().__init__(in_features, out_features, bias=bias, dtype=dtype, device=device)

    def reset_parameters(self) -> None:
        """Left to the model's `init_weights`."""


def cast(x: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """x in `dtype` (x itself when it already is)."""
    return x if x.dtype == dtype else x.to(dtype)


class Embedding(nn.Embedding):
    """`nn.Embedding` whose default init (normal_) is skipped on the `meta` device: there is nothing to fill
    there, and a random fill of a meta tensor imports torch._dynamo (≈ 1.5 s). On a real device it initializes
    exactly as nn.Embedding does (the same draws from the global generator)."""

    def reset_parameters(self) -> None:
        if not self.weight.is_meta:
            super().reset_parameters()

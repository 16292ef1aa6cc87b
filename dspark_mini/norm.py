"""RMSNorm as the reference computes it: in high precision, weight applied after, cast back."""

from __future__ import annotations

import torch
from torch import nn

from .linear import cast


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float, dtype: torch.dtype = torch.float32):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim, dtype=dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        hp = torch.float64 if x.dtype == torch.float64 else torch.float32
        h = cast(x, hp)
        h = h * torch.rsqrt(h.square().mean(-1, keepdim=True) + self.eps)
        return cast(cast(self.weight, hp) * h, x.dtype)

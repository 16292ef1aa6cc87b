"""RMSNorm as the reference computes it: in high precision, weight applied after, cast back."""

from __future__ import annotations

import torch
from torch import nn

from .linear import cast


def rms_norm(x: torch.Tensor, weight: torch.Tensor, eps: float) -> torch.Tensor:
    """weight · x / √(mean(x²) + eps) over the last dim, computed in float64 (float64 x) or float32, cast back.
    x [..., n], weight [n] → [..., n].

    When x and the weight are already in that precision this is `torch.rms_norm` — the same six steps
    (square, mean, + eps, rsqrt, × x, × weight, bit for bit; tested) dispatched as one op."""
    hp = torch.float64 if x.dtype == torch.float64 else torch.float32
    if x.dtype == hp and weight.dtype == hp:
        return torch.rms_norm(x, (x.size(-1),), weight, eps)
    h = cast(x, hp)
    h = h * torch.rsqrt(h.square().mean(-1, keepdim=True) + eps)
    return cast(cast(weight, hp) * h, x.dtype)


class RMSNorm(nn.Module):
    def __init__(self, dim: int, eps: float, dtype: torch.dtype = torch.float32):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(dim, dtype=dtype))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        w = self._parameters["weight"]  # = self.weight, without nn.Module's attribute fallback (a hot path)
        if x.dtype == w.dtype and (x.dtype == torch.float64 or x.dtype == torch.float32):
            return torch.rms_norm(x, (x.size(-1),), w, self.eps)
        return rms_norm(x, w, self.eps)

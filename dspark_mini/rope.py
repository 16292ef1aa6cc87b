"""RoPE and YaRN for the rotated tail of every head, latent and index key (steps 3B, 3C, 4A).

Adjacent channel pairs are complex numbers z; position p rotates them: z ← z · e^{i·p·f_j}.
Frequencies f_j = θ^(−2j/d). YaRN (only in layers with compress ratio > 0) slows the low frequencies:
f_j ← f_j/factor · ρ_j + f_j · (1 − ρ_j), ρ_j a linear ramp between the dims whose wavelength turns
β_fast and β_slow times over the original context. No attention-magnitude (mscale) correction.
Only the last `rope_head_dim` channels rotate; the attention output is rotated back (inverse=True)
at the query position so the cache keeps one rotated form.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from .linear import cast


def rope_inv_freq(
    rope_dim: int,
    theta: float,
    yarn: bool,
    factor: float = 1.0,
    original_seq_len: int = 0,
    beta_fast: int = 32,
    beta_slow: int = 1,
) -> torch.Tensor:
    """Inverse frequencies f_j for j = 0..rope_dim/2 − 1, in float64.  # [rope_dim / 2]"""
    freqs = 1.0 / theta ** (torch.arange(0, rope_dim, 2, dtype=torch.float64) / rope_dim)
    if yarn:

        def corrected_dim(rotations: float) -> float:
            return rope_dim * math.log(original_seq_len / (rotations * 2 * math.pi)) / (2 * math.log(theta))

        lo = max(math.floor(corrected_dim(beta_fast)), 0)
        hi = min(math.ceil(corrected_dim(beta_slow)), rope_dim - 1)
        ramp = ((torch.arange(rope_dim // 2, dtype=torch.float64) - lo) / max(hi - lo, 1e-3)).clamp(0, 1)
        freqs = freqs / factor * ramp + freqs * (1 - ramp)
    return freqs


def rope_angles(positions: torch.Tensor, inv_freq: torch.Tensor) -> torch.Tensor:
    """Rotation angles p·f_j for absolute positions.  # [S, rope_dim / 2]"""
    return positions.to(torch.float64)[:, None] * inv_freq.to(positions.device)[None, :]


@dataclass
class RopeTable:
    """cos and sin of the angles, one value per channel, computed once per forward and shared by every
    rotation at these positions (q, the KV latent, the inverse on the output, the indexer's q).

    Over a full width [head ‖ rotated tail] the table holds cos = (1 … 1 ‖ cos θ_j, cos θ_j …) and
    sin = (0 … 0 ‖ −sin θ_j, +sin θ_j …): the head channels then pass through unchanged (x·1 + swap(x)·0 = x)."""

    cos: torch.Tensor  # [S, r]   (cos θ_j, cos θ_j) for each pair j
    sin: torch.Tensor  # [S, r]   (−sin θ_j, +sin θ_j) for each pair j
    full: dict = field(default_factory=dict)  # (width, dtype) → cos, sin [S, width] and [S, 1, width], swap [width]

    def widen(self, width: int, dtype: torch.dtype, dims: int) -> tuple[torch.Tensor, ...]:
        """(cos, sin) [S, width] in `dtype`, shaped to broadcast against x [B, S, width] (dims 3) or
        [B, S, H, width] (dims 4, as [S, 1, width]), and the channel order of swap(x) [width]: 1, 0, 3, 2, …"""
        key = (width, dtype)
        if key not in self.full:
            S, r = self.cos.shape
            pad = width - r
            cos = torch.cat([self.cos.new_ones(S, pad), self.cos], dim=-1).to(dtype)  # [S, width]
            sin = torch.cat([self.sin.new_zeros(S, pad), self.sin], dim=-1).to(dtype)  # [S, width]
            swap = torch.arange(width, device=cos.device).view(-1, 2).flip(-1).flatten()  # [width]
            self.full[key] = {3: (cos, sin, swap), 4: (cos.unsqueeze(1), sin.unsqueeze(1), swap)}
        return self.full[key][dims]


def rope_table(angles: torch.Tensor) -> RopeTable:
    """The table of angles [S, r/2]."""
    cos, sin = torch.cos(angles), torch.sin(angles)  # [S, r/2]
    return RopeTable(cos.repeat_interleave(2, dim=-1), torch.stack([-sin, sin], dim=-1).flatten(-2))  # [S, r]


def apply_rope(x: torch.Tensor, angles: torch.Tensor | RopeTable, inverse: bool = False) -> torch.Tensor:
    """Rotate the last r channels of x (interleaved pairs); returns a new tensor.

    Pair (a, b) at position p, angle θ = p·f_j:  (a, b) ← (a·cos θ − b·sin θ, a·sin θ + b·cos θ),
    written for all channels at once as  x·cos + swap(x)·sin  with swap(a, b) = (b, a) and the table's
    sin = (−sin θ, +sin θ) (cos = 1, sin = 0 on the head channels); inverse=True rotates by −θ:
    x·cos − swap(x)·sin.
    x: [B, S, r_total] or [B, S, H, r_total]; angles: [S, r/2] or their `RopeTable` (one row per position of dim 1).
    """
    t = angles if isinstance(angles, RopeTable) else rope_table(angles)
    hp = torch.float64 if x.dtype == torch.float64 else torch.float32
    cos, sin, swap = t.widen(x.size(-1), hp, x.dim())  # [S, (1,) C] twice, [C]
    h = cast(x, hp)
    swapped = h.index_select(-1, swap)  # (b, a) for each pair (a, b)
    rot = h * cos - swapped * sin if inverse else h * cos + swapped * sin
    return cast(rot, x.dtype)

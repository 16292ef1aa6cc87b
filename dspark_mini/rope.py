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

import torch


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


def apply_rope(x: torch.Tensor, angles: torch.Tensor, inverse: bool = False) -> torch.Tensor:
    """Rotate the last `2·angles.size(-1)` channels of x (interleaved pairs); returns a new tensor.

    x: [B, S, r_total] or [B, S, H, r_total]; angles: [S, r/2] (one row per position of dim 1).
    """
    r = 2 * angles.size(-1)
    head, tail = x[..., :-r], x[..., -r:]
    ang = -angles if inverse else angles
    if x.dim() == 4:
        ang = ang[:, None, :]  # broadcast over heads
    cos, sin = torch.cos(ang), torch.sin(ang)  # [S, (1,) r/2]
    pairs = tail.unflatten(-1, (-1, 2)).to(torch.float64 if x.dtype == torch.float64 else torch.float32)
    a, b = pairs[..., 0], pairs[..., 1]
    cos, sin = cos.to(a.dtype), sin.to(a.dtype)
    rot = torch.stack([a * cos - b * sin, a * sin + b * cos], dim=-1).flatten(-2).to(x.dtype)
    return torch.cat([head, rot], dim=-1)

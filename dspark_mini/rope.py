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


def rope_inv_freq(
    rope_dim: int,
    theta: float,
    yarn: bool,
    factor: float = 1.0,
    original_seq_len: int = 0,
    beta_fast: int = 32,
    beta_slow: int = 1,
) -> torch.Tensor:
    """Inverse frequencies f_j for j = 0..rope_dim/2 − 1, in float64, on the CPU (also inside a `meta` device
    context: a handful of numbers, and float arithmetic on meta tensors imports torch._dynamo).  # [rope_dim / 2]"""
    freqs = 1.0 / theta ** (torch.arange(0, rope_dim, 2, dtype=torch.float64, device="cpu") / rope_dim)
    if yarn:

        def corrected_dim(rotations: float) -> float:
            return rope_dim * math.log(original_seq_len / (rotations * 2 * math.pi)) / (2 * math.log(theta))

        lo = max(math.floor(corrected_dim(beta_fast)), 0)
        hi = min(math.ceil(corrected_dim(beta_slow)), rope_dim - 1)
        ramp = ((torch.arange(rope_dim // 2, dtype=torch.float64, device="cpu") - lo) / max(hi - lo, 1e-3)).clamp(0, 1)
        freqs = freqs / factor * ramp + freqs * (1 - ramp)
    return freqs


def layer_inv_freq(cfg, compressed: bool) -> torch.Tensor:
    """A layer's inverse frequencies: ratio-0 layers θ = rope_theta without YaRN; layers with compress ratio > 0
    compress_rope_theta with YaRN, for *all* their RoPE.  # [rope_head_dim / 2]"""
    if not compressed:
        return rope_inv_freq(cfg.rope_head_dim, cfg.rope_theta, False)
    return rope_inv_freq(
        cfg.rope_head_dim,
        cfg.compress_rope_theta,
        True,
        cfg.rope_factor,
        cfg.original_seq_len,
        cfg.beta_fast,
        cfg.beta_slow,
    )


def rope_angles(positions: torch.Tensor, inv_freq: torch.Tensor) -> torch.Tensor:
    """Rotation angles p·f_j for absolute positions.  # [S, rope_dim / 2]"""
    if inv_freq.device != positions.device:
        inv_freq = inv_freq.to(positions.device)
    return positions.to(torch.float64).unsqueeze(1) * inv_freq  # [S, 1] × [r/2]


@dataclass
class RopeTable:
    """The rotations e^{i·θ_j} at these positions, computed once per forward and shared by every rotation at them
    (q, the KV latent, the inverse on the output, the indexer's q).

    Over a full width [head ‖ rotated tail] of C channels, seen as C/2 complex numbers, the table holds
    (1 … 1 ‖ e^{iθ_0} … e^{iθ_(r/2−1)}): the head pairs are multiplied by 1 and pass through unchanged."""

    rot: torch.Tensor  # [S, r/2] complex: cos θ_j + i·sin θ_j for each pair j
    full: dict = field(default_factory=dict)  # (width, dims, inverse, dtype) → [S, (1,) width/2] complex

    def widen(self, width: int, dtype: torch.dtype, dims: int, inverse: bool = False) -> torch.Tensor:
        """(1 … 1 ‖ e^{±iθ}) [S, width/2] as a complex tensor of the real `dtype`, shaped to broadcast against
        x [B, S, width/2] (dims 3) or [B, S, H, width/2] (dims 4, as [S, 1, width/2]); e^{−iθ} for the inverse."""
        key = (width, dims, inverse, dtype)
        t = self.full.get(key)
        if t is None:
            t = self.full[key] = self._widen(width, dtype, dims, inverse)
        return t

    def _widen(self, width: int, dtype: torch.dtype, dims: int, inverse: bool) -> torch.Tensor:
        if dims == 4:
            return self.widen(width, dtype, 3, inverse).unsqueeze(1)  # [S, 1, width/2]
        if inverse:
            return self.widen(width, dtype, 3).conj_physical()  # e^{−iθ} = conj(e^{iθ})
        S, half = self.rot.shape
        full = torch.cat([self.rot.new_ones(S, width // 2 - half), self.rot], dim=-1)  # [S, width/2]
        cdt = torch.complex128 if dtype == torch.float64 else torch.complex64
        return full if full.dtype == cdt else full.to(cdt)


def rope_table(angles: torch.Tensor) -> RopeTable:
    """The table of angles [S, r/2]."""
    return RopeTable(torch.complex(torch.cos(angles), torch.sin(angles)))  # [S, r/2] e^{iθ}


def apply_rope(x: torch.Tensor, angles: torch.Tensor | RopeTable, inverse: bool = False) -> torch.Tensor:
    """Rotate the last r channels of x (interleaved pairs); returns a new tensor.

    Pair (a, b) at position p, angle θ = p·f_j:  (a, b) ← (a·cos θ − b·sin θ, a·sin θ + b·cos θ), which is the
    complex product (a + i·b) · e^{iθ}: every pair of the row is one complex number, multiplied by the table's
    (1 … 1 ‖ e^{iθ_j}) (the head pairs by 1); inverse=True multiplies by e^{−iθ} (rotates by −θ).
    x: [B, S, r_total] or [B, S, H, r_total]; angles: [S, r/2] or their `RopeTable` (one row per position of dim 1).
    """
    t = angles if type(angles) is RopeTable else rope_table(angles)
    dt = x.dtype
    hp = torch.float64 if dt == torch.float64 else torch.float32
    shape = x.shape
    rot = t.widen(shape[-1], hp, len(shape), inverse)  # [S, (1,) C/2] complex
    h = x if dt == hp else x.to(hp)
    if not h.is_contiguous():  # view_as_complex needs (real, imag) side by side
        h = h.contiguous()
    z = torch.view_as_complex(h.view(*shape[:-1], -1, 2))  # [B, S, (H,) C/2]: a + i·b per pair
    out = torch.view_as_real(z * rot).view(shape)  # [B, S, (H,) C]
    return out if dt == hp else out.to(dt)

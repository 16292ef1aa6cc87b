"""Quantize-then-dequantize (QDQ) simulation of FP8 E4M3 and FP4 E2M1 for steps 5A and 6A.

The model never stores low-precision tensors here; it rounds values onto the grid the real kernels
would use and multiplies back, so every later step sees exactly the numbers the real format holds:

    fp8_qdq: per last-dim block, s = 2^ceil(log2(max(amax, 1e-4) / 448)), y = e4m3(clamp(x/s, ±448)) * s
    fp4_qdq: "e8m0": s = 2^ceil(log2(max(amax, 6·2^-126) / 6));  "e4m3": s = e4m3(max(amax, 6·2^-9) / 6);
             y = e2m1(clamp(x/s, ±6)) * s

E4M3 here is the "fn" variant (bias 7, no inf, max finite 448, saturating); E2M1 holds {0, .5, 1, 1.5, 2, 3,
4, 6} with a sign bit. Both round to nearest with ties to even (even mantissa LSB). Byte helpers give the
storage cost: FP8 is one byte a value plus one UE8M0 scale byte per block (512 → 528 B); FP4 is half a byte
a value plus one scale byte per block (512 in blocks of 16 → 288 B; 128 in blocks of 32 → 68 B).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

FP8_MAX = 448.0  # largest finite E4M3 ("fn") value: 1.75 · 2^8
FP4_MAX = 6.0  # largest E2M1 value: 1.5 · 2^2
E2M1_VALUES: tuple[float, ...] = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)

_FP8_AMAX_FLOOR = 1e-4
_FP4_AMAX_FLOOR = {"e8m0": 6.0 * 2.0**-126, "e4m3": 6.0 * 2.0**-9}
_SCALE_FMTS = tuple(_FP4_AMAX_FLOOR)

# (smallest normal exponent, mantissa bits) of each element format
_E4M3 = (-6, 3)
_E2M1 = (0, 1)


def _work_dtype(x: torch.Tensor) -> torch.dtype:
    """float64 for float64 inputs, float32 for everything else (bfloat16, float16, float32)."""
    if not x.is_floating_point():
        raise ValueError(f"x must be a floating-point tensor, got dtype {x.dtype}")
    return torch.float64 if x.dtype == torch.float64 else torch.float32


def _round_to_grid(x: torch.Tensor, max_value: float, fmt: tuple[int, int]) -> torch.Tensor:
    """Round x onto a sign-magnitude float grid (RNE, saturating at ±max_value); x in a work dtype.

    Inside the binade [2^e, 2^(e+1)) the grid spacing is 2^(e - mant_bits); below the smallest normal
    exponent the spacing stays at the subnormal quantum. Dividing by a power of two is exact, and
    torch.round rounds half to even, which is the even-mantissa-LSB rule (a binade's top 2^(e+1) is an
    even multiple of the quantum below it).
    """
    min_exp, mant_bits = fmt
    mag = x.abs().clamp(max=max_value)  # [...]
    _, exp = torch.frexp(mag)  # mag = m · 2^exp, m in [0.5, 1) -> floor(log2 mag) = exp - 1
    exp = (exp - 1).clamp(min=min_exp)
    quantum = torch.ldexp(torch.ones_like(mag), exp - mant_bits)  # [...] exact powers of two
    return torch.copysign(torch.round(mag / quantum) * quantum, x)


def e4m3_round(x: torch.Tensor) -> torch.Tensor:
    """Round to the nearest FP8 E4M3 ("fn") value, ties to even, saturating at ±448; same dtype as x."""
    wd = _work_dtype(x)
    return _round_to_grid(x.to(wd), FP8_MAX, _E4M3).to(x.dtype)


def e2m1_round(x: torch.Tensor) -> torch.Tensor:
    """Round to the nearest FP4 E2M1 value, ties to even, saturating at ±6; same dtype as x."""
    wd = _work_dtype(x)
    return _round_to_grid(x.to(wd), FP4_MAX, _E2M1).to(x.dtype)


def _pow2_ceil(y: torch.Tensor) -> torch.Tensor:
    """2^ceil(log2 y) for y > 0, computed exactly from the binary exponent (no log2 rounding)."""
    mant, exp = torch.frexp(y)  # y = mant · 2^exp, mant in [0.5, 1)
    exp = torch.where(mant == 0.5, exp - 1, exp)  # exact power of two: ceil(log2 y) = exp - 1
    return torch.ldexp(torch.ones_like(y), exp)


def _check_block(block: int) -> None:
    if isinstance(block, bool) or not isinstance(block, int) or block < 1:
        raise ValueError(f"block must be a positive int, got {block!r}")


def _blocked(x: torch.Tensor, block: int) -> torch.Tensor:
    """View x [..., n] as [..., n // block, block] in its work dtype, after checking the arguments."""
    _check_block(block)
    wd = _work_dtype(x)
    if x.dim() == 0:
        raise ValueError("x must have at least one dimension (blocks run along the last dim)")
    n = x.shape[-1]
    if n % block != 0:
        raise ValueError(f"x.shape[-1] = {n} is not a multiple of block = {block}")
    return x.to(wd).reshape(*x.shape[:-1], n // block, block)


def fp8_qdq(x: torch.Tensor, block: int = 32) -> torch.Tensor:
    """FP8 E4M3 QDQ with one power-of-two (UE8M0) scale per `block` values along the last dim.

    x: [..., n] with n % block == 0 -> [..., n], same dtype as x.
    """
    xb = _blocked(x, block)  # [..., n/block, block]
    amax = xb.abs().amax(dim=-1, keepdim=True).clamp(min=_FP8_AMAX_FLOOR)  # [..., n/block, 1]
    scale = _pow2_ceil(amax / FP8_MAX)  # [..., n/block, 1]
    q = _round_to_grid((xb / scale).clamp(-FP8_MAX, FP8_MAX), FP8_MAX, _E4M3)  # [..., n/block, block]
    return (q * scale).reshape(x.shape).to(x.dtype)


def fp4_qdq(x: torch.Tensor, block: int, scale_fmt: str) -> torch.Tensor:
    """FP4 E2M1 QDQ with one scale per `block` values along the last dim.

    scale_fmt "e8m0": power-of-two scale (MXFP4 weights, indexer q/k, block 32);
    scale_fmt "e4m3": FP8 E4M3 scale (compressed KV, block 16).
    x: [..., n] with n % block == 0 -> [..., n], same dtype as x.
    """
    if scale_fmt not in _SCALE_FMTS:
        raise ValueError(f"scale_fmt must be one of {_SCALE_FMTS}, got {scale_fmt!r}")
    xb = _blocked(x, block)  # [..., n/block, block]
    amax = xb.abs().amax(dim=-1, keepdim=True).clamp(min=_FP4_AMAX_FLOOR[scale_fmt])  # [..., n/block, 1]
    if scale_fmt == "e8m0":
        scale = _pow2_ceil(amax / FP4_MAX)
    else:
        scale = _round_to_grid(amax / FP4_MAX, FP8_MAX, _E4M3)  # may sit a little below amax/6
    q = _round_to_grid((xb / scale).clamp(-FP4_MAX, FP4_MAX), FP4_MAX, _E2M1)  # [..., n/block, block]
    return (q * scale).reshape(x.shape).to(x.dtype)


def qdq_ste(x: torch.Tensor, fn: Callable[..., torch.Tensor], *args: object) -> torch.Tensor:
    """Straight-through estimator: forward value fn(x, *args), gradient d/dx = identity."""
    return x + (fn(x, *args) - x).detach()


def _check_bytes_args(n_values: int, block: int) -> None:
    _check_block(block)
    if isinstance(n_values, bool) or not isinstance(n_values, int) or n_values < 0:
        raise ValueError(f"n_values must be a non-negative int, got {n_values!r}")
    if n_values % block != 0:
        raise ValueError(f"n_values = {n_values} is not a multiple of block = {block}")


def fp8_bytes(n_values: int, block: int = 32) -> int:
    """Bytes for n_values FP8 values: one byte each plus one UE8M0 scale byte per block."""
    _check_bytes_args(n_values, block)
    return n_values + n_values // block


def fp4_bytes(n_values: int, block: int) -> int:
    """Bytes for n_values FP4 values: two per byte plus one scale byte (E8M0 or E4M3) per block."""
    _check_bytes_args(n_values, block)
    if n_values % 2 != 0:
        raise ValueError(f"n_values = {n_values} must be even (two FP4 values share a byte)")
    return n_values // 2 + n_values // block


def fake_quant(x: torch.Tensor, fn: Callable[..., torch.Tensor], *args: object) -> torch.Tensor:
    """QDQ as the forward sees it; with autograd on, the straight-through gradient of QAT (rounding
    alone would stop every gradient at the cache)."""
    if torch.is_grad_enabled() and x.requires_grad:
        return qdq_ste(x, fn, *args)
    return fn(x, *args)

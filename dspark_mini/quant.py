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

import math
import operator
from collections.abc import Callable
from contextlib import contextmanager
from typing import Any

import torch

from .linear import cast
from .validate import check_int

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

    The formula: inside the binade [2^e, 2^(e+1)) the grid spacing is q = 2^(e - mant_bits) (below the
    smallest normal exponent it stays at the subnormal quantum), and

        y = sign(x) · round_half_even(min(|x|, max) / q) · q

    which rounds ties to the even mantissa LSB. The grid is small (E4M3: 253 signed values, E2M1: 15), so the
    same function is a lookup: every value of the grid, sorted, with the decision boundary between each pair
    of neighbours (their midpoint, one ulp lower where the tie goes up to the even neighbour); the result is
    the grid value whose interval holds x — one binary search (`bucketize`) and one gather, saturating for free.
    Zero comes out as +0.0 (the formula gives −0.0 for small negative x; the values are equal).
    """
    if fmt == _E4M3 and x.numel() >= _ARITH_MIN_NUMEL:  # a big tensor (a table, a weight stack): the formula
        return _round_by_formula(x, max_value, fmt)
    grid, bounds = _grid_table(max_value, fmt, x.dtype, x.device)  # [G], [G − 1]
    return grid.take(torch.bucketize(x, bounds))  # bucketize: how many boundaries lie strictly below x


# From this many values on, E4M3 rounding runs the formula: eight elementwise ops cost less than a binary search
# among 252 boundaries per value (≈ 2.3× faster on an Engram table); below, the lookup's two ops win. E2M1 (14
# boundaries) always looks up. The two give the same bits (tested on every grid value, midpoint and neighbour).
_ARITH_MIN_NUMEL = 4096
_FLOAT_BITS = {torch.float64: (torch.int64, 52, 1023), torch.float32: (torch.int32, 23, 127)}  # int view, mant, bias


def _round_by_formula(x: torch.Tensor, max_value: float, fmt: tuple[int, int]) -> torch.Tensor:
    """`_round_to_grid` as the formula: y = sign(x) · round_half_even(min(|x|, max) / q) · q, q = 2^(max(e, e_min) −
    mant_bits) with e = floor(log2 |x|). The quantum q is built exactly from its exponent bits (no exp2), +0.0 for
    zero as the lookup gives it. x in a work dtype (float64 or float32)."""
    min_exp, mant_bits = fmt
    int_dtype, float_mant, bias = _FLOAT_BITS[x.dtype]
    a = x.abs().clamp_(max=max_value)  # saturate first: min(|x|, max)
    e = torch.frexp(a).exponent.to(int_dtype)  # a = m · 2^e with m in [0.5, 1): floor(log2 a) = e − 1
    q = e.clamp_(min=min_exp + 1).add_(bias - 1 - mant_bits).bitwise_left_shift_(float_mant).view(x.dtype)  # 2^(…)
    y = torch.round(a / q).mul_(q)  # a / q is exact (q a power of two); torch.round rounds half to even
    return torch.copysign(y, x).add_(0.0)  # −0.0 + 0.0 = +0.0


_GRID_TABLES: dict = {}


def _grid_table(
    max_value: float, fmt: tuple[int, int], dtype: torch.dtype, device
) -> tuple[torch.Tensor, torch.Tensor]:
    """The signed grid [G] of a format and its RNE decision boundaries [G − 1], built once per dtype/device."""
    key = (max_value, fmt, dtype, device)
    t = _GRID_TABLES.get(key)
    if t is None:
        with torch.inference_mode(False):  # ordinary tensors, usable in every mode later
            t = _GRID_TABLES[key] = _build_grid_table(max_value, fmt, dtype, device)
    return t


def _build_grid_table(max_value: float, fmt: tuple[int, int], dtype: torch.dtype, device):
    min_exp, mant_bits = fmt
    mags = [j * 2.0 ** (min_exp - mant_bits) for j in range(2**mant_bits)]  # zero and the subnormals
    for e in range(min_exp, math.floor(math.log2(max_value)) + 1):  # normals (1 + j / 2^m) · 2^e
        mags += [(1 + j / 2**mant_bits) * 2.0**e for j in range(2**mant_bits)]
    mags = [m for m in mags if m <= max_value]  # [n] magnitudes ascending; the index is the code
    # a code's parity is its mantissa LSB's: a tie goes to the neighbour with the even code
    signed = [(-m, i) for i, m in reversed(list(enumerate(mags)))][:-1] + [(m, i) for i, m in enumerate(mags)]
    grid = torch.tensor([m for m, _ in signed], dtype=torch.float64)  # [G] ascending, G = 2n − 1
    mids = ((grid[1:] + grid[:-1]) / 2).to(dtype)  # [G − 1] exact: E4M3/E2M1 midpoints need 5 significant bits
    up = torch.tensor([signed[k + 1][1] % 2 == 0 for k in range(len(signed) - 1)])  # [G − 1] tie → upper one
    bounds = torch.where(up, torch.nextafter(mids, torch.tensor(-math.inf, dtype=dtype)), mids)  # [G − 1]
    return grid.to(dtype=dtype, device=device), bounds.to(device)


def e4m3_round(x: torch.Tensor) -> torch.Tensor:
    """Round to the nearest FP8 E4M3 ("fn") value, ties to even, saturating at ±448; same dtype as x."""
    wd = _work_dtype(x)
    return cast(_round_to_grid(cast(x, wd), FP8_MAX, _E4M3), x.dtype)


def e2m1_round(x: torch.Tensor) -> torch.Tensor:
    """Round to the nearest FP4 E2M1 value, ties to even, saturating at ±6; same dtype as x."""
    wd = _work_dtype(x)
    return cast(_round_to_grid(cast(x, wd), FP4_MAX, _E2M1), x.dtype)


def _pow2_ceil(y: torch.Tensor) -> torch.Tensor:
    """2^ceil(log2 y) for y > 0, exactly: the smallest power of two ≥ y (y in a work dtype).

    The formula is mant, exp = frexp(y); 2^(exp − 1) if mant == 0.5 else 2^exp (six ops); a work dtype has
    only ~2,100 powers of two, so this is a lookup among them instead: one binary search and one gather."""
    key = (y.dtype, y.device)
    if key not in _POW2:
        fi = torch.finfo(y.dtype)
        lo, hi = math.frexp(fi.smallest_normal * fi.eps)[1] - 1, math.frexp(fi.max)[1] - 1  # subnormals … max
        with torch.inference_mode(False):
            powers = torch.tensor([2.0**k for k in range(lo, hi + 1)], dtype=torch.float64)  # exact in y's dtype
            _POW2[key] = powers.to(dtype=y.dtype, device=y.device)
    powers = _POW2[key]  # [n] 2^lo … 2^hi ascending
    return powers.take(torch.bucketize(y, powers))


_POW2: dict = {}


def _pow2_scale(amax: torch.Tensor, floor: float, fmax: float) -> torch.Tensor:
    """The power-of-two block scale s = 2^ceil(log2(max(amax, floor) / fmax)) in one lookup (amax in a work dtype).

    Same value as `_pow2_ceil(amax.clamp(min=floor) / fmax)` (four ops), with two: the table holds each candidate
    scale 2^k (from the one the floor gives up) beside its bound fmax·2^k (exact: fmax is 448 or 6), and s is the
    first 2^k whose bound is ≥ amax — one binary search and one gather. Equal because, for a power of two p,
    p ≥ round(amax / fmax) ⟺ fmax·p ≥ amax: the quotient can round down onto p only from within half an ulp
    above it, and no float amax lies that close above fmax·p (tested at every binade edge in test_quant)."""
    key = (floor, fmax, amax.dtype, amax.device)
    if key not in _SCALES:
        with torch.inference_mode(False):
            wd = amax.dtype
            lowest = _pow2_ceil(cast(torch.tensor([floor], dtype=torch.float64), wd) / fmax)  # the floor's scale
            hi = math.frexp(torch.finfo(wd).max)[1] - 1  # max < 2^(hi + 1): no finite amax / fmax needs more than 2^hi
            ks = range(math.frexp(float(lowest))[1] - 1, hi + 1)
            scales = torch.tensor([2.0**k for k in ks], dtype=torch.float64)  # [n] candidate scales, ascending
            bounds = (scales * fmax).to(wd)  # [n] fmax·2^k (exact; the last ones may be inf: they catch the top)
            _SCALES[key] = (scales.to(dtype=wd, device=amax.device), bounds.to(amax.device))
    scales, bounds = _SCALES[key]
    return scales.take(torch.bucketize(amax, bounds))  # bucketize: the first bound ≥ amax


_SCALES: dict = {}


def _check_block(block: int) -> None:
    check_int(block, "block", 1)


def _blocked(x: torch.Tensor, block: int) -> torch.Tensor:
    """View x [..., n] as [..., n // block, block] in its work dtype, after checking the arguments."""
    _check_block(block)
    wd = _work_dtype(x)
    shape = x.shape
    if not shape:
        raise ValueError("x must have at least one dimension (blocks run along the last dim)")
    n = shape[-1]
    if n % block != 0:
        raise ValueError(f"x.shape[-1] = {n} is not a multiple of block = {block}")
    return (x if x.dtype == wd else x.to(wd)).view(*shape[:-1], n // block, block)


def _amax(xb: torch.Tensor) -> torch.Tensor:
    """max |x| per block: [..., n/block, block] → [..., n/block, 1] (the ∞-norm: one op for abs + amax)."""
    return torch.linalg.vector_norm(xb, _INF, -1, True)


_INF = math.inf


def fp8_qdq(x: torch.Tensor, block: int = 32) -> torch.Tensor:
    """FP8 E4M3 QDQ with one power-of-two (UE8M0) scale per `block` values along the last dim.

    x: [..., n] with n % block == 0 -> [..., n], same dtype as x.
    """
    xb = _blocked(x, block)  # [..., n/block, block]
    scale = _pow2_scale(_amax(xb), _FP8_AMAX_FLOOR, FP8_MAX)  # [..., n/block, 1] = pow2ceil(max(amax, 1e-4) / 448)
    q = _round_to_grid(xb / scale, FP8_MAX, _E4M3)  # [..., n/block, block], saturating at ±448
    return cast((q * scale).view(x.shape), x.dtype)


def fp4_qdq(x: torch.Tensor, block: int, scale_fmt: str) -> torch.Tensor:
    """FP4 E2M1 QDQ with one scale per `block` values along the last dim.

    scale_fmt "e8m0": power-of-two scale (MXFP4 weights, indexer q/k, block 32);
    scale_fmt "e4m3": FP8 E4M3 scale (compressed KV, block 16).
    x: [..., n] with n % block == 0 -> [..., n], same dtype as x.
    """
    if scale_fmt not in _SCALE_FMTS:
        raise ValueError(f"scale_fmt must be one of {_SCALE_FMTS}, got {scale_fmt!r}")
    xb = _blocked(x, block)  # [..., n/block, block]
    if scale_fmt == "e8m0":  # [..., n/block, 1] = pow2ceil(max(amax, floor) / 6)
        scale = _pow2_scale(_amax(xb), _FP4_AMAX_FLOOR["e8m0"], FP4_MAX)
    else:  # may sit a little below amax/6
        amax = _amax(xb).clamp(min=_FP4_AMAX_FLOOR[scale_fmt])  # [..., n/block, 1]
        scale = _round_to_grid(amax / FP4_MAX, FP8_MAX, _E4M3)
    q = _round_to_grid(xb / scale, FP4_MAX, _E2M1)  # [..., n/block, block], saturating at ±6
    return cast((q * scale).view(x.shape), x.dtype)


def qdq_ste(x: torch.Tensor, fn: Callable[..., torch.Tensor], *args: object) -> torch.Tensor:
    """Straight-through estimator: forward value fn(x, *args), gradient d/dx = identity."""
    return x + (fn(x, *args) - x).detach()


def _check_bytes_args(n_values: int, block: int) -> None:
    _check_block(block)
    check_int(n_values, "n_values", 0)
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


def fp8_act_qdq(x: torch.Tensor, block: int = 32) -> torch.Tensor:
    """An activation as the reference's FP8/FP4 GEMMs read it: its `linear` quantizes the input first
    (`act_quant(x, 32, ue8m0)`), FP8 E4M3 with one power-of-two scale per `block` values along the last dim
    (`fp8_qdq`); with autograd on, the straight-through gradient, as the weights' QDQ has.  x [..., n] → [..., n]"""
    return fake_quant(x, fp8_qdq, block)


# ---- static weights, prepared once ----------------------------------------------------------------
# A weight's QDQ depends only on the weight: at inference it is computed once and kept (`Prepared`), as a
# serving engine stores its FP4/FP8 weights once. Activations and KV entries are new at every step and keep
# their QDQ at every write (`fake_quant`): that part is the lesson of 6A.
PREPARE_STATIC = True  # False: re-quantize static weights at every use (the old path; `per_use_static_qdq()`)


@contextmanager
def per_use_static_qdq():
    """Inside: static weights are rebuilt (re-quantized, re-stacked) at every use — the reference path the
    prepared one is tested against (bit-identical)."""
    global PREPARE_STATIC
    before, PREPARE_STATIC = PREPARE_STATIC, False
    try:
        yield
    finally:
        PREPARE_STATIC = before


class Prepared:
    """A value built from some parameters (e.g. their MXFP4 QDQ, stacked), built once and reused.

    When it is rebuilt:
      - while autograd records and a parameter requires grad (training): at every use, never kept — the forward
        sees the same QDQ values and the straight-through gradient reaches every parameter, so QAT after an
        optimizer step always sees the new weights;
      - otherwise (inference, `torch.no_grad`) when a parameter changed since the last build: an in-place update
        under no_grad (`optimizer.step()`, `load_state_dict`, `w.mul_(2)`) bumps the parameter's version
        counter, `.to()` or `w.data = t` gives it new storage — both are compared at each use;
      - by `rebuild()` (`Transformer.prepare()` calls it): needed after an in-place edit *through* `.data`
        (`w.data.zero_()`), the one change autograd's version counter does not see. `forget()` (after a
        `load_state_dict`, which may assign new Parameter objects) looks the parameters up again.
    build: () → value;  params: () → the parameters it reads, in a fixed order.
    """

    def __init__(self, build: Callable[[], Any], params: Callable[[], list[torch.Tensor]]):
        self.build, self.params_of = build, params
        self.params: list[torch.Tensor] | None = None  # looked up once (module attribute access is slow)
        self.value: Any = None
        self.stamp: tuple | None = None  # the versions, then the data_ptrs, of the parameters at build time
        self.sources: list[torch.Tensor] = []  # the storages built from, kept alive so no address is reused

    def active(self) -> bool:
        """Whether a use now reads the kept value (False: autograd records, or `per_use_static_qdq()`)."""
        if self.params is None:
            self.params = self.params_of()
        return PREPARE_STATIC and not (torch.is_grad_enabled() and any(p.requires_grad for p in self.params))

    def _stamp(self) -> tuple:
        """(version, data_ptr) of every parameter, flat: what a change of any of them changes."""
        return (*map(_VERSION, self.params), *map(_DATA_PTR, self.params))

    def get(self) -> Any:
        """The value: kept (rebuilt first if a parameter changed), or built now while training."""
        if not self.active():
            return self.build()
        if self.stamp != self._stamp():
            self.rebuild()
        return self.value

    def rebuild(self) -> None:
        self.params = self.params_of()
        with torch.inference_mode(False), torch.no_grad():  # ordinary tensors, even when asked inside inference_mode
            self.value = self.build()
            self.stamp = self._stamp()
            self.sources = [p.detach() for p in self.params]

    def forget(self) -> None:
        self.params, self.value, self.stamp, self.sources = None, None, None, []


_VERSION, _DATA_PTR = operator.attrgetter("_version"), torch.Tensor.data_ptr


def prepare_all(model) -> None:
    """Rebuild every `Prepared` value held by `model` or any of its submodules (what `Transformer.prepare()`
    needs after an in-place edit through `.data`)."""
    for m in model.modules():
        for v in vars(m).values():
            if isinstance(v, Prepared):
                v.rebuild()


def forget_prepared(module, incompatible_keys=None) -> None:
    """A `load_state_dict` post-hook: the module's `Prepared` values look their parameters up again."""
    for v in vars(module).values():
        if isinstance(v, Prepared):
            v.forget()

"""Tests for dspark_mini.quant: FP8 E4M3 / FP4 E2M1 rounding, block QDQ, STE and byte helpers.

The rounding functions are checked against a naive reference that decodes every code point from its bits
and picks the nearest one by brute force (ties to the even mantissa LSB), so nothing here reuses the
module's grid arithmetic.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from dspark_mini.quant import (
    E2M1_VALUES,
    FP4_MAX,
    FP8_MAX,
    e2m1_round,
    e4m3_round,
    fp4_bytes,
    fp4_qdq,
    fp8_act_qdq,
    fp8_bytes,
    fp8_qdq,
    qdq_ste,
)

# ---------------------------------------------------------------------------------------------------------
# naive references, decoded from bits


def _decode_e4m3() -> tuple[np.ndarray, np.ndarray]:
    """All finite E4M3 ("fn") code points: (values, mantissa LSB), both signs, NaN (S.1111.111) skipped."""
    vals, lsbs = [], []
    for bits in range(256):
        sign, exp, man = bits >> 7, (bits >> 3) & 0xF, bits & 0x7
        if exp == 15 and man == 7:
            continue  # NaN
        mag = (man / 8) * 2.0**-6 if exp == 0 else (1 + man / 8) * 2.0 ** (exp - 7)
        vals.append(-mag if sign else mag)
        lsbs.append(man & 1)
    return np.array(vals), np.array(lsbs)


def _decode_e2m1() -> tuple[np.ndarray, np.ndarray]:
    """All E2M1 code points: bias 1, exponent 0 is subnormal (0, 0.5), no inf/NaN."""
    vals, lsbs = [], []
    for bits in range(16):
        sign, exp, man = bits >> 3, (bits >> 1) & 0x3, bits & 0x1
        mag = man * 0.5 if exp == 0 else (1 + man / 2) * 2.0 ** (exp - 1)
        vals.append(-mag if sign else mag)
        lsbs.append(man)
    return np.array(vals), np.array(lsbs)


E4M3_GRID, E4M3_LSB = _decode_e4m3()
E2M1_GRID, E2M1_LSB = _decode_e2m1()


def _naive_nearest(v: np.ndarray, grid: np.ndarray, lsb: np.ndarray) -> np.ndarray:
    """Nearest grid value to each v (float64); ties go to the code with mantissa LSB 0; saturating."""
    v = np.clip(np.asarray(v, dtype=np.float64), grid.min(), grid.max())
    d = np.abs(v[:, None] - grid[None, :])  # [N, G]
    cand = d == d.min(axis=1, keepdims=True)
    even = cand & (lsb[None, :] == 0)
    idx = np.where(even.any(axis=1), even.argmax(axis=1), cand.argmax(axis=1))
    return grid[idx]


def naive_e4m3(v: np.ndarray) -> np.ndarray:
    return _naive_nearest(v, E4M3_GRID, E4M3_LSB)


def naive_e2m1(v: np.ndarray) -> np.ndarray:
    return _naive_nearest(v, E2M1_GRID, E2M1_LSB)


def _probe_values(grid: np.ndarray, rng: np.random.Generator, n_random: int, lo: int, hi: int) -> np.ndarray:
    """Random log-uniform values in ±[2^lo, 2^hi], every midpoint (tie) and its two float64 neighbours."""
    pos = np.unique(grid[grid >= 0])
    mids = (pos[1:] + pos[:-1]) / 2  # exact in float64
    rand = np.exp2(rng.uniform(lo, hi, n_random)) * rng.choice([-1.0, 1.0], n_random)
    near = np.concatenate([mids, np.nextafter(mids, np.inf), np.nextafter(mids, -np.inf)])
    return np.concatenate([rand, near, -near, [0.0]])


# ---------------------------------------------------------------------------------------------------------
# 1. element rounding vs the naive reference


def test_constants_match_decoded_formats() -> None:
    assert FP8_MAX == E4M3_GRID.max() == 448.0
    assert len(E4M3_GRID) == 254  # 256 codes minus two NaNs
    assert FP4_MAX == E2M1_GRID.max() == 6.0
    assert E2M1_VALUES == tuple(sorted(set(np.abs(E2M1_GRID).tolist())))
    assert E2M1_VALUES == (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_e4m3_round_matches_naive(dtype: torch.dtype) -> None:
    rng = np.random.default_rng(0)
    v = _probe_values(E4M3_GRID, rng, 4000, -14, 10)
    v = np.concatenate([v, [448.0, 460.0, 464.0, 479.9, 480.0, 500.0, 1e6, -1e6, 2.0**-10, 2.0**-11]])
    x = torch.tensor(v, dtype=dtype)
    ref = naive_e4m3(x.double().numpy())  # reference on the values actually fed in
    got = e4m3_round(x)
    assert got.dtype == dtype
    np.testing.assert_array_equal(got.double().numpy(), ref)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_e4m3_formula_path_equals_lookup_path_bit_for_bit(dtype: torch.dtype) -> None:
    """Big tensors round by the formula (`_round_by_formula`), small ones by the table lookup: the same bits
    (signed zeros included) on every tie, its neighbours, random magnitudes, saturation and ±inf."""
    from dspark_mini.quant import _ARITH_MIN_NUMEL

    rng = np.random.default_rng(7)
    v = _probe_values(E4M3_GRID, rng, 20000, -30, 20)
    v = np.concatenate([v, E4M3_GRID, [0.0, -0.0, 2.0**-10, -(2.0**-10), 464.0, -464.0, 1e300, np.inf, -np.inf]])
    x = torch.tensor(v, dtype=dtype)
    assert x.numel() >= 2 * _ARITH_MIN_NUMEL
    big = e4m3_round(x)  # one tensor: the formula
    small = torch.cat([e4m3_round(c) for c in x.split(_ARITH_MIN_NUMEL // 2)])  # chunks: the lookup
    bits = torch.int64 if dtype == torch.float64 else torch.int32
    assert torch.equal(big.view(bits), small.view(bits))
    rows = x[: 64 * 256].view(256, 64)  # fp8_qdq of the whole (formula) and of each row (lookup)
    assert torch.equal(fp8_qdq(rows, 32), torch.cat([fp8_qdq(r[None], 32) for r in rows]))


def test_e4m3_round_hand_ties() -> None:
    # (input, expected): ties between codes go to the even mantissa
    cases = [
        (1.0625, 1.0),  # between 1.0 (m=0) and 1.125 (m=1)
        (1.1875, 1.25),  # between 1.125 (m=1) and 1.25 (m=2)
        (1.9375, 2.0),  # binade top: between 1.875 (m=7) and 2.0 (m=0)
        (2.0**-10, 0.0),  # half the smallest subnormal
        (3 * 2.0**-10, 2 * 2.0**-9),  # between subnormals 1 and 2 (·2^-9)
        (432.0, 448.0),  # between 416 (m=5) and 448 (m=6)
        (464.0, 448.0),  # above max: saturates
        (-1.0625, -1.0),
    ]
    x = torch.tensor([c[0] for c in cases], dtype=torch.float64)
    assert e4m3_round(x).tolist() == [c[1] for c in cases]


def test_e4m3_round_agrees_with_torch_float8() -> None:
    rng = np.random.default_rng(1)
    x = torch.tensor(_probe_values(E4M3_GRID, rng, 2000, -12, 9), dtype=torch.float32)
    via_fp8 = x.clamp(-FP8_MAX, FP8_MAX).to(torch.float8_e4m3fn).to(torch.float32)
    assert torch.equal(e4m3_round(x), via_fp8)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16])
def test_e2m1_round_matches_naive(dtype: torch.dtype) -> None:
    rng = np.random.default_rng(2)
    v = _probe_values(E2M1_GRID, rng, 3000, -4, 4)
    x = torch.tensor(v, dtype=torch.float64).to(dtype)
    ref = naive_e2m1(x.double().numpy())
    got = e2m1_round(x)
    assert got.dtype == dtype
    np.testing.assert_array_equal(got.double().numpy(), ref)


def test_e2m1_round_hand_ties() -> None:
    ties = [0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 7.0, 100.0]
    want = [0.0, 1.0, 1.0, 2.0, 2.0, 4.0, 4.0, 6.0, 6.0]
    x = torch.tensor(ties, dtype=torch.float32)
    assert e2m1_round(x).tolist() == want
    assert e2m1_round(-x).tolist() == [-w for w in want]


# ---------------------------------------------------------------------------------------------------------
# block QDQ helpers


def _blocky(
    gen: torch.Generator, shape: tuple[int, ...], block: int, dtype: torch.dtype, lo: int = -20, hi: int = 12
) -> torch.Tensor:
    """Random x [..., n] whose blocks have magnitudes spread over ~2^lo..2^hi and ~10% exact zeros."""
    x = torch.randn(shape, generator=gen, dtype=torch.float64)
    nb = shape[-1] // block
    mag = torch.exp2(torch.randint(lo, hi, (*shape[:-1], nb, 1), generator=gen).double())
    x = (x.reshape(*shape[:-1], nb, block) * mag).reshape(shape)
    x = torch.where(torch.rand(shape, generator=gen, dtype=torch.float64) < 0.1, 0.0, x)
    return x.to(dtype)


def _np_blocks(x: torch.Tensor, block: int) -> np.ndarray:
    """[..., n] -> [B, block] float64 (exact for float32/float64/bfloat16 inputs)."""
    return x.double().reshape(-1, block).numpy()


def _np_work(x: torch.Tensor) -> type:
    return np.float64 if x.dtype == torch.float64 else np.float32


def _pow2_ceil_ref(y: float) -> float:
    """2^ceil(log2 y) by exact search over powers of two (no floating log)."""
    k = math.frexp(y)[1]  # y < 2^k
    while 2.0 ** (k - 1) >= y:
        k -= 1
    return 2.0**k


def _fp8_scales_ref(x: torch.Tensor, block: int) -> np.ndarray:
    wd = _np_work(x)
    xb = _np_blocks(x, block)
    amax = np.maximum(np.abs(xb).max(axis=1).astype(wd), wd(1e-4))
    return np.array([_pow2_ceil_ref(float(a / wd(448.0))) for a in amax])  # [B]


def _fp4_scales_ref(x: torch.Tensor, block: int, scale_fmt: str) -> np.ndarray:
    wd = _np_work(x)
    xb = _np_blocks(x, block)
    floor = 6.0 * 2.0**-126 if scale_fmt == "e8m0" else 6.0 * 2.0**-9
    amax = np.maximum(np.abs(xb).max(axis=1).astype(wd), wd(floor))
    ratio = (amax / wd(6.0)).astype(np.float64)
    if scale_fmt == "e8m0":
        return np.array([_pow2_ceil_ref(float(r)) for r in ratio])
    return naive_e4m3(ratio)


def test_pow2_scale_table_equals_clamp_divide_and_round_up() -> None:
    """The block scale in one lookup (`_pow2_scale`: first fmax·2^k ≥ amax) is pow2ceil(max(amax, floor) / fmax)
    exactly: at every binade edge fmax·2^k and its float neighbours, in both work dtypes, plus a random spread."""
    from dspark_mini.quant import _pow2_ceil, _pow2_scale

    for wd in (torch.float64, torch.float32):
        fi = torch.finfo(wd)
        lo, hi = (-1100, 1025) if wd == torch.float64 else (-160, 130)
        for floor, fmax in ((1e-4, 448.0), (6.0 * 2.0**-126, 6.0)):
            edges = []
            for k in range(lo, hi):
                try:
                    v = math.ldexp(fmax, k)
                except OverflowError:
                    continue
                if 0 < v <= fi.max:
                    t = torch.tensor([v], dtype=wd)
                    edges += [t, torch.nextafter(t, t.new_tensor([math.inf])), torch.nextafter(t, t.new_tensor([0.0]))]
            spread = torch.rand(20000, generator=torch.Generator().manual_seed(0), dtype=torch.float64)
            extra = torch.tensor([0.0, fi.max, fi.tiny, floor], dtype=torch.float64)
            a = torch.cat([*edges, spread.mul(80).sub(60).exp2().to(wd), extra.to(wd)])
            a = a[torch.isfinite(a) & (a >= 0)]
            assert torch.equal(_pow2_scale(a, floor, fmax), _pow2_ceil(a.clamp(min=floor) / fmax)), (wd, fmax)


# ---------------------------------------------------------------------------------------------------------
# 2. fp8_qdq


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize("block", [32, 8, 1])
def test_fp8_qdq_matches_naive_and_scales_are_pow2(dtype: torch.dtype, block: int) -> None:
    gen = torch.Generator().manual_seed(block)
    x = _blocky(gen, (3, 4, 64), block, dtype)
    y = fp8_qdq(x, block)
    assert y.shape == x.shape and y.dtype == dtype
    scale = _fp8_scales_ref(x, block)  # [B]
    assert all(math.frexp(s)[0] == 0.5 for s in scale)  # powers of two
    xb, yb = _np_blocks(x, block), _np_blocks(y, block)
    q = yb / scale[:, None]  # recovered E4M3 codes
    assert np.isin(q, E4M3_GRID).all()
    assert np.abs(q).max() <= 448.0
    # the chosen scale is the smallest power of two that keeps the block in range
    amax = np.abs(xb).max(axis=1)
    big = amax >= 1e-4
    assert (amax[big] / scale[big] <= 448.0).all() and (amax[big] / scale[big] > 224.0).all()
    ref = naive_e4m3((xb / scale[:, None]).ravel()).reshape(xb.shape) * scale[:, None]
    np.testing.assert_array_equal(yb, ref)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32, torch.bfloat16])
def test_fp8_qdq_idempotent(dtype: torch.dtype) -> None:
    gen = torch.Generator().manual_seed(3)
    x = _blocky(gen, (5, 128), 32, dtype)
    y = fp8_qdq(x)
    assert not torch.equal(x, y)
    assert torch.equal(fp8_qdq(y), y)


def test_fp8_qdq_relative_error_in_normal_range() -> None:
    gen = torch.Generator().manual_seed(4)
    x = _blocky(gen, (16, 256), 32, torch.float64)
    y = fp8_qdq(x)
    xb, yb = x.reshape(-1, 32), y.reshape(-1, 32)
    amax = xb.abs().amax(dim=1, keepdim=True)
    normal = (xb.abs() >= amax * 2.0**-6) & (amax >= 1e-4)
    rel = ((yb - xb).abs() / xb.abs())[normal]
    assert rel.numel() > 1000
    assert rel.max().item() <= 2.0**-4
    assert rel.max().item() > 2.0**-5  # the bound is nearly reached, so the check is not vacuous


def test_fp8_qdq_blocks_are_independent() -> None:
    gen = torch.Generator().manual_seed(5)
    x = _blocky(gen, (2, 96), 32, torch.float32)
    y = fp8_qdq(x)
    x2 = x.clone()
    x2[1, 32:64] *= 1000.0
    x2[0, 40] = 7.0e3
    y2 = fp8_qdq(x2)
    keep = torch.ones_like(x, dtype=torch.bool)
    keep[:, 32:64] = False
    assert torch.equal(y2[keep], y[keep])
    assert not torch.equal(y2[:, 32:64], y[:, 32:64])


def test_fp8_qdq_zeros() -> None:
    x = torch.tensor([[0.0] * 32 + [0.0, 1.0, -3.0, 0.0] * 8])  # [1, 64]: an all-zero block, then mixed
    y = fp8_qdq(x)
    assert torch.isfinite(y).all()
    assert (y[x == 0] == 0).all()
    assert torch.equal(y[0, 32:], x[0, 32:])  # 1 and 3 are on the grid at scale 2^-7
    tiny = torch.full((32,), 1e-12)  # below the 1e-4 floor: scale 2^-22, 1e-12 / 2^-22 < 2^-10 -> 0
    assert torch.equal(fp8_qdq(tiny), torch.zeros(32))


@pytest.mark.parametrize("shape", [(32,), (0, 32), (2, 3, 4, 64), (1, 1, 32)])
def test_fp8_qdq_any_leading_shape(shape: tuple[int, ...]) -> None:
    x = torch.randn(shape, generator=torch.Generator().manual_seed(6))
    y = fp8_qdq(x)
    assert y.shape == x.shape
    assert torch.equal(y.reshape(-1, 32), fp8_qdq(x.reshape(-1, 32)))


def test_fp8_qdq_bfloat16_matches_float32() -> None:
    x = torch.randn(4, 64, generator=torch.Generator().manual_seed(7)).bfloat16()
    y = fp8_qdq(x)
    assert y.dtype == torch.bfloat16
    y32 = fp8_qdq(x.float())
    assert torch.equal(y.float(), y32)  # E4M3 · 2^k is exact in bfloat16


@settings(max_examples=40, deadline=None)
@given(
    lead=st.lists(st.integers(1, 3), min_size=0, max_size=2),
    nblocks=st.integers(1, 3),
    block=st.sampled_from([1, 4, 16, 32]),
    log_mag=st.integers(-30, 20),
    seed=st.integers(0, 2**31 - 1),
)
def test_qdq_idempotent_property(lead: list[int], nblocks: int, block: int, log_mag: int, seed: int) -> None:
    gen = torch.Generator().manual_seed(seed)
    x = torch.randn(*lead, nblocks * block, generator=gen) * 2.0**log_mag
    y8 = fp8_qdq(x, block)
    assert y8.shape == x.shape and torch.equal(fp8_qdq(y8, block), y8)
    y4 = fp4_qdq(x, block, "e8m0")
    assert y4.shape == x.shape and torch.equal(fp4_qdq(y4, block, "e8m0"), y4)


# ---------------------------------------------------------------------------------------------------------
# 3. fp4_qdq


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize(("block", "scale_fmt"), [(32, "e8m0"), (16, "e4m3"), (8, "e4m3"), (4, "e8m0")])
def test_fp4_qdq_matches_naive_and_bounds(dtype: torch.dtype, block: int, scale_fmt: str) -> None:
    gen = torch.Generator().manual_seed(10 + block)
    # an E4M3 scale saturates at 448, so keep amax below 6 · 448 there (see test_fp4_qdq_e4m3_scale_limits)
    x = _blocky(gen, (4, 3, 64), block, dtype, *((-20, 12) if scale_fmt == "e8m0" else (-8, 8)))
    y = fp4_qdq(x, block, scale_fmt)
    assert y.shape == x.shape and y.dtype == dtype
    scale = _fp4_scales_ref(x, block, scale_fmt)[:, None]  # [B, 1]
    if scale_fmt == "e8m0":
        assert all(math.frexp(s)[0] == 0.5 for s in scale.ravel())
    else:
        assert np.isin(scale, E4M3_GRID).all() and (scale > 0).all()
    xb, yb = _np_blocks(x, block), _np_blocks(y, block)
    q = yb / scale
    assert np.isin(q, E2M1_GRID).all()
    assert np.abs(q).max() <= 6.0
    err = np.abs(xb - yb)
    small = np.abs(xb / scale) <= 2.0
    assert (err <= 0.25 * scale)[small].all()  # half the 0.5 gap below 2
    # an E4M3 scale is within 2^-4 of amax/6 only in E4M3's normal range; below it, the scale can round
    # down far enough that the block's top values clip (see test_fp4_qdq_e4m3_scale_limits)
    normal = np.ones(len(xb), dtype=bool)
    if scale_fmt == "e4m3":
        normal = np.abs(xb).max(axis=1) / 6 >= 2.0**-6
        assert normal.sum() >= len(xb) // 2
    assert (err[normal] <= scale[normal]).all()  # half the widest gap (4 -> 6)
    ref = naive_e2m1(np.clip(xb / scale, -6, 6).ravel()).reshape(xb.shape) * scale
    np.testing.assert_array_equal(yb, ref)


def test_fp4_qdq_e8m0_idempotent_and_e4m3_scale_below_amax() -> None:
    gen = torch.Generator().manual_seed(11)
    x = _blocky(gen, (8, 128), 32, torch.float32)
    y = fp4_qdq(x, 32, "e8m0")
    assert not torch.equal(x, y)
    assert torch.equal(fp4_qdq(y, 32, "e8m0"), y)
    # e4m3 scales: amax / 6 = 6.2 / 6 rounds down to 1.0, so 6.2 clamps to 6; 5.0 is a tie -> 4
    x = torch.tensor([6.2, 5.0, -0.74, 0.0] * 4)
    assert fp4_qdq(x, 16, "e4m3").tolist() == [6.0, 4.0, -0.5, 0.0] * 4
    # with e8m0 the same block gets scale 2 (6.2/6 > 1): 6.2 -> 6 (x3·2), 5 -> 4, -0.74 -> -1
    assert fp4_qdq(x, 16, "e8m0").tolist() == [6.0, 4.0, -1.0, 0.0] * 4


def test_fp4_qdq_e4m3_scale_limits() -> None:
    # amax / 6 = 1000 > 448: the scale saturates at 448, so everything beyond 6 · 448 = 2688 clips there
    x = torch.tensor([6000.0, 2688.0, 1000.0, -5000.0] * 4)
    assert fp4_qdq(x, 16, "e4m3").tolist() == [2688.0, 2688.0, 896.0, -2688.0] * 4
    # the power-of-two scale has no such ceiling: scale 1024; 6000 -> 6, 2688 -> 3 (2.625), -5000 -> -4 (4.88)
    assert fp4_qdq(x, 16, "e8m0").tolist() == [6144.0, 3072.0, 1024.0, -4096.0] * 4
    # amax / 6 = 0.0025 is an E4M3 subnormal: it rounds to 2^-9 (1.28 -> 1), so 0.015 / 2^-9 = 7.68 clips to 6
    x = torch.tensor([0.015, 0.0] * 8, dtype=torch.float64)
    assert fp4_qdq(x, 16, "e4m3").tolist() == [6 * 2.0**-9, 0.0] * 8


def test_fp4_qdq_zero_and_tiny_blocks() -> None:
    z = torch.zeros(2, 32)
    for fmt in ("e8m0", "e4m3"):
        out = fp4_qdq(z, 16, fmt)
        assert torch.isfinite(out).all() and torch.equal(out, z)
    # e4m3 floor: amax 6·2^-9 -> scale 2^-9 (smallest subnormal E4M3); 2^-9 itself is 1·scale
    t = torch.full((16,), 2.0**-9, dtype=torch.float64)
    assert torch.equal(fp4_qdq(t, 16, "e4m3"), t)


def test_fp4_qdq_bfloat16_matches_float32() -> None:
    x = torch.randn(4, 64, generator=torch.Generator().manual_seed(12)).bfloat16()
    for fmt, block in (("e8m0", 32), ("e4m3", 16)):
        y = fp4_qdq(x, block, fmt)
        assert y.dtype == torch.bfloat16
        assert torch.equal(y.float(), fp4_qdq(x.float(), block, fmt))


# ---------------------------------------------------------------------------------------------------------
# 4. byte helpers


def test_byte_helpers_real_sizes() -> None:
    assert fp8_bytes(512, 32) == 528  # sliding-window KV entry
    assert fp8_bytes(512) == 528
    assert fp4_bytes(512, 16) == 288  # compressed KV entry
    assert fp4_bytes(128, 32) == 68  # indexer key
    per_token = fp4_bytes(512, 16) + fp4_bytes(128, 32)
    assert per_token / 2 * 3 + per_token == 890  # the 890 B/token of global KV


@pytest.mark.parametrize(("n", "block"), [(0, 4), (64, 1), (96, 32), (4096, 16), (6, 2)])
def test_byte_helpers_bit_accounting(n: int, block: int) -> None:
    assert fp8_bytes(n, block) * 8 == n * 8 + (n // block) * 8
    assert fp4_bytes(n, block) * 8 == n * 4 + (n // block) * 8


# ---------------------------------------------------------------------------------------------------------
# 5. errors name the argument


@pytest.mark.parametrize(
    ("call", "name"),
    [
        (lambda: fp8_qdq(torch.zeros(30), 32), r"x\.shape\[-1\]"),
        (lambda: fp8_qdq(torch.zeros(2, 48)), r"x\.shape\[-1\]"),
        (lambda: fp8_qdq(torch.zeros(32), 0), "block"),
        (lambda: fp8_qdq(torch.zeros(32), -4), "block"),
        (lambda: fp8_qdq(torch.tensor(1.0)), "x"),
        (lambda: fp8_qdq(torch.zeros(32, dtype=torch.int32)), "x"),
        (lambda: fp4_qdq(torch.zeros(20), 16, "e4m3"), r"x\.shape\[-1\]"),
        (lambda: fp4_qdq(torch.zeros(32), 0, "e8m0"), "block"),
        (lambda: fp4_qdq(torch.zeros(32), 16, "ue8m0"), "scale_fmt"),
        (lambda: fp4_qdq(torch.zeros(32), 16, "E4M3"), "scale_fmt"),
        (lambda: fp8_bytes(100, 32), "n_values"),
        (lambda: fp8_bytes(-32, 32), "n_values"),
        (lambda: fp8_bytes(64, 0), "block"),
        (lambda: fp4_bytes(100, 16), "n_values"),
        (lambda: fp4_bytes(15, 3), "n_values"),
        (lambda: fp4_bytes(512, -16), "block"),
    ],
)
def test_bad_arguments_raise_value_error(call, name: str) -> None:
    with pytest.raises(ValueError, match=name):
        call()


# ---------------------------------------------------------------------------------------------------------
# 6. straight-through estimator


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
@pytest.mark.parametrize(
    ("fn", "args"), [(fp8_qdq, (32,)), (fp4_qdq, (32, "e8m0")), (fp4_qdq, (16, "e4m3")), (e4m3_round, ())]
)
def test_qdq_ste_forward_and_gradient(dtype: torch.dtype, fn, args: tuple) -> None:
    gen = torch.Generator().manual_seed(20)
    x = (torch.randn(3, 64, generator=gen, dtype=dtype) * 3.0).requires_grad_(True)
    y = qdq_ste(x, fn, *args)
    want = fn(x.detach(), *args)
    assert torch.equal(y.detach(), want)
    assert not torch.equal(want, x.detach())  # the quantizer really changes values
    y.sum().backward()
    assert torch.equal(x.grad, torch.ones_like(x))
    # an arbitrary upstream gradient passes through unchanged
    g = torch.randn(3, 64, generator=gen, dtype=dtype)
    x.grad = None
    (qdq_ste(x, fn, *args) * g).sum().backward()
    assert torch.equal(x.grad, g)


# ---------------------------------------------------------------------------------------------------------
# 7. fp8_act_qdq: an expert matmul's input as the reference's GEMM reads it


def _naive_act_qdq(x: torch.Tensor, block: int = 32) -> torch.Tensor:
    """Block by block in Python: s = the smallest power of two ≥ max(amax, 1e-4) / 448 (in the work dtype), each
    value → nearest E4M3 of v / s (brute force, ties to even) · s."""
    wd = _np_work(x)
    rows = x.double().reshape(-1, x.shape[-1]).numpy()
    out = np.empty_like(rows)
    for r, row in enumerate(rows):
        for b in range(0, row.size, block):
            v = row[b : b + block]
            amax = max(wd(np.abs(v).max()), wd(1e-4))
            s = _pow2_ceil_ref(float(amax / wd(448.0)))
            out[r, b : b + block] = naive_e4m3(v / s) * s
    return torch.from_numpy(out).reshape(x.shape).to(x.dtype)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float32])
def test_fp8_act_qdq_matches_naive_per_block_loop(dtype: torch.dtype) -> None:
    x = _blocky(torch.Generator().manual_seed(30), (2, 3, 96), 32, dtype, lo=-16, hi=10)
    x[0, 0, :32] = 0.0  # an all-zero block
    x[0, 1, 32:64] *= 1e-9  # a block below the amax floor
    y = fp8_act_qdq(x)
    assert y.shape == x.shape and y.dtype == dtype
    assert torch.equal(y, _naive_act_qdq(x))
    assert not torch.equal(y, x)


def test_fp8_act_qdq_is_straight_through_with_autograd() -> None:
    """Training sees the QDQ values and the identity gradient (the weights' QAT rule), so gradients reach x."""
    gen = torch.Generator().manual_seed(31)
    x = (torch.randn(4, 64, generator=gen, dtype=torch.float64) * 5).requires_grad_(True)
    g = torch.randn(4, 64, generator=gen, dtype=torch.float64)
    y = fp8_act_qdq(x)
    assert torch.equal(y.detach(), fp8_qdq(x.detach(), 32))
    (y * g).sum().backward()
    assert torch.equal(x.grad, g)
    with torch.no_grad():
        assert torch.equal(fp8_act_qdq(x), fp8_qdq(x, 32))

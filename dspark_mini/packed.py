"""Packed weights: FP8 / MXFP4 tensors held as the real checkpoint stores them, dequantized at use.

The lab simulates the low-precision weights with quantize→dequantize (`quant.py`); a packed model instead
*holds* the codes and scales (memory ≈ the checkpoint's bytes) and rebuilds the same values at each use.
The formats of DeepSeek-V4.1-Flash (its reference code and checkpoint; E8M0 = UE8M0 = one power-of-two byte,
2^(code − 127)):

  format     used for                                    codes                              scales
  fp8_block  dense projections: attention wq_a wq_b     float8_e4m3fn [O, I]              float8_e8m0fnu [O/32, I/32]
             wkv wo_a wo_b, shared expert, indexer        (one byte a value)                (one per 32×32 block)
             wq_b, Engram wkv, DSpark main_proj
  mxfp4      routed experts (backbone and DSpark)         uint8 [O, I/2]: two E2M1 codes    float8_e8m0fnu [O, I/32]
                                                          a byte, low nibble = even column  (one per 1×32 block)
  fp8_rows   Engram tables                                float8_e4m3fn [R, D]              float8_e8m0fnu [R, D/32]
  bf16/fp32  everything else (embed, head, norms, compressor, router, mHC, sinks, …): not packed

Scales and rounding are quant.py's, so unpack(pack(w)) == QDQ(w) bit for bit:
  FP8:   s = 2^ceil(log2(max(amax, 1e-4) / 448)),      code = e4m3(x / s)   (RNE, saturating at ±448)
  MXFP4: s = 2^ceil(log2(max(amax, 6·2^-126) / 6)),    code = e2m1(x / s)   (RNE, saturating at ±6)
  dequantized value = code · s, computed in fp32 (fp64 for an fp64 model) and cast to the compute dtype.
The lab has no simulation of FP8 *dense* weights (only routed experts, Engram tables and KV caches are QDQ'd),
so `fp8_block_qdq` defines it the same way over 32×32 tiles (quant.fp8_qdq with one block = one tile).
An E2M1 code is sign·8 + the index of |value| in (0, .5, 1, 1.5, 2, 3, 4, 6).

`slice_packed(module, dim, start, stop)` cuts a packed weight's codes and scales on their blocks (what one rank of
a sharded model keeps; `packed_ranges` says which stored ranges, so a loader can read just those).
`pack_model(model)` swaps a built model's Linear / Embedding modules for `PackedLinear` / `PackedEmbedding` by
walking the module tree (model.py is not touched); their `weight` is a property that dequantizes at each access,
so every existing `F.linear(x, m.weight)` keeps working. Inference only (no gradients reach packed weights),
and move a packed model with `.to(device)` only: `.to(dtype)` would also convert the float8 buffers.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from . import quant
from .linear import cast
from .quant import E2M1_VALUES, FP4_MAX, FP8_MAX, e2m1_round, e4m3_round, fp4_qdq, fp8_qdq

BLOCK = 32  # every scale covers 32 values (32×32 for fp8_block)
PACKED_FORMATS = ("fp8_block", "mxfp4", "fp8_rows")
FORMATS = PACKED_FORMATS + ("bf16", "fp32")
FP8 = torch.float8_e4m3fn
E8M0 = torch.float8_e8m0fnu  # needs torch ≥ 2.7
_FP8_AMAX_FLOOR = 1e-4  # as quant.fp8_qdq
_FP4_AMAX_FLOOR = 6.0 * 2.0**-126  # as quant.fp4_qdq with scale_fmt "e8m0"


class PackError(ValueError):
    """A tensor cannot be packed or unpacked (wrong shape, dtype or values); the message names it."""


# ---- which format a weight has in the real checkpoint ---------------------------------------------
# Rules on the lab state-dict name with its block prefix ("layers.{i}." or "mtp.layers.{k}.") removed; the
# first match wins. Everything not listed is bf16 (embed, head, norms, compressor, indexer wk / weights_proj,
# router weight, Engram q/k weights, Markov and confidence heads).
_FORMAT_RULES: tuple[tuple[str, str], ...] = (
    (r"ffn\.experts\.\d+\.w[123]\.weight", "mxfp4"),
    (r"engram\.embed\.weight", "fp8_rows"),
    (r"attn\.(wq_a|wq_b|wkv|wo_a|wo_b)\.weight", "fp8_block"),
    (r"attn\.indexer\.wq_b\.weight", "fp8_block"),
    (r"ffn\.shared_experts\.w[123]\.weight", "fp8_block"),
    (r"engram\.wkv\.weight", "fp8_block"),
    (r"mtp\.main_proj\.weight", "fp8_block"),
    (r"hc_(attn|ffn)\.(fn|base|scale)", "fp32"),
    (r"attn\.attn_sink", "fp32"),
    (r"ffn\.gate\.bias", "fp32"),
)
_BLOCK_PREFIX = re.compile(r"^(mtp\.layers|layers)\.\d+\.")


def weight_format(lab_name: str) -> str:
    """The checkpoint format of a lab state-dict tensor: one of FORMATS (the real checkpoint's formats)."""
    local = _BLOCK_PREFIX.sub("", lab_name)
    for pattern, fmt in _FORMAT_RULES:
        if re.fullmatch(pattern, local):
            return fmt
    return "bf16"


# ---- helpers ------------------------------------------------------------------------------------------
def _work_dtype(dtype: torch.dtype) -> torch.dtype:
    """quant.py's arithmetic precision: fp64 for an fp64 tensor, fp32 for everything else."""
    return torch.float64 if dtype == torch.float64 else torch.float32


def _check_float(w: torch.Tensor, name: str, dims: int | None = None) -> None:
    if not isinstance(w, torch.Tensor) or not w.is_floating_point() or w.dtype in (FP8, E8M0):
        raise PackError(f"{name}: expected a float tensor (bfloat16/float32/float64), got {getattr(w, 'dtype', w)}")
    if dims is not None and w.dim() != dims:
        raise PackError(f"{name}: expected a {dims}-D weight, got shape {tuple(w.shape)}")
    if w.dim() == 0 or w.shape[-1] % BLOCK:
        raise PackError(f"{name}: the last dim of shape {tuple(w.shape)} must be a multiple of {BLOCK}")
    if not bool(torch.isfinite(w).all()):
        raise PackError(f"{name}: holds NaN or ±inf; allowed finite values only")


def _e8m0_of_pow2_ceil(y: torch.Tensor, name: str) -> torch.Tensor:
    """E8M0 codes of 2^ceil(log2 y) for y > 0 (the smallest power of two ≥ y).  y [...] → float8_e8m0fnu [...]

    frexp: y = m · 2^e with m in [0.5, 1); y is itself a power of two exactly when m == 0.5."""
    m, e = torch.frexp(y)
    e = torch.where(m == 0.5, e - 1, e)
    lo, hi = int(e.min()), int(e.max())
    if lo < -127 or hi > 127:
        raise PackError(f"{name}: a block scale 2^{hi if hi > 127 else lo} is outside E8M0's 2^-127 … 2^127")
    return (e + 127).to(torch.uint8).view(E8M0)


def _scale_values(scale: torch.Tensor, wd: torch.dtype) -> torch.Tensor:
    """E8M0 codes → their powers of two in the work dtype (exact)."""
    return scale.to(wd)


def _check_packed(fmt: str, q: torch.Tensor, scale: torch.Tensor, name: str) -> tuple[int, ...]:
    """Check codes and scales of one packed tensor; returns its logical shape."""
    want_q = torch.uint8 if fmt == "mxfp4" else FP8
    if q.dtype != want_q or scale.dtype != E8M0:
        raise PackError(
            f"{name} ({fmt}): codes {q.dtype} and scales {scale.dtype}: allowed codes {want_q} and scales {E8M0}"
        )
    if q.dim() < 1 or (fmt == "fp8_block" and q.dim() != 2):
        raise PackError(f"{name} ({fmt}): codes of shape {tuple(q.shape)} have the wrong number of dims")
    if fmt == "mxfp4":
        shape = (*q.shape[:-1], q.shape[-1] * 2)
        want_s = (*shape[:-1], shape[-1] // BLOCK)
    elif fmt == "fp8_rows":
        shape = tuple(q.shape)
        want_s = (*shape[:-1], shape[-1] // BLOCK)
    else:
        shape = tuple(q.shape)
        want_s = (shape[0] // BLOCK, shape[1] // BLOCK)
    if any(d % BLOCK for d in (shape[-2:] if fmt == "fp8_block" else shape[-1:])) or tuple(scale.shape) != want_s:
        raise PackError(
            f"{name} ({fmt}): codes {tuple(q.shape)} (values {shape}) and scales {tuple(scale.shape)}: "
            f"allowed scales of shape {want_s} with the blocked dims multiples of {BLOCK}"
        )
    return shape


# ---- FP8 E4M3, one E8M0 scale per 1×32 (Engram rows) or per 32×32 (dense) -------------------------
def _tiles(w: torch.Tensor) -> torch.Tensor:
    """[O, I] → [O/32, I/32, 1024]: each 32×32 tile as one row of 1024 values."""
    O, I = w.shape
    tiles = w.reshape(O // BLOCK, BLOCK, I // BLOCK, BLOCK).transpose(1, 2)  # [O/32, I/32, 32, 32]
    return tiles.reshape(O // BLOCK, I // BLOCK, BLOCK * BLOCK)  # sizes spelled out: an empty cut stays empty


def _untile(t: torch.Tensor, O: int, I: int) -> torch.Tensor:
    """[O/32, I/32, 1024] → [O, I] (the inverse of `_tiles`)."""
    return t.reshape(O // BLOCK, I // BLOCK, BLOCK, BLOCK).transpose(1, 2).reshape(O, I)


def _fp8_encode(xb: torch.Tensor, name: str) -> tuple[torch.Tensor, torch.Tensor]:
    """Blocks along the last dim xb [..., n] (work dtype) → E4M3 codes [..., n], E8M0 scale [..., 1]."""
    amax = xb.abs().amax(-1, keepdim=True).clamp(min=_FP8_AMAX_FLOOR)  # [..., 1]
    scale = _e8m0_of_pow2_ceil(amax / FP8_MAX, name)  # [..., 1]
    q = e4m3_round(xb / _scale_values(scale, xb.dtype))  # on the E4M3 grid, so the cast below is exact
    return q.to(FP8), scale


def pack_fp8_block(w: torch.Tensor, name: str = "weight") -> tuple[torch.Tensor, torch.Tensor]:
    """A dense weight w [O, I] → codes float8_e4m3fn [O, I], scales float8_e8m0fnu [O/32, I/32]."""
    _check_float(w, name, dims=2)
    O, I = w.shape
    if O % BLOCK:
        raise PackError(f"{name}: shape {tuple(w.shape)}: both dims must be multiples of {BLOCK} (32×32 blocks)")
    q, scale = _fp8_encode(_tiles(cast(w, _work_dtype(w.dtype))), name)  # [O/32, I/32, 1024], [O/32, I/32, 1]
    return _untile(q.view(torch.uint8), O, I).view(FP8), scale.squeeze(-1)


def unpack_fp8_block(q: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype, name: str = "weight") -> torch.Tensor:
    """codes [O, I] + scales [O/32, I/32] → w [O, I] in `dtype`."""
    O, I = _check_packed("fp8_block", q, scale, name)
    wd = _work_dtype(dtype)
    t = _tiles(q.to(wd)) * _scale_values(scale, wd).unsqueeze(-1)  # [O/32, I/32, 1024]
    return cast(_untile(t, O, I), dtype)


def fp8_block_qdq(w: torch.Tensor) -> torch.Tensor:
    """The simulation of an fp8_block weight: quant.fp8_qdq with each 32×32 tile as one block.  [O, I] → [O, I]"""
    _check_float(w, "weight", dims=2)
    O, I = w.shape
    return _untile(fp8_qdq(_tiles(w), BLOCK * BLOCK), O, I)


def pack_fp8_rows(w: torch.Tensor, name: str = "weight") -> tuple[torch.Tensor, torch.Tensor]:
    """Table rows w [..., D] → codes float8_e4m3fn [..., D], scales float8_e8m0fnu [..., D/32]."""
    _check_float(w, name)
    xb = cast(w, _work_dtype(w.dtype)).unflatten(-1, (-1, BLOCK))  # [..., D/32, 32]
    q, scale = _fp8_encode(xb, name)
    return q.flatten(-2), scale.squeeze(-1)


def unpack_fp8_rows(q: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype, name: str = "weight") -> torch.Tensor:
    """codes [..., D] + scales [..., D/32] → rows [..., D] in `dtype` (works on any gathered subset of rows)."""
    _check_packed("fp8_rows", q, scale, name)
    wd = _work_dtype(dtype)
    v = q.to(wd).unflatten(-1, (-1, BLOCK)) * _scale_values(scale, wd).unsqueeze(-1)  # [..., D/32, 32]
    return cast(v.flatten(-2), dtype)


# ---- MXFP4: E2M1 two per byte, one E8M0 scale per 1×32 ---------------------------------------------
_E2M1_MAGS = torch.tensor(E2M1_VALUES, dtype=torch.float64)  # [8] code → |value|


def _e2m1_table(wd: torch.dtype) -> torch.Tensor:
    """[16] code → value: codes 0-7 positive, 8-15 the same magnitudes negated (sign bit = 8)."""
    return torch.cat([_E2M1_MAGS, -_E2M1_MAGS]).to(wd)


def pack_mxfp4(w: torch.Tensor, name: str = "weight") -> tuple[torch.Tensor, torch.Tensor]:
    """w [..., I] → bytes uint8 [..., I/2] (low nibble = even element), scales float8_e8m0fnu [..., I/32]."""
    _check_float(w, name)
    xb = cast(w, _work_dtype(w.dtype)).unflatten(-1, (-1, BLOCK))  # [..., I/32, 32]
    amax = xb.abs().amax(-1, keepdim=True).clamp(min=_FP4_AMAX_FLOOR)  # [..., I/32, 1]
    scale = _e8m0_of_pow2_ceil(amax / FP4_MAX, name)
    v = e2m1_round(xb / _scale_values(scale, xb.dtype)).flatten(-2)  # [..., I] on the E2M1 grid
    mag = torch.searchsorted(_E2M1_MAGS.to(v.dtype), v.abs())  # [..., I] index of |v| (exact: v is on the grid)
    code = (mag + 8 * (v < 0)).to(torch.uint8)  # [..., I] 4-bit codes
    return code[..., 0::2] | (code[..., 1::2] << 4), scale.squeeze(-1)  # [..., I/2], [..., I/32]


def unpack_mxfp4(q: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype, name: str = "weight") -> torch.Tensor:
    """bytes [..., I/2] + scales [..., I/32] → w [..., I] in `dtype`."""
    _check_packed("mxfp4", q, scale, name)
    wd = _work_dtype(dtype)
    code = torch.stack([q & 0x0F, q >> 4], dim=-1).flatten(-2)  # [..., I]: even element from the low nibble
    v = _e2m1_table(wd)[code.long()].unflatten(-1, (-1, BLOCK))  # [..., I/32, 32]
    return cast((v * _scale_values(scale, wd).unsqueeze(-1)).flatten(-2), dtype)


# ---- one entry point per direction -----------------------------------------------------------------
_PACK: dict[str, Callable] = {"fp8_block": pack_fp8_block, "mxfp4": pack_mxfp4, "fp8_rows": pack_fp8_rows}
_UNPACK: dict[str, Callable] = {"fp8_block": unpack_fp8_block, "mxfp4": unpack_mxfp4, "fp8_rows": unpack_fp8_rows}


def _check_fmt(fmt: str) -> str:
    if fmt not in PACKED_FORMATS:
        raise PackError(f"format = {fmt!r} is invalid: allowed one of {PACKED_FORMATS}")
    return fmt


def pack(fmt: str, w: torch.Tensor, name: str = "weight") -> tuple[torch.Tensor, torch.Tensor]:
    """(codes, scales) of w in a packed format (see the module docstring for the shapes)."""
    return _PACK[_check_fmt(fmt)](w, name)


def unpack(fmt: str, q: torch.Tensor, scale: torch.Tensor, dtype: torch.dtype, name: str = "weight") -> torch.Tensor:
    """The values of (codes, scales) in `dtype`."""
    return _UNPACK[_check_fmt(fmt)](q, scale, dtype, name)


def qdq(fmt: str, w: torch.Tensor) -> torch.Tensor:
    """What the lab's simulation makes of w in a packed format (== unpack(pack(w)) bit for bit)."""
    if _check_fmt(fmt) == "mxfp4":
        return fp4_qdq(w, BLOCK, "e8m0")
    return fp8_qdq(w, BLOCK) if fmt == "fp8_rows" else fp8_block_qdq(w)


def packed_shapes(fmt: str, shape: tuple[int, ...]) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(codes shape, scales shape) of a weight of logical `shape` — for headers, without any data."""
    shape = tuple(shape)
    if _check_fmt(fmt) == "mxfp4":
        return (*shape[:-1], shape[-1] // 2), (*shape[:-1], shape[-1] // BLOCK)
    if fmt == "fp8_rows":
        return shape, (*shape[:-1], shape[-1] // BLOCK)
    return shape, (shape[0] // BLOCK, shape[1] // BLOCK)


# ---- modules -------------------------------------------------------------------------------------------
class PackedWeight(nn.Module):
    """Buffers `qweight` (codes) and `scale` (E8M0) as the checkpoint stores them; `weight` dequantizes them
    into `compute_dtype` at every access (nothing dequantized is kept)."""

    def __init__(self, fmt: str, qweight: torch.Tensor, scale: torch.Tensor, compute_dtype: torch.dtype, name: str):
        super().__init__()
        self.fmt, self.compute_dtype, self.name = _check_fmt(fmt), compute_dtype, name
        self.shape = _check_packed(fmt, qweight, scale, name)  # logical shape of the weight
        self.register_buffer("qweight", qweight)
        self.register_buffer("scale", scale)

    @classmethod
    def from_float(cls, fmt: str, w: torch.Tensor, name: str = "weight"):
        q, s = pack(fmt, w.detach(), name)
        return cls(fmt, q, s, w.dtype, name)

    @property
    def weight(self) -> torch.Tensor:
        return unpack(self.fmt, self.qweight, self.scale, self.compute_dtype, self.name)

    def nbytes(self) -> int:
        return self.qweight.nbytes + self.scale.nbytes

    def extra_repr(self) -> str:
        return f"{self.fmt}, shape={self.shape}, compute_dtype={self.compute_dtype}, bytes={self.nbytes():,}"


class PackedLinear(PackedWeight):
    """A bias-free Linear whose weight [out, in] is fp8_block or mxfp4: y = x · dequant(weight)ᵀ."""

    def __init__(self, fmt: str, qweight, scale, compute_dtype, name: str = "weight"):
        if fmt not in ("fp8_block", "mxfp4"):
            raise PackError(f"{name}: PackedLinear holds 'fp8_block' or 'mxfp4' weights, not {fmt!r}")
        super().__init__(fmt, qweight, scale, compute_dtype, name)
        self.out_features, self.in_features = self.shape

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.linear(x, self.weight)


class PackedEmbedding(PackedWeight):
    """An embedding table [rows, dim] in fp8_rows: a lookup dequantizes only the rows it reads."""

    def __init__(self, fmt: str, qweight, scale, compute_dtype, name: str = "weight"):
        if fmt != "fp8_rows":
            raise PackError(f"{name}: PackedEmbedding holds 'fp8_rows' tables, not {fmt!r}")
        super().__init__(fmt, qweight, scale, compute_dtype, name)
        self.num_embeddings, self.embedding_dim = self.shape

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """ids [...] → rows [..., dim]."""
        return unpack_fp8_rows(self.qweight[ids], self.scale[ids], self.compute_dtype, self.name)


def packed_module(fmt: str, qweight: torch.Tensor, scale: torch.Tensor, compute_dtype: torch.dtype, name: str):
    """The module that holds a packed weight of this format (from stored codes, nothing re-quantized)."""
    cls = PackedEmbedding if fmt == "fp8_rows" else PackedLinear
    return cls(fmt, qweight, scale, compute_dtype, name)


def packed_ranges(fmt: str, dim: int, start: int, stop: int, name: str = "weight"):
    """Where rows (dim 0) or columns (dim 1) start … stop − 1 of a packed weight [O, I] lie in its stored tensors:
    ((dim, start, stop) of the codes, (dim, start, stop) of the scales). A cut through a block is a PackError
    (fp8_block cuts both dims at multiples of 32; mxfp4 / fp8_rows cut rows anywhere, columns at multiples of 32)."""
    _check_fmt(fmt)
    if dim not in (0, 1) or not 0 <= start <= stop:
        raise PackError(f"{name} ({fmt}): a cut dim {dim}, {start} … {stop - 1} is invalid: allowed dim 0 or 1")
    blocked = dim == 1 or fmt == "fp8_block"
    if blocked and (start % BLOCK or stop % BLOCK):
        what = "rows" if dim == 0 else "columns"
        raise PackError(
            f"{name} ({fmt}): cannot keep {what} {start} … {stop - 1}: that cuts through its {BLOCK}-wide scale blocks "
            f"(allowed: {what} at multiples of {BLOCK})"
        )
    if not blocked:  # rows of mxfp4 / fp8_rows: one scale row per row
        return (0, start, stop), (0, start, stop)
    per_code = 2 if (fmt == "mxfp4" and dim == 1) else 1  # two E2M1 codes a byte along a row
    return (dim, start // per_code, stop // per_code), (dim, start // BLOCK, stop // BLOCK)


def cut(t: torch.Tensor, dim: int, start: int, stop: int) -> torch.Tensor:
    """t[start:stop] along dim 0 or 1, as its own contiguous tensor."""
    return (t[start:stop] if dim == 0 else t[:, start:stop]).contiguous()


def slice_packed(mod: PackedWeight, dim: int, start: int, stop: int) -> PackedWeight:
    """A packed module of the same class holding rows (dim 0) or columns (dim 1) start … stop − 1 of mod's weight:
    its codes and scales cut, nothing re-quantized (so the values are exactly those of the cut dequantized weight)."""
    (qd, qa, qb), (sd, sa, sb) = packed_ranges(mod.fmt, dim, start, stop, mod.name)
    return packed_module(mod.fmt, cut(mod.qweight, qd, qa, qb), cut(mod.scale, sd, sa, sb), mod.compute_dtype, mod.name)


# ---- whole models --------------------------------------------------------------------------------------
def _wanted(model: nn.Module, dense: bool, experts: bool | None, engram: bool | None) -> dict[str, bool]:
    cfg = model.cfg
    return {
        "fp8_block": dense,
        "mxfp4": cfg.expert_quant if experts is None else experts,
        "fp8_rows": cfg.engram_table_quant if engram is None else engram,
    }


def _packable(model: nn.Module, wanted: dict[str, bool]):
    """(module path, module, format) of every Linear / Embedding whose weight gets packed."""
    for path, mod in model.named_modules():
        if isinstance(mod, (nn.Linear, nn.Embedding)):
            fmt = weight_format(f"{path}.weight")
            if wanted.get(fmt):
                yield path, mod, fmt


def replace_module(model: nn.Module, path: str, new: nn.Module) -> None:
    """Put `new` at `path` ("layers.0.attn.wq_a") in place of the module there."""
    parent_path, _, attr = path.rpartition(".")
    setattr(model.get_submodule(parent_path) if parent_path else model, attr, new)


class _PerUse:
    """Stands in for a `quant.Prepared` cache: builds its value at every use and keeps nothing, so a packed
    model holds no dequantized copy of its weights between forwards."""

    def __init__(self, build: Callable):
        self.build = build

    def active(self) -> bool:
        return False

    def get(self):
        return self.build()

    def rebuild(self) -> None:
        pass

    def forget(self) -> None:
        pass


def drop_weight_caches(model: nn.Module) -> None:
    """Replace every prepared-weight cache (`quant.Prepared`, if this version has it) by a per-use build."""
    prepared = getattr(quant, "Prepared", None)
    if prepared is None:
        return
    for m in model.modules():
        for attr, v in list(vars(m).items()):
            if isinstance(v, prepared):
                setattr(m, attr, _PerUse(v.build))


@torch.no_grad()
def pack_model(model: nn.Module, dense: bool = True, experts: bool | None = None, engram: bool | None = None):
    """Pack a built lab model in place (and return it): its weights become `PackedLinear` / `PackedEmbedding`.

    dense:   the fp8_block projections (attention, shared experts, indexer wq_b, Engram wkv, main_proj). The
             lab never simulated FP8 dense weights, so trained lab weights are rounded by this (use
             `qdq_weights_` first for "the simulation on the same values", or dense=False to keep them).
    experts: the routed experts as MXFP4 (default: the config's `expert_quant`, which the lab simulates);
    engram:  the Engram tables as FP8 rows (default: the config's `engram_table_quant`).
    With the defaults for experts/Engram packing is exact: the lab applies the same QDQ at use."""
    wanted = _wanted(model, dense, experts, engram)
    todo = list(_packable(model, wanted))
    _check_all_found(model, wanted, {f"{path}.weight" for path, _, _ in todo})
    for path, mod, fmt in todo:
        if getattr(mod, "bias", None) is not None:
            raise PackError(f"{path}: has a bias; packed Linears are bias-free")
        name = f"{path}.weight"
        replace_module(model, path, packed_module(fmt, *pack(fmt, mod.weight, name), mod.weight.dtype, name))
    drop_weight_caches(model)
    return model


def _check_all_found(model: nn.Module, wanted: dict[str, bool], found: set[str]) -> None:
    """Every state-dict tensor of a wanted format must sit in a Linear / Embedding that can be swapped (a model
    that keeps, say, stacked expert parameters instead would otherwise be left half packed, silently)."""
    names = [n for n in model.state_dict() if wanted.get(weight_format(n))]
    stuck = [n for n in names if n not in found]
    if stuck:
        raise PackError(
            f"{len(stuck)} weight(s) to pack are not held by an nn.Linear / nn.Embedding that pack_model can "
            f"replace: {stuck[:4]}"
        )


@torch.no_grad()
def qdq_weights_(model: nn.Module, dense: bool = True, experts: bool | None = None, engram: bool | None = None):
    """Round the weights that `pack_model` would pack onto their grids, in place (and return the model): the
    lab's simulation on the values a checkpoint can hold. Then pack_model(copy) ≡ this model, bit for bit."""
    for _, mod, fmt in list(_packable(model, _wanted(model, dense, experts, engram))):
        mod.weight.copy_(qdq(fmt, mod.weight))
    return model


def state_bytes(model: nn.Module) -> int:
    """Bytes of everything a checkpoint of the model stores (its state dict: parameters, packed buffers)."""
    return sum(t.nbytes for t in model.state_dict().values())

"""Tests for packed weights (dspark_mini/packed.py): FP8 / MXFP4 codes + E8M0 scales, dequantized at use.

unpack(pack(w)) equals the lab's QDQ (quant.py) bit for bit in every compute dtype; the nibble order (low =
even element), the scale dtypes, shapes and values are the checkpoint's; a packed module holds the checkpoint's
bytes and nothing more; a whole model packed from the outside (pack_model) gives the same forward and the same
DSpark draft as the simulated model on the same values (max |Δ| ≤ 1e-6 in fp32 — in fact 0).
"""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn.functional as F

from dspark_mini import build_model, get_config
from dspark_mini.model import draft
from dspark_mini.packed import (
    E8M0,
    FP8,
    PACKED_FORMATS,
    PackedEmbedding,
    PackedLinear,
    PackError,
    pack,
    pack_fp8_block,
    pack_model,
    pack_mxfp4,
    packed_module,
    packed_shapes,
    qdq,
    qdq_weights_,
    slice_packed,
    state_bytes,
    unpack,
    weight_format,
)
from dspark_mini.quant import E2M1_VALUES, fp4_qdq, fp8_qdq

INT_OF = {torch.float64: torch.int64, torch.float32: torch.int32, torch.bfloat16: torch.int16}


def bits(t: torch.Tensor) -> torch.Tensor:
    return t.contiguous().view(INT_OF[t.dtype])


def hard_weight(dtype: torch.dtype, rows: int = 64, cols: int = 96, seed: int = 0) -> torch.Tensor:
    """Values over 10 decades, an all-zero block, a block below every amax floor, exact grid ties."""
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(rows, cols, generator=g, dtype=torch.float64) * torch.logspace(-6, 3, cols, dtype=torch.float64)
    w[0, :32] = 0.0
    w[1, :32] = 1e-30
    w[2, :32] = torch.tensor([0.25, 0.75, 1.25, 5.0] * 8, dtype=torch.float64)  # E2M1 ties at scale 1
    w[3, 32:64] = torch.tensor([448.0, 464.0, -0.0, 13.0] * 8, dtype=torch.float64)  # E4M3 max and a tie
    return w.to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.bfloat16])
@pytest.mark.parametrize("fmt", PACKED_FORMATS)
def test_unpack_of_pack_is_the_lab_qdq_bit_for_bit(fmt: str, dtype: torch.dtype) -> None:
    w = hard_weight(dtype)
    q, s = pack(fmt, w)
    lab = {"mxfp4": fp4_qdq(w, 32, "e8m0"), "fp8_rows": fp8_qdq(w, 32)}.get(fmt, qdq(fmt, w))
    got = unpack(fmt, q, s, dtype)
    assert got.dtype == dtype and got.shape == w.shape
    assert torch.equal(bits(got), bits(lab)), (got - lab).abs().max()
    # idempotent: packing the simulated values again gives the same values
    assert torch.equal(bits(unpack(fmt, *pack(fmt, lab), dtype)), bits(lab))


def test_fp8_block_qdq_is_quant_fp8_qdq_per_32x32_tile() -> None:
    """The dense simulation, written out: one quant.fp8_qdq block per 32×32 tile."""
    w = hard_weight(torch.float32)
    out = torch.empty_like(w)
    for i in range(0, 64, 32):
        for j in range(0, 96, 32):
            tile = w[i : i + 32, j : j + 32]
            out[i : i + 32, j : j + 32] = fp8_qdq(tile.reshape(1, 1024), 1024).view(32, 32)
    assert torch.equal(bits(qdq("fp8_block", w)), bits(out))


def test_nibble_order_low_is_even_element_and_codes() -> None:
    """A row whose amax is 6 has scale 2^0 (E8M0 code 127); E2M1 code = sign·8 + index of |v| in the grid."""
    row = torch.tensor([6.0, -0.5, 1.0, 1.5, 0.0, -6.0, 3.0, 4.0] * 4)  # [32]
    q, s = pack_mxfp4(row[None])
    assert q.dtype == torch.uint8 and q.shape == (1, 16)
    assert s.dtype == E8M0 and s.view(torch.uint8).tolist() == [[127]]
    code = {v: i for i, v in enumerate(E2M1_VALUES)}
    want = [code[abs(v)] + (8 if v < 0 else 0) for v in row.tolist()]
    assert q[0].tolist() == [want[2 * k] | (want[2 * k + 1] << 4) for k in range(16)]
    assert q[0, 0].item() == 0x97  # 6.0 → 7 in the low nibble, −0.5 → 9 in the high one
    assert torch.equal(unpack("mxfp4", q, s, torch.float32)[0], row)


def test_scale_dtypes_shapes_and_values() -> None:
    w = torch.zeros(64, 96)
    w[0, 0] = 448.0  # tile (0, 0) and row 0 block 0: amax 448 → FP8 scale 2^0
    w[40, 40] = 449.0  # tile (1, 1): amax just above 448 → 2^1
    w[40, 70] = 6.0  # MXFP4 row 40 block 2: amax 6 → 2^0
    for fmt in PACKED_FORMATS:
        q, s = pack(fmt, w)
        qs, ss = packed_shapes(fmt, w.shape)
        assert tuple(q.shape) == qs and tuple(s.shape) == ss and s.dtype == E8M0
        assert q.dtype == (torch.uint8 if fmt == "mxfp4" else FP8)
    _, s = pack_fp8_block(w)
    assert s.shape == (2, 3)
    e = s.view(torch.uint8).to(torch.int64) - 127  # exponents
    assert e[0, 0] == 0 and e[1, 1] == 1
    assert e[0, 1] == e[0, 2] == -22  # an all-zero tile: amax floored at 1e-4 → 2^ceil(log2(1e-4/448)) = 2^-22
    _, s4 = pack_mxfp4(w)
    assert s4.view(torch.uint8)[40, 2] == 127
    assert s4.view(torch.uint8)[9, 0] == 127 - 126  # all zero: floor 6·2^-126 → 2^-126
    assert torch.equal(s.to(torch.float32), torch.exp2(e.float()))  # a scale byte is 2^(code − 127)


def test_real_shapes_of_the_published_checkpoint() -> None:
    """Packed shapes at DeepSeek-V4.1-Flash size (the real checkpoint's) — no data needed."""
    assert packed_shapes("mxfp4", (2304, 5120)) == ((2304, 2560), (2304, 160))  # routed w1 / w3
    assert packed_shapes("mxfp4", (5120, 2304)) == ((5120, 1152), (5120, 72))  # routed w2
    assert packed_shapes("fp8_block", (1280, 5120)) == ((1280, 5120), (40, 160))  # wq_a
    assert packed_shapes("fp8_block", (512, 5120)) == ((512, 5120), (16, 160))  # wkv
    assert packed_shapes("fp8_block", (25600, 6144))[1] == (800, 192)  # Engram wkv
    assert packed_shapes("fp8_block", (5120, 15360))[1] == (160, 480)  # DSpark main_proj
    assert packed_shapes("fp8_rows", (384_006_168, 256))[1] == (384_006_168, 8)  # Engram table (264 B a row)


def test_bad_input_names_the_tensor() -> None:
    with pytest.raises(PackError, match="layers.0.attn.wq_a.weight.*multiples of 32"):
        pack("fp8_block", torch.zeros(48, 64), "layers.0.attn.wq_a.weight")
    with pytest.raises(PackError, match="experts.1.w2.weight.*multiple of 32"):
        pack("mxfp4", torch.zeros(4, 40), "experts.1.w2.weight")
    with pytest.raises(PackError, match="NaN"):
        pack("fp8_rows", torch.full((2, 32), float("nan")), "engram.embed.weight")
    with pytest.raises(PackError, match="format = 'nvfp4' is invalid"):
        pack("nvfp4", torch.zeros(32, 32))
    q, s = pack("mxfp4", torch.ones(32, 64))
    with pytest.raises(PackError, match="w1.weight.*allowed codes torch.uint8"):
        unpack("mxfp4", q.view(torch.int8), s, torch.float32, "w1.weight")
    with pytest.raises(PackError, match="allowed scales of shape"):
        unpack("mxfp4", q, s[:, :1], torch.float32, "w1.weight")
    with pytest.raises(PackError, match="scale 2\\^988 is outside E8M0"):
        pack("fp8_block", torch.full((32, 32), 1e300, dtype=torch.float64))


def test_weight_format_follows_the_reference_table() -> None:
    assert weight_format("layers.3.ffn.experts.7.w2.weight") == "mxfp4"
    assert weight_format("mtp.layers.1.ffn.experts.0.w1.weight") == "mxfp4"
    assert weight_format("layers.0.engram.embed.weight") == "fp8_rows"
    for n in ("attn.wq_a", "attn.wq_b", "attn.wkv", "attn.wo_a", "attn.wo_b", "attn.indexer.wq_b",
              "ffn.shared_experts.w3", "engram.wkv"):  # fmt: skip
        assert weight_format(f"layers.1.{n}.weight") == "fp8_block", n
    assert weight_format("mtp.main_proj.weight") == "fp8_block"
    bf16 = ("layers.1.attn.compressor.wkv.weight", "layers.1.attn.indexer.wk.weight", "embed.weight", "head.weight",
            "layers.0.ffn.gate.weight", "mtp.markov_head.embed.weight", "layers.0.attn_norm.weight")  # fmt: skip
    for n in bf16:
        assert weight_format(n) == "bf16", n
    for n in ("layers.0.hc_attn.fn", "layers.0.hc_ffn.scale", "layers.0.attn.attn_sink", "layers.0.ffn.gate.bias"):
        assert weight_format(n) == "fp32", n


@pytest.fixture(scope="module")
def trained32():
    """The shipped trained lab weights in an fp32 model (routing on trained weights, not on noise)."""
    from lab.weights import lab_model

    m64 = lab_model("trained")
    m = build_model(get_config("lab", dtype="float32")).eval()
    m.load_state_dict({k: v.float() for k, v in m64.state_dict().items()})
    return m


def test_packed_modules_hold_the_checkpoint_bytes(trained32) -> None:
    m = pack_model(copy.deepcopy(trained32))
    ex = m.layers[0].ffn.experts[0].w1
    assert isinstance(ex, PackedLinear) and ex.fmt == "mxfp4" and ex.shape == (32, m.cfg.dim)  # [inter, dim]
    D = m.cfg.dim
    assert ex.nbytes() == 32 * D // 2 + 32 * D // 32  # half a byte a value + a byte per 32
    wq = m.layers[0].attn.wq_a
    assert isinstance(wq, PackedLinear) and wq.nbytes() == 32 * D + (32 // 32) * (D // 32)
    tab = m.layers[0].engram.embed
    assert isinstance(tab, PackedEmbedding) and tab.nbytes() == 5148 * 32 + 5148 * 1  # 33 B a row here (264 real)
    assert not any(isinstance(p, torch.Tensor) and p.dtype == torch.float32 for p in (ex.qweight, ex.scale))
    # the model's bytes: every packed module as above, the rest unchanged
    held = {p: mod for p, mod in m.named_modules() if isinstance(mod, (PackedLinear, PackedEmbedding))}
    packed = sum(mod.nbytes() for mod in held.values())
    plain = sum(t.nbytes for n, t in m.state_dict().items() if n.rpartition(".")[0] not in held)
    assert state_bytes(m) == packed + plain < state_bytes(trained32)
    # what was packed shrank to under a quarter of its fp32 bytes (8 or 4 bits a value + scales); the rest (the
    # 8,192-id embedding and head, the norms) is kept as it was
    ref = trained32.state_dict()
    fp32 = sum(ref[n].nbytes for n in ref if n.rpartition(".")[0] in held)
    assert packed < fp32 / 4, (packed, fp32)
    with torch.no_grad():  # nothing dequantized is kept after a forward
        m(torch.zeros(1, 9, dtype=torch.long))
    assert state_bytes(m) == packed + plain
    assert not [v for mod in m.modules() for v in vars(mod).values() if type(v).__name__ == "Prepared"]


def test_packed_embedding_reads_rows() -> None:
    w = hard_weight(torch.float32, rows=40, cols=64)
    tab = PackedEmbedding(*(["fp8_rows", *pack("fp8_rows", w)]), torch.float32)
    ids = torch.tensor([[3, 0, 39], [3, 3, 1]])
    assert torch.equal(tab(ids), F.embedding(ids, tab.weight))
    assert torch.equal(tab.weight, fp8_qdq(w, 32))


@pytest.mark.parametrize("fmt", PACKED_FORMATS)
def test_a_cut_on_the_blocks_is_the_cut_of_the_weight(fmt: str) -> None:
    """slice_packed (what a rank keeps of a packed weight) cuts codes and scales: the values are exactly those of
    the cut dequantized weight; a cut through a 32-wide scale block is refused, naming the tensor."""
    w = hard_weight(torch.float32, rows=96, cols=128)
    mod = packed_module(fmt, *pack(fmt, w), torch.float32, "layers.0.attn.wo_b.weight")
    for dim, start, stop in ((0, 32, 64), (1, 64, 128), (0, 0, 0)):
        part = slice_packed(mod, dim, start, stop)
        want = mod.weight[start:stop] if dim == 0 else mod.weight[:, start:stop]
        assert type(part) is type(mod) and torch.equal(part.weight, want), (dim, start, stop)
        assert part.nbytes() * (128 if dim == 1 else 96) == mod.nbytes() * (stop - start)  # only its share
    if fmt != "fp8_block":  # one scale row per row: any row range
        assert torch.equal(slice_packed(mod, 0, 5, 7).weight, mod.weight[5:7])
    cuts = [(1, 16, 48)] + ([(0, 5, 7)] if fmt == "fp8_block" else [])
    for dim, start, stop in cuts:
        with pytest.raises(PackError, match=r"layers\.0\.attn\.wo_b\.weight .*cuts through its 32-wide scale"):
            slice_packed(mod, dim, start, stop)


def _outputs(model, tokens):
    """A full forward (logits of every position) and one DSpark draft pass after it."""
    with torch.no_grad():
        cache = model.new_cache(tokens.size(0))
        out = model(tokens, cache=cache)
        d = draft(model, out.logits[:, -1].argmax(-1), cache)
    return out.logits, d.logits, d.confidence


def test_packed_model_equals_the_simulation_fp32(trained32) -> None:
    """Every fp8_block / mxfp4 / fp8_rows weight packed vs the simulated model on the same (on-grid) values."""
    sim = qdq_weights_(copy.deepcopy(trained32))
    packed = pack_model(copy.deepcopy(sim))
    n_packed = sum(isinstance(m, (PackedLinear, PackedEmbedding)) for m in packed.modules())
    # 11 blocks (8 + 3 draft) × (5 attention + 3 shared), 8 × 8 + 3 × 4 routed experts × 3, 2 Engram × 2, 4 indexer wq_b
    assert n_packed == 11 * (5 + 3) + (8 * 8 + 3 * 4) * 3 + 2 * 2 + 4
    tokens = torch.randint(0, sim.cfg.vocab_size, (2, 29), generator=torch.Generator().manual_seed(3))
    for a, b in zip(_outputs(sim, tokens), _outputs(packed, tokens), strict=True):
        assert a.dtype == torch.float32
        assert (a - b).abs().max().item() <= 1e-6


def test_packing_what_the_lab_simulates_is_exact(trained32) -> None:
    """Routed experts (MXFP4) and Engram tables (FP8 rows) are QDQ'd by the lab at use: packing them changes
    nothing, on the trained weights as they are (dense projections left as they are)."""
    packed = pack_model(copy.deepcopy(trained32), dense=False)
    assert not isinstance(packed.layers[0].attn.wq_a, PackedLinear)
    tokens = torch.randint(0, trained32.cfg.vocab_size, (1, 23), generator=torch.Generator().manual_seed(4))
    for a, b in zip(_outputs(trained32, tokens), _outputs(packed, tokens), strict=True):
        assert torch.equal(a, b)

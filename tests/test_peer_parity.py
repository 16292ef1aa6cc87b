"""Peer parity: the lab's modules against Hugging Face transformers' DeepseekV4, an independent implementation.

transformers ships DeepSeek-V4, the predecessor of V4.1; the two share most mechanisms. For every shared one, both
modules are built from configs that agree, the HF module's weights are copied from the lab's BY NAME (each mapping
written out below; every HF tensor must be mapped or set explicitly), both run in float64 on the same input, and
the outputs must agree to max |Δ| ≤ 1e-12. Each documented V4 → V4.1 difference is switched off explicitly in the
HF module for that check (the comment says how), and a second test turns it on and measures the Δ: it must be
clearly non-zero, since that Δ *is* the documented difference.

Float64: the shipped HF file hard-casts to float32 in places (`.float()`, `torch.float32`), which would bottom out
the comparison near 1e-7. The tests make a float64 variant at test time: they read the installed module's source
text, rewrite those casts to float64 and exec it as a new module under a temporary name (site-packages is never
touched; nothing of transformers is committed here). `modeling_rope_utils` (YaRN) gets the same treatment.

Needs the pinned `transformers` (`make install-parity`: requirements-parity.txt, pyproject's `parity` extra).
Without it the tests skip with the reason; in CI (CI=true) that is a failure, as for the browser tests.
With DSPARK_PEER_PARITY_JSON=path the run writes every measured Δ there; `python bench/peer_parity_table.py`
renders docs/peer_parity.md from that file (docs/peer_parity.json, committed beside it).
"""

from __future__ import annotations

import importlib.metadata
import importlib.util
import json
import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F
from conftest import in_ci
from torch import nn

from dspark_mini import get_config
from dspark_mini.attention import Attention, SharedAttention, sparse_attention
from dspark_mini.compressor import Compressor
from dspark_mini.indexer import Indexer, visible_counts
from dspark_mini.mhc import HyperConnection, hc_post, hc_pre, identity_pre_mix
from dspark_mini.model import Block
from dspark_mini.moe import Gate, MoE
from dspark_mini.norm import RMSNorm
from dspark_mini.rope import apply_rope, layer_inv_freq, rope_angles, rope_inv_freq

F64 = torch.float64
TOL = 1e-12  # the float64 parity bound for every shared mechanism
ON_MIN = 1e-6  # a documented difference switched on must move the output by more than this (it moves it by ≫ TOL)
TRANSFORMERS_PIN = "5.23.0"  # = requirements-parity.txt and pyproject's `parity` extra
JSON_ENV = "DSPARK_PEER_PARITY_JSON"
ROOT = Path(__file__).resolve().parents[1]
DOC_JSON = ROOT / "docs" / "peer_parity.json"

# float32 casts of the shipped HF source → float64 (the rewrite the float64 variant is made with)
F32_CASTS = (
    (".float()", ".double()"),
    ("torch.float32", "torch.float64"),
    ("dtype=torch.float)", "dtype=torch.float64)"),
)
LEFT_F32 = re.compile(r"\.float\(\)|torch\.float32|torch\.float\b(?!64)")


# ---- what the tests measure (written to DSPARK_PEER_PARITY_JSON) ------------------------------------------------
# mechanism id → (mechanism, lab module, HF module); difference id → (difference, mechanism id, how it is switched off)
MECHANISMS = {
    "rmsnorm_weighted": ("RMSNorm, weighted", "norm.RMSNorm", "DeepseekV4RMSNorm"),
    "rmsnorm_unweighted": (
        "RMSNorm, unweighted (mHC, Engram)",
        "torch.rms_norm(·, None, eps) as mhc.py calls it",
        "DeepseekV4UnweightedRMSNorm",
    ),
    "rope_inv_freq": (
        "RoPE frequencies: plain θ and YaRN (flash widths)",
        "rope.rope_inv_freq",
        "compute_default_rope_parameters, _compute_yarn_parameters",
    ),
    "rope_rotation": (
        "partial RoPE (interleaved pairs, last r channels) and its inverse",
        "rope.apply_rope (inverse=True)",
        "DeepseekV4RotaryEmbedding + apply_rotary_pos_emb (−sin)",
    ),
    "mhc_coefficients": (
        "mHC coefficients: pre = σ + ε (seen through the collapse), post = 2σ",
        "mhc.HyperConnection",
        "DeepseekV4HyperConnection",
    ),
    "sinkhorn_comb": ("mHC Sinkhorn comb (20 iterations)", "mhc.sinkhorn_comb", "DeepseekV4HyperConnection"),
    "hc_pre_post": (
        "hc_pre collapse / hc_post expand: a decoder layer's mixing (stub sublayers)",
        "mhc.HyperConnection, hc_pre, hc_post, norm.RMSNorm",
        "DeepseekV4DecoderLayer",
    ),
    "final_collapse": (
        "final collapse of the copies before the head",
        "mhc.hc_pre with the last FFN's pre",
        "DeepseekV4HyperHead",
    ),
    "router_top2": (
        "router top-2: √softplus, select-only bias, normalisation, route scale",
        "moe.Gate",
        "DeepseekV4TopKRouter",
    ),
    "moe_block": (
        "MoE block: clamped SwiGLU routed experts + shared expert (dense, gather, sorted paths)",
        "moe.MoE",
        "DeepseekV4SparseMoeBlock",
    ),
    "o_lora": ("grouped output projection (O-LoRA)", "Attention.grouped_wo_a", "DeepseekV4GroupedLinear"),
    "attention_sink": ("attention with a per-head sink", "attention.sparse_attention", "eager_attention_forward"),
    "attention_layer": (
        "shared-KV MQA sliding-window attention layer (partial RoPE, inverse RoPE, sink, O-LoRA)",
        "attention.Attention (ratio 0)",
        "DeepseekV4Attention (sliding_attention)",
    ),
    "compressed_attention_layer": (
        "compressed attention layer, ratio 2 (window ‖ every visible pooled entry)",
        "attention.Attention (ratio-2 KV source, index_topk ≥ entries)",
        "DeepseekV4Attention (heavily_compressed_attention, rate 2)",
    ),
    "compressor_ratio2": (
        "compressor ratio 2 (softmax pool of pairs, RMSNorm, RoPE at j·2) and its visibility",
        "compressor.Compressor + rope",
        "DeepseekV4HCACompressor (rate 2)",
    ),
    "compressor_ratio1": (
        "compressor ratio 1 (RMSNorm(wkv x), RoPE at j)",
        "compressor.Compressor + rope",
        "DeepseekV4HCACompressor (rate 1)",
    ),
    "indexer_score": (
        "lightning-indexer score Σ_h w·ReLU(q·k)",
        "indexer.Indexer",
        "DeepseekV4IndexerScorer (q from DeepseekV4Indexer.q_b_proj + RoPE)",
    ),
}
DIFFERENCES = {
    "pre_timing": (
        "`pre` timing: V4.1 collapses a sublayer's input with the previous sublayer's pre",
        "hc_pre_post",
        "V4 order composed from the lab's own primitives (HF's order is built in)",
    ),
    "hc_head": (
        "V4's learned hc_head recomputes the final collapse weights from the last stream",
        "final_collapse",
        "hc_head given the last FFN's pre weights and that FFN's input stream",
    ),
    "q_b_norm": (
        "V4's per-head RMS renorm of q (q_b_norm) before RoPE",
        "attention_layer",
        "q_b_norm replaced by nn.Identity()",
    ),
    "hash_moe": (
        "V4's hash MoE (experts chosen by a token-id table, tid2eid)",
        "moe_block",
        'mlp_layer_types = ["moe"]',
    ),
    "top1_norm": (
        "top-1 normalisation: V4 (HF) normalises one weight to 1; V4.1 keeps a·route_scale",
        "router_top2",
        "top-k = 2",
    ),
    "position_bias": (
        "V4 compressor's learned position bias on the pooling scores",
        "compressor_ratio2",
        "position_bias = 0",
    ),
    "overlap": (
        "V4 CSA compressor's overlapping windows (previous window's Ca series joins each entry)",
        "compressor_ratio2",
        "the non-overlapping HCA compressor",
    ),
    "norm_eps": (
        "RMSNorm eps: V4's rms_norm_eps 1e-6 (HF default) vs V4.1's 1e-20",
        "rmsnorm_weighted",
        "rms_norm_eps = the lab's norm_eps",
    ),
}
MEASURED: dict[str, dict] = {}


def record(key: str, lab_out: torch.Tensor, hf_out: torch.Tensor) -> float:
    """max |Δ| of two outputs (and their scale), kept for the JSON; returns the Δ."""
    assert lab_out.shape == hf_out.shape, (key, lab_out.shape, hf_out.shape)
    assert lab_out.dtype == hf_out.dtype == F64, (key, lab_out.dtype, hf_out.dtype)
    delta = float((lab_out - hf_out).abs().max())
    prev = MEASURED.get(key, {"max_abs_delta": 0.0, "max_abs_output": 0.0})
    MEASURED[key] = {
        "max_abs_delta": max(prev["max_abs_delta"], delta),
        "max_abs_output": max(prev["max_abs_output"], float(hf_out.abs().max())),
    }
    return delta


def assert_parity(key: str, lab_out: torch.Tensor, hf_out: torch.Tensor) -> None:
    assert key in MECHANISMS
    delta = record(key, lab_out, hf_out)
    assert delta <= TOL, f"{key}: max |Δ| = {delta:.3e} > {TOL:g}"


def assert_difference(key: str, lab_out: torch.Tensor, hf_out: torch.Tensor) -> None:
    assert key in DIFFERENCES
    delta = record(key, lab_out, hf_out)
    assert delta > ON_MIN, f"{key}: the documented difference moved the output by only {delta:.3e}"
    if not os.environ.get(JSON_ENV):  # the committed table says what this run measures (not while regenerating it)
        committed = {d["id"]: d["max_abs_delta"] for d in committed_doc()["differences"]}[key]
        assert abs(delta - committed) <= 1e-6 * committed, (
            f"{key}: measured {delta!r}, docs/peer_parity.json has {committed!r}: regenerate it ({__name__} docstring)"
        )


@pytest.fixture(scope="module", autouse=True)
def write_measurements():
    """After the module's tests: every measured Δ to $DSPARK_PEER_PARITY_JSON (when set)."""
    yield
    path = os.environ.get(JSON_ENV)
    if path:
        missing = sorted(k for k in (*MECHANISMS, *DIFFERENCES) if k not in MEASURED)
        if missing:
            pytest.fail(f"{JSON_ENV} is set but these were not measured (run the whole file): {missing}")
        Path(path).write_text(json.dumps(measurements(), indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def measurements() -> dict:
    """The JSON document: conditions, then one entry per mechanism and per difference, with what was measured."""
    return {
        "conditions": {
            "transformers": importlib.metadata.version("transformers"),
            "torch": torch.__version__.split("+")[0],
            "dtype": "float64",
            "tolerance": TOL,
        },
        "mechanisms": [
            {"id": k, "mechanism": m, "lab": lab, "hf": hf, **MEASURED.get(k, {})}
            for k, (m, lab, hf) in MECHANISMS.items()
        ],
        "differences": [
            {"id": k, "difference": d, "mechanism": mech, "switched_off_by": off, **MEASURED.get(k, {})}
            for k, (d, mech, off) in DIFFERENCES.items()
        ],
    }


# ---- the HF modules in float64 ------------------------------------------------------------------------------------
def float64_variant(module, name: str):
    """A new module `name` exec'd from `module`'s source text with its float32 casts rewritten to float64."""
    src = Path(module.__file__).read_text(encoding="utf-8")
    n = sum(src.count(a) for a, _ in F32_CASTS)
    for a, b in F32_CASTS:
        src = src.replace(a, b)
    assert n > 0 and not LEFT_F32.search(src), f"{module.__name__}: the float32 casts are not where this test expects"
    spec = importlib.util.spec_from_loader(name, loader=None)
    new = importlib.util.module_from_spec(spec)
    new.__package__, new.__file__ = module.__package__, module.__file__
    sys.modules[name] = new
    exec(compile(src, f"<float64 variant of {module.__file__}>", "exec"), new.__dict__)
    return new


@pytest.fixture(scope="module")
def hf():
    """transformers' DeepseekV4 (config class, float64 modeling module, float64 rope utils), or a skip/fail."""
    try:
        version = importlib.metadata.version("transformers")
    except importlib.metadata.PackageNotFoundError:
        version = None
    if version != TRANSFORMERS_PIN:
        found = "it is not installed" if version is None else f"version {version} is installed"
        reason = f"peer parity needs transformers=={TRANSFORMERS_PIN} and {found}"
        if in_ci():
            pytest.fail(f"CI=true but {reason}: .ci/run installs it (make install-parity)")
        pytest.skip(f"{reason} (make install-parity, or pip install -r requirements-parity.txt)")
    import transformers
    import transformers.modeling_rope_utils as rope_utils
    import transformers.models.deepseek_v4.modeling_deepseek_v4 as modeling
    from transformers.models.deepseek_v4.configuration_deepseek_v4 import DeepseekV4Config

    transformers.logging.set_verbosity_error()
    names = ("transformers._dspark_parity_rope_f64", "transformers.models.deepseek_v4._dspark_parity_f64")
    rope64 = float64_variant(rope_utils, names[0])
    m64 = float64_variant(modeling, names[1])
    m64.ROPE_INIT_FUNCTIONS = rope64.ROPE_INIT_FUNCTIONS  # YaRN's frequencies from the float64 rope utils too
    yield SimpleNamespace(Config=DeepseekV4Config, m=m64, rope=rope64)
    for n in names:
        sys.modules.pop(n, None)


@pytest.fixture(scope="module")
def cfg():
    """The lab's own widths, without the QDQ simulations (V4 has no FP8/FP4 QDQ to compare with)."""
    return get_config("lab", kv_quant=False, expert_quant=False, engram_table_quant=False)


def hf_config(hf, cfg, layer_type="sliding_attention", mlp_type="moe", rate=2, **changes):
    """A one-layer DeepseekV4Config that agrees with the lab config `cfg` field by field."""
    assert cfg.gate_temp == 1.0 and cfg.score_func == "sqrtsoftplus"  # V4 has no router temperature
    fields = dict(
        vocab_size=cfg.vocab_size,
        hidden_size=cfg.dim,
        moe_intermediate_size=cfg.moe_inter_dim,
        num_hidden_layers=1,
        num_attention_heads=cfg.n_heads,
        head_dim=cfg.head_dim,
        q_lora_rank=cfg.q_lora_rank,
        partial_rotary_factor=cfg.rope_head_dim / cfg.head_dim,
        num_experts_per_tok=cfg.n_activated_experts,
        n_routed_experts=cfg.n_routed_experts,
        n_shared_experts=cfg.n_shared_experts,
        routed_scaling_factor=cfg.route_scale,
        scoring_func="sqrtsoftplus",
        rope_theta=cfg.rope_theta,
        compress_rope_theta=cfg.compress_rope_theta,
        max_position_embeddings=int(cfg.original_seq_len * cfg.rope_factor),
        rope_parameters={
            "rope_type": "yarn",
            "factor": cfg.rope_factor,
            "original_max_position_embeddings": cfg.original_seq_len,
            "beta_fast": cfg.beta_fast,
            "beta_slow": cfg.beta_slow,
        },
        hc_mult=cfg.hc_mult,
        hc_sinkhorn_iters=cfg.hc_sinkhorn_iters,
        hc_eps=cfg.hc_eps,
        swiglu_limit=cfg.swiglu_limit,
        sliding_window=cfg.window_size,
        o_groups=cfg.o_groups,
        o_lora_rank=cfg.o_lora_rank,
        index_n_heads=cfg.index_n_heads,
        index_head_dim=cfg.index_head_dim,
        index_topk=cfg.index_topk,
        rms_norm_eps=cfg.norm_eps,
        layer_types=[layer_type],
        mlp_layer_types=[mlp_type],
        compress_rates={"compressed_sparse_attention": rate, "heavily_compressed_attention": rate},
        experts_implementation="eager",
    )
    c = hf.Config(**{**fields, **changes})
    c._attn_implementation = "eager"
    return c


def load_by_name(hf_mod: nn.Module, lab_mod: nn.Module, names: dict[str, str], values: dict | None = None) -> nn.Module:
    """Fill every tensor of the HF module's state dict: `names` maps HF name → lab name (copied), `values` gives the
    rest explicitly (built from lab tensors, or set by the test). A name left out is an error: nothing stays at
    torch.empty's garbage."""
    values = values or {}
    hf_mod.double()
    want = set(hf_mod.state_dict())
    assert set(names) | set(values) == want, f"unmapped: {sorted(want - set(names) - set(values))}"
    lab_sd = lab_mod.state_dict()
    hf_mod.load_state_dict({**{h: lab_sd[l] for h, l in names.items()}, **values}, strict=True)
    return hf_mod.eval()


def randn(*shape, seed: int, std: float = 1.0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed), dtype=F64) * std


def fill(module: nn.Module, seed: int, around_one: tuple[str, ...] = ("norm.weight",)) -> nn.Module:
    """Seeded random weights: std 1/√fan_in for matrices, 1 ± 0.2 for norm weights, N(0, 0.5) for the rest."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in module.named_parameters():
            r = torch.randn(p.shape, generator=g, dtype=F64)
            if any(name.endswith(s) for s in around_one):
                p.copy_(1 + 0.2 * r)
            elif p.dim() >= 2:
                p.copy_(r * p.shape[-1] ** -0.5)
            else:
                p.copy_(0.5 * r)
    return module.eval()


# ---- RMSNorm, RoPE ------------------------------------------------------------------------------------------------
def test_rmsnorm_weighted_and_unweighted(hf, cfg):
    n = cfg.dim
    lab = fill(RMSNorm(n, cfg.norm_eps, F64), 1, around_one=("weight",))
    ref = load_by_name(hf.m.DeepseekV4RMSNorm(n, eps=cfg.norm_eps), lab, {"weight": "weight"})
    x = randn(2, 5, n, seed=2, std=3.0)
    with torch.no_grad():
        assert_parity("rmsnorm_weighted", lab(x), ref(x))
        unweighted = hf.m.DeepseekV4UnweightedRMSNorm(eps=cfg.norm_eps)
        assert_parity("rmsnorm_unweighted", torch.rms_norm(x, (n,), None, cfg.norm_eps), unweighted(x))


def test_rmsnorm_eps_difference(hf, cfg):
    """V4's default rms_norm_eps (1e-6) against V4.1's 1e-20 (the config value; the formula is shared)."""
    n, v4_eps = cfg.dim, hf.Config().rms_norm_eps
    assert v4_eps == 1e-6 and cfg.norm_eps == 1e-20
    lab = fill(RMSNorm(n, cfg.norm_eps, F64), 1, around_one=("weight",))
    ref = load_by_name(hf.m.DeepseekV4RMSNorm(n, eps=v4_eps), lab, {"weight": "weight"})
    x = randn(2, 5, n, seed=2, std=0.01)  # a small stream (an early layer's): the eps shows
    with torch.no_grad():
        assert_difference("norm_eps", lab(x), ref(x))


def test_rope_frequencies_and_rotation(hf):
    """Plain θ = 10000 and compress θ = 160000 with YaRN, at the flash widths (r = 64, factor 16, 65,536), where the
    YaRN ramp lies strictly inside the rotated dims; then the rotation and its inverse of the same input."""
    fl = get_config("flash")
    c = hf_config(hf, fl, rate=4)
    rot = hf.m.DeepseekV4RotaryEmbedding(c)
    r = fl.rope_head_dim
    main = rope_inv_freq(r, fl.rope_theta, False)
    comp = rope_inv_freq(
        r, fl.compress_rope_theta, True, fl.rope_factor, fl.original_seq_len, fl.beta_fast, fl.beta_slow
    )
    plain_comp = rope_inv_freq(r, fl.compress_rope_theta, False)
    ramp = comp / plain_comp  # 1 where YaRN leaves a dim, 1/factor where it interpolates it fully
    assert ((ramp < 1 - 1e-9) & (ramp > 1 / fl.rope_factor + 1e-9)).any()  # the ramp's inside is exercised
    assert rot.main_inv_freq.dtype == rot.compress_inv_freq.dtype == F64
    assert_parity("rope_inv_freq", main, rot.main_inv_freq)
    assert_parity("rope_inv_freq", comp, rot.compress_inv_freq)

    B, S, H, C = 2, 6, 3, 2 * r
    x = randn(B, S, H, C, seed=3)
    positions = torch.tensor([0, 1, 7, 64, 129, 300])
    for kind, inv in (("main", main), ("compress", comp)):
        cos, sin = rot(x, position_ids=positions.expand(B, -1), layer_type=kind)  # [B, S, r/2]
        angles = rope_angles(positions, inv)  # [S, r/2]
        hf_rot = hf.m.apply_rotary_pos_emb(x.transpose(1, 2), cos, sin).transpose(1, 2)  # HF: [B, H, S, C]
        hf_inv = hf.m.apply_rotary_pos_emb(x.transpose(1, 2), cos, -sin).transpose(1, 2)
        assert_parity("rope_rotation", apply_rope(x, angles), hf_rot)
        assert_parity("rope_rotation", apply_rope(x, angles, inverse=True), hf_inv)
    assert not torch.allclose(hf_rot, x)  # the rotation did something


# ---- mHC ----------------------------------------------------------------------------------------------------------
HC_NAMES = {"fn": "fn", "base": "base", "scale": "scale"}  # DeepseekV4HyperConnection ← mhc.HyperConnection


def lab_hc(cfg, seed: int) -> HyperConnection:
    """A HyperConnection with mixes strong enough that comb is far from uniform."""
    hc = HyperConnection(cfg.dim, cfg.hc_mult, cfg.hc_sinkhorn_iters, cfg.hc_eps, cfg.norm_eps, F64)
    with torch.no_grad():
        hc.fn.copy_(randn(*hc.fn.shape, seed=seed, std=2.0 * hc.fn.shape[1] ** -0.5))
        hc.base.copy_(randn(*hc.base.shape, seed=seed + 1, std=0.5))
        hc.scale.copy_(torch.tensor([0.8, 1.3, 2.0], dtype=F64))
    return hc


def streams(cfg, seed: int, S: int = 7) -> torch.Tensor:
    return randn(2, S, cfg.hc_mult, cfg.dim, seed=seed)  # [B, S, hc, D]


def test_mhc_coefficients_sinkhorn_and_collapse(hf, cfg):
    lab = lab_hc(cfg, 10)
    ref = load_by_name(hf.m.DeepseekV4HyperConnection(hf_config(hf, cfg)), lab, HC_NAMES)
    x = streams(cfg, 11)
    with torch.no_grad():
        pre, post, comb = lab(x)
        post_h, comb_h, collapsed_h = ref(x)
    assert comb.shape == (2, 7, cfg.hc_mult, cfg.hc_mult) and post.shape == pre.shape == (2, 7, cfg.hc_mult)
    assert float((comb - 1 / cfg.hc_mult).abs().max()) > 0.1  # not a uniform mix
    assert_parity("mhc_coefficients", post, post_h)
    assert_parity("mhc_coefficients", hc_pre(x, pre), collapsed_h)  # HF consumes pre in its collapse
    assert_parity("sinkhorn_comb", comb, comb_h)


class StubAttention(nn.Module):
    """A fixed nonlinear stand-in for a sublayer, u [B, S, D] → tanh(u·A) [B, S, D], callable by either layer: the lab's
    Block passes (u, positions, shared, cache, pending, rec) and takes the output; HF's passes u and keywords and
    takes (output, attention weights)."""

    def __init__(self, dim: int, seed: int):
        super().__init__()
        self.register_buffer("a", randn(dim, dim, seed=seed, std=dim**-0.5), persistent=False)

    def f(self, u: torch.Tensor) -> torch.Tensor:
        return torch.tanh(u @ self.a)

    def forward(self, u, *lab_args, **hf_kwargs):
        return self.f(u) if lab_args else (self.f(u), None)


class StubFFN(StubAttention):
    """u → sin(2·u·A); the lab's Block calls it as its MoE (takes (output, router info)), HF's with input_ids."""

    def f(self, u: torch.Tensor) -> torch.Tensor:
        return torch.sin(2 * u @ self.a)

    def forward(self, u, *lab_args, **hf_kwargs):
        return self.f(u) if "input_ids" in hf_kwargs else (self.f(u), {})


def mixing_pair(hf, cfg):
    """A lab Block and an HF DecoderLayer with the same mHC weights and norms, their sublayers the same stubs."""
    block = Block(cfg, 0)
    block.attn, block.ffn = StubAttention(cfg.dim, 20), StubFFN(cfg.dim, 21)
    block.hc_attn, block.hc_ffn = lab_hc(cfg, 22), lab_hc(cfg, 24)
    fill(block.attn_norm, 26, around_one=("weight",)), fill(block.ffn_norm, 27, around_one=("weight",))
    layer = hf.m.DeepseekV4DecoderLayer(hf_config(hf, cfg), 0)
    layer.self_attn, layer.mlp = block.attn, block.ffn
    names = {
        "input_layernorm.weight": "attn_norm.weight",
        "post_attention_layernorm.weight": "ffn_norm.weight",
        **{f"attn_hc.{h}": f"hc_attn.{n}" for h, n in HC_NAMES.items()},
        **{f"ffn_hc.{h}": f"hc_ffn.{n}" for h, n in HC_NAMES.items()},
    }
    return block.eval(), load_by_name(layer, block, names)


def test_decoder_layer_mixing(hf, cfg):
    """The lab's mixing primitives composed in V4's order (each sublayer collapsed with its own pre) equal HF's
    DeepseekV4DecoderLayer; HF's order is built into its forward, so the `pre` timing is switched off on the lab
    side here, and `test_pre_timing_difference` measures the lab's real Block (V4.1 order) against it."""
    block, layer = mixing_pair(hf, cfg)
    x = streams(cfg, 30)
    with torch.no_grad():
        a_pre, a_post, a_comb = block.hc_attn(x)
        x_attn = hc_post(block.attn.f(block.attn_norm(hc_pre(x, a_pre))), x, a_post, a_comb)
        f_pre, f_post, f_comb = block.hc_ffn(x_attn)
        out_v4 = hc_post(block.ffn.f(block.ffn_norm(hc_pre(x_attn, f_pre))), x_attn, f_post, f_comb)
        out_hf = layer(x, position_embeddings=None, input_ids=None)
    assert out_hf.shape == x.shape
    assert_parity("hc_pre_post", out_v4, out_hf)


def test_pre_timing_difference(hf, cfg):
    """V4.1 (the lab's Block): attention reads the stream collapsed with the incoming pre (here the first layer's
    identity mix), the FFN with the attention's pre; V4 (HF) collapses each sublayer with its own pre."""
    block, layer = mixing_pair(hf, cfg)
    x = streams(cfg, 30)
    pre_in = identity_pre_mix(2, 7, cfg.hc_mult, F64, "cpu")
    with torch.no_grad():
        out_lab, _ = block(x, pre_in, torch.arange(7), SharedAttention(), None, None)
        out_hf = layer(x, position_embeddings=None, input_ids=None)
    assert_difference("pre_timing", out_lab, out_hf)


def hyper_head(hf, cfg, hc_ffn: HyperConnection) -> nn.Module:
    """V4's hc_head with the last FFN's pre rows: hc_fn = fn[:hc], hc_base = base[:hc], hc_scale = scale[0] (the
    V4.1 final pre is that FFN's pre)."""
    hc = cfg.hc_mult
    head = hf.m.DeepseekV4HyperHead(hf_config(hf, cfg))
    values = {"hc_fn": hc_ffn.fn[:hc], "hc_base": hc_ffn.base[:hc], "hc_scale": hc_ffn.scale[:1]}
    return load_by_name(head, hc_ffn, {}, {k: v.detach() for k, v in values.items()})


def test_final_collapse_and_hc_head_difference(hf, cfg):
    """V4.1: hidden = hc_pre(x_out, f_pre), f_pre computed by the last FFN's mHC from its input x_attn. V4: hc_head
    predicts fresh weights from x_out. Off: hc_head sees x_attn (what V4.1's pre was computed from) and must equal
    the collapse; on: hc_head sees x_out, as in V4."""
    block, _ = mixing_pair(hf, cfg)
    x = streams(cfg, 31)
    pre_in = identity_pre_mix(2, 7, cfg.hc_mult, F64, "cpu")
    with torch.no_grad():
        out, f_pre = block(x, pre_in, torch.arange(7), SharedAttention(), None, None)
        _, a_post, a_comb = block.hc_attn(x)
        x_attn = hc_post(block.attn.f(block.attn_norm(hc_pre(x, pre_in))), x, a_post, a_comb)  # the FFN's input
        assert torch.equal(block.hc_ffn(x_attn)[0], f_pre)  # f_pre is the last FFN's pre of x_attn
        head = hyper_head(hf, cfg, block.hc_ffn)
        assert_parity("final_collapse", hc_pre(x_attn, f_pre), head(x_attn))
        assert_difference("hc_head", hc_pre(out, f_pre), head(out))


# ---- router, MoE --------------------------------------------------------------------------------------------------
def router_pair(hf, cfg, k: int):
    gate = fill(Gate(cfg.dim, cfg.n_routed_experts, k, cfg.route_scale, cfg.gate_temp, F64, F64), 40)
    with torch.no_grad():
        gate.weight.mul_(3.0)
        gate.bias.copy_(randn(cfg.n_routed_experts, seed=41, std=0.3))
    router = hf.m.DeepseekV4TopKRouter(hf_config(hf, cfg, num_experts_per_tok=k))
    return gate, load_by_name(router, gate, {"weight": "weight", "e_score_correction_bias": "bias"})


def by_expert(weights: torch.Tensor, indices: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Each row's (indices, weights) in ascending expert order (HF's top-k is unsorted)."""
    order = indices.argsort(dim=-1)
    return indices.gather(-1, order), weights.gather(-1, order)


def test_router_top2(hf, cfg):
    """Top-2, the lab's backbone setting: the top-1 normalisation difference is off because k > 1 (HF normalises
    always, the lab only when k > 1; `test_router_top1_difference` measures k = 1)."""
    gate, router = router_pair(hf, cfg, 2)
    x = randn(64, cfg.dim, seed=42)
    with torch.no_grad():
        w, idx, scores = gate(x)
        _, w_h, idx_h = router(x)
    unbiased = scores.topk(2, dim=-1).indices.sort(-1).values
    assert (unbiased != idx.sort(-1).values).any(dim=-1).sum() > 0  # the bias changed the pick in some rows
    (idx, w), (idx_h, w_h) = by_expert(w, idx), by_expert(w_h, idx_h)
    assert torch.equal(idx, idx_h)
    assert_parity("router_top2", w, w_h)


def test_router_top1_difference(hf, cfg):
    gate, router = router_pair(hf, cfg, 1)
    x = randn(64, cfg.dim, seed=42)
    with torch.no_grad():
        w, idx, _ = gate(x)
        _, w_h, idx_h = router(x)
    assert torch.equal(idx, idx_h)  # the same experts: only the weight differs
    assert_difference("top1_norm", w, w_h)


def moe_cfg(cfg):
    """The lab config with a SwiGLU limit of 2 (both sides agree on it), so both clamps bite at unit-scale weights."""
    return cfg.replace(swiglu_limit=2.0)


def lab_moe(cfg) -> MoE:
    moe = MoE(
        cfg.dim,
        cfg.moe_inter_dim,
        cfg.n_routed_experts,
        cfg.n_activated_experts,
        cfg.n_shared_experts,
        cfg.route_scale,
        cfg.gate_temp,
        cfg.swiglu_limit,
        False,
        F64,
        F64,
    )
    fill(moe, 50)
    with torch.no_grad():
        moe.gate.bias.copy_(randn(cfg.n_routed_experts, seed=51, std=0.3))
    return moe


def moe_names(cfg, hash_router: bool = False) -> tuple[dict, Callable]:
    """DeepseekV4SparseMoeBlock ← moe.MoE: the router by name, each expert's w1 ‖ w3 as gate_up_proj[e] and w2 as
    down_proj[e], the shared expert's w1/w3/w2 as gate/up/down_proj."""
    names = {
        "gate.weight": "gate.weight",
        "shared_experts.gate_proj.weight": "shared_experts.w1.weight",
        "shared_experts.up_proj.weight": "shared_experts.w3.weight",
        "shared_experts.down_proj.weight": "shared_experts.w2.weight",
    }
    if not hash_router:
        names["gate.e_score_correction_bias"] = "gate.bias"

    def experts(moe: MoE) -> dict[str, torch.Tensor]:
        sd, E = moe.state_dict(), cfg.n_routed_experts
        gu = [torch.cat([sd[f"experts.{e}.w1.weight"], sd[f"experts.{e}.w3.weight"]]) for e in range(E)]
        return {
            "experts.gate_up_proj": torch.stack(gu),  # [E, 2I, D]
            "experts.down_proj": torch.stack([sd[f"experts.{e}.w2.weight"] for e in range(E)]),  # [E, D, I]
        }

    return names, experts


@pytest.mark.parametrize(("path", "S"), [("dense", 6), ("gather", 2), ("sorted", 6)])
def test_moe_block(hf, cfg, path, S):
    """Every lab expert code path (dense: all experts on every token; gather: few (token, expert) pairs; sorted: many
    pairs grouped by expert) against HF's block; hash MoE is off (mlp_layer_types = ["moe"])."""
    cfg = moe_cfg(cfg)
    moe = lab_moe(cfg)
    moe.dense = path == "dense"
    moe.prepare()
    names, experts = moe_names(cfg)
    ref = load_by_name(hf.m.DeepseekV4SparseMoeBlock(hf_config(hf, cfg), 0), moe, names, experts(moe))
    x = randn(2, S, cfg.dim, seed=52, std=2.0)
    N, k, E = 2 * S, cfg.n_activated_experts, cfg.n_routed_experts
    assert path == "dense" or (N * k <= 2 * E) == (path == "gather")  # the path this case means
    with torch.no_grad():
        gate_pre = torch.cat([F.linear(x, ex.w1.weight) for ex in moe.experts])  # every expert's w1 x
        up_pre = torch.cat([F.linear(x, ex.w3.weight) for ex in moe.experts])
        y, _ = moe(x)
        y_h = ref(x)
    assert (gate_pre > cfg.swiglu_limit).any() and (up_pre.abs() > cfg.swiglu_limit).any()  # both clamps bite
    assert_parity("moe_block", y, y_h)


def test_hash_moe_difference(hf, cfg):
    """V4's first layers choose experts by token id (tid2eid) instead of top-k(a + bias)."""
    cfg = moe_cfg(cfg)
    moe = lab_moe(cfg)
    names, experts = moe_names(cfg, hash_router=True)
    V, k, E = cfg.vocab_size, cfg.n_activated_experts, cfg.n_routed_experts
    ids = torch.arange(V)
    tid2eid = torch.stack([(ids * 3) % E, (ids * 3 + 1 + ids % 5) % E], dim=1)[:, :k]  # [V, k] two distinct experts
    block = hf.m.DeepseekV4SparseMoeBlock(hf_config(hf, cfg, mlp_type="hash_moe"), 0)
    ref = load_by_name(block, moe, names, {**experts(moe), "gate.tid2eid": tid2eid})
    x = randn(2, 6, cfg.dim, seed=52)
    tokens = torch.randint(0, V, (2, 6), generator=torch.Generator().manual_seed(53))
    with torch.no_grad():
        y, _ = moe(x)
        y_h = ref(x, input_ids=tokens)
    assert_difference("hash_moe", y, y_h)


# ---- attention ------------------------------------------------------------------------------------------------------
ATTN_NAMES = {  # DeepseekV4Attention ← attention.Attention
    "q_a_proj.weight": "wq_a.weight",
    "q_a_norm.weight": "q_norm.weight",
    "q_b_proj.weight": "wq_b.weight",
    "kv_proj.weight": "wkv.weight",
    "kv_norm.weight": "kv_norm.weight",
    "o_a_proj.weight": "wo_a.weight",
    "o_b_proj.weight": "wo_b.weight",
    "sinks": "attn_sink",
}


def lab_attention(cfg, layer: int) -> Attention:
    attn = fill(Attention(cfg, layer), 60)
    with torch.no_grad():
        attn.attn_sink.copy_(randn(cfg.n_heads, seed=61))
    return attn


def test_o_lora_grouped_projection(hf, cfg):
    attn = lab_attention(cfg, 0)
    per_group = cfg.n_heads * cfg.head_dim // cfg.o_groups
    grouped = hf.m.DeepseekV4GroupedLinear(per_group, cfg.o_groups * cfg.o_lora_rank, cfg.o_groups)
    grouped = load_by_name(grouped, attn, {"weight": "wo_a.weight"})
    o = randn(2, 5, cfg.n_heads * cfg.head_dim, seed=62)  # [B, S, H·Dh]
    with torch.no_grad():
        mid = attn.grouped_wo_a(o, attn.prepare_weights()[6])  # the forward's grouped wo_a
        mid_h = grouped(o.view(2, 5, cfg.o_groups, per_group)).flatten(2)
    assert_parity("o_lora", mid, mid_h)


def test_attention_sink(hf, cfg):
    B, S, H, T, Dh = 2, 5, cfg.n_heads, 9, cfg.head_dim
    q, kv = randn(B, S, H, Dh, seed=63), randn(B, T, Dh, seed=64)
    mask = torch.rand(B, S, T, generator=torch.Generator().manual_seed(65)) < 0.6
    mask[0, 0] = False  # a row with no key at all: everything goes to the sink
    sink = randn(H, seed=66)
    with torch.no_grad():
        o, probs, _ = sparse_attention(q, kv, mask, sink, Dh**-0.5)
        module = SimpleNamespace(num_key_value_groups=H, sinks=sink, training=False)
        additive = torch.zeros(B, 1, S, T, dtype=F64).masked_fill(~mask.unsqueeze(1), float("-inf"))
        o_h, w_h = hf.m.eager_attention_forward(module, q.transpose(1, 2), kv[:, None], kv[:, None], additive, Dh**-0.5)
    assert float(probs[0, 0].abs().max()) == 0.0
    assert_parity("attention_sink", o, o_h)  # o_h: [B, S, H, Dh]
    assert_parity("attention_sink", probs, w_h.transpose(1, 2))


def hf_attention(hf, cfg, layer_type: str, attn: Attention, rate: int = 2, q_b_norm: bool = False):
    """DeepseekV4Attention with the lab layer's weights. q_b_norm=False switches V4's per-head q renorm off (replaced
    by nn.Identity()); the compressor (HCA layers) takes the lab compressor's wkv / wgate / norm, position bias 0."""
    c = hf_config(hf, cfg, layer_type=layer_type, rate=rate)
    mod = hf.m.DeepseekV4Attention(c, 0)
    if not q_b_norm:
        mod.q_b_norm = nn.Identity()
    names, values = dict(ATTN_NAMES), {}
    if mod.compressor is not None:
        names |= {
            "compressor.kv_proj.weight": "compressor.wkv.weight",
            "compressor.kv_norm.weight": "compressor.norm.weight",
        }
        if rate > 1:
            names["compressor.gate_proj.weight"] = "compressor.wgate.weight"
        else:  # a softmax over one slot is 1 whatever the gate says: any gate weights
            values["compressor.gate_proj.weight"] = randn(cfg.head_dim, cfg.dim, seed=67)
        values["compressor.position_bias"] = torch.zeros(rate, cfg.head_dim, dtype=F64)  # V4's position bias off
    return load_by_name(mod, attn, names, values), c


def run_hf_attention(hf, mod, c, x: torch.Tensor) -> torch.Tensor:
    B, S, _ = x.shape
    pos = torch.arange(S).expand(B, -1)
    rot = hf.m.DeepseekV4RotaryEmbedding(c)
    emb = {kind: rot(x, position_ids=pos, layer_type=kind) for kind in ("main", "compress")}
    mask = hf.m.create_sliding_window_causal_mask(
        config=c, inputs_embeds=x, attention_mask=None, past_key_values=None, position_ids=pos
    )
    return mod(x, position_embeddings=emb, position_ids=pos, attention_mask=mask)[0]


def test_attention_layer(hf, cfg):
    """A whole sliding-window layer, S = 13 > window 8: q-LoRA, shared K = V latent, partial RoPE, sink, inverse
    RoPE, O-LoRA; V4's q_b_norm off."""
    attn = lab_attention(cfg, 0)
    assert cfg.compress_ratios[0] == 0
    mod, c = hf_attention(hf, cfg, "sliding_attention", attn)
    x = randn(2, 13, cfg.dim, seed=68)
    with torch.no_grad():
        y = attn(x, torch.arange(13), SharedAttention(), None, None)
        y_h = run_hf_attention(hf, mod, c, x)
    assert y.shape == (2, 13, cfg.dim)
    assert_parity("attention_layer", y, y_h)


def test_q_b_norm_difference(hf, cfg):
    attn = lab_attention(cfg, 0)
    mod, c = hf_attention(hf, cfg, "sliding_attention", attn, q_b_norm=True)
    assert isinstance(mod.q_b_norm, hf.m.DeepseekV4UnweightedRMSNorm)
    x = randn(2, 13, cfg.dim, seed=68)
    with torch.no_grad():
        y = attn(x, torch.arange(13), SharedAttention(), None, None)
        y_h = run_hf_attention(hf, mod, c, x)
    assert_difference("q_b_norm", y, y_h)


def test_compressed_attention_layer(hf, cfg):
    """A ratio-2 KV source that picks every visible entry (index_topk ≥ entries) attends to the window and all
    visible pooled entries, as V4's HCA layer at rate 2 does with its position bias at 0."""
    S, layer = 15, 1
    assert cfg.compress_ratios[layer] == 2 and layer in cfg.kv_source_layers and layer in cfg.index_source_layers
    assert cfg.index_topk >= S // 2
    attn = lab_attention(cfg, layer)
    mod, c = hf_attention(hf, cfg, "heavily_compressed_attention", attn, rate=2)
    x = randn(2, S, cfg.dim, seed=69)
    shared = SharedAttention()
    with torch.no_grad():
        y = attn(x, torch.arange(S), shared, None, None)
        y_h = run_hf_attention(hf, mod, c, x)
    visible = visible_counts(torch.arange(S), 2)  # [S]
    picked = (shared.topk_idxs >= 0).sum(-1)  # [B, S]
    assert torch.equal(picked, visible.expand(2, -1))  # every visible entry picked
    assert_parity("compressed_attention_layer", y, y_h)


# ---- compressor, indexer ----------------------------------------------------------------------------------------
def lab_compressor(cfg, ratio: int) -> Compressor:
    return fill(Compressor(cfg.dim, cfg.head_dim, ratio, cfg.norm_eps, F64, F64), 70 + ratio)


def lab_entries(comp: Compressor, cfg, x: torch.Tensor) -> torch.Tensor:
    """The lab's compressed entries after RoPE at their group's first position j·ratio.  [B, n, Dh]"""
    latent = comp(x)[0]  # [B, n, Dh] pre-RoPE
    group_pos = torch.arange(latent.size(1)) * comp.ratio
    return apply_rope(latent, rope_angles(group_pos, layer_inv_freq(cfg, True)))


def hca(hf, cfg, comp: Compressor, position_bias: torch.Tensor | None = None):
    """DeepseekV4HCACompressor at the lab's ratio: kv_proj ← wkv, gate_proj ← wgate, kv_norm ← norm. V4's differences
    off: HCA is V4's non-overlapping compressor (its CSA one overlaps windows), and its position bias is 0 unless
    given."""
    r = comp.ratio
    mod = hf.m.DeepseekV4HCACompressor(hf_config(hf, cfg, layer_type="heavily_compressed_attention", rate=r))
    names = {"kv_proj.weight": "wkv.weight", "kv_norm.weight": "norm.weight"}
    values = {"position_bias": torch.zeros(r, cfg.head_dim, dtype=F64) if position_bias is None else position_bias}
    if r > 1:
        names["gate_proj.weight"] = "wgate.weight"
    else:  # one slot: its softmax weight is 1 whatever the gate
        values["gate_proj.weight"] = randn(cfg.head_dim, cfg.dim, seed=74)
    return load_by_name(mod, comp, names, values)


@pytest.mark.parametrize("ratio", [2, 1])
def test_compressor(hf, cfg, ratio):
    """S = 11: at ratio 2 the trailing odd token makes no entry in either; the visibility is (p + 1) // ratio."""
    comp = lab_compressor(cfg, ratio)
    mod = hca(hf, cfg, comp)
    S = 11
    x = randn(2, S, cfg.dim, seed=75)
    pos = torch.arange(S)
    with torch.no_grad():
        entries = lab_entries(comp, cfg, x)
        entries_h, bias_h = mod(x, None, pos.expand(2, -1), None, 0)
    assert entries.shape == (2, S // ratio, cfg.head_dim)
    seen = torch.arange(S // ratio)[None, :] < visible_counts(pos, ratio)[:, None]  # [S, n] the lab's rule
    assert torch.equal(bias_h[:, 0] == 0, seen.expand(2, -1, -1))  # HF's causal block bias: the same entries
    assert_parity(f"compressor_ratio{ratio}", entries, entries_h[:, 0])


def test_compressor_position_bias_difference(hf, cfg):
    comp = lab_compressor(cfg, 2)
    mod = hca(hf, cfg, comp, position_bias=randn(2, cfg.head_dim, seed=76))
    x = randn(2, 11, cfg.dim, seed=75)
    with torch.no_grad():
        assert_difference(
            "position_bias", lab_entries(comp, cfg, x), mod(x, None, torch.arange(11).expand(2, -1), None, 0)[0][:, 0]
        )


def test_compressor_overlap_difference(hf, cfg):
    """V4's CSA compressor at rate 2: both series (Ca, Cb) get the lab's wkv / wgate, so entry j pools the 2 tokens
    of group j (Cb) and the 2 of group j − 1 (Ca). Entry 0 has no previous group and equals the lab's."""
    comp = lab_compressor(cfg, 2)
    c = hf_config(hf, cfg, layer_type="compressed_sparse_attention", rate=2)
    mod = hf.m.DeepseekV4CSACompressor(c)
    sd = comp.state_dict()
    two = lambda name: torch.cat([sd[name], sd[name]])  # [Ca; Cb] rows  # noqa: E731
    Di = cfg.index_head_dim
    values = {
        "kv_proj.weight": two("wkv.weight"),
        "gate_proj.weight": two("wgate.weight"),
        "position_bias": torch.zeros(2, 2 * cfg.head_dim, dtype=F64),
        # V4's indexer inside the CSA compressor only chooses entries (the block bias); the entries compared here
        # do not depend on it: any weights
        "indexer.kv_proj.weight": randn(2 * Di, cfg.dim, seed=77),
        "indexer.gate_proj.weight": randn(2 * Di, cfg.dim, seed=78),
        "indexer.position_bias": torch.zeros(2, 2 * Di, dtype=F64),
        "indexer.kv_norm.weight": torch.ones(Di, dtype=F64),
        "indexer.q_b_proj.weight": randn(cfg.index_n_heads * Di, cfg.q_lora_rank, seed=79),
        "indexer.scorer.weights_proj.weight": randn(cfg.index_n_heads, cfg.dim, seed=80),
    }
    mod = load_by_name(mod, comp, {"kv_norm.weight": "norm.weight"}, values)
    x = randn(2, 11, cfg.dim, seed=75)
    qr = randn(2, 11, cfg.q_lora_rank, seed=81)
    with torch.no_grad():
        entries = lab_entries(comp, cfg, x)
        entries_h = mod(x, qr, torch.arange(11).expand(2, -1), None, 0)[0][:, 0]
    assert_parity("compressor_ratio2", entries[:, :1], entries_h[:, :1])  # entry 0: no previous window
    assert_difference("overlap", entries, entries_h)


def test_indexer_score(hf, cfg):
    """The same index keys for both (V4 builds them with its indexer's own compressor, V4.1 from the KV source's
    latent: not compared); q = RoPE(wq_b(qr)) and the weights w = weights_proj(x)·Di^−½·Hi^−½ in each."""
    B, S, T, Di, Hi = 2, 13, 6, cfg.index_head_dim, cfg.index_n_heads
    lab = fill(
        Indexer(cfg.dim, cfg.q_lora_rank, cfg.head_dim, Hi, Di, cfg.index_topk, True, cfg.norm_eps, False, F64), 82
    )
    c = hf_config(hf, cfg, layer_type="compressed_sparse_attention", rate=2)
    ref = hf.m.DeepseekV4Indexer(c)
    unused = {  # V4's indexer-owned compressor: not run here
        "kv_proj.weight": randn(2 * Di, cfg.dim, seed=83),
        "gate_proj.weight": randn(2 * Di, cfg.dim, seed=84),
        "position_bias": torch.zeros(2, 2 * Di, dtype=F64),
        "kv_norm.weight": torch.ones(Di, dtype=F64),
    }
    ref = load_by_name(
        ref, lab, {"q_b_proj.weight": "wq_b.weight", "scorer.weights_proj.weight": "weights_proj.weight"}, unused
    )
    x, qr = randn(B, S, cfg.dim, seed=85), randn(B, S, cfg.q_lora_rank, seed=86)
    index_k = randn(B, T, Di, seed=87)
    pos = torch.arange(S)
    visible = visible_counts(pos, 2)
    with torch.no_grad():
        _, scores, _ = lab(x, qr, rope_angles(pos, layer_inv_freq(cfg, True)), visible, index_k)
        cos, sin = ref.rotary_emb(x, position_ids=pos.expand(B, -1), layer_type="compress")
        q = ref.q_b_proj(qr).view(B, S, Hi, Di).transpose(1, 2)
        q = hf.m.apply_rotary_pos_emb(q, cos, sin).transpose(1, 2)  # [B, S, Hi, Di]
        scores_h = ref.scorer(q, index_k, x)  # [B, S, T], no mask
    seen = torch.arange(T)[None, :] < visible[:, None]  # [S, T]
    assert torch.isinf(scores[:, ~seen]).all() and seen.sum() > 0
    assert (scores_h[:, seen] == 0).any() and (scores_h[:, seen] > 0).any()  # ReLU'd heads and live ones
    assert_parity("indexer_score", torch.where(seen, scores, 0.0), torch.where(seen, scores_h, 0.0))


def test_one_transformers_pin_everywhere():
    """The version the float64 rewrite was made for is the one CI installs and the extra names."""
    assert f"transformers=={TRANSFORMERS_PIN}\n" in (ROOT / "requirements-parity.txt").read_text(encoding="utf-8")
    assert f'parity = ["transformers=={TRANSFORMERS_PIN}"]' in (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    assert "make install-parity" in (ROOT / ".ci" / "run").read_text(encoding="utf-8")


# ---- the committed table ----------------------------------------------------------------------------------------
def committed_doc() -> dict:
    return json.loads(DOC_JSON.read_text(encoding="utf-8"))


def test_committed_table_is_complete_and_rendered():
    """docs/peer_parity.json holds every mechanism and difference of this file (≥ 8 shared mechanisms, each within
    the bound, each difference clearly on), and docs/peer_parity.md is its rendering. Needs no transformers."""
    doc = committed_doc()
    mechs, diffs = {m["id"]: m for m in doc["mechanisms"]}, {d["id"]: d for d in doc["differences"]}
    assert list(mechs) == list(MECHANISMS) and list(diffs) == list(DIFFERENCES)
    assert len(mechs) >= 8
    for k, (m, lab, hf_name) in MECHANISMS.items():
        assert (mechs[k]["mechanism"], mechs[k]["lab"], mechs[k]["hf"]) == (m, lab, hf_name)
        assert 0 <= mechs[k]["max_abs_delta"] <= TOL < mechs[k]["max_abs_output"], k
    for k, (d, mech, off) in DIFFERENCES.items():
        assert (diffs[k]["difference"], diffs[k]["mechanism"], diffs[k]["switched_off_by"]) == (d, mech, off)
        assert diffs[k]["max_abs_delta"] > ON_MIN, k
    assert doc["conditions"]["transformers"] == TRANSFORMERS_PIN and doc["conditions"]["tolerance"] == TOL
    spec = importlib.util.spec_from_file_location("peer_parity_table", ROOT / "bench" / "peer_parity_table.py")
    table = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(table)
    assert (ROOT / "docs" / "peer_parity.md").read_text(encoding="utf-8") == table.render(doc)

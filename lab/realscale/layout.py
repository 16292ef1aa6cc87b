"""The official checkpoint layout of DeepSeek-V4.1-Flash, and how the lab's state dict maps onto it.

Every tensor a config's model holds, by its lab name, with its checkpoint name, its logical shape, the dtype
the lab holds it in, its format in the real checkpoint (dspark_mini.packed.weight_format) and the
group `inspect` counts its bytes under. Computed from the config alone (nothing is built, so the real `flash`
size costs nothing); tests check it against `build_model(cfg, device="meta").state_dict()`.

Names. The checkpoint uses the reference's module names (`inference/model.py`, and the
real checkpoint's headers): `embed.weight`, `layers.{i}.attn.wq_a.weight`, `layers.{i}.ffn.experts.{e}.w1.weight`,
`layers.{1,14}.engram.embed.weight`, `mtp.{k}.…` for the DSpark stages, and a packed weight `X.weight` has its
scales beside it as `X.scale`. The lab's names are the same except (where the reference is silent, our choice):
  lab                                   checkpoint
  layers.{i}.hc_attn.fn / .base / .scale   layers.{i}.hc_attn_fn / hc_attn_base / hc_attn_scale   (same for hc_ffn)
  mtp.layers.{k}.<block tensor>         mtp.{k}.<block tensor>            (a DSpark stage is a full Block)
  mtp.main_proj.weight, mtp.main_norm.weight   mtp.0.main_proj.weight, mtp.0.main_norm.weight   (stage 0 only)
  mtp.norm.weight, mtp.markov_head.*    mtp.{n−1}.norm.weight, mtp.{n−1}.markov_head.*   (last stage only)
  mtp.confidence_head.weight            mtp.{n−1}.confidence_head.proj.weight
The lab-only RNN Markov head (`markov_head.cell.*`) keeps its names under the last stage. Not in the lab, so
not in this layout: the vision tower + aligner and the router's `bias_vl` (image-span bias).

Dtypes, by style:
  "official": the real checkpoint's — fp8_block / fp8_rows → F8_E4M3 weight + F8_E8M0 scale, mxfp4 → I8 weight
              (two E2M1 codes a byte) + F8_E8M0 scale, the rest BF16 or F32. Lossy for lab weights that are not
              already on those grids (the lab never rounds its dense projections to FP8).
  "lab"     : exact for the lab: only what the lab simulates is packed (routed experts as MXFP4 when
              `expert_quant`, Engram tables as FP8 rows when `engram_table_quant` — the forward applies that
              QDQ anyway), everything else in the lab's own dtype (float64 for the lab model).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import torch

from dspark_mini.attention import hp_dtype
from dspark_mini.checkpoint import ST_DTYPES as CHECKPOINT_DTYPES
from dspark_mini.checkpoint import CheckpointError
from dspark_mini.config import ModelConfig, shown
from dspark_mini.engram import engram_num_embeddings
from dspark_mini.packed import E8M0, FP8, PACKED_FORMATS, packed_shapes, weight_format

STYLES = ("lab", "official")
GROUPS = ("routed_experts", "engram", "dspark", "attention", "shared_experts", "embed", "head", "other")
OFFICIAL_FLOAT = {"bf16": torch.bfloat16, "fp32": torch.float32}
MXFP4_STORED = torch.int8  # the checkpoint stores the E2M1 bytes as I8 (its headers); the lab holds them as uint8

# safetensors dtype codes ↔ torch dtypes: the lab checkpoint's table plus the two float8 formats the official one uses
ST_DTYPES = {**CHECKPOINT_DTYPES, "F8_E4M3": FP8, "F8_E8M0": E8M0}
ST_CODES = {v: k for k, v in ST_DTYPES.items()}


class RealScaleError(CheckpointError):
    """A real-scale checkpoint folder is missing something or does not fit its config; the message names the
    file, the tensor and what is allowed."""


def check_style(style: str) -> str:
    if style not in STYLES:
        raise RealScaleError(f"style = {shown(style)} is invalid: allowed one of {STYLES}")
    return style


# ---- the lab's tensors, from the config alone -------------------------------------------------------
def _block(cfg: ModelConfig, i: int, p: str) -> dict[str, tuple[tuple[int, ...], torch.dtype]]:
    """The tensors of Block(cfg, i) under prefix p, in state-dict order: name → (shape, dtype)."""
    dt, hp = cfg.torch_dtype, hp_dtype(cfg)
    D, H, Dh, Rq = cfg.dim, cfg.n_heads, cfg.head_dim, cfg.q_lora_rank
    G, R, hc = cfg.o_groups, cfg.o_lora_rank, cfg.hc_mult
    backbone = i < cfg.n_layers
    out = {
        f"{p}attn.attn_sink": ((H,), hp),  # one sink logit per head
        f"{p}attn.wq_a.weight": ((Rq, D), dt),
        f"{p}attn.q_norm.weight": ((Rq,), dt),
        f"{p}attn.wq_b.weight": ((H * Dh, Rq), dt),
        f"{p}attn.wkv.weight": ((Dh, D), dt),  # the one shared K = V latent
        f"{p}attn.kv_norm.weight": ((Dh,), dt),
        f"{p}attn.wo_a.weight": ((G * R, H * Dh // G), dt),  # block-diagonal: G groups of [R, H·Dh/G]
        f"{p}attn.wo_b.weight": ((D, G * R), dt),
    }
    if backbone and i in cfg.kv_source_layers:  # 3B: ratio 2 pools in high precision, ratio 1 has no gate
        ratio = cfg.compress_ratios[i]
        out[f"{p}attn.compressor.wkv.weight"] = ((Dh, D), hp if ratio > 1 else dt)
        if ratio > 1:
            out[f"{p}attn.compressor.wgate.weight"] = ((Dh, D), hp)
        out[f"{p}attn.compressor.norm.weight"] = ((Dh,), dt)
    if backbone and i in cfg.index_source_layers:  # 3C: only KV sources own index keys (wk, k_norm)
        Hi, Di = cfg.index_n_heads, cfg.index_head_dim
        out[f"{p}attn.indexer.wq_b.weight"] = ((Hi * Di, Rq), dt)
        out[f"{p}attn.indexer.weights_proj.weight"] = ((Hi, D), dt)
        if i in cfg.kv_source_layers:
            out[f"{p}attn.indexer.wk.weight"] = ((Di, Dh), dt)
            out[f"{p}attn.indexer.k_norm.weight"] = ((Di,), dt)
    E = cfg.n_routed_experts if backbone else cfg.dspark_n_routed_experts
    I = cfg.moe_inter_dim
    out[f"{p}ffn.gate.weight"] = ((E, D), dt)
    out[f"{p}ffn.gate.bias"] = ((E,), hp)  # selection-only correction bias
    for e in range(E):
        out[f"{p}ffn.experts.{e}.w1.weight"] = ((I, D), dt)
        out[f"{p}ffn.experts.{e}.w2.weight"] = ((D, I), dt)
        out[f"{p}ffn.experts.{e}.w3.weight"] = ((I, D), dt)
    if cfg.n_shared_experts:
        Is = I * cfg.n_shared_experts
        out[f"{p}ffn.shared_experts.w1.weight"] = ((Is, D), dt)
        out[f"{p}ffn.shared_experts.w2.weight"] = ((D, Is), dt)
        out[f"{p}ffn.shared_experts.w3.weight"] = ((Is, D), dt)
    out[f"{p}attn_norm.weight"] = ((D,), dt)
    out[f"{p}ffn_norm.weight"] = ((D,), dt)
    n_mix = (2 + hc) * hc  # pre hc + post hc + comb hc²
    for sub in ("hc_attn", "hc_ffn"):
        out[f"{p}{sub}.fn"] = ((n_mix, hc * D), hp)
        out[f"{p}{sub}.base"] = ((n_mix,), hp)
        out[f"{p}{sub}.scale"] = ((3,), hp)
    if backbone and i in cfg.engram_layer_ids:
        rows = engram_num_embeddings(cfg)[cfg.engram_layer_ids.index(i)]  # Σ of the layer's primes
        out[f"{p}engram.q_weight"] = ((hc, D), dt)
        out[f"{p}engram.k_weight"] = ((hc, D), dt)
        out[f"{p}engram.embed.weight"] = ((rows, cfg.engram_head_dim), dt)
        out[f"{p}engram.wkv.weight"] = ((D * (hc + 1), cfg.engram_n_hash_cols * cfg.engram_head_dim), dt)
    return out


def lab_tensors(cfg: ModelConfig) -> dict[str, tuple[tuple[int, ...], torch.dtype]]:
    """Every tensor of the lab model's state dict for `cfg`: name → (shape, dtype), in state-dict order."""
    dt, hp = cfg.torch_dtype, hp_dtype(cfg)
    D, V, r = cfg.dim, cfg.vocab_size, cfg.dspark_markov_rank
    out = {"embed.weight": ((V, D), dt)}
    for i in range(cfg.n_layers):
        out.update(_block(cfg, i, f"layers.{i}."))
    out["norm.weight"] = ((D,), dt)
    out["head.weight"] = ((V, D), hp)  # fp32 (fp64) logits, as the reference
    if cfg.n_mtp_layers:
        if cfg.dspark_tap_mix == "concat_proj":
            out["mtp.main_proj.weight"] = ((D, len(cfg.dspark_target_layer_ids) * D), dt)
        out["mtp.main_norm.weight"] = ((D,), dt)
        for k in range(cfg.n_mtp_layers):
            out.update(_block(cfg, cfg.n_layers + k, f"mtp.layers.{k}."))
        out["mtp.norm.weight"] = ((D,), dt)
        out["mtp.markov_head.embed.weight"] = ((V, r), dt)  # W1
        if cfg.dspark_markov_kind == "rnn":
            out["mtp.markov_head.cell.weight"] = ((3 * r, 2 * r + D), dt)
            out["mtp.markov_head.cell.bias"] = ((3 * r,), dt)
        out["mtp.markov_head.head.weight"] = ((V, r), dt)  # W2
        out["mtp.confidence_head.weight"] = ((1, D + r), hp)
    return out


# ---- names and groups -----------------------------------------------------------------------------------
def checkpoint_name(lab: str, cfg: ModelConfig) -> str:
    """The checkpoint name of a lab state-dict tensor (see the module docstring)."""
    if not lab.startswith("mtp.") and ".hc_" not in lab:
        return lab  # most names are the same
    name = re.sub(r"\.hc_(attn|ffn)\.(fn|base|scale)$", r".hc_\1_\2", lab)
    m = re.match(r"mtp\.layers\.(\d+)\.(.*)", name)
    if m:
        return f"mtp.{m[1]}.{m[2]}"
    last = cfg.n_mtp_layers - 1
    if name.startswith("mtp.main_"):
        return "mtp.0." + name[len("mtp.") :]
    if name == "mtp.confidence_head.weight":
        return f"mtp.{last}.confidence_head.proj.weight"
    if name.startswith("mtp."):  # norm, markov_head
        return f"mtp.{last}." + name[len("mtp.") :]
    return name


def group_of(name: str) -> str:
    """The byte-count group of a checkpoint tensor name (the grouping of docs/real-scale.md)."""
    if name.startswith("mtp."):
        return "dspark"
    if ".ffn.experts." in name:
        return "routed_experts"
    if ".engram." in name:
        return "engram"
    if ".ffn.shared_experts." in name:
        return "shared_experts"
    if re.match(r"layers\.\d+\.attn\.(wq_a|wq_b|wkv|wo_a|wo_b)\.", name):
        return "attention"  # the q / kv / o LoRA projections (norms, sinks, compressor, indexer: "other")
    if name in ("embed.weight", "head.weight"):
        return name.split(".")[0]
    return "other"


# ---- what a checkpoint folder holds ---------------------------------------------------------------------
@dataclass(frozen=True)
class Stored:
    """One tensor as a checkpoint stores it."""

    name: str  # checkpoint name
    dtype: torch.dtype  # stored dtype
    shape: tuple[int, ...]  # stored shape
    lab: str  # the lab tensor it belongs to
    fmt: str  # stored format: "fp8_block" | "mxfp4" | "fp8_rows" | "float"
    role: str  # "weight" (codes or plain values) | "scale"
    group: str

    @property
    def nbytes(self) -> int:
        n = self.dtype.itemsize
        for d in self.shape:
            n *= d
        return n


def stored_format(lab: str, cfg: ModelConfig, style: str) -> str:
    """How `style` stores a lab tensor: a packed format or "float"."""
    fmt = weight_format(lab)
    if check_style(style) == "official":
        return fmt if fmt in PACKED_FORMATS else "float"
    lab_packs = {"mxfp4": cfg.expert_quant, "fp8_rows": cfg.engram_table_quant}
    return fmt if lab_packs.get(fmt, False) else "float"


def scale_name(name: str) -> str:
    """`X.weight` → `X.scale`: where a packed weight's scales are stored."""
    return name[: -len("weight")] + "scale"


def layout(cfg: ModelConfig, style: str = "official") -> list[Stored]:
    """Every tensor a checkpoint of `cfg` in `style` holds, in order (a packed weight, then its scales)."""
    out = []
    for lab, (shape, dt) in lab_tensors(cfg).items():
        name = checkpoint_name(lab, cfg)
        fmt, group = stored_format(lab, cfg, style), group_of(name)
        if fmt == "float":  # official: bf16 / fp32 as the real checkpoint; lab: the lab's own dtype
            dtype = OFFICIAL_FLOAT[weight_format(lab)] if style == "official" else dt
            out.append(Stored(name, dtype, shape, lab, fmt, "weight", group))
            continue
        if not name.endswith(".weight"):
            raise RealScaleError(f"packed tensor {name!r} must end in '.weight' (its scales go to '.scale')")
        qshape, sshape = packed_shapes(fmt, shape)
        qdtype = MXFP4_STORED if fmt == "mxfp4" else FP8
        out.append(Stored(name, qdtype, qshape, lab, fmt, "weight", group))
        out.append(Stored(scale_name(name), E8M0, sshape, lab, fmt, "scale", group))
    return out


def by_name(entries: list[Stored]) -> dict[str, Stored]:
    return {s.name: s for s in entries}


def dtype_code(dtype: torch.dtype) -> str:
    """The safetensors dtype code of a torch dtype ("BF16", "F8_E4M3", …)."""
    return ST_CODES.get(dtype, str(dtype).removeprefix("torch."))


# ---- config.json: the official keys, plus the lab's own config for an exact round trip ----------------
LAB_KEY = "dspark_lab"
LAB_FORMAT = "dspark-lab-realscale"
LAB_VERSION = 1


def official_text_config(cfg: ModelConfig) -> dict:
    """The HF `text_config` of a config, with the official key names (the published config.json)."""
    return {
        "model_type": "deepseek_v41_text",
        "vocab_size": cfg.vocab_size,
        "hidden_size": cfg.dim,
        "num_hidden_layers": cfg.n_layers,
        "num_nextn_predict_layers": cfg.n_mtp_layers,
        "num_attention_heads": cfg.n_heads,
        "num_key_value_heads": 1,
        "head_dim": cfg.head_dim,
        "qk_rope_head_dim": cfg.rope_head_dim,
        "q_lora_rank": cfg.q_lora_rank,
        "o_lora_rank": cfg.o_lora_rank,
        "o_groups": cfg.o_groups,
        "sliding_window": cfg.window_size,
        "compress_ratios": list(cfg.compress_ratios),
        "compress_rope_theta": cfg.compress_rope_theta,
        "kv_source_layer_ids": list(cfg.kv_source_layers),
        "index_source_layer_ids": list(cfg.index_source_layers),
        "index_n_heads": cfg.index_n_heads,
        "index_head_dim": cfg.index_head_dim,
        "index_topk": cfg.index_topk,
        "candidate_source_layer_id": cfg.candidate_source_layer,
        "candidate_topk_blocks": cfg.candidate_topk_blocks,
        "candidate_block_size": cfg.candidate_block_size,
        "n_routed_experts": cfg.n_routed_experts,
        "num_experts_per_tok": cfg.n_activated_experts,
        "n_shared_experts": cfg.n_shared_experts,
        "moe_intermediate_size": cfg.moe_inter_dim,
        "scoring_func": cfg.score_func,
        "topk_method": "noaux_tc",
        "norm_topk_prob": True,
        "routed_scaling_factor": cfg.route_scale,
        "swiglu_limit": cfg.swiglu_limit,
        "hidden_act": "silu",
        "rms_norm_eps": cfg.norm_eps,
        "tie_word_embeddings": False,
        "hc_mult": cfg.hc_mult,
        "hc_sinkhorn_iters": cfg.hc_sinkhorn_iters,
        "hc_eps": cfg.hc_eps,
        "rope_theta": cfg.rope_theta,
        "rope_scaling": {
            "rope_type": "yarn",
            "factor": cfg.rope_factor,
            "beta_fast": cfg.beta_fast,
            "beta_slow": cfg.beta_slow,
            "original_max_position_embeddings": cfg.original_seq_len,
        },
        "max_position_embeddings": int(cfg.original_seq_len * cfg.rope_factor),
        "engram_layer_ids": list(cfg.engram_layer_ids),
        "engram_num_embeddings": list(engram_num_embeddings(cfg)),
        "engram_max_ngram_size": cfg.engram_max_ngram_size,
        "engram_vocab_size": cfg.engram_vocab_size,
        "engram_n_heads": cfg.engram_n_heads,
        "engram_head_dim": cfg.engram_head_dim,
        "engram_pad_token_id": cfg.engram_pad_id,
        "engram_compressed_vocab_size": cfg.engram_compressed_vocab_size,
        "dspark_block_size": cfg.dspark_block_size,
        "dspark_noise_token_id": cfg.dspark_noise_token_id,
        "dspark_target_layer_ids": list(cfg.dspark_target_layer_ids),
        "dspark_markov_rank": cfg.dspark_markov_rank,
        "dspark_n_routed_experts": cfg.dspark_n_routed_experts,
        "dspark_num_experts_per_tok": cfg.dspark_n_activated_experts,
    }


# official text_config key → ModelConfig field (read back from a real checkpoint's config.json)
_FROM_OFFICIAL = {
    "vocab_size": "vocab_size",
    "hidden_size": "dim",
    "num_hidden_layers": "n_layers",
    "num_nextn_predict_layers": "n_mtp_layers",
    "num_attention_heads": "n_heads",
    "head_dim": "head_dim",
    "qk_rope_head_dim": "rope_head_dim",
    "q_lora_rank": "q_lora_rank",
    "o_lora_rank": "o_lora_rank",
    "o_groups": "o_groups",
    "sliding_window": "window_size",
    "compress_ratios": "compress_ratios",
    "compress_rope_theta": "compress_rope_theta",
    "kv_source_layer_ids": "kv_source_layers",
    "index_source_layer_ids": "index_source_layers",
    "index_n_heads": "index_n_heads",
    "index_head_dim": "index_head_dim",
    "index_topk": "index_topk",
    "candidate_source_layer_id": "candidate_source_layer",
    "candidate_topk_blocks": "candidate_topk_blocks",
    "candidate_block_size": "candidate_block_size",
    "n_routed_experts": "n_routed_experts",
    "num_experts_per_tok": "n_activated_experts",
    "n_shared_experts": "n_shared_experts",
    "moe_intermediate_size": "moe_inter_dim",
    "routed_scaling_factor": "route_scale",
    "swiglu_limit": "swiglu_limit",
    "rms_norm_eps": "norm_eps",
    "hc_mult": "hc_mult",
    "hc_sinkhorn_iters": "hc_sinkhorn_iters",
    "hc_eps": "hc_eps",
    "rope_theta": "rope_theta",
    "engram_layer_ids": "engram_layer_ids",
    "engram_max_ngram_size": "engram_max_ngram_size",
    "engram_vocab_size": "engram_vocab_size",
    "engram_n_heads": "engram_n_heads",
    "engram_head_dim": "engram_head_dim",
    "engram_pad_token_id": "engram_pad_id",
    "engram_compressed_vocab_size": "engram_compressed_vocab_size",
    "dspark_block_size": "dspark_block_size",
    "dspark_noise_token_id": "dspark_noise_token_id",
    "dspark_target_layer_ids": "dspark_target_layer_ids",
    "dspark_markov_rank": "dspark_markov_rank",
    "dspark_n_routed_experts": "dspark_n_routed_experts",
    "dspark_num_experts_per_tok": "dspark_n_activated_experts",
}
_YARN = {"factor": "rope_factor", "beta_fast": "beta_fast", "beta_slow": "beta_slow",
         "original_max_position_embeddings": "original_seq_len"}  # fmt: skip


def config_from_official(text: dict) -> ModelConfig:
    """A ModelConfig from an official `text_config` (the real checkpoint's): the keys above over `flash`'s
    defaults for everything the official config does not say (dtype bfloat16, DSpark concat_proj taps, …)."""
    from dspark_mini.config import ConfigError, flash_config

    changes = {}
    for key, field in _FROM_OFFICIAL.items():
        if key in text:
            v = text[key]
            changes[field] = tuple(v) if isinstance(v, list) else v
    yarn = text.get("rope_scaling") or {}
    if not isinstance(yarn, dict):
        raise RealScaleError(f"config.json text_config: rope_scaling = {shown(yarn)} is invalid: allowed an object")
    for key, field in _YARN.items():
        if key in yarn:
            changes[field] = yarn[key]
    try:
        return flash_config(**changes)
    except (ConfigError, TypeError) as e:
        raise RealScaleError(f"config.json text_config does not give a valid model: {e}") from e


def quantization_config(cfg: ModelConfig, style: str) -> dict:
    """The `quantization_config` of config.json: the official one, or what the lab style stores."""
    if check_style(style) == "official":
        return {"quant_method": "fp8", "activation_scheme": "dynamic", "weight_block_size": [32, 32],
                "scale_fmt": "ue8m0", "expert_dtype": "fp4"}  # fmt: skip
    return {
        "quant_method": "dspark_lab",
        "note": "only what the lab simulates is packed; every other tensor is stored in the lab's own dtype",
        "expert_dtype": "fp4" if cfg.expert_quant else cfg.dtype,
        "engram_table_dtype": "fp8" if cfg.engram_table_quant else cfg.dtype,
        "dense_dtype": cfg.dtype,
        "scale_fmt": "ue8m0",
    }

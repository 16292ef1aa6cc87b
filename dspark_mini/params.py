"""Parameter counts, all in one place: of a built model, and of a config without building anything.

count_params(model)   parameters by group of a built model: backbone, engram (the Engram tables), draft (`mtp.*`,
                      the shared embedding and head not counted again), total
param_counts(cfg)     the same four numbers from the config alone, shape by shape (the real model, 63,903 modules,
                      is never built for them); tests pin it to count_params of the built lab and flash models
param_parts(cfg)      the largest pieces by what drives them (vocab, experts, attention, hc, engram): what the
                      checkpoint size guard names when it refuses a config
"""

from __future__ import annotations

from torch import nn

from .config import ModelConfig
from .engram import engram_num_embeddings


def count_params(model: nn.Module) -> dict[str, int]:
    """Parameters by group: Engram tables, the DSpark draft (`mtp.*`, shared embed/head not counted
    again), and the backbone (everything else, Engram projections included)."""
    out = {"backbone": 0, "engram": 0, "draft": 0}
    for name, p in model.named_parameters():
        if ".engram.embed." in name:
            out["engram"] += p.numel()
        elif name.startswith("mtp.") or name.startswith("draft."):
            out["draft"] += p.numel()
        else:
            out["backbone"] += p.numel()
    out["total"] = sum(out.values())
    return out


def param_counts(cfg: ModelConfig) -> dict[str, int]:
    """`count_params(build_model(cfg))` from the config alone: backbone, engram, draft, total — the same numbers
    without building anything (the real-size model has 63,903 modules). Mirrors the modules' shapes one by one;
    tests/test_budgets.py pins it to the built lab and flash models."""
    D, V, hc, Dh, Rq = cfg.dim, cfg.vocab_size, cfg.hc_mult, cfg.head_dim, cfg.q_lora_rank
    H, G, R, Hi, Di = cfg.n_heads, cfg.o_groups, cfg.o_lora_rank, cfg.index_n_heads, cfg.index_head_dim
    L, I = cfg.n_layers, cfg.moe_inter_dim
    n_mix = (2 + hc) * hc

    def block(layer: int) -> int:
        backbone = layer < L
        n = D * Rq + Rq + Rq * H * Dh + D * Dh + Dh + (H * Dh // G) * (G * R) + G * R * D + H  # attention
        if backbone and layer in cfg.kv_source_layers:  # compressor: wkv (+ wgate at ratio 2) and its norm
            n += (2 if cfg.compress_ratios[layer] > 1 else 1) * D * Dh + Dh
        if backbone and layer in cfg.index_source_layers:  # indexer: wq_b, weights_proj (+ wk, k_norm: owners)
            n += Rq * Hi * Di + D * Hi + ((Dh * Di + Di) if layer in cfg.kv_source_layers else 0)
        E = cfg.n_routed_experts if backbone else cfg.dspark_n_routed_experts
        n += E * D + E + E * 3 * D * I + 3 * D * I * cfg.n_shared_experts  # gate, routed and shared experts
        n += 2 * D + 2 * (n_mix * hc * D + n_mix + 3)  # attn_norm, ffn_norm; hc_attn, hc_ffn
        if backbone and layer in cfg.engram_layer_ids:  # the Engram projections (its table is counted apart)
            n += cfg.engram_n_hash_cols * cfg.engram_head_dim * D * (hc + 1) + 2 * hc * D
        return n

    engram = sum(engram_num_embeddings(cfg)) * cfg.engram_head_dim
    backbone = 2 * V * D + D + sum(block(i) for i in range(L))  # embed, head, final norm, blocks
    draft = 0
    if cfg.n_mtp_layers:
        r = cfg.dspark_markov_rank
        taps = len(cfg.dspark_target_layer_ids)
        draft = (taps * D * D if cfg.dspark_tap_mix == "concat_proj" else 0) + 2 * D  # main_proj, main_norm, norm
        draft += sum(block(L + i) for i in range(cfg.n_mtp_layers))
        draft += V * r + V * r  # the Markov head's embed and head
        if cfg.dspark_markov_kind == "rnn":
            draft += (2 * r + D) * 3 * r + 3 * r  # its gated cell
        draft += D + r  # confidence head
    return {"backbone": backbone, "engram": engram, "draft": draft, "total": backbone + engram + draft}


def param_parts(cfg: ModelConfig) -> dict[str, int]:
    """The size guard's view of a config (`checkpoint.check_size`): its largest pieces by what drives them — vocab
    (embedding, head, Markov head), experts, attention, hc, engram — from the numbers alone. Norms, compressors and
    indexers are left out, so the sum is a slight under-estimate of `param_counts(cfg)["total"]`."""
    D, V = cfg.dim, cfg.vocab_size
    attn = (
        D * cfg.q_lora_rank  # wq_a
        + cfg.q_lora_rank * cfg.n_heads * cfg.head_dim  # wq_b
        + D * cfg.head_dim  # wkv (one shared latent)
        + cfg.n_heads * cfg.head_dim * cfg.o_lora_rank  # wo_a (grouped)
        + cfg.o_groups * cfg.o_lora_rank * D  # wo_b
    )
    hc = 2 * (cfg.hc_mult * D) * (cfg.hc_mult**2 + 2 * cfg.hc_mult)  # the two mHC mixes of a block

    def ffn(n_routed: int) -> int:
        return (n_routed + cfg.n_shared_experts) * 3 * D * cfg.moe_inter_dim + n_routed * D

    layers, draft = cfg.n_layers, cfg.n_mtp_layers
    return {
        "vocab": 2 * V * D + (2 * V * cfg.dspark_markov_rank if draft else 0),
        "experts": layers * ffn(cfg.n_routed_experts) + draft * ffn(cfg.dspark_n_routed_experts),
        "attention": (layers + draft) * attn,
        "hc": (layers + draft) * hc,
        "engram": len(cfg.engram_layer_ids) * cfg.engram_n_hash_cols * cfg.engram_vocab_size * cfg.engram_head_dim,
    }

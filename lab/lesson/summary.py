"""`dspark-lab inspect`: a preset's model summarised without running it (parameter counts, active parameters per
token, KV bytes per token, layer roles) — on `meta` for the real sizes.
"""

from __future__ import annotations

from typing import Any

from dspark_mini import get_config
from dspark_mini.config import ModelConfig
from dspark_mini.kv_cache import kv_bytes
from dspark_mini.schedule import layer_roles


def param_counts(cfg: ModelConfig) -> dict[str, int]:
    """`model.count_params(build_model(cfg))` from the config alone: backbone, engram, draft, total — the same
    numbers without building anything (the real-size model has 63,903 modules). Mirrors the modules' shapes one
    by one; tests/test_budgets.py pins it to the built lab and flash models."""
    from dspark_mini.engram import engram_num_embeddings

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


def inspect_model(preset: str = "lab", seed: int = 0) -> dict[str, Any]:
    """Config tables, parameter counts and KV budgets, from the config alone: nothing is built (the real-size
    `flash` model would be built on the meta device; `device` names the device each would be built on)."""
    cfg = get_config(preset)
    params = param_counts(cfg)
    kb = kv_bytes(cfg)
    return {
        "preset": preset,
        "device": "meta" if preset == "flash" else "cpu",
        "params": params,
        "kv_bytes_per_token": {
            "compressed_kv": kb["compressed_kv_per_token"],
            "index_k": kb["index_k_per_token"],
            "global": kb["global_per_token"],
        },
        "kv_bytes_per_entry": {
            "window": kb["window_entry"],
            "compressed_kv": kb["compressed_entry"],
            "index_k": kb["index_entry"],
        },
        "window_bytes_per_sequence": kb["window_per_sequence"],
        "roles": [vars(x) for x in layer_roles(cfg)],
        "config": {k: v for k, v in vars(cfg).items() if k != "extra"},
        "active_params_per_token_estimate": active_params(cfg),
    }


def active_params(cfg: ModelConfig) -> int:
    """Rough decode-active parameters: top-k + shared experts per layer, attention, embed row and head."""
    expert = 3 * cfg.dim * cfg.moe_inter_dim
    per_layer = (cfg.n_activated_experts + cfg.n_shared_experts) * expert
    attn = (
        cfg.dim * cfg.q_lora_rank
        + cfg.q_lora_rank * cfg.n_heads * cfg.head_dim
        + cfg.dim * cfg.head_dim
        + cfg.n_heads * cfg.head_dim * cfg.o_lora_rank
        + cfg.o_groups * cfg.o_lora_rank * cfg.dim
    )
    return int(cfg.n_layers * (per_layer + attn) + cfg.vocab_size * cfg.dim + cfg.dim)


def fmt_params(n: int) -> str:
    return f"{n / 1e9:.2f} B" if n >= 1e8 else f"{n / 1e6:.3f} M" if n >= 1e5 else str(n)

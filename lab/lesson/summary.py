"""`dspark-lab inspect`: a preset's model summarised without running it (parameter counts, active parameters per
token, KV bytes per token, layer roles) — on `meta` for the real sizes.
"""

from __future__ import annotations

from typing import Any

from dspark_mini import get_config
from dspark_mini.config import ModelConfig
from dspark_mini.kv_cache import kv_bytes
from dspark_mini.params import param_counts
from dspark_mini.schedule import layer_roles


def inspect_model(preset: str = "lab", seed: int = 0) -> dict[str, Any]:
    """Config tables, parameter counts and KV budgets, from the config alone: nothing is built (the real-size
    `flash` and `flash-cpu` models would be built on the meta device; `device` names the device each would be built
    on)."""
    cfg = get_config(preset)
    params = param_counts(cfg)
    kb = kv_bytes(cfg)
    return {
        "preset": preset,
        "device": "cpu" if preset == "lab" else "meta",
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

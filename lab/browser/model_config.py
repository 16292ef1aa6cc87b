"""The config object lab/browser/model.js reads, from a loaded model: the ModelConfig fields and the numbers the library
derives outside the config — the Engram compress map (from the tokenizer), the hash multipliers (from numpy's random
generator), the STS confidence temperatures (from the draft file's header) — and the float constants whose last bit
JavaScript's Math.pow may round otherwise (the RoPE inverse frequencies, the indexer's and attention's scales).

    js_config(model) → a dict of plain JSON values; json.dumps of it is what a page or a node script passes to
    DSparkModel.createModel(weights, config).
"""

from __future__ import annotations

from typing import Any

from dspark_mini.checkpoint import config_to_dict
from dspark_mini.model import Transformer


def js_config(model: Transformer) -> dict[str, Any]:
    """The config of `model` for model.js (see the module docstring); every value JSON-exact (floats by repr)."""
    cfg = model.cfg
    out = config_to_dict(cfg)
    out.pop("extra", None)
    out["compress_map"] = [int(v) for v in model.compress_map.tolist()]  # [V] token id → Engram compressed id
    # {layer: [max_ngram decimal strings]}: int64 values beyond JavaScript's exact integers
    out["engram_multipliers"] = {
        str(layer): [str(int(v)) for v in getattr(model, f"engram_mult_{layer}").tolist()]
        for layer in cfg.engram_layer_ids
    }
    temps = model.mtp.confidence_temperatures if model.mtp is not None else None
    out["confidence_temperatures"] = None if temps is None else list(temps)
    window = next(b.attn for b in model.layers if b.attn.ratio == 0)
    compressed = next(b.attn for b in model.layers if b.attn.ratio > 0)
    out["rope_inv_freq"] = {  # [rope_head_dim / 2] each
        "window": window.inv_freq.tolist(),
        "compressed": compressed.inv_freq.tolist(),
    }
    out["index_weight_scale"] = cfg.index_head_dim**-0.5 * cfg.index_n_heads**-0.5
    out["attn_scale"] = cfg.head_dim**-0.5
    return out

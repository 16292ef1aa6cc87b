"""Step 3A · the CED schedule: which layer compresses, indexes, reuses or reindexes.

V4.1 is a flat stack of identical blocks; the "causal encoder / decoder" split (20 + 20 in the real
model) emerges from three config lists:
  compress_ratios[l]  the cache layer l *reads* (0 window only, 2 pooled pairs, 1 one latent per token);
  kv_source_layers    the only layers that own a compressor (and the index keys);
  index_source_layers layers that run their own indexer (top-k over compressed positions).
A consumer reads the state of the most recent source executed at or before it. Roles:
  SWA-only  ratio 0                       window only
  Full      KV source (and index source)  compresses, owns index keys, picks its own top-k
  Reindex   index source, not KV source   own indexer queries against the source's index keys,
                                          masked to the candidate blocks
  Reuse     neither                       reads the latest KV source and the latest top-k
The single ratio-1 source (real: layer 20) starts the decoder: its compressor reads the final encoder
hidden state, and every later layer attends to that one projection. Treating ratio > 0 as "this layer
compresses" (V4 semantics) would build 38 compressors instead of 4.
"""

from __future__ import annotations

from dataclasses import dataclass

from .config import ModelConfig


@dataclass(frozen=True)
class LayerRole:
    layer: int
    ratio: int  # compress ratio: which cache the layer reads
    mode: str  # "SWA-only" | "Full" | "Reindex" | "Reuse" | "Draft (SWA)"
    part: str  # "encoder" | "decoder" | "draft"
    is_kv_source: bool
    owns_index_k: bool  # only KV sources own index keys (`indexer.wk`)
    is_index_source: bool
    is_candidate_source: bool
    uses_candidates: bool  # an index source after the candidate source masks its scores to candidates
    reads_kv_of: int | None  # latest KV source at or before this layer
    reads_topk_of: int | None  # latest index source at or before this layer
    rope: str  # "θ=10000" or "θ=160000 + YaRN"
    has_engram: bool
    is_tap: bool  # a DSpark target layer: its attention input feeds the draft


def layer_roles(cfg: ModelConfig) -> tuple[LayerRole, ...]:
    """One role per layer, backbone then draft layers."""
    roles = []
    enc = cfg.n_encoder_layers
    for i, ratio in enumerate(cfg.compress_ratios):
        draft = i >= cfg.n_layers
        kv_src = not draft and i in cfg.kv_source_layers
        idx_src = not draft and i in cfg.index_source_layers
        cand_src = not draft and i == cfg.candidate_source_layer
        kv_of = max((s for s in cfg.kv_source_layers if s <= i), default=None) if ratio and not draft else None
        topk_of = max((s for s in cfg.index_source_layers if s <= i), default=None) if ratio and not draft else None
        if draft:
            mode = "Draft (SWA)"
        elif ratio == 0:
            mode = "SWA-only"
        elif kv_src:
            mode = "Full"
        elif idx_src:
            mode = "Reindex"
        else:
            mode = "Reuse"
        roles.append(
            LayerRole(
                layer=i,
                ratio=ratio,
                mode=mode,
                part="draft" if draft else ("encoder" if i < enc else "decoder"),
                is_kv_source=kv_src,
                owns_index_k=kv_src,
                is_index_source=idx_src,
                is_candidate_source=cand_src,
                uses_candidates=idx_src and 0 <= cfg.candidate_source_layer < i,
                reads_kv_of=kv_of,
                reads_topk_of=topk_of,
                rope=f"θ={cfg.compress_rope_theta:g} + YaRN" if ratio else f"θ={cfg.rope_theta:g}",
                has_engram=not draft and i in cfg.engram_layer_ids,
                is_tap=not draft and i in cfg.dspark_target_layer_ids,
            )
        )
    return tuple(roles)


def role_counts(cfg: ModelConfig) -> dict[str, int]:
    """How many of each checkpoint tensor the schedule implies (compressors, gates, indexers, wk)."""
    roles = layer_roles(cfg)
    return {
        "compressor.wkv": sum(r.is_kv_source for r in roles),
        "compressor.wgate": sum(r.is_kv_source and r.ratio > 1 for r in roles),
        "indexer.wq_b": sum(r.is_index_source for r in roles),
        "indexer.wk": sum(r.owns_index_k for r in roles),
        "engram": sum(r.has_engram for r in roles),
    }

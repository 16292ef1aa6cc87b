"""Step 4A · MLA-style attention over [window ‖ compressed], with an attention sink and grouped O-LoRA.

  qr = q_norm(wq_a(x));  q = RoPE(wq_b(qr))                         [B, S, H, Dh]
  kv = FP8QDQ(RoPE(kv_norm(wkv(x))))                                [B, S, Dh]  one latent: K = V (MQA)
  o  = Σ_t softmax_t(q·k_t/√Dh ; sink_h) · k_t  over the window and the selected compressed entries
  o  = RoPE⁻¹(o) at the query position;  y = wo_b(concat_g(wo_a[g] · o_g))   (block-diagonal wo_a)
The sink is one learned logit per head that joins the softmax denominator (it can soak up attention).
Layers with ratio > 0 also read the latest KV source's compressed latents, at the positions the
latest index source picked; KV sources compress here (3B) and index sources pick here (3C).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
from torch import nn

from .compressor import Compressor
from .config import ModelConfig
from .indexer import Indexer, visible_counts, window_mask
from .linear import Linear, cast
from .norm import RMSNorm
from .quant import fake_quant, fp4_qdq, fp8_qdq
from .rope import RopeTable, apply_rope, rope_angles, rope_inv_freq, rope_table


@dataclass
class SharedAttention:
    """Hand-offs between the layers of one forward (the reference keeps these in a process global).

    Sources write, later layers read: the latest KV source's latents and index keys, the latest
    index source's picks, the candidate source's pool.
    """

    compress_kv: torch.Tensor | None = None  # [B, T, Dh] committed + new latents of the latest KV source
    index_k: torch.Tensor | None = None  # [B, T, Di]
    topk_idxs: torch.Tensor | None = None  # [B, S, k] compressed positions per query, −1 = none
    candidates: torch.Tensor | None = None  # [B, S, T] bool
    owner: dict = field(default_factory=dict)  # slot → layer that wrote it (for the 3B/3C views)
    memo: dict = field(default_factory=dict)  # what every layer would compute alike: RoPE tables, masks

    def once(self, key: tuple, make):
        """make() the first time `key` is asked for in this forward, the same value after that."""
        if key not in self.memo:
            self.memo[key] = make()
        return self.memo[key]

    def forget(self, kind: str) -> None:
        """Drop the memo entries of one kind (their inputs just changed)."""
        for key in [k for k in self.memo if k[0] == kind]:
            del self.memo[key]


def sparse_attention(q: torch.Tensor, kv: torch.Tensor, mask: torch.Tensor, sink: torch.Tensor, scale: float):
    """q [B, S, H, Dh], kv [B, T, Dh], mask [B, S, T] → o [B, S, H, Dh], probs [B, S, H, T], sink share [B, S, H].

    scores[s, h, t] = q[s, h] · kv[t] · scale (−∞ where masked);  p = softmax over [scores ‖ sink_h];
    o[s, h] = Σ_t p[s, h, t] · kv[t]. Both sums are one batched matmul over the S·H query rows of a sequence."""
    hp = torch.float64 if q.dtype == torch.float64 else torch.float32
    B, S, H, Dh = q.shape
    T = kv.size(1)
    kv = cast(kv, hp)
    scores = torch.bmm(cast(q, hp).reshape(B, S * H, Dh), kv.mT).view(B, S, H, T) * scale  # [B, S, H, T]
    scores = torch.where(mask.unsqueeze(2), scores, float("-inf"))
    sink_col = cast(sink, hp).view(1, 1, H, 1).expand(B, S, H, 1)  # unscaled sink logit
    probs = torch.cat([scores, sink_col], dim=-1).softmax(dim=-1)  # [B, S, H, T + 1]
    o = torch.bmm(probs[..., :T].reshape(B, S * H, T), kv).view(B, S, H, Dh)
    return cast(o, q.dtype), probs[..., :T], probs[..., T]


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig, layer_id: int):
        super().__init__()
        dt, hp = cfg.torch_dtype, hp_dtype(cfg)
        self.layer_id, self.cfg = layer_id, cfg
        self.n_heads, self.head_dim, self.rope_dim = cfg.n_heads, cfg.head_dim, cfg.rope_head_dim
        self.groups, self.o_rank, self.window = cfg.o_groups, cfg.o_lora_rank, cfg.window_size
        self.ratio = cfg.compress_ratios[layer_id]
        backbone = layer_id < cfg.n_layers
        self.is_draft = not backbone  # DSpark layer: ring of target latents, bidirectional block
        self.is_kv_source = backbone and layer_id in cfg.kv_source_layers
        self.is_index_source = backbone and layer_id in cfg.index_source_layers
        self.is_candidate_source = backbone and layer_id == cfg.candidate_source_layer
        self.uses_candidates = self.is_index_source and 0 <= cfg.candidate_source_layer < layer_id

        self.wq_a = Linear(cfg.dim, cfg.q_lora_rank, bias=False, dtype=dt)  # [Rq, D]
        self.q_norm = RMSNorm(cfg.q_lora_rank, cfg.norm_eps, dt)
        self.wq_b = Linear(cfg.q_lora_rank, cfg.n_heads * cfg.head_dim, bias=False, dtype=dt)  # [H·Dh, Rq]
        self.wkv = Linear(cfg.dim, cfg.head_dim, bias=False, dtype=dt)  # [Dh, D]
        self.kv_norm = RMSNorm(cfg.head_dim, cfg.norm_eps, dt)
        per_group = cfg.n_heads * cfg.head_dim // cfg.o_groups
        self.wo_a = Linear(per_group, cfg.o_groups * cfg.o_lora_rank, bias=False, dtype=dt)  # [G·R, H·Dh/G]
        self.wo_b = Linear(cfg.o_groups * cfg.o_lora_rank, cfg.dim, bias=False, dtype=dt)  # [D, G·R]
        self.attn_sink = nn.Parameter(torch.zeros(cfg.n_heads, dtype=hp))  # [H]
        self.compressor = (
            Compressor(cfg.dim, cfg.head_dim, self.ratio, cfg.norm_eps, dt, hp) if self.is_kv_source else None
        )
        self.indexer = (
            Indexer(
                cfg.dim,
                cfg.q_lora_rank,
                cfg.head_dim,
                cfg.index_n_heads,
                cfg.index_head_dim,
                cfg.index_topk,
                self.is_kv_source,
                cfg.norm_eps,
                cfg.kv_quant,
                dt,
            )
            if self.is_index_source
            else None
        )
        # ratio-0 layers: θ = 10000, no YaRN; ratio > 0: compress θ with YaRN for *all* their RoPE
        if self.ratio:
            inv = rope_inv_freq(
                cfg.rope_head_dim,
                cfg.compress_rope_theta,
                True,
                cfg.rope_factor,
                cfg.original_seq_len,
                cfg.beta_fast,
                cfg.beta_slow,
            )
        else:
            inv = rope_inv_freq(cfg.rope_head_dim, cfg.rope_theta, False)
        self.register_buffer("inv_freq", inv, persistent=False)  # [r/2]

    def forward(
        self, x: torch.Tensor, positions: torch.Tensor, shared: SharedAttention, cache, pending, rec=None
    ) -> torch.Tensor:
        """x [B, S, D] (normed attention input), positions [S] absolute → [B, S, D]."""
        B, S, _ = x.shape
        # one RoPE table per forward for all layers of this kind (ratio 0: θ = 10000; ratio > 0: compress θ + YaRN)
        rope = shared.once(("rope", self.ratio > 0), lambda: rope_table(rope_angles(positions, self.inv_freq)))
        qr = self.q_norm(self.wq_a(x))  # [B, S, Rq]
        q = apply_rope(self.wq_b(qr).unflatten(-1, (self.n_heads, self.head_dim)), rope)  # [B, S, H, Dh]
        kv_raw, kv = self.latent(x, positions, rope)  # [B, S, Dh] each
        if pending is not None and not self.is_draft:  # a draft block's own rows are never stored
            pending.window[self.layer_id] = kv

        # window keys: committed ring slots ‖ this chunk's own rows; the mask is the same for every layer
        ring = cache.windows[self.layer_id] if cache is not None else None
        if ring is not None:
            keys = torch.cat([ring.kv, kv], dim=1)  # [B, W + S, Dh]
        else:
            keys = kv
        key_pos, mask = shared.once(
            ("window", self.is_draft, id(ring.pos) if ring is not None else None),
            lambda: self._window(ring, positions, B),
        )  # [Tw], [B, S, Tw]
        n_window = keys.size(1)

        if self.ratio:
            if self.is_kv_source:
                self._compress(x, cache, pending, shared, rec)
            visible = visible_counts(positions, self.ratio)  # [S]
            if self.is_index_source:
                self._pick(x, qr, rope, visible, shared, rec)
            comp = shared.compress_kv  # [B, T, Dh]
            picks = shared.topk_idxs  # [B, S, k]
            keys = torch.cat([keys, comp], dim=1)
            # the same for every layer until a source publishes new latents or picks (they drop it from the memo)
            mask = shared.once(("picked", id(mask)), lambda: self._picked(mask, picks, comp.size(1)))

        o, probs, sink_share = sparse_attention(q, keys, mask, self.attn_sink, self.head_dim**-0.5)
        o = apply_rope(o, rope, inverse=True)
        # block-diagonal wo_a: group g maps its H·Dh/G channels to its own R ranks (a batched matmul over groups)
        og = o.reshape(B * S, self.groups, -1).transpose(0, 1)  # [G, B·S, H·Dh/G]
        wo_a = self.wo_a.weight.view(self.groups, self.o_rank, -1)  # [G, R, H·Dh/G]
        mid = torch.bmm(og, wo_a.mT).transpose(0, 1).reshape(B, S, -1)  # [B, S, G·R]
        y = self.wo_b(mid)  # [B, S, D]
        if rec is not None:
            rec("4A", "probs", probs)
            rec("4A", "n_window_keys", torch.tensor(n_window))
            rec("4A", "window_share", probs[..., :n_window].sum(-1))
            rec("4A", "compressed_share", probs[..., n_window:].sum(-1))
            rec("4A", "sink_share", sink_share)
            rec("4A", "window_key_pos", key_pos)
            rec("6A", "window_kv_raw", kv_raw)
            rec("6A", "window_kv", kv)
        return y

    def _window(self, ring, positions: torch.Tensor, B: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Positions of the window keys [Tw] (ring slots, then this chunk) and the mask [B, S, Tw]."""
        key_pos = torch.cat([ring.pos, positions]) if ring is not None else positions
        if self.is_draft:  # every filled ring slot and every row of the block: bidirectional inside it
            return key_pos, (key_pos >= 0).expand(B, positions.numel(), -1)
        return key_pos, window_mask(positions, key_pos, self.window).expand(B, -1, -1)

    @staticmethod
    def _picked(mask: torch.Tensor, picks: torch.Tensor, T: int) -> torch.Tensor:
        """The window mask [B, S, Tw] extended by the picked compressed positions (picks [B, S, k], −1 = none)."""
        B, S, _ = mask.shape
        comp_mask = torch.zeros(B, S, T + 1, dtype=torch.bool, device=mask.device)
        comp_mask.scatter_(-1, torch.where(picks >= 0, picks, T), True)  # −1 → the spare column T
        return torch.cat([mask, comp_mask[..., :-1]], dim=-1)  # [B, S, Tw + T]

    def latent(
        self, x: torch.Tensor, positions: torch.Tensor, rope: RopeTable | torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The shared K = V latent of each row: RoPE(kv_norm(wkv(x))), then FP8 QDQ.  → raw, stored [B, S, Dh]"""
        rope = rope_table(rope_angles(positions, self.inv_freq)) if rope is None else rope
        kv_raw = apply_rope(self.kv_norm(self.wkv(x)), rope)
        return kv_raw, (fake_quant(kv_raw, fp8_qdq, 32) if self.cfg.kv_quant else kv_raw)

    def _compress(self, x, cache, pending, shared: SharedAttention, rec) -> None:
        """3B: new latents of this chunk → index keys (pre-RoPE) → RoPE at j·ratio → FP4 → shared."""
        r, cfg = self.ratio, self.cfg
        carry = cache.carry(self.layer_id) if cache is not None else None
        latent, tok_kv, tok_score, gate = self.compressor(x, carry)  # [B, n, Dh]
        start = pending.start if pending is not None else 0
        first_group = start // r
        gpos = (first_group + torch.arange(latent.size(1), device=x.device)) * r  # [n] group → first token
        if latent.size(1):
            gang = rope_table(rope_angles(gpos, self.inv_freq))
            new_ik = self.indexer.index_keys(latent, gang)  # [B, n, Di]
            rot = apply_rope(latent, gang)
            new_kv = fake_quant(rot, fp4_qdq, 16, "e4m3") if cfg.kv_quant else rot
        else:  # no group completed in this chunk (a ratio-2 source, every other decode step)
            rot = new_kv = latent  # [B, 0, Dh]
            new_ik = latent.new_zeros(latent.size(0), 0, cfg.index_head_dim)  # [B, 0, Di]
        if cache is not None:
            store = cache.sources[self.layer_id]
            comp = torch.cat([store.kv[:, : store.count], new_kv], dim=1)
            ik = torch.cat([store.index_k[:, : store.count], new_ik], dim=1)
        else:
            comp, ik = new_kv, new_ik
        shared.compress_kv, shared.index_k = comp, ik
        shared.forget("picked")
        shared.owner["compress_kv"] = shared.owner["index_k"] = self.layer_id
        if pending is not None:
            pending.latents[self.layer_id], pending.index_k[self.layer_id] = new_kv, new_ik
            if r > 1:
                pending.tokens[self.layer_id] = (tok_kv, tok_score)
        if rec is not None:
            rec("3B", "latent_pre_rope", latent)
            rec("3B", "group_positions", gpos)
            rec("3B", "n_compressed", torch.tensor(comp.size(1)))
            if gate is not None:
                rec("3B", "gate", gate)
            rec("6A", "compressed_raw", rot)
            rec("6A", "compressed_kv", new_kv)
            rec("6A", "index_k", new_ik)

    def _pick(self, x, qr, rope, visible, shared: SharedAttention, rec) -> None:
        """3C: score the compressed entries and publish this layer's top-k (and candidates)."""
        cfg = self.cfg
        cand_filter = (cfg.candidate_topk_blocks, cfg.candidate_block_size) if self.is_candidate_source else None
        cands = shared.candidates if self.uses_candidates else None
        idxs, scores, cand_out = self.indexer(x, qr, rope, visible, shared.index_k, cands, cand_filter)
        shared.topk_idxs = idxs
        shared.forget("picked")
        shared.owner["topk_idxs"] = self.layer_id
        if cand_out is not None:
            shared.candidates = cand_out
            shared.owner["candidates"] = self.layer_id
        if rec is not None:
            rec("3C", "scores", scores)
            rec("3C", "topk_idxs", idxs)
            rec("3C", "visible", visible)
            if cand_out is not None:
                rec("3C", "candidates", cand_out)
            if cands is not None:
                rec("3C", "candidates_used", cands)


def hp_dtype(cfg: ModelConfig) -> torch.dtype:
    """High precision for mHC, router, sinks and the head: fp32, or fp64 when the model runs in fp64."""
    return torch.float64 if cfg.torch_dtype == torch.float64 else torch.float32

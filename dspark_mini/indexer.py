"""Step 3C · lightning indexer, two-level candidate filter, and the sliding-window positions.

Index keys (KV sources only): k = RoPE(k_norm(wk(c))) from the *pre-RoPE* latent c, FP4-QDQ (E8M0/32).
Queries from the attention's q-LoRA latent: q = RoPE(wq_b(qr)) [Hi, Di], FP4-QDQ.
Score  I[s, t] = Σ_h w[s, h] · ReLU(q[s, h] · k[t]),  w = weights_proj(x) · Di^−½ · Hi^−½;
a query at position p sees compressed entries t < (p + 1) // ratio; top-k = min(index_topk, visible).
Two levels: the candidate source scores blocks of `candidate_block_size` positions by their max, pins
the block holding the newest visible entry (it is only partly filled), keeps `candidate_topk_blocks`
blocks; later index sources (Reindex) mask their own scores to that pool before their top-k.
Reindex layers own no `wk`: they score against the KV source's index keys.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .linear import Linear
from .norm import RMSNorm
from .quant import fake_quant, fp4_qdq
from .rope import apply_rope


def stable_topk(scores: torch.Tensor, k: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Top-k along the last dim with ties broken by position (older first), so the pick never depends
    on how many invisible (−inf) entries follow — chunked and one-shot forwards choose alike."""
    values, indices = torch.sort(scores, dim=-1, descending=True, stable=True)
    return values[..., :k], indices[..., :k]


def visible_counts(positions: torch.Tensor, ratio: int) -> torch.Tensor:
    """Compressed entries a query at each position may see: a group is visible once passed.  # [S]"""
    return (positions + 1) // ratio


def window_mask(query_pos: torch.Tensor, key_pos: torch.Tensor, window: int) -> torch.Tensor:
    """Causal sliding window: key position in [q − W + 1, q]; key_pos −1 = empty slot.  # [S, T]"""
    q, k = query_pos[:, None], key_pos[None, :]
    return (k >= 0) & (k <= q) & (k > q - window)


def select_candidate_blocks(
    scores: torch.Tensor, visible: torch.Tensor, topk_blocks: int, block_size: int
) -> torch.Tensor:
    """Level one: a bool mask [B, S, T] of the kept blocks' positions.

    scores: [B, S, T] with invisible entries at −inf; visible: [S] entries each query can see.
    """
    T = scores.size(-1)
    padded = F.pad(scores, (0, -T % block_size), value=float("-inf"))
    block_scores = padded.unflatten(-1, (-1, block_size)).amax(dim=-1)  # [B, S, nb]
    nb = block_scores.size(-1)
    newest = (visible - 1).div(block_size, rounding_mode="floor")  # [S]; −1 when nothing is visible
    pin = torch.arange(nb, device=scores.device)[None, :] == newest[:, None]  # [S, nb]
    block_scores = block_scores.masked_fill(pin, float("inf"))
    values, indices = stable_topk(block_scores, min(topk_blocks, nb))
    keep = torch.zeros_like(block_scores, dtype=torch.bool).scatter(-1, indices, values > float("-inf"))
    return keep.repeat_interleave(block_size, dim=-1)[..., :T]


class Indexer(nn.Module):
    def __init__(
        self,
        dim: int,
        q_lora_rank: int,
        head_dim: int,
        n_heads: int,
        index_head_dim: int,
        topk: int,
        owns_k: bool,
        norm_eps: float,
        kv_quant: bool,
        dtype: torch.dtype,
    ):
        super().__init__()
        self.n_heads, self.head_dim, self.topk, self.kv_quant = n_heads, index_head_dim, topk, kv_quant
        self.wq_b = Linear(q_lora_rank, n_heads * index_head_dim, bias=False, dtype=dtype)  # [Hi·Di, Rq]
        self.weights_proj = Linear(dim, n_heads, bias=False, dtype=dtype)  # [Hi, D]
        self.owns_k = owns_k
        if owns_k:
            self.wk = Linear(head_dim, index_head_dim, bias=False, dtype=dtype)  # [Di, Dh]
            self.k_norm = RMSNorm(index_head_dim, norm_eps, dtype)

    def _qdq(self, t: torch.Tensor) -> torch.Tensor:
        return fake_quant(t, fp4_qdq, 32, "e8m0") if self.kv_quant else t

    def index_keys(self, latent: torch.Tensor, angles: torch.Tensor) -> torch.Tensor:
        """Keys for new latents: latent [B, n, Dh] pre-RoPE, angles [n, r/2] at j·ratio.  → [B, n, Di]"""
        k = apply_rope(self.k_norm(self.wk(latent)), angles)
        return self._qdq(k)

    def forward(
        self,
        x: torch.Tensor,
        qr: torch.Tensor,
        angles: torch.Tensor,
        visible: torch.Tensor,
        index_k: torch.Tensor,
        candidates: torch.Tensor | None = None,
        candidate_filter: tuple[int, int] | None = None,
        w: torch.Tensor | None = None,
        seen: torch.Tensor | None = None,
    ):
        """Pick compressed positions for each query.

        x [B, S, D]; qr [B, S, Rq]; angles [S, r/2]; visible [S]; index_k [B, T, Di];
        candidates [B, S, T] bool (mask scores to them: a Reindex layer);
        candidate_filter (topk_blocks, block_size) when this layer is the candidate source;
        w: weights_proj(x) [B, S, Hi] and seen: the visibility mask [S, T] (t < visible[s]) when the caller
        already has them (the attention's stacked input projection, a mask shared by the layers), else made here.
        Returns topk_idxs [B, S, k] (−1 = nothing), scores [B, S, T], candidates_out [B, S, T] or None.
        """
        B, S, _ = x.shape
        T = index_k.size(1)
        if T == 0:  # nothing compressed yet: no picks, an empty pool
            empty = torch.zeros(B, S, 0, device=x.device)
            cand = empty.bool() if candidate_filter is not None else None
            return empty.long(), empty.to(x.dtype), cand
        q = F.linear(qr, self.wq_b.weight).unflatten(-1, (self.n_heads, self.head_dim))  # [B, S, Hi, Di]
        q = self._qdq(apply_rope(q, angles))
        w = F.linear(x, self.weights_proj.weight) if w is None else w
        w = w * (self.head_dim**-0.5 * self.n_heads**-0.5)  # [B, S, Hi]
        # q[s, h] · k[t] for all query rows of a sequence at once: one batched matmul
        scores = torch.bmm(q.reshape(B, S * self.n_heads, -1), index_k.mT)  # [B, S·Hi, T]
        scores = scores.view(B, S, self.n_heads, T).relu()  # [B, S, Hi, T]
        scores = (scores * w.unsqueeze(-1)).sum(dim=2)  # [B, S, T]
        if seen is None:
            seen = torch.arange(T, device=x.device) < visible[:, None]  # [S, T]
        scores = torch.where(seen, scores, float("-inf"))
        cand_out = None
        if candidate_filter is not None:
            cand_out = select_candidate_blocks(scores, visible, *candidate_filter)
        if candidates is not None:
            scores = torch.where(candidates, scores, float("-inf"))
        k = min(self.topk, T)
        values, indices = stable_topk(scores, k)
        idxs = torch.where(values > float("-inf"), indices, -1)
        idxs = idxs.sort(dim=-1).values  # position order; −1 first
        return idxs, scores, cand_out

"""Step 6B · a ragged batch: R requests, each at its own cache length, in ONE target forward (a packed layout).

Continuous batching puts requests at different positions into the same step: request r brings n_r rows (its
verify rows [anchor, x_1..x_ℓr], or one decode row) at positions L_r … L_r + n_r − 1 of its own `KVCache`
(batch 1). Padding them to one [R, max n] batch would also need per-row positions, window masks and compressor
state in every cache. The packed layout instead lays all rows end to end, [1, T] with T = Σ n_r, and splits
the forward by what each part needs:

  token-wise (the bulk of the FLOPs): embedding, Engram (row ids come from each request's own n-gram history),
      the mHC mixes, the norms, the MoE — one op over all T rows, so a bigger batch amortises the per-op cost;
  per request (segments): attention with its window ring, compressor and indexer — each segment reads and
      would write only its own cache, at its own positions (this is what vLLM / SGLang do with varlen kernels;
      here a loop over segments).

Nothing is committed: each request gets its own `PendingWrites`, and the caller commits each request's
verdict (`cache.commit(pending_r, n_r_kept)`), so every cache stays what plain decoding would leave.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .attention import SharedAttention
from .kv_cache import KVCache, PendingWrites


@dataclass
class RaggedBatch:
    """The per-request side of one packed forward: where each segment sits in [1, T] and what it owns."""

    sizes: list[int]  # n_r rows of each request
    caches: list[KVCache]  # batch-1 caches, one per request
    positions: list[torch.Tensor]  # [n_r] absolute positions of each segment
    pendings: list[PendingWrites]  # what each segment would write
    shared: list[SharedAttention]  # per-request hand-offs between layers (latents, picks, masks)

    @classmethod
    def build(cls, rows: list[torch.Tensor], caches: list[KVCache]) -> RaggedBatch:
        """rows: R tensors [1, n_r] of token ids; caches: R batch-1 caches (distinct objects)."""
        if len(rows) != len(caches) or not rows:
            raise ValueError(f"ragged batch: {len(rows)} row groups for {len(caches)} caches: allowed R ≥ 1 of each")
        if len({id(c) for c in caches}) != len(caches):
            raise ValueError("ragged batch: a cache appears twice: allowed one cache per request")
        sizes, positions, pendings = [], [], []
        for r, (t, c) in enumerate(zip(rows, caches, strict=True)):
            if t.dim() != 2 or t.size(0) != 1 or c.batch != 1:
                raise ValueError(
                    f"ragged batch: request {r} has rows {tuple(t.shape)} on a cache of batch {c.batch}: "
                    "allowed rows [1, n ≥ 1] on a batch-1 cache"
                )
            n = t.size(1)
            sizes.append(n)
            positions.append(torch.arange(c.length, c.length + n, device=t.device))  # [n_r]
            pendings.append(PendingWrites(c.length, n))
        return cls(sizes, list(caches), positions, pendings, [SharedAttention() for _ in rows])

    def split(self, t: torch.Tensor, dim: int = 1) -> list[torch.Tensor]:
        """[1, T, …] → R tensors [1, n_r, …] (views)."""
        return list(torch.split(t, self.sizes, dim=dim))

    def attend(self, attn, u: torch.Tensor, rec=None) -> torch.Tensor:
        """Attention per segment on its own cache.  u [1, T, D] → [1, T, D]."""
        outs = [
            attn(u_r, pos, sh, cache, pend, rec)
            for u_r, pos, sh, cache, pend in zip(
                self.split(u), self.positions, self.shared, self.caches, self.pendings, strict=True
            )
        ]
        return torch.cat(outs, dim=1)

"""Step 3B · CSA2 compressor: one shared latent per `ratio` tokens, built only at KV sources.

Ratio 2 (encoder sources): k_t = wkv(x_t), s_t = wgate(x_t); the pair (2j, 2j+1) pools per channel with
a softmax gate, c_j = RMSNorm(Σ_t softmax_t(s)_t ⊙ k_t). A trailing odd token waits in a carry (the
reference's kv_state / score_state) until its partner arrives. Computed in high precision.
Ratio 1 (the decoder's single source): c_t = RMSNorm(wkv(x_t)) — no gate, no carry.
The latent stands for its group's first token (RoPE position j·ratio, applied later by attention, after
the indexer has read the pre-RoPE latent). Unlike V4 there is no positional score bias and no overlap.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .linear import Linear, cast
from .norm import RMSNorm


class Compressor(nn.Module):
    def __init__(self, dim: int, head_dim: int, ratio: int, norm_eps: float, dtype: torch.dtype, hp_dtype: torch.dtype):
        super().__init__()
        if ratio not in (1, 2):
            raise ValueError(f"compress ratio = {ratio} is invalid: allowed 1 or 2")
        self.ratio = ratio
        # ratio 2 pools in high precision (fp32 in the reference); ratio 1 stays in the model dtype
        wdtype = hp_dtype if ratio > 1 else dtype
        self.wkv = Linear(dim, head_dim, bias=False, dtype=wdtype)  # [Dh, D]
        if ratio > 1:
            self.wgate = Linear(dim, head_dim, bias=False, dtype=wdtype)  # [Dh, D]
        self.norm = RMSNorm(head_dim, norm_eps, dtype)

    def forward(
        self,
        x: torch.Tensor,
        carry: tuple[torch.Tensor, torch.Tensor] | None = None,
        kv: torch.Tensor | None = None,
        score: torch.Tensor | None = None,
    ):
        """x: [B, S, D] (the attention input), carry: the open group's (kv, score) [B, c, Dh].
        kv, score: wkv(x), wgate(x) [B, S, Dh] when the caller already computed them (the attention's stacked
        input projection), else computed here.

        Returns (latents [B, n_new, Dh] pre-RoPE, per-token kv [B, S, Dh], per-token score, gate weights
        [B, n_new, ratio, Dh] or None). n_new = groups completed by this chunk.
        """
        if self.ratio == 1:
            kv = F.linear(x, self.wkv.weight) if kv is None else kv  # [B, S, Dh]
            return self.norm(kv), kv, None, None
        hp = self.wkv.weight.dtype
        if kv is None:
            kv, score = F.linear(cast(x, hp), self.wkv.weight), F.linear(cast(x, hp), self.wgate.weight)  # [B, S, Dh]
        if carry is not None and carry[0].size(1):  # an open group waits (an empty carry adds nothing)
            kv_all, sc_all = torch.cat([carry[0], kv], dim=1), torch.cat([carry[1], score], dim=1)
        else:
            kv_all, sc_all = kv, score
        n_new = kv_all.size(1) // self.ratio
        if n_new == 0:  # the open group is still open (a ratio-2 source at every other decode step): no latent
            empty = kv_all[:, :0]  # [B, 0, Dh]
            return cast(empty, x.dtype), kv, score, empty.unsqueeze(2).expand(-1, -1, self.ratio, -1)  # [B, 0, r, Dh]
        groups_kv = kv_all[:, : n_new * self.ratio].unflatten(1, (n_new, self.ratio))  # [B, n, r, Dh]
        gate = sc_all[:, : n_new * self.ratio].unflatten(1, (n_new, self.ratio)).softmax(dim=2)  # [B, n, r, Dh]
        latent = (groups_kv * gate).sum(dim=2)  # [B, n, Dh]
        return self.norm(cast(latent, x.dtype)), kv, score, gate

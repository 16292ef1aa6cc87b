"""Step 2A · mHC: manifold-constrained hyper-connections, single-pass (V4.1).

The residual stream is hc_mult = 4 copies X [B, S, 4, D]. Per sublayer, one projection of the
RMS-normalized flat stream gives 24 = (2 + 4)·4 mixes, split into
  pre_j  = σ(m_j·s₀ + b_j) + ε            (4 weights that collapse the copies into one input)
  post_j = 2·σ(m_{4+j}·s₁ + b_{4+j})      (4 gains, range (0, 2), that spread the output back)
  comb   = Sinkhorn₂₀(softmax_row(m_{8:24}·s₂ + b) + ε)   (4×4, ≈ doubly stochastic, from-copy i → to-copy j)
Single pass: a sublayer's `pre` collapses the input of the *next* sublayer; `post` and `comb` are used
by the same sublayer. V4 applied `pre` in the same sublayer; V4.1 has no learned head mix either.
"""

from __future__ import annotations

import torch
from torch import nn


def sinkhorn_comb(logits: torch.Tensor, iters: int, eps: float, history: list | None = None) -> torch.Tensor:
    """Row softmax (+eps), then alternate column and row normalizations; `iters` column passes in all.

    logits: [..., hc, hc]. If `history` is a list, the matrix after each iteration is appended to it.
    """
    comb = logits.softmax(dim=-1) + eps
    comb = comb / (comb.sum(dim=-2, keepdim=True) + eps)  # iteration 1 ends with a column pass
    if history is not None:
        history.append(comb.detach().clone())
    for _ in range(iters - 1):
        comb = comb / (comb.sum(dim=-1, keepdim=True) + eps)  # rows
        comb = comb / (comb.sum(dim=-2, keepdim=True) + eps)  # columns
        if history is not None:
            history.append(comb.detach().clone())
    return comb


class HyperConnection(nn.Module):
    """The coefficient predictor of one sublayer (`hc_fn`, `hc_base`, `hc_scale` as in the checkpoint)."""

    def __init__(
        self,
        dim: int,
        hc_mult: int,
        sinkhorn_iters: int,
        hc_eps: float,
        norm_eps: float,
        dtype: torch.dtype = torch.float32,
    ):
        super().__init__()
        self.hc_mult, self.iters, self.hc_eps, self.norm_eps = hc_mult, sinkhorn_iters, hc_eps, norm_eps
        n_mix = (2 + hc_mult) * hc_mult
        self.fn = nn.Parameter(torch.empty(n_mix, hc_mult * dim, dtype=dtype))  # [24, 4·D]
        self.base = nn.Parameter(torch.empty(n_mix, dtype=dtype))  # [24]
        self.scale = nn.Parameter(torch.empty(3, dtype=dtype))  # [3]

    def forward(self, x: torch.Tensor, history: list | None = None):
        """x: [B, S, hc, D] → pre [B, S, hc], post [B, S, hc], comb [B, S, hc, hc]."""
        hc = self.hc_mult
        flat = x.flatten(2).to(self.fn.dtype)  # [B, S, hc·D]
        rms = torch.rsqrt(flat.square().mean(-1, keepdim=True) + self.norm_eps)
        mixes = (flat @ self.fn.T) * rms  # [B, S, 24]
        s, b = self.scale, self.base
        pre = torch.sigmoid(mixes[..., :hc] * s[0] + b[:hc]) + self.hc_eps  # [B, S, hc]
        post = 2 * torch.sigmoid(mixes[..., hc : 2 * hc] * s[1] + b[hc : 2 * hc])  # [B, S, hc]
        comb_logits = (mixes[..., 2 * hc :] * s[2] + b[2 * hc :]).unflatten(-1, (hc, hc))  # [B, S, hc, hc]
        comb = sinkhorn_comb(comb_logits, self.iters, self.hc_eps, history)
        return pre, post, comb


def hc_pre(x: torch.Tensor, pre: torch.Tensor) -> torch.Tensor:
    """Collapse the copies: Σ_i pre_i · X_i.  [B, S, hc, D] × [B, S, hc] → [B, S, D]"""
    y = (pre.unsqueeze(-1) * x.to(pre.dtype)).sum(dim=2)
    return y.to(x.dtype)


def hc_post(y: torch.Tensor, residual: torch.Tensor, post: torch.Tensor, comb: torch.Tensor) -> torch.Tensor:
    """Expand: new copy j = post_j · y + Σ_i comb[i, j] · R_i.  → [B, S, hc, D]"""
    hp = post.dtype
    out = post.unsqueeze(-1) * y.to(hp).unsqueeze(-2) + torch.einsum("bsij,bsid->bsjd", comb, residual.to(hp))
    return out.to(y.dtype)


def identity_pre_mix(batch: int, seqlen: int, hc_mult: int, dtype: torch.dtype, device) -> torch.Tensor:
    """The first block's input mix: one-hot on copy 0, so layer 0 reads the embedding itself.  # [B, S, hc]"""
    pre = torch.zeros(batch, seqlen, hc_mult, dtype=dtype, device=device)
    pre[..., 0] = 1.0
    return pre

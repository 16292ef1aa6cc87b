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
import torch.nn.functional as F
from torch import nn

from .linear import cast


def sinkhorn_comb(logits: torch.Tensor, iters: int, eps: float, history: list | None = None) -> torch.Tensor:
    """Row softmax (+eps), then alternate column and row normalizations; `iters` column passes in all.

        comb = softmax_row(logits) + eps
        comb = comb / (Σ_i comb[i, :] + eps)                    iteration 1 ends with a column pass
        iters − 1 times:  comb = comb / (Σ_j comb[:, j] + eps)  (rows),  comb = comb / (Σ_i comb[i, :] + eps)

    Each "sum + eps" is one batched matmul with a ones vector and eps as the added term (baddbmm:
    eps + comb·1 for the rows, eps + 1ᵀ·comb for the columns): two ops per normalization instead of three.
    Without autograd the 2·iters passes write into two small buffers and divide in place (`out=`) instead of
    allocating two new tensors each; with autograd every pass makes new tensors, as the backward needs them.
    logits: [..., hc, hc]. If `history` is a list, the matrix after each iteration is appended to it.
    """
    shape, hc = logits.shape, logits.size(-1)
    comb = (logits.softmax(dim=-1) + eps).reshape(-1, hc, hc)  # [N, hc, hc]
    N = comb.size(0)
    eps_t, ones_col, ones_row = _sinkhorn_constants(N, hc, eps, comb.dtype, comb.device)
    in_place = not (torch.is_grad_enabled() and comb.requires_grad)
    row_sums = comb.new_empty(N, hc, 1) if in_place else None  # [N, hc, 1]
    col_sums = comb.new_empty(N, 1, hc) if in_place else None  # [N, 1, hc]
    out = comb if in_place else None

    def rows(c: torch.Tensor) -> torch.Tensor:  # c / (Σ_j c[:, j] + eps)
        return torch.div(c, torch.baddbmm(eps_t, c, ones_col, out=row_sums), out=out)

    def cols(c: torch.Tensor) -> torch.Tensor:  # c / (Σ_i c[i, :] + eps)
        return torch.div(c, torch.baddbmm(eps_t, ones_row, c, out=col_sums), out=out)

    comb = cols(comb)
    if history is not None:
        history.append(comb.view(shape).detach().clone())
    for _ in range(iters - 1):
        comb = cols(rows(comb))
        if history is not None:
            history.append(comb.view(shape).detach().clone())
    return comb.view(shape)


_CONSTANTS: dict = {}


def _sinkhorn_constants(n: int, hc: int, eps: float, dtype: torch.dtype, device) -> tuple[torch.Tensor, ...]:
    """eps [1, 1, 1], ones [n, hc, 1] and ones [n, 1, hc] for the batched sums, made once per shape."""
    key = (n, hc, eps, dtype, str(device))
    if key not in _CONSTANTS:
        with torch.inference_mode(False):  # ordinary tensors: usable by autograd later
            ones = torch.ones(1, hc, 1, dtype=dtype, device=device).expand(n, hc, 1)
            _CONSTANTS[key] = (torch.full((1, 1, 1), eps, dtype=dtype, device=device), ones, ones.mT)
    return _CONSTANTS[key]


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
        group = torch.tensor([0] * hc_mult + [1] * hc_mult + [2] * hc_mult * hc_mult)
        self.register_buffer("scale_of_mix", group, persistent=False)  # [24] which scale each mix uses

    def forward(self, x: torch.Tensor, history: list | None = None):
        """x: [B, S, hc, D] → pre [B, S, hc], post [B, S, hc], comb [B, S, hc, hc]."""
        hc = self.hc_mult
        flat = cast(x.flatten(2), self.fn.dtype)  # [B, S, hc·D]
        rms = torch.rsqrt(flat.square().mean(-1, keepdim=True) + self.norm_eps)  # [B, S, 1]
        mixes = F.linear(flat, self.fn) * rms  # [B, S, 24]
        # one scale per group: m·s₀ + b for pre, m·s₁ + b for post, m·s₂ + b for comb, in one op
        scale = self.scale.index_select(0, self.scale_of_mix)  # [24] = s₀ ×hc, s₁ ×hc, s₂ ×hc²
        z = torch.addcmul(self.base, mixes, scale)  # [B, S, 24] = m · s + b
        gates = torch.sigmoid(z[..., : 2 * hc])  # [B, S, 2·hc]
        pre = gates[..., :hc] + self.hc_eps  # [B, S, hc]
        post = 2 * gates[..., hc:]  # [B, S, hc]
        comb = sinkhorn_comb(z[..., 2 * hc :].unflatten(-1, (hc, hc)), self.iters, self.hc_eps, history)
        return pre, post, comb  # comb [B, S, hc, hc]


def hc_pre(x: torch.Tensor, pre: torch.Tensor) -> torch.Tensor:
    """Collapse the copies: Σ_i pre_i · X_i.  [B, S, hc, D] × [B, S, hc] → [B, S, D]"""
    y = (pre.unsqueeze(-1) * cast(x, pre.dtype)).sum(dim=2)
    return cast(y, x.dtype)


def hc_post(y: torch.Tensor, residual: torch.Tensor, post: torch.Tensor, comb: torch.Tensor) -> torch.Tensor:
    """Expand: new copy j = post_j · y + Σ_i comb[i, j] · R_i.  → [B, S, hc, D]

    The sum over i is one batched matmul over the B·S rows (combᵀ [hc, hc] @ R [hc, D]) that adds
    post ⊗ y as it goes (baddbmm)."""
    hp = post.dtype
    B, S, hc, D = residual.shape
    spread = post.unsqueeze(-1) * cast(y, hp).unsqueeze(-2)  # [B, S, hc, D] post_j · y
    out = torch.baddbmm(
        spread.reshape(B * S, hc, D), comb.reshape(B * S, hc, hc).mT, cast(residual, hp).reshape(B * S, hc, D)
    )  # [B·S, hc, D]
    return cast(out.view(B, S, hc, D), y.dtype)


def identity_pre_mix(batch: int, seqlen: int, hc_mult: int, dtype: torch.dtype, device) -> torch.Tensor:
    """The first block's input mix: one-hot on copy 0, so layer 0 reads the embedding itself.  # [B, S, hc]"""
    pre = torch.zeros(batch, seqlen, hc_mult, dtype=dtype, device=device)
    pre[..., 0] = 1.0
    return pre

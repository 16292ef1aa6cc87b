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

from .linear import cast
from .quant import Prepared, forget_prepared


def sinkhorn_comb(logits: torch.Tensor, iters: int, eps: float, history: list | None = None) -> torch.Tensor:
    """Row softmax (+eps), then alternate column and row normalizations; `iters` column passes in all.

        comb = softmax_row(logits) + eps
        comb = comb / (Σ_i comb[i, :] + eps)                    iteration 1 ends with a column pass
        iters − 1 times:  comb = comb / (Σ_j comb[:, j] + eps)  (rows),  comb = comb / (Σ_i comb[i, :] + eps)

    Two ops per normalization: each "sum + eps" is one batched matmul with a ones vector, then one division.
    With autograd, eps comes in as baddbmm's added term (eps + comb·1 for the rows, eps + 1ᵀ·comb for the
    columns) and every pass makes new tensors, as the backward needs them. Without, the matrix lives inside an
    [hc + 1, hc + 1] buffer whose extra column and extra row hold eps, so a plain matmul of [comb ‖ eps] with
    ones *is* Σ_j comb[:, j] + eps (and [comb; eps] likewise for the columns); the sums go into two small
    buffers and the division is in place — the same numbers with about a third fewer instructions a pass.
    (The passes depend on each other and each sublayer's logits on its input, so this loop is the floor:
    2 ops × (2·iters − 1) passes per call.)
    logits: [..., hc, hc]. If `history` is a list, the matrix after each iteration is appended to it.
    """
    shape, hc = logits.shape, logits.size(-1)
    probs = logits.softmax(dim=-1).reshape(-1, hc, hc)  # [N, hc, hc]
    N = probs.size(0)
    if torch.is_grad_enabled() and probs.requires_grad:  # autograd: every pass a new tensor
        eps_t, ones_col, ones_row = _sinkhorn_constants(N, hc, eps, probs.dtype, probs.device)

        def rows(c: torch.Tensor) -> torch.Tensor:  # c / (Σ_j c[:, j] + eps)
            return torch.div(c, torch.baddbmm(eps_t, c, ones_col))

        def cols(c: torch.Tensor) -> torch.Tensor:  # c / (Σ_i c[i, :] + eps)
            return torch.div(c, torch.baddbmm(eps_t, ones_row, c))

        comb = cols(probs + eps)
        if history is not None:
            history.append(comb.view(shape).detach().clone())
        for _ in range(iters - 1):
            comb = cols(rows(comb))
            if history is not None:
                history.append(comb.view(shape).detach().clone())
        return comb.view(shape)
    # inference: [[comb, eps], [eps, ·]] in one buffer; sums by matmul with ones, the division in place
    aug = probs.new_full((N, hc + 1, hc + 1), eps)  # [N, hc + 1, hc + 1]
    comb = aug[:, :hc, :hc]  # [N, hc, hc] the matrix itself (a view)
    torch.add(probs, eps, out=comb)
    with_eps_col, with_eps_row = aug[:, :hc], aug[:, :, :hc]  # [N, hc, hc + 1] = [comb ‖ eps], [N, hc + 1, hc]
    _, ones_col, ones_row = _sinkhorn_constants(N, hc + 1, eps, probs.dtype, probs.device)  # [N, hc+1, 1], [N, 1, hc+1]
    row_sums, col_sums = probs.new_empty(N, hc, 1), probs.new_empty(N, 1, hc)
    bmm, div_ = torch.bmm, comb.div_  # local names: this loop is 78 calls per sublayer
    div_(bmm(ones_row, with_eps_row, out=col_sums))  # columns: comb / (Σ_i comb[i, :] + eps)
    if history is not None:
        history.append(comb.clone(memory_format=torch.contiguous_format).view(shape))
    for _ in range(iters - 1):
        div_(bmm(with_eps_col, ones_col, out=row_sums))  # rows: comb / (Σ_j comb[:, j] + eps)
        div_(bmm(ones_row, with_eps_row, out=col_sums))  # columns
        if history is not None:
            history.append(comb.clone(memory_format=torch.contiguous_format).view(shape))
    return comb.view(shape)


_CONSTANTS: dict = {}


def _sinkhorn_constants(n: int, hc: int, eps: float, dtype: torch.dtype, device) -> tuple[torch.Tensor, ...]:
    """eps [1, 1, 1], ones [n, hc, 1] and ones [n, 1, hc] for the batched sums, made once per shape."""
    key = (n, hc, eps, dtype, device)
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
        # pre = 1·σ + eps, post = 2·σ + 0: one addcmul over the 2·hc gates  (each [2·hc])
        self.register_buffer("gate_mul", torch.tensor([1.0] * hc_mult + [2.0] * hc_mult, dtype=dtype), False)
        self.register_buffer("gate_add", torch.tensor([hc_eps] * hc_mult + [0.0] * hc_mult, dtype=dtype), False)
        # fn with its group scales folded in, beside what the forward reads with it: a cache (`quant.Prepared`)
        self.prepared = Prepared(self.prepare_weights, lambda: [self.fn, self.scale, self.base])
        self.register_load_state_dict_post_hook(forget_prepared)

    def scale_fn(self) -> torch.Tensor:
        """fn with each mix's group scale folded in: row m of fn × s_group(m).  [24, hc·D]
        (s₀ for the hc pre rows, s₁ for the hc post rows, s₂ for the hc² comb rows)."""
        return self.fn * self.scale.index_select(0, self.scale_of_mix)[:, None]

    def prepare_weights(self) -> tuple[torch.Tensor, ...]:
        """((fn ⊙ s)ᵀ [hc·D, 24], base [24], gate_add [2·hc], gate_mul [2·hc]): everything the forward reads, in one
        lookup (a module attribute costs more than a small op); the projection transposed, [in, out], the layout a
        matmul of a few rows reads fastest."""
        return self.scale_fn().mT.contiguous(), self.base, self.gate_add, self.gate_mul

    def prepare(self) -> None:
        """Rebuild the scaled projection now (after an in-place edit through `.data`; see `quant.Prepared`)."""
        self.prepared.rebuild()

    def forward(self, x: torch.Tensor, history: list | None = None):
        """x: [B, S, hc, D] → pre [B, S, hc], post [B, S, hc], comb [B, S, hc, hc].

        Naive, per row:  r = 1/√(mean(x²) + eps);  m = (fn·x) · r  [24];  z = m ⊙ s_group + base;
                         pre = σ(z[:hc]) + eps,  post = 2·σ(z[hc:2hc]),  comb = Sinkhorn(z[2hc:] as hc×hc).
        Here the group scales sit in the prepared projection (fn ⊙ s, `scale_fn`) and r multiplies x before it
        (fn·(x·r) = (fn·x)·r), so z is one RMS normalization and one matmul with base as its bias:
        z = (fn ⊙ s)·(x·r) + base (the same value; it may round differently in the last bit)."""
        hc = self.hc_mult
        B, S, _, D = x.shape
        fn_s_t, base, gate_add, gate_mul = self.prepared.get()  # (fn ⊙ s)ᵀ [hc·D, 24]
        flat = x.reshape(B * S, hc * D)  # [B·S, hc·D]
        if flat.dtype != fn_s_t.dtype:
            flat = flat.to(fn_s_t.dtype)
        normed = torch.rms_norm(flat, (hc * D,), None, self.norm_eps)  # [B·S, hc·D] x · r
        z = torch.addmm(base, normed, fn_s_t).view(B, S, -1)  # [B, S, 24] = (fn ⊙ s)·(x·r) + base
        gates, comb_logits = z.split_with_sizes([2 * hc, hc * hc], -1)  # [B, S, 2·hc], [B, S, hc²]
        pre, post = torch.addcmul(gate_add, torch.sigmoid(gates), gate_mul).split_with_sizes([hc, hc], -1)
        comb = sinkhorn_comb(comb_logits.view(B, S, hc, hc), self.iters, self.hc_eps, history)
        return pre, post, comb  # pre = σ + eps, post = 2σ [B, S, hc]; comb [B, S, hc, hc]


def hc_pre(x: torch.Tensor, pre: torch.Tensor) -> torch.Tensor:
    """Collapse the copies: Σ_i pre_i · X_i.  [B, S, hc, D] × [B, S, hc] → [B, S, D]

    One batched matmul over the rows: pre [1, hc] @ X [hc, D] per row (naive: (pre ⊙ X).sum over the copies)."""
    B, S, hc, D = x.shape
    y = torch.bmm(pre.reshape(B * S, 1, hc), cast(x, pre.dtype).reshape(B * S, hc, D))  # [B·S, 1, D]
    return cast(y.view(B, S, D), x.dtype)


def hc_post(y: torch.Tensor, residual: torch.Tensor, post: torch.Tensor, comb: torch.Tensor) -> torch.Tensor:
    """Expand: new copy j = post_j · y + Σ_i comb[i, j] · R_i.  → [B, S, hc, D]

    Two batched matmuls over the rows: combᵀ [hc, hc] @ R [hc, D], then post [hc, 1] ⊗ y [1, D] added in place."""
    hp = post.dtype
    B, S, hc, D = residual.shape
    N = B * S
    out = torch.bmm(comb.reshape(N, hc, hc).mT, cast(residual, hp).reshape(N, hc, D))  # [N, hc, D] Σ_i comb[i, j]·R_i
    out.baddbmm_(post.reshape(N, hc, 1), cast(y, hp).reshape(N, 1, D))  # + post_j · y
    return cast(out.view(B, S, hc, D), y.dtype)


def identity_pre_mix(batch: int, seqlen: int, hc_mult: int, dtype: torch.dtype, device) -> torch.Tensor:
    """The first block's input mix: one-hot on copy 0, so layer 0 reads the embedding itself.  # [B, S, hc]"""
    pre = torch.zeros(batch, seqlen, hc_mult, dtype=dtype, device=device)
    pre[..., 0] = 1.0
    return pre

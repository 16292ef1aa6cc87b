"""Step 5A · MoE: sqrtsoftplus router, select-only bias, clamped SwiGLU experts, MXFP4 weights.

Router:  a = sqrt(softplus(x·Wᵀ / T));  chosen = top-k(a + bias)  (the bias only *selects*);
         w = a[chosen] / (Σ a[chosen] + 1e-20) · route_scale    (normalized only when k > 1, as the
         reference does).
Expert:  y = w2( w · silu(min(w1 x, L)) · clamp(w3 x, −L, L) )  — the up branch is clamped both ways,
         the gate branch only from above; the routing weight multiplies before the down projection.
Routed-expert weights are MXFP4 in the checkpoint (E2M1 with an E8M0 scale per 32 inputs); the lab
simulates that with quantize→dequantize (`expert_quant`). One shared expert sees every token.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .linear import Linear
from .quant import fp4_qdq, qdq_ste


class Gate(nn.Module):
    """`weight` [E, D] and the selection-only correction `bias` [E] (noaux_tc)."""

    def __init__(
        self,
        dim: int,
        n_experts: int,
        topk: int,
        route_scale: float,
        gate_temp: float,
        dtype: torch.dtype,
        hp_dtype: torch.dtype,
    ):
        super().__init__()
        self.topk, self.route_scale, self.gate_temp = topk, route_scale, gate_temp
        self.weight = nn.Parameter(torch.empty(n_experts, dim, dtype=dtype))  # [E, D]
        self.bias = nn.Parameter(torch.zeros(n_experts, dtype=hp_dtype))  # [E]

    def forward(self, x: torch.Tensor):
        """x: [N, D] → weights [N, k], indices [N, k], scores [N, E]."""
        hp = self.bias.dtype
        scores = F.softplus((x.to(hp) @ self.weight.to(hp).T) / self.gate_temp).sqrt()  # [N, E]
        indices = (scores + self.bias).topk(self.topk, dim=-1).indices  # [N, k] bias picks...
        weights = scores.gather(1, indices)  # ...but the weights come from the unbiased scores
        if self.topk > 1:
            weights = weights / (weights.sum(dim=-1, keepdim=True) + 1e-20)
        return weights * self.route_scale, indices, scores


class Expert(nn.Module):
    """One SwiGLU FFN: w1 (gate), w3 (up), w2 (down); optionally MXFP4-simulated weights."""

    def __init__(self, dim: int, inter_dim: int, swiglu_limit: float, fp4: bool, dtype: torch.dtype):
        super().__init__()
        self.w1 = Linear(dim, inter_dim, bias=False, dtype=dtype)  # [I, D]
        self.w2 = Linear(inter_dim, dim, bias=False, dtype=dtype)  # [D, I]
        self.w3 = Linear(dim, inter_dim, bias=False, dtype=dtype)  # [I, D]
        self.limit, self.fp4 = swiglu_limit, fp4

    def weight(self, name: str) -> torch.Tensor:
        """The weight as the kernel sees it: MXFP4-QDQ'd when `fp4` (straight-through gradient when training).
        Quantized at every use, so a weight edited in place (even through `.data`) is never stale."""
        w = getattr(self, name).weight
        if not self.fp4:
            return w
        if torch.is_grad_enabled() and w.requires_grad:
            return qdq_ste(w, fp4_qdq, 32, "e8m0")
        return fp4_qdq(w, 32, "e8m0")

    def forward(self, x: torch.Tensor, route_weight: torch.Tensor | None = None) -> torch.Tensor:
        gate = F.linear(x, self.weight("w1"))  # [N, I]
        up = F.linear(x, self.weight("w3"))  # [N, I]
        if self.limit > 0:
            up = up.clamp(-self.limit, self.limit)
            gate = gate.clamp(max=self.limit)
        h = F.silu(gate) * up
        if route_weight is not None:
            h = route_weight.to(h.dtype) * h
        return F.linear(h, self.weight("w2"))  # [N, D]


class MoE(nn.Module):
    def __init__(
        self,
        dim: int,
        inter_dim: int,
        n_experts: int,
        topk: int,
        n_shared: int,
        route_scale: float,
        gate_temp: float,
        swiglu_limit: float,
        fp4: bool,
        dtype: torch.dtype,
        hp_dtype: torch.dtype,
    ):
        super().__init__()
        self.n_experts = n_experts
        self.gate = Gate(dim, n_experts, topk, route_scale, gate_temp, dtype, hp_dtype)
        self.experts = nn.ModuleList(Expert(dim, inter_dim, swiglu_limit, fp4, dtype) for _ in range(n_experts))
        self.shared_experts = Expert(dim, inter_dim * n_shared, swiglu_limit, False, dtype) if n_shared else None

    def forward(self, x: torch.Tensor):
        """x: [B, S, D] → y [B, S, D], info (router scores, chosen experts, weights, load)."""
        shape = x.shape
        flat = x.reshape(-1, shape[-1])  # [N, D]
        weights, indices, scores = self.gate(flat)
        y = torch.zeros_like(flat)
        for e in torch.unique(indices).tolist():
            rows, slot = torch.where(indices == e)
            y = y.index_add(0, rows, self.experts[e](flat[rows], weights[rows, slot, None]))
        if self.shared_experts is not None:
            y = y + self.shared_experts(flat)
        load = torch.bincount(indices.flatten(), minlength=self.n_experts)  # [E]
        info = {
            "scores": scores.view(*shape[:-1], -1),
            "indices": indices.view(*shape[:-1], -1),
            "weights": weights.view(*shape[:-1], -1),
            "load": load,
        }
        return y.view(shape), info

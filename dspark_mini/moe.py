"""Step 5A · MoE: sqrtsoftplus router, select-only bias, clamped SwiGLU experts, MXFP4 weights.

Router:  a = sqrt(softplus(x·Wᵀ / T));  chosen = top-k(a + bias)  (the bias only *selects*);
         w = a[chosen] / (Σ a[chosen] + 1e-20) · route_scale    (normalized only when k > 1, as the
         reference does).
Expert:  y = w2( w · silu(min(w1 x, L)) · clamp(w3 x, −L, L) )  — the up branch is clamped both ways,
         the gate branch only from above; the routing weight multiplies before the down projection.
Routed-expert weights are MXFP4 in the checkpoint (E2M1 with an E8M0 scale per 32 inputs); the lab
simulates that with quantize→dequantize (`expert_quant`). One shared expert sees every token.

The routed experts run as serving engines run them: their weights stacked per projection (w1, w3 [E, I, D],
w2 [E, D, I], QDQ'd once — `quant.Prepared`) and three batched matmuls for all chosen experts at once: a
decode step gathers each (token, expert) pair's weights, a prefill groups the tokens by expert (`MoE.routed`).
The checkpoint keeps one `Expert` module per expert (keys `experts.{e}.w1.weight` …); the stacks are a cache
built from them, not parameters.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from .linear import Linear, cast
from .quant import Prepared, fake_quant, forget_prepared, fp4_qdq, qdq_ste


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
        logits = F.linear(cast(x, hp), cast(self.weight, hp))  # [N, E]
        if self.gate_temp != 1:
            logits = logits / self.gate_temp
        scores = F.softplus(logits).sqrt()  # [N, E]
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
        Quantized at every use, so a weight edited in place (even through `.data`) is never stale. (A single
        expert, the reference; the MoE layer runs its routed experts from stacked, prepared weights.)"""
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
            h = cast(route_weight, h.dtype) * h
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
        self.n_experts, self.fp4 = n_experts, fp4
        self.gate = Gate(dim, n_experts, topk, route_scale, gate_temp, dtype, hp_dtype)
        self.experts = nn.ModuleList(Expert(dim, inter_dim, swiglu_limit, fp4, dtype) for _ in range(n_experts))
        self.shared_experts = Expert(dim, inter_dim * n_shared, swiglu_limit, False, dtype) if n_shared else None
        self.limit = swiglu_limit
        self.stacked = Prepared(self.stack_experts, self.expert_params)  # (w1, w2, w3) stacked: a cache
        self.register_load_state_dict_post_hook(forget_prepared)

    def expert_params(self) -> list[torch.Tensor]:
        return [getattr(ex, n).weight for ex in self.experts for n in ("w1", "w2", "w3")]

    def stack_experts(self) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The routed experts' weights as the kernels see them: w1, w3 [E, I, D] and w2 [E, D, I], MXFP4-QDQ'd
        (one E8M0 scale per 32 inputs, exactly as `Expert.weight` does it expert by expert)."""
        out = []
        for name in ("w1", "w2", "w3"):
            w = torch.stack([getattr(ex, name).weight for ex in self.experts])  # [E, I, D] or [E, D, I]
            out.append(fake_quant(w, fp4_qdq, 32, "e8m0") if self.fp4 else w)
        return tuple(out)

    def prepare(self) -> None:
        """Rebuild the stacked weights now (after an in-place edit through `.data`; see `quant.Prepared`)."""
        self.stacked.rebuild()

    def swiglu(self, xs: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor, w3: torch.Tensor, rw: torch.Tensor):
        """Batched experts: xs [G, C, D] through w1, w3 [G, I, D] and w2 [G, D, I], routing weights rw [G, C, 1]
        applied before w2.  → [G, C, D]"""
        gate, up = torch.bmm(xs, w1.mT), torch.bmm(xs, w3.mT)  # [G, C, I] each
        if self.limit > 0:
            up = up.clamp(-self.limit, self.limit)
            gate = gate.clamp(max=self.limit)
        return torch.bmm(cast(rw, gate.dtype) * (F.silu(gate) * up), w2.mT)  # [G, C, D]

    def routed(self, x: torch.Tensor, weights: torch.Tensor, indices: torch.Tensor, load: torch.Tensor) -> torch.Tensor:
        """Σ over each token's chosen experts of w · expert_e(x), as batched matmuls.

        Naive:  for each token n, for each chosen (e, w):  y[n] += w2_e( w · silu(min(w1_e x, L)) · clamp(w3_e x, ±L) )
        Few (token, expert) pairs (decode, a verify block): each pair gathers its expert's weights and all pairs run
        as one batch. Many pairs (prefill, training): the pairs are sorted by expert (stable: tokens ascending inside
        an expert, so each token's experts are added in ascending order, as a loop over experts would), placed in a
        zero-padded [E, C, D] batch (C = the busiest expert's count), run through every expert at once, added back.
        x [N, D], weights/indices [N, k], load [E] pairs per expert → [N, D].
        """
        N, k = indices.shape
        E, D = self.n_experts, x.size(-1)
        w1, w2, w3 = self.stacked.get()  # [E, I, D], [E, D, I], [E, I, D]
        expert = indices.flatten()  # [P] the expert of each (token, slot) pair, token-major (P = N·k)
        if N * k <= 2 * E:  # gather each pair's weights: at most two copies of the stack
            xs = x.repeat_interleave(k, dim=0).unsqueeze(1)  # [P, 1, D]
            w1, w2, w3 = (w.index_select(0, expert) for w in (w1, w2, w3))  # [P, I, D], [P, D, I], [P, I, D]
            out = self.swiglu(xs, w1, w2, w3, weights.reshape(-1, 1, 1))  # [P, 1, D]
            return out.view(N, k, D).sum(dim=1)  # [N, D]
        order = expert.argsort(stable=True)  # [P] pairs grouped by expert
        e_sorted, token = expert[order], order // k  # [P] each sorted pair's expert and token
        first = load.cumsum(0) - load  # [E] where each expert's group starts in the sorted list
        slot = torch.arange(N * k, device=x.device) - first[e_sorted]  # [P] place inside its expert's group
        C = int(load.max())
        xs = x.new_zeros(E, C, D).index_put((e_sorted, slot), x[token])  # [E, C, D]
        rw = weights.new_zeros(E, C, 1).index_put((e_sorted, slot), weights.flatten()[order, None])  # [E, C, 1]
        out = self.swiglu(xs, w1, w2, w3, rw)  # [E, C, D]
        return x.new_zeros(N, D).index_add(0, token, out[e_sorted, slot])  # [N, D]

    def forward(self, x: torch.Tensor):
        """x: [B, S, D] → y [B, S, D], info (router scores, chosen experts, weights, load)."""
        shape = x.shape
        flat = x.reshape(-1, shape[-1])  # [N, D]
        weights, indices, scores = self.gate(flat)
        load = torch.bincount(indices.flatten(), minlength=self.n_experts)  # [E]
        y = self.routed(flat, weights, indices, load)
        if self.shared_experts is not None:
            y = y + self.shared_experts(flat)
        info = {
            "scores": scores.view(*shape[:-1], -1),
            "indices": indices.view(*shape[:-1], -1),
            "weights": weights.view(*shape[:-1], -1),
            "load": load,
        }
        return y.view(shape), info

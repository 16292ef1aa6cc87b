"""Step 5A · MoE: sqrtsoftplus router, select-only bias, clamped SwiGLU experts, MXFP4 weights.

Router:  a = sqrt(softplus(x·Wᵀ / T));  chosen = top-k(a + bias)  (the bias only *selects*);
         w = a[chosen] / (Σ a[chosen] + 1e-20) · route_scale    (normalized only when k > 1, as the
         reference does).
Expert:  y = w2( w · silu(min(w1 x, L)) · clamp(w3 x, −L, L) )  — the up branch is clamped both ways,
         the gate branch only from above; the routing weight multiplies before the down projection.
Routed-expert weights are MXFP4 in the checkpoint (E2M1 with an E8M0 scale per 32 inputs); the lab
simulates that with quantize→dequantize (`expert_quant`). One shared expert sees every token.
The reference's GEMMs also quantize their *inputs*: x before w1/w3 and h (routing weight applied) before w2 are
FP8 E4M3 with a power-of-two scale per 32 values, in every routed expert (FP4 GEMMs) and the shared one (FP8);
`expert_act_quant` simulates that (`quant.fp8_act_qdq`). The router reads the unquantized x.

The routed experts run as serving engines run them: their weights stacked (gate and up side by side,
w13ᵀ [E, D, 2I], and w2ᵀ [E, I, D], QDQ'd once — `quant.Prepared`) and two batched matmuls for all chosen
experts at once: a decode step gathers each (token, expert) pair's weights (the shared expert rides along as
one more pair), a prefill groups the tokens by expert (`MoE.routed`). The checkpoint keeps one `Expert` module
per expert (keys `experts.{e}.w1.weight` …); the stacks are a cache built from them, not parameters.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import torch
import torch.nn.functional as F
from torch import nn

from .linear import Linear, cast
from .quant import Prepared, fake_quant, forget_prepared, fp4_qdq, fp8_act_qdq, qdq_ste


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
        return route(logits, self.bias, self.topk, self.route_scale, self.gate_temp)


def route(logits: torch.Tensor, bias: torch.Tensor, topk: int, route_scale: float, gate_temp: float):
    """The router after its projection: logits [N, E] (x·Wᵀ), bias [E] → weights [N, k], indices [N, k],
    scores [N, E]."""
    if gate_temp != 1:
        logits = logits / gate_temp
    scores = F.softplus(logits).sqrt()  # [N, E]
    indices = (scores + bias).topk(topk, dim=-1).indices  # [N, k] bias picks...
    weights = scores.gather(1, indices)  # ...but the weights come from the unbiased scores
    if topk > 1:
        weights = weights / weights.sum(dim=-1, keepdim=True).add_(1e-20)
    return weights.mul_(route_scale), indices, scores


class Expert(nn.Module):
    """One SwiGLU FFN: w1 (gate), w3 (up), w2 (down); optionally MXFP4-simulated weights and FP8-simulated inputs
    of its matmuls (`act_fp8`)."""

    def __init__(
        self, dim: int, inter_dim: int, swiglu_limit: float, fp4: bool, dtype: torch.dtype, act_fp8: bool = False
    ):
        super().__init__()
        self.w1 = Linear(dim, inter_dim, bias=False, dtype=dtype)  # [I, D]
        self.w2 = Linear(inter_dim, dim, bias=False, dtype=dtype)  # [D, I]
        self.w3 = Linear(dim, inter_dim, bias=False, dtype=dtype)  # [I, D]
        self.limit, self.fp4, self.act_fp8 = swiglu_limit, fp4, act_fp8

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
        x = act_qdq(x, self.act_fp8)  # [N, D] as w1 and w3 read it
        gate = F.linear(x, self.weight("w1"))  # [N, I]
        up = F.linear(x, self.weight("w3"))  # [N, I]
        if self.limit > 0:
            up = up.clamp(-self.limit, self.limit)
            gate = gate.clamp(max=self.limit)
        h = F.silu(gate) * up
        if route_weight is not None:
            h = cast(route_weight, h.dtype) * h
        return F.linear(act_qdq(h, self.act_fp8), self.weight("w2"))  # [N, D]


def act_qdq(x: torch.Tensor, on: bool) -> torch.Tensor:
    """An expert matmul's input as the reference's GEMM reads it (`quant.fp8_act_qdq`: FP8, a scale per 32 values
    along the last dim) when `on`; x itself when off."""
    return fp8_act_qdq(x, 32) if on else x


class RouterInfo(Mapping):
    """The router's diagnostics as a read-only mapping (scores [B, S, E], indices and weights [B, S, k], load [E]
    = chosen pairs per expert); made when read (a trace reads them; a plain forward does not)."""

    def __init__(self, lead: tuple[int, ...], scores, indices, weights, load):
        self._lead, self._t = lead, {"scores": scores, "indices": indices, "weights": weights, "load": load}

    def __getitem__(self, name: str) -> torch.Tensor:
        t = self._t[name]
        if name == "load":
            if t is None:  # [E]
                idx = self._t["indices"]
                t = self._t["load"] = torch.bincount(idx.flatten(), minlength=self._t["scores"].size(-1))
            return t
        return t.view(*self._lead, -1)

    def __iter__(self):
        return iter(self._t)

    def __len__(self) -> int:
        return len(self._t)


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
        act_fp8: bool = False,
    ):
        super().__init__()
        self.n_experts, self.fp4, self.act_fp8 = n_experts, fp4, act_fp8
        self.topk, self.route_scale, self.gate_temp = topk, route_scale, gate_temp
        self.gate = Gate(dim, n_experts, topk, route_scale, gate_temp, dtype, hp_dtype)
        self.experts = nn.ModuleList(
            Expert(dim, inter_dim, swiglu_limit, fp4, dtype, act_fp8) for _ in range(n_experts)
        )
        self.shared_experts = (
            Expert(dim, inter_dim * n_shared, swiglu_limit, False, dtype, act_fp8) if n_shared else None
        )
        # one shared expert has the routed experts' shape: it rides in the stack as expert E, route weight 1
        self.shared_in_stack = n_shared == 1
        # few experts (the lab: 8 + 1 shared, top-2): running all of them costs at most 3× the chosen ones'
        # arithmetic and copies no weights, so every expert runs and the unchosen ones are weighted 0 (`routed`)
        n_stack, n_used = n_experts + self.shared_in_stack, topk + self.shared_in_stack
        self.dense = n_stack <= 3 * n_used
        onehot = torch.zeros(1, n_stack, dtype=hp_dtype)  # [1, E(+1)] route weight 1 on the shared expert
        if self.shared_in_stack:
            onehot[0, n_experts] = 1.0
        self.register_buffer("shared_route", onehot, persistent=False)
        self.limit = swiglu_limit
        self.stacked = Prepared(self.stack_experts, self.expert_params)  # the stacked layouts: a cache
        self.register_load_state_dict_post_hook(forget_prepared)

    def expert_params(self) -> list[torch.Tensor]:
        experts = list(self.experts) + ([self.shared_experts] if self.shared_in_stack else [])
        return [getattr(ex, n).weight for ex in experts for n in ("w1", "w2", "w3")] + [
            self.gate.weight,
            self.gate.bias,
        ]

    def stack_experts(self) -> dict[str, torch.Tensor]:
        """The experts' weights as the kernels see them — the routed ones MXFP4-QDQ'd (one E8M0 scale per 32
        inputs, exactly as `Expert.weight` does it expert by expert), then the shared expert unquantized as
        entry E when there is one — in the layouts the forward reads:
          w13t [E(+1), D, 2I] = [w1ᵀ ‖ w3ᵀ] per expert (gate and up side by side), w2t [E(+1), I, D]: batched
            matmuls over chosen experts (`swiglu`);
          when `dense`: w_in_t [D, E + (E+1)·2I] = [gate; w1_0; w3_0; w1_1; …]ᵀ (the router's projection and every
            expert's gate and up, one matmul; transposed, [in, out], the layout a matmul of a few rows reads
            fastest) — or w13_t [D, (E+1)·2I] alone when the router runs in another dtype or reads another input
            (the experts' FP8-QDQ'd x, `act_fp8`) — and w2 [(E+1)·I, D] = every expert's w2ᵀ stacked;
        and the router's bias [E] and the dense routing template (1 on the shared expert) [1, E(+1)]."""

        def stack(name: str) -> torch.Tensor:
            w = torch.stack([getattr(ex, name).weight for ex in self.experts])  # [E, I, D] or [E, D, I]
            w = fake_quant(w, fp4_qdq, 32, "e8m0") if self.fp4 else w
            if self.shared_in_stack:
                w = torch.cat([w, getattr(self.shared_experts, name).weight[None]])  # [E + 1, …]
            return w

        w13 = torch.cat([stack("w1"), stack("w3")], dim=1)  # [E(+1), 2I, D]
        w2t = stack("w2").mT.contiguous()  # [E(+1), I, D]
        out = {"w13t": w13.mT.contiguous(), "w2t": w2t, "bias": self.gate.bias, "route0": self.shared_route}
        if self.dense:
            gw = self.gate.weight
            w13 = w13.flatten(0, 1)  # [(E+1)·2I, D]
            if gw.dtype == self.gate.bias.dtype == w13.dtype and not self.act_fp8:
                out["w_in_t"] = torch.cat([gw, w13]).mT.contiguous()  # [D, E + (E+1)·2I]
            else:
                out["w13_t"] = w13.mT.contiguous()  # [D, (E+1)·2I]
            out["w2"] = w2t.flatten(0, 1)  # [(E+1)·I, D]
            I, L = w2t.size(1), self.limit
            out["lo"] = w13.new_tensor([-math.inf] * I + [-L] * I)  # [2I] clamp bounds: gate ≤ L, |up| ≤ L
            out["hi"] = w13.new_tensor([L] * (2 * I))
        return out

    def prepare(self) -> None:
        """Rebuild the stacked weights now (after an in-place edit through `.data`; see `quant.Prepared`)."""
        self.stacked.rebuild()

    def swiglu(self, xs: torch.Tensor, w13t: torch.Tensor, w2t: torch.Tensor, rw: torch.Tensor | None):
        """Batched experts: xs [G, C, D] through w13ᵀ [G, D, 2I] and w2ᵀ [G, I, D], routing weights rw [G, C, 1]
        (None: 1) applied before w2.  → [G, C, D]
        Naive, per row x of group g:  w2_g( rw · silu(min(w1_g x, L)) · clamp(w3_g x, ±L) ).
        xs is the experts' input as given (already FP8-QDQ'd under `act_fp8`); h is QDQ'd here before w2."""
        gate, up = torch.bmm(xs, w13t).chunk(2, dim=-1)  # [G, C, I] each: w1 x and w3 x in one matmul
        if self.limit > 0:
            up = up.clamp(-self.limit, self.limit)
            gate = gate.clamp(max=self.limit)
        h = F.silu(gate) * up
        h = h if rw is None else cast(rw, h.dtype) * h
        return torch.bmm(act_qdq(h, self.act_fp8), w2t)  # [G, C, D]

    def dense_ffn(self, gu: torch.Tensor, weights: torch.Tensor, indices: torch.Tensor, w: dict) -> torch.Tensor:
        """Every expert on every token, as one wide SwiGLU FFN whose hidden units are grouped by expert and scaled
        by that expert's routing weight (0 when the token did not choose it, 1 for the shared expert):
            y = Σ_e w2_e( rw[e] · silu(min(w1_e x, L)) · clamp(w3_e x, ±L) )
        gu [N, (E+1)·2I] = every expert's (w1 x ‖ w3 x), weights/indices [N, k] → [N, D]."""
        N = gu.size(0)
        n_stack = w["route0"].size(1)
        rw = w["route0"].expand(N, n_stack).scatter(1, indices, weights)  # [N, E(+1)] dense routing (a new tensor)
        if self.limit > 0:  # gate: min(·, L), up: clamp(·, ±L) — one clamp with per-column bounds
            gu = torch.clamp(gu.view(N, n_stack, -1), w["lo"], w["hi"])  # [N, E(+1), 2I]
        gate, up = gu.view(N, n_stack, -1).chunk(2, dim=-1)  # [N, E(+1), I] each
        h = F.silu(gate) * up * cast(rw, up.dtype).unsqueeze(-1)  # [N, E(+1), I] weighted before w2
        h = act_qdq(h, self.act_fp8)  # blocks of 32 inside each expert's I units (I % 32 == 0)
        return torch.mm(h.view(N, -1), w["w2"])  # [N, D]: the sum over experts is the matmul's sum

    def routed(self, x: torch.Tensor, weights: torch.Tensor, indices: torch.Tensor, load: torch.Tensor) -> torch.Tensor:
        """Σ over each token's chosen experts of w · expert_e(x), as batched matmuls, plus the shared expert.

        Naive:  for each token n, for each chosen (e, w):  y[n] += w2_e( w · silu(min(w1_e x, L)) · clamp(w3_e x, ±L) );
                y[n] += shared(x[n])
        Three ways, the same sum:
        - few experts (`dense`, the lab; `forward` runs it, with the router's projection in the same matmul):
          every expert runs on every token, as one wide FFN with routing weight 0 for the experts a token did not
          choose (`dense_ffn`) — at 9 experts for 3 chosen that is cheaper than copying the chosen experts' weights;
        - few (token, expert) pairs (a decode step, a verify block at real scale): each pair gathers its expert's
          weights and all pairs run as one batch — the shared expert as one more pair per token (expert E,
          weight 1), added last;
        - many pairs (prefill, training): the pairs are sorted by expert (stable: tokens ascending inside an
          expert, so each token's experts are added in ascending order, as a loop over experts would), placed in
          a zero-padded [E, C, D] batch (C = the busiest expert's count), run through every expert at once, added
          back; the shared expert runs once over all tokens.
        x [N, D], weights/indices [N, k], load [E] pairs per expert → [N, D]. Under `act_fp8` every expert reads
        x FP8-QDQ'd (xq), and each one's h is QDQ'd before its w2 (`swiglu`, `dense_ffn`).
        """
        N, k = indices.shape
        E, D = self.n_experts, x.size(-1)
        w = self.stacked.get()
        w13t, w2t = w["w13t"], w["w2t"]  # [E(+1), D, 2I], [E(+1), I, D]
        shared = self.shared_in_stack
        xq = act_qdq(x, self.act_fp8)  # [N, D] the experts' input (x itself when off)
        if self.dense:
            gu = torch.matmul(xq, w["w_in_t"][:, E:] if "w_in_t" in w else w["w13_t"])  # [N, (E+1)·2I]
            y = self.dense_ffn(gu, weights, indices, w)
        elif N * k <= 2 * E:  # gather each pair's weights: at most two copies of the stack
            if shared:  # one more pair per token: expert E with weight 1 (1 · h = h exactly)
                indices = torch.cat([indices, indices.new_full((N, 1), E)], dim=1)  # [N, k + 1]
                weights = torch.cat([weights, weights.new_ones(N, 1)], dim=1)
                k += 1
            expert = indices.flatten()  # [P] the expert of each (token, slot) pair, token-major (P = N·k)
            xs = xq.repeat_interleave(k, dim=0).unsqueeze(1)  # [P, 1, D]
            out = self.swiglu(xs, w13t.index_select(0, expert), w2t.index_select(0, expert), weights.view(-1, 1, 1))
            y = out.view(N, k, D).sum(dim=1)  # [N, D] slots added in order, the shared expert last
        else:
            if load is None:
                load = torch.bincount(indices.flatten(), minlength=E)  # [E]
            expert = indices.flatten()  # [P]
            order = expert.argsort(stable=True)  # [P] pairs grouped by expert
            e_sorted, token = expert[order], order // k  # [P] each sorted pair's expert and token
            first = load.cumsum(0) - load  # [E] where each expert's group starts in the sorted list
            slot = torch.arange(N * k, device=x.device) - first[e_sorted]  # [P] place inside its expert's group
            C = int(load.max())
            xs = x.new_zeros(E, C, D).index_put((e_sorted, slot), xq[token])  # [E, C, D]
            rw = weights.new_zeros(E, C, 1).index_put((e_sorted, slot), weights.flatten()[order, None])  # [E, C, 1]
            out = self.swiglu(xs, w13t[:E], w2t[:E], rw)  # [E, C, D]
            y = x.new_zeros(N, D).index_add(0, token, out[e_sorted, slot])  # [N, D]
            if shared:
                y = y + self.swiglu(xq.unsqueeze(0), w13t[E:], w2t[E:], None)[0]
        if self.shared_experts is not None and not shared:
            y = y + self.shared_experts(x)  # QDQs its own input under act_fp8
        return y

    def forward(self, x: torch.Tensor):
        """x: [B, S, D] → y [B, S, D], info (router scores, chosen experts, weights, load)."""
        shape = x.shape
        flat = x.reshape(-1, shape[-1])  # [N, D]
        w = self.stacked.get()
        if "w_in_t" in w:  # dense, one dtype, one input: the router's projection and every expert's gate/up, one matmul
            E, w_in_t = self.n_experts, w["w_in_t"]  # [D, E + (E+1)·2I]
            logits, gu = torch.mm(flat, w_in_t).split_with_sizes([E, w_in_t.size(1) - E], -1)  # [N, E], [N, (E+1)·2I]
            weights, indices, scores = route(logits, w["bias"], self.topk, self.route_scale, self.gate_temp)
            y = self.dense_ffn(gu, weights, indices, w)
        else:
            weights, indices, scores = self.gate(flat)
            y = self.routed(flat, weights, indices, None)
        return y.view(shape), RouterInfo(shape[:-1], scores, indices, weights, None)

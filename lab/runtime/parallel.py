"""The modules one rank of a sharded model runs instead of the whole ones, and the collectives that combine their
pieces: the vocab-parallel embedding and LM head, the row-parallel linear (plain and packed), the expert-parallel
MoE and the sharded Engram lookup. `distributed.shard_model` swaps them into a built lab model; the rules of who holds
which rows are `lab.realscale.ranks`' (the table at the top of distributed.py says which module splits how).
"""

from __future__ import annotations

from collections.abc import Callable

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from dspark_mini.engram import Engram
from dspark_mini.linear import cast
from dspark_mini.moe import MoE, act_qdq
from dspark_mini.packed import PackedLinear, PackedWeight, slice_packed
from dspark_mini.quant import Prepared, fake_quant, forget_prepared, fp8_qdq

from ..realscale.ranks import Parallel, ShardingError


# ---- collectives ---------------------------------------------------------------------------------------------
def all_reduce_sum(t: torch.Tensor, group, size: int) -> torch.Tensor:
    """Σ over the group's ranks of t (same shape everywhere); bf16/fp16 summed in fp32 as the reference does."""
    if size == 1:
        return t
    acc = t if t.dtype in (torch.float32, torch.float64) else t.float()
    acc = acc.contiguous()
    dist.all_reduce(acc, op=dist.ReduceOp.SUM, group=group)
    return cast(acc, t.dtype)


def all_gather_last(t: torch.Tensor, group, size: int) -> torch.Tensor:
    """[..., n] on each of `size` ranks → [..., size·n], rank order along the last dim."""
    if size == 1:
        return t
    t = t.contiguous()
    parts = [torch.empty_like(t) for _ in range(size)]
    dist.all_gather(parts, t, group=group)
    return torch.cat(parts, dim=-1)


def _param(t: torch.Tensor, like: torch.Tensor) -> nn.Parameter:
    """A shard as a parameter of its own storage (a slice would keep the whole tensor alive)."""
    return nn.Parameter(t.detach().clone(), requires_grad=like.requires_grad)


# ---- the parallel modules ------------------------------------------------------------------------------------
class VocabParallelEmbedding(nn.Module):
    """The token embedding split by vocab rows over the tensor-parallel group.

    weight [V/T, D]: rows start … start + V/T − 1 of the full table. ids [...] → [..., D]: each rank looks up the ids
    it holds (the others read row 0 and are zeroed), then all_reduce sums the one real row per id."""

    def __init__(self, full: nn.Embedding, par: Parallel):
        super().__init__()
        V, D = full.weight.shape
        self.num_embeddings, self.embedding_dim = V, D  # the full table's shape
        n = V // par.tp
        self.start = par.tp_rank * n
        self.weight = _param(full.weight[self.start : self.start + n], full.weight)  # [V/T, D]
        self.group, self.size = par.tp_group, par.tp

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        local = ids - self.start
        outside = (local < 0) | (local >= self.weight.size(0))  # [...]
        y = F.embedding(local.masked_fill(outside, 0), self.weight)  # [..., D]
        return all_reduce_sum(y.masked_fill(outside.unsqueeze(-1), 0), self.group, self.size)

    def extra_repr(self) -> str:
        last = self.start + self.weight.size(0) - 1
        return f"vocab {self.num_embeddings}: rows {self.start}..{last}, dim {self.embedding_dim}"


class VocabParallelHead(nn.Module):
    """The LM head split by vocab rows: weight [V/T, D]; x [..., D] → this rank's logits [..., V/T] → all_gather →
    the full logits [..., V] on every rank (in rank order = vocab order)."""

    def __init__(self, full: nn.Linear, par: Parallel):
        super().__init__()
        if full.bias is not None:
            raise ShardingError("the LM head has a bias: the vocab-parallel head is bias-free (as the checkpoint)")
        V, D = full.weight.shape
        self.in_features, self.out_features = D, V
        n = V // par.tp
        self.start = par.tp_rank * n
        self.weight = _param(full.weight[self.start : self.start + n], full.weight)  # [V/T, D]
        self.group, self.size = par.tp_group, par.tp

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return all_gather_last(F.linear(x, self.weight), self.group, self.size)  # [..., V]

    def extra_repr(self) -> str:
        last = self.start + self.weight.size(0) - 1
        return f"vocab {self.out_features}: rows {self.start}..{last}, dim {self.in_features}"


class RowParallelLinear(nn.Module):
    """y = Σ_ranks x_r · W_rᵀ: the input features split over the group (weight [O, I/T], this rank's columns), each
    rank's partial product all_reduce'd. The attention's wo_b: its input is the rank's own O-LoRA groups."""

    def __init__(self, full: nn.Linear, start: int, stop: int, group, size: int):
        super().__init__()
        if full.bias is not None:
            raise ShardingError("a row-parallel projection with a bias is not supported (wo_b has none)")
        self.in_features, self.out_features = stop - start, full.weight.size(0)
        self.start = start
        self.weight = _param(full.weight[:, start:stop], full.weight)  # [O, I/T]
        self.group, self.size = group, size

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x [..., I/T] (this rank's slice of the input) → [..., O], the full sum."""
        return all_reduce_sum(F.linear(x, self.weight), self.group, self.size)


class PackedRowParallelLinear(PackedLinear):
    """RowParallelLinear over a packed weight: the codes and scales of this rank's columns [O, I/T] (cut on the
    32-wide scale blocks), dequantized at use; the partial product all_reduce'd."""

    def __init__(self, packed: PackedLinear, start: int, group, size: int):
        super().__init__(packed.fmt, packed.qweight, packed.scale, packed.compute_dtype, packed.name)
        self.start, self.group, self.size = start, group, size

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """x [..., I/T] → [..., O], the full sum."""
        return all_reduce_sum(F.linear(x, self.weight), self.group, self.size)


def row_parallel(full: nn.Module, start: int, stop: int, group, size: int) -> nn.Module:
    """The row-parallel form of a Linear or a packed Linear, keeping input columns start … stop − 1."""
    if isinstance(full, PackedWeight):
        return PackedRowParallelLinear(slice_packed(full, 1, start, stop), start, group, size)
    return RowParallelLinear(full, start, stop, group, size)


class ExpertParallelMoE(nn.Module):
    """A `dspark_mini.moe.MoE` whose routed experts are split over the ranks (expert parallelism).

    Every rank holds the router (`gate`, replicated, so all ranks pick the same experts), the shared expert
    (replicated) and experts lo … hi − 1 only. Each rank runs *its* experts for every token that chose them and
    all_reduce sums the partial outputs — exactly how DeepSeek's reference inference combines its experts
    (`MoE.forward`: a loop over the local experts, `dist.all_reduce(y)`, then `y += shared_experts(x)`); serving
    engines dispatch only the tokens instead (all-to-all), which moves less data at large batch but sums the same.

    Same math as MoE for each expert: y += w2_e( w · silu(min(w1_e x, L)) · clamp(w3_e x, ±L) ), the weights
    MXFP4-QDQ'd as `Expert.weight` does it (stacked once for the local experts, `quant.Prepared`), x and h FP8-QDQ'd
    before their matmuls under `expert_act_quant` (`moe.act_qdq`), as in MoE."""

    def __init__(self, moe: MoE, par: Parallel):
        super().__init__()
        E = moe.n_experts
        n = E // par.size
        self.n_experts, self.lo, self.hi = E, par.rank * n, par.rank * n + n
        self.gate = moe.gate
        # global ids as the checkpoint names them (`experts.{e}.w1.weight`); another rank's expert is None (as in the
        # reference's MoE), so experts[e] is this rank's expert e or None
        self.experts = nn.ModuleList(moe.experts[e] if self.lo <= e < self.hi else None for e in range(E))
        self.shared_experts = moe.shared_experts
        self.limit, self.act_fp8 = moe.experts[self.lo].limit, moe.act_fp8
        self.group, self.size, self.rank = par.group, par.size, par.rank
        self.stacked = Prepared(self.stack_local, self.local_params)  # (w13ᵀ, w2ᵀ) of the local experts: a cache
        self.register_load_state_dict_post_hook(forget_prepared)

    def local_experts(self) -> list[nn.Module]:
        return [self.experts[e] for e in range(self.lo, self.hi)]

    def local_params(self) -> list[torch.Tensor]:
        return [getattr(ex, n).weight for ex in self.local_experts() for n in ("w1", "w2", "w3")]

    def stack_local(self) -> tuple[torch.Tensor, torch.Tensor]:
        """The local experts as the kernel sees them: w13ᵀ [E/N, D, 2I] = [w1ᵀ ‖ w3ᵀ], w2ᵀ [E/N, I, D]."""
        ex = self.local_experts()
        w1 = torch.stack([e.weight("w1") for e in ex])  # [E/N, I, D]  (MXFP4-QDQ'd when the expert is fp4)
        w3 = torch.stack([e.weight("w3") for e in ex])  # [E/N, I, D]
        w2 = torch.stack([e.weight("w2") for e in ex])  # [E/N, D, I]
        return torch.cat([w1, w3], dim=1).mT.contiguous(), w2.mT.contiguous()

    def prepare(self) -> None:
        self.stacked.rebuild()

    def local(self, x: torch.Tensor, weights: torch.Tensor, indices: torch.Tensor, load: torch.Tensor) -> torch.Tensor:
        """This rank's share: Σ over the (token, slot) pairs that chose a local expert.  x [N, D] → [N, D]"""
        w13t, w2t = self.stacked.get()  # [E/N, D, 2I], [E/N, I, D]
        y = x.new_zeros(x.shape)  # [N, D]
        x = act_qdq(x, self.act_fp8)  # the experts' input
        for j, count in enumerate(load[self.lo : self.hi].tolist()):
            if count == 0:
                continue
            tok, slot = torch.nonzero(indices == self.lo + j, as_tuple=True)  # [n] each
            gate, up = torch.matmul(x[tok], w13t[j]).chunk(2, dim=-1)  # [n, I] each
            if self.limit > 0:
                up = up.clamp(-self.limit, self.limit)
                gate = gate.clamp(max=self.limit)
            h = F.silu(gate) * up * cast(weights[tok, slot], up.dtype).unsqueeze(-1)  # [n, I] weighted before w2
            y.index_add_(0, tok, torch.matmul(act_qdq(h, self.act_fp8), w2t[j]))  # [n, D]
        return y

    def forward(self, x: torch.Tensor):
        """x [B, S, D] → y [B, S, D], the router's info — as `MoE.forward`."""
        shape = x.shape
        flat = x.reshape(-1, shape[-1])  # [N, D]
        weights, indices, scores = self.gate(flat)  # [N, k], [N, k], [N, E] — the same on every rank
        load = torch.bincount(indices.flatten(), minlength=self.n_experts)  # [E]
        y = all_reduce_sum(self.local(flat, weights, indices, load), self.group, self.size)
        if self.shared_experts is not None:
            y = y + self.shared_experts(flat)
        info = {  # as `MoE.forward` reports the router
            "scores": scores.view(*shape[:-1], -1),
            "indices": indices.view(*shape[:-1], -1),
            "weights": weights.view(*shape[:-1], -1),
            "load": load,
        }
        return y.view(shape), info

    def extra_repr(self) -> str:
        return f"experts {self.lo}..{self.hi - 1} of {self.n_experts} (rank {self.rank} of {self.size})"


class ShardedLookup:
    """Stands in for `Engram.lookup` once the table holds rows lo … hi − 1 only: ids off the shard read row 0 of
    it and are zeroed, the library's own lookup (its FP8 QDQ, its prepared table) runs on the shard, and
    all_reduce sums the one real row of every id.  row_ids [B, S, C] (global) → [B, S, C, head_dim]
    A packed shard (`PackedEmbedding`, FP8 rows) dequantizes only the rows looked up, then applies the same QDQ as
    `Engram.lookup` (a no-op on rows already on the FP8 grid, kept so that both paths are one computation): the
    same values, bit for bit, as the library's lookup on the dequantized table, without dequantizing the table."""

    def __init__(self, engram: Engram, lookup: Callable, lo: int, hi: int, par: Parallel):
        self.engram, self.base, self.lo, self.hi = engram, lookup, lo, hi
        self.group, self.size = par.group, par.size

    def __call__(self, row_ids: torch.Tensor) -> torch.Tensor:
        local = row_ids - self.lo
        outside = (local < 0) | (local >= self.hi - self.lo)  # [B, S, C]
        if self.hi > self.lo:
            local = local.masked_fill(outside, 0)
            if isinstance(self.engram.embed, PackedWeight):
                rows = self.engram.embed(local)  # [B, S, C, hd]: only these rows dequantized
                if self.engram.cfg.engram_table_quant:
                    rows = fake_quant(rows, fp8_qdq, 32)
            else:
                rows = self.base(self.engram, local)  # [B, S, C, hd]
            rows = rows.masked_fill(outside.unsqueeze(-1), 0)
        else:  # more ranks than rows: this rank holds none
            w = self.engram.embed.weight
            rows = w.new_zeros(*row_ids.shape, w.size(1))
        return all_reduce_sum(rows, self.group, self.size)

"""One model over N ranks with torch.distributed: expert, tensor and vocab parallelism, launched by torchrun.

The sharding rules are those of DeepSeek's reference inference code (`inference/model.py` of the V4.1-Flash
repository: `ParallelEmbedding`, `ColumnParallelLinear`, `RowParallelLinear`, `ParallelEngramEmbedding`, `MoE`,
`ParallelHead`), written again here in our own words, applied to a built lab model
from the outside: the modules of `dspark_mini` are not edited, their submodules are swapped or sliced by walking
the module tree (as `dspark_mini.packed.pack_model` does). Inference only (the collectives carry no gradient).

  what                        held by a rank (r of N; t of T in its tensor-parallel group)      combined by
  routed experts (EP)         experts e with e // (E/N) == r (contiguous blocks), every layer   all_reduce (sum)
                              — the backbone's E and the draft's E' alike
  router (gate) + bias        replicated: every rank routes every token the same way            —
  shared expert               replicated (the reference keeps it whole on every rank: it is small
                              and every token uses it; sharding it would add a collective)       —
  attention (TP over groups)  heads h with h // (H/T) == t; wq_b rows of those heads (column-     all_reduce (sum)
                              parallel), their sinks, wo_a rows of groups g // (G/T) == t (the      after wo_b
                              block-diagonal O-LoRA: group g reads only its own heads), wo_b
                              columns of those groups (row-parallel); wq_a, wkv, norms, the
                              compressor and the indexer replicated (the reference also splits
                              the indexer heads, all_reduce'ing their scores; here it stays whole)
  token embedding             rows [t·V/T, (t+1)·V/T); masked lookup (ids off the shard read row  all_reduce (sum)
                              0, then zeroed)
  LM head                     the same vocab rows; each rank computes its slice of the logits     all_gather (concat)
  Engram tables               rows [r·⌈R/N⌉, (r+1)·⌈R/N⌉) — ceil division as the reference's       all_reduce (sum)
                              `ParallelEngramEmbedding`: the real layer-14 table (384,016,682
                              rows) divides by 2 but not by 4 or 8; masked lookup, FP8 QDQ of
                              the shard's rows as the lab does it for the whole table
  DSpark Markov head          W1 [V, r] and W2 [V, r] split by vocab rows like the token embedding all_reduce /
                              and the head (the reference's DSparkMarkovHead holds a                all_gather
                              ParallelEmbedding and a ParallelHead)
  the rest                    replicated (mHC mixes, norms, the DSpark taps / main_x / main_proj,  —
                              the confidence head, the KV cache: one MQA latent, alike on every
                              rank)

T = N in the reference (one group of ranks does everything). Here T is `tp`, a divisor of N: the default T = N is
the reference's layout and refuses what does not divide; T < N runs attention and the vocab T-way inside each of
the N/T tensor-parallel groups of consecutive ranks and replicates them across groups (what vLLM / SGLang call
data-parallel attention), while the experts and Engram tables stay N-way. The lab model has o_groups = 2 and a
vocabulary that 2 divides and 4 does not, so 4 ranks need tp = 2 (or 1).

Every sum of partial results is exact up to the order of additions (masked lookups add exact zeros), and after
each collective every rank holds the same values, so greedy (and seeded) decoding takes the same path on every
rank: the data-dependent steps (top-k routing, acceptance) never diverge.

Loading a checkpoint (`load_sharded`): each rank estimates its bytes from config.json (`placement.py`) and refuses
what does not fit before allocating; builds the model on `meta` (no weight storage), shards it there, then reads
only its share — `rank_slice` says which rows / columns of each tensor, read as safetensors slices. Packed weights
(FP8 32×32 blocks, MXFP4 and FP8 rows with E8M0 scales) are cut on their scale blocks and stay packed, so a rank
holds its share of the checkpoint's bytes, not of bf16's. `shard_model` cuts an already packed model the same way.

Bad input: a world size or tp that does not divide the routed experts, the attention groups/heads or the vocab is a
`ShardingError` (a ValueError) naming each, raised on every rank by `check_shardable` from the config alone —
before any process group or collective exists, so no rank waits for another. Errors that may differ between
ranks (a missing shard of one rank's experts) are exchanged first (`agree`), so every rank raises, naming the rank.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import torch
import torch.distributed as dist
from torch import nn

from dspark_mini.attention import Attention
from dspark_mini.config import ModelConfig
from dspark_mini.device import check_device, compute_config
from dspark_mini.engram import Engram
from dspark_mini.model import Recorder
from dspark_mini.moe import MoE
from dspark_mini.packed import PackedWeight, drop_weight_caches, replace_module, slice_packed
from dspark_mini.quant import forget_prepared
from dspark_mini.validate import check_int

from ..realscale import placement
from ..realscale.export import CheckpointReader, build_on_meta, folder_tokenizer, load_checkpoint, read_config
from ..realscale.layout import lab_tensors
from ..realscale.ranks import SINGLE, Parallel, ShardingError, check_shardable, engram_rows, rank_slice, sliced_shape
from .parallel import (
    ExpertParallelMoE,
    PackedRowParallelLinear,
    RowParallelLinear,
    ShardedLookup,
    VocabParallelEmbedding,
    VocabParallelHead,
    _param,
    row_parallel,
)

DEFAULT_TIMEOUT_S = 300.0  # a collective that waits longer than this fails instead of hanging


# ---- ranks: torchrun's environment, the process group -----------------------------------------------------
@dataclass(frozen=True)
class DistEnv:
    """What torchrun tells each process (RANK, WORLD_SIZE, LOCAL_RANK, MASTER_ADDR, MASTER_PORT)."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    master_addr: str | None = None
    master_port: int | None = None

    @property
    def label(self) -> str:
        return f"rank {self.rank}/{self.world_size}"


def _env_int(env, name: str, default: int | None) -> int | None:
    raw = env.get(name)
    if raw is None or raw == "":
        return default
    try:
        return int(raw)
    except ValueError:
        raise ShardingError(f"environment variable {name} = {raw!r} is invalid: allowed an integer") from None


def read_env(env=None) -> DistEnv:
    """torchrun's variables (absent: one process, rank 0 of 1), checked."""
    env = os.environ if env is None else env
    world = _env_int(env, "WORLD_SIZE", 1)
    rank = _env_int(env, "RANK", 0)
    local = _env_int(env, "LOCAL_RANK", rank)
    if world < 1:
        raise ShardingError(f"environment variable WORLD_SIZE = {world} is invalid: allowed ≥ 1")
    if not 0 <= rank < world:
        raise ShardingError(f"environment variable RANK = {rank} is invalid: allowed 0..{world - 1} (WORLD_SIZE)")
    if local < 0:
        raise ShardingError(f"environment variable LOCAL_RANK = {local} is invalid: allowed ≥ 0")
    addr, port = env.get("MASTER_ADDR"), _env_int(env, "MASTER_PORT", None)
    if world > 1 and (not addr or port is None):
        missing = [n for n, v in (("MASTER_ADDR", addr), ("MASTER_PORT", port)) if not v]
        raise ShardingError(
            f"WORLD_SIZE = {world} but {', '.join(missing)} is not set: launch with torchrun (it sets them), "
            "or set MASTER_ADDR / MASTER_PORT / RANK / WORLD_SIZE yourself"
        )
    return DistEnv(rank, world, local, addr, port)


@dataclass(frozen=True)
class DistInfo:
    """This process after `init_distributed`: its rank, the world, the backend and the device it computes on."""

    rank: int
    world_size: int
    local_rank: int
    backend: str | None  # None: a single process, no process group
    device: torch.device


def init_distributed(device: str | None = "cpu", timeout_s: float = DEFAULT_TIMEOUT_S, env=None) -> DistInfo:
    """Join the process group torchrun set up: `gloo` on CPU, `nccl` on CUDA (each rank on GPU LOCAL_RANK).

    One process (no torchrun): no group, rank 0 of 1. Already initialized: the existing group is used. Rank 0
    prints; call `quiet_other_ranks` to silence the others' stdout (stderr stays: errors show on every rank)."""
    e = read_env(env)
    kind = check_device(device, "device").type
    if kind == "cuda":
        if e.local_rank >= torch.cuda.device_count():
            raise ShardingError(
                f"LOCAL_RANK = {e.local_rank} but this node has {torch.cuda.device_count()} GPU(s): "
                "--nproc-per-node must not exceed the GPUs of a node"
            )
        torch.cuda.set_device(e.local_rank)
        dev = torch.device("cuda", e.local_rank)
    else:
        dev = torch.device("cpu")
    if dist.is_available() and dist.is_initialized():
        return DistInfo(dist.get_rank(), dist.get_world_size(), e.local_rank, dist.get_backend(), dev)
    if e.world_size == 1:
        return DistInfo(0, 1, 0, None, dev)
    backend = "nccl" if kind == "cuda" else "gloo"
    dist.init_process_group(
        backend, init_method="env://", rank=e.rank, world_size=e.world_size, timeout=timedelta(seconds=timeout_s)
    )
    return DistInfo(e.rank, e.world_size, e.local_rank, backend, dev)


def quiet_other_ranks(rank: int | None = None) -> None:
    """Rank 0 prints; every other rank's stdout goes to /dev/null (its stderr stays, so errors show everywhere)."""
    rank = read_env().rank if rank is None else rank
    if rank != 0:
        sys.stdout.flush()
        sys.stdout = open(os.devnull, "w", encoding="utf-8")  # noqa: SIM115 - for the life of the process


def finish_distributed(barrier: bool = False) -> None:
    """Leave the process group (if any). barrier=True (after a run that went well): wait for every rank first — a
    rank that tears its groups down while another still receives from it can abort that one."""
    if dist.is_available() and dist.is_initialized():
        if barrier:
            dist.barrier()
        dist.destroy_process_group()


def make_parallel(size: int | None = None, tp: int | None = None) -> Parallel:
    """This rank's `Parallel` for shards of `size` ranks (default: the whole world; a smaller size splits the world
    into world/size independent copies of the model, each over consecutive ranks) and tensor-parallel `tp`.

    Creates process groups: every rank of the world must call it, with the same arguments, in the same order."""
    if not (dist.is_available() and dist.is_initialized()):
        if size not in (None, 1) or tp not in (None, 1):
            raise ShardingError(f"ranks = {size}, tp = {tp} need torch.distributed: launch with torchrun")
        return SINGLE
    world, me = dist.get_world_size(), dist.get_rank()
    size = world if size is None else size
    tp = size if tp is None else tp
    check_int(size, "ranks", 1, error=ShardingError, allowed=f"a divisor of the world size {world}")
    if world % size:
        raise ShardingError(f"ranks = {size!r} is invalid: allowed a divisor of the world size {world}")
    check_int(tp, "tp", 1, error=ShardingError, allowed=f"a divisor of ranks = {size}")
    if size % tp:
        raise ShardingError(f"tp = {tp!r} is invalid: allowed a divisor of ranks = {size}")
    mine: dict[str, Any] = {}
    for start in range(0, world, size):  # every rank creates every group, in this order
        ranks = list(range(start, start + size))
        g = dist.group.WORLD if size == world else (dist.new_group(ranks) if size > 1 else None)
        tp_groups = {}
        for t0 in range(start, start + size, tp):
            tr = list(range(t0, t0 + tp))
            tp_groups[t0] = g if tp == size else (dist.new_group(tr) if tp > 1 else None)
        if me in ranks:
            t0 = start + (me - start) // tp * tp
            mine = {"group": g, "rank": me - start, "tp_group": tp_groups[t0], "tp_rank": me - t0}
    return Parallel(mine["group"], mine["rank"], size, mine["tp_group"], mine["tp_rank"], tp)


def agree(par: Parallel, fn: Callable[[], Any]) -> Any:
    """fn() on every rank of the group; if it raised anywhere, every rank raises a ShardingError naming the ranks
    and their errors (so one rank's failure is a clear error everywhere instead of the others waiting for it)."""
    if par.size == 1:
        return fn()
    try:
        result, err = fn(), None
    except Exception as e:  # noqa: BLE001 - reported on every rank, below
        result, err = None, f"{type(e).__name__}: {e}"
    errs: list[str | None] = [None] * par.size
    dist.all_gather_object(errs, err, group=par.group)
    by_error: dict[str, list[int]] = {}
    for r, e in enumerate(errs):
        if e is not None:
            by_error.setdefault(e, []).append(r)
    if by_error:
        raise ShardingError(
            "; ".join(
                f"{'every rank' if len(rs) == par.size else 'rank ' + ', '.join(map(str, rs))} of {par.size}: {e}"
                for e, rs in by_error.items()
            )
        )
    return result


# ---- sharding a built model -----------------------------------------------------------------------------------
_ATTN_NEEDS = ("n_heads", "head_dim", "groups", "o_rank", "wq_b", "wo_a", "wo_b", "attn_sink")


def _check_attributes(mod: nn.Module, names: tuple[str, ...], path: str) -> None:
    missing = [n for n in names if not hasattr(mod, n)]
    if missing:
        raise ShardingError(
            f"{path} ({type(mod).__name__}) has no {', '.join(missing)}: lab/runtime/distributed.py must follow "
            "the module's new layout"
        )


def all_gather_dim(t: torch.Tensor, dim: int, group, size: int) -> torch.Tensor:
    """Each rank's slice along `dim` → the whole tensor, rank order along `dim` (the ranks hold the same shape)."""
    if size == 1:
        return t
    t = t.contiguous()
    parts = [torch.empty_like(t) for _ in range(size)]
    dist.all_gather(parts, t, group=group)
    return torch.cat(parts, dim=dim)


class HeadGatheringRecorder:
    """A trace recorder for a head-sharded attention: the per-head diagnostics of step 4A (probs [B, S, H/T, T_k],
    window / compressed / sink shares [B, S, H/T]) are gathered over the tensor-parallel group to all H heads
    before they are recorded, so `walk` and the inspector see the whole layer. Every rank records (in lockstep)."""

    PER_HEAD = frozenset({"probs", "window_share", "compressed_share", "sink_share"})  # head dim = 2

    def __init__(self, rec, group, size: int):
        self.rec, self.group, self.size = rec, group, size

    def __call__(self, step: str, name: str, value: torch.Tensor) -> None:
        if step == "4A" and name in self.PER_HEAD:
            value = all_gather_dim(value, 2, self.group, self.size)
        self.rec(step, name, value)

    def __getattr__(self, name: str):
        return getattr(self.rec, name)  # sinkhorn_history, trace, layer


class HeadShardedForward:
    """Stands in for `Attention.forward` on a head-sharded layer: the library's forward, with any trace recorder
    it is given wrapped in a `HeadGatheringRecorder`."""

    def __init__(self, attn: Attention, par: Parallel):
        self.attn, self.base, self.group, self.size = attn, type(attn).forward, par.tp_group, par.tp

    def __call__(self, *args, **kwargs):
        args = tuple(self._wrap(a) for a in args)
        kwargs = {k: self._wrap(v) for k, v in kwargs.items()}
        return self.base(self.attn, *args, **kwargs)

    def _wrap(self, v):
        return HeadGatheringRecorder(v, self.group, self.size) if isinstance(v, Recorder) else v


def _keep_rows(mod: nn.Module, start: int, stop: int) -> nn.Module:
    """A Linear (in place) or a packed Linear (a new one, its codes and scales cut) keeping output rows
    start … stop − 1."""
    if isinstance(mod, PackedWeight):
        return slice_packed(mod, 0, start, stop)
    mod.weight = _param(mod.weight[start:stop], mod.weight)
    mod.out_features = stop - start
    return mod


def shard_attention(attn: Attention, par: Parallel, path: str = "attn") -> None:
    """Keep this rank's heads and O-LoRA groups (tensor parallelism over the output groups), in place.

    Head h belongs to group h // (H/G); rank t of T keeps heads [t·H/T, (t+1)·H/T) = groups [t·G/T, (t+1)·G/T):
      wq_b  [H·Dh, Rq] → rows of those heads [H/T·Dh, Rq]      (column-parallel: q of the local heads only)
      attn_sink [H]    → [H/T]
      wo_a  [G·R, H·Dh/G] → rows of those groups [G/T·R, H·Dh/G] (block-diagonal: group g reads its own heads)
      wo_b  [D, G·R]   → columns of those groups [D, G/T·R], RowParallelLinear: all_reduce after it."""
    _check_attributes(attn, _ATTN_NEEDS, path)
    T, t = par.tp, par.tp_rank
    if T == 1:
        return
    H, Dh, G, R = attn.n_heads, attn.head_dim, attn.groups, attn.o_rank
    hn, gn = H // T, G // T
    h0, g0 = t * hn, t * gn
    attn.wq_b = _keep_rows(attn.wq_b, h0 * Dh, (h0 + hn) * Dh)  # [H/T·Dh, Rq]
    attn.attn_sink = _param(attn.attn_sink[h0 : h0 + hn], attn.attn_sink)  # [H/T]
    attn.wo_a = _keep_rows(attn.wo_a, g0 * R, (g0 + gn) * R)  # [G/T·R, H·Dh/G]
    attn.wo_b = row_parallel(attn.wo_b, g0 * R, (g0 + gn) * R, par.tp_group, T)  # [D, G/T·R]
    attn.n_heads, attn.groups = hn, gn
    forget_prepared(attn)  # the prepared forms (block-diagonal wo_a, …) are rebuilt from the shards
    attn.forward = HeadShardedForward(attn, par)  # an instance attribute: traces see all heads


def shard_engram(engram: Engram, par: Parallel) -> None:
    """Keep this rank's rows of the Engram table (row-sharded, ceil division), in place: embed [R, hd] → [hi − lo, hd];
    `lookup` becomes a `ShardedLookup` (masked lookup + all_reduce)."""
    if par.size == 1:
        return
    base = type(engram).lookup
    lo, hi = engram_rows(engram.embed.num_embeddings, par)
    if isinstance(engram.embed, PackedWeight):  # FP8 rows: the shard's codes and scales, nothing re-quantized
        engram.embed = slice_packed(engram.embed, 0, lo, hi)
    else:
        full = engram.embed.weight  # [R, hd]
        table = nn.Embedding(
            hi - lo, full.size(1), dtype=full.dtype, device=full.device, _weight=full[lo:hi].detach().clone()
        )  # [hi − lo, hd]
        table.weight.requires_grad_(full.requires_grad)
        engram.embed = table
    forget_prepared(engram)  # the QDQ'd table is rebuilt from the shard
    engram.lookup = ShardedLookup(engram, base, lo, hi, par)  # an instance attribute: shadows Engram.lookup


@torch.no_grad()
def shard_model(model: nn.Module, par: Parallel) -> nn.Module:
    """Turn a built lab model into this rank's shard of it, in place (and return it): every MoE → ExpertParallelMoE,
    every Attention's heads / groups split, every Engram table row-sharded, embed / head and the DSpark Markov head's
    W1 / W2 vocab-parallel. Found by walking the module tree, so the draft's blocks (`mtp.layers.*`) are sharded the
    same way. Packed weights (`dspark_mini.packed`) are cut as stored — codes and scales, on their 32-wide blocks —
    and stay packed. Works on a model built on `meta` too (shapes only: `load_sharded` fills it afterwards).
    Inference only."""
    cfg = getattr(model, "cfg", None)
    if not isinstance(cfg, ModelConfig):
        raise ShardingError(f"shard_model needs a dspark_mini Transformer with a .cfg (got {type(model).__name__})")
    check_shardable(cfg, par.size, par.tp)
    if getattr(model, "parallel", None) is not None:
        raise ShardingError("this model is already sharded: shard a freshly built or loaded model")
    if par.size == 1:
        model.parallel = par
        return model
    todo = [(p, m) for p, m in model.named_modules() if isinstance(m, (MoE, Attention, Engram))]
    for path, mod in todo:
        if isinstance(mod, MoE):
            replace_module(model, path, ExpertParallelMoE(mod, par))
        elif isinstance(mod, Attention):
            shard_attention(mod, par, path)
        else:
            shard_engram(mod, par)
    model.embed = VocabParallelEmbedding(model.embed, par)
    model.head = VocabParallelHead(model.head, par)
    markov = getattr(getattr(model, "mtp", None), "markov_head", None)
    if markov is not None:  # the DSpark Markov head's W1 [V, r] and W2 [V, r]: vocab-parallel too (as the reference)
        _check_attributes(markov, ("embed", "head"), "mtp.markov_head")
        markov.embed = VocabParallelEmbedding(markov.embed, par)
        markov.head = VocabParallelHead(markov.head, par)
    if any(isinstance(m, PackedWeight) for m in model.modules()):
        drop_weight_caches(model)  # the new stacks (ExpertParallelMoE) too: nothing dequantized is kept
    model.parallel = par
    return model


def load_sharded(
    folder: str | os.PathLike,
    par: Parallel,
    device: str | torch.device | None = None,
    packed: bool = False,
    dtype: str | None = None,
    free: int | None = None,
    tokenizer_required: bool = False,
) -> nn.Module:
    """This rank's shard of the model in a checkpoint folder (`export_checkpoint`'s layout, lab or official style).

    1. the memory estimate from config.json and the shard headers (`placement.estimate_rank`), refused before
       anything is allocated when it exceeds what `device` has free (`free`: injected free bytes, for tests);
    2. the model built on `meta` (its weights have shapes, no storage; only the small buffers are real) in the
       compute `dtype` (default the checkpoint config's), and sharded there (`shard_model`: shapes only);
    3. every tensor the shard holds read from the shards as a safetensors slice — only this rank's experts, rows
       of the vocab-parallel embed / head / Markov head and of the Engram tables, its attention rows / columns —
       kept packed as stored (`packed`: FP8 / FP4 codes + E8M0 scales, cut on their blocks) or dequantized.
    The model's `read_bytes` says how many bytes of tensor data this rank read. A failure on any rank (it does not
    fit, a missing shard of its experts, a truncated file) is raised on every rank, naming the rank."""

    cfg = read_config(folder)[0]
    check_shardable(cfg, par.size, par.tp)
    return agree(par, lambda: _load_shard(folder, par, device, packed, dtype, free, tokenizer_required))


@torch.no_grad()
def _load_shard(
    folder, par: Parallel, device, packed: bool, dtype: str | None, free: int | None, tokenizer_required: bool = False
) -> nn.Module:
    from dspark_mini.packed import PACKED_FORMATS, packed_module

    dev = check_device(device, "device")
    reader = CheckpointReader(folder)
    cfg = reader.cfg
    # from config.json alone (the layout): another rank's missing shard is not this rank's problem
    est = placement.estimate_rank(cfg, par, packed=packed, dtype=dtype, style=reader.style)
    placement.check_fits(est, dev, free)  # before any weight is allocated
    model = build_on_meta(compute_config(cfg, dtype))
    tok = folder_tokenizer(reader.folder, cfg, reader.lab_section, tokenizer_required)
    if tok is not None:  # Engram reads the compressed ids of the checkpoint's own vocabulary (as load_checkpoint)
        model.compress_map.copy_(torch.tensor(tok.compress_map))  # [V] every rank holds all of it
    shard_model(model, par)
    full = lab_tensors(cfg)
    for name, t in list(model.state_dict(keep_vars=True).items()):
        if name not in full:
            raise ShardingError(f"the sharded model holds {name!r}, which a checkpoint of {cfg.name} does not have")
        cut = rank_slice(cfg, par, name, full[name][0])
        if tuple(t.shape) != sliced_shape(full[name][0], cut):
            raise ShardingError(
                f"{name}: the shard holds {list(t.shape)} but rank_slice gives {list(sliced_shape(full[name][0], cut))}"
                " — shard_model and rank_slice disagree"
            )
        path, _, attr = name.rpartition(".")
        holder = model.get_submodule(path)
        fmt = reader.stored_of(name)[0].fmt
        if packed and fmt in PACKED_FORMATS:
            q, s = reader.packed_slice(name, cut)
            new = packed_module(fmt, q, s, t.dtype, name)
            if isinstance(holder, RowParallelLinear):
                new = PackedRowParallelLinear(new, holder.start, holder.group, holder.size)
            replace_module(model, path, new)
        elif isinstance(t, nn.Parameter):
            setattr(holder, attr, nn.Parameter(reader.lab_slice(name, cut, t.dtype), t.requires_grad))
        else:
            holder.register_buffer(attr, reader.lab_slice(name, cut, t.dtype))  # a persistent buffer (state dict)
    left = [n for n, v in (*model.named_parameters(), *model.named_buffers()) if v.is_meta]
    if left:
        raise ShardingError(f"{len(left)} tensor(s) were not read, e.g. {left[0]!r}: the shard is incomplete")
    if packed:
        drop_weight_caches(model)
    temps = reader.lab_section.get("confidence_temperatures")
    if model.mtp is not None and temps is not None:
        model.mtp.set_confidence_temperatures(temps)
    model.read_bytes = reader.bytes_read
    reader.close()
    model = model.to(dev)
    model.tokenizer = tok  # as load_checkpoint keeps it
    return model


def maybe_distributed(model: nn.Module, tp: int | None = None, device: str | None = None) -> nn.Module:
    """The model as this rank's shard when the process was started by torchrun with more than one rank; unchanged
    otherwise. tp: tensor-parallel size (default: $DSPARK_TP, else all ranks — DeepSeek's layout, which refuses
    what does not divide). Checks every size before joining the process group (a clear error on every rank).
    device: where the model (or shard) goes — one process: that device; several ranks: cpu, or cuda = GPU LOCAL_RANK
    (None: where the model is)."""
    env = read_env()
    if env.world_size == 1:
        return model.to(device) if device is not None else model
    if tp is None and os.environ.get("DSPARK_TP"):
        tp = _env_int(os.environ, "DSPARK_TP", None)
    cfg = getattr(model, "cfg", None)
    if not isinstance(cfg, ModelConfig):
        raise ShardingError(
            f"maybe_distributed needs a dspark_mini Transformer with a .cfg (got {type(model).__name__})"
        )
    tp = check_shardable(cfg, env.world_size, tp)
    if device is None:
        device = model.device.type if hasattr(model, "device") else "cpu"
    info = init_distributed(device)
    par = make_parallel(env.world_size, tp)
    return agree(par, lambda: shard_model(model, par).to(info.device))


def maybe_distributed_load(
    folder: str | os.PathLike,
    tp: int | None = None,
    device: str | None = None,
    packed: bool = False,
    dtype: str | None = None,
    tokenizer_required: bool = False,
) -> nn.Module:
    """`load_checkpoint(folder)` in one process; under torchrun with more than one rank, this rank's shard with only
    its tensors read (`load_sharded`). tp as in `maybe_distributed`. Sizes are checked from config.json alone before
    the process group is joined; the memory estimate of each rank runs before anything is allocated."""

    env = read_env()
    if env.world_size == 1:
        return load_checkpoint(folder, packed=packed, device=device, dtype=dtype, tokenizer_required=tokenizer_required)
    if tp is None and os.environ.get("DSPARK_TP"):
        tp = _env_int(os.environ, "DSPARK_TP", None)
    tp = check_shardable(read_config(folder)[0], env.world_size, tp)
    info = init_distributed(device or "cpu")
    par = make_parallel(env.world_size, tp)
    return load_sharded(folder, par, info.device, packed, dtype, tokenizer_required=tokenizer_required)


def held_bytes(model: nn.Module) -> int:
    """Bytes of the parameters and persistent buffers this rank holds."""
    return sum(t.nbytes for t in model.state_dict().values())

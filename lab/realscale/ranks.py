"""One rank's place in a sharded model and what it holds, from the config alone (no process group needed):
`Parallel` (the expert/Engram group and the tensor-parallel group inside it), `check_shardable` (a split that does
not divide is refused on every rank before any collective), `rank_slice` (the rows or columns of a tensor this rank
holds), `rank_selector` (which tensors it reads). The loader (lab/runtime/distributed.py) and the memory estimate
(placement.py) follow exactly these rules.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from dspark_mini.config import ModelConfig
from dspark_mini.validate import check_int


class ShardingError(ValueError):
    """The model cannot be sharded this way (a size that does not divide, a rank that failed); the message says
    which tensor / option / rank."""


# ---- one rank's place ---------------------------------------------------------------------------------------
@dataclass
class Parallel:
    """One rank's place in a sharded model: the group the experts and Engram tables are split over (`size`
    ranks, this one is `rank`), and inside it the tensor-parallel group of `tp` consecutive ranks that splits
    attention and the vocab (this one is `tp_rank`). size == 1: nothing is split (no collectives)."""

    group: Any = None
    rank: int = 0
    size: int = 1
    tp_group: Any = None
    tp_rank: int = 0
    tp: int = 1

    def describe(self) -> dict[str, int]:
        return {"ranks": self.size, "rank": self.rank, "tp": self.tp, "tp_rank": self.tp_rank}


SINGLE = Parallel()


def _divisors(n: int) -> list[int]:
    return [d for d in range(1, n + 1) if n % d == 0]


def check_shardable(cfg: ModelConfig, size: int, tp: int | None = None) -> int:
    """Refuse (ShardingError naming every problem) a split of `cfg` over `size` ranks with tensor-parallel size
    `tp` (default: size) that does not divide; returns tp. From the config alone: the same on every rank and
    before any collective, so every rank raises and none waits."""
    tp = size if tp is None else tp
    for name, v in (("ranks", size), ("tp", tp)):
        check_int(v, name, 1, error=ShardingError)
    problems = []
    if size % tp:
        problems.append(f"tp = {tp} does not divide the {size} ranks")
    expert_counts = [("n_routed_experts", "routed experts", cfg.n_routed_experts)]
    if cfg.n_mtp_layers:
        expert_counts.append(("dspark_n_routed_experts", "the draft's routed experts", cfg.dspark_n_routed_experts))
    for name, what, n in expert_counts:
        if n % size:
            problems.append(f"{name} = {n} ({what}) is not divisible by {size} ranks (expert parallelism)")
    for name, what, n in (
        ("o_groups", "attention output groups", cfg.o_groups),
        ("n_heads", "attention heads", cfg.n_heads),
        ("vocab_size", "vocabulary", cfg.vocab_size),
    ):
        if n % tp:
            problems.append(f"{name} = {n} ({what}) is not divisible by the tensor-parallel size tp = {tp}")
    if problems:
        ep = math.gcd(*(n for _, _, n in expert_counts))
        tp_ok = math.gcd(cfg.o_groups, cfg.n_heads, cfg.vocab_size)
        raise ShardingError(
            f"cannot shard {cfg.name} over {size} ranks with tp = {tp}: "
            + "; ".join(problems)
            + f". Allowed: ranks dividing {ep} ({', '.join(map(str, _divisors(ep)))}) and a tp (--tp) dividing both "
            f"the ranks and {tp_ok} ({', '.join(map(str, _divisors(tp_ok)))}); with tp < ranks, attention and the "
            "vocab are split tp-way and replicated over ranks/tp groups of ranks"
        )
    return tp


def engram_rows(n_rows: int, par: Parallel) -> tuple[int, int]:
    """This rank's rows [lo, hi) of an Engram table: ⌈R/N⌉ a rank, the last ranks fewer (ceil division)."""
    per = -(-n_rows // par.size)
    lo = min(par.rank * per, n_rows)
    return lo, min(lo + per, n_rows)


# ---- loading only this rank's tensors ------------------------------------------------------------------------
def rank_selector(cfg: ModelConfig, par: Parallel) -> Callable[[str], bool]:
    """Which lab state-dict names this rank reads from a checkpoint: everything but the routed experts of the other
    ranks (`layers.{i}.ffn.experts.{e}.*` and `mtp.layers.{k}.ffn.experts.{e}.*` with e outside this rank's block).
    The vocab / Engram tables are read whole and sliced (a row-range read is in "remains")."""
    backbone = range(par.rank * cfg.n_routed_experts // par.size, (par.rank + 1) * cfg.n_routed_experts // par.size)
    n_draft = cfg.dspark_n_routed_experts
    draft = range(par.rank * n_draft // par.size, (par.rank + 1) * n_draft // par.size)

    def keep(name: str) -> bool:
        parts = name.split(".")
        if "experts" not in parts or "ffn" not in parts:
            return True
        i = parts.index("experts")
        if i + 1 >= len(parts) or not parts[i + 1].isdigit():
            return True
        return int(parts[i + 1]) in (draft if parts[0] == "mtp" else backbone)

    return keep


_TP_ROWS = re.compile(r"(^|\.)attn\.(wq_b|wo_a)\.weight$")  # the block's own projections, not the indexer's wq_b


_VOCAB_ROWS = ("embed.weight", "head.weight", "mtp.markov_head.embed.weight", "mtp.markov_head.head.weight")


def rank_slice(cfg: ModelConfig, par: Parallel, lab: str, shape: tuple[int, ...]) -> tuple[int, int, int] | None:
    """What rank `par` holds of the lab tensor `lab` of full `shape`: None (all of it, a copy) or (dim, start, stop),
    rows (dim 0) or columns (dim 1) start … stop − 1 — (0, 0, 0) for another rank's routed expert. The rules of the
    module docstring, from the config alone: `shard_model` produces exactly these shapes (tests check it), and
    `load_sharded` / `placement.estimate_rank` read and count exactly these ranges."""
    if ".ffn.experts." in lab:
        return None if rank_selector(cfg, par)(lab) else (0, 0, 0)
    if lab.endswith(".engram.embed.weight"):
        return (0, *engram_rows(shape[0], par))
    T, t = par.tp, par.tp_rank
    if T == 1:
        return None
    if lab in _VOCAB_ROWS:
        n = shape[0] // T
        return 0, t * n, (t + 1) * n
    Dh, R = cfg.head_dim, cfg.o_lora_rank
    hn, gn = cfg.n_heads // T, cfg.o_groups // T
    if _TP_ROWS.search(lab):
        return (0, t * hn * Dh, (t + 1) * hn * Dh) if lab.endswith("wq_b.weight") else (0, t * gn * R, (t + 1) * gn * R)
    if re.search(r"(^|\.)attn\.wo_b\.weight$", lab):
        return 1, t * gn * R, (t + 1) * gn * R
    if re.search(r"(^|\.)attn\.attn_sink$", lab):
        return 0, t * hn, (t + 1) * hn
    return None


def sliced_shape(shape: tuple[int, ...], cut: tuple[int, int, int] | None) -> tuple[int, ...]:
    if cut is None:
        return tuple(shape)
    dim, start, stop = cut
    return tuple(stop - start if d == dim else n for d, n in enumerate(shape))

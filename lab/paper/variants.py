"""The extra drafters Figures 3 and 4 need: DSpark and DFlash with another number of draft layers or another
block, each trained against the shipped target with the lab's own `train_draft`, seeded, on the same data.

Every variant of one block size k trains on the same windows: corpus windows and the target's own continuations
of the same seeded prompts (`lab.training.target_cache`: DeepSpec's target cache in miniature), the same steps, batch,
anchors and learning rate. DSpark and DFlash differ only in what `train_draft(kind=…)` makes of them (the Markov
and confidence heads and their losses), so a gap between them is the design's, not the data's.
A variant's model is the shipped target part (copied tensor by tensor) under a config with the variant's
`n_mtp_layers` / `dspark_block_size`, and a fresh draft seeded from the run's seed.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from typing import Any

import torch

from dspark_mini import build_model
from dspark_mini.checkpoint import load_model, part_tensors
from dspark_mini.drafters import DSparkDrafter

from ..evaluation.quality import quality
from ..realtext import DOMAINS
from ..training.rebuild import Recipe, corpus_streams
from ..training.target_cache import CacheSpec, build_cache
from ..training.train import train_draft
from ..weights import verified, weight_file


@dataclass(frozen=True)
class Variant:
    """One drafter to train: kind (dspark or dflash), draft layers, block k."""

    kind: str
    layers: int
    block: int

    @property
    def name(self) -> str:
        return f"{self.kind}-L{self.layers}-k{self.block}"


@dataclass(frozen=True)
class DraftBudget:
    """How every variant trains and is measured (one budget for all, stored in the figure's JSON)."""

    steps: int
    batch: int
    context: int
    anchors: int
    lr: float
    distill_prompts: int  # sequences the target writes (one set per block size, shared by every kind)
    distill_rows: int  # of each step's batch windows, drawn from them
    prompts: int  # held-out prompts per domain for τ
    max_new_tokens: int
    seed: int
    dflash_loss: str = "distill"  # the shipped set's (`Recipe.dflash_loss`): DFlash learns as DSpark does


def variants_for(cfg: Any, dflash_layers: int) -> tuple[list[Variant], list[int], list[int]]:
    """The variants Figures 3 and 4 need for the target's config: DSpark with 1, 2 and 3 draft layers and DFlash
    at the shipped set's depth (`dflash_layers`; block = the lab's), and DSpark (the lab's depth) and DFlash (its
    own) at blocks 3, the lab's and the longest the window allows. → (variants without repeats, depths, blocks)"""
    depth, block = cfg.n_mtp_layers, cfg.dspark_block_size
    depths = sorted({1, 2, 3, depth})
    blocks = sorted({3, block, cfg.window_size})
    out = [Variant("dspark", d, block) for d in depths] + [Variant("dflash", dflash_layers, block)]
    pairs = (("dspark", depth), ("dflash", dflash_layers))
    out += [Variant(kind, n, k) for k in blocks if k != block for kind, n in pairs]
    return out, depths, blocks


def variant_model(target_path: str, v: Variant, seed: int):
    """The shipped target part under the variant's config, with a fresh draft of `seed`."""
    base = load_model(target_path)
    cfg = base.cfg
    n = cfg.n_layers
    vcfg = cfg.replace(
        n_mtp_layers=v.layers,
        compress_ratios=tuple(cfg.compress_ratios[:n]) + (0,) * v.layers,  # draft layers read the window only
        dspark_block_size=v.block,
        dspark_markov_kind="vanilla",
    )
    model = build_model(vcfg, seed=seed)
    own, src = part_tensors(model, "target"), part_tensors(base, "target")
    if set(own) != set(src):
        raise ValueError(f"the target part of {v.name} does not match the shipped target's tensors")
    with torch.no_grad():
        for name, t in own.items():
            t.copy_(src[name])
    return model


def train_stream(b: DraftBudget) -> torch.Tensor:
    """The training token stream `train all` uses (the corpus's training documents, shuffled by the seed). → [N]"""
    return corpus_streams(Recipe(seed=b.seed))[0]


def cache_spec(b: DraftBudget, block: int) -> CacheSpec:
    """The target cache of one block size, as `train all` builds it (lab.training.target_cache): half the prompts
    free-form, a quarter continued at T = 1, windows of context + k + 1 ids, `steps` × `batch` of them."""
    return CacheSpec(
        prompts=b.distill_prompts,
        free=0.5,
        sampled=0.25,
        length=b.context + block + 1,
        steps=b.steps,
        batch=b.batch,
        rows=min(b.distill_rows, b.batch),
        seed=b.seed,
    )


def target_cache(target_path: str, block: int, budget: dict[str, Any]) -> torch.Tensor:
    """The windows every variant of block k = `block` trains on: the target cache's schedule, built once from the
    shipped target (every kind reads the same windows in the same order).  → [steps, batch, context + block + 1]"""
    torch.set_num_threads(1)
    b = DraftBudget(**budget)
    return build_cache(load_model(target_path), train_stream(b), cache_spec(b, block)).windows


def data_hash(t: torch.Tensor) -> str:
    """A short sha256 of a tensor of token ids (the same windows give the same hash in every variant's record)."""
    import hashlib

    return hashlib.sha256(t.contiguous().numpy().tobytes()).hexdigest()[:16]


def train_variant(
    v: Variant, weights_dir: str | None, budget: dict[str, Any], cache: torch.Tensor, queue=None
) -> dict[str, Any]:
    """Train one variant and measure its τ per domain (T = 1 and greedy, fixed block). Runs in a worker process
    (one thread) or in the caller's; `queue` hears (name, step) for a progress bar. → a JSON-able record."""
    torch.set_num_threads(1)
    b = DraftBudget(**budget)
    target = weight_file("target", weights_dir)
    verified(target)
    train_ids = train_stream(b)
    model = variant_model(str(target), v, b.seed)

    def tick(step: int, loss: float) -> None:
        if queue is not None:
            queue.put((v.name, step))

    log = train_draft(
        model,
        train_ids,
        b.steps,
        b.batch,
        b.context,
        b.lr,
        b.seed,
        kind=v.kind,
        anchors=b.anchors,
        on_step=tick,
        schedule=cache,
        weights=(0.1, 0.9, 0.0) if v.kind == "dflash" and b.dflash_loss == "distill" else None,
    )
    t0 = time.perf_counter()
    q = quality(model, DSparkDrafter(v.kind), DOMAINS, b.prompts, b.max_new_tokens, b.seed)
    params = sum(p.numel() for n, p in model.named_parameters() if n.startswith("mtp."))
    return {
        **asdict(v),
        "name": v.name,
        "draft_parameters": int(params),
        "target_cache_hash": data_hash(cache),
        "steps": b.steps,
        "tokens_seen": b.steps * b.batch * (b.context + v.block + 1),
        "train_seconds": round(log.seconds, 1),
        "eval_seconds": round(time.perf_counter() - t0, 1),
        "final_loss": log.train_loss[-1],
        "tau": {d: {"t1": q[d]["t1"]["tau"], "greedy": q[d]["greedy"]["tau"]} for d in DOMAINS},
        "cond_accept_t1": {d: q[d]["t1"]["cond_accept"] for d in DOMAINS},
    }

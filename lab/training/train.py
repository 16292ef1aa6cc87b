"""Train the tiny target on the real-text corpus (next-token cross-entropy, QAT through the FP8/FP4 simulation).

What learns how:
- every projection, norm, mHC coefficient, expert and Engram table: AdamW on the cross-entropy, with
  straight-through gradients through the quantize→dequantize of the caches and the MXFP4 experts;
- the router's correction bias: not by gradient (it only selects) but by the auxiliary-loss-free
  balancing rule — after each step, bias_e += γ · sign(mean load − load_e);
- the indexers: not at all here (their top-k is a discrete choice; the real model trains them with a
  separate distillation loss), and the DSpark draft: later, against the frozen target.
Training runs in float32 for speed and the result is cast to the lab preset's float64.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import torch
import torch.nn.functional as F

from dspark_mini import Transformer, build_model
from dspark_mini.config import ModelConfig
from dspark_mini.validate import check_float, check_int


@dataclass
class TrainLog:
    steps: list[int] = field(default_factory=list)
    train_loss: list[float] = field(default_factory=list)
    val_steps: list[int] = field(default_factory=list)
    val_loss: list[float] = field(default_factory=list)
    val_accuracy: list[float] = field(default_factory=list)
    select_steps: list[int] = field(default_factory=list)  # a drafter's held-out selection curve (`Selection`)
    select_accept: list[float] = field(default_factory=list)
    best_step: int | None = None
    seconds: float = 0.0


@dataclass
class Selection:
    """A held-out selection set for a drafter's training: every `every` steps (and after the last) the drafter's
    analytic acceptance 1 − ½‖p_d − p_t‖₁ (each method's own position weighting) is measured on `windows`
    [N, L] — windows the training never reads — and the parameters of the best measurement are kept: a drafter that
    peaks early and then overfits (Eagle3 is known to) ends at its peak. The curve goes to the log
    (`select_steps`, `select_accept`, `best_step`)."""

    windows: torch.Tensor  # [N, L] held-out token windows, L = the training windows' length
    every: int
    best: float = -1.0
    state: dict[str, torch.Tensor] | None = None

    def __post_init__(self) -> None:
        check_int(self.every, "every", 1)
        if self.windows.dim() != 2 or self.windows.size(0) < 1:
            raise ValueError(f"selection windows must be [N ≥ 1, L] (got {tuple(self.windows.shape)})")

    def due(self, step: int, steps: int) -> bool:
        return step % self.every == 0 or step == steps

    def record(self, step: int, score: float, module: torch.nn.Module, log: TrainLog) -> None:
        log.select_steps.append(step)
        log.select_accept.append(score)
        if score > self.best:  # the first of equal scores is kept: the shorter training
            self.best, log.best_step = score, step
            self.state = {n: t.detach().clone() for n, t in module.state_dict().items()}

    def restore(self, module: torch.nn.Module, log: TrainLog) -> None:
        if self.state is not None:
            module.load_state_dict(self.state)


def windows(ids: torch.Tensor, batch: int, seq_len: int, gen: torch.Generator) -> torch.Tensor:
    """Random [batch, seq_len + 1] windows of a token stream (inputs = [:, :-1], targets = [:, 1:])."""
    if ids.numel() < seq_len + 2:
        raise ValueError(f"token stream of {ids.numel()} ids is too short for seq_len = {seq_len}")
    starts = torch.randint(0, ids.numel() - seq_len - 1, (batch,), generator=gen)
    return torch.stack([ids[s : s + seq_len + 1] for s in starts.tolist()])


@torch.no_grad()
def evaluate(model: Transformer, ids: torch.Tensor, seq_len: int, max_windows: int = 16) -> tuple[float, float]:
    """Mean next-token loss and accuracy over consecutive windows of a held-out stream."""
    n = min(max_windows, (ids.numel() - 1) // seq_len)
    if n < 1:
        raise ValueError(f"validation stream of {ids.numel()} ids is too short for seq_len = {seq_len}")
    x = torch.stack([ids[i * seq_len : i * seq_len + seq_len + 1] for i in range(n)])
    logits = model(x[:, :-1]).logits.float()
    loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)), x[:, 1:].reshape(-1))
    acc = (logits.argmax(-1) == x[:, 1:]).float().mean()
    return float(loss), float(acc)


def balance_router_biases(model: Transformer, loads: list[torch.Tensor], rate: float) -> None:
    """Auxiliary-loss-free balancing: push each gate's bias towards equal expert load."""
    with torch.no_grad():
        for block, load in zip(model.layers, loads, strict=True):
            load = load.to(block.ffn.gate.bias.dtype)
            block.ffn.gate.bias.add_(rate * torch.sign(load.mean() - load))


def train_target(
    cfg: ModelConfig,
    train_ids: torch.Tensor,
    val_ids: torch.Tensor,
    steps: int = 400,
    batch: int = 16,
    seq_len: int = 64,
    lr: float = 3e-3,
    seed: int = 0,
    bias_rate: float = 1e-3,
    eval_every: int = 50,
    on_step: Callable[[int, float], None] | None = None,
) -> tuple[Transformer, TrainLog]:
    """Train the backbone (not the draft) and return it in the preset's dtype, with its loss curve."""
    for name, v in (("steps", steps), ("batch", batch), ("eval_every", eval_every)):
        check_int(v, name, 1)
    check_int(seq_len, "seq_len", 1, cfg.max_seq_len, "max_seq_len", bare=True)
    check_float(lr, "lr", 0.0, lo_open=True)
    torch.manual_seed(seed)
    model = build_model(cfg.replace(dtype="float32"), seed=seed)
    start = {n: p.detach().clone() for n, p in model.named_parameters()}
    model.train()
    params = [p for n, p in model.named_parameters() if not n.startswith("mtp.") and not n.endswith("gate.bias")]
    decay = [p for p in params if p.dim() >= 2]
    no_decay = [p for p in params if p.dim() < 2]
    opt = torch.optim.AdamW(
        [{"params": decay, "weight_decay": 0.01}, {"params": no_decay, "weight_decay": 0.0}], lr=lr, betas=(0.9, 0.95)
    )
    warmup = max(1, steps // 20)

    def lr_at(step: int) -> float:  # linear warm-up, cosine decay to 10 %
        if step < warmup:
            return lr * (step + 1) / warmup
        t = (step - warmup) / max(1, steps - warmup)
        return lr * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * t)))

    loads: list[torch.Tensor] = []
    hooks = [
        blk.ffn.register_forward_hook(lambda mod, inp, out: loads.append(out[1]["load"]))  # [E] pairs per expert
        for blk in model.layers
    ]
    gen = torch.Generator().manual_seed(seed)
    log = TrainLog()
    t0 = time.perf_counter()
    try:
        for step in range(steps):
            for g in opt.param_groups:
                g["lr"] = lr_at(step)
            x = windows(train_ids, batch, seq_len, gen)
            loads.clear()
            logits = model(x[:, :-1]).logits
            loss = F.cross_entropy(logits.reshape(-1, logits.size(-1)).float(), x[:, 1:].reshape(-1))
            opt.zero_grad(set_to_none=True)
            loss.backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            balance_router_biases(model, loads, bias_rate)
            log.steps.append(step + 1)
            log.train_loss.append(float(loss.detach()))
            if (step + 1) % eval_every == 0 or step + 1 == steps:
                model.eval()
                vl, va = evaluate(model, val_ids, seq_len)
                model.train()
                log.val_steps.append(step + 1)
                log.val_loss.append(vl)
                log.val_accuracy.append(va)
            if on_step is not None:
                on_step(step + 1, log.train_loss[-1])
    finally:
        for h in hooks:
            h.remove()
    log.seconds = time.perf_counter() - t0
    model.eval()
    # back to the preset's dtype (float64 for `lab`); parts that did not train keep their exact init
    final = build_model(cfg, seed=seed)
    with torch.no_grad():
        for (name, p), (name2, q) in zip(final.named_parameters(), model.named_parameters(), strict=True):
            assert name == name2
            if not torch.equal(q, start[name]):
                p.copy_(q.to(p.dtype))
    return final, log


DRAFT_KINDS = ("dspark", "dspark-rnn", "dflash")  # drafters that live in the model (`mtp.*`)
MAX_DRAFT_LAYERS = 16  # draft layers of one drafter: 5× the real model's 3


def model_for_draft(target_path, kind: str, seed: int = 0, layers: int | None = None) -> Transformer:
    """A trained target ready for `train_draft(kind=…)`: its draft built for the kind (the RNN head for
    "dspark-rnn"), with `layers` draft layers (None: the target config's n_mtp_layers), seeded from `seed`, the
    target part loaded from `target_path`."""
    from dspark_mini.checkpoint import CheckpointError, check_size, config_from_dict, load, read_header

    if kind not in DRAFT_KINDS:
        raise ValueError(f"kind = {kind!r} is invalid: allowed {DRAFT_KINDS}")
    header = read_header(target_path)
    if header["part"] not in ("target", "all"):
        raise CheckpointError(f"{str(target_path)!r} holds part {header['part']!r}: allowed a 'target' or 'all' file")
    cfg = config_from_dict(header["config"])
    if layers is not None:
        check_int(layers, "layers", 1, MAX_DRAFT_LAYERS)
        cfg = cfg.with_draft_layers(layers)
    check_size(cfg, target_path)  # an absurd header is refused before anything is allocated
    model = build_model(cfg.replace(dspark_markov_kind="rnn" if kind == "dspark-rnn" else "vanilla"), seed=seed)
    load(model, target_path)  # a "target" part loads whatever the draft-only fields say
    return model


def draft_losses(
    logits: torch.Tensor, conf_logit: torch.Tensor, labels: torch.Tensor, target_probs: torch.Tensor, gamma: float
) -> dict[str, torch.Tensor]:
    """The DSpark losses over one block (the paper's §3.3 terms): position weights w_k = exp(−(k−1)/γ),
    CE on the true tokens, ‖p_d − p_t‖₁ (2 × TV) to the target, and BCE of the confidence head against the
    analytic acceptance c* = 1 − ½‖p_d − p_t‖₁ (the label is detached, the head's inputs are not, as in
    DeepSpec). Each term is a weighted mean over positions. The paper writes γ = the block size; DeepSpec's
    released configs, and `train_draft`'s default, use γ = 4.

    logits [B, k, V] (after the Markov bias), conf_logit [B, k], labels [B, k], target_probs [B, k, V].
    """
    k = logits.size(1)
    w = torch.exp(-torch.arange(k, dtype=torch.float32) / gamma)  # [k]
    logp = torch.log_softmax(logits.float(), -1)
    ce = -logp.gather(-1, labels[..., None]).squeeze(-1)  # [B, k]
    l1 = (logp.exp() - target_probs.float()).abs().sum(-1)  # [B, k]
    label = (1 - 0.5 * l1).clamp(0, 1).detach()
    bce = F.binary_cross_entropy_with_logits(conf_logit.float(), label, reduction="none")

    def mean(t: torch.Tensor) -> torch.Tensor:
        return (t * w).sum() / (w.sum() * t.size(0))

    return {"ce": mean(ce), "l1": mean(l1), "conf": mean(bce), "accept": mean(label)}


def anchor_blocks(
    target: Transformer, x: torch.Tensor, n_anchors: int, gen: torch.Generator
) -> tuple[torch.Tensor, ...]:
    """Cut `n_anchors` draft blocks out of each window x [B, S + 1] with one frozen target forward.

    Anchor a (1 ≤ a ≤ S − k) needs: the drafter's view main_x of positions a − W … a − 1 (the ring,
    W = window_size), the anchor x_a, the true tokens x_{a+1} … x_{a+k} and the target's next-token
    distributions at a … a + k − 1. The draft only sees relative positions (RoPE), so every block is placed at
    the same positions: ring at 0 … W − 1, block at W … W + k − 1 — many anchors, one batched draft pass.
    An anchor a < W has only a positions before it, as at inference when the cache holds fewer than W tokens (a
    short prompt's first rounds): its ring holds them in its last a slots and marks the first W − a empty (−1), so
    the draft learns to work from a partial ring too (anchors are drawn from all of 1 … S − k).
    → taps_ring {layer: [B·A, W, D]}, anchor [B·A], prev [B·A, k], labels [B·A, k], p_t [B·A, k, V],
      ring_pos [B·A, W] (slot j: position j, or −1 = empty)
    """
    cfg = target.cfg
    W, k = cfg.window_size, cfg.dspark_block_size
    B, S = x.size(0), x.size(1) - 1
    if S < W + k:
        raise ValueError(f"windows of {S} tokens are too short: allowed ≥ window_size + block = {W + k}")
    with torch.no_grad():
        out = target(x[:, :S])  # taps at every position, the target's distributions
    hi = S - k  # the last anchor whose block stays inside the window (the first: 1, the draft needs a context)
    A = min(n_anchors, hi)
    anchors = torch.stack([torch.randperm(hi, generator=gen)[:A] + 1 for _ in range(B)])  # [B, A]
    rows = torch.arange(B)[:, None]
    ring_idx = anchors[..., None] + torch.arange(-W, 0)  # [B, A, W] < 0: before the window's first token
    ring_pos = torch.where(ring_idx >= 0, torch.arange(W), -1).flatten(0, 1)  # [B·A, W] −1 = an empty slot
    blk_idx = anchors[..., None] + torch.arange(k)  # [B, A, k]: positions a … a + k − 1
    taps = {l: t[rows[..., None], ring_idx.clamp(min=0)].flatten(0, 1) for l, t in out.taps.items()}  # [B·A, W, D]
    prev = x[rows[..., None], blk_idx].flatten(0, 1)  # [B·A, k]: anchor, x_{a+1} … x_{a+k−1}
    labels = x[rows[..., None], blk_idx + 1].flatten(0, 1)  # [B·A, k]
    p_t = torch.softmax(out.logits[rows[..., None], blk_idx].float(), -1).flatten(0, 1)  # [B·A, k, V]
    return taps, prev[:, 0], prev, labels, p_t, ring_pos


def block_rings(target: Transformer, taps: dict[int, torch.Tensor], ring_pos: torch.Tensor, dtype: torch.dtype):
    """The draft rings of a batch of training blocks (`anchor_blocks`): each draft layer's ring rows made from the
    taps at slots 0 … W − 1, each block's own fill `ring_pos` [N, W] (−1 = empty), cache length W (the blocks sit
    at W … W + k − 1). Gradients flow into main_norm / main_proj and the ring projections. → a KVCache of N rows"""
    from dspark_mini.kv_cache import KVCache

    W = target.cfg.window_size
    cache = KVCache(target.cfg, ring_pos.size(0), dtype=dtype)
    slots = torch.arange(W)
    for layer, rows in target.mtp.ring_rows(target.mtp.main_x(taps), slots).items():  # {layer: [N, W, Dh]}
        ring = cache.windows[layer]
        ring.put(rows, slots, slots, write_pos=False)
        ring.pos = ring_pos  # [N, W] each block's own fill (−1: slots before its window's first token)
    cache.length = W
    return cache


def distill_prompts(
    train_ids: torch.Tensor, n: int, seed: int, vocab_size: int, free_share: float = 0.5, max_len: int = 16
) -> list[list[int]]:
    """Prompts for `self_distill`, seeded: the first `free_share` of them free-form, text from outside the corpus
    (alternately 1–6 ids drawn uniformly from the non-special vocabulary, and 1–3 random lower-case words of 1–6
    letters: "hello"-like text), the rest the first 1–`max_len` ids of a training line. → a list of n id lists"""
    from dspark_mini.tokenizer import SPECIALS, default_tokenizer

    tok = default_tokenizer()
    gen = torch.Generator().manual_seed(seed)

    def draw(lo: int, hi: int) -> int:  # uniform in lo..hi
        return int(torch.randint(lo, hi + 1, (1,), generator=gen))

    newline = tok.encode("\n")[-1]
    starts = (torch.nonzero(train_ids[: -max_len - 1] == newline).flatten() + 1).tolist()  # line starts
    n_free = round(n * free_share)
    out = []
    for i in range(n):
        if i < n_free and i % 2 == 0:
            out.append(torch.randint(len(SPECIALS), vocab_size, (draw(1, min(6, max_len)),), generator=gen).tolist())
        elif i < n_free:
            words = ["".join(chr(ord("a") + draw(0, 25)) for _ in range(draw(1, 6))) for _ in range(draw(1, 3))]
            out.append(tok.encode(" ".join(words))[:max_len])
        else:
            s = starts[int(torch.randint(0, len(starts), (1,), generator=gen))]
            out.append(train_ids[s : s + draw(1, max_len)].tolist())
    return out


def self_distill(
    target: Transformer, prompts: list[list[int]], length: int, temperature: float = 0.0, seed: int = 0
) -> torch.Tensor:
    """The target's own continuations of `prompts`, each to `length` ids (prompt included): draft-training data
    that follows what the target writes, where the corpus only shows what its authors wrote. Prompts of one
    length decode together (`generate_plain`, batch ≤ 256, in the order given). → [len(prompts), length]"""
    from dspark_mini.speculative import generate_plain

    out = torch.empty(len(prompts), length, dtype=torch.long)
    by_len: dict[int, list[int]] = {}
    for i, p in enumerate(prompts):
        if not 1 <= len(p) < length:
            raise ValueError(f"prompt {i} has {len(p)} ids: allowed 1..{length - 1} (length − 1)")
        by_len.setdefault(len(p), []).append(i)
    for n, idx in sorted(by_len.items()):
        for j in range(0, len(idx), 256):
            rows = idx[j : j + 256]
            p = torch.tensor([prompts[i] for i in rows])  # [b, n]
            new = generate_plain(target, p, length - n, temperature, seed + n + j).tokens  # [b, length − n]
            out[rows] = torch.cat([p, torch.tensor(new)], 1)
    return out


def check_schedule(schedule: torch.Tensor | None, steps: int, batch: int, length: int) -> None:
    """A training schedule (`lab.training.target_cache`) must hold exactly `steps` × `batch` windows of `length` ids."""
    if schedule is None:
        return
    want = (steps, batch, length)
    if not isinstance(schedule, torch.Tensor) or schedule.dtype != torch.long or tuple(schedule.shape) != want:
        shape = tuple(schedule.shape) if isinstance(schedule, torch.Tensor) else type(schedule).__name__
        raise ValueError(f"schedule has shape {shape}: allowed an int64 tensor [steps, batch, window] = {list(want)}")


def train_draft(
    target: Transformer,
    train_ids: torch.Tensor,
    steps: int = 300,
    batch: int = 8,
    context: int = 32,
    lr: float = 3e-3,
    seed: int = 0,
    weights: tuple[float, float, float] | None = None,
    gamma: float = 4.0,
    kind: str = "dspark",
    anchors: int = 8,
    on_step: Callable[[int, float], None] | None = None,
    schedule: torch.Tensor | None = None,
    select: Selection | None = None,
) -> TrainLog:
    """Train the DSpark draft (`mtp.*`) in place against the frozen target; the shared embed and head stay frozen.

    Each step takes `batch` windows of `context` + k tokens, runs the frozen target once, cuts `anchors` blocks
    per window (`anchor_blocks`), fills each block's draft rings from the target's taps before its anchor (with
    gradients into main_norm/main_proj and the ring projections), runs [x_a, noise…] with the Markov head
    teacher-forced on the true tokens, and minimises α_ce·CE + α_tv·‖p_d − p_t‖₁ + α_conf·BCE(c, c*) with
    position weights exp(−(k−1)/γ). The paper defines the three terms; the weights α = 0.1 / 0.9 / 1.0 and γ = 4
    are DeepSpec's released DSpark configuration (`ce 0.1`, `l1 0.9`, `confidence_head_alpha 1.0`,
    `loss_decay_gamma 4.0`), not numbers from the paper. The confidence head c = σ(w·[h; W1[x_prev]]) has no bias,
    as in V4.1's checkpoint (`confidence_head.proj`), where the paper's and DeepSpec's head add one.
    `schedule` [steps, batch, context + k + 1] (the target cache's windows, `lab.training.target_cache`): step i
    trains on schedule[i], the windows every drafter of a set sees; without one, each step draws `batch` random
    windows of `train_ids`.
    kind="dspark-rnn": the same with the RNN head (the target's config must say dspark_markov_kind = "rnn").
    kind="dflash": the same parallel drafter without the sequential part: the Markov head is zeroed and frozen
    (its bias is then 0 at inference too), no confidence head, and plain CE (α = 1 / 0 / 0), as DeepSpec's
    DFlash baseline (`weights` (0.1, 0.9, 0): DSpark's loss family without the confidence term).
    `select` (a `Selection` of held-out windows [N, context + k + 1]): the draft ends with the `mtp.*` parameters
    of its best held-out analytic acceptance (the same anchors every time).
    """
    if kind not in DRAFT_KINDS:
        raise ValueError(f"kind = {kind!r} is invalid: allowed {DRAFT_KINDS}")
    check_float(lr, "lr", 0.0, lo_open=True)
    if weights is None:
        weights = (1.0, 0.0, 0.0) if kind == "dflash" else (0.1, 0.9, 1.0)  # DeepSpec's DFlash / DSpark configs

    cfg = target.cfg
    k, W = cfg.dspark_block_size, cfg.window_size
    if target.mtp is None:
        raise ValueError("the target has no draft layers (n_mtp_layers = 0)")
    want = "rnn" if kind == "dspark-rnn" else "vanilla"
    if kind != "dflash" and cfg.dspark_markov_kind != want:
        raise ValueError(
            f"kind = {kind!r} needs dspark_markov_kind = {want!r} in the model config (got {cfg.dspark_markov_kind!r})"
        )
    for name, v in (("steps", steps), ("batch", batch), ("context", context), ("anchors", anchors)):
        check_int(v, name, 1)
    check_int(context, "context", W, cfg.max_seq_len - k - 1, bare=True)
    check_schedule(schedule, steps, batch, context + k + 1)
    torch.manual_seed(seed)
    frozen = ("mtp.markov_head.", "mtp.confidence_head.") if kind == "dflash" else ()
    if kind == "dflash":
        with torch.no_grad():
            target.mtp.markov_head.head.weight.zero_()  # W2 = 0: no bigram correction, a purely parallel draft
    params = [p for n, p in target.named_parameters() if n.startswith("mtp.") and not n.startswith(frozen)]
    opt = torch.optim.AdamW(params, lr=lr, betas=(0.9, 0.95), weight_decay=0.0)
    gen = torch.Generator().manual_seed(seed)
    log = TrainLog()
    t0 = time.perf_counter()
    dtype = next(target.mtp.parameters()).dtype
    target.train()
    for step in range(steps):
        for g in opt.param_groups:
            g["lr"] = lr * min(1.0, (step + 1) / max(1, steps // 20)) * (0.1 + 0.9 * (1 - step / steps))
        x = windows(train_ids, batch, context + k, gen) if schedule is None else schedule[step]  # [B, context + k + 1]
        target.eval()
        taps, anchor, prev, labels, p_t, block_ring_pos = anchor_blocks(target, x, anchors, gen)
        target.train()
        cache = block_rings(target, taps, block_ring_pos, dtype)  # with gradients: the ring projections learn
        logits, conf = target.mtp.teacher_forced(anchor, prev, target.embed, target.head, cache)
        losses = draft_losses(logits, conf, labels, p_t, gamma)
        loss = weights[0] * losses["ce"] + weights[1] * losses["l1"] + weights[2] * losses["conf"]
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        log.steps.append(step + 1)
        log.train_loss.append(float(loss.detach()))
        log.val_accuracy.append(float(losses["accept"]))  # the analytic acceptance on the training blocks
        if select is not None and select.due(step + 1, steps):
            target.eval()
            select.record(step + 1, held_out_accept(target, select.windows, anchors, gamma, seed), target.mtp, log)
            target.train()
        if on_step is not None:
            on_step(step + 1, log.train_loss[-1])
    target.eval()
    if select is not None:
        select.restore(target.mtp, log)
    log.seconds = time.perf_counter() - t0
    return log


@torch.no_grad()
def held_out_accept(target: Transformer, x: torch.Tensor, anchors: int, gamma: float, seed: int) -> float:
    """The draft's analytic acceptance (position-weighted as its loss) on the blocks of held-out windows x
    [N, context + k + 1], the same anchors at every call (drawn from `seed`)."""
    gen = torch.Generator().manual_seed(seed)
    taps, anchor, prev, labels, p_t, ring_pos = anchor_blocks(target, x, anchors, gen)
    dtype = next(target.mtp.parameters()).dtype
    cache = block_rings(target, taps, ring_pos, dtype)
    logits, conf = target.mtp.teacher_forced(anchor, prev, target.embed, target.head, cache)
    return float(draft_losses(logits, conf, labels, p_t, gamma)["accept"])

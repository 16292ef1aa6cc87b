"""Train the baseline drafters (MTP-1, Eagle3-lite) against the frozen target, as the DSpark paper's comparisons.

- MTP-1 (DeepSeek-V3 §2.2): rows i = 0 … S−1 of a window, from the target's final hidden h_i and the true token
  x_{i+1}; cross-entropy on the true next-next token x_{i+2}.
- Eagle3 (training-time test): step 0 runs the rows i = 0 … S−1 from the taps at i and x_{i+1};
  step j = 1 … k−1 feeds x_{i+1+j} and the step j−1 output hidden of the same row, at RoPE position i + j, and
  a row of step j sees the step-0 rows in its window plus its own rows of steps 1..j. Loss: soft cross-entropy
  against the target's next-token distribution at position i+1+j (the one that produced x_{i+2+j}), step weight
  decay^j (0.8), as a weighted mean over steps.
The target runs under no_grad; its embedding, head (and for MTP-1 its final norm) are read with detached weights,
so only the draft module learns. AdamW, linear warm-up over 5 % of the steps, linear decay to 10 % (as
`train_draft`), gradient clipping at 1.0.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch
import torch.nn.functional as F

from dspark_mini import Transformer
from dspark_mini.baselines import Eagle3Draft, MTP1Draft, config_diff
from dspark_mini.validate import check_float, check_int
from lab.training.train import Selection, TrainLog, check_schedule, windows

LOSSES = ("ce", "distill", "soft-ce")  # the baselines' loss choices (`train_mtp1(loss=…)`, `train_eagle3(loss=…)`)


def against_target(logp: torch.Tensor, labels: torch.Tensor | None, p_t: torch.Tensor, loss: str) -> torch.Tensor:
    """One drafted position's loss, per row: "ce" hard cross-entropy on the true token; "distill" DSpark's
    0.1·CE + 0.9·‖p_d − p_t‖₁ (the loss family every drafter in the model's slot trains with); "soft-ce" the
    cross-entropy against the target's distribution, −Σ p_t log p_d (Eagle3's; needs no labels). logp [..., V]
    (log p_d), labels [...], p_t [..., V]. → [...]"""
    if loss == "soft-ce":
        return -(p_t * logp).sum(-1)
    ce = -logp.gather(-1, labels[..., None]).squeeze(-1)
    if loss == "ce":
        return ce
    return 0.1 * ce + 0.9 * (logp.exp() - p_t).abs().sum(-1)  # "distill"


def mtp1_losses(module: MTP1Draft, target: Transformer, x: torch.Tensor, loss: str = "ce") -> dict[str, torch.Tensor]:
    """x [B, S + 2] token windows; rows 0 … S−1. → {"loss": `loss` on x_{i+2} ("ce": cross-entropy on the true
    token; "distill": `against_target`, which also reads the target's distribution of x_{i+2}), "accuracy": top-1 on
    x_{i+2}, and with "distill" "accept": the analytic acceptance 1 − ½‖p_d − p_t‖₁ of the draft token}"""
    S = x.size(1) - 2
    with torch.no_grad():
        out = target(x[:, : S + 1] if loss != "ce" else x[:, :S])
        hidden = out.hidden[:, :S]  # [B, S, D]
    _, logits = module(target, hidden, x[:, 1 : S + 1])  # [B, S, V]
    labels = x[:, 2:]  # [B, S]
    acc = (logits.detach().argmax(-1) == labels).to(logits.dtype).mean()
    if loss == "ce":
        return {"loss": F.cross_entropy(logits.reshape(-1, logits.size(-1)), labels.reshape(-1)), "accuracy": acc}
    p_t = torch.softmax(out.logits[:, 1:].float(), -1)  # [B, S, V]: position i + 1 predicts x_{i+2}
    logp = torch.log_softmax(logits.float(), -1)
    accept = (1 - 0.5 * (logp.detach().exp() - p_t).abs().sum(-1)).mean()
    return {"loss": against_target(logp, labels, p_t, loss).mean(), "accuracy": acc, "accept": accept}


def eagle3_losses(
    module: Eagle3Draft, target: Transformer, x: torch.Tensor, decay: float = 0.8, loss: str = "soft-ce"
) -> dict[str, torch.Tensor]:
    """x [B, S + k] token windows (k = dspark_block_size); rows 0 … S−1, k TTT steps.
    → {"loss": Σ_j decay^j·loss_j / Σ_j decay^j (`against_target`; Eagle3's own: soft CE), "accept": the same
       weighted mean of 1 − ½‖p_d − p_t‖₁, "per_step": loss_j [k]}"""
    k = module.cfg.dspark_block_size
    S = x.size(1) - k
    with torch.no_grad():
        out = target(x)  # positions 0 … S+k−1
        p_t = torch.softmax(out.logits, -1)  # [B, S + k, V]; position t predicts x_{t+1}
        taps = module.tap_concat(out.taps)[:, :S]  # [B, S, n·D]
    _, logits = module(target, taps, x, k)  # [B, k, S, V]
    logp = torch.log_softmax(logits, -1)
    w = decay ** torch.arange(k, dtype=logp.dtype)  # [k]
    ce, acc = [], []
    for j in range(k):
        pt = p_t[:, 1 + j : 1 + j + S].to(logp.dtype)  # [B, S, V] the target's distribution of x_{i+2+j}
        rows = S if loss == "soft-ce" else min(S, x.size(1) - 2 - j)  # the last step's last row has no true token
        labels = None if loss == "soft-ce" else x[:, 2 + j : 2 + j + rows]
        ce.append(against_target(logp[:, j, :rows], labels, pt[:, :rows], loss).mean())
        acc.append((1 - 0.5 * (logp[:, j].detach().exp() - pt).abs().sum(-1)).mean())
    per_step = torch.stack(ce)  # [k]
    return {
        "loss": (per_step * w).sum() / w.sum(),
        "accept": (torch.stack(acc) * w).sum() / w.sum(),
        "per_step": per_step.detach(),
    }


def check_args(
    target: Transformer, train_ids: torch.Tensor, steps: int, batch: int, context: int, lr: float, extra: int
) -> None:
    """ValueError naming the field and its allowed range; a window holds context + extra tokens."""
    if not isinstance(target, Transformer):
        raise ValueError(f"target must be a dspark_mini Transformer (got {type(target).__name__})")
    for name, v in (("steps", steps), ("batch", batch), ("context", context)):
        check_int(v, name, 1)
    check_float(lr, "lr", 0.0, lo_open=True)
    cfg = target.cfg
    top = cfg.max_seq_len - extra
    if context > top:
        raise ValueError(f"context = {context} is invalid: allowed 1..{top} (max_seq_len {cfg.max_seq_len} − {extra})")
    if not isinstance(train_ids, torch.Tensor) or train_ids.dim() != 1 or train_ids.dtype != torch.long:
        raise ValueError(f"train_ids must be a 1-D int64 token stream (got {getattr(train_ids, 'shape', train_ids)})")
    need = context + extra + 1  # `windows` draws a start before the last window
    if train_ids.numel() < need:
        raise ValueError(f"train_ids has {train_ids.numel()} ids: allowed ≥ {need} (context + {extra + 1})")
    if int(train_ids.min()) < 0 or int(train_ids.max()) >= cfg.vocab_size:
        raise ValueError(f"train_ids holds an id out of range: allowed 0..{cfg.vocab_size - 1}")


def check_loss(loss: str, allowed: tuple[str, ...]) -> str:
    if loss not in allowed:
        raise ValueError(f"loss = {loss!r} is invalid: allowed {', '.join(allowed)}")
    return loss


def check_module(module, cls: type, target: Transformer, seed: int):
    """The module to train: `module` if given (checked), else a new one from `seed` on the target's device."""
    if module is None:
        return cls(target.cfg, seed).to(target.device)
    if not isinstance(module, cls):
        raise ValueError(f"module must be a {cls.__name__} or None (got {type(module).__name__})")
    diff = config_diff(module.cfg, target.cfg)
    if diff:
        raise ValueError(f"module was built for a different target config (fields {diff}): allowed the target's own")
    return module


def fit(
    module: torch.nn.Module,
    target: Transformer,
    train_ids: torch.Tensor,
    steps: int,
    batch: int,
    seq_len: int,
    lr: float,
    seed: int,
    losses: Callable[[torch.Tensor], dict[str, torch.Tensor]],
    metric: str,
    on_step: Callable[[int, float], None] | None,
    schedule: torch.Tensor | None = None,
    select: Selection | None = None,
    accept: Callable[[torch.Tensor], torch.Tensor] | None = None,
) -> TrainLog:
    """The shared loop: windows [batch, seq_len + 1] → losses → AdamW step; logs loss and `metric`. The windows of
    step i: schedule[i] (the target cache's, `target_cache`), else `batch` random windows of `train_ids`. With
    `select`, the analytic acceptance (`accept`(windows)) on its held-out windows is measured every `select.every`
    steps and the module ends with the parameters of the best measurement (`Selection`)."""
    check_schedule(schedule, steps, batch, seq_len + 1)
    torch.manual_seed(seed)
    params = list(module.parameters())
    opt = torch.optim.AdamW(params, lr=lr, betas=(0.9, 0.95), weight_decay=0.0)
    gen = torch.Generator().manual_seed(seed)
    log = TrainLog()
    t0 = time.perf_counter()
    was_training = target.training
    target.eval()
    module.train()
    try:
        for step in range(steps):
            for g in opt.param_groups:
                g["lr"] = lr * min(1.0, (step + 1) / max(1, steps // 20)) * (0.1 + 0.9 * (1 - step / steps))
            x = windows(train_ids, batch, seq_len, gen) if schedule is None else schedule[step]  # [batch, seq_len + 1]
            out = losses(x)
            opt.zero_grad(set_to_none=True)
            out["loss"].backward()
            torch.nn.utils.clip_grad_norm_(params, 1.0)
            opt.step()
            log.steps.append(step + 1)
            log.train_loss.append(float(out["loss"].detach()))
            log.val_accuracy.append(float(out[metric]))
            if select is not None and select.due(step + 1, steps):
                module.eval()
                with torch.no_grad():
                    score = float(accept(select.windows))
                select.record(step + 1, score, module, log)
                module.train()
            if on_step is not None:
                on_step(step + 1, log.train_loss[-1])
        if select is not None:
            select.restore(module, log)
    finally:
        module.eval()
        target.train(was_training)
    log.seconds = time.perf_counter() - t0
    return log


def train_mtp1(
    target: Transformer,
    train_ids: torch.Tensor,
    steps: int = 300,
    batch: int = 16,
    context: int = 32,
    lr: float = 3e-3,
    seed: int = 0,
    on_step: Callable[[int, float], None] | None = None,
    module: MTP1Draft | None = None,
    schedule: torch.Tensor | None = None,
    loss: str = "ce",
    select: Selection | None = None,
) -> tuple[MTP1Draft, TrainLog]:
    """Train an MTP-1 module (a new one from `seed`, or `module` further) on windows of `context` rows
    (context + 2 ids; `schedule` [steps, batch, context + 2]: the windows of every step, see `fit`) with `loss`
    ("ce", DeepSeek-V3's, or "distill", DSpark's family: `against_target`).
    Returns the module (eval mode, the target's dtype) and its log (val_accuracy = top-1 on x_{i+2})."""
    check_args(target, train_ids, steps, batch, context, lr, 2)
    check_loss(loss, ("ce", "distill"))
    module = check_module(module, MTP1Draft, target, seed)
    log = fit(
        module,
        target,
        train_ids,
        steps,
        batch,
        context + 1,
        lr,
        seed,
        lambda x: mtp1_losses(module, target, x, loss),
        "accuracy",
        on_step,
        schedule,
        select,
        lambda x: mtp1_losses(module, target, x, "distill")["accept"],  # the same for either loss
    )
    return module, log


def train_eagle3(
    target: Transformer,
    train_ids: torch.Tensor,
    steps: int = 300,
    batch: int = 16,
    context: int = 32,
    lr: float = 3e-3,
    seed: int = 0,
    on_step: Callable[[int, float], None] | None = None,
    module: Eagle3Draft | None = None,
    decay: float = 0.8,
    schedule: torch.Tensor | None = None,
    loss: str = "soft-ce",
    select: Selection | None = None,
) -> tuple[Eagle3Draft, TrainLog]:
    """Train an Eagle3-lite module with a k = dspark_block_size step TTT unroll over `context` rows (context + k
    ids; `schedule` [steps, batch, context + k]: the windows of every step, see `fit`).
    `loss`: "soft-ce" (Eagle3's own) or "distill" (DSpark's family), see `against_target`.
    Returns the module (eval mode) and its log (val_accuracy = the weighted analytic acceptance 1 − TV)."""
    k = target.cfg.dspark_block_size if isinstance(target, Transformer) else 0
    check_args(target, train_ids, steps, batch, context, lr, k)
    check_loss(loss, ("soft-ce", "distill"))
    if not isinstance(decay, (int, float)) or isinstance(decay, bool) or not 0 < decay <= 1:
        raise ValueError(f"decay = {decay!r} is invalid: allowed 0 < decay ≤ 1")
    module = check_module(module, Eagle3Draft, target, seed)
    log = fit(
        module,
        target,
        train_ids,
        steps,
        batch,
        context + k - 1,
        lr,
        seed,
        lambda x: eagle3_losses(module, target, x, decay, loss),
        "accept",
        on_step,
        schedule,
        select,
        lambda x: eagle3_losses(module, target, x, decay, loss)["accept"],
    )
    return module, log

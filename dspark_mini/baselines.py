"""Baseline drafters for the DSpark comparisons (docs/sources.md: the baselines): MTP-1 and Eagle3-lite.

Both read the frozen target (its embedding, LM head, and either its final hidden state or its tap layers) and
run one small causal block of their own. A "row" i is the draft's view of position i: it needs the target's
feature at i and the token x_{i+1}, so the row of the last committed position p−1 only exists once the anchor
x_p is known (at `propose`).

  DraftBlock   pre-norm attention (RoPE over the whole head, θ = rope_theta) + SwiGLU MLP, width dim.
               A query row at position i sees the context rows at positions i − W < t ≤ i (W = window_size,
               the DSpark draft rings' window), plus, in an Eagle3 chain, its own earlier chain rows.
  MTP1Draft    (DeepSeek-V3 MTP, depth 1) row i = proj([hnorm(h_i); enorm(embed(x_{i+1}))]) → block →
               the target's frozen norm + head → logits for x_{i+2}. Drafts 1 token: τ ∈ {1, 2}.
  Eagle3Draft  row i = proj([enorm(embed(x_{i+1})); hnorm(g_i)]), g_i = fc([tap_a; tap_b; …] at i) → block → h⁰_i
               → own norm + the target's frozen head → logits for x_{i+2}. Chain step j ≥ 1 on row i feeds
               [embed(x_{i+1+j}); h^{j−1}_i] at RoPE position i + j and sees the window of step-0 rows plus
               its own rows of steps 1..j (training-time test, TTT). At inference the row is i = p−1 and the
               tokens are the anchor, then the draft's own samples: step j predicts x_{j+1} (x_0 = anchor).
The training-mode `forward` of each module and the drafters' `propose` run the same functions; with one block
and a per-row mask, recomputing the stored window of rows at every `propose` is exactly the training forward.

Checkpoints: one safetensors file per module, header {format: "dspark-lab-baseline", version, kind, config,
meta, and optionally target_sha256: the target file it was trained against}; the shared embed/head/norm of the
target are not stored (the module needs a target of the same config).
"""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch import nn

from .checkpoint import (
    ST_DTYPES,
    SUFFIX,
    TARGET_KEY,
    CheckpointError,
    _open,
    _to_json,
    check_finite,
    check_sha256,
    config_from_dict,
    config_to_dict,
    json_metadata,
    write_tensors,
)
from .config import ModelConfig
from .dspark import DraftOutput
from .indexer import window_mask
from .linear import Linear
from .model import ForwardOutput, Transformer
from .norm import RMSNorm
from .rope import apply_rope, rope_angles, rope_inv_freq
from .sampling import sample, token_distribution
from .validate import check_int

FORMAT = "dspark-lab-baseline"
VERSION = "1"
BASELINE_KINDS = ("mtp1", "eagle3")
FFN_MULT = 2  # SwiGLU inner width = FFN_MULT · dim


# ---- shared pieces ----------------------------------------------------------------------------------
def draft_heads(dim: int) -> int:
    """Attention heads of the draft block: the first of 4, 2, 1 that splits dim into even head widths."""
    for h in (4, 2, 1):
        if dim % h == 0 and (dim // h) % 2 == 0:
            return h
    raise ValueError(f"dim = {dim} is invalid for a draft block: allowed an even integer ≥ 2")


# fields that shape only the model's own DSpark draft (`mtp.*`): neither the target nor a baseline reads them
DSPARK_ONLY_FIELDS = (
    "dspark_noise_token_id",
    "dspark_tap_mix",
    "dspark_markov_rank",
    "dspark_markov_kind",
    "dspark_n_routed_experts",
    "dspark_n_activated_experts",
)


def config_diff(a: ModelConfig, b: ModelConfig) -> list[str]:
    """Names of the config fields that differ and matter to a baseline (all but `extra` and DSPARK_ONLY_FIELDS)."""
    return [
        f.name
        for f in dataclasses.fields(ModelConfig)
        if f.compare and f.name not in DSPARK_ONLY_FIELDS and getattr(a, f.name) != getattr(b, f.name)
    ]


def check_target(module: nn.Module, model: Transformer) -> None:
    """The draft was built for this target's config (it shares its embedding and head)."""
    if not isinstance(model, Transformer):
        raise ValueError(f"model must be a dspark_mini Transformer (got {type(model).__name__})")
    diff = config_diff(module.cfg, model.cfg)
    if diff:
        raise ValueError(f"model config differs from the draft's in {diff}: allowed only the draft's own target config")


def target_embed(model: Transformer, tokens: torch.Tensor) -> torch.Tensor:
    """The target's frozen embedding (detached: no gradient reaches the target).  [B, S] → [B, S, D]"""
    return F.embedding(tokens, model.embed.weight.detach())


def target_head(model: Transformer, normed: torch.Tensor) -> torch.Tensor:
    """The target's frozen LM head.  [..., D] → [..., V]"""
    w = model.head.weight.detach()
    return F.linear(normed.to(w.dtype), w)


def target_norm(model: Transformer, h: torch.Tensor) -> torch.Tensor:
    """The target's frozen final RMSNorm (its own code, detached weight).  [..., D] → [..., D]"""
    return torch.func.functional_call(model.norm, {"weight": model.norm.weight.detach()}, (h,))


@torch.no_grad()
def init_module(module: nn.Module, seed: int) -> nn.Module:
    """Deterministic init: norms 1, matrices N(0, 1/fan_in); same seed → same numbers."""
    g = torch.Generator().manual_seed(seed)
    for name, p in module.named_parameters():
        if name.endswith("norm.weight"):
            p.fill_(1.0)
        else:
            std = p.shape[1] ** -0.5 if p.dim() == 2 else 0.02
            p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float64).mul_(std).to(p.dtype))
    return module


class DraftBlock(nn.Module):
    """One pre-norm block: attention (H heads of dim/H, RoPE, sliding-window mask) + SwiGLU MLP."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        D, dt = cfg.dim, cfg.torch_dtype
        self.n_heads = draft_heads(D)
        self.head_dim = D // self.n_heads
        self.window = cfg.window_size
        self.attn_norm = RMSNorm(D, cfg.norm_eps, dt)
        self.wq = Linear(D, D, dtype=dt)  # [H·hd, D]
        self.wk = Linear(D, D, dtype=dt)
        self.wv = Linear(D, D, dtype=dt)
        self.wo = Linear(D, D, dtype=dt)
        self.ffn_norm = RMSNorm(D, cfg.norm_eps, dt)
        self.w1 = Linear(D, FFN_MULT * D, dtype=dt)  # gate [F, D]
        self.w3 = Linear(D, FFN_MULT * D, dtype=dt)  # up [F, D]
        self.w2 = Linear(FFN_MULT * D, D, dtype=dt)  # down [D, F]
        inv = rope_inv_freq(self.head_dim, cfg.rope_theta, yarn=False)  # [hd / 2]
        self.register_buffer("inv_freq", inv, persistent=False)

    def qkv(self, x: torch.Tensor, positions: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Rows x [B, S, D] at RoPE positions [S] → q, k, v [B, S, H, hd] (q and k rotated)."""
        B, S, _ = x.shape
        u = self.attn_norm(x)  # [B, S, D]
        q = self.wq(u).view(B, S, self.n_heads, self.head_dim)  # [B, S, H, hd]
        k = self.wk(u).view(B, S, self.n_heads, self.head_dim)
        v = self.wv(u).view(B, S, self.n_heads, self.head_dim)
        angles = rope_angles(positions, self.inv_freq)  # [S, hd / 2]
        return apply_rope(q, angles), apply_rope(k, angles), v

    def forward(
        self,
        x: torch.Tensor,
        q: torch.Tensor,
        k: torch.Tensor,
        v: torch.Tensor,
        mask: torch.Tensor,
        extra_k: torch.Tensor | None = None,
        extra_v: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """x [B, Sq, D] with its queries q [B, Sq, H, hd] over shared keys k, v [B, Sk, H, hd] where mask [Sq, Sk]
        allows, plus per-row keys extra_k, extra_v [B, Sq, J, H, hd] (query row r alone sees its J extra rows).
        Every query must see at least one key. → [B, Sq, D]"""
        B, Sq, D = x.shape
        hp = torch.float64 if x.dtype == torch.float64 else torch.float32
        scale = self.head_dim**-0.5
        s = torch.einsum("bqhd,bkhd->bhqk", q.to(hp), k.to(hp)) * scale  # [B, H, Sq, Sk]
        s = s.masked_fill(~mask, float("-inf"))
        if extra_k is not None:
            se = torch.einsum("bqhd,bqjhd->bhqj", q.to(hp), extra_k.to(hp)) * scale  # [B, H, Sq, J]
            s = torch.cat([s, se], dim=-1)  # [B, H, Sq, Sk + J]
        p = torch.softmax(s, dim=-1)
        Sk = k.size(1)
        o = torch.einsum("bhqk,bkhd->bqhd", p[..., :Sk], v.to(hp))  # [B, Sq, H, hd]
        if extra_k is not None:
            o = o + torch.einsum("bhqj,bqjhd->bqhd", p[..., Sk:], extra_v.to(hp))
        x = x + self.wo(o.reshape(B, Sq, D).to(x.dtype))  # [B, Sq, D]
        u = self.ffn_norm(x)
        return x + self.w2(F.silu(self.w1(u)) * self.w3(u))  # [B, Sq, D]


def check_rows(name: str, t: torch.Tensor, batch: int | None, rows: int | None, width: int | None) -> None:
    """t must be a [batch, rows, width] tensor (None: any)."""
    ok = isinstance(t, torch.Tensor) and t.dim() == 3
    ok = ok and all(w is None or t.size(i) == w for i, w in enumerate((batch, rows, width)))
    if not ok:
        want = ", ".join("*" if w is None else str(w) for w in (batch, rows, width))
        raise ValueError(f"{name} must be a float tensor of shape [{want}] (got {tuple(getattr(t, 'shape', ()))})")


def check_ids(name: str, t: torch.Tensor, vocab: int, batch: int | None = None, length: int | None = None) -> None:
    if not isinstance(t, torch.Tensor) or t.dim() != 2 or t.dtype != torch.long:
        raise ValueError(f"{name} must be int64 token ids of shape [B, S] (got {getattr(t, 'shape', t)})")
    if (batch is not None and t.size(0) != batch) or (length is not None and t.size(1) != length):
        raise ValueError(f"{name} has shape {tuple(t.shape)}: expected [{batch}, {length}]")
    if t.numel() and (int(t.min()) < 0 or int(t.max()) >= vocab):
        raise ValueError(f"{name} holds an id out of range: allowed 0..{vocab - 1}")


# ---- MTP-1 ------------------------------------------------------------------------------------------
class MTP1Draft(nn.Module):
    """DeepSeek-V3 MTP module of depth 1 (checkpoint names hnorm, enorm, proj, block.*)."""

    kind = "mtp1"

    def __init__(self, cfg: ModelConfig, seed: int = 0):
        super().__init__()
        D, dt = cfg.dim, cfg.torch_dtype
        self.cfg = cfg
        self.hnorm = RMSNorm(D, cfg.norm_eps, dt)
        self.enorm = RMSNorm(D, cfg.norm_eps, dt)
        self.proj = Linear(2 * D, D, dtype=dt)  # [D, 2D] over [hnorm(h); enorm(e)]
        self.block = DraftBlock(cfg)
        init_module(self, seed)

    def forward(
        self, model: Transformer, hidden: torch.Tensor, next_tokens: torch.Tensor, start: int = 0
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Rows at positions start … start+S−1 from the target's final hidden h_i [B, S, D] and the tokens x_{i+1}
        [B, S]; causal sliding window over the rows. → output hidden [B, S, D], logits for x_{i+2} [B, S, V]."""
        check_target(self, model)
        B, S = next_tokens.shape
        check_ids("next_tokens", next_tokens, self.cfg.vocab_size)
        check_rows("hidden", hidden, B, S, self.cfg.dim)
        positions = torch.arange(start, start + S, device=hidden.device)  # [S]
        e = target_embed(model, next_tokens)  # [B, S, D]
        x = self.proj(torch.cat([self.hnorm(hidden), self.enorm(e)], dim=-1))  # [B, S, 2D] → [B, S, D]
        q, k, v = self.block.qkv(x, positions)
        h = self.block(x, q, k, v, window_mask(positions, positions, self.block.window))  # [B, S, D]
        return h, target_head(model, target_norm(model, h))  # [B, S, D], [B, S, V]


# ---- Eagle3-lite ------------------------------------------------------------------------------------
class Eagle3Draft(nn.Module):
    """Eagle3 with a chain (no tree) and the full vocabulary (tensors fc, enorm, hnorm, proj, block.*, norm)."""

    kind = "eagle3"

    def __init__(self, cfg: ModelConfig, seed: int = 0):
        super().__init__()
        D, dt = cfg.dim, cfg.torch_dtype
        self.cfg = cfg
        self.fc = Linear(len(cfg.dspark_target_layer_ids) * D, D, dtype=dt)  # [D, n·D] over the concatenated taps
        self.enorm = RMSNorm(D, cfg.norm_eps, dt)
        self.hnorm = RMSNorm(D, cfg.norm_eps, dt)
        self.proj = Linear(2 * D, D, dtype=dt)  # [D, 2D] over [enorm(e); hnorm(g)]
        self.block = DraftBlock(cfg)
        self.norm = RMSNorm(D, cfg.norm_eps, dt)  # own final norm (trainable, not the target's)
        init_module(self, seed)

    def tap_concat(self, taps: dict[int, torch.Tensor]) -> torch.Tensor:
        """The target's taps in `dspark_target_layer_ids` order, concatenated.  {layer: [B, S, D]} → [B, S, n·D]"""
        missing = [l for l in self.cfg.dspark_target_layer_ids if l not in taps]
        if missing:
            raise ValueError(f"taps lack layers {missing}: allowed a dict with every dspark_target_layer_ids entry")
        return torch.cat([taps[l] for l in self.cfg.dspark_target_layer_ids], dim=-1)

    def logits(self, model: Transformer, h: torch.Tensor) -> torch.Tensor:
        """Own norm + the target's frozen head.  [..., D] → [..., V]"""
        return target_head(model, self.norm(h))

    def row_input(self, model: Transformer, tokens: torch.Tensor, feature: torch.Tensor) -> torch.Tensor:
        """tokens [B, R], feature [B, R, D] → proj([enorm(embed); hnorm(feature)])  [B, R, D]"""
        e = target_embed(model, tokens)  # [B, R, D]
        return self.proj(torch.cat([self.enorm(e), self.hnorm(feature)], dim=-1))  # [B, R, 2D] → [B, R, D]

    def context(
        self, model: Transformer, tap_cat: torch.Tensor, next_tokens: torch.Tensor, positions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Step 0 over context rows at `positions` [S]: tap_cat [B, S, n·D], next_tokens x_{i+1} [B, S].
        → keys, values [B, S, H, hd] (for later chain steps) and h⁰ [B, S, D]."""
        x = self.row_input(model, next_tokens, self.fc(tap_cat))  # [B, S, D]
        q, k, v = self.block.qkv(x, positions)
        h = self.block(x, q, k, v, window_mask(positions, positions, self.block.window))  # [B, S, D]
        return k, v, h

    def chain_step(
        self,
        model: Transformer,
        tokens: torch.Tensor,
        h_prev: torch.Tensor,
        rows: torch.Tensor,
        step: int,
        ctx_pos: torch.Tensor,
        ctx_k: torch.Tensor,
        ctx_v: torch.Tensor,
        chain_k: list[torch.Tensor],
        chain_v: list[torch.Tensor],
    ) -> torch.Tensor:
        """TTT step j ≥ 1 for the rows at positions `rows` [R]: tokens [B, R] (x_{i+1+j}), h_prev = h^{j−1} [B, R, D],
        RoPE position i + j; the rows see the step-0 keys ctx_k/ctx_v [B, Sc, H, hd] at ctx_pos [Sc] in their
        window, plus their own rows of steps 1..j (chain_k/chain_v: one [B, R, H, hd] per earlier step, this step's
        appended here). → h^j [B, R, D]"""
        x = self.row_input(model, tokens, h_prev)  # [B, R, D]
        q, k, v = self.block.qkv(x, rows + step)
        chain_k.append(k)
        chain_v.append(v)
        mask = window_mask(rows, ctx_pos, self.block.window)  # [R, Sc]
        return self.block(x, q, ctx_k, ctx_v, mask, torch.stack(chain_k, 2), torch.stack(chain_v, 2))

    def forward(
        self, model: Transformer, tap_cat: torch.Tensor, tokens: torch.Tensor, steps: int | None = None, start: int = 0
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Training mode (TTT), all rows at once: tap_cat [B, S, n·D] for positions start … start+S−1, tokens
        [B, S + steps] the sequence from position start (row i, step j reads x_{i+1+j}), steps ≤ dspark_block_size.
        → hidden h^j [B, steps, S, D], logits [B, steps, S, V]; step j, row i predicts x_{i+2+j}."""
        check_target(self, model)
        cfg = self.cfg
        k = cfg.dspark_block_size if steps is None else steps
        check_int(k, "steps", 1, cfg.dspark_block_size, "dspark_block_size", bare=True)
        check_rows("tap_cat", tap_cat, None, None, len(cfg.dspark_target_layer_ids) * cfg.dim)
        B, S, _ = tap_cat.shape
        check_ids("tokens", tokens, cfg.vocab_size, B, S + k)
        positions = torch.arange(start, start + S, device=tap_cat.device)  # [S]
        ctx_k, ctx_v, h = self.context(model, tap_cat, tokens[:, 1 : 1 + S], positions)
        hs, chain_k, chain_v = [h], [], []
        for j in range(1, k):
            h = self.chain_step(
                model, tokens[:, 1 + j : 1 + j + S], h, positions, j, positions, ctx_k, ctx_v, chain_k, chain_v
            )
            hs.append(h)
        hidden = torch.stack(hs, 1)  # [B, steps, S, D]
        return hidden, self.logits(model, hidden)  # [B, steps, S, D], [B, steps, S, V]


# ---- drafters (the speculative loop's protocol) ----------------------------------------------------------
class WindowDrafter:
    """Keeps, per sequence, the committed rows' features and tokens of the last window_size positions."""

    kind = ""
    has_confidence = False

    def __init__(self, module: nn.Module, cls: type):
        if not isinstance(module, cls):
            raise ValueError(f"module must be a {cls.__name__} (got {type(module).__name__})")
        self.module = module
        self.batch: int | None = None
        self.feats: torch.Tensor | None = None  # [B, W', F] features of the last W' ≤ W committed positions
        self.tokens: torch.Tensor | None = None  # [B, W'] their tokens
        self.length = 0  # committed positions seen

    def features(self, out: ForwardOutput) -> torch.Tensor:
        """The per-position feature this drafter stores.  → [B, S, F]"""
        raise NotImplementedError

    def reset(self, batch: int) -> None:
        check_int(batch, "batch", 1)
        self.batch, self.feats, self.tokens, self.length = batch, None, None, 0

    def observe(self, tokens: torch.Tensor, out: ForwardOutput, n: int) -> None:
        if self.batch is None:
            raise ValueError("the drafter has no batch yet: call reset(batch) before observe")
        check_ids("tokens", tokens, self.module.cfg.vocab_size, self.batch)
        S = tokens.size(1)
        check_int(n, "n", 1, S, "the rows of this forward", bare=True)
        f = self.features(out)
        if f.dim() != 3 or f.size(0) != self.batch or f.size(1) < n:
            raise ValueError(
                f"out has features of shape {tuple(f.shape)}: need [{self.batch}, ≥ {n}, *] (no last_only)"
            )
        W = self.module.cfg.window_size
        f, t = f[:, :n].detach(), tokens[:, :n]
        self.feats = (f if self.feats is None else torch.cat([self.feats, f], 1))[:, -W:]  # [B, W', F]
        self.tokens = (t if self.tokens is None else torch.cat([self.tokens, t], 1))[:, -W:]  # [B, W']
        self.length += n

    def window(self, model: Transformer, cache, anchors: torch.Tensor, k: int) -> tuple[torch.Tensor, ...]:
        """Checks, then the rows of the window ending at p − 1: features [B, W', F], tokens x_{i+1} [B, W'] (the
        anchor last), positions [W']."""
        check_target(self.module, model)
        top = self.max_block(model)
        check_int(k, "k (the draft block size)", 1, top, f"the {self.kind} draft block", bare=True)
        if self.feats is None:
            raise ValueError("the drafter has seen no committed rows: call reset(batch) and observe(prompt …) first")
        if cache.length != self.length:
            raise ValueError(
                f"the cache holds {cache.length} positions but the drafter observed {self.length}: "
                "observe every committed forward"
            )
        if not isinstance(anchors, torch.Tensor) or anchors.dim() != 1 or anchors.dtype != torch.long:
            raise ValueError(f"anchors must be an int64 tensor [B] (got {getattr(anchors, 'shape', anchors)})")
        check_ids("anchors", anchors[:, None], self.module.cfg.vocab_size, self.batch, 1)
        p = self.length
        if p + k > model.cfg.max_seq_len:
            raise ValueError(f"draft block would reach position {p + k - 1}: max_seq_len = {model.cfg.max_seq_len}")
        nxt = torch.cat([self.tokens[:, 1:], anchors[:, None]], 1)  # [B, W'] x_{i+1} per row
        positions = torch.arange(p - nxt.size(1), p, device=anchors.device)  # [W']
        return self.feats, nxt, positions

    @staticmethod
    def output(tokens, logits, probs, hidden, positions, temperature) -> DraftOutput:
        tokens_t, logits_t, probs_t = torch.stack(tokens, 1), torch.stack(logits, 1), torch.stack(probs, 1)
        shown = probs_t if temperature > 0 else torch.softmax(logits_t, dim=-1)  # [B, k, V]
        return DraftOutput(
            tokens=tokens_t,  # [B, k]
            draft_probs=shown.gather(-1, tokens_t[..., None]).squeeze(-1),  # [B, k]
            confidence=torch.full(tokens_t.shape, float("nan"), dtype=probs_t.dtype, device=tokens_t.device),
            logits=logits_t,  # [B, k, V]
            probs=probs_t,  # [B, k, V]
            hidden=hidden,  # [B, k, D]
            positions=positions,  # [k]
        )


class MTP1Drafter(WindowDrafter):
    """MTP-1 as a drafter: one token per round from the row of the last committed position."""

    kind = "mtp1"

    def __init__(self, module: MTP1Draft):
        super().__init__(module, MTP1Draft)

    def max_block(self, model: Transformer) -> int:
        return 1

    def features(self, out: ForwardOutput) -> torch.Tensor:
        return out.hidden  # [B, S, D] the target's final hidden (before its norm)

    @torch.no_grad()
    def propose(self, model, cache, anchors, k, temperature, generator, trace=None) -> DraftOutput:
        token_distribution(torch.zeros(1, dtype=torch.float64), temperature)  # validates T
        feats, nxt, positions = self.window(model, cache, anchors, k)
        h, logits = self.module(model, feats, nxt, int(positions[0]))  # [B, W', D], [B, W', V]
        probs = token_distribution(logits[:, -1], temperature)  # [B, V]
        x = sample(probs, generator)  # [B]
        p = self.length
        block_pos = torch.arange(p, p + 1, device=anchors.device)  # [1]
        return self.output([x], [logits[:, -1]], [probs], h[:, -1:], block_pos, temperature)


class Eagle3Drafter(WindowDrafter):
    """Eagle3-lite as a drafter: a chain of k ≤ dspark_block_size steps from the row of the last committed
    position, each feeding the previous sample and the previous output hidden."""

    kind = "eagle3"

    def __init__(self, module: Eagle3Draft):
        super().__init__(module, Eagle3Draft)

    def max_block(self, model: Transformer) -> int:
        return model.cfg.dspark_block_size

    def features(self, out: ForwardOutput) -> torch.Tensor:
        return self.module.tap_concat(out.taps)  # [B, S, n·D]

    @torch.no_grad()
    def propose(self, model, cache, anchors, k, temperature, generator, trace=None) -> DraftOutput:
        token_distribution(torch.zeros(1, dtype=torch.float64), temperature)  # validates T
        m = self.module
        feats, nxt, positions = self.window(model, cache, anchors, k)
        ctx_k, ctx_v, h0 = m.context(model, feats, nxt, positions)
        row = positions[-1:]  # [1] the last committed position p − 1
        h = h0[:, -1:]  # [B, 1, D]
        chain_k: list[torch.Tensor] = []
        chain_v: list[torch.Tensor] = []
        tokens, logits, probs, hidden = [], [], [], []
        for j in range(k):
            if j > 0:
                h = m.chain_step(model, tokens[-1][:, None], h, row, j, positions, ctx_k, ctx_v, chain_k, chain_v)
            lj = m.logits(model, h[:, 0])  # [B, V]
            pj = token_distribution(lj, temperature)
            tokens.append(sample(pj, generator))  # [B]
            logits.append(lj)
            probs.append(pj)
            hidden.append(h[:, 0])
        p = self.length
        block_pos = torch.arange(p, p + k, device=anchors.device)  # [k] positions of anchor, x_1 … x_{k−1}
        return self.output(tokens, logits, probs, torch.stack(hidden, 1), block_pos, temperature)


# ---- checkpoints --------------------------------------------------------------------------------------
KIND_CLASSES: dict[str, type] = {"mtp1": MTP1Draft, "eagle3": Eagle3Draft}


def save_baseline(
    module: nn.Module, path: str | os.PathLike, meta: dict | None = None, target_sha256: str | None = None
) -> Path:
    """Write an MTP1Draft / Eagle3Draft to `path` (…/name.safetensors) atomically; returns the path.

    `target_sha256` records the target file the module was trained against (checked when the lab loads a set)."""
    path = Path(path)
    if not isinstance(module, tuple(KIND_CLASSES.values())):
        raise CheckpointError(f"save_baseline needs an MTP1Draft or Eagle3Draft (got {type(module).__name__})")
    if path.suffix != SUFFIX:
        raise CheckpointError(f"checkpoint path {str(path)!r} must end in {SUFFIX}")
    if path.is_dir():
        raise CheckpointError(f"checkpoint path {str(path)!r} is a directory")
    meta = {} if meta is None else meta
    if not isinstance(meta, dict):
        raise CheckpointError(f"meta must be a dict (got {type(meta).__name__})")
    header = {
        "format": FORMAT,
        "version": VERSION,
        "kind": module.kind,
        "config": _to_json(config_to_dict(module.cfg), "config (extra included)"),
        "meta": _to_json(meta, "meta"),
    }
    if target_sha256 is not None:
        header[TARGET_KEY] = check_sha256(target_sha256)
    tensors = {n: t.detach().to("cpu").contiguous().clone() for n, t in module.state_dict().items()}
    return write_tensors(tensors, path, header)


def _baseline_header(path: Path, handle: Any) -> dict[str, Any]:
    md = handle.metadata() or {}
    if md.get("format") != FORMAT:
        hint = (
            f" (a dspark-lab model checkpoint, part {md.get('part')!r}: load it with dspark_mini.checkpoint.load)"
            if md.get("format") == "dspark-lab"
            else ""
        )
        raise CheckpointError(
            f"{str(path)!r} is not a baseline drafter checkpoint: its metadata has format = {md.get('format')!r}, "
            f"expected {FORMAT!r}{hint}"
        )
    if md.get("version") != VERSION:
        raise CheckpointError(
            f"{str(path)!r} is a baseline checkpoint of version {md.get('version')!r}: this code reads {VERSION!r}"
        )
    kind = md.get("kind")
    if kind not in BASELINE_KINDS:
        raise CheckpointError(f"{str(path)!r} has kind = {kind!r}: allowed one of {BASELINE_KINDS}")
    return {"format": FORMAT, "version": VERSION, "kind": kind, **json_metadata(path, md)}


def read_baseline_header(path: str | os.PathLike) -> dict[str, Any]:
    """{format, version, kind, config (dict), meta (dict), target_sha256} of a baseline checkpoint, without
    loading tensors."""
    p, handle = _open(path)
    with handle as f:
        return _baseline_header(p, f)


def load_baseline(path: str | os.PathLike, model: Transformer) -> nn.Module:
    """A new MTP1Draft / Eagle3Draft (eval mode) with the weights of `path`, for the target `model`.

    Checks first: a baseline safetensors file; its kind; its config equals the target's; the exact set of tensor
    names; every shape and dtype; every value finite. Any failure raises CheckpointError."""
    if not isinstance(model, Transformer):
        raise CheckpointError(
            f"load_baseline needs the dspark_mini Transformer it drafts for (got {type(model).__name__})"
        )
    p, handle = _open(path)
    with handle as f:
        header = _baseline_header(p, f)
        try:
            cfg = config_from_dict(header["config"])
        except CheckpointError as e:
            raise CheckpointError(f"{str(p)!r}: {e}") from e
        diff = config_diff(cfg, model.cfg)
        if diff:
            lines = "; ".join(f"{n}: file {getattr(cfg, n)!r}, model {getattr(model.cfg, n)!r}" for n in diff)
            raise CheckpointError(f"{str(p)!r} was trained for a different target config — {lines}")
        module = KIND_CLASSES[header["kind"]](cfg)
        own = module.state_dict()
        names = set(f.keys())
        missing, unexpected = sorted(set(own) - names), sorted(names - set(own))
        if missing or unexpected:
            raise CheckpointError(
                f"{str(p)!r} (kind {header['kind']!r}) does not fit: missing {missing}, unexpected {unexpected}"
            )
        bad = []
        for name in sorted(own):
            sl = f.get_slice(name)
            shape, code = tuple(sl.get_shape()), sl.get_dtype()
            if shape != tuple(own[name].shape) or ST_DTYPES.get(code) != own[name].dtype:
                bad.append(
                    f"tensor {name!r}: file has shape {shape} dtype {code}, "
                    f"the module has shape {tuple(own[name].shape)} dtype {str(own[name].dtype).removeprefix('torch.')}"
                )
        if bad:
            raise CheckpointError(f"{str(p)!r} does not fit the module: " + "; ".join(bad))
        staged = {}
        for name in own:
            try:
                staged[name] = f.get_tensor(name)
            except Exception as e:
                raise CheckpointError(f"{str(p)!r}: tensor {name!r} could not be read ({e})") from e
            check_finite(p, name, staged[name])
    module.load_state_dict(staged, strict=True)
    return module.to(model.device).eval()

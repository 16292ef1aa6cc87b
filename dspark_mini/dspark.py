"""Step 6B · the DSpark draft: taps → draft layers → block [anchor, noise × (k−1)] → Markov head → draft tokens.

Taps: the mean over the hc copies of the attention-input stream of `dspark_target_layer_ids`, at every
target position. `mean` (lab): main_x = main_norm(Σ taps / n) — layers 3 and 4 mixed 0.5/0.5;
`concat_proj` (real): main_x = main_norm(main_proj([tap₃₇; tap₃₈; tap₃₉])).
Each draft layer (ratio 0, window only, θ = 10000) keeps its own ring of kv_norm(wkv(main_x)) at the
*accepted* target positions, written by the target forward's commit — so rejected rows never reach it.
A draft pass embeds [anchor, noise, …] at positions p … p+k−1 (p = the anchor's position), runs the draft
blocks (each row attends to the ring and to every row of the block: bidirectional inside the block), and
reads the base logits U_i = head(norm(h_i)) with the target's own embedding and head. The Markov head
is the only sequential part: logits_i = U_i + W2·W1[x_{i−1}] (x_0 = anchor), sample x_i, go on.
Outputs per position: draft token, draft probability p_d(x_i), confidence c_i = σ(w·[h_i; W1[x_{i−1}]])
(a predicted survival probability; the reference returns the raw logit, vLLM applies the sigmoid).
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from .attention import SharedAttention, hp_dtype
from .block import Block  # the draft blocks are ordinary V4.1 blocks with compress ratio 0
from .config import ModelConfig
from .linear import Embedding, Linear, cast
from .mhc import hc_pre, identity_pre_mix
from .norm import RMSNorm
from .quant import Prepared, fake_quant, forget_prepared, fp8_qdq
from .rope import apply_rope, rope_angles, rope_table
from .sampling import next_token, token_distribution
from .validate import check_int, check_temperature


@dataclass
class DraftOutput:
    tokens: torch.Tensor  # [B, k] draft tokens x_1..x_k
    draft_probs: torch.Tensor  # [B, k] p_d(x_i): probability of the drafted token under the draft distribution
    confidence: torch.Tensor  # [B, k] c_i = σ(w·[h_i; W1[x_{i−1}]])
    logits: torch.Tensor  # [B, k, V] draft logits after the Markov bias (before temperature)
    probs: torch.Tensor  # [B, k, V] the draft distribution p_d the tokens were sampled from
    hidden: torch.Tensor  # [B, k, D] collapsed draft stream (confidence-head input)
    positions: torch.Tensor  # [k] positions of the block rows (anchor first)


class MarkovHead(nn.Module):
    """Rank-r bigram correction: bias(prev, ·) = head · embed[prev]  (checkpoint `markov_head.embed/.head`).

    The step API (`start` → `step` per position) is shared with `RNNHead`; the vanilla head has no state."""

    def __init__(self, vocab_size: int, rank: int, dtype: torch.dtype):
        super().__init__()
        self.embed = Embedding(vocab_size, rank, dtype=dtype)  # W1 [V, r]
        self.head = Linear(rank, vocab_size, bias=False, dtype=dtype)  # W2 [V, r]

    def forward(self, prev: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """prev [...] → bias [..., V], W1[prev] [..., r]."""
        e = self.embed(prev)
        return self.head(e), e

    def start(self, batch: int, like: torch.Tensor) -> None:
        return None

    def step(self, prev: torch.Tensor, h: torch.Tensor, state) -> tuple[torch.Tensor, torch.Tensor, None]:
        """prev [B], h [B, D] (unused) → bias [B, V], W1[prev] [B, r], no state."""
        bias, e = self(prev)
        return bias, e, None

    def teacher_forced(self, prev: torch.Tensor, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """All positions at once from the true previous tokens prev [B, k] → bias [B, k, V], W1[prev] [B, k, r]."""
        return self(prev)


class RNNHead(nn.Module):
    """The paper's RNN head (eq. 6): a gated state carries the whole drafted prefix, not just the last token.

    z_k = [s_{k−1}; W1[x_{k−1}]; h_k] → one Linear(2r + D → 3r) → gate g, candidate c, output o;
    s_k = σ(g)·s_{k−1} + (1 − σ(g))·tanh(c), s_0 = 0; bias_k = W2·tanh(o)."""

    def __init__(self, vocab_size: int, rank: int, dim: int, dtype: torch.dtype):
        super().__init__()
        self.rank = rank
        self.embed = Embedding(vocab_size, rank, dtype=dtype)  # W1 [V, r]
        self.cell = Linear(2 * rank + dim, 3 * rank, bias=True, dtype=dtype)  # [3r, 2r + D]
        self.head = Linear(rank, vocab_size, bias=False, dtype=dtype)  # W2 [V, r]

    def start(self, batch: int, like: torch.Tensor) -> torch.Tensor:
        return torch.zeros(batch, self.rank, dtype=self.head.weight.dtype, device=like.device)  # s_0 [B, r]

    def step(self, prev: torch.Tensor, h: torch.Tensor, state: torch.Tensor):
        """prev [B], h [B, D], s_{k−1} [B, r] → bias [B, V], W1[prev] [B, r], s_k [B, r]."""
        e = self.embed(prev)
        g, c, o = self.cell(torch.cat([state, e, h.to(e.dtype)], -1)).chunk(3, dim=-1)  # [B, r] each
        gate = torch.sigmoid(g)
        state = gate * state + (1 - gate) * torch.tanh(c)
        return self.head(torch.tanh(o)), e, state

    def teacher_forced(self, prev: torch.Tensor, h: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Unrolled over the block with the true previous tokens prev [B, k] → bias [B, k, V], W1 [B, k, r]."""
        state = self.start(prev.size(0), prev)
        biases, embeds = [], []
        for i in range(prev.size(1)):
            bias, e, state = self.step(prev[:, i], h[:, i], state)
            biases.append(bias)
            embeds.append(e)
        return torch.stack(biases, 1), torch.stack(embeds, 1)


class DSparkDraft(nn.Module):
    """The draft stages (checkpoint `mtp.*`): main_proj/main_norm, the draft blocks, norm, the two heads."""

    def __init__(self, cfg: ModelConfig):
        super().__init__()
        self.cfg = cfg
        dt, hp = cfg.torch_dtype, hp_dtype(cfg)
        n_taps = len(cfg.dspark_target_layer_ids)
        self.main_proj = (
            Linear(n_taps * cfg.dim, cfg.dim, bias=False, dtype=dt)  # [D, n·D]
            if cfg.dspark_tap_mix == "concat_proj"
            else None
        )
        self.main_norm = RMSNorm(cfg.dim, cfg.norm_eps, dt)
        self.layers = nn.ModuleList(Block(cfg, cfg.n_layers + i) for i in range(cfg.n_mtp_layers))
        self.norm = RMSNorm(cfg.dim, cfg.norm_eps, dt)
        self.markov_head = (
            RNNHead(cfg.vocab_size, cfg.dspark_markov_rank, cfg.dim, dt)
            if cfg.dspark_markov_kind == "rnn"
            else MarkovHead(cfg.vocab_size, cfg.dspark_markov_rank, dt)
        )
        self.confidence_head = Linear(cfg.dim + cfg.dspark_markov_rank, 1, bias=False, dtype=hp)  # w [1, D + r]
        # STS calibration (lab/evaluation/calibration.py): c_i = σ(logit_i / T_i); None = raw head (all T_i = 1)
        self.confidence_temperatures: tuple[float, ...] | None = None
        # what `ring_rows` reads at every target forward, looked up once (`quant.Prepared`): the draft layers'
        # wkv weights and their kv_norm weights side by side [n, Dh] in the norm's precision
        self.ring_weights = Prepared(self.prepare_ring_weights, self.ring_params)
        self.register_load_state_dict_post_hook(forget_prepared)

    def ring_params(self) -> list[torch.Tensor]:
        return [w for blk in self.layers for w in (blk.attn.wkv.weight, blk.attn.kv_norm.weight)]

    def prepare_ring_weights(self) -> tuple[list[torch.Tensor], torch.Tensor]:
        """([wkv of each draft layer] [Dh, D] each, their kv_norm weights [n, Dh] in high precision)."""
        attns = [blk.attn for blk in self.layers]
        w = torch.stack([a.kv_norm.weight for a in attns])
        return [a.wkv.weight for a in attns], w.to(hp_dtype(self.cfg))

    def set_confidence_temperatures(self, temperatures) -> None:
        """Install per-position STS temperatures (one per block position, each > 0), or None for the raw head."""
        if temperatures is None:
            self.confidence_temperatures = None
            return
        t = tuple(float(x) for x in temperatures)
        k = self.cfg.dspark_block_size
        if len(t) != k or not all(x > 0 and x < float("inf") for x in t):
            raise ValueError(f"confidence temperatures = {temperatures!r} are invalid: allowed {k} values, each > 0")
        self.confidence_temperatures = t

    def main_x(self, taps: dict[int, torch.Tensor]) -> torch.Tensor:
        """The drafter's view of the target at every position.  taps {layer: [B, S, D]} → [B, S, D]"""
        parts = [taps[l] for l in self.cfg.dspark_target_layer_ids]
        if self.main_proj is None:
            mixed = sum(parts) / len(parts)  # "mean": layers 3 and 4 mixed 0.5/0.5 in the lab
        else:
            mixed = self.main_proj(torch.cat(parts, dim=-1))  # [B, S, n·D] → [B, S, D]
        return self.main_norm(mixed)

    def ring_rows(self, main_x: torch.Tensor, positions: torch.Tensor) -> dict[int, torch.Tensor]:
        """What each draft layer's window ring stores for these target positions.  → {layer: [B, S, Dh]}

        Each is that layer's `Attention.latent(main_x)`: FP8(RoPE(kv_norm(wkv(main_x)))). The layers' projections
        run one by one; the norm, the rotation and the QDQ run once over the layers side by side [B, S, n, Dh]
        (each works per row and per layer, so the numbers are the same)."""
        wkv, w = self.ring_weights.get()  # [Dh, D] per layer, kv_norm weights [n, Dh] (high precision)
        rope = rope_table(rope_angles(positions, self.layers[0].attn.inv_freq))  # draft layers: ratio 0, θ 10000
        kv = torch.stack([F.linear(main_x, wl) for wl in wkv], dim=2)  # [B, S, n, Dh]
        hp = w.dtype  # as `norm.rms_norm` computes: float64 for a float64 model, else float32
        h = cast(kv, hp)
        # kv_norm per layer: w · (h / √(mean(h²) + eps)) — torch.rms_norm is those steps bit for bit, w applied after
        normed = torch.rms_norm(h, (h.size(-1),), None, self.cfg.norm_eps).mul_(w)  # [B, S, n, Dh]
        rows = apply_rope(cast(normed, kv.dtype), rope)  # [B, S, n, Dh]
        if self.cfg.kv_quant:
            rows = fake_quant(rows, fp8_qdq, 32)  # blocks of 32 inside each layer's row: the same blocks
        return {blk.layer_id: r for blk, r in zip(self.layers, rows.unbind(2), strict=True)}

    def block_pass(
        self, anchor: torch.Tensor, embed: nn.Embedding, head: nn.Module, cache, k: int, trace=None
    ) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """The parallel part: [anchor, noise × (k−1)] through the draft blocks → positions [k], h [B, k, D],
        base logits U [B, k, V]. Every row attends to the ring and to the whole block."""
        cfg = self.cfg
        B, p = anchor.size(0), cache.length
        block = torch.full((B, k), cfg.dspark_noise_token_id, dtype=torch.long, device=anchor.device)
        block[:, 0] = anchor
        positions = torch.arange(p, p + k, device=anchor.device)  # [k]
        x = embed(block).unsqueeze(2).repeat(1, 1, cfg.hc_mult, 1)  # [B, k, hc, D]
        pre = identity_pre_mix(B, k, cfg.hc_mult, hp_dtype(cfg), anchor.device)
        shared = SharedAttention()
        for blk in self.layers:
            rec = trace.recorder(blk.layer_id) if trace is not None else None
            x, pre = blk(x, pre, positions, shared, cache, None, rec)
        h = hc_pre(x, pre)  # [B, k, D]
        return positions, h, head(self.norm(h).to(head.weight.dtype))  # U_i [B, k, V]

    def teacher_forced(
        self, anchor: torch.Tensor, prev: torch.Tensor, embed: nn.Embedding, head: nn.Module, cache
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """Training: the Markov head fed the true previous tokens (prev [B, k]: anchor, x_1 .. x_{k−1}) instead
        of its own samples, all positions at once. → draft logits [B, k, V], confidence logits [B, k]."""
        _, h, base = self.block_pass(anchor, embed, head, cache, prev.size(1))
        bias, e = self.markov_head.teacher_forced(prev, h)  # [B, k, V], [B, k, r]
        conf = self.confidence_head(torch.cat([h, e.to(h.dtype)], -1).to(self.confidence_head.weight.dtype))
        return base + bias.to(base.dtype), conf.squeeze(-1)

    def forward(
        self,
        anchor: torch.Tensor,
        embed: nn.Embedding,
        head: nn.Module,
        cache,
        k: int,
        temperature: float = 0.0,
        generator: torch.Generator | None = None,
        trace=None,
    ) -> DraftOutput:
        """One draft pass of k tokens for anchors [B] at position cache.length (the anchor is not in the target
        cache yet)."""
        cfg = self.cfg
        check_int(
            k, "k (the draft block size)", 1, cfg.dspark_block_size, "dspark_block_size, the trained block", bare=True
        )
        p = cache.length
        if p == 0:
            raise ValueError("the draft needs the target to have processed a prompt first (empty cache)")
        if p + k > cfg.max_seq_len:
            raise ValueError(f"draft block would reach position {p + k - 1}: max_seq_len = {cfg.max_seq_len}")
        positions, h, base = self.block_pass(anchor, embed, head, cache, k, trace)
        temperature = check_temperature(temperature)
        prev, state = anchor, self.markov_head.start(anchor.size(0), h)
        tokens, logits, embeds = [], [], []
        for i in range(k):  # the Markov head: the only sequential part
            bias, e, state = self.markov_head.step(prev, h[:, i], state)  # [B, V], [B, r]
            li = base[:, i] + bias.to(base.dtype)  # [B, V]
            xi = next_token(li, temperature, generator)  # [B]
            tokens.append(xi)
            logits.append(li)
            embeds.append(e)
            prev = xi
        tokens_t, logits_t = torch.stack(tokens, 1), torch.stack(logits, 1)  # [B, k], [B, k, V]
        probs_t = token_distribution(logits_t, temperature)  # [B, k, V] p_d (row by row as drawn above)
        # confidence c_i = σ(w·[h_i; W1[x_{i−1}]]): it reads no draw, so all positions go in one product
        hw = torch.cat([h, torch.stack(embeds, 1).to(h.dtype)], -1)  # [B, k, D + r]
        z = self.confidence_head(hw.to(self.confidence_head.weight.dtype)).squeeze(-1)  # [B, k] logits
        temps = self.confidence_temperatures
        if temps is not None:
            z = z / z.new_tensor(temps[:k])
        shown = probs_t if temperature > 0 else torch.softmax(logits_t, dim=-1)
        out = DraftOutput(
            tokens=tokens_t,
            draft_probs=shown.gather(-1, tokens_t[..., None]).squeeze(-1),
            confidence=torch.sigmoid(z),
            logits=logits_t,
            probs=probs_t,
            hidden=h,
            positions=positions,
        )
        if trace is not None:
            for name in ("tokens", "draft_probs", "confidence", "logits", "hidden"):
                trace.add("6B", -1, "draft_" + name if not name.startswith("draft") else name, getattr(out, name))
            trace.add("6B", -1, "base_logits", base)
        return out

"""Step 4A · MLA-style attention over [window ‖ compressed], with an attention sink and grouped O-LoRA.

  qr = q_norm(wq_a(x));  q = RoPE(wq_b(qr))                         [B, S, H, Dh]
  kv = FP8QDQ(RoPE(kv_norm(wkv(x))))                                [B, S, Dh]  one latent: K = V (MQA)
  o  = Σ_t softmax_t(q·k_t/√Dh ; sink_h) · k_t  over the window and the selected compressed entries
  o  = RoPE⁻¹(o) at the query position;  y = wo_b(concat_g(wo_a[g] · o_g))   (block-diagonal wo_a)
The sink is one learned logit per head that joins the softmax denominator (it can soak up attention).
Layers with ratio > 0 also read the latest KV source's compressed latents, at the positions the
latest index source picked; KV sources compress here (3B) and index sources pick here (3C).

Inference runs the same math with fewer, bigger ops (weights prepared once, `quant.Prepared`): every projection
that reads x (wq_a, wkv, and where the layer has them the indexer's weights_proj and the compressor's wkv/wgate)
is one matmul on the stacked weights [wq_a; wkv; …], split after; wo_a is one matmul on its block-diagonal form.
The prepared matrices are kept transposed, [in, out] (x @ Wᵀ with Wᵀ contiguous, as a serving engine lays out its
GEMM weights): the same products as F.linear(x, W), and several times cheaper for a few rows (a verify block).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch
import torch.nn.functional as F
from torch import nn

from .compressor import Compressor
from .config import ModelConfig
from .indexer import Indexer, visible_counts, window_mask
from .linear import Linear
from .norm import RMSNorm, rms_norm
from .quant import Prepared, fake_quant, forget_prepared, fp4_qdq, fp8_qdq
from .rope import RopeTable, apply_rope, layer_inv_freq, rope_angles, rope_table


@dataclass
class SharedAttention:
    """Hand-offs between the layers of one forward (the reference keeps these in a process global).

    Sources write, later layers read: the latest KV source's latents and index keys, the latest
    index source's picks, the candidate source's pool.
    """

    compress_kv: torch.Tensor | None = None  # [B, T, Dh] committed + new latents of the latest KV source
    index_k: torch.Tensor | None = None  # [B, T, Di]
    topk_idxs: torch.Tensor | None = None  # [B, S, k] compressed positions per query, −1 = none
    candidates: torch.Tensor | None = None  # [B, S, T] bool
    owner: dict = field(default_factory=dict)  # slot → layer that wrote it (for the 3B/3C views)
    memo: dict = field(default_factory=dict)  # what every layer would compute alike: RoPE tables, masks

    def once(self, key: tuple, make):
        """make() the first time `key` is asked for in this forward, the same value after that."""
        if key not in self.memo:
            self.memo[key] = make()
        return self.memo[key]

    def forget(self, kind: str) -> None:
        """Drop the memo entries of one kind (their inputs just changed)."""
        for key in [k for k in self.memo if k[0] == kind]:
            del self.memo[key]


def sparse_attention(q: torch.Tensor, kv: torch.Tensor, mask: torch.Tensor, sink: torch.Tensor, scale: float):
    """q [B, S, H, Dh], kv [B, T, Dh], mask [B, S, T] → o [B, S, H, Dh], probs [B, S, H, T], sink share [B, S, H].

    scores[s, h, t] = q[s, h] · kv[t] · scale (−∞ where masked);  p = softmax over [scores ‖ sink_h];
    o[s, h] = Σ_t p[s, h, t] · kv[t]. Both sums are one batched matmul over the S·H query rows of a sequence
    (the scale applied to each dot product as the first one finishes it: baddbmm's alpha)."""
    dt = q.dtype
    hp = torch.float64 if dt == torch.float64 else torch.float32
    B, S, H, Dh = q.shape
    T = kv.size(1)
    if kv.dtype != hp:
        kv = kv.to(hp)
    qf = (q if dt == hp else q.to(hp)).view(B, S * H, Dh)
    scores = torch.baddbmm(_zero(hp, q.device), qf, kv.mT, beta=0, alpha=scale).view(B, S, H, T)
    scores = torch.where(mask.unsqueeze(2), scores, _neg_inf(hp, q.device))  # [B, S, H, T]
    sink_col = (sink if sink.dtype == hp else sink.to(hp)).view(1, 1, H, 1).expand(B, S, H, 1)  # unscaled sink
    probs = torch.cat([scores, sink_col], dim=-1).softmax(dim=-1)  # [B, S, H, T + 1]
    probs_keys, sink_share = probs.split_with_sizes([T, 1], -1)  # [B, S, H, T], [B, S, H, 1]
    o = torch.bmm(probs_keys.view(B, S * H, T), kv).view(B, S, H, Dh)  # the sink column has no value
    return (o if dt == hp else o.to(dt)), probs_keys, sink_share.squeeze(-1)


_CONST: dict = {}


def _const(value: float, dtype: torch.dtype, device) -> torch.Tensor:
    """A [1, 1, 1] constant, made once (a Python float costs a new scalar tensor at every op)."""
    key = (value, dtype, device)
    t = _CONST.get(key)
    if t is None:
        with torch.inference_mode(False):
            t = _CONST[key] = torch.full((1, 1, 1), value, dtype=dtype, device=device)
    return t


def _zero(dtype: torch.dtype, device) -> torch.Tensor:
    """The (ignored, beta = 0) input term of a baddbmm."""
    return _const(0.0, dtype, device)


def _neg_inf(dtype: torch.dtype, device) -> torch.Tensor:
    return _const(float("-inf"), dtype, device)


class Attention(nn.Module):
    def __init__(self, cfg: ModelConfig, layer_id: int):
        super().__init__()
        dt, hp = cfg.torch_dtype, hp_dtype(cfg)
        self.layer_id, self.cfg = layer_id, cfg
        self.n_heads, self.head_dim, self.rope_dim = cfg.n_heads, cfg.head_dim, cfg.rope_head_dim
        self.groups, self.o_rank, self.window = cfg.o_groups, cfg.o_lora_rank, cfg.window_size
        self.ratio = cfg.compress_ratios[layer_id]
        backbone = layer_id < cfg.n_layers
        self.is_draft = not backbone  # DSpark layer: ring of target latents, bidirectional block
        self.is_kv_source = backbone and layer_id in cfg.kv_source_layers
        self.is_index_source = backbone and layer_id in cfg.index_source_layers
        self.is_candidate_source = backbone and layer_id == cfg.candidate_source_layer
        self.uses_candidates = self.is_index_source and 0 <= cfg.candidate_source_layer < layer_id

        self.wq_a = Linear(cfg.dim, cfg.q_lora_rank, bias=False, dtype=dt)  # [Rq, D]
        self.q_norm = RMSNorm(cfg.q_lora_rank, cfg.norm_eps, dt)
        self.wq_b = Linear(cfg.q_lora_rank, cfg.n_heads * cfg.head_dim, bias=False, dtype=dt)  # [H·Dh, Rq]
        self.wkv = Linear(cfg.dim, cfg.head_dim, bias=False, dtype=dt)  # [Dh, D]
        self.kv_norm = RMSNorm(cfg.head_dim, cfg.norm_eps, dt)
        per_group = cfg.n_heads * cfg.head_dim // cfg.o_groups
        self.wo_a = Linear(per_group, cfg.o_groups * cfg.o_lora_rank, bias=False, dtype=dt)  # [G·R, H·Dh/G]
        self.wo_b = Linear(cfg.o_groups * cfg.o_lora_rank, cfg.dim, bias=False, dtype=dt)  # [D, G·R]
        self.attn_sink = nn.Parameter(torch.zeros(cfg.n_heads, dtype=hp))  # [H]
        self.compressor = (
            Compressor(cfg.dim, cfg.head_dim, self.ratio, cfg.norm_eps, dt, hp) if self.is_kv_source else None
        )
        self.indexer = (
            Indexer(
                cfg.dim,
                cfg.q_lora_rank,
                cfg.head_dim,
                cfg.index_n_heads,
                cfg.index_head_dim,
                cfg.index_topk,
                self.is_kv_source,
                cfg.norm_eps,
                cfg.kv_quant,
                dt,
            )
            if self.is_index_source
            else None
        )
        inv = layer_inv_freq(cfg, bool(self.ratio))  # [r/2]
        self.register_buffer("inv_freq", inv, persistent=False)
        self.kv_quant, self.eps = cfg.kv_quant, cfg.norm_eps
        # the prepared forms (caches, not parameters): the input projections stacked, wo_a by group, and
        # the other weights the forward reads, in one lookup (a module attribute costs more than a small op)
        self.prepared = Prepared(self.prepare_weights, self.forward_weights)
        self.register_load_state_dict_post_hook(forget_prepared)

    # ---- prepared weights -------------------------------------------------------------------------
    def input_weights(self) -> list[torch.Tensor]:
        """Every weight that reads the attention input x, in the order of the stacked projection: wq_a [Rq, D],
        wkv [Dh, D], then the indexer's weights_proj [Hi, D] and the compressor's wkv (and wgate) [Dh, D] where
        this layer has them and they hold the same dtype (a ratio-2 compressor keeps high precision)."""
        ws = [self.wq_a.weight, self.wkv.weight]
        if self.indexer is not None:
            ws.append(self.indexer.weights_proj.weight)
        c = self.compressor
        if c is not None and c.wkv.weight.dtype == ws[0].dtype:
            ws += [c.wkv.weight, c.wgate.weight] if c.ratio > 1 else [c.wkv.weight]
        return ws

    def stack_inputs(self) -> tuple[torch.Tensor, list[int]]:
        """[wq_a; wkv; (weights_proj); (compressor wkv; wgate)] stacked by rows [Rq + Dh + …, D], and the row
        count of each: F.linear(x, stacked) is every one of those projections of x at once, split after.
        (weights_proj only feeds the indexer's top-k, which has no gradient: it enters detached, so training
        leaves its .grad None, as an unfused weights_proj(x) would.)"""
        ws = self.input_weights()
        if self.indexer is not None:
            ws[2] = ws[2].detach()
        return torch.cat(ws, dim=0), [w.size(0) for w in ws]

    def forward_weights(self) -> list[torch.Tensor]:
        """The parameters the prepared forms are built from."""
        return self.input_weights() + [
            self.q_norm.weight,
            self.wq_b.weight,
            self.kv_norm.weight,
            self.attn_sink,
            self.wo_a.weight,
        ]

    def prepare_weights(self) -> tuple:
        """(stacked input projection, transposed [D, Rq + Dh + …], its split sizes, q_norm weight [Rq], wq_bᵀ
        [Rq, H·Dh], kv_norm weight [Dh], attn_sink [H], wo_a by group transposed [G, H·Dh/G, R])."""
        w_in, sizes = self.stack_inputs()
        return (
            w_in.mT.contiguous(),
            sizes,
            self.q_norm.weight,
            self.wq_b.weight.mT.contiguous(),
            self.kv_norm.weight,
            self.attn_sink,
            self.wo_a.weight.view(self.groups, self.o_rank, -1).mT.contiguous(),
        )

    def grouped_wo_a(self, o: torch.Tensor, wo_a_t: torch.Tensor) -> torch.Tensor:
        """The grouped output LoRA: o [B, S, H·Dh] with wo_a_t [G, H·Dh/G, R] (`prepare_weights`) → [B, S, G·R],
        mid[g·R + r] = Σ_c wo_a[g·R + r, c] · o[g·H·Dh/G + c] — group g maps its own H·Dh/G channels to its own R
        ranks (a block-diagonal wo_a without its zero blocks: at flash widths those would be 7/8 of a 268M matrix
        per layer). One batched matmul over the groups."""
        B, S, _ = o.shape
        G, C, R = wo_a_t.shape
        mid = torch.matmul(o.reshape(B * S, G, C).transpose(0, 1), wo_a_t)  # [G, B·S, R]
        return mid.transpose(0, 1).reshape(B, S, G * R)

    def prepare(self) -> None:
        """Rebuild the prepared weights now (after an in-place edit through `.data`; see `quant.Prepared`)."""
        self.prepared.rebuild()

    def forward(
        self, x: torch.Tensor, positions: torch.Tensor, shared: SharedAttention, cache, pending, rec=None
    ) -> torch.Tensor:
        """x [B, S, D] (normed attention input), positions [S] absolute → [B, S, D]."""
        B, S, _ = x.shape
        w_in_t, sizes, q_norm_w, wq_b_t, kv_norm_w, sink, wo_a_t = self.prepared.get()  # [in, out] layouts
        # one RoPE table per forward for all layers of this kind (ratio 0: θ = 10000; ratio > 0: compress θ + YaRN)
        rope = shared.once(("rope", self.ratio > 0), lambda: rope_table(rope_angles(positions, self.inv_freq)))
        # wq_a(x), wkv(x) (and weights_proj(x), the compressor's wkv(x) / wgate(x)): one matmul, split
        proj = torch.matmul(x, w_in_t).split_with_sizes(sizes, -1)  # [B, S, Rq], [B, S, Dh], …
        qr = rms_norm(proj[0], q_norm_w, self.eps)  # [B, S, Rq] q_norm(wq_a(x))
        q = apply_rope(torch.matmul(qr, wq_b_t).view(B, S, self.n_heads, self.head_dim), rope)  # [B, S, H, Dh]
        kv_raw = apply_rope(rms_norm(proj[1], kv_norm_w, self.eps), rope)  # [B, S, Dh] RoPE(kv_norm(wkv(x)))
        kv = fake_quant(kv_raw, fp8_qdq, 32) if self.kv_quant else kv_raw  # FP8 as stored
        if pending is not None and not self.is_draft:  # a draft block's own rows are never stored
            pending.window[self.layer_id] = kv

        # keys: committed ring slots ‖ this chunk's own rows (‖ the compressed latents); the window mask is the
        # same for every layer
        ring = cache.windows[self.layer_id] if cache is not None else None
        keys = [ring.kv, kv] if ring is not None else [kv]
        key_pos, mask = shared.once(
            ("window", self.is_draft, id(ring.pos) if ring is not None else None),
            lambda: self._window(ring, positions, B),
        )  # [Tw], [B, S, Tw]
        n_window = mask.size(-1)

        if self.ratio:
            extra = proj[2:]  # [weights_proj(x)], [compressor wkv(x) (, wgate(x))] where this layer has them
            if self.is_kv_source:
                self._compress(x, cache, pending, shared, rec, extra[1:] if self.indexer is not None else extra, rope)
            visible = shared.once(("visible", self.ratio), lambda: visible_counts(positions, self.ratio))  # [S]
            if self.is_index_source:
                self._pick(x, qr, rope, visible, shared, rec, extra[0] if extra else None)
            comp = shared.compress_kv  # [B, T, Dh]
            picks = shared.topk_idxs  # [B, S, k]
            keys.append(comp)
            # the same for every layer until a source publishes new latents or picks (they drop it from the memo)
            mask = shared.once(("picked", id(mask)), lambda: self._picked(mask, picks, comp.size(1)))
        keys = torch.cat(keys, dim=1) if len(keys) > 1 else keys[0]  # [B, Tw (+ T), Dh]

        o, probs, sink_share = sparse_attention(q, keys, mask, sink, self.head_dim**-0.5)
        o = apply_rope(o, rope, inverse=True)
        # grouped wo_a: group g maps its H·Dh/G channels to its own R ranks
        # (naive: mid[g] = wo_a[g] @ o[g·H·Dh/G : (g+1)·H·Dh/G] for each group g)
        mid = self.grouped_wo_a(o.view(B, S, -1), wo_a_t)  # [B, S, G·R]
        y = self.wo_b(mid)  # [B, S, D]
        if rec is not None:
            rec("4A", "probs", probs)
            rec("4A", "n_window_keys", torch.tensor(n_window))
            rec("4A", "window_share", probs[..., :n_window].sum(-1))
            rec("4A", "compressed_share", probs[..., n_window:].sum(-1))
            rec("4A", "sink_share", sink_share)
            rec("4A", "window_key_pos", key_pos)
            rec("6A", "window_kv_raw", kv_raw)
            rec("6A", "window_kv", kv)
        return y

    def _window(self, ring, positions: torch.Tensor, B: int) -> tuple[torch.Tensor, torch.Tensor]:
        """Positions of the window keys [Tw] (ring slots, then this chunk) and the mask [B, S, Tw]. A ring whose
        `pos` is [B, W] (draft training: each block its own ring fill) gives key positions [B, Tw]."""
        if ring is None:
            key_pos = positions
        else:  # [W] ‖ [S], or [B, W] ‖ [B, S]
            key_pos = torch.cat([ring.pos, positions if ring.pos.dim() == 1 else positions.expand(B, -1)], -1)
        if self.is_draft:  # every filled ring slot and every row of the block: bidirectional inside it
            return key_pos, (key_pos >= 0).unsqueeze(-2).expand(B, positions.numel(), -1)
        return key_pos, window_mask(positions, key_pos, self.window).expand(B, -1, -1)

    @staticmethod
    def _picked(mask: torch.Tensor, picks: torch.Tensor, T: int) -> torch.Tensor:
        """The window mask [B, S, Tw] extended by the picked compressed positions (picks [B, S, k], −1 = none)."""
        B, S, _ = mask.shape
        comp_mask = torch.zeros(B, S, T + 1, dtype=torch.bool, device=mask.device)
        comp_mask.scatter_(-1, torch.where(picks >= 0, picks, T), True)  # −1 → the spare column T
        return torch.cat([mask, comp_mask[..., :-1]], dim=-1)  # [B, S, Tw + T]

    def latent(
        self, x: torch.Tensor, positions: torch.Tensor, rope: RopeTable | torch.Tensor | None = None
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """The shared K = V latent of each row: RoPE(kv_norm(wkv(x))), then FP8 QDQ.  → raw, stored [B, S, Dh]"""
        rope = rope_table(rope_angles(positions, self.inv_freq)) if rope is None else rope
        return self._latent(F.linear(x, self.wkv.weight), rope)

    def _latent(self, kv: torch.Tensor, rope: RopeTable) -> tuple[torch.Tensor, torch.Tensor]:
        """wkv(x) [B, S, Dh] → RoPE(kv_norm(·)) and its FP8 QDQ, both [B, S, Dh] (as the forward computes them)."""
        kv_raw = apply_rope(rms_norm(kv, self.kv_norm.weight, self.eps), rope)
        return kv_raw, (fake_quant(kv_raw, fp8_qdq, 32) if self.kv_quant else kv_raw)

    def _compress(self, x, cache, pending, shared: SharedAttention, rec, proj=(), rope=None) -> None:
        """3B: new latents of this chunk → index keys (pre-RoPE) → RoPE at j·ratio → FP4 → shared.
        proj: the compressor's wkv(x) (and wgate(x)) when the stacked input projection computed them;
        rope: this forward's table for this layer's RoPE (a ratio-1 source's groups are its rows: the same angles)."""
        r, cfg = self.ratio, self.cfg
        carry = cache.carry(self.layer_id) if cache is not None else None
        latent, tok_kv, tok_score, gate = self.compressor(x, carry, *proj)  # [B, n, Dh]
        start = pending.start if pending is not None else 0
        n_new = latent.size(1)

        def group_positions() -> torch.Tensor:  # [n] group j → its first token's position (start // r + j) · r
            return (start // r + torch.arange(n_new, device=x.device)) * r

        if n_new:
            if r == 1 and rope is not None and n_new == x.size(1):
                gang = rope  # groups of one token: the rows' own positions
            else:  # the same groups at every source of this ratio (all ratio > 0 layers share inv_freq): made once
                gang = shared.once(
                    ("group_rope", r, start // r, n_new),
                    lambda: rope_table(rope_angles(group_positions(), self.inv_freq)),
                )
            new_ik = self.indexer.index_keys(latent, gang)  # [B, n, Di]
            rot = apply_rope(latent, gang)
            new_kv = fake_quant(rot, fp4_qdq, 16, "e4m3") if cfg.kv_quant else rot
        else:  # no group completed in this chunk (a ratio-2 source, every other decode step)
            rot = new_kv = latent  # [B, 0, Dh]
            new_ik = latent.new_zeros(latent.size(0), 0, cfg.index_head_dim)  # [B, 0, Di]
        if cache is not None:
            store = cache.sources[self.layer_id]
            comp = torch.cat([store.kv[:, : store.count], new_kv], dim=1)
            ik = torch.cat([store.index_k[:, : store.count], new_ik], dim=1)
        else:
            comp, ik = new_kv, new_ik
        shared.compress_kv, shared.index_k = comp, ik
        shared.forget("picked")
        shared.owner["compress_kv"] = shared.owner["index_k"] = self.layer_id
        if pending is not None:
            pending.latents[self.layer_id], pending.index_k[self.layer_id] = new_kv, new_ik
            if r > 1:
                pending.tokens[self.layer_id] = (tok_kv, tok_score)
        if rec is not None:
            rec("3B", "latent_pre_rope", latent)
            rec("3B", "group_positions", group_positions())
            rec("3B", "n_compressed", torch.tensor(comp.size(1)))
            if gate is not None:
                rec("3B", "gate", gate)
            rec("6A", "compressed_raw", rot)
            rec("6A", "compressed_kv", new_kv)
            rec("6A", "index_k", new_ik)

    def _pick(self, x, qr, rope, visible, shared: SharedAttention, rec, w=None) -> None:
        """3C: score the compressed entries and publish this layer's top-k (and candidates).
        w: weights_proj(x) [B, S, Hi] when the stacked input projection computed it."""
        cfg = self.cfg
        cand_filter = (cfg.candidate_topk_blocks, cfg.candidate_block_size) if self.is_candidate_source else None
        cands = shared.candidates if self.uses_candidates else None
        T = shared.index_k.size(1)
        seen = shared.once(("seen", self.ratio, T), lambda: torch.arange(T, device=x.device) < visible[:, None])
        idxs, scores, cand_out = self.indexer(x, qr, rope, visible, shared.index_k, cands, cand_filter, w, seen)
        shared.topk_idxs = idxs
        shared.forget("picked")
        shared.owner["topk_idxs"] = self.layer_id
        if cand_out is not None:
            shared.candidates = cand_out
            shared.owner["candidates"] = self.layer_id
        if rec is not None:
            rec("3C", "scores", scores)
            rec("3C", "topk_idxs", idxs)
            rec("3C", "visible", visible)
            if cand_out is not None:
                rec("3C", "candidates", cand_out)
            if cands is not None:
                rec("3C", "candidates_used", cands)


def hp_dtype(cfg: ModelConfig) -> torch.dtype:
    """High precision for mHC, router, sinks and the head: fp32, or fp64 when the model runs in fp64."""
    return torch.float64 if cfg.torch_dtype == torch.float64 else torch.float32

"""The V4.1-Flash-shaped Transformer: embedding (1A) → [Engram (1B)] → blocks with single-pass mHC (2A),
CSA2 attention (3A-4A, 6A) and MoE (5A) → final collapse → RMSNorm → LM head (6B, logits [B, S, V]).

  X₀ = repeat(embed(tokens), hc)                     [B, S, hc, D], first pre-mix one-hot on copy 0
  per block ℓ:  X ← X + Engram_ℓ(X)  (Engram layers only, before the block's mixes)
                (a_pre, a_post, a_comb) = mix_attn(X);  X ← hc_post(attn(norm(hc_pre(X, pre_in))), X, a_post, a_comb)
                (f_pre, f_post, f_comb) = mix_ffn(X);   X ← hc_post(moe(norm(hc_pre(X, a_pre))), X, f_post, f_comb)
                pre_in ← f_pre
  logits = head(norm(hc_pre(X, pre_in)))
The DSpark taps are the mean over the hc copies of the *attention input stream* of the tap layers.
A forward can run over any chunk of positions after what a `KVCache` already holds; it returns the
writes it would make (`PendingWrites`) and commits them unless told not to, so incremental decoding,
speculative verification and the one-shot forward all run the same code.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch import nn

from .attention import SharedAttention, hp_dtype
from .block import Block
from .config import ModelConfig
from .dspark import DraftOutput, DSparkDraft
from .engram import engram_multipliers, engram_primes, hash_ngram_ids, new_history
from .kv_cache import KVCache, PendingWrites
from .linear import Embedding, Linear, cast
from .mhc import hc_pre, identity_pre_mix
from .norm import RMSNorm
from .quant import prepare_all
from .ragged import RaggedBatch
from .validate import renamed


class Trace:
    """Tensors a learner needs, by step id → layer (−1 = whole model) → name. Detached copies."""

    def __init__(self, sinkhorn_history: bool = True):
        self.data: dict[str, dict[int, dict[str, torch.Tensor]]] = {}
        self.sinkhorn_history = sinkhorn_history

    def add(self, step: str, layer: int, name: str, value: torch.Tensor) -> None:
        self.data.setdefault(step, {}).setdefault(layer, {})[name] = value.detach().clone()

    def recorder(self, layer: int) -> Recorder:
        return Recorder(self, layer)

    def get(self, step: str, name: str, layer: int = -1) -> torch.Tensor:
        try:
            return self.data[step][layer][name]
        except KeyError:
            raise KeyError(f"trace has no '{name}' for step {step} layer {layer}") from None

    def layers(self, step: str) -> list[int]:
        return sorted(k for k in self.data.get(step, {}) if k >= 0)


@dataclass
class Recorder:
    """`rec(step, name, tensor)` for one layer; modules call it only when a trace is being taken."""

    trace: Trace
    layer: int

    def __call__(self, step: str, name: str, value: torch.Tensor) -> None:
        self.trace.add(step, self.layer, name, value)

    @property
    def sinkhorn_history(self) -> bool:
        return self.trace.sinkhorn_history


@dataclass
class ForwardOutput:
    logits: torch.Tensor  # [B, S, V] (or [B, 1, V] with last_only)
    hidden: torch.Tensor  # [B, S, D] collapsed final stream, before the head's RMSNorm
    taps: dict[int, torch.Tensor]  # tap layer → [B, S, D] mean over hc copies of its attention input
    pending: PendingWrites


class Transformer(nn.Module):
    def __init__(self, cfg: ModelConfig, compress_map: torch.Tensor | None = None):
        """compress_map: raw id → Engram compressed id [V] (from the tokenizer); without one, id mod size."""
        super().__init__()
        cfg.validate()
        self.cfg = cfg
        dt, hp = cfg.torch_dtype, hp_dtype(cfg)
        self.embed = Embedding(cfg.vocab_size, cfg.dim, dtype=dt)  # [V, D] (no random fill on `meta`)
        self.layers = nn.ModuleList(Block(cfg, i) for i in range(cfg.n_layers))
        self.norm = RMSNorm(cfg.dim, cfg.norm_eps, dt)
        self.head = Linear(cfg.dim, cfg.vocab_size, bias=False, dtype=hp)  # [V, D], fp32 logits
        self.mtp = DSparkDraft(cfg) if cfg.n_mtp_layers else None  # shares embed and head (not re-registered)
        if compress_map is None:
            compress_map = torch.arange(cfg.vocab_size, device="cpu") % cfg.engram_compressed_vocab_size
        if compress_map.shape != (cfg.vocab_size,):
            raise ValueError(f"compress_map has shape {tuple(compress_map.shape)}: expected ({cfg.vocab_size},)")
        if int(compress_map.cpu().max()) >= cfg.engram_compressed_vocab_size:
            raise ValueError(
                f"compress_map holds ids ≥ engram_compressed_vocab_size ({cfg.engram_compressed_vocab_size})"
            )
        self.register_buffer("compress_map", compress_map.long(), persistent=False)  # [V]
        primes = engram_primes(cfg)
        self.engram_primes = {l: p for l, p in zip(cfg.engram_layer_ids, primes, strict=True)}
        for l in cfg.engram_layer_ids:
            self.register_buffer(f"engram_mult_{l}", engram_multipliers(cfg, l), persistent=False)  # [max_ngram]

    # ---- set-up --------------------------------------------------------------------------------
    @property
    def device(self) -> torch.device:
        return self.embed.weight.device

    def pad_compressed_id(self) -> int:
        return int(self.compress_map[self.cfg.engram_pad_id])

    def new_cache(self, batch: int = 1) -> KVCache:
        hist = new_history(batch, self.cfg, self.pad_compressed_id()).to(self.device)
        return KVCache(self.cfg, batch, device=self.device, engram_history=hist)

    def prepare(self) -> Transformer:
        """Build the prepared forms of the static weights now (`quant.Prepared`, every one the model holds): the
        routed experts stacked and MXFP4-QDQ'd, the Engram tables FP8-QDQ'd, the stacked attention projections,
        the scaled mHC projections. Optional — the first inference forward builds them, and they rebuild themselves
        after an optimizer step, `load_state_dict` or an in-place edit under no_grad; needed only after an in-place
        edit through `.data` (`w.data.zero_()`)."""
        prepare_all(self)
        return self

    @torch.no_grad()
    def init_weights(
        self, seed: int = 0, on_device: bool = False, progress: Callable[[int, int], None] | None = None
    ) -> Transformer:
        """Deterministic random init (the untrained lab model): same seed → same numbers.

        on_device=True draws on each parameter's own device in its own dtype (a GPU run of the real widths:
        tens of billions of values, too many to draw in float64 on the host); same rules, other numbers.
        progress(done, total): called after each parameter with the values drawn so far and in all."""
        g = torch.Generator(device=self.device if on_device else "cpu").manual_seed(seed)
        total, done = sum(p.numel() for p in self.parameters()), 0

        def normal(p: torch.Tensor, std: float) -> None:
            if on_device:
                p.normal_(0.0, std, generator=g)
            else:
                p.copy_(torch.randn(p.shape, generator=g, dtype=torch.float64).mul_(std).to(p.dtype))

        for name, p in self.named_parameters():
            leaf = name.rsplit(".", 1)[-1]
            if name.endswith("norm.weight") or leaf in ("q_weight", "k_weight"):
                p.fill_(1.0)
            elif name.endswith("attn_sink") or name.endswith("confidence_head.weight"):
                p.zero_()  # no sink preference; an untrained confidence head says σ(0) = 0.5
            elif name.endswith("gate.bias"):
                normal(p, 0.1)  # a stand-in for the trained load-balancing bias
            elif leaf == "scale" and ".hc_" in name:
                p.fill_(1.0)
            elif leaf == "base" and ".hc_" in name:
                normal(p, 0.5)
            elif leaf == "fn" and ".hc_" in name:
                normal(p, 0.5 * p.shape[1] ** -0.5)  # mild mixes: comb starts near uniform
            elif name == "embed.weight" or name.endswith("engram.embed.weight"):
                normal(p, 1.0)
            elif p.dim() == 2:
                normal(p, p.shape[1] ** -0.5)
            else:
                normal(p, 0.02)
            if progress is not None:
                done += p.numel()
                progress(done, total)
        return self

    # ---- forward ------------------------------------------------------------------------------
    def check_tokens(self, tokens: torch.Tensor, cache: KVCache | None) -> None:
        if not isinstance(tokens, torch.Tensor) or tokens.dim() != 2 or tokens.dtype != torch.long:
            raise ValueError(
                "tokens must be an int64 tensor of shape [B, S]"
                f" (got {getattr(tokens, 'dtype', type(tokens))} {tuple(getattr(tokens, 'shape', ()))})"
            )
        if tokens.numel() == 0:
            raise ValueError(
                f"tokens is empty (shape {tuple(tokens.shape)}): give at least one sequence of at least one token id"
            )
        V = self.cfg.vocab_size
        lo, hi = (int(v) for v in torch.aminmax(tokens))
        if lo < 0 or hi >= V:
            bad = lo if lo < 0 else hi
            raise ValueError(f"token id {bad} is out of range: allowed 0..{V - 1}")
        done = cache.length if cache is not None else 0
        if done + tokens.size(1) > self.cfg.max_seq_len:
            raise ValueError(f"sequence length {done + tokens.size(1)} exceeds max_seq_len = {self.cfg.max_seq_len}")
        if cache is not None and cache.batch != tokens.size(0):
            raise ValueError(f"tokens batch {tokens.size(0)} differs from the cache batch {cache.batch}")

    def engram_row_ids(self, compressed: torch.Tensor, history: torch.Tensor) -> dict[int, torch.Tensor]:
        """Row ids per Engram layer from compressed ids [B, S] and the history [B, n−1].  → [B, S, cols]"""
        return {
            l: hash_ngram_ids(compressed, history, getattr(self, f"engram_mult_{l}"), self.engram_primes[l])
            for l in self.cfg.engram_layer_ids
        }

    def forward(
        self,
        tokens: torch.Tensor,
        cache: KVCache | None = None,
        trace: Trace | None = None,
        commit: bool = True,
        last_only: bool = False,
    ) -> ForwardOutput:
        """tokens [B, S] at positions cache.length … (0 without a cache)."""
        self.check_tokens(tokens, cache)
        cfg = self.cfg
        B, S = tokens.shape
        start = cache.length if cache is not None else 0
        positions = torch.arange(start, start + S, device=tokens.device)  # [S]
        pending = PendingWrites(start, S)
        top = trace.recorder(-1) if trace is not None else None

        compressed = self.compress_map[tokens]  # [B, S] Engram compressed ids
        history = (
            cache.engram_history
            if cache is not None
            else new_history(B, cfg, self.pad_compressed_id()).to(tokens.device)
        )
        pending.compressed_ids = compressed
        row_ids = self.engram_row_ids(compressed, history)

        h = self.embed(tokens)  # [B, S, D]
        x = h.unsqueeze(2).repeat(1, 1, cfg.hc_mult, 1)  # [B, S, hc, D]
        pre = identity_pre_mix(B, S, cfg.hc_mult, hp_dtype(cfg), tokens.device)  # [B, S, hc]
        if top is not None:
            top("1A", "tokens", tokens)
            top("1A", "positions", positions)
            top("1A", "embedding", h)
            top("1A", "streams", x)
            top("1A", "pre_mix", pre)
            top("1B", "compressed_ids", compressed)
            top("1B", "history", history)

        shared = SharedAttention()
        taps = {}
        for block in self.layers:
            i = block.layer_id
            rec = trace.recorder(i) if trace is not None else None
            if block.engram is not None:
                before = x
                x, info = block.engram(x, row_ids[i])
                if rec is not None:
                    for name, t in info.items():
                        rec("1B", name, t)
                    rec("1B", "stream_before", before)
            if i in cfg.dspark_target_layer_ids:
                taps[i] = x.mean(dim=2)  # [B, S, D] the attention input stream, averaged over copies
            x, pre = block(x, pre, positions, shared, cache, pending, rec)
        hidden = hc_pre(x, pre)  # [B, S, D] final collapse with the last FFN's pre
        if last_only:
            hidden = hidden[:, -1:]
        normed = self.norm(hidden)
        logits = self.head(cast(normed, self.head.weight.dtype))  # [B, S, V]
        if top is not None:
            top("head", "hidden", hidden)
            top("head", "normed", normed)
            top("head", "logits", logits)
            for i, t in taps.items():
                trace.add("6B", i, "tap", t)
        if self.mtp is not None:  # the draft rings get the target's view of these positions (on commit)
            main_x = self.mtp.main_x(taps)  # [B, S, D]
            pending.window.update(self.mtp.ring_rows(main_x, positions))
            if top is not None:
                top("6B", "main_x", main_x)
        if cache is not None and commit:
            cache.commit(pending)
        return ForwardOutput(logits=logits, hidden=hidden, taps=taps, pending=pending)


def forward_ragged(model: Transformer, rows: list[torch.Tensor], caches: list[KVCache]) -> list[ForwardOutput]:
    """R requests in one packed forward (see `ragged.py`): rows[r] [1, n_r] at positions caches[r].length …
    Nothing is committed; returns one ForwardOutput per request (logits [1, n_r, V], its own pending writes)."""
    cfg = model.cfg
    batch = RaggedBatch.build(rows, caches)
    for t, c in zip(rows, caches, strict=True):
        model.check_tokens(t, c)
    tokens = torch.cat(rows, dim=1)  # [1, T] all segments end to end
    T = tokens.size(1)
    compressed = model.compress_map[tokens]  # [1, T]
    row_ids: dict[int, list[torch.Tensor]] = {l: [] for l in cfg.engram_layer_ids}
    for comp_r, cache, pend in zip(batch.split(compressed), caches, batch.pendings, strict=True):
        pend.compressed_ids = comp_r
        for l, ids in model.engram_row_ids(comp_r, cache.engram_history).items():  # each request's own history
            row_ids[l].append(ids)
    packed_ids = {l: torch.cat(v, dim=1) for l, v in row_ids.items()}  # [1, T, cols]

    x = model.embed(tokens).unsqueeze(2).repeat(1, 1, cfg.hc_mult, 1)  # [1, T, hc, D]
    pre = identity_pre_mix(1, T, cfg.hc_mult, hp_dtype(cfg), tokens.device)  # [1, T, hc]
    taps = {}
    for block in model.layers:
        i = block.layer_id
        if block.engram is not None:
            x, _ = block.engram(x, packed_ids[i])  # token-wise: one op over all T rows
        if i in cfg.dspark_target_layer_ids:
            taps[i] = x.mean(dim=2)  # [1, T, D]
        x, pre = block(x, pre, None, None, batch, None)  # mixes / norms / MoE over T; attention per segment
    hidden = hc_pre(x, pre)  # [1, T, D]
    logits = model.head(cast(model.norm(hidden), model.head.weight.dtype))  # [1, T, V]
    if model.mtp is not None:
        main_x = model.mtp.main_x(taps)  # [1, T, D]
        for mx, pos, pend in zip(batch.split(main_x), batch.positions, batch.pendings, strict=True):
            pend.window.update(model.mtp.ring_rows(mx, pos))
    per_tap = {l: batch.split(t) for l, t in taps.items()}
    return [
        ForwardOutput(logits=lg, hidden=h, taps={l: per_tap[l][r] for l in taps}, pending=batch.pendings[r])
        for r, (lg, h) in enumerate(zip(batch.split(logits), batch.split(hidden), strict=True))
    ]


def draft(
    model: Transformer,
    anchor: torch.Tensor,
    cache: KVCache,
    k: int | None = None,
    temperature: float = 0.0,
    generator: torch.Generator | None = None,
    trace: Trace | None = None,
    *,
    block_size: int | None = None,
) -> DraftOutput:
    """One DSpark draft pass from anchors [B] at position cache.length (see `dspark.py`): k drafted tokens
    (default: the trained block, cfg.dspark_block_size). `block_size` is k's old name (still accepted, warns)."""
    if block_size is not None:
        renamed("block_size", "k", "draft()")
        if k is not None:
            raise ValueError("k and its old name block_size were both given: give k only")
        k = block_size
    if model.mtp is None:
        raise ValueError("this config has no draft layers (n_mtp_layers = 0)")
    if anchor.dim() != 1 or anchor.dtype != torch.long:
        raise ValueError(f"anchor must be an int64 tensor [B] (got {anchor.dtype} {tuple(anchor.shape)})")
    V = model.cfg.vocab_size
    if int(anchor.min()) < 0 or int(anchor.max()) >= V:
        raise ValueError(
            f"anchor token id {int(anchor.max()) if int(anchor.max()) >= V else int(anchor.min())} "
            f"is out of range: allowed 0..{V - 1}"
        )
    k = model.cfg.dspark_block_size if k is None else k
    return model.mtp(anchor, model.embed, model.head, cache, k, temperature, generator, trace)

"""Step 6A · KV cache storage: FP8 window rings, FP4 compressed KV, FP4 index keys, byte accounting.

Real formats (per entry): window = 512 FP8 E4M3 + one UE8M0 scale per 32 = 528 B (every layer, ring of
128); compressed KV = 512 FP4 E2M1 + one E4M3 scale per 16 = 288 B; index key = 128 FP4 + one E8M0 per
32 = 68 B (both only at the KV sources, one entry per `ratio` tokens). Global KV per token =
Σ_sources (288 + 68) / ratio = 3·178 + 356 = 890 B. The lab stores dequantized values (QDQ, as the
reference does) and counts the bytes the real formats would take.

Writes are two-phase: a forward computes `PendingWrites` for its chunk and `KVCache.commit(pending, n)`
stores only the first n rows. Plain decoding commits everything; speculative decoding commits the
accepted prefix, so rejected draft rows never reach any cache (window ring, compressor carry,
compressed KV, index keys, Engram n-gram history) — that *is* the rollback.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from .config import ModelConfig
from .linear import cast
from .quant import fp4_bytes, fp8_bytes


@dataclass
class WindowRing:
    """One layer's sliding window: `window_size` slots, slot = position mod W."""

    kv: torch.Tensor  # [B, W, Dh]
    pos: torch.Tensor  # [W] absolute position held by each slot, −1 = empty ([B, W] in draft training: per block)

    def write(self, rows: torch.Tensor, positions: torch.Tensor, write_pos: bool = True) -> None:
        """rows [B, n, Dh] at absolute `positions` [n]; only the last W rows can survive. `write_pos=False`
        when another ring sharing this `pos` tensor already recorded the same positions."""
        W = self.pos.numel()
        rows, positions = rows[:, -W:], positions[-W:]
        self.put(rows, positions, positions % W, write_pos)

    def put(self, rows: torch.Tensor, positions: torch.Tensor, slots: torch.Tensor, write_pos: bool = True) -> None:
        """`write` with the slots given: rows [B, n, Dh] (n ≤ W, distinct slots) into slots [n] = positions % W."""
        self.kv.index_copy_(1, slots, cast(rows, self.kv.dtype))  # with autograd too (training writes the ring)
        if write_pos:
            self.pos.index_copy_(0, slots, positions)


@dataclass
class SourceStore:
    """A KV source's compressed latents, index keys and the tokens of its unfinished group."""

    ratio: int
    kv: torch.Tensor  # [B, cap, Dh] post-RoPE, FP4-QDQ latents
    index_k: torch.Tensor  # [B, cap, Di] post-RoPE, FP4-QDQ index keys
    count: int = 0  # latents written
    carry_kv: torch.Tensor | None = None  # [B, length % ratio, Dh] pre-pool values of the open group
    carry_score: torch.Tensor | None = None  # [B, length % ratio, Dh] their gate scores


@dataclass
class PendingWrites:
    """What one forward over positions start..start+S−1 would write, row by row."""

    start: int
    seqlen: int
    window: dict[int, torch.Tensor] = field(default_factory=dict)  # layer → [B, S, Dh]
    tokens: dict[int, tuple[torch.Tensor, torch.Tensor]] = field(default_factory=dict)  # ratio-2 (kv, score) [B,S,Dh]
    latents: dict[int, torch.Tensor] = field(default_factory=dict)  # source → [B, n_new, Dh]
    index_k: dict[int, torch.Tensor] = field(default_factory=dict)  # source → [B, n_new, Di]
    compressed_ids: torch.Tensor | None = None  # [B, S] Engram compressed ids


class KVCache:
    """Every piece of state a forward leaves for the next one, for one batch of sequences."""

    def __init__(
        self,
        cfg: ModelConfig,
        batch: int,
        device=None,
        dtype: torch.dtype | None = None,
        engram_history: torch.Tensor | None = None,
    ):
        dtype = dtype or cfg.torch_dtype
        self.cfg, self.batch, self.length = cfg, batch, 0
        W, Dh, Di = cfg.window_size, cfg.head_dim, cfg.index_head_dim
        # a commit writes every ring at the same positions, so the backbone rings share one `pos` tensor [W]
        # (attention builds their window mask once per forward), and the draft rings another
        pos = {draft: torch.full((W,), -1, dtype=torch.long, device=device) for draft in (False, True)}  # [W] each
        self.windows = {
            i: WindowRing(torch.zeros(batch, W, Dh, dtype=dtype, device=device), pos[i >= cfg.n_layers])
            for i in range(cfg.n_layers + cfg.n_mtp_layers)  # backbone rings, then the draft rings
        }
        self.sources = {}
        for s in cfg.kv_source_layers:
            r = cfg.compress_ratios[s]
            cap = cfg.max_seq_len // r
            self.sources[s] = SourceStore(
                r,
                torch.zeros(batch, cap, Dh, dtype=dtype, device=device),
                torch.zeros(batch, cap, Di, dtype=dtype, device=device),
            )
        self.engram_history = engram_history  # [B, max_ngram − 1] compressed ids, oldest first

    def commit(self, pending: PendingWrites, n: int | None = None) -> None:
        """Store the first n rows of a forward's writes (all rows if n is None)."""
        n = pending.seqlen if n is None else n
        if pending.start != self.length:
            raise ValueError(f"pending writes start at {pending.start} but the cache holds {self.length} tokens")
        if not 0 <= n <= pending.seqlen:
            raise ValueError(f"commit n = {n} is out of range: allowed 0..{pending.seqlen}")
        if self.length + n > self.cfg.max_seq_len:
            raise ValueError(f"sequence length {self.length + n} exceeds max_seq_len = {self.cfg.max_seq_len}")
        start, end = pending.start, pending.start + n
        if n:
            W = self.cfg.window_size  # every ring: only the last W committed rows can survive
            first = max(start, end - W)
            positions = torch.arange(first, end, device=self.windows[0].pos.device)  # [≤ W]
            slots = positions % W  # [≤ W] the same slots in every ring
            written = set()  # ids of the shared `pos` tensors already updated
            for layer, rows in pending.window.items():
                ring = self.windows[layer]
                ring.put(rows[:, first - start : n], positions, slots, write_pos=id(ring.pos) not in written)
                written.add(id(ring.pos))
        for s, store in self.sources.items():
            r = store.ratio
            n_new = end // r - start // r
            if n_new:
                store.kv[:, store.count : store.count + n_new] = pending.latents[s][:, :n_new]
                store.index_k[:, store.count : store.count + n_new] = pending.index_k[s][:, :n_new]
                store.count += n_new
            if r > 1:
                kv_tok, sc_tok = pending.tokens[s]
                open_kv = torch.cat([self._carry(store, "kv", kv_tok), kv_tok[:, :n]], dim=1)
                open_sc = torch.cat([self._carry(store, "score", sc_tok), sc_tok[:, :n]], dim=1)
                keep = end % r
                store.carry_kv, store.carry_score = (
                    open_kv[:, open_kv.size(1) - keep :],
                    open_sc[:, open_sc.size(1) - keep :],
                )
        if pending.compressed_ids is not None and self.engram_history is not None:
            hist = torch.cat([self.engram_history, pending.compressed_ids[:, :n]], dim=1)
            self.engram_history = hist[:, hist.size(1) - self.engram_history.size(1) :]
        self.length = end

    @staticmethod
    def _carry(store: SourceStore, which: str, like: torch.Tensor) -> torch.Tensor:
        t = store.carry_kv if which == "kv" else store.carry_score
        return t if t is not None else like[:, :0]

    def carry(self, source: int) -> tuple[torch.Tensor, torch.Tensor] | None:
        store = self.sources[source]
        return None if store.carry_kv is None else (store.carry_kv, store.carry_score)

    def snapshot(self) -> dict[str, torch.Tensor]:
        """Every valid piece of state as named tensors (for equality checks and the 6A view)."""
        out: dict[str, torch.Tensor] = {"length": torch.tensor(self.length)}
        for i, ring in self.windows.items():
            out[f"window.{i}.pos"] = ring.pos.clone()
            out[f"window.{i}.kv"] = ring.kv[:, ring.pos >= 0].clone()
        for s, st in self.sources.items():
            out[f"source.{s}.kv"] = st.kv[:, : st.count].clone()
            out[f"source.{s}.index_k"] = st.index_k[:, : st.count].clone()
            if st.ratio > 1:
                out[f"source.{s}.carry_kv"] = (st.carry_kv if st.carry_kv is not None else st.kv[:, :0]).clone()
                out[f"source.{s}.carry_score"] = (
                    st.carry_score if st.carry_score is not None else st.kv[:, :0]
                ).clone()
        if self.engram_history is not None:
            out["engram.history"] = self.engram_history.clone()
        return out

    def bytes_stored(self) -> dict[str, int]:
        """Bytes the real formats would take for what this cache holds now (all sequences)."""
        b = kv_bytes(self.cfg)
        L = self.cfg.n_layers

        def filled(draft: bool) -> int:
            return sum(int((ring.pos >= 0).sum()) for i, ring in self.windows.items() if (i >= L) == draft)

        entries = sum(st.count for st in self.sources.values())
        return {
            "window": self.batch * filled(False) * b["window_entry"],
            "draft_window": self.batch * filled(True) * b["window_entry"],
            "compressed_kv": self.batch * entries * b["compressed_entry"],
            "index_k": self.batch * entries * b["index_entry"],
        }


def cache_bytes(cfg: ModelConfig, batch: int = 1, dtype: torch.dtype | None = None) -> int:
    """The bytes `KVCache(cfg, batch, dtype=dtype)` allocates, from the config alone: every window ring and its
    slot positions, and every KV source's compressed latents and index keys for max_seq_len tokens."""
    itemsize = (dtype or cfg.torch_dtype).itemsize
    W, Dh, Di = cfg.window_size, cfg.head_dim, cfg.index_head_dim
    rings = (cfg.n_layers + cfg.n_mtp_layers) * batch * W * Dh * itemsize + 2 * W * 8  # + the two int64 `pos`
    sources = sum(batch * (cfg.max_seq_len // cfg.compress_ratios[s]) * (Dh + Di) for s in cfg.kv_source_layers)
    return rings + sources * itemsize


def kv_bytes(cfg: ModelConfig) -> dict[str, float]:
    """Bytes per entry and per token of every cache kind (the 890 B/token budget at real scale)."""
    window_entry = fp8_bytes(cfg.head_dim, 32)
    compressed_entry = fp4_bytes(cfg.head_dim, 16)
    index_entry = fp4_bytes(cfg.index_head_dim, 32)
    ratios = [cfg.compress_ratios[s] for s in cfg.kv_source_layers]
    compressed = sum(compressed_entry / r for r in ratios)
    index = sum(index_entry / r for r in ratios)
    n_window_layers = cfg.n_layers + cfg.n_mtp_layers
    return {
        "window_entry": window_entry,
        "compressed_entry": compressed_entry,
        "index_entry": index_entry,
        "compressed_kv_per_token": compressed,
        "index_k_per_token": index,
        "global_per_token": compressed + index,
        "window_per_sequence": n_window_layers * cfg.window_size * window_entry,
        "window_per_sequence_backbone": cfg.n_layers * cfg.window_size * window_entry,
    }

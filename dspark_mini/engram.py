"""Engram: conditional n-gram memory added to the residual copies before some blocks (lab step 1B).

Hashing (integer only, per Engram layer ℓ, on compressed ids; missing history = compressed pad id):
    r_1 = tok_0·m_ℓ[0],  r_n = r_{n-1} XOR tok_{n-1}·m_ℓ[n-1]   (tok_s = id at t−s, int64 wrap-around)
    row(n, h) = (r_n mod p_{n,h}) + offset_{n,h}    for orders n = 2..max_ngram, heads h
Gate and update (per token, per residual copy c of hc):
    e = table[rows] flattened;  [key_1..key_hc, value] = wkv(e);  w = q_weight ⊙ k_weight
    dot_c = Σ_d x̂_c,d · w_c,d · k̂_c,d / √D  (x̂, k̂ = RMS-normalized over D per copy)
    g_c = σ(sign(dot_c)·√max(|dot_c|, 1e-6));   x_c ← x_c + g_c · value

Differs from the real model: the table is small (a few thousand rows instead of 384 M) unless built at
real size on the meta device; the FP8 table (E4M3 with a power-of-two scale per 32 values) is simulated
by quantize→dequantize (the table once for inference, `Engram.lookup`; the looked-up rows at each use while
training); everything is computed in the input's dtype (float64 in the lab).
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from .config import ModelConfig
from .linear import Embedding, Linear, cast
from .quant import Prepared, fake_quant, forget_prepared, fp8_qdq

_MR_BASES = (2, 3, 5, 7, 11, 13, 17, 19, 23, 29, 31, 37)
_MR_LIMIT = 318_665_857_834_031_151_167_461  # smallest strong pseudoprime to all twelve bases above


def is_prime(n: int) -> bool:
    """Deterministic Miller–Rabin primality test, exact for every n < 3.18·10^23 (all 64-bit integers)."""
    if n < 2:
        return False
    if n >= _MR_LIMIT:
        raise ValueError(f"is_prime is only proven exact below {_MR_LIMIT}, got {n}")
    for p in _MR_BASES:
        if n % p == 0:
            return n == p
    d, s = n - 1, 0
    while d % 2 == 0:
        d //= 2
        s += 1
    for a in _MR_BASES:
        x = pow(a, d, n)
        if x in (1, n - 1):
            continue
        for _ in range(s - 1):
            x = x * x % n
            if x == n - 1:
                break
        else:
            return False
    return True


def _smallest_unused_prime_above(start: int, used: set[int]) -> int:
    n = start + 1
    while n in used or not is_prime(n):
        n += 1
    return n


def engram_primes(cfg: ModelConfig) -> tuple[tuple[int, ...], ...]:
    """One flat tuple of bucket moduli per Engram layer, order-major, head-minor.

    Each is the smallest prime > engram_vocab_size − 1 not already taken, drawn layer → order → head,
    so no modulus repeats anywhere in the model.
    """
    used: set[int] = set()
    out: list[tuple[int, ...]] = []
    for _layer in cfg.engram_layer_ids:
        layer: list[int] = []
        for _order in cfg.engram_orders:
            for _head in range(cfg.engram_n_heads):
                p = _smallest_unused_prime_above(cfg.engram_vocab_size - 1, used)
                used.add(p)
                layer.append(p)
        out.append(tuple(layer))
    return tuple(out)


def engram_num_embeddings(cfg: ModelConfig) -> tuple[int, ...]:
    """Table rows per Engram layer: the sum of that layer's primes."""
    return tuple(sum(ps) for ps in engram_primes(cfg))


def _layer_index(cfg: ModelConfig, layer_id: int) -> int:
    if layer_id not in cfg.engram_layer_ids:
        raise ValueError(f"layer {layer_id} has no Engram: engram_layer_ids = {cfg.engram_layer_ids}")
    return cfg.engram_layer_ids.index(layer_id)


def _multiplier_ints(cfg: ModelConfig, layer_id: int) -> tuple[int, ...]:
    """Odd multipliers 2r+1, r ~ default_rng(10007·ℓ) uniform in [0, (int64_max // Vc) // 2)."""
    bound = max(1, (int(np.iinfo(np.int64).max) // cfg.engram_compressed_vocab_size) // 2)
    r = np.random.default_rng(10007 * layer_id).integers(0, bound, size=cfg.engram_max_ngram_size)
    return tuple(2 * int(v) + 1 for v in r)


def engram_multipliers(cfg: ModelConfig, layer_id: int) -> torch.Tensor:
    """Hash multipliers of Engram layer `layer_id` (the block index, e.g. 1 or 14), int64 [max_ngram]."""
    _layer_index(cfg, layer_id)
    return torch.tensor(_multiplier_ints(cfg, layer_id), dtype=torch.int64, device="cpu")


def new_history(batch: int, cfg: ModelConfig, pad_compressed_id: int) -> torch.Tensor:
    """History before the first token: all pad, int64 [B, max_ngram − 1]."""
    return torch.full((batch, cfg.engram_max_ngram_size - 1), int(pad_compressed_id), dtype=torch.int64)


def advance_history(history: torch.Tensor, compressed_new: torch.Tensor) -> torch.Tensor:
    """History after appending `compressed_new` [B, S]: the last max_ngram − 1 ids, oldest first."""
    k = history.shape[1]
    joined = torch.cat([history, compressed_new.to(history.dtype)], dim=1)  # [B, k + S]
    return joined[:, joined.shape[1] - k :].clone()


def hash_ngram_ids(
    compressed: torch.Tensor,
    history: torch.Tensor,
    multipliers: torch.Tensor,
    primes: tuple[int, ...],
) -> torch.Tensor:
    """Table row ids of every (order, head) for every token, offsets included: int64 [B, S, n_hash_cols].

    compressed: [B, S] compressed ids; history: [B, max_ngram − 1] the ids before them, oldest first.
    """
    max_ngram = int(multipliers.numel())
    k = max_ngram - 1
    if k < 1 or len(primes) % k != 0:
        raise ValueError(f"{len(primes)} primes do not split into {k} orders (max_ngram = {max_ngram})")
    if compressed.dim() != 2 or history.dim() != 2 or history.shape != (compressed.shape[0], k):
        raise ValueError(
            f"compressed must be [B, S] and history [B, {k}]; got {tuple(compressed.shape)} and {tuple(history.shape)}"
        )
    dev = compressed.device
    S = compressed.shape[1]
    m = multipliers.tolist()  # python ints: int64 tensor × int wraps around like int64 × int64
    p, offsets = _moduli(primes, k, dev)  # [orders, heads] each

    ext = torch.cat([history.to(dev, torch.int64), compressed.to(torch.int64)], dim=1)  # [B, k + S]
    r = ext[:, k : k + S] * m[0]  # r_1, [B, S]
    rs: list[torch.Tensor] = []
    for n in range(2, max_ngram + 1):
        tok = ext[:, k - (n - 1) : k - (n - 1) + S]  # id at t − (n−1), [B, S]
        r = torch.bitwise_xor(r, tok * m[n - 1])  # r_n
        rs.append(r)
    r_all = torch.stack(rs, dim=-1)  # [B, S, orders]: r_2 … r_max
    return (torch.remainder(r_all[..., None], p) + offsets).flatten(-2)  # [B, S, orders · heads], order-major


_MODULI: dict = {}


def _moduli(primes: tuple[int, ...], k: int, device) -> tuple[torch.Tensor, torch.Tensor]:
    """The primes and the row offsets (their running sum) as [orders, heads] int64 tensors, made once."""
    key = (primes, k, device)
    if key not in _MODULI:
        with torch.inference_mode(False):
            p = torch.tensor(primes, dtype=torch.int64, device=device).view(k, -1)  # [orders, heads]
            offsets = torch.tensor([0, *np.cumsum(primes)[:-1].tolist()], dtype=torch.int64, device=device)
            _MODULI[key] = (p, offsets.view(k, -1))
    return _MODULI[key]


class EngramInfo(Mapping):
    """Engram diagnostics as a read-only mapping: row_ids [B, S, cols], gate [B, S, hc], value [B, S, D] and
    delta_norm [B, S] = ‖g ⊗ value‖ over all copies and D, made when read (a trace reads it; a forward does not)."""

    def __init__(self, row_ids: torch.Tensor, gate: torch.Tensor, value: torch.Tensor):
        self._t = {"row_ids": row_ids, "gate": gate, "value": value}

    def __getitem__(self, name: str) -> torch.Tensor:
        if name == "delta_norm":
            delta = self._t["gate"][..., None] * self._t["value"][:, :, None, :]  # [B, S, hc, D]
            return delta.flatten(2).norm(dim=-1)
        return self._t[name]

    def __iter__(self):
        return iter((*self._t, "delta_norm"))

    def __len__(self) -> int:
        return len(self._t) + 1


class Engram(nn.Module):
    """Engram of one layer: hashed n-gram table lookup, gated per residual copy, one shared value."""

    def __init__(self, cfg: ModelConfig, layer_id: int) -> None:
        super().__init__()
        index = _layer_index(cfg, layer_id)
        self.cfg = cfg
        self.layer_id = layer_id
        self.primes: tuple[int, ...] = engram_primes(cfg)[index]
        self.multipliers: tuple[int, ...] = _multiplier_ints(cfg, layer_id)
        self.n_hash_cols = cfg.engram_n_hash_cols
        self.num_embeddings = sum(self.primes)
        dt = cfg.torch_dtype
        hc, D = cfg.hc_mult, cfg.dim
        self.embed = Embedding(self.num_embeddings, cfg.engram_head_dim, dtype=dt)  # [rows, head_dim]
        self.wkv = Linear(self.n_hash_cols * cfg.engram_head_dim, D * (hc + 1), bias=False, dtype=dt)
        self.q_weight = nn.Parameter(torch.ones(hc, D, dtype=dt))  # [hc, D]
        self.k_weight = nn.Parameter(torch.ones(hc, D, dtype=dt))  # [hc, D]
        self.prepared = Prepared(self._qdq_table, self._table_params)  # the FP8-QDQ'd table: a cache
        # (wkvᵀ [cols·head_dim, (hc+1)·D], q_weight ⊙ k_weight [hc, D]): what the forward reads, in one lookup
        # (wkv transposed, [in, out]: the layout a matmul of a few rows reads fastest)
        self.proj = Prepared(
            lambda: (self.wkv.weight.mT.contiguous(), self.q_weight * self.k_weight),
            lambda: [self.wkv.weight, self.q_weight, self.k_weight],
        )
        self.register_load_state_dict_post_hook(forget_prepared)

    def lookup(self, row_ids: torch.Tensor) -> torch.Tensor:
        """Table rows as the model sees them [B, S, n_hash_cols, head_dim]: FP8-QDQ'd when `engram_table_quant`
        (one E8M0 scale per 32 values of a row). Inference looks them up in a table QDQ'd once (`quant.Prepared`;
        QDQ'ing the whole table equals QDQ'ing each looked-up row); training QDQs the looked-up rows at each use
        (straight-through)."""
        if not self.cfg.engram_table_quant:
            return self.embed(row_ids)  # [rows, head_dim] looked up (a packed table dequantizes only these rows)
        if self.prepared.active():
            return torch.embedding(self.prepared.get(), row_ids)
        return fake_quant(F.embedding(row_ids, self.embed.weight), fp8_qdq, 32)

    def _table_params(self) -> list[torch.Tensor]:
        return [self.embed.weight]

    def _qdq_table(self) -> torch.Tensor:
        return fp8_qdq(self.embed.weight, 32)

    def prepare(self) -> None:
        """Rebuild the QDQ'd table now (after an in-place edit through `.data`; see `quant.Prepared`)."""
        if self.cfg.engram_table_quant:
            self.prepared.rebuild()
        self.proj.rebuild()

    def row_ids(self, compressed: torch.Tensor, history: torch.Tensor) -> torch.Tensor:
        """This layer's table rows for compressed ids [B, S] after `history` [B, max_ngram − 1]."""
        m = torch.tensor(self.multipliers, dtype=torch.int64, device=compressed.device)  # [max_ngram]
        return hash_ngram_ids(compressed, history, m, self.primes)

    def forward(self, x: torch.Tensor, row_ids: torch.Tensor) -> tuple[torch.Tensor, EngramInfo]:
        """x [B, S, hc, D], row_ids [B, S, n_hash_cols] → (x + g·value [B, S, hc, D], diagnostics)."""
        B, S, hc, D = x.shape
        eps = self.cfg.norm_eps
        wkv_t, w = self.proj.get()  # [n_hash_cols·head_dim, (hc + 1)·D], [hc, D] q_weight ⊙ k_weight
        rows = self.lookup(row_ids)  # [B, S, n_hash_cols, head_dim]
        e = cast(rows, x.dtype).flatten(2)  # [B, S, n_hash_cols · head_dim]
        kv = torch.matmul(e, cast(wkv_t, x.dtype))  # [B, S, (hc + 1) · D]
        key, value = kv.split_with_sizes([hc * D, D], -1)  # [B, S, hc·D], [B, S, D]
        w = cast(w, x.dtype)
        # x̂ = x / √(mean_D(x²) + eps), k̂ likewise: `torch.rms_norm` without a weight is exactly that, one op
        x_n = torch.rms_norm(x, (D,), None, eps)  # [B, S, hc, D]
        k_n = torch.rms_norm(key.view(B, S, hc, D), (D,), None, eps)  # [B, S, hc, D]
        dot = (x_n * w * k_n).sum(-1) / math.sqrt(D)  # [B, S, hc]
        gate = torch.sigmoid(torch.sign(dot) * torch.sqrt(dot.abs().clamp_min(1e-6)))  # [B, S, hc]
        out = torch.addcmul(x, gate.unsqueeze(-1), value.unsqueeze(2))  # [B, S, hc, D] x + g·value
        return out, EngramInfo(row_ids, gate, value)

    def extra_repr(self) -> str:
        return (
            f"layer_id={self.layer_id}, rows={self.num_embeddings}, n_hash_cols={self.n_hash_cols}, "
            f"primes={self.primes[0]}..{self.primes[-1]}"
        )

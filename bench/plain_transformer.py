"""A plain decoder-only transformer the size of the lab model: the speed reference of `bench.py` (its decode section).

Same width, depth, vocabulary and dtype as the lab target; pre-norm blocks of multi-head attention with RoPE and
a KV cache, then a dense SwiGLU MLP whose width makes the *active* parameters per token match the lab target's
(routed experts count only for the top-k chosen, the Engram tables only for the rows looked up, the draft
layers not at all). No mHC, no compression, no quantization simulation, no MoE routing: what is left is the
arithmetic every decoder does, written with as few ops as plain PyTorch allows.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


def lab_active_params(model) -> int:
    """Parameters one token touches in a lab target forward (backbone only)."""
    cfg = model.cfg
    total = sum(p.numel() for n, p in model.named_parameters() if not n.startswith("mtp."))
    idle_experts = cfg.n_layers * (cfg.n_routed_experts - cfg.n_activated_experts) * 3 * cfg.dim * cfg.moe_inter_dim
    tables = sum(blk.engram.embed.weight.numel() for blk in model.layers if blk.engram is not None)
    rows_read = len(cfg.engram_layer_ids) * cfg.engram_n_hash_cols * cfg.engram_head_dim
    return total - idle_experts - tables + rows_read


def mlp_width(dim: int, n_layers: int, vocab: int, n_heads: int, active: int) -> int:
    """The SwiGLU width F that brings a plain model's parameters closest to `active`:
    embed + head (2·V·D) + final norm (D) + per layer 4·D² (q, k, v, o) + 3·D·F + 2·D (norms)."""
    per_layer = (active - 2 * vocab * dim - dim) / n_layers
    return max(1, round((per_layer - 4 * dim * dim - 2 * dim) / (3 * dim)))


class RMSNorm(nn.Module):
    def __init__(self, dim: int, dtype: torch.dtype, eps: float = 1e-6):
        super().__init__()
        self.weight, self.eps = nn.Parameter(torch.ones(dim, dtype=dtype)), eps

    def forward(self, x):
        return F.rms_norm(x, x.shape[-1:], self.weight, self.eps)


class Block(nn.Module):
    def __init__(self, dim: int, n_heads: int, mlp: int, dtype: torch.dtype):
        super().__init__()
        self.n_heads, self.head_dim = n_heads, dim // n_heads
        self.attn_norm, self.mlp_norm = RMSNorm(dim, dtype), RMSNorm(dim, dtype)
        self.wqkv = nn.Linear(dim, 3 * dim, bias=False, dtype=dtype)  # [3D, D]: q, k, v stacked
        self.wo = nn.Linear(dim, dim, bias=False, dtype=dtype)  # [D, D]
        self.w13 = nn.Linear(dim, 2 * mlp, bias=False, dtype=dtype)  # [2F, D]: gate, up stacked
        self.w2 = nn.Linear(mlp, dim, bias=False, dtype=dtype)  # [D, F]

    def forward(self, x, cos, sin, k_cache, v_cache, start: int):
        """x [B, S, D]; cos/sin [S, hd/2]; caches [B, H, T_max, hd] written at start..start+S−1."""
        B, S, D = x.shape
        q, k, v = self.wqkv(self.attn_norm(x)).view(B, S, 3, self.n_heads, self.head_dim).transpose(1, 3).unbind(2)
        q, k = rope(q, cos, sin), rope(k, cos, sin)  # [B, H, S, hd]
        k_cache[:, :, start : start + S] = k
        v_cache[:, :, start : start + S] = v
        end = start + S
        o = F.scaled_dot_product_attention(q, k_cache[:, :, :end], v_cache[:, :, :end], is_causal=S > 1)
        x = x + self.wo(o.transpose(1, 2).reshape(B, S, D))
        gate, up = self.w13(self.mlp_norm(x)).chunk(2, dim=-1)
        return x + self.w2(F.silu(gate) * up)


def rope(x, cos, sin):
    """Rotate halves: [x1, x2] → [x1·cos − x2·sin, x1·sin + x2·cos].  x [B, H, S, hd]."""
    x1, x2 = x.chunk(2, dim=-1)
    return torch.cat([x1 * cos - x2 * sin, x1 * sin + x2 * cos], dim=-1)


class PlainTransformer(nn.Module):
    def __init__(self, vocab: int, dim: int, n_layers: int, n_heads: int, mlp: int, max_len: int, dtype):
        super().__init__()
        self.n_heads, self.head_dim, self.max_len, self.dtype = n_heads, dim // n_heads, max_len, dtype
        self.embed = nn.Embedding(vocab, dim, dtype=dtype)  # [V, D]
        self.layers = nn.ModuleList(Block(dim, n_heads, mlp, dtype) for _ in range(n_layers))
        self.norm = RMSNorm(dim, dtype)
        self.head = nn.Linear(dim, vocab, bias=False, dtype=dtype)  # [V, D]
        inv = 1.0 / 10000 ** (torch.arange(0, self.head_dim, 2, dtype=torch.float64) / self.head_dim)
        ang = torch.arange(max_len, dtype=torch.float64)[:, None] * inv  # [T_max, hd/2]
        self.register_buffer("cos", ang.cos().to(dtype), persistent=False)
        self.register_buffer("sin", ang.sin().to(dtype), persistent=False)
        gen = torch.Generator().manual_seed(0)
        with torch.no_grad():
            for p in self.parameters():
                if p.dim() == 2:
                    p.copy_(torch.randn(p.shape, generator=gen, dtype=torch.float64).mul_(p.shape[1] ** -0.5))

    def new_cache(self, batch: int) -> dict:
        shape = (len(self.layers), batch, self.n_heads, self.max_len, self.head_dim)  # [L, B, H, T_max, hd]
        return {"k": torch.zeros(shape, dtype=self.dtype), "v": torch.zeros(shape, dtype=self.dtype), "length": 0}

    def forward(self, tokens: torch.Tensor, cache: dict) -> torch.Tensor:
        """tokens [B, S] after cache["length"] positions → logits [B, S, V]; the cache advances by S."""
        start, S = cache["length"], tokens.size(1)
        cos, sin = self.cos[start : start + S], self.sin[start : start + S]  # [S, hd/2]
        x = self.embed(tokens)  # [B, S, D]
        for i, blk in enumerate(self.layers):
            x = blk(x, cos, sin, cache["k"][i], cache["v"][i], start)
        cache["length"] = start + S
        return self.head(self.norm(x))


def plain_like(model, max_len: int = 256) -> PlainTransformer:
    """The plain reference for a lab `Transformer`: same V, D, L, heads and dtype, matched active parameters."""
    cfg = model.cfg
    mlp = mlp_width(cfg.dim, cfg.n_layers, cfg.vocab_size, cfg.n_heads, lab_active_params(model))
    return PlainTransformer(cfg.vocab_size, cfg.dim, cfg.n_layers, cfg.n_heads, mlp, max_len, cfg.torch_dtype).eval()

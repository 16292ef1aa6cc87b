"""One V4.1 block (steps 2A, 3A–4A, 5A): attention and MoE sublayers, each wrapped by single-pass mHC.

  (a_pre, a_post, a_comb) = mix_attn(X);  X ← hc_post(attn(norm(hc_pre(X, pre_in))), X, a_post, a_comb)
  (f_pre, f_post, f_comb) = mix_ffn(X);   X ← hc_post(moe(norm(hc_pre(X, a_pre))), X, f_post, f_comb)
  → (X, f_pre): the FFN's pre-mix is handed on and collapses the *next* sublayer's input (single pass).
The backbone (`model.Transformer`) and the DSpark draft (`dspark.DSparkDraft`, layers ≥ n_layers with compress
ratio 0 and their own expert counts) are stacks of these; an Engram sits in front of the backbone layers the
config names.
"""

from __future__ import annotations

import torch
from torch import nn

from .attention import Attention, hp_dtype
from .config import ModelConfig
from .engram import Engram
from .mhc import HyperConnection, hc_post, hc_pre
from .moe import MoE
from .norm import RMSNorm
from .ragged import RaggedBatch


class Block(nn.Module):
    def __init__(self, cfg: ModelConfig, layer_id: int):
        super().__init__()
        dt, hp = cfg.torch_dtype, hp_dtype(cfg)
        self.layer_id = layer_id
        backbone = layer_id < cfg.n_layers
        n_exp = cfg.n_routed_experts if backbone else cfg.dspark_n_routed_experts
        top = cfg.n_activated_experts if backbone else cfg.dspark_n_activated_experts
        self.attn = Attention(cfg, layer_id)
        self.ffn = MoE(
            cfg.dim,
            cfg.moe_inter_dim,
            n_exp,
            top,
            cfg.n_shared_experts,
            cfg.route_scale,
            cfg.gate_temp,
            cfg.swiglu_limit,
            cfg.expert_quant,
            dt,
            hp,
            cfg.expert_act_quant,
        )
        self.attn_norm = RMSNorm(cfg.dim, cfg.norm_eps, dt)
        self.ffn_norm = RMSNorm(cfg.dim, cfg.norm_eps, dt)
        hc_args = (cfg.dim, cfg.hc_mult, cfg.hc_sinkhorn_iters, cfg.hc_eps, cfg.norm_eps, hp)
        self.hc_attn = HyperConnection(*hc_args)
        self.hc_ffn = HyperConnection(*hc_args)
        self.engram = Engram(cfg, layer_id) if backbone and layer_id in cfg.engram_layer_ids else None

    def forward(self, x, pre_in, positions, shared, cache, pending, rec=None):
        """x [B, S, hc, D], pre_in [B, S, hc] (the previous sublayer's pre) → (x, f_pre)."""
        keep_hist = rec is not None and rec.sinkhorn_history
        hist_a = [] if keep_hist else None
        a_pre, a_post, a_comb = self.hc_attn(x, hist_a)
        u = self.attn_norm(hc_pre(x, pre_in))  # [B, S, D] attention input
        if isinstance(cache, RaggedBatch):  # packed requests: attention per segment, on each one's cache
            a = cache.attend(self.attn, u, rec)
        else:
            a = self.attn(u, positions, shared, cache, pending, rec)
        x_attn = hc_post(a, x, a_post, a_comb)
        hist_f = [] if keep_hist else None
        f_pre, f_post, f_comb = self.hc_ffn(x_attn, hist_f)
        v = self.ffn_norm(hc_pre(x_attn, a_pre))  # [B, S, D] FFN input, collapsed with attention's pre
        y, moe_info = self.ffn(v)
        out = hc_post(y, x_attn, f_post, f_comb)
        if rec is not None:
            for name, t in (
                ("pre_in", pre_in),
                ("attn_pre", a_pre),
                ("attn_post", a_post),
                ("attn_comb", a_comb),
                ("ffn_pre", f_pre),
                ("ffn_post", f_post),
                ("ffn_comb", f_comb),
            ):
                rec("2A", name, t)
            if keep_hist:
                rec("2A", "attn_comb_history", torch.stack(hist_a))  # [iters, B, S, hc, hc]
                rec("2A", "ffn_comb_history", torch.stack(hist_f))
            rec("4A", "attn_input", u)
            for name, t in moe_info.items():
                rec("5A", name, t)
            rec("5A", "ffn_input", v)
        return out, f_pre

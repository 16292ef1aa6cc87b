"""Shared fixtures for the mechanism tests: the lab model (built once) and the real-size model on `meta`.

The lab model is shared by many tests, so tests that need to modify weights build their own modules.
"""

from __future__ import annotations

import pytest
import torch

from dspark_mini import Trace, build_model, get_config

# The lab tensors are tiny: intra-op threads only add overhead, and on a busy 2-core machine the OpenMP
# workers spin and slow some forwards down 10-100× (a 2 × 10-token forward took 9 s instead of 0.06 s).
torch.set_num_threads(1)


@pytest.fixture(scope="session")
def lab_cfg():
    return get_config("lab")


@pytest.fixture(scope="session")
def lab_model(lab_cfg):
    m = build_model(lab_cfg, seed=0)
    m.eval()
    return m


@pytest.fixture(scope="session")
def flash_cfg():
    return get_config("flash")


@pytest.fixture(scope="session")
def flash_meta(flash_cfg):
    """DeepSeek-V4.1-Flash at real size on the meta device (~5 s to build; built once per session)."""
    return build_model(flash_cfg, device="meta")


def make_tokens(cfg, batch: int, seqlen: int, seed: int = 0) -> torch.Tensor:
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, cfg.vocab_size, (batch, seqlen), generator=g, dtype=torch.long)


@pytest.fixture(scope="session")
def traced_run(lab_model, lab_cfg):
    """One traced forward of the lab model over 2 × 37 tokens (> window 8, > candidate pool 16).

    Also captures every block's input stream x [B, S, hc, D] (after Engram), its attention output
    [B, S, D], its MoE output [B, S, D] and its output stream, with hooks (the Trace does not record those)."""
    tokens = make_tokens(lab_cfg, 2, 37, seed=123)
    tr = Trace()
    block_in, attn_out, ffn_out, block_out = {}, {}, {}, {}
    handles = []
    for blk in lab_model.layers:
        i = blk.layer_id
        handles.append(
            blk.register_forward_pre_hook(lambda mod, args, i=i: block_in.__setitem__(i, args[0].detach().clone()))
        )
        handles.append(
            blk.attn.register_forward_hook(lambda mod, args, out, i=i: attn_out.__setitem__(i, out.detach().clone()))
        )
        handles.append(
            blk.ffn.register_forward_hook(lambda mod, args, out, i=i: ffn_out.__setitem__(i, out[0].detach().clone()))
        )
        handles.append(
            blk.register_forward_hook(lambda mod, args, out, i=i: block_out.__setitem__(i, out[0].detach().clone()))
        )
    try:
        with torch.no_grad():
            out = lab_model(tokens, trace=tr)
    finally:
        for h in handles:
            h.remove()
    return {
        "tokens": tokens,
        "trace": tr,
        "out": out,
        "block_in": block_in,
        "attn_out": attn_out,
        "ffn_out": ffn_out,
        "block_out": block_out,
    }

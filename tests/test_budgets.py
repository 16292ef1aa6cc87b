"""Parameter and KV-cache budgets: the real-size `flash` model on the meta device (the real checkpoint's groups) and the
KV byte accounting of step 6A, checked against independent arithmetic from the config.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

from dspark_mini.kv_cache import kv_bytes
from dspark_mini.params import count_params
from dspark_mini.presets import build_model, get_config

BACKBONE_FLASH = 551_880_819_824  # measured (the published count: 551.88 B)
ENGRAM_FLASH = (384_006_168 + 384_016_682) * 256  # the published config's rows × engram_head_dim = 196.61 B


# ---- fixtures --------------------------------------------------------------------------------------------
# `flash_cfg`, `flash_meta` (the real-size model on meta, ~5 s, built once per session) and `lab_model`
# come from tests/conftest.py, so the whole suite builds the flash model only once.
@pytest.fixture(scope="module")
def flash_model(flash_meta):
    return flash_meta


@pytest.fixture(scope="module")
def flash_counts(flash_model):
    return count_params(flash_model)


# ---- independent parameter formula (the reference's shapes, the checkpoint's groups) ----------------------------
def backbone_groups(c) -> dict[str, int]:
    """Backbone parameters by group, from the config numbers only."""
    D, V, L = c.dim, c.vocab_size, c.n_layers
    H, Dh, Rq, G, R = c.n_heads, c.head_dim, c.q_lora_rank, c.o_groups, c.o_lora_rank
    Hi, Di = c.index_n_heads, c.index_head_dim
    E, I, hc = c.n_routed_experts, c.moe_inter_dim, c.hc_mult
    n_mix = (2 + hc) * hc  # 24 mixes: pre (hc) + post (hc) + comb (hc·hc)
    attention_core = L * (
        D * Rq
        + Rq  # wq_a [Rq, D], q_norm [Rq]
        + Rq * H * Dh  # wq_b [H·Dh, Rq]
        + D * Dh
        + Dh  # wkv [Dh, D], kv_norm [Dh]
        + (H * Dh // G) * (G * R)  # wo_a [G·R, H·Dh/G] (block-diagonal, stored as G blocks)
        + G * R * D  # wo_b [D, G·R]
        + H  # attn_sink [H]
    )
    compressors = sum(
        (2 if c.compress_ratios[s] == 2 else 1) * D * Dh + Dh  # wkv (+ wgate at ratio 2), norm
        for s in c.kv_source_layers
    )
    indexers = sum(
        Rq * Hi * Di
        + D * Hi  # wq_b [Hi·Di, Rq], weights_proj [Hi, D]
        + ((Dh * Di + Di) if i in c.kv_source_layers else 0)  # wk + k_norm (owners only)
        for i in c.index_source_layers
    )
    return {
        "routed_experts": L * E * 3 * D * I,  # w1, w2, w3 per expert
        "attention": attention_core,
        "compressor_indexer": compressors + indexers,
        "shared_experts": L * 3 * D * I * c.n_shared_experts,
        "embed_head": 2 * V * D,  # untied
        "router": L * (E * D + E),  # gate weight [E, D] + select-only bias [E]
        "mhc": L * 2 * (n_mix * hc * D + n_mix + 3),  # 2 per layer: fn [24, hc·D], base [24], scale [3]
        "engram_projections": len(c.engram_layer_ids)
        * (
            c.engram_n_hash_cols * c.engram_head_dim * D * (hc + 1)  # wkv → hc keys + 1 value
            + 2 * hc * D
        ),  # q_weight, k_weight [hc, D]
        "norms": L * 2 * D + D,  # attn_norm, ffn_norm per layer; final norm
    }


def draft_params(c) -> int:
    """The DSpark draft (`mtp.*`) from the config: full-size V4.1 blocks with the draft MoE, plus the heads."""
    D, V, H, Dh, Rq, G, R = c.dim, c.vocab_size, c.n_heads, c.head_dim, c.q_lora_rank, c.o_groups, c.o_lora_rank
    hc, I, E, r = c.hc_mult, c.moe_inter_dim, c.dspark_n_routed_experts, c.dspark_markov_rank
    n_mix = (2 + hc) * hc
    block = (
        D * Rq
        + Rq
        + Rq * H * Dh
        + D * Dh
        + Dh
        + (H * Dh // G) * (G * R)
        + G * R * D
        + H  # attention
        + E * 3 * D * I
        + c.n_shared_experts * 3 * D * I
        + E * D
        + E  # experts, shared, router
        + 2 * (n_mix * hc * D + n_mix + 3)
        + 2 * D
    )  # mHC, attn/ffn norms
    n_taps = len(c.dspark_target_layer_ids)
    main_proj = n_taps * D * D if c.dspark_tap_mix == "concat_proj" else 0
    return (
        c.n_mtp_layers * block
        + main_proj
        + D  # main_norm
        + D
        + 2 * V * r
        + (D + r)
    )  # norm, Markov embed + head, confidence head (embed/head shared)


def model_groups(model) -> dict[str, int]:
    """The same groups, read off the model's parameter names."""
    out = dict.fromkeys(backbone_groups(get_config("lab")), 0)
    for name, p in model.named_parameters():
        n = p.numel()
        if ".engram.embed." in name or name.startswith("mtp."):
            continue  # the tables and the draft are counted separately
        if ".ffn.experts." in name:
            out["routed_experts"] += n
        elif ".ffn.shared_experts." in name:
            out["shared_experts"] += n
        elif ".ffn.gate." in name:
            out["router"] += n
        elif ".attn.compressor." in name or ".attn.indexer." in name:
            out["compressor_indexer"] += n
        elif ".attn." in name:
            out["attention"] += n
        elif ".hc_" in name:
            out["mhc"] += n
        elif ".engram." in name:
            out["engram_projections"] += n
        elif name in ("embed.weight", "head.weight"):
            out["embed_head"] += n
        elif name.endswith("norm.weight"):
            out["norms"] += n
        else:
            raise AssertionError(f"unclassified parameter {name}")
    return out


# ---- flash on meta ---------------------------------------------------------------------------------------
def test_param_counts_from_the_config_equal_the_built_models(flash_cfg, flash_counts, lab_model) -> None:
    """`inspect` counts from the config alone (nothing built); it must give the very numbers of the modules."""
    from dspark_mini.params import param_counts
    from lab.lesson.summary import inspect_model

    assert param_counts(flash_cfg) == flash_counts
    assert param_counts(lab_model.cfg) == count_params(lab_model)
    for change in ({"dspark_tap_mix": "concat_proj"}, {"dspark_markov_kind": "rnn"}, {"n_shared_experts": 0}):
        cfg = lab_model.cfg.replace(**change)
        assert param_counts(cfg) == count_params(build_model(cfg)), change
    report = inspect_model("flash")
    assert report["params"] == flash_counts and report["device"] == "meta"


def test_inspect_flash_builds_nothing_and_imports_no_dynamo() -> None:
    """`dspark-lab inspect --preset flash` stays near `import torch`: no module is built, so no meta op runs
    (a random fill or float arange on a meta tensor imports torch._dynamo, ≈ 1.5 s)."""
    code = (
        "import sys, torch\n"
        "from lab.lesson.summary import inspect_model\n"
        "import dspark_mini.moe as moe\n"
        "built = []\n"
        "init = moe.Expert.__init__\n"
        "moe.Expert.__init__ = lambda self, *a, **k: (built.append(1), init(self, *a, **k))[1]\n"
        "r = inspect_model('flash')\n"
        "assert r['params']['backbone'] == 551_880_819_824, r['params']\n"
        "assert not built, len(built)\n"
        "assert 'torch._dynamo' not in sys.modules\n"
        "print('ok')\n"
    )
    root = Path(__file__).resolve().parent.parent
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "ok", out.stderr[-2000:]


def test_meta_build_allocates_nothing(flash_model) -> None:
    assert next(flash_model.parameters()).device.type == "meta"
    assert all(p.device.type == "meta" for p in flash_model.parameters())


def test_flash_param_counts(flash_counts) -> None:
    assert flash_counts["backbone"] == pytest.approx(551.88e9, rel=0.005)
    assert flash_counts["backbone"] == BACKBONE_FLASH
    assert flash_counts["engram"] == ENGRAM_FLASH == 196_613_849_600
    assert round(flash_counts["engram"] / 1e9, 2) == 196.61
    assert flash_counts["draft"] == pytest.approx(14.23e9, rel=0.005)  # the published count: DSpark draft 14.23 B
    assert round(flash_counts["draft"] / 1e9, 2) == 14.23
    assert flash_counts["total"] == flash_counts["backbone"] + flash_counts["engram"] + flash_counts["draft"]


def test_flash_backbone_formula_matches_exactly(flash_cfg, flash_counts) -> None:
    groups = backbone_groups(flash_cfg)
    assert sum(groups.values()) == flash_counts["backbone"] == BACKBONE_FLASH
    # the published breakdown, in billions to 2 decimals (its "attention 5.06 B" is the core without
    # the compressors and indexers, which add 0.06 B and are not listed there)
    assert round(groups["routed_experts"] / 1e9, 2) == 543.58
    assert round(groups["attention"] / 1e9, 2) == 5.06
    assert round(groups["shared_experts"] / 1e9, 2) == 1.42
    assert round(groups["embed_head"] / 1e9, 2) == 1.32
    assert round(groups["engram_projections"] / 1e9, 2) == 0.31
    assert round(groups["router"] / 1e9, 2) == 0.08
    assert round(groups["mhc"] / 1e9, 2) == 0.04
    assert groups["routed_experts"] == 40 * 384 * 3 * 5120 * 2304


def test_flash_groups_match_model(flash_cfg, flash_model) -> None:
    """Group by group, so a future mismatch says where it is."""
    assert model_groups(flash_model) == backbone_groups(flash_cfg)


def test_lab_formula_matches_model(lab_model) -> None:
    cfg = lab_model.cfg
    counts = count_params(lab_model)
    assert model_groups(lab_model) == backbone_groups(cfg)
    assert counts["backbone"] == sum(backbone_groups(cfg).values())
    from dspark_mini.engram import engram_num_embeddings

    assert counts["engram"] == sum(engram_num_embeddings(cfg)) * cfg.engram_head_dim
    assert counts["draft"] == draft_params(cfg)


def test_flash_draft_formula_matches_exactly(flash_cfg, flash_counts) -> None:
    assert draft_params(flash_cfg) == flash_counts["draft"]
    # + vision 0.49 B = the published 763.21 B total logical parameters
    assert round((flash_counts["total"] + 0.49e9) / 1e9, 2) == 763.21


# ---- kv_bytes ----------------------------------------------------------------------------------------------
def test_kv_bytes_flash(flash_cfg) -> None:
    b = kv_bytes(flash_cfg)
    assert b["window_entry"] == 528  # 512 FP8 + 512/32 UE8M0 scales
    assert b["compressed_entry"] == 288  # 512/2 FP4 + 512/16 E4M3 scales
    assert b["index_entry"] == 68  # 128/2 FP4 + 128/32 E8M0 scales
    assert b["compressed_kv_per_token"] == 720  # 3 · 288/2 + 288
    assert b["index_k_per_token"] == 170  # 3 · 68/2 + 68
    assert b["global_per_token"] == 890
    assert b["window_per_sequence_backbone"] == 40 * 128 * 528 == 2_703_360  # 2.70 MB
    assert b["window_per_sequence"] == 43 * 128 * 528 == 2_906_112  # 2.91 MB with the 3 DSpark rings
    assert round(b["global_per_token"] * 1_048_576 / 2**30, 2) == 0.87  # GiB per 1M-token sequence


def test_kv_bytes_lab_by_hand() -> None:
    cfg = get_config("lab")
    Dh, Di, W = cfg.head_dim, cfg.index_head_dim, cfg.window_size
    window_entry = Dh + Dh // 32
    compressed_entry = Dh // 2 + Dh // 16
    index_entry = Di // 2 + Di // 32
    ratios = [cfg.compress_ratios[s] for s in cfg.kv_source_layers]
    b = kv_bytes(cfg)
    assert (window_entry, compressed_entry, index_entry) == (66, 36, 17)  # lab: Dh 64, Di 32
    assert (b["window_entry"], b["compressed_entry"], b["index_entry"]) == (window_entry, compressed_entry, index_entry)
    assert ratios == [2, 2, 1]
    assert b["compressed_kv_per_token"] == 36 / 2 + 36 / 2 + 36 == 72
    assert b["index_k_per_token"] == 17 / 2 + 17 / 2 + 17 == 34
    assert b["global_per_token"] == 106
    assert b["window_per_sequence_backbone"] == cfg.n_layers * W * window_entry == 8 * 8 * 66
    assert b["window_per_sequence"] == (cfg.n_layers + cfg.n_mtp_layers) * W * window_entry == (8 + 3) * 8 * 66


# ---- KVCache.bytes_stored after a lab prefill -----------------------------------------------------------------
def expected_stored(cfg, batch: int, length: int) -> dict[str, int]:
    W = cfg.window_size
    window_entry = cfg.head_dim + cfg.head_dim // 32
    compressed_entry = cfg.head_dim // 2 + cfg.head_dim // 16
    index_entry = cfg.index_head_dim // 2 + cfg.index_head_dim // 32
    entries = sum(length // cfg.compress_ratios[s] for s in cfg.kv_source_layers)
    return {
        "window": batch * cfg.n_layers * min(length, W) * window_entry,
        "draft_window": batch * cfg.n_mtp_layers * min(length, W) * window_entry,  # DSpark rings: target view
        "compressed_kv": batch * entries * compressed_entry,
        "index_k": batch * entries * index_entry,
    }


@pytest.mark.parametrize("S", [1, 5, 8, 9, 21])
def test_bytes_stored_after_prefill(lab_model, S) -> None:
    cfg, B = lab_model.cfg, 2
    cache = lab_model.new_cache(B)
    assert cache.bytes_stored() == {"window": 0, "draft_window": 0, "compressed_kv": 0, "index_k": 0}
    tokens = torch.randint(4, cfg.vocab_size, (B, S), generator=torch.Generator().manual_seed(S))
    with torch.no_grad():
        lab_model(tokens, cache)
    got = cache.bytes_stored()
    assert got == expected_stored(cfg, B, S)
    if S == 21:  # literal arithmetic for one case: 8 layers · 8 slots · 66 B (+ 3 draft rings);
        # sources (1, 3, 4) hold 10 + 10 + 21
        assert got == {
            "window": 2 * 8 * 8 * 66,
            "draft_window": 2 * 3 * 8 * 66,
            "compressed_kv": 2 * 41 * 36,
            "index_k": 2 * 41 * 17,
        }


def test_bytes_stored_chunked_and_partial_commit(lab_model) -> None:
    """Chunked prefill + a decode step, then a partial commit (speculative accept of 2 of 4 rows)."""
    cfg, B = lab_model.cfg, 1
    g = torch.Generator().manual_seed(7)
    cache = lab_model.new_cache(B)
    with torch.no_grad():
        lab_model(torch.randint(4, cfg.vocab_size, (B, 13), generator=g), cache)
    assert cache.bytes_stored() == expected_stored(cfg, B, 13)
    with torch.no_grad():
        lab_model(torch.randint(4, cfg.vocab_size, (B, 1), generator=g), cache)
    assert cache.bytes_stored() == expected_stored(cfg, B, 14)
    with torch.no_grad():
        out = lab_model(torch.randint(4, cfg.vocab_size, (B, 4), generator=g), cache, commit=False)
    assert cache.bytes_stored() == expected_stored(cfg, B, 14)  # nothing written without a commit
    cache.commit(out.pending, 2)
    assert cache.length == 16
    assert cache.bytes_stored() == expected_stored(cfg, B, 16)

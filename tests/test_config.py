"""Tests for ModelConfig (dspark_mini/config.py) and the presets (dspark_mini/presets.py).

Every invalid config below must raise `ConfigError` naming the offending field, showing the bad value
and saying what is allowed; the two presets must validate and keep their documented numbers
(`lab`: the teaching contract; `flash`: the published config.json).
"""

from __future__ import annotations

import ast
import dataclasses
import io
import tokenize
from pathlib import Path

import pytest
import torch

from dspark_mini import config as config_module
from dspark_mini.config import ConfigError, ModelConfig
from dspark_mini.presets import build_model, get_config
from dspark_mini.tokenizer import default_tokenizer

LAB_V = default_tokenizer().vocab_size  # the lab config takes its vocabulary size from the tokenizer
LAB_DRAFT = (0,) * get_config("lab").n_mtp_layers  # draft layers read no compressed cache
LAB_RATIOS = (0, 2, 2, 2, 1, 1, 1, 1) + LAB_DRAFT  # lab: 8 backbone layers, then the draft layers
FLASH_RATIOS = (0, 0) + (2,) * 18 + (1,) * 20 + (0,) * 3


def lab(**changes):
    return lambda: get_config("lab").replace(**changes)


def flash(**changes):
    return lambda: get_config("flash", **changes)


# (id, make, expected field, bad value or None = changes[field], fragment of the allowed text)
INVALID = [
    # ---- sizes ------------------------------------------------------------------------------------
    ("dim_negative", lab(dim=-64), "dim", -64, "integer ≥ 1"),
    ("dim_zero", lab(dim=0), "dim", 0, "integer ≥ 1"),
    ("n_heads_zero", lab(n_heads=0), "n_heads", 0, "integer ≥ 1"),
    ("vocab_zero", lab(vocab_size=0), "vocab_size", 0, "integer ≥ 1"),
    ("vocab_negative_flash", flash(vocab_size=-1), "vocab_size", -1, "integer ≥ 1"),
    ("window_zero", lab(window_size=0), "window_size", 0, "integer ≥ 1"),
    ("n_layers_one", lab(n_layers=1, compress_ratios=(0, 0, 0)), "n_layers", 1, "≥ 2"),
    ("n_mtp_negative", lab(n_mtp_layers=-1), "n_mtp_layers", -1, "integer ≥ 0"),
    ("max_seq_len_below_window", lab(max_seq_len=7), "max_seq_len", 7, "≥ window_size (8)"),
    ("max_seq_len_below_window_flash", flash(max_seq_len=127), "max_seq_len", 127, "≥ window_size (128)"),
    # ---- types --------------------------------------------------------------------------------------
    ("bool_as_int_n_heads", lab(n_heads=True), "n_heads", True, "integer ≥ 1"),
    ("bool_as_int_n_mtp", lab(n_mtp_layers=False), "n_mtp_layers", False, "integer ≥ 0"),
    ("float_as_int_dim", lab(dim=64.0), "dim", 64.0, "integer ≥ 1"),
    # ---- experts ------------------------------------------------------------------------------------
    ("topk_gt_experts", lab(n_activated_experts=9), "n_activated_experts", 9, "n_routed_experts (8)"),
    ("topk_gt_experts_flash", flash(n_activated_experts=385), "n_activated_experts", 385, "n_routed_experts (384)"),
    (
        "dspark_topk_gt_experts",
        lab(dspark_n_activated_experts=5),
        "dspark_n_activated_experts",
        5,
        "dspark_n_routed_experts (4)",
    ),
    ("score_func_unknown", lab(score_func="softmax"), "score_func", "softmax", "'sqrtsoftplus'"),
    # ---- attention shapes ---------------------------------------------------------------------------
    ("o_groups_not_divisor", lab(o_groups=3), "o_groups", 3, "divisor of n_heads (4)"),
    ("o_groups_not_divisor_flash", flash(o_groups=7), "o_groups", 7, "divisor of n_heads (64)"),
    ("rope_odd", lab(rope_head_dim=7), "rope_head_dim", 7, "even number < head_dim (64)"),
    ("rope_eq_head_dim", lab(rope_head_dim=64), "rope_head_dim", 64, "even number < head_dim (64)"),
    ("rope_gt_head_dim", lab(rope_head_dim=128), "rope_head_dim", 128, "< head_dim (64)"),
    ("head_dim_not_mult32_kv_quant", lab(head_dim=48), "head_dim", 48, "multiple of 32 when kv_quant"),
    ("expert_act_quant_not_bool", lab(expert_act_quant=1), "expert_act_quant", 1, "True or False"),
    (
        "moe_inter_not_mult32_act_quant",
        lab(expert_quant=False, expert_act_quant=True, moe_inter_dim=48),
        "moe_inter_dim",
        48,
        "multiple of 32 when expert_act_quant",
    ),
    ("beta_fast_eq_slow", lab(beta_fast=1), "beta_fast", 1, "> beta_slow (1)"),
    ("beta_fast_lt_slow", lab(beta_fast=2, beta_slow=4), "beta_fast", 2, "> beta_slow (4)"),
    ("dtype_unknown", lab(dtype="float16"), "dtype", "float16", "one of"),
    # ---- CED / CSA2 schedule ------------------------------------------------------------------------
    (
        "ratios_too_short",
        lab(compress_ratios=LAB_RATIOS[:-1]),
        "compress_ratios",
        None,
        f"n_layers + n_mtp_layers = {len(LAB_RATIOS)}",
    ),
    (
        "ratios_too_short_flash",
        flash(compress_ratios=FLASH_RATIOS[:-1]),
        "compress_ratios",
        None,
        "n_layers + n_mtp_layers = 43",
    ),
    ("ratios_list_not_tuple", lab(compress_ratios=list(LAB_RATIOS)), "compress_ratios", None, "a tuple"),
    (
        "ratio_3",
        lab(compress_ratios=(0, 3, 3, 3, 1, 1, 1, 1) + LAB_DRAFT),
        "compress_ratios",
        None,
        "entries in {0, 1, 2}",
    ),
    (
        "draft_ratio_nonzero",
        lab(compress_ratios=LAB_RATIOS[:-1] + (1,)),
        "compress_ratios",
        None,
        "0 for every draft layer",
    ),
    (
        "draft_ratio_nonzero_flash",
        flash(compress_ratios=FLASH_RATIOS[:-1] + (2,)),
        "compress_ratios",
        None,
        "0 for every draft layer",
    ),
    ("kv_source_ratio_0", lab(kv_source_layers=(0, 1, 3, 4)), "kv_source_layers", None, "compress ratio is > 0"),
    (
        "index_sources_miss_kv_source",
        lab(index_source_layers=(1, 4, 6)),
        "index_source_layers",
        None,
        "superset of kv_source_layers (1, 3, 4)",
    ),
    (
        "index_source_ratio_0",
        lab(index_source_layers=(0, 1, 3, 4, 6)),
        "index_source_layers",
        None,
        "compress ratio is > 0",
    ),
    (
        "ratio_without_kv_source_before",
        lab(kv_source_layers=(3, 4)),
        "compress_ratios",
        LAB_RATIOS,
        "0 at layer 1: no KV source at or before it",
    ),
    (
        "consumer_ratio_differs_from_source",
        lab(compress_ratios=(0, 2, 1, 2, 1, 1, 1, 1) + LAB_DRAFT),
        "compress_ratios",
        None,
        "at layer 2 equal to its KV source layer 1's ratio 2",
    ),
    (
        "consumer_ratio_differs_flash",
        flash(compress_ratios=(0, 0) + (2,) * 18 + (1,) * 19 + (2,) + (0,) * 3),
        "compress_ratios",
        None,
        "at layer 39 equal to its KV source layer 20's ratio 1",
    ),
    (
        "two_ratio1_sources",
        lab(kv_source_layers=(1, 3, 4, 5), index_source_layers=(1, 3, 4, 5, 6)),
        "kv_source_layers",
        None,
        "at most one ratio-1 source",
    ),
    (
        "ratio1_source_not_last",
        lab(
            compress_ratios=(0, 2, 2, 1, 1, 2, 2, 2) + LAB_DRAFT,
            kv_source_layers=(1, 3, 5),
            index_source_layers=(1, 3, 5),
        ),
        "kv_source_layers",
        None,
        "the ratio-1 source as the last KV source",
    ),
    ("kv_sources_unsorted", lab(kv_source_layers=(3, 1, 4)), "kv_source_layers", None, "strictly increasing"),
    (
        "candidate_not_kv_source",
        lab(candidate_source_layer=6),
        "candidate_source_layer",
        6,
        "one of kv_source_layers (1, 3, 4)",
    ),
    (
        "candidate_not_kv_source_flash",
        flash(candidate_source_layer=24),
        "candidate_source_layer",
        24,
        "one of kv_source_layers (2, 8, 14, 20)",
    ),
    ("index_topk_gt_pool", lab(index_topk=17), "index_topk", 17, "≤ candidate pool 16"),
    ("index_topk_gt_pool_flash", flash(index_topk=16385), "index_topk", 16385, "≤ candidate pool 16384"),
    # ---- Engram ---------------------------------------------------------------------------------------
    (
        "engram_after_last_kv_source",
        lab(engram_layer_ids=(0, 5)),
        "engram_layer_ids",
        None,
        "at or before the last KV source (4)",
    ),
    (
        "engram_after_last_kv_source_flash",
        flash(engram_layer_ids=(1, 21)),
        "engram_layer_ids",
        None,
        "at or before the last KV source (20)",
    ),
    ("engram_layer_out_of_range", lab(engram_layer_ids=(0, 8)), "engram_layer_ids", None, "layer ids in 0..7"),
    ("engram_layer_negative", lab(engram_layer_ids=(-1, 3)), "engram_layer_ids", None, "layer ids in 0..7"),
    ("engram_ngram_1", lab(engram_max_ngram_size=1), "engram_max_ngram_size", 1, "integer ≥ 2"),
    (
        "engram_pad_ge_vocab",
        lambda: get_config("lab").replace(engram_pad_id=get_config("lab").vocab_size),
        "engram_pad_id",
        LAB_V,
        f"token id in 0..{LAB_V - 1}",
    ),
    ("engram_pad_ge_vocab_flash", flash(engram_pad_id=129_280), "engram_pad_id", 129_280, "token id in 0..129279"),
    (
        "engram_head_dim_not_mult32",
        lab(engram_head_dim=48),
        "engram_head_dim",
        48,
        "multiple of 32 when engram_table_quant",
    ),
    # ---- DSpark ---------------------------------------------------------------------------------------
    ("taps_out_of_range", lab(dspark_target_layer_ids=(3, 8)), "dspark_target_layer_ids", None, "layer ids in 0..7"),
    (
        "taps_out_of_range_flash",
        flash(dspark_target_layer_ids=(38, 39, 40)),
        "dspark_target_layer_ids",
        None,
        "layer ids in 0..39",
    ),
    ("taps_unsorted", lab(dspark_target_layer_ids=(4, 3)), "dspark_target_layer_ids", None, "strictly increasing"),
    ("taps_duplicated", lab(dspark_target_layer_ids=(3, 3)), "dspark_target_layer_ids", None, "strictly increasing"),
    ("taps_empty", lab(dspark_target_layer_ids=()), "dspark_target_layer_ids", None, "at least one tap layer"),
    ("tap_mix_unknown", lab(dspark_tap_mix="sum"), "dspark_tap_mix", "sum", "one of ('mean', 'concat_proj')"),
    ("noise_ge_vocab", lab(dspark_noise_token_id=LAB_V), "dspark_noise_token_id", LAB_V, f"token id in 0..{LAB_V - 1}"),
    (
        "noise_ge_vocab_flash",
        flash(dspark_noise_token_id=129_280),
        "dspark_noise_token_id",
        129_280,
        "token id in 0..129279",
    ),
    ("noise_negative", lab(dspark_noise_token_id=-1), "dspark_noise_token_id", -1, f"token id in 0..{LAB_V - 1}"),
    ("dspark_block_gt_window", lab(dspark_block_size=9), "dspark_block_size", 9, "1..window_size (8)"),
    ("dspark_block_gt_window_flash", flash(dspark_block_size=129), "dspark_block_size", 129, "1..window_size (128)"),
    # ---- presets --------------------------------------------------------------------------------------
    ("unknown_preset", lambda: get_config("tiny"), "preset", "tiny", "one of ('lab', 'flash', 'flash-cpu')"),
]


def test_enough_distinct_invalid_cases() -> None:
    ids = [case[0] for case in INVALID]
    assert len(ids) == len(set(ids))
    assert len(ids) >= 25


@pytest.mark.parametrize("make, field_name, bad, allowed_fragment", [pytest.param(*c[1:], id=c[0]) for c in INVALID])
def test_invalid_config_raises(make, field_name, bad, allowed_fragment) -> None:
    with pytest.raises(ConfigError) as info:
        make()
    err = info.value
    assert isinstance(err, ValueError)  # ConfigError is a ValueError
    assert err.field == field_name, str(err)
    if bad is not None:
        assert err.value == bad and type(err.value) is type(bad), (err.value, bad)
    msg = str(err)
    assert field_name in msg
    assert repr(err.value) in msg  # the bad value itself, as written
    assert "allowed" in msg and err.allowed and err.allowed in msg  # what would be accepted
    assert allowed_fragment in err.allowed, (allowed_fragment, err.allowed)


def test_invalid_change_leaves_field_value_in_error() -> None:
    """The ConfigError of an invalid tuple field carries the whole tuple that was passed."""
    bad = (0, 3, 3, 3, 1, 1, 1, 1) + LAB_DRAFT  # the right length: refused for the ratio 3
    with pytest.raises(ConfigError) as info:
        get_config("lab").replace(compress_ratios=bad)
    assert info.value.value == bad and repr(bad) in str(info.value)


def test_head_dim_48_accepted_without_kv_quant() -> None:
    cfg = get_config("lab").replace(head_dim=48, kv_quant=False)
    assert cfg.head_dim == 48 and cfg.nope_head_dim == 40 and not cfg.kv_quant
    with pytest.raises(ConfigError) as info:
        cfg.replace(kv_quant=True)
    assert info.value.field == "head_dim"


# ---- once-missed validations (types of ids, the YaRN betas): found by these tests, now rejected ----------
ACCEPTED_BUT_INVALID = [
    pytest.param({"beta_slow": 0}, "beta_slow", id="beta_slow_zero"),
    pytest.param({"engram_max_ngram_size": 3.0}, "engram_max_ngram_size", id="engram_ngram_float"),
    pytest.param({"engram_pad_id": 2.0}, "engram_pad_id", id="engram_pad_float"),
    pytest.param({"engram_pad_id": True}, "engram_pad_id", id="engram_pad_bool"),
    pytest.param({"dspark_noise_token_id": True}, "dspark_noise_token_id", id="noise_bool"),
    pytest.param({"candidate_source_layer": True}, "candidate_source_layer", id="candidate_bool"),
    pytest.param({"rope_theta": True}, "rope_theta", id="rope_theta_bool"),
    pytest.param({"norm_eps": float("nan")}, "norm_eps", id="norm_eps_nan"),
    pytest.param({"rope_factor": float("inf")}, "rope_factor", id="rope_factor_inf"),
    pytest.param({"swiglu_limit": float("inf")}, "swiglu_limit", id="swiglu_limit_inf"),
    pytest.param({"engram_layer_ids": (False, 3)}, "engram_layer_ids", id="layer_id_bool"),
    pytest.param({"compress_ratios": (0, True, 2, 2, 1, 1, 1, 1) + LAB_DRAFT}, "compress_ratios", id="ratio_bool"),
    pytest.param({"kv_quant": 1}, "kv_quant", id="kv_quant_int"),
    pytest.param({"dtype": ["float64"]}, "dtype", id="dtype_list"),
    pytest.param({"extra": None}, "extra", id="extra_none"),
    pytest.param({"norm_epsilon": 1e-6}, "norm_epsilon", id="unknown_field"),
]


@pytest.mark.parametrize("changes, field_name", ACCEPTED_BUT_INVALID)
def test_validation_gaps(changes, field_name) -> None:
    with pytest.raises(ConfigError) as info:
        get_config("lab").replace(**changes)
    assert info.value.field == field_name


# ---- presets ------------------------------------------------------------------------------------------
def test_presets_validate() -> None:
    for name in ("lab", "flash"):
        cfg = get_config(name)
        assert isinstance(cfg, ModelConfig)
        assert cfg.validate() is cfg
        assert cfg.name == name


def test_lab_contract() -> None:
    cfg = get_config("lab")
    assert cfg.dspark_target_layer_ids == (3, 4)
    assert cfg.dspark_tap_mix == "mean"
    assert cfg.dspark_block_size == 5  # the real V4-Flash draft block; DSpark ≫ DFlash needs k > 3 (paper Fig. 4)
    assert cfg.hc_mult == 4
    assert cfg.hc_sinkhorn_iters == 20
    assert cfg.n_layers >= 5
    assert 0 < cfg.n_encoder_layers < cfg.n_layers
    tok = default_tokenizer()  # the byte-level BPE of dspark_mini/lab_tokenizer/: 8,192 ids, <noise> = 3
    assert cfg.vocab_size == LAB_V == tok.vocab_size == 8192
    assert cfg.engram_compressed_vocab_size == tok.compressed_vocab_size < cfg.vocab_size
    assert cfg.dspark_noise_token_id == tok.noise == tok.token_id("<noise>")
    assert len(cfg.compress_ratios) == cfg.n_layers + cfg.n_mtp_layers
    # the ratio-1 source sits at the encoder/decoder boundary, ratio 2 before it, ratio 1 after
    r = cfg.compress_ratios
    assert r[cfg.n_encoder_layers] == 1 and cfg.n_encoder_layers in cfg.kv_source_layers
    assert all(x in (0, 2) for x in r[: cfg.n_encoder_layers])
    assert all(x == 1 for x in r[cfg.n_encoder_layers : cfg.n_layers])
    # the shipped weights were trained with MXFP4 expert weights and unquantized expert inputs
    assert cfg.expert_quant and not cfg.expert_act_quant


def test_unknown_field_names_the_valid_ones() -> None:
    """A misspelt field is a ConfigError (not a bare TypeError) with a suggestion and the list of fields."""
    for make in (
        lambda: get_config("lab", norm_epsilon=1e-6),
        lambda: get_config("flash", norm_epsilon=1e-6),
        lambda: get_config("lab").replace(norm_epsilon=1e-6),
    ):
        with pytest.raises(ConfigError) as info:
            make()
        msg = str(info.value)
        assert info.value.field == "norm_epsilon" and "did you mean 'norm_eps'?" in msg
        assert all(f.name in msg for f in dataclasses.fields(ModelConfig))


def test_lab_overrides_go_through_get_config() -> None:
    cfg = get_config("lab", dim=96, engram_head_dim=64)
    assert (cfg.dim, cfg.engram_head_dim) == (96, 64)
    with pytest.raises(ConfigError) as info:
        get_config("lab", dim=0)
    assert info.value.field == "dim"


FLASH_EXPECTED = {  # the published config.json
    "vocab_size": 129_280,
    "dim": 5120,
    "n_layers": 40,
    "n_mtp_layers": 3,
    "n_heads": 64,
    "head_dim": 512,
    "rope_head_dim": 64,
    "q_lora_rank": 1280,
    "o_groups": 8,
    "o_lora_rank": 1024,
    "window_size": 128,
    "compress_ratios": FLASH_RATIOS,
    "kv_source_layers": (2, 8, 14, 20),
    "index_source_layers": (2, 8, 14, 20, 24, 28, 32, 36),
    "index_n_heads": 32,
    "index_head_dim": 128,
    "index_topk": 512,
    "candidate_source_layer": 20,
    "candidate_topk_blocks": 2048,
    "candidate_block_size": 8,
    "n_routed_experts": 384,
    "n_activated_experts": 6,
    "n_shared_experts": 1,
    "moe_inter_dim": 2304,
    "score_func": "sqrtsoftplus",
    "route_scale": 1.5,
    "swiglu_limit": 10.0,
    "norm_eps": 1e-20,
    "hc_mult": 4,
    "hc_sinkhorn_iters": 20,
    "hc_eps": 1e-6,
    "rope_theta": 10000.0,
    "compress_rope_theta": 160000.0,
    "rope_factor": 16.0,
    "original_seq_len": 65536,
    "beta_fast": 32,
    "beta_slow": 1,
    "engram_layer_ids": (1, 14),
    "engram_max_ngram_size": 4,
    "engram_vocab_size": 16_000_000,
    "engram_n_heads": 8,
    "engram_head_dim": 256,
    "engram_pad_id": 2,
    "engram_compressed_vocab_size": 99_092,
    "dspark_block_size": 5,
    "dspark_noise_token_id": 128_799,
    "dspark_target_layer_ids": (37, 38, 39),
    "dspark_markov_rank": 256,
    "dspark_n_routed_experts": 128,
    "dspark_n_activated_experts": 3,
    "dspark_tap_mix": "concat_proj",
    "gate_temp": 1.0,
    "expert_quant": True,
    "expert_act_quant": True,  # the reference quantizes every expert GEMM's input to FP8 (the reference)
}


@pytest.mark.parametrize("field_name", sorted(FLASH_EXPECTED))
def test_flash_matches_the_published_config(field_name) -> None:
    assert getattr(get_config("flash"), field_name) == FLASH_EXPECTED[field_name]


def test_flash_derived() -> None:
    cfg = get_config("flash")
    assert len(cfg.compress_ratios) == 43
    assert cfg.nope_head_dim == 448
    assert cfg.n_encoder_layers == 20  # CED 20 + 20
    assert cfg.engram_orders == (2, 3, 4)
    assert cfg.engram_n_hash_cols == 24
    assert cfg.torch_dtype == torch.bfloat16
    assert cfg.candidate_topk_blocks * cfg.candidate_block_size == 16_384


def test_flash_engram_rows_match_the_published_config() -> None:
    from dspark_mini.engram import engram_num_embeddings

    assert engram_num_embeddings(get_config("flash")) == (384_006_168, 384_016_682)


# ---- every field documented where it is defined ---------------------------------------------------------
def _field_lines() -> tuple[list[str], dict[str, tuple[int, int]]]:
    src = Path(config_module.__file__).read_text(encoding="utf-8")
    tree = ast.parse(src)
    cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == "ModelConfig")
    spans = {
        node.target.id: (node.lineno, node.end_lineno)
        for node in cls.body
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name)
    }
    return src.splitlines(), spans


def _comment_lines() -> dict[int, str]:
    src = Path(config_module.__file__).read_text(encoding="utf-8")
    return {
        tok.start[0]: tok.string
        for tok in tokenize.generate_tokens(io.StringIO(src).readline)
        if tok.type == tokenize.COMMENT
    }


def test_field_definitions_parsed() -> None:
    _, spans = _field_lines()
    assert set(spans) == {f.name for f in dataclasses.fields(ModelConfig)}


def _undocumented(allow_block_above: bool) -> list[str]:
    lines, spans = _field_lines()
    comments = _comment_lines()
    missing = []
    for name, (lo, hi) in spans.items():
        if any(ln in comments and len(comments[ln].strip("# -")) > 0 for ln in range(lo, hi + 1)):
            continue
        if allow_block_above:  # a comment block directly above the definition, section rulers excluded
            ln, block = lo - 1, []
            while ln >= 1 and lines[ln - 1].strip().startswith("#"):
                block.append(lines[ln - 1].strip())
                ln -= 1
            if any(not c.lstrip("# ").startswith("----") for c in block):
                continue
        missing.append(name)
    return missing


def test_every_field_documented_at_its_definition() -> None:
    """The docs promise every field is documented where it is defined (line comment or a block just above)."""
    assert _undocumented(allow_block_above=True) == []


def test_every_field_has_comment_on_definition_line() -> None:
    assert _undocumented(allow_block_above=False) == []


# ---- replace --------------------------------------------------------------------------------------------
def test_replace_returns_validated_copy() -> None:
    base = get_config("lab")
    before = dataclasses.asdict(base)
    new = base.replace(dim=96, dspark_block_size=2)
    assert new is not base and isinstance(new, ModelConfig)
    assert (new.dim, new.dspark_block_size) == (96, 2)
    assert (base.dim, base.dspark_block_size) == (128, 5)
    assert dataclasses.asdict(base) == before
    assert new.validate() is new
    # every other field carried over
    for f in dataclasses.fields(ModelConfig):
        if f.name not in ("dim", "dspark_block_size"):
            assert getattr(new, f.name) == getattr(base, f.name), f.name


def test_replace_invalid_leaves_original_unchanged() -> None:
    base = get_config("flash")
    before = dataclasses.asdict(base)
    with pytest.raises(ConfigError):
        base.replace(window_size=0)
    assert dataclasses.asdict(base) == before
    with pytest.raises(dataclasses.FrozenInstanceError):
        base.dim = 1  # type: ignore[misc]


def test_replaced_config_builds() -> None:
    """A replaced config is a normal config: the lab model builds with it (cheap at lab size)."""
    cfg = get_config("lab").replace(dspark_block_size=2)
    model = build_model(cfg, seed=0)
    assert model.cfg is cfg

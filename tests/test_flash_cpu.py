"""The `flash-cpu` preset (docs/real-scale.md): every width of DeepSeek-V4.1-Flash, few layers, experts and Engram rows.

Built on `meta` only (its 3 B parameters take minutes to draw on 2 cores; the full run, its tokens/s and its peak
memory against the estimate, is `bench/flash_cpu.py`, part of `make bench`): every weight has the shape the same
weight has in `flash`, the estimate fits 16 GiB, the estimate of the prepared kernel layouts equals what a real
lab model builds, and every command that builds a model accepts the preset in its checks.
"""

from __future__ import annotations

import re

import pytest
import torch

from dspark_mini import PRESETS, build_model, get_config
from dspark_mini.quant import Prepared
from dspark_mini.tokenizer import TokenizerError, WiderVocabTokenizer, default_tokenizer
from lab.realscale.placement import estimate_rank, own, prepared_bytes, tensors_of
from lab.realscale.ranks import SINGLE
from lab.runtime.run import preset_weights

GIB = 2**30
WIDTHS = (
    "vocab_size",
    "dim",
    "n_heads",
    "head_dim",
    "rope_head_dim",
    "q_lora_rank",
    "o_groups",
    "o_lora_rank",
    "window_size",
    "index_n_heads",
    "index_head_dim",
    "index_topk",
    "candidate_topk_blocks",
    "candidate_block_size",
    "moe_inter_dim",
    "n_shared_experts",
    "hc_mult",
    "engram_n_heads",
    "engram_head_dim",
    "engram_max_ngram_size",
    "engram_compressed_vocab_size",
    "dspark_block_size",
    "dspark_noise_token_id",
    "dspark_tap_mix",
    "dspark_markov_rank",
    "dtype",
    "kv_quant",
    "expert_quant",
    "expert_act_quant",
    "engram_table_quant",
)
# the only weights whose shape depends on a count flash-cpu lowers: the router (one row per routed expert) and the
# Engram tables (rows drawn above engram_vocab_size)
COUNT_SHAPED = re.compile(r"\.gate\.(weight|bias)$|\.engram\.embed\.weight$")


def layer_free(name: str) -> str:
    """A parameter name without its layer and expert indices: layers.3.ffn.experts.1.w1 → layers.N.ffn.experts.N.w1."""
    return re.sub(r"\.\d+(?=\.)", ".N", name)


def shapes_by_kind(cfg) -> dict[str, set[tuple[int, ...]]]:
    out: dict[str, set[tuple[int, ...]]] = {}
    for name, p in build_model(cfg, device="meta").named_parameters():
        out.setdefault(layer_free(name), set()).add(tuple(p.shape))
    return out


def test_the_preset_is_listed_and_its_widths_are_flash_s():
    assert "flash-cpu" in PRESETS
    small, real = get_config("flash-cpu"), get_config("flash")
    for field in WIDTHS:
        assert getattr(small, field) == getattr(real, field), field
    L = small.n_layers
    assert small.dspark_target_layer_ids == (L - 3, L - 2, L - 1)  # flash: 37, 38, 39 of 40
    assert small.n_layers < real.n_layers and small.n_routed_experts < real.n_routed_experts
    assert small.engram_vocab_size < real.engram_vocab_size
    # the CED shape: a ratio-2 encoder source, then the ratio-1 decoder source as the last KV source
    ratios = [small.compress_ratios[i] for i in small.kv_source_layers]
    assert ratios == [2, 1] and small.candidate_source_layer == small.kv_source_layers[-1]


def test_every_weight_has_its_flash_shape():
    small, real = shapes_by_kind(get_config("flash-cpu")), shapes_by_kind(get_config("flash"))
    assert set(small) <= set(real)  # no weight that flash does not have
    checked = 0
    for kind, shapes in small.items():
        if COUNT_SHAPED.search(kind):
            continue
        assert shapes <= real[kind], (kind, shapes, real[kind])
        checked += 1
    assert checked > 40
    assert small["embed.weight"] == {(129_280, 5120)} and small["head.weight"] == {(129_280, 5120)}
    assert small["mtp.main_proj.weight"] == {(5120, 3 * 5120)}  # three taps concatenated, projected
    assert small["layers.N.attn.wo_a.weight"] == {(8 * 1024, 64 * 512 // 8)}


def test_the_estimate_fits_16_gib_and_counts_the_prepared_layouts():
    est = estimate_rank(get_config("flash-cpu"), SINGLE, packed=False, style="lab", prepared=True)
    assert est.dtype == "bfloat16"
    assert est.prepared > 0 and est.needed_bytes == est.held_bytes + est.prepared + est.margin_bytes
    assert est.needed_bytes <= 16 * GIB
    assert est.to_json()["prepared_bytes"] == est.prepared


def test_prepared_bytes_on_meta_equal_what_a_real_model_builds():
    """The meta count against the bytes of every prepared value a real (lab) model builds at its first forward."""
    cfg = get_config("lab")
    model = build_model(cfg).prepare()
    params = {id(p) for p in model.parameters()}
    built = 0
    for m in model.modules():
        for v in vars(m).values():
            if isinstance(v, Prepared):
                built += sum(t.nbytes for t in tensors_of(v.value) if own(t, params))
    assert built > 0 and prepared_bytes(cfg) == built
    assert prepared_bytes(cfg, "bfloat16") < built  # a narrower dtype, smaller layouts


def test_only_the_lab_preset_has_trained_weights():
    assert preset_weights("lab", None) == "trained" and preset_weights("flash-cpu", None) == "untrained"
    assert preset_weights("flash-cpu", "untrained") == "untrained"
    assert preset_weights("flash-cpu", None, checkpoint="ckpt") == "trained"  # a checkpoint brings its own
    with pytest.raises(ValueError, match="allowed --weights untrained"):
        preset_weights("flash-cpu", "trained")


def test_the_lab_ids_inside_the_real_vocabulary():
    lab = default_tokenizer()
    tok = WiderVocabTokenizer(lab, 129_280)
    text = "Xin chào, model"
    ids = tok.encode(text)
    assert ids == lab.encode(text) and max(ids) < lab.vocab_size
    assert tok.decode(ids) == text and len(tok.vocab) == 129_280
    assert tok.token_text(128_799) == "⟨128799⟩" and tok.decode([ids[0], 128_799]) == lab.decode(ids[:1]) + "⟨128799⟩"
    assert tok.token_text(ids[0]) == lab.token_text(ids[0])
    with pytest.raises(TokenizerError, match="0..129279"):
        tok.decode([129_280])
    with pytest.raises(TokenizerError, match="smaller than the lab vocabulary"):
        WiderVocabTokenizer(lab, lab.vocab_size - 1)


@pytest.mark.parametrize(
    "argv",
    [
        ["walk", "--preset", "flash-cpu", "--step", "6B"],
        ["generate", "--preset", "flash-cpu", "--max-new-tokens", "8", "--temperature", "0", "--json"],
        ["profile", "--preset", "flash-cpu", "--reps", "1"],
        ["serve", "--preset", "flash-cpu"],
        ["inspect", "--preset", "flash-cpu"],
    ],
)
def test_every_command_that_builds_a_model_accepts_the_preset(argv):
    from lab.cli import check_args, parser

    args = parser().parse_args(argv)
    check_args(args)  # raises on a refused option
    assert args.preset == "flash-cpu"
    assert getattr(args, "weights", "untrained") == "untrained"  # its only weights: the seeded init


def test_inspect_counts_flash_cpu_on_meta(capsys):
    import json

    from lab.cli import main

    assert main(["inspect", "--preset", "flash-cpu", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["device"] == "meta" and report["config"]["dim"] == 5120
    total = sum(p.numel() for p in build_model(get_config("flash-cpu"), device="meta").parameters())
    assert report["params"]["total"] == total


def test_build_on_device_draws_in_place():
    """on_device=True: every tensor made on the device and drawn there, the same numbers for the same seed."""
    cfg = get_config("lab", dtype="float32")
    a = build_model(cfg, seed=3, device="cpu", on_device=True)
    b = build_model(cfg, seed=3, device="cpu", on_device=True)
    assert all(torch.equal(x, y) for x, y in zip(a.state_dict().values(), b.state_dict().values(), strict=True))
    assert not torch.equal(a.embed.weight, build_model(cfg, seed=4, device="cpu", on_device=True).embed.weight)


def test_generate_times_no_layout_building(monkeypatch):
    """`compare` builds every prepared layout before either timed run: none is (re)built inside them, so the
    speculative ÷ plain ratio of `generate` is the decoding's, as `make bench` measures it on a warm model."""
    from dspark_mini.quant import Prepared
    from lab.lesson import generation

    timed = {"inside": 0, "runs": 0}
    real_rebuild = Prepared.rebuild

    def counting_rebuild(self):
        timed["inside"] += timed["runs"] > 0
        real_rebuild(self)

    def timed_run(fn):
        def run(*a, **k):
            timed["runs"] += 1
            try:
                return fn(*a, **k)
            finally:
                timed["runs"] -= 1

        return run

    monkeypatch.setattr(Prepared, "rebuild", counting_rebuild)
    monkeypatch.setattr(generation, "generate_speculative", timed_run(generation.generate_speculative))
    monkeypatch.setattr(generation, "generate_plain", timed_run(generation.generate_plain))
    report = generation.compare("xin chào", max_new_tokens=6, weights="untrained")
    assert report.identical and len(report.plain.tokens[0]) == 6
    assert timed["inside"] == 0

"""Tests for the official checkpoint layout (lab/realscale): export → load, lazy reads, header-only inspect.

The trained lab weights exported in the official layout and read back give the same logits (≤ 1e-6; in fact
bit-identical) and the same greedy tokens, plain and speculative; a rank reads only the tensors it asks for;
`inspect` finds nothing wrong with the export, names every tampered tensor, and on header-only shards at the
real `flash` shapes reproduces the real checkpoint's bytes per group. Bad folders fail with errors naming the file and
the tensor.
"""

from __future__ import annotations

import json
import re
import shutil

import pytest
import torch
from safetensors import safe_open
from safetensors.torch import save_file

from dspark_mini import build_model, get_config
from dspark_mini.config import flash_config
from dspark_mini.files import OWNER
from dspark_mini.packed import PackedEmbedding, PackedLinear, state_bytes
from dspark_mini.speculative import generate_plain, generate_speculative
from lab.realscale import (
    GROUPS,
    CheckpointReader,
    RealScaleError,
    checkpoint_name,
    export_checkpoint,
    format_report,
    inspect_checkpoint,
    lab_tensors,
    layout,
    load_checkpoint,
    write_header_only,
)
from lab.realscale import export as export_mod
from lab.realscale.layout import config_from_official, official_text_config
from lab.realscale.shards import INDEX, read_header

GIB = 2**30
# DeepSeek-V4.1-Flash, measured from the real checkpoint's headers
PUBLISHED_BYTES, PUBLISHED_TENSORS = 510_286_023_000, 96_085
PUBLISHED_GIB = {"routed_experts": 268.95, "engram": 189.13, "dspark": 7.39, "attention": 4.72,
               "shared_experts": 1.32, "embed": 1.23, "head": 1.23, "other": 0.37}  # fmt: skip
PUBLISHED_VISION_GIB = 0.90  # the vision tower + aligner: not in the lab


@pytest.fixture(scope="module")
def trained():
    from lab.weights import lab_model

    return lab_model("trained").eval()


@pytest.fixture(scope="module")
def exported(trained, tmp_path_factory):
    return export_checkpoint(trained, tmp_path_factory.mktemp("export") / "ckpt", shards=3)


@pytest.fixture
def copy_of(exported, tmp_path):
    """A fresh copy of the export to tamper with."""
    return shutil.copytree(exported, tmp_path / "copy")


def tokens(cfg, b=2, s=27, seed=5):
    return torch.randint(0, cfg.vocab_size, (b, s), generator=torch.Generator().manual_seed(seed))


# ---- layout -----------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "changes",
    [{}, {"dspark_tap_mix": "concat_proj", "dspark_markov_kind": "rnn", "dtype": "float32", "expert_quant": False}],
)
def test_layout_is_the_models_state_dict(changes) -> None:
    cfg = get_config("lab", **changes)
    sd = build_model(cfg, device="meta").state_dict()
    assert lab_tensors(cfg) == {k: (tuple(t.shape), t.dtype) for k, t in sd.items()}


def test_layout_at_flash_widths_is_the_models_state_dict() -> None:
    """The real widths (experts cut to 8 / 4 so the meta build takes a moment)."""
    cfg = flash_config(n_routed_experts=8, dspark_n_routed_experts=4)
    sd = build_model(cfg, device="meta").state_dict()
    assert lab_tensors(cfg) == {k: (tuple(t.shape), t.dtype) for k, t in sd.items()}


def test_checkpoint_names_dtypes_and_shapes_of_the_real_checkpoint() -> None:
    cfg = get_config("flash")
    entries = {s.name: (s.dtype, s.shape) for s in layout(cfg, "official")}
    f8, e8, i8, bf, f32 = torch.float8_e4m3fn, torch.float8_e8m0fnu, torch.int8, torch.bfloat16, torch.float32
    assert entries["layers.1.engram.embed.weight"] == (f8, (384_006_168, 256))  # the real checkpoint's header
    assert entries["layers.1.engram.embed.scale"] == (e8, (384_006_168, 8))
    assert entries["layers.14.engram.embed.weight"] == (f8, (384_016_682, 256))
    assert entries["layers.0.ffn.experts.0.w1.weight"] == (i8, (2304, 2560))  # MXFP4, two a byte
    assert entries["layers.0.ffn.experts.0.w1.scale"] == (e8, (2304, 160))
    assert entries["layers.39.ffn.experts.383.w2.scale"] == (e8, (5120, 72))
    assert entries["layers.5.attn.wkv.weight"] == (f8, (512, 5120))
    assert entries["layers.5.attn.wkv.scale"] == (e8, (16, 160))
    assert entries["layers.5.attn.wq_a.scale"] == (e8, (40, 160))
    assert entries["layers.14.engram.wkv.scale"] == (e8, (800, 192))
    assert entries["mtp.0.main_proj.weight"] == (f8, (5120, 15360))
    assert entries["mtp.0.main_proj.scale"] == (e8, (160, 480))
    assert entries["mtp.2.markov_head.embed.weight"] == (bf, (129_280, 256))
    assert entries["mtp.2.confidence_head.proj.weight"] == (bf, (1, 5376))
    assert entries["mtp.1.ffn.experts.127.w3.weight"] == (i8, (2304, 2560))
    assert entries["layers.0.hc_attn_fn"] == (f32, (24, 20480))
    assert entries["layers.20.attn.compressor.wkv.weight"] == (bf, (512, 5120))
    assert "layers.20.attn.compressor.wgate.weight" not in entries  # ratio 1: no gate
    assert "layers.24.attn.indexer.wk.weight" not in entries  # Reindex: no wk of its own
    assert sum(n.endswith("compressor.wkv.weight") for n in entries) == 4  # [PL §0] counts
    assert sum(n.endswith("compressor.wgate.weight") for n in entries) == 3
    assert sum(n.endswith("indexer.wq_b.weight") for n in entries) == 8
    assert sum(n.endswith("indexer.wk.weight") for n in entries) == 4
    assert entries["embed.weight"] == entries["head.weight"] == (bf, (129_280, 5120))


def test_name_mapping_of_the_lab() -> None:
    cfg = get_config("lab")
    assert checkpoint_name("layers.3.hc_ffn.scale", cfg) == "layers.3.hc_ffn_scale"
    assert checkpoint_name("mtp.layers.1.attn.wq_a.weight", cfg) == "mtp.1.attn.wq_a.weight"
    assert checkpoint_name("mtp.main_norm.weight", cfg) == "mtp.0.main_norm.weight"
    last = cfg.n_mtp_layers - 1  # the final norm and the confidence head sit on the last draft layer
    assert checkpoint_name("mtp.norm.weight", cfg) == f"mtp.{last}.norm.weight"
    assert checkpoint_name("mtp.confidence_head.weight", cfg) == f"mtp.{last}.confidence_head.proj.weight"
    assert checkpoint_name("layers.0.engram.embed.weight", cfg) == "layers.0.engram.embed.weight"
    names = [s.name for s in layout(cfg, "lab")]
    assert len(names) == len(set(names))


def test_official_config_round_trip() -> None:
    cfg = get_config("flash")
    assert config_from_official(json.loads(json.dumps(official_text_config(cfg)))) == cfg


# ---- export → load ------------------------------------------------------------------------------------------
def test_round_trip_is_exact_on_the_trained_weights(trained, exported) -> None:
    back = load_checkpoint(exported).eval()
    x = tokens(trained.cfg)
    with torch.no_grad():
        a, b = trained(x).logits, back(x).logits
    assert (a - b).abs().max().item() <= 1e-6
    prompt = x[:1, :11]
    assert generate_plain(back, prompt, 16).tokens == generate_plain(trained, prompt, 16).tokens
    s1, s2 = generate_speculative(trained, prompt, 16), generate_speculative(back, prompt, 16)
    assert s1.tokens == s2.tokens
    assert [r[0].confidence for r in s1.rounds] == [r[0].confidence for r in s2.rounds]  # STS temperatures kept


def test_packed_load_holds_the_checkpoint_bytes(trained, exported) -> None:
    back = load_checkpoint(exported, packed=True)
    index = json.loads((exported / INDEX).read_text())
    assert state_bytes(back) == index["metadata"]["total_size"]  # memory = the checkpoint's bytes
    assert isinstance(back.layers[2].ffn.experts[5].w2, PackedLinear)
    assert isinstance(back.layers[3].engram.embed, PackedEmbedding)
    x = tokens(trained.cfg, 1, 19)
    with torch.no_grad():
        assert (trained(x).logits - back(x).logits).abs().max().item() <= 1e-6


def test_index_and_shards_are_valid(trained, exported) -> None:
    files = sorted(p.name for p in exported.iterdir())
    shards = [f"model-0000{k}-of-00003.safetensors" for k in (1, 2, 3)]
    # OWNER: the lab's list of the files it wrote; the lab tokenizer's files: the model reads the lab's vocabulary
    assert files == sorted([OWNER, "config.json", INDEX, *shards, "tokenizer.json", "tokenizer_config.json"])
    index = json.loads((exported / INDEX).read_text())
    entries = layout(trained.cfg, "lab")
    assert list(index["weight_map"]) == [s.name for s in entries]
    assert set(index["weight_map"].values()) == set(shards)
    seen, total = {}, 0
    for shard in shards:
        h = read_header(exported / shard)
        assert h.data_size == h.data_end  # every byte accounted for
        total += h.data_end
        seen.update({n: (t.dtype, t.shape) for n, t in h.tensors.items()})
        assert all(index["weight_map"][n] == shard for n in h.tensors)
    assert index["metadata"]["total_size"] == total
    codes = {torch.float64: "F64", torch.int8: "I8", torch.float8_e4m3fn: "F8_E4M3", torch.float8_e8m0fnu: "F8_E8M0"}
    assert seen == {s.name: (codes[s.dtype], s.shape) for s in entries}
    assert {d for d, _ in seen.values()} == {"F64", "I8", "F8_E4M3", "F8_E8M0"}  # experts and Engram packed
    config = json.loads((exported / "config.json").read_text())
    assert config["architectures"] == ["DeepseekV41ForCausalLM"] and config["model_type"] == "deepseek_v41"
    assert config["text_config"]["hidden_size"] == trained.cfg.dim
    assert config["dspark_lab"]["style"] == "lab"


def test_a_lab_export_carries_the_lab_tokenizer(trained, exported, tmp_path) -> None:
    """A lab-vocabulary export is a standard checkpoint folder: the lab tokenizer's two files, byte for byte, read
    back through HFTokenizer.from_folder like a real checkpoint's; an older export without them still opens on the
    lab tokenizer, which its config.json names."""
    from dspark_mini.hf_tokenizer import HFTokenizer
    from dspark_mini.tokenizer import LAB_TOKENIZER_DIR, default_tokenizer
    from lab.realscale.export import folder_tokenizer, read_config

    for name in ("tokenizer.json", "tokenizer_config.json"):
        assert (exported / name).read_bytes() == (LAB_TOKENIZER_DIR / name).read_bytes(), name
    assert json.loads((exported / "config.json").read_text())["dspark_lab"]["tokenizer"] == "lab"
    lab = default_tokenizer()
    text = "Xin chào các bạn 😀 <bos> def f(x):\n\treturn x+1"
    folder_tok = HFTokenizer.from_folder(exported, vocab_size=trained.cfg.vocab_size)
    assert folder_tok.encode(text) == lab.encode(text) and folder_tok.decode(lab.encode(text)) == text
    assert (folder_tok.bos, folder_tok.eos, folder_tok.pad, folder_tok.noise) == (lab.bos, lab.eos, lab.pad, lab.noise)
    assert folder_tok.compress_map == lab.compress_map
    cfg, _, section = read_config(exported)
    found = folder_tokenizer(exported, cfg, section, required=True)
    assert found is not lab and found.source == str(exported / "tokenizer.json")  # the folder's file, read first
    assert found.encode(text) == lab.encode(text)
    loaded = load_checkpoint(exported, tokenizer_required=True)
    assert loaded.tokenizer.encode(text) == lab.encode(text)
    older = shutil.copytree(exported, tmp_path / "older")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        (older / name).unlink()
    assert folder_tokenizer(older, cfg, section, required=True) is lab  # "tokenizer": "lab" still reads


def test_lazy_load_reads_only_the_requested_tensors(trained, exported, monkeypatch) -> None:
    opened, reads = [], []

    class Counting:
        def __init__(self, path, framework, device):
            opened.append(path.rsplit("/", 1)[-1])
            self.inner = safe_open(path, framework=framework, device=device)

        def get_tensor(self, name):
            reads.append(name)
            return self.inner.get_tensor(name)

    monkeypatch.setattr(export_mod, "safe_open", Counting)
    want = ["layers.7.ffn.experts.3.w1.weight", "layers.7.attn.wq_a.weight", "mtp.layers.1.hc_ffn.fn"]
    model = load_checkpoint(exported, select=want)
    assert sorted(reads) == sorted(
        [
            "layers.7.ffn.experts.3.w1.weight",
            "layers.7.ffn.experts.3.w1.scale",  # packed: codes + scales
            "layers.7.attn.wq_a.weight",
            "mtp.1.hc_ffn_fn",
        ]
    )
    index = json.loads((exported / INDEX).read_text())["weight_map"]
    assert sorted(set(opened)) == sorted({index[n] for n in reads})
    sd = model.state_dict()
    assert torch.equal(sd["layers.7.attn.wq_a.weight"], trained.state_dict()["layers.7.attn.wq_a.weight"])
    # a rank's view: one tensor, one read
    reads.clear()
    reader = CheckpointReader(exported)
    t = reader.lab_value("layers.0.engram.q_weight", torch.float64)
    assert reads == ["layers.0.engram.q_weight"] and t.shape == (4, get_config("lab").dim)


def test_official_style_loads_packed_or_not_alike(trained, tmp_path) -> None:
    """The real checkpoint's dtypes (FP8 dense, BF16/FP32 rest): rounds the lab weights, but loads, inspects
    clean, and the packed model (dense FP8 held as codes) equals the dequantized one."""
    d = export_checkpoint(trained, tmp_path / "official", shards=2, style="official")
    report = inspect_checkpoint(d)
    assert report["problems"] == [] and report["style"] == "official"
    plain, packed = load_checkpoint(d), load_checkpoint(d, packed=True)
    assert isinstance(packed.layers[0].attn.wq_a, PackedLinear) and packed.layers[0].attn.wq_a.fmt == "fp8_block"
    x = tokens(trained.cfg, 1, 15)
    with torch.no_grad():
        lp, lk, lt = plain(x).logits, packed(x).logits, trained(x).logits
    assert (lp - lk).abs().max().item() <= 1e-6
    assert bool(torch.isfinite(lp).all()) and (lp - lt).abs().max().item() > 1e-3  # rounded (FP8 dense, BF16)…
    assert (lp.argmax(-1) == lt.argmax(-1)).double().mean().item() > 0.5  # …not broken


# ---- inspect ----------------------------------------------------------------------------------------------
def test_inspect_the_export(trained, exported) -> None:
    r = inspect_checkpoint(exported)
    assert r["problems"] == [] and r["n_missing"] == r["n_unexpected"] == r["n_mismatched"] == 0
    entries = layout(trained.cfg, "lab")
    assert r["n_tensors"] == len(entries) and r["n_shards"] == 3
    assert r["total_bytes"] == sum(s.nbytes for s in entries) == sum(g["bytes"] for g in r["groups"].values())
    assert list(r["groups"]) == list(GROUPS)
    assert r["groups"]["routed_experts"]["tensors"] == (8 * 8) * 3 * 2  # codes + scales
    assert r["groups"]["dspark"]["tensors"] > 0 and r["groups"]["engram"]["tensors"] == 2 * 5
    assert "problems: 0" in format_report(r)
    json.dumps(r)  # --json


def _rewrite(shard, edit):
    """Rewrite one shard with `edit(tensors)` applied (its index entry is left as it was)."""
    with safe_open(str(shard), framework="pt") as f:
        tensors = {n: f.get_tensor(n) for n in f.keys()}
    edit(tensors)
    save_file(tensors, str(shard), metadata={"format": "pt"})


def test_inspect_reports_every_tampered_tensor(copy_of) -> None:
    index = json.loads((copy_of / INDEX).read_text())["weight_map"]
    gone, retyped, reshaped = "layers.2.attn.kv_norm.weight", "layers.2.ffn.gate.bias", "layers.2.attn.wo_b.weight"
    assert index[gone] == index[retyped] == index[reshaped]

    def edit(t):
        del t[gone]
        t[retyped] = t[retyped].float()
        t[reshaped] = t[reshaped][:, :32].contiguous()
        t["layers.2.attn.extra.weight"] = torch.zeros(2)

    _rewrite(copy_of / index[gone], edit)
    r = inspect_checkpoint(copy_of)
    text = "\n".join(r["problems"])
    assert r["n_missing"] == 1 and r["missing"] == [gone]
    assert r["unexpected"] == ["layers.2.attn.extra.weight"]
    assert {m["name"] for m in r["mismatched"]} == {retyped, reshaped}
    assert f"{retyped!r}" in text and "is F32 [8]: allowed F64 [8]" in text
    D = get_config("lab").dim  # wo_b is [dim, o_groups · o_lora_rank]: 64 columns, cut to 32
    assert f"{reshaped!r}" in text and f"[{D}, 32]: allowed F64 [{D}, 64]" in text
    assert f"lacks 1 tensor(s) the index maps to it: {gone!r}" in text
    assert "is in" in text and "layers.2.attn.extra.weight" in text  # in a shard, not in the index
    assert "total_size" in text  # the index's total no longer matches the headers
    with pytest.raises(RealScaleError, match=re.escape(f"tensor {gone!r} is missing from shard '")):
        load_checkpoint(copy_of)
    with pytest.raises(RealScaleError, match=re.escape(f"tensor {retyped!r} in ") + ".*is F32 \\[8\\]: allowed F64"):
        load_checkpoint(copy_of, select=[retyped])


def test_real_shape_synthetic_headers_give_the_published_totals(tmp_path) -> None:
    """Header-only shards at the real `flash` shapes (no data: ~10 MB of headers for 474 GiB)."""
    d = write_header_only(get_config("flash"), tmp_path / "flash", shards=48)
    assert sum(p.stat().st_size for p in d.iterdir()) < 32 * 2**20
    r = inspect_checkpoint(d)
    assert r["problems"] == [] and r["config"] == "flash" and r["header_only_shards"] == 48
    assert {g: v["gib"] for g, v in r["groups"].items()} == PUBLISHED_GIB  # every group, to the published 0.01 GiB
    assert r["groups"]["routed_experts"]["bytes"] == 40 * 384 * 3 * (2304 * 2560 + 2304 * 160)
    # the published totals include the vision tower + aligner (0.90 GiB) and the router's bias_vl, not in the lab:
    assert r["n_tensors"] == 95_776 and r["total_bytes"] == 509_315_423_064
    assert PUBLISHED_TENSORS - r["n_tensors"] == 309
    assert round((PUBLISHED_BYTES - r["total_bytes"]) / GIB, 2) == PUBLISHED_VISION_GIB
    assert round(r["total_bytes"] / GIB + PUBLISHED_VISION_GIB, 2) == round(PUBLISHED_BYTES / GIB, 2) == 475.24
    with pytest.raises(RealScaleError, match="header-only"):
        load_checkpoint(d)


# ---- bad input -----------------------------------------------------------------------------------------
def test_missing_shard(copy_of) -> None:
    (copy_of / "model-00002-of-00003.safetensors").unlink()
    r = inspect_checkpoint(copy_of)
    assert any(p.startswith("shard 'model-00002-of-00003.safetensors' is missing") for p in r["problems"])
    with pytest.raises(RealScaleError, match="model-00002-of-00003.safetensors' is missing"):
        load_checkpoint(copy_of)
    load_checkpoint(copy_of, select=["embed.weight"])  # a rank whose tensors are elsewhere still loads


def test_truncated_shard(copy_of) -> None:
    shard = copy_of / "model-00003-of-00003.safetensors"
    with open(shard, "r+b") as f:
        f.truncate(shard.stat().st_size // 2)
    r = inspect_checkpoint(copy_of)
    assert any("model-00003-of-00003.safetensors' is truncated: tensor" in p for p in r["problems"])
    with pytest.raises(RealScaleError, match="model-00003-of-00003.safetensors' is truncated: tensor '"):
        load_checkpoint(copy_of)
    with open(shard, "r+b") as f:
        f.truncate(5)
    with pytest.raises(RealScaleError, match="truncated: 5 bytes"):
        load_checkpoint(copy_of)


def test_wrong_dtype_of_a_packed_tensor(copy_of) -> None:
    index = json.loads((copy_of / INDEX).read_text())["weight_map"]
    name = "layers.1.ffn.experts.0.w2.scale"
    _rewrite(copy_of / index[name], lambda t: t.__setitem__(name, t[name].view(torch.uint8)))
    D = get_config("lab").dim  # w2 is [dim, inter]: one E8M0 scale a row per 32 columns of inter 32
    pattern = re.escape(f"tensor {name!r} in ") + f".*is U8 \\[{D}, 1\\]: allowed F8_E8M0"
    with pytest.raises(RealScaleError, match=pattern):
        load_checkpoint(copy_of)


def test_non_finite_values(copy_of) -> None:
    index = json.loads((copy_of / INDEX).read_text())["weight_map"]
    name = "layers.0.attn_norm.weight"
    _rewrite(copy_of / index[name], lambda t: t[name].__setitem__(0, float("nan")))
    with pytest.raises(RealScaleError, match=re.escape(f"tensor {name!r}") + ".*NaN"):
        load_checkpoint(copy_of)


def test_bad_folders_and_arguments(trained, exported, tmp_path) -> None:
    with pytest.raises(RealScaleError, match="does not exist"):
        inspect_checkpoint(tmp_path / "nowhere")
    (tmp_path / "empty").mkdir()
    with pytest.raises(RealScaleError, match="model.safetensors.index.json' is missing"):
        load_checkpoint(tmp_path / "empty")
    with pytest.raises(RealScaleError, match="is not empty: allowed a new or empty folder"):
        export_checkpoint(trained, exported)
    with pytest.raises(RealScaleError, match="shards = 0 is invalid: allowed 1\\.\\."):
        export_checkpoint(trained, tmp_path / "x", shards=0)
    with pytest.raises(RealScaleError, match="style = 'fp16' is invalid"):
        export_checkpoint(trained, tmp_path / "y", style="fp16")
    with pytest.raises(RealScaleError, match="select names tensors this config does not have"):
        load_checkpoint(exported, select=["layers.99.attn.wq_a.weight"])
    assert not (tmp_path / "x").exists() and not (tmp_path / "y").exists()

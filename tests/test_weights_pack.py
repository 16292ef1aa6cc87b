"""lab/browser/weights_pack.py and weights_unpack.js: the shipped target and DSpark weights packed for one page and
back, bit for bit. Every tensor of target.safetensors and dspark.safetensors comes back from node with the same
float64 bits, except the routed experts, which come back as dspark_mini.quant.fp4_qdq of the master (flagged qdq:
"fp4"), bit for bit; those are exactly the weights the lab forward reads only through that QDQ (checked on the built
model and on every MoE layer's output). The page stays inside its size budget, a real chromium decodes the payload
from a file:// page to the same bits, and bad input is refused with the field named."""

from __future__ import annotations

import hashlib
import json
import re
import shutil
import subprocess
import zlib
from pathlib import Path

import numpy as np
import pytest
import torch
from safetensors.numpy import load_file

from dspark_mini import build_model, get_config
from dspark_mini.checkpoint import load_model
from dspark_mini.engram import Engram
from dspark_mini.moe import Expert, MoE
from dspark_mini.packed import PackError
from dspark_mini.quant import fp4_qdq, fp8_qdq
from lab.browser import weights_pack as wp

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "lab" / "browser" / "weights_unpack.js"
WEIGHTS = REPO / "lab" / "weights"
NODE = shutil.which("node")
needs_node = pytest.mark.skipif(NODE is None, reason="node is not installed: cannot run lab/browser/weights_unpack.js")

# node harness.js SCRIPT JOB OUT: JOB = {payload_file, as: "text" | "latin1" | "bytes", manifest_file}; the payload is
# the element's text written as UTF-8 ("text": what a page's element gives), the windows-1252 file read by node's
# TextDecoder (which reads it as latin-1), or the zlib stream itself. OUT: every tensor's float64 bits in manifest
# order, and {ms, error, page_global} on stdout.
HARNESS = r"""
const fs = require("fs");
const vm = require("vm");
const [, , script, jobPath, outPath] = process.argv;
const W = require(script);
const job = JSON.parse(fs.readFileSync(jobPath, "utf8"));
const manifest = JSON.parse(fs.readFileSync(job.manifest_file, "utf8"));
const bytes = fs.readFileSync(job.payload_file);
const payload = job.as === "text" ? bytes.toString("utf8")
  : job.as === "latin1" ? new TextDecoder("windows-1252").decode(bytes) : new Uint8Array(bytes);
const page = { DecompressionStream, Blob, Response };  // a page's globals: no `module`
vm.runInNewContext(fs.readFileSync(script, "utf8"), page);
(async () => {
  const t0 = performance.now();
  let out;
  try {
    out = await W.unpack(payload, manifest);
  } catch (e) {
    console.log(JSON.stringify({ error: String(e.message || e) }));
    return;
  }
  const ms = performance.now() - t0;
  const fd = fs.openSync(outPath, "w");
  const flags = {};
  for (const e of manifest.tensors) {
    const t = out[e.name];
    if (JSON.stringify(t.shape) !== JSON.stringify(e.shape)) throw new Error(`shape of ${e.name}`);
    fs.writeSync(fd, new Uint8Array(t.data.buffer, t.data.byteOffset, t.data.byteLength));
    if (t.qdq) flags[e.name] = t.qdq;
  }
  fs.closeSync(fd);
  console.log(JSON.stringify({ ms, flags, page_global: typeof page.DSparkWeights.unpack === "function" }));
})();
"""


def run_node(tmp: Path, packed: wp.Packed, mode: str = "text", manifest: dict | None = None) -> tuple[dict, Path]:
    """Decode `packed` in node; → (its report, the file of float64 bits)."""
    harness, job, out = tmp / "harness.js", tmp / "job.json", tmp / "bits.bin"
    harness.write_text(HARNESS)
    payload = tmp / f"payload.{mode}"
    if mode == "text":
        payload.write_text(packed.text, encoding="utf-8")
    elif mode == "latin1":
        payload.write_bytes(wp.page_bytes(packed.text))
    else:
        payload.write_bytes(packed.compressed)
    (tmp / "manifest.json").write_text(wp.manifest_json(manifest or packed.manifest))
    job.write_text(json.dumps({"payload_file": str(payload), "as": mode, "manifest_file": str(tmp / "manifest.json")}))
    res = subprocess.run([NODE, str(harness), str(SCRIPT), str(job), str(out)], capture_output=True, text=True)
    assert res.returncode == 0, res.stderr[-3000:]
    return json.loads(res.stdout.strip().splitlines()[-1]), out


def expected(v: np.ndarray, qdq: str | None) -> np.ndarray:
    """What the page must give back: the master itself, or the forward's QDQ of it."""
    if qdq == "fp4":
        return fp4_qdq(torch.from_numpy(v), 32, "e8m0").numpy()
    return fp8_qdq(torch.from_numpy(v), 32).numpy() if qdq == "fp8" else v


def mismatches(masters: dict, manifest: dict, bits: np.ndarray) -> list[str]:
    """Names whose float64 bits (in manifest order) differ from `expected`."""
    bad, at = [], 0
    for e in manifest["tensors"]:
        v = masters[e["name"]]
        want = expected(v, e.get("qdq")).view(np.uint64).ravel()
        if not np.array_equal(bits[at : at + v.size], want):
            bad.append(e["name"])
        at += v.size
    assert at == bits.size, f"{bits.size} values decoded, {at} expected"
    return bad


# ---- the shipped weights ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def masters() -> dict[str, np.ndarray]:
    target, dspark = load_file(WEIGHTS / "target.safetensors"), load_file(WEIGHTS / "dspark.safetensors")
    assert not set(target) & set(dspark)
    return {**target, **dspark}


@pytest.fixture(scope="module")
def packed(masters) -> wp.Packed:
    return wp.pack(masters)


def test_fp4_tensors_are_the_ones_the_forward_reads_only_through_qdq(packed):
    cfg = get_config("lab")
    assert cfg.expert_quant and not cfg.expert_act_quant
    model = build_model(cfg, init=False)
    fp4 = {
        f"{n}.{w}.weight"
        for n, m in model.named_modules()
        if isinstance(m, Expert) and m.fp4
        for w in ("w1", "w2", "w3")
    }
    shared = [n for n, m in model.named_modules() if isinstance(m, Expert) and n.endswith("shared_experts")]
    assert shared and all(not model.get_submodule(n).fp4 for n in shared)  # read as stored
    assert len(fp4) == 3 * (cfg.n_layers * cfg.n_routed_experts + cfg.n_mtp_layers * cfg.dspark_n_routed_experts)
    reps = {e["name"]: e["rep"] for e in packed.manifest["tensors"]}
    assert {n for n, r in reps.items() if r == "fp4"} == fp4
    assert all(e.get("qdq") == ("fp4" if e["rep"] == "fp4" else None) for e in packed.manifest["tensors"])
    assert not wp.reads_through_fp4("layers.0.ffn.experts.0.w1.weight", expert_quant=False)


def test_every_moe_layer_gives_the_same_output_from_the_page_tensors(masters, packed):
    """Each MoE (8 backbone, 3 DSpark layers) on the same input: master weights vs the page's (QDQ'd experts)."""
    model = load_model(WEIGHTS / "target.safetensors", WEIGHTS / "dspark.safetensors").eval()
    got = wp.unpack(packed.text, packed.manifest)
    x = torch.randn(3, 7, model.cfg.dim, dtype=torch.float64, generator=torch.Generator().manual_seed(0))
    with torch.no_grad():
        for name, moe in model.named_modules():
            if not isinstance(moe, MoE):
                continue
            before = moe(x)[0]
            own = {k: v for k, v in moe.state_dict().items()}
            page = {k: torch.from_numpy(got[f"{name}.{k}"]["data"]) for k in own}
            assert any(not torch.equal(page[k], own[k]) for k in own), f"{name}: no tensor differs from its master"
            moe.load_state_dict(page)
            assert torch.equal(moe(x)[0], before), name
            moe.load_state_dict(own)


def test_python_twin_gives_back_every_tensor_bit_for_bit(masters, packed):
    got = wp.unpack(packed.text, packed.manifest)
    assert list(got) == list(masters)
    bits = np.concatenate([got[n]["data"].view(np.uint64).ravel() for n in masters])
    assert mismatches(masters, packed.manifest, bits) == []
    assert wp.digest(packed.text) == packed.manifest["raw_sha256"]


@needs_node
def test_node_gives_back_every_tensor_bit_for_bit(masters, packed, tmp_path):
    report, out = run_node(tmp_path, packed)
    assert report.get("error") is None, report
    assert report["page_global"]
    assert set(report["flags"]) == {e["name"] for e in packed.manifest["tensors"] if e["rep"] == "fp4"}
    assert mismatches(masters, packed.manifest, np.fromfile(out, np.uint64)) == []
    print(f"node decode: {report['ms']:.0f} ms")


def test_the_page_stays_within_its_budget(packed):
    block = wp.page_bytes(wp.payload_html(packed))
    manifest = wp.manifest_json(packed.manifest).encode("ascii")
    page = (REPO / "docs" / "explorer.html").read_bytes()  # the Explorer carries this very payload
    assert len(page) <= wp.PAGE_BUDGET
    assert len(page) - len(block) < wp.REST_OF_PAGE, "the Explorer's own code and text fill the page's allowance"
    total = len(block) + len(manifest) + wp.REST_OF_PAGE
    assert total <= wp.PAGE_BUDGET, f"{len(block):,} + {len(manifest):,} + {wp.REST_OF_PAGE:,} = {total:,} bytes"
    # the text costs at most ~1.6 % over the compressed bytes (4 of 256 byte values take two bytes)
    assert len(packed.text) < 1.02 * len(packed.compressed)
    assert not re.search("[\x00\r<]", packed.text)


def test_reps_and_sizes(masters, packed):
    by = {e["name"]: e for e in packed.manifest["tensors"]}
    for name, v in masters.items():
        e = by[name]
        assert e["shape"] == list(v.shape) and e["bytes"] == wp.rep_bytes(e["rep"], v.size)
        exact = np.array_equal(v.astype(np.float32).astype(np.float64).view(np.uint64), v.view(np.uint64))
        if e["rep"] != "fp4":
            assert e["rep"] == ("f32" if exact else "f64"), name
    assert all(by[n]["rep"] == "f64" for n in masters if n.startswith("mtp.") and ".ffn.experts." not in n)


# ---- small tensors: edge values, the text, determinism, bad input ------------------------------------------------
def small() -> dict[str, np.ndarray]:
    g = np.random.default_rng(0)
    f64 = g.standard_normal(77)
    f64[:6] = [np.nan, np.inf, -np.inf, -0.0, 5e-324, np.finfo(np.float64).max]
    f32 = g.standard_normal((3, 5)).astype(np.float32).astype(np.float64)
    f32.flat[:5] = [np.nan, -np.inf, -0.0, 2.0**-149, np.finfo(np.float32).max]
    ex = g.standard_normal((4, 64)) * np.array([1e-30, 1.0, 1e30, 0.0])[:, None]  # tiny, plain, huge, all zero blocks
    ex[1, :32] = np.linspace(-6, 6, 32)  # values on the grid's edges and ties
    return {
        "scalar": np.array(3.25),
        "empty": np.zeros((0, 3)),
        "a.f64": f64,
        "a.f32": f32,
        "layers.0.ffn.experts.1.w2.weight": ex,
        "mtp.layers.0.ffn.shared_experts.w1.weight": g.standard_normal((2, 32)),
        "spare.engram.embed.weight": g.standard_normal((4, 64)) * np.array([1e-9, 1.0, 1e9, 0.0])[:, None],
    }


def test_small_round_trip_in_python_and_node(tmp_path):
    t = small()
    p = wp.pack(t)
    reps = [e["rep"] for e in p.manifest["tensors"]]
    assert reps == ["f32", "f32", "f64", "f32", "fp4", "f64", "f64"]
    got = wp.unpack(p.text, p.manifest)
    bits = np.concatenate([got[n]["data"].view(np.uint64).ravel() for n in t])
    assert mismatches(t, p.manifest, bits) == []
    if NODE:
        for mode in ("text", "latin1", "bytes"):
            report, out = run_node(tmp_path, p, mode)
            assert report.get("error") is None, (mode, report)
            assert mismatches(t, p.manifest, np.fromfile(out, np.uint64)) == [], mode


def test_engram_tables_as_fp8_on_request(masters, tmp_path):
    """engram_fp8: the shipped Engram tables come back as fp8_qdq of the master (node too), and each Engram layer looks
    up the same rows from them as from the master."""
    tables = {n: v for n, v in masters.items() if wp.reads_through_fp8(n)}
    assert len(tables) == len(get_config("lab").engram_layer_ids)
    t = {**tables, **small()}
    p = wp.pack(t, engram_fp8=True)
    assert {e["name"] for e in p.manifest["tensors"] if e.get("qdq") == "fp8"} == set(tables) | {
        "spare.engram.embed.weight"
    }
    got = wp.unpack(p.text, p.manifest)
    assert mismatches(t, p.manifest, np.concatenate([got[n]["data"].view(np.uint64).ravel() for n in t])) == []
    if NODE:
        report, out = run_node(tmp_path, p)
        assert report.get("error") is None, report
        assert mismatches(t, p.manifest, np.fromfile(out, np.uint64)) == []
    model = load_model(WEIGHTS / "target.safetensors").eval()
    engrams = {n: m for n, m in model.named_modules() if isinstance(m, Engram)}
    assert {f"{n}.embed.weight" for n in engrams} == set(tables)
    with torch.no_grad():
        for name, eng in engrams.items():
            ids = torch.randint(
                0, eng.num_embeddings, (2, 5, eng.n_hash_cols), generator=torch.Generator().manual_seed(1)
            )
            before = eng.lookup(ids)
            eng.embed.weight.copy_(torch.from_numpy(got[f"{name}.embed.weight"]["data"]))
            assert torch.equal(eng.lookup(ids), before), name
    assert not wp.reads_through_fp8("layers.1.engram.embed.weight", engram_table_quant=False)
    assert wp.pack(tables).manifest["tensors"][0]["rep"] == "f32"  # not asked: as stored


def test_forced_reps(tmp_path):
    t = small()
    p = wp.pack(t, {"a.f32": "f64", "layers.0.ffn.experts.1.w2.weight": "f64"})
    reps = {e["name"]: e["rep"] for e in p.manifest["tensors"]}
    assert reps["a.f32"] == reps["layers.0.ffn.experts.1.w2.weight"] == "f64"
    got = wp.unpack(p.text, p.manifest)
    assert "qdq" not in got["layers.0.ffn.experts.1.w2.weight"]
    assert np.array_equal(got["layers.0.ffn.experts.1.w2.weight"]["data"], t["layers.0.ffn.experts.1.w2.weight"])
    q = wp.pack({"x": t["mtp.layers.0.ffn.shared_experts.w1.weight"]}, {"x": "fp4"})
    assert q.manifest["tensors"][0]["qdq"] == "fp4"


def test_every_byte_crosses_the_text():
    data = bytes(range(256)) * 3 + b"</script><!--<script>\r\n\r=0=" + bytes([0x3D])
    text = wp.codecs.charmap_decode(wp.escape(data), "strict", wp.WINDOWS_1252)[0]
    assert not re.search("[\x00\r<]", text)
    assert wp.unescape(wp.page_bytes(text)) == data
    assert len(wp.escape(bytes(range(256)))) == 256 + 4


def test_packing_is_deterministic():
    a, b = wp.pack(small()), wp.pack(small())
    assert a.compressed == b.compressed and a.text == b.text and a.manifest == b.manifest
    assert zlib.decompress(a.compressed) == zlib.decompress(b.compressed)
    assert hashlib.sha256(zlib.decompress(a.compressed)).hexdigest() == a.manifest["raw_sha256"]


def test_pages_compare_whatever_zlib_compressed_them():
    """Another zlib may write another stream for the same bytes: `comparable` sees through it, not through a change."""
    p = wp.pack(small())
    other = zlib.compress(zlib.decompress(p.compressed), 1)  # stands for another zlib's stream
    assert other != p.compressed

    def page(text: str, title: str = "w") -> bytes:
        return wp.page_bytes(
            f"<html><head>{wp.CHARSET_META}<title>{title}</title></head>"
            f'<script type="application/octet-stream" id="{wp.ELEMENT_ID}">{text}</script></html>'
        )

    a, b = page(p.text), page(wp.text_of(other))
    assert a != b and wp.comparable(a) == wp.comparable(b)
    assert wp.comparable(page(p.text, "v")) != wp.comparable(a)
    changed = wp.pack({**small(), "scalar": np.array(3.5)})
    assert wp.comparable(wp.page_bytes(wp.payload_html(changed))) != wp.comparable(wp.page_bytes(wp.payload_html(p)))
    with pytest.raises(PackError, match="no weights element with id 'dspark-weights'; allowed exactly one"):
        wp.comparable(b"<html></html>")
    with pytest.raises(PackError, match="more than one weights element"):
        wp.comparable(a + a)


@pytest.mark.parametrize(
    "tensors, reps, message",
    [
        ({"x": np.array([0.1])}, {"x": "f32"}, r"'x': rep 'f32' but 1 of 1 values are not exactly float32"),
        ({"x": np.zeros((2, 33))}, {"x": "fp4"}, r"'x': rep 'fp4' needs a last dim that is a multiple of 32"),
        ({"x": np.full(32, np.nan)}, {"x": "fp4"}, r"x: holds NaN or ±inf"),
        ({"x": np.zeros(3)}, {"x": "bf16"}, r"'x': rep = 'bf16'; allowed one of \('fp4', 'fp8', 'f32', 'f64'\)"),
        ({"x": np.zeros((2, 33))}, {"x": "fp8"}, r"'x': rep 'fp8' needs a last dim that is a multiple of 32"),
        ({"x": np.zeros(3)}, {"y": "f32"}, r"reps names \['y'\] not among the tensors"),
        ({"x": np.zeros(3, np.int64)}, None, r"'x': int64; allowed a float32 or float64"),
        ({"x": torch.zeros(3, dtype=torch.bfloat16)}, None, r"'x': dtype torch.bfloat16; allowed float32 or float64"),
        ({"": np.zeros(3)}, None, r"tensor name '': allowed a non-empty string"),
    ],
)
def test_bad_input_names_the_field(tensors, reps, message):
    with pytest.raises(PackError, match=message):
        wp.pack(tensors, reps)


def test_bad_text_and_page():
    with pytest.raises(PackError, match=r"U\+2192 '→' at character 3 has no windows-1252 byte"):
        wp.page_bytes("abc→")
    with pytest.raises(PackError, match=r"escape at byte 1 is followed by b'9'; allowed 0-3"):
        wp.unescape(b"a=9")
    with pytest.raises(PackError, match=r"byte 0x3c at 1 must have been escaped"):
        wp.unescape(b"a<")
    with pytest.raises(PackError, match=r"element_id = '1x'"):
        wp.payload_html(wp.pack(small()), "1x")


@needs_node
def test_node_refuses_a_damaged_payload(tmp_path):
    p = wp.pack(small())
    broken = wp.Packed(p.compressed[:-9] + bytes(9), p.text, p.manifest)
    assert run_node(tmp_path, broken, "bytes")[0]["error"]
    report, _ = run_node(tmp_path, p, "text", {**p.manifest, "version": 2})
    assert "allowed dspark-lab-weights-pack version 1" in report["error"]
    bad = {**p.manifest, "tensors": [{**p.manifest["tensors"][0], "bytes": 7}]}
    assert "do not agree" in run_node(tmp_path, p, "text", bad)[0]["error"]
    report, _ = run_node(tmp_path, wp.Packed(p.compressed, p.text + "\u2192", p.manifest), "text")
    assert "character U+2192" in report["error"]


def test_windows_1252_safe():
    html = '<p title="→">ℓ é 😀</p><script>a = "→😀"; // ℓ\n</script><style>b{content:"→"}</style>'
    safe = wp.windows_1252_safe(html)
    assert safe == (
        '<p title="&#x2192;">&#x2113; é &#x1F600;</p><script>a = "\\u2192\\uD83D\\uDE00"; // \\u2113\n</script>'
        '<style>b{content:"\\002192"}</style>'
    )
    assert wp.page_bytes(safe)
    with pytest.raises(PackError, match=r"U\+2192 '→' follows a backslash in a script"):
        wp.windows_1252_safe('<script>"\\→"</script>')


# ---- a real browser ----------------------------------------------------------------------------------------
@pytest.mark.browser
def test_chromium_decodes_the_payload_from_a_file_page(masters, packed, tab, tmp_path):
    """A file:// page declared windows-1252 holding the payload: chromium decodes it, and the sha256 of every tensor's
    float64 bits (manifest order) is Python's."""
    want = hashlib.sha256()
    for e in packed.manifest["tensors"]:
        want.update(expected(masters[e["name"]], e.get("qdq")).astype("<f8").tobytes())
    run = """(async () => { try {
      const man = JSON.parse(document.getElementById("manifest").textContent);
      const t0 = performance.now();
      const W = await DSparkWeights.unpack(document.getElementById("dspark-weights").textContent, man);
      const ms = performance.now() - t0;
      const parts = man.tensors.map((e) => new Uint8Array(W[e.name].data.buffer));
      const all = new Uint8Array(parts.reduce((n, p) => n + p.length, 0));
      let at = 0;
      for (const p of parts) { all.set(p, at); at += p.length; }
      const h = new Uint8Array(await crypto.subtle.digest("SHA-256", all));
      window.result = { ms, sha256: Array.from(h, (b) => b.toString(16).padStart(2, "0")).join("") };
    } catch (e) { window.result = { error: String(e) }; } })();"""
    html = (
        f"<!doctype html><html><head>{wp.CHARSET_META}<title>weights</title></head><body>"
        f'<script type="application/json" id="manifest">{wp.manifest_json(packed.manifest)}</script>'
        f"{wp.payload_html(packed)}<script>{SCRIPT.read_text()}</script><script>{run}</script></body></html>"
    )
    page = tmp_path / "weights.html"
    page.write_bytes(wp.page_bytes(html))
    tab.page.goto(page.as_uri())
    tab.page.wait_for_function("window.result !== undefined", timeout=120_000)
    result = tab.page.evaluate("window.result")
    assert result.get("error") is None, result
    assert result["sha256"] == want.hexdigest()
    assert tab.page.evaluate("document.characterSet") == "windows-1252"
    tab.assert_no_errors()
    print(f"chromium decode: {result['ms']:.0f} ms")

"""Hostile files refused early (issue 19, item 3): every case through the CLI in-process, one line, no file bytes.

A config.json whose numbers would take minutes or gigabytes (experts, max_seq_len, Sinkhorn iterations, a
400-digit width) is refused by ModelConfig's bounds or by the size guard (parameters + KV cache) before anything is
built — measured with tracemalloc, not the clock. JSON nested 100,000 deep in a shard header, the index, config.json,
a lab weight file's header or a lab data file is one clear error, never a RecursionError. `inspect --checkpoint`
reports as problems exactly what safetensors refuses on load (overlapping or out-of-file offsets, a gap or trailing
bytes, a header above 100,000,000 bytes). A shard that links outside its folder is never opened, and no message
echoes a file's bytes (the 8-byte length prefix of a non-safetensors file is not printed as a number).
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tracemalloc
from pathlib import Path

import pytest
from safetensors import safe_open
from safetensors.torch import save_file

from dspark_mini import build_model, get_config
from dspark_mini import config as config_mod
from dspark_mini.checkpoint import CheckpointError, load_model, stamp_target
from dspark_mini.config import ConfigError
from dspark_mini.jsonlimits import JSONLimitError, loads, read_json
from dspark_mini.kv_cache import KVCache, cache_bytes
from lab.cli import main
from lab.realscale import export_checkpoint

ROOT = Path(__file__).resolve().parents[1]
WEIGHTS = ROOT / "lab" / "weights"
DEPTH = 100_000
DEEP = "[" * DEPTH + "]" * DEPTH  # 100,000 levels: json.loads alone raises RecursionError
MAX_TRACED = 50 * 2**20  # bytes a refused hostile config may allocate during the call (the guard is before building)
# what an /etc/passwd shard would echo: its first 8 bytes, and those bytes read as a little-endian header length
PASSWD = b"root:x:0:0:root:/root:/bin/bash\ndaemon:x:1:1:daemon:/usr/sbin:/usr/sbin/nologin\n"
PASSWD_LENGTH = f"{struct.unpack('<Q', PASSWD[:8])[0]:,}"


# ---- helpers ---------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def export(tmp_path_factory):
    """A lab model (seed 0) exported in the lab layout, 2 shards: the folder each case copies and damages."""
    return export_checkpoint(build_model(get_config("lab"), seed=0), tmp_path_factory.mktemp("hostile") / "ckpt", 2)


@pytest.fixture
def ckpt(export, tmp_path):
    out = tmp_path / "ckpt"
    shutil.copytree(export, out)
    return out


def shards(folder: Path) -> list[Path]:
    return sorted(folder.glob("model-*-of-*.safetensors"))


def cli(capsys, argv: list[str]) -> tuple[int, str, str]:
    """main(argv) in-process → (exit code, stdout, stderr); never a traceback, and stderr is one line (none on
    success)."""
    capsys.readouterr()
    rc = main(argv)
    out, err = capsys.readouterr()
    assert "Traceback" not in out + err and "RecursionError" not in out + err, err[-2000:]
    assert len(err.strip().splitlines()) == (rc != 0), err
    return rc, out, " ".join(err.split())


def inspect_json(capsys, folder: Path) -> tuple[int, list[str], str]:
    """`inspect --checkpoint folder --json` → (exit code, the report's problems, stderr)."""
    rc, out, err = cli(capsys, ["inspect", "--checkpoint", str(folder), "--json"])
    return rc, (json.loads(out)["problems"] if out.strip().startswith("{") else []), err


def traced_peak(call) -> tuple[object, int]:
    """(call(), the peak bytes Python allocated during it)."""
    tracemalloc.start()
    try:
        result = call()
        return result, tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()


def patch_config(folder: Path, text: str | None = None, **fields) -> None:
    """Rewrite folder/config.json: the lab config's fields changed, or the whole text replaced."""
    path = folder / "config.json"
    if text is None:
        d = json.loads(path.read_text())
        d["dspark_lab"]["config"].update(fields)
        text = json.dumps(d)
    path.write_text(text)


def header_of(shard: Path) -> tuple[dict, bytes]:
    """(the JSON header, the data) of a safetensors file."""
    raw = shard.read_bytes()
    (n,) = struct.unpack("<Q", raw[:8])
    return json.loads(raw[8 : 8 + n]), raw[8 + n :]


def write_shard(shard: Path, header: dict | str, data: bytes) -> None:
    text = header if isinstance(header, str) else json.dumps(header)
    raw = text.encode()
    shard.write_bytes(struct.pack("<Q", len(raw)) + raw + data)


def no_bytes(text: str, *forbidden: str) -> None:
    for f in forbidden:
        assert f not in text, (f, text[:500])


# ---- a hostile config.json: refused by the bounds or the size guard, before anything is built -------------------
@pytest.mark.parametrize(
    "field, value, allowed",
    [
        ("n_routed_experts", 10**5, "≤ 8,192"),
        ("n_routed_experts", 10**7, "≤ 8,192"),
        ("max_seq_len", 2**26, "≤ 16,777,216"),
        ("hc_sinkhorn_iters", 10**9, "≤ 256"),
    ],
)
@pytest.mark.parametrize("command", ["inspect", "generate"])
def test_hostile_config_sizes_are_refused_in_bounded_memory(ckpt, capsys, field, value, allowed, command) -> None:
    patch_config(ckpt, **{field: value})
    argv = ["inspect", "--checkpoint", str(ckpt), "--json"] if command == "inspect" else []
    argv = argv or ["generate", "--checkpoint", str(ckpt), "--max-new-tokens", "2"]
    cli(capsys, argv)  # once for the imports; the second call is the one measured
    (rc, out, err), peak = traced_peak(lambda: cli(capsys, argv))
    assert peak < MAX_TRACED, f"{peak:,} bytes allocated for a config that is refused"
    text = "\n".join(json.loads(out)["problems"]) if command == "inspect" else err
    assert rc == (1 if command == "inspect" else 2), err
    assert f"config field '{field}' = {value}" in text and allowed in text and "config.json" in text, text


def test_max_seq_len_in_bounds_whose_cache_is_over_the_guard_names_it(ckpt, capsys) -> None:
    """2**23 positions pass the bound, but the KV cache of one sequence would take 12 GiB: refused by the size
    guard (parameters + cache) before building, naming max_seq_len."""
    patch_config(ckpt, max_seq_len=2**23)
    argv = ["generate", "--checkpoint", str(ckpt), "--max-new-tokens", "2"]
    cli(capsys, argv)
    (rc, _, err), peak = traced_peak(lambda: cli(capsys, argv))
    assert rc == 2 and peak < MAX_TRACED
    assert "KV cache of one sequence (max_seq_len = 8,388,608)" in err and "allowed at most 8 GiB" in err, err
    assert str(ckpt) in err and "refused before building anything" in err


def test_the_size_guard_counts_the_cache_a_model_allocates() -> None:
    """cache_bytes is exactly what KVCache allocates (rings, positions, compressed KV, index keys)."""
    for cfg in (get_config("lab"), get_config("lab", max_seq_len=1024, window_size=16)):
        cache = KVCache(cfg, 3)
        held = [r.kv for r in cache.windows.values()] + [s.kv for s in cache.sources.values()]
        held += [s.index_k for s in cache.sources.values()]
        pos = {id(r.pos): r.pos for r in cache.windows.values()}.values()  # the two shared position tensors
        assert cache_bytes(cfg, 3) == sum(t.nbytes for t in held) + sum(p.nbytes for p in pos)


def test_a_400_digit_number_is_refused_with_a_short_message(ckpt, capsys) -> None:
    digits = "9" * 400
    for field, text in (("dim", "allowed an integer ≥ 1 and ≤ 131,072"), ("rope_theta", "expected a finite number")):
        d = json.loads((ckpt / "config.json").read_text())
        d["dspark_lab"]["config"][field] = 0
        raw = json.dumps(d).replace(f'"{field}": 0', f'"{field}": {digits}')
        patch_config(ckpt, text=raw)
        for argv in (["generate", "--checkpoint", str(ckpt)], ["inspect", "--checkpoint", str(ckpt), "--json"]):
            rc, out, err = cli(capsys, argv)
            message = err if rc == 2 else json.loads(out)["problems"][0]
            assert f"config field '{field}' = 999999999999…(400 digits)" in message and text in message, message
            assert len(message) < 400 and digits not in out + err
    with pytest.raises(ConfigError) as e:  # the Python API: past Python's own 4,300-digit str limit too
        get_config("lab", dim=10**5000)
    assert e.value.field == "dim" and "(5,001 digits)" in str(e.value) and len(str(e.value)) < 200


def test_flash_and_its_long_context_pass_the_bounds_with_headroom() -> None:
    flash = get_config("flash")
    for ctx in (4096, 1_048_576):
        get_config("flash", max_seq_len=ctx)
    for name, (_, hi) in config_mod.INT_RANGES.items():
        assert hi >= 4 * getattr(flash, name), name  # every bound far above the real model
        with pytest.raises(ConfigError) as e:
            get_config("flash", **{name: hi + 1})
        assert e.value.field == name and f"≤ {hi:,}" in str(e.value)
    for field, value in (("vocab_size", 10**9), ("moe_inter_dim", 10**7)):
        with pytest.raises(ConfigError, match=f"config field '{field}' = {value} is invalid"):
            get_config("lab").replace(**{field: value})


def test_combined_bounds_name_a_field(capsys) -> None:
    with pytest.raises(ConfigError, match="at most 65,536 routed experts over all layers") as e:
        get_config("flash", n_routed_experts=8192)
    assert e.value.field == "n_routed_experts"
    with pytest.raises(ConfigError, match="at most 256 Engram tables") as e:
        get_config("flash", engram_n_heads=64)
    assert e.value.field == "engram_n_heads"


# ---- JSON nested 100,000 deep, in each place the lab reads JSON from a user's file ------------------------------
def deep_index(folder: Path) -> Path:
    path = folder / "model.safetensors.index.json"
    path.write_text('{"weight_map": ' + DEEP + "}")
    return path


def deep_config(folder: Path) -> Path:
    patch_config(folder, text='{"text_config": ' + DEEP + "}")
    return folder / "config.json"


def deep_shard(folder: Path) -> Path:
    shard = shards(folder)[0]
    write_shard(shard, '{"__metadata__": ' + DEEP + "}", b"")
    return shard


@pytest.mark.parametrize("where", [deep_index, deep_config, deep_shard], ids=["index", "config", "shard header"])
def test_deeply_nested_json_in_a_checkpoint_folder_is_one_line(ckpt, capsys, where) -> None:
    path = where(ckpt)
    rc, problems, err = inspect_json(capsys, ckpt)
    message = err if where is deep_index else "\n".join(problems)  # no index: nothing to inspect (exit 2)
    assert rc == (2 if where is deep_index else 1), err
    assert str(path) in message and "nested deeper than 64 levels" in message, message
    rc, _, err = cli(capsys, ["generate", "--checkpoint", str(ckpt), "--max-new-tokens", "2"])
    assert rc == 2 and str(path) in err and "nested deeper than 64 levels" in err, err
    no_bytes(message + err, "[[[[")


def lab_weights_copy(tmp_path: Path) -> Path:
    """The shipped weights, copied without their manifest (so a file may be changed on purpose)."""
    out = tmp_path / "weights"
    shutil.copytree(WEIGHTS, out)
    (out / "manifest.json").unlink()
    return out


def rewrite_metadata(path: Path, **changes: str) -> None:
    """The same tensors, some header metadata strings replaced."""
    with safe_open(str(path), "pt") as f:
        md, tensors = dict(f.metadata()), {k: f.get_tensor(k) for k in f.keys()}
    save_file(tensors, str(path), metadata={**md, **changes})


def test_deeply_nested_json_in_a_lab_weight_file_header(tmp_path, capsys) -> None:
    """The JSON strings inside a lab .safetensors header (config, meta): eval, train draft, load_model."""
    weights = lab_weights_copy(tmp_path)
    rewrite_metadata(weights / "dspark.safetensors", meta='{"notes": ' + DEEP + "}")
    rc, _, err = cli(capsys, ["eval", "--weights-dir", str(weights)])
    assert rc == 2 and "dspark.safetensors" in err and "'meta' JSON" in err and "nested deeper" in err, err
    target = tmp_path / "target.safetensors"
    shutil.copy(WEIGHTS / "target.safetensors", target)
    rewrite_metadata(target, config='{"dim": ' + DEEP + "}")
    argv = ["train", "draft", "--target", str(target), "--out", str(tmp_path / "d.safetensors"), "--steps", "1"]
    rc, _, err = cli(capsys, argv)
    assert rc == 2 and str(target) in err and "'config' JSON" in err and "nested deeper" in err, err
    with pytest.raises(CheckpointError, match="nested deeper than 64 levels"):
        load_model(target)
    assert not (tmp_path / "d.safetensors").exists()


def test_a_400_digit_width_in_a_lab_weight_file(tmp_path, capsys) -> None:
    """A target whose header config says dim = 400 digits, its drafters re-stamped so eval gets to read it."""
    weights = lab_weights_copy(tmp_path)
    target = weights / "target.safetensors"
    with safe_open(str(target), "pt") as f:
        config = f.metadata()["config"]
    rewrite_metadata(target, config=config.replace('"dim": 64', '"dim": ' + "7" * 400))
    sha = hashlib.sha256(target.read_bytes()).hexdigest()
    for drafter in weights.glob("*.safetensors"):
        if drafter != target:
            stamp_target(drafter, sha)
    rc, _, err = cli(capsys, ["eval", "--weights-dir", str(weights)])
    assert rc == 2 and "config field 'dim' = 777777777777…(400 digits)" in err and len(err) < 600, err
    assert str(weights) in err


@pytest.mark.parametrize("option", ["--sps-table", "--streams"])
def test_deeply_nested_lab_data_files(tmp_path, capsys, option) -> None:
    path = tmp_path / "deep.json"
    path.write_text('{"format": ' + DEEP + "}")
    rc, _, err = cli(capsys, ["schedule", option, str(path), "--json"])
    assert rc == 2 and f"{option} = {str(path)!r}" in err and "nested deeper than 64 levels" in err, err


# ---- inspect reports what safetensors refuses; a load fails on the same folders --------------------------------
def overlap(folder: Path) -> str:
    """The second tensor of shard 1 moved 8 bytes back onto the first (the header keeps its length)."""
    shard = shards(folder)[0]
    header, data = header_of(shard)
    names = sorted((n for n in header if n != "__metadata__"), key=lambda n: header[n]["data_offsets"])
    second = header[names[1]]
    second["data_offsets"] = [second["data_offsets"][0] - 8, second["data_offsets"][1] - 8]
    write_shard(shard, json.dumps(header), data)
    return f"tensor '{names[1]}'"


def beyond_the_file(folder: Path) -> str:
    shard = shards(folder)[-1]
    shard.write_bytes(shard.read_bytes()[:-16])
    return "is truncated"


def trailing_bytes(folder: Path) -> str:
    shard = shards(folder)[-1]
    shard.write_bytes(shard.read_bytes() + b"\0" * 8)
    return "8 bytes after its last tensor's data"


def oversized_header(folder: Path) -> str:
    """A length prefix of 100,000,001 (above safetensors' limit, below the 100 MiB the lab once allowed) and a file
    that long — sparse: nothing is written but the prefix."""
    shard = shards(folder)[-1]
    n = 100_000_001
    with open(shard, "wb") as f:
        f.write(struct.pack("<Q", n))
        f.truncate(8 + n + 64)
    return "larger than safetensors' limit of 100,000,000 bytes"


@pytest.mark.parametrize("damage", [overlap, beyond_the_file, trailing_bytes, oversized_header])
def test_inspect_reports_what_safetensors_refuses(ckpt, capsys, damage) -> None:
    rc, problems, _ = inspect_json(capsys, ckpt)
    assert rc == 0 and problems == []  # the export itself: no problems, and it loads
    needle = damage(ckpt)
    rc, problems, err = inspect_json(capsys, ckpt)
    assert rc == 1 and f"{len(problems)} problem(s)" in err, (problems, err)
    assert needle in problems[0] and not any("\n" in p for p in problems), problems
    assert len(problems) == (3 if damage is oversized_header else 1), problems  # + its tensors missing, total_size
    rc, _, err = cli(capsys, ["generate", "--checkpoint", str(ckpt), "--max-new-tokens", "2"])
    assert rc == 2 and str(ckpt) in err, err  # what inspect calls a problem does not load either


def test_an_overlap_names_both_tensors_and_safetensors_rule(ckpt, capsys) -> None:
    name = overlap(ckpt)
    _, problems, _ = inspect_json(capsys, ckpt)
    assert name in problems[0] and "overlaps" in problems[0] and "begin where the one before ends" in problems[0]


# ---- a shard that is not in the folder, or not a safetensors file -----------------------------------------------
def test_a_shard_linked_outside_the_folder_is_never_read(ckpt, tmp_path, capsys) -> None:
    outside = tmp_path / "passwd"
    outside.write_bytes(PASSWD)
    shard = shards(ckpt)[0]
    shard.unlink()
    shard.symlink_to(outside)
    rc, problems, err = inspect_json(capsys, ckpt)
    assert rc == 1 and any(shard.name in p and "outside the checkpoint folder" in p for p in problems), problems
    no_bytes("\n".join(problems) + err, "root:x", PASSWD_LENGTH)
    rc, _, err = cli(capsys, ["generate", "--checkpoint", str(ckpt), "--max-new-tokens", "2"])
    assert rc == 2 and str(shard) in err and "outside the checkpoint folder" in err, err
    no_bytes(err, "root:x", PASSWD_LENGTH)


def test_a_link_inside_the_folder_is_allowed(ckpt, capsys) -> None:
    shard = shards(ckpt)[0]
    shard.rename(ckpt / "real.safetensors")
    shard.symlink_to("real.safetensors")
    rc, problems, _ = inspect_json(capsys, ckpt)
    assert rc == 0 and problems == []


def test_a_text_file_as_a_shard_is_not_read_as_a_header_length(ckpt, capsys) -> None:
    shards(ckpt)[0].write_bytes(PASSWD)
    rc, problems, _ = inspect_json(capsys, ckpt)
    rc2, _, err = cli(capsys, ["generate", "--checkpoint", str(ckpt), "--max-new-tokens", "2"])
    assert rc == 1 and rc2 == 2 and "not a safetensors file" in err and "8-byte length prefix" in err, err
    no_bytes("\n".join(problems) + err, "root:x", PASSWD_LENGTH)


# ---- the bounded parser itself ---------------------------------------------------------------------------------
def test_bounded_json_refuses_without_quoting_the_text(tmp_path) -> None:
    cases = [
        (DEEP, "nested deeper than 64 levels"),
        ('{"a": "x"}' + " " * 2000, "larger than 1,000 bytes"),
        ('[{"a": ' * 40 + "1" + "}]" * 40, "nested deeper than 64 levels"),  # 80 levels, alternating brackets
        ("[" + "7" * 21 + "]", "an integer of 21 digits: allowed at most 20"),
        (b"\xff\xfe{}", "not UTF-8 text"),
        ('{"secret": tru', "not valid JSON"),
    ]
    for text, why in cases:
        with pytest.raises(JSONLimitError, match=why) as e:
            loads(text, 1000 if "larger" in why else 10**6)
        no_bytes(str(e.value), "secret", "7777", "[[[")
    assert loads(json.dumps({"a": "[" * DEPTH, "n": 2**64 - 1}), 10**6) == {"a": "[" * DEPTH, "n": 2**64 - 1}
    assert loads("[" + "1" * 400 + "]", 10**6, max_int_digits=None) == [int("1" * 400)]
    with pytest.raises(JSONLimitError, match="larger than 1,000 bytes"):
        read_json("/dev/zero", 1000)  # reads 1,001 bytes, then stops


# ---- torchrun: every rank reads through the same functions -----------------------------------------------------
def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def launch_two_ranks(args: list[str]) -> list[tuple[int, str, str]]:
    """2 ranks of `python -m lab.realscale.torchrun ARGS` started by hand with torchrun's variables."""
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "DSPARK_TP")}
    env |= {"OMP_NUM_THREADS": "1", "PYTHONPATH": str(ROOT), "MASTER_ADDR": "127.0.0.1"}
    env |= {"MASTER_PORT": str(free_port()), "WORLD_SIZE": "2", "LOCAL_WORLD_SIZE": "2"}
    procs = [
        subprocess.Popen(
            [sys.executable, "-m", "lab.realscale.torchrun", *args],
            cwd=ROOT,
            env=env | {"RANK": str(r), "LOCAL_RANK": str(r)},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for r in range(2)
    ]
    try:
        outputs = [p.communicate(timeout=300) for p in procs]
        return [(p.returncode, out, err) for p, (out, err) in zip(procs, outputs, strict=True)]
    except subprocess.TimeoutExpired:
        for p in procs:
            p.kill()
        pytest.fail("2 ranks hung (no exit in 300 s)")


def test_two_torchrun_ranks_refuse_a_deeply_nested_shard_header(ckpt) -> None:
    shard = deep_shard(ckpt)
    for r, (rc, out, err) in enumerate(launch_two_ranks(["generate", "--checkpoint", str(ckpt)])):
        assert rc == 2 and "Traceback" not in err and "RecursionError" not in err and out == "", err[-2000:]
        assert f"[rank {r}/2]" in err and shard.name in err and "nested deeper than 64 levels" in err, err[-2000:]

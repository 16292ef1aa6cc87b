"""torch.distributed on CPU (gloo): the lab model sharded over 2 and 4 ranks equals one rank (docs/real-scale.md).

Process launches are the cost here (each rank imports torch), so there are five:
  - one `torchrun --nproc-per-node 4 … check --tp 2 --worlds 4,2` on an export of the trained weights (each rank reads
    only its tensors): the 4-rank model and two side-by-side 2-rank copies, against one unsharded rank — greedy
    tokens (plain and speculative) equal, every logit of a prefill / decode / draft / verify within 1e-5, every rank
    bit-identical (what keeps the ranks in lockstep);
  - 3 ranks started by hand (RANK / WORLD_SIZE set, no torchrun agent that would kill the slower ranks): the world
    size does not divide the experts — every rank says so and exits 2 without joining a process group;
  - 2 ranks, one of whose expert tensors points at a missing shard: both ranks fail with the error of rank 1;
  - the same 4-rank check on an *official* export (FP8 dense, MXFP4 experts, FP8 Engram rows) loaded `--packed`: each
    rank builds on `meta` and reads only its slices, packed sharded ≡ packed one rank within 1e-5, fewer bytes read
    per rank than the checkpoint holds, and what each rank holds is exactly `placement.estimate_rank`'s figure;
  - 2 ranks on header-only shards of the real checkpoint: neither fits this machine, both refuse with the estimate
    before allocating anything.
Timeouts are hang guards only. The rest runs in this process (one rank, no process group).
"""

from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from dspark_mini import get_config
from lab.realscale.ranks import Parallel, ShardingError, check_shardable, engram_rows, rank_selector, rank_slice
from lab.runtime.distributed import maybe_distributed, read_env, shard_model
from lab.runtime.parallel import ExpertParallelMoE

ROOT = Path(__file__).resolve().parents[1]
TORCHRUN = Path(sys.executable).with_name("torchrun")
HANG_GUARD_S = 300  # only a guard against a hang: a healthy run takes a small part of it
DIST_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE", "MASTER_ADDR", "MASTER_PORT", "DSPARK_TP")
MAX_NEW = 10
TOL = 1e-5


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def base_env() -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if k not in DIST_VARS}
    env["OMP_NUM_THREADS"] = "1"
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT), env.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    return env


def launch_ranks(n: int, args: list[str]) -> list[tuple[int, str, str]]:
    """n ranks of `python -m lab.runtime.torchrun ARGS` started by hand (torchrun's variables) → (rc, out, err)."""
    port = free_port()
    procs = []
    for r in range(n):
        env = base_env() | {
            "RANK": str(r),
            "LOCAL_RANK": str(r),
            "WORLD_SIZE": str(n),
            "MASTER_ADDR": "127.0.0.1",
            "MASTER_PORT": str(port),
        }
        procs.append(
            subprocess.Popen(
                [sys.executable, "-m", "lab.runtime.torchrun", *args],
                cwd=ROOT,
                env=env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    out = []
    try:
        for p in procs:
            o, e = p.communicate(timeout=HANG_GUARD_S)
            out.append((p.returncode, o, e))
    except subprocess.TimeoutExpired:
        for p in procs:
            p.kill()
        pytest.fail(f"{n} ranks of {args} hung (no exit in {HANG_GUARD_S} s)")
    return out


# ---- the launches ------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def checkpoint(tmp_path_factory):
    """The trained lab model exported in the official layout (3 shard files)."""
    from lab.realscale import export_checkpoint
    from lab.weights import lab_model

    return export_checkpoint(lab_model("trained"), tmp_path_factory.mktemp("dist") / "ckpt", shards=3)


@pytest.fixture(scope="module")
def four_ranks(checkpoint):
    """One torchrun launch of 4 CPU ranks: the 4-rank model (tp 2) and two 2-rank copies side by side (tp 2)."""
    cmd = [
        str(TORCHRUN),
        "--nproc-per-node",
        "4",
        "--master-addr",
        "127.0.0.1",
        "--master-port",
        str(free_port()),
        "-m",
        "lab.runtime.torchrun",
        "check",
        "--checkpoint",
        str(checkpoint),
        "--tp",
        "2",
        "--worlds",
        "4,2",
        "--max-new-tokens",
        str(MAX_NEW),
        "--json",
    ]
    try:
        proc = subprocess.run(cmd, cwd=ROOT, env=base_env(), capture_output=True, text=True, timeout=HANG_GUARD_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"torchrun with 4 ranks hung (no exit in {HANG_GUARD_S} s)")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return proc


@pytest.fixture(scope="module")
def report(four_ranks):
    return json.loads(four_ranks.stdout)  # the whole stdout is rank 0's one JSON document


@pytest.fixture(scope="module")
def one_rank(report):
    """The shipped trained weights decoded in this process: plain and speculative greedy tokens."""
    from dspark_mini.speculative import generate_plain, generate_speculative
    from lab.weights import lab_model

    model = lab_model("trained")
    x = torch.tensor([report["prompt_ids"]])
    return generate_plain(model, x, MAX_NEW).tokens[0], generate_speculative(model, x, MAX_NEW).tokens[0]


def test_two_and_four_ranks_match_one_rank(report, one_rank):
    plain, spec = one_rank
    assert report["backend"] == "gloo" and report["world_size"] == 4 and report["tolerance"] == TOL
    assert report["reference"]["plain"] == plain and report["reference"]["speculative"] == spec
    runs = {r["ranks"]: r for r in report["runs"]}
    assert sorted(runs) == [2, 4]
    assert runs[4]["copies"] == 1 and runs[2]["copies"] == 2 and all(r["tp"] == 2 for r in runs.values())
    for n, r in runs.items():
        assert r["plain"] == plain and r["speculative"] == spec, n  # the same greedy tokens as one rank
        assert r["plain_tokens_equal"] and r["speculative_tokens_equal"] and r["rounds_equal"], n
        diffs = r["max_abs_diff"]
        assert sorted(diffs) == ["confidence", "decode", "draft", "prefill", "rounds", "verify"], n
        assert all(v <= TOL for v in diffs.values()), (n, diffs)
        assert r["ranks_identical"], n  # every rank (and copy) bit-identical: the ranks stay in lockstep
        assert r["ok"], n
    assert report["ok"]
    assert len(plain) == MAX_NEW and plain == spec


def test_each_rank_holds_only_its_share(report):
    full = report["reference"]["bytes"]
    runs = {r["ranks"]: r for r in report["runs"]}
    assert len(runs[4]["bytes_per_rank"]) == len(runs[2]["bytes_per_rank"]) == 4
    assert max(runs[2]["bytes_per_rank"]) < full
    assert max(runs[4]["bytes_per_rank"]) < min(runs[2]["bytes_per_rank"])  # 4-way experts / Engram: less again


def test_rank_zero_prints_the_others_stay_quiet(four_ranks):
    assert four_ranks.stdout.lstrip().startswith("{") and four_ranks.stdout.count('"command": "check"') == 1
    assert "[rank" not in four_ranks.stdout


def test_torchrun_generate_on_two_ranks(monkeypatch, capsys):
    """The user-facing entry, DeepSeek's layout (tp = ranks = 2, the world group): the same tokens as one process and
    the same logits checksum; rank 0 prints one JSON document."""
    from lab.runtime.torchrun import main

    args = ["generate", "--max-new-tokens", "6", "--json"]
    two = torchrun_json(2, args)
    for v in DIST_VARS:
        monkeypatch.delenv(v, raising=False)
    assert main(args) == 0
    one = json.loads(capsys.readouterr().out)
    assert (two["world_size"], two["tp"], two["backend"], one["world_size"]) == (2, 2, "gloo", 1)
    assert two["plain"] == one["plain"] and two["speculative"] == one["speculative"] and two["identical"]
    assert two["ranks_agree"]
    assert two["logits"]["shape"] == one["logits"]["shape"]
    for k in ("sum", "abs_sum"):
        assert two["logits"][k] == pytest.approx(one["logits"][k], rel=1e-9)  # a sum of ~10⁴ logits
    assert len(two["bytes_per_rank"]) == 2 and max(two["bytes_per_rank"]) < one["bytes_per_rank"][0]


def test_world_size_that_does_not_divide_fails_on_every_rank(checkpoint):
    """3 ranks: 8 experts do not split 3 ways. Each rank refuses from config.json alone, before any collective —
    started alone, a rank would otherwise wait for the others (hang guard)."""
    results = launch_ranks(3, ["generate", "--checkpoint", str(checkpoint), "--max-new-tokens", "4"])
    for r, (rc, out, err) in enumerate(results):
        assert rc == 2, (r, err[-2000:])
        assert f"[rank {r}/3]" in err and "cannot shard lab over 3 ranks" in err, err[-2000:]
        assert "n_routed_experts = 8 (routed experts) is not divisible by 3 ranks" in err
        assert "o_groups = 2" in err and "Allowed: ranks dividing 4 (1, 2, 4)" in err
        assert "Traceback" not in err and out == ""


def test_a_rank_that_cannot_load_its_shard_fails_on_every_rank(checkpoint, tmp_path):
    """Rank 1's expert 5 (layer 0) points at a shard file that does not exist; rank 0 never reads it. Both ranks
    exchange their outcome before going on, so both fail naming rank 1 and the file — none waits for the other."""
    bad = tmp_path / "bad"
    bad.mkdir()
    for f in checkpoint.iterdir():  # copies: a shard linked from outside the folder is refused (docs/reliability.md)
        shutil.copy(f, bad / f.name)
    index = json.loads((checkpoint / "model.safetensors.index.json").read_text())
    index["weight_map"]["layers.0.ffn.experts.5.w1.weight"] = "model-00009-of-00009.safetensors"
    (bad / "model.safetensors.index.json").unlink()
    (bad / "model.safetensors.index.json").write_text(json.dumps(index))
    results = launch_ranks(2, ["generate", "--checkpoint", str(bad), "--max-new-tokens", "4"])
    for r, (rc, out, err) in enumerate(results):
        assert rc == 2, (r, err[-2000:])
        assert f"[rank {r}/2]" in err and "rank 1 of 2: RealScaleError" in err and "rank 0 of" not in err, err[-2000:]
        assert "model-00009-of-00009.safetensors" in err and out == ""


def torchrun_check(folder, *extra: str) -> dict:
    """One torchrun launch of 4 CPU ranks: `check --tp 2 --worlds 4,2` on `folder` → rank 0's JSON report."""
    args = ["check", "--checkpoint", str(folder), "--tp", "2", "--worlds", "4,2", "--max-new-tokens", str(MAX_NEW)]
    return torchrun_json(4, [*args, *extra, "--json"])


def torchrun_json(ranks: int, args: list[str]) -> dict:
    """`torchrun --nproc-per-node ranks -m lab.runtime.torchrun args` on CPU: it must exit 0 (a hang guard
    stops it) → rank 0's JSON report."""
    cmd = [str(TORCHRUN), "--nproc-per-node", str(ranks), "--master-addr", "127.0.0.1", "--master-port"]
    try:
        proc = subprocess.run(
            [*cmd, str(free_port()), "-m", "lab.runtime.torchrun", *args],
            cwd=ROOT,
            env=base_env(),
            capture_output=True,
            text=True,
            timeout=HANG_GUARD_S,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"torchrun with {ranks} ranks hung (no exit in {HANG_GUARD_S} s)")
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads(proc.stdout)


@pytest.fixture(scope="module")
def official(tmp_path_factory):
    from lab.realscale import export_checkpoint
    from lab.weights import lab_model

    folder = tmp_path_factory.mktemp("dist") / "official"
    return export_checkpoint(lab_model("trained"), folder, shards=3, style="official")


def test_packed_sharded_equals_packed_one_rank_reading_only_its_share(official):
    from lab.realscale.export import read_config
    from lab.realscale.placement import estimate_rank

    report = torchrun_check(official, "--packed")
    assert report["ok"] and report["packed"] and report["tolerance"] == TOL
    cfg = read_config(official)[0]
    whole = report["checkpoint_bytes"]
    for run in report["runs"]:
        n = run["ranks"]
        assert run["plain_tokens_equal"] and run["speculative_tokens_equal"] and run["ranks_identical"], n
        assert all(v <= TOL for v in run["max_abs_diff"].values()), (n, run["max_abs_diff"])
        assert max(run["read_bytes_per_rank"]) < whole, n  # each rank read its slices only
        for r, held in enumerate(run["bytes_per_rank"]):  # copies of an n-rank model side by side: rank r % n
            par = Parallel(rank=r % n, size=n, tp_rank=r % 2, tp=2)
            est = estimate_rank(cfg, par, packed=True)
            assert held == est.held_bytes, (n, r)  # the estimate is what the rank holds, byte for byte
            assert run["read_bytes_per_rank"][r] == est.stored_bytes, (n, r)  # and what it reads
    four, two = (next(r for r in report["runs"] if r["ranks"] == k) for k in (4, 2))
    assert max(four["read_bytes_per_rank"]) < min(two["read_bytes_per_rank"])
    assert max(two["bytes_per_rank"]) < report["reference"]["bytes"]


def test_a_shard_that_does_not_fit_is_refused_on_every_rank(tmp_path):
    """The real checkpoint's headers (no data) on 2 ranks: each would hold ~700 GiB unpacked to bf16; both ranks
    refuse with the estimate, before any weight is allocated (and before the missing data could be read)."""
    from lab.realscale import write_header_only

    write_header_only(get_config("flash"), tmp_path)
    results = launch_ranks(2, ["generate", "--checkpoint", str(tmp_path), "--dtype", "bfloat16"])
    for r, (rc, out, err) in enumerate(results):
        assert rc == 2, (r, err[-2000:])
        assert f"[rank {r}/2]" in err, err[-2000:]
        for other in (0, 1):  # each rank names both: the estimates (and free memory) differ per rank
            assert f"rank {other} of 2: PlacementError: does not fit: rank {other} of 2 (tp 2) holds" in err
        assert "unpacked to bfloat16" in err and "more ranks" in err and "--packed" in err
        assert "header-only" not in err and "Traceback" not in err and out == ""


# ---- one process -------------------------------------------------------------------------------------------
def test_sizes_are_checked_from_the_config():
    lab, flash = get_config("lab"), get_config("flash")
    assert check_shardable(lab, 2) == 2 and check_shardable(lab, 4, 2) == 2 and check_shardable(lab, 4, 1) == 1
    with pytest.raises(ShardingError, match=r"o_groups = 2 .* tp = 4") as e:
        check_shardable(lab, 4)  # the reference's layout (tp = ranks) on the lab model
    assert "vocab_size" not in str(e.value)  # 8,192 ids split 4 ways: only the attention groups are named
    odd = lab.replace(vocab_size=lab.vocab_size - 2)  # every size that does not divide is named, in one message
    with pytest.raises(ShardingError, match=rf"o_groups = 2 .* tp = 4; vocab_size = {odd.vocab_size} .* tp = 4"):
        check_shardable(odd, 4)
    with pytest.raises(ShardingError, match=r"tp = 3 does not divide the 4 ranks"):
        check_shardable(lab, 4, 3)
    with pytest.raises(ShardingError, match=r"dspark_n_routed_experts = 4 .* 8 ranks"):
        check_shardable(lab, 8, 2)
    with pytest.raises(ShardingError, match="ranks = 0 is invalid"):
        check_shardable(lab, 0)
    # the real model: 8 GPUs as DeepSeek's reference; 16 need tp = 8 (o_groups = 8 caps tensor parallelism)
    assert check_shardable(flash, 8) == 8 and check_shardable(flash, 16, 8) == 8
    with pytest.raises(ShardingError, match="o_groups = 8 .* tp = 16"):
        check_shardable(flash, 16)


def test_engram_rows_use_ceil_division():
    """The real layer-14 table (384,016,682 rows) does not divide by 8: ⌈R/N⌉ rows a rank, the last one fewer."""
    rows = 384_016_682
    parts = [engram_rows(rows, Parallel(rank=r, size=8)) for r in range(8)]
    assert parts[0] == (0, 48_002_086) and parts[-1] == (7 * 48_002_086, rows)
    assert all(a[1] == b[0] for a, b in zip(parts, parts[1:], strict=False))
    assert engram_rows(3, Parallel(rank=3, size=4)) == (3, 3)  # more ranks than rows: an empty shard


def test_a_rank_reads_only_its_experts():
    keep = rank_selector(get_config("lab"), Parallel(rank=1, size=2))
    assert keep("layers.0.ffn.experts.4.w1.weight") and keep("layers.7.ffn.experts.7.w2.weight")
    assert not keep("layers.0.ffn.experts.3.w1.weight")
    assert keep("mtp.layers.0.ffn.experts.2.w3.weight") and not keep("mtp.layers.1.ffn.experts.1.w3.weight")
    for name in ("embed.weight", "head.weight", "layers.0.ffn.gate.weight", "layers.0.ffn.shared_experts.w1.weight"):
        assert keep(name)


@pytest.mark.parametrize("act_fp8", [False, True])
def test_expert_parallel_shares_sum_to_the_moe(act_fp8):
    """Each rank's share of the routed experts (no collective: the shares are added here) plus the shared expert is
    the MoE's output, with and without the FP8 expert inputs (`expert_act_quant`)."""
    from dspark_mini.moe import MoE

    F64 = torch.float64
    moe = MoE(32, 32, 8, 2, 1, 1.5, 1.0, 2.0, True, F64, F64, act_fp8=act_fp8)
    g = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for p in moe.parameters():
            p.copy_(torch.randn(p.shape, generator=g, dtype=F64) * 0.4)
    x = torch.randn(10, 32, generator=g, dtype=F64) * 2
    with torch.no_grad():
        weights, indices, _ = moe.gate(x)
        load = torch.bincount(indices.flatten(), minlength=8)
        shares = [ExpertParallelMoE(moe, Parallel(rank=r, size=2)).local(x, weights, indices, load) for r in (0, 1)]
        y = shares[0] + shares[1] + moe.shared_experts(x)
        torch.testing.assert_close(y, moe(x[None])[0][0], rtol=0, atol=1e-12)


@pytest.mark.parametrize("packed", [False, True])
@pytest.mark.parametrize("size", [2, 4])
def test_shard_model_keeps_exactly_the_rank_slices(official, size, packed):
    """shard_model (plain or packed) and rank_slice (what load_sharded reads, what the estimate counts) agree: every
    tensor of rank `size − 1`'s shard is the cut of the whole tensor (packed: of its dequantized weight)."""
    from dspark_mini.packed import PackedWeight
    from lab.realscale import load_checkpoint

    whole = load_checkpoint(official, packed=packed)
    cfg = whole.cfg
    value = {n: m.weight for n, m in whole.named_modules() if isinstance(m, PackedWeight)}
    value |= {k[: -len(".weight")]: v for k, v in whole.state_dict().items() if k.endswith(".weight")}
    par = Parallel(rank=size - 1, size=size, tp_rank=1, tp=2)  # no collective runs: shapes and values only
    shard = shard_model(load_checkpoint(official, packed=packed), par)
    mods = [(n, m) for n, m in shard.named_modules() if isinstance(m, PackedWeight) or hasattr(m, "weight")]
    checked = 0
    for path, m in mods:
        if path not in value or not isinstance(m.weight, torch.Tensor):
            continue
        full = value[path]
        cut = rank_slice(cfg, par, f"{path}.weight", tuple(full.shape))
        want = full if cut is None else (full[cut[1] : cut[2]] if cut[0] == 0 else full[:, cut[1] : cut[2]])
        assert torch.equal(m.weight, want), path
        checked += 1
    assert checked > 150 and isinstance(shard.layers[0].attn.wo_b, PackedWeight) == packed


def test_torchrun_environment_is_checked():
    assert read_env({}) == read_env({"WORLD_SIZE": "1"})
    assert read_env({"RANK": "1", "WORLD_SIZE": "2", "MASTER_ADDR": "h", "MASTER_PORT": "29500"}).rank == 1
    with pytest.raises(ShardingError, match="RANK = 2 is invalid: allowed 0..1"):
        read_env({"RANK": "2", "WORLD_SIZE": "2", "MASTER_ADDR": "h", "MASTER_PORT": "1"})
    with pytest.raises(ShardingError, match="WORLD_SIZE = 'two' is invalid"):
        read_env({"WORLD_SIZE": "two"})
    with pytest.raises(ShardingError, match="MASTER_ADDR, MASTER_PORT is not set"):
        read_env({"RANK": "0", "WORLD_SIZE": "2"})


def test_one_process_runs_as_one_rank(monkeypatch, capsys, lab_model):
    from lab.runtime.torchrun import main

    for v in DIST_VARS:
        monkeypatch.delenv(v, raising=False)
    assert maybe_distributed(lab_model) is lab_model  # no torchrun: the model as it is
    assert main(["generate", "--max-new-tokens", "4", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["world_size"] == 1 and out["tp"] == 1 and out["backend"] is None
    assert len(out["plain"]["tokens"]) == 4 and out["identical"] and out["ranks_agree"]
    assert out["logits"]["shape"] == [1, len(out["prompt_ids"]) + 4, get_config("lab").vocab_size]
    assert main(["generate", "--device", "tpu"]) == 2
    assert "device = 'tpu' is invalid" in capsys.readouterr().err

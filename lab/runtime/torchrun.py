"""`torchrun … -m lab.runtime.torchrun {generate,check}`: the lab model over N ranks (see `distributed.py`).

  torchrun --nproc-per-node 2 -m lab.runtime.torchrun generate --max-new-tokens 16 --json
      every rank loads its shard (the trained lab weights, or only its tensors of `--checkpoint DIR`), runs plain
      and speculative greedy decoding in lockstep; rank 0 prints tokens and a logits checksum (JSON with --json)
  torchrun --nproc-per-node 4 -m lab.runtime.torchrun check --tp 2 --worlds 4,2 --json
      (add --checkpoint DIR --packed for an official export kept packed; --dtype float32|bfloat16 builds in it)
      the sharded model against one unsharded rank: greedy tokens (plain and speculative) and every logit of a
      prefill, the decode steps, a DSpark draft and a verify, max |Δ| ≤ --tolerance; exit code 1 if not
  Multi-node (2 nodes × 8 GPUs = 16 ranks), on node k ∈ {0, 1}, HOST0 = node 0's address:
      torchrun --nnodes 2 --nproc-per-node 8 --node-rank k --master-addr HOST0 --master-port 29500 \\
          -m lab.runtime.torchrun generate --checkpoint DIR --packed --tp 8 --device cuda --dtype bfloat16 --json
      experts 16-way (384 → 24 a rank), attention and vocab 8-way inside each node (o_groups = 8 caps tp at 8),
      Engram rows 16-way. The lab model itself fits at most 4 ranks (8 routed / 4 draft experts, o_groups 2).
Without torchrun it runs as one rank (no process group). Rank 0 prints; the others write errors only (stderr).
Exit codes: 0 fine, 1 a check failed / a collective failed, 2 bad input (on every rank), 130 interrupted.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from typing import Any

import torch
import torch.distributed as dist

from dspark_mini.device import check_device, check_dtype

from ..options import add_verify_len
from ..realscale.ranks import Parallel, ShardingError, check_shardable
from ..text import DEFAULT_PROMPT, check_prompt
from .distributed import (
    DEFAULT_TIMEOUT_S,
    agree,
    finish_distributed,
    held_bytes,
    init_distributed,
    load_sharded,
    make_parallel,
    quiet_other_ranks,
    read_env,
    shard_model,
)

TOLERANCE = 1e-5


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="torchrun --nproc-per-node N -m lab.runtime.torchrun",
        description="The lab model sharded over torchrun's ranks: experts (EP), attention groups and vocab (TP), "
        "Engram rows. Rank 0 prints.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=__doc__,
    )
    sub = p.add_subparsers(dest="command", required=True)
    g = sub.add_parser("generate", help="plain + speculative greedy decoding on the sharded model")
    c = sub.add_parser("check", help="the sharded model against one unsharded rank (tokens, logits)")
    for q in (g, c):
        q.add_argument(
            "--checkpoint",
            default=None,
            help="a folder in the official layout (`dspark-lab checkpoint "
            "export`): each rank reads only its tensors. Default: the trained lab weights",
        )
        q.add_argument(
            "--tp",
            type=int,
            default=None,
            help="tensor-parallel size for attention and the vocab: a divisor "
            "of the ranks (default: all ranks, as DeepSeek's reference; the lab model needs ≤ 2)",
        )
        q.add_argument(
            "--prompt", default=None, help="text to continue (the checkpoint's tokenizer.json, else the lab's)"
        )
        q.add_argument("--max-new-tokens", type=int, default=16, help="tokens to generate (default 16)")
        add_verify_len(q, "The speculative rounds draft the whole trained block and verify its first ℓ")
        q.add_argument("--device", default="cpu", help="cpu (gloo) or cuda (nccl, one GPU per rank: LOCAL_RANK)")
        q.add_argument(
            "--dtype",
            default=None,
            help="compute dtype: float64, float32 or bfloat16 (default the checkpoint's config: float64 for the lab "
            "model); mHC, router, sinks and head stay fp32",
        )
        q.add_argument(
            "--packed",
            action="store_true",
            help="(--checkpoint) keep the weights the checkpoint stores packed (FP8 / FP4 codes + E8M0 scales) "
            "packed, dequantized at use; each rank cuts its share on the scale blocks",
        )
        q.add_argument(
            "--timeout",
            type=float,
            default=DEFAULT_TIMEOUT_S,
            help=f"seconds a collective may wait before it fails (default {DEFAULT_TIMEOUT_S:g})",
        )
        q.add_argument("--threads", type=int, default=1, help="CPU threads per rank (default 1: the model is tiny)")
        q.add_argument("--json", action="store_true", help="print the result as JSON (rank 0)")
    c.add_argument(
        "--worlds",
        default=None,
        help="comma-separated shard sizes to check, each a divisor of the world "
        "(default: the world); a smaller size runs world/size copies side by side",
    )
    c.add_argument("--tolerance", type=float, default=TOLERANCE, help=f"max |Δ| allowed (default {TOLERANCE:g})")
    return p


# ---- the model and what runs on it ---------------------------------------------------------------------------
def source_config(args: argparse.Namespace):
    """The config the ranks will shard (read before any collective: config.json only, or the lab preset)."""
    if args.checkpoint is not None:
        from ..realscale.export import read_config

        return read_config(args.checkpoint)[0]
    from dspark_mini import get_config

    return get_config("lab")


def full_model(args: argparse.Namespace, device: torch.device):
    """The whole model on this rank (the one-rank reference)."""
    if args.checkpoint is not None:
        from ..realscale.export import load_checkpoint

        return load_checkpoint(
            args.checkpoint, packed=args.packed, device=device, dtype=args.dtype, tokenizer_required=True
        )
    from lab.weights import lab_model

    return lab_model("trained", device=device, dtype=args.dtype)


def sharded_model(args: argparse.Namespace, par: Parallel, device: torch.device):
    """This rank's shard: only its tensors read from --checkpoint, or the trained lab model sharded."""
    if args.checkpoint is not None:
        return load_sharded(args.checkpoint, par, device, args.packed, args.dtype, tokenizer_required=True)
    from lab.weights import lab_model

    return agree(par, lambda: shard_model(lab_model("trained", dtype=args.dtype), par).to(device))


def read_bytes(model) -> int | None:
    """Bytes of tensor data this rank read from --checkpoint (`load_sharded`), None when not read from one."""
    return getattr(model, "read_bytes", None)


def checkpoint_bytes(args: argparse.Namespace) -> int | None:
    """The total_size of --checkpoint's index: every tensor's bytes."""
    if args.checkpoint is None:
        return None
    from ..realscale.shards import read_index

    return int(read_index(args.checkpoint)[1].get("total_size", 0))


def prompt_ids(args: argparse.Namespace, cfg) -> list[int]:
    """The prompt's ids, through the checkpoint's tokenizer (`export.folder_tokenizer`, required: as `generate
    --checkpoint` on one rank), else the lab tokenizer."""
    from dspark_mini import get_tokenizer

    from ..realscale.export import folder_tokenizer, read_config

    folder = getattr(args, "checkpoint", None)  # None: no --checkpoint (a namespace built without one, too)
    if folder is not None:
        tok = folder_tokenizer(folder, cfg, read_config(folder)[2], required=True)
    else:
        tok = get_tokenizer(cfg)
        if tok is None:
            raise ValueError(f"a vocabulary of {cfg.vocab_size} ids is not the lab tokenizer's: no --prompt text")
    return check_prompt(DEFAULT_PROMPT if args.prompt is None else args.prompt, tok.encode, cfg, "--prompt")[1]


def decode(model, ids: list[int], args: argparse.Namespace) -> dict[str, Any]:
    """Plain and speculative greedy decoding (the same calls as one rank: dspark_mini.speculative)."""
    from dspark_mini.speculative import generate_plain, generate_speculative

    x = torch.tensor([ids], dtype=torch.long, device=model.device)
    plain = generate_plain(model, x, args.max_new_tokens)
    spec = generate_speculative(model, x, args.max_new_tokens, args.verify_len)
    rounds = spec.rows(0)
    return {
        "plain": plain.tokens[0],
        "speculative": spec.tokens[0],
        "rounds": [
            {
                "draft": r.draft,
                "committed": r.committed,
                "n_accepted": r.n_accepted,
                "draft_probs": r.draft_probs,
                "confidence": r.confidence,
                "target_probs": r.target_probs,
            }
            for r in rounds
        ],
    }


@torch.inference_mode()
def probe(model, ids: list[int], tokens: list[int]) -> dict[str, torch.Tensor]:
    """Every logit a decode sees, on a fixed path: the prefill of the prompt [1, S, V], the decode steps over
    `tokens` [1, n − 1, V], a DSpark draft after them (logits [1, k, V], confidence [1, k]) and the verify forward
    of [anchor, drafts] [1, k + 1, V] (not committed)."""
    from dspark_mini.model import draft

    dev = model.device
    cache = model.new_cache(1)
    out = {"prefill": model(torch.tensor([ids], device=dev), cache=cache).logits}
    steps = [model(torch.tensor([[t]], device=dev), cache=cache).logits for t in tokens[:-1]]
    out["decode"] = torch.cat(steps, dim=1) if steps else out["prefill"][:, :0]  # [1, n − 1, V]
    anchor = torch.tensor([tokens[-1]], device=dev)
    d = draft(model, anchor, cache)
    out["draft"], out["confidence"] = d.logits, d.confidence
    out["verify"] = model(torch.cat([anchor[:, None], d.tokens], dim=1), cache=cache, commit=False).logits
    return {k: v.detach().to("cpu", torch.float64) for k, v in out.items()}


def checksum(t: torch.Tensor) -> dict[str, Any]:
    t = t.double()
    return {"shape": list(t.shape), "sum": float(t.sum()), "abs_sum": float(t.abs().sum())}


def _gather(obj: Any) -> list[Any]:
    """obj of every rank of the world, in rank order, on every rank (one process: [obj])."""
    if not (dist.is_available() and dist.is_initialized()):
        return [obj]
    out: list[Any] = [None] * dist.get_world_size()
    dist.all_gather_object(out, obj)
    return out


def _gather_to_0(obj: Any) -> list[Any] | None:
    """obj of every rank of the world, in rank order, on rank 0 (None on the others)."""
    if not (dist.is_available() and dist.is_initialized()):
        return [obj]
    rank0 = dist.get_rank() == 0
    out: list[Any] | None = [None] * dist.get_world_size() if rank0 else None
    dist.gather_object(obj, out, dst=0)
    return out


# ---- generate -------------------------------------------------------------------------------------------------
def run_generate(args: argparse.Namespace, cfg, info, tp: int) -> tuple[dict[str, Any], int]:
    par = make_parallel(info.world_size, tp)
    model = sharded_model(args, par, info.device)
    ids = prompt_ids(args, cfg)
    res = decode(model, ids, args)
    logits = probe_logits(model, ids, res["plain"])
    per_rank = _gather(
        {"bytes": held_bytes(model), "read": read_bytes(model), "plain": res["plain"], "sum": logits["sum"]}
    )
    report = {
        "command": "generate",
        "world_size": info.world_size,
        "tp": par.tp,
        "backend": info.backend,
        "device": str(info.device),
        "source": f"checkpoint {args.checkpoint}" if args.checkpoint else "trained lab weights",
        "prompt_ids": ids,
        "max_new_tokens": args.max_new_tokens,
        "plain": {"tokens": res["plain"]},
        "speculative": {
            "tokens": res["speculative"],
            "rounds": len(res["rounds"]),
            "accepted": [r["n_accepted"] for r in res["rounds"]],
        },
        "identical": res["plain"] == res["speculative"],
        "logits": logits,
        "bytes_per_rank": [r["bytes"] for r in per_rank],
        "read_bytes_per_rank": [r["read"] for r in per_rank],
        "ranks_agree": all(r["plain"] == res["plain"] and r["sum"] == logits["sum"] for r in per_rank),
    }
    return report, 0


@torch.inference_mode()
def probe_logits(model, ids: list[int], tokens: list[int]) -> dict[str, Any]:
    """The checksum of the logits of one forward over prompt + generated tokens [1, S + n, V]."""
    x = torch.tensor([ids + tokens], device=model.device)
    return checksum(model(x).logits)


# ---- check ----------------------------------------------------------------------------------------------------
def _max_diff(a: dict[str, torch.Tensor], b: dict[str, torch.Tensor]) -> dict[str, float]:
    out = {}
    for k in a:
        if a[k].shape != b[k].shape:
            out[k] = float("inf")
        else:
            out[k] = float((a[k] - b[k]).abs().max()) if a[k].numel() else 0.0
    return out


def _rounds_diff(a: list[dict], b: list[dict]) -> tuple[bool, float]:
    """(same drafts / commits / acceptance, max |Δ| of the probabilities and confidences)."""
    same = len(a) == len(b)
    worst = 0.0
    for ra, rb in zip(a, b, strict=False):
        same &= all(ra[k] == rb[k] for k in ("draft", "committed", "n_accepted"))
        for k in ("draft_probs", "confidence", "target_probs"):
            worst = max(worst, max((abs(x - y) for x, y in zip(ra[k], rb[k], strict=True)), default=0.0))
    return same, worst


def parse_worlds(text: str | None, world: int) -> list[int]:
    if text is None:
        return [world]
    try:
        sizes = [int(s) for s in text.split(",") if s.strip()]
    except ValueError:
        raise ValueError(f"--worlds = {text!r} is invalid: allowed comma-separated integers") from None
    bad = [s for s in sizes if s < 1 or world % s]
    if not sizes or bad:
        raise ValueError(f"--worlds = {text!r} is invalid: allowed divisors of the world size {world}")
    return sizes


def run_check(args: argparse.Namespace, cfg, info, sizes: list[int]) -> tuple[dict[str, Any] | None, int]:
    """Each size: every rank builds its shard and decodes; rank 0 collects every rank's tokens, speculative rounds
    and probe logits, then runs the one-rank reference itself and compares. → (report on rank 0 else None, code)"""
    ids = prompt_ids(args, cfg)
    collected = []
    for size in sizes:
        tp = args.tp if args.tp is not None else size
        par = make_parallel(size, tp)  # every rank, every size, the same order
        model = sharded_model(args, par, info.device)
        res = decode(model, ids, args)
        res["probe"] = probe(model, ids, res["plain"])
        res["bytes"] = held_bytes(model)
        res["read"] = read_bytes(model)
        del model
        collected.append((size, tp, _gather_to_0(res)))
    if info.rank != 0:
        return None, 0
    ref_model = full_model(args, info.device)  # one unsharded rank: the reference
    ref = decode(ref_model, ids, args)
    ref_probe = probe(ref_model, ids, ref["plain"])
    ref_bytes = held_bytes(ref_model)
    ref_dtype = ref_model.cfg.dtype
    del ref_model
    runs = []
    for size, tp, everyone in collected:
        diffs: dict[str, float] = {}
        for m in everyone:
            for k, v in {
                **_max_diff(m["probe"], ref_probe),
                "rounds": _rounds_diff(m["rounds"], ref["rounds"])[1],
            }.items():
                diffs[k] = max(diffs.get(k, 0.0), v)
        first = everyone[0]
        run = {
            "ranks": size,
            "tp": tp,
            "copies": info.world_size // size,
            "plain": first["plain"],  # rank 0's tokens (every rank's are compared below)
            "speculative": first["speculative"],
            "plain_tokens_equal": all(m["plain"] == ref["plain"] for m in everyone),
            "speculative_tokens_equal": all(m["speculative"] == ref["speculative"] for m in everyone),
            "rounds_equal": all(_rounds_diff(m["rounds"], ref["rounds"])[0] for m in everyone),
            "max_abs_diff": diffs,
            # every rank of every copy holds bit-identical results (what keeps them in lockstep)
            "ranks_identical": all(
                m["plain"] == first["plain"]
                and m["speculative"] == first["speculative"]
                and m["rounds"] == first["rounds"]
                and all(torch.equal(m["probe"][k], first["probe"][k]) for k in first["probe"])
                for m in everyone
            ),
            "bytes_per_rank": [m["bytes"] for m in everyone],
            "read_bytes_per_rank": [m["read"] for m in everyone],
        }
        run["ok"] = (
            run["plain_tokens_equal"]
            and run["speculative_tokens_equal"]
            and run["rounds_equal"]
            and run["ranks_identical"]
            and all(v <= args.tolerance for v in diffs.values())
        )
        runs.append(run)
    report = {
        "command": "check",
        "world_size": info.world_size,
        "backend": info.backend,
        "device": str(info.device),
        "source": f"checkpoint {args.checkpoint}" if args.checkpoint else "trained lab weights",
        "packed": args.packed,
        "dtype": str(ref_dtype),
        "checkpoint_bytes": checkpoint_bytes(args),
        "tolerance": args.tolerance,
        "prompt_ids": ids,
        "reference": {"plain": ref["plain"], "speculative": ref["speculative"], "bytes": ref_bytes},
        "runs": runs,
        "ok": all(r["ok"] for r in runs),
    }
    return report, 0 if report["ok"] else 1


# ---- the entry -------------------------------------------------------------------------------------------------
def render(report: dict[str, Any]) -> str:
    if report["command"] == "generate":
        lines = [
            f"{report['world_size']} rank(s), tp {report['tp']}, {report['backend'] or 'no process group'} "
            f"on {report['device']} — {report['source']}",
            f"plain        {report['plain']['tokens']}",
            f"speculative  {report['speculative']['tokens']}  ({report['speculative']['rounds']} rounds)",
            f"identical    {report['identical']}   ranks agree {report['ranks_agree']}",
            f"logits       sum {report['logits']['sum']:.10g}  |sum| {report['logits']['abs_sum']:.10g}",
            f"bytes/rank   {report['bytes_per_rank']}",
        ]
        return "\n".join(lines)
    lines = [f"check over {report['world_size']} rank(s) vs one unsharded rank, tolerance {report['tolerance']:g}"]
    for r in report["runs"]:
        worst = max(r["max_abs_diff"].values()) if r["max_abs_diff"] else float("nan")
        lines.append(
            f"  {r['ranks']} rank(s) × {r['copies']}, tp {r['tp']}: tokens plain {r['plain_tokens_equal']} "
            f"speculative {r['speculative_tokens_equal']}, max |Δ| {worst:.3g}, ranks identical "
            f"{r['ranks_identical']} → {'ok' if r['ok'] else 'FAILED'}"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    try:
        env = read_env()
    except ShardingError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    quiet_other_ranks(env.rank)
    tag = f"[{env.label}]"
    try:
        kind = check_device(args.device, "device").type
        check_dtype(args.dtype)
        if args.packed and args.checkpoint is None:
            raise ValueError("--packed needs --checkpoint: the shipped lab weights are not stored packed")
        if args.max_new_tokens < 1:
            raise ValueError(f"--max-new-tokens = {args.max_new_tokens} is invalid: allowed ≥ 1")
        if kind == "cpu":
            if args.threads < 1:
                raise ValueError(f"--threads = {args.threads} is invalid: allowed ≥ 1")
            torch.set_num_threads(args.threads)
        cfg = source_config(args)
        # every size checked from the config alone, on every rank, before any process group exists
        if args.command == "check":
            sizes = parse_worlds(args.worlds, env.world_size)
            for s in sizes:
                check_shardable(cfg, s, args.tp)
        tp = check_shardable(cfg, env.world_size, args.tp) if args.command == "generate" else None
        info = init_distributed(kind, args.timeout)
        report, code = (
            run_generate(args, cfg, info, tp) if args.command == "generate" else run_check(args, cfg, info, sizes)
        )
        if report is not None:  # rank 0 (the others' stdout is quiet anyway)
            print(json.dumps(report, indent=2) if args.json else render(report))
            sys.stdout.flush()
        finish_distributed(barrier=True)  # leave together (a no-op without a process group)
        return code
    except KeyboardInterrupt:
        print(f"{tag} interrupted", file=sys.stderr)
        return 130
    except (ValueError, OSError) as e:  # ShardingError, a checkpoint's RealScaleError, a missing file
        print(f"error: {tag} {e}", file=sys.stderr)
        return 2
    except RuntimeError as e:  # typically a collective that failed or timed out (another rank died)
        print(f"error: {tag} {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    finally:
        finish_distributed()


if __name__ == "__main__":
    code = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # The outcome is decided and printed, and the process group is gone. Leave without the interpreter's teardown:
    # gloo's background threads (sub-groups of `check`) can abort in C++ static destructors at exit ("terminate
    # called without an active exception", SIGABRT), which would turn a finished, correct run into a failure.
    os._exit(code)

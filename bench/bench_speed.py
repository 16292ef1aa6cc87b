"""Speed of the lab model beside a plain transformer of the same size (a benchmark, not a test).

  python bench/bench_speed.py [--reps 200] [--cache-len 32] [--mode inference|no_grad] [--sections decode]
                              [--profile] [--json]

Sections (each one function in SECTIONS returning a dict, printed by its pair; add new ones there):
  decode   one greedy decode step, batch 1, from a cache of `--cache-len` tokens: the trained lab target
           (`lab.weights.lab_model("trained")`, float64, static weights prepared) vs
           `plain_transformer.plain_like(model)` (same width, depth, vocab, dtype and active parameters).
           Wall time p50/p95 of each (interleaved step by step, one torch thread, the cache copied before each
           step and not timed, under `--mode`: torch.inference_mode by default, `no_grad` as
           `generate_plain` runs today), their ratio, and the aten ops one step dispatches — deterministic,
           counted with a TorchDispatchMode at the dispatcher in the timed mode (views included; a composite op
           such as rms_norm or matmul counts once under inference_mode, as what it decomposes into under
           no_grad — the JSON gives both counts), the lab's split by the `dspark_mini` file that called them.
           `--profile` adds torch.profiler's top ops by self time for the lab step.
Timings depend on the machine and its load: compare ratios measured in one run, and quote the conditions.
"""

from __future__ import annotations

import argparse
import collections
import copy
import json
import os
import sys
import time
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode

sys.path.insert(0, str(Path(__file__).resolve().parent))
from plain_transformer import lab_active_params, plain_like  # noqa: E402

from lab.profiling import cpu_model, percentiles  # noqa: E402

PKG = Path(__file__).resolve().parent.parent / "dspark_mini"


class OpCounter(TorchDispatchMode):
    """Counts every aten op dispatched, by op name and by the innermost `dspark_mini/*.py` frame that called it."""

    def __init__(self):
        super().__init__()
        self.ops: collections.Counter = collections.Counter()
        self.files: collections.Counter = collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops[str(func.overloadpacket.__name__)] += 1
        f = sys._getframe(1)
        where = "other"
        while f is not None:
            p = Path(f.f_code.co_filename)
            if p.parent == PKG:
                where = p.name
                break
            f = f.f_back
        self.files[where] += 1
        return func(*args, **(kwargs or {}))


def grad_mode(args):
    """The autograd mode the timed steps run in: `inference` (torch.inference_mode) or `no_grad`."""
    return torch.inference_mode() if args.mode == "inference" else torch.no_grad()


def count_ops(step, cache, mode: str) -> OpCounter:
    """The aten ops of one `step(cache)` under `mode` (`inference` or `no_grad`; the cache is copied before
    counting starts)."""
    with torch.inference_mode() if mode == "inference" else torch.no_grad(), OpCounter() as c:
        step(cache)
    return c


def conditions(reps: int, cache_len: int) -> dict:
    return {
        "batch": 1,
        "greedy": True,
        "cache_length": cache_len,
        "reps": reps,
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "python": sys.version.split()[0],
        "cpu": cpu_model(),
        "cpus": os.cpu_count(),
        "loadavg_1m": os.getloadavg()[0],
    }


def decode_section(args) -> dict:
    from lab.corpus import DOMAINS
    from lab.evaluation import eval_prompts
    from lab.weights import lab_model

    model = lab_model("trained").eval()
    if hasattr(model, "prepare"):
        model.prepare()
    plain = plain_like(model)
    prompt = eval_prompts(DOMAINS[0], 1, args.cache_len, seed=5)  # [1, cache_len] a held-out corpus prompt
    with torch.no_grad():
        lab_cache = model.new_cache(1)
        tok = model(prompt, cache=lab_cache).logits[:, -1].argmax(-1, keepdim=True)  # [1, 1] the greedy next token
        plain_cache = plain.new_cache(1)
        plain(prompt, plain_cache)

    def lab_step(c):
        return model(tok, cache=c).logits[:, -1].argmax(-1)

    def plain_step(c):
        return plain(tok, c)[:, -1].argmax(-1)

    def copy_plain(c):
        return {"k": c["k"].clone(), "v": c["v"].clone(), "length": c["length"]}

    times = {"lab": [], "plain": []}
    with grad_mode(args):
        for rep in range(args.warmup + args.reps):
            for name, step, cache, cp in (
                ("lab", lab_step, lab_cache, copy.deepcopy),
                ("plain", plain_step, plain_cache, copy_plain),
            ):
                c = cp(cache)
                t = time.perf_counter()
                step(c)
                dt = time.perf_counter() - t
                if rep >= args.warmup:
                    times[name].append(dt * 1e3)
    lab_ops = count_ops(lab_step, copy.deepcopy(lab_cache), args.mode)
    plain_ops = count_ops(plain_step, copy_plain(plain_cache), args.mode)
    other = "no_grad" if args.mode == "inference" else "inference"
    lab_other = count_ops(lab_step, copy.deepcopy(lab_cache), other)
    plain_other = count_ops(plain_step, copy_plain(plain_cache), other)
    lab_ms, plain_ms = percentiles(times["lab"]), percentiles(times["plain"])
    out = {
        "conditions": conditions(args.reps, args.cache_len)
        | {
            "warmup": args.warmup,
            "autograd_mode": args.mode,
            "dtype": model.cfg.dtype,
            "weights": "trained (lab/weights)",
            "active_params": {"lab": lab_active_params(model), "plain": sum(p.numel() for p in plain.parameters())},
            "plain_shape": f"D {model.cfg.dim}, L {len(plain.layers)}, V {model.cfg.vocab_size}, "
            f"heads {plain.n_heads}, MLP {plain.layers[0].w2.in_features}",
        },
        "lab_ms": lab_ms,
        "plain_ms": plain_ms,
        "ratio_p50": lab_ms["p50"] / plain_ms["p50"],
        "ops_per_step": {"lab": sum(lab_ops.ops.values()), "plain": sum(plain_ops.ops.values())},
        f"ops_per_step_{other}": {"lab": sum(lab_other.ops.values()), "plain": sum(plain_other.ops.values())},
        "lab_ops_by_file": dict(lab_ops.files.most_common()),
        "lab_top_ops": dict(lab_ops.ops.most_common(15)),
    }
    if args.profile:
        from torch.profiler import ProfilerActivity, profile

        with grad_mode(args), profile(activities=[ProfilerActivity.CPU]) as prof:
            for _ in range(20):
                lab_step(copy.deepcopy(lab_cache))
        rows = sorted(prof.key_averages(), key=lambda e: -e.self_cpu_time_total)[:20]
        total = sum(e.self_cpu_time_total for e in prof.key_averages())
        out["lab_profile_self_time"] = {e.key: round(e.self_cpu_time_total / total, 4) for e in rows}
    return out


def print_decode(r: dict) -> None:
    c = r["conditions"]
    print("== decode step: lab target vs plain transformer ==")
    print("conditions:", ", ".join(f"{k} {v}" for k, v in c.items()))
    print(f"{'':8s} {'p50 ms':>9s} {'p95 ms':>9s} {'aten ops':>9s}")
    for name in ("lab", "plain"):
        ms = r[f"{name}_ms"]
        print(f"{name:8s} {ms['p50']:9.2f} {ms['p95']:9.2f} {r['ops_per_step'][name]:9d}")
    ops = r["ops_per_step"]
    print(f"ratio lab ÷ plain: {r['ratio_p50']:.2f}× (p50), {ops['lab'] / ops['plain']:.1f}× (ops)")
    other = next(k for k in r if k.startswith("ops_per_step_"))
    print(f"aten ops counted under {other[len('ops_per_step_') :]}: lab {r[other]['lab']}, plain {r[other]['plain']}")
    print("lab ops by file:", ", ".join(f"{k} {v}" for k, v in r["lab_ops_by_file"].items()))
    print("lab top ops:", ", ".join(f"{k} {v}" for k, v in r["lab_top_ops"].items()))
    if "lab_profile_self_time" in r:
        print("lab self time:", ", ".join(f"{k} {v:.1%}" for k, v in r["lab_profile_self_time"].items()))


SECTIONS = {"decode": (decode_section, print_decode)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sections", default=",".join(SECTIONS), help=f"comma-separated, from {list(SECTIONS)}")
    ap.add_argument("--reps", type=int, default=200)
    ap.add_argument("--warmup", type=int, default=10)
    ap.add_argument("--cache-len", type=int, default=32)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument(
        "--mode", choices=("inference", "no_grad"), default="inference", help="autograd mode of the timed steps"
    )
    ap.add_argument("--profile", action="store_true", help="add torch.profiler's top ops (decode section)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    torch.set_num_threads(a.threads)
    names = a.sections.split(",")
    for n in names:
        if n not in SECTIONS:
            raise SystemExit(f"unknown section {n!r}: allowed {', '.join(SECTIONS)}")
    results = {n: SECTIONS[n][0](a) for n in names}
    if a.json:
        print(json.dumps(results, indent=1))
        return
    for n in names:
        SECTIONS[n][1](results[n])


if __name__ == "__main__":
    main()

"""One prepared GPU check of the real widths: build, step 6B (logits, a DSpark round, verify), plain vs
speculative tokens/s, peak memory → one JSON. `--dry-run` checks the same model's shapes and bytes on `meta`
(CPU, no memory), so the script is tested without a GPU.

What is truncated to fit one H200 (≈ 139 GiB): every width, head count, layer role and the 40 + 3 layers are
the real ones; the routed experts are 16 of 384 (draft 8 of 384) and each Engram table has 100,000 rows of
≈ 384 M. That is 33.6 B parameters, ≈ 62.6 GiB in bf16 — the same code as the `lab` model, at real size.
The weights are a seeded random init drawn on the device (no checkpoint is downloaded): the numbers are noise,
the shapes, the memory and the speed are real. Random drafts are rarely accepted, so speculative tokens/s here
measures the cost of a round (τ ≈ 1), not a trained drafter's speed-up.

  bench/gpu_check.sh               # on a machine with a GPU: writes runs/gpu_check.json
  bench/gpu_check.sh --dry-run     # anywhere: shapes and bytes on meta
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dspark_mini import build_model, get_config  # noqa: E402
from dspark_mini.files import write_atomic  # noqa: E402
from dspark_mini.params import count_params  # noqa: E402
from dspark_mini.speculative import generate_plain, generate_speculative  # noqa: E402

TRUNCATED = {"n_routed_experts": 16, "engram_vocab_size": 100_000, "dspark_n_routed_experts": 8}


def config():
    return get_config("flash", **TRUNCATED)


def estimate():
    """What the run will hold on its one device, from the config alone (lab/realscale/placement.py, the estimate
    every loader runs): every weight in bf16 (fp32 where the model keeps it), + the stated margin."""
    from lab.realscale.placement import estimate_rank
    from lab.realscale.ranks import SINGLE

    return estimate_rank(config(), SINGLE, packed=False, style="lab")


def dry_run() -> dict:
    """Build on meta: parameter counts, bytes in bf16, and every tensor's shape against the checkpoint layout."""
    from lab.realscale.layout import lab_tensors

    cfg = config()
    t0 = time.perf_counter()
    model = build_model(cfg, device="meta")
    want = lab_tensors(cfg)  # name → (shape, dtype) from the numbers alone
    state = model.state_dict()
    problems = [f"{n}: missing" for n in want if n not in state]
    problems += [
        f"{n}: shape {tuple(state[n].shape)} ≠ layout {tuple(want[n][0])}"
        for n in want
        if n in state and tuple(state[n].shape) != tuple(want[n][0])
    ]
    params = count_params(model)
    nbytes = sum(p.numel() * p.element_size() for p in model.parameters())
    return {
        "mode": "dry-run (meta)",
        "truncated": TRUNCATED,
        "layers": cfg.n_layers,
        "draft_layers": cfg.n_mtp_layers,
        "params": params,
        "param_bytes": nbytes,
        "param_gib": round(nbytes / 2**30, 2),
        "estimate": estimate().to_json(),
        "tensors_checked": len(want),
        "problems": problems,
        "seconds": round(time.perf_counter() - t0, 2),
    }


def timed(fn) -> tuple[object, float]:
    torch.cuda.synchronize()
    t = time.perf_counter()
    out = fn()
    torch.cuda.synchronize()
    return out, time.perf_counter() - t


def gpu_run(device: str, prompt_len: int, new_tokens: int, block: int) -> dict:
    from lab.realscale.placement import PlacementError, check_fits

    cfg = config()
    free, total = torch.cuda.mem_get_info(device)
    try:  # the bytes it will take, before allocating anything
        need = check_fits(estimate(), device, free).held_bytes
    except PlacementError as e:
        raise SystemExit(f"error: {e}") from None
    torch.cuda.reset_peak_memory_stats(device)
    t = time.perf_counter()
    with torch.device(device):
        from dspark_mini.model import Transformer

        model = Transformer(cfg)
    model = model.to(device)  # buffers made on the host (the Engram compress map) follow the parameters
    model.init_weights(0, on_device=True).eval()
    build_s = time.perf_counter() - t
    g = torch.Generator(device=device).manual_seed(0)
    prompt = torch.randint(0, cfg.vocab_size, (1, prompt_len), generator=g, device=device)
    with torch.inference_mode():
        out, prefill_s = timed(lambda: model(prompt))
        logits = out.logits[0, -1].float()
        plain, plain_s = timed(lambda: generate_plain(model, prompt, new_tokens))
        spec, spec_s = timed(lambda: generate_speculative(model, prompt, new_tokens, verify_len=block))
    rounds = spec.rows(0)
    first = rounds[0]
    return {
        "mode": "gpu",
        "device": torch.cuda.get_device_name(device),
        "truncated": TRUNCATED,
        "dtype": cfg.dtype,
        "param_gib": round(need / 2**30, 2),
        "build_s": round(build_s, 1),
        "prefill": {"tokens": prompt_len, "seconds": round(prefill_s, 3)},
        "logits": {
            "shape": list(out.logits.shape),
            "top5": logits.topk(5).indices.tolist(),
            "finite": bool(torch.isfinite(logits).all()),
        },
        "round": {
            "draft": first.draft,
            "confidence": first.confidence,
            "status": first.status,
            "n_accepted": first.n_accepted,
        },
        "plain": {"tokens": new_tokens, "tokens_per_s": round(new_tokens / plain_s, 2)},
        "speculative": {
            "tokens": new_tokens,
            "tokens_per_s": round(new_tokens / spec_s, 2),
            "mean_accepted_length": sum(r.tau for r in rounds) / len(rounds),
        },
        "greedy_equal": spec.tokens == plain.tokens,
        "peak_memory_gib": round(torch.cuda.max_memory_allocated(device) / 2**30, 2),
        "conditions": {
            "torch": torch.__version__,
            "cuda": torch.version.cuda,
            "python": platform.python_version(),
            "gpu_total_gib": round(total / 2**30, 1),
        },
    }


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--dry-run", action="store_true", help="shapes and bytes on meta (no GPU needed)")
    ap.add_argument("--device", default="cuda", help="a CUDA device (default cuda)")
    ap.add_argument("--prompt-len", type=int, default=64)
    ap.add_argument("--new-tokens", type=int, default=32)
    ap.add_argument(
        "--verify-len",
        "--block",
        dest="verify_len",
        type=int,
        default=5,
        help="verify length ℓ (the draft runs its trained block; --block is the old name)",
    )
    ap.add_argument("--out", default="runs/gpu_check.json")
    args = ap.parse_args(argv)
    if args.dry_run:
        report = dry_run()
    else:
        if not torch.cuda.is_available():
            print(
                "error: --device cuda: no CUDA device here (torch.cuda.is_available() is False); use --dry-run",
                file=sys.stderr,
            )
            return 2
        report = gpu_run(args.device, args.prompt_len, args.new_tokens, args.verify_len)
    write_atomic(args.out, json.dumps(report, indent=1) + "\n")  # the previous report survives a full disk
    print(json.dumps(report, indent=1))
    return 0 if not report.get("problems") else 1


if __name__ == "__main__":
    os.environ.setdefault("PYTHONHASHSEED", "0")
    sys.exit(main())

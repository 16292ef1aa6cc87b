"""The real widths on this CPU: `flash-cpu` (every width of DeepSeek-V4.1-Flash, 4 + 1 layers, 3 experts) decoded
plainly and speculatively, greedy, through the same `compare` that `dspark-lab generate` runs.

Prints one JSON object: tokens/s plain and speculative, whether the greedy tokens agree, the placement estimate
(weights + prepared kernel layouts + margin) beside the peak resident set of this process (ru_maxrss, which the
estimate must match within 15 %), the wall time of each phase, and the run conditions (CPU, threads, load).
The model is the seeded init drawn on the CPU: nothing is downloaded, and its tokens are noise (untrained).

    python bench/flash_cpu.py [--max-new-tokens 8] [--prompt TEXT] [--out runs/flash_cpu.json]
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from dspark_mini import get_config  # noqa: E402
from dspark_mini.files import write_atomic  # noqa: E402
from lab.lesson.generation import compare  # noqa: E402
from lab.realscale.placement import estimate_rank  # noqa: E402
from lab.realscale.ranks import SINGLE  # noqa: E402

PRESET = "flash-cpu"
RSS_TOLERANCE = 0.15  # the estimate and the measured peak agree within this fraction of the peak


def peak_rss() -> int:
    """Peak resident set of this process in bytes (Linux reports ru_maxrss in KiB)."""
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def conditions() -> dict:
    """What the numbers depend on: the machine, the threads torch uses, the load while it ran."""
    return {
        "cpu": platform.processor() or platform.machine(),
        "cores": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "load_average_1_5_15": [round(x, 2) for x in os.getloadavg()],
    }


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--max-new-tokens", type=int, default=8)
    p.add_argument("--prompt", default=None)
    p.add_argument("--out", default=None, help="also write the JSON there")
    args = p.parse_args(argv)
    start = time.perf_counter()
    est = estimate_rank(get_config(PRESET), SINGLE, packed=False, style="lab", prepared=True)
    before = conditions()
    report = compare(args.prompt, PRESET, args.max_new_tokens, temperature=0.0, seed=0)
    j = report.to_json()
    peak = peak_rss()
    out = {
        "preset": PRESET,
        "max_new_tokens": args.max_new_tokens,
        "greedy_identical": j["identical_tokens"],
        "plain_tokens_per_s": j["plain"]["tokens_per_s"],
        "speculative_tokens_per_s": j["speculative"]["tokens_per_s"],
        "speedup": j["speedup"],
        "rounds": j["speculative"]["rounds"],
        "mean_accepted_length": j["speculative"]["mean_accepted_length"],
        "estimate_needed_bytes": est.needed_bytes,
        "estimate": est.to_json(),
        "peak_rss_bytes": peak,
        "estimate_over_peak": est.needed_bytes / peak,
        "estimate_within_15_percent": abs(est.needed_bytes - peak) <= RSS_TOLERANCE * peak,
        "wall_s": round(time.perf_counter() - start, 1),
        "conditions_before": before,
        "conditions_after": conditions(),
    }
    text = json.dumps(out, indent=2)
    print(text)
    if args.out:
        write_atomic(Path(args.out), text + "\n")
    return out


if __name__ == "__main__":
    main()

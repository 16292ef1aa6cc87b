"""Budgets of LAB_SPEC §7, measured (not timed tests): run with `make bench` or `python bench/bench_budgets.py`.

- `dspark-lab walk` (all ten steps, `lab` preset) ≤ 5 s wall including imports;
- `dspark-lab inspect --preset flash` ≤ 10 s and ≤ 2 GB RSS;
- the lab model's prefill and single-token decode step (p50 / p95 / p99).
Every table prints its run conditions.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import resource
import subprocess
import sys
import time

from lab.profiling import cpu_model, percentiles


def run_cli(args: list[str]) -> tuple[float, float]:
    """Wall seconds and peak RSS (GB) of one `python -m lab …` process."""
    t = time.perf_counter()
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    subprocess.run([sys.executable, "-m", "lab", *args], check=True, stdout=subprocess.DEVNULL)
    wall = time.perf_counter() - t
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return wall, max(peak, before) / 1e6


def model_steps(n: int) -> dict[str, dict[str, float]]:
    import torch

    from dspark_mini import build_model, get_config

    cfg = get_config("lab")
    model = build_model(cfg, seed=0)
    ids = torch.randint(0, cfg.vocab_size, (1, 64), generator=torch.Generator().manual_seed(0))
    prefill, decode = [], []
    with torch.no_grad():
        for _ in range(n):
            cache = model.new_cache(1)
            t = time.perf_counter()
            model(ids[:, :48], cache=cache)
            prefill.append(time.perf_counter() - t)
            for i in range(48, 64):
                t = time.perf_counter()
                model(ids[:, i : i + 1], cache=cache)
                decode.append(time.perf_counter() - t)
    return {"prefill_48_tokens_s": percentiles(prefill), "decode_step_s": percentiles(decode)}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--runs", type=int, default=5, help="repetitions of each measurement")
    ap.add_argument(
        "--threads", type=int, default=1, help="torch threads for the in-process model timings (the CLI uses 1)"
    )
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args()
    import torch

    torch.set_num_threads(a.threads)

    conditions = {
        "batch": 1,
        "threads": torch.get_num_threads(),
        "cpus": os.cpu_count(),
        "dtype": "float64 (lab)",
        "device": "cpu",
        "torch": torch.__version__,
        "cpu_model": cpu_model(),
        "python": platform.python_version(),
    }
    walk = [run_cli(["walk"])[0] for _ in range(a.runs)]
    flash = [run_cli(["inspect", "--preset", "flash", "--json"]) for _ in range(max(1, a.runs // 2))]
    report = {
        "conditions": conditions,
        "walk_all_steps_s": percentiles(walk),
        "inspect_flash_s": percentiles([w for w, _ in flash]),
        "inspect_flash_peak_rss_gb": max(m for _, m in flash),
        "budgets": {"walk_s": 5.0, "inspect_flash_s": 10.0, "inspect_flash_rss_gb": 2.0},
        **model_steps(a.runs),
    }
    report["within_budget"] = {
        "walk": report["walk_all_steps_s"]["p95"] <= 5.0,
        "inspect_flash_time": report["inspect_flash_s"]["p95"] <= 10.0,
        "inspect_flash_rss": report["inspect_flash_peak_rss_gb"] <= 2.0,
    }
    if a.json:
        print(json.dumps(report, indent=1))
        return
    from rich.console import Console
    from rich.table import Table

    t = Table(title="dspark-lab budgets (LAB_SPEC §7)")
    for c in ("measure", "p50", "p95", "p99", "n", "budget"):
        t.add_column(c)
    rows = [
        ("walk, all steps (s)", report["walk_all_steps_s"], "≤ 5"),
        ("inspect --preset flash (s)", report["inspect_flash_s"], "≤ 10"),
        ("lab prefill, 48 tokens (s)", report["prefill_48_tokens_s"], ""),
        ("lab decode step (s)", report["decode_step_s"], ""),
    ]
    for name, p, budget in rows:
        t.add_row(name, f"{p['p50']:.3f}", f"{p['p95']:.3f}", f"{p['p99']:.3f}", str(p["n"]), budget)
    Console().print(t)
    Console().print(f"inspect --preset flash peak RSS: {report['inspect_flash_peak_rss_gb']:.2f} GB (≤ 2)")
    Console().print("conditions: " + ", ".join(f"{k}={v}" for k, v in conditions.items()))
    Console().print(f"within budget: {report['within_budget']}")


if __name__ == "__main__":
    main()

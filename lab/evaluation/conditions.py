"""How a measurement is reported: nearest-rank p50 / p95 / p99 and the run conditions beside every number (batch,
cache length, threads, dtype, device, torch version, CPU / GPU model), so a figure can be compared with another.
"""

from __future__ import annotations

import os
import platform
from typing import Any

import torch


def percentiles(xs: list[float]) -> dict[str, float]:
    """Nearest-rank p50 / p95 / p99 (and n) of a list of measurements."""
    if not xs:
        raise ValueError("percentiles of an empty list")
    s = sorted(xs)

    def q(p: float) -> float:
        return s[min(len(s) - 1, max(0, round(p * (len(s) - 1))))]

    return {"p50": q(0.50), "p95": q(0.95), "p99": q(0.99), "n": len(s)}


def cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def run_conditions(model, batch: int, cache_len: int) -> dict[str, Any]:
    dev = next(model.parameters()).device
    return {
        "batch": batch,
        "cache_length": cache_len,
        "threads": torch.get_num_threads(),
        "dtype": model.cfg.dtype,
        "device": str(dev),
        "torch": torch.__version__,
        "cpu": cpu_model(),
        "cpus": os.cpu_count(),
        "gpu": torch.cuda.get_device_name(dev) if dev.type == "cuda" else None,
    }

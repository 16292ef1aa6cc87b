"""What the lab says about `flash-cpu`'s memory, from the run that measured it (docs/flash_cpu.json).

    flash_cpu_peak(lang)  the walk's peak resident set, "N.NN GiB" ("N,NN GiB" in Vietnamese): the one figure for
                          flash-cpu's memory that help and screens give, the same the docs quote through the prose
                          marker `flash_cpu.walk.peak_rss_bytes:gib` (`bench/flash_cpu.py`, then lab.sync.prose)

It reads the JSON itself, without torch, so `--help` stays fast; where the file is not there (an install without
the docs) the text says where the figure is measured instead of giving one.
"""

from __future__ import annotations

import json
from pathlib import Path

from .text import lang_table

FLASH_CPU_JSON = Path(__file__).resolve().parents[1] / "docs" / "flash_cpu.json"
PEAK_KEY = ("walk", "peak_rss_bytes")  # `dspark-lab walk --preset flash-cpu --step 6B`, run by bench/flash_cpu.py
GIB = 2**30
MAX_BYTES = 2**20  # the record is a few KB


def flash_cpu_peak_bytes(path: Path = FLASH_CPU_JSON) -> int | None:
    """The measured peak, in bytes; None where the record cannot be read."""
    try:
        if path.stat().st_size > MAX_BYTES:
            return None
        value = json.loads(path.read_text(encoding="utf-8"))
        for key in PEAK_KEY:
            value = value[key]
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return value if isinstance(value, int) and value > 0 else None


def flash_cpu_peak(lang: str = "en", path: Path = FLASH_CPU_JSON) -> str:
    """The peak as a reader sees it, with its unit, in `lang`'s decimal mark (the prose's `gib` format: 2 decimals)."""
    nbytes = flash_cpu_peak_bytes(path)
    texts = lang_table("messages", "flash_cpu")
    if nbytes is None:
        return texts["peak_unknown"][lang]
    number = f"{nbytes / GIB:.2f}"
    return texts["peak"][lang].format(gib=number.replace(".", ",") if lang == "vi" else number)

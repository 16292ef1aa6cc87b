"""Greedy speculative = plain, measured logit by logit: at the real widths in bfloat16, and at the lab's widths in
bfloat16, float32 and float64 (`lab/evaluation/lossless.py`).

For each prompt, both greedy decodings (`generate_plain`, `generate_speculative`: the calls `dspark-lab generate
--temperature 0` makes) with each token's logits: the first position where the tokens differ, the plain step's top-2
logit gap there, and max |Δlogit| between the one-token step and the verify row at every position up to it.

  --flash-cpu  the `flash-cpu` preset (every real width, seeded init, bfloat16: the peak memory docs/flash_cpu.json
               records, minutes of CPU) on short Vietnamese and English prompts through the lab tokenizer,
               --flash-tokens new tokens each
  --lab N      the `lab` preset's trained weights on N distinct held-out prompts of 12 tokens (math, code, chat),
               --lab-tokens new tokens each, in bfloat16, float32 and float64
  --narrow N   flash-cpu's layers at narrow widths (`NARROW_FLASH`, seeded) on the same kind of prompts, in bfloat16
               and float64: the real model's structure where float64 fits (its real widths need 40 GiB)

Writes one JSON object (stdout, and --out): the run conditions and one record per model and dtype. The numbers in
docs/reliability.md and docs/real-scale.md come from one such run, committed as docs/bf16_lossless.json:

    python bench/bf16_lossless.py --flash-cpu --lab 300 --narrow 300 --out docs/bf16_lossless.json
    python -m lab.sync.prose --write
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402

from dspark_mini import get_config  # noqa: E402
from dspark_mini.files import write_atomic  # noqa: E402
from dspark_mini.presets import text_tokenizer  # noqa: E402
from lab.evaluation.conditions import cpu_model  # noqa: E402
from lab.evaluation.lossless import NARROW_FLASH, lab_prompts, narrow_flash, one_forward_delta, probe, summarize  # noqa: E402
from lab.measured import flash_cpu_peak  # noqa: E402
from lab.runtime.run import run_model  # noqa: E402
from lab.text import DEFAULT_PROMPT, check_prompt  # noqa: E402
from lab.weights import lab_model  # noqa: E402

# short prompts, Vietnamese first (the lab's first language), then English; the default prompt leads
FLASH_PROMPTS = (
    DEFAULT_PROMPT,
    "Hôm nay trời đẹp",
    "Xin chào",
    "Hà Nội là thủ đô của Việt Nam.",
    "Tôi đang học về mô hình ngôn ngữ",
    "Hello, world!",
    "The cat sat on the mat.",
    "def add(a, b):",
)
LAB_DTYPES = ("bfloat16", "float32", "float64")


def conditions() -> dict:
    return {
        "cpu": cpu_model(),
        "cores": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "load_average_1_5_15": [round(x, 2) for x in os.getloadavg()],
    }


def say(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)


def flash_cpu(new_tokens: int) -> dict:
    """The real widths in bfloat16: the model `dspark-lab generate --preset flash-cpu` builds (seed 0, untrained)."""
    cfg = get_config("flash-cpu")
    tok = text_tokenizer(cfg)
    t = time.perf_counter()
    model = run_model(None, 0, preset="flash-cpu")
    say(f"flash-cpu built in {time.perf_counter() - t:.0f} s")
    probes, rows = [], []
    for text in FLASH_PROMPTS:
        text, ids = check_prompt(text, tok.encode, cfg, "--prompt", "en")
        t = time.perf_counter()
        prompt = torch.tensor([ids])
        p = probe(model, prompt, new_tokens)
        # one forward alone: the first new token's logits from a one-token forward and from row 0 of a verify-sized
        # forward over plain's next tokens, on the same cache
        batch = torch.tensor([p.plain[: model.cfg.dspark_block_size + 1]])
        one = one_forward_delta(model, prompt, batch)
        say(f"  {text!r}: first difference {p.first}, {time.perf_counter() - t:.0f} s")
        probes.append(p)
        rows.append(
            {"prompt": text, "prompt_tokens": len(ids), "plain": p.plain, "speculative": p.speculative}
            | p.to_json()
            | {"delta_max": max(p.delta), "one_forward_delta": one}
        )
    dtype = str(model.cfg.torch_dtype).removeprefix("torch.")
    ones = [r["one_forward_delta"] for r in rows]
    return (
        {"preset": "flash-cpu", "weights": "untrained, seed 0"}
        | summarize(probes, dtype)
        | {"one_forward_delta_max": max(ones), "one_forward_delta_min": min(ones), "per_prompt": rows}
    )


def lab(n: int, new_tokens: int) -> dict:
    prompts = lab_prompts(n)
    out = {}
    for dtype in LAB_DTYPES:
        model = lab_model(dtype=dtype)
        t = time.perf_counter()
        out[dtype] = {"preset": "lab", "weights": "trained"} | summarize(
            [probe(model, p, new_tokens) for p in prompts], dtype
        )
        say(f"lab {dtype}: {out[dtype]['divergent_prompts']} of {n} differ, {time.perf_counter() - t:.0f} s")
    return out


def narrow(n: int, new_tokens: int) -> dict:
    prompts = lab_prompts(n)
    out = {}
    for dtype in ("bfloat16", "float64"):
        model = narrow_flash(dtype)
        t = time.perf_counter()
        out[dtype] = {"preset": "flash-cpu", "widths": NARROW_FLASH, "weights": "untrained, seed 0"} | summarize(
            [probe(model, p, new_tokens) for p in prompts], dtype
        )
        say(f"narrow flash {dtype}: {out[dtype]['divergent_prompts']} of {n} differ, {time.perf_counter() - t:.0f} s")
    return out


def main(argv: list[str] | None = None) -> dict:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    widths = f"the real widths in bfloat16 (peak memory {flash_cpu_peak()})"
    p.add_argument("--flash-cpu", action="store_true", help=widths)
    p.add_argument("--flash-tokens", type=int, default=16, help="new tokens per prompt at the real widths (1..64)")
    p.add_argument("--lab", type=int, default=0, metavar="N", help="N held-out prompts on the lab model (0: none)")
    p.add_argument("--lab-tokens", type=int, default=32, help="new tokens per prompt on the lab model (1..64)")
    p.add_argument("--narrow", type=int, default=0, metavar="N", help="N prompts on flash-cpu's layers, narrow")
    p.add_argument("--out", default=None, help="also write the JSON there")
    args = p.parse_args(argv)
    for name, v, top in (("--flash-tokens", args.flash_tokens, 64), ("--lab-tokens", args.lab_tokens, 64)):
        if not 1 <= v <= top:
            raise SystemExit(f"{name} = {v} is invalid: allowed an integer in 1..{top}")
    for name, v in (("--lab", args.lab), ("--narrow", args.narrow)):
        if not 0 <= v <= 3000:
            raise SystemExit(f"{name} = {v} is invalid: allowed an integer in 0..3000")
    torch.set_num_threads(1)  # as the CLI runs
    out: dict = {"conditions_before": conditions()}
    if args.flash_cpu:
        out["flash_cpu"] = flash_cpu(args.flash_tokens)
    if args.lab:
        out["lab"] = lab(args.lab, args.lab_tokens)
    if args.narrow:
        out["narrow_flash"] = narrow(args.narrow, args.lab_tokens)
    out["conditions_after"] = conditions()
    records = [out.get("flash_cpu")] + list(out.get("lab", {}).values()) + list(out.get("narrow_flash", {}).values())
    bad = [r["dtype"] for r in records if r and not (r["all_near_ties"] and r["all_verified"])]
    text = json.dumps(out, indent=2)
    print(text)
    if bad:  # a divergence that is not a near-tie is a bug: it never becomes the docs' numbers
        raise SystemExit(f"a divergence that is not a near-tie, or a token that is not its row's argmax: {bad}")
    if args.out:
        write_atomic(Path(args.out), text + "\n")
    return out


if __name__ == "__main__":
    main()

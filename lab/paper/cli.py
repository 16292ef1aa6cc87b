"""`dspark-lab paper`: its options and checks (the work is run.py, the pages docs.py). Nothing here imports torch,
so `--help` stays fast.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from ..options import add_json, add_lang, add_seed, command
from ..style import print_json

COMMANDS = ("paper",)
DEFAULT_OUT = "runs/paper"
DEFAULT_DOCS = "docs"
MAX_JOBS = 64  # worker processes (one thread each); more than the machine's cores only queues them

EXAMPLES = """\
examples:
  dspark-lab paper                         the full run (≤ 60 min on 2 cores): runs/paper/*.json, PNGs, docs/paper.md
  dspark-lab paper --quick --out runs/quick --docs runs/quick   every figure's code path in about a minute
  dspark-lab paper --docs-only             rewrite docs/paper.md and docs/paper.vi.md from runs/paper/*.json
  make paper                               the same full run"""


def add_parsers(sub: Any) -> None:
    p = command(
        sub,
        "paper",
        "the DSpark paper in miniature: Table 1, Figures 2–8 and Appendix A beside the paper's values",
        "Measure the shipped set the way the DSpark paper measures its drafters and set every number beside the "
        "paper's, with the section it comes from: Table 1 (τ per domain per drafter, T = 1 and greedy), Figure 2 "
        "(conditional acceptance by position), Figure 3 (DSpark with 1, 2, 3 draft layers vs DFlash), Figure 4 "
        "(block length), Figure 5 (static confidence threshold), Figure 6 (STS reliability), Figures 7 and 8 (the "
        "load simulation on the shipped SPS table: per-user vs aggregate tokens/s against MTP-1, verify budget "
        "per request) and Appendix A (the scheduler's counterexample). Figures 3 and 4 train their extra "
        "drafters here, seeded, all on the same target cache and budget. Writes one JSON per item and PNGs into "
        "--out and the pages docs/paper.md and docs/paper.vi.md generated from them.",
        EXAMPLES,
    )
    size = p.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help="tiny budgets: every figure's code path in about a minute")
    size.add_argument(
        "--medium", action="store_true", help="a quarter of the full draft steps, half the prompts (a loaded machine)"
    )
    size.add_argument(
        "--docs-only", action="store_true", help="measure nothing: rewrite the pages from the JSON in --out"
    )
    p.add_argument("--out", default=DEFAULT_OUT, help=f"folder of the items' JSON and PNGs (default {DEFAULT_OUT})")
    p.add_argument("--docs", default=DEFAULT_DOCS, help=f"folder of paper.md and paper.vi.md (default {DEFAULT_DOCS})")
    p.add_argument("--weights-dir", default=None, help="the weights set to measure (default: the shipped lab/weights)")
    p.add_argument("--no-pictures", action="store_true", help="write the JSON and the pages, draw no PNG")
    p.add_argument("--jobs", type=int, default=2, help=f"worker processes, one thread each: 1..{MAX_JOBS} (default 2)")
    add_seed(p, "seed of the extra drafters, their data and every sampled round")
    add_lang(p)
    add_json(p, "print the paths written and the run's seconds as JSON")


def check(args: argparse.Namespace, cfg: Any) -> None:
    from dspark_mini.validate import check_int  # torch: only when a command runs, not for --help

    check_int(args.jobs, "--jobs", 1, MAX_JOBS)
    for opt, value in (("--out", args.out), ("--docs", args.docs)):
        if os.path.exists(value) and not os.path.isdir(value):
            raise ValueError(f"{opt} = {value!r} is a file: allowed a folder")
    if args.weights_dir is not None and not os.path.isdir(args.weights_dir):
        raise ValueError(f"--weights-dir = {args.weights_dir!r} is not a folder: allowed a weights set folder")
    if args.docs_only and not os.path.isdir(args.out):
        raise ValueError(f"--out = {args.out!r} is not a folder: --docs-only reads the JSON a run wrote there")


def run(args: argparse.Namespace, console: Any, lang: str) -> None:
    from pathlib import Path

    from .docs import write_pages
    from .texts import T

    out = {"paths": [], "seconds": 0.0}
    if not args.docs_only:
        from rich.console import Console

        from .run import run_paper

        size = "quick" if args.quick else "medium" if args.medium else "full"
        bars = None if args.json else Console(stderr=True)
        res = run_paper(args.out, size, args.weights_dir, args.seed, args.jobs, bars, not args.no_pictures)
        out = {"paths": res["paths"], "seconds": res["seconds"]}
        if res["no_pictures"] and not args.json:
            console.print(T("no_pictures", lang, why=res["no_pictures"]))
    out["paths"] += [str(p) for p in write_pages(Path(args.out), Path(args.docs))]
    if args.json:
        print_json(out)
        return
    for path in out["paths"]:
        console.print(f"{T('written', lang)} {path}", soft_wrap=True)
    console.print(T("done", lang, n=len(out["paths"]), s=out["seconds"]))

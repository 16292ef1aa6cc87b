"""`dspark-lab schedule`, `dspark-lab serve` and `profile --sps`: their options and checks (the handlers are
commands.py). Nothing here imports torch, so `--help` stays fast.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..options import MAX_REPS, add_checkpoint, add_json, add_lang, add_placement, add_seed, add_temperature, command
from ..style import print_json

COMMANDS = ("schedule", "serve")
SIM_REQUESTS_TEXT = "1,2,4,8,16,32,64,128,256"
MAX_SIM_ROUNDS = 10_000
DEFAULT_THRESHOLD = 0.1  # dspark_mini.scheduler.DEFAULT_THRESHOLD, kept here so --help needs no torch (tested)

SCHEDULE_EXAMPLES = """\
policies: fixed (verify all k drafts) · threshold (stop at the first survival
a = Π c below --threshold) · dspark (Algorithm 1: greedy over a, early stop on
Θ = τ*·SPS(B)) · dspark-async (capacity from confidences two rounds old, global
search; then the top current candidates)
tables: measured (lab/serving/data/sps_lab_cpu.json or --sps-table) · smooth
(t = t0·(1 + B/256)) · staircase (CUDA-graph-like buckets at powers of two)

examples:
  dspark-lab schedule                               every policy on the three tables, R = 1 … 256
  dspark-lab schedule --json                        sim[table][policy][R] = {throughput, mean_verify_len, tau}
  dspark-lab schedule --requests 1,16,256 --policies fixed,dspark
  dspark-lab schedule --sps-table runs/sps.json     with a table you measured (dspark-lab profile --sps)
  dspark-lab schedule --record --streams runs/streams.json   re-record the confidences, then simulate"""
SERVE_EXAMPLES = """\
examples:
  dspark-lab serve                                  12 held-out prompts, 4 in flight, Algorithm 1
  dspark-lab serve --requests 8 --policy dspark-async --json
  dspark-lab serve --policy fixed --requests 1      the classic: verify the whole block, one request
  dspark-lab serve --prompts-file prompts.txt --max-new-tokens 48 --temperature 1 --seed 3

At temperature 0 every request's tokens equal `dspark-lab generate --prompt <same>
--json`'s plain.tokens, for every policy and R: the scheduler only decides how
much to verify, never what to keep.

output: one estimate line (prefills, ≈ draft passes and verify forwards, about
how long here), then each request the moment it finishes (its cache is freed and
its slot takes the next prompt), then a summary. --json streams JSON lines: one
{"kind": "request", "index", "prompt", "tokens", "text", "rounds",
"mean_accepted_length", "mean_verify_len", …} per finished request, in order of
finishing, then one {"kind": "summary", "policy", "requests", "tokens_per_s",
"mean_verify_len", "batch_tokens_per_round", "conditions", "estimate", …}; the
estimate line and the progress bar go to stderr."""


def add_parsers(sub: Any) -> None:
    s = command(
        sub,
        "schedule",
        "load simulation: throughput and verify length of each verify-length policy for R = 1 … 256",
        "Confidence-scheduled verification under load: replay recorded calibrated confidences and acceptances "
        "of the trained DSpark drafter for R concurrent requests, let each policy choose how many drafts every "
        "request verifies, and time each round with an SPS(B) cost table (measured here, smooth, staircase). "
        "Reports throughput, mean verify length ℓ and τ per table, policy and R, and the scheduler's own time "
        "per round beside the verify forward.",
        SCHEDULE_EXAMPLES,
    )
    s.add_argument(
        "--requests",
        default=SIM_REQUESTS_TEXT,
        help=f"comma-separated concurrent requests R, each 1..1024 (default {SIM_REQUESTS_TEXT})",
    )
    s.add_argument(
        "--policies",
        default="fixed,threshold,dspark,dspark-async",
        help="comma-separated policies: fixed, threshold, dspark, dspark-async (default all four)",
    )
    s.add_argument(
        "--sps-table",
        default=None,
        help="the measured SPS table (JSON from `dspark-lab profile --sps`; default the shipped "
        "lab/serving/data/sps_lab_cpu.json)",
    )
    s.add_argument(
        "--streams",
        default=None,
        help="recorded rounds (JSON; default the shipped lab/serving/data/streams_dspark.json); with --record: "
        "where to write them (default runs/streams_dspark.json)",
    )
    s.add_argument(
        "--record",
        action="store_true",
        help="re-record the streams from the trained drafter (32 held-out prompts per domain, 40 new tokens, T = 1)",
    )
    s.add_argument(
        "--threshold",
        type=float,
        default=DEFAULT_THRESHOLD,
        help=f"the threshold policy's survival cut: a number in [0, 1] (default {DEFAULT_THRESHOLD})",
    )
    s.add_argument(
        "--rounds",
        type=int,
        default=64,
        help=f"measured rounds per R, policy and table: 1..{MAX_SIM_ROUNDS:,} (default 64)",
    )
    add_seed(s, "seed of the replay (which recorded rounds each request slot plays)")
    add_lang(s)
    add_json(s)

    v = command(
        sub,
        "serve",
        "R requests decoded concurrently: ragged speculative rounds, confidence-scheduled verification",
        "Decode many prompts with at most R in flight (continuous batching). Each round every request drafts the "
        "whole trained block, the policy picks how many drafts each one verifies from the confidences (and "
        "SPS(B) for dspark / dspark-async), and ONE target forward verifies every request at its own cache "
        "length; each request commits its own verdict.",
        SERVE_EXAMPLES,
    )
    v.add_argument("--requests", type=int, default=4, help="requests in flight R: 1..1024 (default 4)")
    v.add_argument(
        "--policy",
        default="dspark",
        choices=["fixed", "threshold", "dspark", "dspark-async"],
        help="verify-length policy (default dspark = Algorithm 1)",
    )
    add_temperature(v)
    v.add_argument(
        "--max-new-tokens",
        type=int,
        default=32,
        help="new tokens per request: 1..256 − the longest prompt (default 32)",
    )
    v.add_argument(
        "--prompts-file",
        default=None,
        help="UTF-8 text, one prompt per line (blank lines skipped), read line by line: at most 100,000 prompts "
        "of at most 4,096 characters; default: 12 held-out corpus prompts",
    )
    v.add_argument("--sps-table", default=None, help="SPS cost table (default the shipped measured one)")
    v.add_argument(
        "--threshold",
        type=float,
        default=None,
        help="the threshold policy's survival cut-off, in [0, 1] (default 0.1)",
    )
    add_seed(v, "seed of the sampling")
    v.add_argument(
        "--preset",
        default="lab",
        help="lab (default: the trained CPU model) or flash-cpu (DeepSeek-V4.1-Flash's widths, its seeded init)",
    )
    add_checkpoint(v)
    add_placement(v)
    add_lang(v)
    add_json(
        v,
        "JSON lines: one object per request as it finishes (prompt, tokens, rounds, τ), then a summary "
        "(policy, tokens/s, …)",
    )


def check(args: argparse.Namespace, cfg: Any) -> None:
    """schedule's and serve's options, and the rest of `profile --sps` (the lesson's cli checks --reps)."""
    from dspark_mini.validate import check_float, check_int  # torch: only when a command runs, not for --help

    if args.command == "schedule":
        from .schedule import parse_policies, parse_requests

        if isinstance(args.requests, str):
            args.requests = parse_requests(args.requests)
        if isinstance(args.policies, str):
            args.policies = parse_policies(args.policies)
        check_float(args.threshold, "--threshold", 0.0, 1.0, why="a survival probability")
        check_int(args.rounds, "--rounds", 1, MAX_SIM_ROUNDS)
        for option, value in (("--sps-table", args.sps_table), ("--streams", args.streams)):
            if value is not None and Path(value).is_dir():
                raise ValueError(f"--{option.lstrip('-')} = {value!r} is a folder: allowed a JSON file")
    elif args.command == "serve":
        from .serve import MAX_REQUESTS

        check_int(args.requests, "--requests", 1, MAX_REQUESTS)
        check_int(args.max_new_tokens, "--max-new-tokens", 1, cfg.max_seq_len - 1)
        if args.threshold is not None:
            check_float(args.threshold, "--threshold", 0.0, 1.0, why="a survival probability")
        for option, value in (("--prompts-file", args.prompts_file), ("--sps-table", args.sps_table)):
            if value is not None and not Path(value).is_file():
                raise ValueError(f"{option} = {value!r} is not a file: allowed an existing file")
    else:  # profile --sps
        check_profile_sps(args, cfg)


def check_profile_sps(args: argparse.Namespace, cfg: Any) -> None:
    """`profile --sps`: the cache length, the batch-token sizes and where the table goes."""
    from dspark_mini.validate import check_int  # torch: only when a command runs, not for --help

    from .profile_sps import DEFAULT_BATCH_TOKENS, SPS_CACHE_LENGTH, parse_batch_tokens

    check_int(args.reps, "--reps", 1, MAX_REPS)
    if args.device != "cpu" or args.dtype is not None:
        raise ValueError("--device / --dtype apply to `profile` without --sps: allowed their defaults with --sps")
    verify = cfg.dspark_block_size + 1
    args.cache_length = SPS_CACHE_LENGTH if args.cache_length is None else args.cache_length
    why = f"max_seq_len {cfg.max_seq_len} − one verify of {verify} tokens"
    check_int(args.cache_length, "--cache-length", 1, cfg.max_seq_len - verify, why)
    if args.batch_tokens is None:
        args.batch_tokens = list(DEFAULT_BATCH_TOKENS)
    elif isinstance(args.batch_tokens, str):
        args.batch_tokens = parse_batch_tokens(args.batch_tokens, verify)
    if args.out is not None and Path(args.out).is_dir():
        raise ValueError(f"--out = {args.out!r} is a folder: allowed a file path for the JSON table")
    if args.out is not None:  # not '', '/', a device node such as /dev/null, a FIFO: writing would replace it
        from dspark_mini.files import check_out_path

        check_out_path(args.out, "--out", "file", args.lang)


def run(args: argparse.Namespace, console: Any, lang: str) -> None:
    if args.command == "serve":
        from .commands import main_serve  # torch: only when the command runs

        main_serve(args, console, lang)  # prints each request as it finishes (JSON lines with --json), then the summary
        return
    from .commands import main_profile_sps, main_schedule  # torch: only when the command runs

    report = (main_schedule if args.command == "schedule" else main_profile_sps)(args, console, lang)
    if args.json:
        print_json(report)

"""`dspark-lab schedule`, `dspark-lab serve` and `profile --sps`: their options and checks (the handlers are
commands.py). Nothing here imports torch, so `--help` stays fast.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from ..options import (
    MAX_REPS,
    Help,
    add_checkpoint,
    add_json,
    add_lang,
    add_placement,
    add_seed,
    add_temperature,
    command,
)
from ..style import print_json

COMMANDS = ("schedule", "serve")
SIM_REQUESTS_TEXT = "1,2,4,8,16,32,64,128,256"
MAX_SIM_ROUNDS = 10_000
DEFAULT_THRESHOLD = 0.1  # dspark_mini.scheduler.DEFAULT_THRESHOLD, kept here so --help needs no torch (tested)


def add_parsers(sub: Any, lang: str = "en") -> None:
    h = Help("schedule", lang)
    s = command(sub, h)
    s.add_argument("--requests", default=SIM_REQUESTS_TEXT, help=h("requests", default=SIM_REQUESTS_TEXT))
    s.add_argument("--policies", default="fixed,threshold,dspark,dspark-async", help=h("policies"))
    s.add_argument("--sps-table", default=None, help=h("sps_table"))
    s.add_argument("--streams", default=None, help=h("streams"))
    s.add_argument("--record", action="store_true", help=h("record"))
    s.add_argument("--threshold", type=float, default=DEFAULT_THRESHOLD, help=h("threshold", default=DEFAULT_THRESHOLD))
    s.add_argument("--rounds", type=int, default=64, help=h("rounds", most=h.number(MAX_SIM_ROUNDS)))
    add_seed(s, h("seed"))
    add_lang(s)
    add_json(s)

    h = Help("serve", lang)
    v = command(sub, h)
    v.add_argument("--requests", type=int, default=4, help=h("requests"))
    v.add_argument(
        "--policy", default="dspark", choices=["fixed", "threshold", "dspark", "dspark-async"], help=h("policy")
    )
    add_temperature(v)
    v.add_argument("--max-new-tokens", type=int, default=32, help=h("max_new_tokens"))
    v.add_argument("--prompts-file", default=None, help=h("prompts_file"))
    v.add_argument("--sps-table", default=None, help=h("sps_table"))
    v.add_argument("--threshold", type=float, default=None, help=h("threshold"))
    add_seed(v, h("seed"))
    v.add_argument("--preset", default="lab", help=h("preset"))
    add_checkpoint(v)
    add_placement(v)
    add_lang(v)
    add_json(v, h("json"))


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

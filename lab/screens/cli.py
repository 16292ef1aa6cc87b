"""`dspark-lab walk`, `inspect` and `generate`: the lesson's commands (their options, checks and screens).

The parsers import nothing heavy, so `--help` stays fast; a handler imports the model when it runs (each such
import says so on its line).
"""

from __future__ import annotations

import argparse
from typing import Any

from ..measured import flash_cpu_peak
from ..options import (
    MAX_REPS,
    Help,
    add_checkpoint,
    add_json,
    add_lang,
    add_placement,
    add_seed,
    add_temperature,
    add_verify_len,
    add_weights,
    command,
)
from ..style import phase, print_json, shown
from ..text import lang_table

COMMANDS = ("walk", "inspect", "generate", "profile")


class CheckpointProblems(Exception):
    """`inspect --checkpoint` found problems: the report says which; the exit code is 1 (not bad input)."""


def add_parsers(sub: Any, lang: str = "en") -> None:
    preset_help = Help("common", lang)("preset")
    h = Help("walk", lang)
    w = command(sub, h, peak=flash_cpu_peak(lang))  # the measured figure the docs quote (docs/flash_cpu.json)
    w.add_argument("--step", action="append", metavar="ID", help=h("step"))
    add_lang(w)
    w.add_argument("--preset", default="lab", help=preset_help)
    w.add_argument("--prompt", default=None, help=h("prompt"))
    add_seed(w, h("seed"))
    add_verify_len(w, h("verify_len"))
    add_temperature(w)
    add_json(w, h("json"))
    add_weights(w)
    add_checkpoint(w)

    h = Help("inspect", lang)
    i = command(sub, h)
    i.add_argument("--preset", default="lab", help=h("preset"))
    add_lang(i)
    add_seed(i, h("seed"))
    add_json(i)
    i.add_argument("--checkpoint", default=None, metavar="DIR", help=h("checkpoint"))

    h = Help("generate", lang)
    g = command(sub, h)
    g.add_argument("--prompt", default=None, help=h("prompt"))
    g.add_argument("--max-new-tokens", type=int, default=32, help=h("max_new_tokens"))
    add_verify_len(g, h("verify_len"))
    add_temperature(g)
    add_seed(g, h("seed"))
    add_lang(g)
    g.add_argument("--preset", default="lab", help=preset_help)
    add_json(g, h("json"))
    add_weights(g)
    add_checkpoint(g)
    add_placement(g)

    h = Help("profile", lang)
    f = command(sub, h)
    f.add_argument("--preset", default="lab", help=preset_help)
    add_seed(f, h("seed"))
    f.add_argument("--reps", type=int, default=15, help=h("reps", most=MAX_REPS))
    f.add_argument("--cache-length", type=int, default=None, help=h("cache_length"))
    f.add_argument("--sps", action="store_true", help=h("sps"))
    f.add_argument("--out", default=None, help=h("out"))
    f.add_argument("--batch-tokens", default=None, help=h("batch_tokens"))
    add_lang(f)
    add_json(f)
    add_weights(f)
    add_checkpoint(f)
    add_placement(f)


def check(args: argparse.Namespace, cfg: Any) -> None:
    """The lesson's options that depend on the model (the shared ones are lab/cli.py's `check_args`)."""
    if args.command == "generate" and args.checkpoint is None:  # a checkpoint brings its own config and tokenizer
        check_generate_length(args, cfg)
    elif args.command == "profile":
        check_profile(args, cfg)


def check_profile(args: argparse.Namespace, cfg: Any) -> None:
    """`profile`'s options; --out and --batch-tokens belong to --sps, whose checks are serving's (--reps too)."""
    from dspark_mini.validate import check_int  # torch: only when a command runs, not for --help

    check_int(args.reps, "--reps", 1, MAX_REPS)
    if args.sps:
        return  # lab/serving/cli.py checks the rest of `profile --sps`
    for option, value in (("--out", args.out), ("--batch-tokens", args.batch_tokens)):
        if value is not None:
            raise ValueError(f"{option} applies to `profile --sps` only: add --sps")
    args.cache_length = 48 if args.cache_length is None else args.cache_length
    verify = cfg.dspark_block_size + 1
    why = f"max_seq_len {cfg.max_seq_len} − one verify of {verify} tokens"
    check_int(args.cache_length, "--cache-length", 1, cfg.max_seq_len - verify, why)


def check_generate_length(args: argparse.Namespace, cfg: Any) -> None:
    """--max-new-tokens: the prompt and the new tokens share the max_seq_len positions of the cache."""
    from dspark_mini.presets import text_tokenizer  # torch: only when a command runs, not for --help
    from dspark_mini.validate import check_int

    from ..text import DEFAULT_PROMPT, check_prompt

    prompt = DEFAULT_PROMPT if args.prompt is None else args.prompt
    n = len(check_prompt(prompt, text_tokenizer(cfg).encode, cfg, "--prompt", args.lang)[1])
    why = f"max_seq_len {cfg.max_seq_len} − the prompt's {n} tokens"
    check_int(args.max_new_tokens, "--max-new-tokens", 1, cfg.max_seq_len - n, why)


def slow(args: argparse.Namespace) -> bool:
    """A run worth a progress display (on stderr, lab/style.py): a preset other than the small lab model."""
    return args.preset != "lab" and getattr(args, "checkpoint", None) is None


def run(args: argparse.Namespace, console: Any, lang: str) -> None:
    if args.command == "walk":
        run_walk_command(args, console, lang)
    elif args.command == "generate":
        run_generate(args, console, lang)
    elif args.command == "profile":
        run_profile(args, console, lang)
    else:
        run_inspect(args, console, lang)


def run_profile(args: argparse.Namespace, console: Any, lang: str) -> None:
    from ..evaluation.profiling import profile  # torch: only when the command runs

    with console.status(lang_table("messages", "cli")["profiling"][lang]):
        report = profile(
            args.preset,
            args.seed,
            reps=args.reps,
            cache_len=args.cache_length,
            weights=args.weights,
            checkpoint=args.checkpoint,
            device=args.device,
            dtype=args.dtype,
            lang=lang,
        )
    if args.json:
        print_json(report)
    else:
        from .render import render_profile

        render_profile(console, report, lang)


def run_walk_command(args: argparse.Namespace, console: Any, lang: str) -> None:
    from ..lesson.walk import run_walk
    from ..text import DEFAULT_PROMPT
    from .render import render_walk  # torch: only when the command runs

    prompt = DEFAULT_PROMPT if args.prompt is None else args.prompt
    with shown(lang, enabled=slow(args)):
        walk = run_walk(
            prompt,
            args.preset,
            args.seed,
            lang,
            tuple(args.step) if args.step else None,
            args.verify_len,
            args.temperature,
            args.weights,
            args.checkpoint,
        )
    if args.json:
        print_json(
            {
                "weights": args.weights if args.checkpoint is None else f"checkpoint {args.checkpoint}",
                "preset": args.preset,
                "prompt": walk.prompt,
                "seed": args.seed,
                "lang": lang,
                "tokens": walk.tokens[0].tolist(),
                "steps": {k: v.to_json() for k, v in walk.views.items()},
            }
        )
    else:
        render_walk(console, walk, lang)


def run_generate(args: argparse.Namespace, console: Any, lang: str) -> None:
    from ..lesson.generation import compare  # torch: only when the command runs

    with shown(lang, enabled=slow(args)):
        report = compare(
            args.prompt,
            args.preset,
            args.max_new_tokens,
            args.verify_len,
            args.temperature,
            args.seed,
            args.weights,
            args.checkpoint,
            args.device,
            args.dtype,
            lang,
        )
    if args.json:
        print_json(report.to_json())
    else:
        from .render import render_generate

        render_generate(console, report, lang)


def run_inspect(args: argparse.Namespace, console: Any, lang: str) -> None:
    if args.checkpoint is not None:
        from ..realscale import inspect_checkpoint  # torch: only when the command runs
        from ..realscale.cli import render_inspect_checkpoint

        report = inspect_checkpoint(args.checkpoint)
        if args.json:
            print_json(report)
        else:
            render_inspect_checkpoint(console, report, lang)
        if report["problems"]:
            raise CheckpointProblems(f"{len(report['problems'])} problem(s) in {args.checkpoint}")
        return
    from ..lesson.summary import inspect_model  # torch: only when the command runs

    with shown(lang, enabled=slow(args)), phase("meta"):  # a few seconds for the real model's counts
        report = inspect_model(args.preset, args.seed)
    if args.json:
        print_json(report)
    else:
        from .render import render_inspect

        render_inspect(console, report, lang)

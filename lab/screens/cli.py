"""`dspark-lab walk`, `inspect` and `generate`: the lesson's commands (their options, checks and screens).

The parsers import nothing heavy, so `--help` stays fast; a handler imports the model when it runs (each such
import says so on its line).
"""

from __future__ import annotations

import argparse
from typing import Any

from ..options import (
    MAX_REPS,
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
from ..style import print_json
from ..text import lang_table

COMMANDS = ("walk", "inspect", "generate", "profile")

WALK_EXAMPLES = """\
examples:
  dspark-lab walk                                   every step, English
  dspark-lab walk --lang vi --step 6B               the destination step, in Vietnamese
  dspark-lab walk --prompt "Hôm nay trời đẹp" --step 1A --step 6B
  dspark-lab walk --step 6B --weights untrained     the same screen before training
  dspark-lab walk --json                            the same views as JSON
  dspark-lab walk --preset flash-cpu --step 6B      step 6B at DeepSeek-V4.1-Flash widths (seeded init, ~13 GiB)"""
PRESET_HELP = (
    "lab (default: the trained CPU model) or flash-cpu (every width of DeepSeek-V4.1-Flash, few layers and experts: "
    "its seeded init, read through the lab tokenizer's ids); flash is refused where it does not fit"
)
INSPECT_EXAMPLES = """\
examples:
  dspark-lab inspect                                the lab model: parameters, KV bytes, layer roles
  dspark-lab inspect --preset flash --json          the real model on `meta`: 890 B/token of global KV
  dspark-lab inspect --checkpoint runs/ckpt         what a checkpoint's headers say, without reading data"""
GENERATE_EXAMPLES = """\
examples:
  dspark-lab generate --max-new-tokens 48           plain vs DSpark speculative decoding, side by side
  dspark-lab generate --verify-len 2                send only 2 of the 5 drafts to verify
  dspark-lab generate --temperature 1 --seed 7      sampled: the target's distribution, other tokens
  dspark-lab generate --preset flash-cpu --max-new-tokens 8 --json   the real widths in bfloat16: speculative
                                                    = plain up to near-ties (first_difference)"""

PROFILE_EXAMPLES = """\
examples:
  dspark-lab profile                                parity, tap mix, acceptance, verify cost (p50/p95/p99)
  dspark-lab profile --json --reps 30               the same as JSON, more repetitions
  dspark-lab profile --sps                          SPS(B) at B = 1, 6, 12, … 1536, saved to runs/sps.json
  dspark-lab profile --sps --reps 30 --out lab/serving/data/sps_lab_cpu.json   re-measure the shipped table
  dspark-lab profile --sps --batch-tokens 1,6,48 --reps 3 --json               a quick look, as JSON"""


class CheckpointProblems(Exception):
    """`inspect --checkpoint` found problems: the report says which; the exit code is 1 (not bad input)."""


def add_parsers(sub: Any) -> None:
    w = command(
        sub,
        "walk",
        "run a prompt through the tiny model and explain every step",
        "Run one prompt through the `lab` model and show, step by step, what goes in, the equation, the shapes, "
        "small statistics, the checks and what to look at.",
        WALK_EXAMPLES,
    )
    w.add_argument(
        "--step", action="append", metavar="ID", help="show only this step (repeatable): 1A 1B 2A 3A 3B 3C 4A 6A 5A 6B"
    )
    add_lang(w)
    w.add_argument("--preset", default="lab", help=PRESET_HELP)
    w.add_argument("--prompt", default=None, help="text to run (any text; NFC-normalised)")
    add_seed(w, "seed of the sampling (and of the weights with --weights untrained); same seed → same numbers")
    add_verify_len(w, "The draft always runs the whole trained block of 5; only its first ℓ drafts are sent to verify")
    add_temperature(w)
    add_json(w, "print the step views as JSON instead of tables")
    add_weights(w)
    add_checkpoint(w)

    i = command(
        sub,
        "inspect",
        "config tables, parameter counts and KV budgets of a preset",
        "Report a preset's parameter counts by group, KV bytes per token per cache kind and the layer roles, "
        "from its config alone (the real-size flash model is never built for it). With --checkpoint: what a "
        "checkpoint folder's headers say, without reading its data.",
        INSPECT_EXAMPLES,
    )
    i.add_argument("--preset", default="lab", help="lab (default), flash or flash-cpu: counted on `meta`")
    add_lang(i)
    add_seed(i, "init seed (lab only)")
    add_json(i)
    i.add_argument(
        "--checkpoint",
        default=None,
        metavar="DIR",
        help="read only the headers of a checkpoint folder: tensors, bytes by group, missing/unexpected keys, "
        "dtype/shape mismatches against its config (exit 1 when there are problems)",
    )

    g = command(
        sub,
        "generate",
        "plain vs speculative decoding of a prompt, with an accept/reject strip",
        "Decode the same prompt twice: one target forward per token (plain), then DSpark (draft a block, verify "
        "it with one real forward, keep what the target keeps). Greedy outputs are identical token for token in "
        "float64; in bfloat16 or float32 they can part only at a near-tie, where the verify forward and a one-token "
        "step round a logit differently (docs/reliability.md); "
        "sampled outputs follow the same distribution. Each round is drawn as a strip: accepted, rejected, "
        "resampled or bonus.",
        GENERATE_EXAMPLES,
    )
    g.add_argument("--prompt", default=None, help="text to continue (any text; NFC-normalised)")
    g.add_argument(
        "--max-new-tokens",
        type=int,
        default=32,
        help="new tokens to produce: 1..256 − the prompt's tokens (max_seq_len; default 32)",
    )
    add_verify_len(g, "Each round drafts the whole trained block of 5 and sends its first ℓ to verify")
    add_temperature(g)
    add_seed(g, "seed of the weights and of the sampling")
    add_lang(g)
    g.add_argument("--preset", default="lab", help=PRESET_HELP)
    add_json(g, "print the result as JSON")
    add_weights(g)
    add_checkpoint(g)
    add_placement(g)

    f = command(
        sub,
        "profile",
        "step 6B profiling: parity, tap mix, acceptance, verify cost; --sps: SPS(B) cost table",
        "Measure what step 6B claims: logit parity of two forwards (threshold 1e-9), the 0.5/0.5 tap mix, "
        "acceptance per draft position with the confidence beside it, and the time of one verify over k tokens "
        "vs k single decode steps on the same cache. Timings are p50/p95/p99 with the run conditions. With "
        "--sps: the target's verify steps per second SPS(B) as a function of the batch-token count B "
        "(R requests × 6 rows, one forward), median of --reps, forced monotone, saved as the JSON cost table "
        "that `dspark-lab schedule` reads.",
        PROFILE_EXAMPLES,
    )
    f.add_argument("--preset", default="lab", help=PRESET_HELP)
    add_seed(f, "seed of the weights and prompts")
    f.add_argument("--reps", type=int, default=15, help=f"repetitions per timing: 1..{MAX_REPS} (default 15)")
    f.add_argument(
        "--cache-length",
        type=int,
        default=None,
        help="tokens in the cache before the verify: 1..250 = max_seq_len 256 − one verify of 6 tokens "
        "(anchor + block 5) (default 48; with --sps 32)",
    )
    f.add_argument(
        "--sps",
        action="store_true",
        help="measure SPS(B), steps/s of the verify forward vs batch tokens B, and save the cost table",
    )
    f.add_argument("--out", default=None, help="(--sps) where to save the table (default runs/sps.json)")
    f.add_argument(
        "--batch-tokens",
        default=None,
        help="(--sps) comma-separated B to measure: 1..6 (one request) or multiples of 6 (R requests × 6 rows) up "
        "to 3072 (default 1,6,12,24,48,96,192,384,768,1536: one decode step, then R = 1 … 256)",
    )
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

    if args.preset != "lab" and not args.json:
        with console.status("building DeepSeek-V4.1-Flash on the meta device (a few seconds)…"):
            report = inspect_model(args.preset, args.seed)
    else:
        report = inspect_model(args.preset, args.seed)
    if args.json:
        print_json(report)
    else:
        from .render import render_inspect

        render_inspect(console, report, lang)

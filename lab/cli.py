"""`dspark-lab`: walk the ten steps of DeepSeek-V4.1-Flash in the terminal, or inspect a preset.

dspark-lab walk                      all steps on the tiny `lab` model (English; --lang vi for Vietnamese)
dspark-lab walk --step 2A --lang vi  one step, in Vietnamese
dspark-lab inspect --preset flash    the real-size model built on `meta`: parameters and KV budget
dspark-lab generate                  plain vs speculative decoding, with the accept/reject strip
dspark-lab profile                   parity, tap mix, acceptance by position, verify cost (p50/p95/p99)
dspark-lab data                      the toy corpus: math, code and chat lines, described
dspark-lab train target              train the tiny target on it (safetensors + config + loss curve)
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

EPILOG = """\
steps: 1A token→embedding→4 lanes · 1B Engram · 2A mHC · 3A CED schedule · 3B CSA2 compressor ·
3C indexer + candidates + window · 4A MLA attention · 6A KV cache (890 B/token) · 5A MoE · 6B LM head + DSpark

examples:
  dspark-lab walk                                   every step, English
  dspark-lab walk --lang vi --step 6B               the destination step, in Vietnamese
  dspark-lab walk --prompt "The model predicts the next token." --seed 3 --json
  dspark-lab walk --step 6B --weights untrained     the same screen before training: confidences near 1/V
  dspark-lab inspect --preset flash --json          551.88 B backbone, 196.61 B Engram, 14.23 B draft, 890 B/token
  dspark-lab generate --max-new-tokens 48 --block 5 plain vs DSpark speculative decoding, side by side
  dspark-lab generate --temperature 1 --seed 7      sampled: same distribution as the target, other tokens
  dspark-lab profile --json                         parity, tap mix, acceptance, verify cost with conditions
  dspark-lab data --out runs/corpus                 write and describe the toy corpus (3 domains)
  dspark-lab train target --steps 400 --out runs/target.safetensors
  dspark-lab train draft --kind eagle3 --target runs/target.safetensors --out runs/eagle3.safetensors
  dspark-lab train all --out lab/weights            rebuild every shipped weight file (≈ 14 min on 2 cores)
  dspark-lab eval --json                            τ, acceptance per position, tokens/s per drafter and domain
"""


def add_weights_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--weights",
        default="trained",
        choices=["trained", "untrained"],
        help="trained: the shipped lab weights (default); untrained: the seeded random init",
    )


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="dspark-lab",
        description="A classroom lab for DeepSeek-V4.1-Flash, block by block (1A → 6B). "
        "Everything runs offline on a CPU.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub = p.add_subparsers(dest="command", metavar="{walk,inspect,generate,profile,data,train,eval}")

    w = sub.add_parser(
        "walk",
        help="run a prompt through the tiny model and explain every step",
        description="Run one prompt through the `lab` model and show, step by step, what goes in, "
        "the equation, the shapes, small statistics and what to look at.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    w.add_argument(
        "--step", action="append", metavar="ID", help="show only this step (repeatable): 1A 1B 2A 3A 3B 3C 4A 6A 5A 6B"
    )
    w.add_argument("--lang", default="en", help="language of the lesson: vi or en (default en)")
    w.add_argument("--preset", default="lab", help="model preset; walk runs `lab` (the CPU model)")
    w.add_argument("--prompt", default=None, help="text to run (newline, ASCII and Vietnamese letters)")
    w.add_argument(
        "--seed",
        type=int,
        default=0,
        help="seed of the sampling (and of the weights with --weights untrained); same seed → same numbers",
    )
    w.add_argument("--block", type=int, default=None, help="draft block size k for step 6B (1..trained block, 5)")
    w.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (default); > 0 samples")
    w.add_argument("--json", action="store_true", help="print the step views as JSON instead of tables")
    add_weights_argument(w)

    i = sub.add_parser(
        "inspect",
        help="config tables, parameter counts and KV budgets of a preset",
        description="Build a preset (flash on the meta device: no memory, no weights) and report "
        "parameter counts by group, KV bytes per token per cache kind and the layer roles.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    i.add_argument("--preset", default="lab", help="lab (default) or flash")
    i.add_argument("--lang", default="en", help="vi or en")
    i.add_argument("--seed", type=int, default=0, help="init seed (lab only)")
    i.add_argument("--json", action="store_true", help="print the report as JSON")

    g = sub.add_parser(
        "generate",
        help="plain vs speculative decoding of a prompt, with an accept/reject strip",
        description="Decode the same prompt twice: one target forward per token (plain), then DSpark "
        "(draft a block, verify it with one real forward, keep what the target keeps). "
        "Greedy outputs are identical token for token; sampled outputs follow the same "
        "distribution. Each round is drawn as a strip: accepted, rejected, "
        "resampled or bonus.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    g.add_argument("--prompt", default=None, help="text to continue")
    g.add_argument("--max-new-tokens", type=int, default=32, help="new tokens to produce (default 32)")
    g.add_argument("--block", type=int, default=None, help="draft block size k (1..trained block, default 5)")
    g.add_argument("--temperature", type=float, default=0.0, help="0 = greedy (default); > 0 samples")
    g.add_argument("--seed", type=int, default=0, help="seed of the weights and of the sampling")
    g.add_argument("--lang", default="en", help="vi or en")
    g.add_argument("--preset", default="lab", help="model preset (lab)")
    g.add_argument("--json", action="store_true", help="print the result as JSON")
    add_weights_argument(g)

    f = sub.add_parser(
        "profile",
        help="step 6B profiling: parity, tap mix, acceptance, verify cost",
        description="Measure what step 6B claims: logit parity of two forwards (threshold 1e-9), the "
        "0.5/0.5 tap mix, acceptance per draft position with the confidence beside it, "
        "and the time of one verify over k tokens vs k single decode steps on the same "
        "cache. Timings are p50/p95/p99 with the run conditions.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    f.add_argument("--preset", default="lab", help="model preset (lab)")
    f.add_argument("--seed", type=int, default=0, help="seed of the weights and prompts")
    f.add_argument("--reps", type=int, default=15, help="repetitions per timing (default 15)")
    f.add_argument("--cache-length", type=int, default=48, help="tokens in the cache before the verify (default 48)")
    f.add_argument("--lang", default="en", help="vi or en")
    f.add_argument("--json", action="store_true", help="print the report as JSON")
    add_weights_argument(f)

    from .corpus import add_data_arguments

    d = sub.add_parser(
        "data",
        help="build, describe and write the toy corpus (math / code / chat)",
        description="Three toy domains that differ in predictability, like the DSpark paper's math / code / chat: "
        "arithmetic facts, a small code-like language and a branching vi/en chat grammar. Deterministic, "
        "no downloads.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_data_arguments(d)

    t = sub.add_parser(
        "train",
        help="train the tiny target on the toy corpus",
        description="Train the `lab` target on the toy corpus (next-token cross-entropy with QAT through the FP8/FP4 "
        "simulation; the router bias by the loss-free balancing rule) and save a safetensors checkpoint with its "
        "config and loss curve; then the DSpark draft against the frozen target (CE 0.1 / L1 0.9 / confidence BCE "
        "1.0, position weights exp(−(k−1)/4), teacher-forced Markov head).",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    t.add_argument(
        "what",
        choices=["target", "draft", "all"],
        help="the target; one drafter against a trained target; or all: every shipped file from scratch",
    )
    t.add_argument("--target", default="runs/target.safetensors", help="(draft) the trained target checkpoint")
    t.add_argument(
        "--kind",
        default="dspark",
        choices=["dspark", "dspark-rnn", "dflash", "eagle3", "mtp1"],
        help="(draft) dspark (Markov + confidence heads), dspark-rnn (RNN head), or a baseline: dflash (parallel "
        "only), eagle3 (autoregressive, training-time test), mtp1 (one token)",
    )
    t.add_argument(
        "--quick", action="store_true", help="(all) tiny settings: checks the pipeline in a minute (CI smoke run)"
    )
    t.add_argument("--steps", type=int, default=400, help="optimizer steps (default 400)")
    t.add_argument("--batch", type=int, default=16, help="sequences per step (default 16)")
    t.add_argument("--seq-len", type=int, default=64, help="tokens per sequence (default 64)")
    t.add_argument("--lr", type=float, default=3e-3, help="peak learning rate (default 3e-3)")
    t.add_argument("--seed", type=int, default=0, help="seed of the weights, the corpus and the batches")
    t.add_argument("--lines", type=int, default=2000, help="corpus lines per domain (default 2000)")
    t.add_argument(
        "--out",
        default=None,
        help="checkpoint path (.safetensors; default runs/target.safetensors) — for `all` a folder (default "
        "runs/weights; `--out lab/weights` replaces the shipped files)",
    )
    t.add_argument("--lang", default="en", help="vi or en")
    t.add_argument("--json", action="store_true", help="print the training report as JSON")

    e = sub.add_parser(
        "eval",
        help="τ per domain per drafter, acceptance per position, threshold sweep, tokens/s (shipped weights)",
        description="A mini DeepSpec evaluation of the trained drafters: accepted length τ per domain at "
        "temperature 1 and greedy (Table 1), conditional acceptance per draft position (Figure 2), a static "
        "confidence-threshold sweep (Figure 5), and wall-clock tokens/s of plain vs speculative decoding.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    e.add_argument(
        "--drafters",
        default="dspark,dspark-rnn,dflash,eagle3,mtp1",
        help="comma-separated drafters (default all five)",
    )
    e.add_argument("--weights-dir", default=None, help="folder of the weights (default: the shipped lab/weights)")
    e.add_argument("--prompts", type=int, default=16, help="held-out prompts per domain (default 16)")
    e.add_argument("--max-new-tokens", type=int, default=48, help="new tokens per prompt (default 48)")
    e.add_argument("--speed-prompts", type=int, default=2, help="prompts per domain timed at batch 1 (default 2)")
    e.add_argument("--seed", type=int, default=0, help="seed of the prompts and the sampling")
    e.add_argument("--lang", default="en", help="vi or en")
    e.add_argument("--json", action="store_true", help="per drafter and domain: tau, cond_accept, tokens/s ratio")
    return p


def to_jsonable(x: Any) -> Any:
    if isinstance(x, dict):
        return {str(k): to_jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [to_jsonable(v) for v in x]
    if isinstance(x, float) and x != x:
        return None
    return x


def main(argv: list[str] | None = None) -> int:
    args = parser().parse_args(argv)
    if args.command is None:
        parser().print_help()
        return 0
    import torch
    from rich.console import Console

    from dspark_mini.config import ConfigError
    from dspark_mini.tokenizer import TokenizerError

    from .steps import check_lang

    torch.set_num_threads(1)  # the lab model is tiny: one thread is faster and immune to oversubscription
    console = Console()
    err = Console(stderr=True)
    try:
        lang = check_lang(args.lang)
        if args.command == "walk":
            from .render import render_walk
            from .walkthrough import DEFAULT_PROMPT, run_walk

            prompt = DEFAULT_PROMPT if args.prompt is None else args.prompt
            walk = run_walk(
                prompt,
                args.preset,
                args.seed,
                lang,
                tuple(args.step) if args.step else None,
                args.block,
                args.temperature,
                args.weights,
            )
            if args.json:
                out = {
                    "weights": args.weights,
                    "preset": args.preset,
                    "prompt": prompt,
                    "seed": args.seed,
                    "lang": lang,
                    "tokens": walk.tokens[0].tolist(),
                    "steps": {k: v.to_json() for k, v in walk.views.items()},
                }
                print(json.dumps(to_jsonable(out), ensure_ascii=False, indent=1))
            else:
                render_walk(console, walk, lang)
        elif args.command == "generate":
            from .generation import compare

            report = compare(
                args.prompt, args.preset, args.max_new_tokens, args.block, args.temperature, args.seed, args.weights
            )
            if args.json:
                print(json.dumps(to_jsonable(report.to_json()), ensure_ascii=False, indent=1))
            else:
                from .render import render_generate

                render_generate(console, report, lang)
        elif args.command == "data":
            from .corpus import main_data

            main_data(args, console)
        elif args.command == "train":
            from .train_cli import main_train

            report = main_train(args, console)
            if args.json:
                print(json.dumps(to_jsonable(report), ensure_ascii=False, indent=1))
        elif args.command == "eval":
            from .eval_cli import main_eval

            report = main_eval(args, console, lang)
            if args.json:
                print(json.dumps(to_jsonable(report), ensure_ascii=False, indent=1))
        elif args.command == "profile":
            from .profiling import profile

            if args.reps < 1 or args.cache_length < 1:
                raise ValueError(f"--reps = {args.reps} and --cache-length = {args.cache_length}: allowed ≥ 1")
            with console.status("profiling step 6B…"):
                report = profile(
                    args.preset, args.seed, reps=args.reps, cache_len=args.cache_length, weights=args.weights
                )
            if args.json:
                print(json.dumps(to_jsonable(report), ensure_ascii=False, indent=1))
            else:
                from .render import render_profile

                render_profile(console, report, lang)
        else:
            from .walkthrough import inspect_model

            if args.preset == "flash" and not args.json:
                with console.status("building DeepSeek-V4.1-Flash on the meta device (a few seconds)…"):
                    report = inspect_model(args.preset, args.seed)
            else:
                report = inspect_model(args.preset, args.seed)
            if args.json:
                print(json.dumps(to_jsonable(report), ensure_ascii=False, indent=1))
            else:
                from .render import render_inspect

                render_inspect(console, report, lang)
    except (ConfigError, TokenizerError, ValueError, FileNotFoundError) as e:
        err.print(f"[red]error:[/red] {e}")
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())

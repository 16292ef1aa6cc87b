"""`dspark-lab train` and `dspark-lab data`: their options and checks (the handlers are commands.py and
lab/realtext/describe.py). Nothing here imports torch, so `--help` stays fast.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ..options import add_json, add_lang, add_seed, command
from ..realtext import describe
from ..style import print_json

COMMANDS = ("data", "train")
# Defaults that --help prints (it stays fast: no torch). tests/test_bad_input.py checks them against
# training/rebuild.py's Recipe (target_steps, draft_steps: one budget for every drafter).
TRAIN_STEPS = {"target": 1800, "dspark": 600, "dspark-rnn": 600, "dflash": 600, "eagle3": 600, "mtp1": 600}
SHIPPED_REPORT = Path(__file__).resolve().parents[1] / "weights" / "report.json"  # lab/weights.py's, without torch
# the recipe field (report.json's `recipe`, training/rebuild.py's Recipe) each option's default comes from: the
# target's own, and one for every drafter (they all train on the same windows of one target cache, same budget)
RECIPE_FIELDS = {
    "lr": {"target": "target_lr", "draft": "draft_lr"},
    "batch": {"target": "target_batch", "draft": "draft_batch"},
    "seq_len": {"target": "target_seq_len", "draft": "draft_context"},
}


def kind_group(what: str, kind: str) -> str:
    """The group of a kind: "target", or "draft" (every drafter, the baselines included)."""
    return "target" if what == "target" else "draft"


def shipped_defaults(report: Path = SHIPPED_REPORT) -> dict[str, dict[str, float]]:
    """Option → group → the value of the recipe that built the shipped set (report.json's `recipe`: what `train all`
    ran), read as plain JSON so that --help imports no torch."""
    try:
        recipe = json.loads(report.read_text(encoding="utf-8"))["recipe"]
        return {opt: {g: recipe[field] for g, field in by.items()} for opt, by in RECIPE_FIELDS.items()}
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ValueError(f"{report} does not record the shipped recipe: {e!r}") from None


# Upper bounds of the options that have no natural one (the model-dependent ones come from the lab config).
MAX_STEPS = 100_000  # ≈ 55× the shipped target recipe
MAX_BATCH = 256  # sequences per step: 16× the default (memory grows with batch × seq-len)
MAX_LR = 1.0  # Adam moves every weight by about lr per step: above 1 it throws the weights away

DATA_EXAMPLES = """\
examples:
  dspark-lab data                    sizes, MIX and licence of each source
  dspark-lab data --out runs/corpus  its text: one file a source and split
  dspark-lab data --lang vi          the same tables, in Vietnamese"""
TRAIN_EXAMPLES = """\
examples:
  dspark-lab train target --out runs/target.safetensors     1,800 steps
  dspark-lab train draft --kind eagle3 --out runs/eagle3.safetensors
                       one drafter against --target runs/target.safetensors
  dspark-lab train all --out lab/weights --force   rebuild every shipped file
  dspark-lab train all --quick --out runs/quick    the same, tiny (a minute)"""


def add_parsers(sub: Any) -> None:
    d = command(
        sub,
        "data",
        "describe the real-text corpus (sizes, MIX, licences) or write its text",
        "The lab model's data (lab/realtext): English and Vietnamese prose, code, sums and the lab's own sentences, "
        "committed with the repository (lab/realtext/NOTICE names every source and licence). Per source and split "
        "(train, val, test): documents, characters and lab-tokenizer tokens, the source's MIX weight and licence, "
        "the totals and the training stream's length. --out writes the text, one file a source and split, with a "
        "README naming the sources and licences. Nothing is downloaded.",
        DATA_EXAMPLES,
    )
    describe.add_arguments(d)

    t = command(
        sub,
        "train",
        "train the tiny target, one drafter against it, or every shipped file (all)",
        "Train the `lab` target on the real-text corpus (lab/realtext: `dspark-lab data` describes it; next-token "
        "cross-entropy with QAT through the FP8/FP4 simulation; the router bias by the loss-free balancing rule) and "
        "save a safetensors checkpoint with its config and loss curve; or one drafter against the frozen target "
        "(DSpark: the paper's three losses with DeepSpec's released weights, CE 0.1 / L1 0.9 / confidence BCE 1.0, "
        "position weights exp(−(k−1)/4), a teacher-forced Markov head); or `all`: the target, the five drafters, "
        "their calibration and evaluation, as shipped in lab/weights.",
        TRAIN_EXAMPLES,
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
    t.add_argument(
        "--keep-target",
        action="store_true",
        help="(all) keep the target already in --out (byte for byte, with its record) and rebuild only the drafters "
        "against it",
    )
    t.add_argument(
        "--steps",
        type=int,
        default=None,
        help=f"(target, draft) optimizer steps: 1..{MAX_STEPS:,}; default per kind, as the shipped recipe: target "
        f"{TRAIN_STEPS['target']}, every drafter {TRAIN_STEPS['dspark']} (`all` trains them all on the same windows of "
        "one target cache); `all` follows training/rebuild.py's Recipe",
    )
    d = shipped_defaults()
    as_shipped = "default per kind, as the recipe that built lab/weights (its report.json):"
    t.add_argument(
        "--batch",
        type=int,
        default=None,
        help=f"(target, draft) sequences per step: 1..{MAX_BATCH}; {as_shipped} target {d['batch']['target']}, "
        f"every drafter {d['batch']['draft']}",
    )
    t.add_argument(
        "--seq-len",
        type=int,
        default=None,
        help="(target, draft) tokens per sequence: target 1..256 (max_seq_len); a drafter leaves room for one block: "
        f"dspark / dspark-rnn / dflash 8..250 (≥ the window), eagle3 / mtp1 1..249; {as_shipped} target "
        f"{d['seq_len']['target']}, dspark / dspark-rnn / dflash {d['seq_len']['draft']}, eagle3 / mtp1 the rows of "
        "the same windows they can train (window − k for eagle3, window − 2 for mtp1)",
    )
    t.add_argument(
        "--lr",
        type=float,
        default=None,
        help=f"(target, draft) peak learning rate: 0 < lr ≤ {MAX_LR:g}; {as_shipped} target {d['lr']['target']:g}, "
        f"every drafter {d['lr']['draft']:g}",
    )
    add_seed(t, "seed of the weights, the order of the training documents and the batches")
    t.add_argument(
        "--out",
        default=None,
        help="checkpoint path (.safetensors; default runs/target.safetensors) — for `all` a folder (default "
        "runs/weights; `--out lab/weights --force` replaces the shipped files)",
    )
    t.add_argument(
        "--force", action="store_true", help="allow --out to write into the shipped lab/weights (make weights does)"
    )
    add_lang(t)
    add_json(t, "print the training report as JSON")


def check(args: argparse.Namespace, cfg: Any) -> None:
    if args.command == "data":
        describe.check(args)
    else:
        check_train_args(args, cfg)


def check_train_args(args: argparse.Namespace, cfg: Any) -> None:
    """`train`'s options (the same checks for target and draft; `all` follows its recipe)."""
    from dspark_mini.validate import check_float, check_int  # torch: only when a command runs, not for --help

    if args.what == "all":
        if args.steps is not None:
            raise ValueError("--steps applies to `train target` and `train draft`: `train all` follows its recipe")
        return
    if args.keep_target:
        raise ValueError("--keep-target applies to `train all` (it keeps the target of the set in --out)")
    args.steps = TRAIN_STEPS[args.what if args.what == "target" else args.kind] if args.steps is None else args.steps
    fill_shipped_defaults(args)
    check_int(args.steps, "--steps", 1, MAX_STEPS)
    check_int(args.batch, "--batch", 1, MAX_BATCH)
    if args.what == "target":
        check_int(args.seq_len, "--seq-len", 1, cfg.max_seq_len, "max_seq_len")
    elif args.kind in ("dspark", "dspark-rnn", "dflash"):  # a window of context, then one block [anchor, k drafts]
        why = f"the window {cfg.window_size} .. max_seq_len − block {cfg.dspark_block_size} − 1"
        check_int(args.seq_len, "--seq-len", cfg.window_size, cfg.max_seq_len - cfg.dspark_block_size - 1, why)
    else:  # eagle3 / mtp1 also read the token after the block
        why = f"max_seq_len − block {cfg.dspark_block_size} − 2"
        check_int(args.seq_len, "--seq-len", 1, cfg.max_seq_len - cfg.dspark_block_size - 2, why)
    check_float(args.lr, "--lr", 0.0, MAX_LR, lo_open=True)


def fill_shipped_defaults(args: argparse.Namespace) -> None:
    """--batch, --seq-len and --lr not given: the shipped recipe's for this kind, as `train all` ran it (eagle3 /
    mtp1 train on the rows of the same windows: window − k and window − 2, the window draft_context + k + 1)."""
    group, d = kind_group(args.what, args.kind), shipped_defaults()
    window_rows = args.seq_len is None and args.what == "draft" and args.kind in ("eagle3", "mtp1")
    for opt in RECIPE_FIELDS:
        if getattr(args, opt) is None:
            setattr(args, opt, d[opt][group])
    if window_rows:
        from dspark_mini import get_config  # torch: only when a command runs

        k = get_config("lab").dspark_block_size
        args.seq_len += k + 1 - (k if args.kind == "eagle3" else 2)


def run(args: argparse.Namespace, console: Any, lang: str) -> None:
    if args.command == "data":
        describe.main(args, console)
        return
    from .commands import main_train  # torch: only when the command runs

    report = main_train(args, console)
    if args.json:
        print_json(report)

"""`dspark-lab train` and `dspark-lab data`: their options and checks (the handlers are commands.py and
lab/realtext/describe.py). Nothing here imports torch, so `--help` stays fast.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from typing import Any

from ..options import Help, add_json, add_lang, add_seed, command
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


def add_parsers(sub: Any, lang: str = "en") -> None:
    d = command(sub, Help("data", lang))
    describe.add_arguments(d)

    h = Help("train", lang)
    t = command(sub, h)
    t.add_argument("what", choices=["target", "draft", "all"], help=h("what"))
    t.add_argument("--target", default="runs/target.safetensors", help=h("target"))
    t.add_argument(
        "--kind", default="dspark", choices=["dspark", "dspark-rnn", "dflash", "eagle3", "mtp1"], help=h("kind")
    )
    t.add_argument("--quick", action="store_true", help=h("quick"))
    t.add_argument("--keep-target", action="store_true", help=h("keep_target"))
    steps = h("steps", most=h.number(MAX_STEPS), target=TRAIN_STEPS["target"], draft=TRAIN_STEPS["dspark"])
    t.add_argument("--steps", type=int, default=None, help=steps)
    d = shipped_defaults()
    t.add_argument("--batch", type=int, default=None, help=h("batch", most=MAX_BATCH, **d["batch"]))
    t.add_argument("--seq-len", type=int, default=None, help=h("seq_len", **d["seq_len"]))
    lr = {k: f"{v:g}" for k, v in d["lr"].items()}
    t.add_argument("--lr", type=float, default=None, help=h("lr", most=f"{MAX_LR:g}", **lr))
    add_seed(t, h("seed"))
    t.add_argument("--out", default=None, help=h("out"))
    t.add_argument("--force", action="store_true", help=h("force"))
    add_lang(t)
    add_json(t, h("json"))


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
        why = f"window {cfg.window_size} .. max_seq_len − k − 1, k = {cfg.dspark_block_size}"
        check_int(args.seq_len, "--seq-len", cfg.window_size, cfg.max_seq_len - cfg.dspark_block_size - 1, why)
    else:  # eagle3 / mtp1 also read the token after the block
        why = f"max_seq_len − k − 2, k = {cfg.dspark_block_size}"
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

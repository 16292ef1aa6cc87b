"""The handlers of `dspark-lab train target | draft | all`: the real-text corpus's streams (lab/realtext) → training
with a progress bar → a safetensors checkpoint and its report (the options and their checks are cli.py's)."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from dspark_mini import get_config
from dspark_mini.checkpoint import save

from ..text import Texts, check_lang, lang_table, say_symlink
from ..weights import check_out, file_sha256, record_file, training_streams
from .train import evaluate, model_for_draft, train_draft, train_target

TEXT = Texts(lang_table("messages", "training"), "training")  # lab/lang/<lang>/messages.toml


def progress(console: Console, quiet: bool) -> Progress:
    """A rich progress bar with the running loss (silent under --json)."""
    return Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total} · loss {task.fields[loss]:.3f}"),
        TimeRemainingColumn(),
        console=console,
        disable=quiet,
    )


def main_train(args: argparse.Namespace, console: Console) -> dict[str, Any]:
    lang = check_lang(args.lang)
    if args.what == "all":
        return main_train_all(args, console)
    out = Path(args.out or ("runs/target.safetensors" if args.what == "target" else f"runs/{args.kind}.safetensors"))
    if out.suffix != ".safetensors":
        raise ValueError(f"--out = {args.out!r}: allowed a path ending in .safetensors")
    check_out(out, folder=False, force=args.force)  # before the long run, not after it
    if args.what == "draft":
        return main_train_draft(args, console, lang, out)
    cfg = get_config("lab")
    train_ids, val_ids = training_streams(args.seed)  # the corpus's train documents shuffled by the seed; val
    label = TEXT("target", lang)
    with progress(console, args.json) as bar:
        task = bar.add_task(label, total=args.steps, loss=float("nan"))
        model, log = train_target(
            cfg,
            train_ids,
            val_ids,
            args.steps,
            args.batch,
            args.seq_len,
            args.lr,
            args.seed,
            eval_every=max(1, args.steps // 8),
            on_step=lambda step, loss: bar.update(task, completed=step, loss=loss),
        )
    # the numbers of the model as saved (float64): the float32 curve's last point depends on the CPU's kernels
    val_loss, val_acc = evaluate(model, val_ids, args.seq_len)
    meta = {
        "trained": "target",
        "steps": args.steps,
        "batch": args.batch,
        "seq_len": args.seq_len,
        "lr": args.lr,
        "seed": args.seed,
        "corpus": "lab/realtext",
        "train_tokens": int(train_ids.numel()),
        "val_loss": val_loss,
        "val_accuracy": val_acc,
        "seconds": round(log.seconds, 1),
    }
    path = save(model, out, part="target", meta=meta)
    record_file(path)  # --force into a recorded set: its manifest entry follows (old drafters are then refused)
    report = {
        "checkpoint": str(path),
        "meta": meta,
        "curve": {
            "val_steps": log.val_steps,
            "val_loss": log.val_loss,
            "val_accuracy": log.val_accuracy,
            "train_loss_every_step": log.train_loss,
        },
    }
    if not args.json:
        t = Table(title=TEXT("loss_curve", lang), title_justify="left")
        for c in ("step", "val loss", "val accuracy"):
            t.add_column(c)
        for s, vl, va in zip(log.val_steps, log.val_loss, log.val_accuracy, strict=True):
            t.add_row(str(s), f"{vl:.3f}", f"{va:.3f}")
        console.print(t)
        console.print(f"saved {path} · {log.seconds:.1f} s · {int(train_ids.numel())} training tokens")
    return report


def main_train_all(args: argparse.Namespace, console: Console) -> dict[str, Any]:
    """`dspark-lab train all`: every shipped file from scratch (see lab/training/rebuild.py)."""
    import dataclasses

    from .rebuild import QUICK, Recipe, train_all

    base = QUICK if args.quick else Recipe()
    recipe = dataclasses.replace(base, seed=args.seed)
    out = Path(args.out or "runs/weights")
    if out.suffix:
        raise ValueError(f"--out = {args.out!r}: `train all` writes a folder, allowed a path without a suffix")
    say_symlink(out, "--out", args.lang)  # before the long run: the set goes where the link points
    report = train_all(out, recipe, console, quiet=args.json, force=args.force, keep_target=args.keep_target)
    if not args.json:
        s = report["summary"]
        t = Table(title=f"{out} · {report['seconds']['total']:.0f} s", title_justify="left")
        for c in ("drafter", "τ (T = 1)", "τ (greedy)", "tokens/s spec ÷ plain"):
            t.add_column(c)
        for k, m in s["mean_tau"].items():
            ratios = list(s["tokens_per_s_ratio"].get(k, {}).values())
            t.add_row(k, f"{m['t1']:.2f}", f"{m['greedy']:.2f}", f"{sum(ratios) / max(1, len(ratios)):.2f}")
        console.print(t)
        if "dspark_over_dflash" in s:
            r = s["dspark_over_dflash"]
            console.print(f"DSpark ÷ DFlash mean τ: {r['t1']:.2f} (T = 1), {r['greedy']:.2f} (greedy)")
    return report


def main_train_draft(args: argparse.Namespace, console: Console, lang: str, out: Path) -> dict[str, Any]:
    """`dspark-lab train draft`: load the trained target, train one drafter against it, save it."""
    from dspark_mini.checkpoint import load_model

    if args.kind in ("eagle3", "mtp1"):
        return main_train_baseline(args, console, lang, out, load_model(args.target))
    target = model_for_draft(args.target, args.kind, args.seed)
    target_sha256 = file_sha256(args.target)  # recorded in the draft's header: it loads only beside this target
    context = min(args.seq_len, target.cfg.max_seq_len - target.cfg.dspark_block_size - 1)
    log = run_trainer(args, console, lang, train_draft, target, context, kind=args.kind)
    meta = draft_meta(args, log, context)
    path = save(target, out, part="draft", meta=meta, target_sha256=target_sha256)
    return draft_report(args, console, out, log, path)


def run_trainer(
    args: argparse.Namespace, console: Console, lang: str, trainer: Any, target: Any, context: int, **kw: Any
) -> Any:
    """One drafter's training against `target` on the corpus's training stream (shuffled by --seed), with the
    options' steps, batch and learning rate and a progress bar (none under --json) → what `trainer` returns."""
    train_ids, _ = training_streams(args.seed)
    with progress(console, args.json) as bar:
        task = bar.add_task(TEXT("draft", lang, kind=args.kind), total=args.steps, loss=float("nan"))
        return trainer(
            target,
            train_ids,
            args.steps,
            args.batch,
            context,
            args.lr,
            args.seed,
            on_step=lambda step, loss: bar.update(task, completed=step, loss=loss),
            **kw,
        )


def draft_meta(args: argparse.Namespace, log, context: int) -> dict[str, Any]:
    tail = log.val_accuracy[-max(1, args.steps // 10) :]
    return {
        "trained": "draft",
        "kind": args.kind,
        "target": str(args.target),
        "steps": args.steps,
        "batch": args.batch,
        "context": context,
        "lr": args.lr,
        "seed": args.seed,
        "accuracy_last_10pct": sum(tail) / len(tail),
        "seconds": round(log.seconds, 1),
    }


def draft_report(args: argparse.Namespace, console: Console, out: Path, log, path: Path) -> dict[str, Any]:
    from dspark_mini.baselines import read_baseline_header
    from dspark_mini.checkpoint import read_header

    record_file(path)  # --force into a recorded set: its manifest entry follows (the target binding still holds)
    meta = (read_baseline_header(path) if args.kind in ("eagle3", "mtp1") else read_header(path))["meta"]
    if not args.json:
        what = "accuracy" if args.kind == "mtp1" else "analytic acceptance"
        console.print(
            f"saved {path} · {log.seconds:.1f} s · {what} (last 10 % of steps): {meta['accuracy_last_10pct']:.3f}"
        )
    return {"checkpoint": str(path), "meta": meta, "curve": {"loss": log.train_loss, "accept": log.val_accuracy}}


def main_train_baseline(args: argparse.Namespace, console: Console, lang: str, out: Path, target) -> dict[str, Any]:
    """Eagle3-style or MTP-1 drafter against the frozen target, saved as its own module file."""
    from dspark_mini.baselines import save_baseline

    from .baselines import train_eagle3, train_mtp1

    target_sha256 = file_sha256(args.target)  # recorded in the module's header: it loads only beside this target
    context = min(args.seq_len, target.cfg.max_seq_len - target.cfg.dspark_block_size - 2)
    trainer = train_eagle3 if args.kind == "eagle3" else train_mtp1
    module, log = run_trainer(args, console, lang, trainer, target, context)
    meta = draft_meta(args, log, context)
    path = save_baseline(module, out, meta=meta, target_sha256=target_sha256)
    return draft_report(args, console, out, log, path)

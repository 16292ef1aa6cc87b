"""`dspark-lab train target`: corpus → training with a progress bar → safetensors checkpoint + report."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, Progress, TextColumn, TimeRemainingColumn
from rich.table import Table

from dspark_mini import get_config
from dspark_mini.checkpoint import save

from .corpus import build_corpus, mix, split, token_stream
from .steps import check_lang
from .training import train_draft, train_target


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
    out = Path(args.out)
    if out.suffix != ".safetensors":
        raise ValueError(f"--out = {args.out!r}: allowed a path ending in .safetensors")
    if isinstance(args.lines, bool) or args.lines < 1:
        raise ValueError(f"--lines = {args.lines!r}: allowed an integer ≥ 1")
    if args.what == "draft":
        return main_train_draft(args, console, lang, out)
    cfg = get_config("lab")
    corpus = build_corpus(args.seed, args.lines)
    train_lines, val_lines = split(mix(corpus, args.seed), 0.1, args.seed)
    train_ids, val_ids = token_stream(train_lines), token_stream(val_lines)
    label = "huấn luyện mô hình mục tiêu" if lang == "vi" else "training the target"
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
    meta = {
        "trained": "target",
        "steps": args.steps,
        "batch": args.batch,
        "seq_len": args.seq_len,
        "lr": args.lr,
        "seed": args.seed,
        "corpus_lines_per_domain": args.lines,
        "train_tokens": int(train_ids.numel()),
        "val_loss": log.val_loss[-1],
        "val_accuracy": log.val_accuracy[-1],
        "seconds": round(log.seconds, 1),
    }
    path = save(model, out, part="target", meta=meta)
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
        t = Table(title="loss curve" if lang == "en" else "đường loss", title_justify="left")
        for c in ("step", "val loss", "val accuracy"):
            t.add_column(c)
        for s, vl, va in zip(log.val_steps, log.val_loss, log.val_accuracy, strict=True):
            t.add_row(str(s), f"{vl:.3f}", f"{va:.3f}")
        console.print(t)
        console.print(f"saved {path} · {log.seconds:.1f} s · {int(train_ids.numel())} training tokens")
    return report


def main_train_draft(args: argparse.Namespace, console: Console, lang: str, out: Path) -> dict[str, Any]:
    """`dspark-lab train draft`: load the trained target, train its DSpark draft, save the draft part."""
    from dspark_mini.checkpoint import load_model

    target = load_model(args.target)
    corpus = build_corpus(args.seed, args.lines)
    train_lines, _ = split(mix(corpus, args.seed), 0.1, args.seed)
    train_ids = token_stream(train_lines)
    context = min(args.seq_len, target.cfg.max_seq_len - target.cfg.dspark_block_size - 1)
    label = f"huấn luyện bộ vẽ {args.kind}" if lang == "vi" else f"training the {args.kind} draft"
    with progress(console, args.json) as bar:
        task = bar.add_task(label, total=args.steps, loss=float("nan"))
        log = train_draft(
            target,
            train_ids,
            args.steps,
            args.batch,
            context,
            args.lr,
            args.seed,
            kind=args.kind,
            on_step=lambda step, loss: bar.update(task, completed=step, loss=loss),
        )
    tail = log.val_accuracy[-max(1, args.steps // 10) :]
    meta = {
        "trained": "draft",
        "kind": args.kind,
        "target": str(args.target),
        "steps": args.steps,
        "batch": args.batch,
        "context": context,
        "lr": args.lr,
        "seed": args.seed,
        "analytic_acceptance_last_10pct": sum(tail) / len(tail),
        "seconds": round(log.seconds, 1),
    }
    path = save(target, out, part="draft", meta=meta)
    if not args.json:
        console.print(
            f"saved {path} · {log.seconds:.1f} s · analytic acceptance (last 10 %): "
            f"{meta['analytic_acceptance_last_10pct']:.3f}"
        )
    return {"checkpoint": str(path), "meta": meta, "curve": {"loss": log.train_loss, "accept": log.val_accuracy}}

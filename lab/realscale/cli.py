"""`dspark-lab checkpoint …` and `--checkpoint DIR`: the official layout from the command line.

dspark-lab checkpoint export --out DIR [--shards N] [--style lab|official] [--weights trained|untrained]
dspark-lab checkpoint headers --out DIR [--shards N]   header-only shards at the real `flash` shapes (no data)
dspark-lab inspect --checkpoint DIR [--json]           headers only: tensors, bytes by group, problems
dspark-lab walk|generate|profile --checkpoint DIR      run the lab on a model read back from DIR

export and headers build the folder beside DIR and swap it in whole (dspark_mini.files): interrupted or out of disk,
the previous DIR is byte for byte as it was. --force replaces only a folder the lab wrote (its .dspark-lab-files.json
lists every file in it); a Hugging Face checkpoint or any other non-empty folder is refused with one line.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

from ..cli import MAX_SHARDS


def check_checkpoint_args(args: argparse.Namespace) -> None:
    from dspark_mini.validate import check_int

    if args.shards is not None:
        check_int(args.shards, "--shards", 1, MAX_SHARDS)
    out = Path(args.out)
    if out.exists() and not out.is_dir():
        raise ValueError(f"--out = {args.out!r} is a file: allowed a new or empty folder")


def main_checkpoint(args: argparse.Namespace, console: Console, lang: str) -> dict[str, Any]:
    from dspark_mini import get_config
    from dspark_mini.files import check_folder

    from ..text import say_symlink
    from ..weights import lab_model
    from .export import CHECKPOINT_KINDS, export_checkpoint
    from .inspect import inspect_checkpoint, write_header_only
    from .layout import RealScaleError

    check_checkpoint_args(args)
    what = "export" if args.what == "export" else "headers"
    check_folder(args.out, what, args.force, CHECKPOINT_KINDS, error=RealScaleError)  # before the model is built
    say_symlink(args.out, "--out", lang)
    if args.what == "export":
        model = lab_model(args.weights, args.seed)
        with console.status("writing the shards…" if lang == "en" else "đang ghi các shard…"):
            export_checkpoint(model, args.out, shards=args.shards or 2, style=args.style or "lab", overwrite=args.force)
    else:
        shards, style = args.shards or 48, args.style or "official"
        write_header_only(get_config("flash"), args.out, shards=shards, style=style, overwrite=args.force)
    report = inspect_checkpoint(args.out)
    if not args.json:
        render_inspect_checkpoint(console, report, lang)
    return report


def render_inspect_checkpoint(console: Console, report: dict[str, Any], lang: str) -> None:
    """The header-only report as a table: bytes and tensors per group, then the problems (if any)."""
    vi = lang == "vi"
    t = Table(
        title=("Checkpoint: byte theo nhóm (chỉ đọc header)" if vi else "Checkpoint: bytes by group (headers only)"),
        title_justify="left",
    )
    t.add_column("nhóm" if vi else "group", no_wrap=True)
    t.add_column("tensor", justify="right", no_wrap=True)
    t.add_column("GiB", justify="right", no_wrap=True)
    t.add_column("MiB", justify="right", no_wrap=True)
    for name, row in report["groups"].items():
        t.add_row(name, f"{row['tensors']:,}", f"{row['gib']:.2f}", f"{row['bytes'] / 2**20:,.2f}")
    total = report["total_bytes"]
    t.add_row("tổng" if vi else "total", f"{report['n_tensors']:,}", f"{total / 2**30:.2f}", f"{total / 2**20:,.2f}")
    shown = "header-only" if report["header_only_shards"] else ""
    console.print(f"{report['folder']} · {report['n_shards']} shard · style {report['style']} {shown}".rstrip())
    console.print(t)
    problems = report["problems"]
    if problems:
        console.print(("Vấn đề:" if vi else "Problems:") + f" {len(problems)}")
        for p in problems[:20]:
            console.print(f"  ✗ {p}", markup=False)
    else:
        console.print("✓ " + ("không có vấn đề nào" if vi else "no problems"))

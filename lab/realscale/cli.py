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
from typing import Any

from rich.console import Console
from rich.table import Table

from ..options import CHECKPOINT_STYLES, Help, add_json, add_lang, command
from ..style import print_json
from ..text import Texts, lang_table

TEXT = Texts(lang_table("messages", "checkpoint"), "checkpoint")  # lab/lang/<lang>/messages.toml

COMMANDS = ("checkpoint",)
MAX_SHARDS = 4096  # the real checkpoint has 48; one shard per tensor would already be absurd


def add_parsers(sub: Any, lang: str = "en") -> None:
    h = Help("checkpoint", lang)
    c = command(sub, h)
    c.add_argument("what", choices=["export", "headers"], help=h("what"))
    c.add_argument("--out", required=True, help=h("out"))
    c.add_argument("--shards", type=int, default=None, help=h("shards", most=MAX_SHARDS))
    c.add_argument("--style", default=None, choices=list(CHECKPOINT_STYLES), help=h("style"))
    c.add_argument("--weights", default="trained", choices=["trained", "untrained"], help=h("weights"))
    c.add_argument("--seed", type=int, default=0, help=h("seed"))
    c.add_argument("--force", action="store_true", help=h("force"))
    add_lang(c)
    add_json(c, h("json"))


def check(args: argparse.Namespace, cfg: Any) -> None:
    check_checkpoint_args(args)


def run(args: argparse.Namespace, console: Console, lang: str) -> None:
    report = main_checkpoint(args, console, lang)
    if args.json:
        print_json(report)


def check_checkpoint_args(args: argparse.Namespace) -> None:
    from dspark_mini.validate import check_int  # torch: only when a command runs, not for --help

    if args.shards is not None:
        check_int(args.shards, "--shards", 1, MAX_SHARDS)
    from dspark_mini.files import check_out_path

    check_out_path(args.out, "--out", "folder", args.lang)  # not '', '.', '/', a file, a device node or a FIFO


def main_checkpoint(args: argparse.Namespace, console: Console, lang: str) -> dict[str, Any]:
    from dspark_mini import get_config  # torch: only when the command runs
    from dspark_mini.files import check_folder

    from ..text import say_symlink
    from ..weights import lab_model
    from .export import CHECKPOINT_KINDS, export_checkpoint
    from .inspect import inspect_checkpoint, write_header_only
    from .layout import RealScaleError

    check_checkpoint_args(args)
    what = "export" if args.what == "export" else "headers"
    check_folder(args.out, what, args.force, CHECKPOINT_KINDS, error=RealScaleError, lang=lang)  # before the model
    say_symlink(args.out, "--out", lang)
    if args.what == "export":
        model = lab_model(args.weights, args.seed)
        with console.status(TEXT("writing", lang)):
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
    t = Table(
        title=TEXT("title", lang),
        title_justify="left",
    )
    t.add_column(TEXT("group", lang), no_wrap=True)
    t.add_column("tensor", justify="right", no_wrap=True)
    t.add_column("GiB", justify="right", no_wrap=True)
    t.add_column("MiB", justify="right", no_wrap=True)
    for name, row in report["groups"].items():
        t.add_row(name, f"{row['tensors']:,}", f"{row['gib']:.2f}", f"{row['bytes'] / 2**20:,.2f}")
    total = report["total_bytes"]
    t.add_row(TEXT("total", lang), f"{report['n_tensors']:,}", f"{total / 2**30:.2f}", f"{total / 2**20:,.2f}")
    shown = "header-only" if report["header_only_shards"] else ""
    console.print(f"{report['folder']} · {report['n_shards']} shard · style {report['style']} {shown}".rstrip())
    console.print(t)
    problems = report["problems"]
    if problems:
        console.print(TEXT("problems", lang) + f" {len(problems)}")
        for p in problems[:20]:
            console.print(f"  ✗ {p}", markup=False)
    else:
        console.print("✓ " + TEXT("no_problems", lang))

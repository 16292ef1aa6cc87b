"""`dspark-lab paper`: its options and checks (the work is run.py, the pages docs.py). Nothing here imports torch,
so `--help` stays fast.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

from ..options import Help, add_json, add_lang, add_seed, command
from ..style import print_json
from ..text import Texts, lang_table

COMMANDS = ("paper",)
DEFAULT_OUT = "runs/paper"
DEFAULT_DOCS = "docs"
TEXT = Texts(lang_table("messages", "paper"), "paper")  # lab/lang/<lang>/messages.toml
MAX_JOBS = 64  # worker processes (one thread each); more than the machine's cores only queues them


def add_parsers(sub: Any, lang: str = "en") -> None:
    h = Help("paper", lang)
    p = command(sub, h)
    size = p.add_mutually_exclusive_group()
    size.add_argument("--quick", action="store_true", help=h("quick"))
    size.add_argument("--medium", action="store_true", help=h("medium"))
    size.add_argument("--docs-only", action="store_true", help=h("docs_only"))
    p.add_argument("--out", default=DEFAULT_OUT, help=h("out", default=DEFAULT_OUT))
    p.add_argument("--docs", default=DEFAULT_DOCS, help=h("docs", default=DEFAULT_DOCS))
    p.add_argument("--weights-dir", default=None, help=h("weights_dir"))
    p.add_argument("--no-pictures", action="store_true", help=h("no_pictures"))
    p.add_argument("--jobs", type=int, default=2, help=h("jobs", most=MAX_JOBS))
    p.add_argument("--force", action="store_true", help=h("force"))
    add_seed(p, h("seed"))
    add_lang(p)
    add_json(p, h("json"))


def check(args: argparse.Namespace, cfg: Any) -> None:
    """Every option before anything runs: --jobs against this machine (cores, free memory), --docs a folder the
    pages may go to, --out a folder the run may replace (new, empty, or with --force a paper run the lab wrote) or,
    for --docs-only, one complete run."""
    from dspark_mini.files import check_folder, check_out_path, check_run, recover_swap
    from dspark_mini.validate import check_int  # torch: only when a command runs, not for --help

    from ..options import check_jobs
    from ..text import check_lang

    lang = check_lang(args.lang)
    check_int(args.jobs, "--jobs", 1, MAX_JOBS)
    check_out_path(args.docs, "--docs", "folder", lang)
    check_out_path(args.out, "--out", "folder", lang)
    if args.weights_dir is not None and not os.path.isdir(args.weights_dir):
        raise ValueError(TEXT("weights_dir", lang, v=args.weights_dir))
    if args.docs_only:
        recover_swap(args.out, "--out", lang)  # a run killed in its swap: finished first, then read
        if not os.path.isdir(args.out):
            raise ValueError(TEXT("out", lang, v=args.out))
        check_run(args.out, "paper", "dspark-lab paper", "--out", lang=lang)
        return
    check_jobs(args.jobs, "--jobs", lang)
    check_folder(args.out, "paper", args.force, option="--out", lang=lang)


def run(args: argparse.Namespace, console: Any, lang: str) -> None:
    from pathlib import Path

    from .docs import write_pages
    from .run import docs_inside
    from .texts import T

    out = {"paths": [], "seconds": 0.0}
    inside = docs_inside(Path(args.out), args.docs)
    if args.docs_only:
        out["paths"] = [str(p) for p in rewrite_pages(Path(args.out), Path(args.docs), inside, lang)]
    else:
        from rich.console import Console

        from .run import run_paper

        size = "quick" if args.quick else "medium" if args.medium else "full"
        bars = None if args.json else Console(stderr=True)
        res = run_paper(
            args.out,
            size,
            args.weights_dir,
            args.seed,
            args.jobs,
            bars,
            not args.no_pictures,
            args.force,
            args.docs,
            lang,
        )
        out = {"paths": res["paths"], "seconds": res["seconds"]}
        if res["no_pictures"] and not args.json:
            console.print(T("no_pictures", lang, why=res["no_pictures"]))
        if inside is None:  # the pages live outside the run (docs/): written once the run is in place
            out["paths"] += [str(p) for p in write_pages(Path(args.out), Path(args.docs))]
    if args.json:
        print_json(out)
        return
    for path in out["paths"]:
        console.print(f"{T('written', lang)} {path}", soft_wrap=True)
    console.print(T("done", lang, n=len(out["paths"]), s=out["seconds"]))


def rewrite_pages(out: Any, docs: Any, inside: Any, lang: str) -> list:
    """--docs-only: the pages from the complete run in `out` (checked by `check`). Pages that live inside the run
    are part of it: the run is copied beside itself, its pages rewritten there and swapped in whole with a new
    manifest, so the folder stays one complete run."""
    import shutil

    from dspark_mini.files import OWNER, folder_swap

    from .docs import write_pages

    if inside is None:
        return write_pages(out, docs)
    with folder_swap(out, "paper", overwrite=True, option="--out", lang=lang) as work:
        shutil.copytree(out, work, dirs_exist_ok=True, ignore=lambda _d, names: [n for n in names if n == OWNER])
        paths = write_pages(work, work / inside)
    return [out / p.relative_to(work) for p in paths]

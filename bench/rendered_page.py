"""The command line of a page rendered from a measurement (bench/speed_table.py, bench/peer_parity_table.py): write
the page atomically, or --check that the committed page is the rendering of the committed JSON."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from dspark_mini.files import write_atomic  # noqa: E402


def page_main(doc: str, render: Callable[[dict], str], json_path: Path, page_path: Path, argv=None) -> int:
    """`render` the JSON at --json into --out (or only --check it); → the exit code."""
    ap = argparse.ArgumentParser(description=doc.splitlines()[0])
    ap.add_argument("--json", type=Path, default=json_path, help="the measurement the page is rendered from")
    ap.add_argument("--out", type=Path, default=page_path, help="the page to write")
    ap.add_argument("--check", action="store_true", help="only check that --out is the rendering of --json")
    args = ap.parse_args(argv)
    try:
        page = render(json.loads(args.json.read_text(encoding="utf-8")))
        if args.check:
            same = args.out.is_file() and args.out.read_text(encoding="utf-8") == page
            print(f"{args.out}: {'up to date' if same else 'differs from the rendering of ' + str(args.json)}")
            return 0 if same else 1
        write_atomic(args.out, page)  # the old page survives a full disk
    except OSError as e:  # a missing run, a folder given for a file: one line naming the option
        which, path = (
            ("--json", args.json) if e.filename is not None and Path(e.filename) == args.json else ("--out", args.out)
        )
        print(f"error: {which} = {str(path)!r}: {e.strerror if e.filename is not None else e}", file=sys.stderr)
        return 2
    except (ValueError, KeyError) as e:  # not JSON, or not a run of the kind this page renders
        print(
            f"error: --json = {str(args.json)!r} is not a run this page renders: {type(e).__name__}: {e}",
            file=sys.stderr,
        )
        return 2
    print(f"wrote {args.out}")
    return 0

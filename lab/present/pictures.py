"""`make pictures` (`python -m lab.present.pictures`): the README's pictures, drawn offline by the lab's own pages.

Chromium (the system's, driven by Playwright, as in tests/test_browser.py) renders what the lab already makes and
screenshots one element of it: the map (lesson.diagrams' SVG), a draft strip and the acceptance-by-position chart (the
DSpark Explorer, docs/explorer.html) and the presenter on its 6B rounds page (lab/present/presenter.py). Nothing is
drawn twice: a picture is exactly what a learner sees. Written to docs/img/*.png (checked in, small).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

from .explorer import PAGE, REPO_ROOT

OUT = "docs/img"
PICTURES = ("map.png", "draft_strip.png", "acceptance.png", "presenter.png")
PRESENTER_ROUND = 2  # the rounds page after round 2 of the default run: a rejection, a carry, fresh ring slots


def find_chromium() -> str:
    """$DSPARK_CHROMIUM or chromium on PATH; a clear error otherwise (pictures need a browser)."""
    path = os.environ.get("DSPARK_CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not path:
        raise OSError("no chromium found: install it (apt-get install chromium) or set DSPARK_CHROMIUM")
    return path


def make_pictures(out: Path, chromium: str) -> list[Path]:
    """Draw the four pictures into `out`; returns their paths. Each is taken in memory and written atomically
    (dspark_mini.files): a failed or interrupted run leaves every earlier picture as it was."""
    from playwright.sync_api import sync_playwright

    from dspark_mini.files import write_atomic

    from ..lesson.diagrams import map_svg
    from .presenter import build_data, render_page, serve_in_thread, url_of

    shots: list[bytes] = []
    server = serve_in_thread(render_page(build_data()), port=0)
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
            page = browser.new_page(viewport={"width": 1280, "height": 720})

            page.set_content(f"<body style='margin:0'>{map_svg('en')}</body>")
            shots.append(page.locator("svg").first.screenshot())

            page.goto((REPO_ROOT / PAGE).as_uri())
            section = lambda inner: page.locator("section", has=page.locator(inner))
            shots.append(section("#strip").screenshot())  # the strip with τ, the target's token, the check
            shots.append(section("#chart").screenshot())  # the chart with its title, legend and mean τ

            page.goto(url_of(server))
            page.keyboard.press("End")  # the 6B rounds page
            for _ in range(PRESENTER_ROUND):
                page.keyboard.press("ArrowRight")
            shots.append(page.screenshot())
            browser.close()
    finally:
        server.shutdown()
        server.server_close()
    return [write_atomic(out / name, png) for name, png in zip(PICTURES, shots, strict=True)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.present.pictures", description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=REPO_ROOT / OUT, help=f"folder for the PNGs (default: {OUT})")
    args = parser.parse_args(argv)
    try:
        files = make_pictures(args.out, find_chromium())
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for f in files:
        print(f"wrote {f} ({f.stat().st_size:,} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

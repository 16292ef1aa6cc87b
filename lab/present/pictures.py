"""`make pictures` (`python -m lab.present.pictures`): the README's pictures, drawn offline by the lab's own pages.

Chromium (the system's, driven by Playwright, as in tests/test_browser.py) renders what the lab already makes and
screenshots it: the map (sync.diagrams' SVG), the DSpark Explorer (docs/explorer.html, the model live in the page) on
its default prompt — a round of 6B, the race of plain against DSpark, step 6A's cache bytes — the Explorer on a
phone, and the presenter (lab/present/presenter.py)
at 1280×720 on the narrated 6B table and on a round's commit. Nothing is drawn twice: a picture is exactly what a
learner sees. Written to docs/img/*.png (checked in, small).
"""

from __future__ import annotations

import argparse
import os
import shutil
import sys
from pathlib import Path

from .explorer import PAGE, REPO_ROOT

OUT = "docs/img"
PICTURES = (
    "map.png", "draft_strip.png", "acceptance.png", "presenter.png", "deck.png", "explorer_caches.png",
    "explorer_phone.png",
)  # fmt: skip
PROJECTOR = {"width": 1280, "height": 720}
PHONE = {"width": 390, "height": 844}
NARRATED_SENTENCE = 4  # the deck picture: the 6B table at its verdict sentence (1-based)


LIVE = "Number(document.body.dataset.runs) > 0"  # the Explorer has run its model and drawn the rounds
LIVE_MS = 120_000


def shown_round(debug: dict) -> int:
    """The round the presenter picture shows: the first that rejects a draft and holds some back, else the first
    that holds some back, else round 1."""
    rounds = debug["rounds"]
    held = [i for i, r in enumerate(rounds, 1) if r["verify_len"] < len(r["draft"])]
    both = [i for i in held if "rejected" in rounds[i - 1]["status"]]
    return (both or held or [1])[0]


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

    from ..sync.diagrams import map_svg
    from .presenter import build_data, render_page, serve_in_thread, url_of

    shots: list[bytes] = []
    data = build_data()
    server = serve_in_thread(render_page(data), port=0)
    try:
        with sync_playwright() as pw:
            browser = pw.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
            context = browser.new_context(viewport=PROJECTOR, reduced_motion="reduce")  # no verdict mid-animation
            page = context.new_page()

            page.set_content(f"<body style='margin:0'>{map_svg('en')}</body>")
            shots.append(page.locator("svg").first.screenshot())

            page.goto((REPO_ROOT / PAGE).as_uri() + "#step=6B")  # the live rounds of the default prompt
            page.wait_for_function(LIVE, timeout=LIVE_MS)
            section = lambda inner: page.locator("section", has=page.locator(inner))
            shots.append(section("#strip").screenshot())  # a live round: drafts, c, p_d / p_t, verdicts, caches
            shots.append(section("#chart").screenshot())  # the race: target forwards and the page's wall time
            caches = page.locator("#step-view")  # step 6A: the bytes the caches hold for the prompt

            deck = context.new_page()
            deck.goto(url_of(server))
            deck.keyboard.press("]")  # the rounds, after the prefill; each round is 4 phases
            for _ in range(4 * shown_round(data["debugger"]["en"]) - 3 + 3):
                deck.keyboard.press("PageDown")  # … to that round's commit
            shots.append(deck.screenshot())
            deck.keyboard.press("Home")
            for _ in range(200):
                if deck.locator("#slide .narration").count():
                    break
                deck.keyboard.press("PageDown")
            for _ in range(NARRATED_SENTENCE - 1):
                deck.keyboard.press("PageDown")
            shots.append(deck.screenshot())
            page.locator("button[data-step='6A']").click()
            shots.append(caches.screenshot())

            phone = browser.new_context(viewport=PHONE, device_scale_factor=1).new_page()
            phone.goto((REPO_ROOT / PAGE).as_uri() + "#step=6B")
            phone.wait_for_function(LIVE, timeout=LIVE_MS)
            phone.locator("#strip").scroll_into_view_if_needed()
            shots.append(phone.screenshot())
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

"""`python -m lab.handouts --lang vi|en|both --out DIR` (`make handouts`): the lab's printable handouts as A4 PDFs.

One walk of the default prompt with the trained lab model gives every number: the four column summaries (one A4
page each) and the 6B worksheet (the round to work by hand, then its answer key: two pages). Each handout is an HTML
page (pages.py) printed by the system's chromium through Playwright, offline (the faces are inline, nothing is
fetched). OUT/<lang>/ receives column-1.pdf … column-4.pdf, worksheet-6b.pdf and the HTML each was printed from.
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path
from typing import Any

from dspark_mini.files import write_atomic

from ..text import LANGS, Texts, lang_table

CLI = Texts(lang_table("handouts", "cli"), "handouts")
CHOICES = (*LANGS, "both")
PAGE_OBJECT = re.compile(rb"/Type\s*/Page(?![a-zA-Z])")  # a page object of a PDF (not the /Pages tree)


def pdf_pages(pdf: bytes) -> int:
    """The pages of a PDF chromium printed (it writes every page object uncompressed)."""
    return len(PAGE_OBJECT.findall(pdf))


def build_walk() -> Any:
    """The walk every handout reads: the default prompt through the trained lab model, seed 0."""
    from ..lesson.walk import run_walk  # torch: not needed for --help

    return run_walk(lang="en")


def handout_pages(walk: Any, langs: tuple[str, ...]) -> dict[str, dict[str, str]]:
    """{lang: {file stem: HTML}}: the column summaries and the worksheet in each language of `langs`."""
    from .data import summaries, worksheet
    from .pages import summary_page, worksheet_page

    context = {"prompt": walk.prompt, "n_tokens": int(walk.tokens.size(1)), "seed": walk.seed}
    sheet = worksheet(walk)
    out = {}
    for lang in langs:
        columns = summaries(walk, lang)
        pages = {f"column-{c['n']}": summary_page(c, context, lang, len(columns)) for c in columns}
        pages["worksheet-6b"] = worksheet_page(sheet, context, lang)
        out[lang] = pages
    return out


def print_pdfs(pages: dict[Path, str], chromium: str) -> dict[Path, bytes]:
    """Each HTML printed to an A4 PDF by `chromium` (headless, through Playwright): {path: the PDF's bytes}."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        try:
            return print_with(browser, pages)
        finally:
            browser.close()


def print_with(browser: Any, pages: dict[Path, str]) -> dict[Path, bytes]:
    """`print_pdfs` in a Playwright browser already open."""
    out = {}
    tab = browser.new_page()
    try:
        for path, page_html in pages.items():
            tab.set_content(page_html, wait_until="load")
            tab.evaluate("document.fonts.ready.then(() => true)")
            out[path] = tab.pdf(format="A4", print_background=True, prefer_css_page_size=True)
    finally:
        tab.close()
    return out


def write_handouts(out: Path, langs: tuple[str, ...], chromium: str) -> dict[Path, int]:
    """Every handout of `langs` as HTML and PDF under out/<lang>/; {PDF path: its pages}."""
    pages = handout_pages(build_walk(), langs)
    html_files = {out / lang / f"{stem}.html": text for lang, by in pages.items() for stem, text in by.items()}
    pdfs = print_pdfs({p.with_suffix(".pdf"): text for p, text in html_files.items()}, chromium)
    for path, text in html_files.items():
        path.parent.mkdir(parents=True, exist_ok=True)
        write_atomic(path, text.encode("utf-8"))
    for path, pdf in pdfs.items():
        write_atomic(path, pdf)
    return {path: pdf_pages(pdf) for path, pdf in pdfs.items()}


def main(argv: list[str] | None = None) -> int:
    first = argparse.ArgumentParser(add_help=False)
    first.add_argument("--lang", choices=CHOICES, default="both")
    known, _ = first.parse_known_args(argv)
    say = "en" if known.lang == "en" else "vi"  # the language of the help and of what this command prints
    parser = argparse.ArgumentParser(prog="python -m lab.handouts", description=CLI("description", say))
    parser.add_argument("--lang", choices=CHOICES, default="both", help=CLI("lang", say))
    parser.add_argument("--out", type=Path, default=Path("build/handouts"), help=CLI("out", say))
    args = parser.parse_args(argv)
    langs = LANGS if args.lang == "both" else (args.lang,)
    if args.out.exists() and not args.out.is_dir():  # refused before chromium starts: nothing is written
        print(CLI("out_not_folder", say, path=args.out), file=sys.stderr)
        return 2
    from ..present.pictures import find_chromium

    try:
        chromium = find_chromium()
        written = write_handouts(args.out, langs, chromium)
    except (OSError, ImportError) as e:
        print(CLI("no_browser", say, why=e), file=sys.stderr)
        return 2
    for path, n in written.items():
        print(CLI("wrote", say, path=path, pages=n))
    return 0

"""The real-text corpus: English and Vietnamese prose, code and sums, offline and licensed.

The lab model learns real language from five sources, each committed as one xz-compressed JSON Lines file under
`lab/realtext/data/` (one document a line: `{"id": …, "text": …}`, NFC). lab/realtext/NOTICE names every source and
its licence; `make corpus` (lab/realtext/build.py) rebuilds the files byte for byte from those sources. Nothing is
downloaded when the lab runs.

    source   documents                         language / domain
    en       Jane Austen's novels, a chapter   English prose (public domain)
    vi       LibreOffice help pages, a page    Vietnamese prose (MPL-2.0)
    code     this project's Python, a file     code (MIT)
    sums     40 arithmetic facts               multi-digit sums with carries
    lesson   40 lesson sentences               the lab's own bilingual sentences (MIT)

Held-out text is split by *document*, never by line: a document goes to `train`, `val` or `test` by a hash of its
id (`split_of`), so a chapter or a help page is read whole by one split only, and adding documents never moves the
others. `everyday/en.txt` and `everyday/vi.txt` hold everyday paragraphs written for this lab and kept out of the
corpus: text from outside its domains, for the perplexity the docs report.
"""

from __future__ import annotations

import functools
import hashlib
import json
import lzma
from pathlib import Path

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"
EVERYDAY = HERE / "everyday"

SOURCES: dict[str, str] = {
    "en": "en_austen.jsonl.xz",
    "vi": "vi_help.jsonl.xz",
    "code": "code.jsonl.xz",
    "sums": "sums.jsonl.xz",
    "lesson": "lesson.jsonl.xz",
}
SPLITS: tuple[str, ...] = ("train", "val", "test")
HELD_OUT_PERCENT = {"val": 4, "test": 4}  # of the documents of each source; the rest is train


class CorpusError(ValueError):
    """An unknown source or split name."""


def differing(sums: dict[str, str], folder: Path) -> list[str]:
    """The files whose sha256 in `sums` (a rebuild's) differs from the committed file's in `folder`; each file's line
    is printed (`make corpus-check`)."""
    bad = [n for n, s in sums.items() if hashlib.sha256((folder / n).read_bytes()).hexdigest() != s]
    for n, s in sums.items():
        print(f"{'differs' if n in bad else 'same   '}  {s[:16]}  {n}")
    return bad


def check_source(source: str) -> str:
    if source not in SOURCES:
        raise CorpusError(f"source = {source!r} is invalid: allowed {', '.join(SOURCES)}")
    return source


def split_of(doc_id: str) -> str:
    """The split a document belongs to: a hash of its id, so the split never depends on order or neighbours."""
    h = int.from_bytes(hashlib.sha256(doc_id.encode("utf-8")).digest()[:4], "big") % 100
    if h < HELD_OUT_PERCENT["test"]:
        return "test"
    if h < HELD_OUT_PERCENT["test"] + HELD_OUT_PERCENT["val"]:
        return "val"
    return "train"


@functools.cache
def documents(source: str) -> tuple[tuple[str, str], ...]:
    """Every (id, text) of one source, in file order."""
    path = DATA / SOURCES[check_source(source)]
    lines = lzma.decompress(path.read_bytes()).decode("utf-8").splitlines()
    return tuple((d["id"], d["text"]) for d in map(json.loads, lines))


def texts(source: str, split: str) -> list[str]:
    """The documents of one source in one split (`train`, `val` or `test`), in file order."""
    if split not in SPLITS:
        raise CorpusError(f"split = {split!r} is invalid: allowed {', '.join(SPLITS)}")
    return [text for doc_id, text in documents(source) if split_of(doc_id) == split]


def everyday(lang: str) -> list[str]:
    """The everyday paragraphs (not in the corpus) of one language, `en` or `vi`."""
    if lang not in ("en", "vi"):
        raise CorpusError(f"lang = {lang!r} is invalid: allowed en, vi")
    text = (EVERYDAY / f"{lang}.txt").read_text(encoding="utf-8")
    return [p.strip() for p in text.split("\n\n") if p.strip()]

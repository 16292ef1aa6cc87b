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
import random
import re
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

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
DOMAINS: tuple[str, ...] = ("en", "vi", "code", "sums")  # what the evaluation measures, one domain a source
# how often each source's documents are read in one pass of the lab model's training stream: Vietnamese (a quarter
# of English's size) and the lesson's own sentences count twice
MIX: dict[str, int] = {"en": 1, "vi": 2, "code": 1, "sums": 1, "lesson": 2}
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


def check_domain(domain: str) -> str:
    if domain not in DOMAINS:
        raise CorpusError(f"domain = {domain!r} is invalid: allowed {', '.join(DOMAINS)}")
    return domain


@functools.cache
def _stream(split: str, seed: int) -> tuple[int, ...]:
    from dspark_mini.tokenizer import default_tokenizer

    tok = default_tokenizer()
    if split == "train":  # every source MIX times, the documents shuffled (seeded), so no source comes last
        docs = [t for source, w in MIX.items() for t in texts(source, split) * w]
        random.Random(seed).shuffle(docs)
    else:
        docs = [t for source in MIX for t in texts(source, split)]
    ids: list[int] = []
    for text in docs:
        ids += _encode_document(tok, text) + [tok.eos]  # <eos> closes every document
    return tuple(ids)


def _encode_document(tok, text: str) -> list[int]:
    """One corpus document → ids, where the text spells a special token ("<eos>" in this project's own code, 12
    times in the train split) reading it as that token's id, as the shipped weights were trained. Typed text never
    reads specials (`HFTokenizer.encode`); the stream keeps this so that `make weights` rebuilds the shipped set."""
    from dspark_mini.tokenizer import SPECIALS

    ids: list[int] = []
    for part in _SPECIAL_SPLIT.split(text):
        if part in SPECIALS:
            ids.append(SPECIALS.index(part))
        elif part:
            ids += tok.encode(part)
    return ids


_SPECIAL_SPLIT = re.compile("(<bos>|<eos>|<pad>|<noise>)")  # the lab tokenizer's SPECIALS, ids 0..3


def token_stream(split: str, seed: int = 0) -> torch.Tensor:
    """One split of the corpus as one run of lab-tokenizer ids, each document closed by <eos>: the training stream
    (`train`, every source MIX times, documents shuffled by `seed`) or a held-out one (`val`, `test`, file order,
    one time each).  → [N] int64"""
    if split not in SPLITS:
        raise CorpusError(f"split = {split!r} is invalid: allowed {', '.join(SPLITS)}")
    import torch

    return torch.tensor(_stream(split, seed), dtype=torch.long)


@functools.cache
def _paragraph_starts(domain: str, split: str, prompt_tokens: int) -> tuple[tuple[int, ...], ...]:
    from dspark_mini.tokenizer import default_tokenizer

    tok = default_tokenizer()
    out = []
    for text in texts(check_domain(domain), split):
        for para in text.split("\n"):
            ids = tok.encode(para.strip())
            if len(ids) >= prompt_tokens:
                out.append(tuple(ids[:prompt_tokens]))
    return tuple(out)


def prompts(domain: str, n: int, prompt_tokens: int, seed: int = 0, split: str = "test") -> torch.Tensor:
    """n held-out prompts of one domain: the first `prompt_tokens` ids of lines (paragraphs, code lines, sums) of
    the split's documents, n of them drawn by `seed` (another seed, other lines).  → [n, prompt_tokens]"""
    if split == "train" or split not in SPLITS:
        raise CorpusError(f"split = {split!r} is invalid: allowed val, test (held out)")
    starts = _paragraph_starts(domain, split, prompt_tokens)
    if len(starts) < n:
        raise CorpusError(
            f"n = {n} is invalid for {domain!r}: its {split} documents have {len(starts)} lines of ≥ {prompt_tokens} "
            f"tokens: allowed 1..{len(starts)}"
        )
    import torch

    order = torch.randperm(len(starts), generator=torch.Generator().manual_seed(1000 + seed))[:n]
    return torch.tensor([starts[i] for i in order.tolist()], dtype=torch.long)


def everyday(lang: str) -> list[str]:
    """The everyday paragraphs (not in the corpus) of one language, `en` or `vi`."""
    if lang not in ("en", "vi"):
        raise CorpusError(f"lang = {lang!r} is invalid: allowed en, vi")
    text = (EVERYDAY / f"{lang}.txt").read_text(encoding="utf-8")
    return [p.strip() for p in text.split("\n\n") if p.strip()]

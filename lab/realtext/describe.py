"""`dspark-lab data`: the real-text corpus described, and written out as plain text.

Per source (en, vi, code, sums, lesson) and split (train, val, test): its documents, characters and lab-tokenizer
tokens; the source's MIX weight and licence (lab/realtext/NOTICE states each in full); the totals, and the length of
the streams the model reads (`token_stream`). Tokens are counted as the streams hold them: a document's ids and the
<eos> that closes it, so the training stream's length is Σ MIX × a source's train tokens.

`--out FOLDER` writes `<source>.<split>.txt` (UTF-8, each document followed by a line holding one form feed, U+000C:
the documents exactly as `texts(source, split)` returns them) and README.txt, which names the sources and their
licences and carries NOTICE whole. `--json` prints the report; `--lang vi|en` every printed line.
"""

from __future__ import annotations

import argparse
import functools
from pathlib import Path
from typing import Any

from ..options import Help, add_json, add_lang
from ..text import LANGS, Texts, lang_table, say_symlink
from . import DOMAINS, HERE, MIX, SOURCES, SPLITS, texts

NOTICE = HERE / "NOTICE"
# each source's licence, as lab/realtext/NOTICE states it (tests/test_realtext_describe.py reads NOTICE against it)
LICENCES: dict[str, str] = {"en": "public domain", "vi": "MPL-2.0", "code": "MIT", "sums": "MIT", "lesson": "MIT"}
DOCUMENT_END = "\n\f\n"  # in a written file: after each document, a line holding one form feed
FOLDER_KIND = "corpus"  # the kind of folder `--out` writes (the lab's owner manifest records it)

TEXT = Texts(lang_table("corpus", "text"), "data")


# ---- the numbers ------------------------------------------------------------------------------------------------
def token_count(tok: Any, text: str) -> int:
    """The ids one document takes in a stream: its tokens as the stream encodes them, and the closing <eos>."""
    from . import _encode_document

    return len(_encode_document(tok, text)) + 1


@functools.cache
def split_counts(source: str, split: str) -> tuple[int, int, int]:
    """(documents, characters, tokens) of one source in one split."""
    from dspark_mini.tokenizer import default_tokenizer

    tok = default_tokenizer()
    docs = texts(source, split)
    return len(docs), sum(len(t) for t in docs), sum(token_count(tok, t) for t in docs)


def _counts(documents: int, characters: int, tokens: int) -> dict[str, int]:
    return {"documents": documents, "characters": characters, "tokens": tokens}


def _added(parts: list[dict[str, int]]) -> dict[str, int]:
    return {k: sum(p[k] for p in parts) for k in ("documents", "characters", "tokens")}


def describe() -> dict[str, Any]:
    """The report: per source its file, licence, MIX weight, and counts per split and over all splits; the totals
    per split; the streams' documents and tokens (the training stream reads every source MIX times)."""
    from dspark_mini.tokenizer import default_tokenizer

    sources: dict[str, Any] = {}
    for source, file in SOURCES.items():
        splits = {split: _counts(*split_counts(source, split)) for split in SPLITS}
        sources[source] = {
            "file": f"lab/realtext/data/{file}",
            "licence": LICENCES[source],
            "mix": MIX.get(source, 0),
            "evaluated": source in DOMAINS,
            "splits": splits,
            "all": _added(list(splits.values())),
        }
    totals = {split: _added([s["splits"][split] for s in sources.values()]) for split in SPLITS}
    totals["all"] = _added([totals[split] for split in SPLITS])
    streams = {}
    for split in SPLITS:  # train: every source MIX times; val, test: every source of MIX once
        weight = {s: (w if split == "train" else 1) for s, w in MIX.items()}
        streams[split] = {
            k: sum(w * sources[s]["splits"][split][k] for s, w in weight.items()) for k in ("documents", "tokens")
        }
    return {
        "corpus": "lab/realtext",
        "notice": "lab/realtext/NOTICE",
        "tokenizer": {"name": "lab tokenizer (byte-level BPE)", "vocab_size": len(default_tokenizer())},
        "splits": list(SPLITS),
        "sources": sources,
        "totals": totals,
        "streams": streams,
        "train_stream_tokens": streams["train"]["tokens"],
    }


# ---- files ------------------------------------------------------------------------------------------------------
def file_text(documents: list[str]) -> str:
    """One source's split as a text file: each document, then a line holding one form feed."""
    for i, doc in enumerate(documents):
        if "\f" in doc:
            raise ValueError(f"document {i} holds a form feed, the line that ends a document in a written file")
    return "".join(doc + DOCUMENT_END for doc in documents)


def read_file_text(text: str) -> list[str]:
    """The documents of a file written by `file_text` (its inverse)."""
    return text.split(DOCUMENT_END)[:-1]


def readme(report: dict[str, Any]) -> str:
    """README.txt of a written corpus: the format, each source with its licence and sizes, NOTICE whole."""
    lines = [
        "dspark-lab real-text corpus (lab/realtext), written by `dspark-lab data --out`.",
        "",
        "One UTF-8 file per source and split: <source>.<split>.txt, splits train, val, test. Each document is",
        "followed by a line holding one form feed (U+000C); the documents are NFC, in the corpus's order, exactly",
        "as lab.realtext.texts(source, split) returns them. Tokens: lab-tokenizer ids, each document's closing",
        "<eos> included (as lab.realtext.token_stream holds them).",
        "",
        f"{'source':<8}{'licence':<15}{'MIX':>4}  {'documents (train/val/test)':<28}tokens (train/val/test)",
    ]
    for source, s in report["sources"].items():
        docs = "/".join(f"{s['splits'][sp]['documents']:,}" for sp in SPLITS)
        toks = "/".join(f"{s['splits'][sp]['tokens']:,}" for sp in SPLITS)
        lines.append(f"{source:<8}{s['licence']:<15}{s['mix']:>4}  {docs:<28}{toks}")
        lines.append(f"        {TEXT('about_' + source, 'en')}; {s['file']}")
    train = report["streams"]["train"]
    lines += [
        "",
        f"Training stream: {train['tokens']:,} tokens in {train['documents']:,} documents (every source MIX times).",
        "",
        "Sources and licences in full (lab/realtext/NOTICE):",
        "",
        NOTICE.read_text(encoding="utf-8").rstrip("\n"),
    ]
    return "\n".join(lines) + "\n"


def write(out: str | Path, report: dict[str, Any], lang: str = "en") -> list[Path]:
    """Write every source's splits and README.txt into `out` (built beside it and swapped in whole: interrupted, the
    previous folder stays as it was; only a new or empty folder or a corpus the lab wrote is replaced)."""
    from dspark_mini.files import folder_swap, write_atomic

    names = [f"{source}.{split}.txt" for source in SOURCES for split in SPLITS]
    with folder_swap(out, FOLDER_KIND, overwrite=True, lang=lang) as work:
        for source in SOURCES:
            for split in SPLITS:
                write_atomic(work / f"{source}.{split}.txt", file_text(texts(source, split)))
        write_atomic(work / "README.txt", readme(report))
    return [Path(out) / n for n in names] + [Path(out) / "README.txt"]


# ---- the command ------------------------------------------------------------------------------------------------
def add_arguments(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The options of `dspark-lab data` (lab/training/cli.py calls it on its subparser)."""
    h = Help("data", getattr(p, "lang", "en"))
    p.add_argument("--out", default=None, metavar="FOLDER", help=h("out"))
    add_json(p, h("json"))
    add_lang(p)
    return p


def check_lang_option(lang: Any) -> str:
    """--lang normalized to vi or en; anything else a ValueError naming the option and the allowed values."""
    key = lang.strip().lower() if isinstance(lang, str) else lang
    if key not in LANGS:
        raise ValueError(TEXT("bad_lang", "en", value=lang, allowed=", ".join(LANGS)))
    return key


def check(args: argparse.Namespace) -> None:
    """`data`'s options, before anything is counted or written: --lang, and an --out the lab may replace."""
    from dspark_mini.files import check_folder

    lang = check_lang_option(args.lang)
    if args.out is not None:
        if Path(args.out).is_file():
            raise ValueError(TEXT("not_folder", lang, value=args.out))
        check_folder(args.out, FOLDER_KIND, overwrite=True, lang=lang)  # a device node, a FIFO, another's folder…


def render(console: Any, report: dict[str, Any], lang: str) -> None:
    """The report as rich tables: counts per source and split, then each source's licence and what it is."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    t = Table(title=TEXT("title", lang), box=box.SIMPLE_HEAVY, title_justify="left")
    t.add_column(TEXT("source", lang))
    t.add_column(TEXT("split", lang))
    for key in ("documents", "characters", "tokens"):
        t.add_column(TEXT(key, lang), justify="right")
    t.add_column(TEXT("mix", lang), justify="right")
    rows = [(source, s["splits"], str(s["mix"])) for source, s in report["sources"].items()]
    rows.append((TEXT("total", lang), report["totals"], ""))
    for name, splits, mix in rows:
        for i, split in enumerate(SPLITS):
            c = splits[split]
            t.add_row(
                name if i == 0 else "",
                TEXT(split, lang),
                *(f"{c[k]:,}" for k in ("documents", "characters", "tokens")),
                mix if i == 0 else "",
                end_section=i == len(SPLITS) - 1,
            )
    console.print(t)
    s = Table(title=TEXT("sources_title", lang), box=box.SIMPLE_HEAVY, title_justify="left")
    for key in ("source", "licence", "what"):
        s.add_column(TEXT(key, lang))
    for source, d in report["sources"].items():
        licence = TEXT(d["licence"], lang) if d["licence"] in TEXT else d["licence"]
        s.add_row(source, licence, TEXT("about_" + source, lang))
    console.print(s)
    streams = report["streams"]
    console.print(TEXT("train_stream", lang, **streams["train"]))
    console.print(TEXT("held_out_streams", lang, val=streams["val"]["tokens"], test=streams["test"]["tokens"]))
    note = TEXT("note", lang, vocab=report["tokenizer"]["vocab_size"], domains=", ".join(DOMAINS))
    console.print(Text("ℹ " + note, style="yellow"))


def main(args: argparse.Namespace, console: Any = None) -> dict[str, Any]:
    """`dspark-lab data`: describe the corpus, write it with --out; prints tables or JSON → the report (with "out"
    and "files"). Bad options raise ValueError naming the option (the CLI turns it into exit code 2)."""
    from ..style import print_json

    check(args)
    lang = check_lang_option(args.lang)
    out = args.out
    if out is not None:
        say_symlink(out, "--out", lang)
    report = describe()
    files = [str(p) for p in write(out, report, lang)] if out is not None else []
    report |= {"out": out, "files": files}
    if args.json:
        print_json(report)
        return report
    if console is None:
        from rich.console import Console

        console = Console()
    render(console, report, lang)
    for f in files:
        console.print(TEXT("written", lang, path=f))
    return report

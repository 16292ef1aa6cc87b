"""`dspark-lab tokenize`: a text through the lab's byte-level BPE (step 1A), token by token.

Each token is shown with its id and its text; a byte that is not part of a whole UTF-8 character (an emoji or a
Chinese character the corpus never saw, spelled in bytes) is shown as `<0xNN>`. `--checkpoint DIR` reads the
`tokenizer.json` of a checkpoint folder instead, through the same class. Nothing here imports torch until it runs.
"""

from __future__ import annotations

import argparse
import unicodedata
from typing import Any

from ..options import Help, add_json, add_lang, command
from ..style import print_json
from ..text import Texts, check_lang, lang_table

COMMANDS = ("tokenize",)
MAX_TEXT_CHARS = 100_000  # the text argument: a long chapter; more belongs in a file, not a command line
TEXT = Texts(lang_table("tokenize", "text"), "tokenize")


def add_parsers(sub: Any, lang: str = "en") -> None:
    h = Help("tokenize", lang)
    t = command(sub, h)
    t.add_argument("text", help=h("text", most=h.number(MAX_TEXT_CHARS)))
    t.add_argument("--checkpoint", default=None, metavar="DIR", help=h("checkpoint"))
    add_lang(t)
    add_json(t, h("json"))


def check(args: argparse.Namespace, cfg: Any) -> None:
    if not 1 <= len(args.text) <= MAX_TEXT_CHARS:
        text = lang_table("messages", "tokenize")["too_long"][check_lang(args.lang)]
        raise ValueError(text.format(n=len(args.text), m=MAX_TEXT_CHARS))


def tokenize(text: str, tok: Any) -> dict[str, Any]:
    """The report: ids, one entry per token (id, piece, bytes in hex), counts and the round-trip check."""
    ids = tok.encode(text)
    tokens = []
    for i in ids:
        data = tok.token_bytes(i)
        tokens.append(
            {"id": i, "text": tok.piece(i), "bytes": None if data is None else data.hex(), "partial": tok.is_partial(i)}
        )
    return {
        "tokenizer": tok.source,
        "text": unicodedata.normalize("NFC", text),
        "ids": ids,
        "tokens": tokens,
        "count": len(ids),
        "characters": len(unicodedata.normalize("NFC", text)),
        "partial_tokens": sum(t["partial"] for t in tokens),
        "round_trip": tok.decode(ids) == unicodedata.normalize("NFC", text),
    }


def run(args: argparse.Namespace, console: Any, lang: str) -> None:
    from rich.markup import escape
    from rich.table import Table

    from dspark_mini.hf_tokenizer import HFTokenizer

    from . import bpe

    tok = HFTokenizer.from_folder(args.checkpoint if args.checkpoint is not None else bpe.FOLDER)
    report = tokenize(args.text, tok)
    if args.json:
        print_json(report)
        return
    table = Table(title=TEXT("title", lang, n=report["count"], c=report["characters"]))
    for key in ("pos", "id", "piece", "bytes"):
        table.add_column(TEXT(key, lang), justify="right" if key in ("pos", "id") else "left")
    for pos, t in enumerate(report["tokens"]):
        shown = escape(repr(t["text"])[1:-1])  # a newline or a tab shows as \n, \t
        table.add_row(str(pos), str(t["id"]), f"[red]{shown}[/red]" if t["partial"] else shown, t["bytes"] or "")
    console.print(table)
    if report["partial_tokens"]:
        console.print(TEXT("partial", lang, p=report["partial_tokens"], n=report["count"]))
    console.print(TEXT("round_trip", lang, ok="✓" if report["round_trip"] else "✗"))
    console.print(TEXT("source", lang, s=report["tokenizer"]), style="dim")

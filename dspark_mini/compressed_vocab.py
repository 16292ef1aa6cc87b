"""Engram's compressed vocabulary (step 1B): the key each token id is compressed by, for any tokenizer.

Engram (step 1B) reads a *compressed* id instead of the raw one: tokens whose text is equal after
NFKC → NFD → drop combining marks → lowercase → collapse whitespace (a lone space is kept as a sentinel)
→ strip, share one id (" Xin", "xin" → one id; "à", "á", "a" → one id). `normalize_text` is that rule exactly as
the reference applies it to any tokenizer's decoded texts; a token that is a piece of a character (its text holds
U+FFFD) keeps its own compressed id, keyed by its raw token string, as the reference does.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable

from tokenizers import Regex, normalizers

SPACE_SENTINEL = "\ue000"  # private-use char that keeps a lone space from vanishing under strip()


@functools.lru_cache(maxsize=1)
def _engram_normalizer() -> normalizers.Normalizer:
    """The reference's normalizer sequence, with the `tokenizers` library the reference builds it with (its Unicode
    tables decide which characters are marks or decompose: the 99,092 of the real vocabulary depend on them)."""
    return normalizers.Sequence(
        [
            normalizers.NFKC(),
            normalizers.NFD(),
            normalizers.StripAccents(),  # every combining mark (Mn, Mc, Me)
            normalizers.Lowercase(),  # character by character: no final-sigma rule
            normalizers.Replace(Regex(r"[ \t\r\n]+"), " "),  # only these four: a form feed stays a character
            normalizers.Replace(Regex(r"^ $"), SPACE_SENTINEL),  # a text of one space survives the strip
            normalizers.Strip(),  # Unicode White_Space at both ends
            normalizers.Replace(SPACE_SENTINEL, " "),
        ]
    )


def normalize_text(text: str) -> str:
    """Engram key of a token's decoded text, as the reference computes it: NFKC → NFD → drop combining marks →
    lowercase → each run of space, tab, CR and LF → one space → strip (a text that is exactly one space keeps it; a
    private-use U+E000 reads as a space). "" when nothing is left: the compressed vocabulary then keys the token by
    its text (`compressed_vocabulary`). "Xin", " xin" → "xin"; "chào", "Chao" → "chao"; "\n", " " → " "."""
    return _engram_normalizer().normalize_str(text)


def compressed_vocabulary(keys: Iterable[str]) -> tuple[tuple[int, ...], int]:
    """Token ids → compressed ids from each token's key (in id order): tokens with equal keys share one id, ids
    given in order of first appearance.  → (compress map [V], compressed vocabulary size)"""
    ids: dict[str, int] = {}
    cmap = tuple(ids.setdefault(k, len(ids)) for k in keys)
    return cmap, len(ids)

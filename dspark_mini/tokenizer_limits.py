"""How much longer a `tokenizer.json`'s normalizer, pre-tokenizer and decoder can make a text, bounded before they run.

A `Replace` step writes its content for every match of its pattern: one whose content is longer than what it
replaces makes the text longer, and a chain of such steps multiplies it (ten steps of ×10 turn a 10-character prompt
into 100 GB: the process aborts inside the library). Every step the `tokenizers` library offers has a worst case
that follows from its settings alone, written here as a bound  out ≤ a·n + b·k  (n: characters going in, k: pieces
going in — 1 for a normalizer, the tokens for a decoder; no decoder step makes more pieces than it gets):

  NFC, NFD ×4 and NFKC, NFKD ×18 (Unicode's own largest expansions, in code points); Lowercase ×3;
  BertNormalizer ×36 (CJK padding ×3, accents through NFD ×4, lowercase ×3); ByteLevel ×4 (UTF-8 bytes);
  Precompiled × its longest replacement string; Prepend + its length; Strip, StripAccents, Nmt ×1;
  Replace with a pattern string p and content c: × ⌈|c| / |p|⌉ (at least 1); with a regex or an empty pattern,
  which may match between any two characters: n + (n + 1)·|c|;
  pre-tokenizers split (×1), except ByteLevel (×4, + a space a piece) and Metaspace (+ one mark a piece);
  decoders shrink or keep the text (ByteLevel, ByteFallback, Fuse, Strip, Metaspace), WordPiece adds a space a
  token, BPEDecoder and CTC ×2 + 1 a token (an empty suffix or delimiter), Replace as above, per token;
  Sequence: the composition of its steps, in order.

`growth` gives (a, b) for one part's JSON (`component.__getstate__()`), or None for a step it cannot bound; the
tokenizer reader refuses a part whose a or b is above MAX_GROWTH, and every call checks a·n + b·k against
MAX_TEXT_WORK before the library runs.
"""

from __future__ import annotations

import base64
import binascii
import math
from typing import Any

MAX_GROWTH = 256  # a part may make a text at most this many times longer (the lab's own: ×1; BERT's: ×36)
MAX_TEXT_WORK = 2**24  # characters one encode or decode call may produce at worst (16 Mi: ≈ 0.3 GB in the library)
MAX_VOCAB_WORK = 2**26  # characters decoding every id alone may produce at worst, when a tokenizer is read

Bound = tuple[int, int]  # (a, b): out ≤ a·n + b·k
ONE: Bound = (1, 0)

NORMALIZER_FACTORS = {
    "NFC": 4,
    "NFD": 4,
    "NFKC": 18,
    "NFKD": 18,
    "Lowercase": 3,
    "BertNormalizer": 36,
    "ByteLevel": 4,
    "Strip": 1,
    "StripAccents": 1,
    "Nmt": 1,
}
SPLITTERS = (
    "Split",
    "Whitespace",
    "WhitespaceSplit",
    "Punctuation",
    "Digits",
    "BertPreTokenizer",
    "CharDelimiterSplit",
    "UnicodeScripts",
    "FixedLength",
)
SHRINKING_DECODERS = ("ByteLevel", "ByteFallback", "Fuse", "Strip", "Metaspace")


def then(first: Bound, second: Bound) -> Bound:
    """The bound of `first` followed by `second`: a₂(a₁n + b₁k) + b₂k."""
    (a1, b1), (a2, b2) = first, second
    return a1 * a2, a2 * b1 + b2


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def replace_bound(step: dict) -> Bound | None:
    """A Replace step (normalizer or decoder): its pattern is {"String": p} or {"Regex": r}; its content c."""
    content, pattern = _text(step.get("content")), step.get("pattern")
    if content is None or not isinstance(pattern, dict):
        return None
    p = _text(pattern.get("String"))
    if p:  # non-overlapping matches of a fixed string: at most n / |p| of them
        return max(1, math.ceil(len(content) / len(p))), 0
    return 1 + len(content), len(content)  # up to n + 1 matches (empty ones between characters)


def precompiled_bound(step: dict) -> Bound | None:
    """A SentencePiece character map: a trie, then its replacement strings, NUL-terminated; every match (≥ 1 byte of
    input) becomes one of them, so the longest one bounds the growth."""
    raw = step.get("precompiled_charsmap")
    if raw is None or raw == "":
        return ONE
    if not isinstance(raw, str):
        return None
    try:
        data = base64.b64decode(raw, validate=True)
    except (binascii.Error, ValueError):
        return None
    if len(data) < 4:
        return None
    trie = int.from_bytes(data[:4], "little")
    if 4 + trie > len(data):
        return None
    longest = max((len(s.decode("utf-8", "replace")) for s in data[4 + trie :].split(b"\0")), default=0)
    return max(1, longest), 0


def normalizer_bound(step: dict) -> Bound | None:
    kind = step.get("type")
    if kind in NORMALIZER_FACTORS:
        return NORMALIZER_FACTORS[kind], 0
    if kind == "Prepend":
        prefix = _text(step.get("prepend"))
        return None if prefix is None else (1, len(prefix))
    if kind == "Replace":
        return replace_bound(step)
    if kind == "Precompiled":
        return precompiled_bound(step)
    if kind == "Sequence":
        return sequence(step.get("normalizers"), normalizer_bound)
    return None


def pre_tokenizer_bound(step: dict) -> Bound | None:
    """Characters in, characters out: a split never adds any; the pieces are at most n + 1."""
    kind = step.get("type")
    if kind in SPLITTERS:
        return ONE
    if kind == "ByteLevel":  # each character → its UTF-8 bytes (≤ 4), and a space before each piece
        return (8, 4) if step.get("add_prefix_space") else (4, 0)
    if kind == "Metaspace":  # a space → the mark (one character), and a mark before each piece
        return ONE if step.get("prepend_scheme") == "never" else (2, 1)
    if kind == "Sequence":
        return sequence(step.get("pretokenizers"), pre_tokenizer_bound)
    return None


def decoder_bound(step: dict) -> Bound | None:
    kind = step.get("type")
    if kind in SHRINKING_DECODERS:
        return ONE
    if kind == "WordPiece":  # the prefix removed, a space added before a token
        return 1, 1
    if kind == "BPEDecoder":  # the suffix → a space: with an empty suffix, a space between every two characters
        return ONE if _text(step.get("suffix")) else (2, 1)
    if kind == "CTC":
        return 2, 1
    if kind == "Replace":
        return replace_bound(step)
    if kind == "Sequence":
        return sequence(step.get("decoders"), decoder_bound)
    return None


def sequence(steps: Any, bound) -> Bound | None:
    if not isinstance(steps, list):
        return None
    out = ONE
    for step in steps:
        b = bound(step) if isinstance(step, dict) else None
        if b is None:
            return None
        out = then(out, b)
    return out


PARTS = {"normalizer": normalizer_bound, "pre_tokenizer": pre_tokenizer_bound, "decoder": decoder_bound}


def growth(part: str, spec: dict | None) -> Bound | None:
    """(a, b) of one part ("normalizer", "pre_tokenizer", "decoder") from its JSON; (1, 0) for none; None when a
    step of it cannot be bounded."""
    if spec is None:
        return ONE
    return PARTS[part](spec) if isinstance(spec, dict) else None


def step_name(spec: Any) -> str:
    """The type of a part, for an error: the library's own names only (letters), never other text of the file."""
    kind = spec.get("type") if isinstance(spec, dict) else None
    return kind if isinstance(kind, str) and kind.isascii() and kind.isalpha() and len(kind) <= 40 else "a step"

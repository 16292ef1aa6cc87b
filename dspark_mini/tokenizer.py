"""Lab tokenizer: the small, human-readable vocabulary the lab model reads (step 1A, the input side).

Ids: 4 specials (<bos>=0, <eos>=1, <pad>=2 = the Engram pad id, <noise>=3 = the DSpark noise token), one
token per printable ASCII character (U+0020..U+007E) and newline, one per Vietnamese letter with diacritics (NFC,
lower and upper case, đ/Đ included), then a few hundred whole-word tokens — the readable vocabulary — and last
256 byte tokens `<0x00>` … `<0xFF>` (byte fallback). "▁" at the start of a token marks a leading space, so
"▁chào" is " chào". Encoding is a fixed greedy rule, not BPE, on the NFC form of the text:

    chunks  = regex ` ?[^\\W_]+ | .`   (optional single space + a run of Unicode letters/digits | one char)
    " word" → ▁word  |  " " + word  |  " " + chars        "word" → word  |  chars        other → its char
    a char outside the readable vocabulary (a tab, "€", "ß", an emoji, Chinese) → the byte tokens of its UTF-8

so nothing is refused and decode(encode(t)) == NFC(t) for every text: decode joins each run of consecutive byte
tokens back into bytes and reads them as UTF-8 (a run that is not valid UTF-8, e.g. a cut-off emoji, reads as
U+FFFD per bad sequence, never an error). NFD and NFC spellings of a text give the same ids. "_" is not part of
a word run (it is its own char token); "\\n" is a token, a tab is one byte token (<0x09>).

Engram (step 1B) reads a *compressed* id instead of the raw one: tokens whose text is equal after
NFKC → NFD → drop combining marks → lowercase → collapse whitespace (a lone space is kept as a sentinel)
→ strip, share one id ("Xin", "xin", "▁Xin", "▁xin" → one id; "à", "á", "a" → one id). `normalize_text` is that
rule exactly as the reference applies it to any tokenizer's decoded texts (`hf_tokenizer` uses it for a real
checkpoint's `tokenizer.json`); `normalize_token` reads a lab token's "▁" as its leading space first. A byte token
has no text of its own: it keeps its own compressed id, keyed by its raw token string ("<0xF0>"), as the reference
does for tokens whose decoded text holds U+FFFD.

Differs from the real model: DeepSeek-V4.1-Flash uses a 129,280-entry byte-level BPE (compressed to
99,092 ids for Engram); here the vocabulary is < 1,024 entries (≈ 510 readable + 256 bytes), readable, and
built deterministically in code. Specials are never produced by `encode` (the text "<bos>" encodes as five
characters, "<0xF0>" as six).
"""

from __future__ import annotations

import functools
import re
import unicodedata
from collections.abc import Iterable

import torch
from tokenizers import Regex, normalizers


class TokenizerError(ValueError):
    """A character or id that the lab vocabulary does not contain."""


SPACE_MARK = "▁"  # U+2581, marks a leading space inside a token's text
SPACE_SENTINEL = "\ue000"  # private-use char that keeps a lone space from vanishing under strip()
SPECIALS: tuple[str, ...] = ("<bos>", "<eos>", "<pad>", "<noise>")

# Vietnamese vowel bases (plain or with breve / circumflex / horn) and the five tone marks (+ no tone).
_VI_BASES: tuple[str, ...] = (
    "a",
    "a\u0306",
    "a\u0302",
    "e",
    "e\u0302",
    "i",
    "o",
    "o\u0302",
    "o\u031b",
    "u",
    "u\u031b",
    "y",
)
_VI_TONES: tuple[str, ...] = ("", "\u0300", "\u0301", "\u0309", "\u0303", "\u0323")

# Words with four tokens each: ▁word, word (sentence start), ▁Word and Word.
COMMON_WORDS: tuple[str, ...] = (
    "the",
    "this",
    "we",
    "in",
    "it",
    "what",
    "if",
    "print",
    "xin",
    "chào",
    "tôi",
    "các",
    "bạn",
    "hôm",
)

# Words with only the ▁word form (given exactly as they should be written).
WORDS: tuple[str, ...] = (
    # English function words
    "a",
    "an",
    "of",
    "to",
    "for",
    "how",
    "is",
    "and",
    "on",
    "with",
    "as",
    "at",
    "by",
    "from",
    "that",
    "be",
    "are",
    "was",
    "you",
    "I",
    "not",
    "or",
    "can",
    "each",
    "one",
    "two",
    "three",
    "next",
    "then",
    "so",
    "have",
    "has",
    "do",
    "does",
    "will",
    "all",
    "more",
    "new",
    "first",
    "last",
    "only",
    "same",
    "every",
    "which",
    "why",
    "yes",
    "no",
    "there",
    "they",
    "your",
    "after",
    "before",
    # talking about language models
    "token",
    "tokens",
    "model",
    "models",
    "layer",
    "layers",
    "attention",
    "head",
    "heads",
    "word",
    "words",
    "text",
    "data",
    "train",
    "training",
    "loss",
    "learn",
    "predict",
    "probability",
    "vector",
    "matrix",
    "weight",
    "weights",
    "input",
    "output",
    "hidden",
    "step",
    "sequence",
    "position",
    "memory",
    "cache",
    "key",
    "value",
    "query",
    "expert",
    "experts",
    "hash",
    "gram",
    "language",
    "large",
    "small",
    "number",
    "block",
    "draft",
    "context",
    "window",
    "softmax",
    "gate",
    "table",
    "router",
    "residual",
    "embedding",
    "vocabulary",
    "sentence",
    "DeepSeek",
    "DSpark",
    "Engram",
    # everyday English
    "hello",
    "good",
    "day",
    "today",
    "time",
    "people",
    "world",
    "name",
    "like",
    "know",
    "say",
    "see",
    "make",
    "very",
    "thank",
    "please",
    # small code and arithmetic
    "return",
    "else",
    "while",
    "range",
    "import",
    "None",
    "True",
    "False",
    "x",
    "y",
    "n",
    "i",
    "f",
    "len",
    "sum",
    "plus",
    "minus",
    # Vietnamese
    "nay",
    "học",
    "về",
    "là",
    "và",
    "của",
    "có",
    "không",
    "một",
    "những",
    "được",
    "cho",
    "với",
    "này",
    "trong",
    "người",
    "hình",
    "ngôn",
    "ngữ",
    "từ",
    "câu",
    "ta",
    "ngày",
    "đi",
    "làm",
    "biết",
    "rất",
    "cảm",
    "ơn",
    "tiếng",
    "Việt",
    "nói",
    "đọc",
    "viết",
    "hay",
    "đã",
    "sẽ",
    "đang",
    "thì",
    "mà",
    "nhưng",
    "khi",
    "để",
    "ra",
    "vào",
    "lớn",
    "nhỏ",
    "máy",
    "tính",
    "dữ",
    "liệu",
    "bài",
    "hai",
    "ba",
    "số",
    "cộng",
    "trừ",
    "bằng",
    "lớp",
    "dự",
    "đoán",
    "tiếp",
    "theo",
    "nhớ",
    "chú",
    "ý",
    "chúng",
    "mô",
    "thầy",
    "cô",
    "giáo",
    "hỏi",
    "trả",
    "lời",
    "đúng",
    "sai",
)

# Bare forms of a few words that usually open a line ("def" has no ▁def: " def" is " " + "def").
BARE_WORDS: tuple[str, ...] = ("def", "return")

_CHUNK_RE = re.compile(r" ?[^\W_]+|.", re.DOTALL)
BYTE_TOKENS: tuple[str, ...] = tuple(f"<0x{b:02X}>" for b in range(256))  # byte fallback, "<0x00>" … "<0xFF>"
MAX_VOCAB = 1024  # the lab vocabulary stays small enough to read (and for the lab config's widths)


def _vietnamese_letters() -> list[str]:
    """Every Vietnamese letter that is not plain ASCII, lower case then upper case, as one NFC char."""
    lower: list[str] = []
    for base in _VI_BASES:
        for tone in _VI_TONES:
            ch = unicodedata.normalize("NFC", base + tone)
            assert len(ch) == 1, f"no precomposed form for {base + tone!r}"
            if not ch.isascii():
                lower.append(ch)
    lower.append("đ")
    return lower + [ch.upper() for ch in lower]


def _build_vocab() -> tuple[str, ...]:
    vocab: list[str] = list(SPECIALS)
    vocab += ["\n"] + [chr(c) for c in range(32, 127)]  # newline, then printable ASCII
    vocab += _vietnamese_letters()
    words: list[str] = []
    for w in COMMON_WORDS:
        cap = w[0].upper() + w[1:]
        words += [SPACE_MARK + w, w, SPACE_MARK + cap, cap]
    words += [SPACE_MARK + w for w in WORDS]
    words += list(BARE_WORDS)
    seen = set(vocab)
    for w in words:  # single-letter bare forms ("a") already exist as chars; repeated words are skipped
        if w not in seen:
            seen.add(w)
            vocab.append(w)
    return tuple(vocab) + BYTE_TOKENS  # bytes last: the readable ids are the same with or without them


def utf8_bytes(ch: str) -> bytes:
    """The UTF-8 bytes of one char; a lone surrogate (a Python str can hold one) keeps its 3-byte form."""
    return ch.encode("utf-8", "surrogatepass")


def decode_utf8(data: bytes) -> str:
    """Bytes → text, never raising: valid UTF-8 (lone surrogates included, as `utf8_bytes` writes them) decodes
    exactly; each ill-formed or cut-off sequence becomes one U+FFFD (Python's "replace" rule)."""
    out: list[str] = []
    while data:
        try:
            out.append(data.decode("utf-8", "surrogatepass"))
            break
        except UnicodeDecodeError as e:
            out.append(data[: e.start].decode("utf-8", "surrogatepass") + "\ufffd")
            data = data[e.end :]
    return "".join(out)


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


def normalize_token(text: str) -> str:
    """Engram key of a lab token's text ("▁" is its leading space): `normalize_text`."""
    return normalize_text(text.replace(SPACE_MARK, " "))


def compressed_vocabulary(keys: Iterable[str]) -> tuple[tuple[int, ...], int]:
    """Token ids → compressed ids from each token's key (in id order): tokens with equal keys share one id, ids
    given in order of first appearance.  → (compress map [V], compressed vocabulary size)"""
    ids: dict[str, int] = {}
    cmap = tuple(ids.setdefault(k, len(ids)) for k in keys)
    return cmap, len(ids)


class LabTokenizer:
    """Immutable lab vocabulary with exact-round-trip encode/decode and the Engram compressed map."""

    bos: int = 0
    eos: int = 1
    pad: int = 2  # also the Engram pad id (cfg.engram_pad_id)
    noise: int = 3  # DSpark noise token (cfg.dspark_noise_token_id)

    def __init__(self) -> None:
        self.vocab: tuple[str, ...] = _build_vocab()
        self.vocab_size: int = len(self.vocab)
        self.byte_offset: int = self.vocab_size - len(BYTE_TOKENS)  # id of <0x00>; byte b has id byte_offset + b
        assert len(set(self.vocab)) == self.vocab_size, "duplicate token text"
        assert self.vocab_size <= MAX_VOCAB, f"lab vocabulary has {self.vocab_size} > {MAX_VOCAB} tokens"
        self._ids: dict[str, int] = {t: i for i, t in enumerate(self.vocab)}
        for t in self.vocab[len(SPECIALS) : self.byte_offset]:  # every word must be spellable with the char tokens
            for ch in t.replace(SPACE_MARK, " "):
                assert ch in self._ids, f"token {t!r} uses unsupported char {ch!r}"
        # raw id → compressed id; a byte token is keyed by its raw string ("<0xF0>"), as the reference keys a token
        # whose decoded text holds U+FFFD; a text that normalizes to nothing is keyed by itself (none in the vocabulary)
        keys = [t if self.is_byte(i) else (normalize_token(t) or t) for i, t in enumerate(self.vocab)]
        readable = set(keys[: self.byte_offset])
        assert not readable.intersection(keys[self.byte_offset :]), "a byte token collides with a readable key"
        self.compress_map, self.compressed_vocab_size = compressed_vocabulary(keys)

    # ---- text ↔ ids -----------------------------------------------------------------------------
    def is_byte(self, i: int) -> bool:
        """Whether id i is one of the 256 byte-fallback tokens."""
        return self.byte_offset <= i < self.vocab_size

    def _char_ids(self, ch: str) -> list[int]:
        """One char → its readable token, or (outside the readable vocabulary) the byte tokens of its UTF-8."""
        i = self._ids.get(ch)
        if i is not None and len(SPECIALS) <= i < self.byte_offset:
            return [i]
        return [self.byte_offset + b for b in utf8_bytes(ch)]

    def encode(self, text: str) -> list[int]:
        """Text → ids by the greedy chunk rule in the module docstring, on the NFC form; never refuses a char."""
        if not isinstance(text, str):
            raise TokenizerError(f"text must be a str (got {type(text).__name__})")
        ids: list[int] = []
        for m in _CHUNK_RE.finditer(unicodedata.normalize("NFC", text)):
            chunk = m.group()
            if len(chunk) > 1 and chunk[0] == " ":
                word = chunk[1:]
                if SPACE_MARK + word in self._ids:
                    ids.append(self._ids[SPACE_MARK + word])
                    continue
                ids += self._char_ids(" ")
                chunk = word
            if chunk in self._ids and len(chunk) > 1:
                ids.append(self._ids[chunk])
            else:
                for ch in chunk:
                    ids += self._char_ids(ch)
        return ids

    def _check_id(self, i: int) -> int:
        i = int(i)
        if not 0 <= i < self.vocab_size:
            raise TokenizerError(f"token id {i} is out of range: ids run 0..{self.vocab_size - 1}")
        return i

    def decode(self, ids: Iterable[int]) -> str:
        """Ids → text; specials decode to their names ("<bos>"); each run of byte tokens is joined and read as
        UTF-8 (`decode_utf8`: a cut-off sequence gives U+FFFD, never an error); a bad id raises TokenizerError."""
        out: list[str] = []
        run = bytearray()  # the pending run of byte tokens
        for i in ids:
            i = self._check_id(i)
            if self.is_byte(i):
                run.append(i - self.byte_offset)
                continue
            if run:
                out.append(decode_utf8(bytes(run)))
                run.clear()
            out.append(self.vocab[i].replace(SPACE_MARK, " "))
        if run:
            out.append(decode_utf8(bytes(run)))
        return "".join(out)

    def token_text(self, i: int) -> str:
        """Display form of one token: the vocabulary text, "▁" for a leading space (and for " " itself), a byte
        token as its name ("<0xF0>")."""
        t = self.vocab[self._check_id(i)]
        return SPACE_MARK if t == " " else t

    def token_id(self, text: str) -> int:
        """Id of a token given by its vocabulary text (e.g. "▁model"); raises if absent."""
        if text not in self._ids:
            raise TokenizerError(f"{text!r} is not a token of the lab vocabulary")
        return self._ids[text]

    # ---- Engram compressed ids ------------------------------------------------------------------
    def compress(self, ids: torch.Tensor) -> torch.Tensor:
        """Raw ids (any shape) → compressed ids, same shape, int64."""
        ids = torch.as_tensor(ids)
        if ids.dtype.is_floating_point or ids.dtype.is_complex or ids.dtype == torch.bool:
            raise TokenizerError(f"token ids must be an integer tensor, got dtype {ids.dtype}")
        ids = ids.long()
        if ids.numel() > 0:
            lo, hi = int(ids.min()), int(ids.max())
            if lo < 0 or hi >= self.vocab_size:
                bad = lo if lo < 0 else hi
                raise TokenizerError(f"token id {bad} is out of range: ids run 0..{self.vocab_size - 1}")
        table = torch.tensor(self.compress_map, dtype=torch.long, device=ids.device)  # [V]
        return table[ids]

    def __len__(self) -> int:
        return self.vocab_size

    def __repr__(self) -> str:
        return f"LabTokenizer(vocab_size={self.vocab_size}, compressed_vocab_size={self.compressed_vocab_size})"


@functools.lru_cache(maxsize=1)
def default_tokenizer() -> LabTokenizer:
    """The lab tokenizer (built once; it is immutable)."""
    return LabTokenizer()


class WiderVocabTokenizer:
    """The lab tokenizer's ids read inside a larger id space: an untrained real-width model (`flash-cpu`, 129,280
    ids) has no tokenizer of its own here, and every lab id is a valid id there. encode is the lab's;
    an id past the lab vocabulary shows as "⟨id⟩" (a seeded-init model predicts any of the model's ids)."""

    def __init__(self, lab: LabTokenizer, vocab_size: int):
        if vocab_size < lab.vocab_size:
            raise TokenizerError(f"vocab_size {vocab_size} is smaller than the lab vocabulary ({lab.vocab_size})")
        self.lab, self.vocab_size = lab, vocab_size
        self.bos, self.eos, self.pad, self.noise = lab.bos, lab.eos, lab.pad, lab.noise
        self.vocab: tuple[str, ...] = lab.vocab + tuple(f"⟨{i}⟩" for i in range(lab.vocab_size, vocab_size))  # [V]

    def encode(self, text: str) -> list[int]:
        return self.lab.encode(text)

    def _check_id(self, i: int) -> int:
        i = int(i)
        if not 0 <= i < self.vocab_size:
            raise TokenizerError(f"token id {i} is out of range: ids run 0..{self.vocab_size - 1}")
        return i

    def decode(self, ids: Iterable[int]) -> str:
        """Ids → text: lab ids as the lab decodes them, the others as "⟨id⟩"."""
        return "".join(self.vocab[self._check_id(i)].replace(SPACE_MARK, " ") for i in ids)

    def token_text(self, i: int) -> str:
        i = self._check_id(i)
        return self.lab.token_text(i) if i < self.lab.vocab_size else self.vocab[i]

    def __len__(self) -> int:
        return self.vocab_size

    def __repr__(self) -> str:
        return f"WiderVocabTokenizer(lab ids {self.lab.vocab_size} of vocab_size={self.vocab_size})"

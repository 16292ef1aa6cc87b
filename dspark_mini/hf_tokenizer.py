"""A real checkpoint's tokenizer (step 1A at real scale): its `tokenizer.json`, read with the `tokenizers` library.

DeepSeek-V4.1-Flash ships a byte-level BPE of 129,280 ids as `tokenizer.json` (the Hugging Face `tokenizers`
format); `tokenizers` encodes and decodes it, nothing here re-implements BPE. `HFTokenizer` offers what generation
and Engram read from the lab's `LabTokenizer`: encode / decode, vocab_size, token_text, the Engram compressed
vocabulary (compress_map, compressed_vocab_size, compress) and the bos / eos / pad ids.

The compressed vocabulary is derived as the reference derives it: every id is decoded on its own with the raw
tokenizer (special tokens kept); a text holding U+FFFD (a piece of a multi-byte character, e.g. a lone byte
≥ 0x80) is keyed by the token's raw string, any other by `tokenizer.normalize_text` (the lab tokenizer's own rule:
NFKC → NFD → drop marks → lowercase → collapse whitespace → strip, a lone space kept), or by its text when that
leaves nothing; equal keys share one compressed id, ids given in order of first appearance. For the real
vocabulary that gives 99,092 ids (the dossier; every Engram hash multiplier depends on that number).
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable
from pathlib import Path

import torch
from tokenizers import Tokenizer

from .jsonlimits import MAX_DATA_BYTES, JSONLimitError, loads, read_json
from .tokenizer import TokenizerError, compressed_vocabulary, normalize_text

TOKENIZER_FILE = "tokenizer.json"
CONFIG_FILE = "tokenizer_config.json"  # optional: names the bos / eos / pad tokens
MAX_TOKENIZER_BYTES = MAX_DATA_BYTES  # 64 MiB: DeepSeek's tokenizer.json is about 8 MB
REPLACEMENT = "\ufffd"  # what a decoder writes for bytes that are no whole UTF-8 character
BYTE_TOKEN = re.compile(r"<0x[0-9A-F]{2}>")  # a byte-fallback token's raw string, and how a stray byte is shown


def _byte_table() -> dict[str, int]:
    """GPT-2's byte-level alphabet, inverted: the printable character that stands for each of the 256 bytes."""
    keep = [*range(ord("!"), ord("~") + 1), *range(ord("¡"), ord("¬") + 1), *range(ord("®"), ord("ÿ") + 1)]
    shifted = [b for b in range(256) if b not in keep]
    return {chr(b): b for b in keep} | {chr(256 + n): b for n, b in enumerate(shifted)}


UNICODE_TO_BYTE: dict[str, int] = _byte_table()


def show_bytes(data: bytes) -> str:
    """Bytes as text, each byte that is not part of a whole UTF-8 character written `<0xNN>`."""
    text = data.decode("utf-8", errors="surrogateescape")  # a stray byte b → the lone surrogate U+DC00 + b
    return "".join(f"<0x{ord(c) - 0xDC00:02X}>" if "\udc80" <= c <= "\udcff" else c for c in text)


class HFTokenizer:
    """A `tokenizers.Tokenizer` with the lab tokenizer's interface and the Engram compressed vocabulary."""

    def __init__(
        self,
        tokenizer: Tokenizer,
        bos: int | None = None,
        eos: int | None = None,
        pad: int | None = None,
        source: str = "tokenizer",
    ):
        self.tokenizer, self.source = tokenizer, source
        self.vocab_size: int = tokenizer.get_vocab_size(with_added_tokens=True)
        raw = [tokenizer.id_to_token(i) for i in range(self.vocab_size)]  # [V] raw token strings
        holes = [i for i, t in enumerate(raw) if t is None]
        if holes:
            raise TokenizerError(
                f"{source}: token ids must run 0..{self.vocab_size - 1} without gaps; id {holes[0]} has no token "
                f"({len(holes):,} missing)"
            )
        self.raw: tuple[str, ...] = tuple(raw)
        texts = tokenizer.decode_batch([[i] for i in range(self.vocab_size)], skip_special_tokens=False)  # [V]
        self.texts: tuple[str, ...] = tuple(texts)  # each id decoded on its own
        keys = map(self.engram_key, range(self.vocab_size))
        self.compress_map, self.compressed_vocab_size = compressed_vocabulary(keys)  # [V] raw id → compressed id
        for i in (bos, eos, pad):
            if i is not None:
                self._check_id(i)
        self.bos, self.eos, self.pad = bos, eos, pad
        self.specials = frozenset(
            tokenizer.token_to_id(t.content) for t in tokenizer.get_added_tokens_decoder().values() if t.special
        )
        self.byte_level = type(tokenizer.decoder).__name__ == "ByteLevel"

    @classmethod
    def from_folder(cls, folder: str | os.PathLike) -> HFTokenizer:
        """The tokenizer of a checkpoint folder: `tokenizer.json`, and the bos / eos / pad tokens that
        `tokenizer_config.json` names when the folder has one (a name or an {"content": name} object each)."""
        folder = Path(folder)
        path = folder / TOKENIZER_FILE
        if not path.is_file():
            raise TokenizerError(f"{folder}: no {TOKENIZER_FILE} (a checkpoint folder holds its tokenizer there)")
        tok = read_tokenizer(path)
        specials: dict[str, int | None] = {"bos": None, "eos": None, "pad": None}
        config = folder / CONFIG_FILE
        if config.is_file():
            try:
                doc = read_json(config, MAX_DATA_BYTES)
            except JSONLimitError as e:
                raise TokenizerError(f"{config}: not a readable tokenizer config: it {e}") from None
            except OSError as e:
                raise TokenizerError(f"{config}: cannot be read ({e.strerror})") from None
            if not isinstance(doc, dict):
                raise TokenizerError(f"{config}: must hold a JSON object (got {type(doc).__name__})")
            for name in specials:
                specials[name] = special_id(tok, doc.get(f"{name}_token"), f"{config}: {name}_token")
        return cls(tok, **specials, source=str(path))

    # ---- text ↔ ids -----------------------------------------------------------------------------
    def encode(self, text: str) -> list[int]:
        """Text → ids, no special tokens added (the lab tokenizer adds none either)."""
        if not isinstance(text, str):
            raise TokenizerError(f"text must be a str, got {type(text).__name__}")
        return self.tokenizer.encode(text, add_special_tokens=False).ids

    def decode(self, ids: Iterable[int]) -> str:
        """Ids → text, special tokens written out; a bad id raises TokenizerError."""
        return self.tokenizer.decode([self._check_id(i) for i in ids], skip_special_tokens=False)

    def _check_id(self, i: int) -> int:
        i = int(i)
        if not 0 <= i < self.vocab_size:
            raise TokenizerError(f"token id {i} is out of range: ids run 0..{self.vocab_size - 1}")
        return i

    def token_text(self, i: int) -> str:
        """Display form of one token: its text decoded on its own, or its raw string when that is a piece of a
        character (the decoder would show U+FFFD)."""
        i = self._check_id(i)
        t = self.texts[i]
        return self.raw[i] if REPLACEMENT in t else t

    def token_bytes(self, i: int) -> bytes | None:
        """The bytes token i stands for, or None for a special token (<bos>, <noise>, …). A byte-level token's
        string maps back through the GPT-2 byte table; a byte-fallback token `<0xNN>` is that byte; any other
        token is its decoded text in UTF-8."""
        i = self._check_id(i)
        raw = self.raw[i]
        if i in self.specials:
            return None
        if BYTE_TOKEN.fullmatch(raw):
            return bytes([int(raw[3:5], 16)])
        if self.byte_level and all(c in UNICODE_TO_BYTE for c in raw):
            return bytes(UNICODE_TO_BYTE[c] for c in raw)
        return self.texts[i].encode("utf-8")

    def piece(self, i: int) -> str:
        """What `dspark-lab tokenize` shows for token i: its text, with every byte that is not part of a whole
        UTF-8 character written `<0xNN>` ("Ġsá»" → " s<0xE1><0xBB>"); a special token by its name."""
        data = self.token_bytes(i)
        return self.raw[i] if data is None else show_bytes(data)

    def is_partial(self, i: int) -> bool:
        """True when token i holds a byte that is not part of a whole UTF-8 character (a piece of one)."""
        data = self.token_bytes(i)
        return data is not None and any("\udc80" <= c <= "\udcff" for c in data.decode("utf-8", "surrogateescape"))

    @property
    def vocab(self) -> tuple[str, ...]:
        """Every token's display form, by id (as `LabTokenizer.vocab` lists its token texts)."""
        return tuple(self.token_text(i) for i in range(self.vocab_size))

    def token_id(self, token: str) -> int:
        """Id of a token given by its raw string (as tokenizer.json spells it); raises if absent."""
        i = self.tokenizer.token_to_id(token)
        if i is None:
            raise TokenizerError(f"{token!r} is not a token of {self.source}")
        return i

    # ---- Engram compressed ids ------------------------------------------------------------------
    def engram_key(self, i: int) -> str:
        """What token i is keyed by in the compressed vocabulary (see the module docstring)."""
        text = self.texts[i]
        if REPLACEMENT in text:
            return self.raw[i]
        return normalize_text(text) or text

    def compress(self, ids: torch.Tensor) -> torch.Tensor:
        """Raw ids (any shape) → compressed ids, same shape, int64."""
        ids = torch.as_tensor(ids)
        if ids.dtype.is_floating_point or ids.dtype.is_complex or ids.dtype == torch.bool:
            raise TokenizerError(f"token ids must be an integer tensor, got dtype {ids.dtype}")
        ids = ids.long()
        if ids.numel() > 0:
            lo, hi = int(ids.min()), int(ids.max())
            if lo < 0 or hi >= self.vocab_size:
                raise TokenizerError(
                    f"token id {lo if lo < 0 else hi} is out of range: ids run 0..{self.vocab_size - 1}"
                )
        return torch.tensor(self.compress_map, dtype=torch.long, device=ids.device)[ids]

    def __len__(self) -> int:
        return self.vocab_size

    def __repr__(self) -> str:
        return (
            f"HFTokenizer({self.source!r}, vocab_size={self.vocab_size}, "
            f"compressed_vocab_size={self.compressed_vocab_size})"
        )


def read_tokenizer(path: str | os.PathLike) -> Tokenizer:
    """A `tokenizer.json`, size- and nesting-checked before the library parses it; one clear error otherwise."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            data = f.read(MAX_TOKENIZER_BYTES + 1)
        loads(data, MAX_TOKENIZER_BYTES)  # refuses a file too large, too deep or not JSON, without echoing it
        return Tokenizer.from_str(data.decode("utf-8"))
    except JSONLimitError as e:
        raise TokenizerError(f"{path}: not a readable {TOKENIZER_FILE}: it {e}") from None
    except OSError as e:
        raise TokenizerError(f"{path}: cannot be read ({e.strerror})") from None
    except Exception as e:  # the library's own parse error (its message names a line and column, not the text)
        raise TokenizerError(f"{path}: not a tokenizers {TOKENIZER_FILE} ({type(e).__name__}: {e})") from None


def special_id(tok: Tokenizer, entry, where: str) -> int | None:
    """The id of a special token named in tokenizer_config.json (a string, an {"content": ...} object, or null)."""
    if entry is None:
        return None
    name = entry.get("content") if isinstance(entry, dict) else entry
    if not isinstance(name, str):
        raise TokenizerError(f"{where} must be a token name or an object with a 'content' name")
    i = tok.token_to_id(name)
    if i is None:
        raise TokenizerError(f"{where} = {name!r} is not a token of the tokenizer")
    return i

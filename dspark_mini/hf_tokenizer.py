"""A real checkpoint's tokenizer (step 1A at real scale): its `tokenizer.json`, read with the `tokenizers` library.

DeepSeek-V4.1-Flash ships a byte-level BPE of 129,280 ids as `tokenizer.json` (the Hugging Face `tokenizers`
format); `tokenizers` encodes and decodes it, nothing here re-implements BPE. The lab's own tokenizer (a byte-level
BPE of 8,192 ids in dspark_mini/lab_tokenizer/) is read by the same class. `HFTokenizer` offers what generation and
Engram read: encode / decode, vocab_size, token_text, the Engram compressed vocabulary (compress_map,
compressed_vocab_size, compress) and the bos / eos / pad (and the lab's noise) ids.

The compressed vocabulary is derived as the reference derives it: every id is decoded on its own with the raw
tokenizer (special tokens kept); a text holding U+FFFD (a piece of a multi-byte character, e.g. a lone byte
≥ 0x80) is keyed by the token's raw string, any other by `tokenizer.normalize_text` (the lab tokenizer's own rule:
NFKC → NFD → drop marks → lowercase → collapse whitespace → strip, a lone space kept), or by its text when that
leaves nothing; equal keys share one compressed id, ids given in order of first appearance. For the real
vocabulary that gives 99,092 ids (the real tokenizer's; every Engram hash multiplier depends on that number).

A `tokenizer.json` is a file from elsewhere, read before anything else runs, so it is bounded first
(`read_tokenizer`, `folder_file`): it must be a regular file inside its folder (a FIFO, a folder, a dangling link
or a link leading out of the folder is refused), at most 32 MiB (DeepSeek's is about 8 MB; a 60 MB one took
≈ 4.6 GB to read), nested at most 64 deep (`jsonlimits`), with at most 524,288 ids (4× the real 129,280), and
its normalizer, pre-tokenizer and decoder may make a text at most 256× longer (`tokenizer_limits`: a chain of
`Replace` steps is refused). Every call into the library is checked against the most it may write first and
guarded: a panic of the library (a regex that backtracks past its limit raises pyo3's PanicException, a
BaseException) and its other errors (an unknown token missing from the vocabulary) become one TokenizerError,
and a symbol the vocabulary cannot spell is named instead of being dropped. No error quotes the file's text.
"""

from __future__ import annotations

import json
import os
import re
import stat
import sys
import tempfile
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

import torch
from tokenizers import Tokenizer

from .compressed_vocab import compressed_vocabulary, normalize_text
from .jsonlimits import JSONLimitError, checked_text, file_kind, loads, read_bytes, read_json
from .tokenizer_limits import MAX_GROWTH, MAX_TEXT_WORK, MAX_VOCAB_WORK, ONE, Bound, growth, step_name, then

TOKENIZER_FILE = "tokenizer.json"
CONFIG_FILE = "tokenizer_config.json"  # optional: names the bos / eos / pad tokens
MAX_TOKENIZER_BYTES = 32 * 2**20  # 32 MiB: DeepSeek's tokenizer.json is about 8 MB
MAX_CONFIG_BYTES = 2**20  # tokenizer_config.json: a few hundred bytes in practice
MAX_TOKENIZER_IDS = 2**19  # 524,288 ids: 4× DeepSeek's 129,280 (reading one costs ≈ 1 kB an id)
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


class TokenizerError(ValueError):
    """A text or id that a tokenizer cannot read (an id out of range, a file that is not a tokenizer)."""


class HFTokenizer:
    """A `tokenizers.Tokenizer` with the lab tokenizer's interface and the Engram compressed vocabulary."""

    def __init__(
        self,
        tokenizer: Tokenizer,
        bos: int | None = None,
        eos: int | None = None,
        pad: int | None = None,
        noise: int | None = None,
        source: str = "tokenizer",
    ):
        self.tokenizer, self.source = tokenizer, source
        tokenizer.encode_special_tokens = True  # a special token comes from code, never from text ("<bos>" is text)
        self.vocab_size: int = tokenizer.get_vocab_size(with_added_tokens=True)
        check_ids(self.vocab_size, source)
        parts = {part: bounded_part(tokenizer, part, source) for part in ("normalizer", "pre_tokenizer", "decoder")}
        self.encode_bound: Bound = then(parts["normalizer"][0], parts["pre_tokenizer"][0])  # chars → chars
        self.decode_bound: Bound = parts["decoder"][0]  # token chars, tokens → chars
        self.may_drop = may_drop_symbols(tokenizer, parts["pre_tokenizer"][1])
        raw = [tokenizer.id_to_token(i) for i in range(self.vocab_size)]  # [V] raw token strings
        holes = [i for i, t in enumerate(raw) if t is None]
        if holes:
            raise TokenizerError(
                f"{source}: token ids must run 0..{self.vocab_size - 1} without gaps; id {holes[0]} has no token "
                f"({len(holes):,} missing)"
            )
        self.raw: tuple[str, ...] = tuple(raw)
        a, b = self.decode_bound
        work = a * sum(map(len, raw)) + b * self.vocab_size  # every id decoded alone, at worst
        if work > MAX_VOCAB_WORK:
            raise TokenizerError(
                f"{source}: decoding its {self.vocab_size:,} ids one by one could write {work:,} characters "
                f"(its decoder: up to {a:,}× a token + {b:,}): allowed at most {MAX_VOCAB_WORK:,}"
            )
        ids = [[i] for i in range(self.vocab_size)]
        texts = self._library("decode its vocabulary", tokenizer.decode_batch, ids, skip_special_tokens=False)
        self.texts: tuple[str, ...] = tuple(texts)  # [V] each id decoded on its own
        keys = map(self.engram_key, range(self.vocab_size))
        self.compress_map, self.compressed_vocab_size = compressed_vocabulary(keys)  # [V] raw id → compressed id
        for i in (bos, eos, pad, noise):
            if i is not None:
                self._check_id(i)
        self.bos, self.eos, self.pad = bos, eos, pad
        self.noise = noise  # DSpark's noise token: the lab's own config names it ("noise_token"); a real one has none
        self.specials = frozenset(
            tokenizer.token_to_id(t.content) for t in tokenizer.get_added_tokens_decoder().values() if t.special
        )
        self.byte_level = type(tokenizer.decoder).__name__ == "ByteLevel"

    @classmethod
    def from_folder(cls, folder: str | os.PathLike, vocab_size: int | None = None) -> HFTokenizer:
        """The tokenizer of a checkpoint folder: `tokenizer.json`, and the bos / eos / pad tokens that
        (and the lab's <noise>) `tokenizer_config.json` names when the folder has one (a name or an {"content": name}
        object each).
        vocab_size: the ids the model has (its config's); a tokenizer of another size is refused before its
        vocabulary is derived (the costly part of reading one)."""
        folder = Path(folder)
        path = folder_file(folder, TOKENIZER_FILE)
        if path is None:
            raise TokenizerError(f"{folder}: no {TOKENIZER_FILE} (a checkpoint folder holds its tokenizer there)")
        tok = read_tokenizer(path)
        if vocab_size is not None and tok.get_vocab_size(with_added_tokens=True) != vocab_size:
            raise TokenizerError(
                f"{path}: {tok.get_vocab_size(with_added_tokens=True):,} token ids, but config.json says "
                f"vocab_size = {vocab_size:,}: allowed the tokenizer of the checkpoint's own vocabulary"
            )
        specials: dict[str, int | None] = {"bos": None, "eos": None, "pad": None, "noise": None}
        config = folder_file(folder, CONFIG_FILE)
        if config is not None:
            try:
                doc = read_json(config, MAX_CONFIG_BYTES, regular_only=True)
            except JSONLimitError as e:
                raise TokenizerError(f"{config}: not a readable tokenizer config: it {e}") from None
            except OSError as e:
                raise TokenizerError(f"{config}: cannot be read ({e.strerror})") from None
            if not isinstance(doc, dict):
                raise TokenizerError(f"{config}: must hold a JSON object (got {type(doc).__name__})")
            for name in specials:
                specials[name] = special_id(tok, doc.get(f"{name}_token"), f"{config}: {name}_token")
        return cls(tok, **specials, source=str(path))

    # ---- calls into the library -----------------------------------------------------------------
    def _library(self, what: str, call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """`call` (a method of the `tokenizers` library) with its failures as one TokenizerError: see `library`."""
        return library(f"{self.source}: cannot {what}", call, *args, **kwargs)

    def _check_work(self, what: str, bound: Bound, chars: int, pieces: int, limit: str) -> None:
        a, b = bound
        work = a * chars + b * pieces
        if work > MAX_TEXT_WORK:
            raise TokenizerError(
                f"{self.source}: cannot {what}: {chars:,} characters, which its {limit} may make up to "
                f"{work:,}: allowed at most {MAX_TEXT_WORK:,} (a shorter text)"
            )

    # ---- text ↔ ids -----------------------------------------------------------------------------
    def encode(self, text: str) -> list[int]:
        """Text → ids, no special tokens added, and none read from the text: "<bos>" in a text is its characters'
        ids, never id 0. A symbol the vocabulary cannot spell (no byte fallback, no unknown token) is a
        TokenizerError naming it, never dropped."""
        if not isinstance(text, str):
            raise TokenizerError(f"text must be a str, got {type(text).__name__}")
        self._check_work("encode the text", self.encode_bound, len(text), 1, "normalizer and pre-tokenizer")
        try:
            enc = self._library("encode the text", self.tokenizer.encode, text, add_special_tokens=False)
        except TokenizerError as e:
            unseen = self._unseen(text)
            if unseen is None:
                raise
            raise TokenizerError(unseen) from e
        if self.may_drop:  # a BPE without an unknown token leaves out what it cannot spell, silently
            unseen = self._unseen(text)
            if unseen:
                raise TokenizerError(unseen)
        return enc.ids

    def _unseen(self, text: str) -> str | None:
        """The error naming the first character of `text` that the vocabulary cannot spell (encoded alone it gives
        no id, or an error, though the normalizer and pre-tokenizer keep it), or None. Each distinct character is
        tried once."""
        tried: set[str] = set()
        for pos, ch in enumerate(text):
            if ch in tried or ch.isspace():
                continue
            tried.add(ch)
            try:
                enc = library("", self.tokenizer.encode, ch, add_special_tokens=False)
            except TokenizerError:
                enc = None
            if enc is not None and (enc.ids or not self._kept(ch)):
                continue
            return (
                f"{self.source}: cannot encode the text: character {pos:,} ({ch!r}, U+{ord(ch):04X}) is not in its "
                "vocabulary and it has no unknown token: allowed text its vocabulary spells"
            )
        return None

    def _kept(self, ch: str) -> bool:
        """Whether the normalizer and the pre-tokenizer leave something of `ch` (one they remove is not unseen)."""
        text = ch
        try:
            if self.tokenizer.normalizer is not None:
                text = library("", self.tokenizer.normalizer.normalize_str, text)
            if self.tokenizer.pre_tokenizer is not None:
                return any(p for p, _ in library("", self.tokenizer.pre_tokenizer.pre_tokenize_str, text))
        except TokenizerError:
            return True
        return bool(text)

    def decode(self, ids: Iterable[int]) -> str:
        """Ids → text, special tokens written out; a bad id raises TokenizerError."""
        ids = [self._check_id(i) for i in ids]
        chars = sum(len(self.raw[i]) for i in ids)
        self._check_work(f"decode {len(ids):,} ids", self.decode_bound, chars, len(ids), "decoder")
        return self._library("decode the ids", self.tokenizer.decode, ids, skip_special_tokens=False)

    def _check_id(self, i: int) -> int:
        i = int(i)
        if not 0 <= i < self.vocab_size:
            raise TokenizerError(f"token id {i} is out of range: ids run 0..{self.vocab_size - 1}")
        return i

    def token_text(self, i: int) -> str:
        """Display form of one token: its text decoded on its own; when that holds U+FFFD (a piece of a character),
        its bytes with each stray byte written `<0xNN>` (as `piece` shows it: a byte-level token's raw string would
        show byte 0xE0 as "à"), or its raw string when the token's bytes are not known."""
        i = self._check_id(i)
        t = self.texts[i]
        if REPLACEMENT not in t:
            return t
        data = self.token_bytes(i)
        if data is not None and (self.byte_level or BYTE_TOKEN.fullmatch(self.raw[i])):
            return show_bytes(data)
        return self.raw[i]

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
        """Every token's display form (`token_text`), by id."""
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


class FolderFileError(TokenizerError):
    """A file of a checkpoint folder that is there but is no regular file inside it. kind: "dangling", "loop",
    "outside", or what it is instead (`jsonlimits.file_kind`: "a folder", "a FIFO (named pipe)", …)."""

    def __init__(self, message: str, path: Path, kind: str) -> None:
        super().__init__(message)
        self.path, self.kind = path, kind


def folder_file(folder: str | os.PathLike, name: str) -> Path | None:
    """folder/name when it is a regular file inside `folder` (a link is followed only to a file inside it); None
    when there is no such name at all; a FolderFileError for a dangling link, a link leading out of the folder, a
    loop of links, a folder, a FIFO or a device — never a silent "absent"."""
    folder = Path(folder)
    path = folder / name
    if not os.path.lexists(path):
        return None
    try:
        real = path.resolve(strict=True)
    except FileNotFoundError:
        why = f"{path}: a link to nothing (dangling): allowed a regular file in the folder"
        raise FolderFileError(why, path, "dangling") from None
    except (OSError, RuntimeError) as e:
        why = f"{path}: cannot be resolved ({type(e).__name__}: a loop of links?): allowed a regular file"
        raise FolderFileError(why, path, "loop") from None
    if not real.is_relative_to(folder.resolve()):
        why = (
            f"{path}: a link that leads outside the checkpoint folder {str(folder)!r}: allowed only files inside "
            "the folder (copy the file in)"
        )
        raise FolderFileError(why, path, "outside")
    mode = real.stat().st_mode
    if not stat.S_ISREG(mode):
        raise FolderFileError(f"{path}: is {file_kind(mode)}: allowed a regular file", path, file_kind(mode))
    return path


def read_tokenizer(path: str | os.PathLike) -> Tokenizer:
    """A `tokenizer.json` checked before the library parses it (a regular file of at most MAX_TOKENIZER_BYTES, by
    its size, unread; UTF-8; nested at most 64 deep) and its id count after; one clear error otherwise, which
    never quotes the file (the library's own parse errors quote what they refuse: only its position is kept)."""
    path = Path(path)
    try:
        text = checked_text(read_bytes(path, MAX_TOKENIZER_BYTES, regular_only=True), MAX_TOKENIZER_BYTES)
    except JSONLimitError as e:
        raise TokenizerError(f"{path}: not a readable {TOKENIZER_FILE}: it {e}") from None
    except OSError as e:
        raise TokenizerError(f"{path}: cannot be read ({e.strerror})") from None
    what = f"{path}: not a tokenizers {TOKENIZER_FILE} (not JSON, or not the library's format)"
    tok = library(what, Tokenizer.from_str, text)
    check_ids(tok.get_vocab_size(with_added_tokens=True), str(path))
    return tok


def check_ids(n: int, source: str) -> None:
    if not 1 <= n <= MAX_TOKENIZER_IDS:
        raise TokenizerError(f"{source}: {n:,} token ids: allowed 1..{MAX_TOKENIZER_IDS:,}")


def bounded_part(tok: Tokenizer, part: str, source: str) -> tuple[Bound, dict | None]:
    """(the growth bound, the JSON) of the tokenizer's normalizer, pre_tokenizer or decoder; a TokenizerError when
    it could make a text more than MAX_GROWTH times longer, or holds a step that cannot be bounded."""
    component = getattr(tok, part)
    if component is None:
        return ONE, None
    try:
        spec = loads(component.__getstate__(), MAX_TOKENIZER_BYTES)
    except JSONLimitError as e:
        raise TokenizerError(f"{source}: its {part} is not readable: it {e}") from None
    bound = growth(part, spec)
    if bound is None:
        raise TokenizerError(
            f"{source}: its {part} ({step_name(spec)}) holds a step whose output cannot be bounded: allowed the "
            "library's normalizers, pre-tokenizers and decoders with known settings"
        )
    if max(bound) > MAX_GROWTH:
        a, b = bound
        raise TokenizerError(
            f"{source}: its {part} ({step_name(spec)}) can make a text up to {a:,}× longer (+ {b:,} characters): "
            f"allowed at most {MAX_GROWTH}× (Replace steps whose content is longer than what they replace multiply "
            "the text)"
        )
    return bound, spec


def may_drop_symbols(tok: Tokenizer, pre_tokenizer: dict | None) -> bool:
    """A BPE with neither an unknown token nor byte fallback, and no byte-level pre-tokenizer to make every text
    bytes it knows, silently leaves out a symbol it cannot spell."""
    model = tok.model
    if type(model).__name__ != "BPE" or getattr(model, "unk_token", None) or getattr(model, "byte_fallback", False):
        return False
    return '"type": "ByteLevel"' not in json.dumps(pre_tokenizer)


_POSITION = re.compile(r"line \d+ column \d+")
_UNKNOWN = re.compile(r"\bunk\b|\[unk\]|unknown", re.IGNORECASE)


def library(what: str, call: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
    """`call` into the `tokenizers` library, its failures as one TokenizerError starting with `what`:

    - a panic (pyo3's PanicException, a BaseException: a regex that backtracks past Oniguruma's retry limit, …):
      "the library gave up on this text"; what Rust's panic hook prints meanwhile is discarded (see `quiet_fd2`);
    - any other error of the library (an unknown token missing from its vocabulary, a parse error): named by kind,
      with its position in the file when it gives one, never its message (which quotes what it refuses).
    KeyboardInterrupt and SystemExit pass through."""
    with quiet_fd2() as quiet:
        try:
            return call(*args, **kwargs)
        except Exception as e:  # noqa: BLE001 - the library raises plain Exception
            where = _POSITION.search(str(e))
            if _UNKNOWN.search(str(e)):
                detail = "an unknown token missing from its vocabulary"
            else:
                detail = f"at {where.group()}" if where else type(e).__name__
            raise TokenizerError(f"{what}: the library refuses it ({detail})") from None
        except BaseException as e:
            if type(e).__name__ != "PanicException":
                raise
            quiet.discard = True
            raise TokenizerError(
                f"{what}: the library gave up on it (a regular expression of the tokenizer backtracks past its "
                "limit, or another internal failure): allowed a tokenizer whose patterns do not backtrack"
            ) from None


class quiet_fd2:
    """File descriptor 2 pointed at a memory file while the library runs. Rust's panic hook writes its message (and,
    with RUST_BACKTRACE set, a backtrace) straight to fd 2, around Python; the user is to see one line. After the
    call the held bytes go to stderr as they would have, unless `discard` was set (the call panicked)."""

    discard = False
    saved: int | None = None
    hold: int | None = None

    def __enter__(self) -> quiet_fd2:
        try:
            sys.stderr.flush()
            self.hold = os.memfd_create("fd2") if hasattr(os, "memfd_create") else _unnamed_file()
            self.saved = os.dup(2)
            os.dup2(self.hold, 2)
        except (OSError, ValueError, AttributeError):  # no fd 2 (a closed stream): nothing to hold
            self._close()
        return self

    def __exit__(self, *exc: Any) -> None:
        if self.saved is None:
            return
        os.dup2(self.saved, 2)
        try:
            if not self.discard and os.lseek(self.hold, 0, os.SEEK_END):
                os.lseek(self.hold, 0, os.SEEK_SET)
                while chunk := os.read(self.hold, 2**16):
                    os.write(2, chunk)
        except OSError:
            pass
        self._close()

    def _close(self) -> None:
        for fd in (self.saved, self.hold):
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self.saved = self.hold = None


def _unnamed_file() -> int:
    """A temporary file's descriptor, its name already gone (where memfd_create is missing)."""
    fd, name = tempfile.mkstemp()
    os.unlink(name)
    return fd


def special_id(tok: Tokenizer, entry, where: str) -> int | None:
    """The id of a special token named in tokenizer_config.json (a string, an {"content": ...} object, or null);
    an error names the entry, not the text it holds."""
    if entry is None:
        return None
    name = entry.get("content") if isinstance(entry, dict) else entry
    if not isinstance(name, str):
        raise TokenizerError(f"{where} must be a token name or an object with a 'content' name")
    i = tok.token_to_id(name)
    if i is None:
        raise TokenizerError(f"{where} names no token of the tokenizer ({len(name):,} characters): allowed one of its")
    return i

"""Bounded JSON: a text too large, nested too deep or holding an absurdly long integer is refused before json.loads.

json.loads recurses once per nested `[` / `{`: 100,000 levels raise RecursionError (a traceback, not a clear
error), and a file read with `read_text` is read whole, whatever its size. `loads` checks the size in bytes, then
the nesting depth (the brackets outside strings, counted in one linear pass), then parses with integers limited to
`max_int_digits` digits; `read_json` reads at most `max_bytes` + 1 bytes of a file (with `regular_only`: a
FIFO, a folder or a device is refused unread, and so is a file whose size is over the limit). `checked_text` applies
the same size, UTF-8 and depth checks to a text that another parser reads (a `tokenizer.json`: the `tokenizers`
library parses it itself). Every refusal is a
JSONLimitError (a ValueError) saying what was exceeded and the limit — never quoting the text, so an error about a
hostile file does not echo its bytes. The caller adds the file's name (each reader words its own error).
"""

from __future__ import annotations

import json
import os
import re
import stat
from itertools import accumulate
from typing import Any

MAX_DEPTH = 64  # nesting levels: the lab's own files nest ≤ 6 deep; far below the interpreter's 1,000 frames
READ_CHUNK = 2**20  # bytes read at a time
MAX_DATA_BYTES = 2**26  # the lab's own data files (SPS tables, streams, manifests, reports): 400× the shipped streams
MAX_INT_DIGITS = 20  # digits of a JSON integer: 2**64 (a safetensors offset's type) has 20
# a string: from its opening quote to the closing one, or to the end of an unterminated one (so it never
# backtracks: each character is looked at once, whatever the text)
_STRING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*(?:"|\\?\Z)', re.DOTALL)
_NOT_BRACKET = re.compile(r"[^\[\]{}]+")
_DEPTH_STEP = {ord("["): 1, ord("{"): 1, ord("]"): -1, ord("}"): -1}


class JSONLimitError(ValueError):
    """A JSON text is larger, deeper or holds a longer integer than allowed, or is not JSON at all."""


def check_depth(text: str, max_depth: int = MAX_DEPTH) -> None:
    """JSONLimitError if the brackets outside strings nest deeper than `max_depth` anywhere in `text`."""
    brackets = _NOT_BRACKET.sub("", _STRING.sub("", text)).encode("ascii")
    if any(d > max_depth for d in accumulate(map(_DEPTH_STEP.__getitem__, brackets))):
        raise JSONLimitError(f"is nested deeper than {max_depth} levels: allowed at most {max_depth}")


def _int_parser(max_digits: int | None):
    def parse(digits: str) -> int:
        n = len(digits.lstrip("-"))
        if max_digits is not None and n > max_digits:
            raise JSONLimitError(f"holds an integer of {n:,} digits: allowed at most {max_digits}")
        return int(digits)  # Python's own limit (4,300 digits) raises a ValueError past it

    return parse


def loads(
    data: str | bytes,
    max_bytes: int,
    max_depth: int = MAX_DEPTH,
    max_int_digits: int | None = MAX_INT_DIGITS,
) -> Any:
    """json.loads of `data` (UTF-8 bytes or text) within the limits; JSONLimitError naming the limit otherwise.

    max_int_digits None: integers as long as Python itself converts (4,300 digits), for a reader whose own
    validation bounds every number it takes (a model config)."""
    data = checked_text(data, max_bytes, max_depth)
    try:
        return json.loads(data, parse_int=_int_parser(max_int_digits))
    except JSONLimitError:
        raise
    except json.JSONDecodeError as e:  # its message gives the position only, never the text
        raise JSONLimitError(f"is not valid JSON ({e})") from None
    except (ValueError, RecursionError) as e:  # an integer beyond Python's digit limit; a depth missed above
        raise JSONLimitError(f"is not readable JSON ({type(e).__name__}: the text is refused)") from None


def checked_text(data: str | bytes, max_bytes: int, max_depth: int = MAX_DEPTH) -> str:
    """`data` as text once its size, its UTF-8 and its nesting depth are within the limits (JSONLimitError
    otherwise), parsed by nobody: for a text another parser reads (a `tokenizer.json`, which the `tokenizers`
    library parses itself), so that it meets the same bounds as every JSON the lab reads."""
    size = len(data) if isinstance(data, bytes) else len(data.encode("utf-8", "surrogatepass"))
    if size > max_bytes:
        raise JSONLimitError(f"is larger than {max_bytes:,} bytes: allowed at most {max_bytes:,}")
    if isinstance(data, bytes):
        try:
            data = data.decode("utf-8")
        except UnicodeDecodeError as e:
            raise JSONLimitError(f"is not UTF-8 text (invalid byte at offset {e.start:,})") from None
    check_depth(data, max_depth)
    return data


def file_kind(mode: int) -> str:
    """What a file that is not a regular one is, in words (for an error)."""
    for test, name in (
        (stat.S_ISDIR, "a folder"),
        (stat.S_ISFIFO, "a FIFO (named pipe)"),
        (stat.S_ISSOCK, "a socket"),
        (stat.S_ISCHR, "a character device"),
        (stat.S_ISBLK, "a block device"),
    ):
        if test(mode):
            return name
    return "not a regular file"


def read_bytes(path: str | os.PathLike, max_bytes: int, regular_only: bool = False) -> bytes:
    """At most `max_bytes` + 1 bytes of a file, a MiB at a time: `read(n)` would set aside n bytes at once,
    whatever the file holds. regular_only: anything but a regular file (a FIFO, which would block, a folder, a
    device) is refused before a byte is read, and so is a file whose size is above `max_bytes` (JSONLimitError
    naming both numbers); a missing file or a dangling link is the OSError of `open`."""
    flags = os.O_RDONLY | getattr(os, "O_CLOEXEC", 0) | (getattr(os, "O_NONBLOCK", 0) if regular_only else 0)
    fd = os.open(path, flags)  # O_NONBLOCK: opening a FIFO does not wait for a writer
    with open(fd, "rb", closefd=True) as f:
        if regular_only:
            st = os.fstat(fd)  # the file opened, not the name looked at before (a swap in between changes nothing)
            if not stat.S_ISREG(st.st_mode):
                raise JSONLimitError(f"is {file_kind(st.st_mode)}: allowed a regular file")
            if st.st_size > max_bytes:
                raise JSONLimitError(f"is {st.st_size:,} bytes: allowed at most {max_bytes:,}")
        chunks, total = [], 0
        while total <= max_bytes:
            chunk = f.read(min(READ_CHUNK, max_bytes + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
    return b"".join(chunks)


def read_json(
    path: str | os.PathLike,
    max_bytes: int,
    max_depth: int = MAX_DEPTH,
    max_int_digits: int | None = MAX_INT_DIGITS,
    regular_only: bool = False,
) -> Any:
    """`loads` of a file, of which at most `max_bytes` + 1 bytes are read (a larger file is refused unread);
    regular_only as in `read_bytes`."""
    return loads(read_bytes(path, max_bytes, regular_only), max_bytes, max_depth, max_int_digits)

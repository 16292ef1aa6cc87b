"""Naive references and comparisons shared by several test files (no fixtures here: see conftest.py)."""

from __future__ import annotations

import math
import re
import unicodedata

import torch


def naive_rope(x: torch.Tensor, positions, inv_freq, rope_dim: int, sign: float = 1.0) -> torch.Tensor:
    """Rotate the last rope_dim channels of x [B, S, (H,) C] pair by pair: (2j, 2j+1) as a complex number
    × e^{i·sign·p·f_j}, with p the position of dim 1. Python loops, no vectorization."""
    out = x.clone()
    base = x.shape[-1] - rope_dim
    for si, p in enumerate(positions):
        for j in range(rope_dim // 2):
            ang = sign * float(p) * float(inv_freq[j])
            z = torch.complex(x[:, si, ..., base + 2 * j], x[:, si, ..., base + 2 * j + 1])
            z = z * complex(math.cos(ang), math.sin(ang))
            out[:, si, ..., base + 2 * j] = z.real
            out[:, si, ..., base + 2 * j + 1] = z.imag
    return out


def assert_same_snapshot(a: dict, b: dict, atol: float = 0.0) -> None:
    """Two `KVCache.snapshot()`s hold the same named tensors: floats within atol, integers exactly."""
    assert sorted(a) == sorted(b)
    for k in a:
        assert a[k].shape == b[k].shape, k
        if a[k].is_floating_point():
            torch.testing.assert_close(a[k], b[k], rtol=0, atol=atol, msg=k)
        else:
            assert torch.equal(a[k], b[k]), k


# Unicode's White_Space: what the reference's Strip removes at the ends (Python's str.strip also takes U+001C..U+001F)
WHITE_SPACE = (
    "\t\n\x0b\x0c\r \x85\xa0\u1680" + "".join(map(chr, range(0x2000, 0x200B))) + "\u2028\u2029\u202f\u205f\u3000"
)


def naive_normalize(text: str) -> str:
    """The reference's Engram key rule written out in Python: NFKC, NFD, drop every mark (M*), lower each character,
    collapse runs of space / tab / CR / LF into one space, keep a lone space, strip White_Space at the ends."""
    s = unicodedata.normalize("NFD", unicodedata.normalize("NFKC", text))
    s = re.sub(r"[ \t\r\n]+", " ", "".join(c.lower() for c in s if not unicodedata.category(c).startswith("M")))
    return s if s == " " else s.strip(WHITE_SPACE)


def gpt2_byte_of() -> dict[str, int]:
    """GPT-2's byte-level alphabet written out as its paper's code does (`bytes_to_unicode`), inverted: the
    printable character a byte-level token spells each byte with → the byte."""
    keep = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(range(ord("®"), 256))
    chars, n = keep[:], 0
    for b in range(256):
        if b not in keep:
            keep.append(b)
            chars.append(256 + n)
            n += 1
    return {chr(c): b for b, c in zip(keep, chars, strict=True)}


def shown_bytes(data: bytes) -> str:
    """Bytes as a reader sees them: each whole UTF-8 character as itself, every other byte as <0xNN> (decoded by
    hand: a lead byte and its continuation bytes count as a character only when complete and well-formed)."""
    out, i = [], 0
    while i < len(data):
        for n in (4, 3, 2, 1):
            try:
                out.append(data[i : i + n].decode("utf-8"))
            except UnicodeDecodeError:
                continue
            i += n
            break
        else:
            out.append(f"<0x{data[i]:02X}>")
            i += 1
    return "".join(out)


# English words a refusal's frame is made of: none may be left in a Vietnamese refusal once the option names, the
# values it quotes, paths, commands and the allowed values themselves are taken out
ENGLISH = {"a", "allowed", "and", "are", "at", "come", "file", "folder", "invalid", "is", "missing", "no", "not", "of"}
ENGLISH |= {"one", "only", "or", "the", "use", "with", "rebuilds", "them", "window", "block", "must", "cannot"}


def english_left(message: str) -> list[str]:
    """The frame words of `message` that are English (ENGLISH), after its quoted values, `commands`, --options,
    paths and identifiers are taken out."""
    text = re.sub(r"`[^`]*`|'[^']*'|\"[^\"]*\"", " ", message)
    words = [w for w in text.split() if not re.search(r"^--|[/._=*\d]", w)]
    return [w for w in re.findall(r"[^\W\d_]+", " ".join(words)) if w.lower() in ENGLISH]

"""The lab model's weights, packed exactly and compactly for one self-contained HTML page (file://, no server).

Each tensor gets the smallest representation that gives back, bit for bit, the float64 values the forward reads:

  rep   when                                                   bytes a value   what the page gets back
  fp4   the forward reads the tensor only through MXFP4 QDQ:   1/2 + 1/32      fp4_qdq(w, 32, "e8m0") itself,
        the routed experts `….ffn.experts.{e}.w{1,2,3}.weight`                  flagged qdq: "fp4" (use as is)
        of the backbone and of the DSpark layers, when the
        config's `expert_quant` is on (it is at `lab`). Shared
        experts, routers and everything else are read as stored
  f32   every value is exactly a float32 (the bits agree)      4               the stored float64 values
  f64   otherwise                                              8               the stored float64 values
  fp8   only when asked (reps, or engram_fp8=True): the        1 + 1/32        fp8_qdq(w, 32) itself, flagged
        Engram tables `layers.{i}.engram.embed.weight`, which                  qdq: "fp8" (a forward must know
        the forward reads only through FP8 QDQ when the config's               the flag: 0.88 MB less on the
        `engram_table_quant` is on (it is at `lab`)                             shipped set)

An fp4 tensor is E2M1 codes (two a byte, the even element in the low nibble; sign · 8 + the index of |v| in
0, .5, 1, 1.5, 2, 3, 4, 6) and one E8M0 byte per 32 values along the last dim (scale 2^(code − 127)), exactly as
`dspark_mini.packed.pack_mxfp4` lays them out; code · scale is exact in float64, so the page rebuilds the QDQ'd
tensor bit for bit. An fp8 tensor is likewise E4M3 ("fn") codes, one a byte, then one E8M0 byte per 32 values
(`dspark_mini.packed.pack_fp8_rows`).

The payload: every tensor's bytes, f32/f64 ones byte-plane shuffled (all first bytes of the values, then all
second bytes, …: the sign/exponent planes compress, the mantissa planes are noise), one after another in manifest
order, compressed as one zlib stream (level 9; the browser's DecompressionStream("deflate") inflates it and checks
its Adler-32). In the page the compressed bytes travel almost 1:1: the page is declared windows-1252, a single-byte
charset in which every byte is one character, inside a `<script type="application/octet-stream">` element. Three
bytes cannot cross the HTML parser unchanged there (NUL becomes U+FFFD, CR becomes LF, "<" may close the element)
and one byte is the escape itself, so those four are written as two bytes: ESC then one of "0123" (1.6 % more on
compressed, uniform bytes). The rest of such a page must then be windows-1252 too (`page_bytes` encodes it and
names any character it cannot hold: write those as HTML entities, \\u escapes in scripts).

The shipped target + DSpark weights (5.55 M values, 44.4 MB as float64): 24.10 MB in these representations, 20.86 MB
deflated (the random mantissa planes stay as they are: the DSpark tensors are full float64), 21.20 MB as page text.
Text encodings of those 20.86 MB: base64 27.82 MB, base85 26.08 MB, base122 (8/7) 23.84 MB, the best any UTF-8
page can do ≈ 23.5 MB (8/7.1 bits) — with the 1.76 MB of today's Explorer all beyond 24 MB; windows-1252 with four
escaped bytes: 21.20 MB, the whole page ≈ 23.0 MB (20.32 MB and ≈ 22.1 MB with engram_fp8).

Determinism: zlib's stream is a function of the input, the level and the zlib version/build (no time, no
randomness); another zlib (a newer release, zlib-ng) may write other bytes that inflate the same. The manifest holds
nothing compressor-dependent, and `comparable(page)` replaces the weights element's text by the sha256 of what it
inflates to: a check of a page against a rebuild compares those where the zlibs may differ.

`pack(tensors)` → Packed(compressed, text, manifest); `unpack(text, manifest)` is the Python twin of what
weights_unpack.js decodes (tests hold them equal); `payload_html`, `manifest_json` and `page_bytes` put a payload in
a page (declared with CHARSET_META in its first 1024 bytes), `windows_1252_safe` rewrites a UTF-8 page's other
characters for it, `comparable` is what a check compares.
"""

from __future__ import annotations

import codecs
import hashlib
import json
import re
import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import torch

from dspark_mini.packed import PackError, pack_fp8_rows, pack_mxfp4

FORMAT = "dspark-lab-weights-pack"
VERSION = 1
REPS = ("fp4", "fp8", "f32", "f64")
BLOCK = 32  # values per E8M0 scale of an fp4 or fp8 tensor
ZLIB_LEVEL = 9
ESC = 0x3D  # "=": the escape byte of the page text
ESCAPED = (0x00, 0x0D, 0x3C, ESC)  # NUL, CR, "<", the escape: written ESC + "0".."3"
ELEMENT_ID = "dspark-weights"
PAGE_BUDGET = 24_000_000  # bytes of the whole page that carries the weights (MB = 10^6 bytes)
REST_OF_PAGE = 2_500_000  # bytes kept for everything else on it: today's Explorer (~1.76 MB), the JS forward, texts
CHARSET_META = '<meta charset="windows-1252">'

# the routed experts' weights: the forward reads them only through fp4_qdq(w, 32, "e8m0") when expert_quant is on
# (dspark_mini/moe.py: Expert.weight and MoE.stack_experts, both for backbone and DSpark layers; the shared expert
# is built with fp4 off and the router reads its weight as stored)
FP4_READ = re.compile(r"(?:^|\.)ffn\.experts\.\d+\.w[123]\.weight$")
# the Engram tables: the forward reads them only through fp8_qdq(w, 32) when engram_table_quant is on
# (dspark_mini/engram.py: Engram.lookup, the table QDQ'd once or the looked-up rows QDQ'd)
FP8_READ = re.compile(r"(?:^|\.)engram\.embed\.weight$")

# WHATWG windows-1252: bytes 0x80-0x9F decode to these code points (the five unassigned ones to the C1 control of
# the same number); every other byte b decodes to U+00b. Python's cp1252 codec lacks the five, so the table is here.
_HIGH = (
    "\u20ac\x81\u201a\u0192\u201e\u2026\u2020\u2021\u02c6\u2030\u0160\u2039\u0152\x8d\u017d\x8f"
    "\x90\u2018\u2019\u201c\u201d\u2022\u2013\u2014\u02dc\u2122\u0161\u203a\u0153\x9d\u017e\u0178"
)
WINDOWS_1252 = "".join(map(chr, range(0x80))) + _HIGH + "".join(map(chr, range(0xA0, 0x100)))  # byte → character
_ENCODE_MAP = codecs.charmap_build(WINDOWS_1252)


@dataclass(frozen=True)
class Packed:
    """compressed: the zlib stream; text: what the page's weights element holds; manifest: JSON-able."""

    compressed: bytes
    text: str
    manifest: dict


# ---- which representation -----------------------------------------------------------------------------------


def reads_through_fp8(name: str, engram_table_quant: bool = True) -> bool:
    """Whether the forward reads tensor `name` only through FP8 QDQ (an Engram table, engram_table_quant on)."""
    return bool(engram_table_quant) and FP8_READ.search(name) is not None


def reads_through_fp4(name: str, expert_quant: bool = True) -> bool:
    """Whether the forward reads tensor `name` only through MXFP4 QDQ (a routed expert's weight, expert_quant on)."""
    return bool(expert_quant) and FP4_READ.search(name) is not None


def _as_float64(name: str, t: Any) -> np.ndarray:
    if isinstance(t, torch.Tensor):
        if t.dtype not in (torch.float32, torch.float64):
            raise PackError(f"tensor {name!r}: dtype {t.dtype}; allowed float32 or float64")
        t = t.detach().cpu().to(torch.float64).numpy()
    if not isinstance(t, np.ndarray) or t.dtype not in (np.float32, np.float64):
        got = getattr(t, "dtype", type(t).__name__)
        raise PackError(f"tensor {name!r}: {got}; allowed a float32 or float64 torch tensor or numpy array")
    return np.ascontiguousarray(t, dtype="<f8")


def _f32_exact(v: np.ndarray) -> np.ndarray:
    """Per value, whether float64 → float32 → float64 gives back the same bits (NaN payloads and −0.0 included)."""
    with np.errstate(over="ignore", invalid="ignore"):
        back = v.astype(np.float32).astype(np.float64)
    return back.view(np.uint64) == v.view(np.uint64)


def choose_rep(name: str, v: np.ndarray, expert_quant: bool = True, engram_fp8: bool = False) -> str:
    """The representation `pack` picks: fp4 for a tensor read through MXFP4 QDQ, fp8 for one read through FP8 QDQ
    when engram_fp8, else f32 when exact, else f64."""
    if reads_through_fp4(name, expert_quant):
        return "fp4"
    if engram_fp8 and reads_through_fp8(name):
        return "fp8"
    return "f32" if bool(_f32_exact(v).all()) else "f64"


# ---- bytes of one tensor ------------------------------------------------------------------------------------
def shuffle(a: np.ndarray) -> bytes:
    """Byte planes of fixed-width little-endian values: all byte 0s, then all byte 1s, …"""
    return np.ascontiguousarray(a.view(np.uint8).reshape(-1, a.dtype.itemsize).T).tobytes()


def unshuffle(b: bytes, dtype: str) -> np.ndarray:
    width = np.dtype(dtype).itemsize
    return np.ascontiguousarray(np.frombuffer(b, np.uint8).reshape(width, -1).T).view(dtype).ravel()


def _encode(name: str, v: np.ndarray, rep: str) -> bytes:
    if rep == "f64":
        return shuffle(v.astype("<f8"))
    if rep == "f32":
        ok = _f32_exact(v)
        if not ok.all():
            first = np.unravel_index(int(np.argmin(ok)), v.shape) if v.ndim else ()
            raise PackError(
                f"tensor {name!r}: rep 'f32' but {int((~ok).sum()):,} of {v.size:,} values are not exactly "
                f"float32 (first at index {tuple(map(int, first))}); allowed 'f64' for it"
            )
        return shuffle(v.astype("<f4"))
    if v.ndim == 0 or v.shape[-1] % BLOCK:
        raise PackError(
            f"tensor {name!r}: rep {rep!r} needs a last dim that is a multiple of {BLOCK}, got shape {v.shape}"
        )
    packer = pack_mxfp4 if rep == "fp4" else pack_fp8_rows  # PackError for NaN/inf or a scale beyond E8M0
    q, s = packer(torch.from_numpy(v), name)
    return q.view(torch.uint8).numpy().tobytes() + s.view(torch.uint8).numpy().tobytes()


def rep_bytes(rep: str, n: int) -> int:
    """Bytes of n values in a representation (before compression)."""
    return {"f64": 8 * n, "f32": 4 * n, "fp4": n // 2 + n // BLOCK, "fp8": n + n // BLOCK}[rep]


# ---- the page text ------------------------------------------------------------------------------------------
_ESCAPE_RE = re.compile(b"[" + re.escape(bytes(ESCAPED)) + b"]")
_ESCAPE_TO = {bytes([b]): bytes([ESC, 0x30 + k]) for k, b in enumerate(ESCAPED)}


def escape(data: bytes) -> bytes:
    """The bytes the page stores: each of NUL, CR, "<" and the escape byte written as ESC + "0".."3"."""
    return _ESCAPE_RE.sub(lambda m: _ESCAPE_TO[m.group()], data)


def unescape(data: bytes) -> bytes:
    def one(m: re.Match) -> bytes:
        k = m.group(1)[0] - 0x30 if m.group(1) else -1
        if not 0 <= k < len(ESCAPED):
            raise PackError(f"payload text: escape at byte {m.start():,} is followed by {m.group(1)!r}; allowed 0-3")
        return bytes([ESCAPED[k]])

    bad = re.search(b"[\x00\r<]", data)
    if bad:
        raise PackError(f"payload text: byte {data[bad.start()]:#04x} at {bad.start():,} must have been escaped")
    return re.sub(b"=(.?)", one, data, flags=re.S)


def text_of(compressed: bytes) -> str:
    """The characters of the page's weights element (windows-1252 decoding of the escaped bytes)."""
    return codecs.charmap_decode(escape(compressed), "strict", WINDOWS_1252)[0]


def compressed_of(text: str) -> bytes:
    """The zlib stream back from the element's characters (what weights_unpack.js does first)."""
    return unescape(page_bytes(text))


def page_bytes(html: str) -> bytes:
    """A page's text as the bytes of a windows-1252 file; names the first character it cannot hold."""
    try:
        return codecs.charmap_encode(html, "strict", _ENCODE_MAP)[0]
    except UnicodeEncodeError as e:
        ch = html[e.start]
        raise PackError(
            f"page text: U+{ord(ch):04X} {ch!r} at character {e.start:,} has no windows-1252 byte; allowed the "
            "windows-1252 characters (write others as HTML entities &#x…; or \\u escapes in scripts)"
        ) from None


# a page's <script> / <style> elements: their text runs to the first closing tag (pages that put "<!--" in a script,
# whose closing tag the HTML parser then reads otherwise, are not handled)
_RAW_TEXT = re.compile(r"(<(script|style)\b[^>]*>)(.*?)(</\2\s*>)", re.S | re.I)


def _escape_in(text: str, where: str, escape) -> str:
    def one(m: re.Match) -> str:
        ch = m.group(1)
        if m.start() > 0 and text[m.start() - 1] == "\\":
            raise PackError(f"page text: U+{ord(ch):04X} {ch!r} follows a backslash in a {where}; allowed unescaped")
        return escape(ch)

    return _NOT_1252.sub(one, text)


_NOT_1252 = re.compile("([^" + re.escape(WINDOWS_1252) + "])")


def _js_escape(ch: str) -> str:
    units = ch.encode("utf-16-le")  # an astral character as its surrogate pair: right in strings and in any regex
    return "".join(f"\\u{int.from_bytes(units[i : i + 2], 'little'):04X}" for i in range(0, len(units), 2))


def windows_1252_safe(html: str) -> str:
    """A page's text with every character windows-1252 lacks written so that the page means the same once saved as
    windows-1252: \\uXXXX in scripts (strings, comments, regular expressions; not String.raw), \\XXXXXX in styles,
    &#x…; elsewhere. The page must still declare the charset itself (CHARSET_META)."""

    def entities(text: str) -> str:
        return _NOT_1252.sub(lambda c: f"&#x{ord(c.group(1)):X};", text)

    out, at = [], 0
    for m in _RAW_TEXT.finditer(html):
        out.append(entities(html[at : m.end(1)]))
        if m.group(2).lower() == "script":
            out.append(_escape_in(m.group(3), "script", _js_escape))
        else:
            out.append(_escape_in(m.group(3), "style", lambda ch: f"\\{ord(ch):06X}"))
        out.append(m.group(4))
        at = m.end()
    out.append(entities(html[at:]))
    return "".join(out)


def payload_html(packed: Packed, element_id: str = ELEMENT_ID) -> str:
    """The page element holding the weights (the page itself must declare windows-1252: CHARSET_META)."""
    if not re.fullmatch(r"[A-Za-z][\w-]*", element_id):
        raise PackError(f"element_id = {element_id!r}: allowed a letter then letters, digits, '_' or '-'")
    return f'<script type="application/octet-stream" id="{element_id}">{packed.text}</script>'


def manifest_json(manifest: dict) -> str:
    """The manifest as JSON safe inside a page's <script> element (ASCII, no "<")."""
    return json.dumps(manifest, separators=(",", ":"), sort_keys=True).replace("<", "\\u003c")


# ---- both directions ------------------------------------------------------------------------------------------
def pack(
    tensors: Mapping[str, Any],
    reps: Mapping[str, str] | None = None,
    *,
    expert_quant: bool = True,
    engram_fp8: bool = False,
) -> Packed:
    """Pack {name: float tensor} in the given order. reps: a representation per name to force (the others are
    chosen by `choose_rep`); a tensor that cannot be held exactly as asked raises PackError naming it.
    engram_fp8: the Engram tables as fp8 (for a forward that knows qdq: "fp8")."""
    reps = dict(reps or {})
    unknown = sorted(set(reps) - set(tensors))
    if unknown:
        raise PackError(f"reps names {unknown[:3]} not among the tensors")
    entries, parts, offset = [], [], 0
    for name, t in tensors.items():
        if not isinstance(name, str) or not name:
            raise PackError(f"tensor name {name!r}: allowed a non-empty string")
        v = _as_float64(name, t)
        rep = reps.get(name) or choose_rep(name, v, expert_quant, engram_fp8)
        if rep not in REPS:
            raise PackError(f"tensor {name!r}: rep = {rep!r}; allowed one of {REPS}")
        data = _encode(name, v, rep)
        entry = {"name": name, "shape": list(v.shape), "rep": rep, "offset": offset, "bytes": len(data)}
        if rep in ("fp4", "fp8"):
            entry["qdq"] = rep
        entries.append(entry)
        parts.append(data)
        offset += len(data)
    raw = b"".join(parts)
    compressed = zlib.compress(raw, ZLIB_LEVEL)
    manifest = {
        "format": FORMAT,
        "version": VERSION,
        "compression": "deflate",  # a zlib stream: DecompressionStream("deflate")
        "zlib_level": ZLIB_LEVEL,
        "text": {"charset": "windows-1252", "escape": ESC, "escaped": list(ESCAPED)},
        "raw_bytes": len(raw),
        "raw_sha256": hashlib.sha256(raw).hexdigest(),
        "tensors": entries,
    }
    return Packed(compressed, text_of(compressed), manifest)


def _decode_entry(raw: bytes, e: dict) -> np.ndarray:
    shape, rep = tuple(e["shape"]), e["rep"]
    n = int(np.prod(shape, dtype=np.int64))
    chunk = raw[e["offset"] : e["offset"] + e["bytes"]]
    if rep not in REPS or len(chunk) != e["bytes"] or e["bytes"] != rep_bytes(rep, n):
        raise PackError(f"manifest entry {e['name']!r}: rep {rep!r}, shape {shape}, bytes {e['bytes']} do not agree")
    if rep in ("f32", "f64"):
        return unshuffle(chunk, "<f4" if rep == "f32" else "<f8").astype(np.float64).reshape(shape)
    n_codes = n // 2 if rep == "fp4" else n
    codes = np.frombuffer(chunk[:n_codes], np.uint8)
    scale = np.ldexp(1.0, np.frombuffer(chunk[n_codes:], np.uint8).astype(np.int64) - 127)
    if rep == "fp4":
        values = _E2M1[np.stack([codes & 0x0F, codes >> 4], axis=-1).ravel()]
    else:
        values = _E4M3[codes]
    return (values.reshape(-1, BLOCK) * scale[:, None]).reshape(shape)


def _e4m3_table() -> np.ndarray:
    """[256] E4M3 ("fn") code → value: sign bit 7, exponent bits 6-3 (bias 7), mantissa bits 2-0; 0x7F/0xFF NaN."""
    out = np.empty(256)
    for code in range(256):
        e, m = (code >> 3) & 15, code & 7
        mag = m / 8 * 2.0**-6 if e == 0 else (1 + m / 8) * 2.0 ** (e - 7)
        out[code] = np.nan if (code & 0x7F) == 0x7F else (-mag if code & 0x80 else mag)
    return out


_E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0])
_E4M3 = _e4m3_table()


def unpack(text: str, manifest: dict) -> dict[str, dict]:
    """What the page decodes: {name: {"shape", "data" (float64 ndarray), "qdq" for fp4 / fp8 tensors}}."""
    raw = zlib.decompress(compressed_of(text))
    if len(raw) != manifest["raw_bytes"]:
        raise PackError(f"payload: {len(raw):,} bytes inflated, the manifest's raw_bytes is {manifest['raw_bytes']:,}")
    out = {}
    for e in manifest["tensors"]:
        item = {"shape": list(e["shape"]), "data": _decode_entry(raw, e)}
        if e.get("qdq"):
            item["qdq"] = e["qdq"]
        out[e["name"]] = item
    return out


def digest(text: str) -> str:
    """sha256 of the inflated payload: what two builds share even where their zlib versions compress differently."""
    return hashlib.sha256(zlib.decompress(compressed_of(text))).hexdigest()


# ---- comparing pages -------------------------------------------------------------------------------------------
# zlib gives the same stream for the same input, level and zlib; another zlib version or build (zlib-ng, say) may
# pick other deflate blocks and still inflate to the same bytes. The manifest holds nothing that depends on the
# compressor, so a page compared with its weights element's text replaced by the digest of what it inflates to is
# equal across zlibs exactly when it carries the same weights and the same everything else.
def comparable(page: bytes, element_id: str = ELEMENT_ID) -> bytes:
    """A page's bytes with the weights element's text replaced by "sha256:" + the digest of its inflated payload."""
    opening = f'<script type="application/octet-stream" id="{element_id}">'.encode("ascii")
    start = page.find(opening)
    if start < 0 or page.find(opening, start + 1) >= 0:
        found = "no" if start < 0 else "more than one"
        raise PackError(f"page: {found} weights element with id {element_id!r}; allowed exactly one")
    start += len(opening)
    end = page.find(b"<", start)  # the text holds no "<": the first one starts </script>
    try:
        raw = zlib.decompress(unescape(page[start:end]))
    except zlib.error as e:
        raise PackError(f"page: the weights element's text does not inflate ({e})") from None
    return page[:start] + b"sha256:" + hashlib.sha256(raw).hexdigest().encode("ascii") + page[end:]

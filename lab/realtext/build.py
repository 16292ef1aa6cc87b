"""`make corpus`: rebuild the committed real-text corpus, byte for byte, from its licensed sources.

    python -m lab.realtext.build                 # download the two Debian packages, rebuild lab/realtext/data/
    python -m lab.realtext.build --debs DIR      # use .deb files already in DIR (no download)
    python -m lab.realtext.build --check         # rebuild into a temporary folder and compare with the committed files

Sources (each named with its licence in lab/realtext/NOTICE):
- English: Jane Austen's six novels (public domain), from Debian's `r-cran-janeaustenr`, where they are R data: a
  lazy-load database (`Rdata.rdx` index + `Rdata.rdb` chunks of zlib-compressed R serialization). `_unserialize`
  reads the small part of R's XDR serialization format those files use; R itself is not needed. One document a chapter.
- Vietnamese: the LibreOffice help pages in Vietnamese (MPL-2.0), from Debian's `libreoffice-help-vi`. About 60 % of
  that help is untranslated English, so a text block is kept when at least 12 % of its letters carry Vietnamese marks
  and it holds a common Vietnamese function word; a block seen on an earlier page is dropped. One document a page.
- Code: this project's own Python (MIT) as of one pinned commit (`CODE_COMMIT`), read with `git show`, so the code
  the lab is later edited into does not change the corpus. One document a file.
- Sums: multi-digit addition, subtraction and multiplication with carries, from a seeded `random.Random`: the first
  digit of an answer needs every digit of the operands. One document 40 lines.
- Lesson: the lab's own bilingual sentences (lab/realtext/lesson.txt, MIT), so the lesson's prompts stay in domain.
  One document 40 lines.

Every output file is JSON Lines (`{"id": …, "text": …}`, one document a line, NFC) compressed with xz; the same inputs
give the same bytes. Nothing here runs when the lab runs: the lab reads the committed files only.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import html.parser
import json
import lzma
import random
import re
import struct
import subprocess
import sys
import tempfile
import unicodedata
import zlib
from collections.abc import Iterator
from pathlib import Path

from dspark_mini.files import write_atomic

from . import differing

HERE = Path(__file__).resolve().parent
DATA = HERE / "data"
REPO = HERE.parents[1]

# The Debian packages and the exact versions the committed files were built from.
PACKAGES: dict[str, str] = {
    "r-cran-janeaustenr": "1.0.0-1",
    "libreoffice-help-vi": "4:7.4.7-1+deb12u14",
}
CODE_COMMIT = "03625cc5264aca2019fe9cbf56418e4516bb3f59"  # the project's Python, as of this commit
CODE_FOLDERS = ("dspark_mini", "lab")
SUMS_SEED, SUMS_LINES = 0, 24_000
LINES_PER_DOC = 40
AUSTEN_DATA = "usr/lib/R/site-library/janeaustenr/data"
HELP_ROOT = "usr/share/libreoffice/help/vi/text"
XZ_PRESET = 9


class CorpusBuildError(RuntimeError):
    """A source is missing or is not what the committed corpus was built from."""


# ---- R's XDR serialization (just what janeaustenr's lazy-load files hold) ---------------------------------------
_NIL, _SYM, _LIST, _CHAR, _LGL, _INT, _REAL, _STR, _VEC, _REF = 254, 1, 2, 9, 10, 13, 14, 16, 19, 255
_ENVS = (242, 241, 253, 251)  # empty / base / global environment, missing argument: none carries data here


class _Reader:
    def __init__(self, data: bytes) -> None:
        self.data, self.pos, self.refs = data, 0, []

    def int(self) -> int:
        (v,) = struct.unpack_from(">i", self.data, self.pos)
        self.pos += 4
        return v

    def item(self):
        flags = self.int()
        kind, has_attr, has_tag = flags & 0xFF, flags & (1 << 9), flags & (1 << 10)
        if kind == _NIL or kind in _ENVS:
            return None
        if kind == _REF:
            return self.refs[(flags >> 8 or self.int()) - 1]
        if kind == _SYM:
            sym = ("symbol", self.item())
            self.refs.append(sym)
            return sym
        if kind == _CHAR:
            n = self.int()
            if n < 0:
                return None  # NA_character_
            s = self.data[self.pos : self.pos + n].decode("utf-8")
            self.pos += n
            return s
        if kind == _LIST:  # a pairlist: (tag, value) cells until a NIL
            cells = []
            while True:
                if has_attr:
                    self.item()
                tag = self.item() if has_tag else None
                cells.append((tag[1] if tag else None, self.item()))
                flags = self.int()
                kind, has_attr, has_tag = flags & 0xFF, flags & (1 << 9), flags & (1 << 10)
                if kind == _NIL:
                    return dict(cells)
                if kind != _LIST:
                    raise CorpusBuildError(f"R data: a pairlist continues with type {kind}")
        n = self.int()
        if kind in (_LGL, _INT):
            values = list(struct.unpack_from(f">{n}i", self.data, self.pos))
            self.pos += 4 * n
        elif kind == _REAL:
            values = list(struct.unpack_from(f">{n}d", self.data, self.pos))
            self.pos += 8 * n
        elif kind in (_STR, _VEC):
            values = [self.item() for _ in range(n)]
        else:
            raise CorpusBuildError(f"R data: type {kind} is not one this reader knows")
        attrs = self.item() if has_attr else None
        if attrs and "names" in attrs:
            return dict(zip(attrs["names"], values, strict=True))
        return values


def _unserialize(data: bytes):
    """One object of R's XDR serialization, version 2 or 3 (character vectors, lists and names)."""
    if data[:2] != b"X\n":
        raise CorpusBuildError("R data: not XDR serialization")
    r = _Reader(data)
    r.pos = 2
    version = r.int()
    r.int(), r.int()  # the writer's and the minimal reader's R versions
    if version == 3:
        n = r.int()  # the native encoding's name, skipped
        r.pos += n
    return r.item()


def austen_novels(root: Path) -> dict[str, list[str]]:
    """The six novels from an unpacked r-cran-janeaustenr: name → its lines."""
    folder = root / AUSTEN_DATA
    index = _unserialize(gzip.decompress((folder / "Rdata.rdx").read_bytes()))
    rdb = (folder / "Rdata.rdb").read_bytes()
    novels = {}
    for name, (offset, length) in sorted(index["variables"].items()):
        chunk = rdb[offset : offset + length]
        novels[name] = _unserialize(zlib.decompress(chunk[4:]))
    return novels


_CHAPTER = re.compile(r"^(chapter|advertisement)\b", re.IGNORECASE)


def austen_documents(novels: dict[str, list[str]]) -> Iterator[dict[str, str]]:
    """One document a chapter: paragraphs (runs of non-blank lines joined by spaces), one a line."""
    for name, lines in novels.items():
        chapters: list[list[str]] = []
        for line in lines:
            line = (line or "").strip()
            if _CHAPTER.match(line):
                chapters.append([])
            elif chapters:
                chapters[-1].append(line)
        for i, body in enumerate(chapters, 1):
            paragraphs = [" ".join(p.split()) for p in "\n".join(body).split("\n\n")]
            paragraphs = [p for p in paragraphs if p and not p.startswith("VOLUME ") and p != "THE END"]
            if paragraphs:
                yield {"id": f"austen/{name}/{i:02d}", "text": _nfc("\n".join(paragraphs))}


# ---- LibreOffice help pages --------------------------------------------------------------------------------------
_BLOCKS = {"p", "h1", "h2", "h3", "h4", "h5", "h6", "td", "li"}
_SKIP = ("howtoget", "relatedtopics", "debug", "switch")  # menu paths, links, debug info, per-module variants
_VI_WORDS = frozenset(
    "là và của có được cho các một này để trong với không những khi bạn thì từ đã sẽ nếu ở hoặc như bằng vào "
    "phải theo nhưng cũng nào đó".split()
)


class _HelpPage(html.parser.HTMLParser):
    """The text blocks (p, h*, td, li) inside a help page's DisplayArea, outside its menu-path and link boxes."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.blocks: list[str] = []
        self.stack: list[tuple[str, bool]] = []  # (tag, skipped) of every open element
        self.area = False
        self.current: list[str] | None = None
        self.depth = 0

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if a.get("id") == "DisplayArea":
            self.area = True
        skipped = any(s in (a.get("class") or "") for s in _SKIP) or a.get("hidden") is not None
        if tag in ("br", "img", "input", "meta", "link"):
            return
        self.stack.append((tag, skipped))
        if self.area and tag in _BLOCKS and self.current is None and not self._skipping():
            self.current, self.depth = [], len(self.stack)

    def _skipping(self) -> bool:
        return any(s for _, s in self.stack)

    def handle_endtag(self, tag):
        if not self.stack or tag in ("br", "img", "input", "meta", "link"):
            return
        while self.stack:
            top, _ = self.stack.pop()
            if self.current is not None and len(self.stack) < self.depth:
                text = " ".join("".join(self.current).split())
                if text:
                    self.blocks.append(text)
                self.current = None
            if top == tag:
                break

    def handle_data(self, data):
        if self.current is not None and not self._skipping():
            self.current.append(data)


def _vi_share(text: str) -> float:
    letters = [c for c in text if c.isalpha()]
    marked = [c for c in letters if c in "đĐ" or len(unicodedata.normalize("NFD", c)) > 1]
    return len(marked) / max(1, len(letters))


def is_vietnamese(block: str) -> bool:
    words = set(re.findall(r"\w+", block.lower()))
    return _vi_share(block) >= 0.12 and bool(words & _VI_WORDS) and len(block.split()) >= 6


def help_documents(root: Path) -> Iterator[dict[str, str]]:
    """One document a help page (sorted by path); blocks seen on an earlier page dropped."""
    seen: set[str] = set()
    base = root / HELP_ROOT
    for path in sorted(base.rglob("*.html")):
        page = _HelpPage()
        page.feed(path.read_text(encoding="utf-8"))
        kept = []
        for block in page.blocks:
            block = _nfc(block)
            if block in seen or not is_vietnamese(block):
                continue
            seen.add(block)
            kept.append(block)
        if kept:
            yield {"id": "help/" + path.relative_to(base).with_suffix("").as_posix(), "text": "\n".join(kept)}


# ---- the project's code, sums, lesson sentences ------------------------------------------------------------------
def code_documents(repo: Path = REPO, commit: str = CODE_COMMIT) -> Iterator[dict[str, str]]:
    """The project's Python files as of `commit`, one document each (blank-line runs squeezed)."""

    def git(*args: str) -> str:
        try:
            return subprocess.run(
                ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, encoding="utf-8"
            ).stdout
        except (OSError, subprocess.CalledProcessError) as e:
            raise CorpusBuildError(
                f"git could not read commit {commit[:12]} of {repo} (the code source needs the project's history: "
                f"a full clone, not a shallow one): {e}"
            ) from None

    for path in git("ls-tree", "-r", "--name-only", commit, *CODE_FOLDERS).splitlines():
        if path.endswith(".py"):
            text = re.sub(r"\n{3,}", "\n\n", git("show", f"{commit}:{path}")).strip()
            if text:
                yield {"id": "code/" + path, "text": _nfc(text)}


def sum_line(rng: random.Random) -> str:
    """One arithmetic fact, correct, with operands of 2–5 digits (multiplication: a 1–2-digit factor)."""
    op = rng.choice("++-*")
    a = rng.randrange(10, 10 ** rng.randint(2, 5))
    if op == "*":
        b = rng.randrange(2, 10 ** rng.randint(1, 2))
        return f"{a} * {b} = {a * b}"
    b = rng.randrange(10, 10 ** rng.randint(2, 5))
    if op == "-":
        a, b = max(a, b), min(a, b)
        return f"{a} - {b} = {a - b}"
    return f"{a} + {b} = {a + b}"


def _chunks(lines: list[str], prefix: str) -> Iterator[dict[str, str]]:
    for i in range(0, len(lines), LINES_PER_DOC):
        yield {"id": f"{prefix}/{i // LINES_PER_DOC:04d}", "text": _nfc("\n".join(lines[i : i + LINES_PER_DOC]))}


def sums_documents(seed: int = SUMS_SEED, n: int = SUMS_LINES) -> Iterator[dict[str, str]]:
    rng = random.Random(seed)
    yield from _chunks([sum_line(rng) for _ in range(n)], "sums")


def lesson_documents(path: Path = HERE / "lesson.txt") -> Iterator[dict[str, str]]:
    lines = [ln for ln in path.read_text(encoding="utf-8").splitlines() if ln.strip() and not ln.startswith("#")]
    yield from _chunks(lines, "lesson")


def _nfc(text: str) -> str:
    return unicodedata.normalize("NFC", text)


# ---- writing -----------------------------------------------------------------------------------------------------
def encode_documents(docs: Iterator[dict[str, str]]) -> bytes:
    """JSON Lines, compressed with xz (preset 9, CRC64): the same documents give the same bytes."""
    text = "".join(json.dumps(d, ensure_ascii=False, sort_keys=True) + "\n" for d in docs)
    return lzma.compress(text.encode("utf-8"), format=lzma.FORMAT_XZ, check=lzma.CHECK_CRC64, preset=XZ_PRESET)


def _deb_version(deb: Path) -> str:
    out = subprocess.run(["dpkg-deb", "-f", str(deb), "Version"], check=True, capture_output=True, text=True)
    return out.stdout.strip()


def fetch_packages(debs: Path | None, work: Path) -> dict[str, Path]:
    """Each package unpacked under `work`: from `debs` if given, else downloaded with `apt-get download`."""
    roots = {}
    for name, version in PACKAGES.items():
        if debs is None:
            target = work / "debs"
            target.mkdir(exist_ok=True)
            subprocess.run(["apt-get", "download", f"{name}={version}"], cwd=target, check=True)
            found = sorted(target.glob(f"{name}_*.deb"))
        else:
            found = sorted(Path(debs).glob(f"{name}_*.deb"))
        if not found:
            where = debs or work / "debs"
            raise CorpusBuildError(f"no {name}_*.deb in {where} (give --debs DIR, or let apt-get fetch it)")
        got = _deb_version(found[-1])
        if got != version:
            raise CorpusBuildError(f"{found[-1].name} is version {got}; the corpus was built from {version}")
        roots[name] = work / name
        subprocess.run(["dpkg-deb", "-x", str(found[-1]), str(roots[name])], check=True)
    return roots


def build(out: Path, debs: Path | None = None) -> dict[str, str]:
    """Write every corpus file into `out`; returns file → sha256."""
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="dspark-corpus-") as tmp:
        roots = fetch_packages(debs, Path(tmp))
        files = {
            "en_austen.jsonl.xz": austen_documents(austen_novels(roots["r-cran-janeaustenr"])),
            "vi_help.jsonl.xz": help_documents(roots["libreoffice-help-vi"]),
            "code.jsonl.xz": code_documents(),
            "sums.jsonl.xz": sums_documents(),
            "lesson.jsonl.xz": lesson_documents(),
        }
        sums = {}
        for name, docs in files.items():
            data = encode_documents(docs)
            write_atomic(out / name, data)  # each file whole or not at all
            sums[name] = hashlib.sha256(data).hexdigest()
    return sums


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m lab.realtext.build", description=__doc__.split("\n")[0])
    p.add_argument("--debs", type=Path, help="a folder holding the .deb files (default: apt-get download them)")
    p.add_argument("--check", action="store_true", help="rebuild into a temporary folder and compare, byte for byte")
    args = p.parse_args(argv)
    try:
        if args.check:
            with tempfile.TemporaryDirectory(prefix="dspark-corpus-check-") as tmp:
                return 1 if differing(build(Path(tmp), args.debs), DATA) else 0
        sums = build(DATA, args.debs)
        for n, s in sums.items():
            print(f"{s[:16]}  {n}")
        return 0
    except CorpusBuildError as e:
        print(f"corpus: {e}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())

"""The pages' monospace face, "DSpark Mono": Vietnamese that renders on every machine, offline.

Debian's default monospace font (DejaVu Sans Mono) has no "ề", "ế", "ả"…: token strips, cache slots and code
showed "về" as "vê`". The presenter, the Explorer (and, through `font_face_css`, the notebooks) therefore embed
their own face, first in every monospace stack, as base64 WOFF2 inside an @font-face rule: nothing is fetched.

The face is a subset, made once by `python -m lab.present.fonts --write` (fontTools, a build-time tool only; the
pages read the committed files and need nothing at run time), of two free fonts Debian packages:
  Noto Sans Mono Regular and Bold (fonts-noto-mono, SIL Open Font License 1.1): Latin, Vietnamese, Greek, math;
  DejaVu Sans Mono (fonts-dejavu-core, Bitstream Vera licence, DejaVu changes public domain): the few marks Noto
  Sans Mono lacks (✓ ✗ ↻ ↵ …), declared with their own unicode-range under the same family name.
Both are renamed "DSpark Mono" (a modified version keeps no original name). lab/present/fonts/ holds the subsets,
their licences and faces.json (file, weight, unicode-range and SHA-256 of each face).
"""

from __future__ import annotations

import argparse
import base64
import hashlib
import io
import json
import sys
import unicodedata
from importlib import resources
from pathlib import Path
from typing import Any

FAMILY = "DSpark Mono"
MONO_STACK = f'"{FAMILY}", ui-monospace, "DejaVu Sans Mono", monospace'  # first in every monospace stack
FOLDER = "fonts"  # beside this module: the subsets, their licences, faces.json
MANIFEST = "faces.json"
REGULAR, BOLD, BOTH = "400", "700", "400 700"  # the CSS font-weights each face is declared for
# (the marks face is declared once per weight, never as a range: a range would match 600 better than the bold face
# does, and text at weight 600 would lose the Vietnamese letters)
SOURCES = (  # (face file, weight, source font under the font root, its Debian package, licence file)
    ("DSparkMono-Regular.woff2", REGULAR, "noto/NotoSansMono-Regular.ttf", "fonts-noto-mono", "OFL.txt"),
    ("DSparkMono-Bold.woff2", BOLD, "noto/NotoSansMono-Bold.ttf", "fonts-noto-mono", "OFL.txt"),
    ("DSparkMono-Marks.woff2", BOTH, "dejavu/DejaVuSansMono.ttf", "fonts-dejavu-core", "LICENSE-DejaVu.txt"),
)
FONT_ROOT = "/usr/share/fonts/truetype"  # where Debian's fonts-noto-mono and fonts-dejavu-core install them
MAX_BYTES = 100_000  # all faces together, before base64: the pages stay small

# what the pages write in monospace: ASCII, Latin-1, the Vietnamese alphabet (precomposed and, for text typed on
# macOS, its combining marks), and the symbols the strips, equations and legends use
VIETNAMESE_BASE = "aăâeêioôơuưyAĂÂEÊIOÔƠUƯY"
TONES = "\u0300\u0301\u0303\u0309\u0323"  # grave, acute, tilde, hook above, dot below
COMBINING = "\u0300\u0301\u0302\u0303\u0306\u0309\u031b\u0323"  # NFD: tones, circumflex, breve, horn
SYMBOLS = (
    "▁▸▶◀●○◆◇▮▯■□✓✗↻↵│┃─…·•–—‘’“”«»†‖′″→←↑↓↔⇒⇐∈∉∑ΣΠσπτℓθΘαβγδεημλρφψωΔΩ√∞≈≠≡≤≥−×÷±∓⊙⊕⊗⟨⟩∂∇∏∫"
    "₀₁₂₃₄₅₆₇₈₉⁰¹²³⁴⁵⁶⁷⁸⁹ᵢⱼₖₙ⁻⁺ⁿ½¼¾°ℹ★"
)


def vietnamese_letters() -> str:
    """Every precomposed Vietnamese letter, lower and upper case (a base vowel with each tone), and đ Đ."""
    out = {unicodedata.normalize("NFC", b + t) for b in VIETNAMESE_BASE for t in TONES}
    return "".join(sorted(out | set(VIETNAMESE_BASE) | {"đ", "Đ"}))


def wanted_text() -> str:
    """Every character the face should hold (see the module's docstring); the vocabulary's characters too."""
    from dspark_mini.tokenizer import default_tokenizer

    from ..lesson.steps import STEPS

    tok = default_tokenizer()
    vocab = "".join(tok.token_text(i) for i in range(tok.vocab_size))
    ascii_ = "".join(map(chr, range(0x20, 0x7F)))
    latin1 = "".join(map(chr, range(0xA0, 0x100)))
    equations = "".join(s.equation for s in STEPS)
    every = set(ascii_ + latin1 + vietnamese_letters() + COMBINING + SYMBOLS + vocab + equations)
    # no control characters: the byte-level vocabulary holds all 33 (bytes 0x00..0x1F, 0x7F: "\n", "\t", …) and no
    # font draws them
    return "".join(sorted(c for c in every if unicodedata.category(c) != "Cc"))


# ---- reading the committed faces (no fontTools) -----------------------------------------------------------------
def folder() -> Any:
    return resources.files(__package__).joinpath(FOLDER)


def manifest() -> list[dict[str, Any]]:
    """faces.json: one entry per face {file, weight, source, licence, sha256, characters, unicode_range}."""
    return json.loads(folder().joinpath(MANIFEST).read_text(encoding="utf-8"))


def unicode_range(codepoints: list[int]) -> str:
    """CSS unicode-range for a sorted list of code points: runs joined, "U+20-7E, U+A0-FF, …"."""
    runs: list[list[int]] = []
    for cp in codepoints:
        if runs and cp == runs[-1][1] + 1:
            runs[-1][1] = cp
        else:
            runs.append([cp, cp])
    return ", ".join(f"U+{a:X}" if a == b else f"U+{a:X}-{b:X}" for a, b in runs)


def codepoints(ranges: str) -> set[int]:
    """The code points of a CSS unicode-range ("U+20-7E, U+A0")."""
    out: set[int] = set()
    for part in ranges.split(","):
        lo, _, hi = part.strip().removeprefix("U+").partition("-")
        out |= set(range(int(lo, 16), int(hi or lo, 16) + 1))
    return out


def font_face_css(family: str = FAMILY) -> str:
    """The @font-face rules of every face, the WOFF2 inlined as base64: paste into any page's <style> (the
    presenter, the Explorer, a notebook's HTML output) and use `MONO_STACK` as its monospace font-family."""
    rules = []
    for face in manifest():
        data = folder().joinpath(face["file"]).read_bytes()
        if hashlib.sha256(data).hexdigest() != face["sha256"]:
            raise ValueError(f"lab/present/fonts/{face['file']} does not match faces.json: run `{WRITE_COMMAND}`")
        b64 = base64.b64encode(data).decode("ascii")
        for weight in face["weight"].split():
            rules.append(
                f'@font-face {{ font-family: "{family}"; font-style: normal; font-weight: {weight}; '
                f'font-display: block; src: url(data:font/woff2;base64,{b64}) format("woff2"); '
                f"unicode-range: {face['unicode_range']}; }}"
            )
    return "\n".join(rules) + "\n"


# ---- making the subsets (fontTools, at build time only) ---------------------------------------------------------
def notebook_font() -> None:
    """DSpark Mono first in a JupyterLab notebook's code cells and outputs (one `<style>` output: the faces inlined,
    JupyterLab's code-font variable set), so "về", "tiếng", "đẹp" render whole on a machine whose monospace font lacks
    them (Debian's DejaVu Sans Mono has no "ề"/"ế")."""
    from IPython.display import HTML, display  # a notebook's dependency, not the pages'

    css = f":root {{ --jp-code-font-family: {MONO_STACK}; }} .jp-OutputArea-output pre {{ font-family: {MONO_STACK}; }}"
    display(HTML(f"<style>{font_face_css()}{css}</style>"))


WRITE_COMMAND = "python -m lab.present.fonts --write"


def subset_face(source: Path, codepoints: set[int], family: str) -> tuple[bytes, list[int]]:
    """`source` cut down to those of `codepoints` it has, renamed `family`, as WOFF2; and the code points kept."""
    from fontTools import subset
    from fontTools.ttLib import TTFont

    font = TTFont(source, recalcTimestamp=False)  # the same bytes on every run
    kept = sorted(cp for cp in codepoints if cp in font.getBestCmap())
    options = subset.Options()
    options.flavor = "woff2"
    options.layout_features = ["*"]  # marks positioning (combining accents) and the ligature-free defaults
    options.name_IDs = [0, 1, 2, 3, 4, 5, 6, 13, 14]  # copyright, names, version, licence and its URL
    options.hinting = False  # browsers do not need TrueType hinting at these sizes: a third of the bytes
    sub = subset.Subsetter(options)
    sub.populate(unicodes=kept)
    sub.subset(font)
    kept = sorted(font.getBestCmap())  # what the subset holds (fontTools may keep a mirrored form too: ∋ with ∈)
    style = font["name"].getDebugName(2) or "Regular"
    for record in font["name"].names:
        if record.nameID in (1, 16):
            record.string = family
        elif record.nameID == 4:
            record.string = f"{family} {style}"
        elif record.nameID == 6:
            record.string = f"{family.replace(' ', '')}-{style}"
        elif record.nameID == 3:
            record.string = f"{family} {style} (subset)"
    out = io.BytesIO()
    font.flavor = "woff2"
    font.save(out)
    return out.getvalue(), kept


def write_faces(root: Path, out: Path) -> list[dict[str, Any]]:
    """Make every face of SOURCES from the fonts under `root`, each holding what the earlier faces lack, and
    write them with faces.json into `out`. Raises if they outgrow MAX_BYTES or miss a Vietnamese letter."""
    from dspark_mini.files import write_atomic

    want = {ord(c) for c in wanted_text()}
    covered: set[int] = set()  # what the regular face holds: the marks face takes only the rest
    faces, total = [], 0
    for name, weight, path, package, licence in SOURCES:
        source = root / path
        if not source.is_file():
            raise OSError(f"no {source}: apt-get install {package} (or --root a folder that holds {path})")
        data, kept = subset_face(source, want - covered if weight == BOTH else want, FAMILY)
        if weight == REGULAR:
            covered = set(kept)
        total += len(data)
        write_atomic(out / name, data)
        faces.append(
            {
                "file": name,
                "weight": weight,
                "source": f"{source.name} (Debian package {package})",
                "licence": licence,
                "sha256": hashlib.sha256(data).hexdigest(),
                "characters": len(kept),
                "unicode_range": unicode_range(kept),
            }
        )
    missing = {ord(c) for c in vietnamese_letters()} - covered  # never from the marks face: one design
    if missing:
        raise ValueError(f"the faces lack Vietnamese letters {''.join(map(chr, sorted(missing)))}")
    if total > MAX_BYTES:
        raise ValueError(f"the faces are {total:,} bytes: allowed ≤ {MAX_BYTES:,} (cut SYMBOLS or the sources)")
    write_atomic(out / MANIFEST, json.dumps(faces, ensure_ascii=False, indent=1) + "\n")
    return faces


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m lab.present.fonts", description=__doc__.splitlines()[0])
    parser.add_argument("--write", action="store_true", help="make the subsets into lab/present/fonts/ (fontTools)")
    parser.add_argument("--root", type=Path, default=Path(FONT_ROOT), help=f"the source fonts (default {FONT_ROOT})")
    args = parser.parse_args(argv)
    if not args.write:
        for face in manifest():
            print(f"{face['file']}: weight {face['weight']}, {face['characters']} characters, from {face['source']}")
        return 0
    try:
        faces = write_faces(args.root, Path(__file__).resolve().parent / FOLDER)
    except ImportError:
        print("error: --write needs fontTools and brotli: pip install fonttools brotli", file=sys.stderr)
        return 2
    except (OSError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    for face in faces:
        print(f"wrote {face['file']} ({face['characters']} characters from {face['source']})")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The pages' monospace face (lab/present/fonts.py, lab/present/fonts/): the committed subsets hold what faces.json
says, read back with fontTools (independent of the code that wrote them), and together they draw every Vietnamese
letter, every character of the lab's vocabulary and the strips' marks; the CSS inlines them and nothing else."""

from __future__ import annotations

import hashlib
import io
import re
from pathlib import Path

import pytest

from lab.present import fonts

ttLib = pytest.importorskip("fontTools.ttLib")  # requirements.txt has fonttools and brotli (WOFF2)
MARKS = "▁✓✗●○↻ℓτ·→…▸◆"
# characters of the lab vocabulary that neither source face has (Noto Sans Mono, DejaVu Sans Mono): the browser's
# own fallback draws them; a new one here means a font to add to lab/present/fonts.py's SOURCES
IN_NEITHER_FONT = {"⟺"}  # U+27FA, a token text of the BPE


@pytest.fixture(scope="module")
def faces() -> list[tuple[dict, object]]:
    out = []
    for face in fonts.manifest():
        data = fonts.folder().joinpath(face["file"]).read_bytes()
        out.append((face, ttLib.TTFont(io.BytesIO(data))))
    return out


def test_each_face_holds_exactly_its_unicode_range(faces):
    for face, font in faces:
        data = fonts.folder().joinpath(face["file"]).read_bytes()
        assert hashlib.sha256(data).hexdigest() == face["sha256"], face["file"]
        cmap = set(font.getBestCmap())
        assert cmap == fonts.codepoints(face["unicode_range"]), face["file"]
        assert len(cmap) == face["characters"]
        assert font["name"].getDebugName(1) == fonts.FAMILY  # renamed: a modified version keeps no original name
        assert font.flavor == "woff2"


def test_the_faces_draw_vietnamese_the_vocabulary_and_the_marks(faces):
    from dspark_mini.tokenizer import default_tokenizer

    regular = set(faces[0][1].getBestCmap())
    every = set().union(*(set(f.getBestCmap()) for _, f in faces))
    letters = fonts.vietnamese_letters()
    assert len(letters) == len(fonts.VIETNAMESE_BASE) * (len(fonts.TONES) + 1) + 2  # each vowel × 6 tones, đ Đ
    assert {ord(c) for c in letters + "ềếộữẫđ"} <= regular  # one design for the letters: never from the marks face
    tok = default_tokenizer()
    texts = [tok.token_text(i) for i in range(tok.vocab_size)]  # all 8,192 tokens as the pages show them
    controls = set(map(chr, [*range(0x20), 0x7F]))  # drawn by no font: the byte-level BPE holds all 33
    vocab = {c for t in texts for c in t}
    assert controls <= vocab
    assert {c for c in vocab - controls if ord(c) not in every} == IN_NEITHER_FONT
    assert all(c in fonts.wanted_text() for c in IN_NEITHER_FONT)  # asked for all the same
    assert {ord(c) for c in MARKS} <= every
    drawn = {ord(c) for c in fonts.wanted_text()} - {ord(c) for c in IN_NEITHER_FONT}
    assert drawn <= every  # what `--write` asks for, the committed files hold
    assert not controls & set(fonts.wanted_text())


def test_css_inlines_every_face_and_fetches_nothing():
    css = fonts.font_face_css()
    rules = re.findall(r"@font-face \{[^}]*\}", css)
    weights = [w for face in fonts.manifest() for w in face["weight"].split()]
    assert len(rules) == len(weights) and sorted(re.findall(r"font-weight: (\d+)", css)) == sorted(weights)
    assert all(f'font-family: "{fonts.FAMILY}"' in r for r in rules)
    assert set(re.findall(r"url\(([^;,]{0,20})", css)) == {"data:font/woff2"}
    assert not re.search(r"font-weight: \d+ \d+", css)  # no weight range: it would outrank the bold face at 600
    total = sum(fonts.folder().joinpath(f["file"]).stat().st_size for f in fonts.manifest())
    assert total <= fonts.MAX_BYTES
    for face in fonts.manifest():
        assert fonts.folder().joinpath(face["licence"]).read_text(encoding="utf-8").strip()


def test_a_changed_face_is_refused(monkeypatch):
    faces = fonts.manifest()
    faces[0]["sha256"] = "0" * 64
    monkeypatch.setattr(fonts, "manifest", lambda: faces)
    with pytest.raises(ValueError, match=r"faces\.json.*--write"):
        fonts.font_face_css()


def test_every_notebook_puts_the_embedded_face_first(monkeypatch):
    """The notebooks' code cells and outputs use DSpark Mono: each notebook calls notebook_font(), whose one HTML
    output holds every face's @font-face and sets JupyterLab's code-font variable to the stack that starts with it."""
    import IPython.display as ipd

    from lab.present import fonts

    shown = []
    monkeypatch.setattr(ipd, "display", shown.append)
    fonts.notebook_font()
    (html,) = shown
    style = html.data
    assert style.count("@font-face") == sum(len(f["weight"].split()) for f in fonts.manifest())
    assert f"--jp-code-font-family: {fonts.MONO_STACK};" in style and fonts.MONO_STACK.startswith('"DSpark Mono"')
    root = Path(__file__).resolve().parents[1] / "notebooks"
    missing = [p.name for p in sorted(root.glob("*.py")) if "\nnotebook_font()" not in p.read_text(encoding="utf-8")]
    assert missing == []

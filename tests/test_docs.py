"""The pages a reader meets: README.md / README.vi.md, docs/*.md, the notebooks' text and the lesson's words.

They speak to the lab's users, so no word of how the project was organised comes back; every Markdown table has as
many cells in a row as its header; each page with a Vietnamese twin links to it and back; and the recipe numbers the
training page quotes are filled from report.json, never typed."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest

from lab.sync.prose import MARK, prose_files

ROOT = Path(__file__).resolve().parents[1]

# words from the way the work was organised, not from the lab: a reader has no use for them (case-insensitive)
INTERNAL = (
    r"not drawn",
    r"device status",
    r"\bsessions?\b",
    r"\bissues?\b",
    r"\bdossiers?\b",
    r"\bsprints?\b",
    r"\bround 3\b",
    r"\btickets?\b",
    r"\bCEO\b",
    r"\bseed lesson",  # the source the lab grew from is "the original lesson" to a reader
    r"\bhồ sơ nghiên cứu\b",
    r"\bphiên\b(?! bản)",  # "phiên bản" is "version"; "phiên" alone is a session
)
# a technical use a page may need (the phrase → why it is allowed); none today
ALLOWED: dict[str, str] = {}


def reader_pages() -> list[Path]:
    return [
        *(ROOT / name for name in ("README.md", "README.vi.md")),
        *sorted((ROOT / "docs").glob("*.md")),
        *sorted((ROOT / "notebooks").glob("[0-9]*.py")),
        *sorted((ROOT / "lab" / "lang").glob("*/*.toml")),
    ]


def reader_text(path: Path) -> str:
    """What a reader sees of a file: a notebook source's comment lines (its Markdown cells), the rest whole."""
    text = path.read_text(encoding="utf-8")
    if path.suffix == ".py":
        return "\n".join(line if line.lstrip().startswith("#") else "" for line in text.split("\n"))
    return text


def test_no_page_speaks_of_how_the_project_was_organised() -> None:
    found = []
    for path in reader_pages():
        text = reader_text(path)
        for phrase in ALLOWED:
            text = re.sub(re.escape(phrase), "", text, flags=re.IGNORECASE)
        for pattern in INTERNAL:
            for m in re.finditer(pattern, text, flags=re.IGNORECASE):
                line = text.count("\n", 0, m.start()) + 1
                found.append(f"{path.relative_to(ROOT)}:{line}: {m[0]!r}")
    assert not found, "rewrite these for a reader:\n" + "\n".join(found)


# in code, tests and build files: the citations of notes a reader does not have (the docs rule's list, narrowed to
# what cannot be an ordinary word in a docstring)
INTERNAL_IN_CODE = (r"\bissues? \d", r"\bissue's\b", r"\bdossiers?\b", r"\bresearch ?§", r"\[KZ\b")
CHECKERS = ("tests/test_docs.py", "tests/test_imports.py")  # they spell the words they look for


def test_no_code_cites_how_the_project_was_organised() -> None:
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    code = [f for f in files if f.endswith((".py", ".js", ".sh", ".toml", ".cfg")) or f in ("Makefile", ".ci/run")]
    found = []
    for name in code:
        if name in CHECKERS or not (ROOT / name).is_file():
            continue
        text = (ROOT / name).read_text(encoding="utf-8", errors="replace")
        for pattern in INTERNAL_IN_CODE:
            for m in re.finditer(pattern, text, flags=re.IGNORECASE):
                found.append(f"{name}:{text.count(chr(10), 0, m.start()) + 1}: {m[0]!r}")
    assert len(code) > 100 and not found, "rewrite these for a reader:\n" + "\n".join(found)


CITES = ["(issue 10: ≤ 1.25)", "the dossier §8", "(research §2.5)", "[KZ §3.1]", "the issue's bar"]


@pytest.mark.parametrize("cite", CITES)
def test_the_code_list_catches_a_citation(cite) -> None:
    assert any(re.search(p, cite, flags=re.IGNORECASE) for p in INTERNAL_IN_CODE)


@pytest.mark.parametrize("word", ["the session of issue 22", "device status: not drawn", "hồ sơ nghiên cứu"])
def test_the_word_list_catches_what_it_is_for(word) -> None:
    assert any(re.search(p, word, flags=re.IGNORECASE) for p in INTERNAL)


def test_the_word_list_leaves_ordinary_words_alone() -> None:
    text = "phiên bản 4.1 · a progress bar · worker processes · the round's drafts · a sessile word"
    assert not any(re.search(p, text, flags=re.IGNORECASE) for p in INTERNAL)


def cells(row: str) -> int:
    """The cells of a Markdown table row: `|` splits, except escaped (`\\|`) or inside a code span."""
    row = re.sub(r"`[^`]*`", "``", row.strip()).replace("\\|", "")
    return len(row.strip("|").split("|"))


def tables(text: str):
    """(line number, rows) of every Markdown table outside a fenced code block."""
    block: list[tuple[int, str]] = []
    fenced = False
    for n, line in enumerate([*text.split("\n"), ""], 1):
        if line.startswith("```"):
            fenced = not fenced
        if not fenced and line.lstrip().startswith("|"):
            block.append((n, line))
            continue
        if len(block) >= 2 and set(block[1][1].replace(" ", "")) <= set("|-:"):
            yield block
        block = []


def test_every_table_row_has_as_many_cells_as_its_header() -> None:
    bad = []
    for path in [ROOT / "README.md", ROOT / "README.vi.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for block in tables(path.read_text(encoding="utf-8")):
            want = cells(block[0][1])
            bad += [
                f"{path.relative_to(ROOT)}:{n}: {cells(row)} cells, header {want}"
                for n, row in block[1:]
                if cells(row) != want
            ]
    assert not bad, "\n".join(bad)


def test_the_cell_count_reads_code_spans_and_escapes() -> None:
    assert cells("| a | `x | y` | b \\| c |") == 3
    assert cells("|---|---|---|---|") == 4


# each English page and its Vietnamese twin link to each other near the top
TWINS = [("README.md", "README.vi.md")] + [
    (f"docs/{p.name.replace('.vi.md', '.md')}", f"docs/{p.name}") for p in sorted((ROOT / "docs").glob("*.vi.md"))
]


@pytest.mark.parametrize(("en", "vi"), TWINS)
def test_each_page_links_its_twin_at_the_top(en, vi) -> None:
    for page, twin in ((en, vi), (vi, en)):
        head = "\n".join((ROOT / page).read_text(encoding="utf-8").split("\n")[:5])
        assert f"]({Path(twin).name})" in head, f"{page} does not link {twin} in its first lines"


def test_both_readmes_link_the_glossary_and_the_teachers_page() -> None:
    for readme in ("README.md", "README.vi.md"):
        text = (ROOT / readme).read_text(encoding="utf-8")
        for page in ("docs/glossary.md", "docs/glossary.vi.md", "docs/classroom.md", "docs/classroom.vi.md"):
            assert f"]({page})" in text, (readme, page)


def test_the_vietnamese_readme_quotes_its_numbers_through_markers() -> None:
    path = ROOT / "README.vi.md"
    assert path in prose_files()  # so `python -m lab.sync.prose --check` holds its numbers to the data
    assert len(MARK.findall(path.read_text(encoding="utf-8"))) >= 10


def test_the_glossary_gives_c_one_meaning() -> None:
    """c is the confidence head's output; the measured conditional acceptance is α_i, the predicted survival a_j."""
    for name in ("glossary.md", "glossary.vi.md"):
        rows = [r for r in (ROOT / "docs" / name).read_text(encoding="utf-8").split("\n") if r.startswith("| c, c_i")]
        assert len(rows) == 1 and "`confidence`" in rows[0]
    for path in reader_pages():
        text = reader_text(path)
        assert not re.search(r"c₁ − (mean|trung bình)\(c₂", text), f"{path}: the decay is α₁ − mean(α₂..), not c"


# recipe fields a page quotes: each value must sit inside a marker there (filled from report.json); the READMEs are
# held to the fields whose values no other sentence of theirs has (a "12" there is the suite's minutes)
STEPS = ("target_steps", "draft_steps", "cache_prompts")
QUOTED_RECIPE = {
    "docs/training.md": (*STEPS, "draft_anchors", "select_every", "eval_prompts"),
    "README.md": STEPS,
    "README.vi.md": STEPS,
}


@pytest.mark.parametrize("page", list(QUOTED_RECIPE))
def test_recipe_numbers_are_filled_from_the_report_not_typed(page) -> None:
    recipe = json.loads((ROOT / "lab" / "weights" / "report.json").read_text(encoding="utf-8"))["recipe"]
    text = re.sub(r"```.*?```", "", MARK.sub("§", (ROOT / page).read_text(encoding="utf-8")), flags=re.S)
    for field in QUOTED_RECIPE[page]:
        v = recipe[field]
        for form in {str(v), f"{v:,}"}:
            m = re.search(rf"(?<![\w.,]){re.escape(form)}(?![\w]|[.,]\d)", text)
            assert m is None, f"{page}: {field} = {form} typed by hand: {text[max(0, m.start() - 40) : m.end() + 20]!r}"


def test_pages_say_why_two_measurements_of_one_thing_differ() -> None:
    """speed.md's bound uses verify costs measured apart from its verify row; paper.md's Figure 3 variants are not
    the shipped drafters of Table 1: each page says so where the two numbers meet."""
    read = lambda p: (ROOT / "docs" / p).read_text(encoding="utf-8")  # noqa: E731
    assert "These verify(k) costs are not the verify row's" in read("speed.md")
    assert "These variants are not the shipped drafters of Table 1" in read("paper.md")
    assert "Các biến thể này không phải các bộ vẽ đi kèm ở Bảng 1" in read("paper.vi.md")

"""The lesson's text files (lab/lang/<lang>/<family>.toml): both languages hold the same ids and placeholders, the
loader refuses a file that does not, and no Python module of the lab keeps a table of vi/en sentences of its own."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from lab.text import LANG_DIR, LANGS, Texts, lang_string, lang_table, lang_tables, placeholders, read_family

LAB = Path(__file__).resolve().parents[1] / "lab"
FAMILIES = sorted(p.stem for p in (LANG_DIR / "en").glob("*.toml"))

# Vietnamese letters (any letter with a Vietnamese diacritic, đ included)
VI_LETTERS = re.compile(r"[ăâđêôơưàáảãạằắẳẵặầấẩẫậèéẻẽẹềếểễệìíỉĩịòóỏõọồốổỗộờớởỡợùúủũụừứửữựỳýỷỹỵ]", re.IGNORECASE)
# the Python string literals that may hold Vietnamese letters: data, not sentences a screen shows (file → how many)
VI_DATA = {
    "present/fonts.py": 3,  # the Vietnamese letters a page's font must cover
    "realtext/bpe.py": 2,  # the Vietnamese letters of the tokenizer's base alphabet
    "realtext/build.py": 2,  # the corpus's Vietnamese stop words and letters (to tell Vietnamese text apart)
    "evaluation/quality.py": 1,  # a free-form prompt ("Xin chào")
    "text.py": 1,  # the default prompt
}


def test_every_family_has_both_languages_with_the_same_ids_and_placeholders():
    assert len(FAMILIES) >= 20, FAMILIES
    for lang in LANGS:
        assert sorted(p.stem for p in (LANG_DIR / lang).glob("*.toml")) == FAMILIES
    for family in FAMILIES:
        parsed = read_family(family)  # raises on any difference between the languages
        assert list(parsed["vi"]) == list(parsed["en"])
        for section, table in lang_tables(family).items():
            for key, texts in table.items():
                assert set(texts) == set(LANGS), (family, section, key)
                if isinstance(texts["en"], str):
                    assert texts["en"] and texts["vi"], (family, section, key)  # no empty text
                    assert placeholders(texts["en"]) == placeholders(texts["vi"]), (family, section, key)
                else:
                    assert isinstance(texts["en"], tuple) and len(texts["en"]) == len(texts["vi"]) >= 1


def test_every_family_is_read_by_the_lab():
    code = "\n".join(p.read_text(encoding="utf-8") for p in LAB.rglob("*.py"))
    unread = [f for f in FAMILIES if not re.search(rf"lang_(?:table|tables|string)\(\s*\"{re.escape(f)}\"", code)]
    assert unread == [], f"text files no module reads: {unread}"


def write_family(root: Path, family: str, vi: str, en: str) -> None:
    for lang, text in (("vi", vi), ("en", en)):
        (root / lang).mkdir(parents=True, exist_ok=True)
        (root / lang / f"{family}.toml").write_text(text, encoding="utf-8")


def test_the_loader_reads_tables_strings_and_lines(tmp_path):
    write_family(
        tmp_path,
        "demo",
        'top = "trên cùng"\n[t]\na = "một {n} token"\nlines = ["dòng 1", "dòng 2"]\n',
        'top = "on top"\n[t]\na = "one {n} token"\nlines = ["line 1", "line 2"]\n',
    )
    assert lang_table("demo", "t", tmp_path) == {
        "a": {"vi": "một {n} token", "en": "one {n} token"},
        "lines": {"vi": ("dòng 1", "dòng 2"), "en": ("line 1", "line 2")},
    }
    assert lang_string("demo", "top", tmp_path) == {"vi": "trên cùng", "en": "on top"}
    assert list(lang_tables("demo", tmp_path)) == ["t"]
    texts = Texts({k: v for k, v in lang_table("demo", "t", tmp_path).items() if k == "a"}, "demo")
    assert texts("a", "vi", n=3) == "một 3 token" and texts("a", "en", n=3) == "one 3 token"
    with pytest.raises(ValueError, match="has no table 'nope': allowed 't'"):
        lang_table("demo", "nope", tmp_path)
    with pytest.raises(ValueError, match="has no text 'nope': allowed 'top'"):
        lang_string("demo", "nope", tmp_path)


@pytest.mark.parametrize(
    ("vi", "en", "message"),
    [
        ('[t]\na = "một"\n', '[t]\na = "one"\nb = "two"\n', r"'demo' id t: the ids differ between vi and en: b"),
        ('[t]\na = "một {n}"\n', '[t]\na = "one {m}"\n', r"'demo' id t\.a: the placeholders differ"),
        ('[t]\na = "một"\n', '[t]\na = "one <!--n:x-->1<!--/n-->"\n', r"id t\.a: the placeholders differ"),
        ('[t]\na = ["một"]\n', '[t]\na = ["one", "two"]\n', r"id t\.a: vi has 1 lines, en 2"),
        ('[t]\na = ["một"]\n', '[t]\na = "one"\n', r"id t\.a: vi and en are not the same kind of value"),
        ('[t]\nb = "hai"\na = "một"\n', '[t]\na = "one"\nb = "two"\n', r"the same ids in another order"),
    ],
)
def test_the_loader_refuses_languages_that_differ(tmp_path, vi, en, message):
    write_family(tmp_path, "demo", vi, en)
    with pytest.raises(ValueError, match=message):
        read_family("demo", tmp_path)


def test_a_missing_language_file_is_named(tmp_path):
    (tmp_path / "en").mkdir()
    (tmp_path / "en" / "demo.toml").write_text('a = "one"\n', encoding="utf-8")
    with pytest.raises(ValueError, match=r"text family 'demo': .*vi/demo\.toml is missing"):
        read_family("demo", tmp_path)


def string_literals(tree: ast.AST) -> list[ast.Constant]:
    """Every str constant of a module but its docstrings."""
    docs = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docs.add(id(first.value))
    return [n for n in ast.walk(tree) if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs]


def two_language_tables(tree: ast.AST) -> list[ast.Dict]:
    """Every dict literal whose keys are exactly "vi" and "en": a text in both languages (a dict of the corpus's
    domains has more keys)."""
    return [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Dict) and sorted(str(getattr(k, "value", "")) for k in n.keys) == ["en", "vi"]
    ]


def vietnamese_literals(tree: ast.AST) -> list[str]:
    return [n.value for n in string_literals(tree) if VI_LETTERS.search(n.value)]


def test_no_module_keeps_a_table_of_sentences_in_both_languages():
    found = []
    for path in sorted(LAB.rglob("*.py")):
        tables = two_language_tables(ast.parse(path.read_text(encoding="utf-8")))
        found += [f"{path.relative_to(LAB)}:{node.lineno}" for node in tables]
    assert found == [], f"vi/en tables in Python (move them to lab/lang/<lang>/*.toml): {found}"


def test_vietnamese_letters_in_python_are_data_not_sentences():
    counts: dict[str, list[str]] = {}
    for path in sorted(LAB.rglob("*.py")):
        rel = path.relative_to(LAB).as_posix()
        for text in vietnamese_literals(ast.parse(path.read_text(encoding="utf-8"))):
            counts.setdefault(rel, []).append(text[:60])
    over = {f: texts for f, texts in counts.items() if len(texts) > VI_DATA.get(f, 0)}
    assert over == {}, f"Vietnamese text in Python (move it to lab/lang/vi/*.toml, its twin to en/): {over}"
    assert set(counts) == set(VI_DATA), "an allowance no longer needed: drop it from VI_DATA"


def test_the_rules_see_a_table_and_a_sentence():
    """The two checks above catch what they look for (on a module written here), and pass over a dict of domains."""
    tree = ast.parse(
        'T = {"x": {"vi": "một câu", "en": "a sentence"}}\nD = {"vi": 2, "en": 1, "code": 1}\n'
        'def f():\n    """Tài liệu."""\n    return "câu"\n'
    )
    assert [n.lineno for n in two_language_tables(tree)] == [1]
    assert sorted(vietnamese_literals(tree)) == ["câu", "một câu"]  # the docstring is not text a screen shows

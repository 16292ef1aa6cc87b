"""The lab's two languages and the strings several parts share: one helper for every vi/en table.

  LANGS, check_lang(lang)     "vi" and "en"; anything else is a ValueError naming it
  lang_table(family, section) one table of the lesson's text files: lab/lang/vi/<family>.toml and
                              lab/lang/en/<family>.toml hold the same ids → {id: {"vi": …, "en": …}}
  lang_tables(family)         every table of a family at one read → {section: {id: {"vi": …, "en": …}}}
  lang_string(family, key)    one top-level string of those files → {"vi": …, "en": …}
  Texts(table, what)          a table {key: {"vi": …, "en": …}}: `T(key, lang, **fmt)` gives one string (formatted
                              when fmt is given); an unknown key is a ValueError naming the table; `T[key]["vi"]`
                              reads it raw. Every module with screen, figure or message text keeps one `Texts`.
  UI, UI(key, lang)           the shared labels: panel headings, table headers, verify outcomes, warnings
  verify_label(status, lang)  "accepted", "not verified", … in either language
  in_lang(lang)               a notebook's own lines: tr = in_lang(LANG); print(tr("English", "tiếng Việt"))
  DEFAULT_PROMPT              the prompt every screen starts from (the walk, generate, the presenter, torchrun)
  check_prompt(prompt, encode, cfg, option, lang)  the one check of a student's prompt: NFC text, not empty, at
                              most prompt_limit(cfg) tokens; every refusal names `option` in `lang` → (text, ids)
  say_symlink(path, option, lang)  the line a command prints when its --out is a symbolic link it follows

Vietnamese is the lab's first language; the terms follow the project's glossary (the lesson's terms first; model
names and code identifiers such as Engram, mHC, DSpark, `hc_pre`, logits stay in English).
"""

from __future__ import annotations

import re
import string
import unicodedata
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from types import MappingProxyType
from typing import Any

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10
    import tomli as tomllib

LANGS: tuple[str, ...] = ("vi", "en")
LANG_DIR = Path(__file__).resolve().parent / "lang"  # lab/lang/<lang>/<family>.toml: every sentence a screen shows
DEFAULT_PROMPT = "Xin chào các bạn, hôm nay chúng ta học về DSpark."


def check_lang(lang: str) -> str:
    """`lang` normalized to one of LANGS; anything else raises ValueError naming it."""
    key = lang.strip().lower() if isinstance(lang, str) else lang
    if key not in LANGS:
        raise ValueError(f"unknown language {lang!r}: allowed {', '.join(map(repr, LANGS))}")
    return key


# ---- the text files: lab/lang/vi/*.toml and lab/lang/en/*.toml, the same ids in both ------------------------------
MARKER = re.compile(r"<!--n:[^>]*-->")  # a number filled from the data it quotes (lab/sync/prose.py)


def placeholders(text: str) -> tuple[list[str], list[str]]:
    """The `{name}` fields of a str.format text and its prose markers, sorted: both languages must have the same."""
    fields = sorted(
        f"{{{name}{'!' + conv if conv else ''}{':' + spec if spec else ''}}}"
        for _, name, spec, conv in string.Formatter().parse(text)
        if name is not None
    )
    return fields, sorted(MARKER.findall(text))


def read_family(family: str, lang_dir: Path | None = None) -> dict[str, dict[str, Any]]:
    """Both languages' file of one family, parsed and checked against each other → {lang: parsed TOML}. The ids,
    every table's and every string's, must be the same in both, and each text's `{fields}` and prose markers too:
    a ValueError names the family, the id and what differs."""
    root = LANG_DIR if lang_dir is None else lang_dir
    files = {lang: root / lang / f"{family}.toml" for lang in LANGS}
    for path in files.values():
        if not path.is_file():
            raise ValueError(f"text family {family!r}: {path} is missing (the lab's text files: {root})")
    parsed = {lang: tomllib.loads(path.read_text(encoding="utf-8")) for lang, path in files.items()}

    def same(a: Any, b: Any, where: str) -> None:
        if isinstance(a, dict) and isinstance(b, dict):
            if list(a) != list(b):
                only = sorted(set(a) ^ set(b)) or ["(the same ids in another order)"]
                raise ValueError(f"text family {family!r}{where}: the ids differ between vi and en: {', '.join(only)}")
            for k in a:
                same(a[k], b[k], f"{where}.{k}" if where else f" id {k}")
        elif isinstance(a, str) and isinstance(b, str):
            if placeholders(a) != placeholders(b):
                vi, en = placeholders(a), placeholders(b)
                raise ValueError(f"text family {family!r}{where}: the placeholders differ: vi {vi}, en {en}")
        elif isinstance(a, list) and isinstance(b, list) and all(isinstance(x, str) for x in a + b):
            if len(a) != len(b):
                raise ValueError(f"text family {family!r}{where}: vi has {len(a)} lines, en {len(b)}")
        else:
            raise ValueError(
                f"text family {family!r}{where}: vi and en are not the same kind of value (str, list of str)"
            )

    same(parsed["vi"], parsed["en"], "")
    return parsed


def _leaf(value: Any) -> str | tuple[str, ...]:
    return tuple(value) if isinstance(value, list) else value


def lang_table(family: str, section: str, lang_dir: Path | None = None) -> dict[str, dict[str, Any]]:
    """One table of a family's files → {id: {"vi": text, "en": text}} in file order (a list of lines → a tuple)."""
    parsed = read_family(family, lang_dir)
    if not isinstance(parsed["en"].get(section), dict):
        tables = sorted(k for k, v in parsed["en"].items() if isinstance(v, dict))
        raise ValueError(f"text family {family!r} has no table {section!r}: allowed {', '.join(map(repr, tables))}")
    return {k: {lang: _leaf(parsed[lang][section][k]) for lang in LANGS} for k in parsed["en"][section]}


def lang_tables(family: str, lang_dir: Path | None = None) -> dict[str, dict[str, dict[str, Any]]]:
    """Every table of a family's files at one read → {section: {id: {"vi": text, "en": text}}}."""
    parsed = read_family(family, lang_dir)
    return {
        section: {k: {lang: _leaf(parsed[lang][section][k]) for lang in LANGS} for k in table}
        for section, table in parsed["en"].items()
        if isinstance(table, dict)
    }


def lang_string(family: str, key: str, lang_dir: Path | None = None) -> dict[str, Any]:
    """One top-level text of a family's files → {"vi": text, "en": text}."""
    parsed = read_family(family, lang_dir)
    if key not in parsed["en"] or isinstance(parsed["en"][key], dict):
        keys = sorted(k for k, v in parsed["en"].items() if not isinstance(v, dict))
        raise ValueError(f"text family {family!r} has no text {key!r}: allowed {', '.join(map(repr, keys))}")
    return {lang: _leaf(parsed[lang][key]) for lang in LANGS}


class Texts(Mapping[str, Mapping[str, str]]):
    """One table of strings in both languages (immutable). Calling it picks a language: T(key, lang, **fmt)."""

    def __init__(self, table: Mapping[str, Mapping[str, str]], what: str = "text") -> None:
        for key, by_lang in table.items():
            if set(by_lang) != set(LANGS) or not all(isinstance(v, str) and v for v in by_lang.values()):
                raise ValueError(f"{what} string {key!r} needs exactly one non-empty str per language {LANGS}")
        self._table = MappingProxyType({k: MappingProxyType(dict(v)) for k, v in table.items()})
        self.what = what

    def __call__(self, key: str, lang: str, **fmt: object) -> str:
        if key not in self._table:
            raise ValueError(f"unknown {self.what} key {key!r}: allowed {', '.join(sorted(self._table))}")
        text = self._table[key][check_lang(lang)]
        return text.format(**fmt) if fmt else text

    def __or__(self, other: Mapping[str, Mapping[str, str]]) -> Texts:
        """Both tables in one (a key of `other` wins)."""
        return Texts({**self._table, **other}, self.what)

    def __getitem__(self, key: str) -> Mapping[str, str]:
        return self._table[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._table)

    def __len__(self) -> int:
        return len(self._table)


# ---- shared UI strings (table headers, panel labels, verify outcomes, warnings) ---------------------------
UI = Texts(lang_table("ui", "ui"), "UI")


def verify_label(status: str, lang: str) -> str:
    """The label of a verify outcome (accepted, rejected, not verified, not sent, resampled, bonus) in `lang`."""
    return UI(status.replace(" ", "_"), lang)


# ---- a student's prompt: one check for every entry point ---------------------------------------------------
PROMPT_TEXT = Texts(lang_table("ui", "prompt_text"), "prompt")


def prompt_limit(cfg: Any) -> int:
    """The most tokens a prompt may have, the same for every entry point: max_seq_len − (k + 1), so one verify of
    the anchor and the k drafts of a round (and one new token of plain decoding) always fits behind it."""
    return cfg.max_seq_len - (cfg.dspark_block_size + 1)


def check_prompt(
    prompt: Any, encode: Callable[[str], list[int]], cfg: Any, option: str = "--prompt", lang: str = "en"
) -> tuple[str, list[int]]:
    """A student's prompt as the model reads it: (its NFC text, its token ids).

    NFC first, so Vietnamese typed with decomposed accents (NFD, as macOS writes it) gives the tokens of its
    composed form; then a prompt that is not a str (TypeError), empty or whitespace only, or longer than
    prompt_limit(cfg) tokens is refused (ValueError). Each message starts with `option` (`--prompt`, the widget's
    field, `--prompts-file line N`) and is in `lang`. A tokenizer error (a character outside the vocabulary)
    keeps its own text behind the option's name."""
    lang, limit = check_lang(lang), prompt_limit(cfg)
    if not isinstance(prompt, str):
        raise TypeError(PROMPT_TEXT("not_text", lang, option=option, value=prompt, limit=limit))
    text = unicodedata.normalize("NFC", prompt)
    if not text.strip():
        raise ValueError(PROMPT_TEXT("empty", lang, option=option, limit=limit))
    try:
        ids = encode(text)
    except ValueError as e:
        raise ValueError(PROMPT_TEXT("tokenizer", lang, option=option, error=e)) from e
    if len(ids) > limit:
        k = cfg.dspark_block_size
        fmt = {"n": len(ids), "limit": limit, "seq": cfg.max_seq_len, "verify": k + 1, "k": k}
        raise ValueError(PROMPT_TEXT("too_long", lang, option=option, **fmt))
    return text, ids


def in_lang(lang: str) -> Callable[[str, str], str]:
    """`tr(en, vi)` → the line in `lang`: a notebook's own prints and labels, written side by side in both languages
    where they are used (a notebook is read top to bottom; a table of keys would hide its sentences elsewhere)."""
    lang = check_lang(lang)

    def tr(en: str, vi: str) -> str:
        return vi if lang == "vi" else en

    return tr


def say_symlink(path, option: str, lang: str) -> None:
    """When `path` (an --out) is a symbolic link, say on stderr that the lab writes where it points and keeps the
    link (dspark_mini.files follows it on purpose); nothing otherwise."""
    import os
    import sys

    if os.path.islink(path):
        target = os.path.realpath(path)
        print(UI("out_symlink", lang, option=option, link=str(path), target=target), file=sys.stderr)

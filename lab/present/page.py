"""One self-contained HTML page from the package's template, style and scripts (no torch: `--help` stays fast).

asset(name)                    a file of this package (template, style, script)
inline(template, parts)        the template with every `/*@MARKER@*/` replaced by its text, each exactly once
render(template, data, parts)  inline() with the page's data as JSON under `/*@DATA@*/`
DEFAULT_REQUESTS, MARKERS      what both pages (the presenter and the Explorer) start from and draw verdicts with
CACHE_TEXT                     the words of the caches view (caches_view.js) both pages show, vi and en
page_vocab(tokenizer)          every token as both pages show it: a leading space as ▁, a line break as ↵
"""

from __future__ import annotations

import json
from importlib import resources
from typing import Any

from ..text import lang_table

DEFAULT_REQUESTS = 16  # a busy server: the scheduler holds some drafts back (chosen so the shipped set shows both)
MARKERS = {  # the verify outcomes' markers, as lab/screens/render.py's STRIP: the marker alone tells them apart
    "anchor": "▸",
    "accepted": "✓",
    "rejected": "✗",
    "not_verified": "·",
    "not_sent": "○",
    "resampled": "↻",
    "bonus": "+",
}

CACHE_TEXT: dict[str, dict[str, str]] = lang_table(
    "page", "cache_text"
)  # caches_view.js reads these keys on either page


def page_vocab(tokenizer: Any) -> list[str]:
    """Every token's text as the pages show it (the legend says so): a space at its start as "▁" (the scripts turn
    it back into a space inside a strip of text, and keep it inside «quotes», where a space would not show), each
    line break as "↵" (« về» → «▁về»; a piece of a character already reads <0xNN>)."""
    out = []
    for i in range(tokenizer.vocab_size):
        text = tokenizer.token_text(i)
        out.append(("▁" + text[1:] if text.startswith(" ") else text).replace("\n", "↵"))
    return out


def asset(name: str) -> str:
    """A file of this package (the pages' templates, styles and scripts)."""
    return resources.files(__package__).joinpath(name).read_text(encoding="utf-8")


def inline(template: str, parts: dict[str, str]) -> str:
    """`template` with each marker of `parts` replaced by its text. A marker must appear exactly once and a text
    must not hold `</script` (it would end the inline script early)."""
    page = asset(template)
    for marker, text in parts.items():
        if "</script" in text.lower() or page.count(marker) != 1:
            raise ValueError(f"cannot inline {marker}: it must appear once and hold no `</script`")
        page = page.replace(marker, text.rstrip("\n"))
    return page


def render(template: str, data: dict[str, Any], parts: dict[str, str]) -> str:
    """The page: `template` with the data as JSON (`<` escaped: no `</script>` can appear) and `parts` inlined."""
    payload = json.dumps(data, ensure_ascii=False, separators=(",", ":")).replace("<", "\\u003c")
    return inline(template, {"/*@DATA@*/": payload, **parts})

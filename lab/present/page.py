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

DEFAULT_REQUESTS = 16  # a busy server: the scheduler holds some drafts back (chosen so the shipped set shows both)
MARKERS = {  # the verify outcomes' markers, as lab/lesson/render.py's STRIP: the marker alone tells them apart
    "anchor": "▸",
    "accepted": "✓",
    "rejected": "✗",
    "not_verified": "·",
    "not_sent": "○",
    "resampled": "↻",
    "bonus": "+",
}

CACHE_TEXT: dict[str, dict[str, str]] = {  # caches_view.js reads these keys on either page
    "caches": {"vi": "Cache sau lần ghi này (độ dài {n})", "en": "The caches after this commit (length {n})"},
    "caches_before": {
        "vi": "Cache trước lần ghi của vòng này (độ dài {n})",
        "en": "The caches before this round's commit (length {n})",
    },
    "window_ring": {"vi": "Vòng cửa sổ (mọi lớp backbone)", "en": "Window ring (every backbone layer)"},
    "window_help": {
        "vi": "{w} ô, ô = vị trí mod {w}; ô viền đậm vừa được ghi ở vòng này",
        "en": "{w} slots, slot = position mod {w}; a bold slot was written this round",
    },
    "draft_ring": {"vi": "Vòng cửa sổ của bộ vẽ (các lớp nháp)", "en": "Draft ring (the draft layers)"},
    "draft_ring_help": {
        "vi": "ghi bởi cùng lần commit, ở cùng vị trí: token nháp bị từ chối không bao giờ vào đây",
        "en": "written by the same commit at the same positions: a rejected draft never gets here",
    },
    "compressor": {
        "vi": "Bộ nén (CSA2): latent đã ghi và phần mang theo",
        "en": "Compressor (CSA2): latents and carry",
    },
    "source_line": {
        "vi": "lớp {layer} · tỉ lệ {r}: {n} latent (vị trí 0..{last}) · mang theo: {carry}",
        "en": "layer {layer} · ratio {r}: {n} latents (positions 0..{last}) · carry: {carry}",
    },
    "no_carry": {"vi": "không (nhóm đã đủ)", "en": "none (the group is complete)"},
    "engram": {"vi": "Lịch sử Engram (id nén)", "en": "Engram history (compressed ids)"},
    "engram_help": {
        "vi": "id nén của {n} token đã ghi cuối cùng: ngữ cảnh n-gram của token tiếp theo",
        "en": "the compressed ids of the last {n} committed tokens: the next token's n-gram context",
    },
    "pad": {"vi": "đệm", "en": "pad"},
    "empty": {"vi": "trống", "en": "empty"},
}


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

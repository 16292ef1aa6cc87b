"""The paper pages' strings in both languages: figure titles and axes, table headers, the items' prose (the
glossary's terms: bộ vẽ nháp = drafter, độ dài chấp nhận τ = accepted length, verify, đầu tin cậy = confidence
head, bộ lập lịch = scheduler). Numbers are never part of a string: they are filled in from the JSON.

Domains: the lab measures its own (lab.realtext.DOMAINS: en, vi, code, sums); the paper's are its own three (math,
code, chat: means over its benchmarks). A lab domain is always shown under its lab label (`lab_domain`), a paper
domain under its paper label (`paper_domain`); where one lab number stands beside one paper number per domain, the
pairs are `PAPER_DOMAIN_OF`'s, stated once on the page. Records written before the real-text corpus (the toy
domains math, code, chat) still read: their domains have labels and pair with the paper's of the same name.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..text import Texts, lang_table

# the paper domain each lab domain is set beside (sums ↔ math: multi-digit arithmetic; code ↔ code; en, vi ↔ chat:
# prose); the toy corpus's domains (records of earlier runs) pair with the paper's of the same name
PAPER_DOMAIN_OF = {"sums": "math", "code": "code", "en": "chat", "vi": "chat", "math": "math", "chat": "chat"}
TOY_DOMAINS = ("math", "code", "chat")  # the toy corpus's (lab.corpus), in records of runs before the real text

T = Texts(lang_table("paper", "t"), "paper")


def lab_domain(d: str, lang: str) -> str:
    """A lab domain's readable name in `lang` (English / tiếng Anh, …); one without a label keeps its own name."""
    return T(f"lab_{d}", lang) if f"lab_{d}" in T else d


def paper_domain(d: str, lang: str) -> str:
    """A paper domain's name in `lang` (math / toán, code, chat)."""
    return T(f"paper_{d}", lang) if f"paper_{d}" in T else d


def paper_pair(d: str) -> str | None:
    """The paper domain the lab domain `d` stands beside (None: none; compare means only)."""
    return PAPER_DOMAIN_OF.get(d)


def lab_domains(by: Mapping[str, Any]) -> list[str]:
    """The lab domains of one record's per-domain dict, in its order (its "mean" entry left out): the records say
    which domains they measured, so an older run (the toy corpus's math, code, chat) reads as it was written."""
    return [d for d in by if d != "mean"]


def is_toy(domains: Iterable[str]) -> bool:
    """Whether a record's lab domains are the toy corpus's (a run before the real-text corpus)."""
    return set(domains) <= set(TOY_DOMAINS)

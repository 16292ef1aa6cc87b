"""What a view is made of: `Walk` (everything one walk computed), `StepView` (one step's shapes, tables, checks,
facts and notes as plain data), `ViewTable`, `Check` (two computations of one thing, so it can fail), and the small
number formatters every view uses. Rendering lives elsewhere (render.py, plots.py, widgets.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

import torch

from dspark_mini import Trace
from dspark_mini.config import ModelConfig
from dspark_mini.hf_tokenizer import HFTokenizer
from dspark_mini.kv_cache import KVCache
from dspark_mini.model import Transformer
from dspark_mini.speculative import Round

from .notes import NOTES
from .steps import Step


@dataclass
class ViewTable:
    title: str
    columns: list[str]
    rows: list[list[Any]]


@dataclass
class Check:
    name: str
    value: float
    threshold: float

    @property
    def ok(self) -> bool:
        return self.value <= self.threshold


@dataclass
class StepView:
    step: Step
    lang: str
    shapes: list[tuple[str, tuple[int, ...]]] = field(default_factory=list)
    tables: list[ViewTable] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    facts: list[tuple[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)  # language-free numbers for --json readers (6B: verify_len…)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.step.id,
            "title": self.step.t("title", self.lang),
            "shapes": {k: list(v) for k, v in self.shapes},
            "facts": {k: v for k, v in self.facts},
            "checks": [{"name": c.name, "value": c.value, "threshold": c.threshold, "ok": c.ok} for c in self.checks],
            "tables": [{"title": t.title, "columns": t.columns, "rows": t.rows} for t in self.tables],
            "notes": self.notes,
            "data": self.data,
        }


@dataclass
class Walk:
    """Everything one `walk` run produced: the model, its inputs, the trace and the views."""

    cfg: ModelConfig
    tokenizer: HFTokenizer
    model: Transformer
    prompt: str
    tokens: torch.Tensor  # [1, S]
    trace: Trace
    logits: torch.Tensor  # [1, S, V]
    taps: dict[int, torch.Tensor]
    parity: float  # max |Δ| of two forwards
    seed: int
    prompt_cache: KVCache  # the caches right after the prompt (a round runs on a copy)
    round: Round | None = None  # one draft → verify → commit round right after the prompt
    verify_len: int = 0  # ℓ of the round: drafts sent to verify (the round drafts the whole block)
    temperature: float = 0.0
    draft_trace: Trace | None = None  # what the draft pass recorded
    views: dict[str, StepView] = field(default_factory=dict)
    weights: str = "untrained"  # "trained" (lab/weights) or "untrained" (the seeded init)
    hooked_taps: dict[int, torch.Tensor] | None = None  # tap inputs caught by hooks in the parity forward
    lesson: Round | None = None  # the lesson's setting on this prompt: untrained, block 3, greedy (see 6B)


# ---- how a prompt was tokenized ----------------------------------------------------------------------
@dataclass
class WordPieces:
    """One word of the prompt (with the whitespace before it) and the tokens it became."""

    text: str
    ids: list[int]
    pieces: list[str]  # each token's display text (a piece of a character shows its bytes as <0xNN>)

    @property
    def split(self) -> bool:
        """Whether the word's letters or digits spread over more than one token: the vocabulary holds no token for
        the whole word (with the space before it), so the BPE spelled it with smaller pieces (" trời" → " tr",
        "ời"; a character it never saw → its bytes). Punctuation after a whole word ("đẹp,") is no split."""
        return sum(any(c.isalnum() for c in p) for p in self.pieces) > 1


def prompt_words(tokenizer: HFTokenizer, text: str) -> list[WordPieces]:
    """`text` cut at whitespace, each word with the whitespace before it (trailing whitespace is a piece of its
    own), each piece encoded alone. The tokenizer's chunks never reach from a space back into the word before
    it, so the pieces' ids joined are the ids of the whole text (tests/test_prompt.py checks it)."""
    words = []
    for m in re.finditer(r"\s*\S+|\s+", text):
        ids = tokenizer.encode(m.group())
        words.append(WordPieces(m.group(), ids, [tokenizer.token_text(i) for i in ids]))
    return words


def shown(text: str) -> str:
    """A word as a table shows it: without the whitespace before it ("␣" / "↵" when it is only whitespace)."""
    word = text.strip()
    return word if word else text.replace(" ", "␣").replace("\n", "↵")


def tokenization_note(words: list[WordPieces], lang: str) -> str:
    """One line (walk 1A, generate): how many tokens for how many words, which words were split into pieces."""
    n_words = sum(1 for word in words if word.text.strip())
    n_tokens = sum(len(word.ids) for word in words)
    split = [word.text.strip() for word in words if word.split]
    if not split:
        return NOTES("tokenized_whole", lang, n=n_tokens, words=n_words)
    return NOTES("tokenized_split", lang, n=n_tokens, words=n_words, split=", ".join(split))


# ---- small helpers ---------------------------------------------------------------------------------
def r(x: float, n: int = 4) -> float:
    return float(round(float(x), n))


def sig(x: float, n: int = 4) -> float:
    """x to n significant digits (a small probability stays readable: 1.2e-05, not 0)."""
    return float(f"{float(x):.{n}g}")


def rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).norm() / b.norm().clamp_min(1e-30))


def shape(t: torch.Tensor) -> tuple[int, ...]:
    return tuple(int(s) for s in t.shape)


def tok_text(w: Walk, i: int) -> str:
    return repr(w.tokenizer.token_text(int(i)))[1:-1]


def dash(x: float | None, fmt: Any = None) -> Any:
    """ "—" for a number that does not exist (a draft never sent to verify), else x (formatted by `fmt`)."""
    return "—" if x is None else (x if fmt is None else fmt(x))

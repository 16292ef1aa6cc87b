"""The generated notes of the ten step views, in both languages (the step text itself lives in steps.py), and the
prose inside the registry's equations; LESSON is the setting of the Vietnamese 6B lesson the lab is built from
(untrained, taps 3 and 4 mixed 0.5/0.5, 3 draft tokens).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..text import Texts, check_lang, lang_table
from .steps import Step

# generated notes, both languages (step text itself lives in steps.py)
NOTES = lang_table("notes", "notes")


NOTES = Texts(NOTES, "note")

# the words of `ece_text`: how STS moved one run of positions, the positions, the total
ECE_WORDS = Texts(lang_table("notes", "ece_words"), "ECE")


def _pct(x: float) -> str:
    return f"{100 * x:.1f}"


def _way(before: float, after: float) -> str:
    """How a calibration moved one ECE: "level" when equal at 0.1 %, else "lower" or "higher"."""
    return "level" if _pct(after) == _pct(before) else "lower" if after < before else "higher"


def _runs(ways: list[str]) -> list[list[int]]:
    """Neighbouring positions (0-based) that moved the same way, one list each."""
    runs: list[list[int]] = []
    for i, w in enumerate(ways):
        if runs and ways[runs[-1][-1]] == w:
            runs[-1].append(i)
        else:
            runs.append([i])
    return runs


def ece_text(rows: Sequence[tuple[float, float]], lang: str) -> str:
    """How a calibration moved the ECE at each draft position, from the data: `rows` [(before, after)] per position
    1..k (fractions). Neighbouring positions that moved the same way share one clause:
    "level at position 1 (7.8 %), lower at positions 2–4 (6.7 → 6.1, 8.7 → 6.5, 7.4 → 4.3 %) and higher at
    position 5 (5.1 → 6.1 %); summed over positions 1–5: 35.8 → 30.8 (lower)"."""
    ways = [_way(b, a) for b, a in rows]
    clauses = []
    for run in _runs(ways):
        how = ways[run[0]]
        if len(run) == 1:
            where = ECE_WORDS("one", lang, p=run[0] + 1)
        else:
            where = ECE_WORDS("many", lang, p=f"{run[0] + 1}–{run[-1] + 1}")
        pairs = [_pct(rows[i][0]) if how == "level" else f"{_pct(rows[i][0])} → {_pct(rows[i][1])}" for i in run]
        clauses.append(f"{ECE_WORDS(how, lang)} {where} ({', '.join(pairs)} %)")
    text = ", ".join(clauses[:-1]) + ECE_WORDS("and", lang) + clauses[-1] if len(clauses) > 1 else clauses[0]
    before, after = sum(b for b, _ in rows), sum(a for _, a in rows)
    how = ECE_WORDS(_way(before, after), lang)
    return text + ECE_WORDS("total", lang, k=len(rows), a=_pct(before), b=_pct(after), how=how)


EQUATION_WORDS = lang_table("notes", "equation_words")  # prose inside the registry's equations (symbols stay)


# the Vietnamese 6B lesson's setting (docs/sources.md): untrained, taps 3 and 4 mixed 0.5/0.5, 3 draft tokens
LESSON = {"taps": "3, 4", "mix": "0.5/0.5", "block": 3, "tokens": "2, 1, 6", "p_d": [0.167, 0.234, 0.173]}


def equation(step: Step, lang: str) -> str:
    """The step's equation with its few words of prose in `lang`."""
    eq = step.equation
    lang = check_lang(lang)
    for words in EQUATION_WORDS.values():  # the registry writes them in English
        eq = eq.replace(words["en"], words[lang])
    return eq


def layer_label(name: str, layer: int, lang: str) -> str:
    """ "row_ids (layer 0)" / "row_ids (lớp 0)" — a shape's name at one layer."""
    return f"{name} ({NOTES('at_layer', lang, l=layer)})"

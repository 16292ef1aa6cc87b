"""Exercise checks for the notebooks: a learner's answer against the expected value, in vi or en.

`check` prints one line — ✓, ✗ with the answer given, or a reminder while `answer` is still None — and
returns True / False once there is an answer, None before: a notebook cell ending in `check(...)` then shows
no bare `False` under the reminder (IPython displays nothing for None).
"""

from __future__ import annotations

from typing import Any

from ..text import check_lang, lang_table

MESSAGES = lang_table("exercises", "messages")


def check(answer: Any, expected: Any, lang: str = "en", tol: float = 1e-6) -> bool | None:
    """Print whether `answer` matches `expected` (numbers within `tol`, other values by equality) and return it;
    while `answer` is None (or ...) print a "not answered yet" reminder and return None."""
    lang = check_lang(lang)
    if answer is None or answer is Ellipsis:
        print(MESSAGES["missing"][lang])
        return None
    if isinstance(expected, (int, float)) and isinstance(answer, (int, float)):
        ok = abs(float(answer) - float(expected)) <= tol
    else:
        ok = bool(answer == expected)
    print(MESSAGES["ok"][lang] if ok else MESSAGES["no"][lang].format(got=answer))
    return ok

"""Exercise checks for the notebooks: a learner's answer against the expected value, in vi or en."""

from __future__ import annotations

from typing import Any

from .steps import check_lang

MESSAGES = {
    "ok": {"en": "✓ correct", "vi": "✓ đúng rồi"},
    "no": {
        "en": "✗ not yet (your answer: {got}) — look again at the cells above and retry",
        "vi": "✗ chưa đúng (bạn trả lời: {got}) — xem lại các ô phía trên rồi thử lại",
    },
    "missing": {
        "en": "… write your answer in the cell above, then run this cell again",
        "vi": "… hãy viết câu trả lời ở ô phía trên rồi chạy lại ô này",
    },
}


def check(answer: Any, expected: Any, lang: str = "en", tol: float = 1e-6) -> bool:
    """Print whether `answer` matches `expected` (numbers within `tol`, other values by equality)."""
    lang = check_lang(lang)
    if answer is None or answer is Ellipsis:
        print(MESSAGES["missing"][lang])
        return False
    if isinstance(expected, (int, float)) and isinstance(answer, (int, float)):
        ok = abs(float(answer) - float(expected)) <= tol
    else:
        ok = answer == expected
    print(MESSAGES["ok"][lang] if ok else MESSAGES["no"][lang].format(got=answer))
    return ok

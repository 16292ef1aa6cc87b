"""The notebooks' exercise check (lesson/exercises.py): ✓ / ✗ once answered, a "not answered yet" reminder before."""

from __future__ import annotations

import pytest

from lab.lesson.exercises import MESSAGES, check


@pytest.mark.parametrize("lang", ["en", "vi"])
@pytest.mark.parametrize("unanswered", [None, ...])
def test_unanswered_prints_a_reminder_and_returns_none(lang, unanswered, capsys):
    assert check(unanswered, 3, lang) is None  # a cell ending in check(...) shows no bare `False`
    out = capsys.readouterr().out
    assert out == MESSAGES["missing"][lang] + "\n"
    assert ("not answered yet" if lang == "en" else "bạn chưa trả lời") in out


def test_answered_returns_a_bool_and_says_why(capsys):
    assert check(3, 3) is True and capsys.readouterr().out.startswith("✓ correct")
    assert check(2.9999999, 3.0) is True and check(0.25 + 1e-3, 0.25) is False
    assert check("4A", "4A", "vi") is True and capsys.readouterr().out.splitlines()[-1] == "✓ đúng rồi"
    assert check("1B", "4A") is False
    assert "your answer: 1B" in capsys.readouterr().out.splitlines()[-1]


def test_bad_language_names_it():
    with pytest.raises(ValueError, match="'fr'"):
        check(1, 1, "fr")

"""One name per idea, checked once: k (drafted tokens) and ℓ / verify_len (verified ones), their old names kept as
aliases that say which name replaces them, and every integer argument checked by dspark_mini/validate.py.

The rules are read off the source (a lint, like tests/test_lang_files.py), and the aliases are run: the old name
gives the same result as the new one and a FutureWarning naming the new one.
"""

from __future__ import annotations

import re
import warnings
from pathlib import Path

import pytest
import torch

from dspark_mini import build_model, get_config
from dspark_mini.model import draft
from dspark_mini.speculative import Round
from dspark_mini.validate import WrongKind, check_int, check_verify_len, is_integer

REPO = Path(__file__).resolve().parents[1]
SOURCES = sorted(p for d in ("dspark_mini", "lab") for p in (REPO / d).rglob("*.py"))

# `isinstance(x, int)` that is not a check of an argument: a dispatch on a value's type to format or read it, and
# one read that must not import torch
TYPE_DISPATCH = {
    ("dspark_mini/checkpoint.py", "if isinstance(default, int):"),  # a config field read as its default's type
    ("lab/paper/docs.py", "if isinstance(x, int):"),  # 1,135 or 3.25 on the paper page
    ("lab/sync/prose.py", "isinstance(v, int) else"),  # the prose markers' "auto" format
    # a JSON record read by `--help`, which stays torch-free: dspark_mini (validate's package) would import torch
    ("lab/measured.py", "isinstance(value, int) and value > 0"),
}
INT_TEST = re.compile(r"isinstance\(\s*[\w.\[\]]+\s*,\s*(int|numbers\.Integral)\s*\)")


def test_integer_arguments_are_checked_by_the_shared_helper_only():
    """No module writes its own `isinstance(v, int)` test: check_int / is_integer (dspark_mini/validate.py) are the
    one place, so a bool is refused and the message has one shape everywhere."""
    found = []
    for path in SOURCES:
        rel = path.relative_to(REPO).as_posix()
        if rel == "dspark_mini/validate.py":
            continue
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
            if INT_TEST.search(line) and not any(rel == f and s in line for f, s in TYPE_DISPATCH):
                found.append(f"{rel}:{n}: {line.strip()}")
    assert found == [], "hand-written integer checks (use dspark_mini.validate.check_int):\n" + "\n".join(found)


def test_the_verify_length_has_one_range_check():
    """ℓ's range (1..the trained block) is written once: check_verify_len. No other module carries its message."""
    owners = sorted(
        p.relative_to(REPO).as_posix() for p in SOURCES if "the trained draft block" in p.read_text(encoding="utf-8")
    )
    assert owners == ["dspark_mini/validate.py"]
    assert check_verify_len(None, 5) == 5 and check_verify_len(3, 5) == 3
    with pytest.raises(ValueError, match=r"^verify_len = 6 is invalid: allowed 1\.\.5 \(the trained draft block\)$"):
        check_verify_len(6, 5)
    with pytest.raises(ValueError, match=r"^--verify-len = 0 is invalid: allowed an integer in 1\.\.5 \(the trained"):
        check_verify_len(0, 5, "--verify-len")  # the CLI's words for the same range
    assert check_verify_len(0, 3, "length", lo=0) == 0  # the scheduler's fixed length may send nothing


@pytest.mark.parametrize("bad", [True, "3", 2.0, None])
def test_a_value_of_the_wrong_kind_is_both_a_type_and_a_value_error(bad):
    """Callers that catch ValueError (the CLI's exit 2) catch a wrong kind too; TypeError callers still do."""
    with pytest.raises(WrongKind, match=r"n = .* is invalid: allowed an integer in 1\.\.4$") as e:
        check_int(bad, "n", 1, 4)
    assert isinstance(e.value, TypeError) and isinstance(e.value, ValueError)
    assert not is_integer(bad) and is_integer(3)


def test_check_int_message_forms():
    with pytest.raises(ValueError, match=r"^n = 9 is invalid: allowed 1\.\.4 \(why\)$"):
        check_int(9, "n", 1, 4, "why", bare=True)
    with pytest.raises(ValueError, match=r"^n = 0 is invalid: allowed ≥ 1$"):
        check_int(0, "n", 1, bare=True)
    with pytest.raises(KeyError, match="n = 0 is invalid: allowed None or 1..4"):
        check_int(0, "n", 1, 4, error=KeyError, allowed="None or 1..4")  # a module's own error class
    assert check_int(4, "n", 1, 4) == 4


@pytest.fixture(scope="module")
def primed():
    cfg = get_config("lab")
    model = build_model(cfg, seed=0).eval()
    cache = model.new_cache(1)
    with torch.no_grad():
        model(torch.tensor([[5, 6, 7, 8]]), cache)
    return model, cache


def test_draft_takes_k_and_its_old_name_block_size_with_a_warning(primed):
    model, cache = primed
    anchor = torch.tensor([9])
    with torch.no_grad():
        new = draft(model, anchor, cache, k=3)
        with pytest.warns(FutureWarning, match=r"block_size is now k"):
            old = draft(model, anchor, cache, block_size=3)
    assert new.tokens.shape == (1, 3) and torch.equal(new.tokens, old.tokens)
    assert torch.equal(new.confidence, old.confidence)
    with pytest.raises(ValueError, match="k and its old name block_size were both given"), pytest.warns(FutureWarning):
        draft(model, anchor, cache, k=3, block_size=3)


def test_round_k_and_its_old_name_block():
    r = Round(0, 1, [2, 3, 4], [0.5] * 3, [0.9] * 3, [0.5] * 3, [2, 3, 4, 5], ["accepted"] * 3, 3, 5, "bonus", [2])
    assert r.k == 3 and r.verify_len == 3
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        assert r.block == r.k
    assert [str(w.message) for w in seen] == ["Round: Round.block is now Round.k (the old name still works)"]
    assert all(w.category is FutureWarning for w in seen)

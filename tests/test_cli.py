"""The lab layer: `dspark-lab walk` / `inspect` (in-process), step views, errors a user would meet."""

from __future__ import annotations

import json

import pytest

from lab.cli import main
from lab.steps import STEP_IDS
from lab.walkthrough import DEFAULT_PROMPT, run_walk


def run_json(capsys, *argv: str) -> dict:
    assert main(list(argv)) == 0
    return json.loads(capsys.readouterr().out)


@pytest.fixture(scope="module")
def walk_en():
    return run_walk(DEFAULT_PROMPT, "lab", 0, "en")


def test_walk_prints_every_step_in_both_languages(capsys) -> None:
    for lang in ("en", "vi"):
        assert main(["walk", "--lang", lang]) == 0
        out = capsys.readouterr().out
        for sid in STEP_IDS:
            assert f"{sid} · " in out
        assert ("Look at" if lang == "en" else "Nhìn vào đâu") in out
        assert "✗" not in out  # every on-screen check holds


def test_walk_json_has_all_steps_and_is_deterministic(capsys) -> None:
    a = run_json(capsys, "walk", "--json", "--seed", "3")
    b = run_json(capsys, "walk", "--json", "--seed", "3")
    c = run_json(capsys, "walk", "--json", "--seed", "4")
    assert list(a["steps"]) == list(STEP_IDS)
    assert a == b  # same seed → same printed numbers
    assert a["steps"]["6B"]["tables"] != c["steps"]["6B"]["tables"]  # another seed → other weights
    assert all(ch["ok"] for s in a["steps"].values() for ch in s["checks"])


def test_walk_one_step_and_prompt(capsys) -> None:
    out = run_json(capsys, "walk", "--json", "--step", "6b", "--step", "2A", "--prompt", "12+7=19")
    assert list(out["steps"]) == ["2A", "6B"]  # flow order, case-insensitive ids
    assert len(out["tokens"]) == 7


def test_views_hold_the_numbers_of_the_trace(walk_en) -> None:
    w = walk_en
    v = w.views["1A"]
    assert dict(v.shapes)["streams"] == (1, w.tokens.size(1), 4, w.cfg.dim)
    assert [row[1] for row in v.tables[0].rows] == w.tokens[0].tolist()
    parity = next(c for c in w.views["6B"].checks if "1e-9" in c.name)
    assert parity.value == 0.0
    top = w.views["6B"].tables[0].rows[0]
    assert top[2] == int(w.logits[0, -1].argmax())
    # 3A: the real table groups 40 layers + 3 draft layers into ranges, the lab one lists every layer
    toy, real = w.views["3A"].tables
    assert [r[0] for r in toy.rows] == [str(i) for i in range(w.cfg.n_layers + w.cfg.n_mtp_layers)]
    assert [r[0] for r in real.rows][:4] == ["0", "1", "2", "3–7"] and real.rows[-1][0] == "40–42"
    # 6A: real column reproduces 528 / 288 / 68 and 890 B/token
    real_col = [r[2] for r in w.views["6A"].tables[0].rows]
    assert real_col[:3] == [528, 288, 68] and 890.0 in real_col


def test_inspect_lab_and_flash_json(capsys) -> None:
    lab = run_json(capsys, "inspect", "--json")
    assert lab["params"]["draft"] > 0 and lab["params"]["backbone"] > 0 and lab["device"] == "cpu"
    flash = run_json(capsys, "inspect", "--preset", "flash", "--json")
    assert flash["device"] == "meta"
    assert abs(flash["params"]["backbone"] / 551.88e9 - 1) < 0.005
    assert abs(flash["params"]["engram"] / 196.61e9 - 1) < 0.005
    assert abs(flash["params"]["draft"] / 14.23e9 - 1) < 0.005
    assert flash["kv_bytes_per_token"]["global"] == 890
    assert len(flash["roles"]) == 43


@pytest.mark.parametrize("argv, needle", [
    (["walk", "--step", "7Z"], "unknown step id '7Z'"),
    (["walk", "--lang", "fr"], "unknown language 'fr'"),
    (["walk", "--prompt", "   "], "prompt is empty"),
    (["walk", "--prompt", "hi ✓"], "U+2713"),
    (["walk", "--prompt", "a" * 600], "allowed 1..256"),
    (["walk", "--preset", "flash"], "inspect --preset flash"),
    (["inspect", "--preset", "tiny"], "'preset' = 'tiny'"),
])
def test_bad_input_gives_a_clear_error(capsys, argv, needle) -> None:
    assert main(argv) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert needle in err


def test_help_teaches(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["walk", "--help"])
    out = capsys.readouterr().out
    for word in ("--step", "--lang", "--prompt", "--seed", "--json", "6B"):
        assert word in out

"""The lab layer: `dspark-lab walk` / `inspect` (in-process, and once as its own process), step views, errors a user
would meet."""

from __future__ import annotations

import gc
import json
import os
import shutil
import subprocess
import sys
import unicodedata
from pathlib import Path

import pytest

from dspark_mini import get_config
from dspark_mini.tokenizer import default_tokenizer
from lab.cli import main
from lab.lesson.steps import STEP_IDS
from lab.lesson.walk import run_walk
from lab.text import DEFAULT_PROMPT

ROOT = Path(__file__).resolve().parents[1]
# generate may add tokens up to max_seq_len behind the default prompt
MAX_NEW = get_config("lab").max_seq_len - len(default_tokenizer().encode(DEFAULT_PROMPT))


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
    c = run_json(capsys, "walk", "--json", "--seed", "4", "--weights", "untrained")
    assert list(a["steps"]) == list(STEP_IDS) and a["weights"] == "trained" and c["weights"] == "untrained"
    assert a == b  # same seed → same printed numbers
    assert a["steps"]["6B"]["tables"] != c["steps"]["6B"]["tables"]  # untrained weights → other numbers
    d = run_json(capsys, "walk", "--json", "--seed", "5", "--weights", "untrained")
    assert c["steps"]["6B"]["tables"] != d["steps"]["6B"]["tables"]  # untrained: the seed picks the weights
    assert all(ch["ok"] for s in a["steps"].values() for ch in s["checks"])


def test_walk_one_step_and_prompt(capsys) -> None:
    out = run_json(capsys, "walk", "--json", "--step", "6b", "--step", "2A", "--prompt", "12+7=19")
    assert list(out["steps"]) == ["2A", "6B"]  # flow order, case-insensitive ids
    assert len(out["tokens"]) == 7


def test_the_command_line_prints_what_main_prints(capsys) -> None:
    """`python -m lab …` (main() without argv: torch's objects frozen, the process left with os._exit) prints what
    main(argv) prints in this process, to the last byte (os._exit flushes nothing: whatever a block-buffered pipe
    still held would be lost), and exits with main's code; main(argv) leaves the caller's garbage collector alone."""
    argv = ["walk", "--step", "6B", "--json"]
    frozen = gc.get_freeze_count()
    assert main(argv) == 0
    assert gc.get_freeze_count() == frozen
    want = capsys.readouterr().out
    env = {k: v for k, v in os.environ.items() if k != "PYTHONUNBUFFERED"}  # the buffering a user's pipe has
    for args, code in ((argv, 0), (["walk", "--step", "9Z"], 2)):
        proc = subprocess.run(
            [sys.executable, "-m", "lab", *args], cwd=ROOT, env=env, capture_output=True, encoding="utf-8", timeout=300
        )
        assert proc.returncode == code, proc.stderr
        if code == 0:
            assert proc.stdout == want and proc.stderr == ""
        else:
            assert proc.stdout == "" and proc.stderr.startswith("error: unknown step id '9Z'")


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


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["walk", "--step", "7Z"], "unknown step id '7Z'"),
        (["walk", "--lang", "fr"], "unknown language 'fr'"),
        (["walk", "--prompt", "   "], "prompt is empty"),
        (["walk", "--prompt", "a" * 600], "allowed 1..250"),
        (["walk", "--preset", "flash"], "does not fit"),  # refused by its memory estimate, before anything is built
        (["inspect", "--preset", "tiny"], "--preset = 'tiny' is invalid: allowed lab, flash, flash-cpu"),
        (["walk", "--verify-len", "0"], "--verify-len = 0 is invalid: allowed an integer in 1..5"),
        (["walk", "--temperature", "-1"], "--temperature = -1.0 is invalid"),
        (["generate", "--verify-len", "6"], "--verify-len = 6 is invalid: allowed an integer in 1..5"),
        (["generate", "--block", "0"], "--verify-len = 0 is invalid"),
        (["generate", "--temperature", "-0.5"], "--temperature = -0.5 is invalid: allowed 0 (greedy)"),
        (["generate", "--prompt", ""], "prompt is empty"),
        (["generate", "--max-new-tokens", "0"], f"--max-new-tokens = 0 is invalid: allowed an integer in 1..{MAX_NEW}"),
        (
            ["generate", "--max-new-tokens", "9999"],
            f"--max-new-tokens = 9999 is invalid: allowed an integer in 1..{MAX_NEW}",
        ),
        (["generate", "--preset", "flash"], "does not fit"),
        (["generate", "--preset", "flash-cpu", "--weights", "trained"], "allowed --weights untrained"),
        (["profile", "--preset", "flash", "--reps", "1"], "does not fit"),
        (["profile", "--reps", "0"], "--reps = 0 is invalid: allowed an integer in 1..1000"),
        (["profile", "--cache-length", "251"], "--cache-length = 251 is invalid: allowed an integer in 1..250"),
    ],
)
def test_bad_input_gives_a_clear_error(capsys, argv, needle) -> None:
    assert main(argv) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert needle in err


def test_walk_takes_any_text_and_shows_byte_tokens_readably(capsys) -> None:
    """A character the corpus never saw (𝔸, U+1D538) is not refused: the byte-level BPE spells it with pieces of
    its UTF-8 bytes, and the 1A table shows each stray byte as <0xXX> (their names worked out here from Python's own
    encoder), each piece with an Engram id no whole token of the prompt shares."""
    out = run_json(capsys, "walk", "--step", "1A", "--prompt", "hi 𝔸", "--weights", "untrained", "--json")
    rows = next(t for t in out["steps"]["1A"]["tables"] if t["title"] == "Token")[
        "rows"
    ]  # [position, id, text, engram]
    assert [r[1] for r in rows] == out["tokens"] and [r[0] for r in rows] == list(range(len(rows)))
    want = "".join(f"<0x{b:02X}>" for b in "𝔸".encode())  # <0xF0><0x9D><0x94><0xB8>
    assert "".join(r[2] for r in rows) == "hi " + want
    pieces = [r for r in rows if "<0x" in r[2]]
    assert "".join(r[2] for r in pieces).endswith(want) and len(pieces) >= 2  # no token holds all of 𝔸
    whole = {r[3] for r in rows if r not in pieces}
    assert len({r[3] for r in pieces}) == len(pieces) and not whole & {r[3] for r in pieces}


def test_walk_reads_nfd_and_nfc_prompts_as_the_same_tokens(capsys) -> None:
    text = "Xin chào, thế giới"
    nfd = unicodedata.normalize("NFD", text)
    assert nfd != text  # the two spellings differ as strings …
    ids = [
        run_json(capsys, "walk", "--step", "1A", "--prompt", t, "--weights", "untrained", "--json")["tokens"]
        for t in (text, nfd)
    ]
    assert ids[0] == ids[1]  # … and give the same tokens


def test_unknown_weights_name_the_choices(capsys) -> None:
    with pytest.raises(SystemExit) as e:
        main(["walk", "--weights", "pretrained"])
    assert e.value.code == 2 and "choose from 'trained', 'untrained'" in capsys.readouterr().err


def test_help_teaches(capsys) -> None:
    with pytest.raises(SystemExit):
        main(["walk", "--help"])
    out = capsys.readouterr().out
    for word in ("--step", "--lang", "--prompt", "--seed", "--json", "6B"):
        assert word in out


@pytest.mark.parametrize("command", ["walk", "generate"])
def test_verify_len_help_says_it_is_the_verify_length(capsys, command) -> None:
    with pytest.raises(SystemExit):
        main([command, "--help"])
    text = " ".join(capsys.readouterr().out.split())
    block = text[text.index("--verify-len ℓ, --block ℓ ") :]
    assert block.index("verify length ℓ of a fixed policy") < block.index("--temperature")
    assert "whole trained block" in block[: block.index("--temperature")]


def test_walk_json_has_the_verify_length(capsys) -> None:
    out = run_json(capsys, "walk", "--json", "--step", "6B", "--verify-len", "2")["steps"]["6B"]
    assert out["data"]["verify_len"] == 2 and out["data"]["block"] == 5
    assert out["data"]["status"][2:] == ["not sent"] * 3
    assert [p["requests"] for p in out["data"]["scheduler"]["loads"]] == [1, 8, 64, 256]


def test_generate_json_plain_vs_speculative(capsys) -> None:
    g = run_json(capsys, "generate", "--json", "--max-new-tokens", "20", "--verify-len", "2")
    assert g["identical_tokens"] and g["plain"]["tokens"] == g["speculative"]["tokens"]  # greedy: lossless
    assert len(g["plain"]["tokens"]) == 20 and g["plain"]["tokens_per_s"] > 0 and g["speculative"]["tokens_per_s"] > 0
    s = g["speculative"]
    assert s["rounds"] == len(s["strip"]) and s["target_forwards"] == s["rounds"]
    # every round commits τ = kept + 1 tokens; together with the prompt's token they are the output
    committed = 1 + sum(sum(st == "accepted" for st in r["status"]) + 1 for r in s["strip"])
    assert committed >= 20 and 1 <= s["mean_accepted_length"] <= 3
    # --verify-len 2 is ℓ of a fixed policy: each round drafts the whole block (k = 5) and sends 2
    assert g["verify_len"] == 2 and g["block"] == 5 and all(r["verify_len"] <= 2 for r in s["strip"])
    assert max(len(r["draft"]) for r in s["strip"]) == 5
    for r in s["strip"]:
        ell = r["verify_len"]
        assert len(r["status"]) == len(r["draft"]) and r["status"][ell:] == ["not sent"] * (len(r["draft"]) - ell)
        assert "not sent" not in r["status"][:ell]
    # acceptance counts only the verified positions: kept / (drafts sent), never / (drafts made)
    kept = sum(r["status"].count("accepted") for r in s["strip"])
    assert s["acceptance_rate"] == pytest.approx(kept / sum(r["verify_len"] for r in s["strip"]))
    assert [p["position"] for p in s["per_position"]] == [1, 2]


def test_generate_sampled_is_seeded(capsys) -> None:
    a = run_json(capsys, "generate", "--json", "--temperature", "1", "--seed", "5", "--max-new-tokens", "12")
    b = run_json(capsys, "generate", "--json", "--temperature", "1", "--seed", "5", "--max-new-tokens", "12")
    assert a["speculative"]["tokens"] == b["speculative"]["tokens"] and a["plain"]["tokens"] == b["plain"]["tokens"]


def test_generate_renders_strip(capsys) -> None:
    assert main(["generate", "--max-new-tokens", "8"]) == 0
    out = capsys.readouterr().out
    assert "draft → verify" in out and "tokens/s" in out and "identical" in out


def test_profile_json(capsys) -> None:
    p = run_json(capsys, "profile", "--json", "--reps", "3", "--cache-length", "20")
    assert p["parity"]["max_abs_diff"] == 0.0 and p["tap_mix"]["max_abs_diff"] == 0.0
    assert set(p["verify_cost"]) == {"1", "2", "3", "4", "5"}
    for d in p["verify_cost"].values():
        assert d["verify_s"]["p50"] <= d["verify_s"]["p95"] <= d["verify_s"]["p99"]
        assert set(d["k_decodes_s"]) >= {"p50", "p95", "p99"}
    c = p["conditions"]
    assert {"batch", "cache_length", "threads", "dtype", "device", "torch", "cpu"} <= set(c) and c["cache_length"] == 20
    per = p["acceptance"]["per_position"]
    assert [row["position"] for row in per] == [1, 2, 3, 4, 5]
    assert all(row["mean_confidence"] is not None for row in per) and p["acceptance_conditions"]["weights"] == "trained"
    assert p["acceptance"]["mean_accepted_length"] > 1.5  # trained drafts after held-out corpus prompts get kept


def test_redraft_and_language_switch_reuse_the_forward(walk_en) -> None:
    from lab.lesson.walk import build_views, redraft

    w2 = redraft(walk_en, 1, 0.0)
    assert w2.trace is walk_en.trace and w2.model is walk_en.model  # no new forward over the prompt
    # ℓ = 1: one draft sent to verify; the table still shows all 5 drafted (+ the target's token)
    draft = w2.views["6B"].tables[-2]
    assert w2.round.verify_len == 1 and w2.round.block == 5 and len(draft.rows) == 6
    assert [row[7] for row in draft.rows[1:5]] == ["not sent to verify"] * 4
    assert walk_en.round.verify_len == 5  # the original walk is unchanged
    assert walk_en.prompt_cache.length == walk_en.tokens.size(1)  # rounds ran on copies of the prompt cache
    vi = build_views(walk_en, "vi")
    assert vi.views["6B"].tables[0].columns[1] == "Token" and vi.trace is walk_en.trace
    assert vi.views["2A"].tables[0].title != walk_en.views["2A"].tables[0].title


def test_generate_warns_about_untrained_weights_only_when_they_are_used(capsys) -> None:
    assert main(["generate", "--max-new-tokens", "6"]) == 0
    trained = capsys.readouterr().out
    assert main(["generate", "--max-new-tokens", "6", "--weights", "untrained"]) == 0
    untrained = capsys.readouterr().out
    assert "Untrained weights" not in trained and "Untrained weights" in untrained
    report = run_json(capsys, "generate", "--max-new-tokens", "12", "--json")
    assert report["weights"] == "trained" and report["speculative"]["mean_accepted_length"] > 1.5


@pytest.mark.parametrize("lang, hint", [("en", "next: {cli} walk --step 6B"), ("vi", "tiếp theo: {cli} walk")])
def test_walk_ends_with_what_to_run_next(capsys, lang, hint) -> None:
    """Typed as this shell runs it (test_newcomer.py runs each): `dspark-lab` where PATH finds it, else its path."""
    from lab.screens.render import lab_command

    cli = lab_command()[0]
    assert main(["walk", "--step", "1A", "--lang", lang]) == 0
    out = " ".join(capsys.readouterr().out.split())
    last = out[out.rindex(hint.split(":")[0] + ":") :]
    assert hint.format(cli=cli) in last and "make notebooks" in last and f"{cli} present" in last


@pytest.mark.skipif(shutil.which("make") is None, reason="no make on this machine")
def test_make_lab_and_notebooks_as_this_user() -> None:
    """`make lab` passes LAB_LANG to the walk; `make notebooks` adds --allow-root exactly when make runs as root."""

    def dry(*args: str) -> str:
        # -n: print the commands only; the install stamp is assumed fresh (-o) so nothing is built
        done = subprocess.run(["make", "-n", "-o", "install", *args], cwd=ROOT, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        return done.stdout

    assert "-m lab walk --lang vi" in dry("lab", "LAB_LANG=vi")
    notebooks = [line for line in dry("notebooks").splitlines() if "jupyter lab" in line]
    assert len(notebooks) == 1 and ("--allow-root" in notebooks[0]) == (os.getuid() == 0)

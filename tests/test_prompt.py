"""A student's own prompt: one check (lab.text.check_prompt) behind every entry point — NFC at the input, the same
limit everywhere (from the model's max_seq_len), each refusal naming its option in the command's language — and the
1A / generate report of how the prompt was tokenized."""

from __future__ import annotations

import argparse
import contextlib
import io
import unicodedata

import pytest

from dspark_mini import get_config, get_tokenizer
from lab.cli import main
from lab.lesson.generation import compare
from lab.lesson.view import prompt_words
from lab.lesson.walk import run_walk
from lab.lesson.widgets import LabState
from lab.present.presenter import prompt_tokens
from lab.realscale.torchrun import prompt_ids
from lab.serving.serve_cli import PromptsFile
from lab.text import check_prompt, prompt_limit

CFG = get_config("lab")
TOK = get_tokenizer(CFG)
NFC = "Hôm nay trời đẹp, chúng ta học về DSpark."
NFD = unicodedata.normalize("NFD", NFC)
LIMIT = CFG.max_seq_len - (CFG.dspark_block_size + 1)  # one verify (anchor + k drafts) must fit behind the prompt


def run(*argv: str) -> tuple[int, str]:
    """The CLI in-process: (exit code, stderr on one line)."""
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, " ".join(err.getvalue().split())


def letters(n: int) -> str:
    """A prompt of exactly n tokens: a run of "a" is no word of the vocabulary, so each letter is one token."""
    text = "a" * n
    assert len(TOK.encode(text)) == n
    return text


# ---- the one check ----------------------------------------------------------------------------------------------
def test_nfd_differs_from_nfc_and_the_check_composes_it():
    assert NFD != NFC and len(NFD) > len(NFC)  # the decomposed form really is different text
    text, ids = check_prompt(NFD, TOK.encode, CFG)
    assert text == NFC and ids == TOK.encode(NFC)


def test_the_limit_comes_from_max_seq_len_and_is_the_boundary():
    assert prompt_limit(CFG) == LIMIT == 250
    assert len(check_prompt(letters(LIMIT), TOK.encode, CFG)[1]) == LIMIT
    with pytest.raises(ValueError, match=f"--prompt has {LIMIT + 1} tokens: allowed 1..{LIMIT} \\(max_seq_len 256"):
        check_prompt(letters(LIMIT + 1), TOK.encode, CFG)


@pytest.mark.parametrize(
    "prompt, lang, needle",
    [
        ("", "en", "--prompt is empty: give some text (1..250 tokens)"),
        (" \n\t ", "en", "--prompt is empty"),
        ("", "vi", "--prompt đang trống: hãy nhập một đoạn văn bản (1..250 token)"),
        ("a" * 251, "en", "--prompt has 251 tokens: allowed 1..250"),
        ("a" * 251, "vi", "--prompt có 251 token: cho phép 1..250"),
    ],
)
def test_each_refusal_starts_with_the_option_in_the_language(prompt, lang, needle):
    with pytest.raises(ValueError) as e:
        check_prompt(prompt, TOK.encode, CFG, "--prompt", lang)
    assert str(e.value).startswith(needle)


def test_a_prompt_that_is_not_text_is_a_type_error_naming_the_option():
    with pytest.raises(TypeError, match=r"--prompt = 7 is not text: allowed a string of 1..250 tokens"):
        check_prompt(7, TOK.encode, CFG)


# ---- NFD = NFC through every entry point --------------------------------------------------------------------------
def test_walk_generate_and_labstate_read_an_nfd_prompt_as_its_nfc_form():
    want = TOK.encode(NFC)
    walk = run_walk(NFD, steps=("1A",))
    assert walk.prompt == NFC and walk.tokens[0].tolist() == want
    assert walk.tokens.shape == (1, len(want))  # [1, S]
    report = compare(NFD, max_new_tokens=1)
    assert report.prompt == NFC and report.prompt_ids == want
    state = LabState(prompt=NFD)
    assert state.prompt == NFC and state.walk.tokens[0].tolist() == want
    assert state.update(prompt=NFC) == set()  # the same prompt once composed: nothing to recompute
    assert prompt_tokens(NFD, 1, "en") == (NFC, want)  # the presenter's deck
    assert prompt_ids(argparse.Namespace(prompt=NFD), CFG) == want  # torchrun


def test_the_cli_walk_json_carries_the_composed_prompt(capsys):
    assert main(["walk", "--prompt", NFD, "--step", "1A", "--json"]) == 0
    import json

    out = json.loads(capsys.readouterr().out)
    assert out["prompt"] == NFC and out["tokens"] == TOK.encode(NFC)


# ---- every refusal names the option, in vi and in en, with the same limit -------------------------------------------
@pytest.mark.parametrize(
    "lang, empty, long",
    [
        ("en", "--prompt is empty", "--prompt has 251 tokens: allowed 1..250"),
        ("vi", "--prompt đang trống", "--prompt có 251 token: cho phép 1..250"),
    ],
)
@pytest.mark.parametrize("command", ["walk", "generate", "present"])
def test_the_commands_refuse_with_the_option_in_their_language(command, lang, empty, long):
    code, err = run(command, "--prompt", "   ", "--lang", lang)
    assert code == 2 and f"error: {empty}" in err
    code, err = run(command, "--prompt", letters(LIMIT + 1), "--lang", lang)
    assert code == 2 and f"error: {long}" in err


@pytest.mark.parametrize(
    "lang, empty, long",
    [
        ("en", "prompt is empty", "prompt has 251 tokens: allowed 1..250"),
        ("vi", "prompt đang trống", "prompt có 251 token: cho phép 1..250"),
    ],
)
def test_labstate_refuses_naming_its_prompt_field(lang, empty, long):
    state = LabState(lang=lang)
    before = state.runs["forward"]
    for bad, needle in (("  ", empty), (letters(LIMIT + 1), long)):
        with pytest.raises(ValueError) as e:
            state.update(prompt=bad)
        assert str(e.value).startswith(needle)
    assert state.runs["forward"] == before  # nothing ran
    with pytest.raises(ValueError, match=f"^{long}"):
        LabState(prompt=letters(LIMIT + 1), lang=lang)


@pytest.mark.parametrize(
    "lang, needle", [("en", "has 251 tokens: allowed 1..250"), ("vi", "có 251 token: cho phép 1..250")]
)
def test_a_prompts_file_line_is_refused_naming_the_line(tmp_path, lang, needle):
    path = tmp_path / "p.txt"
    path.write_text("ok\n\n" + unicodedata.normalize("NFD", "trời") + "\n" + letters(LIMIT + 1) + "\n", "utf-8")
    source = PromptsFile(path, TOK.encode, CFG, lang)
    with pytest.raises(ValueError) as e:
        source.scan()
    assert str(e.value).startswith(f"--prompts-file line 4 {needle}")
    path.write_text("ok\n" + unicodedata.normalize("NFD", "trời") + "\n", "utf-8")
    assert list(PromptsFile(path, TOK.encode, CFG, lang).scan()) == [TOK.encode("ok"), TOK.encode("trời")]


def test_the_presenter_and_torchrun_use_the_same_limit():
    for call in (lambda p: prompt_tokens(p, 1, "en"), lambda p: prompt_ids(argparse.Namespace(prompt=p), CFG)):
        with pytest.raises(ValueError, match=f"^--prompt has {LIMIT + 1} tokens: allowed 1..{LIMIT} "):
            call(letters(LIMIT + 1))
        with pytest.raises(ValueError, match="^--prompt is empty"):
            call(" ")


@pytest.mark.parametrize(
    "lang, needle",
    [
        ("en", "shorten the prompt to at most 15 tokens or lower --rounds"),
        ("vi", "hãy rút ngắn prompt còn tối đa 15 token hoặc giảm --rounds"),
    ],
)
def test_the_presenter_says_when_its_rounds_do_not_fit_behind_the_prompt(lang, needle):
    # 40 rounds × (anchor + 5 drafts) + the next anchor = 241 positions: a prompt may then hold 256 − 241 = 15
    assert prompt_tokens(letters(15), 40, lang)[1] == TOK.encode(letters(15))
    with pytest.raises(ValueError, match=f"^--prompt (has|có) 16 (tokens and|token và) --rounds = 40 .*{needle}"):
        prompt_tokens(letters(16), 40, lang)


# ---- how the prompt was tokenized (1A, generate) --------------------------------------------------------------------
@pytest.mark.parametrize(
    "text",
    [NFC, "  two  spaces ", "def f(x):\n    return x", "The quick brown fox", "a\n\nb", "DSpark.", " x"],
)
def test_the_pieces_joined_are_the_prompts_tokens(text):
    words = prompt_words(TOK, text)
    assert "".join(w.text for w in words) == text
    assert [i for w in words for i in w.ids] == TOK.encode(text)


def test_1a_spells_out_the_words_that_are_not_in_the_vocabulary():
    walk = run_walk("Hôm nay trời đẹp", steps=("1A",))
    for lang, title, spelled in (
        ("en", "How the prompt was tokenized", "spelled out as characters: 5 tokens"),
        ("vi", "Prompt được tách thành token thế nào", "đánh vần từng ký tự: 5 token"),
    ):
        from lab.lesson.walk import build_views

        v = build_views(walk, lang, ("1A",)).views["1A"]
        [table] = [t for t in v.tables if t.title == title]
        rows = {row[0]: row for row in table.rows}
        assert list(rows) == ["Hôm", "nay", "trời", "đẹp"]
        # a word of the vocabulary is one token; "trời" is not: a space, then its four letters
        assert rows["nay"][1:3] == ["▁nay", str(TOK.token_id("▁nay"))]
        assert rows["trời"][1] == "▁ · t · r · ờ · i" and rows["trời"][3] == spelled
        assert rows["trời"][2] == " · ".join(str(TOK.token_id(c)) for c in " trời")
        [note] = [n for n in v.notes if "11" in n and "trời, đẹp" in n]
        assert ("11 tokens for 4 words" if lang == "en" else "11 token cho 4 từ") in note


def test_generate_says_how_the_prompt_was_tokenized(capsys):
    assert main(["generate", "--prompt", NFD, "--max-new-tokens", "2", "--lang", "vi"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "đánh vần từng ký tự" in out and "trời, đẹp" in out
    report = compare(NFC, max_new_tokens=1).to_json()
    assert [w["text"] for w in report["prompt_words"]] == [
        "Hôm",
        " nay",
        " trời",
        " đẹp,",
        " chúng",
        " ta",
        " học",
        " về",
        " DSpark.",
    ]
    assert [i for w in report["prompt_words"] for i in w["ids"]] == report["prompt_ids"]

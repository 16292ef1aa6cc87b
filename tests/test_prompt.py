"""A student's own prompt: one check (lab.text.check_prompt) behind every entry point — NFC at the input, the same
limit everywhere (from the model's max_seq_len), each refusal naming its option in the command's language — and the
1A / generate report of how the prompt was tokenized."""

from __future__ import annotations

import argparse
import contextlib
import io
import re
import unicodedata

import pytest

from dspark_mini import get_config, get_tokenizer
from lab.cli import main
from lab.lesson.generation import compare
from lab.lesson.view import prompt_words
from lab.lesson.walk import run_walk
from lab.present.presenter import prompt_tokens
from lab.runtime.torchrun import prompt_ids
from lab.screens.widgets import LabState
from lab.serving.commands import PromptsFile
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
        ("en", "error: --prompt is empty", "error: --prompt has 251 tokens: allowed 1..250"),
        ("vi", "lỗi: --prompt đang trống", "lỗi: --prompt có 251 token: cho phép 1..250"),
    ],
)
@pytest.mark.parametrize("command", ["walk", "generate", "present"])
def test_the_commands_refuse_with_the_option_in_their_language(command, lang, empty, long):
    code, err = run(command, "--prompt", "   ", "--lang", lang)
    assert code == 2 and empty in err
    code, err = run(command, "--prompt", letters(LIMIT + 1), "--lang", lang)
    assert code == 2 and long in err


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


def expected_how(word: str) -> tuple[list[int], str]:
    """A word's ids (encoded with the space before it) and how the table should call it: split when more than one
    of its tokens holds a letter or digit, else one token, or a word and its marks."""
    ids = TOK.encode(word)
    wordy = sum(any(c.isalnum() for c in TOK.token_text(i)) for i in ids)
    return ids, "split" if wordy > 1 else ("whole" if len(ids) == 1 else "marks")


def test_1a_names_the_words_split_into_pieces():
    prompt = "Hôm nay trời đẹp, 😀"
    words = ["Hôm", " nay", " trời", " đẹp,", " 😀"]
    assert "".join(words) == prompt and sum(len(TOK.encode(w)) for w in words) == len(TOK.encode(prompt))
    how = {w.strip(): expected_how(w) for w in words}
    # the prompt has each kind: a whole word, a word and a mark, and a word the vocabulary does not hold whole
    assert how["nay"][1] == "whole" and how["đẹp,"][1] == "marks" and how["trời"][1] == "split"
    assert how["😀"][1] == "split"  # an emoji the merges never saw: its four bytes
    split = [w for w, (_, kind) in how.items() if kind == "split"]
    walk = run_walk(prompt, steps=("1A",))
    for lang, title, kinds, note in (
        (
            "en",
            "How the prompt was tokenized",
            {
                "whole": "whole word: 1 token",
                "marks": "word and marks: {n} tokens",
                "split": "split into pieces: {n} tokens",
            },
            "{n} tokens for 5 words",
        ),
        (
            "vi",
            "Prompt được tách thành token thế nào",
            {
                "whole": "nguyên từ: 1 token",
                "marks": "từ và dấu câu: {n} token",
                "split": "tách thành mảnh nhỏ: {n} token",
            },
            "{n} token cho 5 từ",
        ),
    ):
        from lab.lesson.walk import build_views

        v = build_views(walk, lang, ("1A",)).views["1A"]
        [table] = [t for t in v.tables if t.title == title]
        rows = {row[0]: row for row in table.rows}
        assert list(rows) == list(how)
        for word, (ids, kind) in how.items():
            assert rows[word][1] == " · ".join(repr(TOK.token_text(i))[1:-1] for i in ids)
            assert rows[word][2] == " · ".join(map(str, ids))
            assert rows[word][3] == kinds[kind].format(n=len(ids)), word
        # a piece of a character reads as its bytes, never as GPT-2's stand-in letters
        assert rows["😀"][1] == " · ".join(repr(TOK.token_text(i))[1:-1] for i in TOK.encode(" 😀"))
        assert "<0xF0>" in rows["😀"][1]
        [line] = [n for n in v.notes if note.format(n=len(TOK.encode(prompt))) in n]
        assert line.endswith(", ".join(split) + ".")


def test_generate_says_how_the_prompt_was_tokenized(capsys):
    assert main(["generate", "--prompt", NFD, "--max-new-tokens", "2", "--lang", "vi"]) == 0
    out = " ".join(capsys.readouterr().out.split())
    split = [w.strip() for w in re.findall(r"\s*\S+", NFC) if expected_how(w)[1] == "split"]
    assert split and "tách thành các mảnh nhỏ hơn" in out and ", ".join(split) + "." in out
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

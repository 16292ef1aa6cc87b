"""The command line in both languages: every command's help fits in 80 columns and, under --lang vi, is written in
Vietnamese; the refusals of tests/test_cli.py's table of bad inputs, argparse's own and `interrupted` follow
--lang vi and keep every option they name; English stays as it was by default."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from lab import cli
from lab.cli import main
from lab.options import WIDTH, help_lang, translate
from lab.text import LANGS
from tests.helpers import english_left
from tests.test_cli import test_bad_input_gives_a_clear_error as bad_input_test
from tests.test_lang_files import VI_LETTERS

ROOT = Path(__file__).resolve().parents[1]
# every command, and the words a command takes first (train target|draft|all, checkpoint export|headers)
PATHS = [[], *([c] for c in cli.COMMANDS), *(["train", w] for w in ("target", "draft", "all"))]
PATHS += [["checkpoint", w] for w in ("export", "headers")]
# the table of bad inputs tests/test_cli.py refuses (argv, what the English refusal says)
BAD_INPUTS = next(m for m in bad_input_test.pytestmark if m.name == "parametrize").args[1]


def help_of(capsys, path: list[str], *lang: str) -> str:
    with pytest.raises(SystemExit) as e:
        main([*path, "--help", *lang])
    assert e.value.code == 0
    return capsys.readouterr().out


def subparsers(p) -> dict:
    return p._subparsers._group_actions[0].choices


@pytest.mark.parametrize("lang", LANGS)
@pytest.mark.parametrize("path", PATHS, ids=lambda p: " ".join(p) or "top")
def test_every_help_fits_in_80_columns(capsys, path, lang) -> None:
    lines = help_of(capsys, path, "--lang", lang).splitlines()
    widest = max(lines, key=len)
    assert len(widest) <= WIDTH, f"{len(widest)} characters: {widest!r}"  # characters: ℓ, τ, → are one each


@pytest.mark.parametrize("command", cli.COMMANDS)
def test_vietnamese_help_is_vietnamese(command) -> None:
    """Under --lang vi the description, the examples and every option's help are the Vietnamese ones: none is the
    English text, and the description holds Vietnamese letters."""
    en, vi = subparsers(cli.parser("en"))[command], subparsers(cli.parser("vi"))[command]
    assert VI_LETTERS.search(vi.description) and vi.description != en.description
    assert vi.epilog != en.epilog and "ví dụ:" in vi.epilog and "mã thoát:" in vi.epilog
    assert [a.option_strings for a in vi._actions] == [a.option_strings for a in en._actions]
    for a, b in zip(en._actions, vi._actions, strict=True):
        assert b.help and b.help != a.help, (command, a.option_strings, b.help)
    assert vi.format_usage().startswith("cách dùng: dspark-lab " + command)


def test_top_level_help_in_both_languages(capsys) -> None:
    en, vi = help_of(capsys, []), help_of(capsys, [], "--lang=vi")
    assert en.startswith("usage: dspark-lab [-h] COMMAND ...") and "{tokenize," not in en
    assert vi.startswith("cách dùng: dspark-lab [-h] LỆNH ...") and "tùy chọn:" in vi and "ví dụ:" in vi
    for command in cli.COMMANDS:  # every command is listed with its one-line help in both
        assert f"    {command}" in en and f"    {command}" in vi
    assert help_of(capsys, [], "--lang", "fr") == en  # an unknown language: the help in English


@pytest.mark.parametrize(
    "argv, lang",
    [
        (["walk"], "en"),
        (["walk", "--lang", "vi"], "vi"),
        (["--lang=vi", "walk"], "vi"),
        (["walk", "--lang", " VI "], "vi"),
        (["walk", "--lang", "vi", "--lang", "en"], "en"),  # the last one wins, as argparse reads it
        (["walk", "--lang", "fr"], "en"),
        (["walk", "--lang"], "en"),
        (["tokenize", "--", "--lang", "vi"], "en"),  # after `--` it is the text, not an option
    ],
)
def test_help_language_is_read_from_argv(argv, lang) -> None:
    assert help_lang(argv) == lang


# an unknown --lang is refused in English (it cannot say which language it wanted): those rows are left out here
IN_A_LANGUAGE = [case for case in BAD_INPUTS if "--lang" not in case[0]]


@pytest.mark.parametrize("argv, needle", IN_A_LANGUAGE, ids=lambda x: " ".join(x)[:40] if isinstance(x, list) else "")
def test_refusals_follow_lang_vi(capsys, argv, needle) -> None:
    """Each refusal of test_cli.py's table, under --lang vi: the Vietnamese frame, and every option the English
    line names still named (a refusal never loses its option to the translation)."""
    assert main(argv) == 2
    en = capsys.readouterr().err
    assert main([*argv, "--lang", "vi"]) == 2
    vi = capsys.readouterr().err
    en_line = next(line for line in en.splitlines() if line.startswith("error: "))
    vi_lines = vi.splitlines()
    assert any(line.startswith("lỗi: ") for line in vi_lines) and not any(
        line.startswith("error:") for line in vi_lines
    )
    flat_vi = " ".join(vi.split())
    for word in en_line.split():
        option = word.strip(":,;()'")
        if option.startswith("--"):
            assert option in flat_vi, (option, flat_vi)
    if " is invalid: allowed " in " ".join(en.split()):
        assert "không hợp lệ: chỉ nhận" in flat_vi and "is invalid" not in flat_vi and "allowed" not in flat_vi
    assert english_left(" ".join(line for line in vi_lines if line.startswith("lỗi: "))) == [], flat_vi


def test_the_block_alias_note_follows_lang(capsys) -> None:
    assert main(["generate", "--block", "0", "--lang", "vi"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("lưu ý: --block nay là --verify-len") and "lỗi: --verify-len = 0 không hợp lệ" in err
    assert main(["generate", "--block", "0"]) == 2
    assert capsys.readouterr().err.startswith("note: --block is now --verify-len")


@pytest.mark.parametrize(
    "argv, vi_words",
    [
        (["walk", "--weights", "pretrained"], ["lựa chọn không hợp lệ", "--weights", "'trained', 'untrained'"]),
        (["train"], ["thiếu các đối số bắt buộc: what"]),
        (["walk", "--bogus"], ["đối số không nhận ra: --bogus"]),
        (["walk", "--seed", "x"], ["giá trị int không hợp lệ: 'x'", "--seed"]),
    ],
)
def test_argparse_refusals_follow_lang(capsys, argv, vi_words) -> None:
    with pytest.raises(SystemExit) as e:
        main([*argv, "--lang", "vi"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and "cách dùng: dspark-lab" in err and ": lỗi: " in err and "error:" not in err
    for words in vi_words:
        assert words in err
    with pytest.raises(SystemExit):
        main(argv)
    assert ": error: " in capsys.readouterr().err  # English: argparse's own words, as before


@pytest.mark.parametrize("lang, word", [("en", "interrupted"), ("vi", "đã ngắt")])
@pytest.mark.parametrize("signal, code", [(KeyboardInterrupt, 130), (cli.Terminated, 143)])
def test_interrupted_follows_lang(capsys, monkeypatch, lang, word, signal, code) -> None:
    def stop(args, console):
        raise signal

    monkeypatch.setattr(cli, "run", stop)
    assert main(["walk", "--lang", lang]) == code
    assert capsys.readouterr().err == word + "\n"


def test_a_refusal_without_translation_keeps_its_english_words() -> None:
    """Only the phrases cli.toml lists are translated; the rest stays English inside the Vietnamese frame."""
    message = "--x = 3 is invalid: allowed a shape no phrase knows (an integer in 1..5)"
    assert translate(message, "en") == message
    assert (
        translate(message, "vi") == "--x = 3 không hợp lệ: chỉ nhận a shape no phrase knows (một số nguyên trong 1..5)"
    )
    assert translate("--lr = 2.0 is invalid: allowed a finite number > 0 and ≤ 1", "vi") == (
        "--lr = 2.0 không hợp lệ: chỉ nhận một số hữu hạn > 0 và ≤ 1"
    )
    assert translate("--out = 'x': No such file or directory: 'x'", "vi") == (
        "--out = 'x': Không có tệp hay thư mục này: 'x'"
    )
    assert translate("--requests = 'a' is invalid: allowed comma-separated integers, e.g. 1,2,4,8", "vi") == (
        "--requests = 'a' không hợp lệ: chỉ nhận các số nguyên cách nhau bằng dấu phẩy, vd. 1,2,4,8"
    )


def test_python_m_lab_present_help_follows_lang(capsys) -> None:
    from lab.present import presenter

    with pytest.raises(SystemExit):
        presenter.main(["--help", "--lang", "vi"])
    out = capsys.readouterr().out
    assert out.startswith("cách dùng: python -m lab.present") and "trang trình chiếu" in out
    assert max(len(line) for line in out.splitlines()) <= WIDTH


def test_vietnamese_help_imports_no_torch() -> None:
    code = "import sys, lab.cli; lab.cli.parser('vi').format_help(); print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert out.returncode == 0 and out.stdout.strip() == "False", out.stderr

"""`dspark-lab data` (lab/realtext/describe.py): its counts agree with counts made here from the corpus and the
tokenizer, its licences with NOTICE, `--out` writes the corpus's own text, `--json` is JSON, bad options are refused
naming the option, and the command speaks Vietnamese."""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from dspark_mini.tokenizer import default_tokenizer
from lab.cli import main
from lab.realtext import MIX, SOURCES, SPLITS, texts, token_stream
from lab.realtext import describe as D

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def report():
    return D.describe()


def notice_licences() -> dict[str, str]:
    """Each data file's `Licence:` paragraph in lab/realtext/NOTICE, its continuation lines joined."""
    out, current, licence = {}, None, None
    for line in (ROOT / "lab" / "realtext" / "NOTICE").read_text(encoding="utf-8").splitlines():
        if line and not line.startswith(" "):  # a heading: a data file's block, or another file's (not a source)
            m = re.match(r"^data/(\S+)$", line)
            current, licence = (m[1] if m else None), None
        elif current and (m := re.match(r"^  Licence:\s+(.*)$", line)):
            licence = out[current] = m[1]
        elif current and licence is not None and line.startswith("           "):
            licence = out[current] = f"{licence} {line.strip()}"
        elif current and line.startswith("  ") and not line.startswith("   "):
            licence = None  # the next field (Changes:, Source:) ends the paragraph
    return out


def test_counts_equal_counts_made_from_texts_and_the_tokenizer(report) -> None:
    tok = default_tokenizer()
    sums = report["sources"]["sums"]
    for split in SPLITS:
        docs = texts("sums", split)
        assert sums["splits"][split] == {
            "documents": len(docs),
            "characters": sum(len(d) for d in docs),
            "tokens": sum(len(tok.encode(d)) + 1 for d in docs),  # + the <eos> that closes each document
        }
    assert sums["all"]["tokens"] == sum(sums["splits"][s]["tokens"] for s in SPLITS)
    assert sums["mix"] == MIX["sums"] and sums["file"] == f"lab/realtext/data/{SOURCES['sums']}"
    # documents and characters of every source as `make corpus` recorded them when it built the files
    stats = json.loads((ROOT / "lab" / "realtext" / "stats.json").read_text(encoding="utf-8"))["corpus"]
    for source, s in report["sources"].items():
        for split in SPLITS:
            got = s["splits"][split]
            assert (got["documents"], got["characters"]) == (
                stats[source][split]["documents"],
                stats[source][split]["characters"],
            ), (source, split)
    for split in SPLITS:
        assert report["totals"][split] == {
            k: sum(s["splits"][split][k] for s in report["sources"].values())
            for k in ("documents", "characters", "tokens")
        }


def test_the_stream_lengths_are_the_streams_the_model_reads(report) -> None:
    assert report["train_stream_tokens"] == report["streams"]["train"]["tokens"] == token_stream("train").numel()
    assert report["streams"]["val"]["tokens"] == token_stream("val").numel()
    assert report["streams"]["test"]["tokens"] == token_stream("test").numel()
    assert report["streams"]["train"]["documents"] == sum(w * len(texts(s, "train")) for s, w in MIX.items())


def test_the_licences_are_notices(report) -> None:
    notice = notice_licences()
    assert set(notice) == set(SOURCES.values())  # NOTICE has one Licence paragraph per data file, no other
    for source, file in SOURCES.items():
        stated = re.split(r"[(,;]|\.(?:\s|$)", notice[file])[0]  # its first clause: "MIT", "MPL-2.0 ", "the novels …"
        assert D.LICENCES[source] in stated, (source, notice[file])
        assert report["sources"][source]["licence"] == D.LICENCES[source]
    assert set(D.LICENCES) == set(SOURCES)


def test_out_writes_the_corpus_text_and_a_readme(tmp_path, capsys) -> None:
    out = tmp_path / "corpus"
    assert main(["data", "--out", str(out), "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    names = {f"{s}.{sp}.txt" for s in SOURCES for sp in SPLITS} | {"README.txt"}
    assert {Path(f).name for f in report["files"]} == names and report["out"] == str(out)
    assert names <= {p.name for p in out.iterdir()}
    for source in SOURCES:
        for split in SPLITS:
            text = (out / f"{source}.{split}.txt").read_text(encoding="utf-8")
            docs = texts(source, split)
            assert D.read_file_text(text) == docs, (source, split)
    sums = (out / "sums.val.txt").read_text(encoding="utf-8")
    assert sums == "".join(d + "\n\f\n" for d in texts("sums", "val"))  # each document, then a form-feed line
    readme = (out / "README.txt").read_text(encoding="utf-8")
    for source in SOURCES:
        assert re.search(rf"^{source} +{re.escape(D.LICENCES[source])} ", readme, re.M), source
    assert (ROOT / "lab" / "realtext" / "NOTICE").read_text(encoding="utf-8").rstrip("\n") in readme
    assert main(["data", "--out", str(out), "--json"]) == 0  # the lab's own corpus folder: replaced whole
    assert json.loads(capsys.readouterr().out)["files"] == report["files"]


def test_json_parses_and_holds_the_table(capsys, report) -> None:
    assert main(["data", "--json"]) == 0
    got = json.loads(capsys.readouterr().out)
    assert got["sources"] == report["sources"] and got["streams"] == report["streams"]
    assert got["out"] is None and got["files"] == [] and got["splits"] == list(SPLITS)


@pytest.mark.parametrize("lang", ["fr", "", "vi-VN"])
def test_a_bad_lang_is_refused_naming_the_option(capsys, lang) -> None:
    assert main(["data", "--lang", lang]) == 2
    err = " ".join(capsys.readouterr().err.split())
    assert err.startswith("error: --lang") and "allowed 'vi', 'en'" in err
    with pytest.raises(ValueError, match=r"^--lang = .* is invalid: allowed vi, en$"):
        D.check(argparse.Namespace(lang=lang, out=None, json=False))


def test_an_out_that_is_a_file_is_refused_naming_the_option(tmp_path, capsys) -> None:
    f = tmp_path / "notes.txt"
    f.write_text("mine\n", encoding="utf-8")
    for lang, allowed in (("en", "allowed a folder"), ("vi", "chỉ nhận một thư mục")):
        assert main(["data", "--out", str(f), "--lang", lang]) == 2
        err = " ".join(capsys.readouterr().err.split())
        assert f"--out = {str(f)!r}" in err and allowed in err, err
    assert f.read_text(encoding="utf-8") == "mine\n" and sorted(tmp_path.iterdir()) == [f]


def test_file_text_refuses_a_document_it_could_not_read_back() -> None:
    assert D.read_file_text(D.file_text([])) == [] and D.read_file_text(D.file_text(["a\n\nb", "c"])) == ["a\n\nb", "c"]
    with pytest.raises(ValueError, match="form feed"):
        D.file_text(["page one\fpage two"])


def test_the_command_runs_in_vietnamese() -> None:
    env = {**os.environ, "COLUMNS": "80"}
    proc = subprocess.run(
        [sys.executable, "-m", "lab", "data", "--lang", "vi"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        encoding="utf-8",
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    for header in ("Kho văn bản thật", "Nguồn", "Phần", "Tài liệu", "Ký tự", "Giấy phép", "huấn luyện", "kiểm định"):
        assert header in out, header
    assert "luồng huấn luyện" in out and "phạm vi công cộng" in out
    for english in ("Real-text corpus", "Documents", "Characters", "Licence", "training stream", "public domain"):
        assert english not in out, english

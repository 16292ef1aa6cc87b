"""Tests for the toy corpus (lab/corpus.py): determinism, tokenizer round trip, correct arithmetic, valid code,
exact line probabilities, the predictability ordering math < code < chat, splits, batch windows and files."""

from __future__ import annotations

import argparse
import json
import math
import re
import unicodedata

import pytest
import torch
from rich.console import Console

from dspark_mini.tokenizer import default_tokenizer
from lab import corpus as C

N = 600  # lines per domain for the shared corpus: enough for stable statistics, fast to describe


@pytest.fixture(scope="module")
def tok():
    return default_tokenizer()


@pytest.fixture(scope="module")
def small():
    return C.build_corpus(seed=0, lines_per_domain=N)


@pytest.fixture(scope="module")
def desc(small, tok):
    return C.describe(small, tok)


# ---- generation ------------------------------------------------------------------------------------------------
def test_domains_and_build_corpus(small):
    assert C.DOMAINS == ("math", "code", "chat")
    assert tuple(small) == C.DOMAINS
    assert all(len(small[d]) == N for d in C.DOMAINS)


@pytest.mark.parametrize("domain", C.DOMAINS)
def test_generate_is_deterministic(domain):
    a = C.generate(domain, 200, seed=3)
    assert a == C.generate(domain, 200, seed=3)
    assert a != C.generate(domain, 200, seed=4)
    assert a != C.generate(domain, 200, seed=-3)  # negative seeds have their own stream
    assert C.generate(domain, 50, seed=3) == a[:50]  # a longer request extends a shorter one
    assert len(set(a)) > 20  # not one line repeated


def test_domains_have_their_own_streams_and_corpus_matches_generate(small):
    assert C.build_corpus(0, N) == small
    assert C.build_corpus(1, N) != small
    for d in C.DOMAINS:
        assert small[d] == C.generate(d, N, 0)


def test_generate_errors_name_the_argument():
    with pytest.raises(ValueError, match=r"unknown domain 'poetry'.*'math', 'code', 'chat'"):
        C.generate("poetry", 5, 0)
    for bad in (0, -1, 1.5, True, "3"):
        with pytest.raises(ValueError, match="n_lines"):
            C.generate("math", bad, 0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="seed"):
        C.generate("math", 5, 1.5)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="n_lines"):
        C.build_corpus(0, 0)


@pytest.mark.parametrize("domain", C.DOMAINS)
def test_lines_are_clean_and_round_trip(small, tok, domain):
    for line in small[domain]:
        assert line.endswith("\n") and "\n" not in line[:-1], repr(line)
        body = line[:-1]
        assert body == body.strip() and "  " not in body, repr(line)
        assert unicodedata.normalize("NFC", line) == line
        assert "{" not in line and "}" not in line, repr(line)  # no unexpanded grammar slot
        ids = tok.encode(line)
        assert not any(tok.is_partial(i) for i in ids), repr(line)  # every character a whole piece, no stray byte
        assert tok.decode(ids) == line
        assert all(i >= 4 for i in ids)  # no specials


def test_lines_use_word_tokens(small, tok, desc):
    chat = small["chat"]
    chars = sum(len(s) for s in chat)
    assert desc["chat"]["tokens"] < 0.45 * chars  # mostly whole-word tokens, not spelled letters
    words = set()
    for word in (" chào", " bạn", " the", " model", " học", " token"):
        [i] = tok.encode(word)  # one token each, with the space before it
        words.add(i)
    used = set(C.token_stream(chat, tok).tolist())
    assert words <= used


_FACT = re.compile(r"(\d+)([+\-*/])(\d+)=(\d+)")


def _check_fact(fact: str) -> None:
    m = _FACT.fullmatch(fact)
    assert m, f"not an arithmetic fact: {fact!r}"
    a, op, b, c = int(m[1]), m[2], int(m[3]), int(m[4])
    if op == "+":
        assert a + b == c, fact
    elif op == "-":
        assert a - b == c and c >= 0, fact
    elif op == "*":
        assert a * b == c, fact
    else:
        assert b != 0 and b * c == a, fact  # exact integer division


def test_math_answers_are_correct(small):
    kinds = set()
    for line in small["math"]:
        facts = line[:-1].split(", ")
        assert len(facts) == 4, line
        for fact in facts:
            _check_fact(fact)
        kinds.add(tuple(sorted(set(re.findall(r"[+\-*/]", line)))))
    assert {("+", "-"), ("*", "/"), ("*",), ("+",), ("-",)} <= kinds  # every line kind shows up


def test_fact_checker_catches_a_wrong_answer():
    with pytest.raises(AssertionError):
        _check_fact("12+7=20")
    with pytest.raises(AssertionError):
        _check_fact("7/2=3")


def test_code_lines_compile(small):
    for line in small["code"]:
        compile(line, "<corpus>", "exec")  # SyntaxError fails the test


def test_chat_is_bilingual_user_bot(small):
    chat = small["chat"]
    assert all(re.fullmatch(r"User: .+ Bot: .+\n", s) for s in chat)
    vi = [s for s in chat if re.search(r"[ăâđêôơưàáảãạèéẻẽẹìíỉĩịòóỏõọùúủũụỳýỷỹỵ]", s.lower())]
    assert 0.35 < len(vi) / len(chat) < 0.65  # about half Vietnamese, half English
    assert any("Xin chào" in s for s in chat) and any("Hello" in s for s in chat)


def test_docstring_examples_are_grammar_lines():
    for domain, line in (
        ("math", "7+12=19, 12+7=19, 19-12=7, 19-7=12"),
        ("code", "for i in range(5): print(i)"),
        ("chat", "User: Xin chào! Bot: Chào bạn, hôm nay bạn học gì?"),
        ("chat", "User: Hello, how are you? Bot: I am good, thank you."),
    ):
        assert 0 < C.line_bits(domain, line) < 40


# ---- exact line probabilities ------------------------------------------------------------------------------------
@pytest.mark.parametrize("domain", ("math", "code"))
def test_small_grammars_are_injective_and_normalized(domain):
    leaves = list(C._enumerate(C._GENERATORS[domain]))
    table = C._line_table(domain)
    assert len(leaves) == len(table)  # different choices never give the same line
    assert math.isclose(sum(table.values()), 1.0, rel_tol=1e-9)
    assert len(table) < 2000  # small enough to enumerate


@pytest.mark.parametrize("domain", C.DOMAINS)
def test_line_bits_equal_the_generators_bits(domain):
    lines, bits = C.generate_with_bits(domain, 400, seed=7)
    assert lines == C.generate(domain, 400, seed=7)
    for line, b in zip(lines, bits, strict=True):
        # for chat, the parse sums every derivation: equality means the line has exactly one
        assert math.isclose(C.line_bits(domain, line), b, rel_tol=1e-9, abs_tol=1e-9), line


def test_line_bits_rejects_lines_outside_the_grammar():
    with pytest.raises(ValueError, match="not a line of the 'math' grammar"):
        C.line_bits("math", "12+7=20, 7+12=20, 20-7=12, 20-12=7")
    with pytest.raises(ValueError, match="'code'"):
        C.line_bits("code", "import os")
    with pytest.raises(ValueError, match="'chat'"):
        C.line_bits("chat", "User: Hello! Bot: Goodbye forever.")
    with pytest.raises(ValueError, match="unknown domain 'poetry'"):
        C.line_bits("poetry", "roses are red")


# ---- predictability ------------------------------------------------------------------------------------------------
def test_predictability_ordering_math_code_chat(desc):
    h = {d: desc[d]["entropy_bits"] for d in C.DOMAINS}
    assert h["math"] < h["code"] < h["chat"], h
    assert h["code"] > 1.3 * h["math"] and h["chat"] > 1.3 * h["code"], h  # clear gaps, not noise
    # the trigram view cannot do arithmetic: math looks the hardest with 2 tokens of context
    h2 = {d: desc[d]["entropy_ctx2_bits"] for d in C.DOMAINS}
    assert h2["math"] > 1.5 * max(h2["code"], h2["chat"]), h2
    assert all(h2[d] > h[d] for d in C.DOMAINS)  # less context never means less uncertainty


def test_predictability_ordering_holds_for_other_seeds(tok):
    for seed in (1, 2):
        d = C.describe(C.build_corpus(seed, 300), tok)
        assert d["math"]["entropy_bits"] < d["code"]["entropy_bits"] < d["chat"]["entropy_bits"]


def test_describe_counts(small, desc, tok):
    for d in C.DOMAINS:
        row = desc[d]
        ids = C.token_stream(small[d], tok)
        assert row["lines"] == N and row["distinct_lines"] == len(set(small[d]))
        assert row["tokens"] == ids.numel()
        assert row["tokens_per_line"] == pytest.approx(ids.numel() / N)
        assert row["distinct_tokens"] == len(set(ids.tolist()))
        assert row["entropy_bits"] == pytest.approx(row["bits_per_line"] / row["tokens_per_line"])
    assert desc["math"]["distinct_tokens"] < desc["code"]["distinct_tokens"] < desc["chat"]["distinct_tokens"]


def test_describe_other_keys_and_errors(small, tok):
    d = C.describe({"mixed": C.mix(small, 0)[:200]}, tok)
    assert d["mixed"]["entropy_bits"] is None and d["mixed"]["entropy_ctx2_bits"] > 0
    with pytest.raises(ValueError, match="'math'"):
        C.describe({"math": []}, tok)
    with pytest.raises(ValueError, match="not a line of the 'math' grammar"):
        C.describe({"math": ["1+1=3\n"]}, tok)


def test_conditional_entropy_on_known_sources():
    assert C.conditional_entropy([[1, 2, 3, 4]] * 5, None) == 0.0  # one line repeated: fully determined
    coin = [[0, 1], [0, 2]] * 10  # second token is a fair coin
    assert C.conditional_entropy(coin, None) == pytest.approx(0.5)  # 1 bit over 2 tokens
    assert C.conditional_entropy([[0, 1, 0, 2] * 10], 1) == pytest.approx(0.5)  # after 0: 1 or 2; else 0
    assert C.conditional_entropy([[0, 1, 0, 2] * 10], 2) == 0.0  # (1, 0) → 2, (2, 0) → 1: determined
    assert C.conditional_entropy([[0, 1, 2, 3]], 0) == pytest.approx(2.0)  # unigram over 4 equal ids
    with pytest.raises(ValueError, match="context"):
        C.conditional_entropy([[1, 2]], -1)


# ---- streams, splits, batches ------------------------------------------------------------------------------------
def test_token_stream(small, tok):
    lines = small["chat"][:50]
    ids = C.token_stream(lines, tok)
    assert ids.dtype == torch.int64 and ids.dim() == 1
    assert ids.tolist() == tok.encode("".join(lines))  # no merge across "\n"
    assert tok.decode(ids.tolist()) == "".join(lines)
    with_eos = C.token_stream(lines, tok, eos=True)
    assert with_eos.numel() == ids.numel() + len(lines)
    assert (with_eos == tok.eos).sum().item() == len(lines) and with_eos[-1].item() == tok.eos
    assert C.token_stream(lines).tolist() == ids.tolist()  # default tokenizer
    with pytest.raises(ValueError, match="lines"):
        C.token_stream("12+7=19\n", tok)


def test_split_is_deterministic_and_a_partition(small):
    lines = small["code"]
    train, val = C.split(lines, 0.1, seed=0)
    assert (train, val) == C.split(lines, 0.1, seed=0)
    assert C.split(lines, 0.1, seed=1)[1] != val
    assert len(val) == round(0.1 * len(lines)) and len(train) + len(val) == len(lines)
    assert sorted(train + val) == sorted(lines)
    assert C.split(lines, 0.0, 0) == (list(lines), [])
    assert len(C.split(lines[:3], 0.01, 0)[1]) == 1  # at least one val line when val_fraction > 0


def test_split_disjoint_keeps_val_text_out_of_train(small):
    lines = small["math"]  # many repeated lines
    train, val = C.split(lines, 0.2, seed=0)
    assert set(train) & set(val)  # a plain split shares identical lines
    train, val = C.split(lines, 0.2, seed=0, disjoint=True)
    assert not set(train) & set(val) and sorted(train + val) == sorted(lines)


def test_split_errors_name_the_argument():
    for bad in (1.0, -0.1, 2, True):
        with pytest.raises(ValueError, match="val_fraction"):
            C.split(["a\n", "b\n"], bad, 0)
    with pytest.raises(ValueError, match="no training line"):
        C.split(["a\n"], 0.5, 0)


def test_batches_shape_source_and_reproducibility(small, tok):
    ids = C.token_stream(C.mix(small, 0), tok)
    b = C.sample_batch(ids, 8, 32, torch.Generator().manual_seed(0))
    assert b.shape == (8, 33) and b.dtype == torch.int64
    windows = ids.unfold(0, 33, 1)  # every window of the stream [N - 32, 33]
    for row in b:
        assert (windows == row).all(dim=1).any()  # each row is a contiguous slice of the stream
    assert torch.equal(b, C.sample_batch(ids, 8, 32, torch.Generator().manual_seed(0)))
    assert not torch.equal(b, C.sample_batch(ids, 8, 32, torch.Generator().manual_seed(1)))
    it = list(C.batches(ids, 4, 16, torch.Generator().manual_seed(5), n_batches=3))
    again = list(C.batches(ids, 4, 16, torch.Generator().manual_seed(5), n_batches=3))
    assert len(it) == 3 and all(x.shape == (4, 17) for x in it)
    assert all(torch.equal(x, y) for x, y in zip(it, again, strict=True))
    endless = C.batches(ids, 2, 8, torch.Generator().manual_seed(0))
    assert [next(endless).shape for _ in range(5)] == [torch.Size([2, 9])] * 5
    short = torch.arange(10)
    assert torch.equal(C.sample_batch(short, 3, 9, torch.Generator()), short.expand(3, 10))  # only one window


def test_batches_errors_name_the_argument(small, tok):
    ids = C.token_stream(small["math"][:5], tok)
    g = torch.Generator().manual_seed(0)
    with pytest.raises(ValueError, match="seq_len = 10000"):
        C.sample_batch(ids, 2, 10_000, g)
    with pytest.raises(ValueError, match="batch"):
        C.sample_batch(ids, 0, 8, g)
    with pytest.raises(ValueError, match="seq_len"):
        C.sample_batch(ids, 2, 0, g)
    with pytest.raises(ValueError, match="ids"):
        C.sample_batch(ids[None], 2, 8, g)
    with pytest.raises(ValueError, match="ids"):
        C.sample_batch(ids.float(), 2, 8, g)
    with pytest.raises(ValueError, match="generator"):
        C.sample_batch(ids, 2, 8, 0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="n_batches"):
        next(C.batches(ids, 2, 8, g, n_batches=-1))


def test_mix_is_deterministic_and_complete(small):
    m = C.mix(small, 0)
    assert m == C.mix(small, 0) and m != C.mix(small, 1)
    assert sorted(m) == sorted(s for d in C.DOMAINS for s in small[d])


# ---- files, rendering, CLI ---------------------------------------------------------------------------------------
def test_write_and_read_corpus(tmp_path, small, desc):
    paths = C.write_corpus(small, tmp_path / "corpus", seed=0, desc=desc)
    names = sorted(p.name for p in paths)
    assert names == ["README.txt", "chat.txt", "code.txt", "math.txt"]
    for d in C.DOMAINS:
        raw = (tmp_path / "corpus" / f"{d}.txt").read_bytes()
        assert raw.decode("utf-8") == "".join(small[d]) and b"\r" not in raw
    assert C.read_corpus(tmp_path / "corpus") == small
    readme = (tmp_path / "corpus" / "README.txt").read_text(encoding="utf-8")
    for d in C.DOMAINS:
        assert f"{d}.txt: {N} lines" in readme
    assert "seed 0" in readme and f"{desc['chat']['entropy_bits']:.3f} bits" in readme


def test_write_corpus_errors(tmp_path):
    with pytest.raises(ValueError, match="domain name '../x'"):
        C.write_corpus({"../x": ["a\n"]}, tmp_path)
    with pytest.raises(ValueError, match="README"):
        C.write_corpus({"readme": ["a\n"]}, tmp_path)
    with pytest.raises(ValueError, match=r"math line 1"):
        C.write_corpus({"math": ["1+1=2\n", "no newline"]}, tmp_path)
    with pytest.raises(ValueError, match="no corpus file"):
        C.read_corpus(tmp_path / "missing")


@pytest.mark.parametrize("lang", ["en", "vi"])
def test_render_description(small, desc, lang):
    console = Console(record=True, width=120)
    C.render_description(console, desc, lang, small, seed=0)
    text = console.export_text()
    for d in C.DOMAINS:
        assert d in text
    assert C.LABELS("entropy_bits", lang) in text and C.LABELS("title", lang, seed=0) in text
    assert f"{desc['chat']['entropy_bits']:.3f}" in text
    assert ("Xin chào" in text or "User:" in text) and small["math"][0].rstrip("\n") in text


def test_render_and_labels_reject_bad_language(desc):
    with pytest.raises(ValueError, match="'fr'"):
        C.render_description(Console(record=True), desc, "fr")
    with pytest.raises(ValueError, match="'nope'"):
        C.LABELS("nope", "en")


def test_main_data_json_and_files(tmp_path, capsys):
    p = C.add_data_arguments(argparse.ArgumentParser())
    args = p.parse_args(["--lines", "40", "--seed", "2", "--json", "--out", str(tmp_path / "d")])
    report = C.main_data(args)
    printed = json.loads(capsys.readouterr().out)
    assert printed["seed"] == 2 and printed["lines_per_domain"] == 40
    assert set(printed["domains"]) == set(C.DOMAINS)
    assert printed["domains"]["math"]["lines"] == 40 == report["domains"]["code"]["lines"]
    assert C.read_corpus(tmp_path / "d") == C.build_corpus(2, 40)
    console = Console(record=True, width=120)
    C.main_data(p.parse_args(["--lines", "30", "--lang", "vi"]), console=console)
    assert "Kho ngữ liệu nhỏ (seed 0)" in console.export_text()
    with pytest.raises(ValueError, match="--lines = 0"):
        C.main_data(p.parse_args(["--lines", "0"]))
    with pytest.raises(ValueError, match="'de'"):
        C.main_data(p.parse_args(["--lang", "de"]))

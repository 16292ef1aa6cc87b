"""Tests for the lab tokenizer (step 1A): vocabulary contents, exact round trip, errors, compressed ids."""

from __future__ import annotations

import unicodedata

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from dspark_mini.tokenizer import (
    SPACE_MARK,
    LabTokenizer,
    TokenizerError,
    default_tokenizer,
    normalize_text,
    normalize_token,
)
from tests.helpers import naive_normalize

TEXTS = [
    "The model predicts the next token.",
    "Xin chào các bạn, hôm nay học về DSpark.",
    "def f(x): return x+1",
    "def f(x):\n    return x+1\n",
    "12+7=19",
    "  two  spaces, trailing space ",
    "ĐÀ NẴNG, Ưu tiên; ỹ ỵ Ỷ",
    "",
    " ",
    "a_b __init__ x1 2x",
]


@pytest.fixture(scope="module")
def tok() -> LabTokenizer:
    return default_tokenizer()


def test_vocab_size_and_uniqueness(tok: LabTokenizer) -> None:
    assert tok.vocab_size == len(tok.vocab) == len(tok) <= 512
    assert len(set(tok.vocab)) == tok.vocab_size
    assert tok.vocab_size >= 450  # roughly 230 chars + a few hundred word tokens


def test_specials(tok: LabTokenizer) -> None:
    assert (tok.bos, tok.eos, tok.pad, tok.noise) == (0, 1, 2, 3)
    assert tok.vocab[:4] == ("<bos>", "<eos>", "<pad>", "<noise>")
    assert tok.decode([0, 1, 2, 3]) == "<bos><eos><pad><noise>"
    assert tok.token_id("<pad>") == 2
    assert tok.encode("<bos>") != [tok.bos]  # specials only come from code, never from text


def test_characters_are_single_tokens(tok: LabTokenizer) -> None:
    for c in range(32, 127):
        assert tok.encode(chr(c)) == [tok.token_id(chr(c))]
    vi = [t for t in tok.vocab if len(t) == 1 and not t.isascii()]
    assert len(vi) == 2 * 67  # 66 toned/modified vowels + đ, both cases
    for ch in "ăâđêôơưàáảãạằắẳẵặầấẩẫậèéẻẽẹềếểễệìíỉĩịòóỏõọồốổỗộờớởỡợùúủũụừứửữựỳýỷỹỵ":
        assert ch in tok.vocab and ch.upper() in tok.vocab
        assert unicodedata.is_normalized("NFC", ch)


def test_required_words(tok: LabTokenizer) -> None:
    for w in [
        "Xin",
        "xin",
        "▁Xin",
        "▁xin",
        "▁chào",
        "▁the",
        "The",
        "▁model",
        "▁token",
        "def",
        "return",
        "▁return",
        "▁if",
        "print",
        "▁print",
    ]:
        assert w in tok.vocab, w
    words = [t for t in tok.vocab if len(t.replace(SPACE_MARK, "")) > 1 and not t.startswith("<")]
    distinct = {normalize_token(t) for t in words}
    assert 200 <= len(distinct) <= 260


@pytest.mark.parametrize("text", TEXTS)
def test_round_trip(tok: LabTokenizer, text: str) -> None:
    assert tok.decode(tok.encode(text)) == text


def test_encoding_examples(tok: LabTokenizer) -> None:
    def pieces(text: str) -> list[str]:
        return [tok.vocab[i] for i in tok.encode(text)]

    assert pieces("Xin chào các bạn, hôm nay học về DSpark.") == [
        "Xin",
        "▁chào",
        "▁các",
        "▁bạn",
        ",",
        "▁hôm",
        "▁nay",
        "▁học",
        "▁về",
        "▁DSpark",
        ".",
    ]
    assert pieces("12+7=19") == list("12+7=19")
    assert pieces("def f(x): return x+1")[:2] == ["def", "▁f"]
    assert pieces("the the") == ["the", "▁the"]
    assert "▁def" not in tok.vocab  # " word" with no ▁word but a bare word: a space, then the word
    assert pieces("x = def") == ["x", " ", "=", " ", "def"]
    assert pieces("x  model") == ["x", " ", "▁model"]
    assert pieces(" zzz") == [" ", "z", "z", "z"]
    assert tok.token_text(tok.token_id(" ")) == SPACE_MARK
    assert tok.token_text(tok.token_id("▁model")) == "▁model"


_ALPHABET = [chr(c) for c in range(32, 127)] + [t for t in default_tokenizer().vocab if len(t) == 1 and not t.isascii()]
_FRAGMENTS = [t.replace(SPACE_MARK, " ") for t in default_tokenizer().vocab[4:]]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.one_of(st.sampled_from(_ALPHABET), st.sampled_from(_FRAGMENTS)), max_size=40))
def test_round_trip_random(parts: list[str]) -> None:
    tok = default_tokenizer()
    text = "".join(parts)
    ids = tok.encode(text)
    assert tok.decode(ids) == text
    assert all(0 <= i < tok.vocab_size and i > 3 for i in ids)


def test_unknown_character_error(tok: LabTokenizer) -> None:
    with pytest.raises(TokenizerError) as err:
        tok.encode("abc€d")
    msg = str(err.value)
    assert "'€'" in msg and "U+20AC" in msg and "position 3" in msg
    assert "ASCII" in msg and "Vietnamese" in msg
    with pytest.raises(TokenizerError, match=r"'ß' \(U\+00DF\) at position 6"):  # inside a word run
        tok.encode("xin  aßb")
    with pytest.raises(TokenizerError, match=r"U\+0009.*position 5"):
        tok.encode("hello\tworld")
    with pytest.raises(TokenizerError, match="NFC"):  # decomposed accent
        tok.encode(unicodedata.normalize("NFD", "chào"))
    assert isinstance(err.value, ValueError)


def test_decode_bad_id(tok: LabTokenizer) -> None:
    for bad in (-1, tok.vocab_size, 10_000):
        with pytest.raises(TokenizerError) as err:
            tok.decode([5, bad])
        assert str(bad) in str(err.value) and f"0..{tok.vocab_size - 1}" in str(err.value)
    with pytest.raises(TokenizerError):
        tok.token_text(tok.vocab_size)


def test_normalize_token() -> None:
    assert normalize_token("▁Xin") == normalize_token("xin") == "xin"
    assert normalize_token("Đ") == "đ"  # đ is its own letter, not d + mark
    assert normalize_token("ẫ") == "a"
    assert normalize_token(" ") == normalize_token("\n") == " "  # a lone space keeps its key (sentinel vs strip)
    assert normalize_token("▁chào") == "chao"
    assert normalize_token("<pad>") == "<pad>"


EDGE_TEXTS = [
    "ΟΔΟΣ",  # per-character lowercase: σ, not the final ς
    "\x0c",  # a form feed is stripped at the ends but never collapsed into a space
    "a\x0cb",
    " \x1c",  # U+001C is not White_Space: it stays
    "İstanbul",  # İ → i + a dot mark, dropped
    "ﬁne",  # NFKC splits the ligature
    "\u3000x",  # ideographic space: NFKC → space, stripped
    " \t\n ",
    "नमस्ते",  # Devanagari: the vowel signs are spacing marks (Mc), dropped too
    "Chào Đà Nẵng",
    "▁x",  # U+2581 is a character like any other here (only the lab's token texts use it as a space)
    "",
]


@pytest.mark.parametrize("text", EDGE_TEXTS)
def test_normalize_text_follows_the_reference_rule(text: str) -> None:
    assert normalize_text(text) == naive_normalize(text)


def test_normalize_token_on_the_lab_vocabulary(tok: LabTokenizer) -> None:
    """Every lab token: the rule above, with "▁" read as a space; no token normalizes to nothing."""
    for t in tok.vocab:
        key = normalize_token(t)
        assert key == naive_normalize(t.replace(SPACE_MARK, " ")) and key != "", t


def test_compressed_vocabulary(tok: LabTokenizer) -> None:
    cm = tok.compress_map
    assert len(cm) == tok.vocab_size
    assert tok.compressed_vocab_size == max(cm) + 1 < tok.vocab_size
    # ids are handed out in order of first appearance
    seen = -1
    for c in cm:
        assert c <= seen + 1
        seen = max(seen, c)
    xin = [tok.token_id(t) for t in ("Xin", "xin", "▁Xin", "▁xin")]
    assert len(set(xin)) == 4 and len({cm[i] for i in xin}) == 1
    assert len({cm[tok.token_id(t)] for t in ("a", "A", "à", "á", "Ặ")}) == 1
    assert cm[tok.token_id("d")] != cm[tok.token_id("đ")] == cm[tok.token_id("Đ")]
    # whitespace folds to one protected key: " " and "\n" share it, nothing else does
    assert {i for i in range(tok.vocab_size) if cm[i] == cm[tok.token_id(" ")]} == {
        tok.token_id(" "),
        tok.token_id("\n"),
    }
    assert len({cm[i] for i in range(4)}) == 4 and cm[:4] == (0, 1, 2, 3)


def test_compress_tensor(tok: LabTokenizer) -> None:
    ids = torch.tensor([tok.encode("Xin chào xin Chào"), tok.encode("xin chào xin chào")])  # [2, 4]
    c = tok.compress(ids)
    assert c.shape == ids.shape and c.dtype == torch.int64
    assert torch.equal(c[0], c[1]) and not torch.equal(ids[0], ids[1])
    assert tok.compress(torch.arange(tok.vocab_size)).tolist() == list(tok.compress_map)
    assert tok.compress(torch.zeros(0, 3, dtype=torch.long)).shape == (0, 3)
    with pytest.raises(TokenizerError, match=f"{tok.vocab_size}.*0..{tok.vocab_size - 1}"):
        tok.compress(torch.tensor([[1, tok.vocab_size]]))
    with pytest.raises(TokenizerError, match="-4"):
        tok.compress(torch.tensor([-4]))

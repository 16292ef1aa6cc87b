"""Tests for the lab tokenizer (step 1A): vocabulary contents, exact round trip, byte fallback, errors,
compressed ids."""

from __future__ import annotations

import hashlib
import unicodedata

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from dspark_mini.tokenizer import (
    BYTE_TOKENS,
    SPACE_MARK,
    LabTokenizer,
    TokenizerError,
    decode_utf8,
    default_tokenizer,
    normalize_text,
    normalize_token,
)
from tests.helpers import naive_normalize

# sha256 of "\n".join(vocabulary) of the readable vocabulary as it was before byte fallback (510 ids, computed
# from that version of the module): the byte tokens were only appended, every readable id stays what it was
READABLE_VOCAB_SHA256 = "27bbf553709af5eb48557f8b5ba7831b40329e4cd61693e1055fa780eac8c95b"
READABLE_VOCAB_SIZE = 510
READABLE_COMPRESSED_SIZE = 291

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
    assert tok.vocab_size == len(tok.vocab) == len(tok) == READABLE_VOCAB_SIZE + 256 <= 1024
    assert len(set(tok.vocab)) == tok.vocab_size
    assert tok.byte_offset == READABLE_VOCAB_SIZE  # roughly 230 chars + a few hundred word tokens, then bytes


def test_byte_tokens_are_appended(tok: LabTokenizer) -> None:
    readable = tok.vocab[: tok.byte_offset]
    assert hashlib.sha256("\n".join(readable).encode()).hexdigest() == READABLE_VOCAB_SHA256
    assert tok.vocab[tok.byte_offset :] == BYTE_TOKENS
    assert BYTE_TOKENS[0] == "<0x00>" and BYTE_TOKENS[0xF0] == "<0xF0>" and BYTE_TOKENS[-1] == "<0xFF>"
    assert [tok.is_byte(i) for i in (0, tok.byte_offset - 1, tok.byte_offset, tok.vocab_size - 1)] == [
        False,
        False,
        True,
        True,
    ]
    assert tok.token_id("<0xF0>") == tok.byte_offset + 0xF0
    assert tok.token_text(tok.byte_offset + 0xF0) == "<0xF0>"  # readable on every screen


def test_byte_fallback_examples(tok: LabTokenizer) -> None:
    def byte_ids(text: str) -> list[int]:
        return [tok.byte_offset + b for b in text.encode("utf-8")]

    for ch in ("\t", "😀", "你", "€", "ß", "\u0301"):  # tab, emoji, Chinese, euro, sharp s, a lone combining mark
        assert tok.encode(ch) == byte_ids(ch), ch
        assert tok.decode(tok.encode(ch)) == ch
    assert len(tok.encode("😀")) == 4 and tok.encode("你好") == byte_ids("你好")
    h, w = tok.encode("hello"), tok.encode("world")
    assert tok.encode("hello\tworld") == h + byte_ids("\t") + w
    # inside a word run: " aßb" has no ▁aßb token, so a space, then each char (ß as its two bytes)
    assert tok.encode("xin  aßb") == tok.encode("xin  ") + tok.encode("a") + byte_ids("ß") + tok.encode("b")
    assert tok.encode(" 你") == [tok.token_id(" ")] + byte_ids("你")  # no ▁你: a space, then the bytes
    assert tok.encode("<0xF0>") == [tok.token_id(c) for c in "<0xF0>"]  # the name as text is six chars


def test_nfd_and_nfc_give_the_same_ids(tok: LabTokenizer) -> None:
    for text in ("chào", "Xin chào các bạn", "ĐÀ NẴNG, Ưu tiên", "Ångström", "e\u0301"):
        nfc, nfd = unicodedata.normalize("NFC", text), unicodedata.normalize("NFD", text)
        assert tok.encode(nfd) == tok.encode(nfc)
        assert tok.decode(tok.encode(nfd)) == nfc
    assert tok.encode(unicodedata.normalize("NFD", "chào")) == [tok.token_id("chào")]
    assert all(not tok.is_byte(i) for i in tok.encode(unicodedata.normalize("NFD", "Việt Nam học")))


def test_decode_joins_bytes_and_never_raises(tok: LabTokenizer) -> None:
    b = tok.byte_offset
    assert tok.decode([b + x for x in "😀".encode()]) == "😀"
    assert tok.decode([b + 0xF0, b + 0x9F]) == "\ufffd"  # a cut-off emoji: one replacement char
    assert tok.decode([b + 0xF0, b + 0x9F, tok.token_id("a"), b + 0xE4]) == "\ufffda\ufffd"  # runs end at a token
    assert tok.decode([b + 0xFF, b + 0x41]) == "\ufffdA"  # 0xFF is never UTF-8; 0x41 alone is "A"
    assert tok.decode([b + x for x in "é".encode()] + [tok.token_id("<pad>")]) == "é<pad>"
    for data in (b"\xe4\xbd", b"\xc3(", b"\xed\xa0\x80", b"a\x80b", b""):  # our rule = Python's "replace"
        if data != b"\xed\xa0\x80":
            assert decode_utf8(data) == data.decode("utf-8", "replace")
    assert decode_utf8("\ud800".encode("utf-8", "surrogatepass")) == "\ud800"  # a lone surrogate comes back


@settings(max_examples=300, deadline=None)
@given(st.text())
def test_round_trip_every_string(text: str) -> None:
    tok = default_tokenizer()
    ids = tok.encode(text)
    assert tok.decode(ids) == unicodedata.normalize("NFC", text)
    assert all(4 <= i < tok.vocab_size for i in ids)  # never a special
    assert ids == tok.encode(unicodedata.normalize("NFD", text))


@settings(max_examples=100, deadline=None)
@given(st.lists(st.integers(0, 1023), max_size=30))
def test_decode_any_byte_sequence(raw: list[int]) -> None:
    tok = default_tokenizer()
    ids = [tok.byte_offset + (x % 256) for x in raw]
    data = bytes(x % 256 for x in raw)
    text = tok.decode(ids)
    assert isinstance(text, str)
    try:
        assert text == data.decode("utf-8")
    except UnicodeDecodeError:
        assert "\ufffd" in text


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
    assert all(3 < i < tok.byte_offset for i in ids)  # readable text: readable ids only, never a byte token


def test_encode_refuses_only_a_non_string(tok: LabTokenizer) -> None:
    with pytest.raises(TokenizerError, match="str.*bytes"):
        tok.encode(b"abc")  # type: ignore[arg-type]
    assert isinstance(TokenizerError("x"), ValueError)


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
    assert tok.compressed_vocab_size == READABLE_COMPRESSED_SIZE + 256
    # every byte token has its own compressed id, shared with no other token; the readable ids' map is unchanged
    readable = set(cm[: tok.byte_offset])
    byte_ids = cm[tok.byte_offset :]
    assert len(set(byte_ids)) == 256 and not readable & set(byte_ids)
    assert list(byte_ids) == list(range(READABLE_COMPRESSED_SIZE, READABLE_COMPRESSED_SIZE + 256))
    emoji = torch.tensor(tok.encode("😀"))  # [4] byte ids
    assert tok.compress(emoji).tolist() == [READABLE_COMPRESSED_SIZE + b for b in "😀".encode()]
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

"""Tests for the lab tokenizer (step 1A): the byte-level BPE of dspark_mini/lab_tokenizer/ read by HFTokenizer.

Exact round trip for any text, NFD = NFC, the four specials (never read from text), how a piece of a character is
shown (<0xNN>), the Engram compressed ids re-derived here from the reference rule, WiderVocabTokenizer, and the lab
config's vocabulary numbers. What the tokenizer should give is derived here from the files themselves (read as plain
JSON), GPT-2's byte alphabet written out in tests/helpers.py, and Python's own Unicode and UTF-8 handling.
"""

from __future__ import annotations

import json
import unicodedata

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from dspark_mini import get_config
from dspark_mini.compressed_vocab import normalize_text
from dspark_mini.hf_tokenizer import HFTokenizer
from dspark_mini.tokenizer import (
    LAB_TOKENIZER_DIR,
    SPECIALS,
    TokenizerError,
    WiderVocabTokenizer,
    default_tokenizer,
)
from tests.helpers import gpt2_byte_of, naive_normalize, shown_bytes

TOKENIZER_JSON = json.loads((LAB_TOKENIZER_DIR / "tokenizer.json").read_text(encoding="utf-8"))
CONFIG_JSON = json.loads((LAB_TOKENIZER_DIR / "tokenizer_config.json").read_text(encoding="utf-8"))
VOCAB: dict[str, int] = TOKENIZER_JSON["model"]["vocab"]  # raw token string → id, as the file spells it
RAW: dict[int, str] = {i: s for s, i in VOCAB.items()}
BYTE_OF = gpt2_byte_of()
NAMES = ("bos", "eos", "pad", "noise")


def nfc(text: str) -> str:
    return unicodedata.normalize("NFC", text)


def bytes_of(i: int) -> bytes:
    """What token i stands for, from the file alone: its raw string read back through GPT-2's byte alphabet."""
    return bytes(BYTE_OF[c] for c in RAW[i])


def byte_token(b: int) -> int:
    """The id of the token that is the single byte b (its raw string is the byte's GPT-2 character)."""
    return VOCAB[next(c for c, v in BYTE_OF.items() if v == b)]


@pytest.fixture(scope="module")
def tok() -> HFTokenizer:
    return default_tokenizer()


# ---- the files ------------------------------------------------------------------------------------------
def test_vocabulary_size_and_files(tok: HFTokenizer) -> None:
    assert TOKENIZER_JSON["model"]["type"] == "BPE"
    assert sorted(VOCAB.values()) == list(range(8192))  # ids 0..8191, no gap, no duplicate
    assert tok.vocab_size == len(tok) == len(tok.vocab) == len(VOCAB) == 8192
    assert default_tokenizer() is tok  # read once
    assert [tok.raw[i] for i in range(tok.vocab_size)] == [RAW[i] for i in range(8192)]
    # ids 4..259 are the 256 single bytes, every later id a merge of at least two
    assert sorted(b for i in range(4, 260) for b in bytes_of(i)) == list(range(256))
    assert all(len(bytes_of(i)) >= 2 for i in range(260, 8192))
    # no two tokens stand for the same bytes, so no two read the same on a page either
    assert len({bytes_of(i) for i in range(4, 8192)}) == 8188
    assert len(set(tok.vocab)) == tok.vocab_size


def test_specials_by_name(tok: HFTokenizer) -> None:
    added = {t["id"]: t for t in TOKENIZER_JSON["added_tokens"]}
    assert sorted(added) == [0, 1, 2, 3] and all(added[i]["special"] for i in added)
    assert tuple(added[i]["content"] for i in range(4)) == SPECIALS == ("<bos>", "<eos>", "<pad>", "<noise>")
    assert CONFIG_JSON == {f"{n}_token": f"<{n}>" for n in NAMES}  # tokenizer_config.json names all four
    assert (tok.bos, tok.eos, tok.pad, tok.noise) == (0, 1, 2, 3)
    assert tok.specials == {0, 1, 2, 3}
    for i, name in enumerate(SPECIALS):
        assert tok.token_id(name) == i
        assert tok.token_text(i) == tok.piece(i) == tok.vocab[i] == name
        assert tok.token_bytes(i) is None and not tok.is_partial(i)
    assert tok.decode([0, 5, 1, 2, 3]) == "<bos>" + RAW[5] + "<eos><pad><noise>"  # RAW[5] is '"', plain ASCII


@pytest.mark.parametrize("text", [*SPECIALS, "a<noise>b", "<pad><pad>", " <eos>\n", "<bos"])
def test_specials_never_come_from_text(tok: HFTokenizer, text: str) -> None:
    """A special token comes from code: its name in a text is ordinary characters (the pre-tokenizer's pieces:
    "<bos>" → "<", "bos", ">", each encoded on its own)."""
    ids = tok.encode(text)
    assert all(i >= 4 for i in ids) and tok.decode(ids) == text
    assert b"".join(bytes_of(i) for i in ids) == text.encode()


def test_a_special_name_is_its_pieces(tok: HFTokenizer) -> None:
    for name in SPECIALS:
        assert tok.encode(name) == tok.encode("<") + tok.encode(name[1:-1]) + tok.encode(">")


# ---- text ↔ ids -----------------------------------------------------------------------------------------
VIET = "ăâđêôơưàáảãạằắẳẵặầấẩẫậèéẻẽẹềếểễệìíỉĩịòóỏõọồốổỗộờớởỡợùúủũụừứửữựỳýỷỹỵ"
MARKS = [chr(c) for c in range(0x300, 0x370)]  # combining marks: a lone one, or after any character
CONTROLS = [chr(c) for c in (*range(0, 32), 127, *range(0x80, 0xA0), 0x200B, 0x200D, 0xFEFF)]
EMOJI = ["😀", "👍🏽", "👨‍👩‍👧", "🇻🇳", "❤️", "🙂"]
PIECES = [
    "Xin chào",
    " các bạn",
    "Việt Nam",
    "def f(x):\n\treturn x+1\n",
    "12+7=19",
    "The model",
    "<bos>",
    "<noise>",
    "   ",
    "\r\n",
    "\t\t",
]
TEXT = st.one_of(
    st.text(st.characters(codec="utf-8")),  # any code point but a lone surrogate, which no UTF-8 text holds
    st.lists(
        st.one_of(
            st.sampled_from(list(VIET + VIET.upper() + "aeiouyAEIOUYdĐ ")),
            st.sampled_from(MARKS),
            st.sampled_from(CONTROLS),
            st.sampled_from(EMOJI),
            st.sampled_from(PIECES),
            st.characters(codec="utf-8"),
        ),
        max_size=40,
    ).map("".join),
)


@settings(max_examples=400, deadline=None)
@given(TEXT)
def test_round_trip_every_text(text: str) -> None:
    tok = default_tokenizer()
    ids = tok.encode(text)
    assert tok.decode(ids) == nfc(text)
    assert all(4 <= i < tok.vocab_size for i in ids)  # never a special
    assert b"".join(bytes_of(i) for i in ids) == nfc(text).encode()  # the tokens spell the text's UTF-8 bytes
    assert tok.encode(unicodedata.normalize("NFD", text)) == ids  # NFD and NFC read the same ids


@pytest.mark.parametrize(
    "text",
    [
        "",
        " ",
        "The model predicts the next token.",
        "Xin chào các bạn, hôm nay học về DSpark.",
        "ĐÀ NẴNG, Ưu tiên; ỹ ỵ Ỷ",
        "def f(x):\n    return x+1\n",
        "  two  spaces\tand a tab, trailing space ",
        "emoji 😀 中文 \u0301 lone mark, \x00 NUL, \x7f DEL",
    ],
)
def test_round_trip_examples(tok: HFTokenizer, text: str) -> None:
    assert tok.decode(tok.encode(text)) == text  # all of these are NFC already


@pytest.mark.parametrize("text", ["chào", "Xin chào các bạn", "ĐÀ NẴNG, Ưu tiên", "Ångström", "Việt Nam học", "é"])
def test_nfd_and_nfc_give_the_same_ids(tok: HFTokenizer, text: str) -> None:
    composed, decomposed = nfc(text), unicodedata.normalize("NFD", text)
    assert composed != decomposed  # each example has a character that decomposes
    assert tok.encode(decomposed) == tok.encode(composed)
    assert tok.decode(tok.encode(decomposed)) == composed


def test_pieces_follow_the_split_rule(tok: HFTokenizer) -> None:
    """The text is split first (an optional space + letters | a digit | an optional space + other symbols |
    spaces), each piece encoded on its own; the merges learned on real text make common words one token."""

    def concat(*pieces: str) -> list[int]:
        return [i for p in pieces for i in tok.encode(p)]

    assert tok.encode("Xin chào các bạn") == concat("Xin", " chào", " các", " bạn")
    assert tok.encode("12+7=19") == concat("1", "2", "+", "7", "=", "1", "9")  # one digit a piece
    assert all(len(tok.encode(d)) == 1 for d in "0123456789")
    assert tok.encode("x = f(y)") == concat("x", " =", " f", "(", "y", ")")
    for text in ("The model predicts the next token.", "Xin chào các bạn, hôm nay học về DSpark."):
        assert len(tok.encode(text)) < len(text.encode()) / 2  # merges were learned on this kind of text
    for word in (" the", " và", " chào", " của", " return"):
        assert len(tok.encode(word)) == 1, word  # frequent words of the corpus, one token each


def test_encode_and_decode_errors(tok: HFTokenizer) -> None:
    with pytest.raises(TokenizerError, match="str"):
        tok.encode(b"abc")  # type: ignore[arg-type]
    assert isinstance(TokenizerError("x"), ValueError)
    with pytest.raises(TokenizerError, match="U\\+D800"):  # a lone surrogate has no UTF-8 bytes to spell it with
        tok.encode("a\ud800")
    for bad in (-1, tok.vocab_size, 10_000):
        with pytest.raises(TokenizerError, match=f"{bad}.*0..{tok.vocab_size - 1}"):
            tok.decode([5, bad])
        with pytest.raises(TokenizerError, match="out of range"):
            tok.token_text(bad)


# ---- pieces of a character ------------------------------------------------------------------------------
def test_a_lone_byte_shows_as_0xNN(tok: HFTokenizer) -> None:
    """Byte 0xE0's raw string is "à" (GPT-2's stand-in character): a page must show <0xE0>, not a letter."""
    for b in range(256):
        i = byte_token(b)
        assert tok.token_bytes(i) == bytes([b])
        if b < 0x80:  # ASCII: a whole character
            assert tok.token_text(i) == tok.piece(i) == chr(b) and not tok.is_partial(i)
        else:  # never a whole UTF-8 character alone
            assert tok.token_text(i) == tok.piece(i) == f"<0x{b:02X}>" and tok.is_partial(i)
    assert RAW[byte_token(0xE0)] == "à" and tok.token_text(byte_token(0xE0)) == "<0xE0>"


def test_every_token_shows_its_bytes(tok: HFTokenizer) -> None:
    """Every token reads as its bytes, whole characters as themselves and each stray byte <0xNN>."""
    for i in range(4, tok.vocab_size):
        data = bytes_of(i)
        assert tok.token_bytes(i) == data
        try:
            whole = data.decode("utf-8")
        except UnicodeDecodeError:
            whole = None
        assert tok.is_partial(i) == (whole is None)
        assert tok.piece(i) == tok.token_text(i) == tok.vocab[i] == shown_bytes(data)
        if whole is not None:
            assert tok.token_text(i) == whole


def test_a_character_the_merges_never_saw(tok: HFTokenizer) -> None:
    """𝔸 (U+1D538, four bytes) is not in the corpus: it is spelled by pieces, each a part of the character."""
    ids = tok.encode("𝔸")
    assert b"".join(tok.token_bytes(i) for i in ids) == "𝔸".encode() == b"\xf0\x9d\x94\xb8"
    assert all(tok.is_partial(i) for i in ids)
    assert "".join(tok.piece(i) for i in ids) == "<0xF0><0x9D><0x94><0xB8>"
    assert "".join(tok.token_text(i) for i in ids) == "<0xF0><0x9D><0x94><0xB8>"
    assert tok.decode(ids) == "𝔸" and tok.decode(ids[:1]) == "\ufffd"  # cut off: one replacement character


# ---- Engram compressed ids ------------------------------------------------------------------------------
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
    "▁x",  # U+2581 is a character like any other
    " Xin",
    "\n",
    "",
]


@pytest.mark.parametrize("text", EDGE_TEXTS)
def test_normalize_text_follows_the_reference_rule(text: str) -> None:
    assert normalize_text(text) == naive_normalize(text)


def test_normalize_text_examples() -> None:
    assert normalize_text(" Xin") == normalize_text("xin") == normalize_text("XIN") == "xin"
    assert normalize_text("à") == normalize_text("a") == normalize_text("Ặ") == "a"
    assert normalize_text("Đ") == "đ" != normalize_text("d")  # đ is its own letter, not d + a mark
    assert normalize_text(" chào") == normalize_text("Chao") == "chao"
    assert normalize_text(" ") == normalize_text("\n") == normalize_text("\t") == " "  # a lone space is kept


def naive_keys(tok: HFTokenizer) -> list[str]:
    """Each id's Engram key by the reference rule: decoded on its own by the `tokenizers` library (specials
    written out); a text holding U+FFFD is keyed by the raw token string, any other by the rule (plain Python), or
    by its text when the rule leaves nothing."""
    keys = []
    for i in range(tok.vocab_size):
        text = tok.tokenizer.decode([i], skip_special_tokens=False)
        keys.append(RAW[i] if "\ufffd" in text else (naive_normalize(text) or text))
    return keys


def test_compressed_vocabulary_matches_the_reference_rule(tok: HFTokenizer) -> None:
    keys = naive_keys(tok)
    assert tok.compressed_vocab_size == len(set(keys)) < tok.vocab_size
    first: dict[str, int] = {}
    for i, key in enumerate(keys):  # ids handed out in order of first appearance
        assert tok.compress_map[i] == first.setdefault(key, len(first)), i
    assert tok.compress_map[:4] == (0, 1, 2, 3)  # the specials keep their names as keys


def test_case_and_accent_variants_share_a_compressed_id(tok: HFTokenizer) -> None:
    cm = tok.compress_map

    def one(text: str) -> int:
        ids = tok.encode(text)
        assert len(ids) == 1, (text, ids)
        return ids[0]

    groups = [(" the", "the", " The", "The"), ("a", "A", " a", "à", "á", "ạ", "Ặ"), (" chào", " Chào"), ("\n", " ")]
    for group in groups:
        ids = [one(t) for t in group]
        assert len(set(ids)) == len(ids), group  # distinct tokens …
        assert len({cm[i] for i in ids}) == 1, group  # … one compressed id
    # " Xin" is one token, "xin" is not: every token whose text is "xin" under the rule shares the id of " Xin",
    # and "Xin" / "xin", each spelled by two tokens, read the same compressed ids
    assert {cm[i] for i in range(tok.vocab_size) if normalize_text(tok.texts[i]) == "xin"} == {cm[one(" Xin")]}
    xin_upper, xin_lower = tok.encode("Xin"), tok.encode("xin")
    assert xin_upper != xin_lower and [cm[i] for i in xin_upper] == [cm[i] for i in xin_lower]
    assert cm[one("d")] != cm[one("đ")]


def test_a_partial_byte_keeps_its_own_compressed_id(tok: HFTokenizer) -> None:
    """Byte 0xE0 alone decodes to U+FFFD: keyed by its raw string "à", not by the rule (which would give "a")."""
    cm = tok.compress_map
    e0, a = byte_token(0xE0), tok.encode("a")[0]
    assert normalize_text(RAW[e0]) == "a" and cm[e0] != cm[a]
    partial = [i for i in range(tok.vocab_size) if tok.is_partial(i)]
    assert {byte_token(b) for b in range(0x80, 0x100)} <= set(partial)
    assert len({cm[i] for i in partial}) == len(partial)  # raw strings differ: each partial token its own id …
    # … shared with a whole token only when that token's key is the partial one's raw string: byte 0xA3 is spelled
    # "£" in GPT-2's alphabet, and the token "£" (bytes C2 A3) keys as "£" too
    for j in range(tok.vocab_size):
        if not tok.is_partial(j):
            for i in partial:
                if cm[i] == cm[j]:
                    assert (normalize_text(tok.texts[j]) or tok.texts[j]) == RAW[i], (i, j)
    pound = tok.encode("£")
    assert len(pound) == 1 and cm[pound[0]] == cm[byte_token(0xA3)] and tok.token_text(byte_token(0xA3)) == "<0xA3>"


def test_compress_tensors(tok: HFTokenizer) -> None:
    a = tok.encode("Xin chào các bạn")
    b = tok.encode("Xin Chào các Bạn")
    assert len(a) == len(b) and a != b
    ids = torch.tensor([a, b])  # [2, S]
    c = tok.compress(ids)
    assert c.shape == ids.shape and c.dtype == torch.int64 and torch.equal(c[0], c[1])
    assert tok.compress(ids.to(torch.int32)).tolist() == c.tolist()
    assert tok.compress(torch.arange(tok.vocab_size)).tolist() == list(tok.compress_map)
    assert tok.compress(torch.zeros(0, 3, dtype=torch.long)).shape == (0, 3)


@pytest.mark.parametrize(
    "ids, match",
    [
        (torch.tensor([[1, 8192]]), "8192.*0..8191"),
        (torch.tensor([-4]), "-4"),
        (torch.tensor([1.0, 2.0]), "integer tensor.*float"),
        (torch.tensor([True]), "integer tensor.*bool"),
        (torch.tensor([1 + 0j]), "integer tensor.*complex"),
    ],
)
def test_compress_refuses_bad_ids(tok: HFTokenizer, ids: torch.Tensor, match: str) -> None:
    with pytest.raises(TokenizerError, match=match):
        tok.compress(ids)


# ---- a larger id space ----------------------------------------------------------------------------------
def test_wider_vocabulary(tok: HFTokenizer) -> None:
    w = WiderVocabTokenizer(tok, 129_280)
    assert len(w) == w.vocab_size == 129_280 and len(w.vocab) == 129_280
    assert w.vocab[: tok.vocab_size] == tok.vocab and w.vocab[8192] == "⟨8192⟩" and w.vocab[-1] == "⟨129279⟩"
    assert (w.bos, w.eos, w.pad, w.noise) == (tok.bos, tok.eos, tok.pad, tok.noise)
    text = "Xin chào các bạn"
    assert w.encode(text) == tok.encode(text)
    assert w.decode(tok.encode(text) + [8192, 129_279]) == text + "⟨8192⟩⟨129279⟩"
    assert w.token_text(8192) == "⟨8192⟩" and w.token_text(byte_token(0xE0)) == "<0xE0>"
    # each run of lab ids is decoded as the lab decodes it: a character cut by a wide id stays cut
    emoji = tok.encode("😀")
    assert len(emoji) >= 2
    head, tail = emoji[:1], emoji[1:]
    assert w.decode([*head, 9000, *tail]) == tok.decode(head) + "⟨9000⟩" + tok.decode(tail)
    assert "\ufffd" in tok.decode(head)
    assert w.decode(emoji) == "😀" and w.decode([0, *emoji, 1]) == "<bos>😀<eos>"
    for bad in (-1, 129_280):
        with pytest.raises(TokenizerError, match="out of range"):
            w.decode([bad])
    with pytest.raises(TokenizerError, match="smaller than the lab vocabulary"):
        WiderVocabTokenizer(tok, tok.vocab_size - 1)
    assert WiderVocabTokenizer(tok, tok.vocab_size).vocab == tok.vocab


# ---- the lab config -------------------------------------------------------------------------------------
def test_lab_config_reads_the_tokenizer(tok: HFTokenizer) -> None:
    cfg = get_config("lab")
    assert cfg.vocab_size == tok.vocab_size == len(VOCAB)
    assert cfg.engram_compressed_vocab_size == tok.compressed_vocab_size == len(set(naive_keys(tok)))
    assert cfg.dspark_noise_token_id == tok.noise == VOCAB[CONFIG_JSON["noise_token"]]

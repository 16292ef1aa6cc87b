"""lab/realtext: the licensed real-text corpus, its rebuild, its split by document, and the lab's byte-level BPE.

The rebuild of the two Debian sources (Austen, the LibreOffice help) needs their .deb files: .ci/run downloads them
with apt-get and names the folder in DSPARK_CORPUS_DEBS, so in CI the whole corpus is rebuilt and compared byte for
byte; elsewhere those two cases skip, saying so. Everything else (the split, the generated sources, the tokenizer's
retraining, round trips, the measured token rates) runs everywhere.
"""

from __future__ import annotations

import functools
import hashlib
import json
import os
import re
import struct
import unicodedata
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dspark_mini
from dspark_mini.hf_tokenizer import HFTokenizer, show_bytes
from dspark_mini.tokenizer import LAB_TOKENIZER_DIR
from lab import realtext
from lab.cli import main
from lab.realtext import bpe, build

DEBS = os.environ.get("DSPARK_CORPUS_DEBS")


@functools.cache
def lab_tokenizer() -> HFTokenizer:
    return HFTokenizer.from_folder(bpe.FOLDER)


@pytest.fixture(scope="module")
def tok() -> HFTokenizer:
    return lab_tokenizer()


def sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


# ---- the corpus -----------------------------------------------------------------------------------------------------
def test_every_corpus_file_is_named_in_the_notice_with_a_licence():
    notice = (realtext.HERE / "NOTICE").read_text(encoding="utf-8")
    files = sorted(p.name for p in realtext.DATA.iterdir())
    assert files == sorted(realtext.SOURCES.values())
    for name in files + ["everyday/en.txt", "dspark_mini/lab_tokenizer/tokenizer.json"]:
        start = notice.index(name)
        entry = notice[start : notice.find("\n\n", start)]
        assert "Source:" in entry and "Licence:" in entry, name


def test_documents_are_whole_nfc_and_uniquely_named():
    for source in realtext.SOURCES:
        docs = realtext.documents(source)
        ids = [d for d, _ in docs]
        assert len(ids) == len(set(ids)) > 10, source
        assert all(t and unicodedata.normalize("NFC", t) == t for _, t in docs), source


def test_held_out_text_is_split_by_document_not_by_line():
    for source in realtext.SOURCES:
        by_split = {s: realtext.texts(source, s) for s in realtext.SPLITS}
        assert all(by_split.values()), f"{source}: every split has documents"
        assert sum(map(len, by_split.values())) == len(realtext.documents(source))
        # a held-out document is read whole by its split: none of its lines is the start of a training document
        train = set(by_split["train"])
        assert not train & set(by_split["test"]) and not train & set(by_split["val"])
    # the split of a document depends on its id alone (a hash): known ids, independent of the files
    assert realtext.split_of("austen/emma/01") == realtext.split_of("austen/emma/01")
    counts = {s: 0 for s in realtext.SPLITS}
    for i in range(10_000):
        counts[realtext.split_of(f"doc/{i}")] += 1
    assert 300 < counts["test"] < 500 and 300 < counts["val"] < 500  # 4 % each


def test_austen_chapters_and_help_pages_are_the_documents():
    en = dict(realtext.documents("en"))
    assert len(en) == 270 and en["austen/prideprejudice/01"].startswith("It is a truth universally acknowledged")
    vi = dict(realtext.documents("vi"))
    assert all(d.startswith("help/") for d in vi)
    assert all(build.is_vietnamese(block) for text in vi.values() for block in text.split("\n"))


def test_everyday_paragraphs_are_not_in_the_corpus():
    for lang in ("en", "vi"):
        paragraphs = realtext.everyday(lang)
        assert len(paragraphs) >= 5
        for p in paragraphs:
            first = p.split(".")[0]
            assert not any(first in t for s in realtext.SOURCES for _, t in realtext.documents(s)), first


def test_bad_source_and_split_names_are_refused():
    with pytest.raises(realtext.CorpusError, match="source = 'fr' is invalid: allowed en, vi"):
        realtext.texts("fr", "train")
    with pytest.raises(realtext.CorpusError, match="split = 'dev' is invalid"):
        realtext.texts("en", "dev")


# ---- the rebuild --------------------------------------------------------------------------------------------------
def test_generated_sources_rebuild_byte_for_byte():
    for name, docs in (("sums.jsonl.xz", build.sums_documents()), ("lesson.jsonl.xz", build.lesson_documents())):
        assert hashlib.sha256(build.encode_documents(docs)).hexdigest() == sha(realtext.DATA / name), name


def test_every_sum_is_correct():
    for _, text in realtext.documents("sums"):
        for line in text.split("\n"):
            a, op, b, eq, c = line.split()
            assert eq == "=" and {"+": int(a) + int(b), "-": int(a) - int(b), "*": int(a) * int(b)}[op] == int(c)


def test_code_source_rebuilds_from_its_pinned_commit():
    try:
        data = build.encode_documents(build.code_documents())
    except build.CorpusBuildError as e:  # a shallow clone lacks the pinned commit
        pytest.skip(str(e))
    assert hashlib.sha256(data).hexdigest() == sha(realtext.DATA / "code.jsonl.xz")


@pytest.mark.skipif(DEBS is None, reason="DSPARK_CORPUS_DEBS (a folder of the two .deb files) is not set")
def test_the_whole_corpus_rebuilds_byte_for_byte_from_the_debian_packages(tmp_path):
    sums = build.build(tmp_path, Path(DEBS))
    assert sums == {name: sha(realtext.DATA / name) for name in realtext.SOURCES.values()}


def _xdr_str(strings: list[str], attr: bytes = b"") -> bytes:
    """An R character vector in XDR serialization, written here from R's format (independent of the reader)."""
    flags = 16 | (1 << 9 if attr else 0)
    out = struct.pack(">ii", flags, len(strings))
    for s in strings:
        data = s.encode("utf-8")
        out += struct.pack(">ii", 9 | (1 << 15), len(data)) + data  # CHARSXP, UTF-8 flag
    return out + attr


def _xdr_names(names: list[str]) -> bytes:
    """The attribute pairlist (names = …) ending in NILVALUE."""
    symbol = struct.pack(">i", 1) + struct.pack(">ii", 9, 5) + b"names"
    return struct.pack(">i", 2 | (1 << 10)) + symbol + _xdr_str(names) + struct.pack(">i", 254)


def test_the_r_reader_reads_named_lists_of_character_vectors():
    body = struct.pack(">ii", 19 | (1 << 9), 2) + _xdr_str(["Emma", "", "CHAPTER I"]) + _xdr_str(["Hôm nay"])
    data = b"X\n" + struct.pack(">iiii", 3, 0x040201, 0x030500, 5) + b"UTF-8" + body + _xdr_names(["a", "b"])
    assert build._unserialize(data) == {"a": ["Emma", "", "CHAPTER I"], "b": ["Hôm nay"]}
    with pytest.raises(build.CorpusBuildError, match="not XDR"):
        build._unserialize(b"RDX2\n")


def test_a_deb_of_another_version_is_refused(tmp_path, monkeypatch):
    (tmp_path / "r-cran-janeaustenr_9.9-1_all.deb").write_bytes(b"")
    monkeypatch.setattr(build, "_deb_version", lambda deb: "9.9-1")
    with pytest.raises(build.CorpusBuildError, match="version 9.9-1; the corpus was built from 1.0.0-1"):
        build.fetch_packages(tmp_path, tmp_path / "work")


# ---- the tokenizer ------------------------------------------------------------------------------------------------
def test_the_tokenizer_retrains_byte_for_byte_and_its_measured_rates_are_current(tmp_path, capsys):
    sums = bpe.write(tmp_path)
    assert sums == {name: sha(bpe.FOLDER / name) for name in ("tokenizer.json", "tokenizer_config.json")}
    assert bpe.main(["--check"]) == 0, capsys.readouterr().out  # stats.json (what the docs quote) = measured now
    stats = json.loads(bpe.STATS.read_text(encoding="utf-8"))
    assert stats["sweep"]["plain_8192"]["vi"]["partial"] > 0.03 > stats["sweep"]["bpe_8192"]["vi"]["partial"]


def test_it_is_a_byte_level_bpe_of_the_chosen_size_read_by_the_checkpoint_class(tok):
    doc = json.loads((bpe.FOLDER / "tokenizer.json").read_text(encoding="utf-8"))
    assert doc["model"]["type"] == "BPE" and doc["decoder"]["type"] == "ByteLevel"
    assert doc["normalizer"]["type"] == "NFC"
    assert tok.vocab_size == bpe.VOCAB_SIZE and tok.byte_level
    assert [tok.raw[i] for i in range(4)] == list(bpe.SPECIALS)
    assert (tok.bos, tok.eos, tok.pad, tok.noise) == (0, 1, 2, 3) and tok.specials == {0, 1, 2, 3}
    # the model package reads it: bpe.py trains it into dspark_mini/lab_tokenizer/, whose config names all four
    assert bpe.FOLDER == LAB_TOKENIZER_DIR == Path(dspark_mini.__file__).parent / "lab_tokenizer"
    config = json.loads((bpe.FOLDER / "tokenizer_config.json").read_text(encoding="utf-8"))
    assert config == {"bos_token": "<bos>", "eos_token": "<eos>", "pad_token": "<pad>", "noise_token": "<noise>"}


@settings(max_examples=300, deadline=None)
@given(st.text(st.characters(exclude_categories=("Cs",)), max_size=60))
def test_any_text_round_trips_after_nfc(text):
    tok = lab_tokenizer()
    ids = tok.encode(text)
    assert tok.decode(ids) == unicodedata.normalize("NFC", text)
    assert b"".join(tok.token_bytes(i) for i in ids) == unicodedata.normalize("NFC", text).encode("utf-8")


def test_nfd_and_nfc_spellings_give_the_same_ids(tok):
    text = "Bà trồng cây ở chợ, sớm mai trời đẹp."
    assert tok.encode(unicodedata.normalize("NFD", text)) == tok.encode(text)


def _rates(tok, texts, unit):
    n_tok = n_unit = n_partial = 0
    for t in texts:
        ids = tok.encode(t)
        n_tok += len(ids)
        n_partial += sum(tok.is_partial(i) for i in ids)
        n_unit += len(t.split()) if unit == "word" else len(t)
    return n_tok / n_unit, n_partial / n_tok


def test_token_rates_on_held_out_and_everyday_prose(tok):
    """≤ 1.8 tokens a word (English), ≤ 2.2 a syllable (Vietnamese: a syllable is a space-separated word), ≤ 3 % of
    Vietnamese tokens pieces of a character."""
    for texts in (realtext.texts("en", "test"), realtext.everyday("en")):
        per_word, partial = _rates(tok, texts, "word")
        assert per_word <= 1.8 and partial <= 0.03
    for texts in (realtext.texts("vi", "test"), realtext.everyday("vi")):
        per_syllable, partial = _rates(tok, texts, "word")
        assert per_syllable <= 2.2 and partial <= 0.03
    # every Vietnamese letter is one whole piece: no syllable of it ends in a stray byte
    for letter in bpe.vietnamese_letters():
        assert not any(tok.is_partial(i) for i in tok.encode(f" {letter}")), letter


def test_pieces_show_stray_bytes_as_0xNN(tok):
    ids = tok.encode("mèo 🐈")
    assert [tok.piece(i) for i in ids][-4:] == ["<0xF0>", "<0x9F>", "<0x90>", "<0x88>"]
    assert all(tok.is_partial(i) for i in ids[-4:]) and not tok.is_partial(ids[0])
    assert show_bytes(" sớ".encode()[:-1]) == " s<0xE1><0xBB>"
    assert tok.piece(3) == "<noise>" and tok.token_bytes(3) is None


def test_a_byte_fallback_tokenizer_loads_through_the_same_class(tmp_path):
    """A Llama-style tokenizer.json (Metaspace, byte fallback `<0xNN>` tokens) is read by the same class."""
    from tokenizers import Tokenizer, decoders, models, normalizers, pre_tokenizers

    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2} | {f"<0x{b:02X}>": 3 + b for b in range(256)}
    vocab |= {"▁": 259, "a": 260, "b": 261, "▁a": 262}
    model = models.BPE(vocab=vocab, merges=[("▁", "a")], unk_token="<unk>", byte_fallback=True)
    t = Tokenizer(model)
    t.normalizer = normalizers.NFC()
    t.pre_tokenizer = pre_tokenizers.Metaspace()
    t.decoder = decoders.Sequence([decoders.Replace("▁", " "), decoders.ByteFallback(), decoders.Fuse()])
    t.add_special_tokens(["<unk>", "<s>", "</s>"])
    t.save(str(tmp_path / "tokenizer.json"))
    tok = HFTokenizer.from_folder(tmp_path)
    ids = tok.encode("a é")
    assert not tok.byte_level and tok.token_bytes(ids[-1]) in (b"\xa9", b"\xc3")
    assert "".join(tok.piece(i) for i in ids).endswith("<0xC3><0xA9>")


# ---- dspark-lab tokenize ------------------------------------------------------------------------------------------
def test_tokenize_json_lists_ids_pieces_and_the_round_trip(capsys):
    assert main(["tokenize", "Hôm nay trời đẹp 🐈", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    tok = lab_tokenizer()
    assert report["ids"] == tok.encode("Hôm nay trời đẹp 🐈") and report["count"] == len(report["ids"])
    assert [t["text"] for t in report["tokens"]][-4:] == ["<0xF0>", "<0x9F>", "<0x90>", "<0x88>"]
    assert report["partial_tokens"] == 4 and report["round_trip"] is True
    assert (
        "".join(bytes.fromhex(t["bytes"]).decode("latin-1") for t in report["tokens"]).encode("latin-1")
        == "Hôm nay trời đẹp 🐈".encode()
    )


def test_tokenize_table_in_both_languages(capsys):
    assert main(["tokenize", "xin chào 🐈", "--lang", "vi"]) == 0
    out = capsys.readouterr().out
    assert "token cho" in out and "mảnh của một ký tự" in out and re.search(r"<0xF0>", out)
    assert main(["tokenize", "hello"]) == 0
    assert "tokens for 5 characters" in capsys.readouterr().out


def test_tokenize_refuses_an_empty_text_naming_it(capsys):
    assert main(["tokenize", ""]) == 2
    assert "TEXT has 0 characters: allowed 1..100,000" in capsys.readouterr().err
    assert main(["tokenize", "", "--lang", "vi"]) == 2
    assert "TEXT có 0 ký tự" in capsys.readouterr().err


def test_the_training_stream_reads_the_specials_the_corpus_spells_and_typed_text_never_does():
    """The code source spells the special tokens ("<eos>" in this project's own Python). The training stream reads
    each as its id, the way the `tokenizers` library splits added tokens out of a text (checked here through the
    library itself, on a tokenizer loaded separately), so `make weights` rebuilds the shipped set; a text a user types
    never reads one (`HFTokenizer.encode`)."""
    from tokenizers import Tokenizer

    from dspark_mini.tokenizer import SPECIALS, default_tokenizer
    from lab.realtext import _encode_document

    tok = default_tokenizer()
    lib = Tokenizer.from_file(str(LAB_TOKENIZER_DIR / "tokenizer.json"))  # encode_special_tokens off: specials read
    spelled = [t for t in realtext.texts("code", "train") if re.search("|".join(map(re.escape, SPECIALS)), t)]
    assert spelled, "the code source no longer spells a special token: the stream's rule can go"
    for text in spelled:
        ids = _encode_document(tok, text)
        assert ids == lib.encode(text, add_special_tokens=False).ids
        assert set(ids) & {0, 1, 2, 3}  # a special id, read from the text
    assert [0, 1, 2, 3] == [tok.tokenizer.token_to_id(s) for s in SPECIALS]
    assert not set(tok.encode("<bos> <eos> <pad> <noise>")) & {0, 1, 2, 3}  # typed: characters, never the ids

"""dspark_mini.hf_tokenizer: a checkpoint folder's tokenizer.json through the `tokenizers` library.

The tokenizer is trained here, with `tokenizers` itself: a byte-level BPE (ByteLevel pre-tokenizer and decoder, the
256 byte tokens as its alphabet) on a few hundred lines of English, Vietnamese and code, saved to a temporary
checkpoint folder with a tokenizer_config.json naming the specials. The Engram compressed vocabulary is checked
against a re-derivation written here from the reference's rule (each id decoded alone, U+FFFD → the raw token string,
else the normalized text in plain Python, or the text when that is empty; first appearance).
"""

from __future__ import annotations

import json

import pytest
import torch
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

from dspark_mini import get_config
from dspark_mini.hf_tokenizer import HFTokenizer
from dspark_mini.model import Transformer
from dspark_mini.speculative import generate_plain
from dspark_mini.tokenizer import TokenizerError
from tests.helpers import gpt2_byte_of, naive_normalize, shown_bytes

SPECIALS = ["<bos>", "<eos>", "<pad>", "<noise>"]
PHRASES = [
    "Xin chào các bạn",
    "xin chào thầy cô",
    "XIN CHÀO",
    "chao buoi sang",
    "Chào buổi sáng",
    "the model predicts the next token",
    "The Model reads every token",
    "tiếng Việt và tiếng Anh",
    "Tieng Viet khong dau",
    "def f(x):\n    return x + 1",
    "for i in range(10):\n\tprint(i)",
    "café, naïve, résumé",
    "cafe, naive, resume",
    "नमस्ते दुनिया",
    "1 + 1 = 2; 12 * 7 = 84",
]
LINES = [f"{PHRASES[i % len(PHRASES)]} {i % 7} {PHRASES[(7 * i + 3) % len(PHRASES)]}" for i in range(300)]
ROUND_TRIP = [
    "Xin chào các bạn, hôm nay học về DSpark.",
    "def f(x):\n    return x+1\n",
    "  two  spaces\tand a tab, trailing space ",
    "emoji 🙂 and 中文 never seen in training",
    "line\r\nbreaks\n\n",
    "",
]


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """A checkpoint folder with a byte-level BPE tokenizer.json trained here, and its tokenizer_config.json."""
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=700,
        special_tokens=SPECIALS,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(LINES, trainer)
    out = tmp_path_factory.mktemp("checkpoint")
    tok.save(str(out / "tokenizer.json"))
    config = {"bos_token": "<bos>", "eos_token": {"content": "<eos>"}, "pad_token": "<pad>"}
    (out / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    return out


@pytest.fixture(scope="module")
def tok(folder) -> HFTokenizer:
    return HFTokenizer.from_folder(folder)


def naive_compressed(path) -> tuple[list[int], int]:
    """The compressed vocabulary re-derived from the reference's rule, id by id, with plain-Python normalization."""
    raw = Tokenizer.from_file(str(path))
    keys: dict[str, int] = {}
    out = []
    for i in range(raw.get_vocab_size(with_added_tokens=True)):
        text = raw.decode([i], skip_special_tokens=False)
        key = raw.id_to_token(i) if "\ufffd" in text else (naive_normalize(text) or text)
        if key not in keys:
            keys[key] = len(keys)
        out.append(keys[key])
    return out, len(keys)


def single_id(tok: HFTokenizer, text: str) -> int:
    ids = tok.encode(text)
    assert len(ids) == 1, f"{text!r} is not one token of the trained vocabulary: {ids}"
    return ids[0]


def test_encode_decode_round_trip(tok):
    for text in ROUND_TRIP:
        ids = tok.encode(text)
        assert all(isinstance(i, int) and 0 <= i < tok.vocab_size for i in ids)
        assert tok.decode(ids) == text
    assert len(tok.encode("Xin chào các bạn")) < len("Xin chào các bạn".encode())  # merges were learned


def test_compressed_vocabulary_matches_naive_rederivation(tok, folder):
    want, size = naive_compressed(folder / "tokenizer.json")
    assert list(tok.compress_map) == want
    assert tok.compressed_vocab_size == size < tok.vocab_size
    assert len(tok.compress_map) == tok.vocab_size and max(tok.compress_map) == size - 1
    # the rule's corners occur in this vocabulary: texts that normalize to nothing (a form feed, a lone Devanagari
    # vowel sign) are keyed by themselves
    empty = [i for i, t in enumerate(tok.texts) if "\ufffd" not in t and naive_normalize(t) == ""]
    assert any(tok.texts[i] == "\x0c" for i in empty) and any(tok.texts[i] == "\u093e" for i in empty)
    assert all(tok.engram_key(i) == tok.texts[i] for i in empty)


def test_case_and_accent_variants_share_a_compressed_id(tok):
    groups = [(" xin", " Xin", "XIN"), (" chào", " chao", "Chào"), (" café", " cafe"), (" model", " Model")]
    for group in groups:
        ids = [single_id(tok, t) for t in group]
        assert len(set(ids)) == len(ids), group  # distinct raw tokens …
        assert len(set(tok.compress(torch.tensor(ids)).tolist())) == 1, group  # … one compressed id
    assert tok.compress(torch.tensor([single_id(tok, " xin")])) != tok.compress(torch.tensor([single_id(tok, " chào")]))


def test_partial_characters_are_keyed_by_their_raw_string(tok):
    """A lone byte ≥ 0x80 decodes to U+FFFD: keyed by its raw string, so the 128 of them stay apart."""
    partial = [i for i in range(tok.vocab_size) if "\ufffd" in tok.texts[i]]
    assert len(partial) >= 128
    assert all(tok.engram_key(i) == tok.raw[i] for i in partial)
    # shown as their bytes, each stray one <0xNN> (the raw string of byte 0xE0 is "à", a different character)
    byte_of = gpt2_byte_of()
    for i in partial:
        assert tok.token_text(i) == tok.piece(i) == shown_bytes(bytes(byte_of[c] for c in tok.raw[i]))
        assert "<0x" in tok.token_text(i)
    assert len({tok.compress_map[i] for i in partial}) == len(partial)
    assert len({tok.texts[i] for i in partial}) < len(partial)  # keyed by text they would merge


def test_interface_as_the_lab_tokenizer(tok):
    assert len(tok) == tok.vocab_size == tok.tokenizer.get_vocab_size(with_added_tokens=True)
    assert (tok.bos, tok.eos, tok.pad) == (0, 1, 2)  # named by tokenizer_config.json
    assert tok.decode([tok.bos, tok.eos]) == "<bos><eos>"  # specials written out, as the lab tokenizer does
    assert tok.token_id("<noise>") == 3 and tok.token_text(3) == "<noise>"
    assert len(tok.vocab) == tok.vocab_size and tok.vocab[single_id(tok, " xin")] == " xin"
    ids = torch.tensor([[0, 5, 9], [4, 4, 2]])
    c = tok.compress(ids)
    assert c.shape == (2, 3) and c.dtype == torch.long
    for bad in (-1, tok.vocab_size):
        with pytest.raises(TokenizerError, match=f"0..{tok.vocab_size - 1}"):
            tok.decode([1, bad])
        with pytest.raises(TokenizerError, match="out of range"):
            tok.compress(torch.tensor([bad]))
    with pytest.raises(TokenizerError, match="integer tensor"):
        tok.compress(torch.tensor([1.0]))
    with pytest.raises(TokenizerError, match="not a token"):
        tok.token_id("no such token")


def test_bad_checkpoint_folders_name_the_file(tmp_path, folder):
    with pytest.raises(TokenizerError, match="no tokenizer.json"):
        HFTokenizer.from_folder(tmp_path)
    (tmp_path / "tokenizer.json").write_text("{", encoding="utf-8")
    with pytest.raises(TokenizerError, match=r"tokenizer.json: not a tokenizers tokenizer.json \(not JSON.*column"):
        HFTokenizer.from_folder(tmp_path)
    (tmp_path / "tokenizer.json").write_text("[" * 100 + "]" * 100, encoding="utf-8")
    with pytest.raises(TokenizerError, match="nested deeper"):
        HFTokenizer.from_folder(tmp_path)
    (tmp_path / "tokenizer.json").write_text('{"model": 1}', encoding="utf-8")
    with pytest.raises(TokenizerError, match="not a tokenizers tokenizer.json"):
        HFTokenizer.from_folder(tmp_path)
    (tmp_path / "tokenizer.json").write_bytes((folder / "tokenizer.json").read_bytes())
    (tmp_path / "tokenizer_config.json").write_text('{"eos_token": "<end>"}', encoding="utf-8")
    with pytest.raises(TokenizerError, match="eos_token names no token of the tokenizer"):
        HFTokenizer.from_folder(tmp_path)
    (tmp_path / "tokenizer_config.json").unlink()
    assert HFTokenizer.from_folder(tmp_path).bos is None  # no config: no named specials


def test_a_model_reads_it_through_engram_and_generates_text(tok):
    """A (small, untrained) model whose vocabulary and Engram compressed ids come from this tokenizer: prompt text
    → ids → a generated continuation → text."""
    cfg = get_config("lab").replace(
        vocab_size=tok.vocab_size,
        engram_compressed_vocab_size=tok.compressed_vocab_size,
        engram_pad_id=tok.pad,
        dspark_noise_token_id=tok.token_id("<noise>"),
    )
    model = Transformer(cfg, torch.tensor(tok.compress_map)).init_weights(0).eval()
    assert model.pad_compressed_id() == tok.compress_map[tok.pad]
    prompt = torch.tensor([tok.encode("Xin chào các bạn")])
    new = generate_plain(model, prompt, 6).tokens[0]  # the new tokens only
    assert len(new) == 6 and isinstance(tok.decode(new), str)


def checkpoint_with_tokenizer(tok: HFTokenizer, folder, out):
    """A tiny checkpoint of a model built for this tokenizer, written as `export_checkpoint` writes one, with the
    tokenizer's files beside its shards."""
    import shutil

    from dspark_mini import build_model
    from lab.realscale import export_checkpoint

    cfg = get_config("lab").replace(
        vocab_size=tok.vocab_size,
        engram_compressed_vocab_size=tok.compressed_vocab_size,
        engram_pad_id=tok.pad,
        dspark_noise_token_id=tok.token_id("<noise>"),
    )
    path = export_checkpoint(build_model(cfg, seed=5), out, shards=2, style="official")
    for name in ("tokenizer.json", "tokenizer_config.json"):
        shutil.copy(folder / name, path / name)
    return path


def test_generate_checkpoint_reads_its_tokenizer_json(tok, folder, tmp_path, capsys):
    """`generate --checkpoint DIR`: the prompt encoded and the tokens decoded by DIR/tokenizer.json (through
    `tokenizers`), Engram reading its compressed ids; greedy speculative = plain."""
    from lab.cli import main
    from lab.realscale import load_checkpoint

    path = checkpoint_with_tokenizer(tok, folder, tmp_path / "ckpt")
    assert load_checkpoint(path).compress_map.tolist() == list(tok.compress_map)  # not id mod size
    prompt = "Xin chào các bạn"
    assert main(["generate", "--checkpoint", str(path), "--prompt", prompt, "--max-new-tokens", "6", "--json"]) == 0
    g = json.loads(capsys.readouterr().out)
    assert g["prompt_ids"] == tok.encode(prompt) and g["tokenizer"].startswith("HFTokenizer")
    assert len(g["plain"]["tokens"]) == 6 and g["identical_tokens"]
    assert g["plain"]["text"] == tok.decode(g["plain"]["tokens"]) == g["speculative"]["text"]


def test_a_rank_shard_reads_the_tokenizer_map_too(tok, folder, tmp_path):
    """load_sharded (one torchrun rank's tensors) derives Engram's compressed ids from the folder's tokenizer.json
    as load_checkpoint does; without the file both fall back to id mod size."""
    from lab.realscale.ranks import SINGLE
    from lab.runtime.distributed import load_sharded

    path = checkpoint_with_tokenizer(tok, folder, tmp_path / "ckpt")
    assert load_sharded(path, SINGLE).compress_map.tolist() == list(tok.compress_map)
    (path / "tokenizer.json").unlink()
    size = tok.compressed_vocab_size
    assert load_sharded(path, SINGLE).compress_map.tolist() == [i % size for i in range(tok.vocab_size)]


def test_torchrun_encodes_the_prompt_with_the_checkpoint_tokenizer(tok, folder, tmp_path):
    """The several-rank `generate` encodes --prompt with the folder's tokenizer.json, as one rank does; without the
    file and with a vocabulary not the lab's, it refuses naming what is missing."""
    from argparse import Namespace

    from lab.realscale.export import read_config
    from lab.runtime.torchrun import prompt_ids

    path = checkpoint_with_tokenizer(tok, folder, tmp_path / "ckpt")
    cfg = read_config(path)[0]
    prompt = "Xin chào các bạn"
    assert prompt_ids(Namespace(checkpoint=str(path), prompt=prompt), cfg) == tok.encode(prompt)
    (path / "tokenizer.json").unlink()
    with pytest.raises(ValueError, match=r"tokenizer.json' is missing: a checkpoint folder holds the tokenizer"):
        prompt_ids(Namespace(checkpoint=str(path), prompt=prompt), cfg)


def test_a_checkpoint_tokenizer_of_another_vocabulary_is_refused(tok, folder, tmp_path):
    from lab.realscale import load_checkpoint

    path = checkpoint_with_tokenizer(tok, folder, tmp_path / "ckpt")
    other = Tokenizer(models.BPE())
    other.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    other.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False
    )
    other.train_from_iterator(LINES, trainer)
    other.save(str(path / "tokenizer.json"))
    (path / "tokenizer_config.json").unlink()
    with pytest.raises(ValueError, match=r"tokenizer.json: .* token ids, but config.json says vocab_size"):
        load_checkpoint(path)

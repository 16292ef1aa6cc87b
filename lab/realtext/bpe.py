"""The lab's tokenizer: a byte-level BPE trained with Hugging Face `tokenizers` on the real-text corpus (step 1A).

    python -m lab.realtext.bpe            # train it again into dspark_mini/lab_tokenizer/ (a few seconds)
    python -m lab.realtext.bpe --check    # train it into a temporary folder and compare, byte for byte

The same kind of tokenizer as DeepSeek-V4.1-Flash's (a byte-level BPE in a `tokenizer.json`), at lab size, and read by
the same class (`dspark_mini.hf_tokenizer.HFTokenizer`) that reads a real checkpoint's:

    normalizer     NFC (so "ồ" typed as o + ̂ + ̀ and as one code point give the same ids)
    pre-tokenizer  a regex split: an optional space + a run of letters | one digit | an optional space + a run of
                   other symbols | whitespace; then ByteLevel (every byte a symbol: any text tokenizes)
    model          BPE, `VOCAB_SIZE` ids: 4 specials, the 256 bytes, merges
    decoder        ByteLevel

Digits are split one per token, which helps the sums. Everyday Vietnamese needs one more step: a syllable such as
"sớm" or "chợ" is rare in the help pages, and plain BPE learns " s" + the first two bytes of "ớ" long before the whole
letter, so such a syllable would end in pieces that are not characters. The trainer therefore also reads every
multi-byte character of the corpus (and all 134 Vietnamese letters) alone on a line, `CHAR_REPEATS` times: each
character's own bytes merge first, and a token never holds part of a character that the corpus knows.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import sys
import tempfile
import unicodedata
from pathlib import Path

from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

from dspark_mini.files import write_atomic
from dspark_mini.tokenizer import LAB_TOKENIZER_DIR

from . import HERE, differing, texts

FOLDER = LAB_TOKENIZER_DIR  # dspark_mini/lab_tokenizer/: the model package reads it (the lab preset's vocabulary)
VOCAB_SIZE = 8192
SPECIALS: tuple[str, ...] = ("<bos>", "<eos>", "<pad>", "<noise>")  # ids 0..3; <noise> fills DSpark's draft block
# how often each source's training documents are read: Vietnamese and the lesson sentences count more than their size
SOURCE_WEIGHTS: dict[str, int] = {"en": 1, "vi": 3, "code": 1, "sums": 1, "lesson": 2}
CHAR_REPEATS = 10_000
SPLIT = r"""'(?:[sdmt]|ll|ve|re)| ?\p{L}+| ?\p{N}| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+"""


def vietnamese_letters() -> list[str]:
    """The 134 Vietnamese letters with diacritics, NFC, lower and upper case (đ/Đ included)."""
    bases = [unicodedata.normalize("NFD", b) for b in "aăâeêioôơuưy"]
    tones = ("", "\u0300", "\u0301", "\u0309", "\u0303", "\u0323")
    lower = {unicodedata.normalize("NFC", b + t) for b in bases for t in tones} | {"đ"}
    letters = lower | {c.upper() for c in lower}
    return sorted(c for c in letters if len(c.encode("utf-8")) > 1)


def empty_tokenizer() -> Tokenizer:
    """The pipeline above with no merges yet."""
    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence(
        [
            pre_tokenizers.Split(Regex(SPLIT), behavior="isolated"),
            pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False),
        ]
    )
    tok.decoder = decoders.ByteLevel()
    return tok


def train(vocab_size: int = VOCAB_SIZE, char_repeats: int = CHAR_REPEATS) -> Tokenizer:
    """Train on the training split of every source (held-out documents are never read); `char_repeats` 0 gives the
    plain BPE the docs compare with."""
    docs = [t for source, w in SOURCE_WEIGHTS.items() for t in texts(source, "train") * w]
    chars = sorted({c for d in docs for c in d if len(c.encode("utf-8")) > 1} | set(vietnamese_letters()))
    alone = "\n".join(chars)  # each character its own pre-token, so only its own bytes pair up

    def lines():
        yield from docs
        for _ in range(char_repeats):
            yield alone

    tok = empty_tokenizer()
    trainer = trainers.BpeTrainer(
        vocab_size=vocab_size,
        special_tokens=list(SPECIALS),
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(lines(), trainer)
    return tok


def write(folder: Path, vocab_size: int = VOCAB_SIZE) -> dict[str, str]:
    """tokenizer.json and tokenizer_config.json (naming the specials) into `folder`; returns file → sha256."""
    folder.mkdir(parents=True, exist_ok=True)
    tok = train(vocab_size)
    files = {
        "tokenizer.json": tok.to_str(pretty=True) + "\n",
        "tokenizer_config.json": json.dumps(
            {"bos_token": SPECIALS[0], "eos_token": SPECIALS[1], "pad_token": SPECIALS[2], "noise_token": SPECIALS[3]},
            indent=1,
        )
        + "\n",
    }
    sums = {}
    for name, text in files.items():
        data = text.encode("utf-8")
        write_atomic(folder / name, data)
        sums[name] = hashlib.sha256(data).hexdigest()
    return sums


STATS = HERE / "stats.json"  # what the docs quote about the corpus and the tokenizer (`make corpus` writes it)


def rates(tok, docs: list[str]) -> dict[str, float]:
    """Tokens per space-separated word (for Vietnamese: per syllable) and the share of tokens that hold a piece of a
    character (shown <0xNN>), over `docs`."""
    n_tok = n_words = n_partial = 0
    for text in docs:
        ids = tok.encode(text)
        n_tok += len(ids)
        n_words += len(text.split())
        n_partial += sum(tok.is_partial(i) for i in ids)
    return {"tokens": n_tok, "words": n_words, "per_word": n_tok / n_words, "partial": n_partial / n_tok}


def measure(folder: Path = FOLDER) -> dict:
    """The corpus's size per source and split, and the tokenizer's rates on held-out and everyday text."""
    from dspark_mini.hf_tokenizer import HFTokenizer

    from . import SOURCES, SPLITS, documents, everyday

    def everyday_rates(t: HFTokenizer) -> dict:
        return {lang: rates(t, everyday(lang)) for lang in ("en", "vi")}

    tok = HFTokenizer.from_folder(folder)
    # the choices measured against each other: other vocabulary sizes, and plain BPE (no characters read alone)
    alternatives = {f"bpe_{v}": (v, CHAR_REPEATS) for v in (4096, 6144)} | {f"plain_{VOCAB_SIZE}": (VOCAB_SIZE, 0)}
    sweep = {}
    for name, (v, repeats) in alternatives.items():
        alt = train(v, repeats)
        sweep[name] = {"vocab_size": v, "char_repeats": repeats} | everyday_rates(HFTokenizer(alt))
    sweep[f"bpe_{VOCAB_SIZE}"] = {"vocab_size": VOCAB_SIZE, "char_repeats": CHAR_REPEATS} | everyday_rates(tok)
    corpus = {
        s: {sp: {"documents": len(t := texts(s, sp)), "characters": sum(map(len, t))} for sp in SPLITS} for s in SOURCES
    }
    for s in SOURCES:
        corpus[s]["all"] = {"documents": len(documents(s)), "characters": sum(len(t) for _, t in documents(s))}
    return {
        "corpus": corpus,
        "tokenizer": {
            "vocab_size": tok.vocab_size,
            "compressed_vocab_size": tok.compressed_vocab_size,
            "en_test": rates(tok, texts("en", "test")),
            "en_everyday": rates(tok, everyday("en")),
            "vi_test": rates(tok, texts("vi", "test")),
            "vi_everyday": rates(tok, everyday("vi")),
        },
        "sweep": sweep,
    }


def write_stats(path: Path = STATS) -> None:
    write_atomic(path, json.dumps(measure(), indent=1, ensure_ascii=False) + "\n")


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m lab.realtext.bpe", description=__doc__.split("\n")[0])
    p.add_argument("--check", action="store_true", help="train into a temporary folder and compare, byte for byte")
    args = p.parse_args(argv)
    if args.check:
        with tempfile.TemporaryDirectory(prefix="dspark-bpe-") as tmp:
            sums = write(Path(tmp))
        bad = differing(sums, FOLDER)
        stale = json.loads(STATS.read_text(encoding="utf-8")) != json.loads(json.dumps(measure()))
        print(f"{'differs' if stale else 'same   '}  {STATS.name}")
        return 1 if bad or stale else 0
    for n, s in write(FOLDER).items():
        print(f"{s[:16]}  {n}")
    write_stats()
    print(f"measured  {STATS.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

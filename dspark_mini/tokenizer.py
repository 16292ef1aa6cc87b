"""The lab's tokenizer (step 1A, the input side), and the Engram key every tokenizer's ids are compressed by.

The lab model reads a byte-level BPE of 8,192 ids trained with Hugging Face `tokenizers` on the lab's real-text
corpus (English and Vietnamese prose, code, sums: lab/realtext/, `python -m lab.realtext.bpe` trains it). It is the
same kind of tokenizer as DeepSeek-V4.1-Flash's 129,280-id one, stored the same way (`tokenizer.json` +
`tokenizer_config.json`, in dspark_mini/lab_tokenizer/) and read by the same class, `hf_tokenizer.HFTokenizer`:
`default_tokenizer()` is that class on the lab's folder. Its ids:

    <bos> = 0, <eos> = 1, <pad> = 2 (also the Engram pad id), <noise> = 3 (DSpark's noise token, fills a block)
    then the 256 single bytes (GPT-2's byte alphabet: any text tokenizes, nothing is refused), then the merges

The text is NFC-normalised, split by a regex (an optional space + a run of letters | one digit | an optional space +
a run of other symbols | spaces), each piece is read as UTF-8 bytes and merged by the BPE: "Xin chào" → "Xin",
" chào"; a character the merges never saw stays as its bytes, shown `<0xNN>` (`HFTokenizer.piece`).
decode(encode(t)) == NFC(t) for every text.

Engram's compressed ids of these tokens: dspark_mini/compressed_vocab.py.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable
from pathlib import Path

from .hf_tokenizer import HFTokenizer, TokenizerError

SPECIALS: tuple[str, ...] = ("<bos>", "<eos>", "<pad>", "<noise>")  # the lab tokenizer's ids 0..3
LAB_TOKENIZER_DIR = Path(__file__).resolve().parent / "lab_tokenizer"  # tokenizer.json + tokenizer_config.json


@functools.lru_cache(maxsize=1)
def default_tokenizer() -> HFTokenizer:
    """The lab tokenizer: the byte-level BPE in dspark_mini/lab_tokenizer/ (read once; it is immutable)."""
    tok = HFTokenizer.from_folder(LAB_TOKENIZER_DIR)
    for name, i in (("bos", tok.bos), ("eos", tok.eos), ("pad", tok.pad), ("noise", tok.noise)):
        if i != SPECIALS.index(f"<{name}>"):
            raise TokenizerError(f"{LAB_TOKENIZER_DIR}: {name} token id {i}: allowed {SPECIALS.index(f'<{name}>')}")
    return tok


class WiderVocabTokenizer:
    """The lab tokenizer's ids read inside a larger id space: an untrained real-width model (`flash-cpu`, 129,280
    ids) has no tokenizer of its own here, and every lab id is a valid id there. encode is the lab's;
    an id past the lab vocabulary shows as "⟨id⟩" (a seeded-init model predicts any of the model's ids)."""

    def __init__(self, lab: HFTokenizer, vocab_size: int):
        if vocab_size < lab.vocab_size:
            raise TokenizerError(f"vocab_size {vocab_size} is smaller than the lab vocabulary ({lab.vocab_size})")
        self.lab, self.vocab_size = lab, vocab_size
        self.bos, self.eos, self.pad, self.noise = lab.bos, lab.eos, lab.pad, lab.noise

    @property
    def vocab(self) -> tuple[str, ...]:
        return self.lab.vocab + tuple(f"⟨{i}⟩" for i in range(self.lab.vocab_size, self.vocab_size))  # [V]

    def encode(self, text: str) -> list[int]:
        return self.lab.encode(text)

    def _check_id(self, i: int) -> int:
        i = int(i)
        if not 0 <= i < self.vocab_size:
            raise TokenizerError(f"token id {i} is out of range: ids run 0..{self.vocab_size - 1}")
        return i

    def decode(self, ids: Iterable[int]) -> str:
        """Ids → text: each run of lab ids as the lab decodes it, every other id as "⟨id⟩"."""
        out: list[str] = []
        run: list[int] = []
        for i in map(self._check_id, ids):
            if i < self.lab.vocab_size:
                run.append(i)
                continue
            if run:
                out.append(self.lab.decode(run))
                run = []
            out.append(f"⟨{i}⟩")
        if run:
            out.append(self.lab.decode(run))
        return "".join(out)

    def token_text(self, i: int) -> str:
        i = self._check_id(i)
        return self.lab.token_text(i) if i < self.lab.vocab_size else f"⟨{i}⟩"

    def piece(self, i: int) -> str:
        """What a table shows for id i: the lab's `piece` (bytes of a character as <0xNN>), or "⟨id⟩"."""
        i = self._check_id(i)
        return self.lab.piece(i) if i < self.lab.vocab_size else f"⟨{i}⟩"

    def __len__(self) -> int:
        return self.vocab_size

    def __repr__(self) -> str:
        return f"WiderVocabTokenizer(lab ids {self.lab.vocab_size} of vocab_size={self.vocab_size})"

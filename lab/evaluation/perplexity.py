"""Held-out perplexity of the lab's target beside a unigram baseline (`dspark-lab eval --perplexity FILE`).

    model_ppl   = exp( −mean_i log p_target(x_i | x_<i) )        the trained target, sliding windows
    unigram_ppl = exp( −mean_i log (count(x_i) + 1) / (N + V) )  token counts of the set's training split, add-one

Both score the same tokens: every token of the file but the first (it has no context). The file is read whole (at
most `MAX_FILE_BYTES`), NFC-normalized, tokenized with the model's tokenizer and cut into windows of the model's
`max_seq_len` ids that overlap by half: each token is scored once, with at least half a window of context (the
first window scores all of its tokens). Bits per byte (the same losses over the UTF-8 bytes of the text) are
reported beside the perplexities, since perplexity depends on the tokenizer and bits per byte do not.
"""

from __future__ import annotations

import math
import unicodedata
from pathlib import Path
from typing import Any

import torch

from ..text import Texts, lang_table

TEXT = Texts(lang_table("messages", "files"), "file")  # lab/lang/<lang>/messages.toml

MAX_FILE_BYTES = 10_000_000  # a few novels; more belongs in a longer evaluation than a command's


def read_text_file(path: str | Path, option: str = "--perplexity", lang: str = "en") -> str:
    """A UTF-8 text file, checked before it is read: a regular file, at most MAX_FILE_BYTES, not empty. The error
    names `option` and what is allowed, in `lang` (en or vi)."""
    p, shown = Path(path), f"{option} = {str(path)!r}"
    if not p.is_file():
        raise ValueError(TEXT("not_file", lang, shown=shown))
    size = p.stat().st_size
    if not 0 < size <= MAX_FILE_BYTES:
        raise ValueError(TEXT("size", lang, shown=shown, size=size, most=MAX_FILE_BYTES))
    try:
        return p.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(TEXT("not_utf8", lang, shown=shown, at=e.start)) from None


def unigram_log_probs(train_ids: torch.Tensor, vocab_size: int) -> torch.Tensor:
    """log p(v) = log (count(v) + 1) / (N + V) over a training stream of N ids.  → [V] float64"""
    counts = torch.bincount(train_ids.flatten(), minlength=vocab_size).double()  # [V]
    return ((counts + 1) / (counts.sum() + vocab_size)).log()


@torch.no_grad()
def token_log_probs(model: Any, ids: list[int]) -> torch.Tensor:
    """log p(x_i | x_<i) for i = 1..n−1, windows of max_seq_len overlapping by half.  → [n − 1] float64"""
    width = model.cfg.max_seq_len
    half = width // 2
    out = torch.empty(len(ids) - 1, dtype=torch.float64)
    start = 0
    while True:
        window = torch.tensor([ids[start : start + width]])  # [1, w]
        logp = model(window).logits.double().log_softmax(-1)[0]  # [w, V]
        got = logp[:-1].gather(1, window[0, 1:, None])[:, 0]  # [w − 1]: position j predicts j + 1
        first = 0 if start == 0 else half - 1  # a later window scores only its second half
        out[start + first : start + window.size(1) - 1] = got[first:]
        if start + width >= len(ids):
            return out
        start += half


def perplexity(model: Any, tok: Any, text: str, unigram: torch.Tensor) -> dict[str, Any]:
    """The report for one text: tokens scored, model and unigram perplexity, their ratio, bits per byte."""
    text = unicodedata.normalize("NFC", text)
    ids = tok.encode(text)
    if len(ids) < 2:
        raise ValueError(f"the text has {len(ids)} token(s): allowed a text of at least 2 tokens")
    model_lp = token_log_probs(model, ids)  # [n − 1]
    uni_lp = unigram[torch.tensor(ids[1:])]  # [n − 1]
    n_bytes = len(text.encode("utf-8"))
    model_nll, uni_nll = float(-model_lp.sum()), float(-uni_lp.sum())
    return {
        "tokens": len(ids) - 1,
        "model_ppl": math.exp(model_nll / (len(ids) - 1)),
        "unigram_ppl": math.exp(uni_nll / (len(ids) - 1)),
        "ratio": math.exp((model_nll - uni_nll) / (len(ids) - 1)),
        "bytes": n_bytes,
        "model_bits_per_byte": model_nll / math.log(2) / n_bytes,
        "unigram_bits_per_byte": uni_nll / math.log(2) / n_bytes,
    }

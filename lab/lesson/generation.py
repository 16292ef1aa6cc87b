"""`dspark-lab generate`: the same prompt decoded plainly and speculatively, side by side, as data."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import torch

from dspark_mini.speculative import GenerateResult, acceptance_stats, generate_plain, generate_speculative
from dspark_mini.validate import check_seed, check_temperature

from ..runtime.run import open_preset, preset_weights
from ..style import phase
from ..text import DEFAULT_PROMPT, check_prompt
from .view import WordPieces, prompt_words


@dataclass
class Comparison:
    prompt: str
    prompt_ids: list[int]
    verify_len: int  # ℓ of a fixed policy: the drafts each round sends to verify
    temperature: float
    seed: int
    plain: GenerateResult
    spec: GenerateResult
    texts: list[str]  # token id → display text
    decode: Any  # ids → text
    weights: str = "trained"
    device: str = "cpu"
    dtype: str = "float64"
    cfg: Any = None  # the model's ModelConfig
    tokenizer: Any = None  # what encoded the prompt and decodes the tokens
    words: list[WordPieces] = field(default_factory=list)  # how the prompt was tokenized, word by word

    @property
    def identical(self) -> bool:
        return self.plain.tokens == self.spec.tokens

    @property
    def first_difference(self) -> int | None:
        """The first new token where plain and speculative differ (None: identical). At T = 0 a difference is a
        near-tie of a narrow dtype (lab/evaluation/lossless.py); at T > 0, other draws."""
        a, b = self.plain.tokens[0], self.spec.tokens[0]
        return next((i for i, (x, y) in enumerate(zip(a, b, strict=True)) if x != y), None)

    def to_json(self) -> dict[str, Any]:
        stats = acceptance_stats(self.spec.rows(0))
        return {
            "prompt": self.prompt,
            "prompt_ids": self.prompt_ids,
            "prompt_words": [{"text": w.text, "ids": w.ids, "split": w.split} for w in self.words],
            "k": max((r.k for r in self.spec.rows(0)), default=None),  # k: the drafts a round proposes
            "block": max((r.k for r in self.spec.rows(0)), default=None),  # k's old key (kept for old readers)
            "verify_len": self.verify_len,  # ℓ (--verify-len): the first ℓ of them are sent to verify
            "temperature": self.temperature,
            "seed": self.seed,
            "weights": self.weights,
            "preset": None if self.cfg is None else self.cfg.name,
            "tokenizer": repr(self.tokenizer),
            "device": self.device,
            "dtype": self.dtype,
            "plain": {
                "tokens": self.plain.tokens[0],
                "text": self.decode(self.plain.tokens[0]),
                "tokens_per_s": self.plain.tokens_per_s,
                "seconds": self.plain.seconds,
                "target_forwards": self.plain.forwards,
            },
            "speculative": {
                "tokens": self.spec.tokens[0],
                "text": self.decode(self.spec.tokens[0]),
                "tokens_per_s": self.spec.tokens_per_s,
                "seconds": self.spec.seconds,
                "rounds": len(self.spec.rounds),
                "target_forwards": self.spec.forwards,
                "mean_accepted_length": stats["mean_accepted_length"],
                "acceptance_rate": stats["acceptance_rate"],
                "per_position": stats["per_position"],
                "strip": [
                    {
                        "anchor": r.anchor,
                        "draft": r.draft,
                        "verify_len": r.verify_len,  # ℓ: the first ℓ drafts were sent to verify, the rest "not sent"
                        "status": r.status,
                        "next_token": r.next_token,
                        "next_kind": r.next_kind,
                        "draft_probs": r.draft_probs,
                        "confidence": r.confidence,
                    }
                    for r in self.spec.rows(0)
                ],
            },
            "identical_tokens": self.identical,
            "first_difference": self.first_difference,
            "speedup": self.spec.tokens_per_s / self.plain.tokens_per_s,
        }


def compare(
    prompt: str | None = None,
    preset: str = "lab",
    max_new_tokens: int = 32,
    verify_len: int | None = None,
    temperature: float = 0.0,
    seed: int = 0,
    weights: str | None = None,
    checkpoint: str | None = None,
    device: str | None = None,
    dtype: str | None = None,
    lang: str = "en",
) -> Comparison:
    """Plain and speculative decoding of one prompt (trained lab weights unless weights="untrained"), on `device`
    (cpu, cuda, cuda:N) in compute dtype `dtype` (float64 / float32 / bfloat16; default the model's float64).
    weights None: "trained" for `lab`, the seeded init for another preset (`flash-cpu`, `lab.runtime.run`).
    The prompt goes through lab.text.check_prompt (NFC, not empty, at most prompt_limit tokens; refusals in
    `lang`, naming --prompt)."""
    check_seed(seed)  # before the weights are loaded or built
    check_temperature(temperature)
    text = DEFAULT_PROMPT if prompt is None else prompt
    model, tok, (prompt, ids) = open_preset(
        preset,
        weights,
        checkpoint,
        seed,
        device,
        dtype,
        lang,
        lambda cfg, tok: check_prompt(text, tok.encode, cfg, "--prompt", lang),
    )
    cfg = model.cfg
    x = torch.tensor([ids], dtype=torch.long, device=model.device)
    # the prepared weight layouts are built now, outside both clocks: otherwise the first timed run (speculative)
    # pays for them — at the real widths gigabytes of stacked and QDQ'd experts — and the ratio reads low
    with phase("prepare"):
        model.prepare()
    # and one short speculative run (the prefill and one full round: a draft, a verify of ℓ + 1 rows) warms what a
    # fresh process touches the first time — the caches' first pages, the first call of each kernel at these shapes —
    # so that neither clock pays for it; the first timed run (speculative) otherwise reads slow beside the warm loop
    # of `make bench` (its generate section times this command beside that loop)
    warm = min(max_new_tokens, cfg.dspark_block_size + 1)
    # the portable sampler: the same seed draws the same tokens here, in the walk and in the browser page
    with phase("warm"):
        generate_speculative(model, x, warm, verify_len, temperature, seed, sampler="portable")
    with phase("speculative", n=max_new_tokens):
        spec = generate_speculative(model, x, max_new_tokens, verify_len, temperature, seed, sampler="portable")
    with phase("plain", n=max_new_tokens):
        plain = generate_plain(model, x, max_new_tokens, temperature, seed, sampler="portable")
    ell = cfg.dspark_block_size if verify_len is None else verify_len
    texts = list(tok.vocab)
    device, dtype = str(model.device), model.cfg.dtype
    words = prompt_words(tok, prompt)
    return Comparison(
        prompt,
        ids,
        ell,
        temperature,
        seed,
        plain,
        spec,
        texts,
        tok.decode,
        preset_weights(preset, weights, checkpoint),  # what was loaded: trained or untrained
        device,
        dtype,
        model.cfg,
        tok,
        words,
    )

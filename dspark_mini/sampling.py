"""Sampling a token from logits: the one rule the target (plain decoding, verify's bonus and residual draws) and
every drafter (DSpark's Markov head, Eagle3, MTP-1) share.

  token_distribution(logits, T)   softmax(logits / T); T = 0 → the one-hot argmax (greedy)
  sample(probs, generator)        one draw per row of a distribution
  next_token(logits, T, gen)      the two together; at T = 0 the argmax itself, with no draw
"""

from __future__ import annotations

import torch

from .validate import check_temperature


def token_distribution(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """softmax(logits / T); T = 0 → one-hot argmax (greedy).  [..., V] → [..., V]"""
    temperature = check_temperature(temperature)  # NaN, ±inf, a str or a bool: a clear error naming it
    if temperature == 0:
        return torch.zeros_like(logits).scatter_(-1, logits.argmax(-1, keepdim=True), 1.0)
    return torch.softmax(logits / temperature, dim=-1)


def sample(probs: torch.Tensor, generator: torch.Generator | None) -> torch.Tensor:
    """One token per row of probs [..., V] (argmax-exact for one-hot rows)."""
    flat = probs.reshape(-1, probs.size(-1))
    return torch.multinomial(flat, 1, generator=generator).view(probs.shape[:-1])


def next_token(logits: torch.Tensor, temperature: float, generator: torch.Generator | None) -> torch.Tensor:
    """One token per row of logits [..., V]: `sample(token_distribution(logits, T))`, and at T = 0 the argmax itself
    (what sampling the one-hot argmax distribution returns, without a draw: greedy reads no random number)."""
    if check_temperature(temperature) == 0:
        return logits.argmax(-1)
    return sample(token_distribution(logits, temperature), generator)

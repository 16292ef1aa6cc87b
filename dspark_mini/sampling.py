"""Sampling a token from logits: the one rule the target (plain decoding, verify's bonus and residual draws) and
every drafter (DSpark's Markov head, Eagle3, MTP-1) share.

  token_distribution(logits, T)   softmax(logits / T); T = 0 → the one-hot argmax (greedy)
  sample(probs, generator)        one draw per row of a distribution
  next_token(logits, T, gen)      the two together; at T = 0 the argmax itself, with no draw
  new_generator(seed, device, s)  the draws of one generation: SAMPLERS
  uniform(generator, device)      one float64 in [0, 1): verify's accept draw

Two samplers. "portable" (dspark_mini/portable_random.py: Philox4x32-10 and an inverse-CDF pick) draws bit for bit
what lab/browser/random.js draws, so a seed gives the same tokens in the terminal, a notebook and the browser; the
lab's own screens use it (generate, walk, serve, the presenter). "torch" (torch.Generator and torch.multinomial) is
what the shipped measurements drew with (training's self-distilled cache, eval, the paper page): they keep it, so the
numbers they recorded are what the code computes. A generator's type says which one draws.
"""

from __future__ import annotations

import torch

from .portable_random import PortableGenerator
from .portable_random import sample as portable_sample
from .validate import check_seed, check_temperature

SAMPLERS = ("portable", "torch")
Generator = torch.Generator | PortableGenerator


def new_generator(seed: int, device: torch.device | str = "cpu", sampler: str = "torch") -> Generator:
    """The generator of one generation from `seed`: a PortableGenerator ("portable", the same draws on every device
    and in the browser) or a torch.Generator on `device` ("torch")."""
    seed = check_seed(seed)
    if sampler == "portable":
        return PortableGenerator(seed)
    if sampler == "torch":
        return torch.Generator(device=device).manual_seed(seed)
    raise ValueError(f"sampler = {sampler!r} is invalid: allowed {', '.join(map(repr, SAMPLERS))}")


def uniform(generator: Generator | None, device: torch.device | str = "cpu") -> float:
    """One float64 draw in [0, 1) (verify's accept test u < min(1, p_t/p_d))."""
    if isinstance(generator, PortableGenerator):
        return generator.random()
    return float(torch.rand((), generator=generator, dtype=torch.float64, device=device))


def token_distribution(logits: torch.Tensor, temperature: float) -> torch.Tensor:
    """softmax(logits / T); T = 0 → one-hot argmax (greedy).  [..., V] → [..., V]"""
    temperature = check_temperature(temperature)  # NaN, ±inf, a str or a bool: a clear error naming it
    if temperature == 0:
        return torch.zeros_like(logits).scatter_(-1, logits.argmax(-1, keepdim=True), 1.0)
    return torch.softmax(logits / temperature, dim=-1)


def sample(probs: torch.Tensor, generator: Generator | None) -> torch.Tensor:
    """One token per row of probs [..., V] (argmax-exact for one-hot rows)."""
    if isinstance(generator, PortableGenerator):
        return portable_sample(probs, generator)
    flat = probs.reshape(-1, probs.size(-1))
    return torch.multinomial(flat, 1, generator=generator).view(probs.shape[:-1])


def next_token(logits: torch.Tensor, temperature: float, generator: Generator | None) -> torch.Tensor:
    """One token per row of logits [..., V]: `sample(token_distribution(logits, T))`, and at T = 0 the argmax itself
    (what sampling the one-hot argmax distribution returns, without a draw: greedy reads no random number)."""
    if check_temperature(temperature) == 0:
        return logits.argmax(-1)
    return sample(token_distribution(logits, temperature), generator)

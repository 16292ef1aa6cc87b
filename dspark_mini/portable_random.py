"""A portable random generator for sampling: the same (seed, stream, counter) gives the same float64 in Python and in
JavaScript (lab/browser/random.js, its twin), so the same seed draws the same tokens in the terminal, a notebook and
the browser. torch.Generator cannot do that: its Mersenne Twister (CPU) and Philox (CUDA) streams differ from each
other and from anything a page can compute without reimplementing torch's own samplers.

The core: Philox4x32-10 (Salmon, Moraes, Dror, Shaw, "Parallel random numbers: as easy as 1, 2, 3", SC 2011; the
Random123 library), a counter-based generator: a pure function of a 128-bit counter and a 64-bit key, made of 32-bit
multiplications, additions and xors — integer arithmetic that JavaScript does exactly too (Math.imul and a 16-bit
split for the high half of each product). Draw number `counter` of stream `stream` under `seed` is

    key  = (seed mod 2**32, seed div 2**32)                                   two 32-bit words
    ctr  = (counter mod 2**32, counter div 2**32, stream mod 2**32, stream div 2**32)
    w    = philox4x32_10(ctr, key)                                            four 32-bit words
    u    = ((w[0] >> 5) · 2**26 + (w[1] >> 6)) / 2**53                        a float64 in [0, 1)

The 53-bit integer (27 high bits of w[0], then 26 high bits of w[1]) and its scaling by 2**−53 are exact in float64,
so u is one of the 2**53 multiples of 2**−53 in [0, 1 − 2**−53], each equally likely; w[2] and w[3] are not used.
One draw per counter: a generator is (seed, stream) and the counter of its next draw, and any draw can be recomputed
on its own (draw n of a run without the n − 1 before it).

Sampling a token (`pick`, the rule both languages follow): a row p [V] of float64 weights, each finite and ≥ 0, not
necessarily normalised, with

    c_i   = (((p_0 + p_1) + p_2) + … + p_i)     the float64 cumulative sums, strictly left to right
    total = c_{V−1}                              must be > 0 and finite
    t     = u · total                            one float64 multiplication (round to nearest)
    pick  = the smallest i with t < c_i;         none (only possible when total is subnormal and t rounds up to
            if there is none, the last i with p_i > 0       it): the last token with weight

A zero-weight token is never picked: c_i > t ≥ c_{i−1} means c_i ≠ c_{i−1}, so p_i > 0 (and i = 0 needs p_0 > t ≥ 0).
A weight too small to move the running sum (c_i = c_{i−1} in float64) is never picked either, in both languages.
For a normal total, t ≤ (1 − 2**−53) · total rounds below total = c_{V−1}, so some i is found. A batch [..., V] is
sampled row by row in row-major order, each row taking the generator's next draw (an empty batch takes none).

What the two languages share is the draws and the rule: the same float64 weights give the same token. Weights each
side computes for itself (an exp, a softmax, a matrix product summed in another order) can differ in their last bit,
and then a pick differs only where u · total falls within that difference of a cumulative sum.

The accept test of speculative verify, as dspark_mini/speculative.py does it: ratio = min(1, p_t / max(p_d, 1e−12))
in float64, then one draw u (always, even when the ratio is 1), and the draft is kept when u < ratio.

    philox4x32_10(counter, key)          the core: 4 + 2 words → 4 words
    uniform(seed, stream, counter)       one float64 in [0, 1)
    PortableGenerator(seed, stream=0)    the lab's generator: .random() draws the next counter
    pick(row, u)                         the rule above on one row
    sample(probs, generator)             one token per row of probs [..., V], as sampling.sample
    accept_ratio(p_t, p_d), accept(ratio, generator)    the verify draw

Seeds, streams and counters are integers in 0 ≤ n < 2**63 (stored as signed int64 in JSON and checkpoints); a
generator draws counters 0 … 2**63 − 2, so its counter of the next draw stays below 2**63.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import torch

from .validate import SEED_LIMIT, check_int, check_seed

MASK32 = 0xFFFFFFFF
PHILOX_M = (0xD2511F53, 0xCD9E8D57)  # the two round multipliers
PHILOX_W = (0x9E3779B9, 0xBB67AE85)  # the key's per-round increments (golden ratio, √3 − 1)
PHILOX_ROUNDS = 10
FLOAT53 = 2.0**-53
# the accept test's floor on p_d, as speculative.verify_block: a draft token the draft gave no mass divides by this
ACCEPT_FLOOR = 1e-12


def philox4x32_10(counter: tuple[int, int, int, int], key: tuple[int, int]) -> tuple[int, int, int, int]:
    """Philox4x32 with 10 rounds: counter (4 words) and key (2 words), each 0 ≤ w < 2**32 → 4 words.
    A round: (c0, c1, c2, c3) → (hi(M1·c2) ⊕ c1 ⊕ k0, lo(M1·c2), hi(M0·c0) ⊕ c3 ⊕ k1, lo(M0·c0)); the key gains
    (W0, W1) mod 2**32 before every round but the first."""
    c0, c1, c2, c3 = counter
    k0, k1 = key
    for r in range(PHILOX_ROUNDS):
        if r:
            k0, k1 = (k0 + PHILOX_W[0]) & MASK32, (k1 + PHILOX_W[1]) & MASK32
        p0, p1 = PHILOX_M[0] * c0, PHILOX_M[1] * c2  # 64-bit products
        c0, c1, c2, c3 = (p1 >> 32) ^ c1 ^ k0, p1 & MASK32, (p0 >> 32) ^ c3 ^ k1, p0 & MASK32
    return c0, c1, c2, c3


def check_index(value: Any, name: str) -> int:
    """A stream or a counter: an int with 0 ≤ n < 2**63."""
    return check_int(value, name, 0, SEED_LIMIT - 1, f"0 ≤ {name} < 2**63")


def _uniform(seed: int, stream: int, counter: int) -> float:
    """`uniform` without the checks (the arguments are already in range)."""
    w = philox4x32_10(
        (counter & MASK32, counter >> 32, stream & MASK32, stream >> 32),
        (seed & MASK32, seed >> 32),
    )
    return ((w[0] >> 5) << 26 | (w[1] >> 6)) * FLOAT53  # 53 bits, exact: k · 2**−53


def uniform(seed: int, stream: int, counter: int) -> float:
    """Draw `counter` of stream `stream` under `seed`: a float64 in [0, 1), a multiple of 2**−53."""
    return _uniform(check_seed(seed), check_index(stream, "stream"), check_index(counter, "counter"))


class PortableGenerator:
    """What the lab passes around instead of a torch.Generator: (seed, stream) and the counter of the next draw.

    g = PortableGenerator(seed); g.random() is uniform(seed, 0, 0), then uniform(seed, 0, 1), … and g.counter is the
    number of draws made so far. `manual_seed(seed)` restarts it at counter 0 (and returns it), as torch's does;
    `initial_seed()` is the seed. `state` / `set_state` read and restore (seed, stream, counter)."""

    def __init__(self, seed: int = 0, stream: int = 0, counter: int = 0):
        self._seed = check_seed(seed)
        self._stream = check_index(stream, "stream")
        self._counter = check_index(counter, "counter")

    @property
    def seed(self) -> int:
        return self._seed

    @property
    def stream(self) -> int:
        return self._stream

    @property
    def counter(self) -> int:
        """The counter of the next draw (= the draws made since counter 0)."""
        return self._counter

    @property
    def state(self) -> tuple[int, int, int]:
        return self._seed, self._stream, self._counter

    def set_state(self, state: tuple[int, int, int]) -> PortableGenerator:
        seed, stream, counter = state
        self._seed, self._stream = check_seed(seed), check_index(stream, "stream")
        self._counter = check_index(counter, "counter")
        return self

    def manual_seed(self, seed: int) -> PortableGenerator:
        self._seed, self._counter = check_seed(seed), 0
        return self

    def initial_seed(self) -> int:
        return self._seed

    def random(self) -> float:
        """The next draw: a float64 in [0, 1)."""
        n = self._counter
        if n >= SEED_LIMIT - 1:
            raise ValueError(f"counter = {n} is invalid: allowed 0 ≤ counter < 2**63 − 1 (this stream is used up)")
        self._counter = n + 1
        return _uniform(self._seed, self._stream, n)

    def __repr__(self) -> str:
        return f"PortableGenerator(seed={self._seed}, stream={self._stream}, counter={self._counter})"


def check_generator(generator: Any) -> PortableGenerator:
    if not isinstance(generator, PortableGenerator):
        raise TypeError(f"generator = {generator!r} is invalid: allowed a PortableGenerator")
    return generator


def _check_rows(rows: np.ndarray, cum: np.ndarray, name: str, batch: tuple[int, ...]) -> None:
    """rows [N, V] float64 weights and their cumulative sums cum [N, V]: finite, ≥ 0, each row's total > 0. An error
    names the entry as `name[i, …, v]`, i … the index in the batch shape `batch` (N = its product)."""

    def where(n: int, *v: int) -> str:
        index = [int(i) for i in np.unravel_index(n, batch)] + list(v)
        return name + (f"[{', '.join(map(str, index))}]" if index else "")

    bad = ~(np.isfinite(rows) & (rows >= 0))  # [N, V] NaN, ±inf, negative
    if bad.any():
        n, v = np.argwhere(bad)[0]
        raise ValueError(f"{where(n, v)} = {float(rows[n, v])!r} is invalid: allowed a finite number ≥ 0")
    total = cum[:, -1]  # [N]
    dead = ~(np.isfinite(total) & (total > 0))
    if dead.any():
        n = int(np.flatnonzero(dead)[0])
        raise ValueError(
            f"{where(n)} sums to {float(total[n])!r}: allowed a finite total > 0 (a weight > 0, and no overflow)"
        )


def _pick_checked(row: np.ndarray, cum: np.ndarray, u: float) -> int:
    """The rule on one checked row [V] with its cumulative sums cum [V]."""
    t = u * float(cum[-1])
    i = int(np.searchsorted(cum, t, side="right"))  # the first i with t < c_i (cum never decreases)
    if i == cum.size:  # t rounded up to a subnormal total: the last token with weight
        i = int(np.flatnonzero(row)[-1])
    return i


def pick(row: Any, u: float) -> int:
    """The token the rule picks in one row of weights [V] (float64; not necessarily normalised) for u in [0, 1)."""
    r = np.asarray(row.detach().cpu() if isinstance(row, torch.Tensor) else row, dtype=np.float64)  # [V]
    if r.ndim != 1 or r.size == 0:
        raise ValueError(f"row of shape {tuple(r.shape)} is invalid: allowed one row [V] with V ≥ 1")
    if not (isinstance(u, float) and 0.0 <= u < 1.0):
        raise ValueError(f"u = {u!r} is invalid: allowed a float in [0, 1)")
    with np.errstate(over="ignore"):  # an overflowing total is refused below, by name
        cum = np.add.accumulate(r)  # [V] sequential, left to right (a ufunc's accumulate is a running recurrence)
    _check_rows(r[None], cum[None], "row", ())
    return _pick_checked(r, cum, u)


def sample(probs: torch.Tensor, generator: PortableGenerator) -> torch.Tensor:
    """One token per row of probs [..., V] (as sampling.sample): rows in row-major order, each the generator's next
    draw. The weights are read as float64 (float32 and bfloat16 convert exactly). → int64 [...] on probs' device."""
    generator = check_generator(generator)
    if not isinstance(probs, torch.Tensor) or probs.dim() == 0 or probs.size(-1) == 0:
        raise ValueError(f"probs of shape {tuple(getattr(probs, 'shape', ()))} is invalid: allowed [..., V], V ≥ 1")
    rows = probs.detach().to("cpu", torch.float64).reshape(-1, probs.size(-1)).numpy()  # [N, V]
    with np.errstate(over="ignore"):
        cum = np.add.accumulate(rows, axis=1)  # [N, V] each row its own left-to-right running sum
    if rows.shape[0]:
        _check_rows(rows, cum, "probs", tuple(probs.shape[:-1]))
    picks = [_pick_checked(rows[n], cum[n], generator.random()) for n in range(rows.shape[0])]  # [N]
    return torch.tensor(picks, dtype=torch.long).view(probs.shape[:-1]).to(probs.device)


def accept_ratio(p_t: float, p_d: float) -> float:
    """min(1, p_t / max(p_d, 1e−12)) in float64, as speculative.verify_block computes it. p_t, p_d: the target's and
    the draft's probability of the drafted token, each a finite number ≥ 0."""
    for name, p in (("p_t", p_t), ("p_d", p_d)):
        if isinstance(p, bool) or not isinstance(p, (int, float)) or not (math.isfinite(p) and p >= 0):
            raise ValueError(f"{name} = {p!r} is invalid: allowed a finite number ≥ 0")
    return min(1.0, float(p_t) / max(float(p_d), ACCEPT_FLOOR))


def accept(ratio: float, generator: PortableGenerator) -> bool:
    """The verify draw: one draw u (always), and the draft is kept when u < ratio."""
    if isinstance(ratio, bool) or not isinstance(ratio, (int, float)) or math.isnan(ratio):
        raise ValueError(f"ratio = {ratio!r} is invalid: allowed a number (accept_ratio's min(1, p_t / p_d))")
    return check_generator(generator).random() < ratio

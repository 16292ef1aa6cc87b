"""Argument checks shared by the model API and the lab CLI: each names the argument and what is allowed.

    check_int(steps, "--steps", 1, 100_000)       an int (never a bool) in lo..hi
    check_float(lr, "--lr", 0.0, 1.0, lo_open=True)  a finite number (never NaN or ±inf) in its interval
    check_seed(seed)                              0 ≤ seed < 2**63: every torch.Generator takes it as it is
    check_temperature(temperature)                0 (greedy) or a finite number ≥ MIN_TEMPERATURE

A value of the wrong kind (a str, None, a bool for a number, a float for an int) raises TypeError; a number
outside its range raises ValueError. Both say `name = value is invalid: allowed …`; nothing is clamped.
The model (dspark_mini) and the lab both import this module; it imports nothing from either.
"""

from __future__ import annotations

import math
import numbers
from typing import Any

# torch.Generator.manual_seed takes a uint64 and maps −1 silently onto 2**64 − 1; a seed is also stored as
# JSON and in checkpoint headers as a signed int64. So: 0 ≤ seed < 2**63.
SEED_LIMIT = 2**63
# Below this, logits / T overflows to inf for subnormal T and sampling fails; it is argmax already: use 0.
MIN_TEMPERATURE = 1e-6


def _invalid(name: str, value: Any, allowed: str) -> str:
    return f"{name} = {value!r} is invalid: allowed {allowed}"


def _int_range(lo: int, hi: int | None) -> str:
    return f"an integer ≥ {lo}" if hi is None else f"an integer in {lo}..{hi}"


def check_int(value: Any, name: str, lo: int, hi: int | None = None, why: str = "") -> int:
    """`value` as an int in lo..hi (hi=None: no upper bound); `why` explains the bound in the message."""
    allowed = _int_range(lo, hi) + (f" ({why})" if why else "")
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise TypeError(_invalid(name, value, allowed))
    if value < lo or (hi is not None and value > hi):
        raise ValueError(_invalid(name, value, allowed))
    return int(value)


def check_float(
    value: Any,
    name: str,
    lo: float | None = None,
    hi: float | None = None,
    lo_open: bool = False,
    why: str = "",
) -> float:
    """`value` as a finite float in [lo, hi] ((lo, hi] with lo_open); None leaves that side unbounded."""
    parts = [f"> {lo:g}" if lo_open else f"≥ {lo:g}"] if lo is not None else []
    parts += [f"≤ {hi:g}"] if hi is not None else []
    allowed = "a finite number" + (" " + " and ".join(parts) if parts else "") + (f" ({why})" if why else "")
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(_invalid(name, value, allowed))
    v = float(value)
    too_low = lo is not None and (v <= lo if lo_open else v < lo)
    if not math.isfinite(v) or too_low or (hi is not None and v > hi):
        raise ValueError(_invalid(name, value, allowed))
    return v


def check_seed(seed: Any, name: str = "seed") -> int:
    """A seed for torch.Generator.manual_seed and random.Random: an int with 0 ≤ seed < 2**63."""
    return check_int(seed, name, 0, SEED_LIMIT - 1, "0 ≤ seed < 2**63")


def check_temperature(temperature: Any, name: str = "temperature") -> float:
    """The sampling temperature: 0 = greedy (argmax), otherwise a finite number ≥ MIN_TEMPERATURE."""
    allowed = f"0 (greedy) or a finite number ≥ {MIN_TEMPERATURE:g}"
    if isinstance(temperature, bool) or not isinstance(temperature, numbers.Real):
        raise TypeError(_invalid(name, temperature, allowed))
    t = float(temperature)
    if t != 0 and not (math.isfinite(t) and t >= MIN_TEMPERATURE):
        raise ValueError(_invalid(name, temperature, allowed))
    return t

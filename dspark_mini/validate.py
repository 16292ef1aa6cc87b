"""Argument checks shared by the model API and the lab CLI: each names the argument and what is allowed.

    check_int(steps, "--steps", 1, 100_000)       an int (never a bool) in lo..hi
    check_float(lr, "--lr", 0.0, 1.0, lo_open=True)  a finite number (never NaN or ±inf) in its interval
    check_seed(seed)                              0 ≤ seed < 2**63: every torch.Generator takes it as it is
    check_temperature(temperature)                0 (greedy) or a finite number ≥ MIN_TEMPERATURE
    check_verify_len(ℓ, top)                      ℓ, the drafts sent to verify: 1..top (the trained draft block)
    renamed("block_size", "k", "draft()")         an old name still accepted: one FutureWarning naming the new one

A value of the wrong kind (a str, None, a bool for a number, a float for an int) raises WrongKind (a TypeError that
is also a ValueError); a number outside its range raises ValueError. Both say `name = value is invalid: allowed …`;
nothing is clamped.
The model (dspark_mini) and the lab both import this module; it imports nothing from either.
"""

from __future__ import annotations

import math
import numbers
import warnings
from typing import Any

# torch.Generator.manual_seed takes a uint64 and maps −1 silently onto 2**64 − 1; a seed is also stored as
# JSON and in checkpoint headers as a signed int64. So: 0 ≤ seed < 2**63.
SEED_LIMIT = 2**63
# Below this, logits / T overflows to inf for subnormal T and sampling fails; it is argmax already: use 0.
MIN_TEMPERATURE = 1e-6


def _invalid(name: str, value: Any, allowed: str) -> str:
    return f"{name} = {value!r} is invalid: allowed {allowed}"


class WrongKind(TypeError, ValueError):
    """A value of the wrong kind (a str, None, a bool or a float for an int): a TypeError, and a ValueError too, so a
    caller that catches the refusals of bad values (the CLI's exit 2) catches it the same way."""


def is_integer(value: Any) -> bool:
    """An int and never a bool (True is an int to Python): the one definition every integer check reads."""
    return isinstance(value, numbers.Integral) and not isinstance(value, bool)


def _int_range(lo: int, hi: int | None, bare: bool) -> str:
    if bare:
        return f"≥ {lo}" if hi is None else f"{lo}..{hi}"
    return f"an integer ≥ {lo}" if hi is None else f"an integer in {lo}..{hi}"


def check_int(
    value: Any,
    name: str,
    lo: int,
    hi: int | None = None,
    why: str = "",
    *,
    bare: bool = False,
    error: type[Exception] | None = None,
    allowed: str | None = None,
) -> int:
    """`value` as an int in lo..hi (hi=None: no upper bound); `why` explains the bound in the message.

    `bare` writes the range as `lo..hi` (`≥ lo`) instead of `an integer in lo..hi`; `error` is the exception raised
    for a wrong kind and for a value out of range alike (a module's own error class); by default WrongKind and
    ValueError. `allowed` replaces the whole allowed text where the range alone does not say it ("None (each step's
    default) or 0..7")."""
    if allowed is None:
        allowed = _int_range(lo, hi, bare) + (f" ({why})" if why else "")
    if not is_integer(value):
        raise (error or WrongKind)(_invalid(name, value, allowed))
    if value < lo or (hi is not None and value > hi):
        raise (error or ValueError)(_invalid(name, value, allowed))
    return int(value)


def check_verify_len(verify_len: int | None, top: int, name: str = "verify_len", lo: int = 1) -> int:
    """ℓ, the drafts a round sends to verify: lo..top, the drafter's trained block (None: all of it). The one check of
    ℓ: the API, the CLI (`--verify-len`, its message in the CLI's words), the ragged verify (lo = 0: a request that
    sends only its anchor) and the scheduler's fixed length all call it."""
    if verify_len is None:
        return top
    cli = name.startswith("--")
    why = "the fixed verify length" if lo == 0 and not cli else "the trained draft block"
    return check_int(verify_len, name, lo, top, why, bare=not cli)


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
        raise WrongKind(_invalid(name, value, allowed))
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
        raise WrongKind(_invalid(name, temperature, allowed))
    t = float(temperature)
    if t != 0 and not (math.isfinite(t) and t >= MIN_TEMPERATURE):
        raise ValueError(_invalid(name, temperature, allowed))
    return t


def renamed(old: str, new: str, where: str) -> None:
    """An old spelling (`block_size`, `Round.block`) still works; this says which name replaces it. A FutureWarning
    (shown to users, unlike DeprecationWarning), once per calling line as the warnings module does by default."""
    warnings.warn(f"{where}: {old} is now {new} (the old name still works)", FutureWarning, stacklevel=3)

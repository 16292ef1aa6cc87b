"""The target cache: the one set of training windows every drafter learns from (DeepSpec's data stage, in miniature).

DeepSpec has the target regenerate the answers to its training prompts once and stores them; DSpark, DFlash and
Eagle3 then all train on that one cache (docs/sources.md: where this is described). From a trained target and
seeded prompts:

  1. prompts (`train.distill_prompts`): a `free` share free-form (1–6 random ids, or 1–3 random lower-case
     words: text from outside the corpus), the rest the first 1–16 ids of a line of the training stream;
  2. sequences: the frozen target continues every prompt to one training window of `length` ids (prompt included),
     the first `sampled` share at temperature 1, the rest greedy (`train.self_distill`)   → [N, L]
  3. the window schedule: for each of `steps` optimizer steps, `batch` windows in a fixed order — first
     `batch − rows` slices of `length` ids of the training corpus, then `rows` whole cached sequences (whole, so
     the target reads them from position 0, as when it wrote them) — drawn once from `seed`  → [steps, batch, L]

Every drafter's trainer takes the schedule's windows step by step: the same windows, in the same order, for the same
number of optimizer steps, so the same target tokens. What each drafter does with a window is its method's own
(DSpark / DFlash: anchor blocks; Eagle3: every row with a training-time-test unroll; MTP-1: every row, x_{i+2}).
The target's features (taps, hidden states, next-token distributions) are not stored: the frozen target recomputes
them exactly from the ids — what DeepSpec's feature cache holds, for a few hundred kB instead of gigabytes.

File `target_cache.safetensors`: tensors `sequences` [N, L] and `windows` [steps, batch, L] (int16 ids; the lab
vocabulary has < 32,768 ids), header {format, version, spec (the settings above), target_sha256}. Its sha256 is
the data hash each drafter's record and `report.json` carry.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
from dataclasses import dataclass
from pathlib import Path

import torch
from safetensors import SafetensorError, safe_open

from dspark_mini.checkpoint import write_tensors
from dspark_mini.jsonlimits import JSONLimitError, loads
from dspark_mini.validate import check_int

from .train import distill_prompts, self_distill, windows

FORMAT = "dspark-lab-target-cache"
VERSION = "1"
MAX_SPEC_BYTES = 2**16  # the header's spec: a few hundred bytes in practice
PROMPT_IDS = 16  # longest prompt (the evaluation's held-out prompts have 16 ids)


class CacheError(ValueError):
    """A target-cache file that is missing, not one, or does not fit the settings it is read with."""


@dataclass(frozen=True)
class CacheSpec:
    """How a target cache is built (every field is recorded in its header)."""

    prompts: int  # sequences the target writes
    free: float  # … their share started from free-form prompts (the rest from training-line prefixes)
    sampled: float  # … their share continued at temperature 1 (the rest greedy)
    length: int  # ids per sequence = per training window
    steps: int  # optimizer steps of the schedule
    batch: int  # windows per step
    rows: int  # … of them cached sequences (the rest corpus slices)
    seed: int

    def check(self) -> CacheSpec:
        """ValueError naming the first bad field and its allowed range."""
        for name in ("prompts", "length", "steps", "batch"):
            v = getattr(self, name)
            check_int(v, f"cache {name}", 1)
        if self.length < 3:
            raise ValueError(f"cache length = {self.length} is invalid: allowed ≥ 3 (a prompt id and 2 new ids)")
        for name in ("free", "sampled"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, float)) or not 0 <= v <= 1:
                raise ValueError(f"cache {name} = {v!r} is invalid: allowed a share 0 ≤ {name} ≤ 1")
        check_int(self.rows, "cache rows", 0, self.batch, allowed=f"0..batch ({self.batch})")
        return self


@dataclass(frozen=True)
class TargetCache:
    spec: CacheSpec
    sequences: torch.Tensor  # [N, L] the target's own continuations (int64)
    windows: torch.Tensor  # [steps, batch, L] the training windows, step by step (int64)
    target_sha256: str | None = None
    sha256: str | None = None  # of the file it was read from / written to

    @property
    def tokens_seen(self) -> int:
        """Ids a drafter reads over the whole schedule (steps × batch × length)."""
        return self.windows.numel()


def build_cache(target, train_ids: torch.Tensor, spec: CacheSpec) -> TargetCache:
    """The target's continuations of `spec.prompts` seeded prompts and the window schedule (module docstring)."""
    spec.check()
    top = min(PROMPT_IDS, spec.length // 2)  # prompt ids at most
    prompts = distill_prompts(train_ids, spec.prompts, spec.seed, target.cfg.vocab_size, spec.free, top)
    n_sampled = round(spec.prompts * spec.sampled)
    greedy = self_distill(target, prompts[n_sampled:], spec.length, 0.0, spec.seed)
    sampled = self_distill(target, prompts[:n_sampled], spec.length, 1.0, spec.seed)
    sequences = torch.cat([sampled, greedy])  # [N, L] prompt order: the sampled share first
    return TargetCache(spec, sequences, schedule(sequences, train_ids, spec))


def schedule(sequences: torch.Tensor, train_ids: torch.Tensor, spec: CacheSpec) -> torch.Tensor:
    """The training windows of every step, drawn once from spec.seed.  → [steps, batch, L]"""
    gen = torch.Generator().manual_seed(spec.seed)
    out = torch.empty(spec.steps, spec.batch, spec.length, dtype=torch.long)
    n_corpus = spec.batch - spec.rows
    for step in range(spec.steps):
        if n_corpus:
            out[step, :n_corpus] = windows(train_ids, n_corpus, spec.length - 1, gen)  # [n_corpus, L]
        if spec.rows:
            out[step, n_corpus:] = sequences[torch.randint(0, sequences.size(0), (spec.rows,), generator=gen)]
    return out


def save_cache(cache: TargetCache, path: str | Path, target_sha256: str | None = None) -> TargetCache:
    """Write the cache atomically (int16 ids); → the cache with its file's sha256 (and the target's, if given)."""
    if int(max(cache.sequences.max(), cache.windows.max())) >= 2**15:
        raise CacheError("a target cache stores int16 ids: allowed a vocabulary of < 32,768 ids")
    header = {
        "format": FORMAT,
        "version": VERSION,
        "spec": json.dumps(dataclasses.asdict(cache.spec)),
        **({"target_sha256": target_sha256} if target_sha256 is not None else {}),
    }
    tensors = {"sequences": cache.sequences.to(torch.int16), "windows": cache.windows.to(torch.int16)}
    write_tensors(tensors, path, header)
    return dataclasses.replace(cache, target_sha256=target_sha256, sha256=sha256_of(path))


def load_cache(path: str | Path, want: CacheSpec | None = None) -> TargetCache:
    """Read a cache back (int64 ids), with its sha256; `want`: the settings it must have been built with."""
    path = Path(path)
    if not path.is_file():
        raise CacheError(f"target cache {str(path)!r} is missing: allowed a file written by `train all`")
    try:
        with safe_open(str(path), framework="pt") as f:
            md = f.metadata() or {}
            if md.get("format") != FORMAT:
                raise CacheError(f"{str(path)!r} is not a target cache (format {md.get('format')!r})")
            spec = CacheSpec(**loads(md["spec"], MAX_SPEC_BYTES)).check()  # bounded: size, nesting, digits
            seqs, wins = f.get_tensor("sequences").long(), f.get_tensor("windows").long()
    except (OSError, KeyError, TypeError, JSONLimitError, SafetensorError) as e:
        raise CacheError(f"{str(path)!r} is not a readable target cache ({e})") from None
    if want is not None and spec != want:
        diff = [n for n in dataclasses.asdict(spec) if getattr(spec, n) != getattr(want, n)]
        raise CacheError(f"{str(path)!r} was built with other settings ({', '.join(diff)}): allowed {want}")
    if seqs.shape[1:] != (spec.length,) or wins.shape != (spec.steps, spec.batch, spec.length):
        raise CacheError(f"{str(path)!r} holds tensors of shapes {tuple(seqs.shape)} / {tuple(wins.shape)}, not {spec}")
    return TargetCache(spec, seqs, wins, md.get("target_sha256"), sha256_of(path))


def sha256_of(path: str | Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()

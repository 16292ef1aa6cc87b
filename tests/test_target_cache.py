"""The target cache (lab/training/target_cache.py): the target's own continuations and the one window schedule every
drafter trains on — what it holds, that it is seeded, that the file round-trips with its sha256, and that the trainers
read exactly its windows."""

from __future__ import annotations

import dataclasses
import hashlib

import pytest
import torch

from dspark_mini import build_model, get_config
from dspark_mini.speculative import generate_plain
from lab.training.rebuild import QUICK, corpus_streams
from lab.training.target_cache import CacheError, CacheSpec, build_cache, load_cache, save_cache, schedule
from lab.training.train import distill_prompts

SPEC = CacheSpec(prompts=6, free=0.5, sampled=1 / 3, length=14, steps=3, batch=4, rows=3, seed=2)


@pytest.fixture(scope="module")
def target():
    return build_model(get_config("lab"), seed=1)


@pytest.fixture(scope="module")
def train_ids():
    return corpus_streams(QUICK)[0]


@pytest.fixture(scope="module")
def cache(target, train_ids):
    return build_cache(target, train_ids, SPEC)


def is_slice(row: list[int], stream: list[int]) -> bool:
    n = len(row)
    return any(stream[i : i + n] == row for i in range(len(stream) - n + 1))


def test_sequences_are_the_targets_continuations(cache, target, train_ids):
    """Row i = prompt i, then what the target writes for it alone: sampled at T = 1 for the first `sampled` share,
    greedy (= plain greedy decoding, an independent reference) for the rest."""
    prompts = distill_prompts(train_ids, SPEC.prompts, SPEC.seed, target.cfg.vocab_size, SPEC.free, SPEC.length // 2)
    assert cache.sequences.shape == (SPEC.prompts, SPEC.length) and cache.sequences.dtype == torch.long
    n_sampled = round(SPEC.prompts * SPEC.sampled)
    for i, (p, row) in enumerate(zip(prompts, cache.sequences.tolist(), strict=True)):
        assert row[: len(p)] == p
        if i >= n_sampled:
            assert row[len(p) :] == generate_plain(target, torch.tensor([p]), SPEC.length - len(p)).tokens[0]
    assert all(4 <= t < target.cfg.vocab_size for row in cache.sequences.tolist() for t in row)


def test_schedule_takes_corpus_slices_then_cached_rows(cache, train_ids):
    assert cache.windows.shape == (SPEC.steps, SPEC.batch, SPEC.length)
    assert cache.tokens_seen == SPEC.steps * SPEC.batch * SPEC.length
    stream, rows = train_ids.tolist(), [tuple(r) for r in cache.sequences.tolist()]
    n_corpus = SPEC.batch - SPEC.rows
    for step in cache.windows.tolist():
        assert all(is_slice(w, stream) for w in step[:n_corpus])
        assert all(tuple(w) in rows for w in step[n_corpus:])
    # all corpus: no cached row is needed; all cache: every window is a cached sequence
    only = schedule(cache.sequences, train_ids, dataclasses.replace(SPEC, rows=0))
    assert all(is_slice(w, stream) for step in only.tolist() for w in step)
    every = schedule(cache.sequences, train_ids, dataclasses.replace(SPEC, rows=SPEC.batch))
    assert all(tuple(w) in rows for step in every.tolist() for w in step)


def test_same_spec_same_cache_other_seed_other_cache(cache, target, train_ids):
    again = build_cache(target, train_ids, SPEC)
    assert torch.equal(again.sequences, cache.sequences) and torch.equal(again.windows, cache.windows)
    other = build_cache(target, train_ids, dataclasses.replace(SPEC, seed=3))
    assert not torch.equal(other.windows, cache.windows)


def test_file_round_trip_and_hash(cache, tmp_path):
    path = tmp_path / "target_cache.safetensors"
    saved = save_cache(cache, path, "ab" * 32)
    assert saved.sha256 == hashlib.sha256(path.read_bytes()).hexdigest()
    back = load_cache(path, SPEC)
    assert back.spec == SPEC and back.sha256 == saved.sha256 and back.target_sha256 == "ab" * 32
    assert torch.equal(back.sequences, cache.sequences) and torch.equal(back.windows, cache.windows)
    assert back.windows.dtype == torch.long
    assert save_cache(cache, tmp_path / "again.safetensors", "ab" * 32).sha256 == saved.sha256  # bytes are seeded
    with pytest.raises(CacheError, match=r"other settings \(rows, seed\)"):
        load_cache(path, dataclasses.replace(SPEC, rows=2, seed=9))
    with pytest.raises(CacheError, match="is missing"):
        load_cache(tmp_path / "none.safetensors")
    (tmp_path / "junk.safetensors").write_bytes(b"not a file at all")
    with pytest.raises(CacheError, match="not a readable target cache"):
        load_cache(tmp_path / "junk.safetensors")


@pytest.mark.parametrize(
    "change, message",
    [
        ({"prompts": 0}, "cache prompts = 0 is invalid: allowed an integer ≥ 1"),
        ({"free": 1.5}, "cache free = 1.5 is invalid"),
        ({"sampled": -0.1}, "cache sampled = -0.1 is invalid"),
        ({"rows": 5}, r"cache rows = 5 is invalid: allowed 0..batch \(4\)"),
        ({"length": 2}, "cache length = 2 is invalid"),
        ({"steps": True}, "cache steps = True is invalid"),
    ],
)
def test_bad_spec_names_the_field(change, message, target, train_ids):
    with pytest.raises(ValueError, match=message):
        build_cache(target, train_ids, dataclasses.replace(SPEC, **change))


def test_trainers_read_exactly_the_schedule(cache, target, train_ids):
    """The DSpark trainer and both baselines train on the schedule's windows: the same schedule → the same
    weights, another schedule → other weights; a schedule of the wrong shape is one clear error."""
    from lab.training.baselines import train_eagle3, train_mtp1
    from lab.training.train import train_draft

    k = target.cfg.dspark_block_size
    ctx = SPEC.length - k - 1

    def dspark(windows):
        m = build_model(get_config("lab"), seed=1)
        train_draft(m, train_ids, SPEC.steps, SPEC.batch, ctx, seed=0, anchors=2, schedule=windows)
        return torch.cat([p.flatten() for n, p in m.named_parameters() if n.startswith("mtp.")])

    def eagle3(windows):
        module, _ = train_eagle3(target, train_ids, SPEC.steps, SPEC.batch, SPEC.length - k, seed=0, schedule=windows)
        return torch.cat([p.detach().flatten() for p in module.parameters()])

    shuffled = cache.windows.flip(0)
    for train in (dspark, eagle3):
        assert torch.equal(train(cache.windows), train(cache.windows.clone()))
        assert not torch.equal(train(cache.windows), train(shuffled))
    with pytest.raises(ValueError, match=r"schedule has shape \(3, 4, 14\): allowed .* \[3, 4, 15\]"):
        train_mtp1(target, train_ids, SPEC.steps, SPEC.batch, SPEC.length - 1, seed=0, schedule=cache.windows)
    with pytest.raises(ValueError, match=r"schedule has shape \(2, 4, 14\)"):
        train_draft(target, train_ids, SPEC.steps, SPEC.batch, ctx, schedule=cache.windows[:2])

"""docs/model_card.json (bench/model_card.py, quoted by docs/model.md) belongs to the shipped weights: the greedy
samples and the everyday perplexities it records are what the shipped target computes now, in float64."""

from __future__ import annotations

import importlib.util
import json
import math
from pathlib import Path

import pytest
import torch

from dspark_mini import get_tokenizer
from dspark_mini.checkpoint import load_model
from lab import realtext
from lab.evaluation.perplexity import perplexity, unigram_log_probs
from lab.weights import file_sha256, report, training_streams, weight_file

ROOT = Path(__file__).resolve().parents[1]
CARD = ROOT / "docs" / "model_card.json"


def _bench():
    spec = importlib.util.spec_from_file_location("model_card", ROOT / "bench" / "model_card.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def card():
    return json.loads(CARD.read_text(encoding="utf-8"))


@pytest.fixture(scope="module")
def target():
    torch.set_num_threads(1)
    model = load_model(weight_file("target"))
    return model, get_tokenizer(model.cfg)


def test_the_card_is_of_the_shipped_target(card):
    assert card["target_sha256"] == file_sha256(weight_file("target"))[:16]


def test_greedy_samples_are_what_the_shipped_target_writes(card, target):
    model, tok = target
    bench = _bench()
    assert [(s["name"], s["lang"], s["prompt"]) for s in card["samples"]] == list(bench.PROMPTS)
    for s in card["samples"]:
        assert bench.continuation(model, tok, s["prompt"], 0.0, card["max_new_tokens"]) == s["greedy"], s["name"]


def test_everyday_perplexities_are_recomputed_exactly(card, target):
    model, tok = target
    unigram = unigram_log_probs(training_streams(report()["recipe"]["seed"])[0], model.cfg.vocab_size)
    for lang in ("en", "vi"):
        got = perplexity(model, tok, "\n\n".join(realtext.everyday(lang)), unigram)
        want = card["perplexity"][f"everyday_{lang}"]
        assert got["tokens"] == want["tokens"]
        assert math.isclose(got["model_ppl"], want["model_ppl"], rel_tol=1e-9)
        assert math.isclose(got["unigram_ppl"], want["unigram_ppl"], rel_tol=1e-12)


def test_the_sums_record_adds_up(card):
    s = card["sums"]
    assert s["lines"] == sum(v["lines"] for v in s["by_op"].values())
    assert s["exact"] == sum(v["exact"] for v in s["by_op"].values())
    assert s["rate"] == pytest.approx(s["exact"] / s["lines"])

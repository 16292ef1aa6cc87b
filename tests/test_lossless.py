"""Greedy speculative = plain, exactly stated (docs/reliability.md, "Lossless, exactly stated";
lab/evaluation/lossless.py).

float64: equal token for token and logit for logit (within 1e-12), at the lab's widths (trained) and on flash-cpu's
layers at narrow widths (its attention kinds, sparse index, experts with FP8 activations, Engram, concatenated taps).
A verify that kept a draft its row did not choose, or read another row, or a cache that kept a rejected row, would
differ here by far more than 1e-12.
bfloat16: the two part only at near-ties — at each first difference the plain step's top-2 logit gap is within
max |Δlogit| between the one-token step and the verify row there — and every speculative token is the argmax of the
verify row that decided it. The prompts include those that part on this project's CPU (docs/bf16_lossless.json); on
another CPU the roundings, and so the prompts that part, may differ, and the statement is checked all the same.
The real widths (the peak memory docs/flash_cpu.json records, minutes of CPU) are measured by bench/bf16_lossless.py;
its record is checked here against the same statement. Nothing here depends on a clock.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch

import dspark_mini.speculative as spec_mod
from dspark_mini.speculative import Verdict, verify_greedy
from lab.evaluation.lossless import lab_prompts, narrow_flash, probe, summarize
from lab.weights import lab_model

RECORD = json.loads((Path(__file__).resolve().parent.parent / "docs" / "bf16_lossless.json").read_text("utf-8"))
NEW = 32  # new tokens per prompt, as the record's lab runs
F64_DELTA = 1e-12  # float64: the two computations agree to rounding (measured ≤ 2e-14)
BF16_MEDIAN = 0.05  # bfloat16: at most positions they agree to below a bfloat16 step of the logits


def record_prompts(parted: int, extra: int) -> list[torch.Tensor]:
    """The first `parted` prompts of the record's lab bfloat16 run that parted there, and the first `extra` others."""
    lab = RECORD["lab"]["bfloat16"]
    prompts = lab_prompts(lab["prompts"])
    ids = [d["prompt"] for d in lab["divergences"]]
    return [prompts[i] for i in ids[:parted]] + [p for i, p in enumerate(prompts) if i not in ids][:extra]


@pytest.fixture(scope="module")
def prompts() -> list[torch.Tensor]:
    return record_prompts(4, 4)


def models(dtype: str):
    return {"lab": lambda: lab_model(dtype=dtype), "narrow flash-cpu": lambda: narrow_flash(dtype)}


@pytest.mark.parametrize("which", ["lab", "narrow flash-cpu"])
def test_float64_speculative_equals_plain_logit_for_logit(which, prompts) -> None:
    model = models("float64")[which]()
    s = summarize([probe(model, p, NEW) for p in prompts], "float64")
    assert s["divergent_prompts"] == 0 and s["all_verified"]
    assert s["delta_max"] <= F64_DELTA  # not only the same argmax: the same logits, to rounding


@pytest.mark.parametrize("which", ["lab", "narrow flash-cpu"])
def test_bfloat16_parts_from_plain_only_at_near_ties(which, prompts) -> None:
    model = models("bfloat16")[which]()
    probes = [probe(model, p, NEW) for p in prompts]
    s = summarize(probes, "bfloat16")
    assert s["all_verified"]  # each speculative token is its verify row's argmax
    for p in probes:
        if p.first is not None:  # a divergence: the plain step's top-2 gap is within what the computations differ by
            assert p.gap <= p.delta[p.first], (p.first, p.gap, p.delta[p.first])
    assert s["all_near_ties"]
    assert s["delta_median"] <= BF16_MEDIAN  # rounding-sized at most positions: a wrong verify moves every one
    assert s["divergent_prompts"] < len(prompts)  # mostly equal


def test_a_verify_that_keeps_a_wrong_draft_is_no_near_tie(prompts, monkeypatch) -> None:
    """The checker has teeth: a verify rule that keeps one draft past the first mismatch parts from plain decoding
    at a position that is no near-tie, with a token that is not its row's argmax."""

    def one_more(draft_tokens: torch.Tensor, target_argmax: torch.Tensor) -> Verdict:
        v = verify_greedy(draft_tokens, target_argmax)
        n = min(v.n_accepted + 1, draft_tokens.numel())
        return Verdict(n, int(target_argmax[n]), v.kind, [1.0] * n)

    monkeypatch.setattr(spec_mod, "verify_greedy", one_more)
    model = lab_model(dtype="float64")
    probes = [probe(model, p, NEW) for p in prompts[:3]]
    assert all(p.first is not None and not p.near_tie and not p.verified for p in probes)


def test_the_recorded_measurement_states_the_same() -> None:
    """docs/bf16_lossless.json, the run the docs quote: the real widths in bfloat16, the lab's in three dtypes and
    flash-cpu's layers at narrow widths in two — every divergence a near-tie, every token its row's argmax, float64
    equal logit for logit."""
    records = [RECORD["flash_cpu"], *RECORD["lab"].values(), *RECORD["narrow_flash"].values()]
    assert RECORD["flash_cpu"]["dtype"] == "bfloat16" and RECORD["flash_cpu"]["prompts"] >= 8
    for r in records:
        assert r["all_near_ties"] and r["all_verified"], r["dtype"]
        assert all(d["gap"] <= d["delta"] for d in r["divergences"])
        assert r["divergent_prompts"] == len(r["divergences"])
    for r in (RECORD["lab"]["float64"], RECORD["narrow_flash"]["float64"]):
        assert r["divergent_prompts"] == 0 and r["delta_max"] <= F64_DELTA
    assert RECORD["lab"]["bfloat16"]["prompts"] >= 300 and RECORD["lab"]["bfloat16"]["divergent_prompts"] > 0


@pytest.mark.parametrize(
    "lang, said", [("en", "different after 3 equal tokens"), ("vi", "khác nhau sau 3 token giống")]
)
def test_generate_says_where_greedy_parts_and_why(lang, said) -> None:
    """At T = 0 a difference is named by the equal tokens before it and explained as a near-tie of the dtype (both
    languages); the JSON carries first_difference."""
    from rich.console import Console

    from lab.lesson.generation import compare
    from lab.screens.render import TEXT, render_generate

    c = compare(max_new_tokens=8, dtype="bfloat16")
    assert c.first_difference is None and c.to_json()["first_difference"] is None
    c.spec.tokens[0][3] = (c.spec.tokens[0][3] + 1) % c.cfg.vocab_size  # as if a near-tie had parted them there
    assert c.first_difference == 3 and c.to_json()["first_difference"] == 3
    console = Console(record=True, width=120)
    render_generate(console, c, lang)
    out = " ".join(console.export_text().split())
    assert said in out and " ".join(TEXT("near_tie", lang, dtype="bfloat16").split()) in out


def test_the_docs_quote_the_record_through_prose_markers() -> None:
    """`bf16_lossless.<path>:<format>` reads docs/bf16_lossless.json; float64's tiny Δ reads as 1.4e-14, not 0.00."""
    from lab.sync import prose

    row, groups = prose.find_key("bf16_lossless.lab.float64.delta_max:e1")
    assert row.source == "bf16_lossless" and groups == {"path": "lab.float64.delta_max", "f": "e1"}
    assert prose.MEASURED["e1"](1.4210854715202004e-14) == "1.4e-14" and prose.MEASURED["e1"](2.5) == "2.5e+0"
    text = (Path(__file__).resolve().parent.parent / "docs" / "reliability.md").read_text("utf-8")
    assert "<!--n:bf16_lossless.flash_cpu.divergent_prompts:int-->" in text and "## Lossless, exactly stated" in text

"""The mini DeepSpec evaluation: prompts, τ and acceptance per position, the threshold sweep, the speed check."""

from __future__ import annotations

import pytest
import torch

from dspark_mini import build_model, get_config
from dspark_mini.drafters import DSparkDrafter
from dspark_mini.speculative import ACCEPTED, NOT_VERIFIED, REJECTED, Round
from dspark_mini.tokenizer import default_tokenizer
from lab.evaluation.quality import collect_rounds, decay, eval_prompts, speed, summarize, threshold_sweep
from lab.realtext import texts


def fake_round(n: int, conf: list[float]) -> Round:
    k = len(conf)
    status = [ACCEPTED] * n + ([REJECTED] if n < k else []) + [NOT_VERIFIED] * max(0, k - n - 1)
    return Round(0, 5, [7] * k, [0.5] * k, conf, [0.5] * k, [7] * (k + 1), status, n, 9, "bonus", [7] * n + [9])


def test_threshold_sweep_by_hand() -> None:
    rounds = [fake_round(3, [0.9, 0.8, 0.2]), fake_round(0, [0.3, 0.9, 0.9]), fake_round(1, [0.95, 0.5, 0.1])]
    sweep = {p["threshold"]: p for p in threshold_sweep(rounds, [0.0, 0.4, 0.9])}
    # t = 0: everything verified → verified 4 per round, τ = n + 1
    assert sweep[0.0]["verified_per_round"] == 4 and sweep[0.0]["tau"] == pytest.approx((4 + 1 + 2) / 3)
    # t = 0.4: rounds 1 and 3 stop before position 3 (ℓ = 2), round 2 before position 1 (ℓ = 0)
    assert sweep[0.4]["verified_per_round"] == pytest.approx((3 + 1 + 3) / 3)
    assert sweep[0.4]["tau"] == pytest.approx((3 + 1 + 2) / 3) and sweep[0.4]["verify_rate"] == pytest.approx(6 / 7)
    # t = 0.9: ℓ = 1, 0, 1 → kept min(n, ℓ) = 1, 0, 1
    assert sweep[0.9]["tau"] == pytest.approx((2 + 1 + 2) / 3)
    assert sweep[0.9]["verified_per_round"] == pytest.approx((2 + 1 + 2) / 3)


def test_summary_and_decay() -> None:
    rounds = [fake_round(3, [0.5] * 3), fake_round(1, [0.5] * 3), fake_round(0, [0.5] * 3), fake_round(2, [0.5] * 3)]
    s = summarize(rounds)
    assert s["tau"] == pytest.approx((4 + 2 + 1 + 3) / 4)
    # position 1: 3 of 4 kept; position 2: of the 3 that reached it, 2 kept; position 3: 1 of 2
    assert s["cond_accept"] == pytest.approx([3 / 4, 2 / 3, 1 / 2])
    assert s["cum_accept"] == pytest.approx([3 / 4, 2 / 4, 1 / 4])
    assert decay([0.8, 0.6, 0.4]) == pytest.approx(0.3) and decay([0.8, None]) == 0.0


def test_eval_prompts_are_held_out_lines() -> None:
    p = eval_prompts("code", 5, 10)
    assert p.shape == (5, 10) and p.dtype == torch.long
    assert torch.equal(p, eval_prompts("code", 5, 10))  # deterministic
    assert not torch.equal(p, eval_prompts("code", 5, 10, seed=1))
    tok = default_tokenizer()
    # each prompt is the start of a line of a held-out (test) code document: its first 10 tokens
    starts = {tuple(tok.encode(line.strip())[:10]) for doc in texts("code", "test") for line in doc.split("\n")}
    assert all(tuple(row.tolist()) in starts for row in p)
    with pytest.raises(ValueError, match="domain = 'poetry' is invalid"):
        eval_prompts("poetry", 2)
    with pytest.raises(ValueError, match="n = 0 is invalid"):
        eval_prompts("code", 0)


def test_collect_rounds_and_speed_on_a_small_model() -> None:
    torch.set_num_threads(1)
    m = build_model(get_config("lab"), seed=0)
    prompts = eval_prompts("sums", 3, 8)
    rounds = collect_rounds(m, DSparkDrafter(), prompts, 6, 1.0, batch=2)
    assert rounds and all(1 <= r.tau <= r.verify_len + 1 for r in rounds)
    s = speed(m, DSparkDrafter(), prompts[:1], 6)
    assert (
        s["plain_tok_s"] > 0 and s["spec_tok_s"] > 0 and s["ratio"] == pytest.approx(s["spec_tok_s"] / s["plain_tok_s"])
    )

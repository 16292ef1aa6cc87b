"""`dspark-lab eval` on the shipped weights: the JSON it writes, the tables, and clear errors."""

from __future__ import annotations

import json

import pytest

from lab.cli import main
from lab.realtext import DOMAINS

SMALL = ["--prompts", "1", "--max-new-tokens", "6", "--speed-prompts", "1"]


def test_eval_json_has_tau_cond_accept_and_the_speed_ratio(capsys) -> None:
    assert main(["eval", "--drafters", "dspark,mtp1", *SMALL, "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert set(out["drafters"]) == {"dspark", "mtp1"}
    for name, k in (("dspark", 5), ("mtp1", 1)):
        rows = out["drafters"][name]
        for domain in DOMAINS:
            r = rows[domain]
            assert set(r["tau"]) == {"t1", "greedy"} and all(1 <= t <= k + 1 for t in r["tau"].values())
            assert len(r["cond_accept"]["t1"]) == k and len(r["cond_accept"]["greedy"]) == k
            s = r["tokens_per_s"]
            assert r["tokens_per_s_ratio"] == pytest.approx(s["speculative"] / s["plain"])
        mean = sum(rows[d]["tau"]["t1"] for d in DOMAINS) / len(DOMAINS)
        assert rows["mean_tau"]["t1"] == pytest.approx(mean)
    assert "threshold_sweep" in out["drafters"]["dspark"]["sums"]  # a confidence head: the Figure 5 sweep
    assert "threshold_sweep" not in out["drafters"]["mtp1"]["sums"]
    assert out["conditions"]["n_prompts"] == 1 and out["conditions"]["threads"] == 1


def test_eval_tables_in_vietnamese(capsys) -> None:
    assert main(["eval", "--drafters", "dflash", *SMALL, "--lang", "vi"]) == 0
    out = capsys.readouterr().out
    assert "độ dài chấp nhận τ" in out and "token/giây" in out and "dflash · vi" in out


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["eval", "--drafters", "medusa"], "drafter = 'medusa' is invalid: allowed 'dspark'"),
        (["eval", "--drafters", " , "], "--drafters is empty"),
        (["eval", "--weights-dir", "/nonexistent/weights"], "target.safetensors is missing"),
        (["eval", "--drafters", "dspark", "--prompts", "0"], "--prompts = 0 is invalid: allowed an integer in 1..1000"),
        (
            ["eval", "--drafters", "dspark", "--prompts", "2", "--speed-prompts", "3"],
            "--speed-prompts = 3 is invalid: allowed an integer in 1..2",
        ),
    ],
)
def test_eval_bad_input(capsys, argv, needle) -> None:
    assert main(argv) == 2
    assert needle in " ".join(capsys.readouterr().err.split())


def eval_view(k: int = 2) -> dict:
    """A small `eval` view by hand (one drafter with a confidence head): what render_eval lays out."""
    row = {
        "tau": {"t1": 2.0, "greedy": 2.5},
        "cond_accept": {"t1": [0.5] * k, "greedy": [0.6] * k},
        "decay": {"t1": 0.1, "greedy": 0.0},
        "threshold_sweep": [{"threshold": 0.5, "verified_per_round": 1.5, "tau": 2.0, "verify_rate": 0.7}],
        "tokens_per_s": {"plain": 10.0, "speculative": 20.0},
        "tokens_per_s_ratio": 2.0,
    }
    conditions = {"n_prompts": 1, "max_new_tokens": 6, "seed": 0, "threads": 1, "torch": "x", "cpu": "c", "speed": "s"}
    drafter = {d: row for d in DOMAINS} | {"mean_tau": {"t1": 2.0, "greedy": 2.5}}
    return {"drafters": {"dspark": drafter}, "conditions": conditions}


def test_eval_headers_follow_the_language() -> None:
    import io
    import re

    from rich.console import Console

    from lab.evaluation.cli import render_eval

    def screen(lang: str) -> str:
        buf = io.StringIO()
        render_eval(Console(file=buf, width=200, no_color=True), eval_view(), lang)
        return buf.getvalue()

    english = ["drafter · domain", "plain tok/s", "speculative tok/s", "verified / round", "verify rate", "conditions:"]
    en, vi = screen("en"), screen("vi")
    assert all(h in en for h in english) and re.search(r"\bmean\b", en) and re.search(r"\bdecay\b", en)
    assert not [h for h in english if h in vi]
    assert not re.search(r"\b(mean|decay|ratio|prompts|thread)\b", vi), vi
    for h in ("bộ vẽ · miền", "thường token/giây", "suy đoán token/giây", "tỉ lệ được verify", "điều kiện chạy:"):
        assert h in vi

"""lab/evaluation/perplexity.py and `dspark-lab eval --perplexity`: scores against a naive per-token reference."""

from __future__ import annotations

import json
import math
from collections import Counter

import pytest
import torch

from dspark_mini import build_model, get_config, get_tokenizer
from lab.cli import main
from lab.evaluation.perplexity import perplexity, token_log_probs, unigram_log_probs

TEXT = "User: Xin chào! Bot: Chào bạn, hôm nay bạn học gì? for i in range(5): print(i) 7+12=19, 12+7=19\n" * 3


@pytest.fixture(scope="module")
def small():
    """An untrained lab model that holds only 32 positions, so the text needs several windows."""
    return build_model(get_config("lab", max_seq_len=32), seed=3).eval()


def test_every_token_is_scored_once_with_the_context_its_window_gives(small):
    tok = get_tokenizer(small.cfg)
    ids = tok.encode(TEXT)
    width, half = 32, 16
    assert len(ids) > 3 * width
    got = token_log_probs(small, ids)
    assert got.shape == (len(ids) - 1,)
    for i in range(1, len(ids)):  # token i is scored by window k = max(0, i // half − 1), which starts at k · half
        start = max(0, i // half - 1) * half
        assert start < i <= start + width - 1 and (start == 0 or i >= start + half)
        with torch.no_grad():
            ref = small(torch.tensor([ids[start:i]])).logits.double().log_softmax(-1)[0, -1, ids[i]]  # x_<i → x_i
        assert abs(float(got[i - 1]) - float(ref)) < 1e-9, i


def test_unigram_is_add_one_over_the_training_counts():
    train = torch.tensor([5, 5, 7, 1, 5])
    lp = unigram_log_probs(train, 10)
    counts = Counter(train.tolist())
    for v in range(10):
        assert math.isclose(float(lp[v]), math.log((counts[v] + 1) / (5 + 10)), rel_tol=1e-12)


def test_the_report_agrees_with_its_parts(small):
    tok = get_tokenizer(small.cfg)
    uni = unigram_log_probs(torch.tensor(tok.encode("hello world")), small.cfg.vocab_size)
    r = perplexity(small, tok, TEXT, uni)
    ids = tok.encode(TEXT)
    assert r["tokens"] == len(ids) - 1 and r["bytes"] == len(TEXT.encode())
    nll = -float(token_log_probs(small, ids).sum())
    assert math.isclose(r["model_ppl"], math.exp(nll / r["tokens"]), rel_tol=1e-12)
    assert math.isclose(r["ratio"], r["model_ppl"] / r["unigram_ppl"], rel_tol=1e-9)
    assert math.isclose(r["model_bits_per_byte"], nll / math.log(2) / r["bytes"], rel_tol=1e-12)


def test_eval_perplexity_json_on_the_shipped_set(tmp_path, capsys):
    f = tmp_path / "t.txt"
    f.write_text(TEXT, encoding="utf-8")
    assert main(["eval", "--perplexity", str(f), "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    assert {"tokens", "model_ppl", "unigram_ppl"} <= set(r) and r["tokens"] > 0
    assert r["model_ppl"] < r["unigram_ppl"]  # the trained target knows its own corpus better than word counts
    assert main(["eval", "--perplexity", str(f), "--lang", "vi"]) == 0
    assert "độ hỗn loạn" in capsys.readouterr().out


@pytest.mark.parametrize(
    "content, why",
    [(None, "is not a regular file"), (b"", "has 0 bytes: allowed 1..10,000,000"), (b"\xff\xfe", "is not UTF-8")],
)
def test_bad_files_are_named(tmp_path, capsys, content, why):
    f = tmp_path / "t.txt"
    if content is not None:
        f.write_bytes(content)
    assert main(["eval", "--perplexity", str(f)]) == 2
    err = capsys.readouterr().err
    assert "--perplexity" in err and why in err
    assert main(["eval", "--perplexity", str(f), "--lang", "vi"]) == 2
    assert "chỉ nhận" in capsys.readouterr().err

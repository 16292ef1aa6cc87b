"""Ragged batched verify and `dspark-lab serve`: many requests at their own cache lengths in one forward,
each committing its own verdict, every cache what plain decoding leaves, greedy output = plain decoding."""

from __future__ import annotations

import copy
import json

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from dspark_mini import build_model, get_config
from dspark_mini.model import forward_ragged
from dspark_mini.speculative import NOT_SENT, draft_requests, generate_plain, verify_ragged
from lab.cli import main
from lab.evaluation.quality import eval_prompts
from lab.realtext import DOMAINS
from lab.serving.serve import serve
from lab.weights import lab_model
from tests.helpers import assert_same_snapshot

N_NEW = 16


@pytest.fixture(scope="module")
def trained():
    return lab_model("trained").eval()


@pytest.fixture(scope="module")
def prompts_and_plain(trained):
    """21 held-out prompts of three domains, cut to different lengths (3..10 tokens), and each one's plain
    greedy continuation — the reference every policy and R must reproduce token for token."""
    ps = [p.tolist() for d in DOMAINS for p in eval_prompts(d, 7, 10, seed=11)]
    ps = [p[: 3 + (i * 5) % 8] for i, p in enumerate(ps)]  # ragged: continuous batching mixes lengths
    plain = [generate_plain(trained, torch.tensor([p]), N_NEW).tokens[0] for p in ps]
    return ps, plain


# ---- the packed forward ------------------------------------------------------------------------------


def test_packed_forward_equals_each_request_alone(trained):
    """R requests at cache lengths 5, 17, 33, 9 with 3, 6, 1, 4 rows: each segment's logits and pending writes
    are those of its own forward (up to float64 summation order in the batched matmuls)."""
    g = torch.Generator().manual_seed(0)
    caches, rows = [], []
    with torch.no_grad():
        for L, n in [(5, 3), (17, 6), (33, 1), (9, 4)]:
            c = trained.new_cache(1)
            trained(torch.randint(4, 500, (1, L), generator=g), cache=c)
            caches.append(c)
            rows.append(torch.randint(4, 500, (1, n), generator=g))
        outs = forward_ragged(trained, rows, caches)
        for t, c, out in zip(rows, caches, outs, strict=True):
            ref = trained(t, cache=c, commit=False)
            assert out.logits.shape == (1, t.size(1), trained.cfg.vocab_size)
            assert float((ref.logits - out.logits).abs().max()) < 1e-12
            assert sorted(ref.pending.window) == sorted(out.pending.window)
            for layer in ref.pending.window:
                assert float((ref.pending.window[layer] - out.pending.window[layer]).abs().max()) < 1e-12
            assert c.length == ref.pending.start  # nothing was committed


def test_bad_ragged_batches_are_refused(trained):
    c = trained.new_cache(1)
    with pytest.raises(ValueError, match="a cache appears twice"):
        forward_ragged(trained, [torch.tensor([[5]]), torch.tensor([[6]])], [c, c])
    with pytest.raises(ValueError, match="allowed rows"):
        forward_ragged(trained, [torch.tensor([[5], [6]])], [c])
    with torch.no_grad():
        trained(torch.tensor([[5, 6, 7]]), cache=c)
    d = draft_requests(trained, [c], [8], 0.0, None)
    with pytest.raises(ValueError, match="verify length"):
        verify_ragged(trained, [c], [8], d, [9], 0.0, None)


# ---- rollback under ragged commits (property) -------------------------------------------------------


@pytest.fixture(scope="module")
def rollback_model():
    return build_model(get_config("lab"), seed=4).eval()


@st.composite
def ragged_case(draw):
    V = 510
    reqs = []
    for _ in range(draw(st.integers(1, 3))):
        prompt = draw(st.lists(st.integers(0, V - 1), min_size=1, max_size=8))
        rounds = []
        for _ in range(draw(st.integers(1, 2))):
            ell = draw(st.integers(0, 5))  # verify length: rows [anchor, d1..dℓ]
            rows = draw(st.lists(st.integers(0, V - 1), min_size=ell + 1, max_size=ell + 1))
            rounds.append((rows, draw(st.integers(0, ell))))  # n kept of the ℓ verified
        reqs.append((prompt, rounds))
    return reqs


@settings(max_examples=100, deadline=None, derandomize=True)
@given(case=ragged_case())
def test_ragged_partial_commits_equal_plain_decoding(rollback_model, case):
    """Requests at their own lengths, each with its own ℓ and verdict per round, verified in one packed forward:
    each cache equals what plain decoding of that request's committed tokens leaves."""
    m = rollback_model
    with torch.no_grad():
        spec, plain = [], []
        for prompt, _ in case:
            c = m.new_cache(1)
            m(torch.tensor([prompt]), cache=c)
            spec.append(c)
            plain.append(copy.deepcopy(c))
        for i in range(max(len(r) for _, r in case)):
            live = [r for r, (_, rounds) in enumerate(case) if i < len(rounds)]
            rows = [torch.tensor([case[r][1][i][0]]) for r in live]
            outs = forward_ragged(m, rows, [spec[r] for r in live])
            for r, out in zip(live, outs, strict=True):
                tokens, n = case[r][1][i]
                spec[r].commit(out.pending, n + 1)
                for j, tok in enumerate(tokens[: n + 1]):
                    logits = m(torch.tensor([[tok]]), cache=plain[r]).logits[0, -1]
                    assert float((out.logits[0, j] - logits).abs().max()) <= 1e-10
        for s, p in zip(spec, plain, strict=True):
            assert s.length == p.length
            assert_same_snapshot(s.snapshot(), p.snapshot(), atol=1e-10)


# ---- serve: lossless for every policy and R ----------------------------------------------------------


@pytest.mark.parametrize("policy", ["fixed", "threshold", "dspark", "dspark-async"])
@pytest.mark.parametrize("requests", [1, 3, 8])
def test_greedy_serve_equals_plain_decoding(trained, prompts_and_plain, policy, requests):
    prompts, plain = prompts_and_plain
    res = serve(trained, prompts, requests=requests, policy=policy, max_new_tokens=N_NEW)
    assert [r.index for r in res.requests] == list(range(len(prompts)))
    for r, want in zip(res.requests, plain, strict=True):
        assert r.tokens[:N_NEW] == want, (policy, requests, r.index)
        assert all(x.verify_len is not None and 0 <= x.verify_len <= 5 for x in r.rounds)
    assert max(res.batch_tokens) <= requests * 6  # never more than R full blocks in one forward


def test_the_scheduler_cuts_verify_lengths_and_marks_what_was_not_sent(trained, prompts_and_plain):
    """Under dspark the rounds carry ℓ < k somewhere (the last drafts, least likely to survive, stay home), and
    those positions say 'not sent'; fixed always sends all k."""
    prompts, _ = prompts_and_plain
    fixed = serve(trained, prompts[:6], requests=6, policy="fixed", max_new_tokens=N_NEW)
    dsp = serve(trained, prompts[:6], requests=6, policy="dspark", max_new_tokens=N_NEW)
    full = [x for r in fixed.requests for x in r.rounds if len(r.tokens) - len(x.committed) < N_NEW - 5]
    assert full and all(x.verify_len == 5 and NOT_SENT not in x.status for x in full)
    cut = [x for r in dsp.requests for x in r.rounds if x.verify_len < 5]
    assert cut and all(x.status[x.verify_len :] == [NOT_SENT] * (5 - x.verify_len) for x in cut)


def test_sampled_serve_is_seeded(trained, prompts_and_plain):
    prompts, _ = prompts_and_plain
    a = serve(trained, prompts[:4], requests=2, temperature=1.0, seed=5, max_new_tokens=12)
    b = serve(trained, prompts[:4], requests=2, temperature=1.0, seed=5, max_new_tokens=12)
    assert [r.tokens for r in a.requests] == [r.tokens for r in b.requests]


# ---- the CLI --------------------------------------------------------------------------------------------


def test_serve_json_matches_generate_for_a_prompts_file(tmp_path, capsys):
    f = tmp_path / "p.txt"
    f.write_text("The model predicts the next token.\n\n1 + 2 =\n", encoding="utf-8")
    assert main(["serve", "--prompts-file", str(f), "--requests", "2", "--max-new-tokens", "12", "--json"]) == 0
    *rows, report = [json.loads(line) for line in capsys.readouterr().out.splitlines()]  # requests, then the summary
    for key in ("policy", "requests", "tokens_per_s", "mean_verify_len", "batch_tokens_per_round", "conditions"):
        assert key in report
    by_prompt = sorted(rows, key=lambda r: r["index"])
    assert [r["prompt"] for r in by_prompt] == ["The model predicts the next token.", "1 + 2 ="]
    for r in rows:
        assert {"prompt", "tokens", "rounds", "mean_accepted_length"} <= set(r)
        assert main(["generate", "--prompt", r["prompt"], "--max-new-tokens", "12", "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["plain"]["tokens"] == r["tokens"]


@pytest.mark.parametrize(
    "argv, needle",
    [
        (["serve", "--requests", "0"], "--requests = 0 is invalid"),
        (["serve", "--requests", "2000"], "--requests = 2000 is invalid"),
        (["serve", "--threshold", "1.5"], "--threshold = 1.5 is invalid"),
        (["serve", "--max-new-tokens", "0"], "--max-new-tokens = 0 is invalid"),
        (["serve", "--prompts-file", "{empty}"], "--prompts-file"),
        (["serve", "--prompts-file", "/nonexistent.txt"], "--prompts-file"),
        (["serve", "--sps-table", "{empty}"], "--sps-table"),
    ],
)
def test_bad_serve_input_is_one_clear_line(argv, needle, tmp_path, capsys):
    empty = tmp_path / "empty.txt"
    empty.write_text("\n  \n", encoding="utf-8")
    code = main([a.replace("{empty}", str(empty)) for a in argv])
    err = capsys.readouterr().err
    assert code == 2 and needle in err and "Traceback" not in err, err


def test_an_unknown_policy_is_refused_by_name(capsys):
    with pytest.raises(SystemExit) as e:
        main(["serve", "--policy", "greedy"])
    assert e.value.code == 2 and "--policy" in capsys.readouterr().err

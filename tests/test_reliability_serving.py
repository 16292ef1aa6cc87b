"""Issue 19, item 4: serving and sweeps that free what they finished.

`serve` releases a finished request's cache the moment it finishes (its slot takes the next prompt) and streams
its result then (JSON lines); what stays alive is bounded by the slots, not by the prompts. `profile --sps`
measures one batch size at a time. `serve`, `schedule` and `profile --sps` print their estimated work first and
their progress on stderr under --json. Nothing here reads a timing value: live caches are counted with weak
references, memory with tracemalloc's peak, the estimate by its counts.
"""

from __future__ import annotations

import contextlib
import gc
import heapq
import io
import json
import tracemalloc
import weakref

import pytest
import torch

from dspark_mini import get_tokenizer
from dspark_mini.speculative import generate_plain
from lab import style as lab_style
from lab.cli import main
from lab.serving import serve_cli
from lab.serving.profile_sps import profile_sps
from lab.serving.serve import Reservoir, serve_stream
from lab.weights import lab_model


@pytest.fixture(scope="module")
def trained():
    return lab_model("trained").eval()


@pytest.fixture
def counted_caches(trained, monkeypatch):
    """Every cache the model makes, as weak references in order, and how many were alive at each new one."""
    made: list[weakref.ref] = []
    alive_before: list[int] = []
    real = type(trained).new_cache

    def new_cache(batch: int = 1):
        alive_before.append(sum(r() is not None for r in made))
        cache = real(trained, batch)
        made.append(weakref.ref(cache))
        return cache

    monkeypatch.setattr(trained, "new_cache", new_cache)
    return made, alive_before


@pytest.fixture
def served_model(trained, monkeypatch):
    """The CLI's `serve` / `profile --sps` on the module's model (no reload per call)."""
    monkeypatch.setattr("lab.weights.lab_model", lambda *a, **k: trained)  # profile --sps
    monkeypatch.setattr("lab.realscale.run.run_model", lambda *a, **k: trained)  # serve
    return trained


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(list(argv))
    return code, out.getvalue(), err.getvalue()


def prompts_file(tmp_path, lines: list[str], name: str = "p.txt"):
    path = tmp_path / name
    path.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return path


PROMPTS = ["1 + 2 =", "The model predicts the next token.", "ab", "def f(x):", "User: hi", "Q", "x = 3 * 4"]


# ---- serve: caches bounded by the slots ------------------------------------------------------------------------
def test_serve_frees_each_finished_cache_before_the_next_prompt_runs(trained, counted_caches):
    """At every admission at most R − 1 caches are alive (the free slot's was released), and a request's cache is
    collected by the time it is handed over — while later prompts are still being served."""
    made, alive_before = counted_caches
    tok = get_tokenizer(trained.cfg)
    prompts = [tok.encode(p) for p in PROMPTS * 2]  # 14 prompts, 3 slots
    handed = []
    for req in serve_stream(trained, prompts, requests=3, max_new_tokens=6):
        assert req.cache is None and made[req.index]() is None, req.index  # released before it is handed over
        handed.append(req.index)
        assert sum(r() is not None for r in made) <= 3  # never more caches than slots
    assert sorted(handed) == list(range(len(prompts))) and len(made) == len(prompts)
    assert max(alive_before) <= 2  # a new prompt only ever takes a slot that was freed


def test_serve_keeps_no_request_once_it_is_handed_over(trained):
    """The stream holds a finished request (and its rounds) only until it is handed over: however many prompts
    were served, at most R of them are alive, and none once the stream ends."""
    tok = get_tokenizer(trained.cfg)
    prompts = [tok.encode(p) for p in PROMPTS * 3]  # 21 prompts, 4 slots
    handed: list[weakref.ref] = []
    rounds: list[weakref.ref] = []
    stream = serve_stream(trained, iter(prompts), requests=4, max_new_tokens=5)
    for req in stream:
        handed.append(weakref.ref(req))
        rounds += [weakref.ref(x) for x in req.rounds]
        del req  # the caller lets it go
        assert sum(r() is not None for r in handed) <= 4
    assert len(handed) == len(prompts) and all(r() is None for r in handed + rounds)


# ---- serve --json: JSON lines in order of finishing ------------------------------------------------------------
def finishing_order(rounds: list[int], slots: int) -> tuple[list[int], int, int]:
    """Continuous batching replayed from each request's round count: the first `slots` prompts start at round 0,
    each next prompt starts in the round after a slot frees; requests finishing in the same round leave in prompt
    order. → (prompt indices in order of finishing, rounds the run takes, admission times = prefill forwards)."""
    heap = [(rounds[i], i) for i in range(min(slots, len(rounds)))]
    heapq.heapify(heap)
    order, last, starts = [], 0, {0}
    nxt = len(heap)
    while heap:
        finish, i = heapq.heappop(heap)
        order.append(i)
        last = max(last, finish)
        if nxt < len(rounds):
            heapq.heappush(heap, (finish + rounds[nxt], nxt))
            starts.add(finish)
            nxt += 1
    return order, last, len(starts)


def test_serve_json_streams_one_line_per_request_in_order_of_finishing(trained, served_model, tmp_path):
    """Every stdout line is a JSON object: one per request, in the order the requests finished (replayed from
    their round counts), then the summary, whose numbers are those of the lines; greedy tokens = plain decoding."""
    path = prompts_file(tmp_path, PROMPTS[:2] + [""] + PROMPTS[2:])  # a blank line is skipped
    code, out, err = run("serve", "--prompts-file", str(path), "--requests", "2", "--max-new-tokens", "10", "--json")
    assert code == 0, err
    *rows, summary = [json.loads(line) for line in out.splitlines()]
    assert {r["kind"] for r in rows} == {"request"} and summary["kind"] == "summary"
    assert sorted(r["index"] for r in rows) == list(range(len(PROMPTS)))
    order, makespan, admissions = finishing_order([r["rounds"] for r in sorted(rows, key=lambda r: r["index"])], 2)
    assert [r["index"] for r in rows] == order
    assert summary["rounds"] == makespan  # a freed slot never sat out a round
    assert summary["prefill_forwards"] == admissions  # the prompts admitted together shared one prefill forward
    tok = get_tokenizer(trained.cfg)
    for r in rows:
        assert r["prompt"] == PROMPTS[r["index"]]
        plain = generate_plain(trained, torch.tensor([tok.encode(r["prompt"])]), 10).tokens[0]
        assert r["tokens"] == plain, r["index"]
    assert summary["requests"] == len(rows) and summary["new_tokens"] == sum(len(r["tokens"]) for r in rows)
    assert summary["rounds"] == sum(summary["batch_tokens_per_round"]["rounds_at"].values())
    ell = sum(r["mean_verify_len"] * r["rounds"] for r in rows) / sum(r["rounds"] for r in rows)
    assert summary["mean_verify_len"] == pytest.approx(ell)


def test_many_tiny_prompts_finish_and_memory_does_not_grow_with_their_count(served_model, tmp_path, monkeypatch):
    """300 one-character prompts are all served, and the Python memory still alive when the summary is written
    (after a full collection: no garbage, no free lists) is that of serving 50 — the file is read line by line,
    every finished request is written and let go, the summary is aggregates. (The old serve kept ≈ 6 KB of
    Python objects a prompt until the end, besides its 0.44 MB cache.) Besides, the peak of 300 is within a small
    factor of the peak of 50."""
    letters = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
    real = lab_style.print_json
    seen: dict[str, int] = {}

    def print_json(report, *args, **kwargs):
        if report.get("kind") == "summary":
            gc.collect()
            seen["live"] = tracemalloc.get_traced_memory()[0]
        real(report, *args, **kwargs)

    monkeypatch.setattr(lab_style, "print_json", print_json)

    def measure(n: int) -> tuple[int, int]:
        path = prompts_file(tmp_path, [letters[i % len(letters)] for i in range(n)], f"p{n}.txt")
        out = tmp_path / f"out{n}.jsonl"
        argv = ["serve", "--prompts-file", str(path), "--requests", "8", "--max-new-tokens", "2", "--json"]
        with open(out, "w", encoding="utf-8") as f, contextlib.redirect_stdout(f):
            with contextlib.redirect_stderr(io.StringIO()):
                gc.collect()
                tracemalloc.start()
                try:
                    code = main(argv)
                    peak = tracemalloc.get_traced_memory()[1]
                finally:
                    tracemalloc.stop()
        assert code == 0
        lines = out.read_text(encoding="utf-8").splitlines()
        assert len(lines) == n + 1 and json.loads(lines[-1])["requests"] == n
        return seen["live"], peak

    measure(8)  # the first run pays for lazy imports and caches
    (live_small, peak_small), (live_big, peak_big) = measure(50), measure(300)
    assert live_big - live_small < 250 * 512, (live_small, live_big)  # < 0.5 KB a prompt
    assert peak_big < 2 * peak_small, (peak_small, peak_big)


# ---- the prompts file's bounds ---------------------------------------------------------------------------------
def test_a_prompts_file_beyond_its_bounds_is_one_line_before_anything_runs(served_model, tmp_path, monkeypatch):
    long_line = prompts_file(tmp_path, ["ok", "x" * (serve_cli.MAX_LINE_CHARS + 1)], "long.txt")
    code, out, err = run("serve", "--prompts-file", str(long_line), "--json")
    err = " ".join(err.split())
    assert code == 2 and out == "" and "Traceback" not in err
    assert f"--prompts-file = '{long_line}' line 2 is longer than 4,096 characters" in err
    monkeypatch.setattr(serve_cli, "MAX_PROMPTS", 3)
    many = prompts_file(tmp_path, ["a", "b", "", "c", "d"], "many.txt")
    code, out, err = run("serve", "--prompts-file", str(many))
    err = " ".join(err.split())
    assert code == 2 and out == "" and f"--prompts-file = '{many}' holds more than 3 prompts: allowed at most 3" in err


# ---- profile --sps: one size at a time ---------------------------------------------------------------------
def test_profile_sps_holds_one_size_of_caches_at_a_time(trained, counted_caches):
    """Each size's caches are made only after the previous size's are gone: peak memory = the largest size's."""
    made, alive_before = counted_caches
    table = profile_sps([24, 1, 12, 6], reps=2, cache_len=8, model=trained)
    assert table.batch_tokens == (1, 6, 12, 24) and all(s["n"] == 2 for s in table.step_stats)
    assert len(made) == 4 and alive_before == [0, 0, 0, 0]
    assert all(r() is None for r in made)
    assert "one size at a time" in table.conditions["order"]


# ---- the estimate first, the progress on stderr ----------------------------------------------------------------
def test_schedule_prints_its_estimate_first_and_its_progress_on_stderr():
    argv = ["schedule", "--requests", "1,4", "--policies", "fixed,dspark", "--rounds", "3"]
    code, out, err = run(*argv)
    assert code == 0, err
    first = out.splitlines()[0]
    want = "2 loads R = 1 … 4 × 2 policies × 3 tables × 3 rounds → 36 simulated rounds over 90 request-rounds"
    assert first.startswith("estimate: ") and want in first
    code, out, err = run(*argv, "--json", "--lang", "vi")
    assert code == 0, err
    report = json.loads(out)  # stdout is the JSON alone
    assert report["estimate"]["counts"]["plans"] == 36 and report["estimate"]["counts"]["request_rounds"] == 90
    lines = err.splitlines()
    assert lines[0].startswith("ước tính: 2 mức tải R = 1 … 4") and "36 vòng mô phỏng" in lines[0]
    assert "90/90" in err  # the bar's last state


def test_serve_prints_its_estimate_first_and_its_progress_on_stderr(served_model, tmp_path):
    path = prompts_file(tmp_path, PROMPTS)
    argv = ["serve", "--prompts-file", str(path), "--requests", "3", "--max-new-tokens", "8"]
    code, out, err = run(*argv, "--json")
    assert code == 0, err
    *rows, summary = [json.loads(line) for line in out.splitlines()]
    n = len(PROMPTS)
    per = -(-7 // 3.5)  # ⌈(8 − 1) / τ⌉ rounds a request at τ = 3.5
    drafts = int(n * per)
    line = err.splitlines()[0]
    assert line.startswith(f"estimate: {n} prompts × 8 new tokens, R = 3 in flight → ≤ {n} prefill forwards")
    assert f"≈ {drafts} draft passes and ≈ {-(-drafts // 3)} verify forwards" in line
    assert summary["estimate"]["counts"]["prefills"] == n == len(rows) and 1 <= summary["prefill_forwards"] <= n
    assert f"{n * 8}/{n * 8}" in err  # the bar counted every new token
    code, out, err = run(*argv, "--lang", "vi")
    assert code == 0, err
    assert out.splitlines()[0].startswith(f"ước tính: {n} lời nhắc × 8 token mới")
    assert out.splitlines()[1] == "serve · chính sách dspark · R = 3"
    assert sum(line.startswith("#") for line in out.splitlines()) == n  # a line per request as it finished


def test_profile_sps_prints_its_estimate_first(served_model, tmp_path):
    out_path = str(tmp_path / "t.json")
    code, out, err = run("profile", "--sps", "--batch-tokens", "1,6,12", "--reps", "2", "--out", out_path, "--json")
    assert code == 0, err
    report = json.loads(out)
    line = err.splitlines()[0]
    assert line.startswith("estimate: 3 sizes B = 1 … 12, one at a time, 1 warm-up + 2 reps each")
    assert "3 prefill forwards and 9 verify forwards over 57 batch tokens" in line  # (1 + 6 + 12) × 3
    assert report["estimate"]["counts"]["forwards"] == 9 and "57/57" in err


# ---- the summary's parts ---------------------------------------------------------------------------------------
def test_the_scheduler_time_sample_is_bounded_and_exact_while_small():
    r = Reservoir(size=100)
    for x in range(51):
        r.add(float(x))
    assert r.median() == 25.0  # every value kept: the exact (upper) median
    for x in range(10_000):
        r.add(float(x))
    assert len(r.values) == 100 and r.seen == 10_051
    assert Reservoir().median() is None

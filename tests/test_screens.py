"""What the screens compute and show (lab/lesson/walk.py views, lab/screens/render.py, lab/evaluation/profiling.py):

- every step shows at least one check, and every check compares two different computations — so each one turns ✗
  when one of its inputs is tampered with (proved below, check by check);
- step 6B shows the numbers verify used: at T = 0 the one-hot ones, and min(1, p_t/p_d) recomputed from them gives
  verify's decisions; at T > 0 "sampled, not argmax" appears exactly where a token is not the target's argmax;
  drafts past the verify length ℓ are "not sent to verify", with no target number; the scheduler table says what
  `dspark` (Algorithm 1) would verify of this round under load, checked against a plain loop;
- the output reads at 80 columns without colour (no word broken across lines, a marker per strip token) and
  `--lang vi` prints no English UI strings.
"""

from __future__ import annotations

import copy
import dataclasses
import io
import re

import pytest
import torch
from rich.cells import cell_len
from rich.console import Console

from lab import text as T
from lab.cli import main
from lab.evaluation.profiling import hooked_forward, main_x_error, tap_check
from lab.lesson import notes as N
from lab.lesson import view as V
from lab.lesson import view_6b as V6
from lab.lesson import views as VS
from lab.lesson import walk as W
from lab.lesson.generation import compare
from lab.lesson.steps import STEP_IDS, get_step
from lab.lesson.view import StepView
from lab.lesson.walk import redraft, run_walk
from lab.screens.render import STRIP, render_generate, render_profile, render_view, strip_text, strip_token

SAMPLED = {"en": "sampled, not argmax", "vi": "lấy mẫu, không phải argmax"}


@pytest.fixture(scope="module")
def walk():
    return run_walk(seed=0)


@pytest.fixture(scope="module")
def raw():
    return run_walk(seed=0, weights="untrained")


def view(w: V.Walk, sid: str, lang: str = "en") -> StepView:
    return W.build_views(w, lang, (sid,)).views[sid]


def check(v: StepView, needle: str) -> V.Check:
    found = [c for c in v.checks if needle in c.name]
    assert len(found) == 1, (needle, [c.name for c in v.checks])
    return found[0]


# ---- every step has checks, and they hold ------------------------------------------------------------
@pytest.mark.parametrize("weights, temperature", [("trained", 0.0), ("untrained", 0.0), ("trained", 1.0)])
def test_every_step_has_a_check_and_every_check_holds(weights, temperature):
    w = run_walk(seed=2, weights=weights, temperature=temperature)
    for sid in STEP_IDS:
        v = w.views[sid]
        assert v.checks, f"{sid} has no check"
        for c in v.checks:
            assert c.ok, (sid, c.name, c.value)
    assert {sid: len(v.checks) for sid, v in w.views.items()} == {
        "1A": 1,
        "1B": 2,
        "2A": 1,
        "3A": 2,
        "3B": 1,
        "3C": 1,
        "4A": 1,
        "6A": 2,
        "5A": 2,
        "6B": 4,
    }


def test_checks_are_in_both_languages(walk):
    for sid in STEP_IDS:
        en, vi = view(walk, sid, "en").checks, view(walk, sid, "vi").checks
        assert [c.value for c in en] == [c.value for c in vi]
        assert all(a.name != b.name for a, b in zip(en, vi, strict=True)), sid


# ---- each check can fail: tamper with one input, the check turns ✗ -----------------------------------
def tampered(w: V.Walk) -> V.Walk:
    """The walk with its own copy of the trace (tampering it leaves the fixture alone)."""
    return dataclasses.replace(w, trace=copy.deepcopy(w.trace))


def bump(t: torch.Tensor, index: tuple, by: float) -> None:
    t[index] = t[index] + by


def tamper_1a(w):
    bump(w.trace.data["1A"][-1]["streams"], (0, 3, 2, 0), 1e-3)


def tamper_hash(w):
    bump(w.trace.data["1B"][0]["row_ids"], (0, 5, 2), 1)


def tamper_delta(w):
    bump(w.trace.data["1B"][3]["delta_norm"], (0, 4), 1e-6)


def tamper_comb(w):
    bump(w.trace.data["2A"][1]["ffn_comb"], (0, 2, 1, 3), 1e-2)


def tamper_sources(w):
    del w.trace.data["3B"][3]  # as if layer 3 had not compressed


def tamper_pool(w):
    bump(w.trace.data["3B"][1]["latent_pre_rope"], (0, 2, 7), 1e-6)


def tamper_picks(w):
    scores, picks = w.trace.data["3C"][4]["scores"], w.trace.data["3C"][4]["topk_idxs"]
    left = sorted(set(range(scores.size(-1))) - set(picks[0, -1].tolist()))
    scores[0, -1, left[0]] = scores[0, -1].max() + 1  # an entry left out now outscores the picks


def tamper_causal(w):
    picks = w.trace.data["3C"][1]["topk_idxs"]
    picks[0, 0, -1] = 0  # position 0 cannot see compressed entry 0 yet (it holds tokens 0 and 1)


def tamper_sink(w):
    bump(w.trace.data["4A"][4]["sink_share"], (0, -1, 1), 1e-3)


def tamper_qdq(w):
    d = w.trace.data["6A"][0]
    d["window_kv"] = d["window_kv_raw"] * 1.1  # a 10 % error: more than E4M3's 2⁻⁴


def tamper_topk(w):
    idx = w.trace.data["5A"][2]["indices"]
    idx[0, 7, 0] = next(e for e in range(w.cfg.n_routed_experts) if e not in idx[0, 7].tolist())


def tamper_weights(w):
    bump(w.trace.data["5A"][5]["weights"], (0, 3, 1), 1e-6)


def tamper_main_x(w):
    bump(w.trace.data["6B"][-1]["main_x"], (0, 6, 9), 1e-6)


def tamper_parity(w):
    w.parity = 1e-6


def tamper_status(w):
    status = list(w.round.status)
    status[0] = "rejected" if status[0] == "accepted" else "accepted"
    w.round = dataclasses.replace(w.round, status=status)


def tamper_not_sent(w):  # a draft the target saw, shown as never sent
    status = list(w.round.status)
    status[0] = "not sent"
    w.round = dataclasses.replace(w.round, status=status)


TAMPERS = [
    ("1A", "4 lanes are identical", tamper_1a),
    ("1B", "Engram row ids", tamper_hash),
    ("1B", "‖g·value‖", tamper_delta),
    ("2A", "every column of comb", tamper_comb),
    ("3A", "KV / index sources", tamper_sources),
    ("3B", "compressed entries recomputed", tamper_pool),
    ("3C", "picks ⊆ causal", tamper_picks),
    ("3C", "picks ⊆ causal", tamper_causal),
    ("4A", "window + compressed + sink", tamper_sink),
    ("6A", "rounding bound", tamper_qdq),
    ("5A", "chosen experts", tamper_topk),
    ("5A", "weights =", tamper_weights),
    ("6B", "main_x the draft received", tamper_main_x),
    ("6B", "identical logits", tamper_parity),
    ("6B", "verify's decisions", tamper_status),
    ("6B", "verify's decisions", tamper_not_sent),
]


@pytest.mark.parametrize("sid, needle, tamper", TAMPERS, ids=[f"{s}-{f.__name__}" for s, _, f in TAMPERS])
def test_each_check_turns_red_when_its_input_is_tampered_with(walk, sid, needle, tamper):
    assert check(view(walk, sid), needle).ok
    w = tampered(walk)
    tamper(w)
    assert not check(view(w, sid), needle).ok
    assert check(view(walk, sid), needle).ok  # the fixture is untouched


def test_split_check_fails_when_the_table_misplaces_a_layer(walk, monkeypatch):
    roles = VS.layer_roles

    def one_wrong(cfg):
        out = list(roles(cfg))
        out[3] = dataclasses.replace(out[3], part="decoder")  # layer 3 is the lab's last encoder layer
        return tuple(out)

    assert check(view(walk, "3A"), "encoder/decoder split").ok
    monkeypatch.setattr(VS, "layer_roles", one_wrong)
    assert not check(view(walk, "3A"), "encoder/decoder split").ok


def test_bytes_check_fails_when_a_reported_figure_is_off(walk, monkeypatch):
    real = VS.kv_bytes

    def off(cfg):
        out = dict(real(cfg))
        out["global_per_token"] += 1  # 891 B/token at real scale
        return out

    monkeypatch.setattr(VS, "kv_bytes", off)
    assert not check(view(walk, "6A"), "bytes recomputed").ok


def test_engram_hash_by_hand_matches_the_model_on_many_ids(walk):
    cfg, eng = walk.cfg, walk.model.layers[0].engram
    g = torch.Generator().manual_seed(1)
    comp = torch.randint(0, cfg.engram_compressed_vocab_size, (1, 40), generator=g)
    hist = torch.randint(0, cfg.engram_compressed_vocab_size, (1, cfg.engram_max_ngram_size - 1), generator=g)
    by_hand = VS.engram_rows_by_hand(
        comp[0].tolist(), hist[0].tolist(), eng.multipliers, eng.primes, cfg.engram_n_heads
    )
    assert by_hand == eng.row_ids(comp, hist)[0].tolist()


def test_qdq_bound_is_tight_but_holds():
    from dspark_mini.quant import fp4_qdq, fp8_qdq

    x = torch.randn(64, 64, dtype=torch.float64) * torch.logspace(-3, 2, 64, dtype=torch.float64)[:, None]
    fp8 = VS.qdq_error_ratio(x, fp8_qdq(x, 32), 32, "fp8")
    fp4 = VS.qdq_error_ratio(x, fp4_qdq(x, 16, "e4m3"), 16, "fp4")
    assert 0.5 < fp8 <= 1 and 0.3 < fp4 <= 1  # a correct QDQ uses much of its bound, and never more
    assert VS.qdq_error_ratio(x, fp4_qdq(x, 16, "e4m3"), 16, "fp8") > 1  # FP4 is far coarser than FP8


# ---- the profile's tap check can fail too --------------------------------------------------------------
def test_profile_tap_check_compares_two_forwards(walk):
    model, tokens = walk.model, walk.tokens
    assert tap_check(model, tokens) == 0.0
    main_x = walk.trace.get("6B", "main_x")
    _, hooked = hooked_forward(model, tokens)
    assert main_x_error(model, main_x, hooked) == 0.0
    every = block_inputs(model, tokens)
    assert torch.equal(every[3], hooked[3]) and torch.equal(every[4], hooked[4])
    wrong = {3: every[2], 4: every[4]}  # as if the draft read layer 2 instead of layer 3
    assert main_x_error(model, main_x, wrong) > 1e-3


def block_inputs(model, tokens) -> dict[int, torch.Tensor]:
    """Every block's input stream averaged over the lanes, caught by hooks. The forward is the kind `hooked_forward`
    runs (a fresh cache, commit=False): the cache-less path rounds differently in the last bits on some CPUs."""
    seen = {}
    handles = [
        blk.register_forward_pre_hook(lambda m, a, i=i: seen.__setitem__(i, a[0].mean(dim=2)))
        for i, blk in enumerate(model.layers)
    ]
    try:
        with torch.no_grad():
            model(tokens, cache=model.new_cache(tokens.size(0)), commit=False)
    finally:
        for h in handles:
            h.remove()
    return seen


# ---- 6B: the numbers verify used -------------------------------------------------------------------
DRAFT_TITLE = {"en": "DSpark draft block", "vi": "Khối nháp DSpark"}
SCHED_TITLE = {"en": "Scheduler:", "vi": "Bộ lập lịch:"}


def titled(v: StepView, start: dict[str, str]) -> V.ViewTable:
    found = [t for t in v.tables if t.title.startswith(start[v.lang])]
    assert len(found) == 1, [t.title for t in v.tables]
    return found[0]


def draft_rows(v: StepView) -> tuple[list[str], list[list]]:
    table = titled(v, DRAFT_TITLE)
    return table.columns, table.rows


def test_greedy_table_shows_one_hot_numbers_and_their_ratio_gives_the_verdicts():
    seen = set()
    for prompt, weights, block in (
        (T.DEFAULT_PROMPT, "trained", None),
        ("def f(x):", "trained", None),
        (T.DEFAULT_PROMPT, "untrained", None),
        ("def f(x):", "trained", 2),  # ℓ = 2: the last 3 drafts are not sent to verify
    ):
        w = run_walk(prompt, steps=("6B",), weights=weights, verify_len=block)
        rd = w.round
        cols, rows = draft_rows(w.views["6B"])
        assert rd.block == w.cfg.dspark_block_size and rd.verify_len == (block or rd.block)
        assert len(rows) == rd.block + 1 and cols[-1].startswith("softmax T = 1")  # every drafted token shown
        for i, row in enumerate(rows[:-1]):
            p_d, p_t, ratio, argmax, status = row[2], row[3], row[4], row[6], row[7]
            assert p_d == 1.0
            soft = row[8].split(" / ")
            assert float(soft[0]) == pytest.approx(rd.draft_probs[i], abs=5e-3)  # T = 1, for reference
            seen.add(rd.status[i])
            if i >= rd.verify_len:  # drafted, never shown to the target: no target number at all
                assert rd.status[i] == "not sent" and status == "not sent to verify"
                assert p_t == ratio == argmax == soft[1] == "—"
                continue
            assert p_t in (0.0, 1.0) and (p_t == 1.0) == (rd.draft[i] == rd.target_argmax[i])
            if rd.status[i] == "not verified":
                assert ratio == "—" and status == "not verified"
            else:  # the reader's own recomputation, from the two numbers on screen
                assert ratio == min(1.0, p_t / p_d)
                assert (min(1.0, p_t / p_d) == 1.0) == (rd.status[i] == "accepted") and status == rd.status[i]
            assert float(soft[1]) == pytest.approx(rd.target_probs[i], abs=5e-3)
        assert SAMPLED["en"] not in str(rows)
    assert {"accepted", "rejected", "not verified", "not sent"} <= seen  # every verdict was checked


def sampled_rounds(w: V.Walk, n: int = 12):
    for seed in range(n):
        yield redraft(dataclasses.replace(w, seed=seed), None, 1.0)


@pytest.mark.parametrize("lang", ["en", "vi"])
def test_sampled_not_argmax_is_said_exactly_where_it_happens(walk, lang):
    said = 0
    for w in sampled_rounds(walk):
        w = W.build_views(w, lang, ("6B",))
        rd = w.round
        cols, rows = draft_rows(w.views["6B"])
        assert not cols[-1].startswith("softmax")  # at T > 0 the table holds the numbers verify used
        for i, row in enumerate(rows[:-1]):
            differs = rd.status[i] == "accepted" and rd.draft[i] != rd.target_argmax[i]
            assert (SAMPLED[lang] in row[7]) == differs
            assert row[2] == pytest.approx(rd.draft_probs[i], rel=1e-3)
            said += differs
        differs = rd.next_token != rd.target_argmax[rd.n_accepted]
        assert (SAMPLED[lang] in rows[-1][7]) == differs
        said += differs
    assert said >= 2  # the seeds above do show it


def test_json_6b_holds_what_verify_used(capsys):
    import json

    assert main(["walk", "--json", "--step", "6B", "--temperature", "0", "--verify-len", "3"]) == 0
    out = json.loads(capsys.readouterr().out)["steps"]["6B"]
    lesson, draft, sched = out["tables"][-3:]
    assert draft["title"].startswith("DSpark draft block") and sched["title"].startswith("Scheduler:")
    assert draft["columns"][2:5] == ["Draft prob. p_d(x)", "Target prob. p_t(x)", "min(1, p_t/p_d)"]
    assert all(row[2] == 1.0 for row in draft["rows"][:-1])
    assert [row[7] for row in draft["rows"][3:5]] == ["not sent to verify"] * 2
    assert len(out["checks"]) == 4 and all(c["ok"] for c in out["checks"])
    assert lesson["rows"][0][1:] == ["3, 4", "3, 4", "3, 4", "37, 38, 39"]
    assert lesson["rows"][2][1:] == [3, 5, 5, 5]  # drafted: the lab always runs its trained block
    assert lesson["rows"][3][1:] == ["—", 3, 3, "0..5 per request (the scheduler)"]  # sent to verify ℓ
    assert lesson["rows"][6][1] == [0.167, 0.234, 0.173]
    data = out["data"]  # the language-free numbers
    assert data["verify_len"] == 3 and data["block"] == 5 and data["status"][3:] == ["not sent"] * 2
    loads = data["scheduler"]["loads"]
    assert [p["requests"] for p in loads] == [1, 8, 64, 256] and data["scheduler"]["policy"] == "dspark"
    assert [p["verify_len"] for p in loads] == [row[1] for row in sched["rows"]]
    assert all(p["batch_tokens"] == p["requests"] * (1 + p["mean_verify_len"]) for p in loads)


def test_lesson_column_is_the_untrained_model_verifying_3(walk, raw):
    less = V6.lesson_round(walk)
    assert less.verify_len == 3 and less.draft == V6.lesson_round(raw).draft  # the same untrained init, either way
    assert less.block == walk.cfg.dspark_block_size and less.status[3:] == ["not sent"] * 2  # drafts 5, sends 3
    assert max(less.draft_probs) < 0.1 * max(walk.round.draft_probs)  # noise: far below the trained draft's
    assert walk.lesson is less  # computed once per walk
    for lang in ("en", "vi"):
        v = view(walk, "6B", lang)
        lesson = v.tables[2]
        assert lesson.columns[2].endswith("k = 5, ℓ = 3") and lesson.columns[3].endswith("k = 5, ℓ = 5")
        assert lesson.rows[5][2].count("○") == 2  # the 2 drafts past ℓ = 3, marked
        said = [n for n in v.notes if "ℓ = 3" in n and "○" in n]
        assert len(said) == 1 and ("verifies the first 3" if lang == "en" else "verify 3 token đầu") in said[0]


# ---- 6B: the scheduler under load -------------------------------------------------------------------
def test_scheduler_section_shows_l_at_four_loads_and_its_check_holds(walk):
    for lang in ("en", "vi"):
        v = view(walk, "6B", lang)
        table = titled(v, SCHED_TITLE)
        assert [row[0] for row in table.rows] == [1, 8, 64, 256]
        stacked = "stacked R times as the [R, k] input" if lang == "en" else "xếp chồng R lần thành đầu vào [R, k]"
        assert stacked in table.title  # it says this is a simulation, and of what
        rd = walk.round
        for row, R in zip(table.rows, (1, 8, 64, 256), strict=True):
            plan = V6.load_plan(rd.confidence, R)
            assert row[1] == plan.verify_len and row[3] == "●" * row[1] + "○" * (rd.block - row[1])
            assert row[4] == R + sum(plan.lengths)  # B = Σ (1 + ℓ)
        assert check(v, "Algorithm 1").ok
        what_for = "What the confidence c is for" if lang == "en" else "Đầu tin cậy c dùng để làm gì"
        assert any(what_for in n for n in v.notes)
    # more requests in flight never lengthen ℓ, and at 256 the prefix is shorter than with one request
    ls = [row[1] for row in titled(view(walk, "6B"), SCHED_TITLE).rows]
    assert all(a >= b for a, b in zip(ls[:-1], ls[1:], strict=True)) and ls[-1] < ls[0]


def test_scheduler_table_agrees_with_a_plain_loop_on_random_rounds():
    from lab.serving.sps import smooth_table, staircase_table

    g = torch.Generator().manual_seed(0)
    tables = (None, smooth_table(), staircase_table())  # None: the shipped measured table
    for n in range(40):
        c = torch.rand(5, generator=g, dtype=torch.float64) ** (0.2 + 2 * torch.rand(1, generator=g).item())
        c[torch.rand(5, generator=g) < 0.1] = 1.0  # certain drafts make exact ties between positions
        conf = c.tolist()
        for sps in tables:
            for R in (1, 3, 8, 64, 256):
                plan = V6.load_plan(conf, R, sps)
                assert list(plan.lengths) == V6.naive_lengths(conf, R, sps), (n, R)
                assert max(plan.lengths) - min(plan.lengths) <= 1  # equal copies: a tie split by request index


def test_scheduler_check_turns_red_when_the_plan_is_off(walk, monkeypatch):
    assert check(view(walk, "6B"), "plain loop").ok
    real = V6.Scheduler

    class OffByOne(real):
        def plan(self, confidences, stale=None):
            p = super().plan(confidences, stale)
            lengths = p.lengths.clone()
            lengths[0] = (lengths[0] + 1) % (self.k + 1)  # one request verifies one draft more (or none)
            return dataclasses.replace(p, lengths=lengths)

    monkeypatch.setattr(V6, "Scheduler", OffByOne)
    bad = check(view(walk, "6B"), "plain loop")
    assert not bad.ok and bad.value == 4  # one request off at each of the four loads


def test_scheduler_load_is_validated():
    for bad in (0, 257, -1):
        with pytest.raises(ValueError, match=f"requests in flight = {bad} is invalid: allowed an integer in 1..256"):
            V6.load_plan([0.5] * 5, bad)
    with pytest.raises(TypeError, match="requests in flight = True is invalid"):
        V6.load_plan([0.5] * 5, True)


def test_draft_probability_and_confidence_head_are_named_apart_in_both_languages(walk):
    for lang in ("en", "vi"):
        cols, _ = draft_rows(view(walk, "6B", lang))
        pd, c = cols[2], cols[5]
        assert "p_d(x)" in pd and "confidence" not in pd.lower() and c.endswith(" c")
    vi = view(walk, "6B", "vi")
    assert draft_rows(vi)[0][2] == "Xác suất nháp p_d(x)" and draft_rows(vi)[0][5] == "Đầu tin cậy c"
    assert any("‘confidence’" in n for n in vi.notes)  # the lesson's word stays visible, as a note


# ---- 80 columns, no colour -------------------------------------------------------------------------
def console80() -> tuple[Console, io.StringIO]:
    buf = io.StringIO()
    return Console(file=buf, width=80, no_color=True, color_system=None), buf


def plain(renderable) -> str:
    console, buf = console80()
    console.print(renderable)
    return buf.getvalue()


WORDS = (
    "accepted",
    "rejected",
    "resampled",
    "verified",
    "SWA-only",
    "candidate",
    "Compressed",
    "Candidates",
    "Reindex",
    "Position",
    "argmax",
    "probability",
    "untrained",
    "main_proj",
    "Engram",
    "DSpark",
    "thưởng",
    "verify",
    "forward",
)


def broken_words(text: str) -> list[str]:
    """Words of WORDS cut at a line end: a piece of one (its first 4 or more letters, not all of them) standing
    alone before a space, a border or the end of the line — what rich prints for "accepte/d" or "SWA-onl/y"."""
    bad = []
    for word in WORDS:
        for n in range(max(4, len(word) - 4), len(word)):
            bad += re.findall(rf"(?<![\w-]){re.escape(word[:n])}(?=[ │]*$)", text, flags=re.MULTILINE)
    return bad


@pytest.mark.parametrize("lang", ["en", "vi"])
@pytest.mark.parametrize("temperature", [0.0, 1.0])
def test_every_view_reads_at_80_columns(walk, lang, temperature):
    w = redraft(walk, None, temperature) if temperature else walk
    for sid in STEP_IDS:
        text = plain(render_view(view(w, sid, lang)))
        assert max(cell_len(line) for line in text.splitlines()) <= 80
        assert broken_words(text) == [], (sid, broken_words(text))


def test_generate_strip_reads_without_colour():
    report = compare(max_new_tokens=16)
    strip = strip_text(report, "en").plain
    assert "\n" not in strip and "↵" in strip  # the first token is a newline: escaped
    units = [u for u in strip.split() if u != "│"]
    marks = {kind: mark for kind, (mark, _) in STRIP.items()}
    assert all(u[0] in marks.values() for u in units)
    assert len(set(marks.values())) == len(marks)  # one marker per outcome
    shown = {u[0] for u in units}
    assert {marks["accepted"], marks["anchor"]} <= shown
    n = sum(r.block + 1 for r in report.spec.rows(0)) + 1
    assert len(units) == n  # every drafted token and every target token, one marker each
    console, buf = console80()
    render_generate(console, report, "en")
    text = buf.getvalue()
    for kind, mark in marks.items():
        label = {"anchor": "first token", "not sent": "not sent to verify"}.get(kind, kind)
        assert f"{mark} {label}" in text  # the legend
    assert broken_words(text) == []


@pytest.mark.parametrize("seed", [0, 1, 3, 5])
def test_a_sampled_strip_draws_no_empty_round(seed):
    """At T = 0.7 the strip has one segment per round, each with its drafts and the target's token, and nothing
    beside it on the screen reads as one more, empty round: no closing │ (it wrapped alone onto the last line) and
    no panel side border next to a round boundary."""
    report = compare(max_new_tokens=32, temperature=0.7, seed=seed)
    rows = report.spec.rows(0)
    strip = strip_text(report, "en").plain
    first, *segments = strip.split("│")
    assert first.split() == ["▸" + strip_token(report.texts[report.spec.tokens[0][0]])]
    assert [len(seg.split()) for seg in segments] == [r.block + 1 for r in rows]  # every round: ≥ 1 draft + 1
    assert not strip.rstrip().endswith("│")
    console, buf = console80()
    render_generate(console, report, "en")
    lines = buf.getvalue().splitlines()
    assert not any(re.search(r"│\s*│", line) or line.strip() == "│" for line in lines), lines


@pytest.mark.parametrize("lang", ["en", "vi"])
def test_generate_strip_marks_drafts_not_sent_without_colour(lang):
    report = compare(max_new_tokens=16, verify_len=2)  # ℓ = 2: each round drafts 5 and sends 2
    rows = report.spec.rows(0)
    assert all(r.verify_len <= 2 for r in rows) and any(r.block > r.verify_len for r in rows)
    units = [u for u in strip_text(report, lang).plain.split() if u != "│"]
    assert sum(u[0] == "○" for u in units) == sum(r.block - r.verify_len for r in rows)  # one ○ per draft not sent
    assert sum(u[0] in "✓✗·" for u in units) == sum(r.verify_len for r in rows)  # the verified ones keep their marks
    console, buf = console80()
    render_generate(console, report, lang)
    text = buf.getvalue()
    assert max(cell_len(line) for line in text.splitlines()) <= 80 and broken_words(text) == []
    assert ("○ not sent to verify" if lang == "en" else "○ không gửi đi verify") in text  # the legend
    assert ("Verify length ℓ: 2" if lang == "en" else "Độ dài verify ℓ: 2") in text.replace("\n", " ")
    first = rows[0]  # round 1 reads: the ℓ drafts sent, the target's own token, then the drafts not sent
    segment = strip_text(report, lang).plain.split("│")[1].split()
    expected = [STRIP[st][0] for st in first.status[: first.verify_len]] + [STRIP[first.next_kind][0]]
    assert [u[0] for u in segment] == expected + ["○"] * (first.block - first.verify_len)


# ---- Vietnamese output has no English UI strings ------------------------------------------------------
LEAKS = (
    "Prompt:",
    " tokens)",
    "comb history",
    "verify keeps",
    "(layer ",
    "index scores",
    "router scores",
    "chosen experts",
    "kv latent",
    "Draft (SWA)",
    "draft logits",
    "sampled, not argmax",
    "accepted",
    "rejected",
    "not verified",
    "not sent",
    "Scheduler:",
    "requests in flight",
    "simulation",
    "resampled",
    "rounds:",
    "speed-up",
    "target forwards",
    "identical",
    "strip segment",
    "tap mix",
    "reached",
    "conditional",
    "cumulative",
    "seconds",
    "Position",
    "Why ",
    "lesson",
    "Draft prob",
    "Target argmax",
    "kv_quant: True",
    "not used",
    "first token",
)


def test_vietnamese_output_has_no_english_ui_strings(capsys):
    outs = []
    for argv in (
        ["walk", "--lang", "vi"],
        ["walk", "--lang", "vi", "--step", "6B", "--temperature", "1"],
        ["walk", "--lang", "vi", "--step", "6B", "--verify-len", "2"],
        ["generate", "--lang", "vi", "--max-new-tokens", "8"],
        ["generate", "--lang", "vi", "--max-new-tokens", "8", "--verify-len", "2"],
        ["profile", "--lang", "vi", "--reps", "1", "--cache-length", "8"],
    ):
        assert main(argv) == 0
        outs.append(capsys.readouterr().out)
    text = "\n".join(outs)
    assert [s for s in LEAKS if s in text] == []
    assert "Văn bản đầu vào" in text and "được giữ" in text and "không gửi đi verify" in text


def test_profile_renders_in_both_languages():
    from lab.evaluation.profiling import profile

    report = profile(reps=1, cache_len=8, prompts=2, new_tokens=6)
    assert report["tap_mix"]["max_abs_diff"] == 0.0 and report["tap_mix"]["threshold"] > 0
    for lang in ("en", "vi"):
        console, buf = console80()
        render_profile(console, report, lang)
        text = buf.getvalue()
        assert "✓" in text and "✗" not in text and broken_words(text) == []


def test_equation_prose_is_translated():
    vi = N.equation(get_step("6B"), "vi")
    assert N.equation(get_step("6B"), "en") == get_step("6B").equation
    assert "keeps" not in vi and "with prob" not in vi

"""The 6B view: logits and their parity, the taps, one DSpark round (draft tokens, p_d(x), confidence c, what verify
used and kept), the lesson's setting beside the lab's, and what the `dspark` scheduler would verify of this round
at R requests in flight (the shipped SPS(B) table).
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch

from dspark_mini import build_model, get_config
from dspark_mini.config import ModelConfig
from dspark_mini.scheduler import Scheduler, StepRate, survival
from dspark_mini.speculative import ACCEPTED, NOT_SENT, NOT_VERIFIED, REJECTED, Round, speculative_round
from dspark_mini.validate import check_int, check_temperature

from ..evaluation.profiling import hooked_forward, main_x_error, main_x_threshold
from ..text import UI, verify_label
from ..weights import DRAFTER_LABEL, drafter_speeds, lab_model, report
from .notes import LESSON, NOTES, ece_text
from .view import Check, StepView, ViewTable, Walk, dash, r, shape, sig, tok_text


def verdict_text(w: Walk, lang: str) -> str:
    """One line on what verify did in the walk's round (kept n of the ℓ drafts sent to verify)."""
    rd = w.round
    kind = verify_label(rd.next_kind, lang)
    return NOTES(
        "verdict",
        lang,
        n=rd.n_accepted,
        k=rd.verify_len,
        tau=rd.tau,
        t=w.tokenizer.token_text(rd.next_token),
        kind=kind,
    )


def trained_note(lang: str) -> str:
    """What c is with the trained weights, and how STS moved DSpark's ECE on held-out rounds — written from the
    shipped report.json (`heldout_calibration`, `train.sts`), so it says what the data says after every retrain."""
    dspark = report()["drafters"]["dspark"]
    rows = [(x["ece_raw"], x["ece_sts"]) for x in dspark["heldout_calibration"]]
    n, fit_n = dspark["heldout_calibration"][0]["n"], dspark["train"]["sts"][0]["n"]
    return UI("note_trained", lang, ece=ece_text(rows, lang), n=n, fit_n=fit_n)


def why_k(lang: str) -> str:
    """Why the lab trains k = 5, with the shipped set's DSpark ÷ DFlash mean τ (report.json's `summary`)."""
    ratio = report()["summary"]["dspark_over_dflash"]
    return NOTES("why_k", lang, t1=f"{ratio['t1']:.2f}", greedy=f"{ratio['greedy']:.2f}")


def fastest(lang: str) -> str:
    """Which shipped drafter gives the most tokens/s, from report.json's `summary` (so it follows every retrain)."""
    speeds = drafter_speeds(report())
    name = next(iter(speeds))
    return NOTES(
        "fastest", lang, name=DRAFTER_LABEL[name], n=len(speeds), x=f"{speeds[name]:.2f}", d=f"{speeds['dspark']:.2f}"
    )


def view_6b(w: Walk, v: StepView, k: int = 8) -> StepView:
    tr, lang, cfg = w.trace, v.lang, w.cfg
    logits = tr.get("head", "logits")[0, -1]  # [V]
    probs = logits.softmax(-1)
    top = torch.topk(logits, k)
    v.shapes += [
        ("hc_pre(X, pre)", shape(tr.get("head", "hidden"))),
        ("logits [B, S, V]", shape(tr.get("head", "logits"))),
    ]
    v.tables.append(
        ViewTable(
            NOTES("topk", lang, k=k),
            ["#", UI("token", lang), UI("token_id", lang), UI("logit", lang), UI("probability", lang)],
            [
                [i + 1, tok_text(w, t), int(t), r(lv), r(probs[t])]
                for i, (lv, t) in enumerate(zip(top.values.tolist(), top.indices.tolist(), strict=True))
            ],
        )
    )
    v.checks.append(Check(NOTES("parity_check", lang), w.parity, 1e-9))
    taps = [w.taps[l][0, -1] for l in cfg.dspark_target_layer_ids]
    rows = [[l, r(t.norm()), r(t.mean()), r(t.std())] for l, t in zip(cfg.dspark_target_layer_ids, taps, strict=True)]
    v.tables.append(ViewTable(NOTES("taps", lang), [UI("layer", lang), "‖h‖", UI("mean", lang), UI("std", lang)], rows))
    hooked = w.hooked_taps if w.hooked_taps is not None else hooked_forward(w.model, w.tokens)[1]
    main_x = tr.get("6B", "main_x")
    error, threshold = main_x_error(w.model, main_x, hooked), main_x_threshold(w.model, main_x)
    v.checks.append(Check(NOTES("check_taps", lang, mix=mix_formula(cfg)), error, threshold))
    v.facts += [(NOTES("uniform", lang), r(1.0 / cfg.vocab_size, 5)), (NOTES("max_p", lang), r(probs.max(), 5))]
    v.tables.append(lesson_table(w, lang))
    v.tables.append(draft_table(w, lang))
    rd = w.round
    v.checks.append(Check(NOTES("check_verify", lang), float(verify_disagreements(verify_rows(w), w.temperature)), 0.0))
    plans = load_plans(rd.confidence)
    v.tables.append(scheduler_table(w, plans, lang))
    loads = ", ".join(str(p.requests) for p in plans)
    v.checks.append(Check(NOTES("check_sched", lang, rs=loads), float(scheduler_disagreements(rd, plans)), 0.0))
    v.shapes += [
        (NOTES("draft_logits", lang), (1, rd.k, cfg.vocab_size)),
        (NOTES("conf_shape", lang), (1, rd.k)),
    ]
    v.facts += [
        (UI("accepted_length", lang), rd.tau),
        (UI("acceptance_rate", lang), r(rd.n_accepted / rd.verify_len)),  # over the ℓ verified positions only
        (UI("block_size", lang), rd.k),
        (UI("verify_len", lang), rd.verify_len),
        (NOTES("survival", lang), [r(a, 3) for a in survival_of(rd.confidence)]),
        (UI("temperature", lang), w.temperature),
        (UI("weights", lang), UI(w.weights, lang)),
    ]
    monotone = all(a.verify_len >= b.verify_len for a, b in zip(plans, plans[1:], strict=False))
    v.notes += [
        verdict_text(w, lang),
        NOTES("prefix_note", lang, k=rd.k, l=rd.verify_len),
        NOTES("t0_note", lang) if w.temperature == 0 else NOTES("t_note", lang, t=f"{w.temperature:g}"),
        NOTES("not_acceptance", lang),
        NOTES("sched_note", lang, l=rd.verify_len),
        NOTES("sched_monotone", lang, rs=loads, ok=NOTES("yes" if monotone else "no", lang)),
        UI("warning_untrained", lang) if w.weights == "untrained" else trained_note(lang),
        NOTES("lesson_pd", lang, v=cfg.vocab_size, u=r(1.0 / cfg.vocab_size, 5)),
        NOTES("lesson_prefix", lang, k=lesson_round(w).k),
        why_k(lang),
        NOTES("why_taps", lang),
        fastest(lang),
    ]
    v.data = {
        "k": rd.k,  # k, the drafts proposed (the first ℓ = verify_len were sent)
        "block": rd.k,  # k's old key (kept for old readers)
        "verify_len": rd.verify_len,
        "status": list(rd.status),
        "n_accepted": rd.n_accepted,
        "tau": rd.tau,
        "scheduler": {
            "policy": "dspark",
            "sps_table": "lab/serving/data/sps_lab_cpu.json",
            "input": "this round's confidences stacked R times as [R, k]",
            "loads": [p.to_json() for p in plans],
            "non_increasing": monotone,
        },
    }
    return v


def mix_formula(cfg: ModelConfig) -> str:
    """ "0.5·h₃ + 0.5·h₄" (the lab's mean mix) or "main_proj([h₃; h₄])"."""
    sub = str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉")
    hs = [f"h{l}".translate(sub) for l in cfg.dspark_target_layer_ids]
    if cfg.dspark_tap_mix == "mean":
        return " + ".join(f"{1 / len(hs):g}·{h}" for h in hs)
    return f"main_proj([{'; '.join(hs)}])"


def verify_rows(w: Walk) -> list[dict[str, Any]]:
    """One dict per draft position of the walk's round with the numbers verify used (see `round_verify_rows`);
    at T = 0 the draft's argmax comes from the recorded draft logits."""
    greedy = w.temperature == 0
    draft_argmax = w.draft_trace.get("6B", "draft_logits")[0].argmax(-1).tolist() if greedy else None
    return round_verify_rows(w.round, w.temperature, draft_argmax)


def round_verify_rows(rd: Round, temperature: float, draft_argmax: list[int] | None = None) -> list[dict[str, Any]]:
    """One dict per drafted position with the numbers verify used: at T = 0 the one-hot (argmax) values, so
    p_d(x) = 1 and p_t(x) ∈ {0, 1}; at T > 0 softmax(logits / T). `soft_*` keep the softmax T = 1 values at
    T = 0 (for reference; verify did not use them). A kept draft that is not the target's argmax is flagged.
    A draft past the verify length ℓ (`rd.verify_len`; its status says "not sent") was never shown to the target: its
    p_t, ratio and target argmax are None (only the drafter's own numbers exist).

    At T = 0 the drafter takes its own argmax, so without `draft_argmax` (the draft logits' argmax per position)
    p_d(x) = 1 for every drafted token; with it, p_d(x) = [x == draft argmax] is recomputed from the logits."""
    temperature = check_temperature(temperature)
    greedy = temperature == 0
    rows = []
    for i, x in enumerate(rd.draft):
        sent = i < rd.verify_len  # from ℓ, not from the status: the check compares the two
        if greedy:
            p_d = 1.0 if draft_argmax is None else float(x == draft_argmax[i])
            p_t = float(x == rd.target_argmax[i]) if sent else None
        else:
            p_d, p_t = rd.draft_probs[i], rd.target_probs[i] if sent else None
        verified = sent and rd.status[i] != NOT_VERIFIED
        rows.append(
            {
                "position": rd.position + 1 + i,
                "token": x,
                "p_d": p_d,
                "p_t": p_t,
                "ratio": min(1.0, p_t / max(p_d, 1e-12)) if verified else None,
                "confidence": rd.confidence[i],
                "target_argmax": rd.target_argmax[i] if sent else None,
                "status": rd.status[i],
                "sent": sent,
                "sampled_not_argmax": rd.status[i] == ACCEPTED and x != rd.target_argmax[i],
                "soft_p_d": rd.draft_probs[i] if greedy else None,
                "soft_p_t": rd.target_probs[i] if greedy and sent else None,
            }
        )
    return rows


def next_row(w: Walk) -> dict[str, Any]:
    """The target's own token of the round (the replacement at the first rejection, or the bonus)."""
    rd = w.round
    argmax = rd.target_argmax[rd.n_accepted]
    return {
        "position": rd.position + 1 + rd.n_accepted,
        "token": rd.next_token,
        "target_argmax": argmax,
        "status": rd.next_kind,
        "sampled_not_argmax": rd.next_token != argmax,
    }


def verify_disagreements(rows: list[dict[str, Any]], temperature: float) -> int:
    """Positions where the verdict contradicts min(1, p_t/p_d) computed from the shown numbers: at T = 0 the
    ratio is 1 (keep) or 0 (reject); at any T a draft at ratio 0 is never kept, one at ratio 1 never rejected.
    A draft whose status says "not sent" but sits inside the verify length ℓ (or the other way round) counts as a
    disagreement too."""
    bad = 0
    for row in rows:
        if (row["status"] == NOT_SENT) == row["sent"]:
            bad += 1
            continue
        if row["ratio"] is None:
            continue
        kept = row["status"] == ACCEPTED
        if temperature == 0:
            bad += kept != (row["ratio"] == 1.0)
        else:
            bad += (kept and row["ratio"] == 0.0) or (row["status"] == REJECTED and row["ratio"] == 1.0)
    return bad


def status_text(row: dict[str, Any], lang: str) -> str:
    """ "accepted", or "accepted (sampled, not argmax)" where the token is not the target's argmax."""
    text = verify_label(row["status"], lang)
    return f"{text} ({NOTES('sampled', lang)})" if row["sampled_not_argmax"] else text


def draft_table(w: Walk, lang: str) -> ViewTable:
    """What verify did, position by position, with the numbers it used (one row per drafted token — the ones past ℓ
    marked "not sent to verify", with "—" where the target never looked — then the target's own token)."""
    rd, greedy = w.round, w.temperature == 0
    rows = []
    for row in verify_rows(w):
        cells = [row["position"], tok_text(w, row["token"]), sig(row["p_d"]), dash(row["p_t"], sig)]
        cells += [dash(row["ratio"], sig), r(row["confidence"]), dash(row["target_argmax"], lambda t: tok_text(w, t))]
        cells.append(status_text(row, lang))
        if greedy:
            cells.append(f"{sig(row['soft_p_d'], 3):g} / {dash(row['soft_p_t'], lambda p: f'{sig(p, 3):g}')}")
        rows.append(cells)
    nxt = next_row(w)
    blank = [""] * 4
    rows.append(
        [nxt["position"], tok_text(w, nxt["token"])]
        + blank
        + [tok_text(w, nxt["target_argmax"]), status_text(nxt, lang)]
        + ([""] if greedy else [])
    )
    cols = [NOTES(c, lang) for c in ("pos_short", "pd_col", "pt_col", "ratio_col", "c_col", "argmax_col", "status")]
    cols.insert(1, UI("draft_token", lang))
    if greedy:
        cols.append(NOTES("soft_col", lang))
    title = NOTES("draft_block", lang, a=w.tokenizer.token_text(rd.anchor), n=rd.k - 1, l=rd.verify_len)
    return ViewTable(title, cols, rows)


# ---- 6B · the scheduler: what `dspark` would verify of this round under load --------------------------
SCHEDULER_LOADS = (1, 8, 64, 256)  # requests in flight in the 6B scheduler table


SPS_TABLE = "lab/serving/data/sps_lab_cpu.json"  # the shipped measured SPS(B) (`dspark-lab profile --sps`)


MAX_LOAD = 256  # the most requests in flight the 6B screens simulate (the inspector's slider goes 1..256)


@functools.lru_cache(maxsize=1)
def shipped_sps() -> StepRate:
    """The measured SPS(B) table that ships with the lab (read once)."""
    from ..serving.schedule import read_table

    return read_table(None)


@dataclass(frozen=True)
class LoadPlan:
    """What `dspark` (Algorithm 1) verifies of one round's drafts with R copies of that round in flight."""

    requests: int  # R
    lengths: tuple[int, ...]  # ℓ per copy: equal copies tie, and the tie-break by request index may give the first
    # ones one draft more than the rest
    batch_tokens: int  # B = Σ (1 + ℓ)
    expected_tokens: float  # τ* = Σ (1 + Σ_{j≤ℓ} a_j)
    throughput: float  # Θ = τ*·SPS(B), expected committed tokens per second

    @property
    def verify_len(self) -> int:
        """ℓ of copy 0 (this prompt)."""
        return self.lengths[0]

    @property
    def mean_verify_len(self) -> float:
        return sum(self.lengths) / self.requests

    def sent(self, drafted: int) -> str:
        """ "●●●○○": which of copy 0's drafts go to verify (● sent, ○ not sent)."""
        return "●" * self.verify_len + "○" * (drafted - self.verify_len)

    def to_json(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "verify_len": self.verify_len,
            "verify_len_min": min(self.lengths),
            "verify_len_max": max(self.lengths),
            "mean_verify_len": self.mean_verify_len,
            "batch_tokens": self.batch_tokens,
            "expected_tokens": self.expected_tokens,
            "throughput": self.throughput,
        }


def check_load(requests: Any) -> int:
    return check_int(requests, "requests in flight", 1, MAX_LOAD, "the loads the 6B screens simulate")


def survival_of(confidence: Sequence[float]) -> list[float]:
    """a_j = c_1·…·c_j of one round (the scheduler's `survival`, as Python floats)."""
    return survival(torch.tensor([list(confidence)], dtype=torch.float64))[0].tolist()


def load_plan(confidence: Sequence[float], requests: int, sps: StepRate | None = None) -> LoadPlan:
    """The verify lengths `Scheduler("dspark")` picks when this round's confidences c [k] are stacked `requests`
    times as its [R, k] input — a simulated load of R copies of one request (real batches mix requests)."""
    requests = check_load(requests)
    sps = shipped_sps() if sps is None else sps
    c = torch.tensor([list(confidence)] * requests, dtype=torch.float64)  # [R, k]
    plan = Scheduler("dspark", c.size(1), sps=sps).plan(c)
    return LoadPlan(requests, tuple(plan.lengths.tolist()), plan.batch_tokens, plan.expected_tokens, plan.throughput)


def load_plans(
    confidence: Sequence[float], loads: Sequence[int] = SCHEDULER_LOADS, sps: StepRate | None = None
) -> list[LoadPlan]:
    return [load_plan(confidence, R, sps) for R in loads]


def naive_lengths(confidence: Sequence[float], requests: int, sps: StepRate | None = None) -> list[int]:
    """Algorithm 1 as the paper writes it, one candidate at a time: sort every (r, j) by a_j (ties: position, then
    request), start from Θ_best = R·SPS(R), admit a candidate while Θ = τ*·SPS(B) rises, stop at the first that
    does not. The reference the scheduler table's check compares `Scheduler("dspark")` with."""
    requests = check_load(requests)
    sps = shipped_sps() if sps is None else sps
    a, k = survival_of(confidence), len(confidence)
    rate = sps.steps_per_s(torch.arange(requests, requests * (k + 1) + 1)).tolist()  # SPS(B), B = R .. R(k + 1)
    path = sorted(((a[j], j, r) for j in range(k) for r in range(requests)), key=lambda t: (-t[0], t[1], t[2]))
    lengths = [0] * requests
    tau, b = float(requests), requests
    best = tau * rate[0]
    for value, j, req in path:
        theta = (tau + value) * rate[b + 1 - requests]
        if not theta > best:
            break
        lengths[req], tau, b, best = j + 1, tau + value, b + 1, theta
    return lengths


def scheduler_disagreements(rd: Round, plans: Sequence[LoadPlan], sps: StepRate | None = None) -> int:
    """Requests whose ℓ differs between the scheduler's plan and the naive loop, over every load shown."""
    return sum(
        a != b for p in plans for a, b in zip(p.lengths, naive_lengths(rd.confidence, p.requests, sps), strict=True)
    )


def scheduler_table(w: Walk, plans: Sequence[LoadPlan], lang: str) -> ViewTable:
    """R | ℓ (copy 0) | mean ℓ | sent ●/○ | B | τ* | Θ, one row per load."""
    drafted = w.round.k
    rows = [
        [p.requests, p.verify_len, r(p.mean_verify_len, 2), p.sent(drafted), p.batch_tokens]
        + [r(p.expected_tokens, 2), r(p.throughput, 1)]
        for p in plans
    ]
    cols = [UI("requests_in_flight", lang), "ℓ", NOTES("sched_mean", lang), NOTES("sched_sent", lang), "B"]
    cols += [NOTES("sched_tau", lang), NOTES("sched_theta", lang)]
    return ViewTable(NOTES("sched_title", lang), cols, rows)


def lesson_round(w: Walk) -> Round:
    """The lesson's setting on this prompt: untrained weights (the walk's seed), 3 drafts verified, greedy — the
    drafter drafts its whole trained block and sends the first 3 to verify.
    Computed once per walk (an untrained model is built only when the walk runs the trained one: the lab model's,
    or for a checkpoint of another config that config's, reading the same Engram compressed ids)."""
    if w.lesson is None:
        with torch.no_grad():
            if w.weights == "untrained":
                model, cache, logits = w.model, copy.deepcopy(w.prompt_cache), w.logits
            else:
                if w.cfg == get_config("lab"):
                    model = lab_model("untrained", w.seed)
                else:  # a checkpoint's vocabulary: the lab model would not know its ids
                    model = build_model(w.cfg, w.seed)
                    model.compress_map.copy_(w.model.compress_map)
                cache = model.new_cache(1)
                logits = model(w.tokens, cache=cache).logits
            anchor = logits[:, -1].argmax(-1)  # [1]
            w.lesson = speculative_round(model, cache, anchor, LESSON["block"], 0.0, None)[0]
    return w.lesson


def marked_drafts(w: Walk, rd: Round) -> str:
    """ "a, b, c, ○d, ○e": the drafts, those not sent to verify marked ○."""
    marks = ["○" if st == NOT_SENT else "" for st in rd.status]
    return ", ".join(m + tok_text(w, t) for m, t in zip(marks, rd.draft, strict=True))


def lesson_table(w: Walk, lang: str) -> ViewTable:
    """The lesson's setting (seed 000: taps 3, 4 mixed 0.5/0.5, 3 untrained drafts) beside the lab's untrained
    round that verifies 3 of its drafted block, this round, and the real model's setting."""
    cfg, rd, less = w.cfg, w.round, lesson_round(w)
    real = get_config("flash")
    soft = w.draft_trace.get("6B", "draft_logits")[0].softmax(-1)  # this round's p_d at T = 1
    this_pd = [r(float(soft[i, x]), 3) for i, x in enumerate(rd.draft)]

    def taps(c: ModelConfig) -> str:
        return ", ".join(map(str, c.dspark_target_layer_ids))

    n = len(cfg.dspark_target_layer_ids)
    mix = "/".join([f"{1 / n:g}"] * n) if cfg.dspark_tap_mix == "mean" else NOTES("concat", lang)
    rows = [
        [NOTES("row_taps", lang), LESSON["taps"], taps(cfg), taps(cfg), taps(real)],
        [NOTES("row_mix", lang), LESSON["mix"], mix, mix, NOTES("concat", lang)],
        [NOTES("row_k", lang), LESSON["block"], less.k, rd.k, real.dspark_block_size],
        [NOTES("row_l", lang), "—", less.verify_len, rd.verify_len, NOTES("real_l", lang)],
        [
            NOTES("row_weights", lang),
            UI("untrained", lang),
            UI("untrained", lang),
            UI(w.weights, lang),
            UI("trained", lang),
        ],
        [NOTES("row_tokens", lang), LESSON["tokens"], marked_drafts(w, less), marked_drafts(w, rd), "—"],
        [NOTES("row_pd", lang), LESSON["p_d"], [r(p, 3) for p in less.draft_probs], this_pd, "—"],
        ["1/V", "—", r(1 / cfg.vocab_size, 5), r(1 / cfg.vocab_size, 5), f"1/{real.vocab_size}"],
        [
            NOTES("row_kept", lang),
            NOTES("not_verified_lesson", lang),
            f"{less.n_accepted}/{less.verify_len}",
            f"{rd.n_accepted}/{rd.verify_len}",
            "—",
        ],
    ]
    cols = [
        "",
        NOTES("lesson_col", lang),
        NOTES("lab_col", lang, w=UI("untrained", lang), k=less.k, l=less.verify_len),
        NOTES("lab_col", lang, w=UI(w.weights, lang), k=rd.k, l=rd.verify_len),
        NOTES("real_col", lang),
    ]
    return ViewTable(NOTES("lesson_title", lang), cols, rows)

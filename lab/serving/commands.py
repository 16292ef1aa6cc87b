"""The handlers of `dspark-lab profile --sps` and `dspark-lab schedule` (their options and checks are cli.py's).

Both return the report that `--json` prints and otherwise draw it as tables that read at 80 columns without colour,
in vi or en.
"""

from __future__ import annotations

import argparse
from contextlib import nullcontext
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.text import Text

from ..style import simple_table
from ..text import UI, Texts, lang_table
from .sps import SPSTable, save_table

DEFAULT_SPS_OUT = Path("runs") / "sps.json"

TEXT = lang_table("serving", "text")
TEXT = Texts(TEXT, "serving")


# ---- profile --sps ------------------------------------------------------------------------------------------
def main_profile_sps(args: argparse.Namespace, console: Console, lang: str) -> dict[str, Any]:
    """Measure, save, draw. → the table's JSON with the path it was saved to."""
    from ..weights import lab_model
    from .profile_sps import estimate_sps, profile_sps
    from .schedule import read_table
    from .work import Bar, say_estimate, side_console

    out = Path(args.out) if args.out is not None else DEFAULT_SPS_OUT
    model = lab_model(args.weights, args.seed).eval()
    warmup = 1
    estimate = estimate_sps(model, args.batch_tokens, args.reps, warmup, args.cache_length, read_table(None))
    side = side_console(console, args.json)
    say_estimate(side, estimate, lang)
    with Bar(side, "bar_sps", estimate.counts["batch_tokens"], lang, args.json) as bar:
        table = profile_sps(
            args.batch_tokens,
            args.reps,
            args.cache_length,
            args.weights,
            args.seed,
            warmup,
            model,
            on_size=lambda b: bar.advance(b * (warmup + args.reps)),
        )
    save_table(table, out)
    if not args.json:
        render_sps(console, table, lang, out)
    return {**table.to_dict(), "path": str(out), "estimate": estimate.to_json()}


def render_sps(console: Console, table: SPSTable, lang: str, path: Path | None = None) -> None:
    rows_per = table.conditions.get("rows_per_request", 6)
    rows = []
    for b, raw, forced, st in zip(
        table.batch_tokens, table.raw_steps_per_s, table.forced_steps_per_s, table.step_stats, strict=True
    ):
        r, s = (1, b) if b <= rows_per else (b // rows_per, rows_per)
        ms = [f"{st[q] * 1e3:.2f}" if st else "–" for q in ("p50", "p95", "p99")]
        rows.append([str(b), f"{r}×{s}", *ms, f"{raw:.1f}", f"{forced:.1f}", f"{b * forced:,.0f}"])
    cols = ["B", TEXT("layout", lang), TEXT("p50_ms", lang), TEXT("p95_ms", lang), TEXT("p99_ms", lang)]
    cols += [TEXT("sps_raw", lang), TEXT("sps_forced", lang), TEXT("tok_s", lang)]
    console.print(simple_table(TEXT("sps_title", lang), cols, rows))
    raised = sum(f < r for f, r in zip(table.forced_steps_per_s, table.raw_steps_per_s, strict=True))
    if raised:
        console.print(TEXT("forced_note", lang, n=raised))
    if path is not None:
        console.print(TEXT("saved", lang, path=path))
        console.print(TEXT("use_it", lang, path=path))
    conditions(console, table.conditions, lang)


def conditions(console: Console, cond: dict[str, Any], lang: str) -> None:
    console.print(Text(UI("run_conditions", lang) + ": " + ", ".join(f"{k}={v}" for k, v in cond.items())))


# ---- schedule -----------------------------------------------------------------------------------------------
def main_schedule(args: argparse.Namespace, console: Console, lang: str) -> dict[str, Any]:
    from .schedule import (
        DEFAULT_STREAMS_OUT,
        SHIPPED_STREAMS,
        SHIPPED_TABLE,
        estimate_schedule,
        read_streams,
        read_table,
        record_default_streams,
        schedule_report,
        streams_conditions,
    )
    from .simulate import save_streams
    from .work import Bar, say_estimate, side_console

    measured = read_table(args.sps_table)
    path = SHIPPED_STREAMS if args.streams is None else Path(args.streams)
    if args.record:
        path = Path(args.streams) if args.streams is not None else DEFAULT_STREAMS_OUT
        with console.status(TEXT("recording", lang)) if not args.json else nullcontext():
            streams, streams_cond = record_default_streams()
        save_streams(path, streams, streams_cond)
        if not args.json:
            n = sum(len(s) for s in streams)
            console.print(TEXT("recorded", lang, n=len(streams), rows=n, path=path))
    else:
        streams = read_streams(args.streams)
        streams_cond = streams_conditions(args.streams)
    estimate = estimate_schedule(
        streams, measured, args.requests, args.policies, args.rounds, args.seed, args.threshold
    )
    side = side_console(console, args.json)
    say_estimate(side, estimate, lang)
    with Bar(side, "bar_schedule", estimate.counts["request_rounds"], lang, args.json) as bar:
        report = schedule_report(
            streams,
            measured,
            args.requests,
            args.policies,
            args.threshold,
            args.rounds,
            args.seed,
            table_path=SHIPPED_TABLE if args.sps_table is None else args.sps_table,
            streams_path=path,
            streams_cond=streams_cond,
            on_round=bar.advance,
        )
    report["estimate"] = estimate.to_json()
    if not args.json:
        render_schedule(console, report, lang)
    return report


def fmt_tok(x: float) -> str:
    return f"{x:,.0f}" if x >= 100 else f"{x:.1f}"


def render_schedule(console: Console, report: dict[str, Any], lang: str) -> None:
    sim, cond = report["sim"], report["conditions"]
    s = cond["streams"]
    console.print(TEXT("streams", lang, n=s["streams"], rows=s["rows"], k=s["k"], tau=s["tau_full_block"]))
    for name, per_policy in sim.items():
        policies = list(per_policy)
        rs = list(next(iter(per_policy.values())))
        rows = [
            [
                r,
                *(
                    f"{fmt_tok(per_policy[p][r]['throughput'])} / {per_policy[p][r]['mean_verify_len']:.2f}"
                    for p in policies
                ),
            ]
            for r in rs
        ]
        console.print(Text(""))
        console.print(simple_table(TEXT("sim_title", lang, table=name), ["R", *policies], rows))
        last = rs[-1]
        if "dspark" in per_policy and "fixed" in per_policy:
            d, f = per_policy["dspark"][last], per_policy["fixed"][last]
            ratio = d["throughput"] / f["throughput"]
            console.print(TEXT("verdict", lang, r=last, ratio=ratio, l1=f["mean_verify_len"], l2=d["mean_verify_len"]))
        if "dspark" in per_policy and "dspark-async" in per_policy:
            stalled = [r for r in rs if per_policy["dspark"][r]["mean_verify_len"] == 0.0]
            if stalled:
                ls = ", ".join(f"{per_policy['dspark-async'][r]['mean_verify_len']:.2f}" for r in stalled)
                console.print(TEXT("stall", lang, rs=", ".join(stalled), ls=ls))
            elif name == "staircase":
                console.print(TEXT("no_stall", lang))
    cost = report["scheduler_cost"]
    rows = []
    for p, per_r in cost.items():
        for r, c in per_r.items():
            rows.append(
                [
                    p,
                    r,
                    str(c["batch_tokens"]),
                    f"{c['plan_s']['p50'] * 1e6:.0f}",
                    f"{c['plan_s']['p95'] * 1e6:.0f}",
                    f"{c['verify_s'] * 1e3:.1f}",
                    f"{c['plan_over_verify']:.2%}",
                ]
            )
    cols = [TEXT("policy", lang), "R", "B", TEXT("plan_p50", lang), TEXT("plan_p95", lang), TEXT("verify_ms", lang)]
    console.print(Text(""))
    console.print(simple_table(TEXT("cost_title", lang), [*cols, TEXT("share", lang)], rows))
    measured = cond["tables"]["measured"]["conditions"]
    keys = ("cpu", "threads", "dtype", "cache_length", "reps", "source")
    conditions(console, {k: measured[k] for k in keys if k in measured}, lang)

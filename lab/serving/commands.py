"""The handlers of the serving commands: `dspark-lab profile --sps`, `dspark-lab schedule` and `dspark-lab serve`
(their options and checks are cli.py's).

`profile --sps` and `schedule` return the report that `--json` prints and otherwise draw it as tables that read at
80 columns without colour, in vi or en.

`serve`: the prompts, the run, its lines (en/vi) and its JSON lines.

Output, as requests finish (in order of finishing, not of the prompts):
  - first one estimate line (lab.serving.work: prefills, ≈ draft passes and verify forwards, about how long);
  - human: a title, then one line per finished request the moment it finishes (#index, prompt, new tokens,
    rounds, τ, mean ℓ, the text), then the summary lines; a progress bar on a terminal;
  - --json: JSON lines on stdout — one object per finished request, the moment it finishes,
        {"kind": "request", "index", "prompt", "prompt_tokens", "tokens", "text", "rounds",
         "mean_accepted_length", "mean_verify_len"}
    (index: the prompt's position, 0-based, among the file's non-blank lines), then one last object
        {"kind": "summary", "policy", "requests" (how many were served), "new_tokens", "tokens_per_s",
         "seconds", "rounds", "mean_verify_len", "batch_tokens_per_round" {"mean", "max", "rounds_at" {B: n}},
         "scheduler_ms_per_round_p50", "prefill_forwards", "requests_in_flight", "temperature", "conditions",
         "estimate"};
    the estimate line and the progress bar go to stderr.
The prompts file is read one line at a time, twice: first to check every line and count the prompts (before
the model runs: a bad line is one error naming --prompts-file and the line), then as slots take the prompts.
"""

from __future__ import annotations

import argparse
import itertools
from collections.abc import Callable, Iterator
from contextlib import nullcontext
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.text import Text

from ..style import simple_table
from ..text import UI, Texts, check_prompt, lang_table
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


# ---- serve ----------------------------------------------------------------------------------------------------
DEFAULT_PROMPTS_PER_DOMAIN = 4  # held-out corpus prompts when no --prompts-file is given (12 in all)
PROMPT_TOKENS = 10  # tokens per held-out prompt
MAX_PROMPTS = 100_000  # prompts in a --prompts-file: ≈ 3–4 h of serving on a 2-core CPU at the defaults
# characters in one line of a --prompts-file: a prompt must fit max_seq_len 256 tokens and no token is longer
# than 12 bytes, so a longer line can never be served (and is never read whole)
MAX_LINE_CHARS = 4096

SERVE_TEXT: dict[str, dict[str, str]] = lang_table("serve", "text")


def tt(key: str, lang: str, **fmt: Any) -> str:
    return SERVE_TEXT[key][lang].format(**fmt)


@dataclass
class PromptsFile:
    """A --prompts-file: UTF-8, one prompt per line, blank lines skipped. `scan` reads it once, line by line, to
    check and count every prompt before anything runs; iterating reads it again and tokenizes one prompt at a
    time as a slot takes it (neither the text nor the token lists are ever all in memory)."""

    path: Path
    encode: Callable[[str], list[int]]
    cfg: Any  # the model's config: a prompt's limit (lab.text.prompt_limit)
    lang: str = "en"  # the language of a refusal
    count: int = 0
    shortest: int = 0  # tokens
    longest: int = 0

    def lines(self) -> Iterator[tuple[int, str]]:
        """(line number, text) of every non-blank line; a line over MAX_LINE_CHARS is an error, never read whole."""
        name = str(self.path)
        try:
            with open(self.path, encoding="utf-8") as f:  # universal newlines: \r\n and \r end a line too
                for number in itertools.count(1):
                    line = f.readline(MAX_LINE_CHARS + 1)
                    if not line:
                        return
                    text = line[:-1] if line.endswith("\n") else line
                    if len(text) > MAX_LINE_CHARS:
                        raise ValueError(
                            f"--prompts-file = {name!r} line {number} is longer than {MAX_LINE_CHARS:,} characters: "
                            f"allowed at most {MAX_LINE_CHARS:,} a line (no longer prompt fits the model)"
                        )
                    if text.strip():
                        yield number, text
        except UnicodeDecodeError as e:
            raise ValueError(f"--prompts-file = {name!r} is not UTF-8 text: allowed one prompt per line") from e

    def tokens(self, number: int, text: str) -> list[int]:
        """Line `number`'s ids: lab.text.check_prompt (NFC, the one limit), a refusal naming the file's line."""
        return check_prompt(text, self.encode, self.cfg, f"--prompts-file line {number}", self.lang)[1]

    def scan(self) -> PromptsFile:
        """Count and check every prompt (at most MAX_PROMPTS; an empty file is an error naming the option)."""
        self.count, self.shortest, self.longest = 0, 0, 0
        for number, text in self.lines():
            self.count += 1
            if self.count > MAX_PROMPTS:
                raise ValueError(
                    f"--prompts-file = {str(self.path)!r} holds more than {MAX_PROMPTS:,} prompts: allowed at most "
                    f"{MAX_PROMPTS:,} (split the file)"
                )
            n = len(self.tokens(number, text))
            self.shortest = n if self.count == 1 else min(self.shortest, n)
            self.longest = max(self.longest, n)
        if not self.count:
            raise ValueError(f"--prompts-file = {str(self.path)!r} holds no prompt: allowed one prompt per line (≥ 1)")
        return self

    def __iter__(self) -> Iterator[list[int]]:
        return itertools.islice((self.tokens(n, t) for n, t in self.lines()), self.count)


def held_out_prompts(tok: Any = None) -> list[list[int]]:
    """The default: 4 held-out corpus prompts of 10 tokens per domain (12). tok: the model's tokenizer; one that is
    not the lab's gets the same texts in its own ids (the lab ids decoded, then encoded by it)."""
    import torch

    from dspark_mini.tokenizer import default_tokenizer

    from ..evaluation.quality import eval_prompts
    from ..realtext import DOMAINS

    held = [eval_prompts(d, DEFAULT_PROMPTS_PER_DOMAIN, PROMPT_TOKENS) for d in DOMAINS]
    ids = [p.tolist() for p in torch.cat(held)]
    lab = default_tokenizer()
    if tok is None or tok is lab:
        return ids
    return [tok.encode(lab.decode(p)) for p in ids]


def main_serve(args: argparse.Namespace, console: Console, lang: str) -> dict[str, Any]:
    """Serve, printing every request as it finishes (a line, or a JSON line with --json) → the summary."""

    from ..evaluation.conditions import run_conditions
    from ..runtime.run import open_preset
    from ..style import print_json
    from .schedule import read_table
    from .serve import ServeStats, check_serve_sizes, estimate_serve, probe_round, serve_stream
    from .work import Bar, say_estimate, side_console

    # the seeded init for a preset other than `lab`; a checkpoint's config, weights and tokenizer together
    model, tok, _ = open_preset(args.preset, None, args.checkpoint, args.seed, args.device, args.dtype, lang)
    model.eval()
    if args.prompts_file is not None:
        source = PromptsFile(Path(args.prompts_file), tok.encode, model.cfg, lang).scan()
        n, shortest, longest, first = source.count, source.shortest, source.longest, next(iter(source))
    else:
        source = held_out_prompts(tok)
        n, shortest, longest, first = len(source), min(map(len, source)), max(map(len, source)), source[0]
    check_serve_sizes(n, shortest, longest, args.requests, args.policy, args.max_new_tokens, model.cfg)
    table = read_table(args.sps_table) if args.policy in ("dspark", "dspark-async") else None
    probe = probe_round(model, first)
    curve = table if table is not None else read_table(None)
    estimate = estimate_serve(n, args.requests, args.max_new_tokens, model.cfg.dspark_block_size, probe, curve)
    side = side_console(console, args.json)
    say_estimate(side, estimate, lang)
    if not args.json:
        console.print(Text(tt("title", lang, policy=args.policy, r=args.requests)))
    stats = ServeStats(args.policy)
    with Bar(side, "bar_serve", n * args.max_new_tokens, lang, args.json) as bar:
        for req in serve_stream(
            model,
            source,
            requests=args.requests,
            policy=args.policy,
            temperature=args.temperature,
            max_new_tokens=args.max_new_tokens,
            seed=args.seed,
            sps=table,
            threshold=args.threshold,
            stats=stats,
            on_tokens=bar.advance,
        ):
            row = req.to_json(detok=tok.decode)
            if args.json:
                print_json({"kind": "request", **row}, indent=None, flush=True)
            else:
                bar.print(request_line(row, lang), soft_wrap=True)
    summary = {"kind": "summary", **stats.to_json(), "requests_in_flight": args.requests}
    summary["temperature"] = args.temperature
    summary["conditions"] = run_conditions(model, args.requests, 0) | {"prompts": n}
    summary["estimate"] = estimate.to_json()
    if args.json:
        print_json(summary, indent=None, flush=True)
    else:
        render_summary(console, summary, lang)
    return summary


def fmt2(x: float | None) -> str:
    return "—" if x is None else f"{x:.2f}"


def cut(text: str, n: int) -> str:
    text = text.replace("\n", "↵")
    return text if len(text) <= n else text[: n - 1] + "…"


def request_line(row: dict[str, Any], lang: str) -> Text:
    """One finished request as one line (plain text: a prompt's brackets are never read as markup)."""
    return Text(
        tt(
            "request",
            lang,
            index=row["index"],
            prompt=cut(row["prompt"], 28),
            new=len(row["tokens"]),
            rounds=row["rounds"],
            tau=fmt2(row["mean_accepted_length"]),
            ell=fmt2(row["mean_verify_len"]),
            text=cut(row["text"], 40),
        )
    )


def render_summary(console: Console, summary: dict[str, Any], lang: str) -> None:
    b = summary["batch_tokens_per_round"]
    tokens_per_s, p50 = summary["tokens_per_s"], summary["scheduler_ms_per_round_p50"]
    lines = [
        ("served", f"{summary['requests']:,}"),
        ("tokens_per_s", "—" if tokens_per_s is None else f"{tokens_per_s:.1f}"),
        ("mean_verify_len", fmt2(summary["mean_verify_len"])),
        ("batch_tokens", "—" if b["mean"] is None else f"{b['mean']:.1f} (max {b['max']})"),
        ("scheduler", "—" if p50 is None else f"{p50:.2f} ms"),
    ]
    for key, value in lines:
        console.print(Text(f"{tt(key, lang)}: {value}"))

"""`dspark-lab eval`: the mini DeepSpec evaluation of the shipped (or given) drafters, as rich tables or JSON."""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from ..corpus import DOMAINS
from ..text import Texts
from ..weights import check_drafter, load_drafter
from .quality import evaluate_drafters, public_json

TEXT = {
    "tau": {"en": "accepted length τ (kept drafts + 1)", "vi": "độ dài chấp nhận τ (token nháp giữ + 1)"},
    "cond": {
        "en": "conditional acceptance per draft position (T = 1): P(kept | all before kept)",
        "vi": "tỉ lệ giữ có điều kiện theo vị trí nháp (T = 1): P(giữ | mọi vị trí trước đã giữ)",
    },
    "sweep": {
        "en": "static confidence threshold (T = 1, mean over domains): verify up to the first c < t",
        "vi": "ngưỡng confidence cố định (T = 1, trung bình các miền): verify tới vị trí đầu tiên có c < t",
    },
    "speed": {
        "en": "tokens/s, greedy, batch 1 (plain vs speculative, interleaved)",
        "vi": "token/giây, greedy, batch 1 (giải mã thường và suy đoán, xen kẽ)",
    },
}
TEXT = Texts(TEXT, "eval")


def parse_drafters(text: str) -> list[str]:
    names = [t.strip() for t in text.split(",") if t.strip()]
    if not names:
        raise ValueError(
            "--drafters is empty: allowed a comma-separated list of dspark, dspark-rnn, dflash, eagle3, mtp1"
        )
    return [check_drafter(n) for n in names]


def main_eval(args: argparse.Namespace, console: Console, lang: str) -> dict[str, Any]:
    names = parse_drafters(args.drafters)
    entries = {n: load_drafter(n, args.weights_dir) for n in names}
    with Progress(console=console, disable=args.json, transient=True) as bar:
        task = bar.add_task("eval", total=len(names) * len(DOMAINS))
        report = evaluate_drafters(
            entries,
            DOMAINS,
            args.prompts,
            args.max_new_tokens,
            args.speed_prompts,
            args.seed,
            on_progress=lambda what: bar.update(task, advance=1, description=what),
        )
    view = public_json(report)
    if not args.json:
        render_eval(console, view, lang)
    return view


def fmt(x: float | None) -> str:
    return "–" if x is None else f"{x:.2f}"


def render_eval(console: Console, view: dict[str, Any], lang: str) -> None:
    drafters = view["drafters"]
    for label, title in (("t1", "T = 1"), ("greedy", "greedy")):
        t = Table(title=f"{TEXT['tau'][lang]} · {title}", title_justify="left")
        t.add_column("drafter")
        for d in DOMAINS:
            t.add_column(d, justify="right")
        t.add_column("mean", justify="right")
        for name, rows in drafters.items():
            t.add_row(name, *(fmt(rows[d]["tau"][label]) for d in DOMAINS), fmt(rows["mean_tau"][label]))
        console.print(t)
    k = max(len(rows[d]["cond_accept"]["t1"]) for rows in drafters.values() for d in DOMAINS)
    t = Table(title=TEXT["cond"][lang], title_justify="left")
    t.add_column("drafter · domain")
    for i in range(k):
        t.add_column(f"p{i + 1}", justify="right")
    t.add_column("decay c₁ − mean(c₂..)", justify="right")
    for name, rows in drafters.items():
        for d in DOMAINS:
            cond = rows[d]["cond_accept"]["t1"]
            t.add_row(f"{name} · {d}", *(fmt(c) for c in cond), *([""] * (k - len(cond))), fmt(rows[d]["decay"]["t1"]))
    console.print(t)
    for name, rows in drafters.items():
        if "threshold_sweep" not in rows[DOMAINS[0]]:
            continue
        t = Table(title=f"{name} · {TEXT['sweep'][lang]}", title_justify="left")
        for c in ("t", "verified / round", "τ", "verify rate"):
            t.add_column(c, justify="right")
        for i, point in enumerate(rows[DOMAINS[0]]["threshold_sweep"]):
            pts = [rows[d]["threshold_sweep"][i] for d in DOMAINS]
            mean = {key: sum(p[key] for p in pts) / len(pts) for key in ("verified_per_round", "tau", "verify_rate")}
            t.add_row(
                f"{point['threshold']:.1f}", fmt(mean["verified_per_round"]), fmt(mean["tau"]), fmt(mean["verify_rate"])
            )
        console.print(t)
    t = Table(title=TEXT["speed"][lang], title_justify="left")
    for c in ("drafter · domain", "plain tok/s", "speculative tok/s", "ratio"):
        t.add_column(c, justify="right")
    for name, rows in drafters.items():
        for d in DOMAINS:
            s = rows[d]
            t.add_row(
                f"{name} · {d}",
                f"{s['tokens_per_s']['plain']:.1f}",
                f"{s['tokens_per_s']['speculative']:.1f}",
                f"{s['tokens_per_s_ratio']:.2f}×",
            )
    console.print(t)
    c = view["conditions"]
    console.print(
        f"conditions: {c['n_prompts']} prompts × {c['max_new_tokens']} new tokens per domain, seed {c['seed']}, "
        f"{c['threads']} thread(s), torch {c['torch']}, {c['cpu']}; speed: {c['speed']}"
    )

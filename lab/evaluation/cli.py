"""`dspark-lab eval`: the mini DeepSpec evaluation of the shipped (or given) drafters, as rich tables or JSON.

The parsers import nothing heavy, so `--help` stays fast; a handler imports the model when it runs.
"""

from __future__ import annotations

import argparse
from typing import Any

from rich.console import Console
from rich.progress import Progress
from rich.table import Table

from ..options import Help, add_json, add_lang, add_seed, command
from ..realtext import DOMAINS
from ..style import print_json
from ..text import Texts, lang_table

COMMANDS = ("eval",)
# Defaults that --help prints (it stays fast: no torch); tests/test_bad_input.py checks them against the
# recipe of `train all` (training/rebuild.py) and quality.py's defaults.
EVAL_PROMPTS, EVAL_NEW_TOKENS = 12, 40
MAX_EVAL_PROMPTS = 1000  # held-out prompts per domain (fewer held-out lines in a domain: its own error names them)


def add_parsers(sub: Any, lang: str = "en") -> None:
    h = Help("eval", lang)
    e = command(sub, h)
    e.add_argument("--drafters", default="dspark,dspark-rnn,dflash,eagle3,mtp1", help=h("drafters"))
    e.add_argument("--weights-dir", default=None, help=h("weights_dir"))
    e.add_argument(
        "--prompts", type=int, default=EVAL_PROMPTS, help=h("prompts", most=MAX_EVAL_PROMPTS, default=EVAL_PROMPTS)
    )
    e.add_argument(
        "--max-new-tokens", type=int, default=EVAL_NEW_TOKENS, help=h("max_new_tokens", default=EVAL_NEW_TOKENS)
    )
    e.add_argument("--speed-prompts", type=int, default=2, help=h("speed_prompts"))
    e.add_argument("--perplexity", default=None, metavar="FILE", help=h("perplexity"))
    add_seed(e, h("seed"))
    add_lang(e)
    add_json(e, h("json"))


def check(args: argparse.Namespace, cfg: Any) -> None:
    from dspark_mini.validate import check_int  # torch: only when a command runs, not for --help

    from .quality import PROMPT_TOKENS

    check_int(args.prompts, "--prompts", 1, MAX_EVAL_PROMPTS)
    why = f"max_seq_len {cfg.max_seq_len} − a {PROMPT_TOKENS}-token prompt"
    check_int(args.max_new_tokens, "--max-new-tokens", 1, cfg.max_seq_len - PROMPT_TOKENS, why)
    check_int(args.speed_prompts, "--speed-prompts", 1, args.prompts, "at most --prompts")


def run(args: argparse.Namespace, console: Console, lang: str) -> None:
    report = main_perplexity(args, console, lang) if args.perplexity is not None else main_eval(args, console, lang)
    if args.json:
        print_json(report)


TEXT = lang_table("eval", "text")
TEXT = Texts(TEXT, "eval")


def main_perplexity(args: argparse.Namespace, console: Console, lang: str) -> dict[str, Any]:
    from dspark_mini import get_tokenizer  # torch: only when the command runs
    from dspark_mini.checkpoint import load_model

    from ..weights import report as set_report
    from ..weights import training_streams, verified, weight_file
    from .perplexity import perplexity, read_text_file, unigram_log_probs

    text = read_text_file(args.perplexity, lang=lang)
    target = weight_file("target", args.weights_dir)
    verified(target)
    model = load_model(target)
    recipe = set_report(args.weights_dir)["recipe"]
    train_ids, _ = training_streams(recipe["seed"])
    result = perplexity(model, get_tokenizer(model.cfg), text, unigram_log_probs(train_ids, model.cfg.vocab_size))
    result = {"file": str(args.perplexity)} | result
    if not args.json:
        t = Table(title=TEXT("ppl_title", lang, file=args.perplexity, n=result["tokens"]), title_justify="left")
        t.add_column("")
        t.add_column(TEXT("ppl", lang), justify="right")
        t.add_column(TEXT("bpb", lang), justify="right")
        t.add_row(TEXT("ppl_model", lang), f"{result['model_ppl']:.2f}", f"{result['model_bits_per_byte']:.3f}")
        t.add_row(TEXT("ppl_unigram", lang), f"{result['unigram_ppl']:.2f}", f"{result['unigram_bits_per_byte']:.3f}")
        console.print(t)
        console.print(TEXT("ppl_ratio", lang, r=result["ratio"]))
    return result


def parse_drafters(text: str) -> list[str]:
    from ..weights import check_drafter  # torch: only when the command runs

    names = [t.strip() for t in text.split(",") if t.strip()]
    if not names:
        raise ValueError(
            "--drafters is empty: allowed a comma-separated list of dspark, dspark-rnn, dflash, eagle3, mtp1"
        )
    return [check_drafter(n) for n in names]


def main_eval(args: argparse.Namespace, console: Console, lang: str) -> dict[str, Any]:
    from ..weights import load_drafter  # torch: only when the command runs
    from .quality import evaluate_drafters, public_json

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
    for label, title in (("t1", "T = 1"), ("greedy", TEXT("greedy", lang))):
        t = Table(title=f"{TEXT('tau', lang)} · {title}", title_justify="left")
        t.add_column(TEXT("drafter", lang))
        for d in DOMAINS:
            t.add_column(d, justify="right")
        t.add_column(TEXT("mean", lang), justify="right")
        for name, rows in drafters.items():
            t.add_row(name, *(fmt(rows[d]["tau"][label]) for d in DOMAINS), fmt(rows["mean_tau"][label]))
        console.print(t)
    k = max(len(rows[d]["cond_accept"]["t1"]) for rows in drafters.values() for d in DOMAINS)
    t = Table(title=TEXT("cond", lang), title_justify="left")
    t.add_column(TEXT("drafter_domain", lang))
    for i in range(k):
        t.add_column(f"p{i + 1}", justify="right")
    t.add_column(TEXT("decay", lang), justify="right")
    for name, rows in drafters.items():
        for d in DOMAINS:
            cond = rows[d]["cond_accept"]["t1"]
            t.add_row(f"{name} · {d}", *(fmt(c) for c in cond), *([""] * (k - len(cond))), fmt(rows[d]["decay"]["t1"]))
    console.print(t)
    for name, rows in drafters.items():
        if "threshold_sweep" not in rows[DOMAINS[0]]:
            continue
        t = Table(title=f"{name} · {TEXT('sweep', lang)}", title_justify="left")
        for key in ("threshold", "verified_per_round", "τ", "verify_rate"):
            t.add_column("τ" if key == "τ" else TEXT(key, lang), justify="right")
        for i, point in enumerate(rows[DOMAINS[0]]["threshold_sweep"]):
            pts = [rows[d]["threshold_sweep"][i] for d in DOMAINS]
            mean = {key: sum(p[key] for p in pts) / len(pts) for key in ("verified_per_round", "tau", "verify_rate")}
            t.add_row(
                f"{point['threshold']:.1f}", fmt(mean["verified_per_round"]), fmt(mean["tau"]), fmt(mean["verify_rate"])
            )
        console.print(t)
    t = Table(title=TEXT("speed", lang), title_justify="left")
    for key in ("drafter_domain", "plain_speed", "spec_speed", "ratio"):
        t.add_column(TEXT(key, lang), justify="right")
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
    fmt_c = {k: c[k] for k in ("seed", "threads", "torch", "cpu", "speed")}
    console.print(TEXT("conditions", lang, n=c["n_prompts"], new=c["max_new_tokens"], **fmt_c))

"""`dspark-lab serve`: the prompts, the run, the table (en/vi) and the JSON."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.table import Table

DEFAULT_PROMPTS_PER_DOMAIN = 4  # held-out corpus prompts when no --prompts-file is given (12 in all)
PROMPT_TOKENS = 10  # tokens per held-out prompt


def read_prompts_file(path: str | Path) -> list[str]:
    """One prompt per line (UTF-8); blank lines are skipped. An empty file is an error naming the option."""
    p = Path(path)
    if p.is_dir():
        raise ValueError(f"--prompts-file = {str(path)!r} is a folder: allowed a text file, one prompt per line")
    try:
        text = p.read_text(encoding="utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"--prompts-file = {str(path)!r} is not UTF-8 text: allowed one prompt per line") from e
    prompts = [line for line in text.split("\n") if line.strip()]
    if not prompts:
        raise ValueError(f"--prompts-file = {str(path)!r} holds no prompt: allowed one prompt per line (≥ 1)")
    return prompts


def main_serve(args: argparse.Namespace, console: Console, lang: str) -> dict[str, Any]:
    import torch

    from dspark_mini import get_tokenizer

    from ..evaluation.conditions import run_conditions
    from ..evaluation.quality import eval_prompts
    from ..realscale.run import run_model
    from .schedule import read_table
    from .serve import serve

    model = run_model("trained", args.seed, args.checkpoint, args.device, args.dtype).eval()
    tok = get_tokenizer(model.cfg)
    if args.prompts_file is not None:
        texts = read_prompts_file(args.prompts_file)
        prompts = []
        for i, t in enumerate(texts):
            try:
                prompts.append(tok.encode(t))
            except ValueError as e:
                raise ValueError(f"--prompts-file line {i + 1}: {e}") from e
    else:
        held = [eval_prompts(d, DEFAULT_PROMPTS_PER_DOMAIN, PROMPT_TOKENS) for d in ("math", "code", "chat")]
        prompts = [p.tolist() for p in torch.cat(held)]
    table = read_table(args.sps_table) if args.policy in ("dspark", "dspark-async") else None
    label = "phục vụ" if lang == "vi" else "serving"
    with console.status(f"{label} {len(prompts)} prompts, R = {args.requests}, {args.policy}…") as status:

        def progress(done: int, active: int) -> None:
            status.update(f"{label}: {done}/{len(prompts)} done, {active} in flight ({args.policy})")

        result = serve(
            model,
            prompts,
            requests=args.requests,
            policy=args.policy,
            temperature=args.temperature,
            max_new_tokens=args.max_new_tokens,
            seed=args.seed,
            sps=table,
            threshold=args.threshold,
            on_round=progress,
        )
    report = result.to_json(detok=tok.decode)
    report["requests_in_flight"] = args.requests
    report["temperature"] = args.temperature
    report["conditions"] = run_conditions(model, args.requests, 0) | {"prompts": len(prompts)}
    if not args.json:
        render_serve(console, report, lang)
    return report


def render_serve(console: Console, report: dict[str, Any], lang: str) -> None:
    vi = lang == "vi"
    t = Table(
        title=(
            f"serve · chính sách {report['policy']} · R = {report['requests_in_flight']}"
            if vi
            else f"serve · policy {report['policy']} · R = {report['requests_in_flight']}"
        ),
        title_justify="left",
    )
    for name in (
        ("#", "#"),
        ("prompt", "lời nhắc"),
        ("new", "mới"),
        ("rounds", "vòng"),
        ("τ", "τ"),
        ("mean ℓ", "ℓ t.bình"),
    ):
        t.add_column(name[1] if vi else name[0], no_wrap=True)
    for i, r in enumerate(report["requests"]):
        prompt = r["prompt"].replace("\n", "↵")
        t.add_row(
            str(i),
            prompt if len(prompt) <= 28 else prompt[:27] + "…",
            str(len(r["tokens"])),
            str(r["rounds"]),
            "—" if r["mean_accepted_length"] is None else f"{r['mean_accepted_length']:.2f}",
            "—" if r["mean_verify_len"] is None else f"{r['mean_verify_len']:.2f}",
        )
    console.print(t)
    b = report["batch_tokens_per_round"]
    lines = [
        ("tokens/s", "token/giây", f"{report['tokens_per_s']:.1f}"),
        ("mean verify length ℓ", "độ dài kiểm tra ℓ trung bình", f"{report['mean_verify_len']:.2f}"),
        ("batch tokens B per round", "token mỗi lô B mỗi vòng", f"{sum(b) / len(b):.1f} (max {max(b)})" if b else "—"),
        ("scheduler per round (p50)", "bộ lập lịch mỗi vòng (p50)", f"{report['scheduler_ms_per_round_p50']:.2f} ms"),
    ]
    for en, v, value in lines:
        console.print(f"{v if vi else en}: {value}")

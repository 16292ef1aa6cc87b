"""`dspark-lab serve`: the prompts, the run, its lines (en/vi) and its JSON lines.

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
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.text import Text

from ..text import check_prompt, lang_table

DEFAULT_PROMPTS_PER_DOMAIN = 4  # held-out corpus prompts when no --prompts-file is given (12 in all)
PROMPT_TOKENS = 10  # tokens per held-out prompt
MAX_PROMPTS = 100_000  # prompts in a --prompts-file: ≈ 3–4 h of serving on a 2-core CPU at the defaults
# characters in one line of a --prompts-file: a prompt must fit max_seq_len 256 tokens and no token is longer
# than 12 bytes, so a longer line can never be served (and is never read whole)
MAX_LINE_CHARS = 4096

TEXT: dict[str, dict[str, str]] = lang_table("serve", "text")


def tt(key: str, lang: str, **fmt: Any) -> str:
    return TEXT[key][lang].format(**fmt)


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
    from dspark_mini.presets import text_tokenizer

    from ..evaluation.conditions import run_conditions
    from ..realscale.run import open_checkpoint, preset_weights, run_model
    from ..style import print_json
    from .schedule import read_table
    from .serve import ServeStats, check_serve_sizes, estimate_serve, probe_round, serve_stream
    from .work import Bar, say_estimate, side_console

    if args.checkpoint is None:
        weights = preset_weights(args.preset, None)  # the seeded init for a preset other than `lab`
        model = run_model(weights, args.seed, None, args.device, args.dtype, preset=args.preset, lang=lang)
        tok = text_tokenizer(model.cfg)
    else:  # the checkpoint's config, weights and tokenizer, together (lab.realscale.run.open_checkpoint)
        model, tok = open_checkpoint(args.checkpoint, args.device, args.dtype, lang=lang)
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

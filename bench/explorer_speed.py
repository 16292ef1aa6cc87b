"""The Explorer's speed in chromium beside the Python lab's, on the same machine: a measurement, not a timed test.

  python bench/explorer_speed.py --out docs/explorer_speed.json   # measure (about a minute; a quiet machine)
  python bench/explorer_speed.py --render                         # fill docs/explorer.md's table from the JSON
  python bench/explorer_speed.py --check                          # exit 1 when the table is not the JSON's rendering

In chromium (Playwright driving the system's chromium, as tests/conftest.py), docs/explorer.html opened from file://,
a fresh tab each repetition: the weights decoded and the model built (`dspark.ready`), the first step screen drawn
(`dspark.firstScreenMs`, from the start of navigation), then `dspark.run` of each prompt for 40 new tokens (greedy,
ℓ = 5): its speculative and plain decoding's wall times as the page measures them (model.js's generate). Beside
them `python -m lab generate --json` of the same prompts in this process (float64 on the CPU, one thread: the lab's
own setting), its speculative and plain seconds. Medians over the repetitions. The table in docs/explorer.md between
its `explorer-speed` markers is rendered from the JSON: no number typed; tests/test_explorer.py checks it.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import platform
import re
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from dspark_mini.files import write_atomic  # noqa: E402
from lab.present.explorer import TEXT  # noqa: E402

PAGE = ROOT / "docs" / "explorer.html"
JSON_PATH = ROOT / "docs" / "explorer_speed.json"
DOC_PATH = ROOT / "docs" / "explorer.md"
BEGIN, END = "<!-- explorer-speed: begin (bench/explorer_speed.py --render) -->", "<!-- explorer-speed: end -->"
NEW_TOKENS = 40
REPS = 3
PROMPTS = {lang: TEXT["default_prompt"][lang] for lang in ("en", "vi")}  # the page's own default prompts


def measure_browser(reps: int) -> dict:
    sys.path.insert(0, str(ROOT / "tests"))
    from conftest import find_chromium
    from playwright.sync_api import sync_playwright

    chromium = find_chromium()
    if chromium is None:
        raise SystemExit("no chromium found: apt-get install chromium (or set $DSPARK_CHROMIUM)")
    out: dict = {"ready_ms": [], "decode_ms": [], "first_screen_ms": [], "runs": {k: [] for k in PROMPTS}}
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        out["chromium"] = browser.version
        for _ in range(reps):
            context = browser.new_context(viewport={"width": 1280, "height": 900})
            page = context.new_page()
            page.goto(PAGE.as_uri())
            times = page.evaluate("dspark.ready")
            page.wait_for_function("window.dspark.firstScreenMs !== undefined", timeout=300_000)
            out["decode_ms"].append(times["decodeMs"])
            out["ready_ms"].append(times["decodeMs"] + times["buildMs"])
            out["first_screen_ms"].append(page.evaluate("dspark.firstScreenMs"))
            page.wait_for_function("Number(document.body.dataset.runs) > 0", timeout=300_000)  # the page's own run
            for name, prompt in PROMPTS.items():
                r = page.evaluate(
                    "([p, n]) => dspark.run(p, {maxNewTokens: n}).then(r => ({ms: r.ms, "
                    "forwards: r.target_forwards, mean: r.mean_accepted_length}))",
                    [prompt, NEW_TOKENS],
                )
                out["runs"][name].append(r)
            context.close()
        browser.close()
    return out


def measure_python(reps: int) -> dict:
    import torch

    from lab.cli import main

    torch.set_num_threads(1)
    runs: dict = {k: [] for k in PROMPTS}
    for _ in range(reps):
        for name, prompt in PROMPTS.items():
            buf = io.StringIO()
            with contextlib.redirect_stdout(buf):
                main(["generate", "--prompt", prompt, "--max-new-tokens", str(NEW_TOKENS), "--json"])
            g = json.loads(buf.getvalue())
            runs[name].append(
                {
                    "speculative_ms": 1000 * g["speculative"]["seconds"],
                    "plain_ms": 1000 * g["plain"]["seconds"],
                    "forwards": {  # the prompt's prefill counted, as the page counts it
                        "plain": g["plain"]["target_forwards"] + 1,
                        "speculative": g["speculative"]["target_forwards"] + 1,
                    },
                }
            )
    return {"torch": torch.__version__, "threads": 1, "runs": runs}


def summarize(browser: dict, python: dict) -> dict:
    from lab.evaluation.conditions import cpu_model

    med = statistics.median
    prompts = {}
    for name in PROMPTS:
        b, p = browser["runs"][name], python["runs"][name]
        prompts[name] = {
            "prompt": PROMPTS[name],
            "browser_speculative_ms": med(r["ms"]["speculative"] for r in b),
            "browser_plain_ms": med(r["ms"]["plain"] for r in b),
            "python_speculative_ms": med(r["speculative_ms"] for r in p),
            "python_plain_ms": med(r["plain_ms"] for r in p),
            "target_forwards": b[0]["forwards"],
            "python_target_forwards": p[0]["forwards"],
            "mean_accepted_length": b[0]["mean"],
        }
    return {
        "page_bytes": PAGE.stat().st_size,
        "new_tokens": NEW_TOKENS,
        "reps": len(browser["ready_ms"]),
        "decode_ms": med(browser["decode_ms"]),
        "ready_ms": med(browser["ready_ms"]),
        "first_screen_ms": med(browser["first_screen_ms"]),
        "prompts": prompts,
        "conditions": {
            "cpu": cpu_model(),
            "cores": os.cpu_count(),
            "chromium": browser["chromium"],
            "torch": python["torch"],
            "torch_threads": python["threads"],
            "python": platform.python_version(),
            "date": time.strftime("%Y-%m-%d", time.gmtime()),
        },
    }


def table(data: dict) -> str:
    """The Markdown table docs/explorer.md shows, from the JSON alone."""
    c = data["conditions"]
    rows = [
        "| measured | chromium (this page) | Python lab (`generate`) |",
        "|---|--:|--:|",
        f"| page size | {data['page_bytes'] / 1e6:.1f} MB | — |",
        f"| weights decoded | {data['decode_ms']:.0f} ms | — |",
        f"| model ready (decoded + built) | {data['ready_ms']:.0f} ms | — |",
        f"| first step screen (from navigation) | {data['first_screen_ms']:.0f} ms | — |",
    ]
    for name, p in data["prompts"].items():
        n = data["new_tokens"]
        rows.append(
            f"| {n} tokens, DSpark, prompt `{name}` | {p['browser_speculative_ms']:.0f} ms | "
            f"{p['python_speculative_ms']:.0f} ms |"
        )
        rows.append(
            f"| {n} tokens, plain, prompt `{name}` | {p['browser_plain_ms']:.0f} ms | {p['python_plain_ms']:.0f} ms |"
        )
        page_x = p["browser_plain_ms"] / p["browser_speculative_ms"]
        python_x = p["python_plain_ms"] / p["python_speculative_ms"]
        rows.append(f"| speed-up (plain ms ÷ DSpark ms), `{name}` | {page_x:.2f}× | {python_x:.2f}× |")
        f, g = p["target_forwards"], p["python_target_forwards"]
        rows.append(
            f"| target forwards (plain → DSpark), `{name}` | {f['plain']} → {f['speculative']} "
            f"(mean accepted length {p['mean_accepted_length']:.2f}) | {g['plain']} → {g['speculative']} |"
        )
    note = (
        f"Medians of {data['reps']} runs, {data['conditions']['date']}: {c['cpu']}, {c['cores']} cores; chromium "
        f"{c['chromium']}; torch {c['torch']} on {c['torch_threads']} thread, float64 (both sides); load average "
        f"{c['load_1min'][0]:.1f} before, {c['load_1min'][1]:.1f} after (wall times: a busy machine stretches them)."
    )
    return "\n".join(rows) + "\n\n" + note + "\n"


def rendered(doc: str, data: dict) -> str:
    pattern = re.compile(re.escape(BEGIN) + r"\n.*?" + re.escape(END), re.S)
    if len(pattern.findall(doc)) != 1:
        raise ValueError(f"{DOC_PATH.name} must hold the markers {BEGIN!r} … {END!r} exactly once")
    return pattern.sub(lambda _: BEGIN + "\n" + table(data) + END, doc)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, help="measure, and write the JSON here (docs/explorer_speed.json)")
    ap.add_argument("--reps", type=int, default=REPS, help=f"fresh tabs and Python runs (default {REPS})")
    ap.add_argument("--render", action="store_true", help="fill docs/explorer.md's table from --json")
    ap.add_argument("--check", action="store_true", help="exit 1 when docs/explorer.md's table is not --json's")
    ap.add_argument("--json", type=Path, default=JSON_PATH, help="the measurement the table is rendered from")
    args = ap.parse_args(argv)
    if args.out:
        load_before = os.getloadavg()[0]
        data = summarize(measure_browser(args.reps), measure_python(args.reps))
        data["conditions"]["load_1min"] = [round(load_before, 2), round(os.getloadavg()[0], 2)]  # before, after
        write_atomic(args.out, json.dumps(data, indent=1, ensure_ascii=False) + "\n")
        print(json.dumps(data, indent=1, ensure_ascii=False))
    if args.render or args.check:
        data = json.loads(args.json.read_text(encoding="utf-8"))
        doc = DOC_PATH.read_text(encoding="utf-8")
        page = rendered(doc, data)
        if args.check:
            same = page == doc
            print(f"{DOC_PATH}: {'up to date' if same else 'differs from the rendering of ' + str(args.json)}")
            return 0 if same else 1
        write_atomic(DOC_PATH, page)
        print(f"wrote {DOC_PATH}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

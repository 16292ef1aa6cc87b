"""docs/speed.md from one `make bench` run (docs/bench.json, written by `bench/bench.py --out`): no number typed.

  python bench/bench.py --out docs/bench.json        # measure (about 12 minutes on 2 cores; a quiet machine)
  python bench/speed_table.py                        # render docs/speed.md from it
  python bench/speed_table.py --check                # exit 1 when the page is not the rendering of the JSON

Every number on the page, the verdict against each target included, is computed here from the JSON; a new run
rewrites the page, and tests/test_bench_pages.py fails when the committed page is not the rendering of the
committed JSON.
"""

from __future__ import annotations

import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))

from rendered_page import page_main  # noqa: E402

JSON_PATH = ROOT / "docs" / "bench.json"
PAGE_PATH = ROOT / "docs" / "speed.md"
SECTIONS = ("decode", "verify", "speculative", "generate", "cli", "widgets")

# the targets the page checks each run against (bench/bench.py prints the same)
DECODE_MAX = 4.0  # lab decode step ÷ a plain transformer's
VERIFY_MAX = 1.25  # verify(5) ÷ one decode step
SPEC_MIN = 2.5  # speculative ÷ plain at k = 5
GAP_MAX = 0.05  # |generate's speculative ÷ plain ÷ the loop's − 1|
CLI_MAX = {"walk": 0.5, "inspect_flash": 3.0}  # seconds over `import torch`
SET_NAMES = {"held_out": "held-out corpus prompts", "free_form": "short free-form prompts"}


def x(v: float) -> str:
    return f"{v:.2f}×"


def signed(v: float, unit: str = " s") -> str:
    return ("+" if v >= 0 else "−") + f"{abs(v):.2f}{unit}"


def pct(v: float) -> str:
    """A signed share as a percentage with a true minus sign: +3.1%, −2.4%."""
    return ("+" if v >= 0 else "−") + f"{abs(v):.1%}"


def meets(ok: bool) -> str:
    return "meets it" if ok else "**misses it**"


def conditions_line(c: dict) -> str:
    load0, load1 = c["loadavg_1m_5m"][0], c["loadavg_1m_5m_end"][0]
    w = c["weights"]
    return (
        f"The run below: {c['cpu']}, {c['cpus']} cores (load average {load0:.2f} at the start, {load1:.2f} at the "
        f"end), {c['threads']} torch thread, torch {c['torch']}, Python {c['python']}, {c['dtype']}, batch "
        f"{c['batch']}, greedy, shipped weights target {w['target']} / dspark {w['dspark']}, "
        f"{c['bench_seconds']:.0f} s in all{' (a --quick run: not for quoting)' if c['quick'] else ''}."
    )


def cost_note(doc: dict) -> list[str]:
    """Why the bound's verify(k) costs are not the verify row's at the same cache length, with their largest gap."""
    c, v = doc["speculative"]["costs"], doc.get("verify")
    row = v["steps"].get(str(c["cache_length"])) if v else None
    if not row:
        return []
    gap = max(abs(c["verify_steps"][k] - row[k]) for k in row if k in c["verify_steps"])
    return [
        f"These verify(k) costs are not the verify row's at cache {c['cache_length']} (they differ by up to "
        f"{gap:.2f} of a step): the speculative section measures its own, after a held-out corpus prompt rather than "
        "random ids, so that each bound divides by costs timed in the same stretch of the run as its own speculative "
        "timings. Two p50s of the same forward taken minutes apart on a shared machine differ by that much; the "
        "verify row is the one to quote for verify(k).",
        "",
    ]


def rows(doc: dict) -> tuple[list[str], list[str]]:
    """The table's rows and one verdict per target."""
    out, verdicts = [], []
    d = doc.get("decode")
    if d:
        pw, ops = d["ratio_pairwise"], d["ops_per_step"]
        out.append(
            f"| decode step, cache {d['cache_length']} | {d['lab_ms']['p50']:.2f} ms ({d['lab_ms']['p95']:.2f}), "
            f"{ops['lab']:,} aten ops | plain transformer of the same size: {d['plain_ms']['p50']:.2f} ms "
            f"({d['plain_ms']['p95']:.2f}), {ops['plain']:,} ops | **{x(d['ratio_p50'])}** (step-by-step pairs "
            f"{x(pw['p50'])}) | ≤ {DECODE_MAX:g}× |"
        )
        verdicts.append(
            f"lab ÷ plain decode step {x(d['ratio_p50'])} (≤ {DECODE_MAX:g}×): {meets(d['ratio_p50'] <= DECODE_MAX)}"
        )
    v = doc.get("verify")
    if v:
        for L, row in v["steps"].items():
            ks = sorted(row, key=int)
            five = row[ks[-1]]
            out.append(
                f"| verify(k) ÷ one decode step, cache {L}, k = 1…{ks[-1]} | {' · '.join(f'{row[k]:.2f}' for k in ks)}"
                f" | | k = {ks[-1]}: **{five:.2f}** (pairs {v['pairwise'][L][ks[-1]]:.2f}) | ≤ {VERIFY_MAX:g} |"
            )
            verdicts.append(
                f"verify({ks[-1]}) at cache {L}: {five:.2f} (≤ {VERIFY_MAX:g}): {meets(five <= VERIFY_MAX)}"
            )
    s = doc.get("speculative")
    if s:
        for name, ps in s["prompt_sets"].items():
            ks = sorted(ps["k"], key=int)
            last = ps["k"][ks[-1]]
            ratios = " · ".join(x(ps["k"][k]["ratio"]["p50"]) for k in ks)
            taus = " · ".join(f"{ps['k'][k]['tau']:.2f}" for k in ks)
            bounds = " · ".join(x(ps["k"][k]["bound"]) for k in ks)
            out.append(
                f"| speculative ÷ plain, {SET_NAMES.get(name, name)} ({ps['prompts']}), k = 1…{ks[-1]} | {ratios} "
                f"(τ {taus}) | bound τ/(verify+draft): {bounds} | k = {ks[-1]}: **{x(last['ratio']['p50'])}** "
                f"(p95 {x(last['ratio']['p95'])}) | ≥ {SPEC_MIN:g}× at k = {ks[-1]} |"
            )
            ok = last["ratio"]["p50"] >= SPEC_MIN
            got = x(last["ratio"]["p50"])
            verdicts.append(f"speculative ÷ plain on {SET_NAMES.get(name, name)}: {got} (≥ {SPEC_MIN:g}×): {meets(ok)}")
    g = doc.get("generate")
    if g:
        for name, ps in g["prompt_sets"].items():
            r = ps["ratio"]
            out.append(
                f"| `dspark-lab generate` (the command, a fresh process a prompt), {SET_NAMES.get(name, name)} "
                f"({ps['prompts']}), ℓ = {g['verify_len']} | speculative ÷ plain {x(r['command'])} | this file's loop "
                f"on the same prompts: {x(r['loop'])} | **{pct(ps['gap'])}** | within ±{GAP_MAX:.0%} |"
            )
            ok = abs(ps["gap"]) <= GAP_MAX
            gap = pct(ps["gap"])
            where = SET_NAMES.get(name, name)
            verdicts.append(f"generate ÷ the loop on {where}: {gap} (within ±{GAP_MAX:.0%}): {meets(ok)}")
    c = doc.get("cli")
    if c:
        for name, label in (("walk", "`dspark-lab walk`"), ("inspect_flash", "`dspark-lab inspect --preset flash`")):
            sec, over, own = c["seconds"][name], c["over_import_torch_s"][name], c["over_import_torch_exit_s"][name]
            rss = f", peak RSS {c['inspect_flash_peak_rss_gb']:.2f} GB" if name == "inspect_flash" else ""
            ref = c["seconds"]["import_torch"]
            out.append(
                f"| {label} | {sec['p50']:.2f} s ({sec['p95']:.2f}){rss} | `import torch` {ref['p50']:.2f} s "
                f"({ref['p95']:.2f}) | **{signed(over['p50'])}** (p95 {signed(over['p95'])}); own work "
                f"{signed(own['p50'])} | ≤ + {CLI_MAX[name]:g} s |"
            )
            ok = over["p50"] <= CLI_MAX[name]
            verdicts.append(f"{label} {signed(over['p50'])} over `import torch` (≤ + {CLI_MAX[name]:g} s): {meets(ok)}")
    w = doc.get("widgets")
    if w and "ms" in w:
        cells = ", ".join(f"{k} {m['p50']:,.0f} ms ({m['p95']:,.0f})" for k, m in w["ms"].items())
        out.append(f"| lab app, a control change until redrawn | {cells} | | | |")
    return out, verdicts


def render(doc: dict) -> str:
    table, verdicts = rows(doc)
    lines = [
        "# Speed and budgets (`make bench`)",
        "",
        "[← back to the README](../README.md)",
        "",
        "One command measures the lab's speed, side by side in one run: `make bench` (= `python bench/bench.py`; "
        "`--json` or `--out run.json` for JSON, `--quick` for a smoke run, `--sections` to pick). Timings depend on "
        "the machine and its load: compare the ratios of one run, and quote its conditions. "
        + conditions_line(doc["conditions"]),
        "",
        "This page is generated by `bench/speed_table.py` from that run's JSON, `docs/bench.json` (committed beside "
        "it): no number here is typed by hand, and a new run rewrites every one of them (`make bench-docs` measures "
        "again and rewrites this page).",
        "",
        "| measure (p50, p95 in brackets) | lab | reference | ratio | target |",
        "|---|---|---|---|---|",
        *table,
        "",
    ]
    s = doc.get("speculative")
    if s:
        c = s["costs"]
        vs = ", ".join(f"{v:.2f}" for _, v in sorted(c["verify_steps"].items(), key=lambda kv: int(kv[0])))
        lines += [
            f"Costs in decode steps, measured in the same run at cache {c['cache_length']}: one DSpark draft pass "
            f"{c['draft_steps']:.2f}, verify(k) {vs}. The bound τ/(verify + draft) is what the loop would reach if a "
            "round cost nothing else. Each speculative run checks that the greedy output equals plain decoding (the "
            f"bench stops otherwise); {s['reps']} reps of {s['new_tokens']} new tokens.",
            "",
            *cost_note(doc),
        ]
    g = doc.get("generate")
    if g:
        lines += [
            "**`generate` beside the loop.** The command a user runs and this bench's own loop call the same two "
            "functions (`generate_plain`, `generate_speculative`). For every prompt the bench runs "
            "`python -m lab generate --json` in a fresh process and its loop in another fresh process "
            "(`bench.py --loop-once`, warm as the other sections' loop: one untimed pass first), the order alternating "
            "rep by rep, and compares the speculative ÷ plain each reports "
            f"({g['reps']} reps, {g['new_tokens']} new tokens; each prompt's fastest rep of each, summed over the "
            "prompts). Both sides are fresh processes because one process keeps its own luck — where its memory "
            "landed — for as long as it runs: a loop inside the bench's process moved its ratio by several per cent "
            "from one run to the next. Before either of its clocks the command builds the prepared weight layouts "
            "and runs one short speculative warm-up (the prefill and one full round), so the first timed run does "
            "not pay for what a fresh process touches the first time.",
            "",
        ]
    d = doc.get("decode")
    if d:
        files = d["lab_ops_by_file"]
        top = max(files, key=files.get)
        lines += [
            f"**The decode step.** {files[top]:,} of the step's {d['ops_per_step']['lab']:,} aten ops are in "
            f"`{top}`, most of them the Sinkhorn loop of mHC (its passes depend on each other, and each sublayer's "
            "logits on its input). Eager PyTorch has no fewer ops for it; a compiled or scripted loop would, at the "
            "price of a compiler or a deprecated API, which the lab does not take. The comparison interleaves the two "
            "models step by step, so each runs with the other's data in the CPU caches.",
            "",
        ]
    c = doc.get("cli")
    if c:
        lines += [
            'The command times are fresh subprocesses with bytecode cached, as after a normal install. "Own work" is '
            'a command\'s time over `python -c "import os, torch; os._exit(0)"`: the CLI ends with `os._exit` once '
            "its output is flushed (`lab.cli.leave`), skipping the interpreter teardown that a plain `import torch` "
            "pays.",
            "",
        ]
    lines += ["Where this run stands against the targets:", ""]
    lines += [f"- {v}" for v in verdicts]
    lines += [
        "",
        "The real widths (`flash-cpu`) are measured by `bench/flash_cpu.py`, the second half of `make bench`: see "
        "[real-scale.md](real-scale.md).",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    return page_main(__doc__, render, JSON_PATH, PAGE_PATH, argv)


if __name__ == "__main__":
    sys.exit(main())

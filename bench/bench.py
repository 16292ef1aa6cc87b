"""The lab's one benchmark entry (`make bench`): speed measured side by side in one run — a benchmark, not a test.

  python bench/bench.py [--json] [--out run.json] [--quick] [--sections decode,verify,speculative,generate,cli,widgets]
                        [--threads 1]

Sections (each a function in SECTIONS returning a dict, printed by its pair):
  decode       one greedy decode step, batch 1, from a cache of 32 tokens: the trained lab target (float64, static
               weights prepared) vs `plain_transformer.plain_like(model)` — a plain decoder of the same width,
               depth, vocab, dtype and active parameters. Wall time p50/p95 (the two interleaved step by step, the
               cache copied before each step and not timed, under torch.inference_mode), their ratio, and the aten
               ops one step dispatches (counted at the dispatcher: deterministic), the lab's split by source file.
  verify       verify(k) ÷ one decode step for k = 1..5 at cache lengths 32 and 200 (evaluation.profiling's
               `verify_steps`: one forward over k + 1 rows without commit vs one-token steps, on copies of a cache).
  speculative  speculative ÷ plain wall time for k = 1..5 (greedy, batch 1, the shipped DSpark draft), on held-out
               corpus prompts and on short free-form prompts ("hello", "the cat", …); τ = tokens per round and the
               bound τ / (verify(k) + draft) in decode steps, both costs measured in this run. Each rep runs plain
               and k = 1..5 back to back per prompt; greedy output must equal plain (the run stops otherwise).
  generate     the command a user runs, `python -m lab generate --json` (greedy, its default ℓ = the draft block),
               timed by itself in a fresh subprocess per prompt, beside this file's own loop over the same two
               functions (generate_plain, generate_speculative) on the same prompts — also a fresh process a prompt
               (`--loop-once`), warm as the other sections' loop, so neither side keeps one process's luck for the
               whole run — interleaved prompt by prompt, the order alternating rep by rep:
               speculative ÷ plain of each (Σ over prompts of each prompt's fastest plain run ÷ the same of its
               speculative runs; all reps pooled beside it) and the gap between them [target within 5 %]; the
               command's tokens must equal the loop's.
  cli          `python -m lab walk` and `python -m lab inspect --preset flash` wall times (and inspect's peak RSS)
               next to `python -c "import torch"`, interleaved, each a fresh subprocess with bytecode caching as a
               normal install has it (written once to a temporary pycache folder, not into the tree). The CLI ends
               with os._exit once its output is flushed, skipping the interpreter teardown that `import torch` pays;
               so the section also times `import torch` ending that way and reports each command's own work over it.
  widgets      the time a control change takes to redraw the lab app (`lab.screens.app.LabApp`): ℓ slider,
               temperature slider, language toggle, layer menu, prompt — set on the widget, as a click does.
Every section prints its run conditions; timings depend on the machine and its load: compare ratios measured in
one run, and quote the conditions. The weights are whatever `lab/weights` ships at the time of the run.
"""

from __future__ import annotations

import argparse
import collections
import copy
import json
import os
import platform
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch
from torch.utils._python_dispatch import TorchDispatchMode

sys.path.insert(0, str(Path(__file__).resolve().parent))
from plain_transformer import lab_active_params, plain_like  # noqa: E402

from dspark_mini.files import write_atomic  # noqa: E402
from lab.evaluation.conditions import cpu_model, percentiles
from lab.evaluation.profiling import verify_steps  # noqa: E402
from lab.evaluation.quality import FREE_FORM  # noqa: E402  (the prompts `train all` reports free-form τ on)

ROOT = Path(__file__).resolve().parent.parent
PKG = ROOT / "dspark_mini"
KS = (1, 2, 3, 4, 5)


def weights_stamp() -> dict:
    """The shipped files this run read (the drafter may be retrained between runs): name → sha256[:12]."""
    from lab.weights import file_sha256, weight_file

    return {name: file_sha256(weight_file(name))[:12] for name in ("target", "dspark")}


def conditions(args) -> dict:
    """What a timing depends on: machine, threads, versions, load, the weights."""
    return {
        "weights": weights_stamp(),
        "cpu": cpu_model(),
        "cpus": os.cpu_count(),
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "python": platform.python_version(),
        "loadavg_1m_5m": [round(v, 2) for v in os.getloadavg()[:2]],
        "dtype": "float64 (lab)",
        "batch": 1,
        "greedy": True,
        "quick": args.quick,
    }


def stats(xs: list[float], digits: int = 3) -> dict:
    p = percentiles(xs)
    return {"p50": round(p["p50"], digits), "p95": round(p["p95"], digits), "n": p["n"]}


# ---- decode: lab step vs the plain reference ---------------------------------------------------------------
class OpCounter(TorchDispatchMode):
    """Counts every aten op dispatched, by op name and by the innermost `dspark_mini/*.py` frame that called it."""

    def __init__(self):
        super().__init__()
        self.ops: collections.Counter = collections.Counter()
        self.files: collections.Counter = collections.Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        self.ops[str(func.overloadpacket.__name__)] += 1
        f, where = sys._getframe(1), "other"
        while f is not None:
            p = Path(f.f_code.co_filename)
            if p.parent.name == PKG.name:  # by the folder's name: bytecode compiled elsewhere keeps that path
                where = p.name
                break
            f = f.f_back
        self.files[where] += 1
        return func(*args, **(kwargs or {}))


def count_ops(step, cache) -> OpCounter:
    with torch.inference_mode(), OpCounter() as c:
        step(cache)
    return c


def decode_section(args, model) -> dict:
    from lab.evaluation.quality import eval_prompts
    from lab.realtext import DOMAINS

    reps, cache_len = (60 if args.quick else 200), 32
    plain = plain_like(model)
    prompt = eval_prompts(DOMAINS[0], 1, cache_len, seed=5)  # [1, 32] a held-out corpus prompt
    with torch.inference_mode():
        lab_cache = model.new_cache(1)
        tok = model(prompt, cache=lab_cache).logits[:, -1].argmax(-1, keepdim=True)  # [1, 1] the greedy next token
        plain_cache = plain.new_cache(1)
        plain(prompt, plain_cache)

    def lab_step(c):
        return model(tok, cache=c).logits[:, -1].argmax(-1)

    def plain_step(c):
        return plain(tok, c)[:, -1].argmax(-1)

    def copy_plain(c):
        return {"k": c["k"].clone(), "v": c["v"].clone(), "length": c["length"]}

    times: dict[str, list[float]] = {"lab": [], "plain": []}
    warmup = 10
    with torch.inference_mode():
        for rep in range(warmup + reps):
            for name, step, cache, cp in (
                ("lab", lab_step, lab_cache, copy.deepcopy),
                ("plain", plain_step, plain_cache, copy_plain),
            ):
                c = cp(cache)
                t = time.perf_counter()
                step(c)
                if rep >= warmup:
                    times[name].append((time.perf_counter() - t) * 1e3)
    lab_ops, plain_ops = count_ops(lab_step, copy.deepcopy(lab_cache)), count_ops(plain_step, copy_plain(plain_cache))
    ratios = sorted(a / b for a, b in zip(times["lab"], times["plain"], strict=True))
    lab_ms, plain_ms = stats(times["lab"]), stats(times["plain"])
    return {
        "cache_length": cache_len,
        "reps": reps,
        "active_params": {"lab": lab_active_params(model), "plain": sum(p.numel() for p in plain.parameters())},
        "plain_shape": f"D {model.cfg.dim}, L {len(plain.layers)}, V {model.cfg.vocab_size}, heads {plain.n_heads}, "
        f"MLP {plain.layers[0].w2.in_features}",
        "lab_ms": lab_ms,
        "plain_ms": plain_ms,
        "ratio_p50": round(lab_ms["p50"] / plain_ms["p50"], 3),
        "ratio_pairwise": stats(ratios),
        "ops_per_step": {"lab": sum(lab_ops.ops.values()), "plain": sum(plain_ops.ops.values())},
        "lab_ops_by_file": dict(lab_ops.files.most_common()),
        "lab_top_ops": dict(lab_ops.ops.most_common(10)),
    }


def print_decode(r: dict) -> None:
    print(f"== decode step, cache {r['cache_length']}: lab target vs plain transformer ({r['plain_shape']}) ==")
    print(f"{'':8s} {'p50 ms':>8s} {'p95 ms':>8s} {'aten ops':>9s}   active params")
    for name in ("lab", "plain"):
        ms = r[f"{name}_ms"]
        ops, params = r["ops_per_step"][name], r["active_params"][name]
        print(f"{name:8s} {ms['p50']:8.2f} {ms['p95']:8.2f} {ops:9d}   {params:,}")
    ops = r["ops_per_step"]
    pw = r["ratio_pairwise"]
    print(
        f"lab ÷ plain: {r['ratio_p50']:.2f}× (p50 ÷ p50; step-by-step pairs p50 {pw['p50']:.2f}×, p95 {pw['p95']:.2f}×)"
        f" · ops {ops['lab'] / ops['plain']:.1f}×   [target ≤ 4×]"
    )
    print("lab ops by file:", ", ".join(f"{k} {v}" for k, v in r["lab_ops_by_file"].items()))


# ---- verify(k) ÷ step ---------------------------------------------------------------------------------------
def verify_section(args, model) -> dict:
    reps = 9 if args.quick else 41
    with torch.inference_mode():
        v = verify_steps(model, list(KS), reps, (32, 200))
    return {"reps": reps, "steps": {L: v[L] for L in ("32", "200")}, "pairwise": v["pairwise"], "detail": v["detail"]}


def print_verify(r: dict) -> None:
    print(f"== verify(k) ÷ one decode step, {r['reps']} reps: p50 ÷ p50 (and the p50 of each rep's own ratio) ==")
    print(f"{'cache':>6s} " + " ".join(f"{'k=' + str(k):>14s}" for k in KS) + "   [target k=5 ≤ 1.25]")
    for L, row in r["steps"].items():
        pw = r["pairwise"][L]
        print(f"{L:>6s} " + " ".join(f"{row[str(k)]:6.3f} ({pw[str(k)]:5.3f})" for k in KS))


# ---- speculative ÷ plain --------------------------------------------------------------------------------------
def prompt_sets(n_held: int) -> dict[str, list[torch.Tensor]]:
    from dspark_mini.tokenizer import default_tokenizer
    from lab.evaluation.quality import eval_prompts
    from lab.realtext import DOMAINS

    held = [p[None] for d in DOMAINS for p in eval_prompts(d, n_held, 16, seed=5)]  # [1, 16] each
    tok = default_tokenizer()
    free = [torch.tensor([tok.encode(s)]) for s in FREE_FORM]  # [1, n] each
    return {"held_out": held, "free_form": free}


def prompt_texts(n_held: int) -> dict[str, list[str]]:
    """The same prompt sets as text (what `generate --prompt` takes); a held-out prompt decodes and encodes back to
    the very ids the loop uses (checked: the run stops otherwise)."""
    from dspark_mini.tokenizer import default_tokenizer

    tok = default_tokenizer()
    out = {}
    for name, prompts in prompt_sets(n_held).items():
        texts = [tok.decode(p[0].tolist()) for p in prompts]
        for t, p in zip(texts, prompts, strict=True):
            if tok.encode(t) != p[0].tolist():
                raise SystemExit(f"prompt {t!r} does not encode back to its ids: the command would see another prompt")
        out[name] = texts
    return out


def step_costs(model, prefix: torch.Tensor, reps: int) -> dict:
    """draft ÷ step (the DSpark pass drafts its whole block whatever k verify sends) and verify(k) ÷ step,
    after `prefix`: p50 wall times, each from copies of one cache."""
    from dspark_mini.model import draft

    with torch.inference_mode():
        base = model.new_cache(1)
        anchor = model(prefix, cache=base).logits[:, -1].argmax(-1)  # [1]
        rows = torch.randint(4, model.cfg.vocab_size, (1, max(KS) + 1), generator=torch.Generator().manual_seed(0))
        t_step, t_draft = [], []
        t_verify: dict[int, list[float]] = {k: [] for k in KS}
        for _ in range(reps):
            c = copy.deepcopy(base)
            t = time.perf_counter()
            model(anchor[:, None], cache=c)
            t_step.append(time.perf_counter() - t)
            c = copy.deepcopy(base)
            t = time.perf_counter()
            draft(model, anchor, c)
            t_draft.append(time.perf_counter() - t)
            for k in KS:
                c = copy.deepcopy(base)
                t = time.perf_counter()
                model(rows[:, : k + 1], cache=c, commit=False)
                t_verify[k].append(time.perf_counter() - t)
    step = percentiles(t_step)["p50"]
    return {
        "cache_length": prefix.size(1),
        "draft_steps": round(percentiles(t_draft)["p50"] / step, 3),
        "verify_steps": {k: round(percentiles(v)["p50"] / step, 3) for k, v in t_verify.items()},
    }


def speculative_section(args, model) -> dict:
    from dspark_mini.speculative import generate_plain, generate_speculative

    reps, n_held, new = (2, 1, 24) if args.quick else (3, 2, 40)
    from lab.evaluation.quality import eval_prompts
    from lab.realtext import DOMAINS

    sets = prompt_sets(n_held)
    costs = step_costs(model, eval_prompts(DOMAINS[0], 1, 32, seed=5), 9 if args.quick else 21)
    out: dict = {"reps": reps, "new_tokens": new, "costs": costs, "prompt_sets": {}}
    for name, prompts in sets.items():
        t_plain = [0.0] * reps
        t_spec = {k: [0.0] * reps for k in KS}
        rounds = dict.fromkeys(KS, 0)
        for rep in range(reps):
            for p in prompts:
                ref = generate_plain(model, p, new)
                t_plain[rep] += ref.seconds
                for k in KS:
                    s = generate_speculative(model, p, new, verify_len=k)
                    if s.tokens != ref.tokens:
                        raise SystemExit(f"speculative (k = {k}) output differs from plain decoding on {name} {p}")
                    t_spec[k][rep] += s.seconds
                    rounds[k] += len(s.rounds)
        rows = {}
        for k in KS:
            tau = reps * len(prompts) * (new - 1) / rounds[k]  # tokens per round (the first comes from the prefill)
            ratio = [a / b for a, b in zip(t_plain, t_spec[k], strict=True)]
            bound = tau / (costs["verify_steps"][k] + costs["draft_steps"])
            rows[str(k)] = {"ratio": stats(ratio), "tau": round(tau, 3), "bound": round(bound, 3)}
        out["prompt_sets"][name] = {
            "prompts": len(prompts),
            "plain_tok_s": stats([len(prompts) * new / t for t in t_plain], 1),
            "k": rows,
        }
    return out


def print_speculative(r: dict) -> None:
    c = r["costs"]
    print(
        f"== speculative ÷ plain, DSpark draft, greedy, batch 1, {r['new_tokens']} new tokens, {r['reps']} reps "
        f"(output == plain checked) =="
    )
    vs = ", ".join(f"k={k} {v:.2f}" for k, v in c["verify_steps"].items())
    print(f"costs in decode steps at cache {c['cache_length']}: draft {c['draft_steps']:.2f}; verify {vs}")
    for name, s in r["prompt_sets"].items():
        print(f"{name} ({s['prompts']} prompts; plain {s['plain_tok_s']['p50']:.1f} tok/s p50):")
        print(f"  {'k':>2s} {'ratio p50':>9s} {'p95':>6s} {'τ':>6s} {'bound':>6s} {'of bound':>8s}")
        for k, row in s["k"].items():
            rt = row["ratio"]
            share = rt["p50"] / row["bound"]
            print(f"  {k:>2s} {rt['p50']:8.2f}× {rt['p95']:5.2f}× {row['tau']:6.2f} {row['bound']:5.2f}× {share:8.0%}")


# ---- generate: the command beside the loop ---------------------------------------------------------------------
PARTS = ("plain", "speculative")


def generate_command(text: str, new: int, env: dict) -> dict:
    """`python -m lab generate --json` on one prompt, in a fresh subprocess: its own timings and tokens."""
    cmd = [sys.executable, "-m", "lab", "generate", "--prompt", text, "--max-new-tokens", str(new)]
    cmd += ["--temperature", "0", "--json"]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env, cwd=ROOT).stdout
    return json.loads(out)


def loop_once(text: str, new: int) -> dict:
    """This file's loop on one prompt in its own fresh process (`bench.py --loop-once TEXT --new N`): the shipped
    model loaded as every section loads it, one untimed plain + speculative pass (the loop of the other sections runs
    warm), then generate_plain and generate_speculative timed."""
    from dspark_mini.speculative import generate_plain, generate_speculative
    from lab.weights import lab_model

    model = lab_model("trained").eval().prepare()
    x = torch.tensor([model_tokens(text)])  # [1, n]
    generate_plain(model, x, new)
    generate_speculative(model, x, new)
    plain, spec = generate_plain(model, x, new), generate_speculative(model, x, new)
    if spec.tokens != plain.tokens:
        raise SystemExit(f"speculative output differs from plain decoding on {text!r}")
    return {"plain": {"seconds": plain.seconds, "tokens": plain.tokens[0]}, "speculative": {"seconds": spec.seconds}}


def generate_section(args, model) -> dict:
    reps, new = (2, 24) if args.quick else (4, 64)  # 64: as a user's `generate --max-new-tokens 64`
    env = os.environ | {"OMP_NUM_THREADS": str(torch.get_num_threads())}  # the command runs with the bench's threads
    loop_cmd = [sys.executable, str(Path(__file__).resolve()), "--threads", str(torch.get_num_threads())]
    out: dict = {"reps": reps, "new_tokens": new, "verify_len": model.cfg.dspark_block_size, "prompt_sets": {}}
    for name, texts in prompt_texts(1 if args.quick else 2).items():  # the speculative section's prompts
        # seconds[who][prompt] = [(plain s, speculative s) per rep]; who = this file's loop or the command
        seconds: dict[str, list[list[tuple[float, float]]]] = {who: [[] for _ in texts] for who in ("loop", "command")}
        for rep in range(reps):
            for i, text in enumerate(texts):  # interleaved prompt by prompt (the order alternating): the same load
                runs = {}
                for who in ("loop", "command") if rep % 2 == 0 else ("command", "loop"):
                    if who == "loop":
                        cmd = [*loop_cmd, "--loop-once", text, "--new", str(new)]
                        done = subprocess.run(cmd, check=True, capture_output=True, text=True, env=env, cwd=ROOT)
                        runs[who] = json.loads(done.stdout)
                    else:
                        runs[who] = generate_command(text, new, env)
                loop, got = runs["loop"], runs["command"]
                if not (loop["plain"]["tokens"] == got["speculative"]["tokens"] == got["plain"]["tokens"]):
                    raise SystemExit(f"generate --prompt {text!r}: the command's tokens differ from the loop's")
                for who, r in runs.items():
                    seconds[who][i].append((r["plain"]["seconds"], r["speculative"]["seconds"]))
        # each prompt's fastest rep of each run (the minimum: what the machine's noise only ever adds to), summed
        ratio = {
            who: round(
                sum(min(t[0] for t in ts) for ts in per_prompt) / sum(min(t[1] for t in ts) for ts in per_prompt), 3
            )
            for who, per_prompt in seconds.items()
        }
        pooled = {
            who: round(sum(t[0] for ts in pp for t in ts) / sum(t[1] for ts in pp for t in ts), 3)
            for who, pp in seconds.items()
        }
        out["prompt_sets"][name] = {
            "prompts": len(texts),
            "seconds": {  # Σ over prompts of each prompt's fastest rep
                who: {part: round(sum(min(t[j] for t in ts) for ts in pp), 4) for j, part in enumerate(PARTS)}
                for who, pp in seconds.items()
            },
            "ratio": ratio,
            "ratio_pooled": pooled,
            "gap": round(ratio["command"] / ratio["loop"] - 1, 4),
        }
    return out


def model_tokens(text: str) -> list[int]:
    from dspark_mini.tokenizer import default_tokenizer

    return default_tokenizer().encode(text)


def print_generate(r: dict) -> None:
    print(
        f"== generate (the command, a fresh process per prompt) beside the loop: speculative ÷ plain, greedy, "
        f"ℓ {r['verify_len']}, {r['new_tokens']} new tokens, {r['reps']} reps (tokens checked equal) =="
    )
    for name, s in r["prompt_sets"].items():
        rt = s["ratio"]
        print(
            f"{name:10s} ({s['prompts']} prompts)  command {rt['command']:.2f}×  loop {rt['loop']:.2f}×  "
            f"gap {s['gap']:+.1%}   [target within ±5 %]   (all reps pooled: command "
            f"{s['ratio_pooled']['command']:.2f}×, loop {s['ratio_pooled']['loop']:.2f}×)"
        )


# ---- cli: walk and inspect next to import torch ----------------------------------------------------------------
def run_timed(cmd: list[str], env: dict) -> tuple[float, float]:
    """Wall seconds and peak RSS (GB) of one subprocess (RSS: the largest child so far, so read it per command)."""
    t = time.perf_counter()
    subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL, env=env, cwd=ROOT)
    wall = time.perf_counter() - t
    return wall, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1e6


def cli_section(args, model=None) -> dict:
    reps = 3 if args.quick else 5
    cmds = {
        "import_torch": [sys.executable, "-c", "import torch"],
        # the same import, ending the way the CLI now ends (`lab.cli.leave`: os._exit once the output is flushed) —
        # the reference for what a command does itself, without the interpreter teardown it skips
        "import_torch_exit": [sys.executable, "-c", "import os, torch; os._exit(0)"],
        "walk": [sys.executable, "-m", "lab", "walk"],
        "inspect_flash": [sys.executable, "-m", "lab", "inspect", "--preset", "flash"],
    }
    with tempfile.TemporaryDirectory() as pycache:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
        env |= {"PYTHONPYCACHEPREFIX": pycache, "OMP_NUM_THREADS": str(torch.get_num_threads())}
        for cmd in cmds.values():  # warm-up: bytecode written once, files in the page cache
            run_timed(cmd, env)
        times: dict[str, list[float]] = {name: [] for name in cmds}
        rss = 0.0
        for _ in range(reps):
            for name, cmd in cmds.items():
                wall, peak = run_timed(cmd, env)
                times[name].append(wall)
                if name == "inspect_flash":
                    rss = max(rss, peak)

    def minus(ref: str) -> dict[str, list[float]]:
        return {n: [t - b for t, b in zip(times[n], times[ref], strict=True)] for n in ("walk", "inspect_flash")}

    over, own = minus("import_torch"), minus("import_torch_exit")
    return {
        "reps": reps,
        "seconds": {n: stats(v, 2) for n, v in times.items()},
        "over_import_torch_s": {n: stats(v, 2) for n, v in over.items()},
        "over_import_torch_exit_s": {n: stats(v, 2) for n, v in own.items()},
        "inspect_flash_peak_rss_gb": round(rss, 2),
        "budgets_over_import_torch_s": {"walk": 0.5, "inspect_flash": 3.0},
        "bytecode": "cached (a temporary PYTHONPYCACHEPREFIX, warmed once)",
    }


def print_cli(r: dict) -> None:
    print(f"== command wall times, fresh subprocesses, {r['reps']} interleaved reps ({r['bytecode']}) ==")
    budgets = r["budgets_over_import_torch_s"]
    for name, s in r["seconds"].items():
        extra = ""
        if name in r["over_import_torch_s"]:
            o = r["over_import_torch_s"][name]
            w = r["over_import_torch_exit_s"][name]
            extra = (
                f"   import torch + {o['p50']:.2f} s (p95 + {o['p95']:.2f})   [≤ + {budgets[name]} s];"
                f" own work + {w['p50']:.2f} s (over import torch ending with os._exit, as the CLI ends)"
            )
        print(f"{name:14s} p50 {s['p50']:5.2f} s  p95 {s['p95']:5.2f} s{extra}")
    print(f"inspect --preset flash peak RSS: {r['inspect_flash_peak_rss_gb']:.2f} GB")


# ---- widgets: a control change until the app has redrawn -------------------------------------------------------
def widgets_section(args, model=None) -> dict:
    try:
        from lab.screens.app import LabApp
        from lab.screens.widgets import LabState
    except ImportError as err:  # the notebook extra (ipywidgets, plotly) is not installed
        return {"skipped": f"{err} (pip install -e '.[notebook]')"}

    reps = 3 if args.quick else 5
    app = LabApp(LabState())
    c = app.controls
    changes = {  # control → the values it steps through (back to the first one: every change is a real change)
        "ℓ slider": ("verify_len", [3, 5, 1, 4, 2]),
        "temperature slider": ("temperature", [0.5, 1.0, 0.0]),
        "layer menu": ("layer", [2, 5, "auto"]),
        "language toggle": ("lang", ["vi", "en"]),
        "prompt": ("prompt", ["the cat sat on the mat", "hello world"]),
    }
    out = {}
    for label, (name, values) in changes.items():
        ts = []
        for _ in range(reps):
            for v in values:
                v = c["layer"].options[0][1] if v == "auto" else v
                t = time.perf_counter()
                c[name].value = v  # the observer runs LabState.update and every redraw before this returns
                ts.append((time.perf_counter() - t) * 1e3)
                if app.status.value and "b91c1c" in app.status.value:
                    raise SystemExit(f"widget change {name} = {v!r} was refused: {app.status.value}")
        out[label] = stats(ts, 1)
    return {"reps": reps, "ms": out}


def print_widgets(r: dict) -> None:
    if "skipped" in r:
        print(f"== lab app: skipped — {r['skipped']} ==")
        return
    print(f"== lab app: a control change until redrawn (ms, {r['reps']} rounds of each change) ==")
    for name, s in r["ms"].items():
        print(f"{name:20s} p50 {s['p50']:7.1f}  p95 {s['p95']:7.1f}  (n {s['n']})")


SECTIONS = {
    "decode": (decode_section, print_decode),
    "verify": (verify_section, print_verify),
    "speculative": (speculative_section, print_speculative),
    "generate": (generate_section, print_generate),
    "cli": (cli_section, print_cli),
    "widgets": (widgets_section, print_widgets),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sections", default=",".join(SECTIONS), help=f"comma-separated, from {list(SECTIONS)}")
    ap.add_argument("--threads", type=int, default=1, help="torch threads (the budgets are for 1)")
    ap.add_argument("--quick", action="store_true", help="fewer reps and prompts (a smoke run, not for quoting)")
    ap.add_argument("--json", action="store_true", help="print one JSON object instead of the tables")
    ap.add_argument("--out", help="also write the JSON to this file")
    ap.add_argument("--loop-once", metavar="TEXT", help=argparse.SUPPRESS)  # the generate section's loop, one prompt
    ap.add_argument("--new", type=int, default=64, help=argparse.SUPPRESS)
    a = ap.parse_args()
    if a.new < 1:
        raise SystemExit(f"--new = {a.new} is invalid: allowed an integer ≥ 1")
    if a.loop_once is not None:
        torch.set_num_threads(a.threads)
        print(json.dumps(loop_once(a.loop_once, a.new)))
        return
    if a.threads < 1:
        raise SystemExit(f"--threads = {a.threads} is invalid: allowed an integer ≥ 1")
    names = a.sections.split(",")
    for n in names:
        if n not in SECTIONS:
            raise SystemExit(f"unknown section {n!r}: allowed {', '.join(SECTIONS)}")
    torch.set_num_threads(a.threads)
    model = None
    if {"decode", "verify", "speculative", "generate"} & set(names):
        from lab.weights import lab_model

        model = lab_model("trained").eval().prepare()
    t0 = time.perf_counter()
    results: dict = {"conditions": conditions(a)}
    for n in names:
        results[n] = SECTIONS[n][0](a, model)
    results["conditions"]["loadavg_1m_5m_end"] = [round(v, 2) for v in os.getloadavg()[:2]]
    results["conditions"]["bench_seconds"] = round(time.perf_counter() - t0, 1)
    if a.out:
        write_atomic(a.out, json.dumps(results, indent=1) + "\n")  # the previous file survives a full disk
    if a.json:
        print(json.dumps(results, indent=1))
        return
    print("conditions:", ", ".join(f"{k} {v}" for k, v in results["conditions"].items()))
    for n in names:
        print()
        SECTIONS[n][1](results[n])


if __name__ == "__main__":
    main()

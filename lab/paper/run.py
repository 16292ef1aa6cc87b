"""`dspark-lab paper`: every measurement of the paper in miniature, in worker processes, with progress bars.

Jobs (each one process of one thread, `jobs` at a time): the five shipped drafters' quality (Table 1, Figures 2,
5, 6), one target cache per block size, then the variants of Figures 3 and 4 as soon as their block's cache is
ready, and the rounds of DSpark and MTP-1 the load simulation replays (Figures 7, 8). The simulation and
Appendix A then run here. One JSON per item (with the run conditions, the budget and the seed) and the figures
(PNG) are written into `out` (runs/paper by default) as one folder swapped in whole, with a manifest of every file
(`write_run`); then the docs pages (lab/paper/docs.py). Ctrl-C or SIGTERM stops every worker and writes nothing
(lab/options.py, `worker_pool`).
"""

from __future__ import annotations

import dataclasses
import json
import os
import time
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import torch

from dspark_mini import get_config
from dspark_mini.files import write_atomic

from ..evaluation.conditions import cpu_model
from ..options import worker_pool
from ..weights import DRAFTERS, read_manifest, weight_file
from . import measure
from .variants import DraftBudget, data_hash, target_cache, train_variant, variants_for

PAPER_VALUES = Path(__file__).resolve().parent / "paper_values.json"
ITEMS = ("table1", "fig2", "fig3", "fig4", "fig5", "fig6", "fig7", "fig8", "appendix_a")
SIM_REQUESTS = (1, 2, 4, 8, 16, 32, 64, 128, 256)


@dataclasses.dataclass(frozen=True)
class Budget:
    """Everything a run's size depends on (stored in every JSON)."""

    name: str
    prompts: int  # held-out prompts per domain: Table 1, Figures 2, 5, 6
    max_new_tokens: int
    draft: DraftBudget  # Figures 3 and 4: every variant alike
    stream_prompts: int  # per domain, recorded for the load simulation
    sim_rounds: int
    requests: tuple[int, ...]
    appendix_samples: int


def budget(name: str, seed: int) -> Budget:
    """The full run (the shipped recipe's draft budget: 600 steps, batch 8, 24 anchors, lr 6e-3), a medium one
    (a quarter of the steps, half the prompts: for a loaded machine) or --quick (every code path, tiny)."""
    if name == "quick":
        d = DraftBudget(2, 2, 12, 2, 6e-3, 4, 1, 1, 8, seed)
        return Budget(name, 1, 8, d, 1, 4, (1, 4, 16), 2000)
    if name == "medium":
        d = DraftBudget(150, 8, 32, 24, 6e-3, 256, 6, 4, 40, seed)
        return Budget(name, 6, 40, d, 3, 32, SIM_REQUESTS, 20_000)
    d = DraftBudget(600, 8, 32, 24, 6e-3, 1024, 6, 12, 40, seed)
    return Budget(name, 12, 40, d, 6, 64, SIM_REQUESTS, 20_000)


def paper_values() -> dict[str, Any]:
    """The paper's numbers (lab/paper/paper_values.json), each with the section it comes from."""
    return json.loads(PAPER_VALUES.read_text(encoding="utf-8"))


def run_conditions(b: Budget, weights_dir: str | None, jobs: int) -> dict[str, Any]:
    files = read_manifest(weight_file("target", weights_dir).parent) or {}
    cfg = get_config("lab")
    return {
        "budget": dataclasses.asdict(b),
        "model": {"vocab_size": cfg.vocab_size, "draft_layers": cfg.n_mtp_layers, "block": cfg.dspark_block_size},
        "seed": b.draft.seed,
        "jobs": jobs,
        "threads_per_job": 1,
        "weights_sha256": {k: v["sha256"][:16] for k, v in sorted(files.items())},
        "torch": torch.__version__,
        "cpu": cpu_model(),
    }


class Jobs:
    """The worker pool with one progress task per job; `submit` starts a job, `poll` collects finished ones."""

    def __init__(self, pool: Any, queue: Any, bar: Any):
        self.pool, self.queue, self.bar = pool, queue, bar
        self.running: dict[Future, tuple[str, Any]] = {}
        self.tasks: dict[str, Any] = {}

    def submit(self, name: str, total: int, fn: Any, *args: Any) -> None:
        self.tasks[name] = self.bar.add_task(name, total=total) if self.bar is not None else None
        if self.pool is None:  # in this process (jobs = 1): run now, the bar follows the steps
            f: Future = Future()
            f.set_result(fn(*args, self.queue) if fn is train_variant else fn(*args))
        else:
            f = self.pool.submit(fn, *args, self.queue) if fn is train_variant else self.pool.submit(fn, *args)
        self.running[f] = (name, total)

    def poll(self) -> list[tuple[str, Any]]:
        while self.queue is not None and not self.queue.empty():
            name, step = self.queue.get()
            if self.bar is not None:
                self.bar.update(self.tasks[name], completed=step)
        done = []
        for f in [f for f in self.running if f.done()]:
            name, total = self.running.pop(f)
            if self.bar is not None:
                self.bar.update(self.tasks[name], completed=total)
            done.append((name, f.result()))
        return done


class LocalQueue(list):
    """What the progress ticks go through when every job runs in this process (no Manager needed)."""

    def put(self, item: Any) -> None:
        self.append(item)

    def empty(self) -> bool:
        return not self

    def get(self) -> Any:
        return self.pop(0)


def dflash_depth(weights_dir: str | None, cfg: Any) -> int:
    """The shipped DFlash's draft layers (its file's config; `Recipe.dflash_layers`): Figures 3 and 4 train DFlash
    at the depth the set's own DFlash has."""
    from dspark_mini.checkpoint import read_header

    return int(read_header(weight_file("dflash", weights_dir))["config"].get("n_mtp_layers", cfg.n_mtp_layers))


def measure_all(b: Budget, weights_dir: str | None, jobs: int, bar: Any, lang: str = "en") -> dict[str, Any]:
    """Run every job; → {"shipped": {drafter: quality}, "variants": {name: record}, "streams": {...}, ...}."""
    from .. import weights as w

    cfg = w.lab_model(weights_dir=weights_dir).cfg
    variants, depths, blocks = variants_for(cfg, dflash_depth(weights_dir, cfg))
    d = dataclasses.asdict(b.draft)
    results: dict[str, Any] = {"shipped": {}, "variants": {}, "streams": {}, "depths": depths, "blocks": blocks}
    results["dflash_depth"] = dflash_depth(weights_dir, cfg)
    results["cache_hash"] = {}
    target = str(weight_file("target", weights_dir))

    def work(jobs_: Jobs) -> None:
        for name in DRAFTERS:
            jobs_.submit(
                f"table1 · {name}",
                1,
                measure.shipped_quality,
                name,
                weights_dir,
                b.prompts,
                b.max_new_tokens,
                b.draft.seed,
            )
        for k in blocks:
            jobs_.submit(f"cache · k{k}", 1, target_cache, target, k, d)
        jobs_.submit(
            "streams · dspark", 1, measure.dspark_streams, weights_dir, b.stream_prompts, b.max_new_tokens, b.draft.seed
        )
        jobs_.submit(
            "streams · mtp1", 1, measure.mtp1_streams, weights_dir, b.stream_prompts, b.max_new_tokens, b.draft.seed
        )
        while jobs_.running:
            for name, res in jobs_.poll():
                collect(jobs_, name, res)
            time.sleep(0.2)

    def collect(jobs_: Jobs, name: str, res: Any) -> None:
        group, _, what = name.partition(" · ")
        if group == "table1":
            results["shipped"][what] = res
        elif group == "cache":
            k = int(what[1:])
            results["cache_hash"][k] = data_hash(res)
            for v in (v for v in variants if v.block == k):
                jobs_.submit(v.name, b.draft.steps, train_variant, v, weights_dir, d, res)
        elif group == "streams":
            results["streams"][what] = res
        else:
            results["variants"][name] = res

    if jobs == 1:
        work(Jobs(None, LocalQueue(), bar))
    else:  # Ctrl-C, SIGTERM or a failed job stop every worker first; a worker killed for memory is one line
        with worker_pool(jobs, "--jobs", lang) as (pool, queue):
            work(Jobs(pool, queue, bar))
    return results


def write_items(out: Path, items: dict[str, dict[str, Any]]) -> list[Path]:
    paths = []
    for name, item in items.items():
        path = out / f"{name}.json"
        write_atomic(path, (json.dumps(item, indent=1, ensure_ascii=False, allow_nan=False) + "\n").encode())
        paths.append(path)
    return paths


def simulate_load(results: dict[str, Any], b: Budget) -> tuple[dict[str, Any], dict[str, Any]]:
    """Figures 7 and 8: the recorded rounds replayed on the shipped SPS table. → (curves, conditions)"""
    from ..serving.schedule import SHIPPED_TABLE, read_table, stream_summary

    table = read_table(None)
    s = results["streams"]
    curves = measure.load_curves(s["dspark"], s["mtp1"], table, b.requests, b.sim_rounds, b.draft.seed)
    cond = {
        "sps_table": SHIPPED_TABLE.name,
        "sps_conditions": table.conditions,
        "requests": list(b.requests),
        "rounds": b.sim_rounds,
        "round_time": "1 / SPS(B) of the table: the verify step only (the draft's and the scheduler's time are not "
        "included, for either drafter)",
        "streams": {"dspark": stream_summary(s["dspark"]), "mtp1": stream_summary(s["mtp1"])},
    }
    return curves, cond


def build_items(results: dict[str, Any], b: Budget, cond: dict[str, Any], cfg: Any) -> dict[str, dict[str, Any]]:
    """Every item's record from the measurements."""
    from . import items

    pv = paper_values()
    cond = {**cond, "target_cache_hash": {str(k): v for k, v in results["cache_hash"].items()}}
    curves, sim_cond = simulate_load(results, b)
    depth, block = cfg.n_mtp_layers, cfg.dspark_block_size
    return {
        "table1": items.table1(results, pv["table1"], cond),
        "fig2": items.fig2(results, pv["fig2"], cond),
        "fig3": items.fig3(results, pv["fig3"], cond, depth, block),
        "fig4": items.fig4(results, pv["fig4"], cond, depth),
        "fig5": items.fig5(results, pv["fig5"], cond),
        "fig6": items.fig6(results, pv["fig6"], cond),
        "fig7": items.fig7(curves, sim_cond, pv["fig7"], cond),
        "fig8": items.fig8(curves, sim_cond, pv["fig8"], cond),
        "appendix_a": items.appendix(pv["appendix_a"], cond, b.appendix_samples, b.draft.seed),
    }


def measure_run(
    size: str = "full",
    weights_dir: str | None = None,
    seed: int = 0,
    jobs: int = 2,
    console: Any = None,
    lang: str = "en",
) -> tuple[dict[str, Any], Budget, float]:
    """Every measurement (progress bars on `console`); nothing is written. → (results, budget, seconds)"""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn

    t0 = time.perf_counter()
    b = budget(size, seed)
    columns = (TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(), TimeElapsedColumn())
    with Progress(*columns, console=console, transient=False, disable=console is None) as bar:
        results = measure_all(b, weights_dir, jobs, bar, lang)
    return results, b, time.perf_counter() - t0


def run_paper(
    out: str | Path,
    size: str = "full",
    weights_dir: str | None = None,
    seed: int = 0,
    jobs: int = 2,
    console: Any = None,
    pictures: bool = True,
    overwrite: bool = False,
    docs: str | Path | None = None,
    lang: str = "en",
) -> dict[str, Any]:
    """Measure everything (`measure_run`), then write the run into `out` whole (`write_run`; the pages too when
    `docs` is inside `out`). → see `finish`"""
    results, b, seconds = measure_run(size, weights_dir, seed, jobs, console, lang)
    return write_run(results, out, b, weights_dir, jobs, seconds, pictures, overwrite, docs, lang)


def write_run(
    results: dict[str, Any],
    out: str | Path,
    b: Budget,
    weights_dir: str | None,
    jobs: int,
    seconds: float,
    pictures: bool = True,
    overwrite: bool = False,
    docs: str | Path | None = None,
    lang: str = "en",
) -> dict[str, Any]:
    """The run's files into `out` as one folder (dspark_mini.files.folder_swap): the items, the PNGs and — when
    `docs` is `out` or inside it — the pages, built beside `out` and swapped in whole with a manifest of every file
    (`.dspark-lab-files.json`, kind "paper"), so an interrupted or failed run (Ctrl-C, a full disk) leaves the
    previous run as it was. `out` may be new, empty or (with `overwrite`, `--force`) a paper run the lab wrote.
    → see `finish`; "paths" name the files at their place in `out`"""
    from dspark_mini.files import folder_swap

    from .docs import write_pages

    out = Path(out)
    inner = docs_inside(out, docs)
    with folder_swap(out, "paper", overwrite, option="--out", lang=lang) as work:
        res = finish(results, work, b, weights_dir, jobs, seconds, pictures)
        if inner is not None:
            res["paths"] += [str(p) for p in write_pages(work, work / inner)]
    res["paths"] = [str(out / Path(p).relative_to(work)) for p in res["paths"]]
    return res


def docs_inside(out: Path, docs: str | Path | None) -> Path | None:
    """Where `docs` is inside `out` (Path(".") when it is `out`) — its pages then belong to the run — else None."""
    if docs is None:
        return None
    real_out, real_docs = Path(os.path.realpath(out)), Path(os.path.realpath(docs))
    if real_docs == real_out or real_out in real_docs.parents:
        return real_docs.relative_to(real_out)
    return None


def finish(
    results: dict[str, Any],
    out: str | Path,
    b: Budget,
    weights_dir: str | None,
    jobs: int,
    seconds: float,
    pictures: bool = True,
) -> dict[str, Any]:
    """The items from the measurements: `out`/*.json, then the PNGs (both languages) unless `pictures` is False.
    → {"items": {...}, "paths": [...], "seconds": s, "no_pictures": why none were drawn, or None}"""
    from .. import weights as w
    from .figures import draw_all
    from .texts import T

    cfg = w.lab_model(weights_dir=weights_dir).cfg
    items = build_items(results, b, run_conditions(b, weights_dir, jobs), cfg)
    seconds = round(seconds, 1)
    for item in items.values():
        item["conditions"] = {**item["conditions"], "run_seconds": seconds}
    paths = write_items(Path(out), items)
    drawn, why = draw_all(items, Path(out)) if pictures else ([], T("pictures_off", "en"))
    return {"items": items, "paths": [str(p) for p in paths + drawn], "seconds": seconds, "no_pictures": why}

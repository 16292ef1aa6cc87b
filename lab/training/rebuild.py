"""`dspark-lab train all`: rebuild every shipped weight file from scratch, calibrate, evaluate, write the report.

  1. the real-text corpus (lab/realtext, in the repo; its training documents shuffled by the seed) → 2. the target →
  3. the target cache (`target_cache`: the target's own continuations of seeded free-form and corpus prompts, and the
  window schedule every drafter trains on) → 4. five drafters against the frozen target, two at a time (dspark,
  dspark-rnn, dflash, eagle3, mtp1; each process one thread; all on the same windows of the cache, in the same order,
  for the same steps) → 5. STS temperatures for the DSpark confidence heads from held-out rounds → 6. quality (τ,
  acceptance, threshold sweep; τ on free-form prompts) per drafter → 7. wall-clock tokens/s of plain vs speculative
  decoding, alone on the machine, one drafter after the other → `report.json` beside the weights → `manifest.json`
  (every file's sha256; lab/weights.py).
All of it is written into a fresh sibling folder and swapped in at the very end, so an interrupted run (Ctrl-C,
a kill, a full disk) leaves the previous set exactly as it was.
Everything is seeded and single-threaded, so a rerun writes the same weights and the same τ; only the seconds
and tokens/s change with the machine. `--quick` runs the same code with tiny settings (the CI smoke run).
"""

from __future__ import annotations

import dataclasses
import json
import math
import shutil
import time
from pathlib import Path
from typing import Any

import torch

from dspark_mini import get_config
from dspark_mini.baselines import save_baseline
from dspark_mini.checkpoint import CheckpointError, load_model, read_header, save
from dspark_mini.drafters import DSparkDrafter
from dspark_mini.files import atomic_path, folder_swap, write_atomic
from dspark_mini.validate import check_int

from ..evaluation.calibration import calibration_report, fit_sts
from ..evaluation.quality import (
    calibration_rounds,
    conditions,
    decay,
    free_form_quality,
    heldout_calibration,
    macro_tau,
    quality,
    speed,
)
from ..evaluation.quality import eval_prompts as held_out_prompts
from ..options import worker_pool
from ..weights import (
    CACHE_FILE,
    DRAFTERS,
    MANIFEST,
    MODEL_DRAFTERS,
    SET_FILES,
    check_out,
    file_sha256,
    load_drafter,
    stamp_set,
    training_streams,
    verify_set,
)
from .target_cache import CacheSpec, build_cache, load_cache, save_cache
from .train import Selection, evaluate, model_for_draft, train_draft, train_target


def strict_json(x: Any) -> Any:
    """A report JSON can hold: a NaN or ±inf (e.g. a calibration with no rounds in a --quick run) becomes null."""
    if isinstance(x, dict):
        return {k: strict_json(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [strict_json(v) for v in x]
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


@dataclasses.dataclass(frozen=True)
class Recipe:
    """Every setting of a full rebuild (stored in report.json)."""

    seed: int = 0  # shuffles the training documents, draws every init, window and prompt
    target_steps: int = 1800
    target_batch: int = 16
    target_seq_len: int = 128
    target_lr: float = 3e-3
    target_threads: int = 2  # the target trains alone: both cores (the drafters run one thread per process)
    draft_steps: int = 600  # every drafter: the same optimizer steps …
    draft_batch: int = 8  # … of the same windows (the target cache's schedule) …
    draft_context: int = 32  # … of draft_context + k + 1 ids each
    draft_anchors: int = 24  # DSpark / DFlash: blocks cut from each window per step (of the 32 a window has)
    draft_lr: float = 6e-3  # every drafter's peak learning rate
    dspark_layers: int = 3  # draft layers of DSpark (and DSpark-RNN): V4.1's own drafter has 3
    dflash_layers: int = 5  # … of DFlash (the paper's Fig. 3 sets a 2-layer DSpark against a 5-layer DFlash)
    # each baseline's loss: "ce" (hard, on the true token), "soft-ce" (Eagle3's own), "distill" (DSpark's family,
    # 0.1·CE + 0.9·‖p_d − p_t‖₁): a fair comparison gives every drafter the same kind of loss against the target
    dflash_loss: str = "distill"
    eagle3_loss: str = "distill"
    mtp1_loss: str = "distill"
    select_every: int = 100  # > 0: every drafter keeps its best checkpoint by held-out acceptance, measured this often
    select_windows: int = 16  # … on this many windows of the held-out split

    def __post_init__(self) -> None:
        for name, allowed in (
            ("dflash_loss", ("ce", "distill")),
            ("eagle3_loss", ("soft-ce", "distill")),
            ("mtp1_loss", ("ce", "distill")),
        ):
            if getattr(self, name) not in allowed:
                raise ValueError(f"{name} = {getattr(self, name)!r} is invalid: allowed {', '.join(allowed)}")
        for name, lo in (("dspark_layers", 1), ("dflash_layers", 1), ("select_every", 0), ("select_windows", 1)):
            check_int(getattr(self, name), name, lo)

    cache_prompts: int = 2048  # target cache: sequences the target writes itself (`lab.training.target_cache`)
    cache_free: float = 0.5  # … their share started from free-form prompts (the rest from training-line prefixes)
    cache_sampled: float = 0.25  # … their share continued at temperature 1 (the rest greedy)
    cache_rows: int = 6  # of the draft_batch windows per step, cached sequences (the rest corpus windows)
    calib_prompts: int = 12  # per domain, for STS (a seed the evaluation does not use)
    eval_prompts: int = 12  # per domain
    max_new_tokens: int = 40
    speed_prompts: int = 2  # per domain
    jobs: int = 2  # processes for the drafters' training and evaluation


QUICK = Recipe(
    target_steps=3,
    target_batch=4,
    target_seq_len=16,
    draft_steps=3,
    draft_batch=2,
    draft_context=12,
    draft_anchors=2,
    cache_prompts=8,
    cache_rows=1,
    calib_prompts=2,
    eval_prompts=2,
    max_new_tokens=8,
    speed_prompts=1,
    target_threads=1,
    select_every=2,
    select_windows=2,
)


def corpus_streams(recipe: Recipe) -> tuple[torch.Tensor, torch.Tensor]:
    return training_streams(recipe.seed)


def cache_spec(recipe: Recipe, block_size: int) -> CacheSpec:
    """The target cache a recipe asks for: windows of draft_context + k + 1 ids, draft_steps × draft_batch."""
    return CacheSpec(
        prompts=recipe.cache_prompts,
        free=recipe.cache_free,
        sampled=recipe.cache_sampled,
        length=recipe.draft_context + block_size + 1,
        steps=recipe.draft_steps,
        batch=recipe.draft_batch,
        rows=recipe.cache_rows,
        seed=recipe.seed,
    )


def selection(recipe: Recipe, length: int) -> Selection | None:
    """The held-out selection set of a recipe (None when `select_every` is 0): the first `select_windows`
    consecutive windows of `length` ids of the held-out split, the same for every drafter."""
    if recipe.select_every == 0:
        return None
    _, val_ids = corpus_streams(recipe)
    n = min(recipe.select_windows, val_ids.numel() // length)
    if n < 1:
        raise ValueError(f"the held-out split has {val_ids.numel()} ids: too few for one selection window of {length}")
    return Selection(val_ids[: n * length].view(n, length), recipe.select_every)


def selection_record(log: Any) -> dict[str, Any]:
    """The held-out curve a drafter's file records: steps, acceptance at each, the step it was kept at."""
    return {"steps": log.select_steps, "accept": log.select_accept, "best_step": log.best_step}


def train_job(kind: str, out_dir: str, recipe: dict[str, Any], queue=None) -> dict[str, Any]:
    """Train one drafter against the saved target on the set's target cache, calibrate it (DSpark kinds: STS),
    save it; → its meta (with the cache's sha256, the ids it read, its steps, trained parameters and seconds)."""
    torch.set_num_threads(1)
    r = Recipe(**recipe)
    out = Path(out_dir)
    train_ids, _ = corpus_streams(r)
    target_sha256 = file_sha256(out / "target.safetensors")  # recorded in the drafter's header: one set
    k = read_header(out / "target.safetensors")["config"]["dspark_block_size"]
    cache = load_cache(out / CACHE_FILE, cache_spec(r, k))
    if cache.target_sha256 != target_sha256:
        raise ValueError(f"{out / CACHE_FILE} was written by another target: allowed the cache of this set's target")

    def tick(step: int, loss: float) -> None:
        if queue is not None:
            queue.put((kind, step))

    select = selection(r, cache.spec.length)

    meta: dict[str, Any] = {"trained": "draft", "kind": kind, "seed": r.seed}  # the file's header: no clock in it
    seconds: dict[str, float] = {}  # … the seconds go to report.json only, so a rebuild writes the same bytes
    meta.update(
        data_sha256=cache.sha256, tokens_seen=cache.tokens_seen, steps=r.draft_steps, batch=r.draft_batch, lr=r.draft_lr
    )
    if kind in MODEL_DRAFTERS:
        layers = r.dflash_layers if kind == "dflash" else r.dspark_layers
        model = model_for_draft(out / "target.safetensors", kind, r.seed, layers)
        log = train_draft(
            model,
            train_ids,
            r.draft_steps,
            r.draft_batch,
            r.draft_context,
            r.draft_lr,
            r.seed,
            kind=kind,
            anchors=r.draft_anchors,
            on_step=tick,
            schedule=cache.windows,
            weights=(0.1, 0.9, 0.0) if kind == "dflash" and r.dflash_loss == "distill" else None,
            select=select,
        )
        frozen = ("mtp.markov_head.", "mtp.confidence_head.") if kind == "dflash" else ()  # DFlash: heads off
        meta["parameters"] = sum(
            p.numel() for n, p in model.named_parameters() if n.startswith("mtp.") and not n.startswith(frozen)
        )
        meta.update(anchors=r.draft_anchors, context=r.draft_context)
        if select is not None:
            meta["selection"] = selection_record(log)
        seconds["train_seconds"] = round(log.seconds, 1)
        if kind != "dflash":  # STS on held-out rounds (another held-out seed than the evaluation's)
            t0 = time.perf_counter()
            conf, kept = calibration_rounds(model, DSparkDrafter(kind), r.calib_prompts, r.max_new_tokens, seed=1)
            temps = fit_sts(conf, kept)
            meta["confidence_temperatures"] = temps
            meta["sts"] = calibration_report(conf, kept, temps)
            seconds["sts_seconds"] = round(time.perf_counter() - t0, 1)
            model.mtp.set_confidence_temperatures(temps)
        save(model, out / f"{kind}.safetensors", part="draft", meta=meta, target_sha256=target_sha256)
    else:
        from .baselines import train_eagle3, train_mtp1

        trainer = train_eagle3 if kind == "eagle3" else train_mtp1
        model = load_model(out / "target.safetensors")
        context = cache.spec.length - (k if kind == "eagle3" else 2)  # rows of a window: every one it can train
        module, log = trainer(
            model,
            train_ids,
            r.draft_steps,
            r.draft_batch,
            context,
            r.draft_lr,
            r.seed,
            on_step=tick,
            schedule=cache.windows,
            loss=r.eagle3_loss if kind == "eagle3" else r.mtp1_loss,
            select=select,
        )
        meta["parameters"] = sum(p.numel() for p in module.parameters())
        meta["context"] = context
        if select is not None:
            meta["selection"] = selection_record(log)
        seconds["train_seconds"] = round(log.seconds, 1)
        save_baseline(module, out / f"{kind}.safetensors", meta=meta, target_sha256=target_sha256)
    return meta | seconds


def eval_job(kind: str, out_dir: str, recipe: dict[str, Any]) -> dict[str, Any]:
    """The quality of one saved drafter, loaded back the way the lab loads it (batch 1, held-out prompts)."""
    torch.set_num_threads(1)
    r = Recipe(**recipe)
    t0 = time.perf_counter()
    model, drafter = load_drafter(kind, out_dir)
    result = quality(
        model, drafter, n_prompts=r.eval_prompts, max_new_tokens=r.max_new_tokens, seed=r.seed, keep_rounds=True
    )
    out: dict[str, Any] = {"quality": result, "free_form": free_form_quality(model, drafter, r.max_new_tokens, r.seed)}
    if drafter.has_confidence:  # the STS temperatures judged on the evaluation's rounds, all domains pooled
        rounds = [x for row in result.values() for x in row.pop("rounds_t1")]
        out["heldout_calibration"] = heldout_calibration(rounds, model.mtp.confidence_temperatures)
    out["seconds"] = round(time.perf_counter() - t0, 1)
    return out


def train_all(
    out_dir: str | Path,
    recipe: Recipe = Recipe(),
    console=None,
    quiet: bool = False,
    force: bool = False,
    keep_target: bool = False,
) -> dict[str, Any]:
    """The whole rebuild; returns (and writes) the report.

    The set is built in a fresh sibling folder `<out>.partial-<pid>` and swapped in only once it is complete and
    recorded (`stamp_set`; dspark_mini.files.folder_swap): an interrupted or failed run (a full disk: one WriteError
    naming `<out>`) removes that folder and leaves `<out>` as it was. An `<out>` that is a symbolic link stays one:
    the folder it points to is replaced.
    `force` is needed to replace the shipped lab/weights. `keep_target` (`--keep-target`): the target already in
    `<out>` is kept byte for byte, with its record, and only the drafters are rebuilt against it (`kept_target`)."""
    out = check_out(out_dir, folder=True, force=force)  # before anything runs
    kept = kept_target(out) if keep_target else None
    with folder_swap(out, None) as work:  # a weights set is recorded by its own manifest.json (check_out)
        report = build_set(work, recipe, console, quiet, kept)
        stamp_set(work)  # the target's sha256 in every drafter header (already there) + manifest.json
    return report


def kept_target(out: Path) -> Path:
    """`--keep-target`: the trained target of the set in `out`, checked before anything runs. → its path"""
    path = out / "target.safetensors"
    shown = f"--keep-target: {path}"
    if not path.is_file():
        raise ValueError(f"{shown} is missing: allowed with an --out folder that holds a set (a previous `train all`)")
    try:
        header = read_header(path)
    except CheckpointError as e:
        raise ValueError(f"{shown} is not a lab checkpoint ({e}): allowed a target written by `train all`") from e
    meta = header.get("meta") or {}
    if header.get("part") != "target" or meta.get("trained") != "target" or "val_accuracy" not in meta:
        raise ValueError(f"{shown} is not a trained target with its record: allowed a target written by `train all`")
    return path


def keep_target_file(work: Path, src: Path, report: dict[str, Any]) -> None:
    """1–2 kept: the previous set's target, byte for byte, and the record its header carries (its training is
    not repeated: `seconds.target` is 0 and `target.kept` says so)."""
    with atomic_path(work / "target.safetensors") as tmp:
        shutil.copyfile(src, tmp)
    report["target"] = read_header(src)["meta"] | {"kept": True}
    report["seconds"]["target"] = 0.0


def build_set(
    work: Path, recipe: Recipe, console=None, quiet: bool = False, kept: Path | None = None
) -> dict[str, Any]:
    """Every file of a set into the folder `work`: target (trained, or `kept` from the previous set), drafters,
    report.json."""
    from rich.progress import BarColumn, Progress, TextColumn, TimeElapsedColumn

    torch.set_num_threads(1)
    t_start = time.perf_counter()
    report: dict[str, Any] = {"recipe": dataclasses.asdict(recipe), "seconds": {}}
    bar = Progress(
        TextColumn("[bold]{task.description}"),
        BarColumn(),
        TextColumn("{task.completed}/{task.total}"),
        TimeElapsedColumn(),
        console=console,
        disable=quiet,
    )
    with bar:
        if kept is None:
            train_target_file(work, recipe, bar, report)
        else:
            keep_target_file(work, kept, report)
        build_cache_file(work, recipe, bar, report)
        train_drafters(work, recipe, bar, report)
        measure_speed(work, recipe, bar, report)
    report["conditions"] = conditions(recipe.eval_prompts, recipe.max_new_tokens, recipe.speed_prompts, recipe.seed) | {
        "jobs": recipe.jobs
    }
    report["summary"] = summary(report)
    report["seconds"]["total"] = round(time.perf_counter() - t_start, 1)
    text = json.dumps(strict_json(report), indent=1, ensure_ascii=False, allow_nan=False) + "\n"
    write_atomic(work / "report.json", text)
    return report


def train_target_file(work: Path, recipe: Recipe, bar, report: dict[str, Any]) -> None:
    """1–2. corpus and target → work/target.safetensors."""
    train_ids, val_ids = corpus_streams(recipe)
    task = bar.add_task("target", total=recipe.target_steps)
    torch.set_num_threads(recipe.target_threads)  # alone on the machine for now
    model, log = train_target(
        get_config("lab"),
        train_ids,
        val_ids,
        recipe.target_steps,
        recipe.target_batch,
        recipe.target_seq_len,
        recipe.target_lr,
        recipe.seed,
        eval_every=max(1, recipe.target_steps // 8),
        on_step=lambda s, _: bar.update(task, completed=s),
    )
    torch.set_num_threads(1)
    val_loss, val_acc = evaluate(model, val_ids, recipe.target_seq_len)  # in the shipped dtype (float64)
    target_meta = {
        "trained": "target",
        "seed": recipe.seed,
        "steps": recipe.target_steps,
        "train_tokens": int(train_ids.numel()),
        "val_loss": val_loss,
        "val_accuracy": val_acc,
        "val_seq_len": recipe.target_seq_len,
        "curve": {"val_steps": log.val_steps, "val_loss": log.val_loss, "val_accuracy": log.val_accuracy},
    }
    save(model, work / "target.safetensors", part="target", meta=target_meta)
    report["target"] = target_meta
    report["seconds"]["target"] = round(log.seconds, 1)


def build_cache_file(work: Path, recipe: Recipe, bar, report: dict[str, Any]) -> None:
    """3. the target cache → work/target_cache.safetensors (one process: the target writes its continuations)."""
    t0 = time.perf_counter()
    task = bar.add_task("target cache", total=1)
    train_ids, _ = corpus_streams(recipe)
    target_path = work / "target.safetensors"
    model = load_model(target_path)
    spec = cache_spec(recipe, model.cfg.dspark_block_size)
    cache = save_cache(build_cache(model, train_ids, spec), work / CACHE_FILE, file_sha256(target_path))
    bar.update(task, completed=1)
    report["target_cache"] = {
        "file": CACHE_FILE,
        "sha256": cache.sha256,
        "bytes": (work / CACHE_FILE).stat().st_size,
        "sequences": list(cache.sequences.shape),
        "windows": list(cache.windows.shape),
        "tokens_seen": cache.tokens_seen,
        "spec": dataclasses.asdict(spec),
    }
    report["seconds"]["cache"] = round(time.perf_counter() - t0, 1)


def train_drafters(work: Path, recipe: Recipe, bar, report: dict[str, Any]) -> None:
    """4–6. drafters: training jobs first, each one's evaluation as soon as it is saved, `jobs` processes."""
    t0 = time.perf_counter()
    steps = dict.fromkeys(DRAFTERS, recipe.draft_steps)  # one budget for every drafter
    tasks = {k: bar.add_task(k, total=steps[k] + 1) for k in DRAFTERS}  # + 1: the evaluation
    args = (str(work), dataclasses.asdict(recipe))
    report["drafters"] = {}
    # Ctrl-C or SIGTERM stop every worker before the set's partial folder goes; a worker killed for memory is one line
    with worker_pool(recipe.jobs, None) as (pool, queue):
        training = {pool.submit(train_job, k, *args, queue): k for k in DRAFTERS}
        evaluating: dict[Any, str] = {}
        while training or evaluating:
            while not queue.empty():
                kind, step = queue.get()
                bar.update(tasks[kind], completed=step)
            for f in [f for f in training if f.done()]:
                kind = training.pop(f)
                report["drafters"][kind] = {"train": f.result()}
                evaluating[pool.submit(eval_job, kind, *args)] = kind
            for f in [f for f in evaluating if f.done()]:
                kind = evaluating.pop(f)
                result = f.result()
                report["drafters"][kind]["quality"] = result["quality"]
                report["drafters"][kind]["free_form"] = result["free_form"]
                if "heldout_calibration" in result:
                    report["drafters"][kind]["heldout_calibration"] = result["heldout_calibration"]
                report["drafters"][kind]["train"]["eval_seconds"] = result["seconds"]
                bar.update(tasks[kind], completed=steps[kind] + 1)
            time.sleep(0.2)
    report["drafters"] = {k: report["drafters"][k] for k in DRAFTERS}
    report["seconds"]["drafters"] = round(time.perf_counter() - t0, 1)


def measure_speed(work: Path, recipe: Recipe, bar, report: dict[str, Any]) -> None:
    """7. tokens/s of plain vs speculative decoding, alone, one drafter after the other."""
    t0 = time.perf_counter()
    task = bar.add_task("tokens/s", total=len(DRAFTERS))
    for i, kind in enumerate(DRAFTERS):
        model, drafter = load_drafter(kind, work)
        for domain, row in report["drafters"][kind]["quality"].items():
            prompts = held_out_prompts(domain, recipe.speed_prompts, seed=recipe.seed)
            row["speed"] = speed(model, drafter, prompts, recipe.max_new_tokens)
        bar.update(task, completed=i + 1)
    report["seconds"]["speed"] = round(time.perf_counter() - t0, 1)


def summary(report: dict[str, Any]) -> dict[str, Any]:
    """The headline numbers: mean τ per drafter, DSpark ÷ DFlash and ÷ Eagle3, acceptance decay, tokens/s ratios."""
    view = {"drafters": {k: v["quality"] for k, v in report["drafters"].items()}}
    mean = {k: {t: macro_tau(view, k, t) for t in ("t1", "greedy")} for k in view["drafters"]}
    out: dict[str, Any] = {"mean_tau": mean}
    out["free_form_tau"] = {
        k: {t: v["free_form"][t]["tau"] for t in ("t1", "greedy")}
        for k, v in report["drafters"].items()
        if "free_form" in v
    }
    for base in ("dflash", "eagle3"):  # the paper's two comparisons (Table 1), on the same target cache
        if "dspark" in mean and base in mean:
            out[f"dspark_over_{base}"] = {t: mean["dspark"][t] / mean[base][t] for t in ("t1", "greedy")}
    out["decay"] = {
        k: {d: {t: decay(r[t]["cond_accept"]) for t in ("t1", "greedy")} for d, r in rows.items()}
        for k, rows in view["drafters"].items()
    }
    out["tokens_per_s_ratio"] = {
        k: {d: r["speed"]["ratio"] for d, r in rows.items() if "speed" in r} for k, rows in view["drafters"].items()
    }
    return out


def check_shipped(out_dir: str | Path) -> list[str]:
    """The files a complete rebuild leaves that are missing; when none is, the set is verified (manifest and
    each drafter's target; a mismatch raises WeightSetError). Used by tests and the CLI."""
    out = Path(out_dir)
    missing = [n for n in (*SET_FILES, MANIFEST) if not (out / n).is_file()]
    if not missing:
        read_header(out / "target.safetensors")
        verify_set(out)
    return missing

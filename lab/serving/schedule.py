"""`dspark-lab schedule`: the load simulation of confidence-scheduled verification on the shipped data.

Two files ship in lab/serving/data/ and are what the scheduler reads by default:

  sps_lab_cpu.json      SPS(B) of the lab model's verify forward measured on the lab machine
                        (`dspark-lab profile --sps --reps 30 --out lab/serving/data/sps_lab_cpu.json`)
  streams_dspark.json   calibrated confidences and acceptances of real rounds of the trained DSpark drafter,
                        batch 1, the full block verified (`dspark-lab schedule --record --streams
                        lab/serving/data/streams_dspark.json`), with the settings of RECORD_SETTINGS

`schedule_report` replays the streams for R = 1, 2, 4, …, 256 requests under every policy on three tables —
`measured` (the shipped or given table), `smooth` and `staircase` (lab.serving.sps) — and measures the
scheduler's own time per round (`plan_cost`) next to the verify forward it plans, at R = 1 and R = 256.
Every allowed combination runs (`--requests` up to 1024, `--rounds` up to 10,000: ≈ 45 min for R = 1 … 1024 ×
10,000 rounds, estimated on a loaded 2-core machine); `estimate_schedule` says how much that is before it
starts (lab.serving.work).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import torch

from dspark_mini.scheduler import DEFAULT_THRESHOLD, POLICIES, Scheduler
from dspark_mini.validate import check_float, check_int, check_seed

from .simulate import (
    SIM_REQUESTS,
    check_streams,
    load_streams,
    plan_cost,
    record_streams,
    replay,
    run_policy,
    simulate,
)
from .sps import SPSTable, load_table, smooth_table, staircase_table

DATA = Path(__file__).resolve().parent / "data"
SHIPPED_TABLE = DATA / "sps_lab_cpu.json"
SHIPPED_STREAMS = DATA / "streams_dspark.json"
DEFAULT_STREAMS_OUT = Path("runs") / "streams_dspark.json"
TABLE_NAMES = ("measured", "smooth", "staircase")
SIM_ROUNDS = 64  # measured rounds per (R, policy, table), after a warm-up of LAG rounds
LAG = 2  # dspark-async reads the confidences of two rounds ago
COST_REQUESTS = (1, 256)  # where the scheduler's own time is measured
COST_REPS = 50
MAX_REQUESTS = 1024  # beyond 256 × 6 = 1536 tokens the measured table extrapolates its last segment
# the shipped streams: held-out prompts of every domain (the evaluation's seed 0; STS was fitted on seed 1),
# sampled at T = 1 as the paper's offline numbers and the STS fit, 40 new tokens as `dspark-lab eval`
RECORD_SETTINGS: dict[str, Any] = {"n_prompts": 32, "max_new_tokens": 40, "temperature": 1.0, "seed": 0}


def check_requests(requests: Sequence[int], name: str = "--requests") -> list[int]:
    allowed = f"distinct integers in 1..{MAX_REQUESTS}, e.g. 1,2,4,8"
    if not requests:
        raise ValueError(f"{name} is empty: allowed {allowed}")
    for r in requests:
        check_int(r, name, 1, MAX_REQUESTS, "concurrent requests R")
    if len(set(requests)) != len(requests):
        raise ValueError(f"{name} repeats a value: allowed {allowed}")
    return sorted(requests)


def parse_requests(text: str) -> list[int]:
    try:
        values = [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise ValueError(f"--requests = {text!r} is invalid: allowed comma-separated integers, e.g. 1,2,4,8") from None
    return check_requests(values)


def parse_policies(text: str) -> list[str]:
    names = [t.strip() for t in text.split(",") if t.strip()]
    allowed = ", ".join(POLICIES)
    if not names:
        raise ValueError(f"--policies is empty: allowed a comma-separated list of {allowed}")
    for n in names:
        if n not in POLICIES:
            raise ValueError(f"--policies: {n!r} is not a policy: allowed {allowed}")
    if len(set(names)) != len(names):
        raise ValueError(f"--policies repeats a policy: allowed each of {allowed} once")
    return names


def read_table(path: str | Path | None, option: str = "--sps-table") -> SPSTable:
    """The measured table: the shipped one, or `path`; an error names the option and the file."""
    path = SHIPPED_TABLE if path is None else Path(path)
    try:
        return load_table(path)
    except (OSError, ValueError) as e:
        raise ValueError(f"{option} = {str(path)!r} is invalid: {e}") from None


def read_streams(path: str | Path | None, option: str = "--streams") -> list:
    """The recorded streams: the shipped ones, or `path`; an error names the option and the file."""
    path = SHIPPED_STREAMS if path is None else Path(path)
    try:
        return load_streams(path)
    except FileNotFoundError:
        raise ValueError(
            f"{option} = {str(path)!r}: no such file: allowed a streams file (make one with "
            "`dspark-lab schedule --record --streams FILE`)"
        ) from None
    except (OSError, ValueError, TypeError) as e:
        raise ValueError(
            f"{option} = {str(path)!r} is invalid ({e}): allowed a streams file written by "
            "`dspark-lab schedule --record` (format 'dspark-lab/verify-rows')"
        ) from None


def streams_conditions(path: str | Path | None) -> dict[str, Any]:
    from dspark_mini.jsonlimits import MAX_DATA_BYTES, read_json

    p = SHIPPED_STREAMS if path is None else Path(path)
    return read_json(p, MAX_DATA_BYTES).get("conditions", {})


def record_default_streams(on_progress: Callable[[str], None] | None = None) -> tuple[list, dict[str, Any]]:
    """Re-record the streams with RECORD_SETTINGS from the shipped trained DSpark drafter. → (streams, conditions)"""
    from lab.evaluation.conditions import cpu_model
    from lab.realtext import DOMAINS
    from lab.weights import WEIGHTS_DIR, load_drafter, read_manifest

    model, drafter = load_drafter("dspark")
    streams = record_streams(model, drafter, on_progress=on_progress, **RECORD_SETTINGS)
    files = read_manifest(WEIGHTS_DIR) or {}
    cond = {
        **RECORD_SETTINGS,
        "drafter": "dspark (shipped lab/weights, STS-calibrated confidence head)",
        "weights_sha256": {n: files[f"{n}.safetensors"]["sha256"][:16] for n in ("target", "dspark") if files},
        "domains": list(DOMAINS),
        "prompts": "lab.evaluation.quality.eval_prompts (held-out lines), 16 tokens",
        "batch": 1,
        "verify": "the full trained block every round; rounds with fewer than k drafts (end of a generation) dropped",
        "threads": torch.get_num_threads(),
        "torch": torch.__version__,
        "cpu": cpu_model(),
    }
    return streams, cond


def tables_for(measured: SPSTable) -> dict[str, SPSTable]:
    return {"measured": measured, "smooth": smooth_table(), "staircase": staircase_table()}


def table_summary(table: SPSTable, path: str | Path | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {
        "interpolation": table.interpolation,
        "batch_tokens": list(table.batch_tokens),
        "steps_per_s": list(table.forced_steps_per_s),
        "conditions": table.conditions,
    }
    if path is not None:
        out["path"] = str(path)
    return out


def stream_summary(streams: Sequence[Sequence[Any]]) -> dict[str, Any]:
    confs, ns, k = check_streams(streams)
    c, n = torch.cat(confs), torch.cat(ns)
    a = torch.cumprod(c, 1)
    kept = torch.stack([(n > j).double() for j in range(k)], 1)
    return {
        "streams": len(confs),
        "rows": int(n.numel()),
        "k": k,
        "tau_full_block": float(n.double().mean()) + 1.0,
        "mean_survival": [round(float(x), 4) for x in a.mean(0)],  # predicted P(drafts 1..j kept)
        "observed_survival": [round(float(x), 4) for x in kept.mean(0)],
    }


def scheduler_cost(
    streams: Sequence[Sequence[Any]],
    measured: SPSTable,
    policies: Sequence[str],
    threshold: float,
    seed: int = 0,
    requests: Sequence[int] = COST_REQUESTS,
    reps: int = COST_REPS,
) -> dict[str, dict[str, dict[str, Any]]]:
    """cost[policy][R] = {plan_s: {p50, p95, p99, n}, batch_tokens, verify_s, plan_over_verify}: the scheduler's
    own time for one round of R replayed requests, beside the measured table's step time at the B it planned."""
    _, _, k = check_streams(streams)
    out: dict[str, dict[str, dict[str, Any]]] = {p: {} for p in policies}
    for r in requests:
        batches = replay(streams, r, LAG + 1, seed)
        conf, stale = batches[LAG][0], batches[0][0]
        for p in policies:
            sched = Scheduler(p, k, measured, threshold=threshold)
            plan = sched.plan(conf, stale)
            cost = plan_cost(sched, conf, stale, reps)
            verify = measured.step_seconds(plan.batch_tokens)
            out[p][str(r)] = {
                "plan_s": cost,
                "batch_tokens": plan.batch_tokens,
                "verify_s": verify,
                "plan_over_verify": cost["p50"] / verify,
            }
    return out


def schedule_report(
    streams: Sequence[Sequence[Any]] | None = None,
    measured: SPSTable | None = None,
    requests: Sequence[int] = SIM_REQUESTS,
    policies: Sequence[str] = POLICIES,
    threshold: float = DEFAULT_THRESHOLD,
    rounds: int = SIM_ROUNDS,
    seed: int = 0,
    cost_reps: int = COST_REPS,
    table_path: str | Path | None = None,
    streams_path: str | Path | None = None,
    streams_cond: dict[str, Any] | None = None,
    on_round: Callable[[int], None] | None = None,
) -> dict[str, Any]:
    """Everything `dspark-lab schedule --json` prints: sim[table][policy][R] = {throughput, mean_verify_len,
    tau, batch_tokens}, the conditions, and the scheduler's cost per round. Defaults: the shipped files.
    on_round(R): called after every simulated round of R requests (a progress bar)."""
    from lab.evaluation.conditions import cpu_model

    check_seed(seed)
    check_float(threshold, "threshold", 0.0, 1.0)
    check_int(rounds, "rounds", 1)
    requests = check_requests(list(requests), "requests")
    if streams is None:
        streams = read_streams(streams_path)
        streams_cond = streams_conditions(streams_path) if streams_cond is None else streams_cond
    if measured is None:
        measured = read_table(table_path)
        table_path = SHIPPED_TABLE if table_path is None else table_path
    tables = tables_for(measured)
    sim = simulate(streams, tables, policies, requests, rounds, seed, threshold, LAG, on_round)
    return {
        "sim": sim,
        "scheduler_cost": scheduler_cost(streams, measured, policies, threshold, seed, COST_REQUESTS, cost_reps),
        "conditions": {
            "requests": requests,
            "policies": list(policies),
            "rounds": rounds,
            "warmup_rounds": LAG,
            "stale_lag": LAG,
            "seed": seed,
            "threshold": threshold,
            "round_time": "1 / SPS(B) of the table (the verify step; draft and scheduler time not included)",
            "streams": {
                **stream_summary(streams),
                "recorded": dict(streams_cond or {}),
                "path": str(streams_path or SHIPPED_STREAMS),
            },
            "tables": {
                name: table_summary(t, table_path if name == "measured" else None) for name, t in tables.items()
            },
            "plan_cost_machine": {
                "threads": torch.get_num_threads(),
                "cpu": cpu_model(),
                "cpus": os.cpu_count(),
                "torch": torch.__version__,
                "reps": cost_reps,
            },
        },
    }


def estimate_schedule(
    streams: Sequence[Sequence[Any]],
    measured: SPSTable,
    requests: Sequence[int],
    policies: Sequence[str],
    rounds: int,
    seed: int = 0,
    threshold: float = DEFAULT_THRESHOLD,
):
    """The work of `schedule_report`'s simulation: for every R, policy and table, `rounds` scheduler plans of R
    requests (exact counts), timed by a probe here — per R, the replay of LAG + 1 rounds and one measured round
    of every policy (`run_policy`), which the simulation repeats `rounds` times on every table. → Estimate"""
    from .work import Estimate

    requests = check_requests(list(requests), "requests")
    check_int(rounds, "rounds", 1)
    _, _, k = check_streams(streams)
    n_tables = len(TABLE_NAMES)
    for _ in range(2):  # the second run is the one kept: the first one pays for the first calls
        seconds = 0.0
        for r in requests:
            t0 = time.perf_counter()
            batches = replay(streams, r, LAG + 1, seed)
            seconds += (rounds + LAG) * (time.perf_counter() - t0) / (LAG + 1)
            for p in policies:
                sched = Scheduler(p, k, measured, threshold=threshold)
                t0 = time.perf_counter()
                run_policy(batches, sched, measured, LAG)  # one measured round
                seconds += n_tables * rounds * (time.perf_counter() - t0)
    plans = len(requests) * len(policies) * n_tables * rounds
    counts = {
        "loads": len(requests),
        "smallest": requests[0],
        "largest": requests[-1],
        "policies": len(policies),
        "tables": n_tables,
        "rounds": rounds,
        "plans": plans,
        "request_rounds": sum(requests) * len(policies) * n_tables * rounds,
    }
    return Estimate("schedule", counts, seconds)

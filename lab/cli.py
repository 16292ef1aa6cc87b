"""`dspark-lab`: walk the ten steps of DeepSeek-V4.1-Flash in the terminal, or inspect a preset.

dspark-lab walk                      all steps on the tiny `lab` model (English; --lang vi for Vietnamese)
dspark-lab walk --step 2A --lang vi  one step, in Vietnamese
dspark-lab inspect --preset flash    the real-size model built on `meta`: parameters and KV budget
dspark-lab generate                  plain vs speculative decoding, with the accept/reject strip
dspark-lab profile                   parity, tap mix, acceptance by position, verify cost (p50/p95/p99)
dspark-lab profile --sps             SPS(B): verify steps/s vs batch tokens on this machine, saved as a cost table
dspark-lab schedule                  load simulation of the verify-length policies for R = 1 … 256 requests
dspark-lab data                      the toy corpus: math, code and chat lines, described
dspark-lab train target|draft|all    train the tiny target, one drafter against it, or the whole shipped set
dspark-lab eval                      τ, acceptance per position and tokens/s of the trained drafters

Every number an option brings in is checked before anything runs (`check_args`), and every error is one line
that names the option and what is allowed. Exit codes: 0 done · 2 bad input (also a path that cannot be read
or written) · 130 interrupted (Ctrl-C: one line, no traceback) · 141 the reader closed the pipe
(`dspark-lab walk --json | head`): a quiet stop, 128 + SIGPIPE, what `cat` or `seq` report there.
--json output is strict JSON: a NaN or ±inf becomes null and is listed under "non_finite".
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any, NoReturn

from .style import print_json

EPILOG = """\
steps: 1A token→embedding→4 lanes · 1B Engram · 2A mHC · 3A CED schedule · 3B CSA2 compressor ·
3C indexer + candidates + window · 4A MLA attention · 6A KV cache (890 B/token) · 5A MoE · 6B LM head + DSpark

examples:
  dspark-lab walk                                   every step, English
  dspark-lab walk --lang vi --step 6B               the destination step, in Vietnamese
  dspark-lab walk --prompt "The model predicts the next token." --seed 3 --json
  dspark-lab walk --step 6B --weights untrained     the same screen before training: confidences near 1/V
  dspark-lab inspect --preset flash --json          551.88 B backbone, 196.61 B Engram, 14.23 B draft, 890 B/token
  dspark-lab generate --max-new-tokens 48 --block 5 plain vs DSpark speculative decoding, side by side
  dspark-lab generate --temperature 1 --seed 7      sampled: same distribution as the target, other tokens
  dspark-lab profile --json                         parity, tap mix, acceptance, verify cost with conditions
  dspark-lab profile --sps --out runs/sps.json      SPS(B) of the verify forward here, as a cost table
  dspark-lab schedule --json                        throughput and verify length per policy, R = 1 … 256
  dspark-lab data --out runs/corpus                 write and describe the toy corpus (3 domains)
  dspark-lab train target --steps 400 --out runs/target.safetensors
  dspark-lab train draft --kind eagle3 --target runs/target.safetensors --out runs/eagle3.safetensors
  dspark-lab train all --out lab/weights --force    rebuild every shipped weight file (≈ 15 min on 2 quiet cores)
  dspark-lab train all --keep-target --out lab/weights --force   the drafters only, against the shipped target
  dspark-lab eval --json                            τ, acceptance per position, tokens/s per drafter and domain

exit codes: 0 done · 2 bad input · 130 interrupted (Ctrl-C) · 141 output pipe closed (e.g. `| head`)
"""

# Defaults that --help prints (it stays fast: no torch). tests/test_bad_input.py checks them against
# lab/training/rebuild.py Recipe (target_steps, draft_steps, baseline_steps) and lab/evaluation/quality.py.
TRAIN_STEPS = {"target": 400, "dspark": 600, "dspark-rnn": 600, "dflash": 600, "eagle3": 400, "mtp1": 400}
EVAL_PROMPTS, EVAL_NEW_TOKENS = 12, 40
# Upper bounds of the options that have no natural one (the model-dependent ones come from the lab config).
MAX_STEPS = 100_000  # 250× the shipped target recipe
MAX_BATCH = 256  # sequences per step: 16× the default (memory grows with batch × seq-len)
MAX_LR = 1.0  # Adam moves every weight by about lr per step: above 1 it throws the weights away
MAX_REPS = 1000  # timing repetitions per block size
MAX_EVAL_PROMPTS = 1000  # held-out prompts per domain: math has ≈ 1,000 distinct lines, more would repeat


# lab.realscale.layout.STYLES (a test keeps them equal; --help stays torch-free)
CHECKPOINT_STYLES = ("lab", "official")
MAX_SHARDS = 4096  # the real checkpoint has 48; one shard per tensor would already be absurd

CHECKPOINT_EXAMPLES = """\
examples:
  dspark-lab checkpoint export --out runs/ckpt --shards 3        the trained lab model, official names (exact)
  dspark-lab checkpoint export --out runs/ckpt --style official  dense weights as FP8 32×32 blocks (lossy here)
  dspark-lab inspect --checkpoint runs/ckpt                      what the headers say, without reading data
  dspark-lab generate --checkpoint runs/ckpt --json              decode with the model read back from it
  dspark-lab checkpoint headers --out runs/flash-headers         real-shape headers: 474.34 GiB, no data
"""


def add_checkpoint_parser(sub: Any) -> None:
    c = sub.add_parser(
        "checkpoint",
        help="write the lab model in DeepSeek's official checkpoint layout (sharded safetensors + index)",
        description="Write the trained lab model (target + DSpark draft) the way DeepSeek ships V4.1-Flash: "
        "model-0000k-of-0000N.safetensors shards, model.safetensors.index.json and config.json, with the "
        "reference's tensor names; routed experts as MXFP4, Engram tables as FP8 rows. `headers` writes "
        "header-only shards at the real flash shapes (no data) for `inspect --checkpoint`.",
        epilog=CHECKPOINT_EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    c.add_argument("what", choices=["export", "headers"], help="export: the lab model; headers: real shapes, no data")
    c.add_argument(
        "--out",
        required=True,
        help="a new or empty folder (a link is followed); built beside it and swapped in whole",
    )
    c.add_argument("--shards", type=int, default=None, help=f"number of shards: 1..{MAX_SHARDS} (export 2, headers 48)")
    c.add_argument(
        "--style",
        default=None,
        choices=list(CHECKPOINT_STYLES),
        help="lab: only what the lab simulates is packed, the round trip is exact (export default); official: "
        "the real dtypes everywhere (dense FP8 too — lossy for the lab; headers default)",
    )
    c.add_argument("--weights", default="trained", choices=["trained", "untrained"], help="which lab model to export")
    c.add_argument("--seed", type=int, default=0, help="init seed with --weights untrained; 0 ≤ seed < 2**63")
    c.add_argument(
        "--force",
        action="store_true",
        help="replace an earlier export or headers folder the lab wrote (its .dspark-lab-files.json lists every file); "
        "any other folder is refused, nothing in it deleted",
    )
    c.add_argument("--lang", default="en", help="vi or en")
    c.add_argument("--json", action="store_true", help="print the inspect report of what was written as JSON")


def add_weights_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--weights",
        default="trained",
        choices=["trained", "untrained"],
        help="trained: the shipped lab weights (default); untrained: the seeded random init",
    )


def add_checkpoint_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--checkpoint",
        default=None,
        metavar="DIR",
        help="run on the model read back from a folder in the official layout (`dspark-lab checkpoint export`) "
        "instead of --weights",
    )


def add_placement_arguments(p: argparse.ArgumentParser) -> None:
    """--device and --dtype: where the model runs and the dtype it is built in (lab/realscale/placement.py)."""
    p.add_argument("--device", default="cpu", help="cpu (default), cuda or cuda:N")
    p.add_argument(
        "--dtype",
        default=None,
        help="compute dtype: float64 (default, the lab's), float32 or bfloat16; mHC, router, sinks and head stay fp32",
    )


def add_seed_argument(p: argparse.ArgumentParser, what: str) -> None:
    p.add_argument("--seed", type=int, default=0, help=f"{what}; 0 ≤ seed < 2**63 (default 0)")


TEMPERATURE_HELP = "0 = greedy (default); a finite number ≥ 1e-6 samples"


PROFILE_EPILOG = """\
examples:
  dspark-lab profile                                parity, tap mix, acceptance, verify cost (p50/p95/p99)
  dspark-lab profile --json --reps 30               the same as JSON, more repetitions
  dspark-lab profile --sps                          SPS(B) at B = 1, 6, 12, … 1536, saved to runs/sps.json
  dspark-lab profile --sps --reps 30 --out lab/serving/data/sps_lab_cpu.json   re-measure the shipped table
  dspark-lab profile --sps --batch-tokens 1,6,48 --reps 3 --json               a quick look, as JSON

exit codes: 0 done · 2 bad input · 130 interrupted (Ctrl-C) · 141 output pipe closed (e.g. `| head`)
"""

SCHEDULE_EPILOG = """\
policies: fixed (verify all k drafts) · threshold (stop at the first survival a = Π c below --threshold) ·
dspark (Algorithm 1: greedy over a with early stop on Θ = τ*·SPS(B)) · dspark-async (capacity from
confidences two rounds old, global search; then the top current candidates)
tables: measured (lab/serving/data/sps_lab_cpu.json or --sps-table) · smooth (t = t0·(1 + B/256)) ·
staircase (CUDA-graph-like buckets at powers of two)

examples:
  dspark-lab schedule                               every policy on the three tables, R = 1 … 256
  dspark-lab schedule --lang vi                     the same, in Vietnamese
  dspark-lab schedule --json                        sim[table][policy][R] = {throughput, mean_verify_len, tau}
  dspark-lab schedule --requests 1,16,256 --policies fixed,dspark
  dspark-lab schedule --sps-table runs/sps.json     with a table you measured (dspark-lab profile --sps)
  dspark-lab schedule --threshold 0.3               the static policy stops at survival 0.3
  dspark-lab schedule --record --streams runs/streams.json   re-record the confidences (≈ 30 s), then simulate

exit codes: 0 done · 2 bad input · 130 interrupted (Ctrl-C) · 141 output pipe closed (e.g. `| head`)
"""
SIM_REQUESTS_TEXT = "1,2,4,8,16,32,64,128,256"
MAX_SIM_ROUNDS = 10_000
DEFAULT_THRESHOLD = 0.1  # dspark_mini.scheduler.DEFAULT_THRESHOLD, kept here so --help needs no torch (tested)


def add_schedule_parser(sub: Any) -> None:
    s = sub.add_parser(
        "schedule",
        help="load simulation: throughput and verify length of each verify-length policy for R = 1 … 256",
        description="Confidence-scheduled verification under load: replay recorded calibrated confidences and "
        "acceptances of the trained DSpark drafter for R concurrent requests, let each policy choose how many "
        "drafts every request verifies, and time each round with an SPS(B) cost table (measured here, smooth, "
        "staircase). Reports throughput, mean verify length ℓ and τ per table, policy and R, and the "
        "scheduler's own time per round beside the verify forward.",
        epilog=SCHEDULE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    s.add_argument(
        "--requests",
        default=SIM_REQUESTS_TEXT,
        help=f"comma-separated concurrent requests R, each 1..1024 (default {SIM_REQUESTS_TEXT})",
    )
    s.add_argument(
        "--policies",
        default="fixed,threshold,dspark,dspark-async",
        help="comma-separated policies: fixed, threshold, dspark, dspark-async (default all four)",
    )
    s.add_argument(
        "--sps-table",
        default=None,
        help="the measured SPS table (JSON from `dspark-lab profile --sps`; default the shipped "
        "lab/serving/data/sps_lab_cpu.json)",
    )
    s.add_argument(
        "--streams",
        default=None,
        help="recorded rounds (JSON; default the shipped lab/serving/data/streams_dspark.json); with --record: "
        "where to write them (default runs/streams_dspark.json)",
    )
    s.add_argument(
        "--record",
        action="store_true",
        help="re-record the streams from the trained drafter (32 held-out prompts per domain, 40 new tokens, T = 1)",
    )
    s.add_argument(
        "--threshold",
        type=float,
        default=DEFAULT_THRESHOLD,
        help=f"the threshold policy's survival cut: a number in [0, 1] (default {DEFAULT_THRESHOLD})",
    )
    s.add_argument(
        "--rounds",
        type=int,
        default=64,
        help=f"measured rounds per R, policy and table: 1..{MAX_SIM_ROUNDS:,} (default 64)",
    )
    add_seed_argument(s, "seed of the replay (which recorded rounds each request slot plays)")
    s.add_argument("--lang", default="en", help="vi or en")
    s.add_argument("--json", action="store_true", help="print the report as JSON")


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="dspark-lab",
        description="A classroom lab for DeepSeek-V4.1-Flash, block by block (1A → 6B). "
        "Everything runs offline on a CPU.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = "{walk,inspect,generate,profile,schedule,serve,present,data,train,eval,checkpoint}"
    sub = p.add_subparsers(dest="command", metavar=commands)

    w = sub.add_parser(
        "walk",
        help="run a prompt through the tiny model and explain every step",
        description="Run one prompt through the `lab` model and show, step by step, what goes in, "
        "the equation, the shapes, small statistics and what to look at.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    w.add_argument(
        "--step", action="append", metavar="ID", help="show only this step (repeatable): 1A 1B 2A 3A 3B 3C 4A 6A 5A 6B"
    )
    w.add_argument("--lang", default="en", help="language of the lesson: vi or en (default en)")
    w.add_argument("--preset", default="lab", help="model preset; walk runs `lab` (the CPU model)")
    w.add_argument("--prompt", default=None, help="text to run (newline, ASCII and Vietnamese letters)")
    add_seed_argument(w, "seed of the sampling (and of the weights with --weights untrained); same seed → same numbers")
    w.add_argument(
        "--block",
        type=int,
        default=None,
        help="step 6B's verify length ℓ of a fixed policy: 1..5 (default 5). The draft always runs the whole trained "
        "block of 5; only its first ℓ drafts are sent to verify, the rest are shown as 'not sent to verify'",
    )
    w.add_argument("--temperature", type=float, default=0.0, help=TEMPERATURE_HELP)
    w.add_argument("--json", action="store_true", help="print the step views as JSON instead of tables")
    add_weights_argument(w)
    add_checkpoint_argument(w)

    i = sub.add_parser(
        "inspect",
        help="config tables, parameter counts and KV budgets of a preset",
        description="Build a preset (flash on the meta device: no memory, no weights) and report "
        "parameter counts by group, KV bytes per token per cache kind and the layer roles.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    i.add_argument("--preset", default="lab", help="lab (default) or flash")
    i.add_argument("--lang", default="en", help="vi or en")
    add_seed_argument(i, "init seed (lab only)")
    i.add_argument("--json", action="store_true", help="print the report as JSON")
    i.add_argument(
        "--checkpoint",
        default=None,
        metavar="DIR",
        help="read only the headers of a checkpoint folder: tensors, bytes by group, missing/unexpected keys, "
        "dtype/shape mismatches against its config (exit 1 when there are problems)",
    )

    g = sub.add_parser(
        "generate",
        help="plain vs speculative decoding of a prompt, with an accept/reject strip",
        description="Decode the same prompt twice: one target forward per token (plain), then DSpark "
        "(draft a block, verify it with one real forward, keep what the target keeps). "
        "Greedy outputs are identical token for token; sampled outputs follow the same "
        "distribution. Each round is drawn as a strip: accepted, rejected, "
        "resampled or bonus.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    g.add_argument("--prompt", default=None, help="text to continue")
    g.add_argument(
        "--max-new-tokens",
        type=int,
        default=32,
        help="new tokens to produce: 1..256 − the prompt's tokens (max_seq_len; default 32)",
    )
    g.add_argument(
        "--block",
        type=int,
        default=None,
        help="verify length ℓ of a fixed policy: 1..5 (default 5). Each round drafts the whole trained block of 5 "
        "and sends its first ℓ drafts to verify (the strip marks the others ○, not sent)",
    )
    g.add_argument("--temperature", type=float, default=0.0, help=TEMPERATURE_HELP)
    add_seed_argument(g, "seed of the weights and of the sampling")
    g.add_argument("--lang", default="en", help="vi or en")
    g.add_argument("--preset", default="lab", help="model preset (lab)")
    g.add_argument("--json", action="store_true", help="print the result as JSON")
    add_weights_argument(g)
    add_checkpoint_argument(g)
    add_placement_arguments(g)

    f = sub.add_parser(
        "profile",
        help="step 6B profiling: parity, tap mix, acceptance, verify cost; --sps: SPS(B) cost table",
        description="Measure what step 6B claims: logit parity of two forwards (threshold 1e-9), the "
        "0.5/0.5 tap mix, acceptance per draft position with the confidence beside it, "
        "and the time of one verify over k tokens vs k single decode steps on the same "
        "cache. Timings are p50/p95/p99 with the run conditions. With --sps: the target's verify steps per "
        "second SPS(B) as a function of the batch-token count B (R requests × 6 rows, one forward), median of "
        "--reps, forced monotone, saved as the JSON cost table that `dspark-lab schedule` reads.",
        epilog=PROFILE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    f.add_argument("--preset", default="lab", help="model preset (lab)")
    add_seed_argument(f, "seed of the weights and prompts")
    f.add_argument("--reps", type=int, default=15, help=f"repetitions per timing: 1..{MAX_REPS} (default 15)")
    f.add_argument(
        "--cache-length",
        type=int,
        default=None,
        help="tokens in the cache before the verify: 1..250 = max_seq_len 256 − one verify of 6 tokens "
        "(anchor + block 5) (default 48; with --sps 32)",
    )
    f.add_argument(
        "--sps",
        action="store_true",
        help="measure SPS(B), steps/s of the verify forward vs batch tokens B, and save the cost table",
    )
    f.add_argument("--out", default=None, help="(--sps) where to save the table (default runs/sps.json)")
    f.add_argument(
        "--batch-tokens",
        default=None,
        help="(--sps) comma-separated B to measure: 1..6 (one request) or multiples of 6 (R requests × 6 rows) up "
        "to 3072 (default 1,6,12,24,48,96,192,384,768,1536: one decode step, then R = 1 … 256)",
    )
    f.add_argument("--lang", default="en", help="vi or en")
    f.add_argument("--json", action="store_true", help="print the report as JSON")
    add_weights_argument(f)
    add_checkpoint_argument(f)
    add_placement_arguments(f)

    add_schedule_parser(sub)
    from .present.presenter import add_present_parser

    add_present_parser(sub)

    from .corpus import DEFAULT_LINES_PER_DOMAIN, MAX_LINES_PER_DOMAIN, add_data_arguments

    d = sub.add_parser(
        "data",
        help="build, describe and write the toy corpus (math / code / chat)",
        description="Three toy domains that differ in predictability, like the DSpark paper's math / code / chat: "
        "arithmetic facts, a small code-like language and a branching vi/en chat grammar. Deterministic, "
        "no downloads.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    add_data_arguments(d)

    t = sub.add_parser(
        "train",
        help="train the tiny target, one drafter against it, or every shipped file (all)",
        description="Train the `lab` target on the toy corpus (next-token cross-entropy with QAT through the FP8/FP4 "
        "simulation; the router bias by the loss-free balancing rule) and save a safetensors checkpoint with its "
        "config and loss curve; or one drafter against the frozen target (DSpark: the paper's three losses with "
        "DeepSpec's released DSpark weights (CE 0.1 / L1 0.9 / confidence BCE 1.0), position weights exp(−(k−1)/4), "
        "teacher-forced Markov head); or `all`: the target, the five drafters, "
        "their calibration and evaluation, as shipped in lab/weights.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    t.add_argument(
        "what",
        choices=["target", "draft", "all"],
        help="the target; one drafter against a trained target; or all: every shipped file from scratch",
    )
    t.add_argument("--target", default="runs/target.safetensors", help="(draft) the trained target checkpoint")
    t.add_argument(
        "--kind",
        default="dspark",
        choices=["dspark", "dspark-rnn", "dflash", "eagle3", "mtp1"],
        help="(draft) dspark (Markov + confidence heads), dspark-rnn (RNN head), or a baseline: dflash (parallel "
        "only), eagle3 (autoregressive, training-time test), mtp1 (one token)",
    )
    t.add_argument(
        "--quick", action="store_true", help="(all) tiny settings: checks the pipeline in a minute (CI smoke run)"
    )
    t.add_argument(
        "--keep-target",
        action="store_true",
        help="(all) keep the target already in --out (byte for byte, with its record) and rebuild only the drafters "
        "against it",
    )
    t.add_argument(
        "--steps",
        type=int,
        default=None,
        help=f"(target, draft) optimizer steps: 1..{MAX_STEPS:,}; default per kind, as the shipped recipe: target "
        f"{TRAIN_STEPS['target']}, dspark / dspark-rnn / dflash {TRAIN_STEPS['dspark']} (the model's draft layers), "
        f"eagle3 / mtp1 {TRAIN_STEPS['eagle3']} (their own small modules); `all` follows training/rebuild.py's Recipe",
    )
    t.add_argument(
        "--batch", type=int, default=16, help=f"(target, draft) sequences per step: 1..{MAX_BATCH} (default 16)"
    )
    t.add_argument(
        "--seq-len",
        type=int,
        default=64,
        help="(target, draft) tokens per sequence: target 1..256 (max_seq_len); a drafter leaves room for one block: "
        "dspark / dspark-rnn / dflash 8..250 (≥ the window), eagle3 / mtp1 1..249 (default 64)",
    )
    t.add_argument(
        "--lr", type=float, default=3e-3, help=f"(target, draft) peak learning rate: 0 < lr ≤ {MAX_LR:g} (default 3e-3)"
    )
    add_seed_argument(t, "seed of the weights, the corpus and the batches")
    t.add_argument(
        "--lines",
        type=int,
        default=DEFAULT_LINES_PER_DOMAIN,
        help=f"(target, draft) corpus lines per domain: 1..{MAX_LINES_PER_DOMAIN:,} "
        f"(default {DEFAULT_LINES_PER_DOMAIN})",
    )
    t.add_argument(
        "--out",
        default=None,
        help="checkpoint path (.safetensors; default runs/target.safetensors) — for `all` a folder (default "
        "runs/weights; `--out lab/weights --force` replaces the shipped files)",
    )
    t.add_argument(
        "--force", action="store_true", help="allow --out to write into the shipped lab/weights (make weights does)"
    )
    t.add_argument("--lang", default="en", help="vi or en")
    t.add_argument("--json", action="store_true", help="print the training report as JSON")

    e = sub.add_parser(
        "eval",
        help="τ per domain per drafter, acceptance per position, threshold sweep, tokens/s (shipped weights)",
        description="A mini DeepSpec evaluation of the trained drafters: accepted length τ per domain at "
        "temperature 1 and greedy (Table 1), conditional acceptance per draft position (Figure 2), a static "
        "confidence-threshold sweep (Figure 5), and wall-clock tokens/s of plain vs speculative decoding.",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    e.add_argument(
        "--drafters",
        default="dspark,dspark-rnn,dflash,eagle3,mtp1",
        help="comma-separated drafters (default all five)",
    )
    e.add_argument("--weights-dir", default=None, help="folder of the weights (default: the shipped lab/weights)")
    e.add_argument(
        "--prompts",
        type=int,
        default=EVAL_PROMPTS,
        help=f"held-out prompts per domain: 1..{MAX_EVAL_PROMPTS} (default {EVAL_PROMPTS})",
    )
    e.add_argument(
        "--max-new-tokens",
        type=int,
        default=EVAL_NEW_TOKENS,
        help=f"new tokens per prompt: 1..240 = max_seq_len 256 − a 16-token prompt (default {EVAL_NEW_TOKENS})",
    )
    e.add_argument(
        "--speed-prompts", type=int, default=2, help="prompts per domain timed at batch 1: 1..--prompts (default 2)"
    )
    add_seed_argument(e, "seed of the prompts and the sampling")
    e.add_argument("--lang", default="en", help="vi or en")
    e.add_argument("--json", action="store_true", help="per drafter and domain: tau, cond_accept, tokens/s ratio")
    add_checkpoint_parser(sub)
    add_serve_parser(sub)
    return p


SERVE_EPILOG = """\
examples:
  dspark-lab serve                                   12 held-out prompts, 4 in flight, Algorithm 1
  dspark-lab serve --requests 8 --policy dspark-async --json
  dspark-lab serve --policy fixed --requests 1       the classic: verify the whole block, one request
  dspark-lab serve --prompts-file prompts.txt --max-new-tokens 48 --temperature 1 --seed 3

At temperature 0 every request's tokens equal `dspark-lab generate --prompt <same> --json`'s plain.tokens,
for every policy and R: the scheduler only decides how much to verify, never what to keep.

output: first one estimate line (prefills, ≈ draft passes and verify forwards, about how long here), then each
request the moment it finishes (its cache is freed then and its slot takes the next prompt), then a summary.
--json streams JSON lines on stdout: one {"kind": "request", "index", "prompt", "tokens", "text", "rounds",
"mean_accepted_length", "mean_verify_len", …} per finished request, in order of finishing, then one
{"kind": "summary", "policy", "requests", "tokens_per_s", "mean_verify_len", "batch_tokens_per_round",
"conditions", "estimate", …}; the estimate line and the progress bar go to stderr.

exit codes: 0 done · 2 bad input · 130 interrupted (Ctrl-C) · 141 output pipe closed (e.g. `| head`)
"""


def add_serve_parser(sub: Any) -> None:
    v = sub.add_parser(
        "serve",
        help="R requests decoded concurrently: ragged speculative rounds, confidence-scheduled verification",
        description="Decode many prompts with at most R in flight (continuous batching). Each round every "
        "request drafts the whole trained block, the policy picks how many drafts each one verifies from the "
        "confidences (and SPS(B) for dspark / dspark-async), and ONE target forward verifies every request at its "
        "own cache length; each request commits its own verdict.",
        epilog=SERVE_EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    v.add_argument("--requests", type=int, default=4, help="requests in flight R: 1..1024 (default 4)")
    v.add_argument(
        "--policy",
        default="dspark",
        choices=["fixed", "threshold", "dspark", "dspark-async"],
        help="verify-length policy (default dspark = Algorithm 1)",
    )
    v.add_argument("--temperature", type=float, default=0.0, help=TEMPERATURE_HELP)
    v.add_argument(
        "--max-new-tokens",
        type=int,
        default=32,
        help="new tokens per request: 1..256 − the longest prompt (default 32)",
    )
    v.add_argument(
        "--prompts-file",
        default=None,
        help="UTF-8 text, one prompt per line (blank lines skipped), read line by line: at most 100,000 prompts "
        "of at most 4,096 characters; default: 12 held-out corpus prompts",
    )
    v.add_argument("--sps-table", default=None, help="SPS cost table (default the shipped measured one)")
    v.add_argument(
        "--threshold",
        type=float,
        default=None,
        help="the threshold policy's survival cut-off, in [0, 1] (default 0.1)",
    )
    add_seed_argument(v, "seed of the sampling")
    add_checkpoint_argument(v)
    add_placement_arguments(v)
    v.add_argument("--lang", default="en", help="vi or en")
    v.add_argument(
        "--json",
        action="store_true",
        help="JSON lines: one object per request as it finishes (prompt, tokens, rounds, τ), then a summary "
        "(policy, tokens/s, …)",
    )


def check_args(args: argparse.Namespace) -> None:
    """Every number an option brings in, against its allowed range, before anything is built, run or written;
    also fills `train --steps` with its kind's default. The ranges that depend on the model come from its config."""
    from dspark_mini import get_config
    from dspark_mini.validate import check_int, check_seed, check_temperature

    cfg = get_config("lab")  # the one preset that runs on a CPU
    check_seed(args.seed, "--seed")
    if getattr(args, "temperature", None) is not None:
        check_temperature(args.temperature, "--temperature")
    if getattr(args, "block", None) is not None:
        check_int(args.block, "--block", 1, cfg.dspark_block_size, "the trained draft block")
    if hasattr(args, "dtype"):  # generate, profile, serve
        from dspark_mini.device import check_device, check_dtype

        check_device(args.device)
        check_dtype(args.dtype)
        if getattr(args, "sps", False) and (args.device != "cpu" or args.dtype is not None):
            raise ValueError("--device / --dtype apply to `profile` without --sps: allowed their defaults with --sps")
    checkpoint = getattr(args, "checkpoint", None)
    if checkpoint is not None:
        if not Path(checkpoint).is_dir():
            raise ValueError(
                f"--checkpoint = {checkpoint!r} is not a folder: allowed a folder written by `dspark-lab checkpoint "
                "export`"
            )
        if getattr(args, "weights", "trained") != "trained":
            raise ValueError("--checkpoint and --weights untrained exclude each other: allowed one model source")
    if args.command == "generate" and args.preset == "lab":  # compare() refuses the other presets
        check_generate_length(args, cfg)
    elif args.command == "profile":
        check_profile_args(args, cfg)
    elif args.command == "schedule":
        check_schedule_args(args)
    elif args.command == "serve":
        from dspark_mini.validate import check_float

        from .serving.serve import MAX_REQUESTS

        check_int(args.requests, "--requests", 1, MAX_REQUESTS)
        check_int(args.max_new_tokens, "--max-new-tokens", 1, cfg.max_seq_len - 1)
        if args.threshold is not None:
            check_float(args.threshold, "--threshold", 0.0, 1.0, why="a survival probability")
        for option, value in (("--prompts-file", args.prompts_file), ("--sps-table", args.sps_table)):
            if value is not None and not Path(value).is_file():
                raise ValueError(f"{option} = {value!r} is not a file: allowed an existing file")
    elif args.command == "data":
        if args.out is not None and Path(args.out).exists() and not Path(args.out).is_dir():
            raise ValueError(f"--out = {args.out!r} is a file: allowed a folder (data writes <domain>.txt into it)")
    elif args.command == "eval":
        from .evaluation.quality import PROMPT_TOKENS

        check_int(args.prompts, "--prompts", 1, MAX_EVAL_PROMPTS)
        why = f"max_seq_len {cfg.max_seq_len} − a {PROMPT_TOKENS}-token prompt"
        check_int(args.max_new_tokens, "--max-new-tokens", 1, cfg.max_seq_len - PROMPT_TOKENS, why)
        check_int(args.speed_prompts, "--speed-prompts", 1, args.prompts, "at most --prompts")
    elif args.command == "train":
        check_train_args(args, cfg)


def check_profile_args(args: argparse.Namespace, cfg: Any) -> None:
    """`profile`'s options; --out and --batch-tokens belong to --sps. Fills the --cache-length default."""
    from dspark_mini.validate import check_int

    verify = cfg.dspark_block_size + 1
    check_int(args.reps, "--reps", 1, MAX_REPS)
    if not args.sps:
        for option, value in (("--out", args.out), ("--batch-tokens", args.batch_tokens)):
            if value is not None:
                raise ValueError(f"{option} applies to `profile --sps` only: add --sps")
    if args.cache_length is None:
        from .serving.profile_sps import SPS_CACHE_LENGTH

        args.cache_length = SPS_CACHE_LENGTH if args.sps else 48
    why = f"max_seq_len {cfg.max_seq_len} − one verify of {verify} tokens"
    check_int(args.cache_length, "--cache-length", 1, cfg.max_seq_len - verify, why)
    if args.sps:
        from .serving.profile_sps import DEFAULT_BATCH_TOKENS, parse_batch_tokens

        if args.batch_tokens is None:
            args.batch_tokens = list(DEFAULT_BATCH_TOKENS)
        elif isinstance(args.batch_tokens, str):
            args.batch_tokens = parse_batch_tokens(args.batch_tokens, verify)
        if args.out is not None and Path(args.out).is_dir():
            raise ValueError(f"--out = {args.out!r} is a folder: allowed a file path for the JSON table")


def check_schedule_args(args: argparse.Namespace) -> None:
    """`schedule`'s options, parsed in place: --requests and --policies become lists."""
    from dspark_mini.validate import check_float, check_int

    from .serving.schedule import parse_policies, parse_requests

    if isinstance(args.requests, str):
        args.requests = parse_requests(args.requests)
    if isinstance(args.policies, str):
        args.policies = parse_policies(args.policies)
    check_float(args.threshold, "--threshold", 0.0, 1.0, why="a survival probability")
    check_int(args.rounds, "--rounds", 1, MAX_SIM_ROUNDS)
    for option, value in (("--sps-table", args.sps_table), ("--streams", args.streams)):
        if value is not None and Path(value).is_dir():
            raise ValueError(f"--{option.lstrip('-')} = {value!r} is a folder: allowed a JSON file")


def check_generate_length(args: argparse.Namespace, cfg: Any) -> None:
    """--max-new-tokens: the prompt and the new tokens share the max_seq_len positions of the cache."""
    from dspark_mini import get_tokenizer
    from dspark_mini.validate import check_int

    from .text import DEFAULT_PROMPT

    n = len(get_tokenizer(cfg).encode(DEFAULT_PROMPT if args.prompt is None else args.prompt))
    if n >= cfg.max_seq_len:
        raise ValueError(f"--prompt has {n} tokens: allowed 1..{cfg.max_seq_len - 1} (max_seq_len − one new token)")
    why = f"max_seq_len {cfg.max_seq_len} − the prompt's {n} tokens"
    check_int(args.max_new_tokens, "--max-new-tokens", 1, cfg.max_seq_len - n, why)


def check_train_args(args: argparse.Namespace, cfg: Any) -> None:
    """`train`'s options (the same checks for target and draft; `all` follows its recipe)."""
    from dspark_mini.validate import check_float, check_int

    from .corpus import MAX_LINES_PER_DOMAIN

    if args.what == "all":
        if args.steps is not None:
            raise ValueError("--steps applies to `train target` and `train draft`: `train all` follows its recipe")
        return
    if args.keep_target:
        raise ValueError("--keep-target applies to `train all` (it keeps the target of the set in --out)")
    args.steps = TRAIN_STEPS[args.what if args.what == "target" else args.kind] if args.steps is None else args.steps
    check_int(args.steps, "--steps", 1, MAX_STEPS)
    check_int(args.batch, "--batch", 1, MAX_BATCH)
    if args.what == "target":
        check_int(args.seq_len, "--seq-len", 1, cfg.max_seq_len, "max_seq_len")
    elif args.kind in ("dspark", "dspark-rnn", "dflash"):  # a window of context, then one block [anchor, k drafts]
        why = f"the window {cfg.window_size} .. max_seq_len − block {cfg.dspark_block_size} − 1"
        check_int(args.seq_len, "--seq-len", cfg.window_size, cfg.max_seq_len - cfg.dspark_block_size - 1, why)
    else:  # eagle3 / mtp1 also read the token after the block
        why = f"max_seq_len − block {cfg.dspark_block_size} − 2"
        check_int(args.seq_len, "--seq-len", 1, cfg.max_seq_len - cfg.dspark_block_size - 2, why)
    check_float(args.lr, "--lr", 0.0, MAX_LR, lo_open=True)
    check_int(args.lines, "--lines", 1, MAX_LINES_PER_DOMAIN, "lines per domain")


def error_line(args: argparse.Namespace, e: Exception) -> str:
    """The error as one line; one about the path of --out, --target or --weights-dir (a missing checkpoint, a file
    where a folder should be) starts with that option, unless the message names an option already."""
    filename = getattr(e, "filename", None)
    strerror = getattr(e, "strerror", None)
    message = f"{strerror}: {filename!r}" if strerror and filename else str(e)
    if message.startswith("--"):
        return message
    draft = getattr(args, "what", None) == "draft"
    dests = {
        "checkpoint": ["out"],
        "data": ["out"],
        "eval": ["weights_dir"],
        "train": ["out", "target"] if draft else ["out"],
        "present": ["out"],
        "profile": ["out"],
        "schedule": ["streams", "sps_table"],
        "serve": ["prompts_file", "sps_table"],
    }
    for dest in dests.get(args.command, []):
        value = getattr(args, dest, None)
        if value and (str(Path(value)) in f"{e} {filename or ''}" or (filename and str(filename) in str(value))):
            return f"--{dest.replace('_', '-')} = {str(value)!r}: {message}"
    return message


def closed_pipe() -> int:
    """The reader of stdout went away (`… | head`): stop quietly with 141 (128 + SIGPIPE, as `cat` would). stdout
    now points at /dev/null, so the interpreter's last flush cannot fail again (Python docs, "Note on SIGPIPE")."""
    try:
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
    except (OSError, ValueError):  # a stdout without a file descriptor (a test's capture): nothing to redirect
        pass
    return 141


def stdout_console() -> Any:
    """rich's Console, except that a closed pipe raises BrokenPipeError for main() (rich itself would exit 1)."""
    from rich.console import Console

    class PipeConsole(Console):
        def on_broken_pipe(self) -> None:
            self.quiet = True
            raise BrokenPipeError

    return PipeConsole()


class CheckpointProblems(Exception):
    """`inspect --checkpoint` found problems: the report says which; the exit code is 1 (not bad input)."""


# ---- the process's own command line (`main()` without argv) ----------------------------------------------------
# Both helpers below apply only there: a caller's process (a test session running many commands) is left as it was.
def freeze_startup_objects() -> None:
    """Import torch, then take every object alive now out of the cyclic garbage collector's reach (`gc.freeze`).

    torch's import leaves ≈ 165,000 tracked objects (modules, functions, classes) that live until the process
    ends; without this, every full collection the command triggers (during its own imports, while it builds
    models) and the ones at interpreter exit walk all of them again, for nothing. Collections still run, over
    the objects the command itself makes."""
    import gc

    import torch  # noqa: F401 - its import makes the objects to freeze

    gc.freeze()


def leave(rc: int) -> NoReturn:
    """End the process with exit code `rc` now that the outcome is printed, without the interpreter's teardown
    (freeing every module and object one by one, torch's included: ≈ 0.15 s that a command's user only waits
    for). Nothing is lost: stdout and stderr are flushed first, every file a command writes is closed by then,
    the lab registers no exit handlers and uses none of what torch's (logging, multiprocessing, DataLoader
    workers) would finish. lab/realscale/torchrun.py leaves the same way."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a reader that went away, or a stream already closed: nothing to deliver
            pass
    os._exit(rc)


def main(argv: list[str] | None = None) -> int:
    """The one error boundary: bad input → `error: …` and 2, Ctrl-C → `interrupted` and 130, closed pipe → 141.

    argv None: the process's own command line (`dspark-lab …`, `python -m lab …`): the objects of torch's import
    are frozen before the command runs and the process ends here with the exit code (`freeze_startup_objects`,
    `leave`); with argv (a test, a notebook) it returns the exit code and changes nothing of the process."""
    args = parser().parse_args(argv)
    if args.command is None:
        parser().print_help()
        return 0
    if argv is None:
        freeze_startup_objects()
    from rich.console import Console
    from rich.markup import escape

    from .realscale.distributed import finish_distributed, quiet_other_ranks

    quiet_other_ranks()  # under torchrun rank 0 prints; every rank's errors still reach stderr
    rc = 2
    try:
        rc = boundary(args, Console(stderr=True), escape)
    finally:
        finish_distributed(barrier=rc == 0)  # leave the process group (if torchrun made one)
    if argv is None:
        leave(rc)
    return rc


def boundary(args: argparse.Namespace, err: Any, escape: Any) -> int:
    """Run the subcommand and turn what went wrong into one line and an exit code."""
    try:
        run(args, stdout_console())
        sys.stdout.flush()  # a closed pipe shows up here, inside the boundary, not at the interpreter's exit
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except CheckpointProblems as e:  # the report was printed: the folder does not fit its config
        err.print(f"[red]✗[/red] {escape(str(e))}", soft_wrap=True)
        return 1
    except BrokenPipeError:
        return closed_pipe()
    except (OSError, ValueError, TypeError) as e:
        # bad input: ConfigError, TokenizerError and CheckpointError are ValueErrors; an OSError is a missing file,
        # a file where a folder should be or a path that cannot be written
        err.print(f"[red]error:[/red] {escape(error_line(args, e))}", soft_wrap=True)
        return 2
    return 0


def run(args: argparse.Namespace, console: Any) -> None:
    """One subcommand, its options already parsed."""
    import torch

    from .text import check_lang

    torch.set_num_threads(1)  # the lab model is tiny: one thread is faster and immune to oversubscription
    lang = check_lang(args.lang)
    check_args(args)
    if args.command == "walk":
        from .lesson.render import render_walk
        from .lesson.walk import run_walk
        from .text import DEFAULT_PROMPT

        prompt = DEFAULT_PROMPT if args.prompt is None else args.prompt
        walk = run_walk(
            prompt,
            args.preset,
            args.seed,
            lang,
            tuple(args.step) if args.step else None,
            args.block,
            args.temperature,
            args.weights,
            args.checkpoint,
        )
        if args.json:
            print_json(
                {
                    "weights": args.weights if args.checkpoint is None else f"checkpoint {args.checkpoint}",
                    "preset": args.preset,
                    "prompt": prompt,
                    "seed": args.seed,
                    "lang": lang,
                    "tokens": walk.tokens[0].tolist(),
                    "steps": {k: v.to_json() for k, v in walk.views.items()},
                }
            )
        else:
            render_walk(console, walk, lang)
    elif args.command == "generate":
        from .lesson.generation import compare

        report = compare(
            args.prompt,
            args.preset,
            args.max_new_tokens,
            args.block,
            args.temperature,
            args.seed,
            args.weights,
            args.checkpoint,
            args.device,
            args.dtype,
        )
        if args.json:
            print_json(report.to_json())
        else:
            from .lesson.render import render_generate

            render_generate(console, report, lang)
    elif args.command == "data":
        from .corpus import main_data

        main_data(args, console)
    elif args.command == "train":
        from .training.cli import main_train

        report = main_train(args, console)
        if args.json:
            print_json(report)
    elif args.command == "eval":
        from .evaluation.cli import main_eval

        report = main_eval(args, console, lang)
        if args.json:
            print_json(report)
    elif args.command == "profile" and args.sps:
        from .serving.cli import main_profile_sps

        report = main_profile_sps(args, console, lang)
        if args.json:
            print_json(report)
    elif args.command == "schedule":
        from .serving.cli import main_schedule

        report = main_schedule(args, console, lang)
        if args.json:
            print_json(report)
    elif args.command == "profile":
        from .evaluation.profiling import profile

        with console.status("profiling step 6B…"):
            report = profile(
                args.preset,
                args.seed,
                reps=args.reps,
                cache_len=args.cache_length,
                weights=args.weights,
                checkpoint=args.checkpoint,
                device=args.device,
                dtype=args.dtype,
            )
        if args.json:
            print_json(report)
        else:
            from .lesson.render import render_profile

            render_profile(console, report, lang)
    elif args.command == "serve":
        from .serving.serve_cli import main_serve

        main_serve(args, console, lang)  # prints each request as it finishes (JSON lines with --json), then the summary
    elif args.command == "present":
        from .present.presenter import main_present

        main_present(args)
    elif args.command == "checkpoint":
        from .realscale.cli import main_checkpoint

        report = main_checkpoint(args, console, lang)
        if args.json:
            print_json(report)
    elif args.command == "inspect" and args.checkpoint is not None:
        from .realscale import inspect_checkpoint
        from .realscale.cli import render_inspect_checkpoint

        report = inspect_checkpoint(args.checkpoint)
        if args.json:
            print_json(report)
        else:
            render_inspect_checkpoint(console, report, lang)
        if report["problems"]:
            raise CheckpointProblems(f"{len(report['problems'])} problem(s) in {args.checkpoint}")
    else:
        from .lesson.summary import inspect_model

        if args.preset == "flash" and not args.json:
            with console.status("building DeepSeek-V4.1-Flash on the meta device (a few seconds)…"):
                report = inspect_model(args.preset, args.seed)
        else:
            report = inspect_model(args.preset, args.seed)
        if args.json:
            print_json(report)
        else:
            from .lesson.render import render_inspect

            render_inspect(console, report, lang)


if __name__ == "__main__":
    sys.exit(main())

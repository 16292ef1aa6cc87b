"""Every number the prose quotes, filled from the data it quotes.

    python -m lab.sync.prose --write   fill every marker of README*.md, docs/*.md and notebooks/*.py from the data,
                                         then regenerate the notebooks (nbsync) — one command after a retrain
    python -m lab.sync.prose --check   exit 1 naming file, line, key, the quoted and the data value where they
                                         differ, or a marker whose key is unknown (CI runs it in tests/test_prose.py)

A marker wraps the number it quotes: `<!--n:tau.dspark.math.t1-->3.02<!--/n-->`. HTML comments render as nothing
on GitHub and in Jupyter, so a reader sees only `3.02`. The key names one row of KEYS: the data file it reads, the
value and its format. Two sources are computed, not read, each only when a marker needs it: the default prompt's
6B round with the shipped weights (`round.*`, what `walk --step 6B` shows) and `dspark-lab schedule`'s simulation on
the shipped streams and SPS table (`sim.*`). A data file that is not there yet (runs/paper/*.json before `make
paper`) leaves its markers as they are and is named in the output; the shipped files are required.

Screens and help texts do not carry markers: they format the same data when they run (the 6B note reads
report.json through lab/weights.py, `train --help` the recorded recipe).
"""

from __future__ import annotations

import argparse
import math
import re
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from dspark_mini.files import write_atomic
from dspark_mini.jsonlimits import MAX_DATA_BYTES, JSONLimitError, read_json
from dspark_mini.scheduler import DEFAULT_THRESHOLD, POLICIES

from ..lesson.notes import ece_text
from ..lesson.walk import run_walk
from ..realtext import DOMAINS
from ..serving.schedule import LAG, SIM_ROUNDS, read_streams, read_table, tables_for
from ..serving.simulate import simulate
from ..weights import DRAFTER_LABEL, drafter_speeds
from .nbsync import sources, write_all

ROOT = Path(__file__).resolve().parents[2]
MARK = re.compile(r"<!--n:(?P<key>[^>\s]*)-->(?P<value>.*?)<!--/n-->")
# the shipped data a key may read: a name → its file in the repository (a missing one is an error)
SOURCES = {
    "report": "lab/weights/report.json",
    "sps": "lab/serving/data/sps_lab_cpu.json",
    "streams": "lab/serving/data/streams_dspark.json",
    "parity": "docs/peer_parity.json",
    "flash_cpu": "docs/flash_cpu.json",  # bench/flash_cpu.py --walk: the real widths' commands, timed on this CPU
    "bf16_lossless": "docs/bf16_lossless.json",  # bench/bf16_lossless.py: greedy speculative vs plain, logit by logit
    "corpus": "lab/realtext/stats.json",  # `make corpus`: the real-text corpus's sizes and the tokenizer's rates
    "model_card": "docs/model_card.json",  # bench/model_card.py: the target's perplexities and sample continuations
    "manifest": "lab/weights/manifest.json",  # the shipped set's files, sha256 and bytes
    "rebuild": "docs/rebuild.json",  # bench/rebuild_check.py: a second `make weights` beside the shipped set
    "notebooks": "docs/notebooks.json",  # `make notebook-outputs`: each notebook's run time when its outputs were made
    "explorer": "docs/explorer_speed.json",  # bench/explorer_speed.py on a quiet machine (its load in `conditions`)
    "explorer_busy": "docs/explorer_speed_busy.json",  # the same bench while other jobs kept the same 2 cores busy
}
PAPER = "runs/paper"  # `paper.<name>` reads runs/paper/<name>.json (written by `dspark-lab paper`; optional)
ROUND = "round"  # not a file: the default prompt's 6B round with the shipped weights (what `walk --step 6B` shows)
SIM = "sim"  # not a file: `dspark-lab schedule`'s load simulation on the shipped streams and SPS table, one R at a time
MINUS = "−"  # the prose writes negative numbers with a true minus sign


def _num(fmt: str) -> Callable[[Any], str]:
    """A number formatter: `fmt`, a true minus sign, and no sign on a value that rounds to zero ("0", not "−0")."""

    def f(v: Any) -> str:
        s = format(v, fmt)
        if set(s) <= set("-0.,"):
            return s.lstrip("-")
        return MINUS + s[1:] if s.startswith("-") else s  # an exponent keeps its hyphen: 1e-12

    return f


FORMATS: dict[str, Callable[[Any], str]] = {
    "f1": _num(".1f"),
    "f2": _num(".2f"),
    "f3": _num(".3f"),
    "f4": _num(".4f"),
    "int": _num(",.0f"),  # 1,135
    "g": _num("g"),
    "lr": lambda v: f"{v:.0e}".replace("e-0", "e-"),  # 6e-3
    "g0": _num(".0f"),
    "ceil2": lambda v: _num(".2f")(math.ceil(100 * v) / 100),  # a bound: 0.053 → "within 0.06"
    "list2": lambda v: " ".join(_num(".2f")(x) for x in v),
    "prob": lambda v: _num(f".{_decimals(v)}f")(v),  # 0.84, 0.99997: as many decimals as keep it below 1
    "auto": lambda v: _num(",d")(v) if isinstance(v, int) else _num(".2f")(v),  # runs/paper: 1,135 or 3.25
    "text": str,
}


def _minutes(seconds: float) -> str:
    """A wall time as a person says it: 48 s, 1 min 8 s."""
    s = round(seconds)
    return f"{s} s" if s < 60 else f"{s // 60} min {s % 60} s"


def _quoted(text: str) -> str:
    """A model's text inline in Markdown: a line break shown ↵, and the characters Markdown or HTML would read as
    markup (`|` of a table, `<` of a tag such as <0xE1>, `*`, `_`, a backquote, a backslash) escaped."""
    out = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    for c in "\\`*_|[]":
        out = out.replace(c, "\\" + c)
    return out.replace("\n", " ↵ ").replace("\t", " ⇥ ")


# the formats a measured value may ask for after its path (`flash_cpu.walk.wall_s:min`)
MEASURED: dict[str, Callable[[Any], str]] = {
    "min": _minutes,
    "gib": lambda v: _num(".2f")(v / 2**30),  # bytes → GiB
    "over": lambda v: _num(".1f")(100 * (v - 1)),  # a ratio a ÷ b → how much a is above b, in %
    "pct": lambda v: _num(".1f")(100 * v),  # a share → percent
    "mb": lambda v: _num(".2f")(v / 1e6),  # characters or bytes → millions
    "e1": lambda v: format(v, ".1e").replace("e-0", "e-").replace("e+0", "e+"),  # 1.4e-14, 4.4e-6
    "quote": lambda v: _quoted(v),  # a generated text, inline in Markdown (a table cell): see `_quoted`
    **{f: FORMATS[f] for f in ("f1", "f2", "f3", "int", "g", "text")},
}


def _decimals(p: float, least: int = 2, most: int = 6) -> int:
    """Decimals that show a probability below 1 as below 1 (0.99997, not 1.00)."""
    d = least
    while d < most and p < 1 and round(p, d) >= 1:
        d += 1
    return d


@dataclass(frozen=True)
class Key:
    """One family of marker keys: `pattern` (a regex, its groups passed to `read`) → the value in `source`."""

    pattern: str
    source: str
    read: Callable[..., Any]
    fmt: str
    what: str


def _quality(r: dict, d: str, dom: str, t: str) -> dict:
    return r["drafters"][d]["quality"][dom][t]


def _mean(xs: list[float]) -> float:
    return sum(xs) / len(xs)


def _ece_text(r: dict, d: str, when: str, lang: str) -> str:
    rows = r["drafters"][d]["train"]["sts"] if when == "fit" else r["drafters"][d]["heldout_calibration"]
    before, after = ("ece_before", "ece_after") if when == "fit" else ("ece_raw", "ece_sts")
    return ece_text([(x[before], x[after]) for x in rows], lang)


def _ece_total(r: dict, d: str, when: str, which: str, agg: str) -> float:
    rows = r["drafters"][d]["train"]["sts"] if when == "fit" else r["drafters"][d]["heldout_calibration"]
    field = {("fit", "raw"): "ece_before", ("fit", "sts"): "ece_after"}.get((when, which), f"ece_{which}")
    return 100 * (sum if agg == "sum" else max)(x[field] for x in rows)


def _tau_drop(r: dict, d: str, th: str, end: str) -> float:
    """How much τ falls, in %, when the static threshold `th` drops drafts (per domain; the min or max of them)."""
    drops = []
    for dom in DOMAINS:
        sweep = {s["threshold"]: s["tau"] for s in r["drafters"][d]["quality"][dom]["threshold_sweep"]}
        drops.append(100 * (1 - sweep[float(th)] / sweep[0.0]))
    return (min if end == "min" else max)(drops)


def _rounds(streams: dict) -> list[dict]:
    return [r for stream in streams["streams"] for r in stream]


def _survival_gap(streams: dict) -> float:
    """The largest gap, over positions i, between the mean predicted survival Π c₁..c_i and the observed share of
    rounds that kept drafts 1..i."""
    rounds = _rounds(streams)
    gaps = []
    for i in range(1, streams["k"] + 1):
        predicted = _mean([math.prod(r["confidence"][:i]) for r in rounds])
        gaps.append(abs(predicted - _mean([float(r["n_accepted"] >= i) for r in rounds])))
    return max(gaps)


def _sps_point(s: dict, b: str) -> dict:
    return next(p for p in s["points"] if p["batch_tokens"] == int(b))


D = r"(?P<d>[a-z0-9-]+)"
T = r"(?P<t>t1|greedy)"
DOM = rf"(?P<dom>{'|'.join(DOMAINS)})"
# THE table: every key a marker may use, what it reads and how it is written
KEYS: tuple[Key, ...] = (
    Key(rf"tau\.{D}\.{DOM}\.{T}", "report", lambda r, d, dom, t: _quality(r, d, dom, t)["tau"], "f2", "τ per domain"),
    Key(rf"tau\.{D}\.mean\.{T}", "report", lambda r, d, t: r["summary"]["mean_tau"][d][t], "f2", "mean τ"),
    Key(rf"tau\.{D}\.free\.{T}", "report", lambda r, d, t: r["summary"]["free_form_tau"][d][t], "f2", "free-form τ"),
    Key(
        rf"accept\.{D}\.{DOM}\.{T}",
        "report",
        lambda r, d, dom, t: _quality(r, d, dom, t)["cond_accept"],
        "list2",
        "conditional acceptance p1 → pk",
    ),
    Key(
        rf"ratio\.(?P<a>[a-z0-9-]+)/(?P<b>[a-z0-9-]+)\.{T}",
        "report",
        lambda r, a, b, t: r["summary"]["mean_tau"][a][t] / r["summary"]["mean_tau"][b][t],
        "f2",
        "mean τ of a ÷ b",
    ),
    Key(
        rf"gain\.(?P<a>[a-z0-9-]+)/(?P<b>[a-z0-9-]+)\.{T}",
        "report",
        lambda r, a, b, t: 100 * (r["summary"]["mean_tau"][a][t] / r["summary"]["mean_tau"][b][t] - 1),
        "g0",
        "mean τ of a over b, in %",
    ),
    Key(
        rf"decay\.{D}\.{T}",
        "report",
        lambda r, d, t: _mean([r["summary"]["decay"][d][dom][t] for dom in DOMAINS]),
        "f2",
        "α₁ − mean(α₂..α_k) of the conditional acceptance α_i, mean over domains",
    ),
    Key(
        r"speed\.fastest",
        "report",
        lambda r: DRAFTER_LABEL[next(iter(drafter_speeds(r)))],
        "text",
        "the drafter with the most tokens/s",
    ),
    Key(
        r"speed\.fastest\.mean",
        "report",
        lambda r: next(iter(drafter_speeds(r).values())),
        "f2",
        "the fastest drafter's tokens/s spec ÷ plain, mean over domains",
    ),
    Key(
        rf"speed\.{D}\.{DOM}",
        "report",
        lambda r, d, dom: r["summary"]["tokens_per_s_ratio"][d][dom],
        "f2",
        "tokens/s spec ÷ plain",
    ),
    Key(
        rf"speed\.{D}\.mean",
        "report",
        lambda r, d: _mean([r["summary"]["tokens_per_s_ratio"][d][dom] for dom in DOMAINS]),
        "f2",
        "tokens/s spec ÷ plain, mean over domains",
    ),
    Key(
        r"speed\.(?P<a>[a-z0-9-]+)/(?P<b>[a-z0-9-]+)",
        "report",
        lambda r, a, b: _mean(
            [r["summary"]["tokens_per_s_ratio"][a][dom] / r["summary"]["tokens_per_s_ratio"][b][dom] for dom in DOMAINS]
        ),
        "f2",
        "tokens/s of drafter a ÷ drafter b (same plain decoding), mean over domains",
    ),
    Key(
        rf"ece\.{D}\.(?P<when>fit|heldout)\.(?P<lang>vi|en)",
        "report",
        lambda r, d, when, lang: _ece_text(r, d, when, lang),
        "text",
        "STS's ECE per position, as a sentence",
    ),
    Key(
        rf"ece\.{D}\.(?P<when>fit|heldout)\.(?P<which>raw|sts)\.(?P<agg>sum|max)",
        "report",
        _ece_total,
        "f1",
        "20-bin ECE summed over positions (or its largest), in %",
    ),
    Key(
        rf"sweep\.{D}\.(?P<th>[0-9.]+)\.tau_drop\.(?P<end>min|max)",
        "report",
        _tau_drop,
        "g0",
        "τ lost to a static confidence threshold, in %, over domains",
    ),
    Key(
        rf"ece\.{D}\.(?P<when>heldout)\.n",
        "report",
        lambda r, d, when: r["drafters"][d]["heldout_calibration"][0]["n"],
        "int",
        "held-out rounds STS is judged on",
    ),
    Key(
        rf"sts\.{D}\.(?P<end>min|max)",
        "report",
        lambda r, d, end: (min if end == "min" else max)(r["drafters"][d]["train"]["confidence_temperatures"]),
        "g",
        "the fitted STS temperatures' range",
    ),
    Key(r"target\.val_accuracy", "report", lambda r: r["target"]["val_accuracy"], "f3", "held-out next-token accuracy"),
    Key(r"target\.val_loss", "report", lambda r: r["target"]["val_loss"], "f2", "held-out loss, nats"),
    Key(r"seconds\.(?P<f>\w+)", "report", lambda r, f: r["seconds"][f], "int", "train all's wall seconds"),
    Key(
        r"recipe\.(?P<f>\w+_lr)",
        "report",
        lambda r, f: r["recipe"][f],
        "lr",
        "learning rate of the recipe that built the set",
    ),
    Key(r"recipe\.(?P<f>\w+)", "report", lambda r, f: r["recipe"][f], "g", "the recipe that built the set"),
    Key(r"parity\.tolerance", "parity", lambda p: p["conditions"]["tolerance"], "g", "the peer-parity bound"),
    Key(
        r"sps\.(?P<b>\d+)\.p50ms",
        "sps",
        lambda s, b: 1000 * _sps_point(s, b)["step_s"]["p50"],
        "f1",
        "measured SPS table: p50 step in ms",
    ),
    Key(
        r"sps\.(?P<b>\d+)\.tokens",
        "sps",
        lambda s, b: int(b) * _sps_point(s, b)["steps_per_s"],
        "int",
        "measured SPS table: B·SPS(B) tokens/s",
    ),
    Key(r"streams\.prompts", "streams", lambda s: len(s["streams"]), "int", "recorded streams (one a prompt)"),
    Key(r"streams\.rounds", "streams", lambda s: len(_rounds(s)), "int", "recorded rounds"),
    Key(
        r"streams\.tau",
        "streams",
        lambda s: _mean([r["n_accepted"] + 1 for r in _rounds(s)]),
        "f2",
        "τ of the recorded rounds (the full block verified)",
    ),
    Key(r"streams\.survival_gap", "streams", _survival_gap, "ceil2", "calibrated survival vs observed: a bound"),
    Key(r"sps\.reps", "sps", lambda s: s["points"][0]["step_s"]["n"], "int", "repetitions per SPS point"),
    Key(
        r"round\.(?P<what>p_d|confidence)\.(?P<end>min|max)",
        ROUND,
        lambda w, what, end: (min if end == "min" else max)(w[what]),
        "prob",
        "the default prompt's 6B round (trained weights, T = 0)",
    ),
    Key(
        r"round\.(?P<weights>untrained)\.(?P<what>p_d)\.(?P<end>min|max)",
        ROUND,
        lambda w, weights, what, end: (min if end == "min" else max)(w[what]),
        "f3",
        "the default prompt's 6B round with the seeded untrained weights",
    ),
    Key(r"round\.vocab", ROUND, lambda w: w["vocab"], "int", "the lab's vocabulary size V"),
    Key(
        r"sim\.(?P<table>measured|smooth|staircase)\.(?P<policy>[a-z-]+)\.(?P<r>\d+)\.tokens",
        SIM,
        lambda s, table, policy, r: s[table][policy][r]["throughput"],
        "int",
        "simulated throughput, tokens/s (`dspark-lab schedule`)",
    ),
    Key(
        r"sim\.(?P<table>measured|smooth|staircase)\.(?P<policy>[a-z-]+)\.(?P<r>\d+)\.verify_len",
        SIM,
        lambda s, table, policy, r: s[table][policy][r]["mean_verify_len"],
        "f2",
        "simulated mean verify length ℓ",
    ),
    Key(
        r"sim\.(?P<table>measured|smooth|staircase)\.(?P<policy>[a-z-]+)\.(?P<r>\d+)\.verify_len1",
        SIM,
        lambda s, table, policy, r: s[table][policy][r]["mean_verify_len"],
        "f1",
        "simulated mean verify length ℓ, one decimal",
    ),
    Key(
        r"sim\.(?P<table>measured|smooth|staircase)\.(?P<a>[a-z-]+)/(?P<b>[a-z-]+)\.(?P<r>\d+)",
        SIM,
        lambda s, table, a, b, r: s[table][a][r]["throughput"] / s[table][b][r]["throughput"],
        "f1",
        "simulated throughput of policy a ÷ policy b",
    ),
    Key(
        rf"flash_cpu\.(?P<path>[\w.-]+):(?P<f>{'|'.join(MEASURED)})",
        "flash_cpu",
        lambda d, path, f: MEASURED[f](_path(d, path)),
        "text",
        "a value of docs/flash_cpu.json (dotted path, then :format)",
    ),
    Key(
        rf"bf16_lossless\.(?P<path>[\w.-]+):(?P<f>{'|'.join(MEASURED)})",
        "bf16_lossless",
        lambda d, path, f: MEASURED[f](_path(d, path)),
        "text",
        "a value of docs/bf16_lossless.json (dotted path, then :format)",
    ),
    Key(
        rf"corpus\.(?P<path>[\w.-]+):(?P<f>{'|'.join(MEASURED)})",
        "corpus",
        lambda d, path, f: MEASURED[f](_path(d, path)),
        "text",
        "a value of lab/realtext/stats.json (dotted path, then :format)",
    ),
    Key(
        rf"model_card\.(?P<path>[\w.-]+):(?P<f>{'|'.join(MEASURED)})",
        "model_card",
        lambda d, path, f: MEASURED[f](_path(d, path)),
        "text",
        "a value of docs/model_card.json (dotted path, then :format)",
    ),
    *(
        Key(
            rf"{src}\.(?P<path>[\w.-]+):(?P<f>{'|'.join(MEASURED)})",
            src,
            lambda d, path, f: MEASURED[f](_path(d, path)),
            "text",
            f"a value of {SOURCES[src]} (dotted path, then :format)",
        )
        for src in ("explorer", "explorer_busy")
    ),
    Key(
        rf"rebuild\.(?P<path>[\w.-]+):(?P<f>{'|'.join(MEASURED)})",
        "rebuild",
        lambda d, path, f: MEASURED[f](_path(d, path)),
        "text",
        "a value of docs/rebuild.json (dotted path, then :format)",
    ),
    Key(
        rf"report\.(?P<path>[\w.-]+):(?P<f>{'|'.join(MEASURED)})",
        "report",
        lambda d, path, f: MEASURED[f](_path(d, path)),
        "text",
        "a value of lab/weights/report.json (dotted path, then :format)",
    ),
    Key(
        r"notebooks\.(?P<nb>\d\d_\w+)\.seconds",
        "notebooks",
        lambda d, nb: d["seconds"][nb],
        "g0",
        "a notebook's measured top-to-bottom run time, seconds (docs/notebooks.json)",
    ),
    Key(r"notebooks\.cpus", "notebooks", lambda d: d["cpus"], "int", "CPUs of the notebook run times"),
    Key(
        r"manifest\.mb",
        "manifest",
        lambda m: sum(f["bytes"] for f in m["files"].values()) / 1e6,
        "int",
        "the shipped set's size on disk, MB",
    ),
    Key(
        r"paper\.(?P<name>[\w-]+)\.(?P<path>[\w.-]+)",
        PAPER,
        lambda p, name, path: _path(p, path),
        "auto",
        "a value of runs/paper/<name>.json (dotted path)",
    ),
)


def _path(data: Any, dotted: str) -> Any:
    for part in dotted.split("."):
        data = data[int(part)] if isinstance(data, list) else data[part]
    return data


class ProseError(ValueError):
    """A marker the data cannot fill: its key is unknown, or the data has no such value."""


def find_key(key: str) -> tuple[Key, dict[str, str]]:
    """The row of KEYS a marker key belongs to, and its groups; ProseError when no row matches."""
    for k in KEYS:
        m = re.fullmatch(k.pattern, key)
        if m:
            return k, m.groupdict()
    raise ProseError(f"unknown marker key {key!r}: allowed the patterns of lab/sync/prose.py's KEYS")


class Data:
    """The data of one run: each file read (each computed source computed) once, when a key first needs it; a missing
    optional file is remembered, not read."""

    def __init__(self, root: Path = ROOT) -> None:
        self.root = root
        self.cache: dict[str, Any] = {}

    def path(self, source: str, groups: dict[str, str]) -> Path | None:
        if source == PAPER:
            return self.root / PAPER / f"{groups['name']}.json"
        if source in (ROUND, SIM):
            return None
        return self.root / SOURCES[source]

    def load(self, source: str, groups: dict[str, str]) -> Any:
        """The parsed data of `source`; None when an optional file is missing; ProseError when a required one is."""
        path = self.path(source, groups)
        name = str(path) if path is not None else f"{source}:{groups.get('r', '')}:{groups.get('weights', '')}"
        if name not in self.cache:
            self.cache[name] = self._read(source, path, groups)
        return self.cache[name]

    def _read(self, source: str, path: Path | None, groups: dict[str, str]) -> Any:
        if source == ROUND:
            return default_round(groups.get("weights", "trained"))
        if source == SIM:
            return default_sim(int(groups["r"]))
        if not path.is_file():
            if source == PAPER:
                return None
            raise ProseError(f"{path.relative_to(self.root)} is missing: the shipped data every marker is filled from")
        try:
            return read_json(path, MAX_DATA_BYTES)
        except (JSONLimitError, ValueError) as e:
            raise ProseError(f"{path.relative_to(self.root)} is not readable data: {e}") from None

    def value(self, key: str) -> str | None:
        """The text the marker `key` must hold; None when its file is an optional one not written yet."""
        row, groups = find_key(key)
        data = self.load(row.source, groups)
        if data is None:
            return None
        try:
            v = row.read(data, **groups)
        except (KeyError, IndexError, StopIteration, ValueError, TypeError) as e:
            where = self.path(row.source, groups)
            raise ProseError(
                f"marker key {key!r} ({row.what}): {where.relative_to(self.root) if where else row.source} has no such "
                f"value ({type(e).__name__}: {e})"
            ) from None
        return FORMATS[row.fmt](v)


def default_round(weights: str = "trained") -> dict[str, Any]:
    """p_d(x) and c of the default prompt's 6B round (greedy, the whole block verified) with the shipped or the
    seeded untrained `weights`, and the vocabulary size V."""
    w = run_walk(steps=("6B",), weights=weights)
    return {"p_d": list(w.round.draft_probs), "confidence": list(w.round.confidence), "vocab": w.cfg.vocab_size}


def default_sim(requests: int) -> dict[str, Any]:
    """sim[table][policy][str(R)] of `dspark-lab schedule` with its defaults, for R = `requests` alone (each R replays
    its own seeded batches, so one R gives the numbers the whole run gives for it)."""
    tables = tables_for(read_table(None))
    return simulate(read_streams(None), tables, POLICIES, [requests], SIM_ROUNDS, 0, DEFAULT_THRESHOLD, LAG)


def prose_files(root: Path = ROOT) -> list[Path]:
    """The files whose prose may quote data: README.md, README.vi.md, docs/*.md, the notebooks' py:percent sources."""
    files = [
        root / "README.md",
        root / "README.vi.md",
        *sorted((root / "docs").glob("*.md")),
        *sources(root / "notebooks"),
    ]
    return [p for p in files if p.is_file()]


@dataclass(frozen=True)
class Finding:
    """One marker whose quoted text differs from its data (or that the data cannot fill)."""

    path: Path
    line: int
    key: str
    quoted: str
    data: str | None  # None: an error, told in `why`
    why: str = ""

    def text(self, root: Path) -> str:
        where = f"{self.path.relative_to(root)}:{self.line}"
        if self.data is None:
            return f"{where}: {self.why}"
        return f"{where}: {self.key} quotes {self.quoted!r}, the data gives {self.data!r}"


def fill(text: str, data: Data, path: Path) -> tuple[str, list[Finding], list[str]]:
    """`text` with every marker holding its data value; the markers that differed (or failed); keys left as they
    are because their optional file is missing."""
    findings: list[Finding] = []
    skipped: list[str] = []

    def one(m: re.Match) -> str:
        key, quoted = m["key"], m["value"]
        line = text.count("\n", 0, m.start()) + 1
        try:
            want = data.value(key)
        except ProseError as e:
            findings.append(Finding(path, line, key, quoted, None, str(e)))
            return m[0]
        if want is None:
            skipped.append(key)
            return m[0]
        if want != quoted:
            findings.append(Finding(path, line, key, quoted, want))
        return f"<!--n:{key}-->{want}<!--/n-->"

    return MARK.sub(one, text), findings, skipped


def run(write: bool, root: Path = ROOT, out=sys.stdout, err=sys.stderr) -> int:
    """Check (or `write`) every prose file under `root`; → the exit code (1: a stale number or an unknown key)."""
    data = Data(root)
    failed, skipped, markers, changed = [], [], 0, []
    for path in prose_files(root):
        text = path.read_text(encoding="utf-8")
        new, findings, left = fill(text, data, path)
        markers += len(MARK.findall(text))
        skipped += left
        errors = [f for f in findings if f.data is None]
        failed += errors if write else findings
        if write and new != text and not errors:
            write_atomic(path, new)
            changed.append(path)
    for f in failed:
        print(f.text(root), file=err)
    if skipped:
        print(
            f"{len(skipped)} markers left as they are: their data is not written yet ({PAPER}/*.json; "
            f"`dspark-lab paper` writes it): {', '.join(sorted(set(skipped)))}",
            file=out,
        )
    if write:
        for p in changed:
            print(f"wrote {p.relative_to(root)}", file=out)
        if any(p.suffix == ".py" for p in changed):
            for p in write_all(root / "notebooks"):
                print(f"wrote {p.relative_to(root)}", file=out)
    if failed:
        if not write:
            print("fix: python -m lab.sync.prose --write (then review the diff)", file=err)
        return 1
    print(f"{markers} quoted numbers {'filled from' if write else 'agree with'} their data", file=out)
    return 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        prog="python -m lab.sync.prose", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    g = ap.add_mutually_exclusive_group(required=True)
    g.add_argument("--write", action="store_true", help="fill every marker from its data, then regenerate notebooks")
    g.add_argument("--check", action="store_true", help="fail if a quoted number differs from its data")
    args = ap.parse_args(argv)
    return run(write=args.write)


if __name__ == "__main__":
    sys.exit(main())

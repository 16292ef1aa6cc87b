"""Step 6B in a browser: the DSpark Explorer, one self-contained HTML page (no server, no network, no install).

`python -m lab.present.explorer --out docs/explorer.html` runs the trained lab model on a handful of prompts (one
held-out prompt per domain and the walk's default prompt), stores what one speculative round needs, and writes a page
whose own JavaScript redoes the draft sampling, the verify-length policy and the verifier on those numbers for any
temperature T, policy (fixed k, confidence threshold, or the `dspark` scheduler at R requests in flight) and seed.
`--check` says whether a file is what the generator writes now.

What is stored, per prompt, along the greedy path (the text greedy decoding produces — plain and speculative agree):
  target  l_j [V]: the target's logits at every position j from the first anchor on. Row i of a round whose anchor
          sits at position p is l_{p+i}: the target's distribution after the greedy tokens. The real verify forward
          conditions row i on the *drafted* x_1..x_{i−1}; the two agree whenever the kept drafts are the greedy tokens
          (always at T = 0). A kept draft that is not the greedy token makes the later rows an approximation.
  rounds  the anchor positions of the greedy speculative run (block 5), and per round the draft's parallel pass:
          U_i [5, V], the base logits of the block [anchor, noise × 4] (they depend on the committed context only),
          and a_i = w_h·h_i, the hidden part of the confidence logit.
  once    the Markov head W1, W2 [V, r], q[v] = w_e·W1[v] and the STS temperatures, so the page runs the sequential
          part itself: p_d^i = softmax((U_i + W2·W1[x_{i−1}]) / T), c_i = σ((a_i + q[x_{i−1}]) / T_sts,i), x_0 the
          anchor. The draft side is therefore exact: c_i depends on the context (through h_i) and on the previous
          *sampled* draft token, never on T or on the target.
  sps     the shipped SPS(B) cost table (lab/serving/data/sps_lab_cpu.json, forced monotone as SPSTable reads it):
          the page's port of dspark_mini/scheduler.py's Algorithm 1 picks ℓ from the round's confidences with it, for
          this request and R − 1 copies of it (the convention of lab/present/rounds.py and the 6B screens).
Everything is stored as T-independent logits over the page's words (`page_ids`, re-numbered 0..W − 1), rounded
(logits and W1/W2 to 0.001, a and q to 0.0001). The page and the Python twin below (`StoredRound`, `simulate_round`,
which calls `dspark_mini.speculative.verify_block` and plans ℓ with `dspark_mini.scheduler`) sample from exactly those
stored numbers; the tests run both.
"""

from __future__ import annotations

import argparse
import math
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from dspark_mini import Trace, Transformer
from dspark_mini.files import write_atomic
from dspark_mini.sampling import sample, token_distribution
from dspark_mini.scheduler import DEFAULT_THRESHOLD, plan_round
from dspark_mini.speculative import Verdict, prefill, speculative_round, verify_block
from dspark_mini.tokenizer import default_tokenizer

from ..evaluation.quality import eval_prompts
from ..lesson.view_6b import MAX_LOAD, SPS_TABLE, check_load, load_plan, shipped_sps
from ..realtext import DOMAINS
from ..text import LANGS, UI, lang_table
from .page import CACHE_TEXT, DEFAULT_REQUESTS, MARKERS, asset, page_vocab, render
from .rounds import cache_state

REPO_ROOT = Path(__file__).resolve().parents[2]
PAGE = "docs/explorer.html"
FIX_COMMAND = f"python -m lab.present.explorer --out {PAGE}"
MAX_BYTES = 3_000_000  # the page must stay small enough to mail or put on a course page
PROMPTS_PER_DOMAIN = 1
NEW_TOKENS = 24  # greedy tokens per prompt the rounds cover
TOP_PER_ROW = 8  # the page's words: the most likely tokens of every stored row (and every token of the texts)
SEED_ROUNDS = 200  # re-samples behind the page's acceptance chart
DECIMALS = {"logits": 3, "markov": 3, "confidence": 4}
POLICIES = ("fixed", "threshold", "dspark")  # the page's verify-length control: dspark_mini/scheduler.py's policies
LOADS = tuple(2**i for i in range(MAX_LOAD.bit_length()))  # the R slider: 1, 2, 4, …, 256 requests in flight

# lab/lesson/steps.py UI strings the page reuses as they are; the page's own strings follow
SHARED = (
    "prompt", "seed", "language", "temperature", "token", "position", "probability", "draft_token",
    "draft_probability", "confidence", "target_token", "accepted", "rejected", "not_verified", "resampled", "bonus",
    "not_sent", "accepted_length", "acceptance_rate", "note_draft_probability", "requests_in_flight",
)  # fmt: skip
TEXT: dict[str, dict[str, str]] = lang_table("explorer", "text") | CACHE_TEXT


def strings(fill: dict[str, str] | None = None) -> dict[str, dict[str, str]]:
    """Every string the page shows, {key: {vi, en}}: lab/lesson/steps.py's shared terms and this module's own, with
    the data note's numbers (`fill`: words, top, mean, max) filled in."""
    shared = {k: {lang: UI[k][lang] for lang in LANGS} for k in SHARED}
    clash = set(UI) & set(TEXT)
    if clash:
        raise ValueError(f"explorer strings {sorted(clash)} are also lab/lesson/steps.py UI keys: reuse them instead")
    fill = {"vocab": f"{default_tokenizer().vocab_size:,}", **(fill or {})}  # the data note quotes the data's numbers

    def filled(v: str) -> str:
        for key, value in fill.items():
            v = v.replace("{" + key + "}", value)
        return v

    own = {k: {lang: filled(v) for lang, v in t.items()} for k, t in TEXT.items()}
    return shared | own


# ---- the data: the trained model along the greedy path -------------------------------------------------------
def _num(x: float, decimals: int) -> float | int:
    """x rounded for the page: 3 not 3.0, 0 not -0.0 (shorter JSON, same value)."""
    v = round(x, decimals) + 0.0
    return int(v) if v.is_integer() else v


def rounded(t: torch.Tensor, decimals: int) -> list:
    """Nested lists of t's values rounded to `decimals`."""
    return [rounded(row, decimals) for row in t] if t.dim() > 1 else [_num(x, decimals) for x in t.tolist()]


def default_prompts() -> list[dict[str, Any]]:
    """The page's prompts: one held-out prompt per domain (eval_prompts), then the walk's default."""
    from ..text import DEFAULT_PROMPT

    out = []
    for domain in DOMAINS:
        for i, ids in enumerate(eval_prompts(domain, PROMPTS_PER_DOMAIN).tolist()):
            out.append({"name": f"{domain} · {i + 1}", "domain": domain, "ids": ids})
    out.append({"name": "dspark-lab walk", "domain": "walk", "ids": default_tokenizer().encode(DEFAULT_PROMPT)})
    return out


@torch.inference_mode()
def prompt_data(model: Transformer, name: str, domain: str, ids: list[int], new_tokens: int = NEW_TOKENS) -> dict:
    """One prompt's page data: the greedy speculative rounds, the greedy text they commit, and the target's logits
    along that text (one full forward; its argmax must reproduce the text: greedy speculative = greedy plain)."""
    K = model.cfg.dspark_block_size
    start = len(ids)  # the first anchor's position
    gen = torch.Generator().manual_seed(0)  # T = 0: every row is one-hot, the generator never changes a token
    cache, anchor = prefill(model, torch.tensor([ids]), 0.0, gen)
    text, rounds = [*ids, int(anchor)], []
    prefilled = cache_state(model, cache, list(ids))  # what the caches hold before the first round
    while len(text) < start + new_tokens + K:  # K more than the rounds cover: the last rounds' target rows
        trace = Trace(sinkhorn_history=False)
        [r] = speculative_round(model, cache, torch.tensor([text[-1]]), K, 0.0, gen, trace=trace)
        h = trace.get("6B", "draft_hidden")[0]  # [K, D] the draft stream the confidence head reads
        w_h = model.mtp.confidence_head.weight[0, : h.size(-1)]  # [D] (the rest, w_e, multiplies W1[x_{i−1}])
        rounds.append(
            {
                "p": r.position,
                "base": trace.get("6B", "base_logits")[0].clone(),  # U_i [K, V] (restricted and rounded later)
                "drafted": trace.get("6B", "draft_logits")[0].clone(),  # [K, V] U_i + Markov bias (not embedded)
                "a": rounded(h.to(w_h.dtype) @ w_h, DECIMALS["confidence"]),  # w_h·h_i [K]
                "greedy": {"draft": r.draft, "n": r.n_accepted, "next": r.next_token},
            }
        )
        text += r.committed
        rounds[-1]["caches"] = cache_state(model, cache, text[:-1])  # after this round's commit (all but the anchor)
    logits = model(torch.tensor([text])).logits[0]  # [S, V] row j: the target's distribution after text[: j + 1]
    if logits[start:-1].argmax(-1).tolist() != text[start + 1 :]:
        raise RuntimeError(f"{name}: greedy speculative decoding did not reproduce greedy plain decoding")
    rounds = [r for r in rounds if r["p"] + K < len(text)]  # rows p .. p + K of the target exist
    end = rounds[-1]["p"] + K + 1
    return {
        "name": name,
        "domain": domain,
        "prompt_len": start,
        "tokens": text[:end],
        "target": logits[start:end].clone(),  # [rows, V] row j ↔ position start + j (restricted and rounded later)
        "rounds": rounds,
        "caches": prefilled,
    }


def sps_data() -> dict[str, Any]:
    """The shipped SPS(B) table as the scheduler reads it (`view_6b.shipped_sps`: forced monotone, with its
    interpolation rule), and where and how it was measured."""
    table = shipped_sps()
    c = table.conditions
    return {
        "source": SPS_TABLE,
        "measured_on": ", ".join(f"{key} {c[key]}" for key in ("device", "dtype", "threads", "cpu") if key in c),
        "interpolation": table.interpolation,
        "batch_tokens": list(table.batch_tokens),  # [N] measured sizes B
        "steps_per_s": list(table.forced_steps_per_s),  # [N] SPS(B) there
    }


def page_ids(prompts: list[dict[str, Any]]) -> list[int]:
    """The page's words: every token of the prompts' greedy texts and drafts, and the TOP_PER_ROW most likely tokens
    of every stored target row and of every greedy draft row (U_i plus the Markov bias of the greedy previous
    token), as ascending vocabulary ids. The page samples over these words only (the full 8,192-id vocabulary in
    every row would make it tens of megabytes).  → [W]"""
    keep: set[int] = set()
    for pr in prompts:
        keep |= set(pr["tokens"])
        for r in pr["rounds"]:
            keep |= set(r["greedy"]["draft"]) | {r["greedy"]["next"]}
        for t in [pr["target"], *(r["drafted"] for r in pr["rounds"])]:  # [rows, V] each
            keep |= set(t.topk(TOP_PER_ROW, dim=-1).indices.flatten().tolist())
    return sorted(keep)


def outside_mass(rows: torch.Tensor, ids: list[int]) -> float:
    """The largest probability mass (T = 1) that rows [n, V] give to tokens outside the page's words `ids`."""
    p = torch.softmax(rows.double(), dim=-1)  # [n, V]
    return float(1 - p[:, ids].sum(-1).min())


@torch.inference_mode()
def build_data(model: Transformer) -> dict[str, Any]:
    """Everything the page embeds: the model's shared draft parts, the prompts' data, the vocabulary, the strings."""
    if model.mtp is None or model.cfg.dspark_markov_kind != "vanilla":
        raise ValueError(
            "the Explorer runs the vanilla Markov head in the page: allowed a model with a DSpark draft "
            f"whose dspark_markov_kind is 'vanilla' (got {model.cfg.dspark_markov_kind!r})"
        )
    mtp = model.mtp
    w1, w2 = mtp.markov_head.embed.weight, mtp.markov_head.head.weight  # [V, r] each
    w_e = mtp.confidence_head.weight[0, model.cfg.dim :]  # [r]
    sts = mtp.confidence_temperatures or (1.0,) * model.cfg.dspark_block_size
    tok = default_tokenizer()
    prompts = [prompt_data(model, **p) for p in default_prompts()]
    ids = page_ids(prompts)  # [W] the page's words, ascending vocabulary ids
    where = {v: i for i, v in enumerate(ids)}
    outside = [outside_mass(r, ids) for pr in prompts for r in [pr["target"], *(x["drafted"] for x in pr["rounds"])]]
    for pr in prompts:  # every id → its page id; every row restricted to the page's words, then rounded
        pr["tokens"] = [where[t] for t in pr["tokens"]]
        pr["target"] = rounded(pr["target"][:, ids], DECIMALS["logits"])
        for r in pr["rounds"]:
            del r["drafted"]  # the page recomputes it from U_i and the Markov head
            r["base"] = rounded(r["base"][:, ids], DECIMALS["logits"])
            g = r["greedy"]
            r["greedy"] = {"draft": [where[t] for t in g["draft"]], "n": g["n"], "next": where[g["next"]]}
    vocab = page_vocab(tok)
    return {
        "k_max": model.cfg.dspark_block_size,
        "window_size": model.cfg.window_size,
        "max_ngram": model.cfg.engram_max_ngram_size,
        "vocab": [vocab[v] for v in ids],  # [W] the page's words, as the pages show them
        "vocab_ids": ids,  # [W] each page id's id in the lab vocabulary
        "outside_mass": {"max": max(outside), "mean": sum(outside) / len(outside)},  # p at T = 1 outside the words
        "markov_w1": rounded(w1[ids], DECIMALS["markov"]),  # [W, r]
        "markov_w2": rounded(w2[ids], DECIMALS["markov"]),  # [W, r]
        "conf_q": rounded(w1[ids].to(w_e.dtype) @ w_e, DECIMALS["confidence"]),  # [W] q[v] = w_e·W1[v]
        "conf_sts": list(sts),
        "prompts": prompts,
        "seed_rounds": SEED_ROUNDS,
        "policies": list(POLICIES),
        "sps": sps_data(),
        "loads": list(LOADS),
        "load_default": DEFAULT_REQUESTS,
        "threshold_default": DEFAULT_THRESHOLD,
        "markers": MARKERS,
        "ui": strings(
            {
                "words": f"{len(ids):,}",
                "top": str(TOP_PER_ROW),
                "step": f"{10 ** -DECIMALS['logits']:g}",
                "mean": f"{100 * sum(outside) / len(outside):.0f}",
                "max": f"{100 * max(outside):.0f}",
            }
        ),
        "command": FIX_COMMAND,
    }


# ---- the Python twin of the page's sampler (the tests compare the two) ------------------------------------
@dataclass
class StoredRound:
    """One stored round as tensors: target logits [K + 1, V], draft base logits U [K, V], a [K], and the shared
    Markov head W1, W2 [V, r], q [V], STS temperatures [K]. Distributions are memoised per temperature (and per
    previous token for the draft), as the page does: a round is sampled thousands of times in the tests."""

    anchor: int
    target_logits: torch.Tensor
    base: torch.Tensor
    a: list[float]
    w1: torch.Tensor
    w2: torch.Tensor
    q: list[float]
    sts: list[float]
    memo: dict = field(default_factory=dict, repr=False)

    @classmethod
    def from_data(cls, data: dict[str, Any], prompt: int, round_: int) -> StoredRound:
        pr = data["prompts"][prompt]
        r = pr["rounds"][round_]
        K, j = data["k_max"], r["p"] - pr["prompt_len"]
        f = lambda x: torch.tensor(x, dtype=torch.float64)
        return cls(
            anchor=pr["tokens"][r["p"]],
            target_logits=f(pr["target"][j : j + K + 1]),
            base=f(r["base"]),
            a=r["a"],
            w1=f(data["markov_w1"]),
            w2=f(data["markov_w2"]),
            q=data["conf_q"],
            sts=data["conf_sts"],
        )

    def target(self, temperature: float) -> torch.Tensor:
        """p_t for the k + 1 verify rows.  → [K + 1, V]"""
        if ("t", temperature) not in self.memo:
            self.memo["t", temperature] = token_distribution(self.target_logits, temperature)
        return self.memo["t", temperature]

    def draft_logits(self, i: int, prev: int) -> torch.Tensor:
        """U_i + W2·W1[x_{i−1}]: the parallel part plus the Markov head's bias.  → [V]"""
        return self.base[i] + self.w2 @ self.w1[prev]

    def draft(self, i: int, prev: int, temperature: float) -> torch.Tensor:
        """p_d^i = softmax((U_i + W2·W1[x_{i−1}]) / T).  → [V]"""
        key = ("d", i, prev, temperature)
        if key not in self.memo:
            self.memo[key] = token_distribution(self.draft_logits(i, prev), temperature)
        return self.memo[key]

    def confidence(self, i: int, prev: int) -> float:
        """c_i = σ((w_h·h_i + w_e·W1[x_{i−1}]) / T_sts,i)."""
        return 1 / (1 + math.exp(-(self.a[i] + self.q[prev]) / self.sts[i]))


@dataclass(frozen=True)
class Policy:
    """The page's verify-length control: which of dspark_mini/scheduler.py's policies picks ℓ, with its knob."""

    name: str = "fixed"  # "fixed" | "threshold" | "dspark"
    k: int = 5  # fixed: ℓ = k for every request (the page's slider: 1..5)
    threshold: float = DEFAULT_THRESHOLD  # threshold: ℓ = the leading drafts whose survival Π c ≥ threshold
    requests: int = 1  # dspark: R in flight, this request and R − 1 copies of it (as lab/present/rounds.py)

    def __post_init__(self):
        if self.name not in POLICIES:
            raise ValueError(f"policy = {self.name!r} is invalid: allowed {', '.join(map(repr, POLICIES))}")
        check_load(self.requests)


def verify_length(confidence: list[float], policy: Policy) -> int:
    """ℓ of this request: what `dspark_mini.scheduler` plans for its confidences c [K] (dspark: stacked R times,
    `view_6b.load_plan` on the shipped SPS table, as the presenter's 6B page)."""
    if policy.name == "dspark":
        return load_plan(confidence, policy.requests).verify_len
    options = {"length": policy.k} if policy.name == "fixed" else {"threshold": policy.threshold}
    return int(plan_round(policy.name, [confidence], **options).lengths[0])


@dataclass
class Sampled:
    verify_len: int  # ℓ: drafts sent to verify
    draft: list[int]  # the whole drafted block x_1..x_K
    confidence: list[float]  # c_i of each draft
    verdict: Verdict


def simulate_round(sr: StoredRound, temperature: float, policy: Policy, gen: torch.Generator | None) -> Sampled:
    """What the page does for one round: draft the whole block (x_i ~ p_d^i, left to right), pick ℓ from those
    drafts' confidences, verify the first ℓ."""
    prev, tokens, rows, conf = sr.anchor, [], [], []
    for i in range(sr.base.size(0)):
        pd = sr.draft(i, prev, temperature)
        x = int(sample(pd, gen))
        conf.append(sr.confidence(i, prev))
        tokens.append(x)
        rows.append(pd)
        prev = x
    key = ("ℓ", policy, tuple(conf))  # ℓ depends on the confidences only: memoised like the distributions
    if key not in sr.memo:
        sr.memo[key] = verify_length(conf, policy)
    n = sr.memo[key]
    draft = torch.tensor(tokens[:n], dtype=torch.long)
    verdict = verify_block(draft, torch.stack(rows)[:n], sr.target(temperature)[: n + 1], gen)
    return Sampled(n, tokens, conf, verdict)


# ---- the page ----------------------------------------------------------------------------------------------
def render_page(data: dict[str, Any]) -> str:
    """The page: the template with the style, the data (JSON) and the two scripts inlined."""
    from .fonts import font_face_css

    style = font_face_css() + asset("explorer.css") + asset("caches.css") + asset("verdict.css")
    parts = {"/*@STYLE@*/": style, "/*@VERIFY@*/": asset("explorer_verify.js")}
    return render(
        "explorer_template.html", data, {**parts, "/*@APP@*/": asset("caches_view.js") + asset("explorer_app.js")}
    )


def page_html(model: Transformer | None = None) -> str:
    """The whole page from the trained lab model (loaded when not given)."""
    if model is None:
        from ..weights import lab_model

        model = lab_model("trained")
    html = render_page(build_data(model))
    size = len(html.encode("utf-8"))
    if size > MAX_BYTES:
        raise ValueError(f"the Explorer page is {size:,} bytes: allowed ≤ {MAX_BYTES:,} (store fewer prompts/rounds)")
    return html


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m lab.present.explorer",
        description="Write the DSpark Explorer: one self-contained HTML page (no server, no network) that samples "
        "drafts and verifies them in the browser on distributions precomputed from the trained lab model.",
    )
    parser.add_argument("--out", type=Path, default=REPO_ROOT / PAGE, help=f"the page to write (default: {PAGE})")
    parser.add_argument("--check", action="store_true", help="write nothing; exit 1 if --out is not what it would be")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)  # the lab model is tiny: one thread is faster and immune to oversubscription
    html = page_html()
    if args.check:
        if not args.out.is_file() or args.out.read_bytes() != html.encode("utf-8"):
            print(f"{args.out} is out of date with the generator. Regenerate it with: {FIX_COMMAND}", file=sys.stderr)
            return 1
        print(f"{args.out} is in sync ({len(html.encode('utf-8')):,} bytes)")
        return 0
    write_atomic(args.out, html)  # written beside it and renamed: never half a page
    print(f"wrote {args.out} ({len(html.encode('utf-8')):,} bytes); open it in a browser, no server needed")
    return 0


if __name__ == "__main__":
    sys.exit(main())

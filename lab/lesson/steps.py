"""The registry of the ten steps (1A..6B): ids, columns, flow and every vi/en text.

The CLI, the notebooks, the clickable 4-column map and the mermaid diagrams are all generated from
this one module, so a title or a number is changed here and nowhere else. It is pure data plus a few
small accessors; it imports neither torch nor `dspark_mini`.

Columns, left to right: 1 Input, Engram & mHC · 2 CED 20+20 & CSA2 · 3 MLA & FP4 KV (890 B)
· 4 FP4 MoE & DSpark. Flow: 1A → 1B → 2A → 3A → 3B → 3C → 4A ↔ 6A → 5A → 6B.

Vietnamese text follows the lab's glossary (the lesson's terms first, `lab/text.py`); model names and code identifiers
(Engram, mHC, CSA2, MLA, MoE, DSpark, MarkovHead, `hc_pre`, RMSNorm, logits) stay in English.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from ..text import LANGS, check_lang, lang_tables

TEXT_FIELDS: tuple[str, ...] = ("title", "short", "what", "look_at", "real_scale")
SHORT_MAX_CHARS = 90  # map blocks and tooltips
LOOK_AT_MAX = 3  # bullets per language


@dataclass(frozen=True)
class Column:
    """One column of the architecture map; its steps are listed in flow order."""

    id: int  # 1..4, left to right on the map
    title: dict[str, str] = field(hash=False)  # {"vi": ..., "en": ...}
    step_ids: tuple[str, ...]

    def t(self, field_name: str, lang: str) -> str:
        """The column's text `field_name` (only "title") in `lang`."""
        if field_name != "title":
            raise ValueError(f"unknown column field {field_name!r}: allowed 'title'")
        return self.title[check_lang(lang)]

    def label(self, lang: str) -> str:
        """ "1 · Input, Engram & mHC" — the column header of the map."""
        return f"{self.id} · {self.t('title', lang)}"


@dataclass(frozen=True)
class Step:
    """One block of the map: what it is, how it is written, where to look and what it costs at real scale."""

    id: str  # "1A" .. "6B"
    column: int  # 1..4
    order: int  # 0..9, position in the flow
    title: dict[str, str] = field(hash=False)  # short heading
    short: dict[str, str] = field(hash=False)  # one line ≤ 90 chars for map blocks and tooltips
    what: dict[str, str] = field(hash=False)  # 2–4 sentences: what the mechanism does and why
    equation: str  # one or two lines, plain text/unicode, same in both languages
    look_at: dict[str, tuple[str, ...]] = field(hash=False)  # 1–3 bullets: what to watch on screen
    module: str  # the dspark_mini module that implements it
    real_scale: dict[str, str] = field(hash=False)  # one line of DeepSeek-V4.1-Flash numbers
    trace_key: str  # the key of this step in the model's Trace

    def __post_init__(self) -> None:
        def bad(name: str, allowed: str) -> ValueError:
            value = getattr(self, name)
            return ValueError(f"step {self.id}: field {name!r} = {value!r} is invalid: {allowed}")

        if self.column not in (1, 2, 3, 4):
            raise bad("column", "allowed 1..4")
        if not 0 <= self.order < 10:
            raise bad("order", "allowed 0..9")
        for name in TEXT_FIELDS:
            value = getattr(self, name)
            if not isinstance(value, dict) or set(value) != set(LANGS):
                raise bad(name, f"needs exactly the languages {LANGS}")
        for lang in LANGS:
            if len(self.short[lang]) > SHORT_MAX_CHARS:
                raise bad("short", f"{lang} text is longer than {SHORT_MAX_CHARS} characters")
            bullets = self.look_at[lang]
            if not isinstance(bullets, tuple) or not 1 <= len(bullets) <= LOOK_AT_MAX:
                raise bad("look_at", f"{lang} needs a tuple of 1..{LOOK_AT_MAX} bullets")
        if not self.equation or self.equation.count("\n") > 1:
            raise bad("equation", "needs one or two lines")

    def t(self, field_name: str, lang: str) -> str | tuple[str, ...]:
        """The text `field_name` (one of TEXT_FIELDS, or "equation") in `lang`; look_at is a tuple."""
        lang = check_lang(lang)
        if field_name == "equation":
            return self.equation
        if field_name not in TEXT_FIELDS:
            allowed = ", ".join(map(repr, TEXT_FIELDS + ("equation",)))
            raise ValueError(f"unknown step field {field_name!r}: allowed {allowed}")
        return getattr(self, field_name)[lang]

    def label(self, lang: str) -> str:
        """ "6B · LM head & DSpark: ..." — the heading of the step's panel."""
        return f"{self.id} · {self.t('title', lang)}"


class Edge(NamedTuple):
    """A flow edge of the map; bidirectional edges are drawn with arrows at both ends."""

    src: str
    dst: str
    bidirectional: bool = False


STEP_TEXT = lang_tables("steps")  # lab/lang/<lang>/steps.toml: each step's title, short, what, look_at, real_scale
COLUMN_TITLES = STEP_TEXT.pop("columns")  # and the four columns' titles

# ---- the four columns ----------------------------------------------------------------------------
COLUMNS: tuple[Column, ...] = (
    Column(1, COLUMN_TITLES["1"], ("1A", "1B", "2A")),
    Column(2, COLUMN_TITLES["2"], ("3A", "3B", "3C")),
    Column(3, COLUMN_TITLES["3"], ("4A", "6A")),
    Column(4, COLUMN_TITLES["4"], ("5A", "6B")),
)

# ---- the ten steps, in flow order ----------------------------------------------------------------
STEPS: tuple[Step, ...] = (
    Step(
        id="1A",
        column=1,
        order=0,
        equation="x = E[ids] ∈ [B,S,D];  X = repeat(x, 4) ∈ [B,S,4,D];  pre₀ = [1, 0, 0, 0]",
        module="model",
        trace_key="1A",
        **STEP_TEXT["1A"],
    ),
    Step(
        id="1B",
        column=1,
        order=1,
        equation="id(n,h) = (XOR_{s<n} c[t−s]·m[s]) mod p(n,h) + offset(n,h)\ng_c = σ(sign(d_c)·√|d_c|),  d_c = "
        "⟨norm(h_c), norm(key_c)⟩/√D;  h_c ← h_c + g_c·value",
        module="engram",
        trace_key="1B",
        **STEP_TEXT["1B"],
    ),
    Step(
        id="2A",
        column=1,
        order=2,
        equation="pre = σ(m·s₀+b)+ε,  post = 2σ(m·s₁+b),  comb = Sinkhorn₂₀(softmax(m·s₂+b))\nx_in = Σᵢ preᵢ·Xᵢ;  "
        "X'ⱼ = postⱼ·y + Σᵢ comb[i,j]·Xᵢ",
        module="mhc",
        trace_key="2A",
        **STEP_TEXT["2A"],
    ),
    Step(
        id="3A",
        column=2,
        order=3,
        equation="ratio = [0,0] + [2]×18 + [1]×20;  reads_kv_of(ℓ) = max{s ∈ sources : s ≤ ℓ}",
        module="schedule",
        trace_key="3A",
        **STEP_TEXT["3A"],
    ),
    Step(
        id="3B",
        column=2,
        order=4,
        equation="ratio 2: w = softmax_pair(wgate·x),  c_j = RMSNorm(Σ_{t∈{2j,2j+1}} w_t ⊙ wkv·x_t)\nratio 1: c_t "
        "= RMSNorm(wkv·x_t)",
        module="compressor",
        trace_key="3B",
        **STEP_TEXT["3B"],
    ),
    Step(
        id="3C",
        column=2,
        order=5,
        equation="I[s,t] = Σₕ w[s,h]·ReLU(q[s,h]·k[t]);  picks = topk(I | candidates, 512)\nkeys = window ‖ picks",
        module="indexer",
        trace_key="3C",
        **STEP_TEXT["3C"],
    ),
    Step(
        id="4A",
        column=3,
        order=6,
        equation="a_h = softmax([q_h·kv_t/√512]_t ; sink_h),  o_h = Σ_t a_h[t]·kv_t\nout = wo_b(concat_g wo_a[g](o_g))",
        module="attention",
        trace_key="4A",
        **STEP_TEXT["4A"],
    ),
    Step(
        id="6A",
        column=3,
        order=7,
        equation="global KV = 3·(288 + 68)/2 + (288 + 68) = 534 + 356 = 890 B/token;  x̃ = dequant(quant(x))",
        module="kv_cache",
        trace_key="6A",
        **STEP_TEXT["6A"],
    ),
    Step(
        id="5A",
        column=4,
        order=8,
        equation="a = √softplus(W_g·x);  E = topk(a + bias, k);  w = 1.5·a_E / Σa_E\ny = Σ_{e∈E} w_e·expert_e(x) "
        "+ shared(x),  expert(x) = w2(silu(min(w1·x, 10)) · clamp(w3·x, ±10))",
        module="moe",
        trace_key="5A",
        **STEP_TEXT["5A"],
    ),
    Step(
        id="6B",
        column=4,
        order=9,
        equation="logits = head(RMSNorm(hc_pre(X, pre)));  p_d(·|i) = softmax(head(h_i) + "
        "head_m(W1[x_{i−1}]))\nc_i = σ(w·[h_i; W1[x_{i−1}]]);  a_j = Π_{i≤j} c_i;  P(✓ d_i) = min(1, "
        "p_t(d_i)/p_d(d_i))",
        module="dspark",
        trace_key="head",
        **STEP_TEXT["6B"],
    ),
)

STEP_IDS: tuple[str, ...] = tuple(s.id for s in STEPS)

# ---- the flow ------------------------------------------------------------------------------------
# The hidden stream runs 1A → … → 4A and then from attention straight to the MoE (4A → 5A); the KV
# cache (6A) sits beside attention, which both writes and reads it (4A ↔ 6A). Visiting the map
# depth-first from 1A, side branches first, gives the flow order of the lesson:
# 1A, 1B, 2A, 3A, 3B, 3C, 4A, 6A, 5A, 6B (see `flow_walk`).
FLOW: tuple[Edge, ...] = (
    Edge("1A", "1B"),
    Edge("1B", "2A"),
    Edge("2A", "3A"),
    Edge("3A", "3B"),
    Edge("3B", "3C"),
    Edge("3C", "4A"),
    Edge("4A", "6A", bidirectional=True),
    Edge("4A", "5A"),
    Edge("5A", "6B"),
)


def get_step(step_id: str | Step) -> Step:
    """The step with this id ("6B", "6b", " 6B " all work); unknown ids raise ValueError naming them."""
    if isinstance(step_id, Step):
        return step_id
    if isinstance(step_id, str):
        key = step_id.strip().upper()
        for step in STEPS:
            if step.id == key:
                return step
    raise ValueError(f"unknown step id {step_id!r}: valid ids are {', '.join(STEP_IDS)}")


def get_column(column: int | Column) -> Column:
    """The column with this number (1..4); anything else raises ValueError naming it."""
    if isinstance(column, Column):
        return column
    for col in COLUMNS:
        if not isinstance(column, bool) and col.id == column:
            return col
    raise ValueError(f"unknown column {column!r}: valid columns are {', '.join(str(c.id) for c in COLUMNS)}")


def steps_in_column(column: int | Column) -> tuple[Step, ...]:
    """The steps of one column, in flow order."""
    return tuple(get_step(i) for i in get_column(column).step_ids)


def text(step: str | Step, field_name: str, lang: str) -> str | tuple[str, ...]:
    """`get_step(step).t(field_name, lang)`: one text of one step in one language."""
    return get_step(step).t(field_name, lang)


def successors(step_id: str | Step) -> tuple[str, ...]:
    """Steps reachable by one edge from `step_id`; a bidirectional edge counts both ways, listed first."""
    key = get_step(step_id).id
    both = [e.dst if e.src == key else e.src for e in FLOW if e.bidirectional and key in (e.src, e.dst)]
    one_way = [e.dst for e in FLOW if not e.bidirectional and e.src == key]
    return tuple(both + one_way)


def flow_walk(start: str | Step = "1A") -> tuple[str, ...]:
    """Depth-first walk of FLOW from `start`, side branches first; from 1A it equals STEP_IDS."""
    seen: list[str] = []

    def visit(step_id: str) -> None:
        seen.append(step_id)
        for nxt in successors(step_id):
            if nxt not in seen:
                visit(nxt)

    visit(get_step(start).id)
    return tuple(seen)


def next_step(step_id: str | Step) -> Step | None:
    """The step after this one in flow order (None after 6B)."""
    i = get_step(step_id).order
    return STEPS[i + 1] if i + 1 < len(STEPS) else None


def prev_step(step_id: str | Step) -> Step | None:
    """The step before this one in flow order (None before 1A)."""
    i = get_step(step_id).order
    return STEPS[i - 1] if i > 0 else None


def _check_registry() -> None:
    """Cross-checks the constructors cannot do alone; run once at import."""
    ids = [s.id for s in STEPS]
    if len(set(ids)) != len(ids) or [s.order for s in STEPS] != list(range(len(STEPS))):
        raise ValueError(f"STEPS must have unique ids in flow order 0..9, got {ids}")
    in_columns = [i for c in COLUMNS for i in c.step_ids]
    if sorted(in_columns) != sorted(ids):
        raise ValueError(f"COLUMNS must partition the steps {ids}, got {in_columns}")
    for col in COLUMNS:
        for step in steps_in_column(col):
            if step.column != col.id:
                raise ValueError(f"step {step.id} is in column {col.id}'s list but says column {step.column}")
    for edge in FLOW:
        get_step(edge.src), get_step(edge.dst)
    if flow_walk() != tuple(ids):
        raise ValueError(f"FLOW walks {flow_walk()}, but STEPS are ordered {tuple(ids)}")


_check_registry()

"""The toy training corpus: three synthetic domains that differ in how predictable the next token is.

The paper measures DSpark on math, code and chat prompts and finds the same ordering for every drafter: math
is the most predictable (τ ≈ 5.6 for Qwen3-4B DSpark), code next (≈ 5.1), chat the least (≈ 3.5) [paper §4.2].
This module builds a tiny, deterministic stand-in for those three domains, written with the lab tokenizer's
word tokens so that lines stay short in tokens:

    math  "7+12=19, 12+7=19, 19-12=7, 19-7=12"         a few related facts; every answer is correct, and after
                                                        the first fact the rest of the line is determined
    code  "for i in range(5): print(i)"                 a handful of one-line Python templates and names
    chat  "User: Xin chào! Bot: Chào bạn, hôm nay bạn học gì?"
                                                        a branching grammar in English and Vietnamese with
                                                        several choices at every slot

One example per line, each line ends with "\\n". Nothing is downloaded and every random choice comes from a
seeded `random.Random`, so `build_corpus(seed)` returns the same text on every machine.

Every line comes from a small grammar whose choices are uniform and leave a trace in the text, so P(line) is
known exactly (`line_bits`). `describe` turns that into the predictability of each domain: the conditional
entropy of the next token given the line so far, in bits per token (what even a perfectly trained target cannot
predict; 0 = fully determined): math ≈ 0.29 < code ≈ 0.51 < chat ≈ 0.87 bits. For contrast it also counts the
entropy given only the previous two tokens (a trigram view): there math is the *least* predictable (≈ 2.2 bits),
because an answer depends on operands further back, which the target's attention can read and a trigram cannot.

Differs from the real data: DeepSpec trains on ≈1.2 M regenerated conversations of up to 4,096 tokens (math
39 %, code 39 %, chat 18 % [paper §4.1]); here a domain is a few thousand one-line examples from a grammar.
"""

from __future__ import annotations

import argparse
import functools
import json
import math
import random
import re
import unicodedata
from collections import Counter, defaultdict
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .text import Texts, check_lang, say_symlink

if TYPE_CHECKING:  # torch is imported where it is used, so `dspark-lab --help` stays fast
    import torch

DOMAINS: tuple[str, ...] = ("math", "code", "chat")
DEFAULT_LINES_PER_DOMAIN = 2000
# 50× the default. More adds little: math and code stop making new lines near 1,000 and 580 distinct ones (chat
# keeps branching), while `data` needs about a minute to describe 100,000 lines per domain on one core.
MAX_LINES_PER_DOMAIN = 100_000
DEFAULT_SEED = 0

DOMAIN_NOTES: dict[str, dict[str, str]] = {
    "math": {
        "en": "arithmetic fact families, times-table rows and counting chains; every answer is correct",
        "vi": "họ phép tính, hàng bảng cửu chương và dãy đếm tiến/lùi theo bước; mọi đáp số đều đúng",
    },
    "code": {
        "en": "one-line Python statements from a handful of templates and names (each line compiles)",
        "vi": "câu lệnh Python một dòng từ vài khuôn mẫu và tên biến (dòng nào cũng biên dịch được)",
    },
    "chat": {
        "en": "User/Bot exchanges in English and Vietnamese from a branching grammar",
        "vi": "hội thoại User/Bot tiếng Anh và tiếng Việt từ một ngữ pháp rẽ nhánh",
    },
}


# ---- random choices that keep count of their bits ---------------------------------------------------------------
class _Chooser:
    """Uniform random choices from a seeded random.Random that add up log2(number of options) as they go.

    Each generator below draws only the choices that show in its line, and different choices give different
    lines (tests check it), so `bits` after a line is exactly -log2 P(line): what a perfect model of the
    grammar still has to guess. Every choice goes through `_pick(n)`, which lets `_enumerate` walk all of them."""

    def __init__(self, rng: random.Random | None) -> None:
        self.rng = rng
        self.bits = 0.0

    def _pick(self, n: int) -> int:
        self.bits += math.log2(n)
        return self.rng.randrange(n)  # type: ignore[union-attr]

    def choice(self, options: Sequence[Any]) -> Any:
        return options[self._pick(len(options))]

    def randint(self, lo: int, hi: int) -> int:
        return lo + self._pick(hi - lo + 1)

    def pair(self, options: Sequence[Any]) -> tuple[Any, Any]:
        """Two different options, in order."""
        n = len(options)
        k = self._pick(n * (n - 1))
        i, j = divmod(k, n - 1)
        return options[i], options[j + (j >= i)]


class _Path(_Chooser):
    """A chooser that replays a fixed list of choice indices (then 0s) and records each choice's range."""

    def __init__(self, path: list[int]) -> None:
        super().__init__(None)
        self.path, self.sizes = path, []

    def _pick(self, n: int) -> int:
        i = self.path[len(self.sizes)] if len(self.sizes) < len(self.path) else 0
        self.sizes.append(n)
        self.bits += math.log2(n)
        return i


def _enumerate(gen: Callable[[_Chooser], str]) -> Iterator[tuple[str, float]]:
    """Every (line, bits) a generator can make, by walking its choice tree like an odometer (small trees only)."""
    path: list[int] = []
    while True:
        c = _Path(path)
        line = gen(c)
        yield line, c.bits
        path = path + [0] * (len(c.sizes) - len(path))
        j = len(c.sizes) - 1
        while j >= 0 and path[j] == c.sizes[j] - 1:
            j -= 1
        if j < 0:
            return
        path = path[:j] + [path[j] + 1]


# ---- math ------------------------------------------------------------------------------------------------------
def _math_line(c: _Chooser) -> str:
    kind = c.choice(("add family", "times family", "times row", "count"))
    if kind == "add family":  # 7+12=19, 12+7=19, 19-12=7, 19-7=12
        a, b = c.randint(0, 20), c.randint(0, 20)
        s = a + b
        facts = [f"{a}+{b}={s}", f"{b}+{a}={s}", f"{s}-{b}={a}", f"{s}-{a}={b}"]
    elif kind == "times family":  # no zero: the divisions must be exact
        a, b = c.randint(1, 12), c.randint(1, 12)
        p = a * b
        facts = [f"{a}*{b}={p}", f"{b}*{a}={p}", f"{p}/{b}={a}", f"{p}/{a}={b}"]
    elif kind == "times row":  # 5*3=15, 5*4=20, 5*5=25, 5*6=30
        a, b = c.randint(2, 9), c.randint(1, 7)
        facts = [f"{a}*{b + j}={a * (b + j)}" for j in range(4)]
    else:  # counting on or back by a fixed step: 3+4=7, 7+4=11, ...
        a, step = c.randint(0, 20), c.randint(1, 9)
        if c.choice(("on", "back")) == "on":
            facts = [f"{a + j * step}+{step}={a + (j + 1) * step}" for j in range(4)]
        else:
            top = a + 4 * step
            facts = [f"{top - j * step}-{step}={top - (j + 1) * step}" for j in range(4)]
    return ", ".join(facts)


# ---- code ------------------------------------------------------------------------------------------------------
_VARS = ("x", "y", "n")
_FUNCS = ("f", "step", "predict", "train")
_OPS = ("+", "-", "*")
_CMPS = (">", "<", "==")


def _code_line(c: _Chooser) -> str:
    """One line of valid Python; names repeat inside a line, as they do in real code."""
    t = c.randint(0, 9)  # template; each one draws only the names and numbers it shows
    if t == 0:
        f, x, op, k = c.choice(_FUNCS), c.choice(_VARS), c.choice(_OPS), c.randint(1, 9)
        return f"def {f}({x}): return {x}{op}{k}"
    if t == 1:
        f, (x, y), op = c.choice(_FUNCS), c.pair(_VARS), c.choice(_OPS)
        return f"def {f}({x}, {y}): return {x}{op}{y}"
    if t == 2:
        x, cmp, k = c.choice(_VARS), c.choice(_CMPS), c.randint(1, 9)
        return f"if {x} {cmp} {k}: print({x})"
    if t == 3:
        (x, y), cmp = c.pair(_VARS), c.choice(_CMPS)
        return f"if {x} {cmp} {y}: {x} = {y}"
    if t == 4:
        return f"for i in range({c.randint(1, 9)}): print(i)"
    if t == 5:
        k, x = c.randint(1, 9), c.choice(_VARS)
        return f"for i in range({k}): {x} = {x}+i"
    if t == 6:
        x = c.choice(_VARS)
        return f"while {x} > 0: {x} = {x}-1"
    if t == 7:
        x, k = c.choice(_VARS), c.randint(1, 9)
        return f"{x} = [i*i for i in range({k})]"
    if t == 8:
        x = c.choice(_VARS)
        return f"print(len({x}), sum({x}))"
    f, x = c.choice(_FUNCS), c.choice(_VARS)
    return f"def {f}({x}): return {f}({x}-1) if {x} > 0 else 0"


# ---- chat ------------------------------------------------------------------------------------------------------
# A small context-free grammar: "{slot}" is replaced, left to right, by one of the slot's alternatives (which may
# hold slots themselves). Words are chosen from the lab vocabulary's word tokens where possible: lower-case
# English and Vietnamese words with a leading space are one token each; capitalised ones mostly are not, so
# sentences open with the few capitalised tokens (What, The, This, We, It, Xin, Chào, Tôi, Bạn, Hôm, Các).
_CHAT_GRAMMAR: dict[str, tuple[str, ...]] = {
    "line": (
        "User: {en_hi} {en_how} Bot: {en_fine}{en_ask}",
        "User: {en_q_what} Bot: {en_a_what}",
        "User: {en_q_do} Bot: {en_a_do}",
        "User: {en_q_learn} Bot: {en_a_learn}",
        "User: {vi_hi}!{vi_how} Bot: {vi_fine}{vi_ask}",
        "User: {vi_q_learn} Bot: {vi_a_learn}",
        "User: {vi_q_what} Bot: {vi_a_what}",
        "User: {vi_q_do} Bot: {vi_a_do}",
    ),
    # English
    "en_hi": ("Hello!", "Hello,", "Hello, world!", "Good day!", "Thank you!", "hello there,"),
    "en_how": (
        "how are you?",
        "how are you today?",
        "how is your day?",
        "what is new today?",
        "what do you know?",
        "can you see me?",
    ),
    "en_fine": (
        "I am {en_very}good, thank you.",
        "{en_very}good, thank you!",
        "good, and you?",
        "yes, I can see you.",
        "hello! It is a good day.",
        "I know {en_np}.",
    ),
    "en_ask": (
        "",
        " What do we learn {en_when}?",
        " What is new {en_when}?",
        " It is {en_np}!",
        " We can learn {en_topic} {en_when}.",
        " Thank you!",
    ),
    "en_very": ("", "very ", "so "),
    "en_q_what": (
        "What is {en_np}?",
        "What is {en_np} {en_prep} {en_np}?",
        "What does {en_np} do?",
        "What is in {en_np}?",
    ),
    "en_a_what": (
        "It is {en_np} {en_prep} {en_np}.",
        "The {en_noun} is {en_np}.",
        "I do not know {en_np}.",
        "It has {en_np} and {en_np}.",
        "This is {en_np}, not {en_np}.",
    ),
    "en_q_do": (
        "What {en_aux} the {en_noun} {en_verb}?",
        "What {en_aux} {en_np} {en_verb} {en_when}?",
        "{en_Why}, what {en_we_aux} we {en_verb}?",
    ),
    "en_a_do": (
        "It {en_aux} {en_verb} {en_np}.",
        "The {en_noun} {en_aux} {en_verb} {en_np} {en_prep} {en_np}.",
        "It does not {en_verb} {en_np}.",
        "We {en_we_aux} {en_verb} {en_np}, then {en_verb} {en_np}.",
    ),
    "en_aux": ("does", "can", "will"),
    "en_we_aux": ("do", "can", "will"),
    "en_Why": ("Yes", "So", "In this step", "If we train"),
    "en_q_learn": ("What do we learn {en_when}?", "What will we learn {en_when}?", "What is the {en_adj} step?"),
    "en_a_learn": (
        "We learn {en_topic}{en_then}.",
        "Today we learn {en_topic}{en_then}.",
        "The {en_adj} step is {en_topic}{en_then}.",
        "First {en_topic}, then {en_topic}.",
    ),
    "en_when": ("today", "next", "first", "after this", "with the model", "in this step"),
    "en_then": ("", ", then {en_topic}", " and {en_topic}", " with {en_np}"),
    "en_topic": (
        "attention",
        "the draft model",
        "softmax",
        "the Engram table",
        "DSpark",
        "the hidden layers",
        "the language model",
        "the experts",
        "{en_np}",
    ),
    "en_np": ("a {en_adj} {en_noun}", "the {en_noun}", "one {en_noun}", "the {en_adj} {en_noun}", "each {en_noun}"),
    "en_adj": ("small", "large", "new", "hidden", "first", "last", "same", "next", "good"),
    "en_noun": (
        "token",
        "model",
        "layer",
        "router",
        "cache",
        "vector",
        "matrix",
        "window",
        "gate",
        "table",
        "expert",
        "head",
        "block",
        "draft",
        "sequence",
        "word",
        "sentence",
        "embedding",
    ),
    "en_prep": ("of", "for", "in", "with", "from", "on", "at"),
    "en_verb": ("predict", "learn", "see", "make", "know", "say", "train"),
    # Vietnamese
    "vi_hi": ("Xin chào", "Chào bạn", "Chào thầy", "Chào cô", "Chào các bạn", "Xin chào các bạn"),
    "vi_how": (
        "",
        " Bạn có khỏe không?",
        " Hôm nay bạn thế nào?",
        " Hôm nay {vi_who} học gì?",
        " Bạn có biết {vi_np} không?",
        " Bạn {vi_tense} {vi_verb} gì?",
    ),
    "vi_fine": (
        "Tôi {vi_very}khỏe, cảm ơn {vi_you}.",
        "Chào {vi_you}!",
        "Xin chào!",
        "Tôi khỏe. Còn {vi_you}?",
        "Chào {vi_you}, hôm nay {vi_who} học gì?",
        "Tôi {vi_tense} {vi_verb} {vi_np}.",
        "Cảm ơn {vi_you}!",
    ),
    "vi_ask": (
        "",
        " Hôm nay {vi_who} học về {vi_np}.",
        " Bạn có khỏe không?",
        " Hôm nay {vi_who} học gì?",
        " Tôi {vi_tense} học {vi_np}.",
    ),
    "vi_very": ("", "rất "),
    "vi_you": ("bạn", "thầy", "cô", "các bạn"),
    "vi_who": ("bạn", "chúng ta", "các bạn", "tôi", "thầy", "cô"),
    "vi_Who": ("Tôi", "Bạn", "Các bạn", "Các mô hình", "Hôm nay tôi", "Hôm nay bạn"),
    "vi_tense": ("đã", "đang", "sẽ"),
    "vi_verb": ("học", "đọc", "viết", "nói", "biết", "làm", "nhớ", "dự đoán", "hỏi"),
    "vi_q_learn": ("Hôm nay {vi_who} học gì?", "Hôm nay {vi_who} học về gì?", "{vi_Who} {vi_tense} học gì?"),
    "vi_a_learn": (
        "Hôm nay {vi_who} học về {vi_np}{vi_then}.",
        "{vi_Who} {vi_tense} {vi_verb} {vi_np}{vi_then}.",
        "Tôi không biết.",
        "{vi_Who} {vi_tense} học {vi_np}, rồi {vi_verb} {vi_np}.",
    ),
    "vi_then": ("", ", rồi {vi_np}", " và {vi_np}", " với {vi_you}", " trong lớp {vi_this}"),
    "vi_this": ("này", "hôm nay", "tiếng Việt"),
    "vi_q_what": (
        "{vi_Who} có biết {vi_np} là gì không?",
        "{vi_Who} biết {vi_np} là gì không?",
        "Tôi hỏi: {vi_np} là gì?",
    ),
    "vi_a_what": (
        "Tôi biết: {vi_np} là {vi_np}.",
        "Tôi không biết {vi_np} là gì.",
        "Tôi biết, {vi_np} là {vi_np}.",
        "{vi_Who} {vi_tense} {vi_verb} {vi_np}.",
    ),
    "vi_q_do": (
        "{vi_Who} {vi_tense} làm gì với {vi_np}?",
        "{vi_Who} có {vi_verb} {vi_np} không?",
        "{vi_Who} dự đoán gì?",
    ),
    "vi_a_do": (
        "{vi_Who} {vi_tense} {vi_verb} {vi_np}.",
        "Tôi biết, {vi_who} {vi_verb} {vi_np}.",
        "Không, tôi không {vi_verb} {vi_np}.",
        "{vi_Who} dự đoán {vi_np} {vi_next}.",
    ),
    "vi_next": ("tiếp theo", "của câu", "trong lớp {vi_this}", "với một xác suất", "cho {vi_you}"),
    "vi_np": (
        "{vi_noun}",
        "{vi_noun} {vi_adj}",
        "một {vi_noun} {vi_adj}",
        "những {vi_noun} của {vi_noun}",
        "{vi_noun} {vi_this}",
        "các {vi_noun}",
    ),
    "vi_noun": (
        "token",
        "mô hình",
        "ngôn ngữ",
        "câu",
        "từ",
        "dữ liệu",
        "máy tính",
        "bài học",
        "lớp",
        "số",
        "attention",
        "cache",
        "router",
        "tiếng Việt",
    ),
    "vi_adj": ("lớn", "nhỏ", "đúng", "sai", "tiếp theo", "hai", "ba"),
}
_SLOT_RE = re.compile(r"\{(\w+)\}")


def _expand(template: str, c: _Chooser, depth: int = 0) -> str:
    """Replace each {slot} left to right by a random alternative, recursively (the grammar is acyclic)."""
    if depth > 8:
        raise RuntimeError(f"chat grammar too deep at {template!r}")
    out: list[str] = []
    pos = 0
    for m in _SLOT_RE.finditer(template):
        out.append(template[pos : m.start()])
        out.append(_expand(c.choice(_CHAT_GRAMMAR[m.group(1)]), c, depth + 1))
        pos = m.end()
    out.append(template[pos:])
    return "".join(out)


def _chat_line(c: _Chooser) -> str:
    return _expand("{line}", c)


def _chat_prob(line: str) -> float:
    """P(line) under the chat grammar: the sum over its derivations (a memoized top-down parse)."""
    memo: dict[tuple[str, int], dict[int, float]] = {}

    def slot(name: str, pos: int) -> dict[int, float]:  # end position → probability of reaching it
        key = (name, pos)
        if key not in memo:
            alts = _CHAT_GRAMMAR[name]
            out: dict[int, float] = defaultdict(float)
            for alt in alts:
                for end, p in template(alt, pos).items():
                    out[end] += p / len(alts)
            memo[key] = dict(out)
        return memo[key]

    def template(t: str, pos: int) -> dict[int, float]:
        states = {pos: 1.0}
        for k, part in enumerate(_SLOT_RE.split(t)):  # literal, slot name, literal, ...
            nxt: dict[int, float] = defaultdict(float)
            for at, p in states.items():
                if k % 2 == 0:
                    if line.startswith(part, at):
                        nxt[at + len(part)] += p
                else:
                    for end, q in slot(part, at).items():
                        nxt[end] += p * q
            states = dict(nxt)
            if not states:
                break
        return states

    return slot("line", 0).get(len(line), 0.0)


_GENERATORS: dict[str, Callable[[_Chooser], str]] = {"math": _math_line, "code": _code_line, "chat": _chat_line}


# ---- public API ------------------------------------------------------------------------------------------------
def check_domain(domain: str) -> str:
    """`domain` if it is one of DOMAINS; anything else raises ValueError naming it and the allowed ones."""
    if not isinstance(domain, str) or domain not in _GENERATORS:
        raise ValueError(f"unknown domain {domain!r}: allowed {', '.join(map(repr, DOMAINS))}")
    return domain


def _rng(domain: str, seed: int) -> random.Random:
    # A str seed is hashed with SHA-512 by random.seed (stable across processes and Python versions, unlike
    # hash()); each domain gets its own stream, and negative seeds do not collide with positive ones.
    return random.Random(f"dspark-lab corpus/{domain}/{seed}")


def generate_with_bits(domain: str, n_lines: int, seed: int = DEFAULT_SEED) -> tuple[list[str], list[float]]:
    """generate()'s lines and, for each, -log2 P(line) under the domain's grammar (the bits of its choices)."""
    check_domain(domain)
    if isinstance(n_lines, bool) or not isinstance(n_lines, int) or not 1 <= n_lines <= MAX_LINES_PER_DOMAIN:
        raise ValueError(f"n_lines = {n_lines!r}: allowed an integer in 1..{MAX_LINES_PER_DOMAIN}")
    if isinstance(seed, bool) or not isinstance(seed, int):
        raise ValueError(f"seed = {seed!r}: allowed an integer")
    rng = _rng(domain, seed)
    gen = _GENERATORS[domain]
    lines: list[str] = []
    bits: list[float] = []
    for _ in range(n_lines):
        c = _Chooser(rng)
        lines.append(unicodedata.normalize("NFC", gen(c)) + "\n")
        bits.append(c.bits)
    return lines, bits


def generate(domain: str, n_lines: int, seed: int = DEFAULT_SEED) -> list[str]:
    """`n_lines` examples of one domain, each ending with "\\n"; the same (domain, n_lines, seed) → the same lines.

    A longer request extends a shorter one: generate(d, 10, s) == generate(d, 20, s)[:10]. An unknown domain or
    n_lines < 1 raises ValueError naming the argument."""
    return generate_with_bits(domain, n_lines, seed)[0]


@functools.cache
def _line_table(domain: str) -> dict[str, float]:
    """{line: P(line)} for a domain small enough to enumerate (math: ~1,000 lines, code: ~600)."""
    table: dict[str, float] = defaultdict(float)
    for line, bits in _enumerate(_GENERATORS[domain]):
        table[unicodedata.normalize("NFC", line)] += 2.0**-bits
    return dict(table)


def line_bits(domain: str, line: str) -> float:
    """-log2 P(line) under the domain's grammar (with or without the final "\\n"); a line the grammar cannot
    make raises ValueError. math and code are looked up in the full list of their lines, chat is parsed."""
    check_domain(domain)
    text = line[:-1] if line.endswith("\n") else line
    p = _line_table(domain).get(text, 0.0) if domain != "chat" else _chat_prob(text)
    if p <= 0.0:
        raise ValueError(f"{text!r} is not a line of the {domain!r} grammar")
    return -math.log2(p)


def build_corpus(seed: int = DEFAULT_SEED, lines_per_domain: int = DEFAULT_LINES_PER_DOMAIN) -> dict[str, list[str]]:
    """{domain: lines} for every domain in DOMAINS order."""
    return {d: generate(d, lines_per_domain, seed) for d in DOMAINS}


def mix(corpus: Mapping[str, Sequence[str]], seed: int = DEFAULT_SEED) -> list[str]:
    """All lines of all domains in one deterministic shuffled list (a training stream that mixes domains)."""
    lines = [line for d in corpus for line in corpus[d]]
    random.Random(seed).shuffle(lines)
    return lines


def _tokenizer(tok: Any = None) -> Any:
    if tok is None:
        from dspark_mini.tokenizer import default_tokenizer

        tok = default_tokenizer()
    return tok


def token_stream(lines: Sequence[str], tok: Any = None, eos: bool = False) -> torch.Tensor:
    """Int64 ids [N] of the lines concatenated (they end with "\\n"); eos=True also appends <eos> after each line.

    Encoding line by line equals encoding the joined text: the tokenizer never merges across "\\n"."""
    import torch

    tok = _tokenizer(tok)
    if isinstance(lines, str):
        raise ValueError("lines must be a sequence of strings, got one str (wrap it in a list)")
    ids: list[int] = []
    for line in lines:
        ids += tok.encode(line)
        if eos:
            ids.append(tok.eos)
    return torch.tensor(ids, dtype=torch.long)


def split(
    lines: Sequence[str], val_fraction: float = 0.1, seed: int = DEFAULT_SEED, disjoint: bool = False
) -> tuple[list[str], list[str]]:
    """(train, val): a seeded choice of round(len · val_fraction) lines (at least 1 when val_fraction > 0) for val,
    each part in the original order.

    The generators repeat lines (math has a few hundred distinct facts), so an identical line can sit on both
    sides; disjoint=True splits by distinct text instead, so that no val line occurs in train (the val share is
    then about val_fraction of the distinct texts, not of the lines)."""
    if not isinstance(val_fraction, (int, float)) or isinstance(val_fraction, bool) or not 0 <= val_fraction < 1:
        raise ValueError(f"val_fraction = {val_fraction!r}: allowed 0 ≤ val_fraction < 1")
    lines = list(lines)
    if disjoint:
        keys = list(dict.fromkeys(lines))  # distinct texts, first-occurrence order
    else:
        keys = list(range(len(lines)))
    n_val = round(len(keys) * val_fraction)
    if val_fraction > 0:
        n_val = max(1, n_val)
    if n_val >= len(keys) and len(keys) > 0 and val_fraction > 0:
        raise ValueError(
            f"val_fraction = {val_fraction} of {len(keys)} {'distinct lines' if disjoint else 'lines'} leaves no "
            "training line: use more lines or a smaller val_fraction"
        )
    order = list(range(len(keys)))
    random.Random(seed).shuffle(order)
    val_keys = {keys[i] for i in order[:n_val]}
    if disjoint:
        return [s for s in lines if s not in val_keys], [s for s in lines if s in val_keys]
    return [s for i, s in enumerate(lines) if i not in val_keys], [s for i, s in enumerate(lines) if i in val_keys]


def _check_window(ids: torch.Tensor, batch: int, seq_len: int) -> None:
    import torch

    if not isinstance(ids, torch.Tensor) or ids.dim() != 1 or ids.dtype != torch.long:
        got = f"{type(ids).__name__} {getattr(ids, 'dtype', '')} {tuple(getattr(ids, 'shape', ()))}"
        raise ValueError(f"ids must be a 1-D int64 tensor (token_stream's output), got {got}")
    for name, v in (("batch", batch), ("seq_len", seq_len)):
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            raise ValueError(f"{name} = {v!r}: allowed an integer ≥ 1")
    if ids.numel() < seq_len + 1:
        raise ValueError(f"seq_len = {seq_len} needs a stream of ≥ {seq_len + 1} tokens, got {ids.numel()}")


def sample_batch(ids: torch.Tensor, batch: int, seq_len: int, generator: torch.Generator) -> torch.Tensor:
    """[batch, seq_len + 1] windows of the stream at uniform random starts drawn with `generator`.

    Inputs are w[:, :-1] and next-token labels w[:, 1:]; the same generator seed gives the same windows."""
    import torch

    _check_window(ids, batch, seq_len)
    if not isinstance(generator, torch.Generator):
        raise ValueError(f"generator must be a torch.Generator, got {type(generator).__name__}")
    starts = torch.randint(0, ids.numel() - seq_len, (batch,), generator=generator)  # [batch]
    return ids[starts[:, None] + torch.arange(seq_len + 1)]  # [batch, seq_len + 1]


def batches(
    ids: torch.Tensor, batch: int, seq_len: int, generator: torch.Generator, n_batches: int | None = None
) -> Iterator[torch.Tensor]:
    """`n_batches` windows from sample_batch (endless when None); checks the arguments on the first next()."""
    if n_batches is not None and (isinstance(n_batches, bool) or not isinstance(n_batches, int) or n_batches < 0):
        raise ValueError(f"n_batches = {n_batches!r}: allowed None or an integer ≥ 0")
    i = 0
    while n_batches is None or i < n_batches:
        yield sample_batch(ids, batch, seq_len, generator)
        i += 1


# ---- predictability ----------------------------------------------------------------------------------------------
def _entropy_bits(counts: Mapping[Any, Counter]) -> float:
    """Plug-in conditional entropy Σ_c p(c) H(next | c) in bits from {context: Counter(next)}."""
    total = sum(sum(c.values()) for c in counts.values())
    h = 0.0
    for c in counts.values():
        n = sum(c.values())
        for v in c.values():
            h -= v / total * math.log2(v / n)
    return max(h, 0.0)


def conditional_entropy(seqs: Sequence[Sequence[int]], context: int | None = None) -> float:
    """H(next token | context) in bits, from counts over `seqs` (token-weighted).

    context=None: the context is everything earlier in the same sequence (one line = one sequence), i.e. the
    uncertainty left for a model that reads the whole line. context=k: only the previous k tokens, read across
    sequence boundaries (pass one joined sequence for a stream). A context seen only once looks deterministic,
    so with few lines the estimate is low; use the same number of lines when comparing domains."""
    counts: dict[Any, Counter] = defaultdict(Counter)
    if context is None:
        trie: dict[tuple[int, int], int] = {}  # (prefix node, token) → node: a prefix's id without tuple copies
        for s in seqs:
            node = 0
            for t in s:
                counts[node][t] += 1
                node = trie.setdefault((node, t), len(trie) + 1)
    else:
        if isinstance(context, bool) or not isinstance(context, int) or context < 0:
            raise ValueError(f"context = {context!r}: allowed None or an integer ≥ 0")
        for s in seqs:
            s = list(s)
            for j, t in enumerate(s):
                counts[tuple(s[max(0, j - context) : j])][t] += 1
    return _entropy_bits(counts)


def describe(corpus: Mapping[str, Sequence[str]], tok: Any = None) -> dict[str, dict[str, Any]]:
    """Per domain: lines, distinct lines, tokens (with each "\\n"), mean tokens per line, distinct token ids, and
    the predictability in bits per token (lower = more predictable, more draft tokens accepted):

    entropy_bits       H(next | the line so far) of the domain's grammar: Σ -log2 P(line) / Σ tokens over the
                       lines (exact per line; what even a perfect model of the domain cannot predict). None for
                       a key that is not one of DOMAINS.
    entropy_ctx2_bits  H(next | previous 2 tokens), from counts over the domain's token stream (a trigram view:
                       it cannot do the arithmetic, whose answer depends on operands further back).
    bits_per_line      mean -log2 P(line)."""
    tok = _tokenizer(tok)
    out: dict[str, dict[str, Any]] = {}
    for domain, lines in corpus.items():
        if isinstance(lines, str) or not lines:
            raise ValueError(f"domain {domain!r} needs a non-empty list of lines, got {type(lines).__name__}")
        seqs = [tok.encode(line) for line in lines]
        stream = [t for s in seqs for t in s]
        bits = [line_bits(domain, line) for line in lines] if domain in _GENERATORS else None
        out[domain] = {
            "lines": len(lines),
            "distinct_lines": len(set(lines)),
            "tokens": len(stream),
            "tokens_per_line": len(stream) / len(lines),
            "distinct_tokens": len(set(stream)),
            "bits_per_line": sum(bits) / len(lines) if bits is not None else None,
            "entropy_bits": sum(bits) / len(stream) if bits is not None else None,
            "entropy_ctx2_bits": conditional_entropy([stream], 2),
        }
    return out


# ---- files -------------------------------------------------------------------------------------------------------
def write_corpus(
    corpus: Mapping[str, Sequence[str]],
    out_dir: str | Path,
    seed: int | None = None,
    desc: Mapping[str, Mapping[str, Any]] | None = None,
) -> list[Path]:
    """Write <domain>.txt (UTF-8, one example per line) and README.txt; returns the paths written.

    The folder is built beside `out_dir` and swapped in whole (dspark_mini.files.folder_swap): interrupted or out of
    disk, the previous folder stays as it was. It replaces only a new or empty folder or a corpus the lab wrote
    (its .dspark-lab-files.json lists every file in it); any other folder is refused, nothing in it touched."""
    from dspark_mini.files import folder_swap, write_atomic

    for domain, lines in corpus.items():
        check_domain_lines(domain, lines)
    out = Path(out_dir)
    with folder_swap(out, "corpus", overwrite=True) as work:
        for domain, lines in corpus.items():
            write_atomic(work / f"{domain}.txt", "".join(lines))
        write_atomic(work / "README.txt", "\n".join(readme_lines(corpus, seed, desc)) + "\n")
    return [out / f"{domain}.txt" for domain in corpus] + [out / "README.txt"]


def check_domain_lines(domain: str, lines: Sequence[str]) -> None:
    """A domain name usable as a file name, and lines that each end with one \\n and hold no other."""
    if not re.fullmatch(r"[A-Za-z0-9_-]+", str(domain)) or str(domain).lower() == "readme":
        raise ValueError(f"domain name {domain!r} cannot be a file name: allowed letters, digits, _ and - (not README)")
    if isinstance(lines, str):
        raise ValueError(f"domain {domain!r} needs a list of lines, got one str")
    bad = next(
        (i for i, s in enumerate(lines) if not isinstance(s, str) or not s.endswith("\n") or "\n" in s[:-1]),
        None,
    )
    if bad is not None:
        raise ValueError(f"{domain} line {bad} = {lines[bad]!r}: each line must end with one \\n and contain no other")


def readme_lines(
    corpus: Mapping[str, Sequence[str]], seed: int | None, desc: Mapping[str, Mapping[str, Any]] | None
) -> list[str]:
    """README.txt of a written corpus: the format, then each domain's size, an example and its predictability."""
    readme = [
        "dspark-lab toy corpus: one example per line, UTF-8, lines end with \\n.",
        "Generated by lab/corpus.py" + (f" with seed {seed}" if seed is not None else "") + "; no downloads.",
        "Encode with dspark_mini.tokenizer.default_tokenizer(); every line round-trips exactly.",
        "",
    ]
    for domain, lines in corpus.items():
        note = DOMAIN_NOTES.get(domain, {}).get("en", "")
        readme.append(f"{domain}.txt: {len(lines)} lines{' - ' + note if note else ''}")
        if lines:
            readme.append(f"  e.g. {lines[0].rstrip()}")
        if desc and domain in desc:
            d = desc[domain]
            h = "n/a" if d.get("entropy_bits") is None else f"{d['entropy_bits']:.3f} bits"
            readme.append(
                f"  {d['tokens']} tokens, {d['tokens_per_line']:.1f} per line, {d['distinct_tokens']} distinct ids; "
                f"H(next | line so far) = {h} (grammar), "
                f"H(next | previous 2 tokens) = {d['entropy_ctx2_bits']:.3f} bits (counts)"
            )
    readme += [
        "",
        "Predictability: H(next | line so far) in bits per token, exact from each domain's grammar; lower = easier",
        "to predict and to draft. It orders math < code < chat, as the paper's acceptance does (Qwen3-4B DSpark,",
        "mean accepted length: math 5.57, code 5.12, chat 3.49). With only the previous 2 tokens (a trigram) math",
        "looks the hardest: the answers depend on operands further back, which a transformer can attend to.",
    ]
    return readme


def read_corpus(out_dir: str | Path, domains: Sequence[str] = DOMAINS) -> dict[str, list[str]]:
    """The {domain: lines} that write_corpus wrote to `out_dir`."""
    out: dict[str, list[str]] = {}
    for d in domains:
        p = Path(out_dir) / f"{d}.txt"
        if not p.is_file():
            raise ValueError(f"no corpus file {str(p)!r}: write it with `dspark-lab data --out {out_dir}`")
        out[d] = p.read_text(encoding="utf-8").splitlines(keepends=True)
    return out


# ---- rendering and CLI -----------------------------------------------------------------------------------------
LABELS = {
    "title": {"vi": "Kho ngữ liệu nhỏ (seed {seed})", "en": "Toy corpus (seed {seed})"},
    "domain": {"vi": "Miền", "en": "Domain"},
    "lines": {"vi": "Dòng", "en": "Lines"},
    "distinct_lines": {"vi": "Dòng khác nhau", "en": "Distinct lines"},
    "tokens": {"vi": "Token", "en": "Tokens"},
    "tokens_per_line": {"vi": "Tok/dòng", "en": "Tok/line"},
    "distinct_tokens": {"vi": "Mã", "en": "Ids"},
    "bits_per_line": {"vi": "Bit/dòng", "en": "Bits/line"},
    "entropy_bits": {"vi": "H|dòng", "en": "H|line"},
    "entropy_ctx2_bits": {"vi": "H|2 tok", "en": "H|2 tok"},
    "example": {"vi": "Ví dụ", "en": "Example"},
    "note": {
        "vi": (
            "H = entropy của token tiếp theo, bit/token; càng thấp càng dễ đoán và càng nhiều token nháp được giữ. "
            "H|dòng = H(tiếp | cả dòng trước đó), tính chính xác từ ngữ pháp của miền; H|2 tok = H(tiếp | 2 token "
            "trước), đếm trên kho: chỉ nhìn 2 token thì không làm được phép tính, nên ở cột đó math trông khó nhất. "
            "Mã = số mã token khác nhau đã dùng."
        ),
        "en": (
            "H = entropy of the next token, bits per token; lower = more predictable, more draft tokens accepted. "
            "H|line = H(next | the line so far), exact from the domain's grammar; H|2 tok = H(next | previous 2 "
            "tokens), counted on the corpus: two tokens of context cannot do the arithmetic, so math looks the "
            "hardest in that column. Ids = distinct token ids used."
        ),
    },
}
LABELS = Texts(LABELS, "corpus label")

_TABLE_KEYS = (
    "lines",
    "tokens",
    "tokens_per_line",
    "distinct_tokens",
    "bits_per_line",
    "entropy_bits",
    "entropy_ctx2_bits",
)


def _fmt(key: str, v: Any) -> str:
    if v is None:
        return "—"
    if key.endswith("bits"):
        return f"{v:.3f}"
    return f"{v:.1f}" if isinstance(v, float) else str(v)


def render_description(
    console: Any,
    desc: Mapping[str, Mapping[str, Any]],
    lang: str = "en",
    corpus: Mapping[str, Sequence[str]] | None = None,
    seed: int | None = None,
) -> None:
    """A rich table of describe()'s numbers (one row per domain); with `corpus`, one example line per domain."""
    from rich import box
    from rich.table import Table
    from rich.text import Text

    title = LABELS("title", lang).format(seed="?" if seed is None else seed)
    t = Table(title=title, box=box.SIMPLE_HEAVY, title_justify="left")
    t.add_column(LABELS("domain", lang))
    for k in _TABLE_KEYS:
        t.add_column(LABELS(k, lang), justify="right")
    for domain, d in desc.items():
        t.add_row(domain, *(_fmt(k, d.get(k)) for k in _TABLE_KEYS))
    console.print(t)
    if corpus:
        for domain in desc:
            if corpus.get(domain):
                line = corpus[domain][0].rstrip("\n")
                console.print(Text(f"{LABELS('example', lang)} · {domain}: ", style="bold").append(line))
    console.print(Text("ℹ " + LABELS("note", lang), style="yellow"))


def add_data_arguments(p: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """The options of `dspark-lab data` (for lab/cli.py to call on its subparser)."""
    p.add_argument(
        "--seed", type=int, default=DEFAULT_SEED, help=f"corpus seed, 0 ≤ seed < 2**63 (default {DEFAULT_SEED})"
    )
    p.add_argument(
        "--lines",
        type=int,
        default=DEFAULT_LINES_PER_DOMAIN,
        help=f"lines per domain, 1..{MAX_LINES_PER_DOMAIN:,} (default {DEFAULT_LINES_PER_DOMAIN}; more adds little: "
        "math and code repeat after ≈ 1,000 and ≈ 580 distinct lines, and describing 100,000 takes ≈ 1 min)",
    )
    p.add_argument("--out", default=None, help="write <domain>.txt and README.txt to this folder")
    p.add_argument("--json", action="store_true", help="print the description as JSON")
    p.add_argument("--lang", default="en", help="vi or en")
    return p


def main_data(args: argparse.Namespace, console: Any = None) -> dict[str, Any]:
    """`dspark-lab data`: build the corpus, describe it, optionally write it; prints a table or JSON.

    Reads args.seed, args.lines, and optionally args.out, args.json, args.lang. Returns
    {"seed", "lines_per_domain", "out", "files", "domains": describe(...)}. Bad arguments raise ValueError naming
    the option (the CLI turns that into exit code 2)."""
    from dspark_mini.files import check_folder
    from dspark_mini.validate import check_int, check_seed

    lang = check_lang(getattr(args, "lang", "en"))
    check_int(args.lines, "--lines", 1, MAX_LINES_PER_DOMAIN, "lines per domain")
    check_seed(args.seed, "--seed")
    out = getattr(args, "out", None)
    if out is not None:  # a folder the lab may replace, before the corpus is built (an empty --out: refused)
        check_folder(out, "corpus", overwrite=True, lang=lang)
        say_symlink(out, "--out", lang)
    corpus = build_corpus(args.seed, args.lines)
    desc = describe(corpus)
    files = [str(p) for p in write_corpus(corpus, out, seed=args.seed, desc=desc)] if out else []
    report = {"seed": args.seed, "lines_per_domain": args.lines, "out": out, "files": files, "domains": desc}
    if getattr(args, "json", False):
        print(json.dumps(report, ensure_ascii=False, indent=1, allow_nan=False))
    else:
        if console is None:
            from rich.console import Console

            console = Console()
        render_description(console, desc, lang, corpus, seed=args.seed)
        for f in files:
            console.print(f"→ {f}")
    return report

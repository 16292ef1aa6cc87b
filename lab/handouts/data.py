"""What the handouts print, as plain data: each column's steps from the walk of the default prompt, and one sampled
DSpark round of the trained lab model for the 6B worksheet.

summaries(walk, lang)   one entry per column of the map: its steps (title, the short text, the equation, the
                        shapes and a fact or two of the real forward) and its check-yourself questions
worksheet(walk)         one round after the prompt at WORKSHEET_TEMPERATURE: anchor, k drafts, p_d, p_t,
                        confidences, the verify draws u (with their counters) and verify's verdicts
shown(x), ratio_of(…)   the numbers as the sheet prints them, and r = min(1, p_t/p_d) of those printed numbers

Every number here is read from the walk (its trace, views and round), the config or the portable generator.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import numpy as np
import torch

from dspark_mini.portable_random import PortableGenerator, accept_ratio
from dspark_mini.sampling import next_token
from dspark_mini.speculative import speculative_round

from ..lesson.steps import COLUMNS, get_step
from ..lesson.view import Walk
from ..lesson.walk import build_views
from ..text import check_lang, lang_table

SHORT = lang_table("deck", "short")  # each step's idea in a few lines (the deck's idea slide)
QUESTIONS = lang_table("handouts", "questions")  # each column's check-yourself questions
MAX_SHAPES = 4  # shapes a step shows on its page
MAX_FACTS = 2  # facts of the real forward a step shows

WORKSHEET_TEMPERATURE = 0.7  # a sampled round: p_d and p_t are real distributions, u decides
SEED_TRIES = 16  # seeds 0, 1, … tried for the worksheet's round
MIN_DECISIONS = 4  # a round whose verify draws at least this many u (else the seed tried with the most)
DIGITS = 4  # significant digits of p_d, p_t and c; decimals of r and u


def shown(x: float, digits: int = DIGITS) -> str:
    """A probability as the sheet prints it: `digits` significant digits, never in exponent form (0.0001094)."""
    return np.format_float_positional(float(x), precision=digits, unique=False, fractional=False, trim="-")


def fixed(x: float, digits: int = DIGITS) -> str:
    """A ratio or a draw as the sheet prints it: `digits` decimals."""
    return f"{float(x):.{digits}f}"


def ratio_of(p_t: str, p_d: str) -> float:
    """r = min(1, p_t/p_d) of the printed numbers (what the class computes by hand), as verify computes it."""
    return accept_ratio(float(p_t), float(p_d))


def token(walk: Walk, i: int) -> str:
    """A token as the pages show it: a leading space as ▁, a line break as ↵."""
    text = walk.tokenizer.token_text(int(i))
    return ("▁" + text[1:] if text.startswith(" ") else text).replace("\n", "↵")


def value_text(x: Any) -> str:
    if isinstance(x, float):
        return f"{x:.4g}"
    if isinstance(x, (list, tuple)):
        return "[" + ", ".join(map(value_text, x)) + "]"
    return str(x)


def fields(walk: Walk) -> dict[str, int]:
    """The numbers the questions name: the prompt's length and the config's sizes."""
    cfg, S = walk.cfg, int(walk.tokens.size(1))
    return {
        "S": S,
        "D": cfg.dim,
        "hc": cfg.hc_mult,
        "W": cfg.window_size,
        "last": S - 1,
        "k": cfg.n_activated_experts,
        "E": cfg.n_routed_experts,
        "shared": cfg.n_shared_experts,
    }


def summaries(walk: Walk, lang: str) -> list[dict[str, Any]]:
    """One handout per column of the map, in `lang`, from the walk's views (rebuilt in `lang`)."""
    lang = check_lang(lang)
    views = build_views(walk, lang).views
    out = []
    for col in COLUMNS:
        steps = []
        for sid in col.step_ids:
            step, view = get_step(sid), views[sid]
            steps.append(
                {
                    "id": sid,
                    "title": step.t("title", lang),
                    "short": SHORT[sid][lang],
                    "equation": step.equation,
                    "shapes": [(name, list(shape)) for name, shape in view.shapes[:MAX_SHAPES]],
                    "facts": [(name, value_text(v)) for name, v in view.facts[:MAX_FACTS]],
                }
            )
        questions = [q.format(**fields(walk)) for q in QUESTIONS[str(col.id)][lang]]
        out.append({"n": col.id, "label": col.t("title", lang), "steps": steps, "questions": questions})
    return out


class DrawLog(PortableGenerator):
    """The portable generator, remembering every draw as (counter, u)."""

    def __init__(self, seed: int) -> None:
        super().__init__(seed)
        self.draws: list[tuple[int, float]] = []

    def random(self) -> float:
        counter = self.counter
        u = super().random()
        self.draws.append((counter, u))
        return u


def sampled_round(walk: Walk, seed: int, temperature: float = WORKSHEET_TEMPERATURE) -> dict[str, Any]:
    """One round right after the prompt (on a copy of its cache): the anchor drawn from the prompt's last logits,
    the whole block drafted and sent, verified at `temperature`; with the u each verified draft was tested with."""
    gen = DrawLog(seed)
    k = walk.cfg.dspark_block_size
    with torch.no_grad():
        cache = copy.deepcopy(walk.prompt_cache)
        anchor = next_token(walk.logits[:, -1], temperature, gen)  # [1]
        rd = speculative_round(walk.model, cache, anchor, k, temperature, gen)[0]
    # verify draws one u per tested draft (up to and with the first rejection), then one token (resample or bonus)
    tested = min(rd.n_accepted + 1, rd.verify_len)
    draws = gen.draws[-1 - tested : -1]
    rows = []
    for i, x in enumerate(rd.draft):
        p_d, p_t = shown(rd.draft_probs[i]), shown(rd.target_probs[i])
        r = ratio_of(p_t, p_d)
        u = draws[i] if i < tested else None
        rows.append(
            {
                "i": i + 1,
                "token": token(walk, x),
                "id": x,
                "p_d": p_d,
                "p_t": p_t,
                "c": shown(rd.confidence[i]),
                "ratio": fixed(r),
                "u": None if u is None else fixed(u[1]),
                "counter": None if u is None else u[0],
                "status": rd.status[i],
                "kept_by_hand": None if u is None else float(fixed(u[1])) < r,
                "kept_exact": None if u is None else u[1] < accept_ratio(rd.target_probs[i], rd.draft_probs[i]),
            }
        )
    survival = np.cumprod(rd.confidence).tolist()
    return {
        "seed": seed,
        "temperature": temperature,
        "position": rd.position,
        "anchor": token(walk, rd.anchor),
        "k": k,
        "sent": rd.verify_len,
        "rows": rows,
        "n_accepted": rd.n_accepted,
        "next": token(walk, rd.next_token),
        "next_kind": rd.next_kind,
        "committed": [token(walk, t) for t in rd.committed],
        "tau": rd.tau,
        "survival": [shown(a) for a in survival],
        "round": dataclasses.asdict(rd),
    }


def by_hand_agrees(sheet: dict[str, Any]) -> bool:
    """Whether the printed numbers give verify's verdicts: u < r of the printed r and u, draft by draft."""
    return all(
        row["u"] is None or row["kept_by_hand"] == row["kept_exact"] == (row["status"] == "accepted")
        for row in sheet["rows"]
    )


def worksheet(walk: Walk) -> dict[str, Any]:
    """The worksheet's round: the first seed of 0 … SEED_TRIES − 1 whose verify tests at least MIN_DECISIONS drafts
    (else the one that tests the most), among rounds whose printed numbers give verify's own verdicts."""
    best = None
    for seed in range(SEED_TRIES):
        sheet = sampled_round(walk, seed)
        if not by_hand_agrees(sheet):
            continue
        tested = sum(row["u"] is not None for row in sheet["rows"])
        if best is None or tested > best[0]:
            best = (tested, sheet)
        if tested >= MIN_DECISIONS:
            break
    if best is None:
        raise ValueError(f"no seed below {SEED_TRIES} gives a round whose printed numbers decide as verify does")
    return best[1]

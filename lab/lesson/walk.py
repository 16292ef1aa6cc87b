"""Run a prompt through the lab model, collect the Trace, and build each step's view as plain data.

Data flows one way: config → model → Trace → `StepView`s → (rich | JSON | plotly | widgets). A view
holds tables of numbers and short generated notes in one language; rendering lives elsewhere.
Every step carries at least one `Check`, and every check compares two different computations of the same
thing (a hash redone with Python integers, a pooled entry rebuilt from the recorded inputs, a second forward
with hooks, …), so each one can fail — tests/test_screens.py tampers with each input to prove it.
"""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

import torch

from dspark_mini import Trace
from dspark_mini.config import ModelConfig
from dspark_mini.sampling import new_generator, next_token
from dspark_mini.speculative import check_verify_len as speculative_check_verify_len
from dspark_mini.speculative import speculative_round
from dspark_mini.validate import check_seed, check_temperature

from ..evaluation.profiling import hooked_forward
from ..runtime.run import open_preset, preset_weights
from ..style import phase
from ..text import DEFAULT_PROMPT, check_lang, check_prompt
from .steps import STEP_IDS, get_step
from .view import StepView, Walk
from .view_6b import view_6b
from .views import view_1a, view_1b, view_2a, view_3a, view_3b, view_3c, view_4a, view_5a, view_6a


def run_walk(
    prompt: str = DEFAULT_PROMPT,
    preset: str = "lab",
    seed: int = 0,
    lang: str = "en",
    steps: tuple[str, ...] | None = None,
    verify_len: int | None = None,
    temperature: float = 0.0,
    weights: str | None = None,
    checkpoint: str | None = None,
    prompt_option: str = "--prompt",
) -> Walk:
    """Tokenize, run one traced forward (and a second for the parity check), one DSpark round, the views.

    weights="trained" loads the shipped lab weights (target + DSpark draft); "untrained" builds the seeded
    random init; None: "trained" for `lab`, "untrained" for another preset (`flash-cpu`: the real widths, its seeded
    init drawn on the device; every lab tokenizer id is a valid id of its 129,280). The seed also
    drives the sampling of the round. The prompt goes through lab.text.check_prompt (NFC, not empty, at most
    prompt_limit tokens); a refusal names `prompt_option` in `lang`."""
    seed = check_seed(seed)
    lang = check_lang(lang)
    wanted = tuple(get_step(s).id for s in steps) if steps else STEP_IDS
    temperature = check_temperature(temperature)

    def checks(cfg: ModelConfig, tok: Any) -> tuple[tuple[str, list[int]], int]:
        return check_prompt(prompt, tok.encode, cfg, prompt_option, lang), check_verify_len(cfg, verify_len)

    model, tok, ((prompt, ids), verify_len) = open_preset(preset, weights, checkpoint, seed, lang=lang, before=checks)
    cfg = model.cfg
    tokens = torch.tensor([ids], dtype=torch.long)
    trace = Trace()
    with torch.no_grad():
        cache = model.new_cache(1)
        with phase("forward"):
            out = model(tokens, cache=cache, trace=trace)
        with phase("parity"):
            again, hooked = hooked_forward(model, tokens)  # same input, same path; hooks catch the tap inputs
    parity = float((out.logits - again.logits).abs().max())
    walk = Walk(
        cfg,
        tok,
        model,
        prompt,
        tokens,
        trace,
        out.logits,
        out.taps,
        parity,
        seed,
        cache,
        weights=preset_weights(preset, weights, checkpoint),  # what was loaded: trained or untrained
        hooked_taps=hooked,
    )
    with phase("round"):
        walk = redraft(walk, verify_len, temperature, views=False)
    with phase("views"):
        return build_views(walk, lang, wanted)


def check_verify_len(cfg: ModelConfig, verify_len: int | None) -> int:
    """ℓ of the walk's round: speculative.check_verify_len against the trained block."""
    return speculative_check_verify_len(verify_len, cfg.dspark_block_size)


def redraft(walk: Walk, verify_len: int | None, temperature: float, views: bool = True) -> Walk:
    """A new DSpark round from the cache the prompt left (the prompt's forward is not run again).

    The anchor is drawn from the prompt's last logits at `temperature` with the walk's seed, then one
    draft → verify → commit round runs on a copy of the cache; only the 6B view is rebuilt.
    """
    verify_len = check_verify_len(walk.cfg, verify_len)
    temperature = check_temperature(temperature)
    gen = new_generator(walk.seed, sampler="portable")  # the draws the browser page makes for the same seed
    draft_trace = Trace(sinkhorn_history=False)
    with torch.no_grad():
        cache = copy.deepcopy(walk.prompt_cache)
        anchor = next_token(walk.logits[:, -1], temperature, gen)  # [1]
        rnd = speculative_round(walk.model, cache, anchor, verify_len, temperature, gen, trace=draft_trace)[0]
    new = dataclasses.replace(
        walk, round=rnd, verify_len=verify_len, temperature=temperature, draft_trace=draft_trace, views=dict(walk.views)
    )
    if views and "6B" in walk.views:
        new.views["6B"] = view_6b(new, StepView(get_step("6B"), walk.views["6B"].lang))
    return new


def build_views(walk: Walk, lang: str, steps: tuple[str, ...] = STEP_IDS) -> Walk:
    """(Re)build the views of `steps` in `lang` from what the walk already computed."""
    lang = check_lang(lang)
    builders = {
        "1A": view_1a,
        "1B": view_1b,
        "2A": view_2a,
        "3A": view_3a,
        "3B": view_3b,
        "3C": view_3c,
        "4A": view_4a,
        "6A": view_6a,
        "5A": view_5a,
        "6B": view_6b,
    }
    views = {sid: builders[sid](walk, StepView(get_step(sid), lang)) for sid in STEP_IDS if sid in steps}
    return dataclasses.replace(walk, views=views)

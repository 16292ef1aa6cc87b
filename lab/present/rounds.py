"""Step 6B round by round, like a debugger: what the scheduler sent, what verify kept, what each cache holds after.

`scheduled_rounds` decodes one prompt with the trained lab model the way the server does (lab.serving): the draft
proposes its whole block, the `dspark` scheduler (Algorithm 1, on the shipped SPS(B) table) picks the verify length
ℓ for a simulated load of R copies of this request, one target forward verifies [anchor, x_1..x_ℓ], and the kept
prefix is committed. After every commit it records what the caches hold, by position (the values are the model's
dequantized K/V rows; the positions say which tokens they belong to):

  window ring     every backbone layer's sliding window: W slots, slot = position mod W (one shared `pos` tensor)
  compressor      per KV source of ratio r: latents written (one per r positions) and the open group's carry,
                  the last (length mod r) positions, waiting for the rest of their group
  Engram history  the compressed ids of the last (max_ngram − 1) committed tokens (the n-gram context of the next)
  draft ring      the DSpark draft layers' own window ring, written by the same commit at the same positions

A rejected draft row never reaches any of them: that is the rollback (dspark_mini/kv_cache.py).
"""

from __future__ import annotations

from typing import Any

import torch

from dspark_mini import Transformer
from dspark_mini.kv_cache import KVCache
from dspark_mini.sampling import new_generator
from dspark_mini.speculative import draft_requests, prefill, verify_ragged
from dspark_mini.validate import check_int, check_seed, check_temperature

from ..lesson.view_6b import MAX_LOAD, check_load, load_plan, survival_of

MAX_ROUNDS = 40  # the debugger steps through at most this many rounds


def cache_state(model: Transformer, cache: KVCache, tokens: list[int]) -> dict[str, Any]:
    """What `cache` holds after a commit, by position; `tokens` are the committed ids (positions 0..length − 1)."""
    cfg = model.cfg
    length = cache.length
    if len(tokens) != length:
        raise ValueError(f"{len(tokens)} committed tokens for a cache of length {length}: allowed equal lengths")
    window = cache.windows[0].pos.tolist()  # [W] position held by each slot, −1 = empty (all backbone rings)
    draft = cache.windows[cfg.n_layers].pos.tolist() if cfg.n_mtp_layers else []  # [W] the draft rings' slots
    sources = []
    for layer, store in cache.sources.items():
        carry = 0 if store.carry_kv is None else store.carry_kv.size(1)  # [B, carry, Dh]
        sources.append(
            {
                "layer": layer,
                "ratio": store.ratio,
                "latents": store.count,  # one per `ratio` positions: positions 0 .. latents·ratio − 1 are pooled
                "carry": list(range(length - carry, length)),  # the open group's positions
            }
        )
    history = cache.engram_history[0].tolist() if cache.engram_history is not None else []  # [max_ngram − 1]
    n_hist = len(history)
    return {
        "length": length,
        "window": window,
        "draft_ring": draft,
        "sources": sources,
        "engram_history": history,
        "engram_positions": list(range(length - n_hist, length)),  # < 0: the pad id (no token there yet)
    }


@torch.inference_mode()
def scheduled_rounds(
    model: Transformer,
    ids: list[int],
    rounds: int = 12,
    requests: int = 8,
    temperature: float = 0.0,
    seed: int = 0,
) -> dict[str, Any]:
    """Decode `rounds` speculative rounds after the prompt `ids`, ℓ picked by the `dspark` scheduler at load R =
    `requests`; record each round's drafts, confidences, survival, ℓ, verdicts and the cache states after it."""
    rounds = check_int(rounds, "rounds", 1, MAX_ROUNDS)
    requests = check_load(requests)
    temperature = check_temperature(temperature)
    seed = check_seed(seed)
    K = model.cfg.dspark_block_size
    room = model.cfg.max_seq_len - rounds * (K + 1) - 1
    if not ids or len(ids) > room:
        raise ValueError(f"prompt has {len(ids)} tokens: allowed 1..{room} (max_seq_len minus {rounds} rounds)")
    gen = new_generator(seed, sampler="portable")  # the same draws as `generate` and the walk for this seed
    cache, anchor = prefill(model, torch.tensor([ids]), temperature, gen)
    anchor = int(anchor[0])
    committed = list(ids)  # the tokens the caches hold
    states = [cache_state(model, cache, committed)]  # after the prefill
    out = []
    for _ in range(rounds):
        [d] = draft_requests(model, [cache], [anchor], temperature, gen)
        confidence = d.confidence[0].tolist()  # [K]
        plan = load_plan(confidence, requests)
        [r] = verify_ragged(model, [cache], [anchor], [d], [plan.verify_len], temperature, gen)
        committed += [anchor, *r.draft[: r.n_accepted]]  # anchor + kept drafts: the rows the commit stored
        draft_probs, target_probs = r.draft_probs, r.target_probs
        if temperature == 0:  # what verify compared: one-hot rows (p_d = 1; p_t = 1 where the target's argmax agrees)
            draft_probs = [1.0] * len(r.draft)
            target_probs = [float(x == a) for x, a in zip(r.draft[: plan.verify_len], r.target_argmax, strict=False)]
        out.append(
            {
                "position": r.position,
                "anchor": r.anchor,
                "draft": r.draft,
                "draft_probs": draft_probs,  # p_d(x_i) at the run's T (T = 0: one-hot, 1)
                "target_probs": target_probs,  # p_t(x_i) of the ℓ verified drafts, at the run's T
                "confidence": confidence,
                "survival": survival_of(confidence),
                "verify_len": plan.verify_len,
                "batch_tokens": plan.batch_tokens,
                "status": r.status,
                "n_accepted": r.n_accepted,
                "next_token": r.next_token,
                "next_kind": r.next_kind,
                "committed": r.committed,  # kept drafts + the target's own token (the next anchor)
            }
        )
        states.append(cache_state(model, cache, committed))
        anchor = r.next_token
    return {
        "prompt_len": len(ids),
        "tokens": committed + [anchor],  # the text so far: committed tokens, then the next anchor
        "requests": requests,
        "max_requests": MAX_LOAD,
        "temperature": temperature,
        "seed": seed,
        "k": K,
        "window_size": model.cfg.window_size,
        "max_ngram": model.cfg.engram_max_ngram_size,
        "rounds": out,
        "states": states,  # states[0] after the prefill, states[i + 1] after round i
    }

"""The views of steps 1A … 5A: each reads the walk's trace and returns its StepView, with at least one check that
compares two different computations of the same thing (a hash redone with Python integers, a pooled entry rebuilt
from the recorded inputs, every pick against the scores, bytes from the dims, …).
"""

from __future__ import annotations

from typing import Any

import torch

from dspark_mini import get_config
from dspark_mini.config import ModelConfig
from dspark_mini.kv_cache import kv_bytes
from dspark_mini.quant import fp4_qdq
from dspark_mini.schedule import LayerRole, layer_roles

from ..text import UI
from .notes import NOTES, layer_label
from .view import (
    Check,
    StepView,
    ViewTable,
    Walk,
    prompt_words,
    r,
    rel_err,
    shape,
    shown,
    tok_text,
    tokenization_note,
)


# ---- the ten views -----------------------------------------------------------------------------------
def view_1a(w: Walk, v: StepView) -> StepView:
    tr, lang = w.trace, v.lang
    emb, streams, pre = tr.get("1A", "embedding"), tr.get("1A", "streams"), tr.get("1A", "pre_mix")
    comp = tr.get("1B", "compressed_ids")
    v.shapes += [
        ("tokens", shape(w.tokens)),
        ("embedding", shape(emb)),
        ("streams", shape(streams)),
        ("pre_mix", shape(pre)),
    ]
    rows = [[p, int(t), tok_text(w, t), int(c)] for p, (t, c) in enumerate(zip(w.tokens[0], comp[0], strict=True))]
    v.tables.append(
        ViewTable(
            UI("token", lang),
            [UI("position", lang), UI("token_id", lang), UI("token", lang), NOTES("engram_id", lang)],
            rows,
        )
    )
    v.tables.append(tokenization_table(w, lang))
    v.notes.append(tokenization_note(prompt_words(w.tokenizer, w.prompt), lang))
    spread = float((streams - streams[:, :, :1]).abs().max())
    v.checks.append(Check(NOTES("copies_equal", lang), spread, 0.0))
    v.facts += [
        (NOTES("premix", lang), [r(x) for x in pre[0, 0].tolist()]),
        (NOTES("emb_norm", lang), r(emb[0].norm(dim=-1).mean())),
    ]
    return v


def tokenization_table(w: Walk, lang: str) -> ViewTable:
    """Word by word, what the prompt became: its tokens (ids) and whether the word was one token or split."""
    rows = []
    for word in prompt_words(w.tokenizer, w.prompt):
        n = len(word.ids)
        how = "split" if word.split else ("whole_word" if n == 1 else "word_marks")
        pieces = " · ".join(repr(p)[1:-1] for p in word.pieces)
        rows.append([shown(word.text), pieces, " · ".join(map(str, word.ids)), NOTES(how, lang, n=n)])
    columns = [NOTES("word", lang), NOTES("pieces", lang), UI("token_id", lang), NOTES("how_split", lang)]
    return ViewTable(NOTES("tokenized_title", lang), columns, rows)


def view_1b(w: Walk, v: StepView) -> StepView:
    tr, lang, cfg = w.trace, v.lang, w.cfg
    from dspark_mini.engram import engram_num_embeddings

    sizes = engram_num_embeddings(cfg)
    real = engram_num_embeddings(get_config("flash"))
    v.facts += [
        (NOTES("table_rows", lang) + f" ({UI('toy', lang)})", list(sizes)),
        (NOTES("table_rows", lang) + f" ({UI('real', lang)})", list(real)),
    ]
    cols_per_order = cfg.engram_n_heads
    compressed, history = tr.get("1B", "compressed_ids")[0].tolist(), tr.get("1B", "history")[0].tolist()
    wrong_rows, delta_err = 0, 0.0
    for layer in tr.layers("1B"):
        rows_ids, gate = tr.get("1B", "row_ids", layer), tr.get("1B", "gate", layer)
        delta, value = tr.get("1B", "delta_norm", layer), tr.get("1B", "value", layer)
        v.shapes += [
            (layer_label("row_ids", layer, lang), shape(rows_ids)),
            (layer_label("gate", layer, lang), shape(gate)),
        ]
        heads = [f"n={n} h0" for n in cfg.engram_orders]
        rows = []
        for p in range(w.tokens.size(1)):
            ids = [int(rows_ids[0, p, (n - 2) * cols_per_order]) for n in cfg.engram_orders]
            rows.append(
                [p, tok_text(w, w.tokens[0, p])] + ids + [[r(g, 3) for g in gate[0, p].tolist()], r(delta[0, p], 3)]
            )
        v.tables.append(
            ViewTable(
                f"Engram {UI('layer', lang)} {layer}",
                [UI("position", lang), UI("token", lang)] + heads + [UI("gate", lang) + " ×4", "‖g·value‖"],
                rows,
            )
        )
        top = torch.argsort(delta[0], descending=True)[:3].tolist()
        v.notes.append(
            f"{NOTES('changed_most', lang)} — {UI('layer', lang)} {layer}: "
            + ", ".join(f"{tok_text(w, w.tokens[0, p])!r}@{p}" for p in top)
        )
        engram = w.model.layers[layer].engram
        by_hand = engram_rows_by_hand(compressed, history, engram.multipliers, engram.primes, cols_per_order)
        wrong_rows += sum(
            a != b for ra, rb in zip(by_hand, rows_ids[0].tolist(), strict=True) for a, b in zip(ra, rb, strict=True)
        )
        from_gates = gate[0].square().sum(-1).sqrt() * value[0].norm(dim=-1)  # √(Σ_c g_c²)·‖value‖  [S]
        delta_err = max(delta_err, float((from_gates - delta[0]).abs().max()))
    v.checks += [
        Check(NOTES("check_hash", lang), float(wrong_rows), 0.0),
        Check(NOTES("check_delta", lang), delta_err, 1e-9),
    ]
    return v


def engram_rows_by_hand(
    compressed: list[int], history: list[int], mult: tuple[int, ...], primes: tuple[int, ...], n_heads: int
) -> list[list[int]]:
    """The table rows of every (order, head) at every position, one Python integer at a time:
    r₁ = c[t]·m[0], r_n = r_{n−1} XOR c[t−n+1]·m[n−1] (int64 wrap-around), row = r_n mod p + offset."""

    def wrap(x: int) -> int:  # what an int64 multiply leaves
        return (x + 2**63) % 2**64 - 2**63

    ext, k = history + compressed, len(history)  # history: the ids before the prompt, oldest first
    offsets = [sum(primes[:j]) for j in range(len(primes))]
    out = []
    for t in range(len(compressed)):
        r_n, row = wrap(ext[k + t] * mult[0]), []
        for n in range(2, k + 2):
            r_n ^= wrap(ext[k + t - (n - 1)] * mult[n - 1])
            for h in range(n_heads):
                j = (n - 2) * n_heads + h
                row.append(r_n % primes[j] + offsets[j])
        out.append(row)
    return out


def sinkhorn_errors(history: torch.Tensor) -> list[tuple[int, float, float]]:
    """history [iters, ..., hc, hc] → (iteration, max |row sum − 1|, max |col sum − 1|)."""
    out = []
    for i, m in enumerate(history, start=1):
        out.append((i, float((m.sum(-1) - 1).abs().max()), float((m.sum(-2) - 1).abs().max())))
    return out


def view_2a(w: Walk, v: StepView, layer: int = 0) -> StepView:
    tr, lang = w.trace, v.lang
    hist = tr.get("2A", "attn_comb_history", layer)[:, 0, -1]  # [iters, hc, hc] last token
    comb = tr.get("2A", "attn_comb", layer)
    v.shapes += [
        ("attn_pre / post", shape(tr.get("2A", "attn_pre", layer))),
        ("attn_comb", shape(comb)),
        (NOTES("comb_history", lang), shape(tr.get("2A", "attn_comb_history", layer))),
    ]
    pre, post = tr.get("2A", "attn_pre", layer)[0, -1], tr.get("2A", "attn_post", layer)[0, -1]
    v.tables.append(
        ViewTable(
            NOTES("prepost", lang, layer=layer),
            [UI("lane", lang), "pre", "post"],
            [[j, r(pre[j]), r(post[j])] for j in range(pre.numel())],
        )
    )
    c = comb[0, -1]
    v.tables.append(
        ViewTable(
            NOTES("comb", lang),
            ["i \\ j"] + [str(j) for j in range(c.size(1))],
            [[i] + [r(x) for x in c[i].tolist()] for i in range(c.size(0))],
        )
    )
    errs = sinkhorn_errors(hist)
    keep = {1, 2, 3, 5, 10, len(errs)}
    v.tables.append(
        ViewTable(
            NOTES("sinkhorn", lang, layer=layer),
            [UI("iteration", lang), "max |" + UI("row_sum", lang) + " − 1|", "max |" + UI("col_sum", lang) + " − 1|"],
            [[i, f"{a:.2e}", f"{b:.2e}"] for i, a, b in errs if i in keep],
        )
    )
    all_combs = torch.stack(
        [tr.get("2A", k, l) for l in tr.layers("2A") if l < w.cfg.n_layers for k in ("attn_comb", "ffn_comb")]
    )  # the prompt's forward (draft layers: 3 rows)
    n = w.cfg.hc_sinkhorn_iters
    v.checks.append(Check(NOTES("doubly", lang, n=n), float((all_combs.sum(-2) - 1).abs().max()), 1e-3))
    v.facts.append((NOTES("rows_left", lang, n=n), f"{float((all_combs.sum(-1) - 1).abs().max()):.2e}"))
    return v


def role_name(role: LayerRole, lang: str) -> str:
    names = {"SWA-only": "role_swa_only", "Full": "role_full", "Reuse": "role_reuse", "Reindex": "role_reindex"}
    name = UI(names[role.mode], lang) if role.mode in names else NOTES("draft_swa", lang)
    if role.is_candidate_source:
        name += " + " + UI("role_candidate_source", lang)
    return name


def role_rows(cfg: ModelConfig, lang: str, grouped: bool) -> list[list[Any]]:
    """The role table; `grouped` merges runs of consecutive layers whose row is the same (for 43 layers)."""
    rows: list[list[Any]] = []
    prev = None
    for role in layer_roles(cfg):
        part = {"encoder": UI("encoder", lang), "decoder": UI("decoder", lang)}.get(role.part, "DSpark")
        key = [
            part,
            role.ratio,
            role_name(role, lang),
            "—" if role.reads_kv_of is None else role.reads_kv_of,
            "—" if role.reads_topk_of is None else role.reads_topk_of,
            "Engram" if role.has_engram else "",
            NOTES("tap", lang) if role.is_tap else "",
        ]
        if grouped and key == prev:
            rows[-1][0] = f"{rows[-1][0].split('–')[0]}–{role.layer}"
        else:
            rows.append([str(role.layer)] + key)
        prev = key
    return rows


def view_3a(w: Walk, v: StepView) -> StepView:
    lang, cfg, real = v.lang, w.cfg, get_config("flash")
    cols = [
        UI("layer", lang),
        NOTES("part", lang),
        UI("ratio", lang),
        UI("role", lang),
        UI("reads_kv_of", lang),
        UI("reads_topk_of", lang),
        "Engram",
        "DSpark",
    ]
    v.tables.append(ViewTable(NOTES("roles_toy", lang), cols, role_rows(cfg, lang, grouped=False)))
    v.tables.append(ViewTable(NOTES("roles_real", lang), cols, role_rows(real, lang, grouped=True)))
    split = {
        c.name: "{} + {}".format(*(sum(x.part == p for x in layer_roles(c)) for p in ("encoder", "decoder")))
        for c in (cfg, real)
    }
    v.facts += [
        (NOTES("enc_dec", lang) + " (lab)", split[cfg.name]),
        (NOTES("enc_dec", lang) + " (flash)", split[real.name]),
    ]
    roles = layer_roles(cfg)  # the table above, against what the prompt's forward did
    ran = {"kv": set(w.trace.layers("3B")), "index": set(w.trace.layers("3C"))}
    table = {"kv": {x.layer for x in roles if x.is_kv_source}, "index": {x.layer for x in roles if x.is_index_source}}
    differ = sum(len(ran[k] ^ table[k]) for k in ran)
    wrong_part = sum(split_by_ratios(c)[x.layer] != x.part for c in (cfg, real) for x in layer_roles(c))
    v.checks += [
        Check(NOTES("check_sources", lang), float(differ), 0.0),
        Check(NOTES("check_split", lang, lab=split[cfg.name], real=split[real.name]), float(wrong_part), 0.0),
    ]
    return v


def split_by_ratios(cfg: ModelConfig) -> list[str]:
    """Each layer's part read off compress_ratios alone: the decoder starts at the first ratio-1 layer (the
    single source that projects every token), the draft layers follow the backbone."""
    first = cfg.compress_ratios.index(1)
    n = len(cfg.compress_ratios)
    return ["draft" if i >= cfg.n_layers else "decoder" if i >= first else "encoder" for i in range(n)]


def view_3b(w: Walk, v: StepView) -> StepView:
    tr, lang, cfg = w.trace, v.lang, w.cfg
    S = w.tokens.size(1)
    roles = layer_roles(cfg)
    rows = []
    for layer in tr.layers("3B"):
        ratio = cfg.compress_ratios[layer]
        n = int(tr.get("3B", "n_compressed", layer))
        readers = [x.layer for x in roles if x.reads_kv_of == layer]
        gate = "softmax" if ratio > 1 else "—"
        rows.append([layer, ratio, S, n, S % ratio, gate, ", ".join(map(str, readers))])
        v.shapes.append((layer_label("latent", layer, lang), shape(tr.get("3B", "latent_pre_rope", layer))))
    v.tables.append(
        ViewTable(
            NOTES("compressed", lang),
            [
                UI("layer", lang),
                UI("ratio", lang),
                NOTES("raw_pos", lang),
                NOTES("n_comp", lang),
                NOTES("carry", lang),
                UI("gate", lang),
                NOTES("read_by", lang),
            ],
            rows,
        )
    )
    first = next((l for l in tr.layers("3B") if cfg.compress_ratios[l] > 1), None)
    if first is not None:
        g = tr.get("3B", "gate", first)[0]  # [n, 2, Dh]
        gpos = tr.get("3B", "group_positions", first)
        rows = [
            [j, f"{int(gpos[j])},{int(gpos[j]) + 1}", r(g[j, 0].mean()), r(g[j, 1].mean())]
            for j in range(min(6, g.size(0)))
        ]
        v.tables.append(
            ViewTable(NOTES("gates", lang, layer=first), ["j", UI("position", lang), "w(2j)", "w(2j+1)"], rows)
        )
    err = max(pooling_error(w, layer) for layer in tr.layers("3B"))
    v.checks.append(Check(NOTES("check_pool", lang), err, 1e-9))
    return v


@torch.no_grad()
def pooling_error(w: Walk, layer: int) -> float:
    """max |Δ| between the recorded compressed entries (and gate weights) of one source and the same entries
    recomputed group by group from the recorded attention input x: k_t = wkv·x_t, s_t = wgate·x_t,
    w = e^s / Σ_pair e^s per channel, c_j = RMSNorm(Σ_pair w ⊙ k) — ratio 1: c_t = RMSNorm(wkv·x_t)."""
    tr, comp = w.trace, w.model.layers[layer].attn.compressor
    x = tr.get("4A", "attn_input", layer)[0]  # [S, D] what the compressor read
    latent = tr.get("3B", "latent_pre_rope", layer)[0]  # [n, Dh]
    ratio, err = comp.ratio, 0.0
    for j in range(latent.size(0)):
        xs = x[j * ratio : (j + 1) * ratio].to(comp.wkv.weight.dtype)  # the group's tokens
        k = xs @ comp.wkv.weight.T  # [ratio, Dh]
        if ratio > 1:
            e = (xs @ comp.wgate.weight.T).exp()
            gate = e / e.sum(0)  # softmax over the pair, per channel
            err = max(err, float((gate - tr.get("3B", "gate", layer)[0, j]).abs().max()))
            k = (gate * k).sum(0)
        c = k.reshape(-1).double()
        c = c / (c.square().mean() + comp.norm.eps).sqrt() * comp.norm.weight.double()
        err = max(err, float((c - latent[j].double()).abs().max()))
    return err


def view_3c(w: Walk, v: StepView) -> StepView:
    tr, lang, cfg = w.trace, v.lang, w.cfg
    S = w.tokens.size(1)
    rows = []
    for layer in tr.layers("3C"):
        scores, idxs = tr.get("3C", "scores", layer), tr.get("3C", "topk_idxs", layer)
        visible = int(tr.get("3C", "visible", layer)[-1])
        picks = [int(i) for i in idxs[0, -1].tolist() if i >= 0]
        cands = ""
        if "candidates" in tr.data["3C"][layer]:
            c = tr.get("3C", "candidates", layer)[0, -1]
            cands = NOTES("pool_pub", lang, n=int(c.sum()))
        elif "candidates_used" in tr.data["3C"][layer]:
            c = tr.get("3C", "candidates_used", layer)[0, -1]
            cands = NOTES("pool_mask", lang, n=int(c.sum()))
        role = next(x for x in layer_roles(cfg) if x.layer == layer)
        rows.append([layer, role_name(role, lang), visible, len(picks), str(picks), cands])
        v.shapes.append((layer_label(NOTES("index_scores", lang), layer, lang), shape(scores)))
    v.tables.append(
        ViewTable(
            NOTES("picks", lang),
            [
                UI("layer", lang),
                UI("role", lang),
                NOTES("visible", lang),
                "top-k",
                UI("compressed_position", lang),
                NOTES("candidates", lang),
            ],
            rows,
        )
    )
    lo = max(0, S - cfg.window_size)
    v.facts += [
        (NOTES("window_pos", lang), f"{lo}..{S - 1} ({S - lo} / {cfg.window_size})"),
        (NOTES("topk_pool", lang), f"{cfg.index_topk} / {cfg.candidate_topk_blocks}×{cfg.candidate_block_size}"),
    ]
    bad = sum(bad_picks(w, layer) for layer in tr.layers("3C"))
    v.checks.append(Check(NOTES("check_picks", lang), float(bad), 0.0))
    return v


def bad_picks(w: Walk, layer: int) -> int:
    """Queries of one index layer whose picks break a rule: every pick is a compressed entry whose tokens are
    all at or before the query (entry t holds tokens t·r … t·r + r − 1) and inside the candidate pool if the
    layer uses one; there are min(index_topk, allowed) distinct picks; no allowed entry left out scores higher."""
    tr, cfg = w.trace, w.cfg
    ratio = cfg.compress_ratios[layer]
    scores, idxs = tr.get("3C", "scores", layer)[0], tr.get("3C", "topk_idxs", layer)[0]  # [S, T], [S, k]
    pool = tr.data["3C"][layer].get("candidates_used")
    bad = 0
    for s, p in enumerate(tr.get("1A", "positions").tolist()):
        allowed = {
            t for t in range(scores.size(1)) if t * ratio + ratio - 1 <= p and (pool is None or bool(pool[0, s, t]))
        }
        picks = [int(i) for i in idxs[s] if i >= 0]
        left = sorted(allowed - set(picks))
        ok = set(picks) <= allowed and len(set(picks)) == len(picks) == min(cfg.index_topk, len(allowed))
        if ok and picks and left:
            ok = float(scores[s, picks].min()) >= float(scores[s, left].max())
        bad += not ok
    return bad


def view_4a(w: Walk, v: StepView, layer: int | None = None) -> StepView:
    tr, lang, cfg = w.trace, v.lang, w.cfg
    layer = cfg.candidate_source_layer if layer is None else layer
    probs = tr.get("4A", "probs", layer)
    v.shapes += [
        ("q", (1, w.tokens.size(1), cfg.n_heads, cfg.head_dim)),
        (NOTES("kv_latent", lang), (1, w.tokens.size(1), cfg.head_dim)),
        (layer_label("probs", layer, lang), shape(probs)),
    ]
    ws, cs, ss = (tr.get("4A", k, layer)[0, -1] for k in ("window_share", "compressed_share", "sink_share"))
    rows = [[h, r(ws[h]), r(cs[h]), r(ss[h])] for h in range(cfg.n_heads)]
    v.tables.append(
        ViewTable(
            NOTES("attn_share", lang, layer=layer),
            [NOTES(k, lang) for k in ("head", "window", "compressed_col", "sink")],
            rows,
        )
    )
    shares = torch.stack([tr.get("4A", "sink_share", l)[0].mean() for l in tr.layers("4A")])
    v.facts += [
        (NOTES("sink_by_layer", lang), [r(x, 3) for x in shares.tolist()]),
        (
            NOTES(
                "olora",
                lang,
                g=cfg.o_groups,
                h=cfg.n_heads // cfg.o_groups,
                d=cfg.n_heads // cfg.o_groups * cfg.head_dim,
                r=cfg.o_lora_rank,
            ),
            NOTES("blockdiag", lang),
        ),
    ]
    total = (ws + cs + ss - 1).abs().max()
    v.checks.append(Check(NOTES("sums_to_one", lang), float(total), 1e-9))
    return v


def view_6a(w: Walk, v: StepView) -> StepView:
    tr, lang, cfg = w.trace, v.lang, w.cfg
    toy, real = kv_bytes(cfg), kv_bytes(get_config("flash"))
    e, t, q = NOTES("per_entry", lang), NOTES("per_token", lang), NOTES("per_seq", lang)
    rows = [
        [f"{UI('cache_window', lang)} {e}", toy["window_entry"], real["window_entry"]],
        [f"{UI('cache_compressed', lang)} {e}", toy["compressed_entry"], real["compressed_entry"]],
        [f"{UI('cache_index', lang)} {e}", toy["index_entry"], real["index_entry"]],
        [
            f"{UI('cache_compressed', lang)} {t}",
            r(toy["compressed_kv_per_token"], 2),
            r(real["compressed_kv_per_token"], 2),
        ],
        [f"{UI('cache_index', lang)} {t}", r(toy["index_k_per_token"], 2), r(real["index_k_per_token"], 2)],
        [NOTES("global", lang), r(toy["global_per_token"], 2), r(real["global_per_token"], 2)],
        [f"{UI('cache_window', lang)} {q}", toy["window_per_sequence"], real["window_per_sequence"]],
    ]
    v.tables.append(ViewTable(NOTES("bytes", lang), [UI("cache_kind", lang), UI("toy", lang), UI("real", lang)], rows))
    errs = []
    for l in tr.layers("6A"):
        d = tr.data["6A"][l]
        errs.append(
            (f"{UI('cache_window', lang)} ({UI('layer', lang)} {l})", rel_err(d["window_kv"], d["window_kv_raw"]))
        )
        if "compressed_kv" in d and d["compressed_kv"].numel():
            errs.append(
                (
                    f"{UI('cache_compressed', lang)} ({UI('layer', lang)} {l})",
                    rel_err(d["compressed_kv"], d["compressed_raw"]),
                )
            )
    v.tables.append(
        ViewTable(
            NOTES("qdq", lang),
            [UI("cache_kind", lang), UI("qdq_error", lang)],
            [[k, f"{e:.3%}"] for i, (k, e) in enumerate(errs) if i == 0 or UI("cache_compressed", lang) in k],
        )
    )
    v.facts.append((NOTES("kv_quant", lang), NOTES("on" if cfg.kv_quant else "off", lang)))
    reported = [[row[k] for k in KV_ROWS] for row in (toy, real)]
    by_hand = [kv_bytes_by_hand(c) for c in (cfg, get_config("flash"))]
    diff = max(abs(a - b) for ra, rb in zip(reported, by_hand, strict=True) for a, b in zip(ra, rb, strict=True))
    worst = 0.0
    for l in tr.layers("6A"):
        d = tr.data["6A"][l]
        worst = max(worst, qdq_error_ratio(d["window_kv_raw"], d["window_kv"], 32, "fp8"))
        if "compressed_kv" in d and d["compressed_kv"].numel():
            worst = max(worst, qdq_error_ratio(d["compressed_raw"], d["compressed_kv"], 16, "fp4"))
    v.checks += [Check(NOTES("check_bytes", lang), diff, 0.0), Check(NOTES("check_qdq", lang), worst, 1.0)]
    return v


KV_ROWS = (  # the rows of the bytes table, in order
    "window_entry",
    "compressed_entry",
    "index_entry",
    "compressed_kv_per_token",
    "index_k_per_token",
    "global_per_token",
    "window_per_sequence",
)


def kv_bytes_by_hand(cfg: ModelConfig) -> list[float]:
    """The bytes table recomputed from the dims: an FP8 value is 1 B plus a 1 B scale per 32 values, an FP4 value
    ½ B plus a 1 B scale per 16 (compressed KV) or 32 (index keys); a ratio-r source stores one entry per r tokens;
    every layer (draft layers too) keeps a window ring."""
    dh, di = cfg.head_dim, cfg.index_head_dim
    window, kv, idx = dh * (1 + 1 / 32), dh * (1 / 2 + 1 / 16), di * (1 / 2 + 1 / 32)
    per_r = sum(1 / cfg.compress_ratios[s] for s in cfg.kv_source_layers)  # entries per token, all sources
    rings = cfg.n_layers + cfg.n_mtp_layers
    return [window, kv, idx, kv * per_r, idx * per_r, (kv + idx) * per_r, rings * cfg.window_size * window]


def qdq_error_ratio(raw: torch.Tensor, stored: torch.Tensor, block: int, fmt: str) -> float:
    """max |stored − raw| ÷ the rounding bound of the format, block by block (≤ 1 for a correct QDQ).
    fp8 (E4M3, 3 mantissa bits, power-of-two scale s < 2·amax/448): |err| ≤ |x|/16 + s/1024 (subnormal step 2⁻⁹·s).
    fp4 (E2M1, 1 mantissa bit, E4M3 scale s = amax/6 ± δ, δ = max(amax/96, 2⁻¹⁰)): |err| ≤ |x|/4 + s/4 + 6δ
    (values under s round to a step of s/2; values over 6s are clamped to 6s, at most 6δ away)."""
    x = raw.double().reshape(-1, block)
    err = (stored.double().reshape(-1, block) - x).abs()
    amax = x.abs().amax(-1, keepdim=True)
    if fmt == "fp8":
        bound = x.abs() / 16 + 2 * amax.clamp_min(1e-4) / 448 / 1024
    else:
        s = amax.clamp_min(6 * 2**-9) / 6
        d = torch.maximum(s / 16, torch.full_like(s, 2**-10))
        bound = x.abs() / 4 + (s + d) / 4 + 6 * d
    return float((err / (bound * (1 + 1e-9))).max())


def view_5a(w: Walk, v: StepView, layer: int = 0) -> StepView:
    tr, lang, cfg = w.trace, v.lang, w.cfg
    scores, idx, wts = (tr.get("5A", k, layer) for k in ("scores", "indices", "weights"))
    load = tr.get("5A", "load", layer)
    v.shapes += [(NOTES("router_scores", lang), shape(scores)), (NOTES("chosen_experts", lang), shape(idx))]
    s = scores[0, -1]
    bias = w.model.layers[layer].ffn.gate.bias.detach()
    order = torch.argsort(s + bias, descending=True).tolist()
    chosen = set(idx[0, -1].tolist())
    rows = [
        [
            e,
            r(s[e]),
            r(bias[e]),
            r(s[e] + bias[e]),
            "✓" if e in chosen else "",
            r(wts[0, -1][idx[0, -1].tolist().index(e)]) if e in chosen else "",
        ]
        for e in order
    ]
    v.tables.append(
        ViewTable(
            NOTES("router", lang, layer=layer),
            [
                UI("expert", lang),
                "√softplus",
                NOTES("bias", lang),
                NOTES("score_bias", lang),
                NOTES("chosen", lang),
                NOTES("weight", lang),
            ],
            rows,
        )
    )
    v.tables.append(
        ViewTable(
            NOTES("load", lang, layer=layer),
            [UI("expert", lang), UI("load", lang)],
            [[e, int(load[e])] for e in range(load.numel())],
        )
    )
    unbiased = scores[0].topk(idx.size(-1), dim=-1).indices.sort(-1).values
    changed = int((unbiased != idx[0].sort(-1).values).any(-1).sum())
    # the first expert this process holds (under torchrun each rank holds a block of experts; the others are None)
    ex = next(e for e in w.model.layers[layer].ffn.experts if e is not None).w1.weight.detach()
    v.facts += [
        (NOTES("bias_changed", lang), f"{changed} / {idx.size(1)}"),
        (NOTES("fp4_err", lang), f"{rel_err(fp4_qdq(ex, 32, 'e8m0'), ex):.2%}"),
        (NOTES("sum_w", lang), r(wts[0, -1].sum())),
        (NOTES("exp_topk", lang), f"{cfg.n_routed_experts}/{cfg.n_activated_experts} | 384/6"),
    ]
    wrong, werr = 0, 0.0
    for l in tr.layers("5A"):  # every token of every layer, in plain Python
        a, chosen, got = (tr.get("5A", key, l).flatten(0, 1).tolist() for key in ("scores", "indices", "weights"))
        b = w.model.layers[l].ffn.gate.bias.detach().tolist()
        for row, picked, wts in zip(a, chosen, got, strict=True):
            ranked = sorted(range(len(row)), key=lambda e: row[e] + b[e], reverse=True)
            wrong += set(ranked[: len(picked)]) != set(picked)
            sel = [row[e] for e in picked]
            norm = sum(sel) if len(sel) > 1 else 1.0
            werr = max(werr, max(abs(cfg.route_scale * x / norm - y) for x, y in zip(sel, wts, strict=True)))
    v.checks += [
        Check(NOTES("check_topk", lang), float(wrong), 0.0),
        Check(NOTES("check_weights", lang, s=f"{cfg.route_scale:g}"), werr, 1e-9),
    ]
    return v

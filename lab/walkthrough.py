"""Run a prompt through the lab model, collect the Trace, and build each step's view as plain data.

Data flows one way: config → model → Trace → `StepView`s → (rich | JSON | plotly | widgets). A view
holds tables of numbers and short generated notes in one language; rendering lives elsewhere.
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field
from typing import Any

import torch

from dspark_mini import Trace, build_model, count_params, get_config, get_tokenizer
from dspark_mini.config import ModelConfig
from dspark_mini.dspark import sample, token_distribution
from dspark_mini.kv_cache import KVCache, kv_bytes
from dspark_mini.model import Transformer
from dspark_mini.quant import fp4_qdq
from dspark_mini.schedule import LayerRole, layer_roles
from dspark_mini.speculative import Round, speculative_round
from dspark_mini.tokenizer import LabTokenizer

from .profiling import mix_error
from .steps import STEP_IDS, Step, check_lang, get_step, ui, verify_label
from .weights import lab_model

DEFAULT_PROMPT = "Xin chào các bạn, hôm nay chúng ta học về DSpark."
WALK_PRESETS = ("lab",)

# generated notes, both languages (step text itself lives in steps.py)
NOTES = {
    "copies_equal": {
        "vi": "4 làn giống hệt nhau (max |Δ| giữa các làn)",
        "en": "the 4 lanes are identical (max |Δ| between lanes)",
    },
    "premix": {"vi": "pre-mix ban đầu", "en": "initial pre-mix"},
    "changed_most": {
        "vi": "Token được Engram thay đổi nhiều nhất (‖g·value‖)",
        "en": "Tokens the memory changed most (‖g·value‖)",
    },
    "table_rows": {"vi": "số hàng bảng (tổng các số nguyên tố)", "en": "table rows (sum of primes)"},
    "sinkhorn": {
        "vi": "Hội tụ Sinkhorn của comb (lớp {layer}, attention, token cuối)",
        "en": "Sinkhorn convergence of comb (layer {layer}, attention, last token)",
    },
    "comb": {
        "vi": "Ma trận comb 4×4 (từ làn i → làn j), token cuối",
        "en": "comb 4×4 (from lane i → to lane j), last token",
    },
    "prepost": {"vi": "pre / post của lớp {layer} (token cuối)", "en": "pre / post of layer {layer} (last token)"},
    "roles_toy": {"vi": "Vai trò các lớp — mô hình lab", "en": "Layer roles — lab model"},
    "roles_real": {"vi": "Vai trò các lớp — mô hình thật (gộp theo dải)", "en": "Layer roles — real model (grouped)"},
    "compressed": {"vi": "Nén tại các nguồn KV", "en": "Compression at the KV sources"},
    "gates": {
        "vi": "Trọng số cổng softmax của vài nhóm đầu (trung bình theo kênh) — lớp {layer}",
        "en": "Softmax gate weights of the first groups (mean over channels) — layer {layer}",
    },
    "picks": {
        "vi": "Indexer: token cuối chọn vị trí nén nào",
        "en": "Indexer: which compressed positions the last token picks",
    },
    "window_pos": {"vi": "cửa sổ của token cuối", "en": "window of the last token"},
    "attn_share": {
        "vi": "Attention của token cuối theo đầu — lớp {layer}",
        "en": "Last token's attention by head — layer {layer}",
    },
    "olora": {
        "vi": "O-LoRA nhóm: {g} nhóm × {h} đầu, mỗi nhóm {d} → {r}",
        "en": "grouped O-LoRA: {g} groups × {h} heads, each {d} → {r}",
    },
    "bytes": {"vi": "Byte mỗi token theo loại cache", "en": "Bytes per token by cache kind"},
    "qdq": {
        "vi": "Sai số lượng tử hóa→giải lượng tử (tương đối, trên prompt này)",
        "en": "Quantize→dequantize error (relative, on this prompt)",
    },
    "router": {"vi": "Router của token cuối — lớp {layer}", "en": "Router of the last token — layer {layer}"},
    "load": {"vi": "Tải expert trên prompt — lớp {layer}", "en": "Expert load over the prompt — layer {layer}"},
    "bias_changed": {"vi": "token mà bias đổi lựa chọn expert", "en": "tokens whose expert choice the bias changed"},
    "fp4_err": {
        "vi": "sai số MXFP4 của trọng số expert 0 (tương đối)",
        "en": "MXFP4 error of expert 0's weights (relative)",
    },
    "topk": {"vi": "Logits [B, V] của vị trí cuối: top-{k}", "en": "Logits [B, V] at the last position: top-{k}"},
    "taps": {
        "vi": "Lớp đích DSpark: hidden (trung bình 4 làn của đầu vào attention)",
        "en": "DSpark taps: hidden (mean over the 4 lanes of the attention input)",
    },
    "mix_check": {"vi": "trộn 0.5/0.5 == trung bình của hai phần", "en": "0.5/0.5 mix == mean of the two parts"},
    "parity_check": {
        "vi": "hai forward cùng đầu vào → logits giống hệt (ngưỡng 1e-9)",
        "en": "two forwards of the same input → identical logits (threshold 1e-9)",
    },
    "draft_block": {
        "vi": "Khối nháp DSpark [anchor {a!r}, noise×{n}] và kết quả verify",
        "en": "DSpark draft block [anchor {a!r}, noise×{n}] and what verify kept",
    },
    "not_acceptance": {
        "vi": "Confidence p_d(x) và đầu tin cậy c đều chưa phải là việc token được giữ: "
        "chỉ forward thật (verify) quyết định.",
        "en": "Neither the draft probability p_d(x) nor the confidence c is acceptance: "
        "only the target's real forward (verify) decides.",
    },
    "verdict": {
        "vi": "giữ {n}/{k} token nháp, τ = {tau}; token thêm từ forward thật: {t!r} ({kind})",
        "en": "kept {n}/{k} draft tokens, τ = {tau}; the target's own token: {t!r} ({kind})",
    },
    "pos_col": {"vi": "Vị trí", "en": "Position"},
    "pt_col": {"vi": "p_t(x) của forward thật", "en": "target p_t(x)"},
    "status": {"vi": "Kết quả verify", "en": "Verify"},
    "engram_id": {"vi": "Mã Engram (nén)", "en": "Engram id (compressed)"},
    "emb_norm": {"vi": "‖embedding‖ trung bình mỗi token", "en": "mean ‖embedding‖ per token"},
    "doubly": {
        "vi": "mỗi cột của comb có tổng 1 sau lượt chuẩn hóa cột thứ {n} (mọi lớp)",
        "en": "every column of comb sums to 1 after column pass {n} (all layers)",
    },
    "rows_left": {
        "vi": "max |tổng hàng − 1| còn lại sau {n} vòng (mọi lớp; logits sắc sau huấn luyện hội tụ chậm hơn)",
        "en": "max |row sum − 1| left after {n} iterations (all layers; sharp trained logits converge slower)",
    },
    "part": {"vi": "Phần", "en": "Part"},
    "enc_dec": {"vi": "encoder / decoder", "en": "encoder / decoder"},
    "raw_pos": {"vi": "Vị trí gốc", "en": "Raw positions"},
    "n_comp": {"vi": "Số mục nén", "en": "Compressed entries"},
    "carry": {"vi": "Token chờ (carry)", "en": "Carry"},
    "read_by": {"vi": "Được đọc bởi lớp", "en": "Read by layers"},
    "visible": {"vi": "Nhìn thấy", "en": "Visible"},
    "candidates": {"vi": "Ứng viên", "en": "Candidates"},
    "pool_pub": {"vi": "nhóm {n} (công bố)", "en": "pool {n} (publishes)"},
    "pool_mask": {"vi": "nhóm {n} (lọc theo)", "en": "pool {n} (masked to)"},
    "topk_pool": {"vi": "index_topk / nhóm ứng viên", "en": "index_topk / candidate pool"},
    "head": {"vi": "Đầu", "en": "Head"},
    "window": {"vi": "Cửa sổ", "en": "Window"},
    "compressed_col": {"vi": "KV nén", "en": "Compressed"},
    "sink": {"vi": "Sink", "en": "Sink"},
    "sink_by_layer": {"vi": "tỉ phần sink trung bình theo lớp", "en": "mean sink share by layer"},
    "blockdiag": {"vi": "wo_a khối chéo (mỗi nhóm một khối)", "en": "block-diagonal wo_a (one block per group)"},
    "sums_to_one": {"vi": "cửa sổ + nén + sink = 1", "en": "window + compressed + sink = 1"},
    "per_entry": {"vi": "(mỗi mục)", "en": "(per entry)"},
    "per_token": {"vi": "/ token", "en": "/ token"},
    "per_seq": {"vi": "/ chuỗi", "en": "/ sequence"},
    "global": {"vi": "KV toàn cục / token", "en": "global KV / token"},
    "bias": {"vi": "bias", "en": "bias"},
    "score_bias": {"vi": "điểm + bias", "en": "score + bias"},
    "chosen": {"vi": "được chọn", "en": "chosen"},
    "weight": {"vi": "Trọng số", "en": "Weight"},
    "sum_w": {"vi": "Σ trọng số (k > 1 → route_scale)", "en": "Σ weights (k > 1 → route_scale)"},
    "exp_topk": {"vi": "số expert / top-k (lab | thật)", "en": "experts / top-k (lab | real)"},
    "max_p": {"vi": "xác suất lớn nhất", "en": "max probability"},
    "uniform": {"vi": "xác suất đều 1/V", "en": "uniform probability 1/V"},
}


def note(key: str, lang: str, **fmt: Any) -> str:
    return NOTES[key][lang].format(**fmt)


@dataclass
class ViewTable:
    title: str
    columns: list[str]
    rows: list[list[Any]]


@dataclass
class Check:
    name: str
    value: float
    threshold: float

    @property
    def ok(self) -> bool:
        return self.value <= self.threshold


@dataclass
class StepView:
    step: Step
    lang: str
    shapes: list[tuple[str, tuple[int, ...]]] = field(default_factory=list)
    tables: list[ViewTable] = field(default_factory=list)
    checks: list[Check] = field(default_factory=list)
    facts: list[tuple[str, Any]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.step.id,
            "title": self.step.t("title", self.lang),
            "shapes": {k: list(v) for k, v in self.shapes},
            "facts": {k: v for k, v in self.facts},
            "checks": [{"name": c.name, "value": c.value, "threshold": c.threshold, "ok": c.ok} for c in self.checks],
            "tables": [{"title": t.title, "columns": t.columns, "rows": t.rows} for t in self.tables],
            "notes": self.notes,
        }


@dataclass
class Walk:
    """Everything one `walk` run produced: the model, its inputs, the trace and the views."""

    cfg: ModelConfig
    tokenizer: LabTokenizer
    model: Transformer
    prompt: str
    tokens: torch.Tensor  # [1, S]
    trace: Trace
    logits: torch.Tensor  # [1, S, V]
    taps: dict[int, torch.Tensor]
    parity: float  # max |Δ| of two forwards
    seed: int
    prompt_cache: KVCache  # the caches right after the prompt (a round runs on a copy)
    round: Round | None = None  # one draft → verify → commit round right after the prompt
    block: int = 0
    temperature: float = 0.0
    draft_trace: Trace | None = None  # what the draft pass recorded
    views: dict[str, StepView] = field(default_factory=dict)
    weights: str = "untrained"  # "trained" (lab/weights) or "untrained" (the seeded init)


def run_walk(
    prompt: str = DEFAULT_PROMPT,
    preset: str = "lab",
    seed: int = 0,
    lang: str = "en",
    steps: tuple[str, ...] | None = None,
    block: int | None = None,
    temperature: float = 0.0,
    weights: str = "trained",
) -> Walk:
    """Tokenize, run one traced forward (and a second for the parity check), one DSpark round, the views.

    weights="trained" loads the shipped lab weights (target + DSpark draft); "untrained" builds the seeded
    random init. The seed also drives the sampling of the round."""
    lang = check_lang(lang)
    if preset not in WALK_PRESETS:
        raise ValueError(
            f"walk preset {preset!r} is not runnable on a CPU: allowed {WALK_PRESETS} "
            "(use `dspark-lab inspect --preset flash` for the real-size model)"
        )
    if not isinstance(prompt, str) or not prompt.strip():
        raise ValueError("prompt is empty: give some text to run through the model")
    wanted = tuple(get_step(s).id for s in steps) if steps else STEP_IDS
    cfg = get_config(preset)
    tok = get_tokenizer(cfg)
    ids = tok.encode(prompt)
    if len(ids) + cfg.dspark_block_size + 1 > cfg.max_seq_len:
        raise ValueError(
            f"prompt has {len(ids)} tokens: allowed 1..{cfg.max_seq_len - cfg.dspark_block_size - 1} "
            f"(max_seq_len {cfg.max_seq_len} minus one draft round)"
        )
    block = check_block(cfg, block)
    token_distribution(torch.zeros(1), temperature)  # validates the temperature
    model = lab_model(weights, seed)
    tokens = torch.tensor([ids], dtype=torch.long)
    trace = Trace()
    with torch.no_grad():
        cache = model.new_cache(1)
        out = model(tokens, cache=cache, trace=trace)
        again = model(tokens, cache=model.new_cache(1), commit=False)  # same input, same path
    parity = float((out.logits - again.logits).abs().max())
    walk = Walk(cfg, tok, model, prompt, tokens, trace, out.logits, out.taps, parity, seed, cache, weights=weights)
    walk = redraft(walk, block, temperature, views=False)
    return build_views(walk, lang, wanted)


def check_block(cfg: ModelConfig, block: int | None) -> int:
    block = cfg.dspark_block_size if block is None else block
    if not isinstance(block, int) or isinstance(block, bool) or not 1 <= block <= cfg.dspark_block_size:
        raise ValueError(
            f"block size = {block!r} is invalid: allowed 1..{cfg.dspark_block_size} (the trained draft block)"
        )
    return block


def redraft(walk: Walk, block: int | None, temperature: float, views: bool = True) -> Walk:
    """A new DSpark round from the cache the prompt left (the prompt's forward is not run again).

    The anchor is drawn from the prompt's last logits at `temperature` with the walk's seed, then one
    draft → verify → commit round runs on a copy of the cache; only the 6B view is rebuilt.
    """
    block = check_block(walk.cfg, block)
    token_distribution(torch.zeros(1), temperature)  # validates the temperature
    gen = torch.Generator().manual_seed(walk.seed)
    draft_trace = Trace(sinkhorn_history=False)
    with torch.no_grad():
        cache = copy.deepcopy(walk.prompt_cache)
        anchor = sample(token_distribution(walk.logits[:, -1], temperature), gen)  # [1]
        rnd = speculative_round(walk.model, cache, anchor, block, temperature, gen, trace=draft_trace)[0]
    new = dataclasses.replace(
        walk, round=rnd, block=block, temperature=temperature, draft_trace=draft_trace, views=dict(walk.views)
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


# ---- small helpers ---------------------------------------------------------------------------------
def r(x: float, n: int = 4) -> float:
    return float(round(float(x), n))


def rel_err(a: torch.Tensor, b: torch.Tensor) -> float:
    return float((a - b).norm() / b.norm().clamp_min(1e-30))


def shape(t: torch.Tensor) -> tuple[int, ...]:
    return tuple(int(s) for s in t.shape)


def tok_text(w: Walk, i: int) -> str:
    return repr(w.tokenizer.token_text(int(i)))[1:-1]


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
            ui("token", lang),
            [ui("position", lang), ui("token_id", lang), ui("token", lang), note("engram_id", lang)],
            rows,
        )
    )
    spread = float((streams - streams[:, :, :1]).abs().max())
    v.checks.append(Check(note("copies_equal", lang), spread, 0.0))
    v.facts += [
        (note("premix", lang), [r(x) for x in pre[0, 0].tolist()]),
        (note("emb_norm", lang), r(emb[0].norm(dim=-1).mean())),
    ]
    return v


def view_1b(w: Walk, v: StepView) -> StepView:
    tr, lang, cfg = w.trace, v.lang, w.cfg
    from dspark_mini.engram import engram_num_embeddings

    sizes = engram_num_embeddings(cfg)
    real = engram_num_embeddings(get_config("flash"))
    v.facts += [
        (note("table_rows", lang) + f" ({ui('toy', lang)})", list(sizes)),
        (note("table_rows", lang) + f" ({ui('real', lang)})", list(real)),
    ]
    cols_per_order = cfg.engram_n_heads
    for layer in tr.layers("1B"):
        rows_ids, gate = tr.get("1B", "row_ids", layer), tr.get("1B", "gate", layer)
        delta = tr.get("1B", "delta_norm", layer)
        v.shapes += [(f"row_ids (layer {layer})", shape(rows_ids)), (f"gate (layer {layer})", shape(gate))]
        heads = [f"n={n} h0" for n in cfg.engram_orders]
        rows = []
        for p in range(w.tokens.size(1)):
            ids = [int(rows_ids[0, p, (n - 2) * cols_per_order]) for n in cfg.engram_orders]
            rows.append(
                [p, tok_text(w, w.tokens[0, p])] + ids + [[r(g, 3) for g in gate[0, p].tolist()], r(delta[0, p], 3)]
            )
        v.tables.append(
            ViewTable(
                f"Engram {ui('layer', lang)} {layer}",
                [ui("position", lang), ui("token", lang)] + heads + [ui("gate", lang) + " ×4", "‖g·value‖"],
                rows,
            )
        )
        top = torch.argsort(delta[0], descending=True)[:3].tolist()
        v.notes.append(
            f"{note('changed_most', lang)} — {ui('layer', lang)} {layer}: "
            + ", ".join(f"{tok_text(w, w.tokens[0, p])!r}@{p}" for p in top)
        )
    return v


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
        ("comb history", shape(tr.get("2A", "attn_comb_history", layer))),
    ]
    pre, post = tr.get("2A", "attn_pre", layer)[0, -1], tr.get("2A", "attn_post", layer)[0, -1]
    v.tables.append(
        ViewTable(
            note("prepost", lang, layer=layer),
            [ui("lane", lang), "pre", "post"],
            [[j, r(pre[j]), r(post[j])] for j in range(pre.numel())],
        )
    )
    c = comb[0, -1]
    v.tables.append(
        ViewTable(
            note("comb", lang),
            ["i \\ j"] + [str(j) for j in range(c.size(1))],
            [[i] + [r(x) for x in c[i].tolist()] for i in range(c.size(0))],
        )
    )
    errs = sinkhorn_errors(hist)
    keep = {1, 2, 3, 5, 10, len(errs)}
    v.tables.append(
        ViewTable(
            note("sinkhorn", lang, layer=layer),
            [ui("iteration", lang), "max |" + ui("row_sum", lang) + " − 1|", "max |" + ui("col_sum", lang) + " − 1|"],
            [[i, f"{a:.2e}", f"{b:.2e}"] for i, a, b in errs if i in keep],
        )
    )
    all_combs = torch.stack(
        [tr.get("2A", k, l) for l in tr.layers("2A") if l < w.cfg.n_layers for k in ("attn_comb", "ffn_comb")]
    )  # the prompt's forward (draft layers: 3 rows)
    n = w.cfg.hc_sinkhorn_iters
    v.checks.append(Check(note("doubly", lang, n=n), float((all_combs.sum(-2) - 1).abs().max()), 1e-3))
    v.facts.append((note("rows_left", lang, n=n), f"{float((all_combs.sum(-1) - 1).abs().max()):.2e}"))
    return v


def role_name(role: LayerRole, lang: str) -> str:
    names = {"SWA-only": "role_swa_only", "Full": "role_full", "Reuse": "role_reuse", "Reindex": "role_reindex"}
    name = ui(names[role.mode], lang) if role.mode in names else role.mode
    if role.is_candidate_source:
        name += " + " + ui("role_candidate_source", lang)
    return name


def role_rows(cfg: ModelConfig, lang: str, grouped: bool) -> list[list[Any]]:
    """The role table; `grouped` merges runs of consecutive layers whose row is the same (for 43 layers)."""
    rows: list[list[Any]] = []
    prev = None
    for role in layer_roles(cfg):
        part = {"encoder": ui("encoder", lang), "decoder": ui("decoder", lang)}.get(role.part, "DSpark")
        key = [
            part,
            role.ratio,
            role_name(role, lang),
            "—" if role.reads_kv_of is None else role.reads_kv_of,
            "—" if role.reads_topk_of is None else role.reads_topk_of,
            "Engram" if role.has_engram else "",
            "tap" if role.is_tap else "",
        ]
        if grouped and key == prev:
            rows[-1][0] = f"{rows[-1][0].split('–')[0]}–{role.layer}"
        else:
            rows.append([str(role.layer)] + key)
        prev = key
    return rows


def view_3a(w: Walk, v: StepView) -> StepView:
    lang = v.lang
    cols = [
        ui("layer", lang),
        note("part", lang),
        ui("ratio", lang),
        ui("role", lang),
        ui("reads_kv_of", lang),
        ui("reads_topk_of", lang),
        "Engram",
        "DSpark",
    ]
    v.tables.append(ViewTable(note("roles_toy", lang), cols, role_rows(w.cfg, lang, grouped=False)))
    v.tables.append(ViewTable(note("roles_real", lang), cols, role_rows(get_config("flash"), lang, grouped=True)))
    v.facts += [
        (note("enc_dec", lang) + " (lab)", f"{w.cfg.n_encoder_layers} + {w.cfg.n_layers - w.cfg.n_encoder_layers}"),
        (note("enc_dec", lang) + " (flash)", "20 + 20"),
    ]
    return v


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
        v.shapes.append((f"latent (layer {layer})", shape(tr.get("3B", "latent_pre_rope", layer))))
    v.tables.append(
        ViewTable(
            note("compressed", lang),
            [
                ui("layer", lang),
                ui("ratio", lang),
                note("raw_pos", lang),
                note("n_comp", lang),
                note("carry", lang),
                ui("gate", lang),
                note("read_by", lang),
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
            ViewTable(note("gates", lang, layer=first), ["j", ui("position", lang), "w(2j)", "w(2j+1)"], rows)
        )
    return v


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
            cands = note("pool_pub", lang, n=int(c.sum()))
        elif "candidates_used" in tr.data["3C"][layer]:
            c = tr.get("3C", "candidates_used", layer)[0, -1]
            cands = note("pool_mask", lang, n=int(c.sum()))
        role = next(x for x in layer_roles(cfg) if x.layer == layer)
        rows.append([layer, role_name(role, lang), visible, len(picks), str(picks), cands])
        v.shapes.append((f"index scores (layer {layer})", shape(scores)))
    v.tables.append(
        ViewTable(
            note("picks", lang),
            [
                ui("layer", lang),
                ui("role", lang),
                note("visible", lang),
                "top-k",
                ui("compressed_position", lang),
                note("candidates", lang),
            ],
            rows,
        )
    )
    lo = max(0, S - cfg.window_size)
    v.facts += [
        (note("window_pos", lang), f"{lo}..{S - 1} ({S - lo} / {cfg.window_size})"),
        (note("topk_pool", lang), f"{cfg.index_topk} / {cfg.candidate_topk_blocks}×{cfg.candidate_block_size}"),
    ]
    return v


def view_4a(w: Walk, v: StepView, layer: int | None = None) -> StepView:
    tr, lang, cfg = w.trace, v.lang, w.cfg
    layer = cfg.candidate_source_layer if layer is None else layer
    probs = tr.get("4A", "probs", layer)
    v.shapes += [
        ("q", (1, w.tokens.size(1), cfg.n_heads, cfg.head_dim)),
        ("kv latent (K = V)", (1, w.tokens.size(1), cfg.head_dim)),
        (f"probs (layer {layer})", shape(probs)),
    ]
    ws, cs, ss = (tr.get("4A", k, layer)[0, -1] for k in ("window_share", "compressed_share", "sink_share"))
    rows = [[h, r(ws[h]), r(cs[h]), r(ss[h])] for h in range(cfg.n_heads)]
    v.tables.append(
        ViewTable(
            note("attn_share", lang, layer=layer),
            [note(k, lang) for k in ("head", "window", "compressed_col", "sink")],
            rows,
        )
    )
    shares = torch.stack([tr.get("4A", "sink_share", l)[0].mean() for l in tr.layers("4A")])
    v.facts += [
        (note("sink_by_layer", lang), [r(x, 3) for x in shares.tolist()]),
        (
            note(
                "olora",
                lang,
                g=cfg.o_groups,
                h=cfg.n_heads // cfg.o_groups,
                d=cfg.n_heads // cfg.o_groups * cfg.head_dim,
                r=cfg.o_lora_rank,
            ),
            note("blockdiag", lang),
        ),
    ]
    total = (ws + cs + ss - 1).abs().max()
    v.checks.append(Check(note("sums_to_one", lang), float(total), 1e-9))
    return v


def view_6a(w: Walk, v: StepView) -> StepView:
    tr, lang, cfg = w.trace, v.lang, w.cfg
    toy, real = kv_bytes(cfg), kv_bytes(get_config("flash"))
    e, t, q = note("per_entry", lang), note("per_token", lang), note("per_seq", lang)
    rows = [
        [f"{ui('cache_window', lang)} {e}", toy["window_entry"], real["window_entry"]],
        [f"{ui('cache_compressed', lang)} {e}", toy["compressed_entry"], real["compressed_entry"]],
        [f"{ui('cache_index', lang)} {e}", toy["index_entry"], real["index_entry"]],
        [
            f"{ui('cache_compressed', lang)} {t}",
            r(toy["compressed_kv_per_token"], 2),
            r(real["compressed_kv_per_token"], 2),
        ],
        [f"{ui('cache_index', lang)} {t}", r(toy["index_k_per_token"], 2), r(real["index_k_per_token"], 2)],
        [note("global", lang), r(toy["global_per_token"], 2), r(real["global_per_token"], 2)],
        [f"{ui('cache_window', lang)} {q}", toy["window_per_sequence"], real["window_per_sequence"]],
    ]
    v.tables.append(ViewTable(note("bytes", lang), [ui("cache_kind", lang), ui("toy", lang), ui("real", lang)], rows))
    errs = []
    for l in tr.layers("6A"):
        d = tr.data["6A"][l]
        errs.append(
            (f"{ui('cache_window', lang)} ({ui('layer', lang)} {l})", rel_err(d["window_kv"], d["window_kv_raw"]))
        )
        if "compressed_kv" in d and d["compressed_kv"].numel():
            errs.append(
                (
                    f"{ui('cache_compressed', lang)} ({ui('layer', lang)} {l})",
                    rel_err(d["compressed_kv"], d["compressed_raw"]),
                )
            )
    v.tables.append(
        ViewTable(
            note("qdq", lang),
            [ui("cache_kind", lang), ui("qdq_error", lang)],
            [[k, f"{e:.3%}"] for i, (k, e) in enumerate(errs) if i == 0 or ui("cache_compressed", lang) in k],
        )
    )
    v.facts.append(("kv_quant", cfg.kv_quant))
    return v


def view_5a(w: Walk, v: StepView, layer: int = 0) -> StepView:
    tr, lang, cfg = w.trace, v.lang, w.cfg
    scores, idx, wts = (tr.get("5A", k, layer) for k in ("scores", "indices", "weights"))
    load = tr.get("5A", "load", layer)
    v.shapes += [("router scores", shape(scores)), ("chosen experts", shape(idx))]
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
            note("router", lang, layer=layer),
            [
                ui("expert", lang),
                "√softplus",
                note("bias", lang),
                note("score_bias", lang),
                note("chosen", lang),
                note("weight", lang),
            ],
            rows,
        )
    )
    v.tables.append(
        ViewTable(
            note("load", lang, layer=layer),
            [ui("expert", lang), ui("load", lang)],
            [[e, int(load[e])] for e in range(load.numel())],
        )
    )
    unbiased = scores[0].topk(idx.size(-1), dim=-1).indices.sort(-1).values
    changed = int((unbiased != idx[0].sort(-1).values).any(-1).sum())
    ex = w.model.layers[layer].ffn.experts[0].w1.weight.detach()
    v.facts += [
        (note("bias_changed", lang), f"{changed} / {idx.size(1)}"),
        (note("fp4_err", lang), f"{rel_err(fp4_qdq(ex, 32, 'e8m0'), ex):.2%}"),
        (note("sum_w", lang), r(wts[0, -1].sum())),
        (note("exp_topk", lang), f"{cfg.n_routed_experts}/{cfg.n_activated_experts} | 384/6"),
    ]
    return v


def verdict_text(w: Walk, lang: str) -> str:
    """One line on what verify did in the walk's round."""
    rd = w.round
    kind = verify_label(rd.next_kind, lang)
    return note(
        "verdict", lang, n=rd.n_accepted, k=rd.block, tau=rd.tau, t=w.tokenizer.token_text(rd.next_token), kind=kind
    )


def view_6b(w: Walk, v: StepView, k: int = 8) -> StepView:
    tr, lang, cfg = w.trace, v.lang, w.cfg
    logits = tr.get("head", "logits")[0, -1]  # [V]
    probs = logits.softmax(-1)
    top = torch.topk(logits, k)
    v.shapes += [
        ("hc_pre(X, pre)", shape(tr.get("head", "hidden"))),
        ("logits [B, S, V]", shape(tr.get("head", "logits"))),
    ]
    v.tables.append(
        ViewTable(
            note("topk", lang, k=k),
            ["#", ui("token", lang), ui("token_id", lang), ui("logit", lang), ui("probability", lang)],
            [
                [i + 1, tok_text(w, t), int(t), r(lv), r(probs[t])]
                for i, (lv, t) in enumerate(zip(top.values.tolist(), top.indices.tolist(), strict=True))
            ],
        )
    )
    v.checks.append(Check(note("parity_check", lang), w.parity, 1e-9))
    taps = [w.taps[l][0, -1] for l in cfg.dspark_target_layer_ids]
    rows = [[l, r(t.norm()), r(t.mean()), r(t.std())] for l, t in zip(cfg.dspark_target_layer_ids, taps, strict=True)]
    v.tables.append(ViewTable(note("taps", lang), [ui("layer", lang), "‖h‖", ui("mean", lang), ui("std", lang)], rows))
    if cfg.dspark_tap_mix == "mean":
        v.checks.append(Check(note("mix_check", lang), mix_error(w.taps, cfg.dspark_target_layer_ids), 0.0))
    v.facts += [(note("uniform", lang), r(1.0 / cfg.vocab_size, 5)), (note("max_p", lang), r(probs.max(), 5))]
    rd = w.round
    rows = [
        [
            rd.position + 1 + i,
            tok_text(w, t),
            r(pd),
            r(c),
            r(pt),
            tok_text(w, rd.target_argmax[i]),
            verify_label(st, lang),
        ]
        for i, (t, pd, c, pt, st) in enumerate(
            zip(rd.draft, rd.draft_probs, rd.confidence, rd.target_probs, rd.status, strict=True)
        )
    ]
    nxt = verify_label(rd.next_kind, lang)
    rows.append(
        [
            rd.position + 1 + rd.n_accepted,
            tok_text(w, rd.next_token),
            "",
            "",
            "",
            tok_text(w, rd.target_argmax[rd.n_accepted]),
            nxt,
        ]
    )
    v.tables.append(
        ViewTable(
            note("draft_block", lang, a=w.tokenizer.token_text(rd.anchor), n=rd.block - 1),
            [
                note("pos_col", lang),
                ui("draft_token", lang),
                ui("draft_probability", lang),
                ui("confidence", lang),
                note("pt_col", lang),
                ui("target_token", lang),
                note("status", lang),
            ],
            rows,
        )
    )
    v.shapes += [("draft logits [B, k, V]", (1, rd.block, cfg.vocab_size)), ("confidence [B, k]", (1, rd.block))]
    v.facts += [
        (ui("accepted_length", lang), rd.tau),
        (ui("acceptance_rate", lang), r(rd.n_accepted / rd.block)),
        (ui("block_size", lang), rd.block),
        (ui("temperature", lang), w.temperature),
        (ui("weights", lang), ui(w.weights, lang)),
    ]
    v.notes += [
        verdict_text(w, lang),
        note("not_acceptance", lang),
        ui("warning_untrained" if w.weights == "untrained" else "note_trained", lang),
    ]
    return v


def inspect_model(preset: str = "lab", seed: int = 0) -> dict[str, Any]:
    """Config tables, parameter counts and KV budgets; `flash` is built on the meta device."""
    cfg = get_config(preset)
    device = "meta" if preset == "flash" else None
    model = build_model(cfg, seed=seed, device=device)
    params = count_params(model)
    kb = kv_bytes(cfg)
    return {
        "preset": preset,
        "device": str(next(model.parameters()).device),
        "params": params,
        "kv_bytes_per_token": {
            "compressed_kv": kb["compressed_kv_per_token"],
            "index_k": kb["index_k_per_token"],
            "global": kb["global_per_token"],
        },
        "kv_bytes_per_entry": {
            "window": kb["window_entry"],
            "compressed_kv": kb["compressed_entry"],
            "index_k": kb["index_entry"],
        },
        "window_bytes_per_sequence": kb["window_per_sequence"],
        "roles": [vars(x) for x in layer_roles(cfg)],
        "config": {k: v for k, v in vars(cfg).items() if k != "extra"},
        "active_params_per_token_estimate": active_params(cfg),
    }


def active_params(cfg: ModelConfig) -> int:
    """Rough decode-active parameters: top-k + shared experts per layer, attention, embed row and head."""
    expert = 3 * cfg.dim * cfg.moe_inter_dim
    per_layer = (cfg.n_activated_experts + cfg.n_shared_experts) * expert
    attn = (
        cfg.dim * cfg.q_lora_rank
        + cfg.q_lora_rank * cfg.n_heads * cfg.head_dim
        + cfg.dim * cfg.head_dim
        + cfg.n_heads * cfg.head_dim * cfg.o_lora_rank
        + cfg.o_groups * cfg.o_lora_rank * cfg.dim
    )
    return int(cfg.n_layers * (per_layer + attn) + cfg.vocab_size * cfg.dim + cfg.dim)


def fmt_params(n: int) -> str:
    return f"{n / 1e9:.2f} B" if n >= 1e8 else f"{n / 1e6:.3f} M" if n >= 1e5 else str(n)


__all__ = [
    "DEFAULT_PROMPT",
    "Walk",
    "StepView",
    "ViewTable",
    "Check",
    "run_walk",
    "redraft",
    "build_views",
    "check_block",
    "verdict_text",
    "inspect_model",
    "fmt_params",
    "sinkhorn_errors",
    "role_name",
    "view_2a",
    "view_4a",
    "view_5a",
]

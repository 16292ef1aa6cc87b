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
import functools
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from dspark_mini import Trace, get_config, get_tokenizer
from dspark_mini.config import ModelConfig
from dspark_mini.kv_cache import KVCache, kv_bytes
from dspark_mini.model import Transformer
from dspark_mini.quant import fp4_qdq
from dspark_mini.sampling import next_token
from dspark_mini.schedule import LayerRole, layer_roles
from dspark_mini.scheduler import Scheduler, StepRate
from dspark_mini.speculative import ACCEPTED, NOT_SENT, NOT_VERIFIED, REJECTED, Round, speculative_round
from dspark_mini.tokenizer import LabTokenizer
from dspark_mini.validate import check_int, check_seed, check_temperature

from ..evaluation.profiling import hooked_forward, main_x_error
from ..text import UI, Texts, check_lang, verify_label
from ..weights import lab_model
from .steps import STEP_IDS, Step, get_step

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
        "vi": "Sai số lượng tử hóa→giải lượng tử (tương đối, trên văn bản đầu vào này)",
        "en": "Quantize→dequantize error (relative, on this prompt)",
    },
    "router": {"vi": "Router của token cuối — lớp {layer}", "en": "Router of the last token — layer {layer}"},
    "load": {
        "vi": "Tải expert trên văn bản đầu vào — lớp {layer}",
        "en": "Expert load over the prompt — layer {layer}",
    },
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
    "parity_check": {
        "vi": "hai forward cùng đầu vào → logits giống hệt (ngưỡng 1e-9)",
        "en": "two forwards of the same input → identical logits (threshold 1e-9)",
    },
    "draft_block": {
        "vi": "Khối nháp DSpark [anchor {a!r}, noise×{n}]: {l} token nháp đầu gửi đi verify (ℓ = {l}), và kết quả "
        "verify",
        "en": "DSpark draft block [anchor {a!r}, noise×{n}]: the first {l} drafts sent to verify (ℓ = {l}), and what "
        "verify kept",
    },
    "prefix_note": {
        "vi": "Lab luôn vẽ cả khối đã huấn luyện (k = {k}) và gửi {l} token nháp đầu đi verify (ℓ = {l}, chính sách "
        "cố định: --block, hay thanh trượt ℓ); token nháp sau ℓ là ‘không gửi đi verify’: forward thật không hề "
        "thấy chúng, nên không được giữ cũng không bị từ chối, và tỉ lệ giữ chỉ đếm {l} vị trí đã verify.",
        "en": "The lab always drafts its whole trained block (k = {k}) and sends the first {l} to verify (ℓ = {l}, a "
        "fixed policy: --block, or the ℓ slider); drafts past ℓ are 'not sent to verify': the target never saw "
        "them, so they are neither accepted nor rejected, and the acceptance rate counts only the {l} verified "
        "positions.",
    },
    "not_acceptance": {
        "vi": "Xác suất nháp p_d(x) — bài học gọi là ‘confidence’ — và đầu tin cậy c là hai con số khác nhau, "
        "và không con số nào là việc token được giữ: chỉ forward thật (verify) quyết định.",
        "en": "The draft probability p_d(x) — the lesson's 'confidence' — and the confidence head's c are two "
        "different numbers, and neither is acceptance: only the target's real forward (verify) decides.",
    },
    "verdict": {
        "vi": "giữ {n}/{k} token nháp, τ = {tau}; token thêm từ forward thật: {t!r} ({kind})",
        "en": "kept {n}/{k} draft tokens, τ = {tau}; the target's own token: {t!r} ({kind})",
    },
    "pt_col": {"vi": "p_t(x) của forward thật", "en": "Target prob. p_t(x)"},
    "pd_col": {"vi": "Xác suất nháp p_d(x)", "en": "Draft prob. p_d(x)"},
    "c_col": {"vi": "Đầu tin cậy c", "en": "Conf. head c"},
    "pos_short": {"vi": "Vị trí", "en": "Pos."},
    "ratio_col": {"vi": "min(1, p_t/p_d)", "en": "min(1, p_t/p_d)"},
    "argmax_col": {"vi": "argmax của forward thật", "en": "Target argmax"},
    "soft_col": {"vi": "softmax T = 1: p_d / p_t (verify không dùng)", "en": "softmax T = 1: p_d / p_t (not used)"},
    "sampled": {"vi": "lấy mẫu, không phải argmax", "en": "sampled, not argmax"},
    "t0_note": {
        "vi": "T = 0 (greedy): verify so sánh hai phân phối one-hot (argmax), nên p_d(x) = 1, còn p_t(x) = 1 "
        "đúng khi token nháp là argmax của forward thật, ngược lại bằng 0; min(1, p_t/p_d) là 1 (giữ) hoặc 0 "
        "(từ chối). Cột softmax T = 1 chỉ để tham khảo: verify không dùng các số đó.",
        "en": "T = 0 (greedy): verify compares one-hot (argmax) distributions, so p_d(x) = 1, and p_t(x) = 1 "
        "exactly when the draft token is the target's argmax, else 0; min(1, p_t/p_d) is 1 (keep) or 0 (reject). "
        "The softmax T = 1 column is for reference only: verify did not use those numbers.",
    },
    "t_note": {
        "vi": "T = {t}: p_d(x) và p_t(x) là softmax(logits / T) mà verify đã dùng; token nháp được giữ với xác "
        "suất min(1, p_t/p_d), nên token được giữ có thể khác argmax của forward thật, và token thay thế hay token "
        "thưởng được lấy mẫu chứ không phải argmax — bảng ghi ‘lấy mẫu, không phải argmax’ đúng ở những chỗ đó.",
        "en": "T = {t}: p_d(x) and p_t(x) are the softmax(logits / T) values verify used; a draft is kept with "
        "probability min(1, p_t/p_d), so a kept draft may differ from the target's argmax, and the replacement or "
        "bonus token is sampled, not the argmax — the table says 'sampled, not argmax' exactly where that happens.",
    },
    # the lesson's setting next to the lab's (../shared/seeds/000_*.txt)
    "lesson_title": {
        "vi": "Bài học (seed 000) đặt cạnh lab",
        "en": "The lesson's setting (seed 000) next to the lab's",
    },
    "lesson_col": {"vi": "bài học", "en": "lesson"},
    "lab_col": {"vi": "lab · {w} · k = {k}, ℓ = {l}", "en": "lab · {w} · k = {k}, ℓ = {l}"},
    "real_col": {"vi": "V4.1-Flash thật", "en": "real V4.1-Flash"},
    "row_taps": {"vi": "lớp đích", "en": "taps"},
    "row_mix": {"vi": "cách gộp", "en": "mix"},
    "row_k": {"vi": "khối nháp k", "en": "draft block k"},
    "row_l": {"vi": "gửi đi verify ℓ", "en": "sent to verify ℓ"},
    "real_l": {"vi": "0..5, từng yêu cầu (bộ lập lịch)", "en": "0..5 per request (the scheduler)"},
    "lesson_prefix": {
        "vi": "Cột ‘chưa huấn luyện · ℓ = 3’ đặt khối 3 token của bài học vào cách lab chạy: lab vẽ cả khối {k} "
        "token (khối mà bộ vẽ được huấn luyện) rồi verify 3 token đầu; ○ = không gửi đi verify. Đó không phải một "
        "khối nháp 3 hàng: bộ vẽ chưa bao giờ thấy khối 3 hàng khi huấn luyện.",
        "en": "The 'untrained · ℓ = 3' column puts the lesson's block of 3 the lab's way: the lab drafts its whole "
        "{k}-token block (the block the drafter was trained on) and verifies the first 3; ○ = not sent to verify. "
        "It is not a 3-row draft block: the drafter never saw one in training.",
    },
    "row_weights": {"vi": "trọng số", "en": "weights"},
    "row_tokens": {"vi": "token nháp", "en": "draft tokens"},
    "row_pd": {
        "vi": "p_d(x), softmax T = 1 (‘confidence’ của bài học)",
        "en": "p_d(x), softmax T = 1 (the lesson's 'confidence')",
    },
    "row_kept": {"vi": "verify giữ", "en": "kept by verify"},
    "not_verified_lesson": {"vi": "— (bài học chưa verify)", "en": "— (the lesson stops before verify)"},
    "concat": {"vi": "nối → main_proj", "en": "concat → main_proj"},
    "why_k": {
        "vi": "Vì sao lab huấn luyện k = 5: 5 = [tok, noise×4] là khối của V4-Flash thật; với k = 3, bộ vẽ DSpark "
        "của lab gần như không hơn bộ vẽ kiểu DFlash (τ 1.10× ở T = 1, 1.00× khi greedy), với k = 5 thì đạt 1.30× "
        "(README, phần huấn luyện). Lab luôn vẽ đủ 5 token và verify một đoạn đầu ℓ ≤ 5, như các engine phục vụ: "
        "--block 3 (hay thanh trượt ℓ) verify 3 token đầu, bằng khối của bài học.",
        "en": "Why the lab trains k = 5: 5 = [tok, noise×4] is the real V4-Flash block; at k = 3 the lab's DSpark "
        "drafter was hardly better than the DFlash-style one (τ 1.10× at T = 1, 1.00× greedy), at k = 5 it reaches "
        "1.30× (README, Training). The lab always drafts all 5 and verifies a prefix ℓ ≤ 5, as serving engines do: "
        "--block 3 (or the ℓ slider) verifies the first 3, the lesson's block size.",
    },
    "why_taps": {
        "vi": "Vì sao lớp đích là 3 và 4: đó là DSPARK_TARGET_LAYERS của bài học, giữ lại để phép trộn 0.5/0.5 "
        "kiểm được bằng tay; trong lab 8 lớp chúng nằm giữa chồng lớp, ở chỗ nối encoder/decoder (3 = lớp encoder "
        "cuối, 4 = lớp decoder đầu). Mô hình thật lấy đầu vào attention của ba lớp cuối, 37, 38, 39 trong 40 lớp, "
        "nối lại ([B, S, 3 × 5120]) rồi chiếu về 5120 bằng main_proj — không trộn 0.5/0.5.",
        "en": "Why taps 3 and 4: they are the lesson's DSPARK_TARGET_LAYERS, kept so the 0.5/0.5 mix can be "
        "checked by hand; in the 8-layer lab they sit mid-stack, at the encoder/decoder seam (3 = last encoder "
        "layer, 4 = first decoder layer). The real model takes the attention inputs of its last three layers, 37, "
        "38 and 39 of 40, concatenates them ([B, S, 3 × 5120]) and projects them back to 5120 with main_proj — "
        "no 0.5/0.5 mix.",
    },
    "lesson_pd": {
        "vi": "Bài học đọc 0.167 / 0.234 / 0.173 (đều dưới 0.25) là dấu hiệu trọng số chưa học; lab đọc cùng "
        "điều đó so với 1/V: với V = {v}, trọng số chưa học cho p_d(x) quanh 1/V = {u}.",
        "en": "The lesson reads 0.167 / 0.234 / 0.173 (all below 0.25) as the sign of untrained weights; the lab "
        "reads the same thing against 1/V: with V = {v}, untrained weights give p_d(x) near 1/V = {u}.",
    },
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
    # labels of the header line and of the shapes
    "prompt_label": {"vi": "Văn bản đầu vào", "en": "Prompt"},
    "n_tokens": {"vi": "{n} token", "en": "{n} tokens"},
    "at_layer": {"vi": "lớp {l}", "en": "layer {l}"},
    "comb_history": {"vi": "lịch sử comb", "en": "comb history"},
    "index_scores": {"vi": "điểm indexer", "en": "index scores"},
    "router_scores": {"vi": "điểm router", "en": "router scores"},
    "chosen_experts": {"vi": "expert được chọn", "en": "chosen experts"},
    "kv_latent": {"vi": "latent KV (K = V)", "en": "kv latent (K = V)"},
    "draft_logits": {"vi": "logits nháp [B, k, V]", "en": "draft logits [B, k, V]"},
    "conf_shape": {"vi": "đầu tin cậy [B, k]", "en": "confidence [B, k]"},
    "draft_swa": {"vi": "Nháp (SWA)", "en": "Draft (SWA)"},
    "tap": {"vi": "lớp đích", "en": "tap"},
    "kv_quant": {"vi": "lượng tử hóa KV (kv_quant)", "en": "KV quantization (kv_quant)"},
    "on": {"vi": "bật", "en": "on"},
    "off": {"vi": "tắt", "en": "off"},
    # checks: each compares two different computations, so each can fail
    "check_hash": {
        "vi": "mã hàng Engram tính lại bằng tay (số nguyên Python, tràn int64 viết rõ) so với các hàng bộ nhớ đã "
        "đọc: số ô khác nhau",
        "en": "Engram row ids recomputed by hand (Python integers, int64 wrap-around written out) vs the rows "
        "the memory read: cells that differ",
    },
    "check_delta": {
        "vi": "‖g·value‖ = √(Σ_c g_c²)·‖value‖ tính lại từ cổng và value đã ghi: max |Δ|",
        "en": "‖g·value‖ = √(Σ_c g_c²)·‖value‖ recomputed from the recorded gates and value: max |Δ|",
    },
    "check_sources": {
        "vi": "nguồn KV / nguồn index trong bảng so với các lớp thực sự nén / chạy indexer trong forward này: "
        "số lớp lệch",
        "en": "KV / index sources in the table vs the layers that compressed / ran the indexer in this forward: "
        "layers that differ",
    },
    "check_split": {
        "vi": "encoder/decoder suy từ compress_ratios (decoder bắt đầu ở nguồn tỉ lệ 1) so với cột Phần "
        "(lab {lab}, thật {real}): số hàng lệch",
        "en": "encoder/decoder split from compress_ratios (the decoder starts at the ratio-1 source) vs the Part "
        "column (lab {lab}, real {real}): rows that differ",
    },
    "check_pool": {
        "vi": "mục nén tính lại từng cặp, RMSNorm(Σ softmax_cặp(wgate·x) ⊙ wkv·x), từ đầu vào attention đã ghi, "
        "so với cache (mọi nguồn, cả trọng số cổng): max |Δ|",
        "en": "compressed entries recomputed pair by pair, RMSNorm(Σ softmax_pair(wgate·x) ⊙ wkv·x), from the "
        "recorded attention input vs the cache (every source, gate weights too): max |Δ|",
    },
    "check_picks": {
        "vi": "mỗi truy vấn: mục chọn ⊆ mục nén nhân quả (và trong tập ứng viên), số mục = min(top-k, số mục được "
        "phép), điểm cao nhất: số truy vấn sai",
        "en": "every query: picks ⊆ causal compressed entries (and the candidate pool), count = min(top-k, "
        "allowed), highest scores: queries that fail",
    },
    "check_bytes": {
        "vi": "byte tính lại từ kích thước (FP8: 1 B mỗi giá trị + 1 B tỉ lệ mỗi 32; FP4: ½ B mỗi giá trị + 1 B "
        "mỗi 16 (KV) hoặc 32 (key indexer)) so với bảng, lab và thật: max |Δ|",
        "en": "bytes recomputed from the dims (FP8: 1 B a value + 1 scale byte per 32; FP4: ½ B a value + 1 per "
        "16 (KV) or 32 (index keys)) vs the table, toy and real: max |Δ|",
    },
    "check_qdq": {
        "vi": "mọi giá trị trong cache nằm trong giới hạn làm tròn của định dạng (FP8 E4M3: |x̃−x| ≤ |x|/16 + "
        "s/1024; FP4 E2M1: ≤ |x|/4 + s/4 + 6δ): max sai số ÷ giới hạn",
        "en": "every cached value within its format's rounding bound (FP8 E4M3: |x̃−x| ≤ |x|/16 + s/1024; "
        "FP4 E2M1: ≤ |x|/4 + s/4 + 6δ): max error ÷ bound",
    },
    "check_topk": {
        "vi": "expert được chọn = k giá trị điểm + bias lớn nhất, sắp xếp lại bằng tay (mọi token, mọi lớp): "
        "số token lệch",
        "en": "chosen experts = the k highest score + bias, sorted again by hand (every token, every layer): "
        "tokens that differ",
    },
    "check_weights": {
        "vi": "trọng số = {s}·a_E / Σa_E tính lại từ điểm đã ghi (k > 1: chuẩn hóa): max |Δ|",
        "en": "weights = {s}·a_E / Σa_E recomputed from the recorded scores (k > 1: normalized): max |Δ|",
    },
    "check_taps": {
        "vi": "main_x bộ vẽ nhận = main_norm({mix}) dựng lại từ đầu vào các lớp đích bắt bằng hook trong một "
        "forward thứ hai: max |Δ|",
        "en": "main_x the draft received = main_norm({mix}) rebuilt from the tap layers' inputs caught by hooks "
        "in a second forward: max |Δ|",
    },
    # the scheduler section of 6B: what `dspark` (Algorithm 1) would verify of this round under load
    "sched_title": {
        "vi": "Bộ lập lịch: chính sách dspark (Algorithm 1, bảng SPS(B) đo sẵn của lab) sẽ verify bao nhiêu token "
        "nháp của vòng này khi tải cao — mô phỏng: c của vòng này xếp chồng R lần thành đầu vào [R, k]",
        "en": "Scheduler: how many of this round's drafts the dspark policy (Algorithm 1, the lab's shipped SPS(B) "
        "table) would verify under load — a simulation: this round's c stacked R times as the [R, k] input",
    },
    "sched_sent": {"vi": "gửi đi (● có, ○ không)", "en": "sent (● yes, ○ no)"},
    "sched_mean": {"vi": "ℓ trung bình", "en": "mean ℓ"},
    "sched_tau": {"vi": "τ* kỳ vọng", "en": "expected τ*"},
    "sched_theta": {"vi": "Θ = τ*·SPS(B) token/giây", "en": "Θ = τ*·SPS(B) tokens/s"},
    "survival": {"vi": "xác suất sống sót a_j = Π c của vòng này", "en": "survival a_j = Π c of this round"},
    "sched_note": {
        "vi": "Đầu tin cậy c dùng để làm gì: bộ lập lịch đọc a_j = c_1·…·c_j, số token kỳ vọng mà việc verify token "
        "nháp j đem lại, rồi đi theo đường tham lam (a lớn trước) và dừng ở token đầu tiên không làm tăng "
        "Θ = τ*·SPS(B). Khi ít yêu cầu, một token nữa trong batch gần như không tốn gì: verify gần hết; khi nhiều "
        "yêu cầu, mỗi token làm chậm cả batch: chỉ token nháp đủ chắc mới được gửi. Ở đây R bản sao của cùng một "
        "vòng (các bản sao bằng nhau thì hòa, phân xử theo thứ tự yêu cầu: cột ℓ là của bản sao 0, ℓ trung bình "
        "là của cả R). Vòng ở bảng trên dùng chính sách cố định ℓ = {l} (--block). Chạy thật với nhiều yêu cầu: "
        "`dspark-lab serve`; mô phỏng tải với các vòng đã ghi: `dspark-lab schedule`; notebook 08.",
        "en": "What the confidence c is for: the scheduler reads a_j = c_1·…·c_j, the tokens that verifying draft j "
        "is expected to add, walks the greedy path (largest a first) and stops at the first draft that does not "
        "raise Θ = τ*·SPS(B). With few requests one more batch token costs almost nothing: it verifies nearly "
        "everything; with many, every token slows the whole batch: only confident drafts are sent. Here the R "
        "requests are R copies of this one round (equal copies tie, broken by request index: the ℓ column is copy "
        "0's, the mean ℓ all R copies'). The round in the table above used a fixed policy, ℓ = {l} (--block). "
        "Real requests in flight: `dspark-lab serve`; the load simulation on recorded rounds: `dspark-lab "
        "schedule`; notebook 08.",
    },
    "sched_monotone": {
        "vi": "ℓ không tăng khi R tăng (R = {rs}): {ok}. Trên một bảng SPS(B) đo thật điều này không được bảo đảm: "
        "một chỗ gãy của bảng có thể khiến batch lớn hơn nhận thêm một token nháp.",
        "en": "ℓ non-increasing as R grows (R = {rs}): {ok}. On a measured SPS(B) table this is not guaranteed: a "
        "bend in the table can make a larger batch admit one more draft.",
    },
    "yes": {"vi": "đúng", "en": "yes"},
    "no": {"vi": "không", "en": "no"},
    "check_sched": {
        "vi": "ℓ của Scheduler('dspark') = ℓ của Algorithm 1 tính lại bằng một vòng lặp thường trên đường tham lam "
        "(R = {rs}): số yêu cầu lệch",
        "en": "ℓ from Scheduler('dspark') = ℓ of Algorithm 1 recomputed by a plain loop over the greedy path "
        "(R = {rs}): requests that differ",
    },
    "check_verify": {
        "vi": "quyết định của verify khớp min(1, p_t/p_d) tính từ các số trong bảng (T = 0: giữ ⇔ 1; T > 0: "
        "không giữ khi 0, không từ chối khi 1): số vị trí lệch",
        "en": "verify's decisions match min(1, p_t/p_d) from the numbers in the table (T = 0: keep ⇔ 1; "
        "T > 0: never keep at 0, never reject at 1): positions that disagree",
    },
}
NOTES = Texts(NOTES, "note")

EQUATION_VI = {  # prose inside the registry's equations (math symbols and identifiers stay)
    "verify keeps d_i with prob": "verify giữ d_i với xác suất",
    "global KV": "KV toàn cục",
    "ratio 2:": "tỉ lệ 2:",
    "ratio 1:": "tỉ lệ 1:",
}
# the seed lesson's setting (../shared/seeds/000_*.txt): untrained, taps 3 and 4 mixed 0.5/0.5, 3 draft tokens
LESSON = {"taps": "3, 4", "mix": "0.5/0.5", "block": 3, "tokens": "2, 1, 6", "p_d": [0.167, 0.234, 0.173]}


def equation(step: Step, lang: str) -> str:
    """The step's equation with its few words of prose in `lang`."""
    eq = step.equation
    if check_lang(lang) == "vi":
        for en, vi in EQUATION_VI.items():
            eq = eq.replace(en, vi)
    return eq


def layer_label(name: str, layer: int, lang: str) -> str:
    """ "row_ids (layer 0)" / "row_ids (lớp 0)" — a shape's name at one layer."""
    return f"{name} ({NOTES('at_layer', lang, l=layer)})"


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
    data: dict[str, Any] = field(default_factory=dict)  # language-free numbers for --json readers (6B: verify_len…)

    def to_json(self) -> dict[str, Any]:
        return {
            "id": self.step.id,
            "title": self.step.t("title", self.lang),
            "shapes": {k: list(v) for k, v in self.shapes},
            "facts": {k: v for k, v in self.facts},
            "checks": [{"name": c.name, "value": c.value, "threshold": c.threshold, "ok": c.ok} for c in self.checks],
            "tables": [{"title": t.title, "columns": t.columns, "rows": t.rows} for t in self.tables],
            "notes": self.notes,
            "data": self.data,
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
    hooked_taps: dict[int, torch.Tensor] | None = None  # tap inputs caught by hooks in the parity forward
    lesson: Round | None = None  # the lesson's setting on this prompt: untrained, block 3, greedy (see 6B)


def run_walk(
    prompt: str = DEFAULT_PROMPT,
    preset: str = "lab",
    seed: int = 0,
    lang: str = "en",
    steps: tuple[str, ...] | None = None,
    block: int | None = None,
    temperature: float = 0.0,
    weights: str = "trained",
    checkpoint: str | None = None,
) -> Walk:
    """Tokenize, run one traced forward (and a second for the parity check), one DSpark round, the views.

    weights="trained" loads the shipped lab weights (target + DSpark draft); "untrained" builds the seeded
    random init. The seed also drives the sampling of the round."""
    seed = check_seed(seed)
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
    temperature = check_temperature(temperature)
    model = lab_model(weights, seed, checkpoint=checkpoint)
    tokens = torch.tensor([ids], dtype=torch.long)
    trace = Trace()
    with torch.no_grad():
        cache = model.new_cache(1)
        out = model(tokens, cache=cache, trace=trace)
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
        weights=weights,
        hooked_taps=hooked,
    )
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
    temperature = check_temperature(temperature)
    gen = torch.Generator().manual_seed(walk.seed)
    draft_trace = Trace(sinkhorn_history=False)
    with torch.no_grad():
        cache = copy.deepcopy(walk.prompt_cache)
        anchor = next_token(walk.logits[:, -1], temperature, gen)  # [1]
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


def sig(x: float, n: int = 4) -> float:
    """x to n significant digits (a small probability stays readable: 1.2e-05, not 0)."""
    return float(f"{float(x):.{n}g}")


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
            UI("token", lang),
            [UI("position", lang), UI("token_id", lang), UI("token", lang), NOTES("engram_id", lang)],
            rows,
        )
    )
    spread = float((streams - streams[:, :, :1]).abs().max())
    v.checks.append(Check(NOTES("copies_equal", lang), spread, 0.0))
    v.facts += [
        (NOTES("premix", lang), [r(x) for x in pre[0, 0].tolist()]),
        (NOTES("emb_norm", lang), r(emb[0].norm(dim=-1).mean())),
    ]
    return v


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


def verdict_text(w: Walk, lang: str) -> str:
    """One line on what verify did in the walk's round (kept n of the ℓ drafts sent to verify)."""
    rd = w.round
    kind = verify_label(rd.next_kind, lang)
    return NOTES(
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
            NOTES("topk", lang, k=k),
            ["#", UI("token", lang), UI("token_id", lang), UI("logit", lang), UI("probability", lang)],
            [
                [i + 1, tok_text(w, t), int(t), r(lv), r(probs[t])]
                for i, (lv, t) in enumerate(zip(top.values.tolist(), top.indices.tolist(), strict=True))
            ],
        )
    )
    v.checks.append(Check(NOTES("parity_check", lang), w.parity, 1e-9))
    taps = [w.taps[l][0, -1] for l in cfg.dspark_target_layer_ids]
    rows = [[l, r(t.norm()), r(t.mean()), r(t.std())] for l, t in zip(cfg.dspark_target_layer_ids, taps, strict=True)]
    v.tables.append(ViewTable(NOTES("taps", lang), [UI("layer", lang), "‖h‖", UI("mean", lang), UI("std", lang)], rows))
    hooked = w.hooked_taps if w.hooked_taps is not None else hooked_forward(w.model, w.tokens)[1]
    v.checks.append(
        Check(
            NOTES("check_taps", lang, mix=mix_formula(cfg)), main_x_error(w.model, tr.get("6B", "main_x"), hooked), 1e-9
        )
    )
    v.facts += [(NOTES("uniform", lang), r(1.0 / cfg.vocab_size, 5)), (NOTES("max_p", lang), r(probs.max(), 5))]
    v.tables.append(lesson_table(w, lang))
    v.tables.append(draft_table(w, lang))
    rd = w.round
    v.checks.append(Check(NOTES("check_verify", lang), float(verify_disagreements(verify_rows(w), w.temperature)), 0.0))
    plans = load_plans(rd.confidence)
    v.tables.append(scheduler_table(w, plans, lang))
    loads = ", ".join(str(p.requests) for p in plans)
    v.checks.append(Check(NOTES("check_sched", lang, rs=loads), float(scheduler_disagreements(rd, plans)), 0.0))
    v.shapes += [
        (NOTES("draft_logits", lang), (1, rd.drafted, cfg.vocab_size)),
        (NOTES("conf_shape", lang), (1, rd.drafted)),
    ]
    v.facts += [
        (UI("accepted_length", lang), rd.tau),
        (UI("acceptance_rate", lang), r(rd.n_accepted / rd.block)),  # over the ℓ verified positions only
        (UI("block_size", lang), rd.drafted),
        (UI("verify_len", lang), rd.block),
        (NOTES("survival", lang), [r(a, 3) for a in survival_of(rd.confidence)]),
        (UI("temperature", lang), w.temperature),
        (UI("weights", lang), UI(w.weights, lang)),
    ]
    monotone = all(a.verify_len >= b.verify_len for a, b in zip(plans, plans[1:], strict=False))
    v.notes += [
        verdict_text(w, lang),
        NOTES("prefix_note", lang, k=rd.drafted, l=rd.block),
        NOTES("t0_note", lang) if w.temperature == 0 else NOTES("t_note", lang, t=f"{w.temperature:g}"),
        NOTES("not_acceptance", lang),
        NOTES("sched_note", lang, l=rd.block),
        NOTES("sched_monotone", lang, rs=loads, ok=NOTES("yes" if monotone else "no", lang)),
        UI("warning_untrained" if w.weights == "untrained" else "note_trained", lang),
        NOTES("lesson_pd", lang, v=cfg.vocab_size, u=r(1.0 / cfg.vocab_size, 5)),
        NOTES("lesson_prefix", lang, k=lesson_round(w).drafted),
        NOTES("why_k", lang),
        NOTES("why_taps", lang),
    ]
    v.data = {
        "drafted": rd.drafted,
        "verify_len": rd.block,
        "status": list(rd.status),
        "n_accepted": rd.n_accepted,
        "tau": rd.tau,
        "scheduler": {
            "policy": "dspark",
            "sps_table": "lab/serving/data/sps_lab_cpu.json",
            "input": "this round's confidences stacked R times as [R, k]",
            "loads": [p.to_json() for p in plans],
            "non_increasing": monotone,
        },
    }
    return v


def mix_formula(cfg: ModelConfig) -> str:
    """ "0.5·h₃ + 0.5·h₄" (the lab's mean mix) or "main_proj([h₃; h₄])"."""
    sub = str.maketrans("0123456789", "₀₁₂₃₄₅₆₇₈₉")
    hs = [f"h{l}".translate(sub) for l in cfg.dspark_target_layer_ids]
    if cfg.dspark_tap_mix == "mean":
        return " + ".join(f"{1 / len(hs):g}·{h}" for h in hs)
    return f"main_proj([{'; '.join(hs)}])"


def verify_rows(w: Walk) -> list[dict[str, Any]]:
    """One dict per draft position of the walk's round with the numbers verify used (see `round_verify_rows`);
    at T = 0 the draft's argmax comes from the recorded draft logits."""
    greedy = w.temperature == 0
    draft_argmax = w.draft_trace.get("6B", "draft_logits")[0].argmax(-1).tolist() if greedy else None
    return round_verify_rows(w.round, w.temperature, draft_argmax)


def round_verify_rows(rd: Round, temperature: float, draft_argmax: list[int] | None = None) -> list[dict[str, Any]]:
    """One dict per drafted position with the numbers verify used: at T = 0 the one-hot (argmax) values, so
    p_d(x) = 1 and p_t(x) ∈ {0, 1}; at T > 0 softmax(logits / T). `soft_*` keep the softmax T = 1 values at
    T = 0 (for reference; verify did not use them). A kept draft that is not the target's argmax is flagged.
    A draft past the verify length ℓ (`rd.block`; its status says "not sent") was never shown to the target: its
    p_t, ratio and target argmax are None (only the drafter's own numbers exist).

    At T = 0 the drafter takes its own argmax, so without `draft_argmax` (the draft logits' argmax per position)
    p_d(x) = 1 for every drafted token; with it, p_d(x) = [x == draft argmax] is recomputed from the logits."""
    temperature = check_temperature(temperature)
    greedy = temperature == 0
    rows = []
    for i, x in enumerate(rd.draft):
        sent = i < rd.block  # from ℓ, not from the status: the check compares the two
        if greedy:
            p_d = 1.0 if draft_argmax is None else float(x == draft_argmax[i])
            p_t = float(x == rd.target_argmax[i]) if sent else None
        else:
            p_d, p_t = rd.draft_probs[i], rd.target_probs[i] if sent else None
        verified = sent and rd.status[i] != NOT_VERIFIED
        rows.append(
            {
                "position": rd.position + 1 + i,
                "token": x,
                "p_d": p_d,
                "p_t": p_t,
                "ratio": min(1.0, p_t / max(p_d, 1e-12)) if verified else None,
                "confidence": rd.confidence[i],
                "target_argmax": rd.target_argmax[i] if sent else None,
                "status": rd.status[i],
                "sent": sent,
                "sampled_not_argmax": rd.status[i] == ACCEPTED and x != rd.target_argmax[i],
                "soft_p_d": rd.draft_probs[i] if greedy else None,
                "soft_p_t": rd.target_probs[i] if greedy and sent else None,
            }
        )
    return rows


def next_row(w: Walk) -> dict[str, Any]:
    """The target's own token of the round (the replacement at the first rejection, or the bonus)."""
    rd = w.round
    argmax = rd.target_argmax[rd.n_accepted]
    return {
        "position": rd.position + 1 + rd.n_accepted,
        "token": rd.next_token,
        "target_argmax": argmax,
        "status": rd.next_kind,
        "sampled_not_argmax": rd.next_token != argmax,
    }


def verify_disagreements(rows: list[dict[str, Any]], temperature: float) -> int:
    """Positions where the verdict contradicts min(1, p_t/p_d) computed from the shown numbers: at T = 0 the
    ratio is 1 (keep) or 0 (reject); at any T a draft at ratio 0 is never kept, one at ratio 1 never rejected.
    A draft whose status says "not sent" but sits inside the verify length ℓ (or the other way round) counts as a
    disagreement too."""
    bad = 0
    for row in rows:
        if (row["status"] == NOT_SENT) == row["sent"]:
            bad += 1
            continue
        if row["ratio"] is None:
            continue
        kept = row["status"] == ACCEPTED
        if temperature == 0:
            bad += kept != (row["ratio"] == 1.0)
        else:
            bad += (kept and row["ratio"] == 0.0) or (row["status"] == REJECTED and row["ratio"] == 1.0)
    return bad


def status_text(row: dict[str, Any], lang: str) -> str:
    """ "accepted", or "accepted (sampled, not argmax)" where the token is not the target's argmax."""
    text = verify_label(row["status"], lang)
    return f"{text} ({NOTES('sampled', lang)})" if row["sampled_not_argmax"] else text


def dash(x: float | None, fmt: Any = None) -> Any:
    """ "—" for a number that does not exist (a draft never sent to verify), else x (formatted by `fmt`)."""
    return "—" if x is None else (x if fmt is None else fmt(x))


def draft_table(w: Walk, lang: str) -> ViewTable:
    """What verify did, position by position, with the numbers it used (one row per drafted token — the ones past ℓ
    marked "not sent to verify", with "—" where the target never looked — then the target's own token)."""
    rd, greedy = w.round, w.temperature == 0
    rows = []
    for row in verify_rows(w):
        cells = [row["position"], tok_text(w, row["token"]), sig(row["p_d"]), dash(row["p_t"], sig)]
        cells += [dash(row["ratio"], sig), r(row["confidence"]), dash(row["target_argmax"], lambda t: tok_text(w, t))]
        cells.append(status_text(row, lang))
        if greedy:
            cells.append(f"{sig(row['soft_p_d'], 3):g} / {dash(row['soft_p_t'], lambda p: f'{sig(p, 3):g}')}")
        rows.append(cells)
    nxt = next_row(w)
    blank = [""] * 4
    rows.append(
        [nxt["position"], tok_text(w, nxt["token"])]
        + blank
        + [tok_text(w, nxt["target_argmax"]), status_text(nxt, lang)]
        + ([""] if greedy else [])
    )
    cols = [NOTES(c, lang) for c in ("pos_short", "pd_col", "pt_col", "ratio_col", "c_col", "argmax_col", "status")]
    cols.insert(1, UI("draft_token", lang))
    if greedy:
        cols.append(NOTES("soft_col", lang))
    title = NOTES("draft_block", lang, a=w.tokenizer.token_text(rd.anchor), n=rd.drafted - 1, l=rd.block)
    return ViewTable(title, cols, rows)


# ---- 6B · the scheduler: what `dspark` would verify of this round under load --------------------------
SCHEDULER_LOADS = (1, 8, 64, 256)  # requests in flight in the 6B scheduler table
SPS_TABLE = "lab/serving/data/sps_lab_cpu.json"  # the shipped measured SPS(B) (`dspark-lab profile --sps`)
MAX_LOAD = 256  # the most requests in flight the 6B screens simulate (the inspector's slider goes 1..256)


@functools.lru_cache(maxsize=1)
def shipped_sps() -> StepRate:
    """The measured SPS(B) table that ships with the lab (read once)."""
    from ..serving.schedule import read_table

    return read_table(None)


@dataclass(frozen=True)
class LoadPlan:
    """What `dspark` (Algorithm 1) verifies of one round's drafts with R copies of that round in flight."""

    requests: int  # R
    lengths: tuple[int, ...]  # ℓ per copy: equal copies tie, and the tie-break by request index may give the first
    # ones one draft more than the rest
    batch_tokens: int  # B = Σ (1 + ℓ)
    expected_tokens: float  # τ* = Σ (1 + Σ_{j≤ℓ} a_j)
    throughput: float  # Θ = τ*·SPS(B), expected committed tokens per second

    @property
    def verify_len(self) -> int:
        """ℓ of copy 0 (this prompt)."""
        return self.lengths[0]

    @property
    def mean_verify_len(self) -> float:
        return sum(self.lengths) / self.requests

    def sent(self, drafted: int) -> str:
        """ "●●●○○": which of copy 0's drafts go to verify (● sent, ○ not sent)."""
        return "●" * self.verify_len + "○" * (drafted - self.verify_len)

    def to_json(self) -> dict[str, Any]:
        return {
            "requests": self.requests,
            "verify_len": self.verify_len,
            "verify_len_min": min(self.lengths),
            "verify_len_max": max(self.lengths),
            "mean_verify_len": self.mean_verify_len,
            "batch_tokens": self.batch_tokens,
            "expected_tokens": self.expected_tokens,
            "throughput": self.throughput,
        }


def check_load(requests: Any) -> int:
    return check_int(requests, "requests in flight", 1, MAX_LOAD, "the loads the 6B screens simulate")


def survival_of(confidence: Sequence[float]) -> list[float]:
    """a_j = c_1·…·c_j, left to right in Python floats."""
    out, run = [], 1.0
    for c in confidence:
        run *= float(c)
        out.append(run)
    return out


def load_plan(confidence: Sequence[float], requests: int, sps: StepRate | None = None) -> LoadPlan:
    """The verify lengths `Scheduler("dspark")` picks when this round's confidences c [k] are stacked `requests`
    times as its [R, k] input — a simulated load of R copies of one request (real batches mix requests)."""
    requests = check_load(requests)
    sps = shipped_sps() if sps is None else sps
    c = torch.tensor([list(confidence)] * requests, dtype=torch.float64)  # [R, k]
    plan = Scheduler("dspark", c.size(1), sps=sps).plan(c)
    return LoadPlan(requests, tuple(plan.lengths.tolist()), plan.batch_tokens, plan.expected_tokens, plan.throughput)


def load_plans(
    confidence: Sequence[float], loads: Sequence[int] = SCHEDULER_LOADS, sps: StepRate | None = None
) -> list[LoadPlan]:
    return [load_plan(confidence, R, sps) for R in loads]


def naive_lengths(confidence: Sequence[float], requests: int, sps: StepRate | None = None) -> list[int]:
    """Algorithm 1 as the paper writes it, one candidate at a time: sort every (r, j) by a_j (ties: position, then
    request), start from Θ_best = R·SPS(R), admit a candidate while Θ = τ*·SPS(B) rises, stop at the first that
    does not. The reference the scheduler table's check compares `Scheduler("dspark")` with."""
    requests = check_load(requests)
    sps = shipped_sps() if sps is None else sps
    a, k = survival_of(confidence), len(confidence)
    rate = sps.steps_per_s(torch.arange(requests, requests * (k + 1) + 1)).tolist()  # SPS(B), B = R .. R(k + 1)
    path = sorted(((a[j], j, r) for j in range(k) for r in range(requests)), key=lambda t: (-t[0], t[1], t[2]))
    lengths = [0] * requests
    tau, b = float(requests), requests
    best = tau * rate[0]
    for value, j, r in path:
        theta = (tau + value) * rate[b + 1 - requests]
        if not theta > best:
            break
        lengths[r], tau, b, best = j + 1, tau + value, b + 1, theta
    return lengths


def scheduler_disagreements(rd: Round, plans: Sequence[LoadPlan], sps: StepRate | None = None) -> int:
    """Requests whose ℓ differs between the scheduler's plan and the naive loop, over every load shown."""
    return sum(
        a != b for p in plans for a, b in zip(p.lengths, naive_lengths(rd.confidence, p.requests, sps), strict=True)
    )


def scheduler_table(w: Walk, plans: Sequence[LoadPlan], lang: str) -> ViewTable:
    """R | ℓ (copy 0) | mean ℓ | sent ●/○ | B | τ* | Θ, one row per load."""
    drafted = w.round.drafted
    rows = [
        [p.requests, p.verify_len, r(p.mean_verify_len, 2), p.sent(drafted), p.batch_tokens]
        + [r(p.expected_tokens, 2), r(p.throughput, 1)]
        for p in plans
    ]
    cols = [UI("requests_in_flight", lang), "ℓ", NOTES("sched_mean", lang), NOTES("sched_sent", lang), "B"]
    cols += [NOTES("sched_tau", lang), NOTES("sched_theta", lang)]
    return ViewTable(NOTES("sched_title", lang), cols, rows)


def lesson_round(w: Walk) -> Round:
    """The lesson's setting on this prompt: untrained weights (the walk's seed), 3 drafts verified, greedy — the
    drafter drafts its whole trained block and sends the first 3 to verify.
    Computed once per walk (an untrained model is built only when the walk runs the trained one)."""
    if w.lesson is None:
        with torch.no_grad():
            if w.weights == "untrained":
                model, cache, logits = w.model, copy.deepcopy(w.prompt_cache), w.logits
            else:
                model = lab_model("untrained", w.seed)
                cache = model.new_cache(1)
                logits = model(w.tokens, cache=cache).logits
            anchor = logits[:, -1].argmax(-1)  # [1]
            w.lesson = speculative_round(model, cache, anchor, LESSON["block"], 0.0, None)[0]
    return w.lesson


def marked_drafts(w: Walk, rd: Round) -> str:
    """ "a, b, c, ○d, ○e": the drafts, those not sent to verify marked ○."""
    marks = ["○" if st == NOT_SENT else "" for st in rd.status]
    return ", ".join(m + tok_text(w, t) for m, t in zip(marks, rd.draft, strict=True))


def lesson_table(w: Walk, lang: str) -> ViewTable:
    """The lesson's setting (seed 000: taps 3, 4 mixed 0.5/0.5, 3 untrained drafts) beside the lab's untrained
    round that verifies 3 of its drafted block, this round, and the real model's setting."""
    cfg, rd, less = w.cfg, w.round, lesson_round(w)
    real = get_config("flash")
    soft = w.draft_trace.get("6B", "draft_logits")[0].softmax(-1)  # this round's p_d at T = 1
    this_pd = [r(float(soft[i, x]), 3) for i, x in enumerate(rd.draft)]

    def taps(c: ModelConfig) -> str:
        return ", ".join(map(str, c.dspark_target_layer_ids))

    n = len(cfg.dspark_target_layer_ids)
    mix = "/".join([f"{1 / n:g}"] * n) if cfg.dspark_tap_mix == "mean" else NOTES("concat", lang)
    rows = [
        [NOTES("row_taps", lang), LESSON["taps"], taps(cfg), taps(cfg), taps(real)],
        [NOTES("row_mix", lang), LESSON["mix"], mix, mix, NOTES("concat", lang)],
        [NOTES("row_k", lang), LESSON["block"], less.drafted, rd.drafted, real.dspark_block_size],
        [NOTES("row_l", lang), "—", less.block, rd.block, NOTES("real_l", lang)],
        [
            NOTES("row_weights", lang),
            UI("untrained", lang),
            UI("untrained", lang),
            UI(w.weights, lang),
            UI("trained", lang),
        ],
        [NOTES("row_tokens", lang), LESSON["tokens"], marked_drafts(w, less), marked_drafts(w, rd), "—"],
        [NOTES("row_pd", lang), LESSON["p_d"], [r(p, 3) for p in less.draft_probs], this_pd, "—"],
        ["1/V", "—", r(1 / cfg.vocab_size, 5), r(1 / cfg.vocab_size, 5), f"1/{real.vocab_size}"],
        [
            NOTES("row_kept", lang),
            NOTES("not_verified_lesson", lang),
            f"{less.n_accepted}/{less.block}",
            f"{rd.n_accepted}/{rd.block}",
            "—",
        ],
    ]
    cols = [
        "",
        NOTES("lesson_col", lang),
        NOTES("lab_col", lang, w=UI("untrained", lang), k=less.drafted, l=less.block),
        NOTES("lab_col", lang, w=UI(w.weights, lang), k=rd.drafted, l=rd.block),
        NOTES("real_col", lang),
    ]
    return ViewTable(NOTES("lesson_title", lang), cols, rows)


def param_counts(cfg: ModelConfig) -> dict[str, int]:
    """`model.count_params(build_model(cfg))` from the config alone: backbone, engram, draft, total — the same
    numbers without building anything (the real-size model has 63,903 modules). Mirrors the modules' shapes one
    by one; tests/test_budgets.py pins it to the built lab and flash models."""
    from dspark_mini.engram import engram_num_embeddings

    D, V, hc, Dh, Rq = cfg.dim, cfg.vocab_size, cfg.hc_mult, cfg.head_dim, cfg.q_lora_rank
    H, G, R, Hi, Di = cfg.n_heads, cfg.o_groups, cfg.o_lora_rank, cfg.index_n_heads, cfg.index_head_dim
    L, I = cfg.n_layers, cfg.moe_inter_dim
    n_mix = (2 + hc) * hc

    def block(layer: int) -> int:
        backbone = layer < L
        n = D * Rq + Rq + Rq * H * Dh + D * Dh + Dh + (H * Dh // G) * (G * R) + G * R * D + H  # attention
        if backbone and layer in cfg.kv_source_layers:  # compressor: wkv (+ wgate at ratio 2) and its norm
            n += (2 if cfg.compress_ratios[layer] > 1 else 1) * D * Dh + Dh
        if backbone and layer in cfg.index_source_layers:  # indexer: wq_b, weights_proj (+ wk, k_norm: owners)
            n += Rq * Hi * Di + D * Hi + ((Dh * Di + Di) if layer in cfg.kv_source_layers else 0)
        E = cfg.n_routed_experts if backbone else cfg.dspark_n_routed_experts
        n += E * D + E + E * 3 * D * I + 3 * D * I * cfg.n_shared_experts  # gate, routed and shared experts
        n += 2 * D + 2 * (n_mix * hc * D + n_mix + 3)  # attn_norm, ffn_norm; hc_attn, hc_ffn
        if backbone and layer in cfg.engram_layer_ids:  # the Engram projections (its table is counted apart)
            n += cfg.engram_n_hash_cols * cfg.engram_head_dim * D * (hc + 1) + 2 * hc * D
        return n

    engram = sum(engram_num_embeddings(cfg)) * cfg.engram_head_dim
    backbone = 2 * V * D + D + sum(block(i) for i in range(L))  # embed, head, final norm, blocks
    draft = 0
    if cfg.n_mtp_layers:
        r = cfg.dspark_markov_rank
        taps = len(cfg.dspark_target_layer_ids)
        draft = (taps * D * D if cfg.dspark_tap_mix == "concat_proj" else 0) + 2 * D  # main_proj, main_norm, norm
        draft += sum(block(L + i) for i in range(cfg.n_mtp_layers))
        draft += V * r + V * r  # the Markov head's embed and head
        if cfg.dspark_markov_kind == "rnn":
            draft += (2 * r + D) * 3 * r + 3 * r  # its gated cell
        draft += D + r  # confidence head
    return {"backbone": backbone, "engram": engram, "draft": draft, "total": backbone + engram + draft}


def inspect_model(preset: str = "lab", seed: int = 0) -> dict[str, Any]:
    """Config tables, parameter counts and KV budgets, from the config alone: nothing is built (the real-size
    `flash` model would be built on the meta device; `device` names the device each would be built on)."""
    cfg = get_config(preset)
    params = param_counts(cfg)
    kb = kv_bytes(cfg)
    return {
        "preset": preset,
        "device": "meta" if preset == "flash" else "cpu",
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
    "LoadPlan",
    "SCHEDULER_LOADS",
    "load_plan",
    "load_plans",
    "naive_lengths",
    "scheduler_disagreements",
    "verdict_text",
    "inspect_model",
    "param_counts",
    "fmt_params",
    "sinkhorn_errors",
    "role_name",
    "view_2a",
    "view_4a",
    "view_5a",
]

"""The generated notes of the ten step views, in both languages (the step text itself lives in steps.py), and the
prose inside the registry's equations; LESSON is the setting of the Vietnamese 6B lesson the lab is built from
(untrained, taps 3 and 4 mixed 0.5/0.5, 3 draft tokens).
"""

from __future__ import annotations

from collections.abc import Sequence

from ..text import Texts, check_lang
from .steps import Step

# generated notes, both languages (step text itself lives in steps.py)
NOTES = {
    "copies_equal": {
        "vi": "4 làn giống hệt nhau (max |Δ| giữa các làn)",
        "en": "the 4 lanes are identical (max |Δ| between lanes)",
    },
    "premix": {"vi": "pre-mix ban đầu", "en": "initial pre-mix"},
    # 1A: how the prompt was tokenized
    "tokenized_title": {"vi": "Prompt được tách thành token thế nào", "en": "How the prompt was tokenized"},
    "word": {"vi": "Từ", "en": "Word"},
    "pieces": {"vi": "Mảnh (token)", "en": "Pieces (tokens)"},
    "how_split": {"vi": "Cách tách", "en": "How"},
    "whole_word": {"vi": "nguyên từ: 1 token", "en": "whole word: 1 token"},
    "word_marks": {"vi": "từ và dấu câu: {n} token", "en": "word and marks: {n} tokens"},
    "split": {"vi": "tách thành mảnh nhỏ: {n} token", "en": "split into pieces: {n} tokens"},
    "tokenized_whole": {
        "vi": "Prompt thành {n} token cho {words} từ; mọi từ đều có sẵn nguyên vẹn trong bộ từ vựng của lab.",
        "en": "The prompt became {n} tokens for {words} words; every word is a whole token of the lab vocabulary.",
    },
    "tokenized_split": {
        "vi": (
            "Prompt thành {n} token cho {words} từ; các từ không có nguyên vẹn trong bộ từ vựng của lab nên được "
            "tách thành các mảnh nhỏ hơn (một phần của từ, chữ cái hoặc byte): {split}."
        ),
        "en": (
            "The prompt became {n} tokens for {words} words; not whole tokens of the lab vocabulary, so split into "
            "smaller pieces (parts of words, letters or bytes): {split}."
        ),
    },
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
        "cố định: --verify-len, hay thanh trượt ℓ); token nháp sau ℓ là ‘không gửi đi verify’: forward thật không hề "
        "thấy chúng, nên không được giữ cũng không bị từ chối, và tỉ lệ giữ chỉ đếm {l} vị trí đã verify.",
        "en": "The lab always drafts its whole trained block (k = {k}) and sends the first {l} to verify (ℓ = {l}, a "
        "fixed policy: --verify-len, or the ℓ slider); drafts past ℓ are 'not sent to verify': the target never saw "
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
    # the lesson's setting next to the lab's (the Vietnamese 6B lesson, docs/sources.md)
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
        "vi": "Vì sao lab huấn luyện k = 5: 5 = [tok, noise×4] là khối của V4-Flash thật; với k = 5 "
        "DSpark của bộ đang kèm theo đạt τ bằng {t1}× của DFlash ở T = 1 và {greedy}× khi greedy "
        "(report.json; docs/training.md). "
        "Lab luôn vẽ đủ 5 token và verify một đoạn đầu ℓ ≤ 5, như các engine phục vụ: "
        "--verify-len 3 (hay thanh trượt ℓ) verify 3 token đầu, bằng khối của bài học.",
        "en": "Why the lab trains k = 5: 5 = [tok, noise×4] is the real V4-Flash block; at k = 5 the shipped "
        "DSpark reaches τ {t1}× DFlash's at T = 1 and {greedy}× greedy (report.json; docs/training.md). "
        "The lab always drafts all 5 and verifies a prefix ℓ ≤ 5, as serving engines do: "
        "--verify-len 3 (or the ℓ slider) verifies the first 3, the lesson's block size.",
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
        "là của cả R). Vòng ở bảng trên dùng chính sách cố định ℓ = {l} (--verify-len). Chạy thật với nhiều yêu cầu: "
        "`dspark-lab serve`; mô phỏng tải với các vòng đã ghi: `dspark-lab schedule`; notebook 08.",
        "en": "What the confidence c is for: the scheduler reads a_j = c_1·…·c_j, the tokens that verifying draft j "
        "is expected to add, walks the greedy path (largest a first) and stops at the first draft that does not "
        "raise Θ = τ*·SPS(B). With few requests one more batch token costs almost nothing: it verifies nearly "
        "everything; with many, every token slows the whole batch: only confident drafts are sent. Here the R "
        "requests are R copies of this one round (equal copies tie, broken by request index: the ℓ column is copy "
        "0's, the mean ℓ all R copies'). The round in the table above used a fixed policy, ℓ = {l} (--verify-len). "
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

# the words of `ece_text`: how STS moved one run of positions, the positions, the total
ECE_WORDS = Texts(
    {
        "level": {"vi": "gần như không đổi", "en": "level"},
        "lower": {"vi": "thấp hơn", "en": "lower"},
        "higher": {"vi": "cao hơn", "en": "higher"},
        "one": {"vi": "ở vị trí {p}", "en": "at position {p}"},
        "many": {"vi": "ở các vị trí {p}", "en": "at positions {p}"},
        "and": {"vi": " và ", "en": " and "},
        "total": {
            "vi": "; tổng trên các vị trí 1–{k}: {a} → {b} ({how})",
            "en": "; summed over positions 1–{k}: {a} → {b} ({how})",
        },
    },
    "ECE",
)


def _pct(x: float) -> str:
    return f"{100 * x:.1f}"


def _way(before: float, after: float) -> str:
    """How a calibration moved one ECE: "level" when equal at 0.1 %, else "lower" or "higher"."""
    return "level" if _pct(after) == _pct(before) else "lower" if after < before else "higher"


def _runs(ways: list[str]) -> list[list[int]]:
    """Neighbouring positions (0-based) that moved the same way, one list each."""
    runs: list[list[int]] = []
    for i, w in enumerate(ways):
        if runs and ways[runs[-1][-1]] == w:
            runs[-1].append(i)
        else:
            runs.append([i])
    return runs


def ece_text(rows: Sequence[tuple[float, float]], lang: str) -> str:
    """How a calibration moved the ECE at each draft position, from the data: `rows` [(before, after)] per position
    1..k (fractions). Neighbouring positions that moved the same way share one clause:
    "level at position 1 (7.8 %), lower at positions 2–4 (6.7 → 6.1, 8.7 → 6.5, 7.4 → 4.3 %) and higher at
    position 5 (5.1 → 6.1 %); summed over positions 1–5: 35.8 → 30.8 (lower)"."""
    ways = [_way(b, a) for b, a in rows]
    clauses = []
    for run in _runs(ways):
        how = ways[run[0]]
        if len(run) == 1:
            where = ECE_WORDS("one", lang, p=run[0] + 1)
        else:
            where = ECE_WORDS("many", lang, p=f"{run[0] + 1}–{run[-1] + 1}")
        pairs = [_pct(rows[i][0]) if how == "level" else f"{_pct(rows[i][0])} → {_pct(rows[i][1])}" for i in run]
        clauses.append(f"{ECE_WORDS(how, lang)} {where} ({', '.join(pairs)} %)")
    text = ", ".join(clauses[:-1]) + ECE_WORDS("and", lang) + clauses[-1] if len(clauses) > 1 else clauses[0]
    before, after = sum(b for b, _ in rows), sum(a for _, a in rows)
    how = ECE_WORDS(_way(before, after), lang)
    return text + ECE_WORDS("total", lang, k=len(rows), a=_pct(before), b=_pct(after), how=how)


EQUATION_VI = {  # prose inside the registry's equations (math symbols and identifiers stay)
    "verify keeps d_i with prob": "verify giữ d_i với xác suất",
    "global KV": "KV toàn cục",
    "ratio 2:": "tỉ lệ 2:",
    "ratio 1:": "tỉ lệ 1:",
}


# the Vietnamese 6B lesson's setting (docs/sources.md): untrained, taps 3 and 4 mixed 0.5/0.5, 3 draft tokens
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

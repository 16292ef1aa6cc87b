# %% [markdown]
# # 05 · Step 6B — the LM head and DSpark: draft, then verify
# **EN**
# - The head collapses the 4 lanes (`hc_pre` with the last pre-mix), applies RMSNorm and projects to logits `[B, V]`.
# - DSpark reads the taps (lab: layers 3 and 4 mixed 0.5/0.5), drafts a block `[anchor, noise×(k−1)]`, and its Markov
#   head picks the draft tokens left to right; each carries a **draft probability** p_d(x) and a **confidence** c.
# - Verify runs the real forward once over the drafts sent to it and keeps only what the target itself would have
#   produced.
#
# **VI**
# - Đầu ra gộp 4 làn (`hc_pre` với pre-mix cuối), chuẩn hóa RMSNorm rồi chiếu ra logits `[B, V]`.
# - DSpark đọc các lớp đích (lab: lớp 3 và 4 trộn 0.5/0.5), vẽ một khối `[anchor, noise×(k−1)]`, và MarkovHead chọn các
#   token nháp từ trái sang phải; mỗi token có **xác suất nháp** p_d(x) (xác suất theo phân phối draft, con số mà bài
#   học gọi là *confidence*) và giá trị **đầu tin cậy** c.
# - Verify chạy forward thật một lượt trên các token nháp được gửi tới và chỉ giữ những gì chính mô hình mục tiêu sẽ
#   sinh ra.

# %%
LANG = "en"  # "vi" for Vietnamese output / "vi" để xem kết quả bằng tiếng Việt
SEED = 0
PROMPT = "Xin chào các bạn, hôm nay chúng ta học về DSpark."

import torch
from rich import print as show

from dspark_mini.speculative import acceptance_stats, generate_speculative
from lab.present.fonts import notebook_font
from lab.screens import plots, widgets
from lab.screens import inspector, plots_6b
from lab.evaluation.quality import eval_prompts
from lab.lesson.exercises import check
from lab.screens.render import render_view
from lab.lesson.view_6b import load_plans
from lab.lesson.walk import redraft, run_walk
from lab.text import in_lang, verify_label

tr = in_lang(LANG)  # this notebook's own lines in LANG / các dòng in của notebook theo LANG
notebook_font()  # DSpark Mono: every Vietnamese letter in code and outputs / đủ mọi chữ tiếng Việt
torch.set_num_threads(1)
walk = run_walk(PROMPT, seed=SEED, lang=LANG)  # the shipped trained weights (lab/weights)
cfg = walk.cfg
print(tr("taps", "lớp đích"), cfg.dspark_target_layer_ids, tr("mixed", "trộn"), cfg.dspark_tap_mix,
      tr("· block", "· khối nháp"), cfg.dspark_block_size, tr("· Markov rank", "· hạng Markov"), cfg.dspark_markov_rank)

# %% [markdown]
# ## Logits and parity / Logits và parity
# **EN** — Two forwards of the same input must give identical logits (max |Δ| = 0, threshold 1e-9).
#
# **VI** — Hai lượt forward cùng đầu vào phải cho logits giống hệt (max |Δ| = 0, ngưỡng 1e-9).

# %%
print(tr("parity max |Δ| =", "parity logits: max |Δ| ="), walk.parity)
assert walk.parity <= 1e-9  # probe
plots_6b.logits_bar(walk, 10, lang=LANG)

# %% [markdown]
# ## Taps: layers 3 and 4, mixed 0.5/0.5 / Lớp đích: lớp 3 và 4, trộn 0.5/0.5
# **EN** — A check that can fail: run the prompt a second time with forward hooks on layers 3 and 4 (not the model's
# own tap code) to catch their input streams h₃, h₄ (mean over the 4 lanes), rebuild main_norm(0.5·h₃ + 0.5·h₄) by
# hand and compare it with the `main_x` the draft actually received. Wrong layers or a wrong mix give a gap ≫ 0.
#
# **VI** — Một phép kiểm có thể sai: chạy prompt thêm một lượt, gắn hook vào lớp 3 và 4 (không dùng mã lấy lớp đích
# của mô hình) để bắt luồng đầu vào h₃, h₄ (trung bình 4 làn), tự tính lại main_norm(0.5·h₃ + 0.5·h₄) rồi so với
# `main_x` mà bộ vẽ nháp thật sự nhận. Lấy sai lớp hay trộn sai thì độ lệch sẽ ≫ 0.

# %%
from lab.evaluation.profiling import hooked_forward, main_x_error  # noqa: E402

_, hooked = hooked_forward(walk.model, walk.tokens)  # a second forward; hooks catch layers 3 and 4's inputs
err = main_x_error(walk.model, walk.trace.get("6B", "main_x"), hooked)
print("max |main_x − main_norm(0.5·h₃ + 0.5·h₄)| =", err)
assert err == 0.0  # probe: the draft read layers 3 and 4, mixed 0.5/0.5

# %% [markdown]
# ## One round: draft → verify / Một vòng: vẽ nháp → verify
# **EN**
# - Every round the drafter drafts its whole trained block, k = 5 tokens. Only a **prefix** of ℓ ≤ k of them is sent
#   to verify: the *verify length* (here a fixed policy, ℓ = `--verify-len`, 5 by default). Drafts past ℓ are
#   "not sent to verify": the target never sees them, so they are neither accepted nor rejected.
# - The last table of the view is the **scheduler**: what the `dspark` policy (DSpark's Algorithm 1) would send of
#   this round when R requests share the target's batch. It reads the survival a_j = c_1·…·c_j — this is what the
#   confidence c is for. Notebook 08 teaches the scheduler.
#
# **VI**
# - Mỗi vòng bộ vẽ vẽ cả khối đã huấn luyện, k = 5 token. Chỉ một **đoạn đầu** ℓ ≤ k token được gửi đi verify: *độ
#   dài verify* (ở đây là chính sách cố định, ℓ = `--verify-len`, mặc định 5). Token nháp sau ℓ là "không gửi đi verify":
#   mô hình đích không hề thấy chúng, nên chúng không được giữ cũng không bị từ chối.
# - Bảng cuối của view là **bộ lập lịch**: chính sách `dspark` (Algorithm 1 của DSpark) sẽ gửi bao nhiêu token nháp
#   của vòng này khi R yêu cầu dùng chung batch của mô hình mục tiêu. Nó đọc xác suất sống sót a_j = c_1·…·c_j — c
#   dùng để làm việc đó. Notebook 08 dạy bộ lập lịch.

# %%
show(render_view(walk.views["6B"]))
rd = walk.round
assert rd.k == cfg.dspark_block_size and rd.tau == rd.n_accepted + 1  # probe: the whole block is drafted
plots_6b.draft_strip(rd, walk.tokenizer, lang=LANG, temperature=walk.temperature)  # hover: the numbers verify used

# %% [markdown]
# **EN** — The same round with ℓ = 2: the same five drafts, only the first two reach the target (○ in the strip, past
# the dashed line). Then ℓ for R copies of this round in flight, as the scheduler table computes it.
#
# **VI** — Cùng vòng đó với ℓ = 2: vẫn năm token nháp ấy, chỉ hai token đầu tới được mô hình đích (○ trên dải, sau
# vạch đứt). Sau đó là ℓ khi có R bản sao của vòng này cùng chạy, như bảng bộ lập lịch tính.

# %%
short = redraft(walk, 2, 0.0)
print(tr("status with ℓ = 2:", "trạng thái với ℓ = 2:"), [verify_label(st, LANG) for st in short.round.status])
assert short.round.draft == rd.draft and short.round.status[2:] == ["not sent"] * 3  # probe: drafted, never sent
for plan in load_plans(rd.confidence):
    print(tr(f"R = {plan.requests:3d} requests in flight → dspark verifies ℓ = {plan.verify_len} of {rd.k}",
             f"R = {plan.requests:3d} yêu cầu đang chạy → dspark verify ℓ = {plan.verify_len} trên {rd.k}"))
plots_6b.draft_strip(short.round, walk.tokenizer, lang=LANG, temperature=0.0)

# %% [markdown]
# **EN** — Draft probability and confidence are the drafter's own numbers; neither is acceptance — only verify
# decides. With the trained weights both are high where the draft is right. The same round on the *untrained*
# weights (the seeded random init) shows the picture of noise: p_d tiny (spread over all V tokens), far below the trained
# draft's, and c at σ(0) = 0.5.
#
# **VI** — Xác suất nháp p_d(x) và đầu tin cậy c là con số của bộ vẽ; không con số nào là việc token được giữ — chỉ
# verify quyết định. Với trọng số đã huấn luyện, cả hai đều cao ở chỗ bản nháp đúng. Cùng vòng đó trên trọng số *chưa*
# huấn luyện (khởi tạo ngẫu nhiên theo seed) là bức tranh nhiễu: p_d rất nhỏ (trải trên cả V
# token), thấp hơn hẳn bản nháp đã huấn luyện, và c bằng σ(0) = 0.5.

# %%
raw = run_walk(PROMPT, seed=SEED, lang=LANG, steps=("6B",), weights="untrained")
for name, w in ((tr("trained", "đã huấn luyện"), walk), (tr("untrained", "chưa huấn luyện"), raw)):
    r = w.round
    print(f"{name:15s} p_d {[round(p, 3) for p in r.draft_probs]}  c {[round(c, 3) for c in r.confidence]}  "
          + tr(f"kept {r.n_accepted} of the {r.verify_len} verified", f"giữ {r.n_accepted} trên {r.verify_len} token đã verify"))
assert max(raw.round.draft_probs) < 0.1 * max(walk.round.draft_probs)  # probe: untrained = noise, far below trained
assert sum(walk.round.draft_probs) / walk.round.verify_len > 100 / cfg.vocab_size  # probe: trained ≫ 1/V

# %% [markdown]
# ## The original lesson's setting beside the lab's / Thiết lập của bài học gốc cạnh thiết lập của lab
# **EN**
# - The original Vietnamese lesson on step 6B (the one this lab grew from) drafts a block of **3** from taps 3 and 4 with untrained weights (its confidences 0.167, 0.234,
#   0.173 for tokens 2, 1, 6: all below 0.25, the sign of unlearned weights). Below: the same setting here, the lab's
#   way — the drafter drafts its whole block of 5 and verifies the first 3 (ℓ = 3).
# - The lab trains **k = 5**, the real V4-Flash block (notebook 07 shows what the shipped drafters reach with it).
# - The taps stay the lesson's: layers 3 and 4, mid-stack in the lab's 8 layers (the last encoder layer and the first
#   decoder layer). The real model taps its last three layers, 37–39, concatenated and projected.
# - The confidence head here has no bias, c = σ(w·[h; W1[x_prev]]): the DSpark paper's head adds one (+ b), V4.1's
#   checkpoint stores only w (`confidence_head.proj`, [1, 5376]); the lab follows V4.1.
#
# **VI**
# - Bài học gốc vẽ khối **3** token từ lớp 3 và 4 với trọng số chưa huấn luyện (confidence 0.167, 0.234, 0.173 cho
#   token 2, 1, 6: cả ba dưới 0.25, dấu hiệu trọng số chưa học). Bên dưới: cùng thiết lập đó theo cách của lab — bộ
#   vẽ vẽ cả khối 5 token rồi verify 3 token đầu (ℓ = 3).
# - Lab huấn luyện khối **k = 5**, khối của V4-Flash thật (notebook 07 cho thấy các bộ vẽ đang kèm theo đạt gì với nó).
# - Lớp đích giữ như bài học: lớp 3 và 4, nằm giữa chồng 8 lớp của lab (lớp encoder cuối và lớp decoder đầu). Mô hình
#   thật lấy ba lớp cuối 37–39, nối lại rồi chiếu.
# - Đầu tin cậy ở đây không có bias, c = σ(w·[h; W1[x_prev]]): bài báo DSpark cộng thêm b, còn checkpoint V4.1 chỉ lưu
#   w (`confidence_head.proj`, [1, 5376]); lab làm theo V4.1.

# %%
lesson = redraft(raw, 3, 0.0)  # the original lesson's setting: untrained, taps 3 and 4, 3 drafts verified
for name, r in (
    (tr("lesson: untrained, ℓ = 3", "bài học: chưa huấn luyện, ℓ = 3"), lesson.round),
    (tr("lab: trained, ℓ = 5", "lab: đã huấn luyện, ℓ = 5"), walk.round),
):
    print(f"{name:31s} p_d {[round(p, 3) for p in r.draft_probs[: r.verify_len]]}  "
          + tr(f"kept {r.n_accepted} of {r.verify_len}", f"giữ {r.n_accepted} trên {r.verify_len}"))
assert lesson.round.verify_len == 3 and max(lesson.round.draft_probs) < 0.25  # probe: the lesson's picture of noise
assert walk.model.mtp.confidence_head.bias is None  # probe: no bias in the confidence head, as V4.1

# %% [markdown]

# ## The verify length changes only what is sent / Độ dài verify chỉ đổi phần được gửi đi
# **EN** — The inspector below has a slider for ℓ (a new round, the prompt's forward reused) and a "requests in flight"
# slider: the ℓ the scheduler would pick for this round at that load.
#
# **VI** — Bộ soi bên dưới có thanh trượt ℓ (một vòng mới, dùng lại forward của prompt) và thanh trượt "số yêu cầu
# đang chạy": ℓ mà bộ lập lịch sẽ chọn cho vòng này ở mức tải đó.

# %%
for ell in (1, 3, 5):
    w = redraft(walk, ell, 0.0)
    assert w.trace is walk.trace and w.round.verify_len == ell and w.round.k == 5  # probe: forward reused, 5 drafted
    sent = [walk.tokenizer.token_text(t) for t in w.round.draft[:ell]]
    print(tr(f"ℓ = {ell}: sent {sent} → kept {w.round.n_accepted}", f"ℓ = {ell}: gửi {sent} → giữ {w.round.n_accepted}"))
inspector.inspector_6b(widgets.LabState.from_walk(walk, lang=LANG))

# %% [markdown]
# ## Acceptance by position / Tỉ lệ giữ theo vị trí

# %%
prompts = torch.cat([eval_prompts(d, 3, 12, seed=SEED) for d in ("en", "vi", "code", "sums")])  # held-out lines
spec = generate_speculative(walk.model, prompts, 24, seed=SEED)
stats = acceptance_stats([r for rs in spec.rounds for r in rs])
print(tr("mean accepted length τ =", "độ dài chấp nhận trung bình τ ="), round(stats["mean_accepted_length"], 3),
      tr("· acceptance rate =", "· tỉ lệ token nháp được giữ ="), round(stats["acceptance_rate"], 3))
assert 1.0 <= stats["mean_accepted_length"] <= 1 + cfg.dspark_block_size  # probe
plots_6b.acceptance_by_position(stats, lang=LANG)

# %% [markdown]
# ## Summary / Tóm tắt
# - **EN** — Logits come from `hc_pre → RMSNorm → head`. DSpark drafts from the taps with a parallel block and a
#   sequential Markov head; p_d(x) and c describe the draft, a prefix ℓ of it is sent to verify, verify decides, and
#   τ = kept + 1 tokens per round. Under load the scheduler uses c to pick ℓ (notebook 08).
# - **VI** — Logits đi qua `hc_pre → RMSNorm → head`. DSpark vẽ nháp từ các lớp đích bằng một khối song song và
#   MarkovHead tuần tự; p_d(x) và c mô tả bản nháp, một đoạn đầu ℓ được gửi đi verify, verify quyết định, và mỗi vòng
#   ghi τ = số token giữ + 1. Khi tải cao, bộ lập lịch dùng c để chọn ℓ (notebook 08).
#
# ## Exercise / Bài tập
# **EN** — A round drafts k = 5 tokens, sends the first ℓ = 3 to verify, and verify keeps the first 2. How many tokens
# does the round commit (τ)?
#
# **VI** — Một vòng vẽ k = 5 token nháp, gửi 3 token đầu đi verify (ℓ = 3), và verify giữ 2 token đầu. Vòng đó ghi
# thêm bao nhiêu token (τ)?

# %%
answer = None  # a whole number

# %%
from dspark_mini.speculative import Round  # noqa: E402

example = Round(position=0, anchor=5, draft=[6, 7, 8, 2, 3], draft_probs=[0.5] * 5, confidence=[0.5] * 5,
                target_probs=[0.5] * 3, target_argmax=[6, 7, 9, 1],
                status=["accepted", "accepted", "rejected", "not sent", "not sent"],
                n_accepted=2, next_token=9, next_kind="resampled", committed=[6, 7, 9], verify_len=3)
check(answer, example.tau, LANG)

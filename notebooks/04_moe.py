# %% [markdown]
# # 04 · Column 4 — the FP4 MoE (step 5A)
# **EN**
# - The router scores every expert with a = √softplus(x·Wᵀ); a learned bias is added **only to choose** the top-k.
# - The weights come from the unbiased scores, normalized over the chosen experts and scaled by 1.5.
# - Each expert is a clamped SwiGLU whose weights are stored as MXFP4 (4 bits, one power-of-two scale per 32).
#
# **VI**
# - Router chấm điểm mọi expert bằng a = √softplus(x·Wᵀ); bias học được chỉ được cộng vào **để chọn** top-k.
# - Trọng số lấy từ điểm chưa cộng bias, chuẩn hóa trên các expert được chọn rồi nhân 1.5.
# - Mỗi expert là một SwiGLU có kẹp, trọng số lưu ở MXFP4 (4 bit, mỗi 32 giá trị một hệ số lũy thừa của 2).

# %%
LANG = "en"  # "vi" for Vietnamese output / "vi" để xem kết quả bằng tiếng Việt
SEED = 0
PROMPT = "Each token is sent to a few experts, and one shared expert sees them all."

import torch
from rich import print as show

from dspark_mini.quant import fp4_qdq
from lab.present.fonts import notebook_font
from lab.screens import plots
from lab.lesson.exercises import check
from lab.screens.render import render_view
from lab.lesson.walk import run_walk
from lab.text import in_lang

tr = in_lang(LANG)  # this notebook's own lines in LANG / các dòng in của notebook theo LANG
notebook_font()  # DSpark Mono: every Vietnamese letter in code and outputs / đủ mọi chữ tiếng Việt
torch.set_num_threads(1)
walk = run_walk(PROMPT, seed=SEED, lang=LANG)
cfg = walk.cfg
print(tr("experts", "số expert"), cfg.n_routed_experts, "· top-k", cfg.n_activated_experts,
      tr("· route scale", "· hệ số route"), cfg.route_scale)

# %% [markdown]
# ## Router and experts / Router và các expert

# %%
show(render_view(walk.views["5A"]))
weights = walk.trace.get("5A", "weights", 0)  # [B, S, k]
assert (weights.sum(-1) - cfg.route_scale).abs().max() < 1e-9  # probe: normalized top-k × 1.5
plots.router(walk, layer=0, lang=LANG)

# %%
plots.expert_load(walk, layer=0, lang=LANG)

# %% [markdown]
# **EN** — The bias can swap which experts win (the table counts the tokens it changed), yet the weights of the
# winners still come from the unbiased scores.
#
# **VI** — Bias có thể đổi expert nào thắng (bảng đếm số token bị đổi), nhưng trọng số của expert thắng vẫn lấy từ
# điểm chưa cộng bias.
#
# ## MXFP4 weights / Trọng số MXFP4

# %%
w = walk.model.layers[0].ffn.experts[0].w1.weight.detach()  # [I, D]
q = fp4_qdq(w, 32, "e8m0")
scale = 2.0 ** torch.ceil(torch.log2(w.view(-1, 32).abs().amax(-1, keepdim=True) / 6))  # one per 32 weights
codes = sorted({abs(v) for v in (q.view(-1, 32) / scale).flatten().tolist()})
print(tr("relative error:", "sai số tương đối:"), round(float((q - w).norm() / w.norm()), 4),
      tr("· magnitudes used:", "· các độ lớn được dùng:"), codes)
assert set(codes) <= {0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0}  # probe: E2M1 magnitudes × a power of two

# %% [markdown]
# **EN** — Every block of 32 weights shares one power-of-two scale and takes one of 8 magnitudes: about a tenth
# of relative error, which quantization-aware training absorbs.
#
# **VI** — Mỗi khối 32 trọng số dùng chung một hệ số lũy thừa của 2 và chỉ nhận 1 trong 8 độ lớn: sai số tương đối
# khoảng một phần mười, được huấn luyện có lượng tử hóa (QAT) bù lại.
#
# ## Summary / Tóm tắt
# - **EN** — Select with bias, weigh without it, normalize, scale by 1.5; a shared expert for everyone; clamped SwiGLU;
#   MXFP4 weights.
# - **VI** — Chọn có bias, tính trọng số không bias, chuẩn hóa, nhân 1.5; một expert dùng chung cho mọi token;
#   SwiGLU có kẹp; trọng số MXFP4.
#
# ## Exercise / Bài tập
# **EN** — With k > 1 and route scale 1.5, what do one token's routing weights add up to?
#
# **VI** — Với k > 1 và route scale 1.5, tổng trọng số định tuyến của một token bằng bao nhiêu?

# %%
answer = None  # a number

# %%
check(answer, float(walk.trace.get("5A", "weights", 0)[0, -1].sum()), LANG)

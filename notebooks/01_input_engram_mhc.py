# %% [markdown]
# # 01 · Column 1 — input, Engram and mHC (steps 1A → 1B → 2A)
# **EN**
# - **1A**: text → token ids → embedding `[B, S, D]`, repeated into 4 residual lanes `[B, S, 4, D]`.
# - **1B**: Engram hashes the 2-, 3- and 4-grams ending at each token into prime-sized tables and adds a gated value.
# - **2A**: mHC mixes the 4 lanes with `pre`, `post` and a 4×4 `comb` pushed towards doubly stochastic by Sinkhorn.
#
# **VI**
# - **1A**: văn bản → mã token → embedding `[B, S, D]`, lặp thành 4 làn residual `[B, S, 4, D]`.
# - **1B**: Engram băm các n-gram 2, 3, 4 kết thúc tại mỗi token vào các bảng có kích thước nguyên tố rồi cộng một giá trị có cổng.
# - **2A**: mHC trộn 4 làn bằng `pre`, `post` và ma trận `comb` 4×4 được Sinkhorn kéo về gần song ngẫu nhiên.

# %%
LANG = "en"  # "vi" for Vietnamese output / "vi" để xem kết quả bằng tiếng Việt
SEED = 0
PROMPT = "Xin chào các bạn, hôm nay chúng ta học về DSpark."

import torch
from rich import print as show

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
cfg, tok = walk.cfg, walk.tokenizer
print(tr("tokens:", "số token:"), walk.tokens.shape[1], tr("· dim", "· số chiều"), cfg.dim, tr("· lanes", "· số làn"), cfg.hc_mult)

# %% [markdown]
# ## 1A · Tokens, embedding, 4 lanes / Token, embedding, 4 làn
# **EN** — Each id picks one row of the embedding table; the row is copied into 4 lanes, and the first pre-mix is
# one-hot, so layer 0 reads lane 0 only.
#
# **VI** — Mỗi mã token lấy một hàng của bảng embedding; hàng đó được chép ra 4 làn, và pre-mix đầu tiên là one-hot
# nên lớp 0 chỉ đọc làn 0.

# %%
show(render_view(walk.views["1A"]))
streams = walk.trace.get("1A", "streams")  # [B, S, 4, D]
assert streams.shape == (1, walk.tokens.shape[1], 4, cfg.dim)
assert (streams - streams[:, :, :1]).abs().max() == 0  # probe: four identical lanes

# %% [markdown]
# **EN** — Four identical lanes: the blocks make them differ later. Look at the Engram ids: case and accents fold.
#
# **VI** — Bốn làn giống hệt nhau: các khối phía sau mới làm chúng khác đi. Nhìn cột mã Engram: chữ hoa và dấu được gộp.
#
# ### The tokenizer: a byte-level BPE / Bộ tách token: BPE mức byte
# **EN** — The lab reads text with a byte-level BPE of <!--n:corpus.tokenizer.vocab_size:int-->8,192<!--/n--> ids, trained on its English, Vietnamese, code and sums
# corpus (the real model's is the same kind, with 129,280 ids). Frequent words are one token (" the", " chào"), rarer
# ones are split into pieces, and a character the merges never saw (an emoji) stays as its UTF-8 bytes, shown `<0xNN>`:
# any text tokenizes, and decoding gives it back exactly.
#
# **VI** — Lab đọc văn bản bằng một BPE mức byte có <!--n:corpus.tokenizer.vocab_size:int-->8,192<!--/n--> mã, huấn luyện trên kho văn bản tiếng Anh, tiếng Việt, mã
# nguồn và phép cộng của lab (mô hình thật dùng cùng loại, với 129.280 mã). Từ hay gặp là một token (" the", " chào"),
# từ hiếm bị tách thành mảnh, và ký tự mà các phép ghép chưa từng thấy (một emoji) giữ nguyên các byte UTF-8, hiện là
# `<0xNN>`: văn bản nào cũng tách được, và giải mã trả lại đúng văn bản đó.

# %%
for text in ("The weather is lovely today.", "Hôm nay trời đẹp quá.", "487 + 256 = 743", "🙂"):
    ids = tok.encode(text)
    print(f"{text!r:32} → {len(ids):2} tokens:", " · ".join(tok.piece(i) for i in ids))
    assert tok.decode(ids) == text  # probe: exact round trip
print(tr("vocabulary:", "bộ từ vựng:"), tok.vocab_size, tr("ids · Engram compressed ids:", "mã · mã nén Engram:"),
      tok.compressed_vocab_size)

# %% [markdown]
# ## 1B · Engram
# **EN** — " chào" and " Chào" are different tokens but share one compressed id, so they hash to the same table rows.
#
# **VI** — " chào" và " Chào" là hai token khác nhau nhưng chung một mã nén, nên được băm vào cùng các hàng của bảng.

# %%
a, b = tok.encode(" chào")[0], tok.encode(" Chào")[0]
print(tr("raw ids:", "mã gốc:"), a, b, tr("· compressed ids:", "· mã nén:"), tok.compress_map[a], tok.compress_map[b])
assert a != b and tok.compress_map[a] == tok.compress_map[b]  # probe
show(render_view(walk.views["1B"]))
plots.engram_gates(walk, lang=LANG)

# %% [markdown]
# **EN** — The gate (0..1) differs per lane: each lane decides how much of the shared value to take.
#
# **VI** — Cổng (0..1) khác nhau theo làn: mỗi làn tự quyết lấy bao nhiêu từ giá trị chung.
#
# ## 2A · mHC and Sinkhorn / mHC và Sinkhorn

# %%
show(render_view(walk.views["2A"]))
hist = walk.trace.get("2A", "attn_comb_history", 0)  # [20, B, S, 4, 4]
rows = [float((m.sum(-1) - 1).abs().max()) for m in hist]  # max |row sum − 1| after each iteration
cols = float((hist[-1].sum(-2) - 1).abs().max())
print(tr("row error after 1 / 5 / 20 iterations:", "sai số hàng sau 1 / 5 / 20 vòng lặp:"),
      f"{rows[0]:.3f} / {rows[4]:.3f} / {rows[-1]:.3f}", tr("· column error", "· sai số cột"), f"{cols:.1e}")
assert cols < 1e-3 and rows[-1] < rows[4] < rows[0] < 1  # probe: columns exact, rows shrink
plots.comb_heatmap(walk, layer=0, lang=LANG)

# %%
plots.sinkhorn_convergence(walk, layer=0, lang=LANG)

# %% [markdown]
# **EN** — Each iteration ends with a column pass, so columns sum to 1; rows get there step by step. The trained
# comb logits are sharp (a lane mostly feeds one lane), and sharp matrices converge slowly: after the 20 iterations
# the real model also uses, rows are off by about 10⁻². With `weights="untrained"` (mild random logits) 20
# iterations leave less than 10⁻³.
#
# **VI** — Mỗi vòng kết thúc bằng một lượt chuẩn hóa cột nên tổng cột bằng 1; tổng hàng tiến dần về 1. Logits comb
# sau huấn luyện rất sắc (mỗi làn chủ yếu đổ vào một làn), và ma trận sắc hội tụ chậm: sau 20 vòng như mô hình thật,
# tổng hàng còn lệch cỡ 10⁻². Với `weights="untrained"` (logits ngẫu nhiên nhẹ) 20 vòng để lại sai số dưới 10⁻³.
#
# ## Summary / Tóm tắt
# - **EN** — 1A embeds and copies into 4 lanes; 1B adds an n-gram memory by address; 2A mixes the lanes with
#   coefficients predicted from the stream, `pre` collapsing the *next* sublayer's input (single pass).
# - **VI** — 1A nhúng và chép ra 4 làn; 1B thêm bộ nhớ n-gram tra theo địa chỉ; 2A trộn các làn bằng hệ số dự đoán
#   từ chính dòng dữ liệu, `pre` dùng để gộp đầu vào của lớp con *kế tiếp* (một lượt).
#
# ## Exercise / Bài tập
# **EN** — How many mixing numbers does one sublayer's `hc_fn` produce per token when hc_mult = 4?
#
# **VI** — Với hc_mult = 4, `hc_fn` của một lớp con tạo ra bao nhiêu hệ số trộn cho mỗi token?

# %%
answer = None  # a whole number

# %%
check(answer, walk.model.layers[0].hc_attn.fn.shape[0], LANG)

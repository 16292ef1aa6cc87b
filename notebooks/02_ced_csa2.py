# %% [markdown]
# # 02 · Column 2 — the CED schedule and CSA2 (steps 3A → 3B → 3C)
# **EN**
# - **3A**: one flat stack of layers, yet a 20 + 20 encoder/decoder split emerges from three lists in the config.
# - **3B**: only the KV sources compress: pairs of tokens pooled by a softmax gate (ratio 2), or one latent per token (ratio 1).
# - **3C**: a cheap indexer picks which compressed entries each query reads, inside candidate blocks, beside the window.
#
# **VI**
# - **3A**: chỉ là một chồng lớp phẳng, nhưng cách chia encoder/decoder 20 + 20 hiện ra từ ba danh sách trong cấu hình.
# - **3B**: chỉ các nguồn KV mới nén: gộp từng cặp token bằng cổng softmax (tỉ lệ 2), hoặc một latent cho mỗi token (tỉ lệ 1).
# - **3C**: một indexer rẻ chọn các mục nén mà mỗi truy vấn đọc, trong các khối ứng viên, bên cạnh cửa sổ trượt.

# %%
LANG = "en"  # "vi" for Vietnamese output / "vi" để xem kết quả bằng tiếng Việt
SEED = 0
PROMPT = "The model reads the prompt, compresses the cache and picks what matters for the next token."

import torch
from rich import print as show

from dspark_mini import get_config
from dspark_mini.schedule import role_counts
from lab.present.fonts import notebook_font
from lab.screens import plots
from lab.screens import figures
from lab.lesson.exercises import check
from lab.screens.render import render_view
from lab.lesson.walk import run_walk
from lab.text import in_lang

tr = in_lang(LANG)  # this notebook's own lines in LANG / các dòng in của notebook theo LANG
notebook_font()  # DSpark Mono: every Vietnamese letter in code and outputs / đủ mọi chữ tiếng Việt
torch.set_num_threads(1)
walk = run_walk(PROMPT, seed=SEED, lang=LANG)
cfg = walk.cfg
print(tr("tokens:", "số token:"), walk.tokens.shape[1], tr("· window", "· cửa sổ"), cfg.window_size,
      tr("· ratios", "· tỉ lệ nén"), cfg.compress_ratios[: cfg.n_layers])

# %% [markdown]
# ## 3A · Layer roles / Vai trò các lớp
# **EN** — A nonzero ratio names the cache a layer *reads*; only the KV sources build it.
# - Why a 20 + 20 split at all: the decoder's global KV is one projection of the encoder's final state (layer 20's
#   cache), so at prefill serving engines run layers 0–20 over the whole prompt and layers 21–39 only over its tail
#   (decoder bounded replay: the last 128 tokens, 133 with 5 DSpark drafts), rebuilding earlier window states
#   approximately.
# - That is why the model card counts **8 B** active parameters per token in prefill and **16 B** in decode: prefill
#   compute nearly halves. The model is post-trained for this approximation; the reference code and this lab run
#   every layer on every token (the exact path).
#
# **VI** — Tỉ lệ khác 0 cho biết lớp đó *đọc* cache nào; chỉ các nguồn KV mới xây cache đó.
# - Vì sao lại chia 20 + 20: KV toàn cục của decoder chỉ là một phép chiếu từ trạng thái cuối của encoder (cache của
#   lớp 20), nên khi prefill, các engine suy luận chạy lớp 0–20 trên toàn bộ prompt còn lớp 21–39 chỉ chạy trên đoạn
#   cuối (bounded replay của decoder: 128 token cuối, 133 khi kèm 5 token nháp DSpark), trạng thái cửa sổ của các vị
#   trí trước đó được dựng lại gần đúng.
# - Vì thế thẻ mô hình ghi **8 tỷ** tham số hoạt động cho mỗi token lúc prefill và **16 tỷ** lúc decode: phép tính
#   prefill giảm gần một nửa. Mô hình được hậu huấn luyện cho phép xấp xỉ này; mã tham chiếu và lab này chạy mọi lớp
#   trên mọi token (đường tính chính xác).

# %%
show(render_view(walk.views["3A"]))
counts = role_counts(get_config("flash"))
print(tr("real model:", "mô hình thật:"), counts)
assert counts["compressor.wkv"] == 4 and counts["compressor.wgate"] == 3  # probe: 4 compressors, 3 gates
assert counts["indexer.wq_b"] == 8 and counts["indexer.wk"] == 4  # probe: 8 indexers, 4 own index keys
figures.figure_for_step(walk, "3A", lang=LANG)

# %% [markdown]
# **EN** — Treating "ratio > 0" as "this layer compresses" would build 38 compressors instead of 4.
#
# **VI** — Nếu hiểu "tỉ lệ > 0" là "lớp này tự nén" thì sẽ dựng 38 bộ nén thay vì 4.
#
# ## 3B · The compressor / Bộ nén

# %%
show(render_view(walk.views["3B"]))
S = walk.tokens.shape[1]
for layer in walk.trace.layers("3B"):
    n = int(walk.trace.get("3B", "n_compressed", layer))
    assert n == S // cfg.compress_ratios[layer]  # probe: one entry per `ratio` tokens
figures.figure_for_step(walk, "3B", lang=LANG)

# %% [markdown]
# **EN** — A trailing odd token waits in the carry until its partner comes; the ratio-1 source has no gate at all.
#
# **VI** — Token lẻ cuối cùng nằm chờ trong carry cho tới khi có bạn ghép cặp; nguồn tỉ lệ 1 không có cổng nào.
#
# ## 3C · Indexer, candidates, window / Indexer, khối ứng viên, cửa sổ

# %%
show(render_view(walk.views["3C"]))
picks = walk.trace.get("3C", "topk_idxs", cfg.candidate_source_layer)[0]  # [S, k]
visible = walk.trace.get("3C", "visible", cfg.candidate_source_layer)  # [S]
assert all(int(i) < int(v) for row, v in zip(picks, visible) for i in row if i >= 0)  # probe: causal picks
plots.indexer_scores(walk, cfg.candidate_source_layer, lang=LANG)

# %% [markdown]
# **EN** — Blank cells are entries the query cannot see yet; marks are the picks, the shaded part the candidate pool.
#
# **VI** — Ô trống là các mục truy vấn chưa được thấy; dấu là các mục được chọn, phần tô là nhóm ứng viên.
#
# ## Summary / Tóm tắt
# - **EN** — Roles come from the config (3A); 4 sources build one shared cache each (3B); the indexer reads it
#   sparsely, and layer 20's candidate blocks narrow the decoder's search (3C).
# - **VI** — Vai trò đến từ cấu hình (3A); 4 nguồn mỗi nguồn xây một cache dùng chung (3B); indexer đọc thưa cache đó,
#   và các khối ứng viên của lớp 20 thu hẹp vùng tìm của decoder (3C).
#
# ## Exercise / Bài tập
# **EN** — A ratio-2 source has seen 37 tokens. How many compressed entries does it hold (the odd one waits)?
#
# **VI** — Một nguồn tỉ lệ 2 đã thấy 37 token. Nó giữ bao nhiêu mục nén (token lẻ còn chờ)?

# %%
answer = None  # a whole number

# %%
with torch.no_grad():
    cache = walk.model.new_cache(1)
    walk.model(torch.randint(4, cfg.vocab_size, (1, 37), generator=torch.Generator().manual_seed(SEED)), cache=cache)
check(answer, cache.sources[cfg.kv_source_layers[0]].count, LANG)

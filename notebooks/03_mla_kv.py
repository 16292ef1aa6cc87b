# %% [markdown]
# # 03 · Column 3 — MLA attention and the FP4 KV cache (steps 4A ↔ 6A)
# **EN**
# - **4A**: queries through a low-rank bottleneck; keys and values are one shared latent row per token (K = V);
#   each head attends over [window ‖ picked compressed entries] plus a learned sink; the output is de-rotated and
#   projected by a block-diagonal (grouped) O-LoRA.
# - **6A**: what attention leaves behind: an FP8 window ring per layer, FP4 compressed KV and FP4 index keys at the
#   sources — 890 bytes of global KV per token at real scale.
#
# **VI**
# - **4A**: truy vấn đi qua nút thắt hạng thấp; key và value là một hàng latent dùng chung cho mỗi token (K = V);
#   mỗi đầu chú ý trên [cửa sổ ‖ các mục nén được chọn] cộng một sink học được; đầu ra được xoay ngược RoPE rồi
#   chiếu qua O-LoRA theo nhóm (khối chéo).
# - **6A**: những gì attention để lại: vòng cửa sổ FP8 ở mỗi lớp, KV nén FP4 và key indexer FP4 ở các nguồn —
#   890 byte KV toàn cục cho mỗi token ở quy mô thật.

# %%
LANG = "en"  # "vi" for Vietnamese output / "vi" để xem kết quả bằng tiếng Việt
SEED = 0
PROMPT = "Attention reads one shared latent per token, so the cache stores a single row for all heads."

import torch
from rich import print as show

from dspark_mini import get_config
from dspark_mini.kv_cache import kv_bytes
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
print(tr("heads", "số head"), cfg.n_heads, tr("· head dim", "· số chiều mỗi head"), cfg.head_dim,
      tr("· O-LoRA groups", "· nhóm O-LoRA"), cfg.o_groups, tr("· window", "· cửa sổ"), cfg.window_size)

# %% [markdown]
# ## 4A · Attention over [window ‖ compressed] with a sink / Attention trên [cửa sổ ‖ nén] có sink

# %%
show(render_view(walk.views["4A"]))
layer = cfg.candidate_source_layer
total = sum(walk.trace.get("4A", k, layer) for k in ("window_share", "compressed_share", "sink_share"))
assert (total - 1).abs().max() < 1e-9  # probe: window + compressed + sink = 1 for every head and query
plots.attention_shares(walk, layer, lang=LANG)

# %% [markdown]
# **EN** — The sink soaks up attention a head does not want to spend; untrained sinks start at logit 0.
#
# **VI** — Sink hút phần chú ý mà một đầu không muốn dùng; sink chưa huấn luyện bắt đầu ở logit 0.
#
# ## 6A · Bytes per token and the quantization error / Byte mỗi token và sai số lượng tử hóa

# %%
show(render_view(walk.views["6A"]))
real = kv_bytes(get_config("flash"))
print(tr("real: window entry", "mô hình thật: mục cửa sổ"), real["window_entry"], tr("B · compressed", "B · mục nén"),
      real["compressed_entry"], tr("B · index key", "B · key indexer"), real["index_entry"], tr("B · global", "B · toàn cục"),
      real["global_per_token"], tr("B/token", "B mỗi token"))
assert real["global_per_token"] == 3 * (288 + 68) / 2 + (288 + 68) == 890  # probe
plots.kv_bytes_vs_context(lang=LANG)

# %% [markdown]
# **EN** — The window is a fixed cost per sequence; the global KV grows with the context at 890 B/token (real).
#
# **VI** — Cửa sổ là chi phí cố định cho mỗi chuỗi; KV toàn cục tăng theo ngữ cảnh với 890 B/token (thật).
#
# ## Summary / Tóm tắt
# - **EN** — One latent row per token serves all heads as key and value; FP4 after RoPE keeps 890 B/token of
#   global KV, while the sensitive window stays FP8.
# - **VI** — Một hàng latent mỗi token phục vụ mọi đầu làm cả key và value; FP4 sau RoPE giữ KV toàn cục ở 890 B/token,
#   còn cửa sổ nhạy cảm vẫn ở FP8.
#
# ## Exercise / Bài tập
# **EN** — If layer 20 pooled pairs (ratio 2) like the encoder sources, how many bytes of global KV per token would
# the real model keep?
#
# **VI** — Nếu lớp 20 cũng gộp cặp (tỉ lệ 2) như các nguồn encoder, mô hình thật giữ bao nhiêu byte KV toàn cục cho
# mỗi token?

# %%
answer = None  # a number of bytes

# %%
flash = get_config("flash")
what_if = flash.replace(compress_ratios=(0, 0) + (2,) * 38 + (0,) * 3)
check(answer, kv_bytes(what_if)["global_per_token"], LANG)

# %% [markdown]
# # 09 · The real scale: the official checkpoint, 8 ranks, GPUs, and the hand-off to a serving engine
# **EN** — The lab model is tiny; DeepSeek-V4.1-Flash is not. This notebook never allocates a real weight:
# - the real model built on the `meta` device (shapes only): parameter counts by group;
# - the official checkpoint written as **header-only** shards (real names, dtypes, shapes; no data) and read back
#   by `inspect_checkpoint`: bytes by group, as stored (FP8 / FP4 packed);
# - the sharding rules of `lab/runtime/distributed.py` on 8 ranks: who holds what, and the bytes per rank against
#   one H200 (141 GB);
# - what changes on a GPU, and the hand-off: the lab is for looking inside, the engines are for serving.
#
# **VI** — Mô hình của lab rất nhỏ; DeepSeek-V4.1-Flash thì không. Notebook này không cấp phát một trọng số thật
# nào:
# - mô hình thật dựng trên thiết bị `meta` (chỉ có hình dạng): số tham số theo nhóm;
# - checkpoint chính thức được ghi thành các shard **chỉ có header** (tên, kiểu, hình dạng thật; không có dữ liệu)
#   rồi đọc lại bằng `inspect_checkpoint`: số byte theo nhóm, đúng như lưu (FP8 / FP4 đóng gói);
# - các quy tắc chia shard của `lab/runtime/distributed.py` trên 8 rank: rank nào giữ gì, và số byte mỗi rank so
#   với một H200 (141 GB);
# - những gì thay đổi trên GPU, và bàn giao: lab để nhìn vào bên trong, engine để phục vụ.

# %%
LANG = "en"  # "vi" for Vietnamese output / "vi" để xem kết quả bằng tiếng Việt
SEED = 0
N_RANKS = 8  # one node of 8 × H200
H200_BYTES = 141e9  # 141 GB of HBM per H200

import re
import shutil
import tempfile
from pathlib import Path

import plotly.graph_objects as go

from dspark_mini import build_model, count_params, get_config
from lab.present.fonts import notebook_font
from lab.lesson.exercises import check
from lab.realscale import inspect_checkpoint, write_header_only
from lab.realscale.ranks import Parallel, ShardingError, check_shardable, engram_rows, rank_selector
from lab.realscale.placement import check_fits, estimate_ranks, read_stored
from lab.serving.sps import staircase_table
from lab.text import in_lang

tr = in_lang(LANG)  # this notebook's own lines in LANG / các dòng in của notebook theo LANG
notebook_font()  # DSpark Mono: every Vietnamese letter in code and outputs / đủ mọi chữ tiếng Việt
GIB = 2**30
cfg = get_config("flash")
print(tr(f"flash: {cfg.n_layers} layers + {cfg.n_mtp_layers} DSpark layers, dim {cfg.dim}, "
         f"{cfg.n_routed_experts} routed experts (draft {cfg.dspark_n_routed_experts}), {cfg.n_heads} heads in "
         f"{cfg.o_groups} output groups, vocabulary {cfg.vocab_size:,}, compute dtype {cfg.dtype}",
         f"flash: {cfg.n_layers} lớp + {cfg.n_mtp_layers} lớp DSpark, số chiều {cfg.dim}, "
         f"{cfg.n_routed_experts} expert định tuyến (bản nháp {cfg.dspark_n_routed_experts}), {cfg.n_heads} head trong "
         f"{cfg.o_groups} nhóm đầu ra, từ vựng {cfg.vocab_size:,}, kiểu tính {cfg.dtype}"))

# %% [markdown]
# ## 1 · The real model on `meta` / Mô hình thật trên `meta`
# **EN**
# - `build_model(cfg, device="meta")` builds every module of the real model with shapes but no storage: the same
#   code the lab runs, at 762.7 B parameters, in a few seconds and no memory.
# - The counts match what the config gives when counted by hand: 551.88 B for the backbone, 14.23 B for the draft.
#
# **VI**
# - `build_model(cfg, device="meta")` dựng mọi module của mô hình thật với hình dạng nhưng không có bộ nhớ: cùng
#   mã mà lab vẫn chạy, ở 762.7 tỉ tham số, trong vài giây và không tốn bộ nhớ.
# - Các con số khớp với phép đếm tay từ config: 551.88 tỉ cho backbone, 14.23 tỉ cho bản nháp.

# %%
model = build_model(cfg, seed=SEED, device="meta")
params = count_params(model)
for name, n in params.items():
    print(f"{name:<9} {n:>17,}", tr("parameters", "tham số   "), f" ({n / 1e9:7.2f} B)")
print(tr("device:", "thiết bị:"), next(model.parameters()).device)
assert round(params["backbone"] / 1e9, 2) == 551.88 and round(params["draft"] / 1e9, 2) == 14.23  # probe
del model

# %% [markdown]
# **EN** — The Engram tables (196.6 B parameters) are counted apart: they are looked up, never multiplied.
#
# **VI** — Các bảng Engram (196.6 tỉ tham số) được đếm riêng: chúng chỉ được tra cứu, không bao giờ nhân ma trận.
#
# ## 2 · The checkpoint, from its headers alone / Checkpoint, chỉ từ các header
# **EN**
# - `write_header_only(cfg, dir)` writes the official layout (48 shards, `model.safetensors.index.json`,
#   `config.json`) whose headers declare every tensor at its real dtype and shape, with no data.
# - `inspect_checkpoint(dir)` reads only those headers: the same report `dspark-lab inspect --checkpoint` prints
#   for a real folder. Routed experts are MXFP4 (two codes a byte + one E8M0 scale per 32), Engram tables FP8 rows,
#   dense projections FP8 per 32×32 block, the rest BF16/FP32.
#
# **VI**
# - `write_header_only(cfg, dir)` ghi bố cục chính thức (48 shard, `model.safetensors.index.json`, `config.json`)
#   mà header khai báo mọi tensor với kiểu và hình dạng thật, không có dữ liệu.
# - `inspect_checkpoint(dir)` chỉ đọc các header đó: cùng báo cáo mà `dspark-lab inspect --checkpoint` in ra cho một
#   thư mục thật. Expert định tuyến là MXFP4 (hai mã một byte + một scale E8M0 cho mỗi 32 phần tử), bảng Engram là
#   các hàng FP8, các phép chiếu dày là FP8 theo khối 32×32, phần còn lại là BF16/FP32.

# %%
folder = Path(tempfile.mkdtemp(prefix="dspark_headers_"))
write_header_only(cfg, folder)
report = inspect_checkpoint(folder)
print(tr(f"{report['n_tensors']:,} tensors in {report['n_shards']} shards ({report['header_only_shards']} header-only), "
         f"{report['total_bytes']:,} bytes = {report['total_gib']:.2f} GiB",
         f"{report['n_tensors']:,} tensor trong {report['n_shards']} shard ({report['header_only_shards']} chỉ có "
         f"header), {report['total_bytes']:,} byte = {report['total_gib']:.2f} GiB"))
for g, v in report["groups"].items():
    print(f"  {g:<15} {v['tensors']:>7,} tensor {v['gib']:>9.2f} GiB")
assert report["total_gib"] == 474.34 and report["n_tensors"] == 95_776 and report["problems"] == []  # probe

# every tensor as the headers declare it: name → (dtype code, shape)
stored = read_stored(folder)
shutil.rmtree(folder)  # ~10 MB of headers: everything needed is in `report` and `stored` now
assert len(stored) == report["n_tensors"]  # probe: the same tensors as the report

# %% [markdown]
# **EN** — 474.34 GiB. The real checkpoint is 475.24 GiB in 96,085 tensors; the difference is the vision tower and
# aligner (0.90 GiB, 309 tensors), which the lab does not model. Routed experts and Engram tables are 97 % of it.
#
# **VI** — 474.34 GiB. Checkpoint thật là 475.24 GiB với 96,085 tensor; phần chênh lệch là bộ mã hóa ảnh và bộ
# căn chỉnh (0.90 GiB, 309 tensor) mà lab không mô hình hóa. Expert định tuyến và bảng Engram chiếm 97 %.
#
# ## 3 · Who holds what on 8 ranks / Rank nào giữ gì trên 8 rank
# **EN** — The rules of `lab/runtime/distributed.py` (DeepSeek's reference inference code, in our words):
# - **routed experts** (expert parallelism): rank r holds experts 48r … 48r + 47 of every layer (the draft: 16 of
#   its 128); gate and shared expert are copied on every rank;
# - **attention** (tensor parallelism, tp = 8): rank r holds 8 heads (their `wq_b` rows and sinks), O-LoRA group r
#   (`wo_a`) and the matching `wo_b` columns; `wq_a`, `wkv`, the compressor and the indexer are copied;
# - **vocabulary**: embedding, LM head and the Markov head's W1/W2 split by rows (V / 8);
# - **Engram tables**: ⌈R / 8⌉ rows each; everything else is copied.
# - `check_shardable` refuses a split that does not divide, from the config alone, before any rank starts.
#
# **VI** — Các quy tắc của `lab/runtime/distributed.py` (mã inference tham chiếu của DeepSeek, viết lại theo cách
# của ta):
# - **expert định tuyến** (song song expert): rank r giữ các expert 48r … 48r + 47 của mọi lớp (bản nháp: 16 trong
#   128 expert của nó); gate và expert dùng chung được sao chép trên mọi rank;
# - **attention** (song song tensor, tp = 8): rank r giữ 8 đầu (các hàng `wq_b` và sink của chúng), nhóm O-LoRA r
#   (`wo_a`) và các cột `wo_b` tương ứng; `wq_a`, `wkv`, compressor và indexer được sao chép;
# - **từ vựng**: embedding, LM head và W1/W2 của đầu Markov chia theo hàng (V / 8);
# - **bảng Engram**: mỗi rank ⌈R / 8⌉ hàng; mọi thứ khác được sao chép.
# - `check_shardable` từ chối một cách chia không chia hết, chỉ từ config, trước khi rank nào khởi động.

# %%
tp = check_shardable(cfg, N_RANKS)  # the reference's layout: tp = all ranks
try:
    check_shardable(cfg, 16)
    refused = False
except ShardingError as e:
    refused = "o_groups = 8" in str(e)
print(tr(f"{N_RANKS} ranks → tp = {tp};  16 ranks with tp = 16 refused (o_groups = 8 does not divide): {refused}",
         f"{N_RANKS} rank → tp = {tp};  16 rank với tp = 16 bị từ chối (o_groups = 8 không chia hết): {refused}"))
assert tp == 8 and refused  # probe: TP ≤ 8, because each rank needs at least one O-LoRA group


def place(r: int) -> Parallel:
    """Rank r's place (no process group is needed to apply the rules)."""
    return Parallel(rank=r, size=N_RANKS, tp_rank=r % tp, tp=tp)


def held_experts(r: int, prefix: str, n: int) -> list[int]:
    keep = rank_selector(cfg, place(r))
    return [e for e in range(n) if keep(f"{prefix}.ffn.experts.{e}.w1.weight")]


tables = {n: s[1] for n, s in stored.items() if re.fullmatch(r"layers\.\d+\.engram\.embed\.weight", n)}
H, G, V = cfg.n_heads // tp, cfg.o_groups // tp, cfg.vocab_size // tp
print(tr("rank  experts/layer  draft experts  heads   O group  vocab rows          Engram rows (layer 1 table)",
         "rank  expert/lớp     expert nháp    head    nhóm O   hàng từ vựng        hàng Engram (bảng lớp 1)"))
for r in range(N_RANKS):
    ex, dx = held_experts(r, "layers.0", cfg.n_routed_experts), held_experts(r, "mtp.0", cfg.dspark_n_routed_experts)
    lo, hi = engram_rows(tables["layers.1.engram.embed.weight"][0], place(r))
    print(f"{r:>4}  {ex[0]:>3}…{ex[-1]:<3} ({len(ex)})  {dx[0]:>3}…{dx[-1]:<3} ({len(dx)})  "
          f"{r * H:>2}…{r * H + H - 1:<2}  {r * G:>5}    {r * V:>7,}…{r * V + V - 1:<7,}  {lo:>11,}…{hi - 1:,}")
assert len(ex) == 48 and len(dx) == 16  # probe: 384 / 8 and 128 / 8

# %% [markdown]
# ## 4 · Bytes per rank against one H200 / Số byte mỗi rank so với một H200
# **EN**
# - `estimate_ranks` (lab/realscale/placement.py) applies the rules to every tensor the headers declare: a sharded
#   tensor counts for this rank's share (`rank_slice`), a copied one in full. **Read**: the share as stored, packed
#   FP8/FP4 with its scales. **Held**: what the lab model keeps after loading it packed (the head in fp32).
# - Then the same model **unpacked to bf16** (every packed weight dequantized, scales gone), as a model that does
#   not hold packed weights would need. The same function runs in every loader, before anything is allocated.
#
# **VI**
# - `estimate_ranks` (lab/realscale/placement.py) áp các quy tắc cho mọi tensor mà header khai báo: tensor bị chia
#   thì tính phần của rank này (`rank_slice`), tensor sao chép thì tính đủ. **Đọc**: phần đó như khi lưu, FP8/FP4
#   đóng gói kèm scale. **Giữ**: những gì mô hình của lab giữ sau khi nạp ở dạng đóng gói (head ở fp32).
# - Rồi cùng mô hình đó **giải nén sang bf16** (mọi trọng số đóng gói được giải lượng tử, bỏ scale), như một mô hình
#   không giữ trọng số đóng gói cần. Chính hàm này chạy trong mọi bộ nạp, trước khi cấp phát bất cứ thứ gì.

# %%
ranks = [place(r) for r in range(N_RANKS)]
packed = estimate_ranks(cfg, ranks, stored, packed=True)
bf16 = estimate_ranks(cfg, ranks[:1], stored, packed=False, dtype="bfloat16")[0]
h200 = H200_BYTES / GIB
print(tr("rank 0, packed      read (GiB)  held (GiB)", "rank 0, packed      đọc (GiB)   giữ (GiB)"))
for g in packed[0].stored:
    print(f"  {g:<15} {packed[0].stored[g] / GIB:9.2f} {packed[0].held[g] / GIB:11.2f}")
most = max(e.needed_bytes for e in packed) / GIB
print(tr(f"packed  : reads {packed[0].stored_bytes / GIB:.2f} GiB, holds {packed[0].held_bytes / GIB:.2f} GiB per rank; "
         f"{most:.2f} GiB with the margin, of {h200:.2f} GiB → {h200 - most:.2f} GiB left for a longer KV cache",
         f"packed  : đọc {packed[0].stored_bytes / GIB:.2f} GiB, giữ {packed[0].held_bytes / GIB:.2f} GiB mỗi rank; "
         f"{most:.2f} GiB kể cả phần dự phòng, trên {h200:.2f} GiB → còn {h200 - most:.2f} GiB cho KV cache dài hơn"))
print(tr(f"bf16    : holds {bf16.held_bytes / GIB:.2f} GiB per rank → does not fit",
         f"bf16    : giữ {bf16.held_bytes / GIB:.2f} GiB mỗi rank → không vừa"))
for e in packed:
    check_fits(e, "cuda", free=int(H200_BYTES))  # fits: nothing refused
try:
    check_fits(bf16, "cuda", free=int(H200_BYTES))
    refused = ""
except ValueError as e:
    refused = str(e)
print("bf16:", refused[:160], "…")
assert round(packed[0].stored_bytes / GIB, 2) == 61.51 and "more ranks" in refused  # probe
assert sum(e.stored_bytes for e in packed) / GIB > report["total_gib"]  # probe: the copies cost more than one

per_rank = [e.held for e in packed]
bf16_rank0 = bf16.held_bytes

labels = {"en": ("packed (FP8/FP4)", "bf16", "GiB per rank", "rank 0 of 8, by group", "one H200"),
          "vi": ("đóng gói (FP8/FP4)", "bf16", "GiB mỗi rank", "rank 0 trên 8, theo nhóm", "một H200")}[LANG]
fig = go.Figure()
fig.add_bar(x=[labels[0]] * len(per_rank[0]), y=[b / GIB for b in per_rank[0].values()], name="",
            text=list(per_rank[0]), hovertext=list(per_rank[0]), showlegend=False)
fig.add_bar(x=[labels[1]], y=[bf16_rank0 / GIB], name="bf16", showlegend=False)
fig.add_hline(y=h200, line_dash="dash", annotation_text=f"{labels[4]}: {h200:.1f} GiB")
fig.update_layout(barmode="stack", template="plotly_white", height=360, yaxis_title=labels[2], title=labels[3])
fig

# %% [markdown]
# **EN** — Packed, one rank reads 61.51 GiB: 33.6 of routed experts, 23.9 of Engram rows, the rest copies; it
# holds 61.7 GiB (the head in fp32). With the margin that still leaves over 60 GiB of an H200 for a longer KV cache.
# Unpacked to bf16, the same rank needs 181.9 GiB: it does not fit, and the loader says so before allocating. This is
# why the engines keep the weights packed and dequantize per use.
#
# **VI** — Khi đóng gói, một rank đọc 61.51 GiB: 33.6 cho expert định tuyến, 23.9 cho các hàng Engram, còn lại là
# bản sao; nó giữ 61.7 GiB (head ở fp32). Cộng cả phần dự phòng, một H200 vẫn còn hơn 60 GiB cho KV cache dài hơn.
# Giải nén sang bf16, cùng rank đó cần 181.9 GiB: không vừa, và bộ nạp báo điều đó trước khi cấp phát. Vì vậy các
# engine giữ trọng số ở dạng đóng gói và giải lượng tử khi dùng.
#
# ### 4b · The real widths, computed on this CPU / Kích thước thật, tính trên CPU này
# **EN** — `--preset flash-cpu` keeps every width of `flash` (the cell below compares them) and cuts only the counts —
# layers, experts, Engram rows — so that step 6B runs at the real sizes on a CPU: `dspark-lab walk --preset
# flash-cpu --step 6B` on a terminal (not here: it draws 3 B values and holds <!--n:flash_cpu.walk.peak_rss_bytes:gib-->11.23<!--/n--> GiB at its peak). Measured on this project's
# machine (<!--n:flash_cpu.conditions_before.cpu:text-->AMD EPYC<!--/n-->, <!--n:flash_cpu.conditions_before.cores:int-->2<!--/n--> cores, one torch thread, load average <!--n:flash_cpu.conditions_before.load_average_1_5_15.0:f2-->1.04<!--/n-->; `bench/flash_cpu.py`): the walk took
# <!--n:flash_cpu.walk.wall_s:min-->1 min 23 s<!--/n--> of wall time for <!--n:flash_cpu.walk.cpu_s:int-->83<!--/n--> s of CPU time, peak RSS <!--n:flash_cpu.walk.peak_rss_bytes:gib-->11.23<!--/n--> GiB. On a busy laptop the CPU time
# stays and the wall time grows: at a quarter of a core, about four times as long.
#
# **VI** — `--preset flash-cpu` giữ mọi kích thước của `flash` (ô dưới so sánh chúng) và chỉ giảm các số đếm — số
# lớp, số expert, số hàng Engram — để bước 6B chạy ở kích thước thật trên CPU: `dspark-lab walk --preset flash-cpu
# --step 6B` trong terminal (không chạy ở đây: nó sinh 3 tỉ giá trị và giữ <!--n:flash_cpu.walk.peak_rss_bytes:gib-->11.23<!--/n--> GiB lúc đỉnh). Đo trên máy của dự án
# (<!--n:flash_cpu.conditions_before.cpu:text-->AMD EPYC<!--/n-->, <!--n:flash_cpu.conditions_before.cores:int-->2<!--/n--> lõi, một luồng torch, tải trung bình <!--n:flash_cpu.conditions_before.load_average_1_5_15.0:f2-->1.04<!--/n-->; `bench/flash_cpu.py`): lệnh walk mất
# <!--n:flash_cpu.walk.wall_s:min-->1 min 23 s<!--/n--> thời gian thực cho <!--n:flash_cpu.walk.cpu_s:int-->83<!--/n--> s thời gian CPU, RSS đỉnh <!--n:flash_cpu.walk.peak_rss_bytes:gib-->11.23<!--/n--> GiB. Trên một laptop đang bận, thời gian
# CPU giữ nguyên còn thời gian thực tăng lên: với một phần tư lõi, lâu khoảng bốn lần.

# %%
from lab.realscale.placement import estimate_rank
from lab.realscale.ranks import SINGLE

small = get_config("flash-cpu")
widths = ("dim", "n_heads", "head_dim", "rope_head_dim", "vocab_size", "moe_inter_dim", "o_groups", "dspark_block_size")
counts = ("n_layers", "n_mtp_layers", "n_routed_experts")
print(tr("same width in both:", "cùng kích thước ở cả hai:"), all(getattr(small, f) == getattr(cfg, f) for f in widths))
for f in widths + counts:
    print(f"  {f:<18} flash {getattr(cfg, f):>8,}   flash-cpu {getattr(small, f):>8,}")
est = estimate_rank(small, SINGLE, packed=False, style="lab", prepared=True)  # on meta: nothing allocated
print(tr(f"flash-cpu estimate: {est.held_bytes / GIB:.2f} GiB weights + {est.prepared / GIB:.2f} prepared + "
         f"{est.margin_bytes / GIB:.2f} margin = {est.needed_bytes / GIB:.2f} GiB",
         f"ước tính flash-cpu: {est.held_bytes / GIB:.2f} GiB trọng số + {est.prepared / GIB:.2f} bố cục chuẩn bị + "
         f"{est.margin_bytes / GIB:.2f} dự phòng = {est.needed_bytes / GIB:.2f} GiB"))
assert all(getattr(small, f) == getattr(cfg, f) for f in widths) and est.needed_bytes < 16 * 10**9  # probe

# %% [markdown]
# ## 5 · What changes on a GPU / Những gì thay đổi trên GPU
# **EN**
# - **dtype**: the lab computes in float64 on CPU; `flash` computes in bf16 (fp32 for mHC, router and head, as the
#   reference) — `--device cuda --dtype bfloat16` on `generate`, `profile`, `serve` and the torchrun entry: the
#   model is *built* in that dtype, after the estimate of §4 said it fits.
# - **backend**: the same `init_distributed` picks `gloo` on CPU and `nccl` on CUDA, one GPU per rank (`LOCAL_RANK`).
# - **packed weights**: `dspark_mini.packed` holds FP8/FP4 codes and dequantizes at use, bit-equal to the lab's QDQ.
#   Each rank builds the model on `meta`, reads only its slices of the checkpoint (its experts, its vocab and Engram
#   rows, its attention rows / columns) and keeps them packed (`--packed`) — on 2 and 4 CPU ranks equal to one
#   packed rank within 1e-5 (tests/test_distributed.py).
# - **CUDA graphs**: an engine replays graphs captured at fixed batch sizes, so the cost SPS(B) is a staircase
#   (notebook 08): 33 batch tokens pay for 64. That is what the confidence scheduler must plan against.
#
# **VI**
# - **dtype**: lab tính bằng float64 trên CPU; `flash` tính bằng bf16 (fp32 cho mHC, router và head, như bản tham
#   chiếu) — `--device cuda --dtype bfloat16` trên `generate`, `profile`, `serve` và lệnh torchrun: mô hình được *dựng*
#   ở dtype đó, sau khi phép ước lượng ở §4 cho biết là vừa.
# - **backend**: cùng hàm `init_distributed` chọn `gloo` trên CPU và `nccl` trên CUDA, mỗi rank một GPU
#   (`LOCAL_RANK`).
# - **trọng số đóng gói**: `dspark_mini.packed` giữ mã FP8/FP4 và giải lượng tử khi dùng, trùng từng bit với QDQ
#   của lab. Mỗi rank dựng mô hình trên `meta`, chỉ đọc các lát của mình trong checkpoint (expert của nó, các hàng từ
#   vựng và Engram, các hàng / cột attention) và giữ chúng ở dạng đóng gói (`--packed`) — trên 2 và 4 rank CPU, khớp
#   với một rank đóng gói trong phạm vi 1e-5 (tests/test_distributed.py).
# - **CUDA graph**: engine chạy lại các graph chụp ở những kích thước batch cố định, nên chi phí SPS(B) có dạng bậc
#   thang (notebook 08): 33 token trong batch phải trả giá của 64. Bộ lập lịch theo đầu tin cậy phải lập kế hoạch
#   theo đúng chi phí đó.

# %%
stairs = staircase_table()
t = stairs.step_seconds
print(tr("compute dtype of flash:", "kiểu tính của flash:"), cfg.dtype)
print(tr("staircase:", "bậc thang:"), f"t(32) = {t(32) * 1e3:.1f} ms · t(33) = {t(33) * 1e3:.1f} ms · t(64) = {t(64) * 1e3:.1f} ms")
assert cfg.dtype == "bfloat16" and t(33) == t(64) > t(32)  # probe: one token past a graph pays for the next one

# %% [markdown]
# ## 6 · The hand-off: the lab looks inside, the engines serve / Bàn giao: lab nhìn vào bên trong, engine phục vụ
# **EN** — The lab's command spreads one model over 8 GPUs to *look* at step 6B (traces, logits, one DSpark round).
# Each rank builds on `meta`, reads only its slices (row ranges of the vocab and Engram tables, its experts) and keeps
# them packed; tested on the lab model over 2 and 4 CPU ranks, never yet on the real weights or on GPUs (its
# `--prompt` goes through the checkpoint's own `tokenizer.json`, read with `tokenizers`). To *serve*
# DeepSeek-V4.1-Flash, use an engine. What the lab's sources record about the engines
# (`docs/sources.md`: the V4.1 inference code and model card, the engines' DSpark changes, the vLLM blog post):
#
# ```bash
# # the lab, one node of 8 GPUs (README "Several ranks"): looking inside
# torchrun --nproc-per-node 8 -m lab.runtime.torchrun generate --checkpoint DIR --packed --tp 8 \
#     --device cuda --dtype bfloat16 --json
# ```
#
# | setting | vLLM | SGLang |
# |---|---|---|
# | support | `main`, package `vllm/models/deepseek_v41/` | a preview branch at the time of the report |
# | speculative method | `dspark`; `mtp` is hard-rejected for V4.1 | DSpark (the preview used DSPARK_BLOCK_SIZE 3 at low concurrency) |
# | speculative tokens | `num_speculative_tokens` 5 — must be ≥ `dspark_block_size` = 5 | 5 (same constraint) |
# | TP / EP | TP 8 (TP ≤ 8: o_groups / TP ≥ 1), expert parallelism on | the same |
# | load-aware verify | `enable_adaptive_verification` | `--speculative-dspark-sps-table-path` (SPS table) |
# | hardware | recipe: h200 / gb200 / gb300 / mi350x, `vram_minimum_gb: 614` | — |
#
# The lab's sources do not record the engines' full command lines (how vLLM and SGLang spell the speculative
# config, TP and EP on their command line): take those from the engine's DeepSeek-V4.1 recipe, with the settings
# above. The lab is for looking inside, the engines are for serving.
#
# **VI** — Lệnh của lab trải một mô hình trên 8 GPU để *nhìn* vào bước 6B (vết, logits, một vòng DSpark). Mỗi rank
# dựng trên `meta`, chỉ đọc các lát của mình (các khoảng hàng của bảng từ vựng và bảng Engram, expert của nó) và giữ
# chúng ở dạng đóng gói; đã kiểm thử trên mô hình của lab với 2 và 4 rank CPU, chưa từng chạy trên trọng số thật hay
# GPU (`--prompt` của nó đi qua `tokenizer.json` của chính checkpoint, đọc bằng `tokenizers`). Để *phục vụ*
# DeepSeek-V4.1-Flash, hãy dùng
# một engine: bảng trên ghi những gì các nguồn của lab ghi nhận (`docs/sources.md`). Các nguồn ấy không ghi đầy đủ dòng lệnh của các engine (cách vLLM và SGLang viết cấu hình
# speculative, TP và EP trên dòng lệnh): hãy lấy từ công thức DeepSeek-V4.1 của engine, với các thiết lập ở trên.
# Lab để nhìn vào bên trong, engine để phục vụ.
#
# ## Summary / Tóm tắt
# - **EN** — The real model is 762.7 B parameters on `meta`; its checkpoint is 474.34 GiB packed (text only). On 8
#   ranks (48 experts each, tp = 8, ⌈R/8⌉ Engram rows) one rank reads 61.51 GiB packed — it fits an H200 — but
#   needs 181.9 GiB in bf16, which does not.
# - **VI** — Mô hình thật có 762.7 tỉ tham số trên `meta`; checkpoint của nó là 474.34 GiB đóng gói (chỉ phần văn bản).
#   Trên 8 rank (mỗi rank 48 expert, tp = 8, ⌈R/8⌉ hàng Engram), một rank đọc 61.51 GiB đóng gói — vừa một H200 —
#   nhưng cần 181.9 GiB ở bf16 thì không vừa.
#
# ## Exercise / Bài tập
# **EN** — On 8 ranks, how many routed experts does rank 3 hold in all, over the 40 backbone layers and the 3 DSpark
# draft layers (384 experts per backbone layer, 128 per draft layer)?
#
# **VI** — Trên 8 rank, rank 3 giữ tổng cộng bao nhiêu expert định tuyến, trên 40 lớp backbone và 3 lớp nháp DSpark
# (384 expert mỗi lớp backbone, 128 mỗi lớp nháp)?

# %%
answer = None  # a number of experts

# %%
keep = rank_selector(cfg, place(3))
expected = sum(1 for n in stored if n.endswith(".w1.weight") and ".ffn.experts." in n and keep(n))
check(answer, expected, LANG)

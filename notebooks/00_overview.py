# %% [markdown]
# # 00 · Overview: DeepSeek-V4.1-Flash in 4 columns and 10 blocks
# **EN**
# - The lab follows one prompt through the model: **1A → 1B → 2A → 3A → 3B → 3C → 4A ↔ 6A → 5A → 6B**.
# - Every block runs on a tiny model (`lab` preset, a laptop CPU) with the same code as the real one (`flash`).
# - Click a block of the map to open its step; change the prompt, seed, verify length ℓ or temperature and watch what
#   moves.
#
# **VI**
# - Bài lab đi theo một prompt qua mô hình: **1A → 1B → 2A → 3A → 3B → 3C → 4A ↔ 6A → 5A → 6B**.
# - Mỗi khối chạy trên một mô hình nhỏ (cấu hình `lab`, CPU máy xách tay) bằng cùng mã nguồn với mô hình thật (`flash`).
# - Bấm vào một khối của sơ đồ để mở bước đó; đổi prompt, seed, độ dài verify ℓ hay nhiệt độ rồi xem cái gì thay đổi.

# %%
LANG = "en"  # "vi" for Vietnamese / "vi" để dùng tiếng Việt
SEED = 0

import torch

from lab.present.fonts import notebook_font
from lab.screens import widgets
from lab.screens import app
from lab.sync.diagrams import architecture_map, display_mermaid, flow_string
from lab.lesson.exercises import check
from lab.lesson.steps import COLUMNS, STEPS, successors
notebook_font()  # DSpark Mono: every Vietnamese letter in code and outputs / đủ mọi chữ tiếng Việt

torch.set_num_threads(1)
print(flow_string(LANG))
for col in COLUMNS:
    print(col.label(LANG), "→", ", ".join(col.step_ids))

# %% [markdown]
# ## The map / Sơ đồ
# **EN** — The same registry (`lab/lesson/steps.py`) draws this mermaid map, the clickable map below, the CLI and the notebooks.
# Both maps read each column top to bottom: 1A at the top of column 1, 6B at the foot of column 4.
#
# **VI** — Cùng một sổ đăng ký (`lab/lesson/steps.py`) vẽ sơ đồ mermaid này, sơ đồ bấm được bên dưới, CLI và các notebook.
# Cả hai sơ đồ đọc mỗi cột từ trên xuống: 1A ở đỉnh cột 1, 6B ở chân cột 4.

# %%
display_mermaid(architecture_map(LANG))

# %% [markdown]
# ## The clickable lab / Bài lab bấm được
# **EN** — Buttons are the ten blocks, laid out as the four columns; the panel under the map shows the chosen step's
# explanation, tables and figure. The 6B inspector at the bottom redrafts when you move the verify-length slider ℓ
# (the drafter always drafts its whole block; ℓ of them are sent to verify), and its "requests in flight" slider shows
# the ℓ the scheduler would pick under load.
#
# **VI** — Các nút là mười khối, xếp theo bốn cột; khung dưới sơ đồ hiện lời giải thích, bảng và hình của bước được
# chọn. Bộ xem 6B ở cuối vẽ nháp lại khi bạn kéo thanh độ dài verify ℓ (bộ vẽ luôn vẽ cả khối; ℓ token được gửi đi
# verify), và thanh "số yêu cầu đang chạy" cho thấy ℓ mà bộ lập lịch sẽ chọn khi tải cao.

# %%
app = app.lab_app(lang=LANG, seed=SEED)
app

# %% [markdown]
# **EN** — The callbacks are plain functions, so we can click from code too: open every block and check the panel.
#
# **VI** — Các hàm xử lý là hàm thường, nên ta cũng bấm được bằng mã: mở từng khối và kiểm tra khung hiện ra.

# %%
state = widgets.LabState(seed=SEED, lang=LANG)
opened = [widgets.open_step(state, s.id)["title"] for s in STEPS]
for title in opened:
    print(title)
assert all(s.id in t for s, t in zip(STEPS, opened))  # probe: each click opens its own step
print(state.update(verify_len=1), "·", state.update(lang="vi" if LANG == "en" else "en"))  # what was recomputed

# %% [markdown]
# ## How to use the lab / Cách dùng bài lab
# - **EN** — Terminal: `dspark-lab walk`, `dspark-lab walk --step 6B --lang vi`, `dspark-lab generate`,
#   `dspark-lab profile`, `dspark-lab inspect --preset flash`, `dspark-lab serve`, `dspark-lab schedule`. Notebooks:
#   `01`–`04` walk the columns, `05` inspects step 6B, `06` shows why speculative decoding is lossless, `08` teaches
#   the scheduler that picks ℓ.
# - **VI** — Trong terminal: `dspark-lab walk`, `dspark-lab walk --step 6B --lang vi`, `dspark-lab generate`,
#   `dspark-lab profile`, `dspark-lab inspect --preset flash`, `dspark-lab serve`, `dspark-lab schedule`. Notebook:
#   `01`–`04` đi qua các cột, `05` soi bước 6B, `06` cho thấy vì sao giải mã dự đoán không làm sai kết quả, `08` dạy bộ
#   lập lịch chọn ℓ.
#
# ## Summary / Tóm tắt
# - **EN** — Four columns: input & mixing, the compressed-attention schedule, attention & its cache, experts & the
#   head with DSpark. One registry drives every surface.
# - **VI** — Bốn cột: đầu vào và trộn làn, lịch nén attention, attention và cache của nó, expert và đầu ra cùng
#   DSpark. Một sổ đăng ký điều khiển mọi giao diện.
#
# ## Exercise / Bài tập
# **EN** — Which step does the flow reach right after 3C? (a step id such as "1B")
#
# **VI** — Ngay sau 3C, luồng đi tới bước nào? (một mã bước, ví dụ "1B")

# %%
answer = None  # e.g. "1B"

# %%
check(answer, successors("3C")[0], LANG)

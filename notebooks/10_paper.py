# %% [markdown]
# # 10 · The DSpark paper in miniature
# **EN** — Every table and figure of the DSpark paper that the lab can measure, with the paper's numbers beside the
# lab's. Nothing is trained here: the notebook reads `runs/paper/*.json`, written by `dspark-lab paper` (`make paper`).
# - Table 1 and Figures 2, 5, 6: the shipped drafters on held-out prompts, one prompt at a time, the whole block.
# - Figures 3 and 4: extra drafters (DSpark with 1–3 draft layers, DFlash at the shipped DFlash's depth, blocks 3 to
#   8), trained against the shipped target, all on the same target cache and budget.
# - Figures 7 and 8: the recorded rounds replayed under load on the shipped SPS table; Appendix A: the scheduler's
#   counterexample, computed by the lab's scheduler.
# - The lab's domains (English, Vietnamese, code, sums) are not the paper's (math, code, chat). Each table keeps its
#   own; one small table says which lab domain stands beside which paper domain (sums ↔ math, code ↔ code,
#   English and Vietnamese ↔ chat).
# - Read the *shape* (who leads, what grows, what shrinks). The lab's model is far smaller than the paper's, so the
#   sizes of the numbers differ.
#
# **VI** — Mọi bảng và hình của bài báo DSpark mà lab đo được, với số của bài báo đặt cạnh số của lab. Notebook này
# không huấn luyện gì: nó đọc `runs/paper/*.json` do `dspark-lab paper` (`make paper`) ghi ra.
# - Bảng 1 và Hình 2, 5, 6: các bộ vẽ nháp đi kèm trên prompt giữ lại, từng prompt một, verify cả khối.
# - Hình 3 và 4: các bộ vẽ nháp thêm (DSpark 1–3 lớp nháp, DFlash ở độ sâu của DFlash đi kèm, khối từ 3 đến 8), huấn
#   luyện theo mô hình mục tiêu đi kèm, tất cả trên cùng bộ đệm mục tiêu và cùng ngân sách.
# - Hình 7 và 8: các vòng đã ghi được phát lại dưới tải trên bảng SPS đi kèm; Phụ lục A: phản ví dụ của bộ lập lịch,
#   tính bằng bộ lập lịch của lab.
# - Các miền của lab (tiếng Anh, tiếng Việt, mã, phép cộng) không phải các miền của bài báo (toán, code, chat). Mỗi
#   bảng giữ miền của mình; một bảng nhỏ cho biết miền nào của lab đặt cạnh miền nào của bài báo (phép cộng ↔ toán,
#   mã ↔ code, tiếng Anh và tiếng Việt ↔ chat).
# - Hãy đọc *hình dạng* (ai dẫn đầu, cái gì tăng, cái gì giảm). Mô hình của lab nhỏ hơn rất nhiều so với mô hình của
#   bài báo, nên độ lớn các con số khác nhau.

# %%
LANG = "en"  # "vi" for Vietnamese output / "vi" để xem kết quả bằng tiếng Việt
SEED = 0

from pathlib import Path

from lab.present.fonts import notebook_font
from lab.lesson.exercises import check
from lab.paper import docs
from lab.paper.figures import figure
from lab.paper.run import ITEMS
from lab.paper.texts import lab_domains
notebook_font()  # DSpark Mono: every Vietnamese letter in code and outputs / đủ mọi chữ tiếng Việt

RUNS = Path("..") / "runs" / "paper"  # the notebook runs in notebooks/
items = docs.read_items(RUNS)
cond = items["table1"]["conditions"]
print(f"{len(items)} items · budget {cond['budget']['name']} · seed {cond['seed']} · {cond['run_seconds']} s")
assert set(items) == set(ITEMS)  # probe: every item of the paper is there

# %% [markdown]
# ## 1 · Table 1: τ per domain / Bảng 1: τ theo miền
# **EN** — τ = kept drafts + the target's own token, per round. The paper: DSpark > DFlash > Eagle3 on Qwen3. First
# the domains: the lab's beside the paper's.
#
# **VI** — τ = số token nháp được giữ + token của chính mô hình mục tiêu, mỗi vòng. Bài báo: DSpark > DFlash > Eagle3
# trên Qwen3. Trước hết là các miền: của lab cạnh của bài báo.

# %%
tau = items["table1"]["lab"]["tau"]
domains = lab_domains(tau["dspark"])  # the domains the run measured (its records say which)
print("\n".join(docs.page_domains(domains, LANG) + docs.page_table1(items["table1"], LANG)))
assert all(1 <= tau[n][d]["t1"] <= 6 for n in tau for d in domains)  # probe: 1 ≤ τ ≤ k + 1
figure(items["table1"], LANG)

# %% [markdown]
# ## 2 · Figure 2: acceptance by position / Hình 2: tỉ lệ được giữ theo vị trí
# **EN** — In the paper DFlash starts high and decays, Eagle3 starts low and rises, DSpark stays high and flat.
#
# **VI** — Trong bài báo, DFlash bắt đầu cao rồi giảm, Eagle3 bắt đầu thấp rồi tăng, DSpark giữ cao và phẳng.

# %%
print("\n".join(docs.page_fig2(items["fig2"], LANG)))
figure(items["fig2"], LANG)

# %% [markdown]
# ## 3 · Figures 3 and 4: depth and block / Hình 3 và 4: độ sâu và độ dài khối
# **EN** — The paper: a 2-layer DSpark beats a 5-layer DFlash, and the Markov head's gain grows with the block.
#
# **VI** — Bài báo: DSpark 2 lớp thắng DFlash 5 lớp, và mức lợi của đầu Markov tăng theo độ dài khối.

# %%
print("\n".join(docs.page_fig3(items["fig3"], LANG)))
runs = items["fig3"]["lab"]["runs"]
assert len({r["target_cache_hash"] for r in runs.values()}) == 1  # probe: one target cache for every variant
figure(items["fig3"], LANG)

# %%
print("\n".join(docs.page_fig4(items["fig4"], LANG)))
figure(items["fig4"], LANG)

# %% [markdown]
# ## 4 · Figures 5 and 6: threshold and calibration / Hình 5 và 6: ngưỡng và hiệu chuẩn
# **EN** — A higher static threshold verifies fewer tokens and wastes fewer slots. STS makes the survival
# probabilities honest, which is what the scheduler needs.
#
# **VI** — Ngưỡng tĩnh cao hơn thì verify ít token hơn và phí ít chỗ hơn. STS làm cho xác suất sống sót trung thực,
# đó là điều bộ lập lịch cần.

# %%
print("\n".join(docs.page_fig5(items["fig5"], LANG)))
assert all(items["fig5"]["lab"]["verified_non_increasing"].values())  # probe: a prefix of a prefix
figure(items["fig5"], LANG)

# %%
print("\n".join(docs.page_fig6(items["fig6"], LANG)))
figure(items["fig6"], LANG)

# %% [markdown]
# ## 5 · Figures 7 and 8: under load / Hình 7 và 8: khi có tải
# **EN** — Each point is one number of requests in flight R. Further right: more tokens for the whole server;
# higher: faster for each user. The paper's per-user gain at the same aggregate throughput is printed beside the lab's.
#
# **VI** — Mỗi điểm ứng với một số yêu cầu đang chạy R. Càng sang phải: càng nhiều token cho cả máy chủ; càng lên cao:
# càng nhanh cho từng người dùng. Mức tăng mỗi người dùng của bài báo ở cùng thông lượng tổng được in cạnh số của lab.

# %%
print("\n".join(docs.page_fig7(items["fig7"], LANG)))
figure(items["fig7"], LANG)

# %%
print("\n".join(docs.page_fig8(items["fig8"], LANG)))
assert all(p["verify_budget"] == 2 for p in items["fig8"]["lab"]["budget"]["mtp1"])  # probe: MTP-1's static 2
figure(items["fig8"], LANG)

# %% [markdown]
# ## 6 · Appendix A / Phụ lục A
# **EN** — Θ = τ*·SPS(B) along the greedy path. Algorithm 1 stops at Θ₁ < Θ₀ before it reads c₂; a search that looks
# ahead reads c₂, and so the value of x₁, and the output is no longer the target's.
#
# **VI** — Θ = τ*·SPS(B) dọc theo đường tham lam. Algorithm 1 dừng ở Θ₁ < Θ₀ trước khi đọc c₂; phép tìm nhìn trước
# thì đọc c₂, tức là đọc giá trị của x₁, nên đầu ra không còn là của mô hình mục tiêu.

# %%
print("\n".join(docs.page_appendix(items["appendix_a"], LANG)))
appendix = items["appendix_a"]["lab"]
assert abs(appendix["policies"]["retrospective"]["exact"][0] - 0.85) < 1e-9  # probe: the paper's biased (0.85, 0.15)

# %% [markdown]
# ## Summary / Tóm tắt
# - **EN** — One command measures the paper's items on the lab's drafters and writes them beside the paper's values.
#   Agreement in shape is the test of the lab's small model, not agreement in size.
# - **VI** — Một lệnh đo các mục của bài báo trên các bộ vẽ nháp của lab và ghi chúng cạnh số của bài báo. Phép thử
#   của mô hình nhỏ của lab là khớp về hình dạng, không phải về độ lớn.
#
# ## Exercise / Bài tập
# **EN** — In Appendix A, x₁ = A gives c₂ = 0.9, so a₁ = 0.8 and a₂ = 0.8 · 0.9. SPS(3) = 0.45. Compute
# Θ₂ = (1 + a₁ + a₂) · SPS(3).
#
# **VI** — Trong Phụ lục A, x₁ = A cho c₂ = 0.9, nên a₁ = 0.8 và a₂ = 0.8 · 0.9. SPS(3) = 0.45. Tính
# Θ₂ = (1 + a₁ + a₂) · SPS(3).

# %%
answer = None  # e.g. 0.9

# %%
check(answer, appendix["branches"]["A"]["theta"][2], LANG)

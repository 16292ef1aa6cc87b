# %% [markdown]
# # 06 · Lossless: why verify keeps exactly the target's output
# **EN** — Speculative decoding is only worth it if it changes *nothing* about what the model says.
# - Greedy: every kept draft token is the target's own argmax, so the output is identical token for token — in
#   float64, the lab's dtype. In bfloat16 the verify forward (k + 1 tokens at once) and a one-token step round
#   differently, so the two can part at a near-tie of the top-2 logits (docs/reliability.md).
# - Sampling: keep a draft token with probability min(1, p_t/p_d); on a rejection draw from the
#   residual norm(max(0, p_t − p_d)); the committed token then follows p_t exactly.
# - We check both on the lab model, and break the verifier on purpose to see the test catch it.
#
# **VI** — Giải mã dự đoán chỉ đáng dùng khi nó *không đổi gì* trong câu trả lời của mô hình.
# - Greedy: mỗi token nháp được giữ đều là argmax của chính mô hình mục tiêu, nên đầu ra giống hệt từng token —
#   trong float64, kiểu số của lab. Ở bfloat16, forward verify (k + 1 token một lượt) và bước một token làm tròn
#   khác nhau, nên hai cách có thể tách nhau ở một điểm gần hòa của hai logit lớn nhất (docs/reliability.md).
# - Lấy mẫu: giữ token nháp với xác suất min(1, p_t/p_d); nếu bị từ chối thì lấy mẫu lại từ phần dư
#   norm(max(0, p_t − p_d)); token được ghi khi đó theo đúng phân phối p_t.
# - Ta kiểm cả hai trên mô hình lab, rồi cố tình làm hỏng bước verify để thấy phép kiểm bắt được lỗi.

# %%
LANG = "en"  # "vi" for Vietnamese output / "vi" để xem kết quả bằng tiếng Việt
SEED = 0

import torch

from dspark_mini import build_model, get_config
from dspark_mini.tokenizer import default_tokenizer
from dspark_mini.speculative import generate_plain, generate_speculative, speculative_round, token_distribution
from lab.present.fonts import notebook_font
from lab.screens import plots_6b
from lab.lesson.exercises import check
from lab.evaluation.profiling import chi_square_test
from lab.text import in_lang

tr = in_lang(LANG)  # this notebook's own lines in LANG / các dòng in của notebook theo LANG
notebook_font()  # DSpark Mono: every Vietnamese letter in code and outputs / đủ mọi chữ tiếng Việt
torch.set_num_threads(1)
cfg = get_config("lab", dspark_block_size=5)  # a draft block of up to 5, like the real model
model = build_model(cfg, seed=SEED)
print(cfg.name, tr("· layers", "· số lớp"), cfg.n_layers, tr("· draft block", "· khối nháp"), cfg.dspark_block_size,
      tr("· vocab", "· từ vựng"), cfg.vocab_size)

# %% [markdown]
# ## 1 · The greedy race / Cuộc đua greedy
# **EN** — 12 prompts, 32 new tokens each, block sizes 1 to 5: plain decoding (one forward per token) against
# speculative decoding (one draft pass + one verify forward per round).
#
# **VI** — 12 prompt, mỗi prompt 32 token mới, khối nháp dài 1 đến 5: giải mã thường (mỗi token một forward)
# so với giải mã dự đoán (mỗi vòng một lượt vẽ nháp và một forward verify).

# %%
gen = torch.Generator().manual_seed(SEED)
prompts = torch.randint(4, cfg.vocab_size, (12, 10), generator=gen)
plain = generate_plain(model, prompts, 32)
race = {}
for k in range(1, 6):
    spec = generate_speculative(model, prompts, 32, verify_len=k)
    race[k] = (spec.tokens == plain.tokens, len(spec.rounds))
    print(tr(f"block {k}: identical = {race[k][0]}, rounds = {race[k][1]} (plain: {plain.forwards + 1} forwards)",
             f"khối {k}: giống hệt = {race[k][0]}, số vòng = {race[k][1]} (thường: {plain.forwards + 1} lượt forward)"))
assert all(same for same, _ in race.values())  # probe: greedy speculative == greedy plain

# %% [markdown]
# **EN** — Identical every time. The untrained drafter rarely guesses right, so there are about as many rounds as
# tokens: losslessness does not depend on the drafter being good; speed does.
#
# **VI** — Lần nào cũng giống hệt. Bộ vẽ chưa huấn luyện hiếm khi đoán đúng nên số vòng gần bằng số token:
# tính bảo toàn không phụ thuộc vào bộ vẽ giỏi hay dở; tốc độ thì có.
#
# ## 2 · The sampling histogram / Biểu đồ tần suất khi lấy mẫu
# **EN** — One prompt and anchor, copied 2000 times; each copy runs one DSpark round at temperature 1. The first
# token committed after the anchor should follow the target's exact distribution p_t. We sharpen the untrained
# head (×4) so that p_t has visible peaks.
#
# **VI** — Một prompt và một anchor, nhân 2000 bản; mỗi bản chạy một vòng DSpark ở nhiệt độ 1. Token đầu tiên được
# ghi sau anchor phải theo đúng phân phối p_t của mô hình mục tiêu. Ta làm nhọn head chưa huấn luyện (×4) để p_t có
# đỉnh rõ.

# %%
with torch.no_grad():
    model.head.weight.mul_(4.0)
prompt, anchor, n = prompts[:1], 7, 2000
with torch.no_grad():
    p_t = token_distribution(model(torch.cat([prompt, torch.tensor([[anchor]])], 1)).logits[0, -1], 1.0)
    cache = model.new_cache(n)
    model(prompt.expand(n, -1), cache=cache)
    rounds = speculative_round(model, cache, torch.full((n,), anchor), 3, 1.0, torch.Generator().manual_seed(SEED))
dspark = torch.tensor([r.committed[0] for r in rounds])
test = chi_square_test(dspark, p_t)
print(tr("DSpark round, first committed token:", "vòng DSpark, token đầu được ghi:"),
      f"χ² = {test['statistic']:.1f} (df {test['df']},", tr("critical", "ngưỡng"),
      f"{test['critical']:.1f}", tr("at α = 0.001) → follows p_t:", "với α = 0.001) → theo đúng p_t:"), test["passes"])
assert test["passes"]  # probe

# %% [markdown]
# **EN** — Now break the verifier: on a rejection, draw from p_t instead of the residual. The untrained drafter
# barely overlaps the target, so to see the damage we use a drafter that is *close but overconfident*:
# p_d ∝ p_t³. Same rule, `verify_block`, 20 000 single-token rounds each way.
#
# **VI** — Giờ làm hỏng verify: khi bị từ chối thì lấy mẫu từ p_t thay vì phần dư. Bộ vẽ chưa huấn luyện gần như
# không trùng với mô hình mục tiêu, nên để thấy tác hại ta dùng một bộ vẽ *gần đúng nhưng quá tự tin*: p_d ∝ p_t³.
# Cùng quy tắc `verify_block`, mỗi cách 20 000 vòng một token.

# %%
from dspark_mini.speculative import verify_block  # noqa: E402

p_d = p_t ** 3 / (p_t ** 3).sum()
rows = torch.stack([p_t, p_t])  # p_t for the verified row and for the bonus row
g = torch.Generator().manual_seed(SEED)
drafts = torch.multinomial(p_d, 20000, replacement=True, generator=g)


def committed(residual: bool) -> torch.Tensor:
    out = []
    for x in drafts:
        v = verify_block(x.view(1), p_d.view(1, -1), rows, g, residual=residual)
        out.append(int(x) if v.n_accepted == 1 else v.next_token)
    return torch.tensor(out)


good, broken = committed(True), committed(False)
test_good, test_broken = chi_square_test(good, p_t), chi_square_test(broken, p_t)
for label, t in ((tr("with residual:   ", "có phần dư:     "), test_good), (tr("without residual:", "không có phần dư:"), test_broken)):
    print(label, f"χ² = {t['statistic']:.1f} (" + tr("critical", "ngưỡng"), f"{t['critical']:.1f}) → {t['passes']}")
assert test_good["passes"] and not test_broken["passes"]  # probe

# %%
plots_6b.committed_histogram(p_t, good, broken, default_tokenizer(), lang=LANG)  # tokens as their text pieces

# %% [markdown]
# **EN** — With the residual, the frequencies sit on the exact probabilities; without it, the drafter's favourite
# tokens are over-represented and the χ² test fails by a wide margin.
#
# **VI** — Có phần dư, tần suất bám sát xác suất chính xác; bỏ phần dư, các token bộ vẽ ưa thích bị dư ra và phép
# kiểm χ² trượt rất xa.
#
# ## Summary / Tóm tắt
# - **EN** — Greedy: kept drafts are the target's argmax → identical output. Sampling: accept with min(1, p_t/p_d),
#   resample from the residual, add a bonus when all survive → the target distribution, exactly.
# - **VI** — Greedy: token nháp được giữ là argmax của mô hình mục tiêu → đầu ra giống hệt. Lấy mẫu: giữ với
#   min(1, p_t/p_d), lấy mẫu lại từ phần dư, thêm token thưởng khi giữ hết → đúng phân phối của mô hình mục tiêu.
#
# ## Exercise / Bài tập
# **EN** — A draft token has p_d(x) = 0.4 and the target gives it p_t(x) = 0.1. With what probability does verify
# keep it? Write a number.
#
# **VI** — Một token nháp có p_d(x) = 0.4 và mô hình mục tiêu cho nó p_t(x) = 0.1. Verify giữ nó với xác suất bao
# nhiêu? Hãy viết một con số.

# %%
answer = None  # e.g. 0.5

# %%
draft_p = torch.tensor([[0.4, 0.6]], dtype=torch.float64)
target_p = torch.tensor([[0.1, 0.9], [0.5, 0.5]], dtype=torch.float64)
expected = verify_block(torch.tensor([0]), draft_p, target_p).ratios[0]  # the rule itself computes it
check(answer, expected, LANG)

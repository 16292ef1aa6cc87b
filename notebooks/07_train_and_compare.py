# %% [markdown]
# # 07 · Train and compare: a mini DeepSpec evaluation
# **EN** — What training the lab gives on real text, read from the report written with the shipped weights (nothing is
# trained here). Four domains: English prose (`en`), Vietnamese prose (`vi`), Python code (`code`) and multi-digit sums
# (`sums`).
# - One command trains the target and five drafters: DSpark (Markov head), DSpark-RNN (RNN head), DFlash (the same
#   parallel draft without the head), Eagle3-lite (an autoregressive chain) and MTP-1 (one draft token).
# - The paper's Table 1 (τ per domain), Figure 2 (acceptance per draft position) and Figure 5 (confidence threshold) in
#   miniature, the STS calibration (on the rounds it was fitted on, and on rounds it never saw), and tokens/s on a CPU.
# - A live re-measurement: one recorded τ reproduced exactly, and why the evaluation decodes one prompt at a time; then
#   an honest reading: where the lab agrees with the paper, where not. The paper's domains are its own (math, code,
#   chat); where a lab number stands beside a paper number, the pairs are: the lab's `sums` ↔ the paper's math, `code` ↔
#   code, `en` and `vi` ↔ chat (the same pairs as the paper pages in `lab/paper/`).
#
# **VI** — Kết quả huấn luyện của lab trên văn bản thật, đọc từ báo cáo đi kèm trọng số (notebook này không huấn luyện
# gì). Bốn miền: văn xuôi tiếng Anh (`en`), văn xuôi tiếng Việt (`vi`), mã Python (`code`) và phép cộng nhiều chữ số
# (`sums`).
# - Một lệnh huấn luyện mô hình mục tiêu và năm bộ vẽ nháp: DSpark (đầu Markov), DSpark-RNN (đầu RNN), DFlash (cùng bản
#   nháp song song nhưng không có đầu đó), Eagle3-lite (một chuỗi tự hồi quy) và MTP-1 (một token nháp).
# - Bảng 1 (τ theo miền), Hình 2 (tỉ lệ giữ theo vị trí nháp) và Hình 5 (ngưỡng tin cậy) của bài báo ở dạng thu nhỏ,
#   hiệu chuẩn STS (trên chính các vòng dùng để chọn nhiệt độ, và trên các vòng nó chưa từng thấy), và token/s trên CPU.
# - Đo lại trực tiếp: tái tạo đúng tuyệt đối một giá trị τ đã ghi, và vì sao phần đánh giá giải mã từng prompt một; rồi
#   đọc trung thực chỗ lab khớp với bài báo và chỗ không khớp. Các miền của bài báo là của riêng nó (toán, mã, trò
#   chuyện); chỗ nào một con số của lab đứng cạnh một con số của bài báo thì ghép cặp như sau: `sums` của lab ↔ toán của
#   bài báo, `code` ↔ mã, `en` và `vi` ↔ trò chuyện (đúng các cặp mà các trang về bài báo trong `lab/paper/` dùng).

# %%
LANG = "en"  # "vi" for Vietnamese output / "vi" để xem kết quả bằng tiếng Việt
SEED = 0


import torch

from dspark_mini import get_config
from lab.evaluation.calibration import DEFAULT_GRID
from lab.evaluation.quality import collect_rounds, decay, eval_prompts, summarize
from lab.screens import plots_training
from lab.lesson.exercises import check
from lab.paper.texts import PAPER_DOMAIN_OF
from lab.present.fonts import notebook_font
from lab.realtext import DOMAINS as REAL_DOMAINS
from lab.text import in_lang
from lab.weights import DRAFTERS, load_drafter, report

# ruff: noqa: E402 (imports below the language switch)

tr = in_lang(LANG)  # this notebook's own lines in LANG / các dòng in của notebook theo LANG
notebook_font()  # DSpark Mono: every Vietnamese letter in code and outputs / đủ mọi chữ tiếng Việt
torch.set_num_threads(1)
rep = report()  # lab/weights/report.json, written by `dspark-lab train all` together with the weights
q = {name: v["quality"] for name, v in rep["drafters"].items()}  # drafter → domain → t1 / greedy / sweep / speed
DOMAINS = list(q["dspark"])
K = len(q["dspark"][DOMAINS[0]]["t1"]["cond_accept"])  # draft tokens per block
TEMPS = ("t1", "greedy")
HEADS = ("dspark", "dspark-rnn")  # the two DSpark drafters: Markov head, RNN head


def mean(xs) -> float:
    xs = list(xs)
    return sum(xs) / len(xs)


print(tr("drafters", "bộ vẽ"), list(q), tr("· domains", "· miền"), DOMAINS,
      tr("· draft block k =", "· khối nháp k ="), K)
assert tuple(q) == DRAFTERS  # probe: the report covers every shipped drafter
assert tuple(DOMAINS) == REAL_DOMAINS  # probe: … measured on the four real-text domains

# %% [markdown]
# ## 1 · What was trained, and how long / Đã huấn luyện gì, mất bao lâu
# **EN** — `dspark-lab train all --out lab/weights` rebuilds every shipped file: the target, alone on the machine, on
# real text read through the lab's byte-level BPE (vocabulary size below) — Jane Austen's novels (`en`), the LibreOffice
# help pages (`vi`), this project's own Python (`code`), multi-digit sums (`sums`) and a few of the lesson's own
# bilingual sentences; then the target cache: the target's own continuations of seeded free-form and corpus prompts, and
# one schedule of training windows (DeepSpec's data stage in miniature); then the five drafters against the frozen
# target (two processes of one thread each), every one on the same windows of that cache, in the same order, for the
# same optimizer steps, with the same kind of loss (`distill`: cross-entropy plus the L1 distance to the target's
# distribution; DSpark adds its confidence loss). Every <!--n:recipe.select_every-->100<!--/n--> steps each drafter is
# measured on held-out windows and keeps its best step. Then STS temperatures for the two DSpark confidence heads; τ per
# domain, decoding one prompt at a time, and on short free-form prompts; and tokens/s. Everything is seeded, and a
# rebuild writes the same bytes (below, the cache's hash in every drafter's record); only the seconds and tokens/s
# depend on the machine.
#
# **VI** — `dspark-lab train all --out lab/weights` dựng lại mọi tệp đi kèm: mô hình mục tiêu, chạy một mình trên máy,
# học văn bản thật qua bộ BPE mức byte của lab (cỡ từ vựng in ở dưới) — các tiểu thuyết của Jane Austen (`en`), các
# trang trợ giúp LibreOffice (`vi`), mã Python của chính dự án này (`code`), các phép cộng nhiều chữ số (`sums`) và một
# ít câu song ngữ của chính bài học; rồi bộ đệm của mô hình mục tiêu: chính các đoạn mô hình mục tiêu viết tiếp từ các
# prompt tự do và prompt của kho ngữ liệu có seed, cùng một lịch các cửa sổ huấn luyện (giai đoạn dữ liệu của DeepSpec ở
# dạng thu nhỏ); rồi năm bộ vẽ nháp trên mô hình mục tiêu đã đóng băng (hai tiến trình, mỗi tiến trình một luồng), bộ
# nào cũng học trên cùng các cửa sổ của bộ đệm đó, cùng thứ tự, cùng số bước tối ưu, cùng một kiểu hàm mất mát
# (`distill`: entropy chéo cộng khoảng cách L1 tới phân phối của mô hình mục tiêu; DSpark thêm hàm mất mát của đầu tin
# cậy). Cứ <!--n:recipe.select_every-->100<!--/n--> bước, mỗi bộ vẽ được đo trên các cửa sổ kiểm định và giữ bước tốt
# nhất của nó. Sau đó là nhiệt độ STS cho hai đầu tin cậy của DSpark; τ theo miền, giải mã từng prompt một, và trên các
# prompt tự do ngắn; và token/s. Mọi thứ đều có seed, và dựng lại thì ghi ra đúng từng byte (dưới đây: mã băm của bộ đệm
# trong bản ghi của từng bộ vẽ nháp); chỉ số giây và token/s phụ thuộc vào máy.

# %%
r = rep["recipe"]
print(tr(
    f"target: {r['target_steps']} steps × batch {r['target_batch']} × {r['target_seq_len']} tokens, "
    f"{rep['target']['train_tokens']} training tokens, {r['target_threads']} threads",
    f"mô hình đích: {r['target_steps']} bước × batch {r['target_batch']} × {r['target_seq_len']} token, "
    f"{rep['target']['train_tokens']} token huấn luyện, {r['target_threads']} luồng",
))
print(tr(
    f"drafters: {r['draft_steps']} steps × {r['draft_batch']} windows each (DSpark kinds: {r['draft_anchors']} blocks "
    f"per window, Markov rank {get_config('lab').dspark_markov_rank}), {r['jobs']} at a time",
    f"bộ vẽ: mỗi bộ {r['draft_steps']} bước × {r['draft_batch']} cửa sổ (họ DSpark: {r['draft_anchors']} khối mỗi "
    f"cửa sổ, hạng Markov {get_config('lab').dspark_markov_rank}), {r['jobs']} cùng lúc",
))
losses = {n: r[f"{n}_loss"] for n in ("dflash", "eagle3", "mtp1")}
print(tr("the baselines' loss:", "hàm mất mát của các bộ vẽ đối chứng:"), losses)
assert set(losses.values()) == {"distill"}  # probe: one loss family for every drafter
cache = rep["target_cache"]
print(tr(
    f"target cache {cache['sha256'][:12]}…: {r['cache_prompts']} sequences the target wrote itself, {r['cache_rows']} "
    f"of the {r['draft_batch']} windows of every step (the rest corpus windows)",
    f"cache của mô hình đích {cache['sha256'][:12]}…: {r['cache_prompts']} chuỗi do chính mô hình đích viết, "
    f"{r['cache_rows']} trên {r['draft_batch']} cửa sổ của mỗi bước (còn lại là cửa sổ của kho văn bản)",
))
train = {n: v["train"] for n, v in rep["drafters"].items()}
for n, v in train.items():
    print(f"  {n:10s}", tr(
        f"data {v['data_sha256'][:12]}… · {v['tokens_seen']:,} ids · {v['parameters']:,} parameters",
        f"dữ liệu {v['data_sha256'][:12]}… · {v['tokens_seen']:,} id · {v['parameters']:,} tham số",
    ))
assert all(v["data_sha256"] == cache["sha256"] for v in train.values())  # probe: one cache for every drafter …
assert len({(v["steps"], v["batch"], v["tokens_seen"]) for v in train.values()}) == 1  # probe: … and one budget
sel = {n: v["selection"] for n, v in train.items()}
rising = {n: all(a < b for a, b in zip(s["accept"], s["accept"][1:], strict=False)) for n, s in sel.items()}
print(tr("held-out acceptance at steps", "tỉ lệ giữ kiểm định ở các bước"), sel["dspark"]["steps"])
for n, s in sel.items():
    print(f"  {n:10s}", [round(a, 3) for a in s["accept"]], tr("· kept: step", "· giữ: bước"), s["best_step"])
assert all(rising.values())  # probe: every curve still rising at its last measurement …
assert all(s["best_step"] == s["steps"][-1] == r["draft_steps"] for s in sel.values())  # probe: … so the last is kept
print(tr(
    f"evaluation: {r['eval_prompts']} held-out prompts × {r['max_new_tokens']} new tokens per domain, one prompt at "
    f"a time · STS: {r['calib_prompts']} other held-out prompts per domain",
    f"đánh giá: {r['eval_prompts']} prompt kiểm định × {r['max_new_tokens']} token mới mỗi miền, từng prompt một "
    f"· STS: {r['calib_prompts']} prompt kiểm định khác mỗi miền",
))
print(tr("seconds:", "số giây:"),
      {stage: rep["seconds"][stage] for stage in ("target", "cache", "drafters", "speed", "total")})
print(tr("seconds per drafter (training only):", "số giây mỗi bộ vẽ (chỉ huấn luyện):"),
      {n: v["train"]["train_seconds"] for n, v in rep["drafters"].items()})
stages = sum(rep["seconds"][stage] for stage in ("target", "cache", "drafters", "speed"))
assert stages - 0.2 <= rep["seconds"]["total"] < stages + 60  # probe: the four stages (each rounded to 0.1 s) are
# (almost) the whole run
assert not rep["target"].get("kept") and rep["seconds"]["target"] > 0  # probe: the target was trained in this run
assert rep["conditions"]["n_prompts"] == r["eval_prompts"]  # probe: the report's conditions say the same

# %% [markdown]
# **EN** — Every drafter's held-out acceptance was still rising at its last measurement, so each kept its last step: the
# drafters are bound by the budget (<!--n:recipe.draft_steps-->600<!--/n--> steps, the same for all), not by what they
# can learn.
#
# **VI** — Tỉ lệ giữ trên tập kiểm định của mọi bộ vẽ vẫn còn tăng ở lần đo cuối, nên bộ nào cũng giữ bước cuối cùng:
# các bộ vẽ bị giới hạn bởi ngân sách (<!--n:recipe.draft_steps-->600<!--/n--> bước, như nhau cho mọi bộ), chứ không
# phải bởi những gì chúng có thể học.

# %%
t = rep["target"]
V = get_config("lab").vocab_size
print(tr(
    f"target after {t['steps']} steps: validation loss {t['val_loss']:.3f} (perplexity "
    f"{torch.tensor(t['val_loss']).exp():.0f}), accuracy {t['val_accuracy']:.3f} (chance: 1/{V})",
    f"mô hình đích sau {t['steps']} bước: loss kiểm định {t['val_loss']:.3f} (perplexity "
    f"{torch.tensor(t['val_loss']).exp():.0f}), độ chính xác {t['val_accuracy']:.3f} (đoán bừa: 1/{V})",
))
curve = t["curve"]["val_loss"]
drops = [curve[i] - curve[i + 1] for i in range(len(curve) - 1)]
print(tr("validation loss falls by", "loss kiểm định giảm"), [round(x, 3) for x in drops])
assert 1000 / V < t["val_accuracy"] < 0.2  # probe: over a thousand times chance, under one token in five
assert all(a > b > 0 for a, b in zip(drops, drops[1:], strict=False))  # probe: falls each time, by less each time …
assert drops[-1] < 0.01 * curve[-1]  # probe: … the last time by under 1 %
plots_training.target_curve(rep, LANG)

# %% [markdown]
# **EN** — The target's loss falls at every measurement, each time by less than the time before, and over the last
# interval by under 1 %: more steps would buy little at this size. Its held-out accuracy
# (<!--n:target.val_accuracy-->0.175<!--/n-->) is over a thousand times chance, yet it predicts the next token of real
# text right less than one time in five: every drafter below imitates this target, and its continuations are what they
# are judged on.
#
# **VI** — Loss của mô hình mục tiêu giảm ở mọi lần đo, lần sau giảm ít hơn lần trước, và ở khoảng cuối giảm chưa tới
# 1 %: với cỡ này, thêm bước cũng chẳng được bao nhiêu. Độ chính xác kiểm định của nó
# (<!--n:target.val_accuracy-->0.175<!--/n-->) cao gấp hơn một nghìn lần đoán bừa, vậy mà nó đoán đúng token kế tiếp của
# văn bản thật chưa tới một lần trong năm: mọi bộ vẽ dưới đây bắt chước mô hình mục tiêu này, và được chấm trên chính
# các đoạn nó viết tiếp.
#
# ## 2 · Table 1 in miniature: τ per domain / Bảng 1 thu nhỏ: τ theo miền
# **EN** — τ = tokens committed per round (kept drafts + the target's own token), over
# <!--n:recipe.eval_prompts-->12<!--/n--> held-out prompts per domain × <!--n:recipe.max_new_tokens-->40<!--/n--> new
# tokens, decoded one prompt at a time (§7 shows why), at temperature 1 (the paper's setting) and greedy. The most a
# round can give here is k + 1 (printed below).
#
# **VI** — τ = số token được ghi mỗi vòng (token nháp được giữ + token của chính mô hình mục tiêu), trên
# <!--n:recipe.eval_prompts-->12<!--/n--> prompt kiểm định mỗi miền × <!--n:recipe.max_new_tokens-->40<!--/n--> token
# mới, giải mã từng prompt một (§7 cho thấy vì sao), ở nhiệt độ 1 (như bài báo) và greedy. Ở đây một vòng cho nhiều nhất
# k + 1 (in ở dưới).

# %%
tau = {n: {T: mean(q[n][d][T]["tau"] for d in DOMAINS) for T in TEMPS} for n in q}
print(tr(f"the most a round commits: k + 1 = {K + 1}", f"một vòng ghi nhiều nhất: k + 1 = {K + 1}"))
for n in q:
    print(f"{n:11s} τ  T = 1: {tau[n]['t1']:.2f}   greedy: {tau[n]['greedy']:.2f}")
ratio = {T: tau["dspark"][T] / tau["dflash"][T] for T in TEMPS}
print(f"DSpark ÷ DFlash: {ratio['t1']:.3f} (T = 1), {ratio['greedy']:.3f} (greedy)")
assert all(abs(rep["summary"]["mean_tau"][n][T] - tau[n][T]) < 1e-12 for n in q for T in TEMPS)  # probe
assert all(abs(rep["summary"]["dspark_over_dflash"][T] - ratio[T]) < 1e-12 for T in TEMPS)  # probe
assert all(q["dspark"][d][T]["tau"] > q["dflash"][d][T]["tau"] for d in DOMAINS for T in TEMPS)  # probe: everywhere
assert ratio["t1"] > ratio["greedy"] > 1.15  # probe: by more at T = 1; by over 15 % at both
best = {(d, T): max(q, key=lambda n, d=d, T=T: q[n][d][T]["tau"]) for d in DOMAINS for T in TEMPS}
print(tr("highest τ per domain:", "τ cao nhất theo miền:"), {f"{d} · {T}": n for (d, T), n in best.items()})
assert all(max(q, key=lambda n, T=T: tau[n][T]) == "eagle3" for T in TEMPS)  # probe: Eagle3-lite, on the mean …
assert "eagle3" in best.values() and set(best.values()) - {"eagle3"} and set(best.values()) <= {"eagle3", *HEADS}
# probe: … but not in every domain: where not, a DSpark head
free = rep["summary"]["free_form_tau"]  # short prompts outside the corpus ("hello", "x =", …), greedy
print(tr("free-form prompts, greedy τ:", "prompt tự do, τ greedy:"), {n: round(free[n]["greedy"], 2) for n in free})
ORDER = ("eagle3", "dspark", "dflash")
PAIRS = list(zip(ORDER, ORDER[1:], strict=False))
assert all(free[a]["greedy"] > free[b]["greedy"] for a, b in PAIRS)  # probe: the free-form order …
assert all(tau[a]["greedy"] > tau[b]["greedy"] for a, b in PAIRS)  # probe: … is the held-out greedy order
easiest = {n: max(DOMAINS, key=lambda d, n=n: q[n][d]["t1"]["tau"]) for n in q}
print(tr("each drafter's highest τ at T = 1:", "τ cao nhất của mỗi bộ vẽ ở T = 1:"), easiest)
assert set(easiest.values()) == {"sums"}  # probe: sums gives every drafter its highest τ at T = 1
plots_training.tau_bars(rep, LANG)

# %% [markdown]
# **EN** — Every drafter trained on the same target cache with the same budget and loss family, so these are differences
# of design, not of data. DSpark's τ is above DFlash's in every domain at both temperatures, on the mean by
# +<!--n:gain.dspark/dflash.t1-->26<!--/n--> % at T = 1 and +<!--n:gain.dspark/dflash.greedy-->19<!--/n--> % greedy.
# Eagle3-lite has the highest mean τ at both temperatures, but not in every domain: where it does not, a DSpark head
# does (printed above; §8 reads why). On the short free-form prompts the order is the same as greedy on held-out text:
# Eagle3-lite, then DSpark, then DFlash. `sums`, the most regular text, gives every drafter its highest τ at T = 1 (the
# bars). The paper's own macro means (its Table 1, blocks of 7 drafts, so τ ≤ 8) for comparison:
#
# **VI** — Mọi bộ vẽ đều học trên cùng một bộ đệm của mô hình mục tiêu, với cùng ngân sách và cùng kiểu hàm mất mát, nên
# đây là khác biệt do thiết kế, không do dữ liệu. τ của DSpark cao hơn DFlash ở mọi miền, ở cả hai nhiệt độ, tính trung
# bình hơn +<!--n:gain.dspark/dflash.t1-->26<!--/n--> % ở T = 1 và +<!--n:gain.dspark/dflash.greedy-->19<!--/n--> % khi
# greedy. Eagle3-lite có τ trung bình cao nhất ở cả hai nhiệt độ, nhưng không phải ở mọi miền: chỗ nó không dẫn thì một
# đầu DSpark dẫn (in ở trên; §8 giải thích vì sao). Trên các prompt tự do ngắn, thứ tự giống như khi greedy trên văn bản
# kiểm định: Eagle3-lite, rồi DSpark, rồi DFlash. `sums`, loại văn bản đều đặn nhất, cho mọi bộ vẽ τ cao nhất của nó ở
# T = 1 (các cột). Để so sánh, trung bình của chính bài báo (Bảng 1, khối 7 token nháp nên τ ≤ 8):

# %%
PAPER_TAU = {  # macro mean τ over 9 benchmarks (Eagle3, DFlash, DSpark), paper Table 1, temperature 1
    "Qwen3-4B": (3.61, 4.06, 4.73),
    "Qwen3-8B": (3.80, 4.07, 4.81),
    "Qwen3-14B": (3.68, 4.04, 4.78),
    "Gemma4-12B": (4.38, 4.02, 4.66),
}
for target, (e3, df, ds) in PAPER_TAU.items():
    print(tr("paper", "bài báo"), f"{target:10s}  DSpark ÷ DFlash {ds / df:.3f} · DSpark ÷ Eagle3 {ds / e3:.3f}")
paper_ratio = mean(ds / df for _, df, ds in PAPER_TAU.values())
lab_vs_eagle3 = {T: tau["dspark"][T] / tau["eagle3"][T] for T in TEMPS}
for T in TEMPS:
    print("lab", f"({T}): DSpark ÷ DFlash {ratio[T]:.3f} · DSpark ÷ Eagle3 {lab_vs_eagle3[T]:.3f}")
paper_df = [ds / df for _, df, ds in PAPER_TAU.values()]
assert ratio["t1"] > max(paper_df)  # probe: at T = 1 above the paper's on every target …
assert abs(ratio["greedy"] - max(paper_df)) < 0.02  # probe: … greedy about level with the paper's largest
assert 0.95 < lab_vs_eagle3["t1"] < 1 and lab_vs_eagle3["greedy"] < 0.95  # probe: just below 1, then clearly below
assert min(ds / e3 for e3, _, ds in PAPER_TAU.values()) > 1  # the paper: DSpark above Eagle3 on every target

# %% [markdown]
# **EN** — On equal data the lab reaches the paper's DSpark ÷ DFlash: at T = 1 above it on every target, greedy about
# level with the paper's largest (the paper's are at T = 1). Its DSpark ÷ Eagle3 is just below 1 at T = 1
# (<!--n:ratio.dspark/eagle3.t1-->0.98<!--/n-->) and clearly below greedy
# (<!--n:ratio.dspark/eagle3.greedy-->0.91<!--/n-->), where the paper's is above 1 on every target. §8 reads both.
#
# **VI** — Với cùng dữ liệu, lab đạt được tỉ số DSpark ÷ DFlash của bài báo: ở T = 1 cao hơn với mọi mô hình mục tiêu,
# khi greedy thì xấp xỉ mức cao nhất của bài báo (các số của bài báo là ở T = 1). Tỉ số DSpark ÷ Eagle3 của lab hơi dưới
# 1 ở T = 1 (<!--n:ratio.dspark/eagle3.t1-->0.98<!--/n-->) và dưới rõ rệt khi greedy
# (<!--n:ratio.dspark/eagle3.greedy-->0.91<!--/n-->), trong khi của bài báo trên 1 với mọi mô hình mục tiêu. §8 giải
# thích cả hai.
#
# ## 3 · Figure 2 in miniature: acceptance along the block / Hình 2 thu nhỏ: tỉ lệ giữ dọc theo khối
# **EN** — Conditional acceptance at position i, α_i = P(draft i kept | drafts 1..i−1 kept). A parallel drafter that guesses
# all k tokens at once tends to lose accuracy further along; `decay` = α₁ − mean(α₂..α_k) measures it
# (α is measured by verify; c, the confidence head, only predicts it).
#
# **VI** — Tỉ lệ giữ có điều kiện ở vị trí i, α_i = P(token nháp i được giữ | token 1..i−1 đã được giữ). Bộ vẽ song song đoán
# cả k token một lượt thường kém chính xác dần về sau; `decay` = α₁ − trung bình(α₂..α_k) đo mức giảm đó
# (α do verify đo được; c, đầu tin cậy, chỉ dự đoán nó).

# %%
dec = {n: {T: mean(decay(q[n][d][T]["cond_accept"]) for d in DOMAINS) for T in TEMPS} for n in q}
for n in q:
    print(f"{n:11s}", tr("decay", "mức giảm"), f" T = 1: {dec[n]['t1']:+.3f}   greedy: {dec[n]['greedy']:+.3f}")
less = {  # T → domain → does DSpark decay less than DFlash there?
    T: {d: decay(q["dspark"][d][T]["cond_accept"]) < decay(q["dflash"][d][T]["cond_accept"]) for d in DOMAINS}
    for T in TEMPS
}
print(tr("DSpark decays less than DFlash in:", "DSpark giảm ít hơn DFlash ở:"),
      {T: [d for d in DOMAINS if less[T][d]] for T in TEMPS})
print(tr("DFlash's decay per domain (T = 1):", "mức giảm của DFlash theo miền (T = 1):"),
      {d: round(decay(q["dflash"][d]["t1"]["cond_accept"]), 3) for d in DOMAINS})
assert all(less[T][d] for T in TEMPS for d in DOMAINS)  # probe: DSpark decays less than DFlash everywhere
assert all(decay(q["dflash"][d]["t1"]["cond_accept"]) > 0 for d in DOMAINS)  # probe: DFlash falls in every domain
assert abs(dec["dspark"]["t1"]) < 0.05 and dec["dflash"]["t1"] > 0.1  # probe: DSpark hardly on the mean, DFlash clearly
assert dec["dspark"]["greedy"] < 0 and abs(dec["dflash"]["greedy"]) < 0.05  # probe: greedy, DSpark's rises …
# … along the block on the mean, DFlash's hardly moves
assert dec["eagle3"]["t1"] <= 0  # probe: the Eagle3 chain: no decay on the mean
plots_training.cond_accept_lines(rep, LANG, "t1")

# %% [markdown]
# **EN** — At T = 1 (the plot) DFlash's acceptance falls after position 1 in every domain; DSpark's hardly falls on the
# mean (<!--n:decay.dspark.t1-->0.00<!--/n--> against DFlash's <!--n:decay.dflash.t1-->0.14<!--/n-->), less than
# DFlash's in every domain; the Eagle3 chain's does not fall on the mean. Greedy (`plots_training.cond_accept_lines(rep,
# LANG, "greedy")`) DSpark's even rises along the block on the mean while DFlash's hardly moves, and DSpark still decays
# less than DFlash in every domain. MTP-1 has one position.
#
# **VI** — Ở T = 1 (hình trên) tỉ lệ giữ của DFlash giảm sau vị trí 1 ở mọi miền; của DSpark hầu như không giảm tính
# trung bình (<!--n:decay.dspark.t1-->0.00<!--/n--> so với <!--n:decay.dflash.t1-->0.14<!--/n--> của DFlash), và giảm ít
# hơn DFlash ở mọi miền; của chuỗi Eagle3 không giảm tính trung bình. Khi greedy (`plots_training.cond_accept_lines(rep,
# LANG, "greedy")`), tính trung bình tỉ lệ giữ của DSpark còn tăng dọc theo khối trong khi của DFlash hầu như không đổi,
# và DSpark vẫn giảm ít hơn DFlash ở mọi miền. MTP-1 chỉ có một vị trí.
#
# ## 4 · Figure 5 in miniature: a static confidence threshold / Hình 5 thu nhỏ: ngưỡng tin cậy tĩnh
# **EN** — Verify only the drafts up to the first one whose confidence c is below a threshold. A higher threshold
# verifies fewer slots (cheaper for a busy server) and wastes fewer of them (higher verify rate), at some cost in τ.
#
# **VI** — Chỉ verify các token nháp cho tới token đầu tiên có độ tin cậy c dưới ngưỡng. Ngưỡng càng cao thì verify càng
# ít ô (rẻ hơn cho máy chủ bận) và ít ô bị phí hơn (tỉ lệ verify hữu ích cao hơn), đổi lại τ giảm ít nhiều.

# %%
sweep = {d: {s["threshold"]: s for s in q["dspark"][d]["threshold_sweep"]} for d in DOMAINS}


def lost(d: str, th: float, field: str) -> float:
    """The share of `field` (verified slots or τ) that threshold `th` removes in domain `d`, against threshold 0."""
    return 1 - sweep[d][th][field] / sweep[d][0.0][field]


for d in DOMAINS:
    print(
        d.ljust(5),
        "  ".join(
            f"t {th:.1f}: " + tr("verified", "verify") + f" {s['verified_per_round']:.2f}, τ {s['tau']:.2f}"
            + (f" (−{100 * lost(d, th, 'tau'):.1f} %)" if th else "")
            + ", " + tr("rate", "tỉ lệ") + f" {s['verify_rate']:.2f}"
            for th, s in sweep[d].items()
            if th in (0.0, 0.3, 0.5, 0.7)
        ),
    )
PROSE = [d for d in DOMAINS if d != "sums"]  # en, vi, code
for d in DOMAINS:
    rates = [s["verify_rate"] for s in sweep[d].values()]
    assert rates == sorted(rates)  # probe: the verify rate only rises with the threshold
for d in PROSE:
    assert lost(d, 0.3, "verified_per_round") > 2 * lost(d, 0.3, "tau") > 0  # probe: at 0.3, slots go twice as fast
    assert lost(d, 0.5, "tau") > 0.1  # probe: at 0.5, τ itself falls by a tenth or more
assert lost("sums", 0.3, "verified_per_round") == 0 and lost("sums", 0.5, "tau") < 0.02  # probe: sums hardly moves
assert min(DOMAINS, key=lambda d: lost(d, 0.5, "tau")) == "sums"  # probe: the smallest loss at 0.5 is sums'
plots_training.threshold_sweep_chart(rep, "dspark", LANG)

# %% [markdown]
# **EN** — In `en`, `vi` and `code` a threshold of 0.3 removes verified slots more than twice as fast as it removes τ:
# mostly slots that would have been rejected anyway. By 0.5 it cuts into drafts that would have been kept, and τ falls
# by a tenth or more there (up to <!--n:sweep.dspark.0.5.tau_drop.max-->25<!--/n--> %). In `sums`, where DSpark's drafts
# are confident and mostly right, 0.3 removes nothing and 0.5 costs only
# <!--n:sweep.dspark.0.5.tau_drop.min-->1<!--/n--> % of τ: one fixed threshold does not suit every kind of text, one
# reason to read the confidence per request instead (the scheduler of notebook 08).
#
# **VI** — Ở `en`, `vi` và `code`, ngưỡng 0.3 bỏ các ô verify nhanh hơn gấp đôi mức nó làm giảm τ: chủ yếu là các ô đằng
# nào cũng bị từ chối. Tới 0.5 nó cắt vào cả các token nháp lẽ ra được giữ, và τ ở đó giảm từ một phần mười trở lên (tới
# <!--n:sweep.dspark.0.5.tau_drop.max-->25<!--/n--> %). Ở `sums`, nơi các token nháp của DSpark vừa tự tin vừa phần lớn
# đúng, ngưỡng 0.3 không bỏ ô nào và 0.5 chỉ làm mất <!--n:sweep.dspark.0.5.tau_drop.min-->1<!--/n--> % τ: một ngưỡng cố
# định không hợp với mọi loại văn bản, đó là một lý do để đọc độ tin cậy theo từng yêu cầu (bộ lập lịch của notebook
# 08).
#
# ## 5 · STS: calibrating the confidence / STS: hiệu chuẩn độ tin cậy
# **EN** — The scheduler reads the prefix survival a_i = c₁·…·c_i. Sequential temperature scaling fits one temperature
# T_i per position, left to right, so that a_i matches how often drafts 1..i were really kept: from a grid (its ends
# printed below) it picks the T_i with the lowest ECE (20 bins) on the verified rounds of
# <!--n:recipe.calib_prompts-->12<!--/n--> calibration prompts per domain (a held-out seed the evaluation does not use).
# That ECE is measured on the very rounds it was fitted on; the report also judges the same temperatures on the
# evaluation's rounds (§2), which the fit never saw.
#
# **VI** — Bộ lập lịch đọc xác suất sống sót tiền tố a_i = c₁·…·c_i. Scaling nhiệt độ tuần tự (STS) chọn cho mỗi vị trí
# một nhiệt độ T_i, từ trái sang phải, để a_i khớp với tần suất token 1..i thật sự được giữ: trong một lưới (hai đầu in
# ở dưới) nó lấy T_i có ECE (20 ngăn) thấp nhất trên các vòng đã verify của <!--n:recipe.calib_prompts-->12<!--/n-->
# prompt hiệu chuẩn mỗi miền (một seed kiểm định mà phần đánh giá không dùng). ECE đó đo trên chính các vòng đã dùng để
# chọn; báo cáo còn chấm cùng các nhiệt độ ấy trên các vòng của phần đánh giá (§2), những vòng mà lúc chọn chưa hề thấy.

# %%
fit = {n: rep["drafters"][n]["train"]["sts"] for n in HEADS}
held = {n: rep["drafters"][n]["heldout_calibration"] for n in HEADS}
temps = {n: rep["drafters"][n]["train"]["confidence_temperatures"] for n in HEADS}
print(tr("grid of temperatures:", "lưới nhiệt độ:"), DEFAULT_GRID[0], "…", DEFAULT_GRID[-1])
for n in HEADS:
    print(f"{n}: T_i = {temps[n]}")
    print(tr(
        f"  fit rounds ({fit[n][0]['n']}):      ECE before {[round(s['ece_before'], 3) for s in fit[n]]} → after "
        f"{[round(s['ece_after'], 3) for s in fit[n]]}",
        f"  vòng để khớp ({fit[n][0]['n']}):    ECE trước {[round(s['ece_before'], 3) for s in fit[n]]} → sau "
        f"{[round(s['ece_after'], 3) for s in fit[n]]}",
    ))
    print(tr(
        f"  held-out rounds ({held[n][0]['n']}): ECE raw    {[round(h['ece_raw'], 3) for h in held[n]]} → after "
        f"{[round(h['ece_sts'], 3) for h in held[n]]}",
        f"  vòng kiểm định ({held[n][0]['n']}): ECE thô    {[round(h['ece_raw'], 3) for h in held[n]]} → sau "
        f"{[round(h['ece_sts'], 3) for h in held[n]]}",
    ))
helps = {n: [h["ece_sts"] < h["ece_raw"] for h in held[n]] for n in HEADS}
print(tr("held out, STS lowers the ECE at positions:", "kiểm định riêng, STS giảm ECE ở các vị trí:"),
      {n: [i + 1 for i, b in enumerate(helps[n]) if b] for n in HEADS})
total = {n: (sum(h["ece_raw"] for h in held[n]), sum(h["ece_sts"] for h in held[n])) for n in HEADS}
print(tr("held out, ECE summed over positions, raw → STS:", "kiểm định riêng, tổng ECE các vị trí, thô → STS:"),
      {n: tuple(round(100 * x, 1) for x in total[n]) for n in HEADS})
assert all(s["ece_after"] < s["ece_before"] for n in HEADS for s in fit[n])  # probe: on the fit rounds, everywhere
assert all(any(helps[n]) and not all(helps[n]) for n in HEADS)  # probe: held out, lower at some positions only
assert total["dspark"][1] > total["dspark"][0]  # probe: in total, worse for DSpark …
assert total["dspark-rnn"][1] < total["dspark-rnn"][0]  # probe: … better for DSpark-RNN
assert all(s["n"] < 1000 and h["n"] < 1000 for n in HEADS for s, h in zip(fit[n], held[n], strict=True))  # probe
assert all(0.5 <= t <= 2 for n in HEADS for t in temps[n])  # probe: within a factor of two of 1 …
assert DEFAULT_GRID[0] < 0.5 and DEFAULT_GRID[-1] > 2  # … far from the grid's ends
plots_training.sts_ece_bars(rep, "dspark", LANG)

# %% [markdown]
# **EN** — On the rounds they were fitted on, both heads' temperatures lower the ECE at every position (the fit goes
# left to right, and each T_i changes the survival that every later position reads). On the held-out rounds the gain
# carries over only in part: for each head STS lowers the ECE at some positions and raises it at others. DSpark's (raw →
# STS):
# <!--n:ece.dspark.heldout.en-->lower at position 1 (5.4 → 5.3 %), higher at positions 2–3 (5.3 → 7.2, 5.5 → 5.9 %) and lower at positions 4–5 (5.1 → 4.9, 3.3 → 2.8 %); summed over positions 1–5: 24.7 → 26.1 (higher)<!--/n-->.
# DSpark-RNN's:
# <!--n:ece.dspark-rnn.heldout.en-->higher at position 1 (5.2 → 5.5 %) and lower at positions 2–5 (6.9 → 4.9, 6.9 → 5.5, 4.7 → 3.3, 4.7 → 2.9 %); summed over positions 1–5: 28.5 → 22.1 (lower)<!--/n-->.
# In total, worse for one head and better for the other. The temperatures themselves are mild, each within a factor of
# two of 1 — DSpark's <!--n:sts.dspark.min-->0.65<!--/n--> to <!--n:sts.dspark.max-->1.8<!--/n-->, DSpark-RNN's
# <!--n:sts.dspark-rnn.min-->0.8<!--/n--> to <!--n:sts.dspark-rnn.max-->1.9<!--/n-->, far from the grid's ends — fitted
# on under a thousand rounds per position (<!--n:ece.dspark.heldout.n-->729<!--/n--> held out for DSpark), binned 20
# ways, where the raw heads are already within <!--n:ece.dspark.heldout.raw.max-->5.5<!--/n--> % (DSpark) and
# <!--n:ece.dspark-rnn.heldout.raw.max-->6.9<!--/n--> % (DSpark-RNN). The paper fits STS on large held-out sets; with a
# few hundred rounds, believe a fit-set ECE only as far as held-out rounds confirm it.
#
# **VI** — Trên chính các vòng đã dùng để chọn, các nhiệt độ của cả hai đầu làm ECE giảm ở mọi vị trí (phép chọn đi từ
# trái sang phải, và mỗi T_i thay đổi xác suất sống sót mà mọi vị trí sau đọc). Trên các vòng kiểm định riêng thì lợi
# ích đó chỉ giữ được một phần: với mỗi đầu, STS làm ECE giảm ở vài vị trí và tăng ở các vị trí khác. Của DSpark (thô →
# STS):
# <!--n:ece.dspark.heldout.vi-->thấp hơn ở vị trí 1 (5.4 → 5.3 %), cao hơn ở các vị trí 2–3 (5.3 → 7.2, 5.5 → 5.9 %) và thấp hơn ở các vị trí 4–5 (5.1 → 4.9, 3.3 → 2.8 %); tổng trên các vị trí 1–5: 24.7 → 26.1 (cao hơn)<!--/n-->.
# Của DSpark-RNN:
# <!--n:ece.dspark-rnn.heldout.vi-->cao hơn ở vị trí 1 (5.2 → 5.5 %) và thấp hơn ở các vị trí 2–5 (6.9 → 4.9, 6.9 → 5.5, 4.7 → 3.3, 4.7 → 2.9 %); tổng trên các vị trí 1–5: 28.5 → 22.1 (thấp hơn)<!--/n-->.
# Tính tổng thì tệ hơn với một đầu và tốt hơn với đầu kia. Bản thân các nhiệt độ thì vừa phải, mỗi cái đều nằm trong
# khoảng từ một nửa tới gấp đôi của 1 — của DSpark từ <!--n:sts.dspark.min-->0.65<!--/n--> tới
# <!--n:sts.dspark.max-->1.8<!--/n-->, của DSpark-RNN từ <!--n:sts.dspark-rnn.min-->0.8<!--/n--> tới
# <!--n:sts.dspark-rnn.max-->1.9<!--/n-->, xa hai đầu của lưới — và được chọn trên chưa tới một nghìn vòng mỗi vị trí
# (<!--n:ece.dspark.heldout.n-->729<!--/n--> vòng kiểm định với DSpark), chia 20 ngăn, trong khi các đầu thô đã sai lệch
# chỉ tới <!--n:ece.dspark.heldout.raw.max-->5.5<!--/n--> % (DSpark) và
# <!--n:ece.dspark-rnn.heldout.raw.max-->6.9<!--/n--> % (DSpark-RNN). Bài báo chọn STS trên các tập kiểm định lớn; với
# vài trăm vòng, chỉ tin ECE trên tập dùng để chọn tới mức các vòng kiểm định riêng xác nhận.
#
# ## 6 · Wall-clock tokens/s / Token/s thật
# **EN** — Greedy, batch 1, plain and speculative decoding interleaved prompt by prompt, on the CPU below.
#
# **VI** — Greedy, batch 1, giải mã thường và giải mã dự đoán xen kẽ từng prompt, trên CPU ghi dưới đây.

# %%
c = rep["conditions"]
print(tr(
    f"conditions: {c['cpu']}, {c['threads']} thread, torch {c['torch']}, {c['speed_prompts']} prompts × "
    f"{c['max_new_tokens']} tokens per domain — {c['speed']}",
    f"điều kiện chạy: {c['cpu']}, {c['threads']} luồng, torch {c['torch']}, {c['speed_prompts']} prompt × "
    f"{c['max_new_tokens']} token mỗi miền — {c['speed']}",
))
speedup = {n: mean(q[n][d]["speed"]["ratio"] for d in DOMAINS) for n in q}
print(tr("speculative ÷ plain tokens/s:", "token/giây suy đoán ÷ thường:"),
      {n: round(v, 2) for n, v in speedup.items()})
per_domain = {d: q["dspark"][d]["speed"]["ratio"] / q["dflash"][d]["speed"]["ratio"] for d in DOMAINS}
print(tr("DSpark ÷ DFlash tokens/s per domain:", "token/giây DSpark ÷ DFlash theo miền:"),
      {d: round(v, 2) for d, v in per_domain.items()})
slower = {n: [d for d in DOMAINS if q[n][d]["speed"]["ratio"] < 1] for n in q}
slower = {n: v for n, v in slower.items() if v}
print(tr("slower than plain decoding in:", "chậm hơn giải mã thường ở:"), slower)
assert slower == {"dflash": ["vi", "code"]}  # probe: every drafter pays off everywhere, but DFlash in vi and code
assert min(speedup, key=speedup.get) == "dflash"  # probe: DFlash least on the mean
assert max(speedup, key=speedup.get) == "eagle3"  # probe: Eagle3-lite most …
assert speedup["eagle3"] < 1.1 * min(speedup[n] for n in HEADS)  # probe: … within a tenth of both DSpark heads
assert all(per_domain[d] > 1 for d in DOMAINS)  # probe: DSpark gives more tokens/s than DFlash in every domain
assert r["dflash_layers"] > r["dspark_layers"]  # probe: DFlash's draft is the deeper one
assert speedup["mtp1"] > speedup["dflash"] and tau["mtp1"]["greedy"] < tau["dflash"]["greedy"]  # probe: MTP-1 gives
# more tokens/s than DFlash with a lower τ
assert c["speed_prompts"] < c["n_prompts"]  # probe: tokens/s rests on fewer prompts than τ
plots_training.speed_bars(rep, LANG)

# %% [markdown]
# **EN** — Every drafter pays off in every domain, even on a CPU, except DFlash: Eagle3-lite most on the mean
# (<!--n:speed.eagle3.mean-->1.49<!--/n-->×), the two DSpark heads close behind
# (<!--n:speed.dspark-rnn.mean-->1.43<!--/n-->× DSpark-RNN, <!--n:speed.dspark.mean-->1.42<!--/n-->× DSpark), MTP-1 next
# (<!--n:speed.mtp1.mean-->1.25<!--/n-->×), DFlash least (<!--n:speed.dflash.mean-->1.01<!--/n-->×, slower than plain
# decoding in `vi` and `code`). DFlash's draft is <!--n:recipe.dflash_layers-->5<!--/n--> layers deep against DSpark's
# <!--n:recipe.dspark_layers-->3<!--/n-->, so each of its rounds costs more: MTP-1, with a lower τ but one small block,
# gives more tokens/s than DFlash, while DSpark's τ lead over DFlash does turn into more tokens/s, in every domain. Each
# domain's bar rests on only the speed run's <!--n:recipe.speed_prompts-->2<!--/n--> prompts, against the
# <!--n:recipe.eval_prompts-->12<!--/n--> of τ in §2: read the order of close bars with care.
#
# **VI** — Bộ vẽ nào cũng có lợi ở mọi miền, kể cả trên CPU, trừ DFlash: Eagle3-lite nhiều nhất tính trung bình
# (<!--n:speed.eagle3.mean-->1.49<!--/n-->×), hai đầu DSpark bám sát ngay sau
# (<!--n:speed.dspark-rnn.mean-->1.43<!--/n-->× DSpark-RNN, <!--n:speed.dspark.mean-->1.42<!--/n-->× DSpark), rồi MTP-1
# (<!--n:speed.mtp1.mean-->1.25<!--/n-->×), DFlash ít nhất (<!--n:speed.dflash.mean-->1.01<!--/n-->×, chậm hơn giải mã
# thường ở `vi` và `code`). Bản nháp của DFlash sâu <!--n:recipe.dflash_layers-->5<!--/n--> lớp, của DSpark
# <!--n:recipe.dspark_layers-->3<!--/n--> lớp, nên mỗi vòng của nó tốn hơn: MTP-1, τ thấp hơn nhưng chỉ có một khối nhỏ,
# cho nhiều token/s hơn DFlash, còn mức DSpark hơn DFlash về τ thì thật sự thành nhiều token/s hơn, ở mọi miền. Mỗi cột
# của một miền chỉ dựa trên <!--n:recipe.speed_prompts-->2<!--/n--> prompt của lần đo tốc độ, so với
# <!--n:recipe.eval_prompts-->12<!--/n--> prompt của τ ở §2: hãy đọc thứ tự các cột sát nhau một cách thận trọng.

# %% [markdown]
# ## 7 · Why one prompt at a time / Vì sao giải mã từng prompt một
# **EN** — (a) The report is real: re-run DSpark on the report's `en` prompts, greedy, one prompt at a time, with the
# report's settings, and the recorded τ comes back exactly. (b) Why not a batch: in a batch decoded in lockstep each
# prompt keeps its own verdict, but the batch commits only the shortest kept prefix, so a prompt that kept more
# re-drafts, next round, text it has already drafted right, and counts those kept drafts again. On the first 4 of those
# prompts, DSpark and DFlash, batch 4 against batch 1; besides τ, the tokens each prompt really commits per round. (A
# few seconds on one thread, most of it (a): a recorded τ is over all <!--n:recipe.eval_prompts-->12<!--/n--> prompts.)
#
# **VI** — (a) Báo cáo là thật: chạy lại DSpark trên các prompt `en` của báo cáo, greedy, từng prompt một, với đúng
# thiết lập của báo cáo, và τ đã ghi hiện lại đúng tuyệt đối. (b) Vì sao không dùng batch: trong một batch giải mã đồng
# bộ, mỗi prompt giữ kết quả verify của riêng nó, nhưng cả batch chỉ ghi tiền tố được giữ ngắn nhất, nên một prompt giữ
# được nhiều hơn sẽ, ở vòng sau, vẽ nháp lại đoạn mà nó đã vẽ đúng, và đếm những token nháp được giữ ấy thêm lần nữa.
# Trên 4 prompt đầu trong số đó, DSpark và DFlash, batch 4 so với batch 1; ngoài τ, còn có số token mỗi prompt thật sự
# ghi được mỗi vòng. (Vài giây trên một luồng, phần lớn cho (a): một giá trị τ đã ghi tính trên cả
# <!--n:recipe.eval_prompts-->12<!--/n--> prompt.)

# %%
DOMAIN, FEW = "en", 4
prompts = eval_prompts(DOMAIN, r["eval_prompts"], seed=r["seed"])  # the report's prompts, settings and seed
model, drafter = load_drafter("dspark")
per_prompt = [  # one prompt at a time, prompt i with seed + i, exactly as lab.evaluation.quality does
    collect_rounds(model, drafter, prompts[i : i + 1], r["max_new_tokens"], 0.0, r["seed"] + i)
    for i in range(prompts.size(0))
]
again, recorded = summarize([x for rs in per_prompt for x in rs]), q["dspark"][DOMAIN]["greedy"]
print(tr(
    f"(a) DSpark, {DOMAIN}, greedy: τ live {again['tau']:.6f} over {again['rounds']} rounds · report "
    f"{recorded['tau']:.6f} over {recorded['rounds']} rounds",
    f"(a) DSpark, {DOMAIN}, greedy: τ chạy lại {again['tau']:.6f} trên {again['rounds']} vòng · báo cáo "
    f"{recorded['tau']:.6f} trên {recorded['rounds']} vòng",
))
assert abs(again["tau"] - recorded["tau"]) < 1e-9 and again["rounds"] == recorded["rounds"]  # probe: exactly
assert all(abs(a - b) < 1e-9 for a, b in zip(again["cond_accept"], recorded["cond_accept"], strict=True))  # probe

live = {}
for n in ("dspark", "dflash"):
    if n == "dspark":  # one at a time: already measured in (a)
        one = [x for rs in per_prompt[:FEW] for x in rs]
    else:
        model, drafter = load_drafter(n)
        one = collect_rounds(model, drafter, prompts[:FEW], r["max_new_tokens"], 0.0, r["seed"])
    lockstep = collect_rounds(model, drafter, prompts[:FEW], r["max_new_tokens"], 0.0, r["seed"], batch=FEW)
    live[n] = {b: (summarize(rs)["tau"], mean(len(x.committed) for x in rs)) for b, rs in ((1, one), (FEW, lockstep))}
    print(tr(
        f"(b) {n:6s} greedy, {FEW} {DOMAIN} prompts · one at a time: τ {live[n][1][0]:.2f}, commits "
        f"{live[n][1][1]:.2f} per round · lockstep batch of {FEW}: τ {live[n][FEW][0]:.2f}, commits "
        f"{live[n][FEW][1]:.2f} per round",
        f"(b) {n:6s} greedy, {FEW} prompt {DOMAIN} · từng prompt một: τ {live[n][1][0]:.2f}, ghi "
        f"{live[n][1][1]:.2f} mỗi vòng · cùng một batch {FEW}: τ {live[n][FEW][0]:.2f}, ghi "
        f"{live[n][FEW][1]:.2f} mỗi vòng",
    ))
for v in live.values():
    assert abs(v[1][0] - v[1][1]) < 1e-9  # probe: one at a time, τ is what a round commits
    assert v[FEW][0] >= v[1][0]  # probe: in lockstep τ does not fall, it even rises …
    assert v[FEW][1] < 0.5 * v[1][1]  # probe: … while each prompt commits less than half as much per round

# %% [markdown]
# **EN** — (a) The live τ equals the recorded one to the last digit, and so does every conditional acceptance: the
# evaluation is deterministic given the weights. (b) One prompt at a time, τ is exactly what a round commits. In
# lockstep, on these prompts, τ does not fall for either drafter — it even rises — yet each prompt commits less than
# half as many tokens per round as one at a time: the re-drafted, re-kept tokens are counted twice. That is why the
# evaluation decodes one prompt at a time, as DeepSpec's evaluator does.
#
# **VI** — (a) τ đo trực tiếp bằng đúng τ đã ghi tới chữ số cuối, mọi tỉ lệ giữ có điều kiện cũng vậy: với trọng số đã
# cho thì phần đánh giá là tất định. (b) Giải mã từng prompt một thì τ đúng bằng số token một vòng ghi được. Khi đồng
# bộ, trên các prompt này, τ không giảm với cả hai bộ vẽ — thậm chí còn tăng — vậy mà mỗi vòng mỗi prompt ghi được chưa
# tới một nửa số token so với khi giải mã từng prompt một: các token được vẽ lại và giữ lại bị đếm hai lần. Vì thế phần
# đánh giá giải mã từng prompt một, như bộ đánh giá của DeepSpec.

# %% [markdown]
# ## 8 · An honest reading / Đọc một cách trung thực
# **EN** — Where a lab domain stands beside a paper domain below, the pairs are the lab's `sums` ↔ the paper's math,
# `code` ↔ code, `en` and `vi` ↔ chat (printed below; `lab/paper/` uses the same pairs).
#
# **EN — where the lab agrees with the paper**
# - DSpark has a higher τ than DFlash, at both temperatures and in every domain — the paper's headline — with every
#   drafter trained on the same target cache, as in DeepSpec, by at least the paper's margin (§2); and here that lead
#   turns into tokens/s in every domain (§6).
# - At T = 1 DSpark's acceptance decays along the block less than DFlash's, in every domain; the paper's Figure 2 shows
#   the same in every domain, and there, as here (on the mean), the Eagle3 chain's acceptance does not decay.
# - The Markov and RNN heads help at the later positions, where they read a drafted prefix (at position 1 only the
#   anchor, which the parallel draft already sees): at position 1 both heads are within a tenth of DFlash, at positions
#   2 to k ahead by more than three times that gap, at both temperatures; the paper's Figure 2 has the same shape.
# - The RNN head is level with the plain Markov head, within a few percent either way
#   (×<!--n:ratio.dspark-rnn/dspark.t1-->0.97<!--/n--> at T = 1, ×<!--n:ratio.dspark-rnn/dspark.greedy-->1.02<!--/n-->
#   greedy), a smaller difference than the paper's largest RNN gain in its Figure 4 at a block of 16 (printed below);
#   the paper too finds the RNN head only marginally better, and mostly at long blocks.
# - The most regular text is the easiest to draft: at T = 1 `sums` gives every drafter its highest τ (§2), as the
#   paper's math does.
#
# **VI** — Chỗ nào dưới đây một miền của lab đứng cạnh một miền của bài báo thì ghép cặp: `sums` của lab ↔ toán của bài
# báo, `code` ↔ mã, `en` và `vi` ↔ trò chuyện (in ở dưới; `lab/paper/` dùng đúng các cặp này).
#
# **VI — chỗ lab khớp với bài báo**
# - DSpark có τ cao hơn DFlash, ở cả hai nhiệt độ và mọi miền — điểm chính của bài báo — khi mọi bộ vẽ đều học trên cùng
#   một bộ đệm của mô hình mục tiêu, như DeepSpec, với mức chênh ít nhất bằng mức của bài báo (§2); và ở đây mức hơn đó
#   thành nhiều token/s hơn ở mọi miền (§6).
# - Ở T = 1 tỉ lệ giữ của DSpark giảm dọc theo khối ít hơn DFlash, ở mọi miền; Hình 2 của bài báo cũng vậy ở mọi miền,
#   và ở đó, như ở đây (tính trung bình), tỉ lệ giữ của chuỗi Eagle3 không giảm.
# - Đầu Markov và đầu RNN giúp ở các vị trí sau, nơi chúng đọc được một tiền tố nháp (ở vị trí 1 chỉ có anchor, thứ mà
#   bản nháp song song cũng đã thấy): ở vị trí 1 cả hai đầu cách DFlash chưa tới một phần mười, ở các vị trí 2 tới k thì
#   dẫn hơn ba lần mức chênh đó, ở cả hai nhiệt độ; Hình 2 của bài báo có cùng dáng ấy.
# - Đầu RNN ngang đầu Markov thường, chênh vài phần trăm về phía này hay phía kia
#   (×<!--n:ratio.dspark-rnn/dspark.t1-->0.97<!--/n--> ở T = 1, ×<!--n:ratio.dspark-rnn/dspark.greedy-->1.02<!--/n-->
#   khi greedy), chênh ít hơn mức lợi lớn nhất của đầu RNN trong Hình 4 của bài báo với khối 16 (in ở dưới); bài báo
#   cũng thấy đầu RNN chỉ nhỉnh hơn một chút, và chủ yếu với khối dài.
# - Văn bản đều đặn nhất là dễ vẽ nháp nhất: ở T = 1 `sums` cho mọi bộ vẽ τ cao nhất của nó (§2), như miền toán của bài
#   báo.

# %%
PAPER_FIG2 = {  # conditional acceptance at draft positions 1..7 (Qwen3-4B, paper Figure 2, read off the plot)
    "math": {
        "dflash": (0.885, 0.826, 0.820, 0.833, 0.841, 0.839, 0.828),
        "eagle3": (0.810, 0.823, 0.838, 0.843, 0.850, 0.855, 0.850),
        "dspark": (0.905, 0.890, 0.888, 0.886, 0.887, 0.890, 0.883),
    },
    "code": {
        "dflash": (0.865, 0.815, 0.797, 0.800, 0.809, 0.800, 0.777),
        "eagle3": (0.771, 0.774, 0.781, 0.791, 0.787, 0.794, 0.784),
        "dspark": (0.886, 0.872, 0.860, 0.860, 0.858, 0.859, 0.851),
    },
    "chat": {
        "dflash": (0.720, 0.648, 0.638, 0.660, 0.683, 0.692, 0.688),
        "eagle3": (0.533, 0.588, 0.642, 0.678, 0.709, 0.730, 0.733),
        "dspark": (0.736, 0.738, 0.740, 0.744, 0.758, 0.765, 0.761),
    },
}
PAPER_FIG4_LEN16 = {"math": (5.55, 7.2, 7.6), "code": (4.95, 6.2, 6.4), "chat": (3.03, 3.68, 3.78)}  # τ: DFlash,
# Markov, RNN at draft length 16 (paper Figure 4, read off the plot)
PAPER_OF = {d: PAPER_DOMAIN_OF[d] for d in DOMAINS}  # lab domain → the paper domain it stands beside
print(tr("lab domain → paper domain:", "miền của lab → miền của bài báo:"), PAPER_OF)
assert PAPER_OF == {"en": "chat", "vi": "chat", "code": "code", "sums": "math"}  # probe: the pairs the text states
later = {}  # (drafter, T) → (gap to DFlash at position 1, mean gap at positions 2..k), averaged over domains
for n in (*HEADS, "eagle3"):
    for T in TEMPS:
        gaps = [
            [a - b for a, b in zip(q[n][d][T]["cond_accept"], q["dflash"][d][T]["cond_accept"], strict=True)]
            for d in DOMAINS
        ]
        later[n, T] = (mean(g[0] for g in gaps), mean(mean(g[1:]) for g in gaps))
        print(tr(
            f"{n:11s} − DFlash, conditional acceptance ({T}): position 1 {later[n, T][0]:+.3f} · "
            f"positions 2..{K} {later[n, T][1]:+.3f}",
            f"{n:11s} − DFlash, tỉ lệ giữ có điều kiện ({T}): vị trí 1 {later[n, T][0]:+.3f} · "
            f"vị trí 2..{K} {later[n, T][1]:+.3f}",
        ))
paper_gap = {  # the paper's DSpark − DFlash at position 1, and at positions 2..k (the lab's k)
    p: (f["dspark"][0] - f["dflash"][0], mean(a - b for a, b in zip(f["dspark"][1:K], f["dflash"][1:K], strict=True)))
    for p, f in PAPER_FIG2.items()
}
print(tr("paper, DSpark − DFlash:", "bài báo, DSpark − DFlash:"),
      {p: tuple(round(x, 3) for x in g) for p, g in paper_gap.items()})
rnn_gain = {T: tau["dspark-rnn"][T] / tau["dspark"][T] for T in TEMPS}
paper_rnn = {p: rnn16 / markov16 for p, (_, markov16, rnn16) in PAPER_FIG4_LEN16.items()}
print(tr("RNN ÷ Markov τ: lab", "τ RNN ÷ Markov: lab"), {T: round(v, 3) for T, v in rnn_gain.items()},
      tr("· paper, block of 16:", "· bài báo, khối 16:"), {p: round(v, 3) for p, v in paper_rnn.items()})
assert all(q["dspark"][d][T]["tau"] > q["dflash"][d][T]["tau"] for d in DOMAINS for T in TEMPS)  # probe (§2)
assert ratio["t1"] > max(paper_df) and all(per_domain[d] > 1 for d in DOMAINS)  # probe: the paper's margin; tokens/s
assert all(less["t1"].values()) and dec["eagle3"]["t1"] <= 0  # probe (§3)
for f in PAPER_FIG2.values():  # the paper's own Figure 2 over the lab's k positions says the same
    assert decay(f["dspark"][:K]) < decay(f["dflash"][:K]) and decay(f["eagle3"][:K]) <= 0
assert all(0 < later[n, T][0] < 0.1 and later[n, T][1] > 3 * later[n, T][0] for n in HEADS for T in TEMPS)  # probe
assert all(lo < hi for lo, hi in paper_gap.values())  # the paper: the same shape
assert all(v > 1 for v in paper_rnn.values())  # the paper's RNN head: a gain, at a block of 16 …
assert all(abs(rnn_gain[T] - 1) < max(paper_rnn.values()) - 1 for T in TEMPS)  # probe: … the lab's within that
assert set(easiest.values()) == {"sums"}  # probe (§2): sums, every drafter's highest τ at T = 1 …
assert all(max(PAPER_FIG4_LEN16, key=lambda p, i=i: PAPER_FIG4_LEN16[p][i]) == "math" for i in range(3))  # … math's
# in the paper, for DFlash, Markov and RNN alike

# %% [markdown]
# **EN — where it does not**
# - Eagle3-lite is level with DSpark, where the paper has DSpark ahead of Eagle3 on every target: DSpark ÷ Eagle3 is
#   <!--n:ratio.dspark/eagle3.t1-->0.98<!--/n--> at T = 1 and <!--n:ratio.dspark/eagle3.greedy-->0.91<!--/n--> greedy,
#   and Eagle3-lite gives the most tokens/s too (by a little, §6). On the mean over domains it accepts at least as often
#   as DSpark at position 1 and at positions 2 to k, at both temperatures (printed above): at this size and budget, a
#   chain that reads the target's own features and its own previous draft at every step is as good as a parallel draft
#   <!--n:recipe.dspark_layers-->3<!--/n--> V4 blocks deep, with several times fewer parameters (§1), trained on every
#   position of every window (more positions than DSpark's blocks cover, printed below). Every drafter was still
#   improving when its budget ended (§1): a longer budget could change the order.
# - DFlash loses much more along the block than the paper's: its decay at T = 1 is more than twice the paper's over the
#   same first k positions (printed below).
# - Absolute acceptances are lower than the paper's in the paired domain: at T = 1 DFlash's at every position in every
#   domain, DSpark's at all but at most one position in each. The verify rate at threshold 0 is lower in all four
#   domains, although a block of k drafts (printed at the top) wastes fewer slots than the paper's 7. A target that
#   predicts fewer than one next token in five right (§1) and drafters trained for minutes on a CPU are not the paper's
#   4B+ models.
# - The STS temperatures carry over to unseen rounds only in part (§5: higher summed ECE for DSpark, lower for
#   DSpark-RNN): they were fitted on a few hundred rounds, the paper's on large held-out sets.
# - On a CPU at the lab's width a deep draft is not cheap: DFlash's <!--n:recipe.dflash_layers-->5<!--/n--> layers make
#   it the slowest, slower than plain decoding in two domains (§6). MTP-1: τ ≤ 2 by construction (one draft + the
#   target's token), and each round holds a target forward, so its speed-up stays below 2.
#
# **VI — chỗ không khớp**
# - Eagle3-lite ngang DSpark, trong khi bài báo thấy DSpark vượt Eagle3 với mọi mô hình mục tiêu: DSpark ÷ Eagle3 là
#   <!--n:ratio.dspark/eagle3.t1-->0.98<!--/n--> ở T = 1 và <!--n:ratio.dspark/eagle3.greedy-->0.91<!--/n--> khi greedy,
#   và Eagle3-lite cũng cho nhiều token/s nhất (hơn chút ít, §6). Tính trung bình trên các miền, token nháp của nó được
#   giữ ít nhất cũng thường xuyên như của DSpark ở vị trí 1 và ở các vị trí 2 tới k, ở cả hai nhiệt độ (in ở trên): với
#   cỡ và ngân sách này, một chuỗi đọc đặc trưng của chính mô hình mục tiêu và token nháp trước đó của chính nó ở mỗi
#   bước thì tốt ngang một bản nháp song song sâu <!--n:recipe.dspark_layers-->3<!--/n--> khối V4, với số tham số ít hơn
#   vài lần (§1), và được huấn luyện trên mọi vị trí của mọi cửa sổ (nhiều vị trí hơn số khối của DSpark, in ở dưới). Bộ
#   vẽ nào cũng còn đang tiến bộ khi hết ngân sách (§1): ngân sách dài hơn có thể đổi thứ tự.
# - DFlash giảm dọc theo khối nhiều hơn hẳn DFlash của bài báo: mức giảm của nó ở T = 1 lớn hơn gấp đôi của bài báo trên
#   cùng k vị trí đầu (in ở dưới).
# - Tỉ lệ giữ tuyệt đối thấp hơn bài báo ở miền ghép cặp: ở T = 1, của DFlash ở mọi vị trí với mọi miền, của DSpark ở
#   mọi vị trí trừ nhiều nhất một với mỗi miền. Tỉ lệ verify hữu ích ở ngưỡng 0 thấp hơn ở cả bốn miền, dù khối k token
#   nháp (in ở đầu notebook) phí ít ô hơn khối 7 của bài báo. Một mô hình mục tiêu đoán đúng chưa tới một token kế tiếp
#   trong năm (§1) và các bộ vẽ học vài phút trên CPU không phải là các mô hình 4B trở lên của bài báo.
# - Nhiệt độ STS chỉ giữ được một phần tác dụng trên các vòng chưa thấy (§5: tổng ECE tăng với DSpark, giảm với
#   DSpark-RNN): chúng được chọn trên vài trăm vòng, còn của bài báo thì trên các tập kiểm định lớn.
# - Trên CPU, ở độ rộng của lab, một bản nháp sâu không hề rẻ: <!--n:recipe.dflash_layers-->5<!--/n--> lớp khiến DFlash
#   chậm nhất, chậm hơn cả giải mã thường ở hai miền (§6). Về MTP-1: τ ≤ 2 theo cấu tạo (một token nháp + token của mô
#   hình mục tiêu), và mỗi vòng đều có một forward của mô hình mục tiêu, nên mức tăng tốc của nó luôn dưới 2.

# %%
PAPER_VERIFY_RATE_T0 = {"math": 0.769, "code": 0.676, "chat": 0.457}  # paper Figure 5, threshold 0
paper_dflash_decay = mean(decay(PAPER_FIG2[PAPER_OF[d]]["dflash"][:K]) for d in DOMAINS)  # over the lab's k
print(tr(
    f"DSpark ÷ Eagle3 τ: lab {lab_vs_eagle3['t1']:.3f} (T = 1), {lab_vs_eagle3['greedy']:.3f} (greedy) · DFlash "
    f"decay (T = 1): lab {dec['dflash']['t1']:.3f}, paper {paper_dflash_decay:.3f}",
    f"τ DSpark ÷ Eagle3: lab {lab_vs_eagle3['t1']:.3f} (T = 1), {lab_vs_eagle3['greedy']:.3f} (greedy) · mức giảm "
    f"DFlash (T = 1): lab {dec['dflash']['t1']:.3f}, bài báo {paper_dflash_decay:.3f}",
))
assert lab_vs_eagle3["t1"] < 1 and lab_vs_eagle3["greedy"] < 1  # probe: Eagle3-lite level or ahead on the mean …
assert max(speedup, key=speedup.get) == "eagle3"  # probe: … and the most tokens/s (§6)
assert all(later["eagle3", T][i] >= later["dspark", T][i] for T in TEMPS for i in (0, 1))  # probe: as often
assert 3 * train["eagle3"]["parameters"] < train["dspark"]["parameters"]  # probe: several times fewer parameters
e3, df, ds = zip(*PAPER_TAU.values(), strict=True)
assert all(s > e for s, e in zip(ds, e3, strict=True))  # the paper: DSpark > Eagle3 on all four targets
rc = rep["recipe"]
blocks = rc["draft_steps"] * rc["draft_batch"] * rc["draft_anchors"]  # DSpark kinds: blocks of k drafts seen
rows = rc["draft_steps"] * rc["draft_batch"] * train["eagle3"]["context"]  # Eagle3: rows, each unrolled k steps
assert rows > blocks  # probe: on the same windows, the Eagle3 chain trained on more positions
assert dec["dflash"]["t1"] > 2 * paper_dflash_decay  # probe: DFlash decays more than twice as much as the paper's
below = {
    (n, d): [a < b for a, b in zip(q[n][d]["t1"]["cond_accept"], PAPER_FIG2[PAPER_OF[d]][n], strict=False)]
    for n in ("dspark", "dflash")
    for d in DOMAINS
}
print(tr("positions (T = 1) below the paper's:", "số vị trí (T = 1) thấp hơn bài báo:"),
      {f"{n}·{d}": sum(v) for (n, d), v in below.items()}, tr("of", "trên"), K)
assert all(all(below["dflash", d]) for d in DOMAINS)  # probe: DFlash below the paper at every position
assert all(sum(below["dspark", d]) >= K - 1 for d in DOMAINS)  # probe: DSpark at all but at most one
rate0 = {d: sweep[d][0.0]["verify_rate"] for d in DOMAINS}
print(tr("verify rate at threshold 0, lab vs paper:", "tỉ lệ verify ở ngưỡng 0, lab so với bài báo:"),
      {d: (round(rate0[d], 3), PAPER_VERIFY_RATE_T0[PAPER_OF[d]]) for d in DOMAINS})
assert all(rate0[d] < PAPER_VERIFY_RATE_T0[PAPER_OF[d]] for d in DOMAINS)  # probe: lower in all four domains
assert K < 7  # … with a shorter block than the paper's 7
assert total["dspark"][1] > total["dspark"][0] and total["dspark-rnn"][1] < total["dspark-rnn"][0]  # probe (§5)
assert min(speedup, key=speedup.get) == "dflash" and len(slower["dflash"]) == 2  # probe (§6)
assert all(q["mtp1"][d][T]["tau"] <= 2 for d in DOMAINS for T in TEMPS)  # probe: τ ≤ 2 by construction
assert all(q["mtp1"][d]["speed"]["ratio"] < 2 for d in DOMAINS)  # probe: a speed-up below 2
print(tr(
    f"training: {blocks} DSpark blocks vs {rows} Eagle3 rows · parameters: DSpark "
    f"{train['dspark']['parameters']:,}, Eagle3 {train['eagle3']['parameters']:,}",
    f"huấn luyện: {blocks} khối DSpark so với {rows} hàng Eagle3 · số tham số: DSpark "
    f"{train['dspark']['parameters']:,}, Eagle3 {train['eagle3']['parameters']:,}",
))

# %% [markdown]
# ## Summary / Tóm tắt
# - **EN** — One seeded command trains a target on real text (English, Vietnamese, code, sums) and five drafters, every
#   one on the same target cache with the same budget and loss family, and records everything, measured one prompt at a
#   time (a lockstep batch's τ overstates what each prompt commits, §7). As in the paper, DSpark beats DFlash in τ in
#   every domain — by at least the paper's margin (+<!--n:gain.dspark/dflash.t1-->26<!--/n--> % at T = 1,
#   +<!--n:gain.dspark/dflash.greedy-->19<!--/n--> % greedy) — and in tokens/s in every domain; its acceptance decays
#   less along the block (the Markov head works at later positions); the RNN head is level with the Markov head at this
#   short block. Its confidence can prune verification cheaply where drafts are uncertain, but STS temperatures fitted
#   on a few hundred rounds carry over only in part. Unlike the paper, a small Eagle3-style chain is level with DSpark
#   here (DSpark ÷ Eagle3 <!--n:ratio.dspark/eagle3.t1-->0.98<!--/n--> at T = 1,
#   <!--n:ratio.dspark/eagle3.greedy-->0.91<!--/n--> greedy), acceptances are lower, and every drafter was still
#   improving when its budget ended.
# - **VI** — Một lệnh có seed huấn luyện một mô hình mục tiêu trên văn bản thật (tiếng Anh, tiếng Việt, mã, phép cộng)
#   và năm bộ vẽ nháp, bộ nào cũng trên cùng bộ đệm của mô hình mục tiêu, cùng ngân sách và cùng kiểu hàm mất mát, rồi
#   ghi lại mọi con số, đo từng prompt một (τ của một batch đồng bộ thổi phồng số token mỗi prompt thật sự ghi được,
#   §7). Như trong bài báo, DSpark hơn DFlash về τ ở mọi miền — ít nhất bằng mức của bài báo
#   (+<!--n:gain.dspark/dflash.t1-->26<!--/n--> % ở T = 1, +<!--n:gain.dspark/dflash.greedy-->19<!--/n--> % khi greedy)
#   — và về token/s ở mọi miền; tỉ lệ giữ của nó giảm dọc theo khối ít hơn (đầu Markov làm việc ở các vị trí sau); với
#   khối ngắn này, đầu RNN ngang đầu Markov. Độ tin cậy của nó giúp bớt verify với giá rẻ ở chỗ bản nháp không chắc
#   chắn, nhưng nhiệt độ STS chọn trên vài trăm vòng chỉ giữ được một phần tác dụng. Khác bài báo, ở đây một chuỗi nhỏ
#   kiểu Eagle3 ngang DSpark (DSpark ÷ Eagle3 <!--n:ratio.dspark/eagle3.t1-->0.98<!--/n--> ở T = 1,
#   <!--n:ratio.dspark/eagle3.greedy-->0.91<!--/n--> khi greedy), tỉ lệ giữ thấp hơn, và bộ vẽ nào cũng còn đang tiến bộ
#   khi hết ngân sách.
#
# ## Exercise / Bài tập
# **EN** — A drafter's conditional acceptances at positions 1, 2, 3 are 0.8, 0.75 and 0.5. The cumulative acceptance at
# position i is their product up to i, and τ = 1 + Σ_i cum_accept_i (exact when every round drafts the full block). What
# is τ?
#
# **VI** — Tỉ lệ giữ có điều kiện của một bộ vẽ ở vị trí 1, 2, 3 là 0.8, 0.75 và 0.5. Tỉ lệ giữ tích lũy ở vị trí i là
# tích của chúng tới i, và τ = 1 + Σ_i cum_accept_i (đúng tuyệt đối khi mọi vòng đều vẽ đủ khối). τ bằng bao nhiêu?

# %%
answer = None  # a number

# %%
COND = torch.tensor([0.8, 0.75, 0.5], dtype=torch.float64)
expected = 1 + float(COND.cumprod(0).sum())  # τ = 1 + Σ cum_accept, cum_accept = running product of the conditionals
check(answer, expected, LANG)

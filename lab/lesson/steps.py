"""The registry of the ten steps (1A..6B): ids, columns, flow and every vi/en text.

The CLI, the notebooks, the clickable 4-column map and the mermaid diagrams are all generated from
this one module, so a title or a number is changed here and nowhere else. It is pure data plus a few
small accessors; it imports neither torch nor `dspark_mini`.

Columns, left to right: 1 Input, Engram & mHC · 2 CED 20+20 & CSA2 · 3 MLA & FP4 KV (890 B)
· 4 FP4 MoE & DSpark. Flow: 1A → 1B → 2A → 3A → 3B → 3C → 4A ↔ 6A → 5A → 6B.

Vietnamese text follows the lab's glossary (the lesson's terms first, `lab/text.py`); model names and code identifiers
(Engram, mHC, CSA2, MLA, MoE, DSpark, MarkovHead, `hc_pre`, RMSNorm, logits) stay in English.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from ..text import LANGS, check_lang

TEXT_FIELDS: tuple[str, ...] = ("title", "short", "what", "look_at", "real_scale")
SHORT_MAX_CHARS = 90  # map blocks and tooltips
LOOK_AT_MAX = 3  # bullets per language


@dataclass(frozen=True)
class Column:
    """One column of the architecture map; its steps are listed in flow order."""

    id: int  # 1..4, left to right on the map
    title: dict[str, str] = field(hash=False)  # {"vi": ..., "en": ...}
    step_ids: tuple[str, ...]

    def t(self, field_name: str, lang: str) -> str:
        """The column's text `field_name` (only "title") in `lang`."""
        if field_name != "title":
            raise ValueError(f"unknown column field {field_name!r}: allowed 'title'")
        return self.title[check_lang(lang)]

    def label(self, lang: str) -> str:
        """ "1 · Input, Engram & mHC" — the column header of the map."""
        return f"{self.id} · {self.t('title', lang)}"


@dataclass(frozen=True)
class Step:
    """One block of the map: what it is, how it is written, where to look and what it costs at real scale."""

    id: str  # "1A" .. "6B"
    column: int  # 1..4
    order: int  # 0..9, position in the flow
    title: dict[str, str] = field(hash=False)  # short heading
    short: dict[str, str] = field(hash=False)  # one line ≤ 90 chars for map blocks and tooltips
    what: dict[str, str] = field(hash=False)  # 2–4 sentences: what the mechanism does and why
    equation: str  # one or two lines, plain text/unicode, same in both languages
    look_at: dict[str, tuple[str, ...]] = field(hash=False)  # 1–3 bullets: what to watch on screen
    module: str  # the dspark_mini module that implements it
    real_scale: dict[str, str] = field(hash=False)  # one line of DeepSeek-V4.1-Flash numbers
    trace_key: str  # the key of this step in the model's Trace

    def __post_init__(self) -> None:
        def bad(name: str, allowed: str) -> ValueError:
            value = getattr(self, name)
            return ValueError(f"step {self.id}: field {name!r} = {value!r} is invalid: {allowed}")

        if self.column not in (1, 2, 3, 4):
            raise bad("column", "allowed 1..4")
        if not 0 <= self.order < 10:
            raise bad("order", "allowed 0..9")
        for name in TEXT_FIELDS:
            value = getattr(self, name)
            if not isinstance(value, dict) or set(value) != set(LANGS):
                raise bad(name, f"needs exactly the languages {LANGS}")
        for lang in LANGS:
            if len(self.short[lang]) > SHORT_MAX_CHARS:
                raise bad("short", f"{lang} text is longer than {SHORT_MAX_CHARS} characters")
            bullets = self.look_at[lang]
            if not isinstance(bullets, tuple) or not 1 <= len(bullets) <= LOOK_AT_MAX:
                raise bad("look_at", f"{lang} needs a tuple of 1..{LOOK_AT_MAX} bullets")
        if not self.equation or self.equation.count("\n") > 1:
            raise bad("equation", "needs one or two lines")

    def t(self, field_name: str, lang: str) -> str | tuple[str, ...]:
        """The text `field_name` (one of TEXT_FIELDS, or "equation") in `lang`; look_at is a tuple."""
        lang = check_lang(lang)
        if field_name == "equation":
            return self.equation
        if field_name not in TEXT_FIELDS:
            allowed = ", ".join(map(repr, TEXT_FIELDS + ("equation",)))
            raise ValueError(f"unknown step field {field_name!r}: allowed {allowed}")
        return getattr(self, field_name)[lang]

    def label(self, lang: str) -> str:
        """ "6B · LM head & DSpark: ..." — the heading of the step's panel."""
        return f"{self.id} · {self.t('title', lang)}"


class Edge(NamedTuple):
    """A flow edge of the map; bidirectional edges are drawn with arrows at both ends."""

    src: str
    dst: str
    bidirectional: bool = False


# ---- the four columns ----------------------------------------------------------------------------
COLUMNS: tuple[Column, ...] = (
    Column(1, {"vi": "Đầu vào, Engram & mHC", "en": "Input, Engram & mHC"}, ("1A", "1B", "2A")),
    Column(2, {"vi": "CED 20+20 & CSA2", "en": "CED 20+20 & CSA2"}, ("3A", "3B", "3C")),
    Column(3, {"vi": "MLA & KV FP4 (890 B)", "en": "MLA & FP4 KV (890 B)"}, ("4A", "6A")),
    Column(4, {"vi": "MoE FP4 & DSpark", "en": "FP4 MoE & DSpark"}, ("5A", "6B")),
)

# ---- the ten steps, in flow order ----------------------------------------------------------------
STEPS: tuple[Step, ...] = (
    Step(
        id="1A",
        column=1,
        order=0,
        title={
            "vi": "Đầu vào: token, embedding và 4 làn mHC",
            "en": "Input: tokens, embedding and the 4 mHC lanes",
        },
        short={
            "vi": "Mã token → embedding [B,S,D] → 4 làn giống nhau [B,S,4,D], pre-mix one-hot",
            "en": "Token ids → embedding [B,S,D] → 4 identical lanes [B,S,4,D], one-hot pre-mix",
        },
        what={
            "vi": (
                "Prompt được tách thành mã token, và mỗi mã lấy ra một hàng của bảng embedding, cho tensor "
                "[B, S, D]. mHC không giữ một dòng residual duy nhất mà giữ hc_mult = 4 bản sao gọi là làn, "
                "nên embedding được lặp thành [B, S, 4, D]. Pre-mix đầu tiên là one-hot [1, 0, 0, 0]: lớp 0 "
                "đọc đúng embedding, và các làn chỉ bắt đầu khác nhau khi các block ghi kết quả ngược vào "
                "chúng. Ở mô hình thật bảng embedding có cỡ 129 280 × 5120, và mã băm của Engram được tính "
                "từ mã token gốc trước cả bước tra bảng này."
            ),
            "en": (
                "The prompt is split into token ids, and each id picks one row of the embedding table, "
                "giving a [B, S, D] tensor. mHC keeps not one residual stream but hc_mult = 4 copies called "
                "lanes, so the embedding is repeated into [B, S, 4, D]. The first pre-mix is one-hot [1, 0, "
                "0, 0]: layer 0 reads exactly the embedding, and the lanes only drift apart once blocks "
                "write their results back into them. In the real model the table is 129,280 × 5120, and "
                "Engram's hash ids are taken from the raw token ids even before this lookup."
            ),
        },
        equation="x = E[ids] ∈ [B,S,D];  X = repeat(x, 4) ∈ [B,S,4,D];  pre₀ = [1, 0, 0, 0]",
        look_at={
            "vi": (
                "mã token đặt cạnh chữ của nó",
                "embedding [B,S,D] trở thành [B,S,4,D]: bốn làn giống hệt nhau",
                "pre-mix one-hot: lớp 0 chỉ đọc làn 0",
            ),
            "en": (
                "the token ids next to their text",
                "the embedding [B,S,D] becoming [B,S,4,D]: four identical lanes",
                "the one-hot pre-mix: layer 0 reads lane 0 only",
            ),
        },
        module="model",
        real_scale={
            "vi": "từ vựng 129 280 · hidden 5120 · hc_mult 4 · embed [129280, 5120] BF16",
            "en": "vocab 129,280 · hidden 5120 · hc_mult 4 · embed [129280, 5120] BF16",
        },
        trace_key="1A",
    ),
    Step(
        id="1B",
        column=1,
        order=1,
        title={
            "vi": "Engram: bộ nhớ n-gram tra bằng hàm băm",
            "en": "Engram: a hashed n-gram memory",
        },
        short={
            "vi": "n-gram bậc 2, 3, 4 của mã nén → hàng băm → value có cổng cộng vào mọi làn",
            "en": "2-, 3-, 4-grams of compressed ids → hashed rows → gated value added to every lane",
        },
        what={
            "vi": (
                "Engram là bộ nhớ tra cứu cho những cụm từ ngắn: mã token trước hết được gộp về một từ vựng "
                "nén (bỏ khác biệt hoa/thường, dấu và khoảng trắng), rồi mỗi n-gram bậc 2, 3 và 4 kết thúc "
                "tại một vị trí được 8 đầu băm, mỗi đầu trỏ vào một bảng riêng có số hàng là số nguyên tố, "
                "khoảng 16 triệu hàng. Các hàng tìm được nối lại rồi chiếu thành một key cho mỗi làn và một "
                "value dùng chung; cổng của từng làn, σ của căn bậc hai có dấu của tích key·h, quyết định "
                "cộng bao nhiêu value vào làn đó. Ở mô hình thật Engram đứng trước lớp 1 và lớp 14, các bảng "
                "giữ 196.61 tỷ tham số FP8 và được đọc theo địa chỉ chứ không qua phép nhân ma trận."
            ),
            "en": (
                "Engram is a lookup memory for short phrases: token ids are first folded into a compressed "
                "vocabulary (case, accents and spacing removed), then every 2-, 3- and 4-gram ending at a "
                "position is hashed by 8 heads, each pointing into its own prime-sized table of about 16 M "
                "rows. The rows found are concatenated and projected into one key per lane and one shared "
                "value; a per-lane gate, σ of the signed square root of key·h, decides how much of the value "
                "is added to that lane. In the real model Engram sits before layers 1 and 14, and its tables "
                "hold 196.61 B FP8 parameters that are read by address, not multiplied."
            ),
        },
        equation=(
            "id(n,h) = (XOR_{s<n} c[t−s]·m[s]) mod p(n,h) + offset(n,h)\ng_c = σ(sign(d_c)·√|d_c|),  d_c = "
            "⟨norm(h_c), norm(key_c)⟩/√D;  h_c ← h_c + g_c·value"
        ),
        look_at={
            "vi": (
                "mã nén: các token chỉ khác hoa/thường hay dấu dùng chung một mã",
                "mã hàng băm theo từng bậc (2, 3, 4) và từng đầu băm",
                "cổng của từng làn, và những token mà bộ nhớ thay đổi nhiều nhất",
            ),
            "en": (
                "the compressed ids: tokens that differ only by case or accent share one id",
                "the hashed row ids per order (2, 3, 4) and per head",
                "the gate per lane, and the tokens the memory changed most",
            ),
        },
        module="engram",
        real_scale={
            "vi": "lớp 1 và 14 · bậc 2/3/4 × 8 đầu băm · ~16 triệu hàng mỗi đầu · bảng 196.61 tỷ tham số",
            "en": "layers 1, 14 · orders 2/3/4 × 8 hash heads · ~16 M rows per head · tables 196.61 B params",
        },
        trace_key="1B",
    ),
    Step(
        id="2A",
        column=1,
        order=2,
        title={
            "vi": "mHC: trộn 4 làn bằng Sinkhorn",
            "en": "mHC: mixing the 4 lanes with Sinkhorn",
        },
        short={
            "vi": "hc_mixes → Sinkhorn → pre / post / comb 4×4; pre gộp đầu vào của lớp con kế tiếp",
            "en": "hc_mixes → Sinkhorn → pre / post / 4×4 comb; pre collapses the next sublayer's input",
        },
        what={
            "vi": (
                "Mỗi lớp con đọc cả 4 làn, tính 24 hệ số trộn rồi tách làm ba: pre (4 trọng số gộp các làn "
                "thành một đầu vào), post (4 trọng số trong khoảng 0–2 rải đầu ra của lớp con về các làn) và "
                "comb (ma trận 4×4 trộn các làn với nhau). Comb được 20 vòng Sinkhorn kéo về gần ma trận "
                "song ngẫu nhiên, tổng mỗi hàng và mỗi cột ≈ 1, nhờ vậy tín hiệu đi qua 80 lớp con không "
                "phình to mà cũng không tắt dần. V4.1 chạy kiểu một lượt: pre do một lớp con tính ra được "
                "dùng để gộp đầu vào của lớp con kế tiếp, nên hệ số đã sẵn sàng ngay khi dòng dữ liệu tới."
            ),
            "en": (
                "Each sublayer reads all 4 lanes, computes 24 mixing numbers and splits them three ways: pre "
                "(4 weights that collapse the lanes into one input), post (4 weights between 0 and 2 that "
                "spread the sublayer's output back) and comb (a 4×4 matrix that mixes the lanes among "
                "themselves). Twenty Sinkhorn iterations push comb towards a doubly stochastic matrix, every "
                "row and column summing to ≈ 1, so the signal crosses 80 sublayers without blowing up or "
                "fading away. V4.1 runs it single-pass: the pre computed by one sublayer collapses the input "
                "of the next one, so the coefficients are ready as soon as the stream arrives."
            ),
        },
        equation=(
            "pre = σ(m·s₀+b)+ε,  post = 2σ(m·s₁+b),  comb = Sinkhorn₂₀(softmax(m·s₂+b))\nx_in = Σᵢ preᵢ·Xᵢ;  "
            "X'ⱼ = postⱼ·y + Σᵢ comb[i,j]·Xᵢ"
        ),
        look_at={
            "vi": (
                "vector pre và post của một lớp",
                "bản đồ nhiệt của ma trận comb 4×4",
                "tổng hàng và tổng cột tiến về 1 qua 20 vòng Sinkhorn",
            ),
            "en": (
                "the pre and post vectors of one layer",
                "the heat map of the 4×4 comb matrix",
                "row and column sums reaching 1 over the 20 Sinkhorn iterations",
            ),
        },
        module="mhc",
        real_scale={
            "vi": "hc_mult 4 · 20 vòng Sinkhorn · hc_fn [24, 20480] fp32 cho mỗi lớp con · 80 lớp con",
            "en": "hc_mult 4 · 20 Sinkhorn iterations · hc_fn [24, 20480] fp32 per sublayer · 80 sublayers",
        },
        trace_key="2A",
    ),
    Step(
        id="3A",
        column=2,
        order=3,
        title={
            "vi": "Lịch CED 20+20: vai trò của từng lớp",
            "en": "The CED 20+20 schedule: what each layer does",
        },
        short={
            "vi": "Vai trò lớp: chỉ SWA, nguồn Full, Reuse, Reindex; 20 lớp encoder + 20 lớp decoder",
            "en": "Layer roles: SWA-only, Full source, Reuse, Reindex; 20 encoder + 20 decoder layers",
        },
        what={
            "vi": (
                "40 lớp chỉ là một vòng lặp phẳng, nhưng lịch nén chia chúng thành 20 lớp encoder nhân quả "
                "và 20 lớp decoder. Tỉ lệ nén của một lớp cho biết lớp đó đọc cache nào (0 = chỉ cửa sổ, 2 = "
                "từng cặp token đã gộp, 1 = mỗi token một mục); chỉ các lớp nguồn 2, 8, 14 và 20 xây cache "
                "này, mọi lớp khác dùng lại cache của nguồn gần nhất phía trước. Lớp 20 biến trạng thái cuối "
                "của encoder thành cache tỉ lệ 1 duy nhất mà mọi lớp decoder cùng đọc, còn các lớp 24, 28, "
                "32, 36 chạy lại indexer (Reindex) bên trong tập ứng viên do lớp 20 chọn. Chia như vậy để tiết "
                "kiệm lúc prefill: KV toàn cục của decoder chỉ là một phép chiếu từ trạng thái cuối của encoder, "
                "nên khi phục vụ, các engine suy luận chạy lớp 0–20 (encoder cùng lớp 20, lớp xây cache ấy) trên "
                "mọi token của prompt nhưng chỉ chạy lớp 21–39 trên đoạn cuối (bounded replay: cửa sổ 128 token, "
                "133 khi kèm 5 token nháp DSpark) và dựng lại gần đúng trạng thái cửa sổ của các vị trí trước đó. "
                "Vì thế thẻ mô hình ghi 8 tỷ tham số hoạt động cho "
                "mỗi token lúc prefill nhưng 16 tỷ lúc decode: phép tính prefill giảm gần một nửa, đổi lại kết quả "
                "không còn tương đương tuyệt đối (mô hình được hậu huấn luyện với replay mô phỏng), và cách này chỉ "
                "hợp lệ vì sau lớp 20 không lớp nào tự giữ cache toàn cục hay Engram. Mã tham chiếu, và cả lab này, "
                "chạy mọi lớp trên mọi token: đường tính chính xác."
            ),
            "en": (
                "The 40 layers are one flat loop, yet the compression schedule splits them into a 20-layer "
                "causal encoder and a 20-layer decoder. A layer's compress ratio names the cache it reads (0 "
                "= window only, 2 = pooled token pairs, 1 = one entry per token); only the source layers 2, "
                "8, 14 and 20 build that cache, and every other layer reuses the latest source before it. "
                "Layer 20 turns the final encoder state into the single ratio-1 cache that all decoder "
                "layers read, and layers 24, 28, 32 and 36 re-run the indexer (Reindex) inside the "
                "candidates chosen by layer 20. The split exists to save prefill: since the decoder's global KV "
                "is one projection of the encoder's final state, serving engines run layers 0–20 (the encoder, "
                "and layer 20 that builds that cache) over every prompt token but layers 21–39 only over the tail "
                "(bounded replay: a window of 128 tokens, 133 with 5 DSpark drafts), rebuilding the earlier "
                "window states approximately. Hence the model card's 8 B parameters active per token in prefill "
                "against 16 B in decode: prefill compute nearly "
                "halves, at the price of not being exactly equivalent (the model is post-trained with the replay "
                "simulated), and it is legal only because no layer after 20 owns a global cache or Engram. The "
                "reference code, and this lab, run every layer on every token: the exact path."
            ),
        },
        equation="ratio = [0,0] + [2]×18 + [1]×20;  reads_kv_of(ℓ) = max{s ∈ sources : s ≤ ℓ}",
        look_at={
            "vi": (
                "vai trò từng lớp: chỉ SWA, Full, Reuse, Reindex, nguồn ứng viên",
                "các cột 'đọc KV của' và 'đọc top-k của'",
                "bảng của mô hình nhỏ và của mô hình thật đặt cạnh nhau",
            ),
            "en": (
                "each layer's role: SWA-only, Full, Reuse, Reindex, candidate source",
                "the 'reads KV of' and 'reads top-k of' columns",
                "the toy table and the real table side by side",
            ),
        },
        module="schedule",
        real_scale={
            "vi": (
                "40 lớp = 20 encoder + 20 decoder · nguồn KV 2, 8, 14, 20 · Reindex 24, 28, 32, 36 · tham số "
                "hoạt động 8 tỷ lúc prefill, 16 tỷ lúc decode"
            ),
            "en": (
                "40 layers = 20 encoder + 20 decoder · KV sources 2, 8, 14, 20 · Reindex 24, 28, 32, 36 · active "
                "params 8 B prefill, 16 B decode"
            ),
        },
        trace_key="3A",
    ),
    Step(
        id="3B",
        column=2,
        order=4,
        title={
            "vi": "Bộ nén CSA2: KV gộp và dùng lại giữa các lớp",
            "en": "CSA2 compressor: pooled KV shared across layers",
        },
        short={
            "vi": "Nguồn nén KV: tỉ lệ 2 = gộp cặp có cổng softmax, tỉ lệ 1 = phép chiếu; lớp khác dùng lại",
            "en": "Sources compress KV: ratio 2 = softmax-gated pairs, ratio 1 = projection; others reuse",
        },
        what={
            "vi": (
                "Ở nguồn tỉ lệ 2, mỗi token cho một hàng KV và một điểm cổng; hai token của một cặp được gộp "
                "thành một latent rộng 512 bằng softmax theo từng kênh trên hai điểm đó, rồi chuẩn hóa RMS, "
                "nên cache chỉ tăng một mục sau mỗi hai token. Nguồn tỉ lệ 1 (lớp 20) chỉ chiếu từng token, "
                "không có cổng và không giữ trạng thái dở dang. Token lẻ cuối cùng nằm chờ trong một bộ đệm "
                "fp32 nhỏ cho tới khi token cặp với nó đến, còn các lớp không có bộ nén thì đọc cache của "
                "nguồn gần nhất thay vì tự xây."
            ),
            "en": (
                "At a ratio-2 source every token gives a KV row and a gate score; the two tokens of a pair "
                "are merged into one 512-wide latent by a per-channel softmax over their two scores, then "
                "RMS-normalized, so the cache grows by one entry every two tokens. The ratio-1 source (layer "
                "20) simply projects each token, with no gate and no leftover state. A trailing odd token "
                "waits in a small fp32 carry until its partner arrives, and layers without a compressor read "
                "the latest source's cache instead of building their own."
            ),
        },
        equation=(
            "ratio 2: w = softmax_pair(wgate·x),  c_j = RMSNorm(Σ_{t∈{2j,2j+1}} w_t ⊙ wkv·x_t)\nratio 1: c_t "
            "= RMSNorm(wkv·x_t)"
        ),
        look_at={
            "vi": (
                "vị trí gốc đối chiếu với vị trí nén: hai token cho một mục ở tỉ lệ 2",
                "trọng số cổng bên trong từng cặp",
                "lớp nào đọc cache của lớp nào",
            ),
            "en": (
                "raw positions against compressed positions: two tokens per entry at ratio 2",
                "the gate weights inside each pair",
                "who reads whose cache",
            ),
        },
        module="compressor",
        real_scale={
            "vi": "4 bộ nén (2, 8, 14 tỉ lệ 2; 20 tỉ lệ 1) · latent 512 · bộ đệm token lẻ fp32",
            "en": "4 compressors (2, 8, 14 at ratio 2; 20 at ratio 1) · latent 512 · odd-token carry fp32",
        },
        trace_key="3B",
    ),
    Step(
        id="3C",
        column=2,
        order=5,
        title={
            "vi": "Lightning indexer, khối ứng viên và cửa sổ trượt",
            "en": "Lightning indexer, candidate blocks and the sliding window",
        },
        short={
            "vi": "Indexer chấm điểm các mục nén → top-k; lọc khối ứng viên; cộng cửa sổ trượt",
            "en": "Indexer scores compressed entries → top-k; candidate-block filter; plus the window",
        },
        what={
            "vi": (
                "Attention không thể đọc hết mọi mục nén của một ngữ cảnh dài, nên một indexer rẻ chấm điểm "
                "chúng bằng 32 đầu nhỏ, I[s,t] = Σₕ wₕ·ReLU(qₕ·k_t), và mỗi truy vấn giữ 512 mục điểm cao "
                "nhất. Ở lớp 20 điểm còn được lấy max theo khối 8 mục; 2048 khối tốt nhất (cộng khối mới "
                "nhất đang điền dở) thành tập ứng viên, và các lớp Reindex chọn top-512 của riêng mình trong "
                "tập đó. Các mục được chọn nối với 128 token gốc gần nhất của cửa sổ trượt, phần mà lớp nào "
                "cũng nhìn thấy."
            ),
            "en": (
                "Attention cannot afford to read every compressed entry of a long context, so a cheap "
                "indexer scores them with 32 small heads, I[s,t] = Σₕ wₕ·ReLU(qₕ·k_t), and each query keeps "
                "its top 512. At layer 20 the scores are also max-pooled over blocks of 8 entries; the best "
                "2048 blocks (plus the newest, partly filled one) become candidates, and the Reindex layers "
                "pick their own top-512 inside that pool. The picked entries are joined to the latest 128 "
                "raw tokens of the sliding window, which every layer sees."
            ),
        },
        equation=("I[s,t] = Σₕ w[s,h]·ReLU(q[s,h]·k[t]);  picks = topk(I | candidates, 512)\nkeys = window ‖ picks"),
        look_at={
            "vi": (
                "bản đồ nhiệt điểm của indexer, có đánh dấu các mục top-k",
                "các khối ứng viên mà nguồn ứng viên giữ lại",
                "các vị trí trong cửa sổ mà truy vấn nào cũng thấy",
            ),
            "en": (
                "the index-score heat map with the top-k picks marked",
                "the candidate blocks kept by the candidate source",
                "the window positions every query always sees",
            ),
        },
        module="indexer",
        real_scale={
            "vi": "32 đầu indexer × 128 chiều · top-512 · 2048 khối ứng viên × 8 · cửa sổ 128",
            "en": "32 index heads × 128 dims · top-512 · 2048 candidate blocks × 8 · window 128",
        },
        trace_key="3C",
    ),
    Step(
        id="4A",
        column=3,
        order=6,
        title={
            "vi": "Attention kiểu MLA: một latent chung, sink và O-LoRA theo nhóm",
            "en": "MLA-style attention: one shared latent, a sink and grouped O-LoRA",
        },
        short={
            "vi": "q LoRA, một latent K=V chung cho mỗi token, đuôi RoPE, sink, O-LoRA theo nhóm",
            "en": "q LoRA, one shared K=V latent per token, rope tail, attention sink, grouped O-LoRA",
        },
        what={
            "vi": (
                "Truy vấn đi qua một nút thắt hạng thấp (q LoRA 1280) để thành 64 đầu rộng 512, còn key và "
                "value chỉ là một hàng latent 512 chung cho mỗi token (MQA với K = V), nên cache giữ một "
                "hàng cho mọi đầu. Mỗi đầu attention trên [cửa sổ ‖ các mục nén đã chọn]; một logit sink học "
                "được của từng đầu tham gia mẫu số softmax, để đầu đó có thể không chú ý vào đâu cả. 64 "
                "chiều cuối mang vị trí qua RoPE, và đầu ra đi qua O-LoRA theo nhóm: 8 nhóm, mỗi nhóm 8 đầu "
                "được chiếu riêng xuống 1024, rồi tất cả được chiếu về 5120."
            ),
            "en": (
                "Queries pass a low-rank bottleneck (q LoRA 1280) into 64 heads of width 512, while keys and "
                "values are one shared 512-wide latent row per token (MQA with K = V), so the cache stores a "
                "single row for all heads. Each head attends over [window ‖ picked compressed entries]; a "
                "learned sink logit per head joins the softmax denominator, so a head may attend to nothing "
                "at all. The last 64 dims carry position through RoPE, and the output goes through grouped "
                "O-LoRA: 8 groups of 8 heads, each projected on its own to 1024, then all together to 5120."
            ),
        },
        equation=(
            "a_h = softmax([q_h·kv_t/√512]_t ; sink_h),  o_h = Σ_t a_h[t]·kv_t\nout = wo_b(concat_g wo_a[g](o_g))"
        ),
        look_at={
            "vi": (
                "attention của từng đầu trên [cửa sổ ‖ mục nén]",
                "phần attention rơi vào sink",
                "các nhóm O-LoRA: những đầu nào được chiếu cùng nhau",
            ),
            "en": (
                "per-head attention over [window ‖ compressed]",
                "the share of attention that goes to the sink",
                "the O-LoRA groups: which heads are projected together",
            ),
        },
        module="attention",
        real_scale={
            "vi": "64 đầu × 512 (448 nope + 64 rope) · 1 latent KV · q LoRA 1280 · O-LoRA 8 nhóm × 1024",
            "en": "64 heads × 512 (448 nope + 64 rope) · 1 KV latent · q LoRA 1280 · O-LoRA 8 groups × 1024",
        },
        trace_key="4A",
    ),
    Step(
        id="6A",
        column=3,
        order=7,
        title={
            "vi": "Cache KV: cửa sổ FP8, KV nén FP4, 890 byte mỗi token",
            "en": "KV cache: FP8 window, FP4 compressed KV, 890 bytes per token",
        },
        short={
            "vi": "Cache: cửa sổ FP8, KV nén FP4, key của indexer FP4; KV toàn cục 890 B/token",
            "en": "Caches: FP8 window, FP4 compressed KV, FP4 index keys; 890 B/token of global KV",
        },
        what={
            "vi": (
                "Ba loại cache nằm cạnh attention: lớp nào cũng có một vòng cửa sổ 128 ô ở FP8 (528 B mỗi "
                "mục), còn các lớp nguồn giữ KV nén ở FP4 (288 B mỗi mục) và key của indexer ở FP4 (68 B mỗi "
                "mục). Tính trên mỗi token ngữ cảnh, ba nguồn tỉ lệ 2 góp mỗi nguồn (288 + 68)/2 = 178 B và "
                "lớp 20 góp 356 B, nên ngân sách KV toàn cục là 890 byte mỗi token — '890 B' là số byte, "
                "không phải số tham số. Lab mô phỏng việc lưu bằng lượng tử hóa rồi giải lượng tử, và cho "
                "thấy sai số mà phép làm tròn này để lại trong từng cache."
            ),
            "en": (
                "Three caches sit beside attention: every layer keeps a 128-slot window ring in FP8 (528 B "
                "per entry), and the source layers keep compressed KV in FP4 (288 B per entry) and index "
                "keys in FP4 (68 B per entry). Per token of context, the three ratio-2 sources add (288 + "
                "68)/2 = 178 B each and layer 20 adds 356 B, so the global KV budget is 890 bytes per token "
                "— '890 B' counts bytes, not parameters. The lab simulates storage as quantize → dequantize "
                "and shows the error this rounding leaves in each cache."
            ),
        },
        equation="global KV = 3·(288 + 68)/2 + (288 + 68) = 534 + 356 = 890 B/token;  x̃ = dequant(quant(x))",
        look_at={
            "vi": (
                "số byte mỗi token của từng loại cache, mô hình nhỏ cạnh mô hình thật",
                "tổng 890 B/token và cách cộng ra con số đó",
                "sai số lượng tử hóa → giải lượng tử của từng cache",
            ),
            "en": (
                "bytes per token per cache kind, toy next to real",
                "the 890 B/token total and how it adds up",
                "the quantize → dequantize error of each cache",
            ),
        },
        module="kv_cache",
        real_scale={
            "vi": "cửa sổ 528 B/mục FP8 · KV nén 288 B FP4 · key indexer 68 B FP4 · 890 B/token toàn cục",
            "en": "window 528 B/entry FP8 · compressed 288 B FP4 · index key 68 B FP4 · 890 B/token global",
        },
        trace_key="6A",
    ),
    Step(
        id="5A",
        column=4,
        order=8,
        title={
            "vi": "MoE FP4: router, expert dùng chung và SwiGLU có kẹp",
            "en": "FP4 MoE: router, shared expert and clamped SwiGLU",
        },
        short={
            "vi": "Router sqrtsoftplus chọn top-k expert; expert dùng chung; SwiGLU có kẹp; trọng số MXFP4",
            "en": "sqrtsoftplus router picks top-k experts; shared expert; clamped SwiGLU; MXFP4 weights",
        },
        what={
            "vi": (
                "Mỗi token được gửi tới 6 trong 384 expert, cộng thêm một expert dùng chung. Điểm router là "
                "a = √softplus(s); một bias học được chỉ được cộng vào để chọn expert, còn trọng số lấy từ "
                "điểm chưa cộng bias, chuẩn hóa trên sáu expert được chọn rồi nhân 1.5. Mỗi expert là một "
                "SwiGLU có nhánh up bị kẹp trong ±10 và nhánh gate chỉ bị kẹp phía trên; trọng số expert lưu "
                "ở MXFP4 (4 bit, một hệ số tỉ lệ cho mỗi 32 giá trị), và lab đo sai số của phép làm tròn đó."
            ),
            "en": (
                "Each token is sent to 6 of 384 experts, plus one shared expert. Router scores are a = "
                "√softplus(s); a learned bias is added only to choose the experts, while the weights come "
                "from the unbiased scores, normalized over the chosen six and scaled by 1.5. Every expert is "
                "a SwiGLU whose up branch is clamped to ±10 and whose gate branch is clamped only from "
                "above; expert weights are stored as MXFP4 (4 bits, one scale per 32 values), and the lab "
                "measures the error of that rounding."
            ),
        },
        equation=(
            "a = √softplus(W_g·x);  E = topk(a + bias, k);  w = 1.5·a_E / Σa_E\ny = Σ_{e∈E} w_e·expert_e(x) "
            "+ shared(x),  expert(x) = w2(silu(min(w1·x, 10)) · clamp(w3·x, ±10))"
        ),
        look_at={
            "vi": (
                "điểm router và các expert được chọn cho từng token",
                "tải của từng expert trên cả prompt",
                "sai số mà phép làm tròn FP4 để lại trong trọng số expert",
            ),
            "en": (
                "router scores and the chosen experts per token",
                "expert load across the prompt",
                "the error FP4 rounding leaves in the expert weights",
            ),
        },
        module="moe",
        real_scale={
            "vi": "384 expert định tuyến, top-6 + 1 dùng chung · rộng 2304 · hệ số 1.5 · MXFP4 (E8M0 mỗi 32)",
            "en": "384 routed experts, top-6 + 1 shared · width 2304 · route scale 1.5 · MXFP4 (E8M0 per 32)",
        },
        trace_key="5A",
    ),
    Step(
        id="6B",
        column=4,
        order=9,
        title={
            "vi": "LM head và DSpark: vẽ token nháp rồi verify",
            "en": "LM head & DSpark: draft tokens, then verify",
        },
        short={
            "vi": "hc_pre → RMSNorm → logits [B,V]; DSpark vẽ k token nháp, bộ lập lịch chọn ℓ, verify",
            "en": "hc_pre → RMSNorm → logits [B,V]; DSpark drafts k, a scheduler picks ℓ, verify keeps",
        },
        what={
            "vi": (
                "LM head gộp 4 làn bằng pre-mix cuối (hc_pre), chuẩn hóa RMSNorm rồi chiếu ra logits [B, V]; song "
                "song đó DSpark lấy hidden của các lớp đích (lab: lớp 3 và 4 trộn 0.5/0.5; mô hình thật: L37..39 "
                "nối lại rồi chiếu), cho đi qua các lớp nháp trên khối token nháp [anchor, noise×(k−1)] (lab k = 5 "
                "như bản thật), và bộ vẽ Markov head (hạng 256 ở quy mô thật) vẽ lần lượt từng token nháp. Mỗi "
                "token nháp mang hai con số khác nhau: xác suất nháp p_d(x) — xác suất của token nháp theo phân "
                "phối draft, con số mà bài học gọi là confidence — và giá trị của đầu tin cậy c = σ(w·[h; "
                "W1[x_prev]]), dự đoán token đó có sống sót qua verify hay không; cả hai đều chưa phải là kết quả "
                "giữ token sau verify, vì chỉ verify mới quyết định token nào được giữ. Đầu tin cậy của lab không "
                "có bias: bài báo DSpark cộng thêm một số b (σ(w·[h; W1[x_prev]] + b)), còn checkpoint V4.1 chỉ lưu "
                "w (confidence_head.proj [1, 5376]), và lab làm theo V4.1. Verify chạy forward thật của mô hình một "
                "lượt trên [anchor, d1..dk], giữ phần đầu dài nhất gồm những token nháp mà mô hình đích cũng sẽ "
                "sinh ra, rồi thêm đúng một token của chính nó: token thay thế ở vị trí sai đầu tiên (phần nháp "
                "phía sau bị bỏ, bộ vẽ vẽ lại từ đó), hoặc token thưởng khi cả khối được giữ; mọi cache được quay "
                "về độ dài đã giữ. Mỗi vòng lab vẽ cả khối đã huấn luyện (k = 5) nhưng chỉ gửi ℓ ≤ k token nháp đầu "
                "đi verify (`--verify-len` là ℓ của một chính sách cố định; các token nháp sau ℓ là ‘không gửi đi "
                "verify’, "
                "mô hình đích không hề thấy chúng). Đó là việc của c: tích a_j = c_1·…·c_j (xác suất sống sót) dự "
                "đoán các token nháp 1..j có cùng được giữ hay không, và khi tải cao, bộ lập lịch tiền tố nhận biết "
                "phần cứng (Algorithm 1 của DSpark: `dspark-lab serve`, `dspark-lab schedule`, notebook 08) chỉ "
                "verify những token nháp đáng với chỗ của chúng trong batch của mô hình đích, bằng cách cân a_j với "
                "thông lượng đo được SPS(B). Bài học gốc vẽ khối 3 token từ lớp 3 và 4 với trọng số chưa huấn luyện "
                "(confidence 0.167, 0.234, 0.173 cho token 2, 1, 6). Lab giữ hai lớp đích ấy — lớp 3 và 4 nằm giữa "
                "chồng 8 lớp, còn mô hình thật lấy ba lớp cuối 37–39 — nhưng huấn luyện khối k = 5, khối của "
                "V4-Flash thật, và verify đoạn đầu ℓ ≤ 5 mà người học chọn. Giống một "
                "trợ lý viết nháp đưa trước vài câu "
                "cho chủ bút: trợ lý chỉ đề xuất, chủ bút (forward thật) mới là người quyết, và trợ lý càng đoán "
                "trúng thì càng tiết kiệm được nhiều lượt forward."
            ),
            "en": (
                "The head collapses the 4 lanes with the last pre-mix (hc_pre), applies RMSNorm and projects to "
                "logits [B, V]; alongside, DSpark taps the hidden states of the target layers (lab: layers 3 and 4 "
                "mixed 0.5/0.5; real: L37..39 concatenated and projected), runs them through its draft layers over "
                "a block [anchor, noise×(k−1)] (lab k = 5, as the real model), and the Markov head (rank 256 at "
                "real scale) drafts the tokens one after another. Each draft token carries its draft probability "
                "p_d(x), which the Vietnamese lesson calls 'confidence', and the confidence head's value c = "
                "σ(w·[h; W1[x_prev]]), a prediction of whether the token will survive verify — neither one is "
                "acceptance, which only verify decides. The lab's confidence head has no bias: the DSpark paper "
                "adds one (σ(w·[h; W1[x_prev]] + b)), V4.1's checkpoint stores only w (confidence_head.proj, [1, "
                "5376]), and the lab follows V4.1. Verify runs the target's real forward once over [anchor, "
                "d1..dk], keeps the longest prefix of draft tokens the target would have produced itself and adds "
                "exactly one token of its own: a replacement at the first mismatch, or a bonus token when the whole "
                "block survives; every cache is rolled back to the accepted length. Every round the lab drafts its "
                "whole trained block (k = 5) but sends only a prefix of ℓ ≤ k drafts to verify (`--verify-len` is the "
                "ℓ of "
                "a fixed policy; the drafts past ℓ are 'not sent to verify' and the target never sees them). That is "
                "what c is for: the survival a_j = c_1·…·c_j predicts whether drafts 1..j all survive, and under load "
                "a hardware-aware prefix scheduler (DSpark's Algorithm 1: `dspark-lab serve`, `dspark-lab schedule`, "
                "notebook 08) verifies only the drafts worth their slot in the target's batch, weighing a_j against "
                "the measured throughput SPS(B). The seed lesson drafts a block "
                "of 3 from taps 3 and 4 with untrained weights (confidences 0.167, 0.234, 0.173 for tokens 2, 1, "
                "6). The lab keeps those taps — layers 3 and 4, mid-stack in its 8 layers, where the real model "
                "taps its last three, 37–39 — but trains k = 5, the real V4-Flash block, and verifies the prefix ℓ ≤ 5 "
                "the learner picks. Like a drafting assistant who writes a few sentences "
                "ahead for the editor-in-chief, "
                "the drafter only proposes and the target model decides, and the better the assistant guesses, the "
                "more forward passes it saves."
            ),
        },
        equation=(
            "logits = head(RMSNorm(hc_pre(X, pre)));  p_d(·|i) = softmax(head(h_i) + "
            "head_m(W1[x_{i−1}]))\nc_i = σ(w·[h_i; W1[x_{i−1}]]);  a_j = Π_{i≤j} c_i;  P(✓ d_i) = min(1, "
            "p_t(d_i)/p_d(d_i))"
        ),
        look_at={
            "vi": (
                "logits [B, V]: các token đứng đầu kèm logit và xác suất",
                "từng vị trí của khối nháp: token nháp, xác suất nháp p_d(x) (bài học gọi là confidence), đầu tin "
                "cậy c, và kết quả verify (giữ, bị từ chối, lấy mẫu lại, token thưởng; sau ℓ: không gửi đi verify)",
                "trọng số chưa huấn luyện: xác suất nháp chỉ quanh 1/V; đã huấn luyện: p_d và c cao hơn 1/V rất "
                "nhiều, c ước lượng (trung bình, ở T = 1) khả năng verify giữ token; không con số nào là token được "
                "giữ — bảng bộ lập lịch: ℓ giảm khi số yêu cầu đang chạy tăng",
            ),
            "en": (
                "logits [B, V]: the top tokens with logit and probability",
                "each draft position: draft token, draft probability p_d(x), confidence c, and what verify "
                "did (accepted, rejected, resampled, bonus; past ℓ: not sent to verify)",
                "untrained weights: draft probabilities sit near 1/V; trained: p_d and c rise far above it, c "
                "estimating (on average, at T = 1) the chance verify keeps the token; neither number is acceptance "
                "— the scheduler table: ℓ falls as the requests in flight grow",
            ),
        },
        module="dspark",
        real_scale={
            "vi": ("lớp đích L37..39 → 3 lớp nháp · khối 5 [tok, noise×4] · Markov hạng 256 · 14.23 tỷ tham số"),
            "en": "taps L37..39 → 3 draft layers · block 5 [tok, noise×4] · Markov rank 256 · 14.23 B params",
        },
        trace_key="head",
    ),
)

STEP_IDS: tuple[str, ...] = tuple(s.id for s in STEPS)

# ---- the flow ------------------------------------------------------------------------------------
# The hidden stream runs 1A → … → 4A and then from attention straight to the MoE (4A → 5A); the KV
# cache (6A) sits beside attention, which both writes and reads it (4A ↔ 6A). Visiting the map
# depth-first from 1A, side branches first, gives the flow order of the lesson:
# 1A, 1B, 2A, 3A, 3B, 3C, 4A, 6A, 5A, 6B (see `flow_walk`).
FLOW: tuple[Edge, ...] = (
    Edge("1A", "1B"),
    Edge("1B", "2A"),
    Edge("2A", "3A"),
    Edge("3A", "3B"),
    Edge("3B", "3C"),
    Edge("3C", "4A"),
    Edge("4A", "6A", bidirectional=True),
    Edge("4A", "5A"),
    Edge("5A", "6B"),
)


def get_step(step_id: str | Step) -> Step:
    """The step with this id ("6B", "6b", " 6B " all work); unknown ids raise ValueError naming them."""
    if isinstance(step_id, Step):
        return step_id
    if isinstance(step_id, str):
        key = step_id.strip().upper()
        for step in STEPS:
            if step.id == key:
                return step
    raise ValueError(f"unknown step id {step_id!r}: valid ids are {', '.join(STEP_IDS)}")


def get_column(column: int | Column) -> Column:
    """The column with this number (1..4); anything else raises ValueError naming it."""
    if isinstance(column, Column):
        return column
    for col in COLUMNS:
        if not isinstance(column, bool) and col.id == column:
            return col
    raise ValueError(f"unknown column {column!r}: valid columns are {', '.join(str(c.id) for c in COLUMNS)}")


def steps_in_column(column: int | Column) -> tuple[Step, ...]:
    """The steps of one column, in flow order."""
    return tuple(get_step(i) for i in get_column(column).step_ids)


def text(step: str | Step, field_name: str, lang: str) -> str | tuple[str, ...]:
    """`get_step(step).t(field_name, lang)`: one text of one step in one language."""
    return get_step(step).t(field_name, lang)


def successors(step_id: str | Step) -> tuple[str, ...]:
    """Steps reachable by one edge from `step_id`; a bidirectional edge counts both ways, listed first."""
    key = get_step(step_id).id
    both = [e.dst if e.src == key else e.src for e in FLOW if e.bidirectional and key in (e.src, e.dst)]
    one_way = [e.dst for e in FLOW if not e.bidirectional and e.src == key]
    return tuple(both + one_way)


def flow_walk(start: str | Step = "1A") -> tuple[str, ...]:
    """Depth-first walk of FLOW from `start`, side branches first; from 1A it equals STEP_IDS."""
    seen: list[str] = []

    def visit(step_id: str) -> None:
        seen.append(step_id)
        for nxt in successors(step_id):
            if nxt not in seen:
                visit(nxt)

    visit(get_step(start).id)
    return tuple(seen)


def next_step(step_id: str | Step) -> Step | None:
    """The step after this one in flow order (None after 6B)."""
    i = get_step(step_id).order
    return STEPS[i + 1] if i + 1 < len(STEPS) else None


def prev_step(step_id: str | Step) -> Step | None:
    """The step before this one in flow order (None before 1A)."""
    i = get_step(step_id).order
    return STEPS[i - 1] if i > 0 else None


def _check_registry() -> None:
    """Cross-checks the constructors cannot do alone; run once at import."""
    ids = [s.id for s in STEPS]
    if len(set(ids)) != len(ids) or [s.order for s in STEPS] != list(range(len(STEPS))):
        raise ValueError(f"STEPS must have unique ids in flow order 0..9, got {ids}")
    in_columns = [i for c in COLUMNS for i in c.step_ids]
    if sorted(in_columns) != sorted(ids):
        raise ValueError(f"COLUMNS must partition the steps {ids}, got {in_columns}")
    for col in COLUMNS:
        for step in steps_in_column(col):
            if step.column != col.id:
                raise ValueError(f"step {step.id} is in column {col.id}'s list but says column {step.column}")
    for edge in FLOW:
        get_step(edge.src), get_step(edge.dst)
    if flow_walk() != tuple(ids):
        raise ValueError(f"FLOW walks {flow_walk()}, but STEPS are ordered {tuple(ids)}")


_check_registry()

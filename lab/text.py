"""The lab's two languages and the strings several parts share: one helper for every vi/en table.

  LANGS, check_lang(lang)     "vi" and "en"; anything else is a ValueError naming it
  Texts(table, what)          a table {key: {"vi": …, "en": …}}: `T(key, lang, **fmt)` gives one string (formatted
                              when fmt is given); an unknown key is a ValueError naming the table; `T[key]["vi"]`
                              reads it raw. Every module with screen, figure or message text keeps one `Texts`.
  UI, UI(key, lang)           the shared labels: panel headings, table headers, verify outcomes, warnings
  verify_label(status, lang)  "accepted", "not verified", … in either language
  in_lang(lang)               a notebook's own lines: tr = in_lang(LANG); print(tr("English", "tiếng Việt"))
  DEFAULT_PROMPT              the prompt every screen starts from (the walk, generate, the presenter, torchrun)
  check_prompt(prompt, encode, cfg, option, lang)  the one check of a student's prompt: NFC text, not empty, at
                              most prompt_limit(cfg) tokens; every refusal names `option` in `lang` → (text, ids)
  say_symlink(path, option, lang)  the line a command prints when its --out is a symbolic link it follows

Vietnamese is the lab's first language; the terms follow the project's glossary (the lesson's terms first; model
names and code identifiers such as Engram, mHC, DSpark, `hc_pre`, logits stay in English).
"""

from __future__ import annotations

import unicodedata
from collections.abc import Callable, Iterator, Mapping
from types import MappingProxyType
from typing import Any

LANGS: tuple[str, ...] = ("vi", "en")
DEFAULT_PROMPT = "Xin chào các bạn, hôm nay chúng ta học về DSpark."


def check_lang(lang: str) -> str:
    """`lang` normalized to one of LANGS; anything else raises ValueError naming it."""
    key = lang.strip().lower() if isinstance(lang, str) else lang
    if key not in LANGS:
        raise ValueError(f"unknown language {lang!r}: allowed {', '.join(map(repr, LANGS))}")
    return key


class Texts(Mapping[str, Mapping[str, str]]):
    """One table of strings in both languages (immutable). Calling it picks a language: T(key, lang, **fmt)."""

    def __init__(self, table: Mapping[str, Mapping[str, str]], what: str = "text") -> None:
        for key, by_lang in table.items():
            if set(by_lang) != set(LANGS) or not all(isinstance(v, str) and v for v in by_lang.values()):
                raise ValueError(f"{what} string {key!r} needs exactly one non-empty str per language {LANGS}")
        self._table = MappingProxyType({k: MappingProxyType(dict(v)) for k, v in table.items()})
        self.what = what

    def __call__(self, key: str, lang: str, **fmt: object) -> str:
        if key not in self._table:
            raise ValueError(f"unknown {self.what} key {key!r}: allowed {', '.join(sorted(self._table))}")
        text = self._table[key][check_lang(lang)]
        return text.format(**fmt) if fmt else text

    def __or__(self, other: Mapping[str, Mapping[str, str]]) -> Texts:
        """Both tables in one (a key of `other` wins)."""
        return Texts({**self._table, **other}, self.what)

    def __getitem__(self, key: str) -> Mapping[str, str]:
        return self._table[key]

    def __iter__(self) -> Iterator[str]:
        return iter(self._table)

    def __len__(self) -> int:
        return len(self._table)


# ---- shared UI strings (table headers, panel labels, verify outcomes, warnings) ---------------------------
UI = Texts(
    {
        # panels
        "step": {"vi": "Bước", "en": "Step"},
        "column": {"vi": "Cột", "en": "Column"},
        "flow": {"vi": "Luồng", "en": "Flow"},
        "what": {"vi": "Cơ chế", "en": "What it does"},
        "equation": {"vi": "Phương trình", "en": "Equation"},
        "shapes": {"vi": "Kích thước tensor", "en": "Shapes"},
        "look_at": {"vi": "Nhìn vào đâu", "en": "Look at"},
        "real_scale": {"vi": "Quy mô thật", "en": "Real scale"},
        "module": {"vi": "Mô-đun", "en": "Module"},
        "next_step": {"vi": "Bước sau", "en": "Next step"},
        "prev_step": {"vi": "Bước trước", "en": "Previous step"},
        "all_steps": {"vi": "Tất cả các bước", "en": "All steps"},
        "map_hint": {
            "vi": "Bấm vào một khối của sơ đồ để mở bước tương ứng.",
            "en": "Click a block of the map to open its step.",
        },
        # run settings
        "preset": {"vi": "Cấu hình", "en": "Preset"},
        "prompt": {"vi": "Lời nhắc (prompt)", "en": "Prompt"},
        "n_tokens": {"vi": "{n} token", "en": "{n} tokens"},  # str.format(n=...)
        "seed": {"vi": "Hạt giống (seed)", "en": "Seed"},
        "language": {"vi": "Ngôn ngữ", "en": "Language"},
        "weights": {"vi": "Trọng số", "en": "Weights"},
        "trained": {"vi": "đã huấn luyện", "en": "trained"},
        "untrained": {"vi": "chưa huấn luyện", "en": "untrained"},
        "temperature": {"vi": "Nhiệt độ", "en": "Temperature"},
        "block_size": {"vi": "Độ dài khối nháp k", "en": "Draft block size k"},
        "verify_len": {"vi": "Độ dài verify ℓ", "en": "Verify length ℓ"},
        "requests_in_flight": {"vi": "Số yêu cầu đang chạy R", "en": "Requests in flight R"},
        # tensor statistics
        "tensor": {"vi": "Tensor", "en": "Tensor"},
        "shape": {"vi": "Kích thước", "en": "Shape"},
        "dtype": {"vi": "Kiểu dữ liệu", "en": "Dtype"},
        "mean": {"vi": "Trung bình", "en": "Mean"},
        "std": {"vi": "Độ lệch chuẩn", "en": "Std"},
        "min": {"vi": "Nhỏ nhất", "en": "Min"},
        "max": {"vi": "Lớn nhất", "en": "Max"},
        "max_abs_diff": {"vi": "max |Δ|", "en": "max |Δ|"},
        # schedule, caches, sizes
        "layer": {"vi": "Lớp", "en": "Layer"},
        "role": {"vi": "Vai trò", "en": "Role"},
        "ratio": {"vi": "Tỉ lệ nén", "en": "Compress ratio"},
        "reads_kv_of": {"vi": "Đọc KV của", "en": "Reads KV of"},
        "reads_topk_of": {"vi": "Đọc top-k của", "en": "Reads top-k of"},
        "role_swa_only": {"vi": "chỉ SWA", "en": "SWA-only"},
        "role_full": {"vi": "Full (nguồn KV + index)", "en": "Full (KV + index source)"},
        "role_reuse": {"vi": "Reuse (dùng lại)", "en": "Reuse"},
        "role_reindex": {"vi": "Reindex (chấm điểm lại)", "en": "Reindex"},
        "role_candidate_source": {"vi": "nguồn ứng viên", "en": "candidate source"},
        "encoder": {"vi": "encoder", "en": "encoder"},
        "decoder": {"vi": "decoder", "en": "decoder"},
        "lane": {"vi": "Làn", "en": "Lane"},
        "iteration": {"vi": "Vòng lặp", "en": "Iteration"},
        "comb_history": {"vi": "lịch sử comb", "en": "comb history"},
        "row_sum": {"vi": "Tổng hàng", "en": "Row sum"},
        "col_sum": {"vi": "Tổng cột", "en": "Column sum"},
        "position": {"vi": "Vị trí", "en": "Position"},
        "compressed_position": {"vi": "Vị trí nén", "en": "Compressed position"},
        "gate": {"vi": "Cổng", "en": "Gate"},
        "score": {"vi": "Điểm", "en": "Score"},
        "expert": {"vi": "Expert", "en": "Expert"},
        "load": {"vi": "Tải", "en": "Load"},
        "params": {"vi": "Số tham số", "en": "Parameters"},
        "bytes_per_token": {"vi": "Byte mỗi token", "en": "Bytes per token"},
        "cache_kind": {"vi": "Loại cache", "en": "Cache kind"},
        "cache_window": {"vi": "cửa sổ FP8", "en": "FP8 window"},
        "cache_compressed": {"vi": "KV nén FP4", "en": "FP4 compressed KV"},
        "cache_index": {"vi": "key indexer FP4", "en": "FP4 index keys"},
        "qdq_error": {"vi": "Sai số lượng tử hóa", "en": "Quantization error"},
        "toy": {"vi": "Mô hình nhỏ (lab)", "en": "Toy (lab)"},
        "real": {"vi": "Mô hình thật (flash)", "en": "Real (flash)"},
        # 6B: head, draft, verify
        "token": {"vi": "Token", "en": "Token"},
        "token_id": {"vi": "Mã token", "en": "Token id"},
        "logit": {"vi": "Logit", "en": "Logit"},
        "probability": {"vi": "Xác suất", "en": "Probability"},
        "tap_layers": {"vi": "Lớp đích", "en": "Tap layers"},
        "draft_token": {"vi": "Token nháp", "en": "Draft token"},
        "draft_probability": {"vi": "Xác suất nháp p_d(x)", "en": "Draft probability p_d(x)"},
        "confidence": {"vi": "Đầu tin cậy c", "en": "Confidence c"},
        "target_token": {"vi": "Token của forward thật", "en": "Target token"},
        "accepted": {"vi": "được giữ", "en": "accepted"},
        "rejected": {"vi": "bị từ chối", "en": "rejected"},
        "resampled": {"vi": "lấy mẫu lại", "en": "resampled"},
        "bonus": {"vi": "token thưởng", "en": "bonus"},
        "not_verified": {"vi": "không xét", "en": "not verified"},
        "not_sent": {"vi": "không gửi đi verify", "en": "not sent to verify"},
        "accepted_length": {"vi": "Độ dài chấp nhận τ", "en": "Accepted length τ"},
        "acceptance_rate": {"vi": "Tỉ lệ token nháp được giữ", "en": "Acceptance rate"},
        "parity": {"vi": "Parity logits", "en": "Logit parity"},
        "note_draft_probability": {
            "vi": (
                "Xác suất nháp p_d(x) là xác suất của token nháp theo phân phối draft — con số mà bài học gọi là "
                "confidence; đầu tin cậy c là đầu ra của Confidence Head σ, dự đoán token có qua được verify hay "
                "không. "
                "Hai con số khác nhau, và không con số nào là việc token được giữ."
            ),
            "en": (
                "Draft probability p_d(x) is the draft token's probability under the draft distribution — the number "
                "the Vietnamese lesson calls 'confidence'; confidence c is the confidence head's output σ, a "
                "prediction of whether the token survives verify. Two different numbers, and neither is acceptance."
            ),
        },
        "note_real_widths": {
            "vi": (
                "Độ rộng thật của DeepSeek-V4.1-Flash ({name}: vocab {vocab:,}, hidden {dim:,}, {layers} lớp), "
                "trọng số khởi tạo ngẫu nhiên theo seed ngay trên thiết bị, không tải gì về. Chưa có tokenizer riêng: "
                "văn bản "
                "đi qua tokenizer của lab, mọi id của nó (< {lab:,}) đều là id hợp lệ trong {vocab:,} id; token "
                "ngoài vốn từ của lab hiện thành ⟨id⟩."
            ),
            "en": (
                "DeepSeek-V4.1-Flash's real widths ({name}: vocab {vocab:,}, hidden {dim:,}, {layers} layers), seeded "
                "init drawn on the device, nothing downloaded. No tokenizer of its own here: the text goes through the "
                "lab tokenizer, whose ids (all < {lab:,}) are valid ids of the {vocab:,}; an id past the lab "
                "vocabulary shows as ⟨id⟩."
            ),
        },
        "warning_untrained": {
            "vi": (
                "Trọng số chưa huấn luyện: xác suất nháp p_d(x) của token nháp chỉ quanh 1/V nên chưa nói lên điều gì "
                "về câu chữ; hãy nạp trọng số đã huấn luyện để xem verify giữ lại bao nhiêu token."
            ),
            "en": (
                "Untrained weights: draft probabilities sit near 1/V and say nothing about the language yet; "
                "load the trained weights to see how many tokens verify keeps."
            ),
        },
        "note_trained": {  # {ece}: lab.lesson.notes.ece_text of report.json's `heldout_calibration`
            "vi": (
                "Trọng số đã huấn luyện (lab/weights, `dspark-lab train all`): c là ước lượng của đầu tin cậy về khả "
                "năng verify giữ token, c = σ(z/T) với logit z chia cho một nhiệt độ STS chọn trên {fit_n} vòng. Đo "
                "trên {n} vòng kiểm định riêng (report.json, `heldout_calibration`), ECE (20 ngăn) của DSpark với các "
                "nhiệt độ ấy so với đầu thô: {ece}. Hãy coi c là ước lượng thô, chưa phải xác suất đã hiệu chuẩn; so "
                "nó với cột verify."
            ),
            "en": (
                "Trained weights (lab/weights, `dspark-lab train all`): c is the confidence head's estimate of the "
                "chance that verify keeps the token, c = σ(z/T) with its logit z divided by an STS temperature fitted "
                "on {fit_n} rounds. Measured on {n} held-out rounds (report.json, `heldout_calibration`), DSpark's "
                "20-bin ECE with those temperatures against the raw head: {ece}. Read c as a rough estimate, not a "
                "calibrated probability; compare it with the verify column."
            ),
        },
        # profiling
        "time": {"vi": "Thời gian", "en": "Time"},
        "p50": {"vi": "p50", "en": "p50"},
        "p95": {"vi": "p95", "en": "p95"},
        "p99": {"vi": "p99", "en": "p99"},
        "run_conditions": {"vi": "Điều kiện chạy", "en": "Run conditions"},
        "verify_cost": {"vi": "Chi phí verify", "en": "Verify cost"},
        "throughput": {"vi": "Thông lượng", "en": "Throughput"},
        "latency": {"vi": "Độ trễ", "en": "Latency"},
        # files
        "out_symlink": {
            "vi": (
                "{option} {link!r} là liên kết tượng trưng tới {target!r}: ghi vào {target!r}, liên kết được giữ nguyên"
            ),
            "en": "{option} {link!r} is a symbolic link to {target!r}: writing into {target!r}, the link is kept",
        },
    },
    "UI",
)


def verify_label(status: str, lang: str) -> str:
    """The label of a verify outcome (accepted, rejected, not verified, not sent, resampled, bonus) in `lang`."""
    return UI(status.replace(" ", "_"), lang)


# ---- a student's prompt: one check for every entry point ---------------------------------------------------
PROMPT_TEXT = Texts(
    {
        "not_text": {
            "vi": "{option} = {value!r} không phải văn bản: cho phép một chuỗi 1..{limit} token",
            "en": "{option} = {value!r} is not text: allowed a string of 1..{limit} tokens",
        },
        "empty": {
            "vi": "{option} đang trống: hãy nhập một đoạn văn bản (1..{limit} token)",
            "en": "{option} is empty: give some text (1..{limit} tokens)",
        },
        "too_long": {
            "vi": (
                "{option} có {n} token: cho phép 1..{limit} (max_seq_len {seq} − một lần verify {verify} vị trí: "
                "anchor + {k} token nháp); hãy rút ngắn prompt"
            ),
            "en": (
                "{option} has {n} tokens: allowed 1..{limit} (max_seq_len {seq} − one verify of {verify} positions: "
                "anchor + {k} drafts); shorten the prompt"
            ),
        },
        "tokenizer": {"vi": "{option}: {error}", "en": "{option}: {error}"},
    },
    "prompt",
)


def prompt_limit(cfg: Any) -> int:
    """The most tokens a prompt may have, the same for every entry point: max_seq_len − (k + 1), so one verify of
    the anchor and the k drafts of a round (and one new token of plain decoding) always fits behind it."""
    return cfg.max_seq_len - (cfg.dspark_block_size + 1)


def check_prompt(
    prompt: Any, encode: Callable[[str], list[int]], cfg: Any, option: str = "--prompt", lang: str = "en"
) -> tuple[str, list[int]]:
    """A student's prompt as the model reads it: (its NFC text, its token ids).

    NFC first, so Vietnamese typed with decomposed accents (NFD, as macOS writes it) gives the tokens of its
    composed form; then a prompt that is not a str (TypeError), empty or whitespace only, or longer than
    prompt_limit(cfg) tokens is refused (ValueError). Each message starts with `option` (`--prompt`, the widget's
    field, `--prompts-file line N`) and is in `lang`. A tokenizer error (a character outside the vocabulary)
    keeps its own text behind the option's name."""
    lang, limit = check_lang(lang), prompt_limit(cfg)
    if not isinstance(prompt, str):
        raise TypeError(PROMPT_TEXT("not_text", lang, option=option, value=prompt, limit=limit))
    text = unicodedata.normalize("NFC", prompt)
    if not text.strip():
        raise ValueError(PROMPT_TEXT("empty", lang, option=option, limit=limit))
    try:
        ids = encode(text)
    except ValueError as e:
        raise ValueError(PROMPT_TEXT("tokenizer", lang, option=option, error=e)) from e
    if len(ids) > limit:
        k = cfg.dspark_block_size
        fmt = {"n": len(ids), "limit": limit, "seq": cfg.max_seq_len, "verify": k + 1, "k": k}
        raise ValueError(PROMPT_TEXT("too_long", lang, option=option, **fmt))
    return text, ids


def in_lang(lang: str) -> Callable[[str, str], str]:
    """`tr(en, vi)` → the line in `lang`: a notebook's own prints and labels, written side by side in both languages
    where they are used (a notebook is read top to bottom; a table of keys would hide its sentences elsewhere)."""
    lang = check_lang(lang)

    def tr(en: str, vi: str) -> str:
        return vi if lang == "vi" else en

    return tr


def say_symlink(path, option: str, lang: str) -> None:
    """When `path` (an --out) is a symbolic link, say on stderr that the lab writes where it points and keeps the
    link (dspark_mini.files follows it on purpose); nothing otherwise."""
    import os
    import sys

    if os.path.islink(path):
        target = os.path.realpath(path)
        print(UI("out_symlink", lang, option=option, link=str(path), target=target), file=sys.stderr)

"""The paper pages' strings in both languages: figure titles and axes, table headers, the items' prose (the
glossary's terms: bộ vẽ nháp = drafter, độ dài chấp nhận τ = accepted length, verify, đầu tin cậy = confidence
head, bộ lập lịch = scheduler). Numbers are never part of a string: they are filled in from the JSON.

Domains: the lab measures its own (lab.realtext.DOMAINS: en, vi, code, sums); the paper's are its own three (math,
code, chat: means over its benchmarks). A lab domain is always shown under its lab label (`lab_domain`), a paper
domain under its paper label (`paper_domain`); where one lab number stands beside one paper number per domain, the
pairs are `PAPER_DOMAIN_OF`'s, stated once on the page. Records written before the real-text corpus (the toy
domains math, code, chat) still read: their domains have labels and pair with the paper's of the same name.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ..text import Texts

# the paper domain each lab domain is set beside (sums ↔ math: multi-digit arithmetic; code ↔ code; en, vi ↔ chat:
# prose); the toy corpus's domains (records of earlier runs) pair with the paper's of the same name
PAPER_DOMAIN_OF = {"sums": "math", "code": "code", "en": "chat", "vi": "chat", "math": "math", "chat": "chat"}
TOY_DOMAINS = ("math", "code", "chat")  # the toy corpus's (lab.corpus), in records of runs before the real text

T = Texts(
    {
        # figure titles and axes
        "t1_title": {"en": "Table 1 · τ per domain at T = 1 (lab)", "vi": "Bảng 1 · τ theo miền ở T = 1 (lab)"},
        "fig2_title": {
            "en": "Fig. 2 · conditional acceptance by draft position, T = 1 · each panel: lab domain ↔ paper domain "
            "(dotted)",
            "vi": "Hình 2 · tỉ lệ được giữ có điều kiện theo vị trí nháp, T = 1 · mỗi ô: miền của lab ↔ miền của bài "
            "báo (nét chấm)",
        },
        "fig3_title": {
            "en": "Fig. 3 · DSpark with {layers} draft layers vs DFlash ({depth} layers), block {block}, T = 1",
            "vi": "Hình 3 · DSpark với {layers} lớp nháp so với DFlash ({depth} lớp), khối {block}, T = 1",
        },
        "fig4_title": {
            "en": "Fig. 4 · τ vs block k (drafts per round), DSpark ({depth} layers) vs DFlash ({dflash} layers), "
            "T = 1",
            "vi": "Hình 4 · τ theo khối k (số token nháp mỗi vòng), DSpark ({depth} lớp) so với DFlash ({dflash} lớp), "
            "T = 1",
        },
        "fig5_title": {
            "en": "Fig. 5 · static confidence threshold: verified tokens per step and verify rate (DSpark, T = 1)",
            "vi": "Hình 5 · ngưỡng tin cậy tĩnh: token được verify mỗi bước và tỉ lệ verify (DSpark, T = 1)",
        },
        "fig6_title": {
            "en": "Fig. 6 · reliability of the prefix survival, before and after STS (held-out rounds)",
            "vi": "Hình 6 · độ tin cậy của xác suất sống sót tiền tố, trước và sau STS (các vòng giữ lại)",
        },
        "fig7_title": {
            "en": "Fig. 7 · per-user vs aggregate tokens/s on the lab's SPS table",
            "vi": "Hình 7 · token/s mỗi người dùng so với token/s tổng trên bảng SPS của lab",
        },
        "fig8_title": {
            "en": "Fig. 8 · mean verify budget per request vs requests in flight",
            "vi": "Hình 8 · ngân sách verify trung bình mỗi yêu cầu theo số yêu cầu đang chạy",
        },
        "position": {"en": "draft position", "vi": "vị trí nháp"},
        "cond_accept": {"en": "conditional acceptance", "vi": "tỉ lệ được giữ có điều kiện"},
        "tau": {"en": "accepted length τ", "vi": "độ dài chấp nhận τ"},
        "domain": {"en": "domain", "vi": "miền"},
        "block_k": {"en": "block k", "vi": "khối k"},
        "threshold": {"en": "confidence threshold", "vi": "ngưỡng tin cậy"},
        "verified": {
            "en": "verified tokens per step (incl. bonus)",
            "vi": "token được verify mỗi bước (gồm token thưởng)",
        },
        "verify_rate": {"en": "verify rate", "vi": "tỉ lệ verify"},
        "predicted": {"en": "predicted survival", "vi": "xác suất sống sót dự đoán"},
        "observed": {"en": "observed survival", "vi": "tỉ lệ sống sót quan sát"},
        "raw": {"en": "raw head", "vi": "đầu thô"},
        "sts": {"en": "after STS", "vi": "sau STS"},
        "ideal": {"en": "ideal", "vi": "lý tưởng"},
        "aggregate": {"en": "aggregate tokens/s", "vi": "token/s tổng"},
        "per_user": {"en": "per-user tokens/s", "vi": "token/s mỗi người dùng"},
        "requests": {"en": "requests in flight R", "vi": "số yêu cầu đang chạy R"},
        "budget": {"en": "verify budget per request (1 + ℓ)", "vi": "ngân sách verify mỗi yêu cầu (1 + ℓ)"},
        "curve_dspark": {"en": "DSpark + Algorithm 1", "vi": "DSpark + Algorithm 1"},
        "curve_async": {"en": "DSpark + async scheduler", "vi": "DSpark + bộ lập lịch bất đồng bộ"},
        "curve_fixed": {"en": "DSpark, full block", "vi": "DSpark, cả khối"},
        "curve_mtp1": {"en": "MTP-1", "vi": "MTP-1"},
        "position_n": {"en": "position {i}", "vi": "vị trí {i}"},
        "paper_trace": {"en": "{name} (paper)", "vi": "{name} (bài báo)"},
        "subplot_pair": {"en": "{lab} ↔ {paper}", "vi": "{lab} ↔ {paper}"},
        # the lab's domains (the real-text corpus's; the toy corpus's in older records) and the paper's
        "lab_en": {"en": "English", "vi": "tiếng Anh"},
        "lab_vi": {"en": "Vietnamese", "vi": "tiếng Việt"},
        "lab_code": {"en": "code", "vi": "mã"},
        "lab_sums": {"en": "sums", "vi": "phép cộng"},
        "lab_math": {"en": "toy math", "vi": "toán đồ chơi"},
        "lab_chat": {"en": "toy chat", "vi": "hội thoại đồ chơi"},
        "paper_math": {"en": "math", "vi": "toán"},
        "paper_code": {"en": "code", "vi": "code"},
        "paper_chat": {"en": "chat", "vi": "chat"},
        # what a lab domain shares with its paper domain
        "why_sums": {"en": "multi-digit arithmetic", "vi": "số học nhiều chữ số"},
        "why_code": {"en": "program code", "vi": "mã chương trình"},
        "why_en": {"en": "prose", "vi": "văn xuôi"},
        "why_vi": {"en": "prose", "vi": "văn xuôi"},
        "why_math": {"en": "arithmetic", "vi": "số học"},
        "why_chat": {"en": "dialogue", "vi": "hội thoại"},
        # terminal
        "written": {"en": "written", "vi": "đã ghi"},
        "done": {"en": "paper in miniature: {n} items in {s} s", "vi": "bài báo thu nhỏ: {n} mục trong {s} s"},
        "pictures_off": {"en": "--no-pictures", "vi": "--no-pictures"},
        "no_pictures": {
            "en": "no PNGs drawn ({why}): the JSON and the pages are complete without them",
            "vi": "không vẽ PNG ({why}): JSON và các trang vẫn đầy đủ",
        },
    },
    "paper",
)


def lab_domain(d: str, lang: str) -> str:
    """A lab domain's readable name in `lang` (English / tiếng Anh, …); one without a label keeps its own name."""
    return T(f"lab_{d}", lang) if f"lab_{d}" in T else d


def paper_domain(d: str, lang: str) -> str:
    """A paper domain's name in `lang` (math / toán, code, chat)."""
    return T(f"paper_{d}", lang) if f"paper_{d}" in T else d


def paper_pair(d: str) -> str | None:
    """The paper domain the lab domain `d` stands beside (None: none; compare means only)."""
    return PAPER_DOMAIN_OF.get(d)


def lab_domains(by: Mapping[str, Any]) -> list[str]:
    """The lab domains of one record's per-domain dict, in its order (its "mean" entry left out): the records say
    which domains they measured, so an older run (the toy corpus's math, code, chat) reads as it was written."""
    return [d for d in by if d != "mean"]


def is_toy(domains: Iterable[str]) -> bool:
    """Whether a record's lab domains are the toy corpus's (a run before the real-text corpus)."""
    return set(domains) <= set(TOY_DOMAINS)

"""The paper pages' strings in both languages: figure titles and axes, table headers, the items' prose (the
glossary's terms: bộ vẽ nháp = drafter, độ dài chấp nhận τ = accepted length, verify, đầu tin cậy = confidence
head, bộ lập lịch = scheduler). Numbers are never part of a string: they are filled in from the JSON."""

from __future__ import annotations

from ..text import Texts

T = Texts(
    {
        # figure titles and axes
        "t1_title": {"en": "Table 1 · τ per domain at T = 1 (lab)", "vi": "Bảng 1 · τ theo miền ở T = 1 (lab)"},
        "fig2_title": {
            "en": "Fig. 2 · conditional acceptance by draft position, T = 1 — {domain}",
            "vi": "Hình 2 · tỉ lệ được giữ có điều kiện theo vị trí nháp, T = 1 — {domain}",
        },
        "fig3_title": {
            "en": "Fig. 3 · DSpark with 1–3 draft layers vs DFlash ({depth} layers), block {block}, T = 1",
            "vi": "Hình 3 · DSpark với 1–3 lớp nháp so với DFlash ({depth} lớp), khối {block}, T = 1",
        },
        "fig4_title": {
            "en": "Fig. 4 · τ vs block length, DSpark vs DFlash ({depth} layers), T = 1",
            "vi": "Hình 4 · τ theo độ dài khối, DSpark so với DFlash ({depth} lớp), T = 1",
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
        "block": {"en": "block k (drafts per round)", "vi": "khối k (số token nháp mỗi vòng)"},
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

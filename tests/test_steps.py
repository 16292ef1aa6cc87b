"""The step registry (lab/lesson/steps.py): ids, columns, flow, vi/en text and UI strings."""

import subprocess
import sys
from pathlib import Path

import pytest

from lab.lesson import steps
from lab.lesson.steps import COLUMNS, FLOW, STEPS, TEXT_FIELDS
from lab.text import LANGS, UI

FLOW_ORDER = ("1A", "1B", "2A", "3A", "3B", "3C", "4A", "6A", "5A", "6B")
COLUMN_STEPS = {1: ("1A", "1B", "2A"), 2: ("3A", "3B", "3C"), 3: ("4A", "6A"), 4: ("5A", "6B")}
MODULES = {
    "1A": "model",
    "1B": "engram",
    "2A": "mhc",
    "3A": "schedule",
    "3B": "compressor",
    "3C": "indexer",
    "4A": "attention",
    "6A": "kv_cache",
    "5A": "moe",
    "6B": "dspark",
}


def test_ten_unique_ids_in_flow_order():
    ids = tuple(s.id for s in STEPS)
    assert ids == FLOW_ORDER == steps.STEP_IDS
    assert len(set(ids)) == 10
    assert [s.order for s in STEPS] == list(range(10))


def test_columns_partition_the_steps():
    assert [c.id for c in COLUMNS] == [1, 2, 3, 4]
    for col in COLUMNS:
        assert col.step_ids == COLUMN_STEPS[col.id]
        assert tuple(s.id for s in steps.steps_in_column(col.id)) == COLUMN_STEPS[col.id]
        assert all(s.column == col.id for s in steps.steps_in_column(col))
    listed = [i for c in COLUMNS for i in c.step_ids]
    assert sorted(listed) == sorted(FLOW_ORDER) and len(listed) == 10


def test_column_titles():
    assert COLUMNS[0].title == {"vi": "Đầu vào, Engram & mHC", "en": "Input, Engram & mHC"}
    assert [c.t("title", "en") for c in COLUMNS] == [
        "Input, Engram & mHC",
        "CED 20+20 & CSA2",
        "MLA & FP4 KV (890 B)",
        "FP4 MoE & DSpark",
    ]
    assert all(c.t("title", "vi") for c in COLUMNS)
    assert COLUMNS[3].label("en") == "4 · FP4 MoE & DSpark"


@pytest.mark.parametrize("step", STEPS, ids=lambda s: s.id)
def test_every_text_field_in_both_languages_and_translated(step):
    for name in TEXT_FIELDS:
        vi, en = step.t(name, "vi"), step.t(name, "en")
        if name == "look_at":
            assert isinstance(vi, tuple) and isinstance(en, tuple)
            assert 1 <= len(vi) <= 3 and len(vi) == len(en)
            assert all(b.strip() for b in vi + en)
            assert all(a != b for a, b in zip(vi, en, strict=True)), f"{step.id}.{name}: an untranslated bullet"
        else:
            assert vi.strip() and en.strip(), f"{step.id}.{name} is empty"
            assert vi != en, f"{step.id}.{name}: vi text equals en text"
    for lang in LANGS:
        assert len(step.short[lang]) <= 90
        assert "\n" not in step.short[lang] and "\n" not in step.real_scale[lang]
    assert step.equation.strip() and step.equation.count("\n") <= 1
    assert step.t("equation", "vi") == step.t("equation", "en") == step.equation


@pytest.mark.parametrize("step", STEPS, ids=lambda s: s.id)
def test_module_and_trace_key(step):
    assert step.module == MODULES[step.id]
    assert step.trace_key == ("head" if step.id == "6B" else step.id)


def test_flow_edges_form_the_path():
    assert all(len(e) == 3 and isinstance(e.bidirectional, bool) for e in FLOW)
    src, dst, both = FLOW[0]
    assert (src, dst, both) == ("1A", "1B", False)
    assert [e for e in FLOW if e.bidirectional] == [("4A", "6A", True)]
    assert ("4A", "5A", False) in FLOW and ("5A", "6B", False) in FLOW
    ids = set(FLOW_ORDER)
    assert all(e.src in ids and e.dst in ids for e in FLOW)
    assert steps.flow_walk() == FLOW_ORDER
    assert steps.successors("4A") == ("6A", "5A")
    assert steps.successors("6A") == ("4A",)
    assert steps.successors("6B") == ()


def test_walk_from_1a_following_edges_reaches_all_ten():
    adjacency = {}
    for src, dst, bidirectional in FLOW:
        adjacency.setdefault(src, []).append(dst)
        if bidirectional:
            adjacency.setdefault(dst, []).append(src)
    seen, todo = set(), ["1A"]
    while todo:
        node = todo.pop()
        if node not in seen:
            seen.add(node)
            todo.extend(adjacency.get(node, []))
    assert seen == set(FLOW_ORDER)


def test_next_and_prev_step():
    assert steps.next_step("4A").id == "6A" and steps.next_step("6A").id == "5A"
    assert steps.next_step("6B") is None and steps.prev_step("1A") is None
    assert steps.prev_step("5A").id == "6A"


def test_get_step_is_case_insensitive():
    assert steps.get_step("6b") is steps.get_step("6B") is steps.get_step(" 6b ") is STEPS[-1]
    assert steps.get_step(STEPS[0]) is STEPS[0]
    assert steps.text("3c", "title", "en") == steps.get_step("3C").title["en"]


@pytest.mark.parametrize("bad", ["7C", "", "6", 6, None])
def test_bad_step_id_names_it_and_lists_valid_ones(bad):
    with pytest.raises(ValueError) as err:
        steps.get_step(bad)
    assert repr(bad) in str(err.value)
    assert "1A, 1B, 2A, 3A, 3B, 3C, 4A, 6A, 5A, 6B" in str(err.value)


def test_bad_language_names_it_and_the_allowed_ones():
    with pytest.raises(ValueError, match="'fr'.*'vi', 'en'"):
        STEPS[0].t("title", "fr")
    with pytest.raises(ValueError, match="'de'"):
        steps.text("1A", "what", "de")
    with pytest.raises(ValueError, match="'jp'"):
        COLUMNS[0].t("title", "jp")
    with pytest.raises(ValueError, match="'xx'.*'vi', 'en'"):
        UI("step", "xx")
    assert STEPS[0].t("title", "EN") == STEPS[0].title["en"]


def test_bad_field_and_column_name_the_value():
    with pytest.raises(ValueError, match="'colour'"):
        STEPS[0].t("colour", "en")
    with pytest.raises(ValueError, match="unknown column 5"):
        steps.steps_in_column(5)


def test_ui_has_both_languages_for_every_key():
    assert len(UI) >= 30
    for key, by_lang in UI.items():
        assert set(by_lang) == set(LANGS), key
        assert all(v.strip() for v in by_lang.values()), key
        assert UI(key, "vi") == by_lang["vi"] and UI(key, "en") == by_lang["en"]
    for key in (
        "step",
        "column",
        "what",
        "equation",
        "shapes",
        "look_at",
        "tensor",
        "shape",
        "mean",
        "std",
        "min",
        "max",
        "layer",
        "role",
        "reads_kv_of",
        "reads_topk_of",
        "params",
        "bytes_per_token",
        "cache_kind",
        "toy",
        "real",
        "token",
        "logit",
        "probability",
        "draft_token",
        "draft_probability",
        "confidence",
        "accepted",
        "rejected",
        "resampled",
        "bonus",
        "not_verified",
        "not_sent",
        "verify_len",
        "requests_in_flight",
        "warning_untrained",
    ):
        assert key in UI, key


def test_bad_ui_key_names_it():
    with pytest.raises(ValueError, match="'no_such_key'"):
        UI("no_such_key", "en")


def test_draft_probability_and_confidence_are_named_apart():
    assert "draft probability" in UI["draft_probability"]["en"].lower()
    assert UI["draft_probability"]["en"] != UI["confidence"]["en"]
    assert UI["draft_probability"]["vi"] != UI["confidence"]["vi"]
    assert "đầu tin cậy" in UI["confidence"]["vi"].lower()


def test_6b_teaches_draft_probability_confidence_and_verify():
    step = steps.get_step("6B")
    en, vi = step.what["en"], step.what["vi"]
    # the head and the draft path
    for needed in ("hc_pre", "RMSNorm", "logits [B, V]", "Markov head", "[anchor, noise×(k−1)]"):
        assert needed in en and needed in vi, needed
    assert "layers 3 and 4 mixed 0.5/0.5" in en and "lớp 3 và 4 trộn 0.5/0.5" in vi
    assert "L37..39" in en and "L37..39" in vi
    assert "lab k = 5" in en and "k = 5" in vi and "rank 256" in en and "hạng 256" in vi
    # two different numbers, neither of them acceptance
    assert "draft probability" in en and "p_d(x)" in en and "'confidence'" in en
    assert "xác suất của token nháp theo phân phối draft" in vi  # the glossary's lab term
    assert "c = σ(w·[h; W1[x_prev]])" in en and "c = σ(w·[h; W1[x_prev]])" in vi
    assert "confidence head" in en and "đầu tin cậy" in vi
    assert "neither one is acceptance" in en
    assert "chưa phải là kết quả giữ token sau verify" in vi
    # verify with the real forward, and the everyday analogy
    assert "real forward" in en and "forward thật" in vi
    assert "bonus token" in en and "token thưởng" in vi
    assert "editor-in-chief" in en and "drafting assistant" in en
    assert "chủ bút" in vi and "trợ lý viết nháp" in vi
    look_en = " ".join(step.look_at["en"])
    assert "draft probability" in look_en and "confidence" in look_en
    assert "neither number is acceptance" in look_en


def test_6b_says_what_c_is_for_in_both_languages():
    """The draft runs the whole trained block, a prefix ℓ is verified, and c feeds the scheduler."""
    step = steps.get_step("6B")
    en, vi = step.what["en"], step.what["vi"]
    for text in (en, vi):
        for needed in ("a_j = c_1·…·c_j", "Algorithm 1", "`dspark-lab serve`", "`dspark-lab schedule`", "notebook 08"):
            assert needed in text, needed
        assert "SPS(B)" in text and "`--verify-len`" in text and "ℓ" in text
    assert "That is what c is for" in en and "Đó là việc của c" in vi
    assert "'not sent to verify'" in en and "‘không gửi đi verify’" in vi
    assert UI["not_sent"] == {"vi": "không gửi đi verify", "en": "not sent to verify"}
    assert "bộ lập lịch tiền tố nhận biết phần cứng" in vi  # the glossary's term for the prefix scheduler
    assert "a_j = Π_{i≤j} c_i" in step.equation
    assert "not sent to verify" in " ".join(step.look_at["en"])
    assert "không gửi đi verify" in " ".join(step.look_at["vi"])


def test_real_scale_numbers_of_key_steps():
    assert "196.61 B" in steps.get_step("1B").what["en"]
    assert "8 heads" in steps.get_step("1B").what["en"]
    for n in ("528 B", "288 B", "68 B", "890"):
        assert n in steps.get_step("6A").what["en"], n
    assert "890 B/token" in steps.get_step("6A").real_scale["en"]
    assert "Sinkhorn₂₀" in steps.get_step("2A").equation


def test_registry_is_immutable_and_hashable():
    with pytest.raises(AttributeError):
        STEPS[0].id = "9Z"  # type: ignore[misc]
    assert len({*STEPS}) == 10 and len({*COLUMNS}) == 4


def test_importing_the_registry_loads_neither_torch_nor_the_model():
    root = Path(steps.__file__).resolve().parents[1]
    code = "import sys, lab.lesson.steps; print(sorted(m for m in sys.modules if m in ('torch', 'dspark_mini')))"
    out = subprocess.run([sys.executable, "-c", code], cwd=root, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"

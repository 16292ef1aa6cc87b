"""The SPS(B) cost table (lab/serving/sps.py): forced monotone, interpolation, the synthetic tables, JSON
round trip and malformed files, and `measure_sps` on a deterministic fake clock (no real timing is asserted)."""

from __future__ import annotations

import json
import math
import re

import pytest
import torch

from lab.serving.sps import (
    FORMAT,
    POW2_SIZES,
    SPSTable,
    SPSTableError,
    force_monotone,
    load_table,
    measure_sps,
    save_table,
    smooth_table,
    staircase_table,
)


# ---- the table -----------------------------------------------------------------------------------------------
def test_forced_monotone_keeps_sps_non_increasing_and_the_raw_values():
    t = SPSTable([1, 2, 4, 8], [100.0, 90.0, 95.0, 50.0])  # B = 4 measured faster than B = 2: noise
    assert t.forced_steps_per_s == (100.0, 90.0, 90.0, 50.0)
    assert t.raw_steps_per_s == (100.0, 90.0, 95.0, 50.0)
    assert force_monotone([3.0, 1.0, 2.0]) == [3.0, 1.0, 1.0]
    b = torch.arange(1, 40)
    sps = t.steps_per_s(b)
    assert torch.all(sps[1:] <= sps[:-1])


def test_linear_interpolation_is_linear_in_step_time():
    t = SPSTable([2, 4], [1.0, 0.5])  # step time 1 s at B = 2, 2 s at B = 4
    assert t.step_seconds(3) == pytest.approx(1.5)
    assert t.steps_per_s(3) == pytest.approx(1 / 1.5)
    assert t.step_seconds(1) == pytest.approx(1.0)  # below the first point: the first point's cost
    assert t.step_seconds(6) == pytest.approx(3.0)  # beyond the last: the last segment's slope
    assert isinstance(t.steps_per_s(3), float)
    out = t.steps_per_s(torch.tensor([2, 3, 4]))
    assert out.dtype == torch.float64 and out.tolist() == pytest.approx([1.0, 1 / 1.5, 0.5])


def test_step_interpolation_pads_to_the_next_captured_size():
    t = SPSTable([1, 2, 4, 8], [8.0, 4.0, 2.0, 1.0], interpolation="step")
    assert [t.steps_per_s(b) for b in (1, 2, 3, 4, 5, 8)] == [8.0, 4.0, 2.0, 2.0, 1.0, 1.0]
    assert t.step_seconds(12) == pytest.approx(1.0 + 4 * (1.0 - 0.5) / 4)  # beyond: the last segment's slope


def test_the_lookup_and_the_general_path_agree():
    for t in (smooth_table(), staircase_table(), SPSTable([3, 10, 11], [5.0, 2.0, 1.5])):
        b = torch.arange(1, t.max_batch_tokens + 20)
        assert torch.allclose(t.steps_per_s(b), t.steps_per_s(b.double()), rtol=1e-14)
        assert t.steps_per_s(7) == pytest.approx(float(t.steps_per_s(torch.tensor([7]))[0]), rel=1e-14)


def test_single_point_table_is_flat():
    t = SPSTable([16], [10.0])
    assert t.steps_per_s(torch.tensor([1, 16, 100])).tolist() == [10.0, 10.0, 10.0]


# ---- synthetic tables --------------------------------------------------------------------------------------------
def test_smooth_table_saturates():
    t = smooth_table(step_s=0.02, knee=256)
    b = torch.arange(1, 4097)
    sps = t.steps_per_s(b)
    thr = b * sps  # tokens per second
    assert torch.all(sps[1:] <= sps[:-1]) and torch.all(thr[1:] > thr[:-1])
    assert float(thr[-1]) < 256 / 0.02 and float(thr[-1]) > 0.9 * 256 / 0.02
    assert t.step_seconds(256) == pytest.approx(0.04)
    assert t.name == "smooth" and t.interpolation == "linear"


def test_staircase_table_is_flat_inside_a_bucket_and_jumps_after_it():
    t = staircase_table(step_s=0.02, knee=256)
    assert t.batch_tokens == POW2_SIZES and t.interpolation == "step"
    assert t.steps_per_s(33) == t.steps_per_s(64)
    assert t.steps_per_s(65) < t.steps_per_s(64)
    assert 65 * t.steps_per_s(65) < 64 * t.steps_per_s(64)  # the padded tokens: throughput drops after an edge
    sps = t.steps_per_s(torch.arange(1, 4097))
    assert torch.all(sps[1:] <= sps[:-1])


@pytest.mark.parametrize(
    "kwargs, match",
    [({"step_s": 0.0}, "step_s = 0.0 is invalid"), ({"knee": 0}, "knee = 0 is invalid"), ({"knee": 2.5}, "knee")],
)
def test_synthetic_arguments_are_validated(kwargs, match):
    with pytest.raises(ValueError, match=match):
        smooth_table(**kwargs)


# ---- JSON --------------------------------------------------------------------------------------------------------
def test_json_round_trip(tmp_path):
    t = SPSTable(
        [1, 4, 16],
        [100.0, 120.0, 50.0],
        name="measured",
        conditions={"device": "cpu", "threads": 1},
        step_stats=[{"p50": 0.01, "p95": 0.011, "p99": 0.012, "n": 5}, None, None],
    )
    path = save_table(t, tmp_path / "sps.json")
    d = json.loads(path.read_text())
    assert d["format"] == FORMAT and d["version"] == 1 and d["conditions"] == {"device": "cpu", "threads": 1}
    assert [p["steps_per_s"] for p in d["points"]] == [100.0, 100.0, 50.0]
    assert [p["raw_steps_per_s"] for p in d["points"]] == [100.0, 120.0, 50.0]
    back = load_table(path)
    assert back.to_dict() == t.to_dict()
    assert back.steps_per_s(8) == t.steps_per_s(8)


def good_doc() -> dict:
    return smooth_table(sizes=(1, 2, 4)).to_dict()


def broken(edit) -> dict:
    d = good_doc()
    edit(d)
    return d


@pytest.mark.parametrize(
    "doc, key",
    [
        ([1, 2], "must be a JSON object"),
        (broken(lambda d: d.pop("format")), "format = None is invalid"),
        (broken(lambda d: d.update(version=2)), "version = 2 is invalid"),
        (broken(lambda d: d.update(points=[])), "points is missing or empty"),
        (broken(lambda d: d.pop("points")), "points is missing or empty"),
        (broken(lambda d: d["points"][1].pop("batch_tokens")), "points[1].batch_tokens is missing"),
        (broken(lambda d: d["points"][2].pop("steps_per_s")), "points[2].steps_per_s is missing"),
        (broken(lambda d: d["points"][1].update(steps_per_s=-3.0)), "points[1].steps_per_s = -3.0 is invalid"),
        (broken(lambda d: d["points"][1].update(steps_per_s="fast")), "points[1].steps_per_s = 'fast' is invalid"),
        (broken(lambda d: d["points"][0].update(steps_per_s=math.nan)), "points[0].steps_per_s = nan is invalid"),
        (broken(lambda d: d["points"][0].update(raw_steps_per_s=0)), "points[0].raw_steps_per_s = 0 is invalid"),
        (broken(lambda d: d["points"][2].update(batch_tokens=2)), "points[2].batch_tokens = 2 is invalid"),
        (broken(lambda d: d["points"][0].update(batch_tokens=0)), "points[0].batch_tokens = 0 is invalid"),
        (broken(lambda d: d["points"][0].update(batch_tokens=1.5)), "points[0].batch_tokens = 1.5 is invalid"),
        (broken(lambda d: d["points"][0].update(step_s={"p50": -1})), "points[0].step_s must map"),
        (broken(lambda d: d.update(interpolation="cubic")), "interpolation = 'cubic' is invalid"),
        (broken(lambda d: d.update(conditions=[])), "conditions must be an object"),
        (broken(lambda d: d.update(points=[1])), "points[0] must be an object"),
    ],
)
def test_malformed_tables_name_the_key(tmp_path, doc, key):
    path = tmp_path / "bad.json"
    path.write_text(json.dumps(doc))
    with pytest.raises(SPSTableError, match=re.escape(key)) as e:
        load_table(path)
    assert str(path) in str(e.value)


def test_unreadable_files(tmp_path):
    with pytest.raises(SPSTableError, match="no such SPS table"):
        load_table(tmp_path / "missing.json")
    (tmp_path / "x.json").write_text("{not json")
    with pytest.raises(SPSTableError, match="not valid JSON"):
        load_table(tmp_path / "x.json")


# ---- measuring on a fake clock ---------------------------------------------------------------------------------------
class FakeEngine:
    """A deterministic clock and a forward whose "cost" advances it: t(B) = 0.01 + 0.001·B seconds, except that
    B = 16 is a little faster than B = 8 (a measurement dip the table must force away), plus a repeating jitter."""

    def __init__(self):
        self.now = 0.0
        self.calls: list[int] = []
        self.jitter = [0.0, 0.0004, 0.0001, 0.0009, 0.0002]

    def clock(self) -> float:
        return self.now

    def forward(self, b: int) -> None:
        cost = 0.01 + 0.001 * b if b != 16 else 0.015
        self.now += cost + self.jitter[len(self.calls) % len(self.jitter)]
        self.calls.append(b)


def test_measure_sps_on_a_fake_clock():
    eng = FakeEngine()
    sizes = [16, 1, 4, 8]
    t = measure_sps(eng.forward, sizes, reps=5, warmup=2, clock=eng.clock, conditions={"device": "fake"})
    assert t.batch_tokens == (1, 4, 8, 16)
    assert eng.calls[:8] == [1, 1, 4, 4, 8, 8, 16, 16]  # warm-up per size
    assert eng.calls[8:] == [1, 4, 8, 16] * 5  # then the reps interleaved across sizes
    for b, raw, st in zip(t.batch_tokens, t.raw_steps_per_s, t.step_stats, strict=True):
        assert st["n"] == 5 and st["p50"] <= st["p95"] <= st["p99"]
        assert raw == pytest.approx(1 / st["p50"])
        assert st["p50"] >= (0.01 + 0.001 * b if b != 16 else 0.015)
    assert t.raw_steps_per_s[3] > t.raw_steps_per_s[2]  # the dip was measured ...
    assert t.forced_steps_per_s[3] == t.forced_steps_per_s[2]  # ... and forced away
    assert all(x >= y for x, y in zip(t.forced_steps_per_s, t.forced_steps_per_s[1:], strict=False))
    assert t.conditions["device"] == "fake" and t.conditions["reps"] == 5 and t.conditions["warmup"] == 2
    assert "monotone" in t.conditions
    assert SPSTable.from_dict(json.loads(json.dumps(t.to_dict()))).to_dict() == t.to_dict()


@pytest.mark.parametrize(
    "sizes, reps, warmup, match",
    [
        ([], 3, 1, "batch_tokens is empty"),
        ([1, 0], 3, 1, "batch_tokens contains 0"),
        ([1, True], 3, 1, "batch_tokens contains True"),
        ([2, 2], 3, 1, "repeated sizes"),
        ([1], 0, 1, "reps = 0 is invalid"),
        ([1], 2, -1, "warmup = -1 is invalid"),
    ],
)
def test_measure_sps_validates(sizes, reps, warmup, match):
    eng = FakeEngine()
    with pytest.raises(ValueError, match=re.escape(match)):
        measure_sps(eng.forward, sizes, reps, warmup=warmup, clock=eng.clock)


def test_measure_sps_rejects_a_clock_that_does_not_advance():
    with pytest.raises(ValueError, match="must take a positive time"):
        measure_sps(lambda b: None, [1, 2], 2, clock=lambda: 0.0)


def test_constructor_validation():
    with pytest.raises(SPSTableError, match="points is empty"):
        SPSTable([], [])
    with pytest.raises(SPSTableError, match="steps_per_s has 1 values for 2 batch_tokens"):
        SPSTable([1, 2], [1.0])
    with pytest.raises(ValueError, match="batch_tokens must be ≥ 1"):
        smooth_table().steps_per_s(0)

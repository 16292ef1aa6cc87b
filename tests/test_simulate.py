"""Load simulation (lab/serving/simulate.py): the replay, the bookkeeping on hand-checkable cases, and the shape
of the paper's result on synthetic calibrated rows — at low load every policy verifies (almost) everything; as R
grows dspark cuts the verify length and beats fixed; on a CUDA-graph staircase the early stop stalls and the
async global search does not."""

from __future__ import annotations

import pytest
import torch

from dspark_mini import build_model, get_config
from dspark_mini.drafters import DSparkDrafter
from dspark_mini.scheduler import POLICIES, Scheduler
from lab.serving.simulate import (
    SIM_REQUESTS,
    Row,
    check_streams,
    load_streams,
    plan_cost,
    record_streams,
    replay,
    run_policy,
    save_streams,
    simulate,
    synthetic_streams,
)
from lab.serving.sps import SPSTable, smooth_table, staircase_table

K = 5


@pytest.fixture(scope="module")
def streams():
    return synthetic_streams(n_streams=48, rounds=40, k=K, seed=0)


@pytest.fixture(scope="module")
def sim(streams):
    tables = {"smooth": smooth_table(), "staircase": staircase_table()}
    return simulate(streams, tables, POLICIES, SIM_REQUESTS, rounds=16, seed=0)


# ---- rows and replay ---------------------------------------------------------------------------------------------
def test_synthetic_rows_are_calibrated_and_decay_with_position(streams):
    confs, ns, k = check_streams(streams)
    c, n = torch.cat(confs), torch.cat(ns)
    assert k == K and c.shape == (48 * 40, K)
    a = torch.cumprod(c, 1)
    kept = torch.stack([(n > j).double() for j in range(K)], 1)  # drafts 1..j+1 all kept
    assert torch.allclose(a.mean(0), kept.mean(0), atol=0.03)  # calibrated survival
    assert torch.all(kept.mean(0)[1:] < kept.mean(0)[:-1])
    assert 2.5 < float(n.double().mean()) + 1 < 4.5  # τ with the full block, as the paper's drafters


def test_replay_shapes_and_determinism(streams):
    a = replay(streams, 4, 10, seed=3)
    b = replay(streams, 4, 10, seed=3)
    assert len(a) == 10 and a[0][0].shape == (4, K) and a[0][1].shape == (4,)
    assert all(torch.equal(x[0], y[0]) and torch.equal(x[1], y[1]) for x, y in zip(a, b, strict=True))
    c = replay(streams, 4, 10, seed=4)
    assert not all(torch.equal(x[0], y[0]) for x, y in zip(a, c, strict=True))


def test_a_slot_moves_to_a_new_stream_when_its_stream_ends():
    s0 = [Row((0.9, 0.9), 2)] * 2
    s1 = [Row((0.1, 0.1), 0)] * 3
    rounds = replay([s0, s1], 1, 30, seed=0)
    seen = {tuple(c[0].tolist()) for c, _ in rounds}
    assert seen == {(0.9, 0.9), (0.1, 0.1)}


def test_bookkeeping_on_a_hand_checked_case():
    """One stream, every round c = (1, 0.5), n = 1; flat table 10 steps/s. fixed: ℓ = 2, min(n, ℓ) + 1 = 2
    tokens per request-round, B = 3R; plain (ℓ = 0): 1 token, B = R."""
    rows = [[Row((1.0, 0.5), 1)] * 5]
    flat = SPSTable([1], [10.0])
    batches = replay(rows, 3, 6, seed=0)
    full = run_policy(batches, Scheduler("fixed", 2, flat), flat, lag=2)
    assert full == pytest.approx({"throughput": 3 * 2 * 10.0, "mean_verify_len": 2.0, "tau": 2.0, "batch_tokens": 9.0})
    plain = run_policy(batches, Scheduler("fixed", 2, flat, length=0), flat, lag=2)
    assert plain == pytest.approx({"throughput": 30.0, "mean_verify_len": 0.0, "tau": 1.0, "batch_tokens": 3.0})


def test_keys_follow_the_cli_contract(sim):
    assert set(sim) == {"smooth", "staircase"}
    for table in sim.values():
        assert set(table) == set(POLICIES)
        for per_r in table.values():
            assert list(per_r) == [str(r) for r in SIM_REQUESTS] == ["1", "2", "4", "8", "16", "32", "64", "128", "256"]
            for v in per_r.values():
                assert {"throughput", "mean_verify_len", "tau"} <= set(v)
                assert 0 <= v["mean_verify_len"] <= K and 1 <= v["tau"] <= K + 1


def test_every_policy_sees_the_same_rounds(sim):
    """Same replay for all policies: fixed verifies everything, so its τ is the rows' own 1 + n; a policy that
    verifies less can only commit less per request-round."""
    for table in sim.values():
        for r in map(str, SIM_REQUESTS):
            assert all(table[p][r]["tau"] <= table["fixed"][r]["tau"] + 1e-12 for p in POLICIES)


# ---- what the paper shows ---------------------------------------------------------------------------------------
def test_low_load_verifies_almost_everything(sim):
    for table in sim.values():
        for p in POLICIES:
            assert table[p]["1"]["mean_verify_len"] >= 0.85 * K, p


def test_dspark_cuts_the_verify_length_and_beats_fixed_as_load_grows(sim):
    smooth = sim["smooth"]
    lens = [smooth["dspark"][str(r)]["mean_verify_len"] for r in SIM_REQUESTS]
    assert all(b <= a + 0.05 for a, b in zip(lens, lens[1:], strict=False)), lens  # falls with R
    assert lens[-1] < 0.5 * K
    for r in map(str, SIM_REQUESTS):
        assert smooth["dspark"][r]["throughput"] >= 0.98 * smooth["fixed"][r]["throughput"], r
        assert smooth["dspark-async"][r]["throughput"] >= 0.98 * smooth["fixed"][r]["throughput"], r
    assert smooth["dspark"]["256"]["throughput"] > 1.2 * smooth["fixed"]["256"]["throughput"]
    # the static threshold does not follow the load (small R: few rows, noisy means)
    th = [smooth["threshold"][str(r)]["mean_verify_len"] for r in SIM_REQUESTS if r >= 16]
    assert max(th) - min(th) < 0.2 and min(th) > lens[-1] + 1


def test_early_stop_stalls_on_the_staircase_and_the_async_search_does_not(sim):
    stair = sim["staircase"]
    stalled = [r for r in map(str, SIM_REQUESTS) if stair["dspark"][r]["mean_verify_len"] == 0.0]
    assert stalled, "the early stop never stalled on the staircase"
    for r in stalled:  # R anchors fill a bucket exactly: one more token would run the next graph
        assert stair["dspark-async"][r]["mean_verify_len"] >= 1.0
        assert stair["dspark-async"][r]["throughput"] > 1.2 * stair["dspark"][r]["throughput"]
    assert stair["dspark-async"]["256"]["throughput"] > 1.2 * stair["fixed"]["256"]["throughput"]


# ---- validation, files, recording -------------------------------------------------------------------------------
@pytest.mark.parametrize(
    "streams, match",
    [
        ([], "streams is empty"),
        ([[]], r"streams\[0\] is empty"),
        ([[((0.5, 0.5), 1)], [((0.5,), 0)]], r"streams\[1\]\[0\] has 1 confidences: allowed k = 2"),
        ([[((0.5, 0.5), 3)]], r"n_accepted = 3 is invalid: allowed 0\.\.2"),
        ([[((0.5, 1.5), 1)]], r"confidence = \[0.5, 1.5\] is invalid"),
        ([[(0.5, 1)]], r"must be a row"),
    ],
)
def test_bad_rows_are_rejected(streams, match):
    with pytest.raises(ValueError, match=match):
        check_streams(streams)


def test_bad_simulation_arguments(streams):
    tables = {"smooth": smooth_table()}
    with pytest.raises(ValueError, match="requests = 0 is invalid"):
        simulate(streams, tables, requests=(1, 0))
    with pytest.raises(ValueError, match="policy = 'all' is invalid"):
        simulate(streams, tables, policies=("all",))
    with pytest.raises(ValueError, match="tables is empty"):
        simulate(streams, {})
    with pytest.raises(ValueError, match="threshold = 2 is invalid"):
        simulate(streams, tables, requests=(1,), threshold=2)
    with pytest.raises(ValueError, match="lag = 0 is invalid"):
        simulate(streams, tables, requests=(1,), lag=0)


def test_plain_lists_work(streams):
    rows = [[([0.9, 0.5], 2), ([0.8, 0.1], 0)], [([1.0, 1.0], 2)]]
    out = simulate(rows, {"s": smooth_table()}, ("fixed", "dspark"), (1, 2), rounds=4)
    assert out["s"]["fixed"]["2"]["mean_verify_len"] == 2.0


def test_streams_round_trip(tmp_path, streams):
    path = save_streams(tmp_path / "rows.json", streams[:3], {"temperature": 1.0})
    back = load_streams(path)
    assert [[(tuple(r.confidence), r.n_accepted) for r in s] for s in back] == [
        [(tuple(r.confidence), r.n_accepted) for r in s] for s in streams[:3]
    ]
    (tmp_path / "bad.json").write_text('{"format": "other"}')
    with pytest.raises(ValueError, match="format is invalid"):
        load_streams(tmp_path / "bad.json")


def test_record_streams_from_a_model():
    """The recorder on the seeded (untrained) lab model: one stream per prompt, rows of the full block."""
    torch.set_num_threads(1)
    cfg = get_config("lab")
    model = build_model(cfg, seed=0).eval()
    out = record_streams(model, DSparkDrafter(), domains=("sums",), n_prompts=1, max_new_tokens=12)
    confs, ns, k = check_streams(out)
    assert len(out) == 1 and k == cfg.dspark_block_size and confs[0].shape[0] >= 1
    with pytest.raises(ValueError, match="confidence head"):
        record_streams(model, DSparkDrafter("dflash"), domains=("sums",), n_prompts=1, max_new_tokens=12)


def test_plan_cost_on_a_fake_clock():
    ticks = iter(range(1000))
    cost = plan_cost(Scheduler("dspark", 2, smooth_table()), [[0.9, 0.5]] * 4, reps=7, clock=lambda: next(ticks))
    assert cost == {"p50": 1, "p95": 1, "p99": 1, "n": 7}
    with pytest.raises(ValueError, match="reps = 0 is invalid"):
        plan_cost(Scheduler("fixed", 2), [[0.9, 0.5]], reps=0)
